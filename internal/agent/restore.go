package agent

import (
	"bytes"
	"context"
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
)

func stamp() string { return time.Now().UTC().Format(stampLayout) }

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
	newDir := datadir + suffixNew + ts
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
		return res, s.noSpace(newDir, err)
	}
	s.setPhase(RestorePreparing)
	t0 = time.Now()
	if err := s.prepare(ctx, newDir); err != nil {
		return res, s.noSpace(newDir, err)
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
	s.setPhase(RestoreSwapping)
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
	if err := ctx.Err(); err != nil {
		// Cancelled (the requester left, the agent is stopping) while the
		// server stopped: nothing has moved yet.
		if wasRunning {
			_ = s.startServer(context.WithoutCancel(ctx))
		}
		return res, fmt.Errorf("restore cancelled before the swap: %w", err)
	}
	oldDir := datadir + suffixOld + ts
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

// noSpace turns a failed extract or prepare into a no_space error
// naming the file system when that is why it failed: the tool said so
// (ENOSPC), or less than 1 MiB is left. It looks before the partial copy
// is removed, while the disk is still full.
func (s *Server) noSpace(dir string, err error) error {
	var sfs syscall.Statfs_t
	if serr := syscall.Statfs(dir, &sfs); serr != nil {
		return err
	}
	free, total := int64(sfs.Bavail)*int64(sfs.Bsize), int64(sfs.Blocks)*int64(sfs.Bsize)
	msg := err.Error()
	if free >= 1<<20 && !errors.Is(err, syscall.ENOSPC) && !strings.Contains(msg, "No space left on device") && !strings.Contains(msg, "errno: 28") {
		return err
	}
	return &Error{Status: http.StatusInsufficientStorage, Code: CodeNoSpace,
		Message: fmt.Sprintf("the file system of %s ran out of space during the restore (%d bytes free of %d): nothing was swapped, the partial copy is removed and the datadir is as it was; free space beside the datadir (the old one is kept, so the new one needs room beside it) and retry: %v",
			filepath.Dir(dir), free, total, err)}
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
	failed := datadir + suffixFailed + ts
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
	growPipe(in)
	src := &readErrReader{r: body}
	n, copyErr := copyBlocks(in, src, make([]byte, streamBlock))
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
	for _, pat := range []string{suffixOld + "*", suffixNew + "*", suffixFailed + "*"} {
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
