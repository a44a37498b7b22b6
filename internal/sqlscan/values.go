package sqlscan

// This file collapses literal lists: "IN (1, 2, 3)" becomes "IN (...)",
// and the row list of VALUES is shortened so that its digest does not
// depend on the number of rows: runs of literal rows become one "(...)"
// and a row identical (once normalised) to the row before it is dropped.

// Kinds of the last row written in a VALUES list.
const (
	rowNone      = iota
	rowCollapsed // a run of literal rows, written as (...)
	rowExpr      // a row written token by token
)

// rowList is the normalizer's state inside the row list of a VALUES
// clause. Only the outermost VALUES list is followed.
type rowList struct {
	active bool
	off    bool // hashing a single row: do not follow VALUES lists
	depth  int  // parentheses open inside the list
	last   int  // rowNone, rowCollapsed or rowExpr
	useRow bool // the last row was written ROW(...)
	rowTag bool // a ROW keyword precedes the next "("
	start  Lexer
	hash   uint64 // of the last rowExpr row, if known
	known  bool
	next   uint64 // hash of the row about to be written, if nextOK
	nextOK bool
}

// track follows t through the row list. It returns true for a ',' between
// rows, which the caller hands to moreRows instead of writing it.
func (r *rowList) track(t Token, lx *Lexer) bool {
	if r.depth > 0 {
		switch t.Kind {
		case TokLParen:
			r.depth++
		case TokRParen:
			r.depth--
		}
		return false
	}
	switch {
	case t.Kind == TokComma:
		return true
	case t.Kind == TokLParen: // a row written token by token
		r.depth = 1
		r.last = rowExpr
		r.useRow, r.rowTag = r.rowTag, false
		r.start = *lx
		r.hash, r.known = r.next, r.nextOK
		r.nextOK = false
	case t.Kind == TokWord && t.Keyword == KwRow:
		r.rowTag = true
	default:
		r.active = false
	}
	return false
}

// firstRows collapses the run of literal rows right after VALUES:
// "VALUES (1, 'a'), (2, 'b')" becomes "VALUES (...)" and
// "VALUES ROW(1), ROW(2)" becomes "VALUES ROW(...)".
func (n *normalizer) firstRows(lx *Lexer) bool {
	c := *lx
	t := c.Next()
	row := t.Kind == TokWord && t.Keyword == KwRow
	if row {
		t = c.Next()
	}
	if t.Kind != TokLParen {
		return false
	}
	end, ok := literalItems(c, true)
	if !ok {
		return false
	}
	*lx = end
	n.literalRow(row)
	n.moreLiteralRows(lx, row)
	return true
}

// moreLiteralRows skips the literal rows that continue a collapsed run.
func (n *normalizer) moreLiteralRows(lx *Lexer, row bool) {
	for {
		c := *lx
		if c.Next().Kind != TokComma {
			return
		}
		t := c.Next()
		if row {
			if t.Kind != TokWord || t.Keyword != KwRow {
				return
			}
			t = c.Next()
		}
		if t.Kind != TokLParen {
			return
		}
		end, ok := literalItems(c, true)
		if !ok {
			return
		}
		*lx = end
	}
}

// literalRow writes a collapsed run of literal rows.
func (n *normalizer) literalRow(row bool) {
	n.space()
	if row {
		n.str("ROW")
	}
	n.str("(...)")
	n.last = lValue
	n.fn = false
	n.rows.last = rowCollapsed
	n.rows.useRow = row
}

// moreRows handles a ',' between rows of a VALUES list: it drops the rows
// that repeat the one before (a literal row after a collapsed run, or a
// row that normalises like the last one) together with their commas, and
// writes the comma otherwise. It returns the kind of the last token it
// consumed beyond the comma, or TokEOF.
func (n *normalizer) moreRows(lx *Lexer) TokenKind {
	r := &n.rows
	consumed := TokEOF
	for {
		c := *lx
		t := c.Next()
		row := t.Kind == TokWord && t.Keyword == KwRow
		if row {
			t = c.Next()
		}
		if t.Kind != TokLParen { // not a row: the list is over
			r.active = false
			n.comma()
			return consumed
		}
		if end, ok := literalItems(c, true); ok {
			if r.last == rowCollapsed && r.useRow == row {
				*lx = end // continues the run
			} else {
				n.comma()
				*lx = end
				n.literalRow(row)
			}
			n.moreLiteralRows(lx, row)
		} else {
			if r.last != rowExpr || r.useRow != row {
				n.comma()
				return consumed
			}
			end, h, ok := hashRow(c)
			if !ok || h != n.lastRowHash() {
				r.next, r.nextOK = h, ok
				n.comma()
				return consumed
			}
			*lx = end // the same row again
		}
		consumed = TokRParen
		c = *lx
		if c.Next().Kind != TokComma {
			return consumed
		}
		*lx = c
		consumed = TokComma
	}
}

func (n *normalizer) comma() {
	n.byte1(',')
	n.last = lComma
	n.fn = false
}

func (n *normalizer) lastRowHash() uint64 {
	r := &n.rows
	if !r.known {
		_, r.hash, r.known = hashRow(r.start)
	}
	return r.hash
}

// hashRow returns the digest of the normalised text of a row from after
// its "(" to its ")", and the lexer after the ")".
func hashRow(lx Lexer) (Lexer, uint64, bool) {
	s := normalizer{h: fnvOffset64, last: lOpen}
	s.rows.off = true
	depth := 0
	for {
		t := lx.Next()
		switch t.Kind {
		case TokEOF, TokSemicolon:
			return lx, 0, false
		case TokLParen:
			depth++
		case TokRParen:
			if depth == 0 {
				return lx, s.h, true
			}
			depth--
		}
		s.token(t, &lx)
	}
}

// list collapses "IN (literal, ...)" to "IN (...)".
func (n *normalizer) list(lx *Lexer) bool {
	c := *lx
	if c.Next().Kind != TokLParen {
		return false
	}
	end, ok := literalItems(c, true)
	if !ok {
		return false
	}
	*lx = end
	n.space()
	n.str("(...)")
	n.last = lValue
	n.fn = false
	return true
}

// literalItems reports whether lx, just after a "(", is at a non-empty,
// comma-separated list of literals and a ")" — or at an already collapsed
// "...)" — and returns the lexer after the ")". A literal is a string,
// number, hex, bit, ?, NULL, TRUE, FALSE or DEFAULT, with optional signs;
// adjacent strings are one literal. If tuples is set, an item may also be
// a parenthesised list of literals: IN ((1, 2), (3, 4)).
func literalItems(lx Lexer, tuples bool) (Lexer, bool) {
	t := lx.Next()
	if t.Kind == TokDot {
		ok := lx.Next().Kind == TokDot && lx.Next().Kind == TokDot && lx.Next().Kind == TokRParen
		return lx, ok
	}
	for {
		for t.Kind == TokOp && t.End-t.Start == 1 && (lx.src[t.Start] == '-' || lx.src[t.Start] == '+') {
			t = lx.Next()
		}
		switch {
		case t.Kind.IsLiteral():
		case t.Kind == TokWord && (t.Keyword == KwNull || t.Keyword == KwTrue || t.Keyword == KwFalse || t.Keyword == KwDefault):
		case t.Kind == TokLParen && tuples:
			end, ok := literalItems(lx, false)
			if !ok {
				return lx, false
			}
			lx = end
		default:
			return lx, false
		}
		t = lx.Next()
		for t.Kind == TokString {
			t = lx.Next()
		}
		switch t.Kind {
		case TokRParen:
			return lx, true
		case TokComma:
			t = lx.Next()
		default:
			return lx, false
		}
	}
}
