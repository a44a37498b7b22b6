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
