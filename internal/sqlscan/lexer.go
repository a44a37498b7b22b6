package sqlscan

import "bytes"

// TokenKind is the lexical category of a [Token].
type TokenKind uint8

// Token kinds.
const (
	TokEOF         TokenKind = iota // end of input
	TokWord                         // identifier or keyword; Token.Keyword says which keyword, if any
	TokQuotedIdent                  // `identifier`
	TokString                       // 'text', "text", N'text', _charset'text'
	TokNumber                       // 12, 1.5, .5, 1e-3
	TokHex                          // X'0A', 0x0A, _charset X'0A'
	TokBit                          // B'01', 0b01
	TokPlaceholder                  // ?
	TokUserVar                      // @name, @'name'
	TokSysVar                       // @@name, @@global.name
	TokLParen                       // (
	TokRParen                       // )
	TokComma                        // ,
	TokDot                          // .
	TokSemicolon                    // ;
	TokOp                           // any other operator or punctuation: = <=> := -> ...
	TokComment                      // a comment; only returned when Lexer.KeepComments is set
)

var tokenKindNames = [...]string{
	TokEOF:         "EOF",
	TokWord:        "Word",
	TokQuotedIdent: "QuotedIdent",
	TokString:      "String",
	TokNumber:      "Number",
	TokHex:         "Hex",
	TokBit:         "Bit",
	TokPlaceholder: "Placeholder",
	TokUserVar:     "UserVar",
	TokSysVar:      "SysVar",
	TokLParen:      "LParen",
	TokRParen:      "RParen",
	TokComma:       "Comma",
	TokDot:         "Dot",
	TokSemicolon:   "Semicolon",
	TokOp:          "Op",
	TokComment:     "Comment",
}

func (k TokenKind) String() string {
	if int(k) < len(tokenKindNames) {
		return tokenKindNames[k]
	}
	return "TokenKind(?)"
}

// IsLiteral reports whether the kind is a literal value (string, number,
// hex, bit) or a ? placeholder — what normalisation replaces with "?".
func (k TokenKind) IsLiteral() bool {
	return k >= TokString && k <= TokPlaceholder
}

// Token is one lexical token. Its text is src[Start:End] (see [Token.Text]);
// for a token inside an executable comment the offsets still point into the
// original input.
//
// Token has four fields on purpose: the compiler keeps a struct of at most
// four fields in registers, and the scan loop is measurably faster for it.
type Token struct {
	Kind TokenKind
	// Keyword is the keyword a TokWord spells, case-insensitively, or 0.
	Keyword    Keyword
	Start, End int
}

// Text returns the token's bytes in src, the input it was lexed from.
func (t Token) Text(src []byte) []byte { return src[t.Start:t.End] }

// Unterminated reports whether t, lexed from src, is a string, quoted
// identifier, quoted user variable, X'..'/B'..' literal or comment that
// runs to the end of the input without its closing quote or "*/".
func (t Token) Unterminated(src []byte) bool {
	if t.End != len(src) || t.Start >= t.End {
		return false // only the last token can be unterminated
	}
	switch t.Kind {
	case TokString, TokQuotedIdent, TokUserVar, TokHex, TokBit, TokComment:
		lx := Lexer{src: src, pos: t.Start, KeepComments: true}
		u := lx.Next()
		return lx.unterminated && u.End == t.End
	}
	return false
}

// Lexer splits MySQL/MariaDB SQL text into tokens. It assumes the default
// sql_mode: backslash escapes in strings (no NO_BACKSLASH_ESCAPES) and "..."
// as a string (no ANSI_QUOTES).
//
// Comments are skipped. The contents of executable comments (/*! ... */,
// /*!50001 ... */, /*M! ... */, /*M!100101 ... */) are lexed as code, because
// the server executes them; optimizer hints (/*+ ... */) are comments.
// Unterminated strings and comments run to the end of the input.
//
// The zero Lexer is empty; a Lexer is a small value and may be copied to look
// ahead.
type Lexer struct {
	src    []byte
	pos    int
	inExec bool // inside an executable comment: "*/" closes it
	// unterminated: the last token ran to the end of the input unclosed.
	unterminated bool
	// KeepComments makes Next return comments as TokComment tokens instead
	// of skipping them. The markers of executable comments are never tokens.
	KeepComments bool
}

// NewLexer returns a Lexer over src.
func NewLexer(src []byte) Lexer { return Lexer{src: src} }

// Src returns the input.
func (l *Lexer) Src() []byte { return l.src }

// Pos returns the offset at which the next token will be looked for.
func (l *Lexer) Pos() int { return l.pos }

// Character classes.
const (
	ccOther uint8 = iota
	ccSpace
	ccIdent // starts and continues an identifier
	ccDigit // continues an identifier, starts a number
)

var charClass = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		switch {
		case c == ' ', c == '\t', c == '\n', c == '\r', c == '\f', c == '\v':
			t[c] = ccSpace
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == '$', c >= 0x80:
			t[c] = ccIdent
		case c >= '0' && c <= '9':
			t[c] = ccDigit
		}
	}
	return t
}()

func isIdentByte(c byte) bool { return charClass[c] >= ccIdent }
func isDigit(c byte) bool     { return c >= '0' && c <= '9' }
func isHexDigit(c byte) bool {
	return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f')
}

// Next returns the next token, or a TokEOF token at the end of the input.
func (l *Lexer) Next() Token {
	src := l.src
	n := len(src)
	for l.pos < n {
		start := l.pos
		c := src[start]
		switch charClass[c] {
		case ccSpace:
			l.pos++
			continue
		case ccIdent:
			return l.word(start)
		case ccDigit:
			return l.number(start)
		}
		switch c {
		case '\'', '"':
			return l.quoted(start, start, TokString)
		case '`':
			return l.quoted(start, start, TokQuotedIdent)
		case '(':
			return l.punct(start, 1, TokLParen)
		case ')':
			return l.punct(start, 1, TokRParen)
		case ',':
			return l.punct(start, 1, TokComma)
		case ';':
			return l.punct(start, 1, TokSemicolon)
		case '?':
			return l.punct(start, 1, TokPlaceholder)
		case '.':
			if start+1 < n && isDigit(src[start+1]) && (start == 0 || !(isIdentByte(src[start-1]) || src[start-1] == '`')) {
				return l.fraction(start, start)
			}
			return l.punct(start, 1, TokDot)
		case '@':
			return l.variable(start)
		case '#':
			if t, ok := l.lineComment(start); ok {
				return t
			}
			continue
		case '-':
			if start+1 < n && src[start+1] == '-' && (start+2 == n || src[start+2] <= ' ') {
				if t, ok := l.lineComment(start); ok {
					return t
				}
				continue
			}
			if start+1 < n && src[start+1] == '>' {
				if start+2 < n && src[start+2] == '>' {
					return l.punct(start, 3, TokOp) // ->>
				}
				return l.punct(start, 2, TokOp) // ->
			}
		case '/':
			if start+1 < n && src[start+1] == '*' {
				if start+2 < n && src[start+2] == '!' {
					l.pos = skipVersion(src, start+3)
					l.inExec = true
					continue
				}
				if start+3 < n && src[start+2] == 'M' && src[start+3] == '!' {
					l.pos = skipVersion(src, start+4)
					l.inExec = true
					continue
				}
				if t, ok := l.blockComment(start); ok {
					return t
				}
				continue
			}
		case '*':
			if l.inExec && start+1 < n && src[start+1] == '/' {
				l.pos = start + 2
				l.inExec = false
				continue
			}
		case ':':
			if start+1 < n && src[start+1] == '=' {
				return l.punct(start, 2, TokOp)
			}
		case '<':
			if start+2 < n && src[start+1] == '=' && src[start+2] == '>' {
				return l.punct(start, 3, TokOp) // <=>
			}
			if start+1 < n && (src[start+1] == '=' || src[start+1] == '>' || src[start+1] == '<') {
				return l.punct(start, 2, TokOp)
			}
		case '>':
			if start+1 < n && (src[start+1] == '=' || src[start+1] == '>') {
				return l.punct(start, 2, TokOp)
			}
		case '!':
			if start+1 < n && src[start+1] == '=' {
				return l.punct(start, 2, TokOp)
			}
		case '&':
			if start+1 < n && src[start+1] == '&' {
				return l.punct(start, 2, TokOp)
			}
		case '|':
			if start+1 < n && src[start+1] == '|' {
				return l.punct(start, 2, TokOp)
			}
		}
		return l.punct(start, 1, TokOp)
	}
	return Token{Kind: TokEOF, Start: n, End: n}
}

func (l *Lexer) punct(start, size int, kind TokenKind) Token {
	l.pos = start + size
	return Token{Kind: kind, Start: start, End: start + size}
}

// skipVersion skips the optional server version after "/*!" or "/*M!".
func skipVersion(src []byte, i int) int {
	for j := 0; j < 6 && i < len(src) && isDigit(src[i]); j++ {
		i++
	}
	return i
}

// lineComment skips a "#" or "-- " comment up to the end of the line.
func (l *Lexer) lineComment(start int) (Token, bool) {
	end := len(l.src)
	if i := bytes.IndexByte(l.src[start:], '\n'); i >= 0 {
		end = start + i
	}
	l.pos = end
	return Token{Kind: TokComment, Start: start, End: end}, l.KeepComments
}

// blockComment skips a "/* ... */" comment (including optimizer hints).
func (l *Lexer) blockComment(start int) (Token, bool) {
	src := l.src
	i := start + 2
	for {
		j := bytes.IndexByte(src[i:], '*')
		if j < 0 {
			l.pos = len(src)
			l.unterminated = true
			return Token{Kind: TokComment, Start: start, End: len(src)}, l.KeepComments
		}
		i += j + 1
		if i < len(src) && src[i] == '/' {
			l.pos = i + 1
			return Token{Kind: TokComment, Start: start, End: i + 1}, l.KeepComments
		}
	}
}

// quoted lexes a string, quoted identifier or quoted user variable whose
// opening quote is at q (the token may start earlier, at an introducer).
// A doubled quote stands for itself; backslash escapes the next byte
// except in backquoted identifiers.
func (l *Lexer) quoted(start, q int, kind TokenKind) Token {
	src := l.src
	quote := src[q]
	i := q + 1
	for {
		j := bytes.IndexByte(src[i:], quote)
		if j < 0 {
			l.pos = len(src)
			l.unterminated = true
			return Token{Kind: kind, Start: start, End: len(src)}
		}
		end := i + j // a quote, unless a backslash escapes it
		if quote != '`' {
			for i < end {
				k := bytes.IndexByte(src[i:end], '\\')
				if k < 0 {
					i = end
					break
				}
				i += k + 2 // skip the escaped byte
			}
			if i > end {
				continue // the quote was escaped
			}
		}
		if end+1 < len(src) && src[end+1] == quote {
			i = end + 2 // a doubled quote
			continue
		}
		l.pos = end + 1
		return Token{Kind: kind, Start: start, End: end + 1}
	}
}

// hexOrBitString lexes X'...' or B'...' whose quote is at q.
func (l *Lexer) hexOrBitString(start, q int, kind TokenKind) Token {
	src := l.src
	if i := bytes.IndexByte(src[q+1:], '\''); i >= 0 {
		l.pos = q + 1 + i + 1
		return Token{Kind: kind, Start: start, End: l.pos}
	}
	l.pos = len(src)
	l.unterminated = true
	return Token{Kind: kind, Start: start, End: len(src)}
}

func (l *Lexer) word(start int) Token {
	src := l.src
	n := len(src)
	c := src[start]
	if start+1 < n && src[start+1] == '\'' {
		switch c | 0x20 {
		case 'n':
			return l.quoted(start, start+1, TokString)
		case 'x':
			return l.hexOrBitString(start, start+1, TokHex)
		case 'b':
			return l.hexOrBitString(start, start+1, TokBit)
		}
	}
	i := start + 1
	for i < n && isIdentByte(src[i]) {
		i++
	}
	l.pos = i
	if c == '_' && i-start > 1 && isCharset(src[start+1:i]) {
		// A character set introducer belongs to the literal after it.
		j := i
		for j < n && charClass[src[j]] == ccSpace {
			j++
		}
		if j < n {
			switch src[j] {
			case '\'', '"':
				return l.quoted(start, j, TokString)
			case 'x', 'X':
				if j+1 < n && src[j+1] == '\'' {
					return l.hexOrBitString(start, j+1, TokHex)
				}
			case 'b', 'B':
				if j+1 < n && src[j+1] == '\'' {
					return l.hexOrBitString(start, j+1, TokBit)
				}
			}
		}
	}
	return Token{Kind: TokWord, Keyword: LookupKeyword(src[start:i]), Start: start, End: i}
}

// identFrom lexes an identifier that starts with a digit (123abc, 0xZZ).
func (l *Lexer) identFrom(start int) Token {
	i := start
	for i < len(l.src) && isIdentByte(l.src[i]) {
		i++
	}
	l.pos = i
	return Token{Kind: TokWord, Start: start, End: i}
}

func (l *Lexer) number(start int) Token {
	src := l.src
	n := len(src)
	if src[start] == '0' && start+1 < n {
		switch src[start+1] { // 0X and 0B are identifiers: the prefixes are case-sensitive
		case 'x':
			j := start + 2
			for j < n && isHexDigit(src[j]) {
				j++
			}
			if j > start+2 && (j == n || !isIdentByte(src[j])) {
				l.pos = j
				return Token{Kind: TokHex, Start: start, End: j}
			}
			return l.identFrom(start)
		case 'b':
			j := start + 2
			for j < n && (src[j] == '0' || src[j] == '1') {
				j++
			}
			if j > start+2 && (j == n || !isIdentByte(src[j])) {
				l.pos = j
				return Token{Kind: TokBit, Start: start, End: j}
			}
			return l.identFrom(start)
		}
	}
	j := start
	for j < n && isDigit(src[j]) {
		j++
	}
	if j < n && src[j] == '.' {
		return l.fraction(start, j)
	}
	if e := exponent(src, j); e > j {
		l.pos = e
		return Token{Kind: TokNumber, Start: start, End: e}
	}
	if j < n && isIdentByte(src[j]) {
		return l.identFrom(start) // 123abc is an identifier
	}
	l.pos = j
	return Token{Kind: TokNumber, Start: start, End: j}
}

// fraction lexes the rest of a number from its decimal point at dot.
func (l *Lexer) fraction(start, dot int) Token {
	src := l.src
	j := dot + 1
	for j < len(src) && isDigit(src[j]) {
		j++
	}
	j = exponent(src, j)
	l.pos = j
	return Token{Kind: TokNumber, Start: start, End: j}
}

// exponent returns the end of an exponent ("e5", "E-3") at i, or i.
func exponent(src []byte, i int) int {
	if i >= len(src) || src[i]|0x20 != 'e' {
		return i
	}
	k := i + 1
	if k < len(src) && (src[k] == '+' || src[k] == '-') {
		k++
	}
	if k >= len(src) || !isDigit(src[k]) {
		return i
	}
	for k < len(src) && isDigit(src[k]) {
		k++
	}
	return k
}

// variable lexes @name, @'name', @`name`, @@name and @@scope.name.
func (l *Lexer) variable(start int) Token {
	src := l.src
	n := len(src)
	kind := TokUserVar
	i := start + 1
	if i < n && src[i] == '@' {
		kind = TokSysVar
		i++
	} else if i < n && (src[i] == '\'' || src[i] == '"' || src[i] == '`') {
		return l.quoted(start, i, TokUserVar)
	}
	if i < n && isIdentByte(src[i]) {
		for i < n && (isIdentByte(src[i]) || src[i] == '.') {
			i++
		}
	}
	if i == start+1 {
		return l.punct(start, 1, TokOp) // a lone '@'
	}
	l.pos = i
	return Token{Kind: kind, Start: start, End: i}
}

// isCharset reports whether name (after the '_' of an introducer) is a
// MySQL/MariaDB character set.
func isCharset(name []byte) bool {
	if len(name) > 8 {
		return false
	}
	var buf [8]byte
	for i, c := range name {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	switch string(buf[:len(name)]) {
	case "armscii8", "ascii", "big5", "binary", "cp1250", "cp1251", "cp1256", "cp1257",
		"cp850", "cp852", "cp866", "cp932", "dec8", "eucjpms", "euckr", "gb18030", "gb2312",
		"gbk", "geostd8", "greek", "hebrew", "hp8", "keybcs2", "koi8r", "koi8u", "latin1",
		"latin2", "latin5", "latin7", "macce", "macroman", "sjis", "swe7", "tis620", "ucs2",
		"ujis", "utf16", "utf16le", "utf32", "utf8", "utf8mb3", "utf8mb4":
		return true
	}
	return false
}
