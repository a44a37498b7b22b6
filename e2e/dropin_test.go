package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/router"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// Drop-in correctness (issue 13): with multiplexing, every client must see
// exactly what it would see on the server itself — its own prepared
// statements, warnings, counters and insert ids, never another client's.
// The tests interleave sessions so that they share pooled server
// connections, and check real values.

// dropInEnv is a sandbox with Vigil in front for these tests.
type dropInEnv struct {
	sb    *sandbox.Sandbox
	addr  string
	admin string
}

func newDropInEnv(t *testing.T, topo sandbox.Topology, nodes int, tweak func(*config.Config)) *dropInEnv {
	t.Helper()
	sb := Sandbox(t, sandbox.Options{Topology: topo, Nodes: nodes})
	cfg, err := config.Load(sb.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(cfg)
	}
	path := writeConfig(t, sb.Dir(), "vigil-dropin.yaml", cfg)
	addr := cfg.Clusters[0].Listen
	startVigil(t, path, addr)
	env := &dropInEnv{sb: sb, addr: addr, admin: cfg.Admin.Listen}
	(&proxyEnv{admin: env.admin}).waitAllOnline(t)
	return env
}

func (e *dropInEnv) dsn(db, extra string) string {
	d := fmt.Sprintf("app:app@tcp(%s)/%s?timeout=5s", e.addr, db)
	if extra != "" {
		d += "&" + extra
	}
	return d
}

// client is one client session: one connection to Vigil. Close closes
// the connection (database/sql would otherwise keep it open).
type client struct {
	*sql.Conn
	db *sql.DB
}

func (c client) Close() {
	c.Conn.Close()
	c.db.Close()
}

// conn opens one client session.
func (e *dropInEnv) conn(t *testing.T, db string) client {
	t.Helper()
	pool, err := sql.Open("mysql", e.dsn(db, ""))
	if err != nil {
		t.Fatal(err)
	}
	pool.SetMaxOpenConns(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pool.Conn(ctx)
	if err != nil {
		pool.Close()
		t.Fatal(err)
	}
	cl := client{c, pool}
	t.Cleanup(cl.Close)
	return cl
}

func qctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// one returns the single value of q (NULL as "NULL").
func one(t *testing.T, c interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, q string, args ...any) string {
	t.Helper()
	ctx, cancel := qctx()
	defer cancel()
	var v sql.NullString
	if err := c.QueryRowContext(ctx, q, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if !v.Valid {
		return "NULL"
	}
	return v.String
}

// rowsOf returns every row of q as strings joined by "|".
func rowsOf(t *testing.T, c interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, q string, args ...any) []string {
	t.Helper()
	ctx, cancel := qctx()
	defer cancel()
	rows, err := c.QueryContext(ctx, q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = v.String
			if !v.Valid {
				parts[i] = "NULL"
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

func execIn(t *testing.T, c interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, q string, args ...any) sql.Result {
	t.Helper()
	return mustExec(t, c, q, args...)
}

func sqlErrCode(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

func TestDropInReplication(t *testing.T) {
	RequireMariaDB(t)
	env := newDropInEnv(t, sandbox.Replication, 3, func(c *config.Config) {
		c.Clusters[0].Pool.MaxOpen = 40
		// Causal reads across sessions (read_your_writes: global).
		c.Users = append(c.Users, config.User{Name: "causal", Password: "causal", BackendUser: "app", BackendPassword: "app", ReadYourWrites: router.RYWGlobal})
	})
	admin := openDB(t, env.dsn("", ""))
	for i := range 4 {
		execIn(t, admin, fmt.Sprintf("CREATE DATABASE IF NOT EXISTS dropin_s%d", i))
		execIn(t, admin, fmt.Sprintf("CREATE TABLE IF NOT EXISTS dropin_s%d.t (id INT PRIMARY KEY, v VARCHAR(20))", i))
		execIn(t, admin, fmt.Sprintf("REPLACE INTO dropin_s%d.t VALUES (1, 'schema %d')", i, i))
	}
	// Other sessions read these on the replicas: wait until they have them
	// (read-your-writes is per session).
	for _, node := range []string{"node2", "node3"} {
		Eventually(t, 20*time.Second, node+" has the schemas", func() error {
			ctx, cancel := qctx()
			defer cancel()
			out, err := env.sb.SQL(ctx, node, "SELECT COUNT(*) FROM dropin_s3.t")
			if err != nil {
				return err
			}
			if len(out) != 1 || len(out[0]) != 1 || out[0][0] != "1" {
				return fmt.Errorf("not yet: %v", out)
			}
			return nil
		})
	}
	t.Run("PreparedStatementSchemaBinding", func(t *testing.T) { testPreparedSchemaBinding(t, env) })
	t.Run("PrepareAfterDDL", func(t *testing.T) { testPrepareAfterDDL(t, env) })
	t.Run("Diagnostics", func(t *testing.T) { testDiagnostics(t, env, "dropin_s0") })
	t.Run("PreviousStatementFunctions", func(t *testing.T) { testPreviousStatementFunctions(t, env, "dropin_s1") })
	t.Run("SessionStatus", func(t *testing.T) { testSessionStatus(t, env, "dropin_s2") })
	t.Run("LoadDataLocalPrepared", func(t *testing.T) { testLoadDataLocalPrepared(t, env, "dropin_s3") })
	t.Run("GreetingCharset", func(t *testing.T) { testGreetingCharset(t, env) })
	t.Run("CausalReadsAcrossSessions", func(t *testing.T) { testCausalReads(t, env) })
	t.Run("AutoIsNull", func(t *testing.T) { testAutoIsNull(t, env) })
}

// sql_auto_is_null=1 (ODBC): right after an insert, WHERE auto_col IS NULL
// finds the inserted row, which only the insert's connection knows.
func testAutoIsNull(t *testing.T, env *dropInEnv) {
	c := env.conn(t, "dropin_s0")
	execIn(t, c, "CREATE OR REPLACE TABLE autonull (id INT PRIMARY KEY AUTO_INCREMENT, v INT)")
	execIn(t, c, "SET sql_auto_is_null = 1")
	for i := range 5 {
		res := execIn(t, c, fmt.Sprintf("INSERT INTO autonull (v) VALUES (%d)", i))
		id, _ := res.LastInsertId()
		if got := rowsOf(t, c, "SELECT id, v FROM autonull WHERE id IS NULL"); len(got) != 1 || got[0] != fmt.Sprintf("%d|%d", id, i) {
			t.Fatalf("insert %d: WHERE id IS NULL with sql_auto_is_null=1: %v, want the row %d|%d", i, got, id, i)
		}
	}
	// The same with server-side prepared statements (COM_STMT_PREPARE and
	// COM_STMT_EXECUTE, as mysqltest --ps-protocol sends them): what the
	// server answers direct, Vigil answers.
	prepared := func(c *sql.Conn) []string {
		ctx, cancel := qctx()
		defer cancel()
		var out []string
		for _, q := range []string{"INSERT INTO autonull (v) VALUES (7)", "SELECT v FROM autonull WHERE id IS NULL"} {
			st, err := c.PrepareContext(ctx, q)
			if err != nil {
				t.Fatalf("prepare %s: %v", q, err)
			}
			rows, err := st.QueryContext(ctx)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			for rows.Next() {
				var v string
				if err := rows.Scan(&v); err != nil {
					t.Fatal(err)
				}
				out = append(out, v)
			}
			rows.Close()
			st.Close()
		}
		return out
	}
	direct := openDB(t, fmt.Sprintf("app:app@tcp(%s)/dropin_s0?timeout=5s", env.sb.Addr("node1")))
	ctx, cancel := qctx()
	defer cancel()
	dc, err := direct.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	execIn(t, dc, "SET sql_auto_is_null = 1")
	want := prepared(dc)
	t.Logf("direct, prepared: %v", want)
	for i := range 3 {
		if got := prepared(c.Conn); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d, prepared: WHERE id IS NULL with sql_auto_is_null=1 after an insert: %v, direct %v", i, got, want)
		}
	}
}

// read_your_writes: global — a read waits for the newest write any session
// made through Vigil: a new session sees a table and rows another session
// just wrote, as it would on a single server.
func testCausalReads(t *testing.T, env *dropInEnv) {
	w := env.conn(t, "dropin_s0")
	for i := range 20 {
		tbl := fmt.Sprintf("causal_%d", i)
		execIn(t, w, "DROP TABLE IF EXISTS "+tbl)
		execIn(t, w, "CREATE TABLE "+tbl+" (id INT PRIMARY KEY)")
		execIn(t, w, "INSERT INTO "+tbl+" SELECT seq FROM seq_1_to_500")
		pool := openDB(t, fmt.Sprintf("causal:causal@tcp(%s)/dropin_s0?timeout=5s", env.addr))
		if got := one(t, pool, "SELECT COUNT(*) FROM "+tbl); got != "500" {
			t.Fatalf("round %d: a new session read %s rows of another session's 500", i, got)
		}
		pool.Close()
	}
}

// The greeting announces the servers' default collation, as the server
// does: clients that take their character set from it (mysqlnd) get the
// same one through Vigil.
func testGreetingCharset(t *testing.T, env *dropInEnv) {
	ctx, cancel := qctx()
	defer cancel()
	greeting := func(addr string) *mysqlproto.Greeting {
		c, g, err := mysqlproto.Dial(ctx, &mysqlproto.DialConfig{Addr: addr, User: "app", Password: "app"})
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		return g
	}
	direct, proxied := greeting(env.sb.Addr("node1")), greeting(env.addr)
	if direct.Collation != proxied.Collation {
		t.Fatalf("greeting collation %d through Vigil, %d from the server", proxied.Collation, direct.Collation)
	}
}

// A statement prepared in one schema reads that schema's table, on
// whichever server connection it runs: 32 sessions over 4 schemas share
// the pools, each must always read its own schema's row.
func testPreparedSchemaBinding(t *testing.T, env *dropInEnv) {
	const sessions, rounds = 32, 40
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			schema := i % 4
			db, err := sql.Open("mysql", env.dsn(fmt.Sprintf("dropin_s%d", schema), ""))
			if err != nil {
				errs <- err
				return
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			stmt, err := db.PrepareContext(ctx, "SELECT v FROM t WHERE id = ?")
			if err != nil {
				errs <- err
				return
			}
			defer stmt.Close()
			want := fmt.Sprintf("schema %d", schema)
			for range rounds {
				var v string
				if err := stmt.QueryRowContext(ctx, 1).Scan(&v); err != nil {
					errs <- err
					return
				}
				if v != want {
					errs <- fmt.Errorf("session in dropin_s%d read %q: another schema's table", schema, v)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// As on the server: a statement stays bound to the schema it was
	// prepared in after USE, and the same text prepared after USE reads
	// the new schema.
	c := env.conn(t, "dropin_s0")
	ctx, cancel := qctx()
	defer cancel()
	s0, err := c.PrepareContext(ctx, "SELECT v FROM t WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	defer s0.Close()
	execIn(t, c, "USE dropin_s1")
	s1, err := c.PrepareContext(ctx, "SELECT v FROM t WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	for range 10 {
		var v0, v1 string
		if err := s0.QueryRowContext(ctx, 1).Scan(&v0); err != nil {
			t.Fatal(err)
		}
		if err := s1.QueryRowContext(ctx, 1).Scan(&v1); err != nil {
			t.Fatal(err)
		}
		if v0 != "schema 0" || v1 != "schema 1" {
			t.Fatalf("prepared before USE read %q (want schema 0), after USE %q (want schema 1)", v0, v1)
		}
	}
}

// A prepare right after the session's own CREATE TABLE / ALTER TABLE sees
// them (read-your-writes applies to COM_STMT_PREPARE), and a prepare that
// lands on a replica that does not have the table yet is retried on the
// primary.
func testPrepareAfterDDL(t *testing.T, env *dropInEnv) {
	c := env.conn(t, "dropin_s0")
	ctx, cancel := qctx()
	defer cancel()
	for i := range 15 {
		tbl := fmt.Sprintf("ddl_%d", i)
		execIn(t, c, "DROP TABLE IF EXISTS "+tbl)
		execIn(t, c, "CREATE TABLE "+tbl+" (id INT PRIMARY KEY, a INT)")
		st, err := c.PrepareContext(ctx, "SELECT id FROM "+tbl+" WHERE id = ?")
		if err != nil {
			t.Fatalf("prepare right after CREATE TABLE %s: %v", tbl, err)
		}
		st.Close()
		execIn(t, c, "ALTER TABLE "+tbl+" ADD COLUMN b INT, ADD INDEX ka (a)")
		st, err = c.PrepareContext(ctx, "SELECT b FROM "+tbl+" FORCE INDEX (ka) WHERE a = ?")
		if err != nil {
			t.Fatalf("prepare right after ALTER TABLE %s: %v", tbl, err)
		}
		var n int
		if err := st.QueryRowContext(ctx, 1).Scan(&n); !errors.Is(err, sql.ErrNoRows) {
			t.Fatalf("execute after ALTER TABLE: %v", err)
		}
		st.Close()
	}
	// Another session's DDL: this session has no read-your-writes claim on
	// it, but a prepare must not fail because a replica lags behind.
	other := env.conn(t, "dropin_s0")
	for i := range 15 {
		tbl := fmt.Sprintf("ddl_other_%d", i)
		execIn(t, other, "DROP TABLE IF EXISTS "+tbl)
		execIn(t, other, "CREATE TABLE "+tbl+" (id INT PRIMARY KEY)")
		st, err := c.PrepareContext(ctx, "SELECT id FROM "+tbl+" WHERE id = ?")
		if err != nil {
			t.Fatalf("prepare of a table another session just created: %v", err)
		}
		st.Close()
	}
}

// Warnings and errors are the session's own: never another client's, and
// an empty list after a statement that left none.
func testDiagnostics(t *testing.T, env *dropInEnv, schema string) {
	a := env.conn(t, schema)
	b := env.conn(t, schema)
	execIn(t, a, "CREATE TABLE IF NOT EXISTS diag (a TINYINT)")
	execIn(t, a, "SET SESSION sql_mode = ''")
	for i := range 15 {
		// A read that warns on a replica, and a write that warns on the
		// primary, each followed by a clean statement of another session.
		rowsOf(t, a, "SELECT CAST('12abc' AS SIGNED)")
		rowsOf(t, b, "SELECT 1")
		if got := rowsOf(t, b, "SHOW WARNINGS"); len(got) != 0 {
			t.Fatalf("round %d: session B sees warnings it never caused: %v", i, got)
		}
		if got := one(t, b, "SELECT @@warning_count"); got != "0" {
			t.Fatalf("round %d: session B @@warning_count = %s", i, got)
		}
		got := rowsOf(t, a, "SHOW WARNINGS")
		if len(got) != 1 || !strings.Contains(got[0], "|1292|") {
			t.Fatalf("round %d: session A's own warning after a read: %v", i, got)
		}
		execIn(t, a, "INSERT INTO diag VALUES (1000)")
		execIn(t, b, "INSERT INTO diag VALUES (1)")
		if got := one(t, a, "SHOW COUNT(*) WARNINGS"); got != "1" {
			t.Fatalf("round %d: session A SHOW COUNT(*) WARNINGS = %s", i, got)
		}
		// MariaDB keeps the warnings across a statement that uses no table.
		if got := one(t, a, "SELECT 1"); got != "1" {
			t.Fatal(got)
		}
		got = rowsOf(t, a, "SHOW WARNINGS")
		if len(got) != 1 || !strings.Contains(got[0], "|1264|") {
			t.Fatalf("round %d: session A's own warning after a write: %v", i, got)
		}
		if got := rowsOf(t, b, "SHOW WARNINGS"); len(got) != 0 {
			t.Fatalf("round %d: session B: %v", i, got)
		}
		// An error, then GET DIAGNOSTICS.
		ctx, cancel := qctx()
		_, err := a.ExecContext(ctx, "SELECT * FROM no_such_table")
		cancel()
		if sqlErrCode(err) != 1146 {
			t.Fatalf("want 1146, got %v", err)
		}
		if got := rowsOf(t, a, "SHOW ERRORS"); len(got) != 1 || !strings.Contains(got[0], "|1146|") {
			t.Fatalf("round %d: session A SHOW ERRORS: %v", i, got)
		}
		if got := rowsOf(t, b, "SHOW ERRORS"); len(got) != 0 {
			t.Fatalf("round %d: session B SHOW ERRORS: %v", i, got)
		}
		fresh := env.conn(t, schema)
		if got := rowsOf(t, fresh, "SHOW WARNINGS"); len(got) != 0 {
			t.Fatalf("round %d: a new client's first SHOW WARNINGS: %v", i, got)
		}
		if got := one(t, fresh, "SELECT @@error_count"); got != "0" {
			t.Fatalf("round %d: a new client's @@error_count = %s", i, got)
		}
		fresh.Close()
	}
	execIn(t, a, "INSERT INTO diag VALUES (1000)")
	execIn(t, a, "GET DIAGNOSTICS @n = NUMBER")
	if got := one(t, a, "SELECT @n"); got != "1" {
		t.Fatalf("GET DIAGNOSTICS NUMBER after a warning = %s", got)
	}
	execIn(t, b, "GET DIAGNOSTICS @n = NUMBER")
	if got := one(t, b, "SELECT @n"); got != "0" {
		t.Fatalf("GET DIAGNOSTICS NUMBER in a clean session = %s", got)
	}
}

// LAST_INSERT_ID(), ROW_COUNT() and FOUND_ROWS() answer about the
// session's own previous statement, right after it and later, in the text
// and the binary protocol.
func testPreviousStatementFunctions(t *testing.T, env *dropInEnv, schema string) {
	a := env.conn(t, schema)
	b := env.conn(t, schema)
	execIn(t, a, "CREATE TABLE IF NOT EXISTS ids (id INT PRIMARY KEY AUTO_INCREMENT, g INT)")
	for i := range 15 {
		ra := execIn(t, a, "INSERT INTO ids (g) VALUES (1)")
		rb := execIn(t, b, "INSERT INTO ids (g) VALUES (2)")
		idA, _ := ra.LastInsertId()
		idB, _ := rb.LastInsertId()
		if got := one(t, a, "SELECT LAST_INSERT_ID()"); got != fmt.Sprint(idA) {
			t.Fatalf("round %d: A LAST_INSERT_ID() = %s, want %d (B inserted %d)", i, got, idA, idB)
		}
		rowsOf(t, a, "SELECT COUNT(*) FROM ids")
		if got := one(t, a, "SELECT last_insert_id()"); got != fmt.Sprint(idA) {
			t.Fatalf("round %d: A LAST_INSERT_ID() after a read = %s, want %d", i, got, idA)
		}
		if got := one(t, a, "SELECT @@identity + ?", 0); got != fmt.Sprint(idA) {
			t.Fatalf("round %d: A @@identity (prepared) = %s, want %d", i, got, idA)
		}
		if got := one(t, b, "SELECT LAST_INSERT_ID()"); got != fmt.Sprint(idB) {
			t.Fatalf("round %d: B LAST_INSERT_ID() = %s, want %d", i, got, idB)
		}
		execIn(t, a, "UPDATE ids SET g = g + 10 WHERE g IN (1, 11)")
		execIn(t, b, "UPDATE ids SET g = g WHERE id = ?", idB)
		wantA := one(t, a, "SELECT ROW_COUNT()")
		if wantA == "0" || wantA == "-1" {
			t.Fatalf("round %d: A ROW_COUNT() after its UPDATE = %s", i, wantA)
		}
		rowsOf(t, a, "SELECT 1")
		if got := one(t, a, "SELECT ROW_COUNT()"); got != "-1" {
			t.Fatalf("round %d: ROW_COUNT() after a SELECT = %s, want -1", i, got)
		}
		execIn(t, a, "DELETE FROM ids WHERE id = ?", idA)
		execIn(t, b, "UPDATE ids SET g = 2 WHERE id < 0")
		if got := one(t, a, "SELECT ROW_COUNT() + ?", 0); got != "1" {
			t.Fatalf("round %d: A ROW_COUNT() (prepared) after deleting one row = %s", i, got)
		}
		rowsOf(t, a, "SELECT SQL_CALC_FOUND_ROWS id FROM ids LIMIT 1")
		rowsOf(t, b, "SELECT SQL_CALC_FOUND_ROWS id FROM ids WHERE id < 0 LIMIT 1")
		total := one(t, b, "SELECT COUNT(*) FROM ids")
		if got := one(t, a, "SELECT FOUND_ROWS()"); got != total {
			t.Fatalf("round %d: A FOUND_ROWS() = %s, want %s", i, got, total)
		}
	}
	// Column names and types stay those of the function.
	rowsOf(t, a, "SELECT 1")
	ctx, cancel := qctx()
	defer cancel()
	rows, err := a.QueryContext(ctx, "SELECT row_count(), LAST_INSERT_ID() AS id")
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := rows.ColumnTypes()
	rows.Close()
	if len(cols) != 2 || cols[0].Name() != "row_count()" || cols[1].Name() != "id" ||
		cols[0].DatabaseTypeName() != "BIGINT" || cols[1].DatabaseTypeName() != "UNSIGNED BIGINT" {
		var got []string
		for _, c := range cols {
			got = append(got, c.Name()+":"+c.DatabaseTypeName())
		}
		t.Fatalf("columns %v, want row_count():BIGINT id:UNSIGNED BIGINT", got)
	}
	fresh := env.conn(t, schema)
	if got := one(t, fresh, "SELECT LAST_INSERT_ID()"); got != "0" {
		t.Fatalf("a new client's LAST_INSERT_ID() = %s", got)
	}
	if got := one(t, fresh, "SELECT ROW_COUNT()"); got != "-1" {
		t.Fatalf("a new client's ROW_COUNT() = %s", got)
	}
}

// Session status counters, CONNECTION_ID() and FLUSH STATUS describe one
// server connection: the session reads its own.
func testSessionStatus(t *testing.T, env *dropInEnv, schema string) {
	c := env.conn(t, schema)
	id := one(t, c, "SELECT CONNECTION_ID()")
	execIn(t, c, "FLUSH STATUS")
	for range 5 {
		rowsOf(t, c, "SELECT v FROM t")
		if got := one(t, c, "SELECT CONNECTION_ID()"); got != id {
			t.Fatalf("CONNECTION_ID() changed from %s to %s", id, got)
		}
	}
	got := rowsOf(t, c, "SHOW SESSION STATUS LIKE 'Com_select'")
	if len(got) != 1 || got[0] != "Com_select|10" {
		t.Fatalf("SHOW SESSION STATUS after 10 SELECTs: %v", got)
	}
	got = rowsOf(t, c, "SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'COM_SELECT'")
	if len(got) != 1 || got[0] != "11" {
		t.Fatalf("information_schema.SESSION_STATUS Com_select: %v", got)
	}
	// CONNECTION_ID() is the id of the handshake, the one KILL takes, as a
	// statement and as a prepared statement.
	other := env.conn(t, schema)
	execIn(t, other, "KILL QUERY "+id)
	for _, prepared := range []bool{false, true} {
		done := make(chan error, 1)
		go func() {
			ctx, cancel := qctx()
			defer cancel()
			var v int
			done <- c.QueryRowContext(ctx, "SELECT SLEEP(20)").Scan(&v)
		}()
		time.Sleep(300 * time.Millisecond)
		start := time.Now()
		if prepared {
			ctx, cancel := qctx()
			st, err := other.PrepareContext(ctx, "KILL QUERY "+id)
			if err != nil {
				t.Fatalf("prepare KILL QUERY %s: %v", id, err)
			}
			if _, err := st.ExecContext(ctx); err != nil {
				t.Fatalf("prepared KILL QUERY %s: %v", id, err)
			}
			st.Close()
			cancel()
		} else {
			execIn(t, other, "KILL QUERY "+id)
		}
		select {
		case <-done:
			if time.Since(start) > 5*time.Second {
				t.Fatal("KILL QUERY <CONNECTION_ID()> took too long")
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("KILL QUERY %s (the session's CONNECTION_ID(), prepared %v) did not stop its SLEEP(20)", id, prepared)
		}
	}
}

// LOAD DATA LOCAL INFILE sent as a server-side prepared statement.
func testLoadDataLocalPrepared(t *testing.T, env *dropInEnv, schema string) {
	mysql.RegisterReaderHandler("dropin", func() io.Reader { return strings.NewReader("1\tone\n2\ttwo\n3\tthree\n") })
	defer mysql.DeregisterReaderHandler("dropin")
	db := openDB(t, env.dsn(schema, "allowAllFiles=true"))
	db.SetMaxOpenConns(1)
	execIn(t, db, "CREATE TABLE IF NOT EXISTS ld (id INT PRIMARY KEY, v VARCHAR(10))")
	execIn(t, db, "DELETE FROM ld")
	ctx, cancel := qctx()
	defer cancel()
	st, err := db.PrepareContext(ctx, "LOAD DATA LOCAL INFILE 'Reader::dropin' INTO TABLE ld")
	if err != nil {
		t.Fatalf("prepare LOAD DATA LOCAL: %v", err)
	}
	defer st.Close()
	res, err := st.ExecContext(ctx)
	if err != nil {
		t.Fatalf("execute LOAD DATA LOCAL: %v", err)
	}
	if n, _ := res.RowsAffected(); n != 3 {
		t.Fatalf("LOAD DATA LOCAL loaded %d rows, want 3", n)
	}
	// The session still works.
	if got := one(t, db, "SELECT GROUP_CONCAT(v ORDER BY id) FROM ld WHERE id > ?", 0); got != "one,two,three" {
		t.Fatalf("after LOAD DATA: %q", got)
	}
}

func TestDropInStandalone(t *testing.T) {
	RequireMariaDB(t)
	// One server and a small pool: every session reuses the same few
	// server connections, so any state left on one would show.
	env := newDropInEnv(t, sandbox.Standalone, 1, func(c *config.Config) {
		c.Clusters[0].Pool.MaxOpen = 4
		// An account Vigil knows and the server does not.
		c.Users = append(c.Users, config.User{Name: "ghost", Password: "gp"},
			config.User{Name: "kfoo", Password: "kp"}, config.User{Name: "kbar", Password: "kp"},
			config.User{Name: "kbaz", Password: "kp"})
	})
	admin := openDB(t, env.dsn("", ""))
	execIn(t, admin, "CREATE DATABASE IF NOT EXISTS dropin")
	execIn(t, admin, "CREATE TABLE IF NOT EXISTS dropin.t (id INT PRIMARY KEY AUTO_INCREMENT, v VARCHAR(20))")
	execIn(t, admin, "INSERT INTO dropin.t (v) VALUES ('x')")
	t.Run("NoDefaultSchema", func(t *testing.T) { testNoDefaultSchema(t, env) })
	t.Run("AccountUnknownToServers", func(t *testing.T) { testAccountUnknownToServers(t, env) })
	t.Run("CrossClientLeakage", func(t *testing.T) { testCrossClientLeakage(t, env) })
	t.Run("SessionTracking", func(t *testing.T) { testSessionTracking(t, env) })
	t.Run("InsertIDNotLeaked", func(t *testing.T) { testInsertIDNotLeaked(t, env) })
	t.Run("InsertIDSetUnseen", func(t *testing.T) { testInsertIDSetUnseen(t, env) })
	t.Run("ServerConnectionsKilled", func(t *testing.T) { testServerConnectionsKilled(t, env) })
	t.Run("QualifiedSets", func(t *testing.T) { testQualifiedSets(t, env) })
	t.Run("CallState", func(t *testing.T) { testCallState(t, env) })
	t.Run("KillOtherAccount", func(t *testing.T) { testKillOtherAccount(t, env) })
	t.Run("NewSessionSeesGlobals", func(t *testing.T) { testNewSessionSeesGlobals(t, env) })
	t.Run("Diagnostics", func(t *testing.T) { testDiagnostics(t, env, "dropin") })
	t.Run("PreviousStatementFunctions", func(t *testing.T) { testPreviousStatementFunctions(t, env, "dropin") })
}

// A login (or change-user) that Vigil's own user list accepts but the
// servers refuse fails as it would on the server: 1045 at login, not a
// connection error at the first statement.
func testAccountUnknownToServers(t *testing.T, env *dropInEnv) {
	login := func(addr, db string) error {
		pool, err := sql.Open("mysql", fmt.Sprintf("ghost:gp@tcp(%s)/%s?timeout=5s", addr, db))
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		return pool.Ping()
	}
	for _, db := range []string{"", "dropin"} {
		direct, proxied := login(env.sb.Addr("node1"), db), login(env.addr, db)
		if sqlErrCode(direct) == 0 || sqlErrCode(proxied) != sqlErrCode(direct) ||
			!strings.Contains(proxied.Error(), "Access denied for user 'ghost'@") {
			t.Fatalf("login (schema %q) of an account the server does not have: direct %v, through Vigil %v", db, direct, proxied)
		}
	}
	// The known account still logs in.
	c := env.conn(t, "dropin")
	if got := one(t, c, "SELECT 1"); got != "1" {
		t.Fatal(got)
	}
}

// testInsertIDNotLeaked: a client's LAST_INSERT_ID() is never the id
// another client generated on the same server connection, also after an
// INSERT of explicit values (which leaves the connection's value as it was).
func testInsertIDNotLeaked(t *testing.T, env *dropInEnv) {
	for round := range 5 {
		other := env.conn(t, "dropin")
		res := execIn(t, other, "INSERT INTO t (v) VALUES ('generated')")
		gen, _ := res.LastInsertId()
		other.Close()
		c := env.conn(t, "dropin")
		execIn(t, c, fmt.Sprintf("INSERT INTO t (id, v) VALUES (%d, 'explicit')", -1-round))
		if got := one(t, c, "SELECT LAST_INSERT_ID()"); got == fmt.Sprint(gen) {
			t.Fatalf("round %d: LAST_INSERT_ID() after an explicit-value insert is %s, the id another client generated", round, got)
		}
		rowsOf(t, c, "SELECT 1")
		if got := one(t, c, "SELECT LAST_INSERT_ID()"); got == fmt.Sprint(gen) {
			t.Fatalf("round %d: LAST_INSERT_ID() later is %s, the id another client generated", round, got)
		}
		c.Close()
	}
}

// testInsertIDSetUnseen: statements that set LAST_INSERT_ID() without an
// OK packet saying so (a procedure's insert, LAST_INSERT_ID(expr)) make it
// the session's, wherever its next statement runs, and never a later
// client's.
func testInsertIDSetUnseen(t *testing.T, env *dropInEnv) {
	admin := env.conn(t, "dropin")
	execIn(t, admin, "CREATE OR REPLACE PROCEDURE ins_proc() INSERT INTO t (v) VALUES ('proc')")
	admin.Close()
	for round := range 3 {
		c := env.conn(t, "dropin")
		execIn(t, c, "CALL ins_proc()")
		want := one(t, c, "SELECT MAX(id) FROM t WHERE v = 'proc'")
		// Other clients take the pool's connections, so that an unpinned
		// session's next statement runs elsewhere (CALL pins the session).
		release := occupyPool(t, env)
		if got := one(t, c, "SELECT LAST_INSERT_ID()"); got != want {
			t.Fatalf("round %d: LAST_INSERT_ID() after CALL of a procedure that inserted id %s: %s", round, want, got)
		}
		release()
		c.Close()
		c = env.conn(t, "dropin") // unpinned
		v := 7000 + round
		if got := one(t, c, fmt.Sprintf("SELECT LAST_INSERT_ID(%d)", v)); got != fmt.Sprint(v) {
			t.Fatal(got)
		}
		release = occupyPool(t, env)
		got := one(t, c, "SELECT LAST_INSERT_ID()")
		release()
		if got != fmt.Sprint(v) {
			t.Fatalf("round %d: LAST_INSERT_ID() after LAST_INSERT_ID(%d): %s", round, v, got)
		}
		c.Close()
		// A new client on the same few server connections starts at 0.
		n := env.conn(t, "dropin")
		if got := one(t, n, "SELECT LAST_INSERT_ID()"); got != "0" {
			t.Fatalf("round %d: a new client's LAST_INSERT_ID() is %s, another client's", round, got)
		}
		n.Close()
	}
	// The same through the binary protocol: CALL prepared and executed
	// (the driver prepares a statement with parameters).
	setup := env.conn(t, "dropin")
	execIn(t, setup, "CREATE OR REPLACE PROCEDURE ins_proc_arg(x INT) INSERT INTO t (v) VALUES (CONCAT('arg', x))")
	setup.Close()
	for round := range 3 {
		c := env.conn(t, "dropin")
		ctx, cancel := qctx()
		if _, err := c.ExecContext(ctx, "CALL ins_proc_arg(?)", round); err != nil {
			t.Fatal(err)
		}
		cancel()
		want := one(t, c, "SELECT MAX(id) FROM t WHERE v LIKE 'arg%'")
		if got := one(t, c, "SELECT LAST_INSERT_ID()"); got != want {
			t.Fatalf("round %d: LAST_INSERT_ID() after a prepared CALL that inserted id %s: %s", round, want, got)
		}
		c.Close()
	}
	// A session pinned to its connection (here by its status counters)
	// sees no statement of Vigil's in them, and still its own id.
	p := env.conn(t, "dropin")
	execIn(t, p, "FLUSH STATUS")
	execIn(t, p, "CALL ins_proc()")
	if got := rowsOf(t, p, "SHOW SESSION STATUS LIKE 'Com_select'"); len(got) != 1 || got[0] != "Com_select|0" {
		t.Fatalf("Com_select after FLUSH STATUS and CALL: %v, want 0 as on the server", got)
	}
	want := one(t, p, "SELECT MAX(id) FROM t WHERE v = 'proc'")
	if got := one(t, p, "SELECT LAST_INSERT_ID()"); got != want {
		t.Fatalf("pinned session: LAST_INSERT_ID() after CALL: %s, want %s", got, want)
	}
	p.Close()
}

// testKillOtherAccount: KILL of another account's session needs CONNECTION
// ADMIN (or SUPER) on the servers, as on a server: refused with 1095
// without it, done with it.
func testKillOtherAccount(t *testing.T, env *dropInEnv) {
	admin := env.conn(t, "")
	for _, u := range []string{"kfoo", "kbar", "kbaz"} {
		execIn(t, admin, "CREATE OR REPLACE USER "+u+"@'%' IDENTIFIED BY 'kp'")
		execIn(t, admin, "GRANT SELECT ON dropin.* TO "+u+"@'%'")
	}
	execIn(t, admin, "GRANT PROCESS, CONNECTION ADMIN ON *.* TO kbar@'%'")
	as := func(u string) client {
		pool, err := sql.Open("mysql", fmt.Sprintf("%s:kp@tcp(%s)/dropin?timeout=5s", u, env.addr))
		if err != nil {
			t.Fatal(err)
		}
		pool.SetMaxOpenConns(1)
		ctx, cancel := qctx()
		defer cancel()
		c, err := pool.Conn(ctx)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		cl := client{c, pool}
		t.Cleanup(cl.Close)
		return cl
	}
	foo, bar, baz := as("kfoo"), as("kbar"), as("kbaz")
	id := one(t, foo, "SELECT CONNECTION_ID()")
	ctx, cancel := qctx()
	defer cancel()
	if _, err := baz.ExecContext(ctx, "KILL "+id); sqlErrCode(err) != 1095 {
		t.Fatalf("KILL of another account's session without CONNECTION ADMIN: %v, want error 1095", err)
	}
	if got := one(t, foo, "SELECT 1"); got != "1" {
		t.Fatal(got)
	}
	if _, err := bar.ExecContext(ctx, "KILL "+id); err != nil {
		t.Fatalf("KILL of another account's session with CONNECTION ADMIN: %v", err)
	}
	if _, err := foo.QueryContext(ctx, "SELECT 1"); err == nil {
		t.Fatal("the killed session still answers")
	}
}

// testQualifiedSets: a session that sets a variable with the unqualified
// @@ form keeps it on whichever server connection its next statements run
// (the server's session tracker does not report that form).
func testQualifiedSets(t *testing.T, env *dropInEnv) {
	c := env.conn(t, "dropin")
	execIn(t, c, "SET @@sql_mode = 'ANSI_QUOTES'")
	ctx, cancel := qctx()
	defer cancel()
	if _, err := c.ExecContext(ctx, "SET @@max_statement_time = ?", 9); err != nil { // prepared
		t.Fatal(err)
	}
	// Other clients take the pool's connections meanwhile.
	release := occupyPool(t, env)
	if got := one(t, c, "SELECT CONCAT(@@sql_mode, '/', @@max_statement_time = 9)"); got != "ANSI_QUOTES/1" {
		t.Fatalf("a session's SET @@x values on its next statement: %s", got)
	}
	release()
}

// occupyPool has three other clients take server connections (each in a
// transaction), so that a session's next statement runs on another
// connection than its last one; release ends them.
func occupyPool(t *testing.T, env *dropInEnv) (release func()) {
	t.Helper()
	var busy []client
	for range 3 {
		b := env.conn(t, "dropin")
		execIn(t, b, "BEGIN")
		rowsOf(t, b, "SELECT COUNT(*) FROM t")
		busy = append(busy, b)
	}
	return func() {
		for _, b := range busy {
			execIn(t, b, "ROLLBACK")
			b.Close()
		}
	}
}

// testCallState: what a stored procedure leaves in the session —
// temporary tables, user variables, OUT parameters in @x, SET @@x — is
// there for the session's next statements, wherever other clients run,
// and never for another client.
func testCallState(t *testing.T, env *dropInEnv) {
	admin := env.conn(t, "dropin")
	execIn(t, admin, "CREATE OR REPLACE PROCEDURE call_state(OUT o INT) BEGIN CREATE TEMPORARY TABLE call_tmp (a INT); INSERT INTO call_tmp VALUES (7); SET @inner = 5; SET @@max_statement_time = 6; SET o = 4; END")
	admin.Close()
	c := env.conn(t, "dropin")
	execIn(t, c, "CALL call_state(@out)")
	release := occupyPool(t, env)
	if got := one(t, c, "SELECT CONCAT((SELECT a FROM call_tmp), @inner, @out, @@max_statement_time = 6)"); got != "7541" {
		t.Fatalf("after CALL, the procedure's temporary table, @inner, @out and @@max_statement_time: %s, want 7541", got)
	}
	release()
	c.Close()
	for range 3 {
		n := env.conn(t, "dropin")
		if got := one(t, n, "SELECT CONCAT(@inner IS NULL, @out IS NULL, @@max_statement_time = 0)"); got != "111" {
			t.Fatalf("a new client sees what another client's procedure left: %s", got)
		}
		n.Close()
	}
}

// testServerConnectionsKilled: when the server's connections of Vigil die
// under an idle session (KILL CONNECTION USER, KILL of each), the
// session's next read gets a new one, also on a cluster of one server
// (there is no other reader to retry on).
func testServerConnectionsKilled(t *testing.T, env *dropInEnv) {
	c := env.conn(t, "dropin")
	rowsOf(t, c, "SELECT v FROM t LIMIT 1")
	direct := openDB(t, fmt.Sprintf("app:app@tcp(%s)/?timeout=5s", env.sb.Addr("node1")))
	ids := rowsOf(t, direct, "SELECT id FROM information_schema.PROCESSLIST WHERE user = 'app' AND id <> CONNECTION_ID()")
	if len(ids) == 0 {
		t.Fatal("no server connection of Vigil's for user app")
	}
	for _, id := range ids {
		execIn(t, direct, "KILL CONNECTION "+id)
	}
	for i := range 3 {
		if got := one(t, c, "SELECT COUNT(*) > 0 FROM t"); got != "1" {
			t.Fatalf("read %d after the server connections were killed: %s", i, got)
		}
	}
}

// A client that negotiated CLIENT_SESSION_TRACK is told exactly what it
// asked to track, as by the server (Vigil's server connections track
// every variable and state changes); a client changing its own tracking
// does not blind Vigil to the session state of later clients.
func testSessionTracking(t *testing.T, env *dropInEnv) {
	ctx, cancel := qctx()
	defer cancel()
	stmts := []string{
		"SET NAMES 'big5'",
		"SET SESSION sql_mode = 'ANSI_QUOTES'",
		"USE mysql",
		"USE dropin",
		"INSERT INTO t (v) VALUES ('tracked')",
		"SET @@session.session_track_system_variables = 'character_set_connection,sql_mode'",
		"SET NAMES 'utf8'",
		"SET SESSION sql_mode = DEFAULT",
		"SET SESSION session_track_state_change = ON",
		"SET SESSION time_zone = '+01:00'",
		"SET SESSION session_track_schema = OFF",
		"USE mysql",
	}
	trace := func(addr string) []string {
		c, _, err := mysqlproto.Dial(ctx, &mysqlproto.DialConfig{Addr: addr, User: "app", Password: "app", DB: "dropin",
			Flavour: mysqlproto.Flavour(mysqlproto.CapabilityClientSessionTrack|mysqlproto.CapabilityClientDeprecateEOF, 0)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var out []string
		for _, q := range stmts {
			c.Seq = 0
			if err := c.WritePacket(append([]byte{mysqlproto.ComQuery}, q...)); err != nil {
				t.Fatal(err)
			}
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
			p, err := c.ReadPacket()
			if err != nil {
				t.Fatal(err)
			}
			if p[0] != mysqlproto.OKPacket {
				t.Fatalf("%s: %v", q, mysqlproto.ParseErr(p))
			}
			ok, _ := mysqlproto.ParseOK(p, true)
			var changes []string
			_ = mysqlproto.EachSessionChange(ok.SessionState, func(ch mysqlproto.SessionChange) {
				changes = append(changes, fmt.Sprintf("%d:%s=%s", ch.Type, ch.Name, ch.Value))
			})
			sort.Strings(changes) // the server's order is its hash table's
			out = append(out, fmt.Sprintf("%s -> %v state=%v", q, changes, ok.Status&mysqlproto.ServerSessionStateChanged != 0))
		}
		return out
	}
	direct, proxied := trace(env.sb.Addr("node1")), trace(env.addr)
	for i := range direct {
		if direct[i] != proxied[i] {
			t.Errorf("session tracking differs:\n direct: %s\n vigil:  %s", direct[i], proxied[i])
		}
	}
	// A client that turned its tracking down and changed sql_mode, then
	// left: the next client of that server connection has the default.
	for _, set := range [][]string{
		{"SET SESSION session_track_system_variables = ''", "SET SESSION sql_mode = 'ANSI_QUOTES'"},
		{"SET SESSION session_track_system_variables = '', sql_mode = 'ANSI_QUOTES'"},
		{"SET SESSION sql_mode = 'ANSI_QUOTES', session_track_system_variables = ''"},
	} {
		c := env.conn(t, "dropin")
		for _, q := range set {
			execIn(t, c, q)
		}
		c.Close()
		for range 4 {
			n := env.conn(t, "dropin")
			if got := one(t, n, "SELECT @@sql_mode LIKE '%ANSI_QUOTES%'"); got != "0" {
				t.Fatalf("after %q, a client's sql_mode leaked to the next client", set)
			}
			n.Close()
		}
	}
}

// A new client starts with the server's global values, also those set
// after Vigil opened its pooled connections (SET GLOBAL through Vigil).
func testNewSessionSeesGlobals(t *testing.T, env *dropInEnv) {
	// Warm the pool with connections made before the change.
	for range 3 {
		c := env.conn(t, "dropin")
		rowsOf(t, c, "SELECT @@sql_mode")
		c.Close()
	}
	admin := env.conn(t, "dropin")
	orig := one(t, admin, "SELECT @@GLOBAL.sql_mode")
	execIn(t, admin, "SET GLOBAL sql_mode = 'ANSI_QUOTES'")
	defer execIn(t, admin, "SET GLOBAL sql_mode = ?", orig)
	for range 3 {
		c := env.conn(t, "dropin")
		if got := one(t, c, "SELECT @@SESSION.sql_mode"); got != "ANSI_QUOTES" {
			t.Fatalf("a new client after SET GLOBAL sql_mode: session sql_mode %q, want ANSI_QUOTES", got)
		}
		c.Close()
	}
}

// A client without a default schema never gets one from a pooled
// connection.
func testNoDefaultSchema(t *testing.T, env *dropInEnv) {
	for range 10 {
		withDB := env.conn(t, "dropin")
		rowsOf(t, withDB, "SELECT v FROM t")
		withDB.Close()
		c := env.conn(t, "")
		if got := one(t, c, "SELECT DATABASE()"); got != "NULL" {
			t.Fatalf("a client without a default schema: DATABASE() = %s", got)
		}
		ctx, cancel := qctx()
		_, err := c.ExecContext(ctx, "SELECT v FROM t")
		cancel()
		if sqlErrCode(err) != 1046 {
			t.Fatalf("unqualified table without a default schema: want 1046 (no database selected), got %v", err)
		}
		if got := one(t, c, "SELECT COUNT(*) FROM dropin.t"); got == "" {
			t.Fatal("qualified read failed")
		}
		c.Close()
	}
}

// State one client leaves on its server connection is never seen by the
// next client of that connection.
func testCrossClientLeakage(t *testing.T, env *dropInEnv) {
	admin := openDB(t, env.dsn("dropin", ""))
	execIn(t, admin, "CREATE SEQUENCE IF NOT EXISTS dropin.seq")
	// A routine's SET @@x: the server's tracker does not report it.
	execIn(t, admin, "CREATE OR REPLACE PROCEDURE dropin.set_unseen() SET @@max_statement_time = 8")
	execIn(t, admin, "CREATE ROLE IF NOT EXISTS dropin_role")
	execIn(t, admin, "GRANT dropin_role TO app")
	// Each client leaves one kind of state and goes away: one state per
	// client, so that one pin does not hide another kind's leak.
	leave := [][]string{
		{"SET @leak = 42"},
		{"CREATE TEMPORARY TABLE leak_tmp (a INT)"},
		{"SELECT GET_LOCK('dropin_leak', 0)"},
		{"SET ROLE dropin_role"},
		{"SELECT NEXTVAL(seq)"},
		{"PREPARE leak_ps FROM 'SELECT 1'"},
		{"HANDLER t OPEN"},
		{"SET SESSION sql_mode = 'ANSI_QUOTES'"},
		// The unqualified @@ form, which MariaDB's session tracker does
		// not report (mtr main.myisam_icp after ctype_ucs2_*_ws).
		{"SET @@sql_mode = 'ANSI_QUOTES'"},
		{"SET @@collation_connection = ucs2_general_ci"},
		{"SET @@max_statement_time = 7"},
		{"CALL set_unseen()"},
		{"INSERT INTO t (v) VALUES ('leak')"},
		{"SET SESSION profiling = 1"},
		{"BEGIN", "INSERT INTO t (v) VALUES ('uncommitted')"},
	}
	checks := []struct{ q, want string }{
		{"SELECT @leak IS NULL", "1"},
		{"SELECT CURRENT_ROLE() IS NULL", "1"},
		{"SELECT LASTVAL(seq) IS NULL", "1"},
		{"SELECT @@sql_mode LIKE '%ANSI_QUOTES%'", "0"},
		{"SELECT @@character_set_connection", "utf8mb4"},
		{"SELECT @@max_statement_time = 0", "1"},
		{"SELECT LAST_INSERT_ID()", "0"},
		{"SELECT @@profiling", "0"},
		{"SELECT COUNT(*) FROM t WHERE v = 'uncommitted'", "0"},
	}
	for round, stmts := range leave {
		c := env.conn(t, "dropin")
		for _, q := range stmts {
			execIn(t, c, q)
		}
		c.Close() // the client goes away without cleaning up
		// Its server connection is closed, not pooled: the server frees
		// its lock when it sees the disconnect, as without a proxy.
		Eventually(t, 5*time.Second, "the lock of a client that left is free", func() error {
			if got := one(t, admin, "SELECT IS_USED_LOCK('dropin_leak') IS NULL"); got != "1" {
				return fmt.Errorf("still held")
			}
			return nil
		})
		for range 3 {
			n := env.conn(t, "dropin")
			for _, ch := range checks {
				if got := one(t, n, ch.q); got != ch.want {
					t.Fatalf("after %q: a new client ran %q and got %s, want %s: state of a previous client leaked", leave[round], ch.q, got, ch.want)
				}
			}
			for _, ec := range []struct {
				q    string
				code uint16
			}{
				{"SELECT * FROM leak_tmp", 1146}, // another client's temporary table
				{"EXECUTE leak_ps", 1243},        // its prepared statement
				{"HANDLER t READ FIRST", 1109},   // its table handler
			} {
				ctx, cancel := qctx()
				_, err := n.ExecContext(ctx, ec.q)
				cancel()
				if sqlErrCode(err) != ec.code {
					t.Fatalf("after %q: %s: want error %d, got %v: state of a previous client leaked", leave[round], ec.q, ec.code, err)
				}
			}
			n.Close()
		}
	}
}

// writeConfig writes cfg as name in dir and returns its path.
func writeConfig(t *testing.T, dir, name string, cfg *config.Config) string {
	t.Helper()
	data, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
