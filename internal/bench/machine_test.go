package bench

import (
	"strings"
	"testing"
)

func TestParseCPUModel(t *testing.T) {
	if got := ParseCPUModel(readTestdata(t, "cpuinfo.txt")); got != "Intel(R) Xeon(R) Processor" {
		t.Errorf("got %q", got)
	}
	if got := ParseCPUModel("processor : 0\n"); got != "unknown" {
		t.Errorf("got %q", got)
	}
}

func TestVersionLine(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)\n",
			"mariadbd Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)"},
		{"sysbench 1.0.20\n", "sysbench 1.0.20"},
		{"HAProxy version 2.6.12-1+deb12u4 2026/10/17 - https://haproxy.org/\nStatus: long-term supported branch\n",
			"HAProxy version 2.6.12-1+deb12u4 2026/10/17"},
		{"\n\n", ""},
	}
	for _, tt := range tests {
		if got := VersionLine(tt.in); got != tt.want {
			t.Errorf("VersionLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestHAProxyConfig(t *testing.T) {
	cfg := HAProxyConfig("127.0.0.1:4000", "127.0.0.1:3307", 4096)
	for _, want := range []string{"maxconn 4096", "mode tcp", "bind 127.0.0.1:4000", "server primary 127.0.0.1:3307"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
}

func TestHAProxyMaxConnFor(t *testing.T) {
	tests := []struct {
		limit uint64
		want  int
		got   int
	}{
		{1048576, 10100, 10100}, // room for all
		{1048576, 100, HAProxyMaxConn},
		{20000, 10100, 9900}, // two descriptors per connection
		{0, 500, HAProxyMaxConn},
	}
	for _, tt := range tests {
		if got := HAProxyMaxConnFor(tt.limit, tt.want); got != tt.got {
			t.Errorf("HAProxyMaxConnFor(%d, %d) = %d, want %d", tt.limit, tt.want, got, tt.got)
		}
	}
}
