package sqlscan

// Normalize appends the normalised text of q to dst and returns it; dst
// must not overlap q. The digest of the result ([DigestText]) equals
// Scan(q).Digest. With a dst of enough capacity it does not allocate. See
// the package documentation for the rules.
func Normalize(dst, q []byte) []byte {
	n := normalizer{keep: true, out: dst}
	run(q, &n, nil)
	return n.out
}

// last describes the last token written, for spacing and signs.
type last uint8

const (
	lStart   last = iota // nothing yet, or just after "; "
	lOpen                // (
	lDot                 // .
	lComma               // ,
	lOp                  // an operator
	lKeyword             // a keyword
	lValue               // an identifier, variable, literal, value keyword or )
	lString              // a string literal: a string right after it is concatenated
)

// normalizer writes normalised text token by token, either appending it to
// out (Normalize) or only hashing it (Scan), so that Scan never allocates
// and both see exactly the same bytes.
type normalizer struct {
	keep bool
	out  []byte
	h    uint64
	size int
	last last
	fn   bool // the last token was a function keyword: no space before "("
	semi bool // a ';' is pending until another token follows
	// afterVar: the last token was a variable, whose name may contain dots
	afterVar bool
	rows     rowList
	// Mask's options: open writes a quoted identifier or user variable
	// left open at the end as "?"; names writes every identifier and user
	// variable as "?".
	open, names bool
}

// hide reports whether Mask writes t, an identifier or user variable, as
// "?".
func (n *normalizer) hide(t Token, src []byte) bool {
	return n.names || n.open && t.Unterminated(src)
}

func (n *normalizer) byte1(c byte) {
	n.size++
	if n.keep {
		n.out = append(n.out, c)
		return
	}
	n.h = (n.h ^ uint64(c)) * fnvPrime64
}

func (n *normalizer) bytes(b []byte) {
	n.size += len(b)
	if n.keep {
		n.out = append(n.out, b...)
		return
	}
	h := n.h
	for _, c := range b {
		h = (h ^ uint64(c)) * fnvPrime64
	}
	n.h = h
}

func (n *normalizer) str(s string) {
	n.size += len(s)
	if n.keep {
		n.out = append(n.out, s...)
		return
	}
	h := n.h
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime64
	}
	n.h = h
}

func (n *normalizer) lower(b []byte) {
	for _, c := range b {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		n.byte1(c)
	}
}

// space writes the separator before a token, unless it follows "(", "."
// or the start.
func (n *normalizer) space() {
	if n.last > lDot {
		n.byte1(' ')
	}
}

// token writes t. It may consume more tokens from lx (a collapsed list, or
// the number after a unary sign); it then returns the kind of the last
// token consumed, else TokEOF.
func (n *normalizer) token(t Token, lx *Lexer) TokenKind {
	src := lx.src
	switch t.Kind {
	case TokSemicolon:
		if n.size > 0 {
			n.semi = true
		}
		n.rows.active = false
		return TokEOF
	case TokComment:
		return TokEOF
	}
	if n.rows.active && n.rows.track(t, lx) {
		return n.moreRows(lx)
	}
	if n.semi {
		n.semi = false
		n.byte1(';')
		n.byte1(' ')
		n.last = lStart
		n.fn = false
	}
	fn := false
	afterVar := n.afterVar
	n.afterVar = t.Kind == TokUserVar || t.Kind == TokSysVar
	switch t.Kind {
	case TokWord:
		n.space()
		k := t.Keyword
		a := k.attr()
		if k == kwNone || a&attrIdent != 0 {
			if w := src[t.Start:t.End]; n.names {
				n.byte1('?')
			} else if isDigit(w[0]) {
				// 123abc: quoted, as `123abc` is, so that ".123abc"
				// cannot lex as a number
				n.byte1('`')
				n.bytes(w)
				n.byte1('`')
			} else {
				n.bytes(w)
			}
			n.last = lValue
		} else {
			n.str(k.String())
			n.last = lKeyword
			if a&attrValue != 0 {
				n.last = lValue
			}
			fn = a&attrFunc != 0
		}
		switch k {
		case KwIn:
			if n.list(lx) {
				return TokRParen
			}
		case KwValues, KwValue:
			if !n.rows.active && !n.rows.off {
				n.rows = rowList{active: true}
			}
			if n.firstRows(lx) {
				return TokRParen
			}
		}
	case TokQuotedIdent:
		n.space()
		if n.hide(t, src) {
			n.byte1('?')
		} else if !t.Unterminated(src) && plainIdent(src[t.Start+1:t.End-1]) {
			n.bytes(src[t.Start+1 : t.End-1])
		} else {
			n.bytes(src[t.Start:t.End])
		}
		n.last = lValue
	case TokString:
		if n.last == lString {
			break // 'a' 'b' is one string
		}
		n.space()
		n.byte1('?')
		n.last = lString
	case TokNumber, TokHex, TokBit, TokPlaceholder:
		n.space()
		n.byte1('?')
		n.last = lValue
	case TokUserVar:
		n.space()
		if n.hide(t, src) {
			n.byte1('?')
		} else if t.End-t.Start > 1 && isIdentByte(src[t.Start+1]) {
			n.lower(src[t.Start:t.End])
		} else {
			n.bytes(src[t.Start:t.End]) // @'quoted'
		}
		n.last = lValue
	case TokSysVar:
		n.space()
		n.lower(src[t.Start:t.End])
		n.last = lValue
	case TokLParen:
		if !n.fn {
			n.space()
		}
		n.byte1('(')
		n.last = lOpen
	case TokRParen:
		n.byte1(')')
		n.last = lValue
	case TokComma:
		n.byte1(',')
		n.last = lComma
	case TokDot:
		if afterVar {
			n.byte1(' ') // "@a.b" would lex as one variable
		}
		n.byte1('.')
		n.last = lDot
	default: // TokOp
		op := src[t.Start:t.End]
		if len(op) == 1 && (op[0] == '-' || op[0] == '+') && n.last <= lKeyword {
			// A unary sign before a number is part of the literal.
			peek := *lx
			if peek.Next().Kind == TokNumber {
				*lx = peek
				n.space()
				n.byte1('?')
				n.last = lValue
				n.fn = false
				return TokNumber
			}
		}
		n.space()
		n.bytes(op)
		n.last = lOp
	}
	n.fn = fn
	return TokEOF
}

// plainIdent reports whether a backquoted identifier can be written
// without its backquotes and still lex as the same identifier.
func plainIdent(b []byte) bool {
	if len(b) == 0 || charClass[b[0]] != ccIdent {
		return false
	}
	for _, c := range b[1:] {
		if !isIdentByte(c) {
			return false
		}
	}
	k := LookupKeyword(b)
	return k == kwNone || k.attr()&attrIdent != 0
}
