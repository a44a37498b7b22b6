package sqlscan

// KillTarget parses "KILL [HARD|SOFT] [CONNECTION|QUERY] <id>" (an optional
// trailing ';' allowed) and returns the thread id and whether only the
// query is killed. ok is false for anything else, including MariaDB's
// "KILL QUERY ID <query_id>" and "KILL USER <name>", whose target is not a
// connection id.
func KillTarget(q []byte) (id uint64, query bool, ok bool) {
	lx := NewLexer(q)
	t := lx.Next()
	if t.Keyword != KwKill {
		return 0, false, false
	}
	t = lx.Next()
	if t.Keyword == KwHard || t.Keyword == KwSoft {
		t = lx.Next()
	}
	switch t.Keyword {
	case KwConnection:
		t = lx.Next()
	case KwQuery:
		query = true
		t = lx.Next()
	}
	if t.Kind != TokNumber {
		return 0, false, false
	}
	for _, c := range q[t.Start:t.End] {
		if !isDigit(c) {
			return 0, false, false
		}
		d := uint64(c - '0')
		if id > (1<<64-1-d)/10 {
			return 0, false, false // overflow
		}
		id = id*10 + d
	}
	for t = lx.Next(); t.Kind == TokSemicolon; t = lx.Next() {
	}
	if t.Kind != TokEOF {
		return 0, false, false
	}
	return id, query, true
}
