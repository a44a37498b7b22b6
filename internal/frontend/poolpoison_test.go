package frontend

import (
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/router"
)

// Issue 16, item 3: a server connection the server closed must never serve
// another client, whether it closed after an error that closes the
// connection (1153 for a statement over max_allowed_packet, 1927 for a
// KILL) or while the connection sat idle in the pool.

// closingRelay relays connections to target (a fakeBackend) and plays
// the server's part for commands whose answer closes the connection: it
// answers them itself, as MariaDB does, and closes the connection.
// COM_QUERY "SELECT 'too-large'" and any COM_STMT_PREPARE get 1153 (a
// packet over max_allowed_packet); COM_QUERY "SELECT 'killed'" gets a
// first result (an OK saying more follow) and then 1927 (KILL of the
// connection in the middle of the command). With keepOpen it leaves the
// connection open after such an answer (Vigil must then close it for the
// error's code alone). It returns its address.
func closingRelay(t *testing.T, target string, keepOpen bool) string {
	return tcpRelay(t, target, func(vc, sc net.Conn) { relayCommands(vc, sc, keepOpen) })
}

// tcpRelay listens on a loopback port and connects each connection
// accepted there (Vigil's, vc) to target (sc): the server's bytes are
// copied back as they are, what Vigil sends goes through commands. It
// returns its address.
func tcpRelay(t *testing.T, target string, commands func(vc, sc net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			vc, err := ln.Accept()
			if err != nil {
				return
			}
			sc, err := net.Dial("tcp", target)
			if err != nil {
				vc.Close()
				continue
			}
			go func() { _, _ = io.Copy(vc, sc); vc.Close() }()
			go commands(vc, sc)
		}
	}()
	return ln.Addr().String()
}

// relayCommands copies what Vigil sends to the server, until a command
// the relay answers itself (closingReply): then it closes both ends,
// unless keepOpen.
func relayCommands(vc, sc net.Conn, keepOpen bool) {
	defer sc.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := vc.Read(buf)
		if reply := closingReply(buf[:n]); reply != nil {
			_, _ = vc.Write(reply)
			if !keepOpen {
				vc.Close()
				return
			}
		} else if n > 0 {
			if _, werr := sc.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// closingReply is the relay's answer to b when b is one command (a frame
// with sequence id 0) it answers itself, else nil.
func closingReply(b []byte) []byte {
	if len(b) < 5 || b[3] != 0 || int(b[0])|int(b[1])<<8|int(b[2])<<16 != len(b)-4 {
		return nil
	}
	frame := func(dst []byte, seq byte, payload []byte) []byte {
		n := len(payload)
		return append(append(dst, byte(n), byte(n>>8), byte(n>>16), seq), payload...)
	}
	errPkt := func(code uint16) []byte {
		return mysqlproto.AppendErr(nil, mysqlproto.NewError(code, "08S01", "closing with %d", code))
	}
	p := b[4:]
	switch {
	case p[0] == mysqlproto.ComStmtPrepare, string(p) == "\x03SELECT 'too-large'":
		return frame(nil, 1, errPkt(mysqlproto.ERNetPacketTooLarge))
	case string(p) == "\x03SELECT 'killed'":
		more := mysqlproto.AppendOK(nil, 0, 0, mysqlproto.ServerStatusAutocommit|mysqlproto.ServerMoreResultsExists, 0)
		return frame(frame(nil, 1, more), 2, errPkt(1927))
	}
	return nil
}

// relayedProxy is newTestProxy with its fake server reached through a
// closingRelay; it returns Vigil's address and the server's pool.
func relayedProxy(t *testing.T, keepOpen bool) (string, *backend.Pool) {
	t.Helper()
	tp := newTestProxy(t, nil)
	pool := backend.NewPool("fake1", closingRelay(t, tp.be.ln.Addr().String(), keepOpen), 0, backend.Options{MaxOpen: 4,
		Credentials: func(u string) (string, string, bool) { return u, "pw", true }}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(pool.Close)
	tp.srv.SetPool(0, pool)
	return tp.addr, pool
}

// freshClients runs n clients one after the other, each on a new
// connection, each with a write (never retried elsewhere by Vigil), and
// returns the first error.
func freshClients(addr string, n int) error {
	for i := range n {
		db, err := sql.Open("mysql", "app:secret@tcp("+addr+")/?timeout=5s")
		if err != nil {
			return err
		}
		_, err = db.Exec("INSERT INTO t VALUES (1)")
		db.Close()
		if err != nil {
			return fmt.Errorf("client %d: %w", i, err)
		}
	}
	return nil
}

func TestClosingErrorNeverPooled(t *testing.T) {
	for _, tc := range []struct {
		name string
		code uint16
		run  func(db *sql.DB) error
	}{
		{"query-1153", 1153, func(db *sql.DB) error { _, err := db.Exec("SELECT 'too-large'"); return err }},
		{"mid-command-1927", 1927, func(db *sql.DB) error { _, err := db.Exec("SELECT 'killed'"); return err }},
		{"prepare-1153", 1153, func(db *sql.DB) error { _, err := db.Prepare("SELECT ?"); return err }},
	} {
		for _, keepOpen := range []bool{false, true} {
			name := tc.name + "/closed"
			if keepOpen {
				name = tc.name + "/left-open"
			}
			t.Run(name, func(t *testing.T) { testClosingError(t, tc.code, tc.run, keepOpen) })
		}
	}
}

// testClosingError has client A run a command the server answers with an
// error that closes the connection (code), then unrelated clients: none
// may get A's server connection. When the server leaves it open (not
// what servers do, but a check that the error's code alone is enough),
// Vigil closes it as soon as the command ends.
func testClosingError(t *testing.T, code uint16, run func(*sql.DB) error, keepOpen bool) {
	addr, pool := relayedProxy(t, keepOpen)
	if err := freshClients(addr, 2); err != nil {
		t.Fatalf("before: %v", err)
	}
	for round := range 3 {
		a, err := sql.Open("mysql", "app:secret@tcp("+addr+")/?timeout=5s")
		if err != nil {
			t.Fatal(err)
		}
		open := pool.Stats().Open
		err = run(a)
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != code {
			t.Fatalf("round %d: client A got %v, want the server's %d", round, err, code)
		}
		if st := pool.Stats(); keepOpen && st.Open != open-1 {
			t.Errorf("round %d: %d server connections open after %d on one of %d: it was not closed", round, st.Open, code, open)
		}
		a.Close()
		time.Sleep(50 * time.Millisecond) // A's session ends and gives its connections back
		if err := freshClients(addr, 5); err != nil {
			t.Fatalf("round %d: after the server closed a connection with %d, an unrelated client failed: %v", round, code, err)
		}
	}
}

// killServerSide closes every server end of the fake's connections (KILL,
// wait_timeout, a restart of the server).
func killServerSide(f *fakeBackend) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fc := range f.conns {
		fc.nc.Close()
	}
}

func TestIdleKilledNeverReachesClient(t *testing.T) {
	tp := newTestProxy(t, nil)
	for round := range 3 {
		if err := freshClients(tp.addr, 2); err != nil {
			t.Fatalf("round %d, before: %v", round, err)
		}
		killServerSide(tp.be)
		time.Sleep(20 * time.Millisecond)
		if err := freshClients(tp.addr, 5); err != nil {
			t.Fatalf("round %d: a pooled connection the server closed while idle reached a client: %v", round, err)
		}
	}
}

// Without multiplexing a session keeps one connection per server between
// statements; the server closing it while the client idles must not fail
// the client's next statement (the session held nothing on it).
func TestStickyKilledWhileIdle(t *testing.T) {
	tp := newTestProxy(t, nil)
	tp.srv.SetUsers([]User{{Name: "app", Cred: mysqlproto.Credentials{Plain: "secret"}, RYW: router.RYWNone, Multiplexing: false}})
	db, err := sql.Open("mysql", "app:secret@tcp("+tp.addr+")/?timeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for round := range 3 {
		if _, err := db.Exec("INSERT INTO t VALUES (1)"); err != nil {
			t.Fatalf("round %d, before: %v", round, err)
		}
		killServerSide(tp.be)
		time.Sleep(20 * time.Millisecond)
		if _, err := db.Exec("INSERT INTO t VALUES (1)"); err != nil {
			t.Fatalf("round %d: the session's idle connection, closed by the server, failed its next statement: %v", round, err)
		}
	}
}
