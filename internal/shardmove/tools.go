package shardmove

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// Client runs mariadb-dump piped into mariadb: the real Tools.
type Client struct {
	// Dump and Load are the programs; empty means mariadb-dump and
	// mariadb on PATH.
	Dump, Load string
	// TempDir holds the option files with the credentials (0600, removed
	// after the copy); empty means os.TempDir().
	TempDir string
}

var _ Tools = Client{}

// DumpArgs are the options of the dump, after --defaults-file.
//
// The snapshot's GTID: --single-transaction with --master-data=2 --gtid.
// MariaDB's mariadb-dump then reads binlog_snapshot_file/_pos, which the
// server gives consistent with the dump's START TRANSACTION WITH
// CONSISTENT SNAPSHOT (no FLUSH TABLES WITH READ LOCK), and turns them into
// a GTID position with BINLOG_GTID_POS(); it writes that position as the
// comment `-- SET GLOBAL gtid_slave_pos='…';` near the END of the dump
// ("deferred gtid setting", checked on 10.11.19). That is exactly the
// point of the snapshot in the dumped server's binary log. --dump-slave
// would record the replica's gtid_slave_pos instead, but it stops the
// replica's SQL thread for the whole dump; --master-data leaves the replica
// alone and needs only its binary log with log_slave_updates (which
// carries the source primary's GTIDs: same domain, same numbers). =2 keeps
// the statements commented, so loading never runs them on the target.
func DumpArgs(schema string) []string {
	return []string{"--single-transaction", "--gtid", "--master-data=2", "--routines", "--triggers", "--events",
		"--hex-blob", "--databases", schema}
}

// LoadArgs are the options of the load, after --defaults-file: binary
// mode because a dump may carry \0 and \r in strings.
func LoadArgs() []string { return []string{"--batch", "--binary-mode"} }

// DumpLoad runs `mariadb-dump … | mariadb` with the credentials of each
// side in an option file of its own (never on a command line, where ps
// shows them), and reads the snapshot's GTID from the stream as it goes
// by.
func (c Client) DumpLoad(ctx context.Context, from, to Server, schema string) (string, error) {
	dumpBin, loadBin := c.Dump, c.Load
	if dumpBin == "" {
		dumpBin = "mariadb-dump"
	}
	if loadBin == "" {
		loadBin = "mariadb"
	}
	fromCnf, err := c.optionFile(from)
	if err != nil {
		return "", err
	}
	defer os.Remove(fromCnf)
	toCnf, err := c.optionFile(to)
	if err != nil {
		return "", err
	}
	defer os.Remove(toCnf)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dump := exec.CommandContext(ctx, dumpBin, append([]string{"--defaults-file=" + fromCnf}, DumpArgs(schema)...)...)
	load := exec.CommandContext(ctx, loadBin, append([]string{"--defaults-file=" + toCnf}, LoadArgs()...)...)
	var dumpErr, loadErr tailBuffer
	dump.Stderr, load.Stderr = &dumpErr, &loadErr
	out, err := dump.StdoutPipe()
	if err != nil {
		return "", err
	}
	var gtid gtidScanner
	load.Stdin = io.TeeReader(out, &gtid)
	if err := dump.Start(); err != nil {
		return "", fmt.Errorf("start %s: %w", dumpBin, err)
	}
	if err := load.Start(); err != nil {
		cancel()
		_ = dump.Wait()
		return "", fmt.Errorf("start %s: %w", loadBin, err)
	}
	// The load reads the pipe to its end; only then may the dump be
	// waited for (Wait closes the pipe).
	lerr := load.Wait()
	if lerr != nil {
		cancel() // the dump would block on a pipe nobody reads
	}
	derr := dump.Wait()
	switch {
	case derr != nil && lerr != nil:
		return "", fmt.Errorf("%s: %w: %s; %s: %v: %s", dumpBin, derr, dumpErr.String(), loadBin, lerr, loadErr.String())
	case derr != nil:
		return "", fmt.Errorf("%s from %s: %w: %s", dumpBin, from.Addr(), derr, dumpErr.String())
	case lerr != nil:
		return "", fmt.Errorf("%s into %s: %w: %s", loadBin, to.Addr(), lerr, loadErr.String())
	}
	pos := gtid.position()
	if pos == "" {
		return "", fmt.Errorf("%s wrote no gtid_slave_pos (binary log off on %s?)", dumpBin, from.Addr())
	}
	return pos, nil
}

// optionFile writes a [client] option file for s, readable by its owner
// only (os.CreateTemp makes it 0600).
func (c Client) optionFile(s Server) (string, error) {
	f, err := os.CreateTemp(c.TempDir, "vigil-move-*.cnf")
	if err != nil {
		return "", err
	}
	_, werr := fmt.Fprintf(f, "[client]\nhost=%s\nport=%d\nuser=%s\npassword=%s\nprotocol=tcp\n",
		optionValue(s.Host), s.Port, optionValue(s.User), optionValue(s.Password))
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// optionValue quotes a value of an option file: inside double quotes the
// client reads \\ and \" as escapes.
func optionValue(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}

// gtidScanner watches a dump stream for the last line
// `[-- ]SET GLOBAL gtid_slave_pos='…';` without keeping the stream: only
// lines that start like it are buffered (a few hundred bytes).
type gtidScanner struct {
	mu      sync.Mutex
	line    []byte
	keep    bool // the current line may be the one
	started bool // not at a line start
	last    string
}

const gtidLineMax = 4096

var gtidPrefixes = []string{"-- SET GLOBAL gtid_slave_pos=", "SET GLOBAL gtid_slave_pos="}

func (g *gtidScanner) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !g.started {
			g.started, g.keep, g.line = true, true, g.line[:0]
		}
		if g.keep {
			g.line = append(g.line, chunk...)
			g.keep = len(g.line) <= gtidLineMax && couldBeGTIDLine(g.line)
		}
		if i < 0 {
			break
		}
		if g.keep {
			if v, ok := parseGTIDLine(string(g.line)); ok {
				g.last = v
			}
		}
		g.started = false
		p = p[i+1:]
	}
	return n, nil
}

func couldBeGTIDLine(b []byte) bool {
	for _, pre := range gtidPrefixes {
		n := min(len(b), len(pre))
		if string(b[:n]) == pre[:n] {
			return true
		}
	}
	return false
}

func parseGTIDLine(l string) (string, bool) {
	for _, pre := range gtidPrefixes {
		if v, ok := strings.CutPrefix(l, pre); ok {
			v = strings.TrimSuffix(strings.TrimSpace(v), ";")
			if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
				return v[1 : len(v)-1], true
			}
		}
	}
	return "", false
}

func (g *gtidScanner) position() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last
}

// tailBuffer keeps the last 4 KiB of a program's stderr.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - 4096; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

// String is the last lines of the output that say something: the error
// lines, not the statement mariadb echoes before them (it may carry rows,
// which do not belong in a journal or a log).
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var keep []string
	for _, l := range strings.Split(string(t.buf), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "ERROR") || strings.Contains(l, "error") || strings.Contains(l, "Error") ||
			strings.HasPrefix(l, "mariadb") || strings.HasPrefix(l, "mysql") {
			if len(l) > 300 {
				l = l[:300] + "…"
			}
			keep = append(keep, l)
		}
	}
	return strings.Join(keep[max(0, len(keep)-3):], "; ")
}
