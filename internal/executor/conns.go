package executor

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
)

// connClient is the Client of a running Vigil: it keeps its admin
// connection to each server and reuses it, rather than connecting and
// logging in for every call (a failover polls replicas every 100 ms).
// A connection that failed with anything but a server error, was cut by
// its statement's timeout or by its context, or that the server closed
// while it was idle is closed, never reused; the next call connects
// again. Calls on one server at the same time each get a connection of
// their own; at most maxIdleConns per server are kept between calls.
type connClient struct {
	creds func() (user, password string)

	mu     sync.Mutex
	idle   map[string][]*adminConn // by server name
	closed bool
	// calls and dials count calls and connections opened (for the log
	// of each operation: a connection per call before they were kept).
	calls, dials atomic.Int64
}

// maxIdleConns is how many connections per server the executor keeps
// between calls: one for its operation, one for what runs beside it
// (the facts, a guard).
const maxIdleConns = 2

// adminConn is a kept connection and what it was opened with.
type adminConn struct {
	*backend.Conn
	addr, user, password string
}

func newConnClient(creds func() (string, string)) *connClient {
	return &connClient{creds: creds, idle: map[string][]*adminConn{}}
}

func (cc *connClient) Run(ctx context.Context, server, addr string, timeout time.Duration, stmts ...string) ([]string, [][]string, error) {
	cc.calls.Add(1)
	c, err := cc.get(ctx, server, addr, timeout)
	if err != nil {
		return nil, nil, err
	}
	var cols []string
	var rows [][]string
	for _, q := range stmts {
		qctx, cancel := context.WithTimeout(ctx, timeout)
		// The deadline bounds the statement's I/O (ExecColumns); a context
		// cancelled before it (the lease lost) cuts it too.
		stop := context.AfterFunc(qctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
		cols, rows, err = c.ExecColumns(qctx, q)
		if !stop() {
			c.Broken = true // cut (perhaps just as it finished): never reused
		}
		cancel()
		if err != nil {
			cc.put(server, c)
			return nil, nil, fmt.Errorf("%s on %s: %w", Redact(q), server, err)
		}
	}
	cc.put(server, c)
	return cols, rows, nil
}

// get takes server's idle connection, or connects.
func (cc *connClient) get(ctx context.Context, server, addr string, timeout time.Duration) (*adminConn, error) {
	user, pass := cc.creds()
	cc.mu.Lock()
	for len(cc.idle[server]) > 0 {
		l := cc.idle[server]
		c := l[len(l)-1]
		cc.idle[server] = l[:len(l)-1]
		if c.addr == addr && c.user == user && c.password == pass && !c.ServerClosed() {
			cc.mu.Unlock()
			return c, nil
		}
		c.Close()
	}
	cc.mu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, min(timeout, 3*time.Second))
	defer cancel()
	cc.dials.Add(1)
	mc, g, err := mysqlproto.Dial(dctx, &mysqlproto.DialConfig{Addr: addr, User: user, Password: pass})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", server, err)
	}
	return &adminConn{Conn: &backend.Conn{Conn: mc, Server: server,
		SessionTrack: g.Capabilities&mysqlproto.CapabilityClientSessionTrack != 0,
		DeprecateEOF: g.Capabilities&mysqlproto.CapabilityClientDeprecateEOF != 0},
		addr: addr, user: user, password: pass}, nil
}

// put keeps c for the next call on server, or closes it.
func (cc *connClient) put(server string, c *adminConn) {
	cc.mu.Lock()
	if c.Broken || cc.closed || len(cc.idle[server]) >= maxIdleConns {
		cc.mu.Unlock()
		c.Close()
		return
	}
	cc.idle[server] = append(cc.idle[server], c)
	cc.mu.Unlock()
}

// Forget closes server's kept connections (it left the cluster).
func (cc *connClient) Forget(server string) {
	cc.mu.Lock()
	l := cc.idle[server]
	delete(cc.idle, server)
	cc.mu.Unlock()
	for _, c := range l {
		c.Close()
	}
}

// Close closes every kept connection; later calls connect for
// themselves and close their connection after.
func (cc *connClient) Close() {
	cc.mu.Lock()
	cc.closed = true
	all := cc.idle
	cc.idle = map[string][]*adminConn{}
	cc.mu.Unlock()
	for _, l := range all {
		for _, c := range l {
			c.Close()
		}
	}
}

// Counts are how many calls the client ran and connections it opened so
// far.
func (cc *connClient) Counts() (calls, dials int64) { return cc.calls.Load(), cc.dials.Load() }
