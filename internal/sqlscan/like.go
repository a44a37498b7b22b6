package sqlscan

// StringValue is a string literal token's value: its text without the
// quotes, with backslash and doubled-quote escapes undone (the default
// sql_mode's rules).
func StringValue(s []byte) []byte {
	if len(s) < 2 {
		return nil
	}
	quote := s[0]
	body := s[1 : len(s)-1]
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c == '\\' && i+1 < len(body) {
			i++
			out = append(out, body[i])
			continue
		}
		if c == quote && i+1 < len(body) && body[i+1] == quote {
			i++
		}
		out = append(out, c)
	}
	return out
}

// Like reports whether s matches the SQL LIKE pattern pat (% and _, backslash escapes), case-insensitive as
// SHOW DATABASES LIKE is with the default collation.
func Like(s, pat []byte) bool {
	for len(pat) > 0 {
		switch c := pat[0]; {
		case c == '%':
			for len(pat) > 0 && pat[0] == '%' {
				pat = pat[1:]
			}
			if len(pat) == 0 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if Like(s[i:], pat) {
					return true
				}
			}
			return false
		case len(s) == 0:
			return false
		case c == '_':
			s, pat = s[1:], pat[1:]
		default:
			if c == '\\' && len(pat) > 1 {
				pat = pat[1:]
				c = pat[0]
			}
			if lower(s[0]) != lower(c) {
				return false
			}
			s, pat = s[1:], pat[1:]
		}
	}
	return len(s) == 0
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
