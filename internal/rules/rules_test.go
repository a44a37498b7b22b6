package rules

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/sqlscan"
)

func input(user, schema, client, q string) *Input {
	return &Input{User: user, Schema: schema, Client: netip.MustParseAddr(client), Digest: sqlscan.Scan([]byte(q)).Digest, Query: []byte(q)}
}

func TestApply(t *testing.T) {
	on, off := true, false
	specs := []Spec{
		{Name: "block-drop", Query: `(?i)^\s*DROP\s+TABLE`, Block: &Block{Code: 1148, SQLState: "42000", Message: "no drops"}},
		{Name: "reports", User: "report", Route: "analytics", Timeout: time.Second},
		{Name: "hot", Digest: `^SELECT c FROM sbtest1 WHERE id = \?$`, Route: "writer", CacheTTL: 5 * time.Second},
		{Name: "rw", Query: `sbtest2`, RewritePattern: `sbtest2`, RewriteReplace: `sbtest1`, Continue: true},
		{Name: "quiet", Schema: "!app", Log: &off, Continue: true},
		{Name: "lan", Client: "10.0.0.0/8", Mirror: "shadow", Log: &on},
		{Name: "not-admin", User: "!admin", Digest: "!^SELECT", Route: "writer"},
	}
	set, err := Compile(specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		in   *Input
		want Result
	}{
		{"block wins first", input("app", "app", "127.0.0.1", "drop table t"),
			Result{Matched: true, Rule: "block-drop", Block: specs[0].Block}},
		{"user match", input("report", "app", "127.0.0.1", "SELECT 1"),
			Result{Matched: true, Rule: "reports", Route: "analytics", Timeout: time.Second}},
		{"digest match", input("app", "app", "127.0.0.1", "select c from sbtest1 where id=42"),
			Result{Matched: true, Rule: "hot", Route: "writer", CacheTTL: 5 * time.Second}},
		{"digest no match falls to not-admin? no: SELECT", input("app", "app", "127.0.0.1", "SELECT c FROM sbtest1 WHERE id IN (1,2)"),
			Result{}},
		{"rewrite continues to next", input("app", "other", "127.0.0.1", "SELECT * FROM sbtest2 WHERE id=1"),
			Result{Matched: true, Rule: "quiet", Query: []byte("SELECT * FROM sbtest1 WHERE id=1"), Log: -1}},
		{"client prefix", input("app", "app", "10.1.2.3", "SELECT 1"),
			Result{Matched: true, Rule: "lan", Mirror: "shadow", Log: 1}},
		{"negated user and digest", input("app", "app", "127.0.0.1", "UPDATE t SET a=1"),
			Result{Matched: true, Rule: "not-admin", Route: "writer"}},
		{"negated user excludes admin", input("admin", "app", "127.0.0.1", "UPDATE t SET a=1"),
			Result{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := set.Apply(tc.in)
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", tc.want) || string(got.Query) != string(tc.want.Query) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
	hits := map[string]uint64{}
	for _, st := range set.Stats() {
		hits[st.Name] = st.Hits
	}
	if hits["block-drop"] != 1 || hits["rw"] != 1 || hits["quiet"] != 1 || hits["not-admin"] != 1 {
		t.Errorf("hits %v", hits)
	}
	// Counters survive a reload for rules that keep their name.
	again, err := Compile(specs[:2], set)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Stats()[0].Hits; got != 1 {
		t.Errorf("hits after reload = %d, want 1", got)
	}
}

func TestRewriteWithoutQueryMatchesOnPattern(t *testing.T) {
	set, err := Compile([]Spec{{Name: "r", RewritePattern: `\bFROM old\b`, RewriteReplace: "FROM new"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res := set.Apply(input("u", "", "127.0.0.1", "SELECT 1")); res.Matched {
		t.Errorf("unrelated statement matched: %+v", res)
	}
	res := set.Apply(input("u", "", "127.0.0.1", "SELECT a FROM old WHERE x"))
	if string(res.Query) != "SELECT a FROM new WHERE x" {
		t.Errorf("rewrite = %q", res.Query)
	}
}

func TestCompileErrors(t *testing.T) {
	for _, sp := range []Spec{
		{Name: "a", Query: "("},
		{Name: "b", Digest: "[z-a]"},
		{Name: "c", Client: "not-an-ip"},
		{Name: "d", RewritePattern: "(?P<"},
	} {
		if _, err := Compile([]Spec{sp}, nil); err == nil {
			t.Errorf("%s: no error", sp.Name)
		}
	}
}

// BenchmarkApply100 measures 100 digest rules that do not match: the
// common case of a large rule list (one map lookup per statement).
func BenchmarkApply100(b *testing.B) {
	var specs []Spec
	for i := range 100 {
		specs = append(specs, Spec{Name: fmt.Sprintf("r%d", i), Digest: fmt.Sprintf(`^SELECT x%d FROM`, i), Route: "writer"})
	}
	set, err := Compile(specs, nil)
	if err != nil {
		b.Fatal(err)
	}
	in := input("sbtest", "sbtest", "127.0.0.1", "SELECT c FROM sbtest1 WHERE id=5000")
	set.Apply(in)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if set.Apply(in).Matched {
			b.Fatal("matched")
		}
	}
}

func BenchmarkApply100UserRules(b *testing.B) {
	var specs []Spec
	for i := range 100 {
		specs = append(specs, Spec{Name: fmt.Sprintf("r%d", i), User: fmt.Sprintf("user%d", i), Route: "writer"})
	}
	set, _ := Compile(specs, nil)
	in := input("sbtest", "sbtest", "127.0.0.1", "SELECT c FROM sbtest1 WHERE id=5000")
	b.ReportAllocs()
	for b.Loop() {
		set.Apply(in)
	}
}
