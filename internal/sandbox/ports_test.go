package sandbox

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
)

func TestPlanPortsScheme(t *testing.T) {
	p, err := PlanPorts(23306, 3, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []NodePorts{
		{MySQL: 23306, Gcomm: 23406, IST: 23407, SST: 23408},
		{MySQL: 23307, Gcomm: 23409, IST: 23410, SST: 23411},
		{MySQL: 23308, Gcomm: 23412, IST: 23413, SST: 23414},
	}
	for i, w := range want {
		if p.Nodes[i] != w {
			t.Errorf("node%d ports = %+v, want %+v", i+1, p.Nodes[i], w)
		}
	}
	if p.Proxy != 23396 || p.Admin != 23397 {
		t.Errorf("proxy, admin = %d, %d; want 23396, 23397", p.Proxy, p.Admin)
	}
	seen := map[int]string{}
	for _, u := range p.All() {
		if other, dup := seen[u.Port]; dup {
			t.Errorf("port %d used for %s and %s", u.Port, other, u.What)
		}
		seen[u.Port] = u.What
	}
	if len(seen) != 3*4+2 {
		t.Errorf("plan has %d ports, want 14", len(seen))
	}

	r, err := PlanPorts(23306, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.All()) != 4 || r.Nodes[1].MySQL != 23307 || r.Nodes[1].Gcomm != 0 {
		t.Errorf("replication plan = %+v", r)
	}
}

func TestPlanPortsErrors(t *testing.T) {
	for _, c := range []struct {
		base, n int
		galera  bool
		want    string
	}{
		{23306, 0, false, "--nodes"},
		{23306, MaxNodes + 1, false, "--nodes"},
		{80, 3, false, "too low"},
		{65500, 3, false, "too high"},
		{65440, 3, true, "too high"},
	} {
		_, err := PlanPorts(c.base, c.n, c.galera)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("PlanPorts(%d, %d, %v) = %v, want error with %q", c.base, c.n, c.galera, err, c.want)
		}
	}
}

func TestCheckFreeNamesTakenPort(t *testing.T) {
	ctx := context.Background()
	p, err := choosePorts(ctx, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkFree(ctx, p); err != nil {
		t.Fatalf("chosen ports are not free: %v", err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(Host, strconv.Itoa(p.Nodes[1].MySQL)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = checkFree(ctx, p)
	var inUse *PortInUseError
	if !errors.As(err, &inUse) {
		t.Fatalf("checkFree = %v, want *PortInUseError", err)
	}
	if inUse.Port != p.Nodes[1].MySQL || inUse.What != "node2 mysql" {
		t.Errorf("error names port %d (%s), want %d (node2 mysql)", inUse.Port, inUse.What, p.Nodes[1].MySQL)
	}
	if !strings.Contains(err.Error(), strconv.Itoa(p.Nodes[1].MySQL)) {
		t.Errorf("message %q does not name the port", err)
	}
}

func TestChoosePortsStaysBelowEphemeral(t *testing.T) {
	low := ephemeralLow()
	for i := 0; i < 20; i++ {
		p, err := choosePorts(context.Background(), 3, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range p.All() {
			if u.Port < 20000 || (low > 20000+planSpan(3, true) && u.Port >= low) {
				t.Fatalf("port %d (%s) outside [20000, %d)", u.Port, u.What, low)
			}
		}
	}
}

func TestParseSSHolder(t *testing.T) {
	out := `LISTEN 0      80         127.0.0.1:3306       0.0.0.0:*    users:(("mariadbd",pid=3833,fd=21))
ESTAB  0      0          127.0.0.1:40000     127.0.0.1:3306
LISTEN 0      4096       127.0.0.1:13306      0.0.0.0:*    users:(("vigil",pid=77,fd=3))
`
	for port, want := range map[int]string{
		3306:  "mariadbd (pid 3833)",
		13306: "vigil (pid 77)",
		40000: "another socket (estab)",
		5555:  "",
	} {
		if got := parseSSHolder(out, port); got != want {
			t.Errorf("parseSSHolder(%d) = %q, want %q", port, got, want)
		}
	}
}
