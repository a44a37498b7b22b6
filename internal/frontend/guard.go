package frontend

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-db/vigil/internal/mysqlproto"
)

// GuardOptions configure the LoginGuard (config: security).
type GuardOptions struct {
	HandshakeTimeout               time.Duration
	MaxUnauthenticated, MaxPerHost int
	Free, FreePerHost              int
	Delay, MaxDelay, Window        time.Duration
	BlockAfter                     int
	BlockFor                       time.Duration
}

// maxTracked bounds the failure records a guard keeps: an attacker
// cycling through user names or addresses cannot grow them further (the
// oldest are forgotten first once expired; beyond that, new ones are not
// recorded per user, the per-address record still is).
const maxTracked = 100_000

// LoginGuard is shared by every listener: it bounds the connections that
// have not logged in (in total and per address) and slows, then
// optionally blocks, repeated failed logins per user and address and per
// address, in the spirit of MySQL's connection_control and
// max_connect_errors. Legitimate users from other addresses are never
// affected. Safe for concurrent use.
type LoginGuard struct {
	opts atomic.Pointer[GuardOptions]
	now  func() time.Time
	// onEvent reports a user and address that starts being throttled or
	// is blocked (journal events); may be nil.
	onEvent func(kind, host, user, msg string)

	mu sync.Mutex
	// table: the connections that have not logged in (admission.go).
	table *admitTable
	fails map[failKey]*failRec
	hosts map[string]*failRec
	// lastSweep: a full table is swept at most once a second.
	lastSweep time.Time

	// Counters for metrics.
	Refused, Evicted, Throttled, Blocked atomic.Int64
	// refuseWarn and evictWarn rate-limit the log lines of refusals and
	// evictions (an attack must not flood the log).
	refuseWarn, evictWarn rateWarn
}

// warn logs a refusal, at most one line per second.
func (g *LoginGuard) warn(log *slog.Logger, msg string, args ...any) {
	g.refuseWarn.warn(g.now, log, msg, args...)
}

// rateWarn logs at most one line per second.
type rateWarn struct{ last atomic.Int64 }

func (w *rateWarn) warn(now func() time.Time, log *slog.Logger, msg string, args ...any) {
	t := now().UnixNano()
	if last := w.last.Load(); t-last < int64(time.Second) || !w.last.CompareAndSwap(last, t) {
		return
	}
	log.Warn(msg+" (at most one such line per second; see vigil_login_guard_total)", args...)
}

type failKey struct{ user, host string }

type failRec struct {
	n       int
	last    time.Time
	blocked time.Time // until
}

// NewGuard makes a guard; onEvent may be nil.
func NewGuard(o GuardOptions, onEvent func(kind, host, user, msg string)) *LoginGuard {
	g := &LoginGuard{now: time.Now, onEvent: onEvent, table: newAdmitTable(), fails: map[failKey]*failRec{}, hosts: map[string]*failRec{}}
	g.SetOptions(o)
	return g
}

// SetOptions swaps the options (reload).
func (g *LoginGuard) SetOptions(o GuardOptions) {
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	g.opts.Store(&o)
}

func (g *LoginGuard) o() *GuardOptions { return g.opts.Load() }

// Unauthenticated is the number of connections not logged in yet.
func (g *LoginGuard) Unauthenticated() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.table.live
}

// admit enters a new connection from host, closed by conn, in the
// admission table until its ticket is released. When the table (or the
// address's share) is full, the oldest handshaking connection of the
// address holding the most makes room and is closed (admission.go;
// logged to log at most once a second); it refuses only when nothing can
// make room.
func (g *LoginGuard) admit(log *slog.Logger, host string, conn io.Closer) (*admitTicket, *mysqlproto.SQLError) {
	o := g.o()
	g.mu.Lock()
	a, victim, why := g.table.admit(host, conn, o.MaxUnauthenticated, o.MaxPerHost)
	live, charged := g.table.live, g.table.charged(host)
	g.mu.Unlock()
	switch why {
	case refusedTotal:
		g.Refused.Add(1)
		return nil, mysqlproto.NewError(mysqlproto.ERConCount, "08004",
			"Too many connections: %d connections have not logged in yet (security.max_unauthenticated_connections)", live)
	case refusedPerHost:
		g.Refused.Add(1)
		return nil, mysqlproto.NewError(mysqlproto.ERConCount, "08004",
			"Too many connections: %d connections from this address have not logged in yet (security.max_unauthenticated_per_host)", charged)
	}
	if victim != nil {
		g.Evicted.Add(1)
		_ = victim.conn.Close()
		g.evictWarn.warn(g.now, log, "closed the oldest connection that had not logged in to admit a new one",
			"evicted_from", victim.host.name, "admitted_from", host)
	}
	return &admitTicket{g: g, a: a}, nil
}

// admitTicket is a connection's place in the admission table.
type admitTicket struct {
	g *LoginGuard
	a *admission
}

// release takes the connection out of the table (twice is once).
func (k *admitTicket) release() {
	k.g.mu.Lock()
	k.g.table.release(k.a)
	k.g.mu.Unlock()
}

// stage says where the login stands: stageWait during a throttle delay,
// stageCheck while the servers check a right password. false: the
// connection was evicted (closed) already.
func (k *admitTicket) stage(s admitStage) bool {
	k.g.mu.Lock()
	defer k.g.mu.Unlock()
	return k.g.table.setStage(k.a, s)
}

// blocked reports whether user from host is blocked now.
func (g *LoginGuard) blocked(user, host string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.fails[failKey{user, host}]
	return r != nil && g.now().Before(r.blocked)
}

// failed records a failed login of user from host and returns how long
// its error must wait.
func (g *LoginGuard) failed(user, host string) time.Duration {
	o := g.o()
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	bump := func(r *failRec) *failRec {
		if r == nil || (o.Window > 0 && now.Sub(r.last) > o.Window && !now.Before(r.blocked)) {
			r = &failRec{}
		}
		r.n++
		r.last = now
		return r
	}
	if (len(g.fails) >= maxTracked || len(g.hosts) >= maxTracked) && now.Sub(g.lastSweep) >= time.Second {
		g.lastSweep = now
		g.sweepLocked(now, o.Window)
	}
	k := failKey{user, host}
	var ur *failRec
	if _, ok := g.fails[k]; ok || len(g.fails) < maxTracked {
		ur = bump(g.fails[k])
		g.fails[k] = ur
	}
	hr := g.hosts[host]
	if hr != nil || len(g.hosts) < maxTracked {
		hr = bump(hr)
		g.hosts[host] = hr
	}
	overUser, overHost := 0, 0
	if ur != nil && o.Free > 0 {
		overUser = ur.n - o.Free
	}
	if hr != nil && o.FreePerHost > 0 {
		overHost = hr.n - o.FreePerHost
	}
	over := max(overUser, overHost, 0)
	if ur != nil && o.BlockAfter > 0 && ur.n >= o.BlockAfter && !now.Before(ur.blocked) {
		ur.blocked = now.Add(o.BlockFor)
		g.Blocked.Add(1)
		g.event("login_blocked", host, user, "blocked for "+o.BlockFor.String()+" after repeated failed logins (security.failed_logins.block_after)")
	}
	if over <= 0 || o.Delay <= 0 {
		return 0
	}
	switch {
	case overUser == 1:
		g.event("login_throttled", host, user, fmt.Sprintf("more than %d failed logins of this user from this address: its failed logins are slowed down from now on (security.failed_logins.free)", o.Free))
	case overHost == 1:
		g.event("login_throttled", host, "", fmt.Sprintf("more than %d failed logins from this address (any users; the last was %q): every failed login from it is slowed down from now on (security.failed_logins.free_per_host)", o.FreePerHost, user))
	}
	g.Throttled.Add(1)
	d := o.Delay
	for i := 1; i < over && d < o.MaxDelay; i++ {
		d *= 2
	}
	return min(d, max(o.MaxDelay, o.Delay))
}

// succeeded forgets the failures of user from host.
func (g *LoginGuard) succeeded(user, host string) {
	g.mu.Lock()
	delete(g.fails, failKey{user, host})
	g.mu.Unlock()
}

func (g *LoginGuard) event(kind, host, user, msg string) {
	if g.onEvent != nil {
		// Outside the lock would be nicer; the callback only appends to
		// the journal.
		g.onEvent(kind, host, user, msg)
	}
}

// sweepLocked forgets records older than window that are not blocked.
func (g *LoginGuard) sweepLocked(now time.Time, window time.Duration) {
	for k, r := range g.fails {
		if now.Sub(r.last) > window && !now.Before(r.blocked) {
			delete(g.fails, k)
		}
	}
	for k, r := range g.hosts {
		if now.Sub(r.last) > window {
			delete(g.hosts, k)
		}
	}
}

// wait sleeps d, or until ctx ends.
func wait(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
