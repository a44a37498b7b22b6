package sqlscan

// The exported helpers below each lex the text again; Info answers the
// same questions from Scan's pass (facts.go). They go once the frontend
// asks Info.

// FirstKeyword returns the first keyword of q after leading whitespace,
// comments and parentheses, or 0 if q does not start with one (useful as a
// metrics label: FirstKeyword(q).String()).
func FirstKeyword(q []byte) Keyword {
	lx := NewLexer(q)
	t := lx.Next()
	for t.Kind == TokLParen {
		t = lx.Next()
	}
	if t.Kind != TokWord {
		return kwNone
	}
	return t.Keyword
}

// SetsInsertIDUnseen reports whether q may change its connection's
// LAST_INSERT_ID() without the server saying so in an OK packet: CALL (the
// procedure's inserts), LOAD DATA / LOAD XML (their OK carries no insert
// id), EXECUTE of a prepared statement, several statements in one query,
// LAST_INSERT_ID(expr) with an argument, and SET of @@last_insert_id or
// @@identity. info is q's [Scan].
func SetsInsertIDUnseen(q []byte, info Info) bool {
	if info.Flags&FlagMulti != 0 {
		return true
	}
	switch FirstKeyword(q) {
	case KwCall, KwLoad, KwExecute:
		return true
	}
	set := info.Class == ClassSet
	if info.Flags&FlagLastInsertID == 0 && !set {
		return false
	}
	lx := NewLexer(q)
	prev, prev2 := Token{}, Token{}
	for {
		t := lx.Next()
		if t.Kind == TokEOF {
			return false
		}
		if set {
			// SET [SESSION] last_insert_id = n, SET @@identity = n.
			switch t.Kind {
			case TokWord:
				if t.Keyword == KwLastInsertID || equalFold(q[t.Start:t.End], "identity") {
					return true
				}
			case TokSysVar:
				if name, _ := sysVarName(q[t.Start:t.End]); equalFold(name, "identity") || equalFold(name, "last_insert_id") {
					return true
				}
			}
			continue
		}
		if prev2.Kind == TokWord && prev2.Keyword == KwLastInsertID && prev.Kind == TokLParen && t.Kind != TokRParen {
			return true
		}
		prev2, prev = prev, t
	}
}

// QualifySessionSets is Info.QualifySessionSets with a walk of its own.
func QualifySessionSets(dst, q []byte) ([]byte, bool) { return qualifySessionSets(dst, q) }
