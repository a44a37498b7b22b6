package sqlscan

import (
	"strconv"
	"strings"
)

// SessionValues are what the functions that read a session's previous
// statement return, as a proxy knows them from the replies it forwarded.
type SessionValues struct {
	RowCount     int64  // ROW_COUNT()
	FoundRows    int64  // FOUND_ROWS()
	LastInsertID uint64 // LAST_INSERT_ID(), @@identity, @@last_insert_id
	ConnectionID uint32 // CONNECTION_ID()
	// Track are the client's own session_track_* values by variable name
	// (lower case), for reads of them (FlagSessionTrack).
	Track map[string]string
}

// RewriteSessionFuncs appends to dst the text of q with every read of
// ROW_COUNT() (FlagRowCount in which), FOUND_ROWS() (FlagFoundRows),
// LAST_INSERT_ID() without an argument (with one it sets the value),
// @@identity and @@last_insert_id (FlagLastInsertID), and CONNECTION_ID()
// (FlagConnectionID) replaced by the value in v, written as an expression of the function's own type that
// never evaluates the function: COALESCE(-1,ROW_COUNT()) is a BIGINT -1,
// exactly like ROW_COUNT() in the column metadata. An item of the first
// select list that is exactly one of those reads keeps its column name
// through an alias of its original text ("SELECT row_count()" names its
// column "row_count()"). ok is false when q reads none of them; dst is
// then returned unchanged.
//
// Strings, quoted identifiers and comments are never changed; the
// content of executable comments is code and is rewritten.
func RewriteSessionFuncs(dst, q []byte, v SessionValues, which Flags) (out []byte, ok bool) {
	var toks []Token
	lx := NewLexer(q)
	for {
		t := lx.Next()
		if t.Kind == TokEOF {
			break
		}
		toks = append(toks, t)
	}
	type span struct {
		from, to int // token indexes, inclusive
		repl     string
	}
	var spans []span
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch t.Kind {
		case TokWord:
			var repl string
			switch {
			case t.Keyword == KwRowCount && which&FlagRowCount != 0:
				repl = "COALESCE(" + strconv.FormatInt(v.RowCount, 10) + ",ROW_COUNT())"
			case t.Keyword == KwFoundRows && which&FlagFoundRows != 0:
				repl = "COALESCE(" + strconv.FormatInt(v.FoundRows, 10) + ",FOUND_ROWS())"
			case t.Keyword == KwLastInsertID && which&FlagLastInsertID != 0:
				repl = "COALESCE(CAST(" + strconv.FormatUint(v.LastInsertID, 10) + " AS UNSIGNED),LAST_INSERT_ID())"
			case t.Keyword == KwConnectionID && which&FlagConnectionID != 0:
				repl = "COALESCE(CAST(" + strconv.FormatUint(uint64(v.ConnectionID), 10) + " AS UNSIGNED),CONNECTION_ID())"
			default:
				continue
			}
			if i+2 < len(toks) && toks[i+1].Kind == TokLParen && toks[i+2].Kind == TokRParen {
				spans = append(spans, span{i, i + 2, repl})
				i += 2
			}
		case TokSysVar:
			name, global := sysVarName(q[t.Start:t.End])
			if !global && which&FlagSessionTrack != 0 && isTrackVar(name) {
				if val, ok := v.Track[strings.ToLower(string(name))]; ok && !strings.Contains(val, "\\") {
					spans = append(spans, span{i, i, "COALESCE(" + quoteString(val) + "," + string(q[t.Start:t.End]) + ")"})
					continue
				}
			}
			if !global && which&FlagConnectionID != 0 && equalFold(name, "pseudo_thread_id") {
				spans = append(spans, span{i, i, "COALESCE(" + strconv.FormatUint(uint64(v.ConnectionID), 10) + "," +
					string(q[t.Start:t.End]) + ")"})
				continue
			}
			if !global && which&FlagLastInsertID != 0 && (equalFold(name, "identity") || equalFold(name, "last_insert_id")) {
				spans = append(spans, span{i, i, "COALESCE(CAST(" + strconv.FormatUint(v.LastInsertID, 10) +
					" AS UNSIGNED)," + string(q[t.Start:t.End]) + ")"})
			}
		}
	}
	if len(spans) == 0 {
		return dst, false
	}
	// Items of the first select list that hold a read and have no alias
	// of their own keep their column name (the item's text) through one.
	aliasAt := map[int][2]int{} // token index of the item's last token -> item's text span
	for _, it := range firstSelectItems(toks) {
		if hasAlias(q, toks[it[0]:it[1]+1]) {
			continue
		}
		for _, s := range spans {
			if s.from >= it[0] && s.to <= it[1] {
				aliasAt[it[1]] = [2]int{toks[it[0]].Start, toks[it[1]].End}
				break
			}
		}
	}
	pos := 0
	writeAlias := func(ti int) {
		a, ok := aliasAt[ti]
		if !ok {
			return
		}
		dst = append(dst, q[pos:toks[ti].End]...)
		pos = toks[ti].End
		dst = append(dst, " AS `"...)
		for _, c := range q[a[0]:a[1]] {
			if c == '`' {
				dst = append(dst, '`')
			}
			dst = append(dst, c)
		}
		dst = append(dst, '`')
	}
	for i := range toks {
		for _, s := range spans {
			if s.from == i {
				dst = append(dst, q[pos:toks[s.from].Start]...)
				dst = append(dst, s.repl...)
				pos = toks[s.to].End
			}
		}
		writeAlias(i)
	}
	return append(dst, q[pos:]...), true
}

// hasAlias reports whether a select-list item (its tokens) names its
// column: "... AS name" at its own level, or an expression followed by a
// name ("ROW_COUNT() rc").
func hasAlias(src []byte, item []Token) bool {
	depth := 0
	for _, t := range item {
		switch t.Kind {
		case TokLParen:
			depth++
		case TokRParen:
			depth--
		case TokWord:
			if depth == 0 && upperEqual(src[t.Start:t.End], "AS") {
				return true
			}
		}
	}
	n := len(item)
	if n < 2 {
		return false
	}
	last, prev := item[n-1], item[n-2]
	switch {
	case last.Kind == TokQuotedIdent, last.Kind == TokString, last.Kind == TokWord && last.Keyword == kwNone:
	default:
		return false
	}
	switch prev.Kind {
	case TokRParen, TokWord, TokQuotedIdent, TokNumber, TokString, TokSysVar, TokUserVar:
		return prev.Kind != TokWord || prev.Keyword == kwNone || prev.Keyword.attr()&attrValue != 0
	}
	return false
}

// selectModifiers may follow SELECT before the first item.
var selectModifiers = map[string]bool{
	"ALL": true, "DISTINCT": true, "DISTINCTROW": true, "HIGH_PRIORITY": true, "STRAIGHT_JOIN": true,
	"SQL_SMALL_RESULT": true, "SQL_BIG_RESULT": true, "SQL_BUFFER_RESULT": true, "SQL_CACHE": true,
	"SQL_NO_CACHE": true, "SQL_CALC_FOUND_ROWS": true,
}

// selectListEnd are the words that end a select list at its own depth.
var selectListEnd = map[string]bool{
	"FROM": true, "INTO": true, "WHERE": true, "GROUP": true, "HAVING": true, "ORDER": true,
	"LIMIT": true, "UNION": true, "EXCEPT": true, "INTERSECT": true, "WINDOW": true, "FOR": true,
	"LOCK": true, "PROCEDURE": true, "OFFSET": true, "FETCH": true,
}

// firstSelectItems returns the token ranges (inclusive) of the items of
// the select list of the statement's first SELECT at the outermost level
// (after any parentheses the statement starts with).
func firstSelectItems(toks []Token) [][2]int {
	i, depth := 0, 0
	for i < len(toks) && toks[i].Kind == TokLParen {
		i++
		depth++
	}
	if i >= len(toks) || toks[i].Keyword != KwSelect {
		return nil
	}
	i++
	for i < len(toks) && toks[i].Kind == TokWord && selectModifiers[toks[i].Keyword.String()] {
		i++
	}
	var items [][2]int
	start, d := i, depth
loop:
	for ; i < len(toks); i++ {
		t := toks[i]
		switch t.Kind {
		case TokLParen:
			d++
		case TokRParen:
			if d == depth {
				break loop
			}
			d--
		case TokComma:
			if d == depth {
				items = append(items, [2]int{start, i - 1})
				start = i + 1
			}
		case TokSemicolon:
			break loop
		case TokWord:
			if d == depth && selectListEnd[t.Keyword.String()] {
				break loop
			}
		}
	}
	if start <= i-1 {
		items = append(items, [2]int{start, i - 1})
	}
	return items
}

// quoteString writes v as an SQL string literal (quotes doubled, which
// reads the same with and without NO_BACKSLASH_ESCAPES; v has no
// backslash).
func quoteString(v string) string {
	return "'" + strings.ReplaceAll(v, "'", "''") + "'"
}
