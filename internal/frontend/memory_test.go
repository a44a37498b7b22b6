package frontend

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/qlog"
	"github.com/vigil-db/vigil/internal/topology"
)

// dialProxy logs in to the test proxy as app with a raw protocol client.
func dialProxy(t *testing.T, tp *testProxy) *mysqlproto.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := mysqlproto.Dial(ctx, &mysqlproto.DialConfig{Addr: tp.addr, User: "app", Password: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// command sends one command packet (sequence 0) and reads the first
// packet of the reply.
func command(t *testing.T, c *mysqlproto.Conn, pkt []byte) []byte {
	t.Helper()
	c.Seq = 0
	return exchange(t, c, pkt)
}

// exchange sends pkt with the connection's sequence id and reads the
// next packet.
func exchange(t *testing.T, c *mysqlproto.Conn, pkt []byte) []byte {
	t.Helper()
	if err := c.WritePacket(pkt); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// bigQuery sends one COM_QUERY and returns the error it got, if any.
func bigQuery(t *testing.T, c *mysqlproto.Conn, q []byte) *mysqlproto.SQLError {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if p := command(t, c, append([]byte{mysqlproto.ComQuery}, q...)); p[0] == mysqlproto.ErrPacket {
		return mysqlproto.ParseErr(p)
	}
	return nil
}

func bigInsert(n int) []byte {
	q := bytes.Repeat([]byte{'x'}, n)
	copy(q, "INSERT INTO t VALUES ('")
	copy(q[n-2:], "')")
	return q
}

// TestStatementMemoryBudget: a statement over 16 MiB passes in one
// buffer; while another client holds the budget a large statement waits,
// then gets 1041 naming the key, its bytes are dropped and the session
// goes on; small statements never wait.
func TestStatementMemoryBudget(t *testing.T) {
	tp := newTestProxy(t, nil)
	budget := mysqlproto.NewBudget(80 << 20)
	budget.SetWait(300 * time.Millisecond)
	tp.srv.SetBudget(budget)

	c := dialProxy(t, tp)
	big := bigInsert(20 << 20)
	if se := bigQuery(t, c, big); se != nil {
		t.Fatalf("a 20 MiB statement with the budget free: %v", se)
	}
	if n := tp.be.seen(string(big[:40])); n != 1 {
		t.Fatalf("the server saw the 20 MiB statement %d times", n)
	}
	if got := budget.InUse(); got != 0 {
		t.Fatalf("%d bytes still reserved after the statement", got)
	}

	// A client announces a 16 MiB frame and stalls after a few bytes: its
	// statement holds a share of max_allowed_packet (it may be that long).
	staller := dialProxy(t, tp)
	nc := staller.NetConn()
	if _, err := nc.Write([]byte{0xff, 0xff, 0xff, 0, mysqlproto.ComQuery, 'I', 'N'}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for budget.InUse() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if budget.InUse() != mysqlproto.DefaultMaxAllowedBytes {
		t.Fatalf("the stalled statement holds %d bytes, want max_allowed_packet", budget.InUse())
	}
	logged := len(tp.log.all())
	se := bigQuery(t, c, big)
	if se == nil || se.Code != mysqlproto.EROutOfResources || !strings.Contains(se.Message, "security.statement_memory") {
		t.Fatalf("want 1041 naming security.statement_memory, got %v", se)
	}
	// The refusal has its query-log record, like every refused statement.
	var recs []qlog.Entry
	for _, e := range tp.log.all()[logged:] {
		if e.Kind == qlog.KindQuery {
			recs = append(recs, e)
		}
	}
	if len(recs) != 1 || recs[0].ErrCode != mysqlproto.EROutOfResources || !recs[0].Refused {
		t.Fatalf("query-log records of the refusal: %+v, want one refused 1041", recs)
	}
	if budget.Refused.Load() != 1 {
		t.Fatalf("refused %d, want 1", budget.Refused.Load())
	}
	// The session is usable, and small statements need no budget.
	if se := bigQuery(t, c, []byte("INSERT INTO t VALUES (1)")); se != nil {
		t.Fatalf("after the refusal: %v", se)
	}
	// The staller goes away: its share comes back.
	staller.Close()
	deadline = time.Now().Add(5 * time.Second)
	for budget.InUse() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if budget.InUse() != 0 {
		t.Fatalf("%d bytes reserved after the stalled client left", budget.InUse())
	}
	if se := bigQuery(t, c, big); se != nil {
		t.Fatalf("a 20 MiB statement after the staller left: %v", se)
	}
}

// Statements queued for mirrors are bounded in bytes, not only in count.
func TestMirrorQueueBoundedInBytes(t *testing.T) {
	srv := New(Options{Cluster: "c1"}, nil, &topology.Holder{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	s := newSession(srv, 1, c1)
	// A mirrorer whose workers have not taken anything yet.
	m := &mirrorer{srv: srv, jobs: make(chan mirrorJob, 1024)}
	m.started.Store(true)
	big := make([]byte, 40<<20)
	small := []byte("INSERT INTO t VALUES (1)")
	m.enqueue(s, []int{0}, big)
	m.enqueue(s, []int{0}, big)
	m.enqueue(s, []int{0}, small)
	if got := srv.Stats.MirrorDrops.Load(); got != 1 {
		t.Fatalf("%d mirrors dropped, want the second 40 MiB one", got)
	}
	if len(m.jobs) != 2 || m.queued.Load() != int64(len(big)+len(small)) {
		t.Fatalf("%d jobs, %d bytes queued", len(m.jobs), m.queued.Load())
	}
}
