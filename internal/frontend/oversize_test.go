package frontend

import (
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/qlog"
	"github.com/vigil-db/vigil/internal/rules"
	"github.com/vigil-db/vigil/internal/topology"
)

// errNumber is the MySQL error number in err, or 0.
func errNumber(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// setMaxPacket publishes a snapshot in which every server refuses command
// packets of n bytes or more (what the monitor reads from
// max_allowed_packet).
func setMaxPacket(srv *Server, n int) {
	snap := *srv.topo.Load()
	snap.Servers = append([]topology.Server(nil), snap.Servers...)
	for i := range snap.Servers {
		snap.Servers[i].MaxPacket = n
	}
	snap.Version++
	srv.topo.Publish(&snap)
}

// TestDroppedStatementNotResent: a read whose server closed the
// connection after it had the statement, with the server's
// max_allowed_packet unknown (so its size may be why), gets 7004 and is
// never sent to another server (issue 25 item 2: it was retried on the
// primary).
func TestDroppedStatementNotResent(t *testing.T) {
	primary, replica := newFakeBackend(t), newFakeBackend(t)
	_, addr := twoServerProxy(t, primary, replica)
	db, err := sql.Open("mysql", "app:secret@tcp("+addr+")/?timeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Exec("SELECT 'hangup'")
	if errNumber(err) != 7004 {
		t.Fatalf("got %v, want 7004", err)
	}
	if n := primary.seen("hangup") + replica.seen("hangup"); n != 1 {
		t.Fatalf("the statement reached the servers %d times, want 1", n)
	}
}

// TestDroppedReadRetriedWhenSizeIsNot: a read provably under every
// server's max_allowed_packet whose server dropped the connection (a
// replica killed mid-read) is retried once on another server, as before
// issue 25: its size cannot be why. Both fake servers drop it here, so
// the client gets 7004 after the one retry.
func TestDroppedReadRetriedWhenSizeIsNot(t *testing.T) {
	primary, replica := newFakeBackend(t), newFakeBackend(t)
	srv, addr := twoServerProxy(t, primary, replica)
	setMaxPacket(srv, 1<<20)
	db, err := sql.Open("mysql", "app:secret@tcp("+addr+")/?timeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	retries := srv.Stats.ReadRetries.Load()
	_, err = db.Exec("SELECT 'hangup'")
	if errNumber(err) != 7004 {
		t.Fatalf("got %v, want 7004", err)
	}
	if n := primary.seen("hangup") + replica.seen("hangup"); n != 2 {
		t.Fatalf("the statement reached the servers %d times, want 2 (one retry)", n)
	}
	if d := srv.Stats.ReadRetries.Load() - retries; d != 1 {
		t.Fatalf("%d read retries, want 1", d)
	}
}

// TestOverMaxPacketAnswered: a statement over the server's
// max_allowed_packet gets 1153 from Vigil and never reaches a server;
// one under it runs.
func TestOverMaxPacketAnswered(t *testing.T) {
	primary, replica := newFakeBackend(t), newFakeBackend(t)
	srv, addr := twoServerProxy(t, primary, replica)
	setMaxPacket(srv, 4096)
	db, err := sql.Open("mysql", "app:secret@tcp("+addr+")/?timeout=5s&maxAllowedPacket=16777216")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	// The payload is the command byte and the text: 4096 bytes is refused,
	// 4095 runs (as MariaDB does).
	big := "SELECT '" + strings.Repeat("b", 4096-1-len("SELECT ''")) + "'"
	var v, n string
	if err := db.QueryRow(big).Scan(&v, &n); errNumber(err) != 1153 {
		t.Fatalf("read: got %v, want 1153", err)
	}
	if _, err := db.Exec("INSERT INTO t VALUES ('" + strings.Repeat("i", 4096) + "')"); errNumber(err) != 1153 {
		t.Fatalf("write: got %v, want 1153", err)
	}
	if primary.seen("bbb")+replica.seen("bbb")+primary.seen("iii") != 0 {
		t.Fatal("a refused statement reached a server")
	}
	// The session goes on, and a statement just under the bound runs.
	if err := db.QueryRow(big[:len(big)-2]+"'").Scan(&v, &n); err != nil {
		t.Fatalf("under the bound: %v", err)
	}
}

// TestQueryLogRecordsRefusals: every statement Vigil refuses itself, and
// every failed prepare, gets one query-log record with its outcome
// (issue 25 item 4).
func TestQueryLogRecordsRefusals(t *testing.T) {
	tp := newTestProxy(t, []rules.Spec{
		{Name: "no-drop", Query: `(?i)^DROP`, Block: &rules.Block{Code: 4242, SQLState: "HY000", Message: "no drops here"}},
	})
	db := tp.db(t, "secret")
	db.SetMaxOpenConns(1)
	plain, err := sql.Open("mysql", "app:secret@tcp("+tp.addr+")/?timeout=5s&maxAllowedPacket=16777216")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plain.SetMaxOpenConns(1)

	type want struct {
		code    uint16
		refused bool
		server  string
	}
	cases := []struct {
		name, stmt string
		run        func(string) error
		want       want
	}{
		{"multi-statement off", "SELECT 1; SELECT 2", func(q string) error { _, err := db.Exec(q); return err },
			want{1064, true, ""}},
		{"blocked by a rule", "DROP TABLE t", func(q string) error { _, err := db.Exec(q); return err },
			want{4242, true, ""}},
		{"kill of an unknown id", "KILL 999999", func(q string) error { _, err := db.Exec(q); return err },
			want{1094, true, ""}},
		{"over max_allowed_packet", "SELECT '" + strings.Repeat("p", 5000) + "'", func(q string) error {
			setMaxPacket(tp.srv, 4096)
			defer setMaxPacket(tp.srv, 0)
			_, err := db.Exec(q)
			return err
		}, want{1153, true, ""}},
		{"prepare refused by the server", "SELECT ? + 1", func(q string) error { _, err := plain.Prepare(q); return err },
			want{1047, false, "fake1"}},
		{"prepare refused by vigil", "KILL ?", func(q string) error { _, err := plain.Prepare(q); return err },
			want{7009, true, ""}},
		{"prepare over max_allowed_packet", "SELECT '" + strings.Repeat("q", 5000) + "', ?", func(q string) error {
			setMaxPacket(tp.srv, 4096)
			defer setMaxPacket(tp.srv, 0)
			_, err := plain.Prepare(q)
			return err
		}, want{1153, true, ""}},
		{"write gate", "INSERT INTO t VALUES (1)", func(q string) error {
			tp.srv.SetWriteDeadline(time.Now().Add(-time.Second), false, "test")
			defer tp.srv.SetWriteDeadline(time.Time{}, false, "")
			_, err := db.Exec(q)
			return err
		}, want{7015, true, ""}},
	}
	cases = append(cases, struct {
		name, stmt string
		run        func(string) error
		want       want
	}{"over vigil's own limit (unread)", "", func(string) error {
		o := *tp.srv.opts.Load()
		o.MaxPacket = 8192
		tp.srv.SetOptions(o)
		c, err := sql.Open("mysql", "app:secret@tcp("+tp.addr+")/?timeout=5s&maxAllowedPacket=16777216")
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Exec("SELECT '" + strings.Repeat("u", 10000) + "'")
		return err
	}, want{1153, true, ""}})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(tp.log.all())
			if err := c.run(c.stmt); errNumber(err) != c.want.code {
				t.Fatalf("got %v, want error %d", err, c.want.code)
			}
			var got []qlog.Entry
			for _, e := range tp.log.all()[before:] {
				if e.Kind == qlog.KindQuery {
					got = append(got, e)
				}
			}
			if len(got) != 1 {
				t.Fatalf("%d records, want 1: %+v", len(got), got)
			}
			e := got[0]
			if string(e.Statement) != c.stmt || e.ErrCode != c.want.code || e.Message == "" ||
				e.Refused != c.want.refused || e.Server != c.want.server {
				t.Fatalf("record %+v (statement %.40q), want %+v", e, e.Statement, c.want)
			}
		})
	}
}

// refusingRelay relays connections to target, frame by frame, and plays
// a server whose max_allowed_packet is max: a frame longer than that gets
// 1153 at once (unless silent) and the connection is closed without the
// rest being read (MariaDB's way, which resets the connection under a
// writer still sending). It returns its address.
func refusingRelay(t *testing.T, target string, max int, silent bool) string {
	return tcpRelay(t, target, func(vc, sc net.Conn) {
		defer sc.Close()
		defer vc.Close()
		var h [4]byte
		for {
			if _, err := io.ReadFull(vc, h[:]); err != nil {
				return
			}
			n := int(h[0]) | int(h[1])<<8 | int(h[2])<<16
			if n > max {
				if !silent {
					p := mysqlproto.AppendErr(nil, errPacketTooLarge())
					_, _ = vc.Write(append([]byte{byte(len(p)), byte(len(p) >> 8), byte(len(p) >> 16), h[3] + 1}, p...))
				}
				return
			}
			if _, err := sc.Write(h[:]); err != nil {
				return
			}
			if _, err := io.CopyN(sc, vc, int64(n)); err != nil {
				return
			}
		}
	})
}

// TestServerRefusalNotResent: a server that refuses a statement Vigil
// did not know was too large (its max_allowed_packet changed since the
// last check) and closes the connection while Vigil still writes it:
// the client gets the server's 1153 (or 7004 when the server said
// nothing) and no other server gets the statement (before: it was resent
// to the primary, which ran it).
func TestServerRefusalNotResent(t *testing.T) {
	t.Run("ServerAnswers", func(t *testing.T) { testServerRefusal(t, false, 1153) })
	t.Run("ServerSilent", func(t *testing.T) { testServerRefusal(t, true, 7004) })
}

func testServerRefusal(t *testing.T, silent bool, want uint16) {
	primary, replica := newFakeBackend(t), newFakeBackend(t)
	srv, addr := twoServerProxy(t, primary, replica)
	pool := backend.NewPool("fake2", refusingRelay(t, replica.ln.Addr().String(), 64<<10, silent), 1, backend.Options{MaxOpen: 4,
		Credentials: func(u string) (string, string, bool) { return u, "pw", true }}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(pool.Close)
	srv.SetPool(1, pool)
	db, err := sql.Open("mysql", "app:secret@tcp("+addr+")/?timeout=5s&maxAllowedPacket=67108864")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v, n string
	if err := db.QueryRow("SELECT 'small'").Scan(&v, &n); err != nil || replica.seen("small") != 1 {
		t.Fatalf("through the relay: %v (replica saw %d)", err, replica.seen("small"))
	}
	err = db.QueryRow("SELECT '"+strings.Repeat("z", 8<<20)+"'").Scan(&v, &n)
	if errNumber(err) != want {
		t.Errorf("got %v, want %d", err, want)
	}
	if primary.seen("zzz")+replica.seen("zzz") != 0 {
		t.Fatal("the refused statement was sent to another server")
	}
}
