package agent

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// facts are what the local server says about itself.
type facts struct {
	running, answering bool
	readOnly, replica  bool
	galera             bool
	version            string
	pid                int
	err                error
}

func (s *Server) dsn() string {
	mc := mysql.NewConfig()
	mc.User, mc.Passwd = s.cfg.Server.User, s.cfg.Server.Password
	if s.cfg.Server.Socket != "" {
		mc.Net, mc.Addr = "unix", s.cfg.Server.Socket
	} else {
		mc.Net, mc.Addr = "tcp", fmt.Sprintf("%s:%d", s.cfg.Server.Host, s.cfg.Server.Port)
	}
	mc.Timeout, mc.ReadTimeout, mc.WriteTimeout = 3*time.Second, 10*time.Second, 10*time.Second
	return mc.FormatDSN()
}

// pidAlive is the pid of the pid file when that process lives.
func (s *Server) pidAlive() int {
	if s.cfg.PIDFile == "" {
		return 0
	}
	data, err := os.ReadFile(s.cfg.PIDFile)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return 0
	}
	return pid
}

// serverFacts logs in to the local server. A server that answers with an
// error (a refused login) runs even though the agent learns nothing more.
func (s *Server) serverFacts(ctx context.Context) facts {
	f := facts{pid: s.pidAlive()}
	f.running = f.pid != 0
	db, err := sql.Open("mysql", s.dsn())
	if err != nil {
		f.err = err
		return f
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) {
			f.running = true
		}
		f.err = fmt.Errorf("log in to the server: %w", err)
		return f
	}
	defer conn.Close()
	f.running, f.answering = true, true
	var ro, wsrep sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT VERSION(), @@read_only, @@wsrep_on").Scan(&f.version, &ro, &wsrep); err != nil {
		// @@wsrep_on exists on every MariaDB; without it this is not one.
		if err := conn.QueryRowContext(ctx, "SELECT VERSION(), @@read_only").Scan(&f.version, &ro); err != nil {
			f.answering = false
			f.err = fmt.Errorf("query the server: %w", err)
			return f
		}
	}
	f.readOnly = ro.String == "1" || strings.EqualFold(ro.String, "ON")
	f.galera = wsrep.String == "1" || strings.EqualFold(wsrep.String, "ON")
	rows, err := conn.QueryContext(ctx, "SHOW ALL SLAVES STATUS")
	if err == nil {
		f.replica = rows.Next()
		_ = rows.Close()
	}
	return f
}

func (s *Server) status(ctx context.Context) Status {
	f := s.serverFacts(ctx)
	st := Status{
		Running: f.running, Answering: f.answering, PID: f.pid, Version: f.version,
		ReadOnly: f.readOnly, Replica: f.replica, Galera: f.galera,
		Datadir: s.cfg.Datadir, Busy: s.busyOp(), PeerPull: s.peerPull, Restore: s.restoreProgress(),
	}
	if f.err != nil && f.running {
		st.Error = f.err.Error()
	}
	if st.Version == "" {
		st.Version = s.binaryVersion(ctx)
	}
	sz := datadirSizes(s.cfg.Datadir)
	st.DatadirBytes, st.CopyBytes, st.StreamBytes = sz.all, sz.copy, sz.stream
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(s.cfg.Datadir), &sfs); err == nil {
		st.FreeBytes = int64(sfs.Bavail) * int64(sfs.Bsize)
		st.TotalBytes = int64(sfs.Blocks) * int64(sfs.Bsize)
	}
	st.MariadbBackup, _ = exec.LookPath(s.cfg.Binaries.MariadbBackup)
	st.Mbstream, _ = exec.LookPath(s.cfg.Binaries.Mbstream)
	_, err := os.Stat(s.cfg.salvageHoldPath())
	st.SalvageHold = err == nil
	st.OldDatadirs, _ = filepath.Glob(s.cfg.Datadir + suffixOld + "*")
	for _, pat := range []string{suffixNew + "*", suffixFailed + "*"} {
		dirs, _ := filepath.Glob(s.cfg.Datadir + pat)
		st.Leftovers = append(st.Leftovers, dirs...)
	}
	return st
}

// binaryVersion is `mariadbd --version` when the server does not answer.
func (s *Server) binaryVersion(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, s.cfg.Binaries.Mariadbd, "--version").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// datadirSize is a datadir's size, the room a restored copy of it needs and
// about what a backup of it streams (Status.CopyBytes, StreamBytes).
type datadirSize struct{ all, copy, stream int64 }

// datadirSizes walks dir. Only files directly in it can be binary or
// relay logs (name.NNNNNN and their .index), the redo log (ib_logfile*)
// or the temporary tablespace (ibtmp*); tables live in the schemas'
// directories.
func datadirSizes(dir string) datadirSize {
	var sz datadirSize
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		n := info.Size()
		sz.all += n
		kind := ""
		if filepath.Dir(path) == filepath.Clean(dir) {
			kind = topLevelKind(d.Name())
		}
		switch kind {
		case "log", "tmp":
		case "redo":
			sz.copy += n
		default:
			sz.copy += n
			sz.stream += n
		}
		return nil
	})
	return sz
}

// topLevelKind sorts a file directly in the datadir: "log" for binary and
// relay logs and their indexes, "redo" for the InnoDB redo log, "tmp" for
// the temporary tablespace, "" for the rest.
func topLevelKind(name string) string {
	switch {
	case strings.HasPrefix(name, "ib_logfile"):
		return "redo"
	case strings.HasPrefix(name, "ibtmp"):
		return "tmp"
	case strings.HasSuffix(name, ".index"):
		return "log"
	case strings.HasPrefix(name, "aria_log."):
		return "" // Aria's log, numbered too, is backed up
	}
	base, num, ok := cutLast(name, '.')
	if !ok || base == "" || len(num) < 6 || strings.Trim(num, "0123456789") != "" {
		return ""
	}
	return "log"
}

func cutLast(s string, sep byte) (before, after string, ok bool) {
	if i := strings.LastIndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// tailBuffer keeps the last max bytes written to it: a program's stderr
// for the error message, bounded whatever it prints.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

// lastLines are the last n lines of the buffer.
func (t *tailBuffer) lastLines(n int) string {
	lines := strings.Split(strings.TrimSpace(string(t.b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// runCommand runs a configured command with the configured timeout.
func (s *Server) runCommand(ctx context.Context, argv []string) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Commands.Timeout)
	defer cancel()
	out := &tailBuffer{max: 4096}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, out.lastLines(5))
	}
	return nil
}

// stopServer runs the stop command and waits until the server is gone.
func (s *Server) stopServer(ctx context.Context) error {
	if err := s.runCommand(ctx, s.cfg.Commands.Stop); err != nil {
		return fmt.Errorf("stop the server: %w", err)
	}
	deadline := time.Now().Add(s.cfg.Commands.Timeout)
	for {
		f := s.serverFacts(ctx)
		if !f.running {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("stop the server: it still runs (pid %d) %s after the stop command", f.pid, s.cfg.Commands.Timeout)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// startServer runs the start command and waits until the server answers.
func (s *Server) startServer(ctx context.Context) error {
	if err := s.runCommand(ctx, s.cfg.Commands.Start); err != nil {
		return fmt.Errorf("start the server: %w", err)
	}
	deadline := time.Now().Add(s.cfg.Commands.Timeout)
	for {
		f := s.serverFacts(ctx)
		if f.answering {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("start the server: it does not answer %s after the start command: %v", s.cfg.Commands.Timeout, f.err)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}
