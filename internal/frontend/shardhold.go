package frontend

// Holding a schema's statements at the sharded listener, for a move's
// cutover (as a switchover holds writes): new statements on the schema
// wait, the statements already running and the transactions that used
// the schema end first, then the caller flips the map and releases; the
// held statements are decided again and run where the map says now.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-db/vigil/internal/mysqlproto"
)

// schemaHolds is the sharded listener's hold state. Statements count
// themselves in active[gen&1] while they run; Hold publishes the hold,
// moves gen on and waits for the previous generation to drain: every
// statement that could have missed the hold has ended then.
type schemaHolds struct {
	mu     sync.Mutex // one hold at a time
	held   atomic.Pointer[schemaHold]
	gen    atomic.Uint64
	active [2]atomic.Int64

	trxMu sync.Mutex
	trxOn map[string]int // schema -> open transactions that used it
	// maxWait bounds how long a statement waits at a hold (0: 10s).
	maxWait time.Duration
}

// schemaHold is one hold.
type schemaHold struct {
	schemas  []string
	released chan struct{}
	maxWait  time.Duration
}

func (h *schemaHold) concerns(schemas []string) bool {
	for _, s := range schemas {
		if slices.Contains(h.schemas, s) {
			return true
		}
	}
	return false
}

// wait blocks until the hold ends (nil) or lasts too long for the
// statement (7003, as a switchover's hold).
func (h *schemaHold) wait(ctx context.Context) error {
	t := time.NewTimer(h.maxWait)
	defer t.Stop()
	select {
	case <-h.released:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return mysqlproto.NewError(mysqlproto.ERVigilFailoverHeld, mysqlproto.SSVigilUnavailable,
			"Vigil: statement held %s at the cutover of a move of %s without an end; retry", h.maxWait, quoteName(firstOf(h.schemas)))
	}
}

func (s *schemaHolds) enter() uint64 {
	g := s.gen.Load()
	s.active[g&1].Add(1)
	return g
}

func (s *schemaHolds) exit(g uint64) { s.active[g&1].Add(-1) }

func (s *schemaHolds) current() *schemaHold { return s.held.Load() }

// Hold holds the statements on schemas at this listener: it returns once
// none is running and no transaction that used one of them is open, and
// the caller must call release (the held statements then run where the
// map says). It fails, holding nothing, when that takes longer than
// drain.
func (s *ShardServer) Hold(ctx context.Context, schemas []string, drain time.Duration) (release func(), err error) {
	h := &s.hold
	h.mu.Lock()
	wait := h.maxWait
	if wait <= 0 {
		wait = 10 * time.Second
	}
	sh := &schemaHold{schemas: slices.Clone(schemas), released: make(chan struct{}), maxWait: wait}
	var once sync.Once
	release = func() {
		once.Do(func() {
			h.held.Store(nil)
			close(sh.released)
			h.mu.Unlock()
		})
	}
	h.held.Store(sh)
	g := h.gen.Add(1)
	deadline := time.Now().Add(drain)
	for {
		running := h.active[(g-1)&1].Load()
		open := h.openTrx(schemas)
		if running <= 0 && open == 0 {
			return release, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			release()
			return nil, fmt.Errorf("holding %v: after %s, %d statements still run and %d transactions that used the schema are open; nothing was held (retry, or end those transactions)",
				schemas, drain, max(running, 0), open)
		}
		time.Sleep(time.Millisecond)
	}
}

func (s *schemaHolds) openTrx(schemas []string) int {
	s.trxMu.Lock()
	defer s.trxMu.Unlock()
	n := 0
	for _, sc := range schemas {
		n += s.trxOn[sc]
	}
	return n
}

// trxUsed reports whether the session's open transaction used one of
// schemas (its statements pass a hold: the hold waits for it).
func (sh *shardSession) trxUsed(schemas []string) bool {
	for _, s := range schemas {
		if slices.Contains(sh.trxSchemas, s) {
			return true
		}
	}
	return false
}

// noteTrx counts the schemas a statement concerned into the session's
// open transaction, or ends the count when no transaction is open.
func (sh *shardSession) noteTrx(schemas []string) {
	if sh.trxCluster() == "" {
		sh.endTrx()
		return
	}
	h := &sh.srv.hold
	for _, s := range schemas {
		if !slices.Contains(sh.trxSchemas, s) {
			sh.trxSchemas = append(sh.trxSchemas, s)
			h.trxMu.Lock()
			if h.trxOn == nil {
				h.trxOn = map[string]int{}
			}
			h.trxOn[s]++
			h.trxMu.Unlock()
		}
	}
}

// endTrx uncounts the session's ended transaction.
func (sh *shardSession) endTrx() {
	if len(sh.trxSchemas) == 0 {
		return
	}
	h := &sh.srv.hold
	h.trxMu.Lock()
	for _, s := range sh.trxSchemas {
		if h.trxOn[s]--; h.trxOn[s] <= 0 {
			delete(h.trxOn, s)
		}
	}
	h.trxMu.Unlock()
	sh.trxSchemas = sh.trxSchemas[:0]
}
