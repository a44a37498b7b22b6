package qlog

import (
	"strings"

	"github.com/vigil-db/vigil/internal/sqlscan"
)

// erParseError is ER_PARSE_ERROR, whose message quotes the raw text near
// the error: "... near '<text>' at line N".
const erParseError = 1064

// maskStatement appends the masked text of a statement that ended with
// error code code: with every name hidden too if the server could not
// parse it.
func maskStatement(dst, stmt []byte, code uint16) []byte {
	return sqlscan.Mask(dst, stmt, sqlscan.ParseFailed(code))
}

// nearText is where MariaDB's and MySQL's English syntax error messages
// quote the statement's text from the point of the error.
const nearText = " near '"

// maskMessage returns an error message with what could be a secret
// replaced by "?", as statements are masked: quoted strings ('...' and
// "..."), numbers, and everything after a quote that is never closed
// (the server may cut a quoted value short). Backquoted names stay.
//
// Messages are prose: an apostrophe inside a word (can't, doesn't) opens
// no string, and a quote inside a string closes it only when no letter or
// digit follows (Duplicate entry 'it's' is one string).
//
// A syntax error (code 1064, or any message with " near '") quotes raw
// statement text, quotes and all, without escaping them: the whole quoted
// text, from its opening quote to the last quote of the message that no
// letter or digit follows (or to the end), becomes one "?".
func maskMessage(msg string, code uint16) string {
	dst := make([]byte, 0, len(msg))
	start, end := -1, -1 // the raw statement text
	if i := strings.Index(msg, nearText); i >= 0 {
		start = i + len(nearText) - 1
	} else if code == erParseError {
		start = openingQuote(msg)
	}
	if start >= 0 {
		end = closingFragment(msg, start)
		dst = maskProse(dst, msg[:start])
		dst = append(dst, '?')
		if end == len(msg) {
			return string(dst)
		}
		msg = msg[end:]
	}
	return string(maskProse(dst, msg))
}

// closingFragment returns the index after the quote that closes the raw
// text quoted from s[start]: the last quote of s that no letter or digit
// follows. It returns len(s) if there is none (the message was cut).
func closingFragment(s string, start int) int {
	for j := len(s) - 1; j > start; j-- {
		if (s[j] == '\'' || s[j] == '"') && (j+1 == len(s) || !wordByte(s[j+1])) {
			return j + 1
		}
	}
	return len(s)
}

// maskProse appends s with its strings and numbers masked; see
// maskMessage.
func maskProse(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case (c == '\'' || c == '"') && opens(s, i):
			dst = append(dst, '?')
			j := closingQuote(s, i)
			if j < 0 {
				return dst // the rest may be the secret
			}
			i = j
		case c == '`':
			j := closingBackquote(s, i)
			if j < 0 {
				return append(dst, '?')
			}
			dst = append(dst, s[i:j]...)
			i = j
		case c >= '0' && c <= '9' && opens(s, i):
			j := i + 1
			for j < len(s) && (wordByte(s[j]) || s[j] == '.' && j+1 < len(s) && s[j+1] >= '0' && s[j+1] <= '9') {
				j++
			}
			dst = append(dst, '?')
			i = j
		default:
			dst = append(dst, c)
			i++
		}
	}
	return dst
}

// wordByte reports whether c continues a word: a letter, digit, _, $ or a
// byte of a non-ASCII character.
func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}

// opens reports whether s[i] starts a string or a number: no word goes on
// before it.
func opens(s string, i int) bool { return i == 0 || !wordByte(s[i-1]) }

// openingQuote returns the index of the first quote in s that opens a
// string, or -1.
func openingQuote(s string) int {
	for i := 0; i < len(s); i++ {
		if (s[i] == '\'' || s[i] == '"') && opens(s, i) {
			return i
		}
	}
	return -1
}

// closingQuote returns the index after the quote that closes the string
// opened at s[i], or -1 if none does. A backslash escapes the next byte,
// a doubled quote stands for itself, and a quote followed by a word byte
// is part of the string.
func closingQuote(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			if j+1 == len(s) || !wordByte(s[j+1]) {
				return j + 1
			}
		}
	}
	return -1
}

// closingBackquote returns the index after the backquote that closes the
// name opened at s[i], or -1.
func closingBackquote(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		if s[j] == '`' {
			if j+1 < len(s) && s[j+1] == '`' {
				j++
				continue
			}
			return j + 1
		}
	}
	return -1
}
