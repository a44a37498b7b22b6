package frontend

import (
	"bytes"
	"testing"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/sqlscan"
)

func scan(q string) sqlscan.Info { return sqlscan.Scan([]byte(q)) }

// TestPrevStateValues: what Vigil answers for ROW_COUNT(), FOUND_ROWS()
// and LAST_INSERT_ID() after each kind of outcome, and whether the
// statement's connection is held for the next one.
func TestPrevStateValues(t *testing.T) {
	serverErr := mysqlproto.NewError(1146, "42S02", "no such table")
	type want struct {
		rowCount     int64
		foundRows    int64
		insertID     uint64
		hold, expire bool
	}
	steps := []struct {
		name string
		q    string
		out  outcome
		want want
	}{
		{"update", "UPDATE t SET a = 1", outcome{affected: 3},
			want{rowCount: 3, expire: true}},
		{"result set", "SELECT a FROM t", outcome{resultSet: true, setRows: 7},
			want{rowCount: -1, foundRows: 7, expire: true}},
		{"insert with an id", "INSERT INTO t VALUES (NULL)", outcome{affected: 1, insertID: 42},
			want{rowCount: 1, foundRows: 7, insertID: 42, hold: true, expire: true}},
		{"insert without an id keeps the last", "INSERT INTO u VALUES (1)", outcome{affected: 2},
			want{rowCount: 2, foundRows: 7, insertID: 42, expire: true}},
		{"server error", "SELECT * FROM missing", outcome{err: serverErr},
			want{rowCount: -1, foundRows: 7, insertID: 42, hold: true}},
		{"LAST_INSERT_ID(expr) holds for the id", "SELECT LAST_INSERT_ID(5)", outcome{resultSet: true, setRows: 1},
			want{rowCount: -1, foundRows: 1, insertID: 42, hold: true, expire: true}},
		{"warnings hold without expiry", "INSERT INTO t VALUES ('x')", outcome{affected: 1, warnings: 1},
			want{rowCount: 1, foundRows: 1, insertID: 42, hold: true}},
	}
	// expire says whether a hold may end when the client idles (only
	// when no warnings are kept); it matters only with hold.
	p := prevState{}
	p.forget()
	if p.rowCount != -1 || p.foundRows != 0 || p.insertID != 0 {
		t.Fatalf("fresh record: %d %d %d", p.rowCount, p.foundRows, p.insertID)
	}
	for _, st := range steps {
		p.ranOnPrev = false
		hold, expire := p.noteLast(scan(st.q), st.out)
		got := want{p.rowCount, p.foundRows, p.insertID, hold, expire}
		if got != st.want {
			t.Errorf("%s: got %+v, want %+v", st.name, got, st.want)
		}
	}
	p.forget()
	if p.rowCount != -1 || p.foundRows != 0 || p.insertID != 0 || p.lastDiag {
		t.Errorf("after forget: rowCount %d foundRows %d insertID %d lastDiag %v", p.rowCount, p.foundRows, p.insertID, p.lastDiag)
	}
}

// TestPrevStateDiagnostics: when the diagnostics area is known to hold
// the previous statement's warnings.
func TestPrevStateDiagnostics(t *testing.T) {
	var p prevState
	p.forget()
	p.noteLast(scan("INSERT INTO t VALUES ('x')"), outcome{affected: 1, warnings: 2})
	if !p.lastDiag {
		t.Fatal("warnings not recorded")
	}
	// SHOW WARNINGS reads the area and leaves it: still held, ROW_COUNT() -1.
	p.pureDiag = true
	if hold, expire := p.noteLast(scan("SHOW WARNINGS"), outcome{resultSet: true, setRows: 2}); !hold || expire {
		t.Errorf("SHOW WARNINGS: hold %v expire %v, want held without expiry", hold, expire)
	}
	if !p.lastDiag || p.rowCount != -1 {
		t.Errorf("SHOW WARNINGS: lastDiag %v rowCount %d", p.lastDiag, p.rowCount)
	}
	p.pureDiag = false
	// A statement without a table, run where the warnings are, keeps them.
	p.ranOnPrev = true
	if hold, _ := p.noteLast(scan("SELECT 1"), outcome{resultSet: true, setRows: 1}); !hold || !p.lastDiag {
		t.Errorf("SELECT 1 on the previous connection: hold %v lastDiag %v", hold, p.lastDiag)
	}
	// One that opens a table clears them.
	if hold, _ := p.noteLast(scan("SELECT a FROM t"), outcome{resultSet: true, setRows: 1}); hold || p.lastDiag {
		t.Errorf("SELECT from a table: hold %v lastDiag %v", hold, p.lastDiag)
	}
	// Elsewhere, even a table-less statement starts from a clean area.
	p.noteDiag(true, scan("SELECT 1"))
	p.ranOnPrev = false
	p.noteDiag(false, scan("SELECT 1"))
	if p.lastDiag {
		t.Error("a statement on another connection kept the warnings")
	}
}

// TestPrevStateInsertAnswer: whose LAST_INSERT_ID() a server connection
// answers with.
func TestPrevStateInsertAnswer(t *testing.T) {
	var p prevState
	p.forget()
	fresh := &backend.Conn{}
	if !p.insertAnswerOn(fresh) {
		t.Error("no id anywhere: a fresh connection's 0 is the session's")
	}
	other := &backend.Conn{InsertToken: 7}
	if p.insertAnswerOn(other) {
		t.Error("another session's id was taken for the session's")
	}
	mine := &backend.Conn{InsertToken: 9}
	p.insertID, p.insertConn, p.insertToken, p.insertTrusted = 5, mine, 9, true
	if !p.insertAnswerOn(mine) {
		t.Error("the connection of the session's insert does not answer")
	}
	if p.insertAnswerOn(fresh) {
		t.Error("a fresh connection's 0 answered although the session has an id")
	}
	mine.InsertToken = 10 // another insert there since
	if p.insertAnswerOn(mine) {
		t.Error("answered after another insert on the connection")
	}
	mine.InsertToken = 9
	p.insertTrusted = false
	if p.insertAnswerOn(mine) {
		t.Error("answered although the id there was not trusted")
	}
}

// TestPrevStateHold: the held connection is taken once, and hold
// returns what it replaces.
func TestPrevStateHold(t *testing.T) {
	var p prevState
	a, b := &backend.Conn{}, &backend.Conn{}
	if old := p.hold(a); old != nil {
		t.Fatalf("first hold replaced %p", old)
	}
	if p.at.Load() != a {
		t.Error("Fence does not see the held connection")
	}
	if old := p.hold(b); old != a {
		t.Errorf("hold replaced %p, want %p", old, a)
	}
	if c := p.take(); c != b || p.at.Load() != nil {
		t.Errorf("take: %p (at %p), want %p and nothing left", c, p.at.Load(), b)
	}
	if c := p.take(); c != nil {
		t.Errorf("second take: %p", c)
	}
	p.gaveBack(a)
	if p.lastConn != a || p.lastPuts != a.NextPut() {
		t.Errorf("gaveBack: %p %d", p.lastConn, p.lastPuts)
	}
}

// TestOwnValues: the calls Vigil answers itself whatever the previous
// statement was.
func TestOwnValues(t *testing.T) {
	for _, c := range []struct {
		q    string
		want sqlscan.Flags
	}{
		{"SELECT CONNECTION_ID()", sqlscan.FlagConnectionID},
		{"SELECT * FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()", 0},
		{"SELECT @@session_track_schema", sqlscan.FlagSessionTrack},
		{"SET session_track_schema = OFF", 0},
		{"SELECT ROW_COUNT()", 0},
	} {
		if got := ownValues(scan(c.q)); got != c.want {
			t.Errorf("%s: %b, want %b", c.q, got, c.want)
		}
	}
}

// TestPrevStateRewrite: the statement sent with Vigil's record in place
// of the calls, after an update and a result set.
func TestPrevStateRewrite(t *testing.T) {
	var p prevState
	p.forget()
	q := []byte("SELECT ROW_COUNT(), FOUND_ROWS(), LAST_INSERT_ID(), CONNECTION_ID()")
	if out := p.rewrite(q, 0, 7, nil); out != nil {
		t.Errorf("nothing asked, yet rewritten: %s", out)
	}
	p.noteLast(scan("SELECT a FROM t"), outcome{resultSet: true, setRows: 12})
	p.noteLast(scan("INSERT INTO t VALUES (NULL)"), outcome{affected: 1, insertID: 99})
	out := p.rewrite(q, prevValues|sqlscan.FlagConnectionID, 7, nil)
	// The calls stay as the fallback of COALESCE, for the column types
	// (sqlscan.RewriteSessionFuncs).
	for _, want := range []string{"COALESCE(1,ROW_COUNT())", "COALESCE(12,FOUND_ROWS())",
		"COALESCE(CAST(99 AS UNSIGNED),LAST_INSERT_ID())", "COALESCE(CAST(7 AS UNSIGNED),CONNECTION_ID())"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("%s: %s missing", out, want)
		}
	}
	// After a result set ROW_COUNT() is -1.
	p.noteLast(scan("SELECT 1"), outcome{resultSet: true, setRows: 1})
	out = p.rewrite([]byte("SELECT ROW_COUNT()"), sqlscan.FlagRowCount, 7, nil)
	if !bytes.Contains(out, []byte("COALESCE(-1,ROW_COUNT())")) {
		t.Errorf("after a result set: %s, want -1", out)
	}
}
