package monitor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/topology"
)

// probe checks one server. It owns the persistent monitor connection; only
// its goroutine (run) touches it.
type probe struct {
	m    *Monitor
	idx  int
	name string
	kick chan struct{}
	// urgent asks for a check at once, not spaced (SetWriter).
	urgent chan struct{}
	// stop ends run (the server was removed); set by startProbeLocked.
	stop context.CancelFunc
	// lastStart is when the latest check started.
	lastStart time.Time
	// lastOK: the latest check passed.
	lastOK bool
	// reconnect asks for a new monitor connection (credentials changed).
	reconnect atomic.Bool

	conn     *backend.Conn
	connAddr string
	flavor   topology.Flavor
	// semiSyncVar: the server has @@rpl_semi_sync_master_enabled built in.
	semiSyncVar bool
	seq         uint64
	// sinceFresh counts checks since the last fresh connection.
	sinceFresh int
	// refused is Connection_errors_max_connections at the previous check,
	// -1 before the first.
	refused int64
}

func newProbe(m *Monitor, idx int, name string) *probe {
	return &probe{m: m, idx: idx, name: name, kick: make(chan struct{}, 1), urgent: make(chan struct{}, 1), refused: -1}
}

// minCheckSpacing is the least time between the starts of two checks of
// a server when the second was asked for (a kick).
const minCheckSpacing = 100 * time.Millisecond

// run checks the server every Interval until ctx ends. A check that
// overruns the interval is followed by the next one at once; a kick (a
// client lost its connection, the writer failed) checks at once but no
// sooner than minCheckSpacing after the previous check; SetWriter's
// request (urgent) checks at once.
func (p *probe) run(ctx context.Context) {
	defer p.closeConn()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-p.urgent:
			// The executor waits for this check (a new writer must be
			// seen writable before writes go to it); it comes once per
			// step, never in storms.
		case <-p.kick:
			// Kicks come from SetWriter and from clients that lost a
			// connection: a storm of them must not turn into back-to-back
			// checks.
			if wait := minCheckSpacing - time.Since(p.lastStart); wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
			}
		}
		opts := p.m.options()
		start := time.Now()
		p.lastStart = start
		o := p.check(ctx, &opts, start)
		if ctx.Err() != nil {
			return // cancelled mid-check: the failure is ours, not the server's
		}
		p.m.log.Debug("check", "server", p.name, "seq", o.Seq, "ok", o.OK, "took", o.Took, "err", o.Err, "client_replies", o.ClientReplies, "client_waiting", o.ClientWaiting)
		p.m.observe(p.idx, o)
		next := opts.Interval
		if p.lastOK && lostConnection(o) {
			// The server closed or reset the monitor connection: a new
			// connection at once tells a process that is gone (refused)
			// from one that restarted or only dropped the connection.
			// Once per streak: a server that keeps failing is checked
			// at the interval.
			next = min(next, minCheckSpacing)
		}
		p.lastOK = o.OK
		timer.Reset(max(next-time.Since(start), 0))
	}
}

// checkUrgent asks for a check at once, without minCheckSpacing; it never
// blocks.
func (p *probe) checkUrgent() {
	select {
	case p.urgent <- struct{}{}:
	default:
	}
}

// kickNow asks for a check at once; it never blocks.
func (p *probe) kickNow() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// lostConnection reports whether a check failed because an established
// monitor connection was closed or reset under it, quickly: not a
// timeout, not a refused connection, not a server's answer.
func lostConnection(o *topology.Observation) bool {
	return !o.OK && !o.TimedOut && !o.Refused && !o.Overloaded && o.ErrCode == 0
}

// check runs one check, bounded by opts.Timeout, and returns what it saw.
func (p *probe) check(ctx context.Context, opts *Options, start time.Time) *topology.Observation {
	p.seq++
	o := &topology.Observation{
		Server: p.name, Seq: p.seq, Time: start, HeartbeatLag: -1,
		Connections: topology.ConnectionStatus{MaxConnections: -1, ThreadsConnected: -1},
	}
	// Passive evidence: client statements the server completed while the
	// check ran (only completions count — a statement stuck on a stopped
	// server does not — and only those after the check started), and
	// those that were waiting for it when the check started.
	var replies uint64
	if opts.Activity != nil {
		replies, o.ClientWaiting = opts.Activity(p.idx)
	}
	defer func() {
		o.Took = time.Since(start)
		if opts.Activity != nil {
			n, _ := opts.Activity(p.idx)
			o.ClientReplies = n - replies
		}
	}()
	cctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	addr := opts.Servers[p.idx].Addr
	if p.reconnect.Swap(false) || (p.conn != nil && (p.conn.Broken || p.connAddr != addr)) {
		p.closeConn()
	}
	fresh := false
	if p.conn == nil {
		c, err := p.dial(cctx, opts, addr)
		if err != nil {
			p.fail(o, fmt.Errorf("connecting: %w", err))
			return o
		}
		p.conn, p.connAddr, fresh = c, addr, true
		p.sinceFresh = 0
	}
	o.Flavor = p.flavor
	writer := false
	if snap := p.m.holder.Load(); snap != nil && snap.Writer == p.idx {
		writer = true
	}
	if err := collect(cctx, p.conn, p.flavor, p.semiSyncVar, opts, writer && opts.Heartbeat.Write, o); err != nil {
		if !isSQLError(err) {
			p.closeConn()
		}
		p.fail(o, err)
		return o
	}
	o.OK = true
	p.noteConnections(o)

	p.sinceFresh++
	if !fresh && opts.ConnectCheckEvery > 0 && p.sinceFresh >= opts.ConnectCheckEvery {
		p.sinceFresh = 0
		p.connectTest(ctx, opts, addr, o)
	}
	return o
}

// noteConnections marks the observation overloaded when ordinary clients
// cannot connect now: the server is at max_connections, or refused
// connections with error 1040 since the previous check.
func (p *probe) noteConnections(o *topology.Observation) {
	c := o.Connections
	prev := p.refused
	p.refused = c.RefusedTotal
	switch {
	case c.Full():
		o.Overloaded, o.OverloadCode = true, erConCount
		o.OverloadReason = fmt.Sprintf("Threads_connected %d ≥ max_connections %d: new connections get error 1040",
			c.ThreadsConnected, c.MaxConnections)
	case prev >= 0 && c.RefusedTotal > prev:
		o.Overloaded, o.OverloadCode = true, erConCount
		o.OverloadReason = fmt.Sprintf("%d connections refused with error 1040 since the previous check",
			c.RefusedTotal-prev)
	}
}

// connectTest opens and closes a fresh connection: the persistent one
// cannot tell whether the server still accepts new ones.
func (p *probe) connectTest(ctx context.Context, opts *Options, addr string, o *topology.Observation) {
	cctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	c, err := p.dial(cctx, opts, addr)
	if err == nil {
		quit(c)
		return
	}
	if ctx.Err() != nil {
		return
	}
	if code := sqlErrorCode(err); overloadCode(code) {
		if !o.Overloaded {
			o.Overloaded, o.OverloadCode, o.OverloadReason = true, code, overloadText(code, err)
		}
		return
	}
	// The monitor connection works but new connections fail: clients
	// cannot connect either, so the check fails.
	o.OK = false
	p.fail(o, fmt.Errorf("new connection (connectability test): %w", err))
}

// fail records a failed check. Overload errors and refused logins make an
// observation without data that says the server is alive.
func (p *probe) fail(o *topology.Observation, err error) {
	o.OK = false
	o.Err = err.Error()
	o.ErrCode = sqlErrorCode(err)
	o.Refused = errors.Is(err, syscall.ECONNREFUSED)
	o.TimedOut = isTimeout(err)
	if overloadCode(o.ErrCode) {
		o.Overloaded, o.OverloadCode, o.OverloadReason = true, o.ErrCode, overloadText(o.ErrCode, err)
	}
}

// isTimeout reports whether err is a deadline that passed (the socket's or
// the check's context), as opposed to a refusal, a reset or a server error.
func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (p *probe) dial(ctx context.Context, opts *Options, addr string) (*backend.Conn, error) {
	mc, g, err := mysqlproto.Dial(ctx, &mysqlproto.DialConfig{
		Addr: addr, User: opts.User, Password: opts.Password,
		Attrs: map[string]string{"program_name": "vigil-monitor"},
	})
	if err != nil {
		return nil, err
	}
	p.flavor = topology.FlavorOf(g.ServerVersion)
	p.semiSyncVar = hasSemiSyncVar(g.ServerVersion)
	return &backend.Conn{
		Conn:         mc,
		Server:       p.name,
		Index:        p.idx,
		ID:           g.ConnectionID,
		SessionTrack: g.Capabilities&mysqlproto.CapabilityClientSessionTrack != 0,
		DeprecateEOF: g.Capabilities&mysqlproto.CapabilityClientDeprecateEOF != 0,
	}, nil
}

func (p *probe) closeConn() {
	if p.conn != nil {
		if !p.conn.Broken {
			quit(p.conn)
		} else {
			_ = p.conn.Close()
		}
		p.conn = nil
	}
}

// quit says goodbye with COM_QUIT so the server does not log an aborted
// connection, then closes.
func quit(c *backend.Conn) {
	_ = c.SetDeadline(time.Now().Add(100 * time.Millisecond))
	c.Seq = 0
	if c.WritePacket([]byte{mysqlproto.ComQuit}) == nil {
		_ = c.Flush()
	}
	_ = c.Close()
}
