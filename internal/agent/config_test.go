package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	execLookPath = exec.LookPath
	execCommand  = exec.Command
)

func TestParseConfig(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("p@ss\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig([]byte(`
listen: 127.0.0.1:7480
tls: {ca: /c/ca.crt, cert: /c/agent.crt, key: /c/agent.key}
datadir: /var/lib/mysql
server: {user: vigil, password_file: ` + pw + `}
max_rate: 1000000
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Password != "p@ss" || c.Server.Socket != "/run/mysqld/mysqld.sock" ||
		strings.Join(c.Commands.Stop, " ") != "systemctl stop mariadb" || c.Commands.Timeout != 10*time.Minute ||
		c.Binaries.MariadbBackup != "mariadb-backup" || c.MaxRate != 1000000 {
		t.Errorf("defaults: %+v", c)
	}
	if got := c.salvageHoldPath(); got != "/var/lib/vigil-salvage-hold" {
		t.Errorf("salvage hold %q", got)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"listen: 127.0.0.1:1\nlisten_addr: x\n", `line 2: unknown key "listen_addr"`},
		{"server: {sock: x}\n", `unknown key "sock"`},
		{"datadir: relative\n", "listen: required"},
		{"datadir: relative\n", "tls.ca: required"},
		{"datadir: relative\n", "tls.key: required"},
		{"datadir: relative\n", `datadir: "relative" must be an absolute path`},
		{"listen: nohost\ndatadir: /\n", `listen: "nohost" is not host:port`},
		{"listen: a:1\ndatadir: /\n", `datadir: "/" must be an absolute path below /`},
		{"token: a\ntoken_file: b\n", "set token or token_file, not both"},
		{"max_rate: -1\n", "max_rate"},
		{"server: {password: a, password_file: b}\n", "server.password: set password or password_file"},
	} {
		_, err := ParseConfig([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// The token bucket passes rate bytes per second after its burst.
func TestThrottledWriter(t *testing.T) {
	now := time.Unix(0, 0)
	var slept time.Duration
	var out strings.Builder
	w := newThrottledWriter(context.Background(), &out, 100<<10).(*throttledWriter)
	w.now = func() time.Time { return now }
	w.sleep = func(_ context.Context, d time.Duration) error { slept += d; now = now.Add(d); return nil }
	chunk := strings.Repeat("x", 64<<10)
	for i := 0; i < 16; i++ { // 1 MiB
		if n, err := w.Write([]byte(chunk)); err != nil || n != len(chunk) {
			t.Fatalf("write: %d %v", n, err)
		}
	}
	if out.Len() != 1<<20 {
		t.Errorf("passed %d bytes", out.Len())
	}
	// 1 MiB at 100 KiB/s, minus the initial burst of 16 KiB: about 10 s.
	want := time.Duration(float64(1<<20-16<<10) / float64(100<<10) * float64(time.Second))
	if slept < want-100*time.Millisecond || slept > want+500*time.Millisecond {
		t.Errorf("slept %v, want about %v", slept, want)
	}
	if w := newThrottledWriter(context.Background(), &out, 0); w != &out {
		t.Errorf("rate 0 wraps the writer")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := newThrottledWriter(ctx, &out, 1).Write(make([]byte, 1<<20)); err == nil {
		t.Errorf("cancelled context: no error")
	}
}

func TestThrottledWriterRealTime(t *testing.T) {
	var out strings.Builder
	w := newThrottledWriter(context.Background(), &out, 1<<20)
	t0 := time.Now()
	if _, err := w.Write(make([]byte, 300<<10)); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took < 150*time.Millisecond {
		t.Errorf("300 KiB at 1 MiB/s took %v", took)
	}
}

// A starved bucket waits for a whole chunk, not for a few KiB at a time:
// 1 MiB at 1 MiB/s in 256 KiB writes is a handful of sleeps and writes.
func TestThrottledWriterWakesPerChunk(t *testing.T) {
	now := time.Unix(0, 0)
	sleeps, writes := 0, 0
	out := writeCounter{n: &writes}
	w := newThrottledWriter(context.Background(), out, 1<<20).(*throttledWriter)
	w.now = func() time.Time { return now }
	w.sleep = func(_ context.Context, d time.Duration) error { sleeps++; now = now.Add(d); return nil }
	for i := 0; i < 4; i++ {
		if _, err := w.Write(make([]byte, 256<<10)); err != nil {
			t.Fatal(err)
		}
	}
	if sleeps > 12 || writes > 16 {
		t.Errorf("%d sleeps and %d writes for 1 MiB in 256 KiB writes at 1 MiB/s (burst %.0f)", sleeps, writes, w.burst)
	}
}

type writeCounter struct{ n *int }

func (c writeCounter) Write(p []byte) (int, error) { *c.n++; return len(p), nil }
