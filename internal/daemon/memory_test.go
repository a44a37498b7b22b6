package daemon

import (
	"context"
	"math"
	"runtime/debug"
	"testing"

	"github.com/vigil-db/vigil/internal/config"
)

// security.statement_memory sets the budget and the Go memory limit at
// start, and a reload changes both.
func TestStatementMemoryAppliedAndReloaded(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetMemoryLimit(math.MaxInt64)
	ctx, cancel := context.WithCancel(context.Background())
	d := &daemon{}
	d.startMemory(ctx, config.Security{StatementMemory: 64 << 20})
	defer func() { cancel(); d.wg.Wait() }()
	if got := d.budget.Limit(); got != 64<<20 {
		t.Fatalf("budget %d", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 64<<20+memOverdraft+memBase {
		t.Fatalf("memory limit %d, want %d", got, 64<<20+memOverdraft+memBase)
	}
	d.applyMemory(config.Security{StatementMemory: 512 << 20})
	if got := d.budget.Limit(); got != 512<<20 {
		t.Fatalf("budget after reload %d", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 512<<20+memOverdraft+memBase {
		t.Fatalf("memory limit after reload %d", got)
	}
}
