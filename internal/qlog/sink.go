package qlog

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// flushInterval bounds how long a line waits in a file or stdout
	// buffer, so that tailing the file works.
	flushInterval = 200 * time.Millisecond
	// warnInterval is the least time between two warnings of one sink.
	warnInterval = 10 * time.Second
	streamBuffer = 64 << 10
)

// batch is a run of encoded lines shared, read-only, by every sink it was
// offered to. It goes back to its pool when the last holder releases it:
// the writer, each sink it was queued for, and each Kafka record made from
// it until its delivery is settled.
type batch struct {
	buf  []byte // lines, each ending in '\n'
	ends []int  // end of each line in buf, after its '\n'
	refs atomic.Int32
	pool *sync.Pool

	// The Kafka sink's, reused with the batch.
	recs    []kgo.Record
	promise func(*kgo.Record, error)
}

func (b *batch) lines() int { return len(b.ends) }

// line returns line i without its '\n'.
func (b *batch) line(i int) []byte {
	start := 0
	if i > 0 {
		start = b.ends[i-1]
	}
	return b.buf[start : b.ends[i]-1]
}

func (b *batch) release() {
	if b.refs.Add(-1) != 0 {
		return
	}
	if cap(b.buf) > 4*maxBatchBytes {
		return // a batch of huge statements: let it go
	}
	b.buf, b.ends = b.buf[:0], b.ends[:0]
	clear(b.recs)
	b.pool.Put(b)
}

// output is what a sink writes to. Its methods are called from the sink's
// goroutine only.
type output interface {
	// write writes the batch's lines and reports whether a flush is due
	// later.
	write(s *sink, b *batch) (flushLater bool)
	flush(s *sink)
	close(s *sink)
}

// sink runs one output in its own goroutine behind a bounded queue, so
// that a slow or stuck output only drops its own entries.
type sink struct {
	name  string
	out   output
	log   *slog.Logger
	queue chan *batch
	done  chan struct{}

	written, dropped, errors atomic.Uint64
	lastWarn                 atomic.Int64 // unix nanoseconds
}

func newSink(name string, out output, log *slog.Logger, queue int) *sink {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &sink{
		name:  name,
		out:   out,
		log:   log,
		queue: make(chan *batch, queue),
		done:  make(chan struct{}),
	}
}

func (s *sink) run() {
	defer close(s.done)
	t := time.NewTimer(flushInterval)
	t.Stop()
	defer t.Stop()
	armed := false
	for {
		select {
		case b, ok := <-s.queue:
			if !ok {
				s.out.close(s)
				return
			}
			if s.out.write(s, b) && !armed {
				t.Reset(flushInterval)
				armed = true
			}
			b.release()
		case <-t.C:
			armed = false
			s.out.flush(s)
		}
	}
}

// warn logs a warning about the sink, at most once per warnInterval.
func (s *sink) warn(what string, err error) {
	now := time.Now().UnixNano()
	last := s.lastWarn.Load()
	if now-last < int64(warnInterval) || !s.lastWarn.CompareAndSwap(last, now) {
		return
	}
	msg := fmt.Sprintf("query log: %s sink: %s", s.name, what)
	if err != nil {
		s.log.Warn(msg, "err", err, "written", s.written.Load(), "dropped", s.dropped.Load(), "errors", s.errors.Load())
		return
	}
	s.log.Warn(msg, "written", s.written.Load(), "dropped", s.dropped.Load(), "errors", s.errors.Load())
}

// streamOut writes lines to an io.Writer (standard output) through a
// buffer. Lines count as written when a flush succeeds.
type streamOut struct {
	dst     io.Writer
	w       *bufio.Writer
	pending uint64 // lines in w since the last flush
}

func newStreamOut(w io.Writer) *streamOut {
	return &streamOut{dst: w, w: bufio.NewWriterSize(w, streamBuffer)}
}

func (o *streamOut) write(s *sink, b *batch) bool {
	if _, err := o.w.Write(b.buf); err != nil {
		o.fail(s, err, uint64(b.lines()))
		return false
	}
	o.pending += uint64(b.lines())
	return true
}

func (o *streamOut) flush(s *sink) {
	if err := o.w.Flush(); err != nil {
		o.fail(s, err, 0)
		return
	}
	s.written.Add(o.pending)
	o.pending = 0
}

// fail counts the lines lost to err; bufio keeps an error forever, so the
// buffer is reset to try again with the next batch.
func (o *streamOut) fail(s *sink, err error, lost uint64) {
	s.errors.Add(o.pending + lost)
	o.pending = 0
	o.w.Reset(o.dst)
	s.warn("write failed; entries are lost until writing works again", err)
}

func (o *streamOut) close(s *sink) { o.flush(s) }
