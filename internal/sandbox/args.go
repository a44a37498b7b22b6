package sandbox

import "flag"

// ParseInterleaved parses the flags of fs wherever they stand among the
// positional arguments ("kill node1 --dir D" and "kill --dir D node1" are
// the same) and returns the positional arguments in order. Everything
// after "--" is positional.
func ParseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var tail []string
	for i, a := range args {
		if a == "--" {
			args, tail = args[:i], args[i+1:]
			break
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return append(pos, tail...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
