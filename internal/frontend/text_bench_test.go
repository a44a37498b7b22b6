package frontend

import (
	"testing"

	"github.com/vigil-db/vigil/internal/sqlscan"
)

// textStmts are statements that make the session ask each question of
// its text: SET qualification, IS NULL (sql_auto_is_null), the
// diagnostics area, CONNECTION_ID() next to the processlist, a GLOBAL SET
// of session tracking, KILL, SET TRANSACTION, LAST_INSERT_ID(expr).
var textStmts = [][]byte{
	[]byte("SELECT c FROM sbtest1 WHERE id=5000"),
	[]byte("SET @@sql_mode = 'STRICT_TRANS_TABLES', @@time_zone = '+00:00'"),
	[]byte("SHOW WARNINGS"),
	[]byte("SELECT * FROM t WHERE id IS NULL"),
	[]byte("SELECT id FROM information_schema.PROCESSLIST WHERE id = CONNECTION_ID()"),
	[]byte("SET GLOBAL session_track_schema = ON"),
	[]byte("KILL 5"),
	[]byte("SET TRANSACTION READ ONLY"),
	[]byte("INSERT INTO t VALUES (LAST_INSERT_ID(5))"),
}

// textAnswers is every answer the session takes from a statement's text
// after the scan (comQuery, routePrev, after, noteLast), each asked as if
// its condition held (sql_auto_is_null on, warnings held).
func textAnswers(info sqlscan.Info, q, buf []byte) int {
	n := 0
	if _, _, ok := info.KillTarget(); ok {
		n++
	}
	if info.Class == sqlscan.ClassSet {
		if out, ok := info.QualifySessionSets(buf[:0], q); ok {
			n += len(out)
		}
	}
	if info.Class == sqlscan.ClassRead && info.Facts&sqlscan.FactIsNull != 0 {
		n++
	}
	if info.Class == sqlscan.ClassSet && info.Facts&sqlscan.FactNextTrx != 0 {
		n++
	}
	if pureDiagnostics(info) {
		n++
	}
	if info.Flags&sqlscan.FlagConnectionID != 0 && info.Facts&sqlscan.FactProcesslist != 0 {
		n++
	}
	if info.Flags&sqlscan.FlagGlobalSet != 0 && info.Facts&sqlscan.FactTrackName != 0 {
		n++
	}
	if info.SetsInsertIDUnseen() {
		n++
	}
	if !info.OpensTable() {
		n++
	}
	return n
}

var textSink int

// BenchmarkStatementText is the text work of a statement on the session
// goroutine: Scan and every answer taken from the text afterwards; point
// is the common autocommit point select, mix one each of textStmts.
func BenchmarkStatementText(b *testing.B) {
	buf := make([]byte, 0, 256)
	for _, bc := range []struct {
		name  string
		stmts [][]byte
	}{{"point", textStmts[:1]}, {"mix", textStmts}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, q := range bc.stmts {
					textSink += textAnswers(sqlscan.Scan(q), q, buf)
				}
			}
		})
	}
}
