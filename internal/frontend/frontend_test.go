package frontend

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/qcache"
	"github.com/vigil-db/vigil/internal/qlog"
	"github.com/vigil-db/vigil/internal/qstats"
	"github.com/vigil-db/vigil/internal/router"
	"github.com/vigil-db/vigil/internal/rules"
	"github.com/vigil-db/vigil/internal/topology"
)

// fakeBackend is a scripted server at the wire: it answers Vigil's
// connection set-up, SELECTs of literals and SLEEP (interrupted by KILL
// QUERY, as MariaDB does), and records every statement it received. The
// frontend's processing (rules, cache, timeouts, statistics) is tested
// against it with the race detector on.
type fakeBackend struct {
	ln net.Listener
	wg sync.WaitGroup

	// version is the greeting's server version; insertState, when set,
	// is the session state block an INSERT's OK carries (last_gtid or
	// OWN_GTID tracking). Both are set before the first connection.
	version     string
	insertState []byte
	// denyInitDB: COM_INIT_DB gets 1044 (the account lacks the grant here).
	denyInitDB bool

	mu      sync.Mutex
	queries []string
	conns   map[uint32]*fakeConn
	nextID  uint32
}

type fakeConn struct {
	nc     net.Conn
	status uint16 // session goroutine only
	killed chan struct{}
	once   sync.Once
}

func newFakeBackend(t testing.TB) *fakeBackend {
	return newFakeServer(t, "5.5.5-10.11.19-MariaDB-fake", nil)
}

func newFakeServer(t testing.TB, version string, insertState []byte) *fakeBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeBackend{ln: ln, conns: map[uint32]*fakeConn{}, version: version, insertState: insertState}
	f.wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.nextID++
			id := f.nextID
			fc := &fakeConn{nc: nc, killed: make(chan struct{}), status: mysqlproto.ServerStatusAutocommit}
			f.conns[id] = fc
			f.mu.Unlock()
			f.wg.Go(func() { f.serve(id, fc) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			c.nc.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

// seen returns the statements received that contain substr.
func (f *fakeBackend) seen(substr string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, q := range f.queries {
		if strings.Contains(q, substr) {
			n++
		}
	}
	return n
}

// twoServerProxy serves a replication cluster of a fake primary and a
// fake replica (reads go to the replica) and returns it and its address.
func twoServerProxy(t *testing.T, primary, replica *fakeBackend) (*Server, string) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var pools []*backend.Pool
	var servers []topology.Server
	for i, f := range []*fakeBackend{primary, replica} {
		addr := f.ln.Addr().String()
		name := fmt.Sprintf("fake%d", i+1)
		pools = append(pools, backend.NewPool(name, addr, i, backend.Options{MaxOpen: 10,
			Credentials: func(u string) (string, string, bool) { return u, "pw", true }}, log))
		role := topology.RoleReplica
		if i == 0 {
			role = topology.RolePrimary
		}
		servers = append(servers, topology.Server{Name: name, Addr: addr, Weight: 1, Role: role, State: topology.Online, Readable: true, Writable: i == 0})
	}
	topo := &topology.Holder{}
	topo.Publish(&topology.Snapshot{Cluster: "c1", Type: "replication", Writer: 0, Term: 1, Servers: servers})
	srv := New(Options{Cluster: "c1", ServerVersion: "5.5.5-10.11.19-MariaDB-vigil", GTIDWaitTimeout: time.Second, ConnectTimeout: 5 * time.Second},
		[]User{{Name: "app", Cred: mysqlproto.Credentials{Plain: "secret"}, RYW: router.RYWGTID, Multiplexing: true}},
		topo, pools, log)
	return srv, serveTest(t, srv, pools...)
}

// A replica that refuses the session's schema (1044: a grant made a moment
// ago on the primary has not reached it) does not fail the read: the
// writer serves it.
func TestReplicaWithoutTheGrantDefersToWriter(t *testing.T) {
	primary := newFakeBackend(t)
	replica := newFakeBackend(t)
	replica.denyInitDB = true
	_, addr := twoServerProxy(t, primary, replica)
	db, err := sql.Open("mysql", "app:secret@tcp("+addr+")/shop?timeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v, n string
	if err := db.QueryRow("SELECT 'fresh-grant'").Scan(&v, &n); err != nil || v != "fresh-grant" {
		t.Fatalf("read with a schema the replica refuses: %q %v", v, err)
	}
	if primary.seen("SELECT 'fresh-grant'") != 1 {
		t.Errorf("the writer did not serve the read (replica saw it %d times)", replica.seen("SELECT 'fresh-grant'"))
	}
}

func (f *fakeBackend) serve(id uint32, fc *fakeConn) {
	defer fc.nc.Close()
	c := mysqlproto.NewConn(fc.nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	hello, err := c.Accept(ctx, &mysqlproto.ServerConfig{ServerVersion: f.version,
		Lookup: func(string) (mysqlproto.Credentials, bool) { return mysqlproto.Credentials{Plain: "pw"}, true }}, id, "127.0.0.1")
	cancel()
	if err != nil {
		return
	}
	deprecateEOF := hello.Capabilities&mysqlproto.CapabilityClientDeprecateEOF != 0
	for {
		c.Seq = 0
		p, err := c.ReadPacket()
		if err != nil {
			return
		}
		// The reply follows the request's last frame (Seq is past it).
		switch p[0] {
		case mysqlproto.ComQuit:
			return
		case mysqlproto.ComInitDB:
			if f.denyInitDB {
				_ = c.WritePacket(mysqlproto.AppendErr(nil, mysqlproto.NewError(1044, "42000", "Access denied for user 'app'@'localhost' to database '%s'", p[1:])))
				break
			}
			_ = c.WritePacket(mysqlproto.AppendOK(nil, 0, 0, mysqlproto.ServerStatusAutocommit, 0))
		case mysqlproto.ComPing, mysqlproto.ComResetConnection:
			_ = c.WritePacket(mysqlproto.AppendOK(nil, 0, 0, mysqlproto.ServerStatusAutocommit, 0))
		case mysqlproto.ComQuery:
			q := string(p[1:])
			f.mu.Lock()
			f.queries = append(f.queries, q)
			f.mu.Unlock()
			f.answer(c, fc, q, deprecateEOF)
		default:
			_ = c.WritePacket(mysqlproto.AppendErr(nil, mysqlproto.NewError(1047, "08S01", "Unknown command")))
		}
		if err := c.Flush(); err != nil {
			return
		}
	}
}

func (f *fakeBackend) answer(c *mysqlproto.Conn, fc *fakeConn, q string, deprecateEOF bool) {
	ok := func(status uint16) []byte { return mysqlproto.AppendOK(nil, 0, 0, status, 0) }
	st := fc.status
	switch {
	case q == "START TRANSACTION" || q == "BEGIN":
		fc.status |= mysqlproto.ServerStatusInTrans
		_ = c.WritePacket(ok(fc.status))
	case q == "COMMIT" || q == "ROLLBACK":
		fc.status &^= mysqlproto.ServerStatusInTrans
		_ = c.WritePacket(ok(fc.status))
	case strings.HasPrefix(q, "SET SESSION session_track"):
		_ = c.WritePacket(ok(mysqlproto.ServerStatusAutocommit | mysqlproto.ServerMoreResultsExists))
		writeRows(c, []string{"a", "b", "c", "d"}, [][]string{{"utf8mb4", "utf8mb4", "utf8mb4", "utf8mb4_general_ci"}}, st, deprecateEOF)
	case strings.HasPrefix(q, "KILL QUERY "):
		id, _ := strconv.Atoi(strings.TrimPrefix(q, "KILL QUERY "))
		f.mu.Lock()
		victim := f.conns[uint32(id)]
		f.mu.Unlock()
		if victim != nil {
			victim.once.Do(func() { close(victim.killed) })
		}
		_ = c.WritePacket(ok(mysqlproto.ServerStatusAutocommit))
	case strings.HasPrefix(q, "SELECT SLEEP("):
		secs, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(q, "SELECT SLEEP("), ")"), 64)
		select {
		case <-fc.killed:
			_ = c.WritePacket(mysqlproto.AppendErr(nil, mysqlproto.NewError(1317, "70100", "Query execution was interrupted")))
		case <-time.After(time.Duration(secs * float64(time.Second))):
			writeRows(c, []string{"SLEEP"}, [][]string{{"0"}}, st, deprecateEOF)
		}
	case strings.HasPrefix(q, "SELECT ROWS "):
		// SELECT ROWS n: n rows of two columns (forward's per-row path).
		n, _ := strconv.Atoi(strings.TrimPrefix(q, "SELECT ROWS "))
		writeRows(c, []string{"id", "v"}, benchRows(n), st, deprecateEOF)
	case q == "SELECT 'hangup'":
		// The server dies mid-statement: no reply, the connection ends.
		fc.nc.Close()
	case strings.HasPrefix(q, "SELECT '"):
		// SELECT 'text': one row with the text and a per-statement counter,
		// so a cached reply can be told from a fresh one.
		f.mu.Lock()
		n := len(f.queries)
		f.mu.Unlock()
		v := strings.TrimSuffix(strings.TrimPrefix(q, "SELECT '"), "'")
		writeRows(c, []string{"v", "n"}, [][]string{{v, strconv.Itoa(n)}}, st, deprecateEOF)
	case strings.HasPrefix(q, "INSERT") && f.insertState != nil:
		p := mysqlproto.AppendOK(nil, 1, 0, st|mysqlproto.ServerSessionStateChanged, 0)
		p = mysqlproto.AppendLenEncString(p, nil) // info
		p = mysqlproto.AppendLenEncString(p, f.insertState)
		_ = c.WritePacket(p)
	case strings.HasPrefix(q, "DROP"), strings.HasPrefix(q, "INSERT"):
		_ = c.WritePacket(ok(st))
	case strings.HasPrefix(q, "SELECT MASTER_GTID_WAIT("), strings.HasPrefix(q, "SELECT WAIT_FOR_EXECUTED_GTID_SET("):
		writeRows(c, []string{"w"}, [][]string{{"0"}}, st, deprecateEOF)
	default:
		_ = c.WritePacket(mysqlproto.AppendErr(nil, mysqlproto.NewError(1064, "42000", "fake backend: unexpected %q", q)))
	}
}

func writeRows(c *mysqlproto.Conn, cols []string, rows [][]string, status uint16, deprecateEOF bool) {
	_ = mysqlproto.WriteTextResult(c, cols, rows, status, deprecateEOF)
}

// memLog is a QueryLog that keeps entries.
type memLog struct {
	mu      sync.Mutex
	entries []qlog.Entry
}

func (m *memLog) Log(e *qlog.Entry) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := *e
	c.Statement = append([]byte(nil), e.Statement...)
	m.entries = append(m.entries, c)
	return true
}

func (m *memLog) all() []qlog.Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]qlog.Entry(nil), m.entries...)
}

type testProxy struct {
	srv  *Server
	addr string
	be   *fakeBackend
	log  *memLog
	dig  *qstats.Store
}

// newTestProxy serves one fake backend (writer and reader at once) with
// the given rules.
func newTestProxy(t testing.TB, specs []rules.Spec) *testProxy {
	t.Helper()
	be := newFakeBackend(t)
	addr := be.ln.Addr().String()
	topo := &topology.Holder{}
	topo.Publish(&topology.Snapshot{Cluster: "c1", Type: "replication", Writer: 0, Term: 1,
		Servers: []topology.Server{{Name: "fake1", Addr: addr, Weight: 1, Role: topology.RolePrimary, State: topology.Online, Readable: true, Writable: true}}})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pool := backend.NewPool("fake1", addr, 0, backend.Options{MaxOpen: 10,
		Credentials: func(u string) (string, string, bool) { return u, "pw", true }}, log)
	srv := New(Options{Cluster: "c1", ServerVersion: "5.5.5-10.11.19-MariaDB-vigil", ReadsOnPrimary: true},
		[]User{{Name: "app", Cred: mysqlproto.Credentials{Plain: "secret"}, RYW: router.RYWNone, Multiplexing: true}},
		topo, []*backend.Pool{pool}, log)
	set, err := rules.Compile(specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	tp := &testProxy{srv: srv, be: be, log: &memLog{}, dig: qstats.New(1000)}
	srv.SetProcessing(Processing{Rules: set, Digests: tp.dig, Cache: qcache.New(1<<20, 1<<16), Log: tp.log, LogQueries: true, LogAuth: true})
	tp.addr = serveTest(t, srv, pool)
	return tp
}

// serveTest serves srv on a fresh loopback port until the test ends, then
// closes the pools; it returns the address.
func serveTest(t testing.TB, srv *Server, pools ...*backend.Pool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		for _, p := range pools {
			p.Close()
		}
	})
	return ln.Addr().String()
}

func (tp *testProxy) db(t *testing.T, password string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", fmt.Sprintf("app:%s@tcp(%s)/?timeout=5s&interpolateParams=true", password, tp.addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestProcessingRules(t *testing.T) {
	tp := newTestProxy(t, []rules.Spec{
		{Name: "no-drop", Query: `(?i)^DROP`, Block: &rules.Block{Code: 4242, SQLState: "HY000", Message: "no drops here"}},
		{Name: "rename", Query: "'old'", RewritePattern: `'old'`, RewriteReplace: `'new'`},
		{Name: "cached", Query: "'hot'", CacheTTL: time.Minute},
		{Name: "slow", Query: `SLEEP\(5\)`, Timeout: 200 * time.Millisecond},
		{Name: "quiet", Query: "'quiet'", Log: new(bool)},
	})
	db := tp.db(t, "secret")
	db.SetMaxOpenConns(1)
	one := func(q string) (string, string, error) {
		var v, n string
		err := db.QueryRow(q).Scan(&v, &n)
		return v, n, err
	}

	t.Run("Block", func(t *testing.T) {
		_, err := db.Exec("DROP TABLE t")
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 4242 || me.Message != "no drops here" {
			t.Fatalf("blocked statement: %v", err)
		}
		if tp.be.seen("DROP") != 0 {
			t.Error("the blocked statement reached the server")
		}
	})
	t.Run("Rewrite", func(t *testing.T) {
		v, _, err := one("SELECT 'old'")
		if err != nil || v != "new" {
			t.Fatalf("rewritten: %q %v", v, err)
		}
		if tp.be.seen("'old'") != 0 || tp.be.seen("'new'") != 1 {
			t.Error("the server did not get the rewritten statement")
		}
	})
	t.Run("Cache", func(t *testing.T) {
		v1, n1, err := one("SELECT 'hot'")
		if err != nil {
			t.Fatal(err)
		}
		v2, n2, err := one("SELECT 'hot'")
		if err != nil {
			t.Fatal(err)
		}
		if v1 != v2 || n1 != n2 || tp.be.seen("'hot'") != 1 {
			t.Errorf("second run not from the cache: (%s,%s) (%s,%s), server saw %d", v1, n1, v2, n2, tp.be.seen("'hot'"))
		}
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		var v, n string
		if err := tx.QueryRow("SELECT 'hot'").Scan(&v, &n); err != nil {
			t.Fatal(err)
		}
		_ = tx.Rollback()
		if tp.be.seen("'hot'") != 2 {
			t.Error("a read inside a transaction was answered from the cache")
		}
	})
	t.Run("Timeout", func(t *testing.T) {
		start := time.Now()
		_, err := db.Exec("SELECT SLEEP(5)")
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != mysqlproto.ERVigilStatementTimeout || !strings.Contains(me.Message, "slow") {
			t.Fatalf("timed-out statement: %v", err)
		}
		if time.Since(start) > 4*time.Second {
			t.Errorf("not killed: took %s", time.Since(start))
		}
		if tp.be.seen("KILL QUERY") != 1 {
			t.Errorf("KILL QUERY sent %d times", tp.be.seen("KILL QUERY"))
		}
		if v, _, err := one("SELECT 'after'"); err != nil || v != "after" {
			t.Errorf("session after the timeout: %q %v", v, err)
		}
	})
	t.Run("DigestsAndLog", func(t *testing.T) {
		if _, _, err := one("SELECT 'quiet'"); err != nil {
			t.Fatal(err)
		}
		rows := tp.dig.Rows(qstats.Query{ByDigest: false})
		byText := map[string]qstats.Row{}
		for _, r := range rows {
			byText[r.Text+"|"+r.Hostgroup] = r
		}
		if r := byText["SELECT ?|cache"]; r.Count != 1 {
			t.Errorf("cache hits in digests: %+v", rows)
		}
		if r := byText["DROP TABLE t|blocked"]; r.Count != 1 || r.Errors != 1 {
			t.Errorf("blocked statement in digests: %+v", r)
		}
		var blocked, cached, quiet, timedOut int
		for _, e := range tp.log.all() {
			s := string(e.Statement)
			switch {
			case s == "DROP TABLE t" && e.ErrCode == 4242 && e.Rule == "no-drop":
				blocked++
			case s == "SELECT 'hot'" && e.Cached:
				cached++
			case s == "SELECT 'quiet'":
				quiet++
			case s == "SELECT SLEEP(5)" && e.ErrCode == mysqlproto.ERVigilStatementTimeout && e.Server == "fake1":
				timedOut++
			}
		}
		if blocked != 1 || cached != 1 || quiet != 0 || timedOut != 1 {
			t.Errorf("log entries: blocked %d cached %d quiet %d timeout %d", blocked, cached, quiet, timedOut)
		}
	})
	t.Run("AuthLog", func(t *testing.T) {
		bad := tp.db(t, "wrong")
		if err := bad.Ping(); err == nil {
			t.Fatal("wrong password accepted")
		}
		var ok, failed int
		// The entry is written after the client got its error: wait a bit.
		for deadline := time.Now().Add(3 * time.Second); failed == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			ok, failed = 0, 0
			for _, e := range tp.log.all() {
				if e.Kind == qlog.KindAuth && e.User == "app" {
					if e.Success {
						ok++
					} else if e.ErrCode == mysqlproto.ERAccessDeniedError {
						failed++
					}
				}
			}
		}
		if ok == 0 || failed != 1 {
			t.Errorf("auth entries: %d ok, %d failed", ok, failed)
		}
	})
}

// TestSessionListingShowsRunningStatement checks that an operator sees
// what a session runs, masked, and can kill it.
func TestSessionListingShowsRunningStatement(t *testing.T) {
	tp := newTestProxy(t, nil)
	db := tp.db(t, "secret")
	id, errc := runSleep(t, tp, db)
	if err := tp.srv.KillSession(context.Background(), id, false); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if err == nil {
			t.Error("killed session's statement succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("killed session still runs")
	}
	if err := tp.srv.KillSession(context.Background(), 99999, false); !errors.Is(err, ErrNoSession) {
		t.Errorf("unknown session: %v", err)
	}
}

// runSleep starts SELECT SLEEP(10) through db and returns the id of the
// session running it, once the listing shows it on fake1, and where the
// statement's outcome arrives.
func runSleep(t *testing.T, tp *testProxy, db *sql.DB) (uint32, chan error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := db.Exec("SELECT SLEEP(10)")
		errc <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range tp.srv.Sessions() {
			if s.Command == "SELECT SLEEP(?)" && s.Server == "fake1" {
				return s.ID, errc
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("running statement not listed: %+v", tp.srv.Sessions())
	return 0, nil
}

// sessionState builds an OK packet's session state block of one entry.
func sessionState(typ byte, data []byte) []byte {
	return mysqlproto.AppendLenEncString([]byte{typ}, data)
}

// TestReadYourWritesGTIDFlavours: after a write, a read on a replica waits
// for the write's GTID with the server's own function. MariaDB reports the
// GTID in the last_gtid variable, MySQL through session_track_gtids =
// OWN_GTID, which Vigil switches on for MySQL servers only.
func TestReadYourWritesGTIDFlavours(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		state         []byte
		wantInit      bool // session_track_gtids=OWN_GTID in the connection set-up
		wantWait      string
	}{
		{"mariadb", "5.5.5-10.11.19-MariaDB-fake",
			sessionState(mysqlproto.SessionTrackSystemVariables,
				mysqlproto.AppendLenEncString(mysqlproto.AppendLenEncString(nil, []byte("last_gtid")), []byte("0-1-42"))),
			false, "SELECT MASTER_GTID_WAIT('0-1-42', 1.000)"},
		{"mysql", "8.0.36",
			sessionState(mysqlproto.SessionTrackGTIDs,
				mysqlproto.AppendLenEncString([]byte{0}, []byte("3e11fa47-71ca-11e1-9e33-c80aa9429562:23"))),
			true, "SELECT WAIT_FOR_EXECUTED_GTID_SET('3e11fa47-71ca-11e1-9e33-c80aa9429562:23', 1.000)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			primary := newFakeServer(t, tc.version, tc.state)
			replica := newFakeServer(t, tc.version, nil)
			srv, addr := twoServerProxy(t, primary, replica)
			ctx := context.Background()
			db, err := sql.Open("mysql", "app:secret@tcp("+addr+")/?timeout=5s")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			conn, err := db.Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.ExecContext(ctx, "INSERT INTO t VALUES (1)"); err != nil {
				t.Fatal(err)
			}
			var v, n string
			if err := conn.QueryRowContext(ctx, "SELECT 'after-write'").Scan(&v, &n); err != nil {
				t.Fatal(err)
			}
			if got := primary.seen("INSERT INTO t"); got != 1 {
				t.Errorf("INSERT reached the primary %d times, want 1", got)
			}
			if got := replica.seen("SELECT 'after-write'"); got != 1 {
				t.Errorf("the read reached the replica %d times, want 1 (primary: %d)", got, primary.seen("SELECT 'after-write'"))
			}
			if got := replica.seen(tc.wantWait); got != 1 {
				replica.mu.Lock()
				t.Errorf("replica saw %q %d times, want 1; it saw %q", tc.wantWait, got, replica.queries)
				replica.mu.Unlock()
			}
			if got := primary.seen("session_track_gtids=OWN_GTID") > 0; got != tc.wantInit {
				t.Errorf("OWN_GTID tracking switched on: %v, want %v", got, tc.wantInit)
			}
			if w := srv.Stats.GTIDWaits.Load(); w != 1 {
				t.Errorf("GTID waits %d, want 1", w)
			}
		})
	}
}

// A panic in one session ends that session only: its client gets 7014,
// the daemon and the other sessions go on, and the panic is counted.
func TestSessionPanicIsContained(t *testing.T) {
	tp := newTestProxy(t, nil)
	tp.srv.testHook = func(q []byte) {
		if string(q) == "SELECT 'boom'" {
			panic("test panic")
		}
	}
	other := tp.db(t, "secret")
	other.SetMaxOpenConns(1)
	var v, n string
	if err := other.QueryRow("SELECT 'before'").Scan(&v, &n); err != nil {
		t.Fatal(err)
	}
	victim := tp.db(t, "secret")
	// The panicking session's connection is closed after its error; the
	// driver may not see the close before it reuses the connection
	// ("invalid connection"), so the next session is a new connection.
	victim.SetMaxIdleConns(0)
	_, err := victim.Exec("SELECT 'boom'")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != mysqlproto.ERVigilInternal {
		t.Fatalf("the panicking session's client got %v, want error 7014", err)
	}
	if err := other.QueryRow("SELECT 'after'").Scan(&v, &n); err != nil || v != "after" {
		t.Fatalf("another session after the panic: %q %v", v, err)
	}
	if err := victim.QueryRow("SELECT 'again'").Scan(&v, &n); err != nil || v != "again" {
		t.Fatalf("a new session after the panic: %q %v", v, err)
	}
	if got := tp.srv.Stats.Panics.Load(); got != 1 {
		t.Fatalf("panics counted: %d, want 1", got)
	}
}

// A statement whose server connection breaks asks the monitor for an
// immediate check of that server (OnServerLost): the death is noticed
// when clients see it, not at the next check interval.
func TestServerLostHook(t *testing.T) {
	tp := newTestProxy(t, nil)
	lost := make(chan int, 4)
	tp.srv.OnServerLost(func(idx int) { lost <- idx })
	db := tp.db(t, "secret")
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("SELECT 'warm'"); err != nil {
		t.Fatal(err)
	}
	select {
	case i := <-lost:
		t.Fatalf("hook called for a working statement (server %d)", i)
	default:
	}
	if _, err := db.Exec("SELECT 'hangup'"); err == nil {
		t.Fatal("a statement whose server hung up succeeded")
	}
	select {
	case i := <-lost:
		if i != 0 {
			t.Fatalf("hook called for server %d, want 0", i)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the hook was not called when the server connection broke")
	}
}

func TestNewerGTID(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"0-1-10", "0-1-9", true},
		{"0-1-9", "0-1-10", false},
		{"0-2-11", "0-1-10", true}, // another server id, same domain: by sequence
		{"0-2-9", "0-1-10", false},
		{"1-1-5", "0-1-10", true}, // another domain
		{"3E11FA47-71CA-11E1-9E33-C80AA9429562:23", "3E11FA47-71CA-11E1-9E33-C80AA9429562:22", true}, // MySQL: the last one
	} {
		if got := newerGTID(tc.a, tc.b); got != tc.want {
			t.Errorf("newerGTID(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
	srv := &Server{}
	for _, g := range []string{"0-1-5", "0-1-7", "0-1-6"} {
		srv.noteGTID(g)
	}
	if got := *srv.latestGTID.Load(); got != "0-1-7" {
		t.Fatalf("latest GTID %q, want 0-1-7", got)
	}
}
