package sqlscan

// This file collects, in Scan's one pass, the schema names a statement
// names (ScanRefs), for a listener that routes by schema.

// maxRefs is how many distinct names Refs holds; more set Overflow.
const maxRefs = 8

// refBufSize is the room for names that must be unescaped (a doubled
// backquote inside a quoted name); a name that does not fit sets Overflow.
const refBufSize = 128

// Refs are the schema names a statement names, collected by [ScanRefs]:
// the qualifier of every qualified name (db.tbl, db.tbl.col, db.func(),
// db.*) and the names that are schemas (USE db, SHOW TABLES FROM db,
// CREATE/DROP/ALTER DATABASE db, ...). Each distinct name is recorded
// once, in order of first appearance; it is certain when the text says it
// is a schema, or a candidate when it may as well be a table or an alias
// qualifying a column (t.col). The zero Refs is empty and ready for use;
// it holds its names without allocating.
type Refs struct {
	src    []byte
	n      uint8
	over   bool
	hasUse bool
	nbuf   uint8
	refs   [maxRefs]ref
	use    ref
	buf    [refBufSize]byte
}

// ref is one name: src[start:end], or buf[start:end] when inBuf.
type ref struct {
	start, end int32
	certain    bool
	inBuf      bool
}

// Len returns the number of names recorded.
func (r *Refs) Len() int { return int(r.n) }

// Name returns the i'th name, unquoted: without its backquotes, a doubled
// backquote as one. It aliases the scanned text or r; copy what you keep.
func (r *Refs) Name(i int) []byte { return r.name(r.refs[i]) }

// Certain reports whether the i'th name is a schema for sure: a name
// that is one (USE db, SHOW TABLES FROM db, CREATE DATABASE db, ...), the
// qualifier of a three-part name (db.tbl.col) or of a name where a table
// stands (after FROM, JOIN, INTO, UPDATE, TABLE, ... and in the list of
// tables after FROM). A name that is not certain is a candidate: the
// qualifier of a.b elsewhere, which may be a table or an alias.
func (r *Refs) Certain(i int) bool { return r.refs[i].certain }

// Overflow reports whether the statement names more than the names Refs
// holds (8, or unescaped names longer than its buffer): the list is
// incomplete, and the caller should refuse or route conservatively.
func (r *Refs) Overflow() bool { return r.over }

// Use returns the schema that USE db makes the default, from the last USE
// in the text, and whether there is one.
func (r *Refs) Use() ([]byte, bool) {
	if !r.hasUse {
		return nil, false
	}
	return r.name(r.use), true
}

func (r *Refs) name(x ref) []byte {
	if x.inBuf {
		return r.buf[x.start:x.end]
	}
	return r.src[x.start:x.end]
}

// nameRef returns the ref for the name token t, unquoted, and false if
// it is empty or does not fit.
func (r *Refs) nameRef(t Token) (ref, bool) {
	src := r.src
	if t.Kind != TokQuotedIdent {
		return ref{start: int32(t.Start), end: int32(t.End)}, true
	}
	start, end := t.Start+1, t.End-1
	if t.Unterminated(src) {
		end = t.End
	}
	if end <= start {
		return ref{}, false
	}
	w := src[start:end]
	doubled := false
	for i := 0; i < len(w); i++ {
		if w[i] == '`' {
			doubled = true
			break
		}
	}
	if !doubled {
		return ref{start: int32(start), end: int32(end)}, true
	}
	b := int(r.nbuf)
	if b+len(w) > len(r.buf) {
		r.over = true
		return ref{}, false
	}
	j := b
	for i := 0; i < len(w); i++ {
		r.buf[j] = w[i]
		j++
		if w[i] == '`' && i+1 < len(w) && w[i+1] == '`' {
			i++
		}
	}
	r.nbuf = uint8(j)
	return ref{start: int32(b), end: int32(j), inBuf: true}, true
}

// add records the name token t; a name seen before is upgraded to
// certain if this one is. It returns the ref recorded.
func (r *Refs) add(t Token, certain bool) (ref, bool) {
	x, ok := r.nameRef(t)
	if !ok {
		return x, false
	}
	x.certain = certain
	w := r.name(x)
	for i := range r.refs[:r.n] {
		if string(r.name(r.refs[i])) == string(w) {
			r.refs[i].certain = r.refs[i].certain || certain
			if x.inBuf {
				r.nbuf = uint8(x.start) // the copy is not needed
			}
			return r.refs[i], true
		}
	}
	if int(r.n) == len(r.refs) {
		r.over = true
		return x, true
	}
	r.refs[r.n] = x
	r.n++
	return x, true
}

// Keywords of the keyword table's tail that refs need.
var (
	kwJoin         = LookupKeyword([]byte("JOIN"))
	kwStraightJoin = LookupKeyword([]byte("STRAIGHT_JOIN"))
	kwExists       = LookupKeyword([]byte("EXISTS"))
	kwIgnore       = LookupKeyword([]byte("IGNORE"))
	kwLowPriority  = LookupKeyword([]byte("LOW_PRIORITY"))
	kwHighPriority = LookupKeyword([]byte("HIGH_PRIORITY"))
	kwDelayed      = LookupKeyword([]byte("DELAYED"))
	kwQuick        = LookupKeyword([]byte("QUICK"))
	kwKey          = LookupKeyword([]byte("KEY"))
	kwReferences   = LookupKeyword([]byte("REFERENCES"))
	kwSequence     = LookupKeyword([]byte("SEQUENCE"))
	kwColumns      = LookupKeyword([]byte("COLUMNS"))
	kwFields       = LookupKeyword([]byte("FIELDS"))
	kwIndexes      = LookupKeyword([]byte("INDEXES"))
	kwKeys         = LookupKeyword([]byte("KEYS"))
	kwWhere        = LookupKeyword([]byte("WHERE"))
	kwLike         = LookupKeyword([]byte("LIKE"))
	kwCollate      = LookupKeyword([]byte("COLLATE"))
	kwComment      = LookupKeyword([]byte("COMMENT"))
	kwGroup        = LookupKeyword([]byte("GROUP"))
	kwOrder        = LookupKeyword([]byte("ORDER"))
	kwHaving       = LookupKeyword([]byte("HAVING"))
	kwLimit        = LookupKeyword([]byte("LIMIT"))
	kwUnion        = LookupKeyword([]byte("UNION"))
	kwUsing        = LookupKeyword([]byte("USING"))
)

// refScanner follows the token stream of ScanRefs and fills out.
type refScanner struct {
	out *Refs

	first Keyword // the current statement's first keyword
	ntok  int     // tokens of the current statement, this one included
	depth int     // parentheses

	tablePos  bool // the next name is where a table stands
	schemaPos bool // the next name is a schema
	use       bool // the schema name is USE's
	list      bool // commas at listDepth start another table
	listDepth int
	showFrom  int  // FROM/IN seen in a SHOW statement
	showCols  bool // SHOW COLUMNS/FIELDS/INDEX/INDEXES/KEYS: the first FROM is the table's
	showEnd   bool // SHOW ... WHERE/LIKE: no more schema names

	// the current name chain: a.b.c
	parts   int   // names in it so far
	dot     bool  // the last token was its dot
	head    Token // its first name
	certain bool  // it started where a table stands
	prevKey bool  // the last token was KEY (ON DUPLICATE KEY UPDATE)
}

// observe looks at one token of the text.
func (s *refScanner) observe(t Token) {
	if t.Kind == TokSemicolon {
		*s = refScanner{out: s.out}
		return
	}
	s.ntok++
	if s.ntok == 1 && t.Kind == TokWord {
		s.first = t.Keyword
	}
	name := t.Kind == TokWord || t.Kind == TokQuotedIdent
	star := t.Kind == TokOp && t.End-t.Start == 1 && s.out.src[t.Start] == '*'
	switch {
	case s.dot && (name || star):
		s.dot = false
		s.parts++
		switch s.parts {
		case 2:
			s.out.add(s.head, s.certain)
		case 3:
			s.out.add(s.head, true) // db.tbl.col
		}
	case t.Kind == TokDot && s.parts > 0 && !s.dot:
		// "db . t" is a name, but in "SELECT .5" or "FROM .t" (ODBC's
		// way to write t) a keyword before the dot is syntax.
		s.dot = s.parts > 1 || t.Start == s.head.End || s.head.Kind != TokWord || s.head.Keyword == kwNone
		if !s.dot {
			s.parts = 0
		}
	case name:
		s.parts, s.dot, s.head, s.certain = 1, false, t, s.tablePos
		if s.schemaPos && !(t.Kind == TokWord && notSchemaName(t.Keyword)) {
			x, ok := s.out.add(t, true)
			if s.use {
				s.out.use, s.out.hasUse = x, ok
			}
			s.schemaPos = false
			return
		}
	default:
		s.parts, s.dot = 0, false
	}
	s.position(t)
}

// notSchemaName: words after ALTER DATABASE that start its options.
func notSchemaName(k Keyword) bool {
	switch k {
	case KwCharacter, KwCharset, KwDefault, kwCollate, kwComment, KwIf, KwNot, kwExists:
		return true
	}
	return false
}

// position works out what the token says about the next name.
func (s *refScanner) position(t Token) {
	table, schema := false, false
	switch t.Kind {
	case TokLParen:
		s.depth++
	case TokRParen:
		s.depth--
		if s.list && s.depth < s.listDepth {
			s.list = false
		}
	case TokComma:
		table = s.list && s.depth == s.listDepth
	case TokWord:
		switch k := t.Keyword; k {
		case kwFrom, KwIn:
			if s.first == KwShow {
				if !s.showEnd {
					s.showFrom++
					if s.showCols && s.showFrom == 1 {
						table = true
					} else {
						schema = true
					}
				}
				break
			}
			if k == kwFrom {
				table = true
				s.list, s.listDepth = true, s.depth
			}
		case KwTable, KwTables:
			table = true
			s.list, s.listDepth = true, s.depth
		case KwUpdate:
			if s.ntok == 1 {
				table = true
				s.list, s.listDepth = true, s.depth
			} else {
				table = !s.prevKey // not ON DUPLICATE KEY UPDATE t.col = ...
			}
		case KwDelete:
			table = true
			s.list, s.listDepth = true, s.depth
		case KwInto, kwJoin, kwStraightJoin, KwTruncate, KwInsert, KwReplace, kwReferences,
			KwView, KwProcedure, KwFunction, KwTrigger, KwEvent, kwSequence:
			table = true
		case KwDescribe, KwDesc, KwExplain, KwHandler, KwCall:
			table = s.ntok == 1
		case KwTo:
			table = s.first == KwRename || s.first == KwAlter
		case KwTemporary, KwIf, KwNot, kwExists, kwIgnore, kwLowPriority, kwHighPriority, kwDelayed, kwQuick:
			table, schema = s.tablePos, s.schemaPos
		case KwUse:
			if s.ntok == 1 {
				schema, s.use = true, true
			}
		case KwDatabase, KwSchema:
			switch s.first {
			case KwCreate, KwDrop, KwAlter, KwShow:
				schema = s.ntok <= 4
			}
		case KwIndex, kwColumns, kwFields, kwIndexes, kwKeys:
			if s.first == KwShow && s.showFrom == 0 {
				s.showCols = true
			}
		case kwWhere, kwLike, KwOn, KwSet, kwGroup, kwOrder, kwHaving, kwLimit, kwUnion, kwUsing, KwSelect, KwValues:
			s.list = false
			s.showEnd = s.showEnd || s.first == KwShow && (k == kwWhere || k == kwLike)
		}
	}
	s.prevKey = t.Kind == TokWord && t.Keyword == kwKey
	s.tablePos, s.schemaPos = table, schema
}

// skipped records that the normalizer consumed tokens (a list of
// literals): they break any name and are no table's place.
func (s *refScanner) skipped() {
	s.parts, s.dot, s.tablePos, s.schemaPos = 0, false, false, false
}
