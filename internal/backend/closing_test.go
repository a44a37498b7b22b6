package backend

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/mysqlproto"
)

func TestClosesConnection(t *testing.T) {
	for _, tc := range []struct {
		code         uint16
		mysql, close bool
	}{
		{1153, false, true}, // ER_NET_PACKET_TOO_LARGE
		{1153, true, true},
		{1927, false, true}, // ER_CONNECTION_KILLED
		{1184, false, true}, // ER_NEW_ABORTING_CONNECTION
		{1152, false, true},
		{1158, false, true}, {1159, false, true}, {1160, false, true}, {1161, false, true},
		{1043, false, true}, // bad handshake
		{1053, false, true}, // shutdown
		{3169, true, true},  // MySQL: session was killed
		{2006, false, true}, {2013, false, true},
		{4031, true, true},   // MySQL 8: ER_CLIENT_INTERACTION_TIMEOUT
		{4031, false, false}, // MariaDB: ER_REFERENCED_TRG_DOES_NOT_EXIST
		{1317, false, false}, // ER_QUERY_INTERRUPTED: the connection stays
		{1317, true, false},
		{1969, false, false}, // max_statement_time
		{3024, true, false},  // max_execution_time
		{1146, false, false}, {1064, false, false}, {1062, false, false}, {1205, false, false}, {1213, false, false},
		{1047, false, false}, // unknown command: the server answers and goes on
	} {
		if got := ClosesConnection(tc.code, tc.mysql); got != tc.close {
			t.Errorf("ClosesConnection(%d, mysql=%v) = %v, want %v", tc.code, tc.mysql, got, tc.close)
		}
	}
}

// testServer is the server end of a pooled connection.
type testServer struct {
	nc net.Conn
	mc *mysqlproto.Conn
}

// reply reads one command and answers it with payload (nil: no answer).
func (s *testServer) reply(t *testing.T, payload []byte) {
	t.Helper()
	s.mc.Seq = 0
	if _, err := s.mc.ReadPacket(); err != nil {
		t.Errorf("server: reading the command: %v", err)
		return
	}
	if payload == nil {
		return
	}
	s.mc.Seq = 1
	if err := s.mc.WritePacket(payload); err != nil {
		t.Errorf("server: %v", err)
	}
	if err := s.mc.Flush(); err != nil {
		t.Errorf("server: %v", err)
	}
}

// send writes payload unasked (sequence 0), as MySQL does before it closes
// an idle connection.
func (s *testServer) send(t *testing.T, payload []byte) {
	t.Helper()
	s.mc.Seq = 0
	if err := s.mc.WritePacket(payload); err != nil {
		t.Fatal(err)
	}
	if err := s.mc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func errPayload(code uint16) []byte {
	return mysqlproto.AppendErr(nil, mysqlproto.NewError(code, "HY000", "error %d", code))
}

var okPayload = mysqlproto.AppendOK(nil, 0, 0, mysqlproto.ServerStatusAutocommit, 0)

func testPool(t *testing.T, opts Options) *Pool {
	t.Helper()
	p := NewPool("s1", "127.0.0.1:1", 0, opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(p.Close)
	return p
}

// lend makes a connection to a loopback server end as if p had dialed it
// and lent it out (its slot counted), and returns both ends.
func lend(t *testing.T, p *Pool) (*Conn, *testServer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, _ := ln.Accept()
		accepted <- nc
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	snc := <-accepted
	if snc == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { nc.Close(); snc.Close() })
	now := time.Now()
	c := &Conn{Conn: mysqlproto.NewConn(nc), pool: p, ID: uint32(now.UnixNano()), created: now, lastUsed: now, SessionTrack: true}
	p.mu.Lock()
	p.open++
	p.ids[c.ID] = struct{}{}
	p.mu.Unlock()
	return c, &testServer{nc: snc, mc: mysqlproto.NewConn(snc)}
}

// idleFor makes c look idle for d (as if it went back to the pool d ago).
func idleFor(p *Pool, c *Conn, d time.Duration) {
	p.mu.Lock()
	c.lastUsed = time.Now().Add(-d)
	p.mu.Unlock()
}

// waitClosed waits until the server end of a connection sees it closed.
func waitClosed(t *testing.T, s *testServer) {
	t.Helper()
	_ = s.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [64]byte
	for {
		_, err := s.nc.Read(b[:])
		if err == nil {
			continue
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the pool did not close the connection")
			}
		}
		return
	}
}

func TestNoteErrMarksClosingErrorsBroken(t *testing.T) {
	p := testPool(t, Options{})
	for _, tc := range []struct {
		code   uint16
		broken bool
	}{{1153, true}, {1927, true}, {1184, true}, {1317, false}, {1146, false}} {
		c, srv := lend(t, p)
		done := make(chan struct{})
		go func() { defer close(done); srv.reply(t, errPayload(tc.code)) }()
		_, err := c.Exec(context.Background(), "SELECT 1")
		<-done
		var se *mysqlproto.SQLError
		if !errors.As(err, &se) || se.Code != tc.code {
			t.Fatalf("%d: Exec returned %v", tc.code, err)
		}
		if c.Broken != tc.broken || !c.DiagDirty {
			t.Errorf("after ERR %d: Broken=%v DiagDirty=%v, want Broken=%v", tc.code, c.Broken, c.DiagDirty, tc.broken)
		}
		// The same for a one-packet command (COM_PING, COM_INIT_DB...).
		c2, srv2 := lend(t, p)
		go func() { srv2.reply(t, errPayload(tc.code)) }()
		if err := c2.Ping(context.Background()); !errors.As(err, &se) || se.Code != tc.code {
			t.Fatalf("%d: Ping returned %v", tc.code, err)
		}
		if c2.Broken != tc.broken {
			t.Errorf("after ERR %d to a ping: Broken=%v, want %v", tc.code, c2.Broken, tc.broken)
		}
		p.Put(c)
		p.Put(c2)
	}
	p.CloseIdle()
	if st := p.Stats(); st.Open != 0 {
		t.Errorf("%d connections still counted open", st.Open)
	}
}

func TestIOErrorMarksBroken(t *testing.T) {
	p := testPool(t, Options{})
	c, srv := lend(t, p)
	go func() { srv.reply(t, nil); srv.nc.Close() }() // the server dies mid-command
	if err := c.Ping(context.Background()); err == nil {
		t.Fatal("ping of a closed connection succeeded")
	}
	if !c.Broken {
		t.Fatal("an I/O error did not mark the connection broken")
	}
	p.Put(c)
	if st := p.Stats(); st.Idle != 0 || st.Open != 0 {
		t.Fatalf("a broken connection was pooled: %+v", st)
	}
}

func TestPutRefusesBrokenAndClosed(t *testing.T) {
	p := testPool(t, Options{})

	// Broken: closed, its slot freed.
	c, srv := lend(t, p)
	c.Broken = true
	p.Put(c)
	if st := p.Stats(); st.Idle != 0 || st.Open != 0 {
		t.Fatalf("broken connection pooled: %+v", st)
	}
	waitClosed(t, srv)

	// An error reply (not one that closes the connection by its code)
	// after which the server closed the connection: Put looks and
	// refuses it.
	c, srv = lend(t, p)
	done := make(chan struct{})
	go func() { defer close(done); srv.reply(t, errPayload(1105)); srv.nc.Close() }()
	if _, err := c.Exec(context.Background(), "SELECT 1"); err == nil {
		t.Fatal("no error")
	}
	<-done
	time.Sleep(20 * time.Millisecond) // the FIN arrives
	if c.Broken {
		t.Fatal("1105 alone marked the connection broken")
	}
	p.Put(c)
	if st := p.Stats(); st.Idle != 0 || st.Open != 0 {
		t.Fatalf("a connection the server closed after an error was pooled: %+v", st)
	}

	// Unread bytes: refused.
	c, srv = lend(t, p)
	srv.send(t, errPayload(4031))
	time.Sleep(20 * time.Millisecond)
	c.errSeen = true // as after any error reply
	p.Put(c)
	if st := p.Stats(); st.Idle != 0 || st.Open != 0 {
		t.Fatalf("a connection with bytes waiting was pooled: %+v", st)
	}

	// A healthy one is pooled, after an ordinary error too.
	c, srv = lend(t, p)
	go func() { srv.reply(t, errPayload(1146)) }()
	if _, err := c.Exec(context.Background(), "SELECT 1"); err == nil {
		t.Fatal("no error")
	}
	p.Put(c)
	if st := p.Stats(); st.Idle != 1 || st.Open != 1 {
		t.Fatalf("a healthy connection was not pooled: %+v", st)
	}
	if got := p.TryGet(Key{}, nil); got != c {
		t.Fatalf("TryGet = %p, want the healthy connection %p", got, c)
	}
	p.Put(c)
}

// A pooled connection the server closed while it was idle (KILL,
// wait_timeout) never comes out of the pool: TryGet, Get (with or without
// the validate_idle ping), Reclaim and the sweep all look first.
func TestClosedWhileIdleNeverLent(t *testing.T) {
	closeWays := map[string]func(t *testing.T, s *testServer){
		"close":       func(t *testing.T, s *testServer) { s.nc.Close() },
		"err-4031":    func(t *testing.T, s *testServer) { s.send(t, errPayload(4031)); s.nc.Close() },
		"stray-bytes": func(t *testing.T, s *testServer) { s.send(t, okPayload) },
	}
	for name, closeIt := range closeWays {
		t.Run(name, func(t *testing.T) {
			p := testPool(t, Options{ValidateIdle: time.Hour})
			c, srv := lend(t, p)
			p.Put(c)
			closeIt(t, srv)
			time.Sleep(20 * time.Millisecond)
			idleFor(p, c, 10*time.Millisecond)
			if got := p.TryGet(Key{}, nil); got != nil {
				t.Fatal("TryGet lent a connection the server closed")
			}
			if st := p.Stats(); st.Idle != 0 || st.Open != 0 {
				t.Fatalf("the closed connection was not closed and its slot freed: %+v", st)
			}
			waitClosed(t, srv)

			// Get (the slow path): a dead idle one is skipped; the pool
			// then dials, which fails here (nothing listens): an error,
			// never the dead connection.
			c, srv = lend(t, p)
			p.Put(c)
			closeIt(t, srv)
			time.Sleep(20 * time.Millisecond)
			idleFor(p, c, 10*time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			got, err := p.Get(ctx, Key{}, nil)
			cancel()
			if got != nil || err == nil {
				t.Fatalf("Get = %v, %v; want a dial error", got, err)
			}

			// Reclaim of the last connection: refused.
			c, srv = lend(t, p)
			puts := c.NextPut()
			p.Put(c)
			closeIt(t, srv)
			time.Sleep(20 * time.Millisecond)
			idleFor(p, c, 10*time.Millisecond)
			if p.Reclaim(c, puts) {
				t.Fatal("Reclaim took back a connection the server closed")
			}

			// The sweep closes it without anyone asking.
			c, srv = lend(t, p)
			p.Put(c)
			closeIt(t, srv)
			time.Sleep(20 * time.Millisecond)
			p.sweep(context.Background())
			if st := p.Stats(); st.Idle != 0 || st.Open != 0 {
				t.Fatalf("the sweep kept a connection the server closed: %+v", st)
			}
		})
	}
}

// After validate_idle the pool pings before lending: a live connection
// answers and is lent, a dead one is not.
func TestValidateIdlePing(t *testing.T) {
	p := testPool(t, Options{ValidateIdle: 50 * time.Millisecond})
	c, srv := lend(t, p)
	p.Put(c)
	idleFor(p, c, time.Second)
	if got := p.TryGet(Key{}, nil); got != nil {
		t.Fatal("TryGet lent a connection that needs a ping")
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.reply(t, okPayload) }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	got, err := p.Get(ctx, Key{}, nil)
	cancel()
	<-done
	if err != nil || got != c {
		t.Fatalf("Get after validate_idle = %p, %v; want the pinged connection %p", got, err, c)
	}

	// A server that answers the ping with an error that closes the
	// connection: not lent.
	p.Put(c)
	idleFor(p, c, time.Second)
	go func() { srv.reply(t, errPayload(1927)) }()
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	got, err = p.Get(ctx, Key{}, nil)
	cancel()
	if got != nil || err == nil {
		t.Fatalf("Get = %v, %v; want a dial error after the failed ping", got, err)
	}
	if st := p.Stats(); st.Idle != 0 || st.Open != 0 {
		t.Fatalf("after the failed ping: %+v", st)
	}
}

// A connection reused at once is not looked at (busy pools pay nothing);
// one idle a little longer is, and a healthy one passes.
func TestTryGetPeeksOnlyAfterPeekIdle(t *testing.T) {
	p := testPool(t, Options{})
	c, _ := lend(t, p)
	p.Put(c)
	if got := p.TryGet(Key{}, nil); got != c {
		t.Fatal("TryGet did not lend the connection just given back")
	}
	if c.peekSet {
		t.Error("a connection reused at once was looked at")
	}
	p.Put(c)
	idleFor(p, c, 10*peekIdle)
	if got := p.TryGet(Key{}, nil); got != c {
		t.Fatal("TryGet did not lend a healthy idle connection")
	}
	if !c.peekSet {
		t.Error("a connection idle past peekIdle was not looked at")
	}
	p.Put(c)
}
