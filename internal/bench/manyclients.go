package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// fdHeadroom is what a process needs besides its client connections:
// listeners, logs, pools, tables.
const fdHeadroom = 500

// genConn is how the Go load generator reaches addr.
func (e *env) genConn(addr string) GenConn {
	app := e.sb.Accounts().App
	return GenConn{Addr: addr, User: app.User, Password: app.Password, DB: "sbtest", Tables: e.o.Tables, TableSize: e.o.TableSize}
}

// measureChurn is one connection-churn run.
func (e *env) measureChurn(ctx context.Context, c Case, t Target, d time.Duration, logPath string) Measurement {
	gc := e.genConn(t.Addr)
	return e.measureGo(ctx, c, t, logPath, func(ctx context.Context) LoadResult {
		return RunChurn(ctx, gc, c.Threads, d)
	})
}

// measureMany opens c.Idle idle connections, then measures c.Threads
// workers of point selects next to them; the servers' connections are
// counted halfway through.
func (e *env) measureMany(ctx context.Context, c Case, t Target, d time.Duration, logPath string) Measurement {
	if reason := e.manyClientsSkip(t, c.Idle+c.Threads); reason != "" {
		return Measurement{Scenario: c.Scenario.Name, Target: t.Name, Threads: c.Threads, Idle: c.Idle,
			Start: time.Now(), Generator: "go", Skipped: reason}
	}
	gc := e.genConn(t.Addr)
	base, baseErr := e.threadsConnected(ctx)
	idle := OpenIdle(ctx, gc, c.Idle, 32)
	defer func() {
		idle.Close()
		// Direct and through HAProxy every client is a server
		// connection: wait until the servers have let them go. Vigil's
		// pools keep theirs, as they should.
		if baseErr == nil && t.Admin == "" {
			e.waitConnectionsBelow(ctx, base+10, 30*time.Second)
		}
	}()
	var conns atomic.Int64
	conns.Store(-1)
	r := e.measureGo(ctx, c, t, logPath, func(ctx context.Context) LoadResult {
		done := make(chan struct{})
		go func() {
			defer close(done)
			sleepCtx(ctx, d/2)
			if n, ok := e.serverConnections(ctx, t, base, baseErr); ok {
				conns.Store(n)
			}
		}()
		lr := RunPointSelects(ctx, gc, c.Threads, d)
		<-done
		return lr
	})
	r.OpenSeconds = ptr(idle.Took.Seconds())
	if n := conns.Load(); n >= 0 {
		r.ServerConnections = ptr(n)
	}
	if idle.Errors > 0 {
		r.Sysbench.IgnoredErrors += idle.Errors
		msg := fmt.Sprintf("%d of %d idle connections could not be opened: %s", idle.Errors, c.Idle, idle.FirstError)
		if r.Sysbench.FirstError == "" {
			r.Sysbench.FirstError = msg
		}
		if r.Error == "" {
			r.Error = msg
		}
	}
	return r
}

// serverConnections are the server connections t uses now: what Vigil's
// pools hold, by its admin API; for the others the growth of
// Threads_connected over all nodes since base.
func (e *env) serverConnections(ctx context.Context, t Target, base int64, baseErr error) (int64, bool) {
	if t.Admin != "" {
		n, err := adminAPI{addr: t.Admin, token: t.adminToken}.poolOpen(ctx)
		return int64(n), err == nil
	}
	if baseErr != nil {
		return 0, false
	}
	n, err := e.threadsConnected(ctx)
	return n - base, err == nil
}

// waitConnectionsBelow waits until the servers have closed the
// connections of a run, so the next target starts from the same count.
func (e *env) waitConnectionsBelow(ctx context.Context, n int64, timeout time.Duration) {
	err := waitFor(ctx, timeout, fmt.Sprintf("at most %d server connections", n), func() error {
		got, err := e.threadsConnected(ctx)
		if err != nil {
			return err
		}
		if got > n {
			return fmt.Errorf("%d connections", got)
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		e.note("%v", err)
	}
}

// manyClientsSkip says why t cannot hold n connections here, or "".
func (e *env) manyClientsSkip(t Target, n int) string {
	if lim := openFileLimit(os.Getpid()); lim > 0 && int64(n+fdHeadroom) > lim {
		return fmt.Sprintf("the load generator's open-file limit %d is below %d connections", lim, n)
	}
	switch t.Name {
	case TargetHAProxy:
		if n > e.haproxyMaxConn {
			return fmt.Sprintf("HAProxy needs two descriptors per connection: the open-file limit %d allows maxconn %d, below %d connections",
				e.fileLimit, e.haproxyMaxConn, n)
		}
	case TargetDirect:
		for _, node := range e.sb.Nodes() {
			if node.Name != e.primary {
				continue
			}
			if lim := openFileLimit(node.PID); lim > 0 && int64(n+fdHeadroom) > lim {
				return fmt.Sprintf("mariadbd's open-file limit %d is below %d connections", lim, n)
			}
		}
	default:
		if lim := openFileLimit(t.PID); t.PID != 0 && lim > 0 && int64(n+fdHeadroom) > lim {
			return fmt.Sprintf("%s's open-file limit %d is below %d connections", t.Name, lim, n)
		}
	}
	return ""
}

// raiseMaxConnections lets the primary take n more connections than it
// has for a many_clients case (the sandbox allows 1,000) and returns
// how to restore the old setting.
func (e *env) raiseMaxConnections(ctx context.Context, n int) func() {
	db := e.rootDBs[e.primary]
	var old int
	if err := db.QueryRowContext(ctx, "SELECT @@max_connections").Scan(&old); err != nil {
		e.note("max_connections: %v", err)
		return func() {}
	}
	want := n + 200
	if want <= old {
		return func() {}
	}
	if _, err := db.ExecContext(ctx, "SET GLOBAL max_connections = "+strconv.Itoa(want)); err != nil {
		e.note("raising max_connections on %s to %d: %v", e.primary, want, err)
		return func() {}
	}
	return func() {
		if _, err := db.ExecContext(context.Background(), "SET GLOBAL max_connections = "+strconv.Itoa(old)); err != nil {
			e.note("restoring max_connections on %s: %v", e.primary, err)
		}
	}
}

// ParseLimits reads the soft "Max open files" of /proc/PID/limits; 0 when
// it is missing or unlimited.
func ParseLimits(data string) int64 {
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Max open files")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0
		}
		return n
	}
	return 0
}

func openFileLimit(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return 0
	}
	return ParseLimits(string(data))
}
