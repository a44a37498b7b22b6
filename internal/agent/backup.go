package agent

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// optionValue quotes a value for an option file.
func optionValue(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v) + `"`
}

// backupCommand prepares mariadb-backup's arguments and a scratch
// directory; the login goes through an option file (0600) so the
// password never appears in a process list.
func (s *Server) backupCommand(ctx context.Context) (args []string, cleanup func(), err error) {
	f := s.serverFacts(ctx)
	if !f.answering {
		return nil, nil, &Error{Status: http.StatusConflict, Code: CodeUnknownState,
			Message: fmt.Sprintf("the server does not answer, nothing to back up: %v", f.err)}
	}
	tmp, err := os.MkdirTemp(s.cfg.TmpDir, "vigil-backup-")
	if err != nil {
		return nil, nil, fmt.Errorf("backup scratch dir: %w", err)
	}
	cleanup = func() { _ = os.RemoveAll(tmp) }
	var cnf strings.Builder
	cnf.WriteString("[mariadb-backup]\n")
	fmt.Fprintf(&cnf, "user=%s\n", optionValue(s.cfg.Server.User))
	if s.cfg.Server.Password != "" {
		fmt.Fprintf(&cnf, "password=%s\n", optionValue(s.cfg.Server.Password))
	}
	if s.cfg.Server.Socket != "" {
		fmt.Fprintf(&cnf, "socket=%s\n", optionValue(s.cfg.Server.Socket))
	} else {
		fmt.Fprintf(&cnf, "host=%s\nport=%d\n", optionValue(s.cfg.Server.Host), s.cfg.Server.Port)
	}
	cnfPath := filepath.Join(tmp, "login.cnf")
	if err := os.WriteFile(cnfPath, []byte(cnf.String()), 0o600); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("backup login file: %w", err)
	}
	args = []string{"--defaults-file=" + cnfPath, "--backup", "--stream=xbstream", "--target-dir=" + filepath.Join(tmp, "target")}
	if f.replica {
		args = append(args, "--slave-info")
	}
	if f.galera {
		args = append(args, "--galera-info")
	}
	return args, cleanup, nil
}

// runBackup streams mariadb-backup's stdout to w and says how it ended.
func (s *Server) runBackup(ctx context.Context, args []string, w io.Writer) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stderr := &tailBuffer{max: 8192}
	cmd := exec.CommandContext(ctx, s.cfg.Binaries.MariadbBackup, args...)
	cmd.Stderr = stderr
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("mariadb-backup: %w", err)
	}
	growPipe(out)
	n, copyErr := copyBlocks(w, out, make([]byte, streamBlock))
	if copyErr != nil {
		cancel() // the requester went away: stop reading the donor
	}
	waitErr := cmd.Wait()
	switch {
	case copyErr != nil:
		return n, fmt.Errorf("backup stream to the requester: %w", copyErr)
	case waitErr != nil:
		return n, fmt.Errorf("mariadb-backup: %w: %s", waitErr, stderr.lastLines(5))
	}
	return n, nil
}
