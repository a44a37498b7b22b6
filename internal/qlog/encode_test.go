package qlog

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var testTime = time.Date(2026, 11, 22, 21, 0, 0, 123456789, time.UTC)

func TestAppendEntryGolden(t *testing.T) {
	e := &Entry{
		Time: testTime, Kind: KindQuery, Session: 12, Cluster: "c1", User: "app",
		Client: "127.0.0.1:5555", Schema: "sbtest", Digest: 0xa1b2c3d4e5f60708,
		Server: "node2", Duration: 123 * time.Microsecond, Rows: 1,
	}
	got := string(appendEntry(nil, e, []byte("SELECT c FROM sbtest1 WHERE id = ?"), false))
	want := `{"time":"2026-11-22T21:00:00.123456Z","type":"query","session":12,"cluster":"c1","user":"app","client":"127.0.0.1:5555","schema":"sbtest","digest":"a1b2c3d4e5f60708","statement":"SELECT c FROM sbtest1 WHERE id = ?","server":"node2","duration_us":123,"rows":1,"error":0}` + "\n"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}

	auth := &Entry{
		Time: testTime.In(time.FixedZone("x", 3600)), Kind: KindAuth, Session: 3, Cluster: "c1",
		User: "app", Client: "127.0.0.1:5556", ErrCode: 1045, Message: "Access denied",
	}
	got = string(appendEntry(nil, auth, nil, false))
	want = `{"time":"2026-11-22T21:00:00.123456Z","type":"auth","session":3,"cluster":"c1","user":"app","client":"127.0.0.1:5556","success":false,"error":1045,"message":"Access denied"}` + "\n"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestAppendEntryDecodes(t *testing.T) {
	tests := []struct {
		name  string
		e     Entry
		stmt  string
		trunc bool
		want  map[string]any
	}{
		{
			name: "query with every optional field",
			e: Entry{Time: testTime, Kind: KindQuery, Session: 4294967295, Cluster: "c", User: "u",
				Client: "127.0.0.1:1", Schema: "s", Digest: 0x0f, Server: "", Duration: 1500 * time.Microsecond,
				Rows: -1, ErrCode: 1146, Message: "Table 'x' doesn't exist", Rule: "block-drop", Cached: true, Refused: true},
			stmt: "SELECT 1", trunc: true,
			want: map[string]any{"time": "2026-11-22T21:00:00.123456Z", "type": "query", "session": 4294967295.0,
				"cluster": "c", "user": "u", "client": "127.0.0.1:1", "schema": "s", "digest": "000000000000000f",
				"statement": "SELECT 1", "server": "", "duration_us": 1500.0, "rows": -1.0, "error": 1146.0,
				"message": "Table 'x' doesn't exist", "refused_by": "vigil", "rule": "block-drop", "cached": true, "truncated": true},
		},
		{
			name: "no digest, empty statement",
			e:    Entry{Time: testTime, Kind: KindQuery},
			want: map[string]any{"time": "2026-11-22T21:00:00.123456Z", "type": "query", "session": 0.0,
				"cluster": "", "user": "", "client": "", "schema": "", "statement": "", "server": "",
				"duration_us": 0.0, "rows": 0.0, "error": 0.0},
		},
		{
			name: "escaping",
			e: Entry{Time: testTime, Kind: KindQuery, User: "a\"b\\c", Client: "\x00\x01\x1f\x7f",
				Schema: "tab\there", Message: "line1\nline2\r\b\f", Rule: "\u2028\u2029"},
			stmt: "SELECT '\xff\xfe' , 'é€😀', '\xe2\x82' -- end",
			want: map[string]any{"time": "2026-11-22T21:00:00.123456Z", "type": "query", "session": 0.0,
				"cluster": "", "user": "a\"b\\c", "client": "\x00\x01\x1f\x7f", "schema": "tab\there",
				"statement": "SELECT '\ufffd\ufffd' , 'é€😀', '\ufffd\ufffd' -- end", "server": "",
				"duration_us": 0.0, "rows": 0.0, "error": 0.0, "message": "line1\nline2\r\b\f", "rule": "\u2028\u2029"},
		},
		{
			name: "auth success with schema",
			e:    Entry{Time: testTime, Kind: KindAuth, Session: 7, User: "root", Client: "[::1]:3306", Schema: "db", Success: true},
			want: map[string]any{"time": "2026-11-22T21:00:00.123456Z", "type": "auth", "session": 7.0,
				"cluster": "", "user": "root", "client": "[::1]:3306", "schema": "db", "success": true, "error": 0.0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line := appendEntry([]byte("prefix"), &tt.e, []byte(tt.stmt), tt.trunc)
			line, ok := bytes.CutPrefix(line, []byte("prefix"))
			if !ok || !bytes.HasSuffix(line, []byte("\n")) || bytes.Count(line, []byte("\n")) != 1 {
				t.Fatalf("not one line: %q", line)
			}
			var got map[string]any
			if err := json.Unmarshal(line, &got); err != nil {
				t.Fatalf("invalid JSON %q: %v", line, err)
			}
			if len(got) != len(tt.want) {
				t.Errorf("got %d fields, want %d: %s", len(got), len(tt.want), line)
			}
			for k, want := range tt.want {
				if got[k] != want {
					t.Errorf("%s = %#v, want %#v", k, got[k], want)
				}
			}
		})
	}
}

// appendString must write what encoding/json writes (without HTML
// escaping): same escapes, same \ufffd per invalid byte.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "Z", " ", "\"", "\\", "/", "\n", "\t", "\x00", "\x1f", "\x7f", "<", "&",
		"é", "€", "😀", "\u2028", "\u2029", "\xff", "\xc3", "\xe2\x82", "\xed\xa0\x80", "\xf4\x90\x80\x80"}
	cases := []string{"", "plain", strings.Repeat("x", 300)}
	for range 2000 {
		var sb strings.Builder
		for range r.IntN(12) {
			sb.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		cases = append(cases, sb.String())
	}
	for _, s := range cases {
		checkStringMatches(t, s)
	}
}

func checkStringMatches(t *testing.T, s string) {
	t.Helper()
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	got := appendString(nil, s)
	if string(got) != strings.TrimSuffix(want.String(), "\n") {
		t.Fatalf("appendString(%q) = %s, encoding/json: %s", s, got, want.String())
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\xff", "\u2028", "é\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkStringMatches(t, s) })
}

func TestKindString(t *testing.T) {
	if KindQuery.String() != "query" || KindAuth.String() != "auth" || Kind(9).String() != "unknown" {
		t.Error("wrong Kind names")
	}
}
