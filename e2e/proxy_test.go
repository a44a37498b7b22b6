package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// proxyEnv is one replication sandbox with Vigil in front, shared by the
// data-path tests.
type proxyEnv struct {
	sb    *sandbox.Sandbox
	v     *vigilProc
	addr  string
	admin string
	nodes []string
}

// waitAllOnline waits until Vigil's monitor routes every server again (a
// test that stopped replication leaves a replica SHUNNED for a while).
func (e *proxyEnv) waitAllOnline(t *testing.T) {
	Eventually(t, 30*time.Second, "every server ONLINE", func() error {
		resp, err := http.Get("http://" + e.admin + "/api/v1/servers")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var list []admin.ServerView
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			return err
		}
		for _, s := range list {
			if s.State != "ONLINE" {
				return fmt.Errorf("%s is %s", s.Name, s.State)
			}
		}
		return nil
	})
}

func (e *proxyEnv) dsn(extra string) string {
	d := fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s", e.addr)
	if extra != "" {
		d += "&" + extra
	}
	return d
}

func newProxyEnv(t *testing.T) *proxyEnv {
	sb := Sandbox(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3})
	cfg, err := config.Load(sb.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	cert, key := selfSignedCert(t, sb.Dir())
	cfg.Clusters[0].TLS = &config.TLS{Cert: cert, Key: key}
	cfg.Clusters[0].Pool.MaxOpen = 60
	data, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sb.Dir(), "vigil-e2e.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := cfg.Clusters[0].Listen
	enableUserStats(t, sb, []string{"node1", "node2", "node3"})
	v := startVigil(t, path, addr)
	env := &proxyEnv{sb: sb, v: v, addr: addr, admin: cfg.Admin.Listen, nodes: []string{"node1", "node2", "node3"}}
	env.waitAllOnline(t)
	return env
}

func TestProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	env := newProxyEnv(t)
	db := openDB(t, env.dsn(""))
	mustExec(t, db, "CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY AUTO_INCREMENT, v VARCHAR(64), n INT DEFAULT 0)")

	t.Run("TextAndBinaryProtocol", func(t *testing.T) { testTextAndBinary(t, env, db) })
	t.Run("Transactions", func(t *testing.T) { testTransactions(t, env, db) })
	t.Run("AutocommitOffORM", func(t *testing.T) { testAutocommitOff(t, env, db) })
	t.Run("SessionStateAndPins", func(t *testing.T) { testSessionState(t, env, db) })
	t.Run("MultiStatements", func(t *testing.T) { testMultiStatements(t, env) })
	t.Run("LoadDataLocal", func(t *testing.T) { testLoadDataLocal(t, env) })
	t.Run("TLS", func(t *testing.T) { testTLS(t, env) })
	t.Run("ChangeUserAndKill", func(t *testing.T) { testChangeUserAndKill(t, env) })
	t.Run("Errors", func(t *testing.T) { testErrors(t, env) })
	t.Run("ClientGoneMidQuery", func(t *testing.T) { testClientGone(t, env) })
	t.Run("MariadbCLI", func(t *testing.T) { testMariadbCLI(t, env) })
	t.Run("ReadYourWritesGTID", func(t *testing.T) { testReadYourWrites(t, env, db) })
	t.Run("ReadSplitCounters", func(t *testing.T) { testReadSplit(t, env, db) })
	t.Run("Sysbench", func(t *testing.T) { testSysbench(t, env) })
	t.Run("TenThousandIdleClients", func(t *testing.T) { testManyClients(t, env) })
}

func testTextAndBinary(t *testing.T, env *proxyEnv, db *sql.DB) {
	mustExec(t, db, "INSERT INTO t (v) VALUES ('text')")
	var v string
	if err := db.QueryRow("SELECT v FROM t WHERE v = 'text' LIMIT 1").Scan(&v); err != nil || v != "text" {
		t.Fatalf("text protocol read: %q %v", v, err)
	}
	// go-sql-driver prepares on the server for queries with arguments.
	st, err := db.Prepare("INSERT INTO t (v, n) VALUES (?, ?)")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 20 {
		if _, err := st.Exec(fmt.Sprintf("bin-%d", i), i); err != nil {
			t.Fatalf("execute %d: %v", i, err)
		}
	}
	q, err := db.Prepare("SELECT COUNT(*), SUM(n) FROM t WHERE v LIKE ?")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	// Reads go to replicas, which may lag by a moment.
	deadline := time.Now().Add(3 * time.Second)
	var cnt, sum int
	for time.Now().Before(deadline) {
		if err := q.QueryRow("bin-%").Scan(&cnt, &sum); err != nil {
			t.Fatal(err)
		}
		if cnt == 20 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if cnt != 20 || sum != 190 {
		t.Fatalf("binary protocol: count %d sum %d, want 20 190", cnt, sum)
	}
	// NULLs, many types and a long value through the binary protocol.
	long := strings.Repeat("x", 60000)
	var got sql.NullString
	var f float64
	var ts time.Time
	row := db.QueryRow("SELECT ?, CAST(? AS DOUBLE), NULL, TIMESTAMP('2024-01-02 03:04:05')", long, 2.5)
	var null sql.NullString
	var tsRaw []byte
	if err := row.Scan(&got, &f, &null, &tsRaw); err != nil {
		t.Fatal(err)
	}
	_ = ts
	if got.String != long || f != 2.5 || null.Valid || string(tsRaw) != "2024-01-02 03:04:05" {
		t.Fatalf("types: len %d f %v null %v ts %q", len(got.String), f, null.Valid, tsRaw)
	}
}

func testTransactions(t *testing.T, env *proxyEnv, db *sql.DB) {
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	res, err := tx.Exec("INSERT INTO t (v) VALUES ('in-tx')")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	// A read inside the transaction must see the uncommitted row: it runs
	// on the transaction's server.
	var v string
	if err := tx.QueryRow("SELECT v FROM t WHERE id = ?", id).Scan(&v); err != nil || v != "in-tx" {
		t.Fatalf("read in transaction: %q %v", v, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT v FROM t WHERE id = ?", id).Scan(&v); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("rolled back row visible: %v", err)
	}
	tx, _ = db.Begin()
	if _, err := tx.Exec("INSERT INTO t (v) VALUES ('committed')"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// START TRANSACTION READ ONLY may run on a replica.
	tx, err = db.BeginTx(context.Background(), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var ro int
	if err := tx.QueryRow("SELECT @@read_only").Scan(&ro); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	if ro != 1 {
		t.Errorf("read-only transaction ran on a server with read_only=%d, want a replica", ro)
	}
}

func testAutocommitOff(t *testing.T, env *proxyEnv, db *sql.DB) {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mustExec(t, conn, "INSERT INTO t (id, v, n) VALUES (1000, 'orm', 0) ON DUPLICATE KEY UPDATE n = 0")
	before := readCounters(t, env.sb, env.nodes)
	for i := range 10 {
		mustExec(t, conn, "SET autocommit=0")
		var n int
		if err := conn.QueryRowContext(ctx, "SELECT n FROM t WHERE id = 1000").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != i {
			t.Fatalf("iteration %d read n=%d: the SELECT did not run on the primary inside the transaction", i, n)
		}
		mustExec(t, conn, "UPDATE t SET n = n + 1 WHERE id = 1000")
		mustExec(t, conn, "COMMIT")
		mustExec(t, conn, "SET autocommit=1")
	}
	after := readCounters(t, env.sb, env.nodes)
	// USER_STATISTICS may still be counting the INSERT before the loop, so
	// the primary's count is at least 10; the replicas' must be exactly 0.
	if d := after.delta(before, "node1", "write"); d < 10 {
		t.Errorf("primary saw %d writes, want at least the 10 UPDATEs", d)
	}
	for _, n := range []string{"node2", "node3"} {
		if d := after.delta(before, n, "write"); d != 0 {
			t.Errorf("replica %s saw %d UPDATEs, want 0", n, d)
		}
	}
}

func testSessionState(t *testing.T, env *proxyEnv, db *sql.DB) {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// User variables pin the session.
	mustExec(t, conn, "SET @x = 1")
	var x int
	if err := conn.QueryRowContext(ctx, "SELECT @x").Scan(&x); err != nil || x != 1 {
		t.Fatalf("SET @x=1; SELECT @x: %d %v", x, err)
	}
	// Temporary tables pin too.
	mustExec(t, conn, "CREATE TEMPORARY TABLE tmp1 (a INT)")
	mustExec(t, conn, "INSERT INTO tmp1 VALUES (1), (2), (3)")
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM tmp1").Scan(&n); err != nil || n != 3 {
		t.Fatalf("temporary table: %d %v", n, err)
	}
	// Session variables are replayed on whatever connection serves next.
	c2, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	mustExec(t, c2, "SET SESSION sql_mode = 'ANSI_QUOTES'")
	mustExec(t, c2, "SET time_zone = '+03:00'")
	for range 10 {
		var mode, tz string
		if err := c2.QueryRowContext(ctx, "SELECT @@session.sql_mode, @@session.time_zone").Scan(&mode, &tz); err != nil {
			t.Fatal(err)
		}
		if mode != "ANSI_QUOTES" || tz != "+03:00" {
			t.Fatalf("session state lost: sql_mode %q time_zone %q", mode, tz)
		}
	}
	// Another client does not inherit it.
	c3, _ := db.Conn(ctx)
	defer c3.Close()
	var tz string
	if err := c3.QueryRowContext(ctx, "SELECT @@session.time_zone").Scan(&tz); err != nil || tz == "+03:00" {
		t.Fatalf("state leaked to another client: %q %v", tz, err)
	}
	// USE is tracked.
	mustExec(t, c2, "USE sbtest")
	var dbname string
	if err := c2.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbname); err != nil || dbname != "sbtest" {
		t.Fatalf("USE not kept: %q %v", dbname, err)
	}
}

func testMultiStatements(t *testing.T, env *proxyEnv) {
	db := openDB(t, env.dsn("multiStatements=true"))
	mustExec(t, db, "INSERT INTO t (v) VALUES ('m1'); INSERT INTO t (v) VALUES ('m2'); UPDATE t SET n = 7 WHERE v IN ('m1','m2')")
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM t WHERE v IN ('m1','m2') AND n = 7 FOR UPDATE").Scan(&n); err != nil || n != 2 {
		t.Fatalf("multi-statement: %d %v", n, err)
	}
	// Without the capability the proxy refuses, as the server would.
	plain := openDB(t, env.dsn(""))
	_, err := plain.Exec("SELECT 1; SELECT 2")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1064 {
		t.Fatalf("multi-statement without capability: %v", err)
	}
}

func testLoadDataLocal(t *testing.T, env *proxyEnv) {
	f := filepath.Join(t.TempDir(), "rows.csv")
	var b strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&b, "load-%d,%d\n", i, i)
	}
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	mysql.RegisterLocalFile(f)
	db := openDB(t, env.dsn(""))
	res := mustExec(t, db, "LOAD DATA LOCAL INFILE '"+f+"' INTO TABLE t FIELDS TERMINATED BY ',' (v, n)")
	if n, _ := res.RowsAffected(); n != 1000 {
		t.Fatalf("LOAD DATA LOCAL: %d rows", n)
	}
}

func testTLS(t *testing.T, env *proxyEnv) {
	db := openDB(t, env.dsn("tls=skip-verify"))
	var v string
	if err := db.QueryRow("SELECT 'tls-ok'").Scan(&v); err != nil || v != "tls-ok" {
		t.Fatalf("query over TLS: %q %v", v, err)
	}
	// A second listener that offers caching_sha2_password first, as MySQL 8
	// does: full authentication over TLS (password inside TLS), then the
	// fast path for the same user, then full authentication over plain TCP
	// with the RSA key exchange.
	cfg, err := config.Load(filepath.Join(env.sb.Dir(), "vigil-e2e.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Clusters[0].AuthPlugin = "caching_sha2_password"
	cfg.Clusters[0].Listen = freeAddr(t)
	cfg.Admin.Listen = ""
	data, _ := cfg.Marshal()
	path := filepath.Join(env.sb.Dir(), "vigil-sha2.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	startVigil(t, path, cfg.Clusters[0].Listen)
	base := fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s", cfg.Clusters[0].Listen)
	for _, dsn := range []string{base + "&tls=skip-verify", base + "&tls=skip-verify", base} {
		d := openDB(t, dsn)
		if err := d.QueryRow("SELECT 'sha2-ok'").Scan(&v); err != nil || v != "sha2-ok" {
			t.Fatalf("caching_sha2_password (%s): %q %v", dsn, v, err)
		}
		d.Close()
	}
	bad := openDB(t, strings.Replace(base, "app:app", "app:wrong", 1)+"&tls=skip-verify")
	var me *mysql.MySQLError
	if err := bad.Ping(); !errors.As(err, &me) || me.Number != 1045 {
		t.Fatalf("caching_sha2_password with a wrong password: %v", err)
	}
}

func testChangeUserAndKill(t *testing.T, env *proxyEnv) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Vigil gives each client its own connection id; KILL takes that id.
	victim, g, err := mysqlproto.Dial(ctx, &mysqlproto.DialConfig{Addr: env.addr, User: "app", Password: "app"})
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	done := make(chan error, 1)
	go func() {
		victim.Seq = 0
		_ = victim.WritePacket(append([]byte{mysqlproto.ComQuery}, "SELECT SLEEP(20)"...))
		_ = victim.Flush()
		// Read the reply: 1 row with 1 (interrupted) or an error.
		start := time.Now()
		for {
			p, err := victim.ReadPacket()
			if err != nil {
				done <- err
				return
			}
			if p[0] == mysqlproto.ErrPacket || (p[0] == mysqlproto.EOFPacket && len(p) < 9 && time.Since(start) > 0) {
				if p[0] == mysqlproto.EOFPacket {
					// metadata EOF or final EOF; keep reading until the final one
					continue
				}
				done <- mysqlproto.ParseErr(p)
				return
			}
			if p[0] == '\x01' && len(p) == 2 && p[1] == '1' { // row "1": SLEEP interrupted
				done <- nil
				return
			}
		}
	}()
	time.Sleep(500 * time.Millisecond)
	db := openDB(t, env.dsn(""))
	start := time.Now()
	if _, err := db.Exec(fmt.Sprintf("KILL QUERY %d", g.ConnectionID)); err != nil {
		t.Fatalf("KILL QUERY %d: %v", g.ConnectionID, err)
	}
	select {
	case err := <-done:
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("killed query returned after %s", d)
		}
		var se *mysqlproto.SQLError
		if err != nil && !(errors.As(err, &se) && se.Code == 1317) {
			t.Fatalf("killed query: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("KILL QUERY did not interrupt SLEEP(20)")
	}
	if _, err := db.Exec("KILL 999999"); err == nil || !strings.Contains(err.Error(), "1094") {
		t.Fatalf("KILL of unknown id: %v", err)
	}

	// COM_CHANGE_USER: to the monitor user with the right password, then a
	// wrong one.
	c, _, err := mysqlproto.Dial(ctx, &mysqlproto.DialConfig{Addr: env.addr, User: "app", Password: "app"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := changeUser(c, "app", "app", "sbtest"); err != nil {
		t.Fatalf("change user: %v", err)
	}
	if err := changeUser(c, "app", "wrong", ""); err == nil || !strings.Contains(err.Error(), "1045") {
		t.Fatalf("change user with a wrong password: %v", err)
	}
}

// changeUser sends COM_CHANGE_USER and answers Vigil's auth switch.
func changeUser(c *mysqlproto.Conn, user, pass, db string) error {
	c.Seq = 0
	p := []byte{mysqlproto.ComChangeUser}
	p = append(append(p, user...), 0)
	p = append(p, 0) // empty scramble: Vigil asks again with a fresh nonce
	p = append(append(p, db...), 0)
	p = append(p, mysqlproto.DefaultCollationID, 0)
	p = append(append(p, mysqlproto.AuthNativePassword...), 0)
	if err := c.WritePacket(p); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return err
	}
	r, err := c.ReadPacket()
	if err != nil {
		return err
	}
	if r[0] == mysqlproto.ErrPacket {
		return mysqlproto.ParseErr(r)
	}
	if r[0] != mysqlproto.AuthSwitchRequest {
		return fmt.Errorf("unexpected 0x%02x", r[0])
	}
	_, pos, _ := mysqlproto.ReadNulString(r, 1)
	nonce := r[pos : len(r)-1]
	if err := c.WritePacket(nativeScramble(nonce, pass)); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return err
	}
	r, err = c.ReadPacket()
	if err != nil {
		return err
	}
	if r[0] == mysqlproto.ErrPacket {
		return mysqlproto.ParseErr(r)
	}
	return nil
}

func testErrors(t *testing.T, env *proxyEnv) {
	bad := openDB(t, fmt.Sprintf("app:nope@tcp(%s)/", env.addr))
	err := bad.Ping()
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1045 {
		t.Fatalf("wrong password: %v", err)
	}
	unk := openDB(t, fmt.Sprintf("ghost:x@tcp(%s)/", env.addr))
	if err := unk.Ping(); !errors.As(err, &me) || me.Number != 1045 {
		t.Fatalf("unknown user: %v", err)
	}
	nodb := openDB(t, fmt.Sprintf("app:app@tcp(%s)/no_such_db", env.addr))
	if err := nodb.Ping(); !errors.As(err, &me) || me.Number != 1049 {
		t.Fatalf("unknown database: %v", err)
	}
	db := openDB(t, env.dsn(""))
	if _, err := db.Exec("INSERT INTO no_such_table VALUES (1)"); !errors.As(err, &me) || me.Number != 1146 {
		t.Fatalf("server error passes through: %v", err)
	}
	// The session stays usable after errors.
	var one int
	if err := db.QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("after error: %v", err)
	}
}

func testMariadbCLI(t *testing.T, env *proxyEnv) {
	host, port, _ := strings.Cut(env.addr, ":")
	args := []string{"-h", host, "-P", port, "-uapp", "-papp", "--protocol=tcp", "-N", "-B", "vigil_test"}
	out, err := exec.Command("mariadb", append(args, "-e", "SELECT 40+2; SELECT @@read_only; SELECT COUNT(*) > 0 FROM t")...).CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb -e: %v\n%s", err, out)
	}
	if lines := strings.Fields(string(out)); len(lines) != 3 || lines[0] != "42" || lines[2] != "1" {
		t.Fatalf("mariadb -e output: %q", out)
	}
	script := filepath.Join(t.TempDir(), "s.sql")
	os.WriteFile(script, []byte("CREATE TABLE IF NOT EXISTS cli (a INT);\nBEGIN;\nINSERT INTO cli VALUES (1),(2);\nCOMMIT;\nSELECT SUM(a) FROM cli FOR UPDATE;\nDROP TABLE cli;\n"), 0o644)
	out, err = exec.Command("mariadb", append(args, "-e", "source "+script)...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "3" {
		t.Fatalf("mariadb source: %v %q", err, out)
	}
}

func testReadYourWrites(t *testing.T, env *proxyEnv, _ *sql.DB) {
	ctx := context.Background()
	db := openDB(t, env.dsn(""))
	if _, err := env.sb.SQL(ctx, "node3", "STOP SLAVE SQL_THREAD"); err != nil {
		t.Fatal(err)
	}
	defer env.sb.SQL(ctx, "node3", "START SLAVE SQL_THREAD")
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i := range 40 {
		res, err := conn.ExecContext(ctx, "INSERT INTO t (v) VALUES (?)", fmt.Sprintf("ryw-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		var v string
		if err := conn.QueryRowContext(ctx, "SELECT v FROM t WHERE id = ?", id).Scan(&v); err != nil {
			t.Fatalf("read after write %d (id %d): %v", i, id, err)
		}
	}
}

func testReadSplit(t *testing.T, env *proxyEnv, db *sql.DB) {
	env.waitAllOnline(t)
	before := readCounters(t, env.sb, env.nodes)
	other := openDB(t, env.dsn("")) // a fresh client has no recent write
	for range 200 {
		var n int
		if err := other.QueryRow("SELECT COUNT(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	after := readCounters(t, env.sb, env.nodes)
	r2, r3 := after.delta(before, "node2", "select"), after.delta(before, "node3", "select")
	p := after.delta(before, "node1", "select")
	t.Logf("SELECT counts: node1 %d node2 %d node3 %d", p, r2, r3)
	if r2+r3 < 200 || r2 < 40 || r3 < 40 {
		t.Errorf("reads not spread over replicas: node2 %d node3 %d", r2, r3)
	}
	if p > 20 {
		t.Errorf("primary served %d of 200 reads", p)
	}
}

func testManyClients(t *testing.T, env *proxyEnv) {
	const n = 10000
	raiseNoFile(t, n+2000)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conns := make([]*mysqlproto.Conn, n)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, _, err := mysqlproto.Dial(ctx, &mysqlproto.DialConfig{Addr: env.addr, User: "app", Password: "app"})
			if err == nil && i%10 == 0 {
				err = pingQuery(c)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	if firstErr != nil {
		t.Fatalf("opening %d clients: %v", n, firstErr)
	}
	total := int64(0)
	for _, node := range env.nodes {
		total += nodeStatus(t, env.sb, node, "Threads_connected")
	}
	rss := rssKiB(env.v.pid())
	t.Logf("%d idle clients through Vigil: %d server connections in total, Vigil RSS %d MiB", n, total, rss/1024)
	if total > 200 {
		t.Errorf("%d server connections for %d idle clients, want at most 200", total, n)
	}
	// They still work.
	for i := 0; i < n; i += 1000 {
		if err := pingQuery(conns[i]); err != nil {
			t.Fatalf("client %d after the crowd: %v", i, err)
		}
	}
}

func pingQuery(c *mysqlproto.Conn) error {
	c.Seq = 0
	if err := c.WritePacket(append([]byte{mysqlproto.ComQuery}, "SELECT 1"...)); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return err
	}
	// Without CLIENT_DEPRECATE_EOF: column count, definition, EOF, row, EOF.
	for range 5 {
		p, err := c.ReadPacket()
		if err != nil {
			return err
		}
		if p[0] == mysqlproto.ErrPacket {
			return mysqlproto.ParseErr(p)
		}
	}
	return nil
}

func testClientGone(t *testing.T, env *proxyEnv) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := mysqlproto.Dial(ctx, &mysqlproto.DialConfig{Addr: env.addr, User: "app", Password: "app"})
	if err != nil {
		t.Fatal(err)
	}
	c.Seq = 0
	_ = c.WritePacket(append([]byte{mysqlproto.ComQuery}, "SELECT SLEEP(31.5)"...))
	_ = c.Flush()
	time.Sleep(300 * time.Millisecond)
	c.Close()
	running := func() int {
		n := 0
		for _, node := range env.nodes {
			rows, err := env.sb.SQL(ctx, node, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT SLEEP(31.5)%'")
			if err == nil && len(rows) == 1 && rows[0][0] != "0" {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if running() == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("the query of a client that went away still runs on a server after 5s")
}
