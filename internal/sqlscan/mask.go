package sqlscan

// Mask appends to dst the text of q with nothing left that could be a
// secret (a password in IDENTIFIED BY '...', PASSWORD('...'),
// MASTER_PASSWORD = '...' or anywhere else), for logs and listings. dst
// must not overlap q.
//
// It is the normalised text of [Normalize], with two differences. A quoted
// identifier or quoted user variable left open at the end of the text
// (`... or @'... with no closing quote) runs to the end, so it may hold
// whatever follows it: it is written "?", as an unterminated string is.
// And when names is set, every identifier, quoted identifier and user
// variable is written "?" too: set it for text the server could not parse
// (a syntax error), where a misplaced quote can make a password lex as an
// identifier ('app'@'% IDENTIFIED BY 'secret' has secret outside any
// string). Keywords, operators and punctuation stay.
//
// The digest of the result is not the statement's digest when Mask wrote
// anything differently from Normalize.
func Mask(dst, q []byte, names bool) []byte {
	n := normalizer{keep: true, out: dst, open: true, names: names}
	run(q, &n, nil)
	return n.out
}

// ParseFailed reports whether a server's error code says that it could not
// parse the statement (ER_PARSE_ERROR 1064, ER_SYNTAX_ERROR 1149): then
// Mask its text with names set.
func ParseFailed(code uint16) bool { return code == 1064 || code == 1149 }
