package frontend

import (
	"github.com/vigil-db/vigil/internal/sqlscan"
)

// scanShard classifies a statement and collects the schemas it names, in
// one pass over its text (sqlscan.ScanRefs).
func scanShard(q []byte) (sqlscan.Info, shardStmt) {
	var r sqlscan.Refs
	info := sqlscan.ScanRefs(q, &r)
	st := shardStmt{class: info.Class, overflow: r.Overflow()}
	if n := r.Len(); n > 0 {
		st.refs = make([]shardRef, 0, n)
		for i := range n {
			st.refs = append(st.refs, shardRef{name: string(r.Name(i)), certain: r.Certain(i)})
		}
	}
	if db, ok := r.Use(); ok && info.Class == sqlscan.ClassUse {
		st.use = string(db)
	}
	return info, st
}

func isIdent(t sqlscan.Token) bool {
	return t.Kind == sqlscan.TokWord || t.Kind == sqlscan.TokQuotedIdent
}

// identName is an identifier token's name, without backquotes.
func identName(q []byte, t sqlscan.Token) string {
	var r sqlscan.Refs
	if t.Kind == sqlscan.TokQuotedIdent {
		sqlscan.ScanRefs(append([]byte("USE "), t.Text(q)...), &r)
		if db, ok := r.Use(); ok {
			return string(db)
		}
	}
	return string(t.Text(q))
}
