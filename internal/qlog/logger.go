package qlog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// maxBatch and maxBatchBytes bound one batch taken from the ring.
	maxBatch      = 1024
	maxBatchBytes = 1 << 20
	// batchPause is how long the writer waits after a partial batch, so
	// that batches are not single entries under a steady load.
	batchPause = 2 * time.Millisecond
	// retainStatement is the largest statement buffer a ring slot keeps
	// for reuse; larger statements are charged to bigBudget while they
	// wait in the ring, so that the ring cannot hold gigabytes.
	retainStatement = 1 << 10
	bigBudget       = 64 << 20
	// sinkQueue is the number of batches waiting for one sink.
	sinkQueue = 128
	// sinkCloseTimeout bounds how long Close waits for a sink to finish.
	sinkCloseTimeout = 5 * time.Second
)

const (
	stateIdle int32 = iota
	stateRunning
	stateShut
)

// Logger is the query log. Log is safe for concurrent use; Run is the
// writer goroutine, started once by the owner.
type Logger struct {
	log     *slog.Logger
	masked  bool
	maxStmt int

	ring     *ring
	dropped  atomic.Uint64
	bigBytes atomic.Int64
	sleeping atomic.Bool   // the writer waits on wake
	wake     chan struct{} // capacity 1

	sinks   []*sink
	batches sync.Pool

	state     atomic.Int32
	closing   chan struct{} // closed by Close
	closeOnce sync.Once
	shutOnce  sync.Once
	sinksOnce sync.Once
	finished  chan struct{} // closed when shut down

	closeTimeout time.Duration

	// Writer goroutine only.
	scratch []byte
	// beforeDispatch, if set, runs before each batch is taken (tests).
	beforeDispatch func()
}

// Stats are the logger's counters since New.
type Stats struct {
	Logged, Dropped uint64 // accepted and refused by Log
	Sinks           []SinkStats
}

// SinkStats are one sink's counters, in entries.
type SinkStats struct {
	Name                     string // "file", "stdout", "kafka"
	Written, Dropped, Errors uint64
}

// New validates cfg, opens the file and creates the Kafka client (which
// connects lazily: an unreachable broker is not an error here). The caller
// starts Run and calls Close.
func New(cfg Config, logger *slog.Logger) (*Logger, error) {
	return newLogger(cfg, logger, options{})
}

// options are New's knobs for tests.
type options struct {
	stdout    io.Writer // default os.Stdout
	sinkQueue int       // batches queued per sink, default sinkQueue
	now       func() time.Time
	// closeTimeout bounds the wait for the sinks at shutdown, default
	// sinkCloseTimeout.
	closeTimeout time.Duration
}

func newLogger(cfg Config, logger *slog.Logger, opt options) (*Logger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	l := &Logger{
		log:      logger,
		masked:   cfg.Statements != StatementsFull,
		maxStmt:  cfg.MaxStatement,
		ring:     newRing(cfg.Buffer),
		wake:     make(chan struct{}, 1),
		closing:  make(chan struct{}),
		finished: make(chan struct{}),
	}
	l.batches.New = func() any { return &batch{pool: &l.batches} }
	if opt.stdout == nil {
		opt.stdout = os.Stdout
	}
	if opt.sinkQueue == 0 {
		opt.sinkQueue = sinkQueue
	}
	if opt.now == nil {
		opt.now = time.Now
	}
	if opt.closeTimeout == 0 {
		opt.closeTimeout = sinkCloseTimeout
	}
	l.closeTimeout = opt.closeTimeout
	mkSink := func(name string, out output) *sink { return newSink(name, out, logger, opt.sinkQueue) }
	if cfg.File != nil {
		out, err := openFile(*cfg.File, opt.now)
		if err != nil {
			return nil, err
		}
		l.sinks = append(l.sinks, mkSink("file", out))
	}
	if cfg.Stdout {
		l.sinks = append(l.sinks, mkSink("stdout", newStreamOut(opt.stdout)))
	}
	if cfg.Kafka != nil {
		out, err := newKafkaOut(*cfg.Kafka)
		if err != nil {
			for _, s := range l.sinks {
				s.out.close(s)
			}
			return nil, err
		}
		l.sinks = append(l.sinks, mkSink("kafka", out))
	}
	return l, nil
}

// Log queues e for the sinks and reports whether it was accepted. It never
// blocks: when the buffer is full or the logger is closed, the entry is
// dropped, counted, and Log returns false. It copies e.Statement.
func (l *Logger) Log(e *Entry) bool {
	n := len(e.Statement)
	trunc := n > l.maxStmt
	if trunc {
		n = l.maxStmt
	}
	var charge int64
	if n > retainStatement {
		charge = int64(n)
		if l.bigBytes.Add(charge) > bigBudget {
			l.bigBytes.Add(-charge)
			l.dropped.Add(1)
			return false
		}
	}
	s, pos, ok := l.ring.claim()
	if !ok {
		if charge != 0 {
			l.bigBytes.Add(-charge)
		}
		l.dropped.Add(1)
		return false
	}
	stmt := s.e.Statement[:0]
	s.e = *e
	s.e.Statement = append(stmt, e.Statement[:n]...)
	if s.e.Time.IsZero() {
		s.e.Time = time.Now()
	}
	s.trunc, s.charge = trunc, charge
	l.ring.publish(s, pos)
	if l.sleeping.Load() {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// Stats returns the counters.
func (l *Logger) Stats() Stats {
	st := Stats{Logged: l.ring.accepted(), Dropped: l.dropped.Load()}
	for _, s := range l.sinks {
		st.Sinks = append(st.Sinks, SinkStats{
			Name:    s.name,
			Written: s.written.Load(),
			Dropped: s.dropped.Load(),
			Errors:  s.errors.Load(),
		})
	}
	return st
}

// Run is the writer goroutine's body: it masks, encodes and hands entries
// to the sinks until ctx ends or Close is called, then drains what Log
// accepted, flushes and closes the sinks, and returns. Only the first call
// does anything, and none after Close.
func (l *Logger) Run(ctx context.Context) {
	if !l.state.CompareAndSwap(stateIdle, stateRunning) {
		return
	}
	defer l.shutdown()
	l.startSinks()
	pause := time.NewTimer(batchPause)
	defer pause.Stop()
	for {
		n, more := l.dispatch(0, false)
		if more {
			continue
		}
		if n > 0 {
			pause.Reset(batchPause)
			select {
			case <-pause.C:
				continue
			case <-ctx.Done():
				return
			case <-l.closing:
				return
			}
		}
		// Sleep until a producer wakes us. Producers look at sleeping
		// after publishing, so either they see it set or we see their
		// entry here.
		l.sleeping.Store(true)
		if l.ring.peek() != nil {
			l.sleeping.Store(false)
			continue
		}
		select {
		case <-l.wake:
		case <-ctx.Done():
			return
		case <-l.closing:
			return
		}
		l.sleeping.Store(false)
	}
}

// Close stops accepting entries, writes what was accepted, flushes and
// closes the sinks. It is safe to call twice, and without Run.
func (l *Logger) Close() {
	l.ring.close()
	l.closeOnce.Do(func() { close(l.closing) })
	if l.state.CompareAndSwap(stateIdle, stateShut) {
		l.shutdown()
	}
	<-l.finished
}

func (l *Logger) startSinks() {
	l.sinksOnce.Do(func() {
		for _, s := range l.sinks {
			go s.run()
		}
	})
}

// shutdown drains the ring into the sinks, then closes them and waits for
// them, at most sinkCloseTimeout in all.
func (l *Logger) shutdown() {
	l.shutOnce.Do(func() {
		defer close(l.finished)
		final := l.ring.close()
		for l.ring.head < final {
			l.dispatch(final, true)
		}
		l.startSinks()
		for _, s := range l.sinks {
			close(s.queue)
		}
		deadline := time.NewTimer(l.closeTimeout)
		defer deadline.Stop()
		for _, s := range l.sinks {
			select {
			case <-s.done:
			case <-deadline.C:
				l.log.Warn(fmt.Sprintf("query log: the %s sink did not finish writing within %s; abandoning it", s.name, l.closeTimeout))
				return
			}
		}
	})
}

// dispatch takes up to maxBatch entries from the ring, masks and encodes
// them into one batch and offers it to every sink. It returns the number
// of entries taken and whether it stopped at the batch limits. When
// draining, it waits for entries claimed but not yet published below
// final.
func (l *Logger) dispatch(final uint64, draining bool) (n int, more bool) {
	if l.beforeDispatch != nil {
		l.beforeDispatch()
	}
	var b *batch
	for {
		if n == maxBatch || b != nil && len(b.buf) >= maxBatchBytes {
			more = true
			break
		}
		s := l.ring.peek()
		if s == nil {
			if !draining || l.ring.head >= final {
				break
			}
			runtime.Gosched() // a producer is between claim and publish
			continue
		}
		if b == nil {
			b = l.batches.Get().(*batch)
		}
		l.encode(b, s)
		l.ring.release(s)
		n++
	}
	if b != nil {
		l.send(b)
	}
	return n, more
}

// encode appends the slot's entry to b and empties the slot, keeping its
// statement buffer unless it is large.
func (l *Logger) encode(b *batch, s *slot) {
	stmt := s.e.Statement
	if l.masked && len(stmt) > 0 && s.e.Kind == KindQuery {
		l.scratch = maskStatement(l.scratch[:0], stmt, s.e.ErrCode)
		stmt = l.scratch
	}
	if l.masked && s.e.Message != "" {
		// Servers echo statement text in their messages.
		s.e.Message = maskMessage(s.e.Message, s.e.ErrCode)
	}
	b.buf = appendEntry(b.buf, &s.e, stmt, s.trunc)
	b.ends = append(b.ends, len(b.buf))
	if s.charge != 0 {
		l.bigBytes.Add(-s.charge)
	}
	keep := s.e.Statement[:0]
	if cap(keep) > retainStatement {
		keep = nil
	}
	s.e = Entry{Statement: keep}
	s.trunc, s.charge = false, 0
	if cap(l.scratch) > 4*retainStatement {
		l.scratch = nil
	}
}

// send offers b to every sink; a sink whose queue is full drops it.
func (l *Logger) send(b *batch) {
	b.refs.Store(int32(len(l.sinks)) + 1)
	for _, s := range l.sinks {
		select {
		case s.queue <- b:
		default:
			s.dropped.Add(uint64(len(b.ends)))
			s.warn("its queue is full: it cannot keep up; entries are dropped", nil)
			b.release()
		}
	}
	b.release()
}
