package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// InitCommand is `vigil config init`: a starter config, every key
// explained, on stdout or in --out FILE (never over an existing file
// without --force).
func InitCommand(args []string, stdout, stderr io.Writer) int {
	const usage = "usage: vigil config init [--type replication|galera] [--listen HOST:PORT] [--admin HOST:PORT]\n" +
		"                         [--servers NAME=HOST:PORT,...] [--out FILE [--force]]"
	var o StarterOptions
	flags := flag.NewFlagSet("config init", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() { fmt.Fprintln(stderr, usage); flags.PrintDefaults() }
	flags.StringVar(&o.Type, "type", "replication", "cluster type: replication or galera")
	flags.StringVar(&o.Listen, "listen", "127.0.0.1:6033", "address applications connect to")
	flags.StringVar(&o.Admin, "admin", "127.0.0.1:6080", "address of the admin API")
	flags.StringVar(&o.Servers, "servers", DefaultStarterServers, "the cluster's servers, name=host:port,... (the first is the primary)")
	out := flags.String("out", "", "write to this file instead of standard output")
	force := flags.Bool("force", false, "with --out: overwrite an existing file")
	if err := flags.Parse(args); err != nil || flags.NArg() != 0 {
		if err == nil {
			fmt.Fprintln(stderr, usage)
		}
		return 2
	}
	c, err := Starter(o)
	if err == nil {
		var data []byte
		if data, err = RenderStarter(c); err == nil {
			err = writeOut(data, *out, *force, stdout)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "vigil config init: %v\n", err)
		return 1
	}
	if *out != "" {
		fmt.Fprintf(stdout, "wrote %s; check it with: vigil config validate %s\n", *out, *out)
	}
	return 0
}

// writeOut writes data to path, or to stdout when path is empty. The
// file is private (it holds passwords) and created only if absent unless
// force.
func writeOut(data []byte, path string, force bool, stdout io.Writer) error {
	if path == "" {
		_, err := stdout.Write(data)
		return err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists; pass --force to overwrite it", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ShowCommand is `vigil config show [--effective [--show-secrets]] FILE`:
// the file as Minimal writes it, or with --effective every key with its
// resolved value (passwords masked unless --show-secrets).
func ShowCommand(args []string, stdout, stderr io.Writer) int {
	const usage = "usage: vigil config show [--effective [--show-secrets]] FILE"
	flags := flag.NewFlagSet("config show", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() { fmt.Fprintln(stderr, usage); flags.PrintDefaults() }
	effective := flags.Bool("effective", false, "every key with its resolved value, defaults included")
	secrets := flags.Bool("show-secrets", false, "with --effective: print passwords and the admin token instead of "+Secret)
	if err := flags.Parse(args); err != nil || flags.NArg() != 1 {
		if err == nil {
			fmt.Fprintln(stderr, usage)
		}
		return 2
	}
	c, err := Load(flags.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	var data []byte
	if *effective {
		head := "# Every setting of " + flags.Arg(0) + " with its resolved value.\n"
		if !*secrets {
			head += "# Passwords and the admin token are shown as " + Secret + " (--show-secrets prints them).\n"
		}
		if data, err = Effective(c, !*secrets); err == nil {
			data = append([]byte(head+"\n"), data...)
		}
	} else {
		data, err = Minimal(c)
	}
	if err == nil {
		_, err = stdout.Write(data)
	}
	if err != nil {
		fmt.Fprintf(stderr, "vigil config show: %v\n", err)
		return 1
	}
	return 0
}
