package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/vigil-db/vigil/internal/sandbox"
)

// The bench runs as its own program, vigil-bench, so that the daemon
// links none of its plotting code; the Vigil it measures is another
// program, found here.

// vigilBinary is the vigil program the bench starts as `vigil run`: bin
// when given, else the vigil beside this program (make build writes both
// into bin/), else vigil on PATH.
func vigilBinary(bin string) (string, error) {
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("find the vigil binary: %w (pass --vigil-binary PATH)", err)
		}
		bin = filepath.Join(filepath.Dir(exe), "vigil")
		if _, err := os.Stat(bin); errors.Is(err, os.ErrNotExist) {
			if bin, err = exec.LookPath("vigil"); err != nil {
				return "", fmt.Errorf("no vigil binary beside %s nor on PATH: run make build, or pass --vigil-binary PATH", exe)
			}
		}
	}
	return sandbox.ResolveVigilBinary(bin)
}

// vigilVersion is what the vigil binary says of itself ("v1.2 (commit
// abc123)"): the report names the Vigil measured, which need not be the
// build of the bench.
func vigilVersion(ctx context.Context, bin string) string {
	return strings.TrimPrefix(commandVersion(ctx, bin, "version"), "vigil ")
}
