package sqlscan

import "testing"

func TestLike(t *testing.T) {
	for _, tc := range []struct {
		s, pat string
		want   bool
	}{
		{"tenant1", "tenant%", true}, {"tenant1", "TENANT_", true}, {"tenant12", "tenant_", false},
		{"a_b", `a\_b`, true}, {"axb", `a\_b`, false}, {"", "%", true}, {"x", "", false},
	} {
		if got := Like([]byte(tc.s), []byte(tc.pat)); got != tc.want {
			t.Errorf("Like(%q, %q) = %v", tc.s, tc.pat, got)
		}
	}
}

func TestStringValue(t *testing.T) {
	for in, want := range map[string]string{`'a''b'`: "a'b", `"x\"y"`: `x"y`, `'t%'`: "t%", `''`: ""} {
		if got := string(StringValue([]byte(in))); got != want {
			t.Errorf("StringValue(%s) = %q, want %q", in, got, want)
		}
	}
}
