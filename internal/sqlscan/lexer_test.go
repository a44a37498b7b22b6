package sqlscan

import (
	"fmt"
	"strings"
	"testing"
)

// lexAll renders the tokens of q as "Kind:text" (and "Keyword" for keywords).
func lexAll(q string, keepComments bool) string {
	lx := NewLexer([]byte(q))
	lx.KeepComments = keepComments
	var out []string
	for i := 0; i < 1000; i++ {
		t := lx.Next()
		if t.Kind == TokEOF {
			break
		}
		s := fmt.Sprintf("%v:%s", t.Kind, t.Text(lx.Src()))
		if t.Keyword != 0 {
			s += "/" + t.Keyword.String()
		}
		if t.Unterminated(lx.Src()) {
			s += "!"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func TestLexer(t *testing.T) {
	tests := []struct{ q, want string }{
		{"select a from t", "Word:select/SELECT Word:a Word:from/FROM Word:t"},
		{"x1 _a $b é", "Word:x1 Word:_a Word:$b Word:é"},
		{"'a''b' 'c\\'d' \"e\"\"f\"", "String:'a''b' String:'c\\'d' String:\"e\"\"f\""},
		{"N'x' n'y' _utf8mb4'z' _latin1 \"w\" _BINARY'v'", "String:N'x' String:n'y' String:_utf8mb4'z' String:_latin1 \"w\" String:_BINARY'v'"},
		{"_notacharset'x' _id 'alias'", "Word:_notacharset String:'x' Word:_id String:'alias'"},
		{"X'0A' x'0a' 0x0A 0XFF B'01' b'1' 0b101", "Hex:X'0A' Hex:x'0a' Hex:0x0A Word:0XFF Bit:B'01' Bit:b'1' Bit:0b101"},
		{"0xZZ 0x 0b2", "Word:0xZZ Word:0x Word:0b2"},
		{"_utf8mb4 X'41' _binary b'1'", "Hex:_utf8mb4 X'41' Bit:_binary b'1'"},
		{"1 12.5 .5 1. 1e10 1.5e-3 1E+2 123abc 1e 1ea", "Number:1 Number:12.5 Number:.5 Number:1. Number:1e10 Number:1.5e-3 Number:1E+2 Word:123abc Word:1e Word:1ea"},
		{"t.5 t1.c `t`.5", "Word:t Dot:. Number:5 Word:t1 Dot:. Word:c QuotedIdent:`t` Dot:. Number:5"},
		{"`a``b` `select`", "QuotedIdent:`a``b` QuotedIdent:`select`"},
		{"? @x @x.y$ @'q' @`b` @\"d\" @@x @@global.y @ @@", "Placeholder:? UserVar:@x UserVar:@x.y$ UserVar:@'q' UserVar:@`b` UserVar:@\"d\" SysVar:@@x SysVar:@@global.y Op:@ SysVar:@@"},
		{"a:=b<=>c<=d>=e<>f!=g<<h>>i&&j||k->l->>m", "Word:a Op::= Word:b Op:<=> Word:c Op:<= Word:d Op:>= Word:e Op:<> Word:f Op:!= Word:g Op:<< Word:h Op:>> Word:i Op:&& Word:j Op:|| Word:k Op:-> Word:l Op:->> Word:m"},
		{"( ) , ; . + - * / % ^ ~ ! = < > : & | { } \\", "LParen:( RParen:) Comma:, Semicolon:; Dot:. Op:+ Op:- Op:* Op:/ Op:% Op:^ Op:~ Op:! Op:= Op:< Op:> Op:: Op:& Op:| Op:{ Op:} Op:\\"},
		{"a -- c\nb #d\nc /* e */ d -- ", "Word:a Word:b Word:c Word:d"},
		{"a--b a-- b", "Word:a Op:- Op:- Word:b Word:a"},
		{"a /*+ hint */ b /*!x*/ /*!50001 y */ /*M!z*/ /*M!100101 w */", "Word:a Word:b Word:x Word:y Word:z Word:w"},
		{"/*!40101 SET /* inner */ a=1 */ b", "Word:SET/SET Word:a Op:= Number:1 Word:b"},
		{"2*/3", "Number:2 Op:* Op:/ Number:3"},
		{"'abc", "String:'abc!"},
		{"`abc", "QuotedIdent:`abc!"},
		{"x'0A", "Hex:x'0A!"},
		{"'a\\", "String:'a\\!"},
		{"a /* b", "Word:a"},
		{"/*!50001 a", "Word:a"},
	}
	for _, tt := range tests {
		if got := lexAll(tt.q, false); got != tt.want {
			t.Errorf("lex %q\n got %s\nwant %s", tt.q, got, tt.want)
		}
	}
}

func TestLexerKeepComments(t *testing.T) {
	got := lexAll("a -- c\nb # d\n/* e */ /*! f */ /* g", true)
	want := "Word:a Comment:-- c Word:b Comment:# d Comment:/* e */ Word:f Comment:/* g!"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestKeywords(t *testing.T) {
	seen := map[string]Keyword{}
	for k := Keyword(1); int(k) < len(keywords.names); k++ {
		name := k.String()
		if name == "" || strings.ToUpper(name) != name || len(name) > maxKeywordLen {
			t.Errorf("bad keyword name %q", name)
		}
		if prev, ok := seen[name]; ok {
			t.Errorf("keyword %q twice (%d and %d)", name, prev, k)
		}
		seen[name] = k
		if got := LookupKeyword([]byte(strings.ToLower(name))); got != k {
			t.Errorf("LookupKeyword(%q) = %v, want %d", strings.ToLower(name), got, k)
		}
	}
	for _, w := range []string{"sbtest1", "c", "k", "pad", "x", "selectx", "", "a_very_long_identifier_that_is_not_a_keyword"} {
		if k := LookupKeyword([]byte(w)); k != 0 {
			t.Errorf("LookupKeyword(%q) = %v", w, k)
		}
	}
	if !LookupKeyword([]byte("count")).IsFunction() || LookupKeyword([]byte("from")).IsFunction() {
		t.Error("IsFunction")
	}
}

func TestUnterminated(t *testing.T) {
	tests := []struct {
		q    string
		want bool
	}{
		{"'abc'", false},
		{"'abc", true},
		{"'abc\\'", true},
		{"'abc\\\\'", false},
		{"'it''", true},
		{"`a`", false},
		{"`a", true},
		{"@'x", true},
		{"x'0A", true},
		{"_utf8mb4 'a", true},
		{"/* c", true},
		{"/* c */", false},
		{"/*! 'a */", true},
		{"0x0A", false},
		{"abc", false},
	}
	for _, tt := range tests {
		src := []byte(tt.q)
		lx := NewLexer(src)
		lx.KeepComments = true
		var last Token
		for tok := lx.Next(); tok.Kind != TokEOF; tok = lx.Next() {
			last = tok
		}
		if got := last.Unterminated(src); got != tt.want {
			t.Errorf("Unterminated(%q) of %v = %v, want %v", tt.q, last.Kind, got, tt.want)
		}
	}
}
