package sqlscan

import (
	"bytes"
	"testing"
)

func TestMask(t *testing.T) {
	for _, tt := range []struct {
		q     string
		names bool
		want  string
	}{
		{"ALTER USER 'app'@'%' IDENTIFIED BY 'Sekr1t'", false, "ALTER USER ? @'%' IDENTIFIED BY ?"},
		{"CREATE USER `app IDENTIFIED BY 'Sekr1t'", false, "CREATE USER ?"},
		{"SET @'x = PASSWORD(Sekr1t)", false, "SET ?"},
		{"SET @\"x = PASSWORD(Sekr1t)", false, "SET ?"},
		{"SET @`x = PASSWORD(Sekr1t)", false, "SET ?"},
		{"SELECT `a`, `a b`, @'c'", false, "SELECT a, `a b`, @'c'"},
		// after a syntax error: no names at all
		{"CREATE USER 'app'@'% IDENTIFIED BY 'Sekr1t'", true, "CREATE USER ? ? ? ?"},
		{"ALTER USR `app`@localhost IDENTIFIED BY Sekr1t", true, "ALTER ? ? ? IDENTIFIED BY ?"},
		{"SELECT id, status, @v, @@sql_mode, f(1), 1abc FROM db.t", true, "SELECT ?, ?, ?, @@sql_mode, ? (?), ? FROM ?.?"},
	} {
		if got := string(Mask(nil, []byte(tt.q), tt.names)); got != tt.want {
			t.Errorf("Mask(%q, %v)\n got %q\nwant %q", tt.q, tt.names, got, tt.want)
		}
	}
}

// Mask writes what Normalize writes, except for names.
func TestMaskIsNormalize(t *testing.T) {
	for _, tt := range normalizeTests {
		if tt.q == "SELECT `abc" {
			continue
		}
		if got := Mask(nil, []byte(tt.q), false); !bytes.Equal(got, Normalize(nil, []byte(tt.q))) {
			t.Errorf("Mask(%q) = %q, Normalize = %q", tt.q, got, tt.want)
		}
	}
}

// FuzzMask checks that Mask leaves no literal and no name: its text lexes
// to keywords, operators, punctuation, system variables and "?" only.
func FuzzMask(f *testing.F) {
	for _, tt := range normalizeTests {
		f.Add(tt.q)
	}
	for _, q := range []string{
		"ALTER USER 'a'@'% IDENTIFIED BY 'x'", "CREATE USER `a IDENTIFIED BY 'x'", "SET @'a = 1",
		"SELECT /*!50000 `a */ 1", "SELECT _utf8mb4'x' N'y' X'0A' @`v`",
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		out := Mask(nil, []byte(q), true)
		lx := NewLexer(out)
		lx.KeepComments = true
		for tok := lx.Next(); tok.Kind != TokEOF; tok = lx.Next() {
			switch tok.Kind {
			case TokString, TokNumber, TokHex, TokBit, TokQuotedIdent, TokUserVar, TokComment:
				t.Fatalf("Mask(%q) = %q: %s %q", q, out, tok.Kind, tok.Text(out))
			case TokWord:
				if k := tok.Keyword; k == kwNone || k.attr()&attrIdent != 0 {
					t.Fatalf("Mask(%q) = %q: name %q", q, out, tok.Text(out))
				}
			}
		}
		// Without names, an unterminated name is gone too.
		out = Mask(nil, []byte(q), false)
		lx = NewLexer(out)
		var last Token
		for tok := lx.Next(); tok.Kind != TokEOF; tok = lx.Next() {
			last = tok
		}
		if (last.Kind == TokQuotedIdent || last.Kind == TokUserVar) && last.Unterminated(out) {
			t.Fatalf("Mask(%q) = %q ends in an unterminated %s", q, out, last.Kind)
		}
	})
}
