package backend

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-db/vigil/internal/mysqlproto"
)

// Options configure one server's pool. The zero value is usable.
type Options struct {
	MinIdle      int
	MaxOpen      int           // default 100
	IdleTimeout  time.Duration // default 5m
	MaxLifetime  time.Duration // default 1h
	ValidateIdle time.Duration // ping a connection idle longer than this on checkout; default 10s
	TLS          *tls.Config
	// Credentials returns the server login for a client user.
	Credentials func(user string) (backendUser, password string, ok bool)
	// Dial opens and authenticates a server connection; nil is
	// mysqlproto.Dial. Tests give the pool a fake server this way.
	Dial func(ctx context.Context, cfg *mysqlproto.DialConfig) (*mysqlproto.Conn, *mysqlproto.Greeting, error)
}

func (o *Options) defaults() {
	if o.MaxOpen <= 0 {
		o.MaxOpen = 100
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 5 * time.Minute
	}
	if o.MaxLifetime <= 0 {
		o.MaxLifetime = time.Hour
	}
	if o.ValidateIdle <= 0 {
		o.ValidateIdle = 10 * time.Second
	}
	if o.Dial == nil {
		o.Dial = mysqlproto.Dial
	}
}

// ErrPoolExhausted is returned when no connection frees up in time.
var ErrPoolExhausted = errors.New("server connection pool exhausted")

// Stats are a pool's counters.
type Stats struct {
	Open, Idle, InUse int
	Waits             int64 // checkouts that had to wait
	Dials, DialErrors int64
}

// Pool holds connections to one server.
type Pool struct {
	Name  string
	Addr  string
	Index int
	opts  Options
	log   *slog.Logger

	mu      sync.Mutex
	idle    map[Key][]*Conn
	open    int
	notify  chan struct{} // closed and replaced when a connection is returned or closed
	waiters int           // goroutines waiting on notify
	closed  bool
	keys    map[Key]time.Time // keys seen, for min_idle
	// ids are the server connection ids of the connections open now.
	ids map[uint32]struct{}

	waits, dials, dialErrors atomic.Int64
	fenced                   atomic.Bool
}

// ErrFenced is returned by Get for a fenced server.
var ErrFenced = errors.New("server is fenced")

// SetFenced makes the pool refuse connections (true) or serve again.
func (p *Pool) SetFenced(on bool) { p.fenced.Store(on) }

// NewPool makes a pool for one server.
func NewPool(name, addr string, index int, opts Options, log *slog.Logger) *Pool {
	opts.defaults()
	return &Pool{Name: name, Addr: addr, Index: index, opts: opts, log: log,
		idle: map[Key][]*Conn{}, notify: make(chan struct{}), keys: map[Key]time.Time{}, ids: map[uint32]struct{}{}}
}

// SetOptions changes limits and credentials (hot reload).
func (p *Pool) SetOptions(opts Options) {
	opts.defaults()
	p.mu.Lock()
	p.opts = opts
	p.mu.Unlock()
}

// Get lends a connection for key, dialing if needed and waiting (bounded
// by ctx) when the pool is full. With want, an idle connection already in
// that state is preferred, and a session without a default schema only
// ever gets a connection without one (MariaDB cannot unset it).
func (p *Pool) Get(ctx context.Context, key Key, want *State) (*Conn, error) {
	if p.fenced.Load() {
		return nil, fmt.Errorf("%w: %s", ErrFenced, p.Name)
	}
	waited := false
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, fmt.Errorf("pool for %s is closed", p.Name)
		}
		p.keys[key] = time.Now()
		if c := p.popIdleLocked(key, want); c != nil {
			p.mu.Unlock()
			if c, err := p.checkout(ctx, c); err == nil && c != nil {
				return c, nil
			}
			continue
		}
		if p.open < p.opts.MaxOpen {
			p.open++
			p.mu.Unlock()
			c, err := p.dial(ctx, key)
			if err != nil {
				p.release()
				return nil, err
			}
			return c, nil
		}
		// Full: close an idle connection that cannot serve to make room.
		if victim := p.popAnyIdleLocked(); victim != nil {
			p.mu.Unlock()
			p.discard(victim)
			continue
		}
		ch := p.notify
		p.waiters++
		p.mu.Unlock()
		if !waited {
			waited = true
			p.waits.Add(1)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			p.mu.Lock()
			if p.notify == ch {
				// Not woken: still counted. (A wake-up uncounts every
				// waiter and replaces notify.)
				p.waiters--
			}
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: %d of %d connections to %s in use", ErrPoolExhausted, p.opts.MaxOpen, p.opts.MaxOpen, p.Name)
		}
	}
}

// TryGet lends an idle connection for key that needs no ping, or returns
// nil; it never dials or waits. want is as for Get.
func (p *Pool) TryGet(key Key, want *State) *Conn {
	if p.fenced.Load() {
		return nil
	}
	now := time.Now()
	p.mu.Lock()
	l := p.idle[key]
	i := pickIdle(l, want)
	if i < 0 {
		p.mu.Unlock()
		return nil
	}
	c := l[i]
	if now.Sub(c.lastUsed) > p.opts.ValidateIdle || now.Sub(c.created) > p.opts.MaxLifetime {
		// Needs a ping or is too old: the slow path handles it.
		p.mu.Unlock()
		return nil
	}
	p.idle[key] = removeAt(l, i)
	if ks, ok := p.keys[key]; !ok || now.Sub(ks) > time.Second {
		p.keys[key] = now
	}
	p.mu.Unlock()
	if p.closedWhileIdle(c, now) {
		return nil // the slow path finds or makes another
	}
	return c
}

// closedWhileIdle reports whether c, just taken from the idle
// connections, was closed by the server while it waited there
// (Conn.ClosedWhileIdle), and then closes it and frees its slot.
func (p *Pool) closedWhileIdle(c *Conn, now time.Time) bool {
	if !c.ClosedWhileIdle(now) {
		return false
	}
	p.discard(c)
	return true
}

// errServerClosed: an idle connection the server had closed.
var errServerClosed = errors.New("closed by the server while idle")

func (p *Pool) checkout(ctx context.Context, c *Conn) (*Conn, error) {
	now := time.Now()
	if now.Sub(c.created) > p.opts.MaxLifetime {
		p.discard(c)
		return nil, errors.New("expired")
	}
	if p.closedWhileIdle(c, now) {
		return nil, errServerClosed
	}
	if now.Sub(c.lastUsed) > p.opts.ValidateIdle {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := c.Ping(pctx)
		cancel()
		if err != nil {
			p.discard(c)
			return nil, err
		}
	}
	return c, nil
}

func (p *Pool) popIdleLocked(key Key, want *State) *Conn {
	l := p.idle[key]
	i := pickIdle(l, want)
	if i < 0 {
		return nil
	}
	c := l[i]
	p.idle[key] = removeAt(l, i)
	return c
}

func (p *Pool) popAnyIdleLocked() *Conn {
	for k, l := range p.idle {
		if len(l) > 0 {
			return p.popIdleLocked(k, nil)
		}
	}
	return nil
}

// pickScan is how many of the most recently used idle connections are
// looked at for one already in the wanted state.
const pickScan = 4

// pickIdle chooses the idle connection to lend from l (most recently used
// last): the newest that already has the wanted state among the last
// pickScan, else the newest. A session without a default schema can only
// use a connection without one; -1 when there is none.
func pickIdle(l []*Conn, want *State) int {
	n := len(l)
	if n == 0 {
		return -1
	}
	if want == nil {
		return n - 1
	}
	for i := n - 1; i >= 0 && i >= n-pickScan; i-- {
		if l[i].State.Satisfies(want) {
			return i
		}
	}
	if want.Schema != "" {
		return n - 1
	}
	for i := n - 1; i >= 0; i-- {
		if l[i].State.Schema == "" {
			return i
		}
	}
	return -1
}

// removeAt removes l[i], keeping the order (the newest stays last).
func removeAt(l []*Conn, i int) []*Conn {
	copy(l[i:], l[i+1:])
	l[len(l)-1] = nil
	return l[:len(l)-1]
}

// release frees one slot and wakes waiters.
func (p *Pool) release() {
	p.mu.Lock()
	p.open--
	p.wakeLocked()
	p.mu.Unlock()
}

func (p *Pool) wakeLocked() {
	if p.waiters == 0 {
		return
	}
	p.waiters = 0
	close(p.notify)
	p.notify = make(chan struct{})
}

// Put returns a connection. A connection that is broken (an I/O error,
// an error reply that closes the connection), has unread or unsent bytes,
// or whose last replies had an error after which its socket shows the
// server closed it (Conn.ServerClosed) is closed instead, as are all of a
// fenced server's: none of them ever serves another client.
func (p *Pool) Put(c *Conn) {
	errSeen := c.errSeen
	c.errSeen = false
	if c.Broken || c.Buffered() > 0 || c.Pending() > 0 || p.fenced.Load() || (errSeen && c.ServerClosed()) {
		p.discard(c)
		return
	}
	c.lastUsed = time.Now()
	c.ReleaseBig()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.discard(c)
		return
	}
	c.puts++
	p.idle[c.key] = append(p.idle[c.key], c)
	p.wakeLocked()
	p.mu.Unlock()
}

// ReclaimInsert takes c back from the idle connections if the last
// statement that set its LAST_INSERT_ID() is still the one token names.
func (p *Pool) ReclaimInsert(c *Conn, token uint64) bool {
	return p.reclaim(c, func() bool { return c.InsertToken == token })
}

// Reclaim takes c back from the idle connections if nobody used it since
// the Put whose c.NextPut() was puts: its session state, diagnostics area
// and the like are then exactly as the caller left them.
func (p *Pool) Reclaim(c *Conn, puts uint64) bool {
	return p.reclaim(c, func() bool { return c.puts == puts })
}

// reclaim takes c back from the idle connections if it is there and ok
// (called with the pool's mutex held) says it is still as the caller left
// it. A connection the server closed meanwhile is closed, not reclaimed.
func (p *Pool) reclaim(c *Conn, ok func() bool) bool {
	if p.fenced.Load() {
		return false
	}
	now := time.Now()
	p.mu.Lock()
	l := p.idle[c.key]
	i := len(l) - 1
	for i >= 0 && l[i] != c {
		i--
	}
	if i < 0 || !ok() {
		p.mu.Unlock()
		return false
	}
	p.idle[c.key] = removeAt(l, i)
	p.mu.Unlock()
	return !p.closedWhileIdle(c, now)
}

// Discard closes a connection that must not be reused.
func (p *Pool) Discard(c *Conn) { p.discard(c) }

func (p *Pool) discard(c *Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.ids, c.ID)
	p.mu.Unlock()
	p.release()
}

// ConnIDs are the server connection ids of the pool's open connections,
// idle or lent: what to KILL on the server when Vigil must be sure that
// nothing still in flight on them runs (a fenced server that returns).
func (p *Pool) ConnIDs() []uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]uint32, 0, len(p.ids))
	for id := range p.ids {
		out = append(out, id)
	}
	return out
}

func (p *Pool) dial(ctx context.Context, key Key) (*Conn, error) {
	p.dials.Add(1)
	p.mu.Lock()
	opts := p.opts
	p.mu.Unlock()
	user, pass, ok := key.User, "", false
	if opts.Credentials != nil {
		user, pass, ok = opts.Credentials(key.User)
	}
	if !ok {
		p.dialErrors.Add(1)
		return nil, fmt.Errorf("no server credentials for user %q", key.User)
	}
	mc, g, err := opts.Dial(ctx, &mysqlproto.DialConfig{
		Addr: p.Addr, User: user, Password: pass, Flavour: key.Flavour, Collation: key.Collation, TLS: opts.TLS,
		Attrs: map[string]string{"program_name": "vigil"},
	})
	if err != nil {
		p.dialErrors.Add(1)
		return nil, fmt.Errorf("connecting to %s (%s): %w", p.Name, p.Addr, err)
	}
	c := &Conn{
		Conn: mc, pool: p, key: key, ID: g.ConnectionID, Server: p.Name, Index: p.Index,
		created: time.Now(), lastUsed: time.Now(),
		SessionTrack: g.Capabilities&mysqlproto.CapabilityClientSessionTrack != 0,
		DeprecateEOF: g.Capabilities&mysqlproto.CapabilityClientDeprecateEOF != 0,
		MySQL:        IsMySQL(g.ServerVersion),
	}
	if err := c.init(ctx); err != nil {
		c.Close()
		p.dialErrors.Add(1)
		return nil, fmt.Errorf("preparing connection to %s (%s): %w", p.Name, p.Addr, err)
	}
	p.mu.Lock()
	p.ids[c.ID] = struct{}{}
	p.mu.Unlock()
	return c, nil
}

// initSQL turns on the session tracking Vigil relies on and reads the
// character-set variables the handshake set. MariaDB reports a session's
// last write through the last_gtid variable (tracked with '*'); MySQL has
// no such variable and reports the GTID of each of the session's own
// transactions when session_track_gtids=OWN_GTID (initSQLMySQL).
const (
	trackSQL   = "SET SESSION session_track_system_variables='*', session_track_schema=ON, session_track_state_change=ON"
	charsetSQL = ";SELECT @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection"

	initSQL      = trackSQL + charsetSQL
	initSQLMySQL = trackSQL + ", session_track_gtids=OWN_GTID" + charsetSQL
)

// IsMySQL tells MySQL (and Percona Server) from MariaDB by the version
// string of the server's greeting: MariaDB's always says "MariaDB".
func IsMySQL(version string) bool {
	return version != "" && !strings.Contains(strings.ToLower(version), "mariadb")
}

// RestoreTracking turns on again, on c, the session tracking Vigil relies
// on, after a client changed its own.
func (c *Conn) RestoreTracking(ctx context.Context) error {
	q := trackSQL
	if c.MySQL {
		q += ", session_track_gtids=OWN_GTID"
	}
	_, err := c.Exec(ctx, q)
	return err
}

func (c *Conn) init(ctx context.Context) error {
	q := initSQL
	if c.MySQL {
		q = initSQLMySQL
	}
	res, err := c.Exec(ctx, q)
	if err != nil {
		return err
	}
	c.Base = map[string]string{}
	if len(res.Rows) == 1 && len(res.Rows[0]) == 4 {
		for i, n := range []string{"character_set_client", "character_set_connection", "character_set_results", "collation_connection"} {
			c.Base[n] = res.Rows[0][i]
		}
	}
	// What init itself changed is the baseline, not session state.
	c.State.Reset("")
	return nil
}

// Stats returns the pool's counters.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	idle := 0
	for _, l := range p.idle {
		idle += len(l)
	}
	return Stats{Open: p.open, Idle: idle, InUse: p.open - idle, Waits: p.waits.Load(), Dials: p.dials.Load(), DialErrors: p.dialErrors.Load()}
}

// CloseIdle closes every idle connection (e.g. when the server is fenced).
func (p *Pool) CloseIdle() {
	p.mu.Lock()
	var all []*Conn
	for k, l := range p.idle {
		all = append(all, l...)
		delete(p.idle, k)
	}
	p.mu.Unlock()
	for _, c := range all {
		p.discard(c)
	}
}

// Close closes the pool and its idle connections; connections in use are
// closed when returned.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	p.wakeLocked() // waiters see closed at once, not when their context ends
	p.mu.Unlock()
	p.CloseIdle()
}

// Maintain runs until ctx ends: closes connections idle too long or too
// old and keeps min_idle connections open for keys in use.
func (p *Pool) Maintain(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.sweep(ctx)
	}
}

func (p *Pool) sweep(ctx context.Context) {
	now := time.Now()
	var stale []*Conn
	p.mu.Lock()
	opts := p.opts
	for k, l := range p.idle {
		keep := l[:0]
		for _, c := range l {
			// Idle ones the server closed go too (nobody uses an idle
			// connection: looking at its socket under the mutex is safe),
			// which frees their slots.
			if now.Sub(c.lastUsed) > opts.IdleTimeout || now.Sub(c.created) > opts.MaxLifetime || c.ServerClosed() {
				stale = append(stale, c)
			} else {
				keep = append(keep, c)
			}
		}
		p.idle[k] = keep
	}
	var fill []Key
	for k, seen := range p.keys {
		if now.Sub(seen) > opts.IdleTimeout {
			delete(p.keys, k)
			continue
		}
		for range opts.MinIdle - len(p.idle[k]) {
			if p.open+len(fill) < opts.MaxOpen {
				fill = append(fill, k)
			}
		}
	}
	p.open += len(fill)
	p.mu.Unlock()
	for _, c := range stale {
		p.discard(c)
	}
	for _, k := range fill {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := p.dial(dctx, k)
		cancel()
		if err != nil {
			p.release()
			p.log.Debug("min_idle connection failed", "server", p.Name, "err", err)
			continue
		}
		p.Put(c)
	}
}

// Kill asks the server to kill a connection's query (query=true) or the
// connection itself, over a fresh connection.
func (p *Pool) Kill(ctx context.Context, user string, id uint32, query bool) error {
	p.mu.Lock()
	opts := p.opts
	p.mu.Unlock()
	u, pass, ok := user, "", false
	if opts.Credentials != nil {
		u, pass, ok = opts.Credentials(user)
	}
	if !ok {
		return fmt.Errorf("no server credentials for user %q", user)
	}
	mc, g, err := opts.Dial(ctx, &mysqlproto.DialConfig{Addr: p.Addr, User: u, Password: pass, TLS: opts.TLS})
	if err != nil {
		return err
	}
	c := &Conn{Conn: mc, Server: p.Name, SessionTrack: g.Capabilities&mysqlproto.CapabilityClientSessionTrack != 0}
	defer c.Close()
	what := "CONNECTION"
	if query {
		what = "QUERY"
	}
	_, err = c.Exec(ctx, fmt.Sprintf("KILL %s %d", what, id))
	if err != nil && strings.Contains(err.Error(), "Unknown thread") {
		return nil
	}
	return err
}
