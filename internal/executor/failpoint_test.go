package executor

import (
	"syscall"
	"testing"
)

func TestParseFailpoint(t *testing.T) {
	for _, tc := range []struct {
		in   string
		kind string
		n    int
		sig  syscall.Signal
		err  bool
	}{
		{"", "", 0, 0, false},
		{"failover 3 kill\n", "failover", 3, syscall.SIGKILL, false},
		{"rejoin 1 stop", "rejoin", 1, syscall.SIGSTOP, false},
		{"switchover 0 kill", "", 0, 0, true},
		{"switchover x kill", "", 0, 0, true},
		{"switchover 2 boom", "", 0, 0, true},
		{"switchover 2", "", 0, 0, true},
	} {
		cp, kind, err := parseFailpoint(tc.in)
		if (err != nil) != tc.err || kind != tc.kind || cp.n != tc.n || cp.sig != tc.sig {
			t.Errorf("parseFailpoint(%q) = %+v %q %v", tc.in, cp, kind, err)
		}
	}
}
