package sqlscan

// This file gathers, in Scan's one pass, the facts about a statement's
// text that the frontend needs besides its class and flags (its first
// keyword, what the previous-statement emulation asks, where a SET names
// a session variable unqualified), so that nothing lexes the text again.

// Facts are facts about a statement's text that do not change its routing
// by themselves; the frontend combines them with its session state.
type Facts uint8

const (
	// FactNextTrx: SET TRANSACTION ... (not SET SESSION TRANSACTION),
	// which applies to the next transaction only.
	FactNextTrx Facts = 1 << iota
	// FactOpensTable: the text starts with SHOW, or has a FROM other than
	// FROM DUAL: a read that MariaDB starts by clearing the diagnostics
	// area (see Info.OpensTable).
	FactOpensTable
	// FactIsNull: IS NULL in code (comments between the two words allowed;
	// not in strings, comments or names): with sql_auto_is_null it may
	// find the connection's LAST_INSERT_ID() row.
	FactIsNull
	// FactProcesslist: the word PROCESSLIST, or `processlist` (SHOW
	// PROCESSLIST, information_schema.PROCESSLIST).
	FactProcesslist
	// FactTrackName: a name or variable that starts with session_track_.
	FactTrackName
	// factInsertIDName: LAST_INSERT_ID or IDENTITY as a word, or
	// @@[scope.]identity / last_insert_id (see SetsInsertIDUnseen).
	factInsertIDName
	// factInsertIDArg: LAST_INSERT_ID( with an argument.
	factInsertIDArg
)

// maxSetSites is how many unqualified @@name assignments Info records;
// a SET with more is qualified by a second walk over its text.
const maxSetSites = 8

// setSites records where QualifySessionSets writes "SESSION.": after the
// "@@" of each unqualified session @@name that the SET statement which
// starts the text assigns.
type setSites struct {
	n    uint8
	over bool // more than maxSetSites, or the look-ahead budget ran out
	at   [maxSetSites]int32
}

func (s *setSites) add(pos int) {
	if int(s.n) == len(s.at) {
		s.over = true
		return
	}
	s.at[s.n] = int32(pos)
	s.n++
}

// Keywords of the keyword table's tail (otherKeywords) that facts need.
var (
	kwFrom = LookupKeyword([]byte("FROM"))
	kwDual = LookupKeyword([]byte("DUAL"))
	kwIs   = LookupKeyword([]byte("IS"))
)

// factTracker follows the token stream of Scan for the facts.
type factTracker struct {
	facts Facts
	first Keyword
	ntok  int  // tokens seen while start follows them (the first of a run the normalizer consumed counts; the rest do not)
	head  bool // still in leading "(": the next word is the first keyword
	from  bool // the last token was FROM
	// for SET TRANSACTION: tokens seen after leading ';', and the first two
	ntrx       int
	tok1, tok2 Keyword
	// KILL <id>
	killAt killState
	kill   killTarget
}

// observe looks at one token; prevKind, prevKw and prev2Kw describe the
// two before it (the classifier's view).
func (f *factTracker) observe(t Token, src []byte, prevKind TokenKind, prevKw, prev2Kw Keyword) {
	if f.ntrx < 3 || f.head || f.killAt != killNone {
		f.start(t, src)
	}
	if f.from && !(t.Kind == TokWord && t.Keyword == kwDual) {
		f.facts |= FactOpensTable
	}
	f.from = false
	switch t.Kind {
	case TokWord:
		switch k := t.Keyword; {
		case k == kwNone:
			w := src[t.Start:t.End]
			if equalFold(w, "identity") {
				f.facts |= factInsertIDName
			}
			f.trackName(w)
		case k == kwFrom:
			f.from = true
		case k == KwNull:
			if prevKw == kwIs {
				f.facts |= FactIsNull
			}
		case k == KwProcesslist:
			f.facts |= FactProcesslist
		case k == KwLastInsertID:
			f.facts |= factInsertIDName
		}
	case TokQuotedIdent:
		if !t.Unterminated(src) {
			w := src[t.Start+1 : t.End-1]
			if equalFold(w, "processlist") {
				f.facts |= FactProcesslist
			}
			f.trackName(w)
		}
	case TokSysVar:
		name, _ := sysVarName(src[t.Start:t.End])
		if equalFold(name, "identity") || equalFold(name, "last_insert_id") {
			f.facts |= factInsertIDName
		}
		f.trackName(name)
	}
	if prev2Kw == KwLastInsertID && prevKind == TokLParen && t.Kind != TokRParen {
		f.facts |= factInsertIDArg
	}
}

// start follows the first tokens of the text: the first keyword, SHOW,
// SET TRANSACTION and KILL.
func (f *factTracker) start(t Token, src []byte) {
	f.ntok++
	if f.ntok == 1 {
		f.head = true
		if t.Kind == TokWord && t.Keyword == KwShow {
			f.facts |= FactOpensTable
		}
		if t.Kind == TokWord && t.Keyword == KwKill {
			f.killAt = killStart
		}
	} else if f.killAt != killNone {
		f.observeKill(t, src)
	}
	if f.ntrx > 0 || t.Kind != TokSemicolon {
		f.ntrx++
	}
	switch f.ntrx {
	case 1:
		if t.Kind == TokWord {
			f.tok1 = t.Keyword
		}
	case 2:
		if t.Kind == TokWord {
			f.tok2 = t.Keyword
		}
	case 3:
		if f.tok1 == KwSet && f.tok2 == KwTransaction {
			switch t.Kind {
			case TokSemicolon, TokComma, TokRParen, TokDot:
			default:
				f.facts |= FactNextTrx
			}
		}
	}
	if f.head {
		switch {
		case t.Kind == TokLParen:
		case t.Kind == TokWord:
			f.first, f.head = t.Keyword, false
		default:
			f.head = false
		}
	}
}

func (f *factTracker) trackName(w []byte) {
	if len(w) >= 14 && equalFold(w[:14], "session_track_") {
		f.facts |= FactTrackName
	}
}

// end is called after the last token.
func (f *factTracker) end() {
	if f.from {
		f.facts |= FactOpensTable
	}
}

// OpensTable reports, roughly, whether MariaDB clears the diagnostics area
// when it starts the statement: it does for statements that open a table
// (any write, SHOW, a SELECT with a FROM other than DUAL), not for SELECT
// 1, SELECT @@x, SET or USE.
func (i Info) OpensTable() bool {
	switch i.Class {
	case ClassWrite, ClassUnknown:
		return true
	case ClassRead:
		return i.Facts&FactOpensTable != 0
	}
	return false
}

// SetsInsertIDUnseen reports whether the statement may change its
// connection's LAST_INSERT_ID() without the server saying so in an OK
// packet: CALL (the procedure's inserts), LOAD DATA / LOAD XML (their OK
// carries no insert id), EXECUTE of a prepared statement, several
// statements in one query, LAST_INSERT_ID(expr) with an argument, and SET
// of @@last_insert_id or @@identity. It reads i.Flags as they are now (a
// caller may have added FlagLastInsertID).
func (i Info) SetsInsertIDUnseen() bool {
	if i.Flags&FlagMulti != 0 {
		return true
	}
	switch i.First {
	case KwCall, KwLoad, KwExecute:
		return true
	}
	if i.Class == ClassSet {
		// SET [SESSION] last_insert_id = n, SET @@identity = n.
		return i.Facts&factInsertIDName != 0
	}
	return i.Flags&FlagLastInsertID != 0 && i.Facts&factInsertIDArg != 0
}

// QualifySessionSets appends to dst q, the text i was scanned from, with
// every unqualified @@name that a SET statement assigns in session scope
// written @@SESSION.name, and reports whether it changed anything. The
// meaning is the same, but MariaDB's session tracker does not report a
// change made through the unqualified form (SET @@sql_mode = 'ANSI' sends
// no session_track_system_variables entry; SET @@SESSION.sql_mode does),
// and a proxy that follows session state by the tracker would miss it.
func (i *Info) QualifySessionSets(dst, q []byte) ([]byte, bool) {
	if i.sets.over {
		return qualifySessionSets(dst, q)
	}
	if i.sets.n == 0 {
		return dst, false
	}
	pos := 0
	for _, at := range i.sets.at[:i.sets.n] {
		dst = append(dst, q[pos:at]...)
		dst = append(dst, "SESSION."...)
		pos = int(at)
	}
	return append(dst, q[pos:]...), true
}
