package qlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeClock is a settable clock for the file sink.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// lineBatch returns a batch of n lines of size bytes each, '\n' included.
func lineBatch(first, n, size int) *batch {
	b := &batch{}
	b.refs.Store(1)
	for i := range n {
		line := fmt.Sprintf("{\"n\":%d,\"pad\":\"", first+i)
		line += strings.Repeat("x", size-len(line)-3) + "\"}\n"
		b.buf = append(b.buf, line...)
		b.ends = append(b.ends, len(b.buf))
	}
	return b
}

func newTestFile(t *testing.T, cfg FileConfig, clock *fakeClock) (*fileOut, *sink) {
	t.Helper()
	cfg.Path = filepath.Join(t.TempDir(), "q.log")
	o, err := openFile(*Config{File: &cfg}.withDefaults().File, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	return o, newSink("file", o, nil, 1)
}

func fileSizes(t *testing.T, paths []string) []int64 {
	var sizes []int64
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, fi.Size())
	}
	return sizes
}

func TestFileRotateBySize(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	o, s := newTestFile(t, FileConfig{MaxSize: 1000, Keep: 3}, clock)
	// 100-byte lines, 10 per file: 95 lines make 9 full files and a
	// current one of 5 lines.
	for i := range 19 {
		o.write(s, lineBatch(i*5, 5, 100))
		clock.t = clock.t.Add(time.Millisecond / 2) // two rotations within one millisecond
	}
	o.close(s)

	rotated, err := rotatedFiles(o.cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rotated) != 3 {
		t.Fatalf("%d rotated files kept, want 3: %v", len(rotated), rotated)
	}
	for i, size := range fileSizes(t, rotated) {
		if size != 1000 {
			t.Errorf("%s: %d bytes, want 1000", rotated[i], size)
		}
	}
	// The kept files are the newest, in order: lines 60..94.
	var lines []string
	for _, p := range append(rotated, o.cfg.Path) {
		b, _ := os.ReadFile(p)
		lines = append(lines, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")...)
	}
	if len(lines) != 35 || !strings.HasPrefix(lines[0], `{"n":60,`) || !strings.HasPrefix(lines[34], `{"n":94,`) {
		t.Errorf("kept lines %d, first %.10s, last %.10s", len(lines), lines[0], lines[len(lines)-1])
	}
	if s.written.Load() != 95 || s.errors.Load() != 0 {
		t.Errorf("written %d errors %d", s.written.Load(), s.errors.Load())
	}
	// Names are the rotation times, made unique.
	name := filepath.Base(rotated[0])
	if !strings.HasPrefix(name, "q.log.20260102T0304") || len(name) != len("q.log.20060102T150405.000") {
		t.Errorf("rotated name %q", name)
	}
}

func TestFileRotateByAge(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	o, s := newTestFile(t, FileConfig{MaxAge: time.Hour, Keep: 2}, clock)
	for i := range 5 {
		o.write(s, lineBatch(i, 1, 50))
		clock.t = clock.t.Add(59 * time.Minute)
		o.write(s, lineBatch(i, 1, 50)) // still within the hour
		clock.t = clock.t.Add(2 * time.Minute)
	}
	o.close(s)
	rotated, _ := rotatedFiles(o.cfg.Path)
	if len(rotated) != 2 {
		t.Fatalf("rotated %v, want 2 kept", rotated)
	}
	for i, size := range fileSizes(t, append(rotated, o.cfg.Path)) {
		if size != 100 {
			t.Errorf("file %d: %d bytes, want 2 lines", i, size)
		}
	}
	// The last rotation was at the first write of the last round.
	want := clock.t.Add(-61 * time.Minute).Format(rotatedLayout)
	if !strings.HasSuffix(rotated[1], want) {
		t.Errorf("newest rotated %s, want time %s", rotated[1], want)
	}
}

// An empty file is not rotated however old, and a line larger than
// MaxSize gets a file of its own.
func TestFileRotateEdges(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	o, s := newTestFile(t, FileConfig{MaxSize: 100, MaxAge: time.Minute}, clock)
	clock.t = clock.t.Add(time.Hour)
	o.write(s, lineBatch(0, 1, 500))
	o.write(s, lineBatch(1, 1, 50))
	o.close(s)
	rotated, _ := rotatedFiles(o.cfg.Path)
	if len(rotated) != 1 {
		t.Fatalf("rotated %v, want 1", rotated)
	}
	if got := fileSizes(t, []string{rotated[0], o.cfg.Path}); got[0] != 500 || got[1] != 50 {
		t.Errorf("sizes %v", got)
	}
}

// Appending to an existing file counts its size.
func TestFileAppendsToExisting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.log")
	if err := os.WriteFile(path, []byte(strings.Repeat("x", 90)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Now()}
	o, err := openFile(FileConfig{Path: path, MaxSize: 100, Keep: 5}, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	s := newSink("file", o, nil, 1)
	o.write(s, lineBatch(0, 1, 20))
	o.close(s)
	rotated, _ := rotatedFiles(path)
	if len(rotated) != 1 || fileSizes(t, rotated)[0] != 91 {
		t.Errorf("rotated %v", rotated)
	}
}
