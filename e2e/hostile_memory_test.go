package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Bounds of TestHostileLargeStatements (docs/security.md, "Memory
// budget"): Vigil's RSS under 16 clients sending 64 MiB statements stays
// under security.statement_memory plus memConstant, and comes back to
// within 2x of its idle size within a minute.
const (
	// memConstant: what Vigil holds beside the statement budget, as its
	// Go memory limit allows (internal/daemon/memory.go: one 16 MiB frame
	// of overdraft and a 128 MiB base).
	memConstant    = 144 << 20
	largeClients   = 16
	largeStatement = 64<<20 - 1024 // under max_allowed_packet (64 MiB) with the command byte
)

// TestHostileLargeStatements: 16 logged-in clients send 64 MiB statements
// in a loop for 20 s while sysbench runs. Vigil's RSS stays under the
// statement budget plus a documented constant, sysbench has no errors,
// and RSS returns to within 2x of idle within a minute after.
func TestHostileLargeStatements(t *testing.T) {
	if _, err := exec.LookPath("sysbench"); err != nil {
		t.Fatal("sysbench is not installed: run scripts/install-deps.sh")
	}
	env := newHostileEnv(t, 2, nil)
	budget := int64(env.cfg.Security.StatementMemory)
	ctx := context.Background()
	// The servers must take the statements (their default is 16 MiB);
	// no client has logged in yet, so every pooled connection sees this.
	for _, n := range env.sb.NodeNames() {
		if _, err := env.sb.SQL(ctx, n, "SET GLOBAL max_allowed_packet = 128*1024*1024"); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
	}
	if out, err := runSysbench(env.addr, "oltp_read_only", "prepare"); err != nil {
		t.Fatalf("sysbench prepare: %v\n%s", err, out)
	}
	pid := env.v.pid()
	time.Sleep(3 * time.Second) // the replica catches up; Vigil settles
	idle := rssKiB(pid)
	t.Logf("budget (security.statement_memory) %d MiB; RSS idle %d KiB", budget>>20, idle)

	stmt := "SELECT LENGTH('" + strings.Repeat("x", largeStatement-len("SELECT LENGTH('')")-1) + "')"
	want := int64(largeStatement - len("SELECT LENGTH('')") - 1)
	host, port, _ := strings.Cut(env.addr, ":")
	big := fmt.Sprintf("?maxAllowedPacket=%d&readTimeout=60s&writeTimeout=60s", 128<<20)
	// What one statement costs alone, through Vigil and to a server.
	names := env.sb.NodeNames()
	for _, target := range []struct{ name, dsn string }{
		{"vigil", fmt.Sprintf("app:app@tcp(%s:%s)/sbtest", host, port) + big},
		{names[len(names)-1], env.sb.DSN(names[len(names)-1], "app", "app", "sbtest") + big},
	} {
		one := openDB(t, target.dsn)
		var times []time.Duration
		for range 3 {
			start := time.Now()
			var n int64
			if err := one.QueryRow(stmt).Scan(&n); err != nil || n != want {
				t.Fatalf("one 64 MiB statement to %s: %d %v", target.name, n, err)
			}
			times = append(times, time.Since(start))
		}
		one.Close()
		t.Logf("one 64 MiB statement alone to %s: %v", target.name, times)
	}

	rss := sampleRSS(pid, 100*time.Millisecond)
	var memMax, heapMax, idleMax atomic.Int64
	limit, _ := env.metric("go_gc_gomemlimit_bytes")
	stopMem := make(chan struct{})
	memDone := make(chan struct{})
	go func() {
		defer close(memDone)
		for {
			if _, body, err := env.get("/metrics"); err == nil {
				for _, m := range []struct {
					series string
					max    *atomic.Int64
				}{{"vigil_statement_memory_bytes", &memMax}, {"go_memstats_heap_inuse_bytes", &heapMax}} {
					if v := int64(metricIn(body, m.series)); v > m.max.Load() {
						m.max.Store(v)
					}
				}
				if v := int64(metricIn(body, "go_memstats_heap_idle_bytes") - metricIn(body, "go_memstats_heap_released_bytes")); v > idleMax.Load() {
					idleMax.Store(v)
				}
			}
			select {
			case <-stopMem:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()

	type sbResult struct {
		out string
		err error
	}
	sb := make(chan sbResult, 1)
	go func() {
		out, err := runSysbench(env.addr, "oltp_read_only", "--threads=4", "--time=24", "--report-interval=0", "--mysql-ignore-errors=none", "run")
		sb <- sbResult{out, err}
	}()
	time.Sleep(2 * time.Second) // sysbench is under way

	db, err := sql.Open("mysql", fmt.Sprintf("app:app@tcp(%s:%s)/sbtest", host, port)+big)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(largeClients)
	var ok, refused atomic.Int64
	var errMu sync.Mutex
	var otherErrs []string
	until := time.Now().Add(20 * time.Second)
	var wg sync.WaitGroup
	for range largeClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(until) {
				var n int64
				err := db.QueryRow(stmt).Scan(&n)
				var me *mysql.MySQLError
				switch {
				case err == nil && n == want:
					ok.Add(1)
				case errors.As(err, &me) && me.Number == 1041:
					refused.Add(1)
				default:
					errMu.Lock()
					otherErrs = append(otherErrs, fmt.Sprintf("n=%d err=%v", n, err))
					errMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	loadEnd := time.Now()
	db.Close()
	res := <-sb
	peak, samples := rss.stop()
	close(stopMem)
	<-memDone

	// Back to idle.
	var back time.Duration = -1
	var after int64
	for time.Since(loadEnd) < 60*time.Second {
		after = rssKiB(pid)
		if after <= 2*idle {
			back = time.Since(loadEnd)
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	waited, _ := env.metric(`vigil_statement_memory_total{event="waited"}`)
	refusedM, _ := env.metric(`vigil_statement_memory_total{event="refused"}`)
	over, _ := env.metric(`vigil_statement_memory_total{event="overdraft"}`)
	qps := "?"
	if m := reQueries.FindStringSubmatch(res.out); m != nil {
		qps = m[2]
	}
	t.Logf("large statements: %d done, %d refused with 1041, %d other errors; budget waits %.0f, refusals %.0f, overdrafts %.0f; statement memory peak %d MiB (sampled); Go heap in use peak %d MiB, free and not returned peak %d MiB, memory limit %.0f MiB",
		ok.Load(), refused.Load(), len(otherErrs), waited, refusedM, over, memMax.Load()>>20, heapMax.Load()>>20, idleMax.Load()>>20, limit/(1<<20))
	t.Logf("RSS KiB: idle %d, peak %d (%d samples), %d after %s (bound %d = budget %d MiB + %d MiB); sysbench %s qps, %d errors",
		idle, peak, samples, after, back.Round(100*time.Millisecond), (budget+memConstant)>>10, budget>>20, memConstant>>20, qps, sysbenchErrors(res.out))
	if os.Getenv("VIGIL_E2E_MEM_TSV") != "" {
		// One line per run for docs/security.md's table.
		f, err := os.OpenFile(os.Getenv("VIGIL_E2E_MEM_TSV"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(f, "%d\t%d\t%d\t%s\t%d\t%d\t%s\n", idle, peak, after, strconv.FormatFloat(back.Seconds(), 'f', 1, 64), ok.Load(), refused.Load(), qps)
			f.Close()
		}
	}

	if res.err != nil || sysbenchErrors(res.out) != 0 {
		t.Errorf("sysbench during the large statements: %v, %d errors\n%s", res.err, sysbenchErrors(res.out), res.out)
	}
	if len(otherErrs) > 0 {
		t.Errorf("large statements failed other than with 1041: %d, first: %s", len(otherErrs), otherErrs[0])
	}
	if ok.Load() == 0 {
		t.Errorf("no large statement passed")
	}
	if peak<<10 > budget+memConstant {
		t.Errorf("RSS peak %d KiB over the budget %d MiB + %d MiB", peak, budget>>20, memConstant>>20)
	}
	if back < 0 {
		t.Errorf("RSS %d KiB a minute after the load, more than 2x idle (%d KiB)", after, idle)
	}
}
