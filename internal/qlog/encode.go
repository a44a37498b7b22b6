package qlog

import (
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// The encoder appends JSON by hand: the writer goroutine encodes every
// entry, and encoding/json's reflection would cost more than the rest of
// the pipeline together.

const timeLayout = "2006-01-02T15:04:05.000000Z"

// appendEntry appends the JSON line of e, ending in '\n', to dst. stmt is
// the statement text to write (already masked when masking is on);
// e.Statement is not used.
func appendEntry(dst []byte, e *Entry, stmt []byte, truncated bool) []byte {
	dst = append(dst, `{"time":"`...)
	dst = e.Time.UTC().AppendFormat(dst, timeLayout)
	dst = append(dst, `","type":"`...)
	dst = append(dst, e.Kind.String()...)
	dst = append(dst, `","session":`...)
	dst = strconv.AppendUint(dst, uint64(e.Session), 10)
	dst = appendField(dst, "cluster", e.Cluster)
	dst = appendField(dst, "user", e.User)
	dst = appendField(dst, "client", e.Client)
	if e.Kind == KindAuth {
		if e.Schema != "" {
			dst = appendField(dst, "schema", e.Schema)
		}
		dst = append(dst, `,"success":`...)
		dst = strconv.AppendBool(dst, e.Success)
		dst = append(dst, `,"error":`...)
		dst = strconv.AppendUint(dst, uint64(e.ErrCode), 10)
		if e.Message != "" {
			dst = appendField(dst, "message", e.Message)
		}
		return append(dst, "}\n"...)
	}
	dst = appendField(dst, "schema", e.Schema)
	if e.Digest != 0 {
		dst = append(dst, `,"digest":"`...)
		dst = appendHex16(dst, e.Digest)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"statement":`...)
	dst = appendString(dst, unsafe.String(unsafe.SliceData(stmt), len(stmt)))
	dst = appendField(dst, "server", e.Server)
	dst = append(dst, `,"duration_us":`...)
	dst = strconv.AppendInt(dst, e.Duration.Microseconds(), 10)
	dst = append(dst, `,"rows":`...)
	dst = strconv.AppendInt(dst, e.Rows, 10)
	dst = append(dst, `,"error":`...)
	dst = strconv.AppendUint(dst, uint64(e.ErrCode), 10)
	if e.Message != "" {
		dst = appendField(dst, "message", e.Message)
	}
	if e.Refused {
		dst = append(dst, `,"refused_by":"vigil"`...)
	}
	if e.Rule != "" {
		dst = appendField(dst, "rule", e.Rule)
	}
	if e.Cached {
		dst = append(dst, `,"cached":true`...)
	}
	if truncated {
		dst = append(dst, `,"truncated":true`...)
	}
	return append(dst, "}\n"...)
}

// appendField appends ,"name":"value"; name needs no escaping.
func appendField(dst []byte, name, value string) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return appendString(dst, value)
}

const hexDigits = "0123456789abcdef"

func appendHex16(dst []byte, v uint64) []byte {
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = hexDigits[v&0xf]
		v >>= 4
	}
	return append(dst, b[:]...)
}

// plain[c] is true for the ASCII bytes written as they are inside a JSON
// string.
var plain = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendString appends s as a quoted JSON string. Control characters are
// escaped, invalid UTF-8 becomes \ufffd, and U+2028 and U+2029 are escaped
// (as encoding/json does) so that a line is also valid JavaScript.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plain[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\u202`...)
			dst = append(dst, hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
