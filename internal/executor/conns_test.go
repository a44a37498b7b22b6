package executor

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/mysqlproto"
)

// adminServer is a server at the wire for connClient: "SELECT 1" answers,
// "FAIL" is a server error, "HANG" never answers; it counts logins.
type adminServer struct {
	ln     net.Listener
	mu     sync.Mutex
	conns  map[net.Conn]bool
	logins int
}

func newAdminServer(t *testing.T) *adminServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &adminServer{ln: ln, conns: map[net.Conn]bool{}}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[nc] = true
			s.mu.Unlock()
			wg.Go(func() { s.serve(nc) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.drop()
		wg.Wait()
	})
	return s
}

// drop closes every connection (a restart, KILL).
func (s *adminServer) drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

func (s *adminServer) loginCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logins
}

func (s *adminServer) serve(nc net.Conn) {
	defer nc.Close()
	c := mysqlproto.NewConn(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	hello, err := c.Accept(ctx, &mysqlproto.ServerConfig{ServerVersion: "5.5.5-10.11.6-MariaDB",
		Lookup: func(string) (mysqlproto.Credentials, bool) { return mysqlproto.Credentials{Plain: "pw"}, true }}, 9, "127.0.0.1")
	cancel()
	if err != nil {
		return
	}
	s.mu.Lock()
	s.logins++
	s.mu.Unlock()
	noEOF := hello.Capabilities&mysqlproto.CapabilityClientDeprecateEOF != 0
	for {
		c.Seq = 0
		p, err := c.ReadPacket()
		if err != nil || p[0] != mysqlproto.ComQuery {
			return
		}
		c.Seq = 1
		switch string(p[1:]) {
		case "HANG":
			_, _ = c.ReadPacket() // until the client closes
			return
		case "FAIL":
			_ = c.WritePacket(mysqlproto.AppendErr(nil, mysqlproto.NewError(1064, "42000", "syntax")))
		default:
			_ = mysqlproto.WriteTextResult(c, []string{"1"}, [][]string{{"1"}}, mysqlproto.ServerStatusAutocommit, noEOF)
		}
		if c.Flush() != nil {
			return
		}
	}
}

// TestConnClientReuses: one login serves many calls; a connection cut by
// its timeout, closed by the server, forgotten or closed with the client
// is never used again.
func TestConnClientReuses(t *testing.T) {
	s := newAdminServer(t)
	cc := newConnClient(func() (string, string) { return "vigil", "pw" })
	ctx := context.Background()
	run := func(q string, timeout time.Duration) error {
		_, _, err := cc.Run(ctx, "node1", s.ln.Addr().String(), timeout, q)
		return err
	}
	want := func(what string, dials, logins int) {
		t.Helper()
		if _, got := cc.Counts(); got != int64(dials) {
			t.Errorf("%s: %d dials, want %d", what, got, dials)
		}
		if got := s.loginCount(); got != logins {
			t.Errorf("%s: %d logins, want %d", what, got, logins)
		}
	}
	for range 5 {
		if err := run("SELECT 1", time.Second); err != nil {
			t.Fatal(err)
		}
	}
	want("five calls", 1, 1)
	var se *mysqlproto.SQLError
	if err := run("FAIL", time.Second); !errors.As(err, &se) {
		t.Fatalf("FAIL: %v, want a server error", err)
	}
	if err := run("SELECT 1", time.Second); err != nil {
		t.Fatal(err)
	}
	want("after a server error", 1, 1)
	t0 := time.Now()
	if err := run("HANG", 100*time.Millisecond); err == nil || time.Since(t0) > 2*time.Second {
		t.Fatalf("HANG: %v after %s, want a timeout after 100ms", err, time.Since(t0))
	}
	if err := run("SELECT 1", time.Second); err != nil {
		t.Fatal(err)
	}
	want("after a timeout", 2, 2)
	s.drop()
	time.Sleep(50 * time.Millisecond)
	if err := run("SELECT 1", time.Second); err != nil {
		t.Fatalf("after the server closed the connection: %v", err)
	}
	want("after the server closed it", 3, 3)
	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	if _, _, err := cc.Run(cctx, "node1", s.ln.Addr().String(), 10*time.Second, "HANG"); err == nil {
		t.Fatal("HANG with a cancelled context: no error")
	}
	cc.Forget("node1")
	if err := run("SELECT 1", time.Second); err != nil {
		t.Fatal(err)
	}
	want("after a cancelled call and Forget", 4, 4)
	cc.Close()
	for range 2 {
		if err := run("SELECT 1", time.Second); err != nil {
			t.Fatal(err)
		}
	}
	want("after Close", 6, 6)
}
