package frontend

import (
	"bytes"

	"github.com/vigil-db/vigil/internal/sqlscan"
)

// scanShard classifies a statement and collects the schemas it names.
func scanShard(q []byte) (sqlscan.Info, shardStmt) {
	info := sqlscan.Scan(q)
	st := shardStmt{class: info.Class}
	lx := sqlscan.NewLexer(q)
	var prev [2]sqlscan.Token // the two tokens before t
	for n := 0; ; n++ {
		t := lx.Next()
		if t.Kind == sqlscan.TokEOF {
			break
		}
		if info.Class == sqlscan.ClassUse && n == 1 && isIdent(t) {
			st.use = identName(q, t)
		}
		if prev[1].Kind == sqlscan.TokDot && isIdent(prev[0]) && isIdent(t) {
			_ = t
		}
		if t.Kind == sqlscan.TokDot && isIdent(prev[1]) && prev[0].Kind != sqlscan.TokDot {
			name := identName(q, prev[1])
			if len(st.refs) >= 8 {
				st.overflow = true
			} else {
				st.refs = append(st.refs, shardRef{name: name})
			}
		}
		prev[0], prev[1] = prev[1], t
	}
	return info, st
}

func isIdent(t sqlscan.Token) bool {
	return t.Kind == sqlscan.TokWord || t.Kind == sqlscan.TokQuotedIdent
}

func identName(q []byte, t sqlscan.Token) string {
	b := t.Text(q)
	if t.Kind == sqlscan.TokQuotedIdent && len(b) >= 2 {
		b = bytes.ReplaceAll(b[1:len(b)-1], []byte("``"), []byte("`"))
	}
	return string(b)
}
