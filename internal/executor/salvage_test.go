package executor

import (
	"testing"

	"github.com/vigil-db/vigil/internal/topology"
)

func TestMissing(t *testing.T) {
	cases := []struct {
		old, cur string
		n        uint64
		start    string
	}{
		{"0-1-100", "0-1-100", 0, ""},
		{"0-1-100", "0-2-120", 0, ""},
		{"0-1-105", "0-1-100", 5, "0-1-100"},
		{"0-1-105,1-1-7", "0-2-103,1-1-7", 2, "0-2-103"},
		{"0-1-5,2-1-3", "0-1-5", 3, ""},
	}
	for _, c := range cases {
		n, start := missing(topology.MustParseGTIDPos(c.old), topology.MustParseGTIDPos(c.cur))
		if n != c.n || start != c.start {
			t.Errorf("missing(%s, %s) = %d %q, want %d %q", c.old, c.cur, n, start, c.n, c.start)
		}
	}
}

func TestMissingByState(t *testing.T) {
	cases := []struct {
		old, cur string
		n        uint64
		start    string
		ok       bool
	}{
		// The kill -9 case: the old primary's last transaction reached no
		// replica, and the new primary wrote further in domain 0.
		{"0-1-19475", "0-1-19474,0-2-21572", 1, "0-1-19474", true},
		{"0-1-100,0-2-50", "0-1-100,0-2-80", 0, "", true},
		{"0-1-105", "0-1-100", 5, "0-1-100", true},
		{"0-3-7", "0-1-100", 1, "", true},
		{"0-1-100", "", 0, "", false},
	}
	for _, c := range cases {
		old, _ := topology.ParseGTIDList(c.old)
		cur, _ := topology.ParseGTIDList(c.cur)
		n, start, ok := missingByState(old, cur)
		if n != c.n || start != c.start || ok != c.ok {
			t.Errorf("missingByState(%s, %s) = %d %q %v, want %d %q %v", c.old, c.cur, n, start, ok, c.n, c.start, c.ok)
		}
	}
}
