package agent

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// copyBufSize is the one buffer a stream goes through: memory per stream
// is fixed whatever the peer sends.
const copyBufSize = 256 << 10

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
		Datadir: s.cfg.Datadir, Busy: s.busyOp(),
	}
	if f.err != nil && f.running {
		st.Error = f.err.Error()
	}
	if st.Version == "" {
		st.Version = s.binaryVersion(ctx)
	}
	st.DatadirBytes = dirSize(s.cfg.Datadir)
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(s.cfg.Datadir), &sfs); err == nil {
		st.FreeBytes = int64(sfs.Bavail) * int64(sfs.Bsize)
		st.TotalBytes = int64(sfs.Blocks) * int64(sfs.Bsize)
	}
	st.MariadbBackup, _ = exec.LookPath(s.cfg.Binaries.MariadbBackup)
	st.Mbstream, _ = exec.LookPath(s.cfg.Binaries.Mbstream)
	_, err := os.Stat(s.cfg.salvageHoldPath())
	st.SalvageHold = err == nil
	st.OldDatadirs, _ = filepath.Glob(s.cfg.Datadir + ".vigil-old-*")
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

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
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
	n, copyErr := io.CopyBuffer(w, out, make([]byte, copyBufSize))
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

func stamp() string { return time.Now().UTC().Format("20060102T150405.000Z") }

// restore extracts and prepares the stream beside the datadir and swaps
// it in only when everything before the swap succeeded.
func (s *Server) restore(ctx context.Context, body io.Reader, expected int64) (res RestoreResult, err error) {
	datadir := filepath.Clean(s.cfg.Datadir)
	res.Datadir = datadir
	var wasRunning bool
	if err := s.refuseUnsafe(ctx, &wasRunning); err != nil {
		return res, err
	}
	st, err := os.Stat(datadir)
	if err != nil {
		return res, fmt.Errorf("datadir: %w", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return res, errors.New("datadir: no owner information")
	}
	if expected > 0 {
		var sfs syscall.Statfs_t
		if err := syscall.Statfs(filepath.Dir(datadir), &sfs); err != nil {
			return res, fmt.Errorf("free space: %w", err)
		}
		free := int64(sfs.Bavail) * int64(sfs.Bsize)
		if need := expected + expected/10; free < need {
			return res, &Error{Status: http.StatusInsufficientStorage, Code: CodeNoSpace,
				Message: fmt.Sprintf("%d bytes free beside %s, the restore needs about %d (expected size + 10%%); the old datadir is kept, so the space must be there", free, datadir, need)}
		}
	}
	ts := stamp()
	newDir := datadir + ".vigil-new-" + ts
	if err := os.Mkdir(newDir, 0o700); err != nil {
		return res, fmt.Errorf("restore dir: %w", err)
	}
	swapped := false
	defer func() {
		if !swapped {
			_ = os.RemoveAll(newDir)
		}
	}()

	t0 := time.Now()
	n, err := s.extract(ctx, body, newDir)
	res.BytesReceived = n
	res.ExtractSeconds = time.Since(t0).Seconds()
	if err != nil {
		return res, err
	}
	t0 = time.Now()
	if err := s.prepare(ctx, newDir); err != nil {
		return res, err
	}
	res.PrepareSeconds = time.Since(t0).Seconds()
	if err := readBinlogInfo(newDir, &res); err != nil {
		return res, err
	}
	if err := chownTree(newDir, int(sys.Uid), int(sys.Gid)); err != nil {
		return res, err
	}
	if err := os.Chmod(newDir, st.Mode().Perm()); err != nil {
		return res, fmt.Errorf("restore dir mode: %w", err)
	}

	// Extracting and preparing take minutes on real data: look again
	// before stopping anything (a failover may have promoted this server,
	// or a salvage begun, meanwhile).
	if err := s.refuseUnsafe(ctx, &wasRunning); err != nil {
		return res, err
	}
	t0 = time.Now()
	if wasRunning {
		if err := s.stopServer(ctx); err != nil {
			// Leave the server as it was found.
			if f := s.serverFacts(ctx); !f.running {
				_ = s.startServer(context.WithoutCancel(ctx))
			}
			return res, err
		}
	}
	oldDir := datadir + ".vigil-old-" + ts
	if err := os.Rename(datadir, oldDir); err != nil {
		if wasRunning {
			_ = s.startServer(context.WithoutCancel(ctx))
		}
		return res, fmt.Errorf("set the old datadir aside: %w", err)
	}
	if err := os.Rename(newDir, datadir); err != nil {
		if rerr := os.Rename(oldDir, datadir); rerr != nil {
			return res, fmt.Errorf("swap in the new datadir: %w; and putting the old one back failed too: %v (it is at %s)", err, rerr, oldDir)
		}
		if wasRunning {
			_ = s.startServer(context.WithoutCancel(ctx))
		}
		return res, fmt.Errorf("swap in the new datadir: %w", err)
	}
	swapped = true
	res.OldDatadir = oldDir
	// The new datadir is in place; a cancelled request must not leave the
	// server down.
	if err := s.startServer(context.WithoutCancel(ctx)); err != nil {
		return res, s.rollback(datadir, oldDir, ts, err)
	}
	res.SwapSeconds = time.Since(t0).Seconds()
	return res, nil
}

// refuseUnsafe refuses a restore under a salvage hold, onto a server
// that answers as writable, or onto one that runs without letting the
// agent log in to prove otherwise; it says whether the server runs.
func (s *Server) refuseUnsafe(ctx context.Context, running *bool) error {
	if _, err := os.Stat(s.cfg.salvageHoldPath()); err == nil {
		return &Error{Status: http.StatusConflict, Code: CodeSalvageHold,
			Message: fmt.Sprintf("salvage hold %s exists: Vigil has not finished saving this server's transactions; restore refused", s.cfg.salvageHoldPath())}
	}
	f := s.serverFacts(ctx)
	switch {
	case f.answering && !f.readOnly:
		return &Error{Status: http.StatusConflict, Code: CodeWritable,
			Message: "the server answers with read_only=OFF: refusing to replace the datadir of a writable server (fence it or stop it first)"}
	case f.running && !f.answering:
		return &Error{Status: http.StatusConflict, Code: CodeUnknownState,
			Message: fmt.Sprintf("the server runs but the agent cannot log in to prove it is read-only (%v); stop it first", f.err)}
	}
	*running = f.running
	return nil
}

// rollback puts the old datadir back after the restored one did not
// start, keeping the restored one aside for a look.
func (s *Server) rollback(datadir, oldDir, ts string, startErr error) error {
	ctx := context.Background()
	failed := datadir + ".vigil-failed-" + ts
	if f := s.serverFacts(ctx); f.running {
		if err := s.stopServer(ctx); err != nil {
			return fmt.Errorf("the restored datadir did not start (%v), and stopping it to put the old one back failed: %v; the old datadir is at %s", startErr, err, oldDir)
		}
	}
	if err := os.Rename(datadir, failed); err != nil {
		return fmt.Errorf("the restored datadir did not start (%v); the old datadir is at %s: %v", startErr, oldDir, err)
	}
	if err := os.Rename(oldDir, datadir); err != nil {
		return fmt.Errorf("the restored datadir did not start (%v); putting the old one back failed: %v; it is at %s", startErr, err, oldDir)
	}
	if err := s.startServer(ctx); err != nil {
		return fmt.Errorf("the restored datadir did not start (%v); the old one is back in place (restored one at %s) but did not start either: %v", startErr, failed, err)
	}
	return fmt.Errorf("the restored datadir did not start (%v); the old one is back in place and running, the restored one is at %s", startErr, failed)
}

// extract pipes body into `mbstream -x -C dir`.
func (s *Server) extract(ctx context.Context, body io.Reader, dir string) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stderr := &tailBuffer{max: 8192}
	cmd := exec.CommandContext(ctx, s.cfg.Binaries.Mbstream, "-x", "-C", dir)
	cmd.Stderr, cmd.Stdout = stderr, stderr
	cmd.WaitDelay = 5 * time.Second
	in, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("mbstream: %w", err)
	}
	src := &readErrReader{r: body}
	n, copyErr := io.CopyBuffer(in, src, make([]byte, copyBufSize))
	_ = in.Close()
	if src.err != nil {
		// The requester's stream broke: whatever mbstream made of it is
		// thrown away.
		cancel()
	}
	waitErr := cmd.Wait()
	switch {
	case src.err != nil:
		return n, fmt.Errorf("receive the stream (after %d bytes): %w", n, src.err)
	case waitErr != nil:
		return n, fmt.Errorf("mbstream -x: %w: %s", waitErr, stderr.lastLines(5))
	case copyErr != nil:
		return n, fmt.Errorf("feed mbstream: %w", copyErr)
	case n == 0:
		return n, errors.New("receive the stream: it was empty")
	}
	return n, nil
}

// readErrReader remembers a read error, to tell a broken stream from
// mbstream refusing what it got.
type readErrReader struct {
	r   io.Reader
	err error
}

func (r *readErrReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}

// prepare runs mariadb-backup --prepare and checks that it says so.
func (s *Server) prepare(ctx context.Context, dir string) error {
	stderr := &tailBuffer{max: 8192}
	cmd := exec.CommandContext(ctx, s.cfg.Binaries.MariadbBackup, "--no-defaults", "--prepare", "--target-dir="+dir)
	cmd.Stderr, cmd.Stdout = stderr, stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("mariadb-backup --prepare: %w: %s", err, stderr.lastLines(5))
	}
	// A stream cut at a file boundary extracts cleanly; a complete backup
	// has its checkpoints file, which prepare marks as prepared
	// ("log-applied" since MariaDB 10.5, "full-prepared" before).
	data, err := os.ReadFile(filepath.Join(dir, "xtrabackup_checkpoints"))
	if err != nil {
		return fmt.Errorf("the backup is incomplete (no xtrabackup_checkpoints): %w", err)
	}
	if !bytes.Contains(data, []byte("backup_type = log-applied")) && !bytes.Contains(data, []byte("backup_type = full-prepared")) {
		return fmt.Errorf("the backup is not prepared: xtrabackup_checkpoints says %q", oneLine(string(data)))
	}
	return nil
}

// readBinlogInfo reads the donor's position from the backup.
func readBinlogInfo(dir string, res *RestoreResult) error {
	var data []byte
	var err error
	for _, name := range []string{"mariadb_backup_binlog_info", "xtrabackup_binlog_info"} {
		if data, err = os.ReadFile(filepath.Join(dir, name)); err == nil {
			break
		}
	}
	if err == nil {
		parseBinlogInfo(string(data), res)
	}
	for _, name := range []string{"mariadb_backup_slave_info", "xtrabackup_slave_info"} {
		if si, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
			res.SlaveInfo = strings.TrimSpace(string(si))
			break
		}
	}
	if res.GTID == "" && res.SlaveInfo != "" {
		res.GTID = gtidFromSlaveInfo(res.SlaveInfo)
	}
	return nil
}

// parseBinlogInfo reads "FILE\tPOS\tGTID" (GTID may be absent or empty).
func parseBinlogInfo(s string, res *RestoreResult) {
	fields := strings.Split(strings.TrimSpace(s), "\t")
	if len(fields) >= 1 {
		res.BinlogFile = strings.TrimSpace(fields[0])
	}
	if len(fields) >= 2 {
		res.BinlogPos, _ = strconv.ParseInt(strings.TrimSpace(fields[1]), 10, 64)
	}
	if len(fields) >= 3 {
		res.GTID = strings.TrimSpace(fields[2])
	}
}

// gtidFromSlaveInfo finds gtid_slave_pos = '...' in a slave_info file.
func gtidFromSlaveInfo(s string) string {
	_, rest, ok := strings.Cut(s, "gtid_slave_pos")
	if !ok {
		return ""
	}
	_, rest, ok = strings.Cut(rest, "'")
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, "'")
	return v
}

func chownTree(dir string, uid, gid int) error {
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		return fmt.Errorf("give the restored files to uid %d gid %d: %w", uid, gid, err)
	}
	return nil
}

// cleanup deletes the datadirs restores set aside, and new ones a crashed
// restore left behind. It runs under the mutation lock, so no restore is
// writing to one.
func (s *Server) cleanup() ([]string, error) {
	var removed []string
	for _, pat := range []string{".vigil-old-*", ".vigil-new-*", ".vigil-failed-*"} {
		dirs, err := filepath.Glob(filepath.Clean(s.cfg.Datadir) + pat)
		if err != nil {
			return removed, err
		}
		for _, d := range dirs {
			if err := os.RemoveAll(d); err != nil {
				return removed, fmt.Errorf("remove %s: %w", d, err)
			}
			removed = append(removed, d)
		}
	}
	return removed, nil
}
