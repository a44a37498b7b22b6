package daemon

import (
	"context"
	"os"
	"runtime/debug"
	"time"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/mysqlproto"
)

// The memory Vigil spends beside its statement budget (docs/security.md,
// "Memory budget"): one frame the budget may let overdraw (a LOAD DATA
// LOCAL file frame larger than the one before) and a base for everything
// else (sessions, pools, caches, garbage of small statements, the
// runtime).
const (
	memOverdraft = mysqlproto.MaxPayload + 1
	memBase      = 128 << 20
	// trimEvery: how often the budget is checked for memory to give
	// back (after two checks in a row without a large statement);
	// trimAfter: the bytes of large buffers released since the last
	// return that make one worth its full GC.
	trimEvery = time.Second
	trimAfter = 16 << 20
)

// startMemory makes the statement budget every listener shares, sets the
// Go memory limit from it, and starts the loop that gives memory back to
// the OS when large statements are done.
func (d *daemon) startMemory(ctx context.Context, s config.Security) {
	d.budget = mysqlproto.NewBudget(int64(s.StatementMemory))
	d.applyMemory(s)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		t := time.NewTicker(trimEvery)
		defer t.Stop()
		quiet := 0 // checks in a row that found no large statement
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if d.budget.InUse() != 0 {
				quiet = 0
				continue
			}
			// Two quiet checks: a client sending large statements one
			// after another is not idle between two of them.
			if quiet++; quiet >= 2 && d.budget.TakeFreed() >= trimAfter {
				// Idle after large statements: their buffers are garbage
				// the GC would give back only slowly (the scavenger
				// returns a few MB a second).
				debug.FreeOSMemory()
			}
		}
	}()
}

// applyMemory applies security.statement_memory (at start and reload).
// The Go memory limit (a soft limit: the GC works harder near it) is the
// budget plus what Vigil needs beside it, unless GOMEMLIMIT is set.
func (d *daemon) applyMemory(s config.Security) {
	d.budget.SetLimit(int64(s.StatementMemory))
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(int64(s.StatementMemory) + memOverdraft + memBase)
	}
}
