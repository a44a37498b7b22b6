package qlog

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// startLogger creates a logger and runs it until the test ends.
func startLogger(t testing.TB, cfg Config, opt options) *Logger {
	t.Helper()
	l, err := newLogger(cfg, nil, opt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		l.Close()
		<-done
	})
	return l
}

func queryEntry(session uint32, stmt string) *Entry {
	return &Entry{
		Time: testTime, Kind: KindQuery, Session: session, Cluster: "c1", User: "app",
		Client: "127.0.0.1:5555", Schema: "sbtest", Digest: 0xa1b2c3d4e5f60708,
		Statement: []byte(stmt), Server: "node2", Duration: 123 * time.Microsecond, Rows: 1,
	}
}

// readLines decodes every line of the files, in order.
func readLines(t *testing.T, paths ...string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("%s: invalid line %q: %v", p, sc.Text(), err)
			}
			out = append(out, m)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func sinkStats(t *testing.T, l *Logger, name string) SinkStats {
	t.Helper()
	for _, s := range l.Stats().Sinks {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no sink %q", name)
	return SinkStats{}
}

const secretStmt = "select * from users where name = 'bob' and password = 'secret-password' and id in (1,2,3)"

func TestMaskingFile(t *testing.T) {
	for _, mode := range []string{"", "masked", "full"} {
		t.Run("mode="+mode, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "q.log")
			var stdout syncBuffer
			l := startLogger(t, Config{Statements: mode, File: &FileConfig{Path: path}, Stdout: true}, options{stdout: &stdout})
			buf := []byte(secretStmt)
			if !l.Log(&Entry{Kind: KindQuery, Statement: buf}) {
				t.Fatal("Log refused")
			}
			copy(buf, strings.Repeat("X", len(buf))) // the caller may reuse its memory
			l.Log(&Entry{Kind: KindAuth, User: "bob", Message: "Access denied for user 'bob'"})
			l.Close()

			lines := readLines(t, path)
			if len(lines) != 2 {
				t.Fatalf("%d lines, want 2", len(lines))
			}
			got := lines[0]["statement"]
			file, _ := os.ReadFile(path)
			if mode == "full" {
				if got != secretStmt {
					t.Errorf("statement %q, want %q", got, secretStmt)
				}
				return
			}
			want := "SELECT * FROM users WHERE name = ? AND password = ? AND id IN (...)"
			if got != want {
				t.Errorf("statement %q, want %q", got, want)
			}
			for sinkName, out := range map[string]string{"file": string(file), "stdout": stdout.String()} {
				if strings.Contains(out, "secret-password") || !strings.Contains(out, want) {
					t.Errorf("%s sink: %s", sinkName, out)
				}
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.log")
	l := startLogger(t, Config{Statements: "full", MaxStatement: 10, File: &FileConfig{Path: path}}, options{})
	l.Log(queryEntry(1, "SELECT 1234567890"))
	l.Log(queryEntry(2, "SELECT 1"))
	l.Close()
	lines := readLines(t, path)
	if lines[0]["statement"] != "SELECT 123" || lines[0]["truncated"] != true {
		t.Errorf("first line %v", lines[0])
	}
	if lines[1]["statement"] != "SELECT 1" || lines[1]["truncated"] != nil {
		t.Errorf("second line %v", lines[1])
	}
}

// A masked statement cut inside a literal must not show the literal.
func TestTruncateMasked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.log")
	l := startLogger(t, Config{MaxStatement: 30, File: &FileConfig{Path: path}}, options{})
	l.Log(queryEntry(1, "SELECT 1 FROM t WHERE p = 'secret-password'"))
	l.Close()
	if b, _ := os.ReadFile(path); strings.Contains(string(b), "secret") {
		t.Errorf("truncated statement shows a literal: %s", b)
	}
}

func TestFileThroughLogger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.log")
	l := startLogger(t, Config{File: &FileConfig{Path: path, MaxSize: 64 << 10, Keep: 100}}, options{})
	const n = 5000
	for i := range n {
		for !l.Log(queryEntry(uint32(i), fmt.Sprintf("SELECT c FROM sbtest1 WHERE id = %d", i))) {
			time.Sleep(time.Millisecond)
		}
	}
	l.Close()
	rotated, err := rotatedFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rotated) < 5 {
		t.Errorf("%d rotated files, want several", len(rotated))
	}
	lines := readLines(t, append(rotated, path)...)
	if len(lines) != n {
		t.Fatalf("%d lines, want %d", len(lines), n)
	}
	for i, m := range lines {
		if m["session"] != float64(i) || m["statement"] != "SELECT c FROM sbtest1 WHERE id = ?" {
			t.Fatalf("line %d: %v", i, m)
		}
	}
	st := l.Stats()
	if st.Logged != n || st.Dropped != 0 || st.Sinks[0] != (SinkStats{Name: "file", Written: n}) {
		t.Errorf("stats %+v", st)
	}
}

// The file is flushed within flushInterval, so that tailing it works.
func TestFileFlushesWhileRunning(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.log")
	l := startLogger(t, Config{File: &FileConfig{Path: path}}, options{})
	l.Log(queryEntry(1, "SELECT 1"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, _ := os.ReadFile(path); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the line never reached the file")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s := sinkStats(t, l, "file"); s.Written != 1 {
		t.Errorf("file stats %+v", s)
	}
}

func TestCloseWithoutRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.log")
	l, err := New(Config{File: &FileConfig{Path: path}, Buffer: 16}, nil)
	if err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for i := range 20 {
		if l.Log(queryEntry(uint32(i), "SELECT 1")) {
			accepted++
		}
	}
	if accepted != 16 {
		t.Errorf("accepted %d entries into a buffer of 16", accepted)
	}
	l.Close()
	l.Close()
	l.Run(context.Background()) // returns at once after Close
	if l.Log(queryEntry(99, "SELECT 1")) {
		t.Error("Log accepted an entry after Close")
	}
	if n := len(readLines(t, path)); n != 16 {
		t.Errorf("%d lines written, want 16", n)
	}
	st := l.Stats()
	if st.Logged != 16 || st.Dropped != 5 || st.Sinks[0].Written != 16 {
		t.Errorf("stats %+v", st)
	}
}

// The writer is stuck: the buffer fills, Log refuses and counts.
func TestBufferFull(t *testing.T) {
	l, err := newLogger(Config{Stdout: true, Buffer: 64}, nil, options{stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	stuck, unblock := make(chan struct{}), make(chan struct{})
	var once sync.Once
	l.beforeDispatch = func() {
		once.Do(func() {
			close(stuck)
			<-unblock
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	<-stuck
	var accepted, refused int
	for i := range 1000 {
		if l.Log(queryEntry(uint32(i), "SELECT 1")) {
			accepted++
		} else {
			refused++
		}
	}
	if accepted != 64 || refused != 1000-64 {
		t.Errorf("accepted %d, refused %d", accepted, refused)
	}
	if st := l.Stats(); st.Logged != 64 || st.Dropped != uint64(refused) {
		t.Errorf("stats %+v", st)
	}
	close(unblock)
	cancel() // ending the context shuts the logger down too
	<-done
	l.Close()
	if st := l.Stats(); st.Sinks[0].Written != 64 {
		t.Errorf("stats after close %+v", st)
	}
}

// blockingWriter blocks every Write until released.
type blockingWriter struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
	n       atomic.Int64
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.entered) })
	<-w.release
	w.n.Add(int64(len(p)))
	return len(p), nil
}

// A stuck sink drops its own entries; the other sinks and Log go on.
func TestStuckSinkDoesNotStopOthers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.log")
	bw := &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
	// The first flush of stdout (after flushInterval) blocks for good.
	l := startLogger(t, Config{File: &FileConfig{Path: path}, Stdout: true}, options{stdout: bw, sinkQueue: 4})
	logged := 0
	for i := range 20 * 100 {
		if l.Log(queryEntry(uint32(i), "SELECT c FROM sbtest1 WHERE id = "+strings.Repeat("9", 100))) {
			logged++
		}
		if i%100 == 99 {
			time.Sleep(5 * time.Millisecond) // let each round be its own batch
		}
		if i == 999 {
			select {
			case <-bw.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the stdout sink never wrote")
			}
		}
	}
	// The file keeps up while stdout is stuck.
	deadline := time.Now().Add(10 * time.Second)
	for sinkStats(t, l, "file").Written != uint64(logged) {
		if time.Now().After(deadline) {
			t.Fatalf("file stats %+v, logged %d", sinkStats(t, l, "file"), logged)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s := sinkStats(t, l, "stdout"); s.Dropped == 0 {
		t.Errorf("stuck stdout dropped nothing: %+v", s)
	}
	close(bw.release)
	l.Close()
	st := l.Stats()
	out := sinkStats(t, l, "stdout")
	if out.Written+out.Dropped+out.Errors != st.Logged || st.Logged+st.Dropped != 2000 {
		t.Errorf("stats %+v", st)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Many producers at once: every accepted entry is written exactly once.
func TestConcurrentProducers(t *testing.T) {
	var out syncBuffer
	l := startLogger(t, Config{Statements: "full", Stdout: true, Buffer: 256}, options{stdout: &out})
	const producers, each = 4, 5000
	var wg sync.WaitGroup
	var accepted atomic.Uint64
	for p := range producers {
		wg.Go(func() {
			stmt := []byte("SELECT 0000")
			for i := range each {
				copy(stmt[7:], fmt.Sprintf("%04d", i%10000))
				if l.Log(&Entry{Kind: KindQuery, Session: uint32(p), Statement: stmt}) {
					accepted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	l.Close()
	st := l.Stats()
	if st.Logged != accepted.Load() || st.Logged+st.Dropped != producers*each {
		t.Errorf("stats %+v, accepted %d", st, accepted.Load())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if uint64(len(lines)) != st.Logged {
		t.Fatalf("%d lines, %d logged", len(lines), st.Logged)
	}
	last := map[float64]int{}
	for _, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("invalid line %q", line)
		}
		var n int
		fmt.Sscanf(m["statement"].(string), "SELECT %d", &n)
		s := m["session"].(float64)
		if prev, ok := last[s]; ok && n <= prev {
			t.Fatalf("session %v: statement %d after %d", s, n, prev)
		}
		last[s] = n
	}
}

// Close is bounded even when a sink's writer never returns.
func TestCloseAbandonsStuckSink(t *testing.T) {
	bw := &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
	defer close(bw.release) // lets the abandoned goroutine end
	l := startLogger(t, Config{Stdout: true}, options{stdout: bw, closeTimeout: 100 * time.Millisecond})
	l.Log(queryEntry(1, "SELECT 1"))
	<-bw.entered // stuck in the first flush
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		l.Close()
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
}
