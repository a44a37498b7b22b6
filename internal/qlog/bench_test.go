package qlog

import (
	"io"
	"testing"

	"github.com/vigil-db/vigil/internal/sqlscan"
)

// A typical 60-byte statement.
const benchStmt = "SELECT c, pad FROM sbtest1 WHERE id = 50213 AND k = 'abcdef'"

// Log does not allocate once the ring's slots have their buffers.
func TestLogDoesNotAllocate(t *testing.T) {
	l, err := newLogger(Config{Buffer: 1024}, nil, options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e := queryEntry(1, benchStmt)
	for range 2048 { // this goroutine plays the writer
		l.Log(e)
		l.dispatch(0, false)
	}
	if n := testing.AllocsPerRun(500, func() {
		if !l.Log(e) {
			t.Fatal("Log refused")
		}
	}); n != 0 {
		t.Errorf("Log: %v allocations, want 0", n)
	}
}

func benchLogger(b *testing.B) *Logger {
	return startLogger(b, Config{Stdout: true}, options{stdout: io.Discard})
}

func reportDrops(b *testing.B, l *Logger) {
	st := l.Stats()
	b.ReportMetric(float64(st.Dropped)/float64(st.Logged+st.Dropped)*100, "%dropped")
}

// BenchmarkLog measures an accepted Log call: the ring is drained, with
// the timer stopped, whenever it fills.
func BenchmarkLog(b *testing.B) {
	l, err := newLogger(Config{}, nil, options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	e := queryEntry(1, benchStmt)
	size := len(l.ring.slots)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if !l.Log(e) {
			b.Fatal("Log refused")
		}
		if i++; i == size {
			b.StopTimer()
			for s := l.ring.peek(); s != nil; s = l.ring.peek() {
				l.ring.release(s)
			}
			i = 0
			b.StartTimer()
		}
	}
}

// BenchmarkLogFull measures a refused Log call (the ring is full).
func BenchmarkLogFull(b *testing.B) {
	l, err := newLogger(Config{Buffer: 16}, nil, options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	e := queryEntry(1, benchStmt)
	for l.Log(e) {
	}
	b.ReportAllocs()
	for b.Loop() {
		l.Log(e)
	}
}

// BenchmarkLogParallel runs Log from every core while the writer runs, to
// a discarding stdout sink; much is dropped since Log is far faster than
// the writer.
func BenchmarkLogParallel(b *testing.B) {
	l := startLogger(b, Config{Stdout: true}, options{stdout: io.Discard})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		e := queryEntry(1, benchStmt)
		for pb.Next() {
			l.Log(e)
		}
	})
	b.StopTimer()
	st := l.Stats()
	b.ReportMetric(float64(st.Dropped)/float64(st.Logged+st.Dropped)*100, "%dropped")
}

// BenchmarkWriter measures the whole path of one entry on one goroutine:
// Log, then the writer's masking, encoding and hand-over to a sink. Its
// inverse is the rate the writer sustains.
func BenchmarkWriter(b *testing.B) {
	// Run is not started: this goroutine plays the writer.
	l, err := newLogger(Config{Stdout: true}, nil, options{stdout: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	l.startSinks()
	defer l.Close()
	e := queryEntry(1, benchStmt)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		l.Log(e)
		if i++; i == 256 {
			l.dispatch(0, false)
			i = 0
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	e := queryEntry(1, benchStmt)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = appendEntry(buf[:0], e, e.Statement, false)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkEncodeMasked(b *testing.B) {
	e := queryEntry(1, benchStmt)
	var buf, scratch []byte
	b.ReportAllocs()
	for b.Loop() {
		scratch = sqlscan.Normalize(scratch[:0], e.Statement)
		buf = appendEntry(buf[:0], e, scratch, false)
	}
	b.SetBytes(int64(len(buf)))
}
