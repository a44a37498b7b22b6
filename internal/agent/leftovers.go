package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The directories a restore makes beside the datadir: DATADIR + one of
// these + stamp().
const (
	suffixNew    = ".vigil-new-"    // being extracted and prepared; never the live datadir
	suffixOld    = ".vigil-old-"    // the datadir a restore replaced; kept until a cleanup
	suffixFailed = ".vigil-failed-" // a restored datadir that did not start; kept for a look
	stampLayout  = "20060102T150405.000Z"
)

// restoreDir reports whether path is DATADIR+suffix+stamp for this
// agent's datadir: a directory a restore of this agent named, and
// nothing else (not another datadir's, not one named by hand).
func (s *Server) restoreDir(path, suffix string) bool {
	rest, ok := strings.CutPrefix(path, filepath.Clean(s.cfg.Datadir)+suffix)
	if !ok {
		return false
	}
	_, err := time.Parse(stampLayout, rest)
	return err == nil
}

// removeInterrupted deletes the DATADIR.vigil-new-* directories of
// restores this agent did not finish (it was killed, or the host went
// down, during extract or prepare): at start no restore of this agent
// runs, and such a directory was never swapped in. It runs once the
// listener is bound, so a second agent started on the same file by
// mistake (its listen fails) never deletes the running one's work. It
// keeps everything when the datadir itself is missing (killed between
// the two renames of a swap: the new directory holds the prepared copy,
// the old datadir is at .vigil-old-*; an operator decides), and never
// touches .vigil-old-* or .vigil-failed-*.
func (s *Server) removeInterrupted() (removed []string, err error) {
	datadir := filepath.Clean(s.cfg.Datadir)
	if _, err := os.Stat(datadir); err != nil {
		return nil, fmt.Errorf("datadir %s: %w; leaving %s* as they are", datadir, err, datadir+".vigil-")
	}
	dirs, err := filepath.Glob(datadir + suffixNew + "*")
	if err != nil {
		return nil, err
	}
	for _, d := range dirs {
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() || !s.restoreDir(d, suffixNew) {
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			return removed, fmt.Errorf("remove %s: %w", d, err)
		}
		removed = append(removed, d)
	}
	return removed, nil
}
