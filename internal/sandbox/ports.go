package sandbox

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The port scheme, relative to the base port P of a sandbox:
//
//	node K MySQL port      P + K - 1            (K = 1..N)
//	etcdK client port      P + 60 + 2*(K-1)     (K = 1..3, with --etcd)
//	etcdK peer port        P + 61 + 2*(K-1)
//	vigilK proxy port      P + 70 + 2*(K-1)     (K = 1..3, with --vigils)
//	vigilK admin port      P + 71 + 2*(K-1)
//	proxy (vigil run)      P + 90
//	admin (vigil run)      P + 91
//	more clusters, shards  P + 92 .. P + 107    (with --clusters, see clusters.go)
//	node K Galera gcomm    P + 100 + 3*(K-1)
//	node K Galera IST      P + 101 + 3*(K-1)
//	node K Galera SST      P + 102 + 3*(K-1)
const (
	proxyOffset  = 90
	adminOffset  = 91
	galeraOffset = 100
	etcdOffset   = 60
	vigilOffset  = 70
	// MaxNodes keeps the node ports below the etcd ports.
	MaxNodes = 50
	// MaxVigils is the most Vigil daemons a sandbox runs (--vigils).
	MaxVigils = 3
)

// NodePorts are the ports of one node.
type NodePorts struct {
	MySQL, Gcomm, IST, SST int
}

// EtcdPorts are the ports of one etcd member.
type EtcdPorts struct {
	Client, Peer int
}

// VigilPorts are the listeners of one Vigil daemon the sandbox runs.
type VigilPorts struct {
	Proxy, Admin int
	// ClusterProxies (clusters 2..N) and Shards are set with several
	// clusters only (see withClusters).
	ClusterProxies []int
	Shards         int
}

// PortPlan is every port a sandbox needs.
type PortPlan struct {
	Base  int
	Nodes []NodePorts
	Proxy int
	Admin int
	// Etcd and Vigils are empty unless the sandbox runs etcd members and
	// Vigil daemons (see withAux).
	Etcd   []EtcdPorts
	Vigils []VigilPorts
	// ClusterProxies are the listeners of clusters 2..N and Shards the
	// sharded listener's port, with several clusters only (see
	// withClusters).
	ClusterProxies []int
	Shards         int
}

// withAux adds the ports of etcd members and Vigil daemons to the plan
// (at most 3 of each: they sit between the node ports and the proxy
// port, so the span of the plan does not change).
func (p PortPlan) withAux(etcd, vigils int) PortPlan {
	p.Etcd, p.Vigils = nil, nil
	for k := 0; k < etcd; k++ {
		c := p.Base + etcdOffset + 2*k
		p.Etcd = append(p.Etcd, EtcdPorts{Client: c, Peer: c + 1})
	}
	for k := 0; k < vigils; k++ {
		x := p.Base + vigilOffset + 2*k
		p.Vigils = append(p.Vigils, VigilPorts{Proxy: x, Admin: x + 1})
	}
	return p
}

// planPorts is the plan of a sandbox with options o from base.
func planPorts(base int, o Options) (PortPlan, error) {
	clusters := max(o.Clusters, 1)
	p, err := PlanPorts(base, o.Nodes*clusters, o.Topology == Galera)
	if err != nil {
		return p, err
	}
	if last := base + optionsSpan(o) - 1; last > 65535 {
		return p, fmt.Errorf("--base-port %d is too high: the sandbox needs ports up to %d (base+%d)", base, last, optionsSpan(o)-1)
	}
	return p.withAux(o.Etcd, o.Vigils).withClusters(clusters), nil
}

// All lists every port of the plan with what it is for.
func (p PortPlan) All() []PortUse {
	var out []PortUse
	for i, n := range p.Nodes {
		name := fmt.Sprintf("node%d", i+1)
		out = append(out, PortUse{n.MySQL, name + " mysql"})
		if n.Gcomm != 0 {
			out = append(out,
				PortUse{n.Gcomm, name + " galera gcomm"},
				PortUse{n.IST, name + " galera IST"},
				PortUse{n.SST, name + " galera SST"})
		}
	}
	for i, e := range p.Etcd {
		name := fmt.Sprintf("etcd%d", i+1)
		out = append(out, PortUse{e.Client, name + " client"}, PortUse{e.Peer, name + " peer"})
	}
	for i, v := range p.Vigils {
		name := fmt.Sprintf("vigil%d", i+1)
		out = append(out, PortUse{v.Proxy, name + " proxy"}, PortUse{v.Admin, name + " admin"})
		for j, c := range v.ClusterProxies {
			out = append(out, PortUse{c, fmt.Sprintf("%s proxy of %s", name, clusterName(j+2))})
		}
		if v.Shards != 0 {
			out = append(out, PortUse{v.Shards, name + " shards"})
		}
	}
	out = append(out, PortUse{p.Proxy, "proxy"}, PortUse{p.Admin, "admin"})
	for j, c := range p.ClusterProxies {
		out = append(out, PortUse{c, "proxy of " + clusterName(j+2)})
	}
	if p.Shards != 0 {
		out = append(out, PortUse{p.Shards, "shards"})
	}
	return out
}

// PortUse is a port and what the sandbox wants it for.
type PortUse struct {
	Port int
	What string
}

// PlanPorts applies the port scheme to base for n nodes.
func PlanPorts(base, n int, galera bool) (PortPlan, error) {
	if n < 1 || n > MaxNodes {
		return PortPlan{}, fmt.Errorf("--nodes must be between 1 and %d, not %d", MaxNodes, n)
	}
	if base < 1024 {
		return PortPlan{}, fmt.Errorf("--base-port %d is too low: use a port from 1024 up", base)
	}
	if last := base + planSpan(n, galera) - 1; last > 65535 {
		return PortPlan{}, fmt.Errorf("--base-port %d is too high: the sandbox needs ports up to %d (base+%d)", base, last, planSpan(n, galera)-1)
	}
	p := PortPlan{Base: base, Proxy: base + proxyOffset, Admin: base + adminOffset}
	for k := 0; k < n; k++ {
		np := NodePorts{MySQL: base + k}
		if galera {
			np.Gcomm = base + galeraOffset + 3*k
			np.IST = np.Gcomm + 1
			np.SST = np.Gcomm + 2
		}
		p.Nodes = append(p.Nodes, np)
	}
	return p, nil
}

// planSpan is how many consecutive ports from the base a plan touches.
func planSpan(n int, galera bool) int {
	if galera {
		return galeraOffset + 3*n
	}
	return adminOffset + 1
}

// PortInUseError says which port is taken and, when known, by whom.
type PortInUseError struct {
	Port   int
	What   string
	Holder string
}

func (e *PortInUseError) Error() string {
	msg := fmt.Sprintf("port %d (%s) is in use", e.Port, e.What)
	if e.Holder != "" {
		msg += " by " + e.Holder
	}
	return msg + ": pick another --base-port, or omit it to choose free ports"
}

// checkFree returns a *PortInUseError for the first port of the plan that
// cannot be bound on 127.0.0.1.
func checkFree(ctx context.Context, p PortPlan) error {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for _, u := range p.All() {
		l, err := net.Listen("tcp", net.JoinHostPort(Host, strconv.Itoa(u.Port)))
		if err != nil {
			return &PortInUseError{Port: u.Port, What: u.What, Holder: portHolder(ctx, u.Port)}
		}
		held = append(held, l)
	}
	return nil
}

// choosePorts picks a free block at random. It stays below the kernel's
// ephemeral range so an outgoing connection cannot take a server port
// between the check and the server binding it.
func choosePorts(ctx context.Context, n int, galera bool) (PortPlan, error) {
	return choosePlan(ctx, planSpan(n, galera), func(base int) (PortPlan, error) { return PlanPorts(base, n, galera) })
}

// choosePlan is choosePorts for any plan of span ports made by mk.
func choosePlan(ctx context.Context, span int, mk func(base int) (PortPlan, error)) (PortPlan, error) {
	lo, hi := 20000, ephemeralLow()
	if hi-span <= lo {
		hi = 65535
		lo = 40000
	}
	var last error
	for attempt := 0; attempt < 40; attempt++ {
		base := lo + rand.IntN(hi-span-lo)
		p, err := mk(base)
		if err != nil {
			return PortPlan{}, err
		}
		if err := checkFree(ctx, p); err != nil {
			last = err
			continue
		}
		return p, nil
	}
	return PortPlan{}, fmt.Errorf("no free block of %d ports found in 40 tries (last: %w)", span, last)
}

// ephemeralLow is the first port of net.ipv4.ip_local_port_range.
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 32768
	}
	v, err := strconv.Atoi(f[0])
	if err != nil || v < 21000 {
		return 32768
	}
	return v
}

// portHolder names the process holding a TCP port, from `ss`, or "".
func portHolder(ctx context.Context, port int) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ss", "-H", "-tanp").Output()
	if err != nil {
		return ""
	}
	return parseSSHolder(string(out), port)
}

var ssUser = regexp.MustCompile(`\("([^"]+)",pid=(\d+)`)

// parseSSHolder finds the process of the first socket of `ss -H -tanp`
// output whose local port is port.
func parseSSHolder(out string, port int) string {
	suffix := ":" + strconv.Itoa(port)
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasSuffix(f[3], suffix) {
			continue
		}
		if m := ssUser.FindStringSubmatch(line); m != nil {
			return fmt.Sprintf("%s (pid %s)", m[1], m[2])
		}
		return "another socket (" + strings.ToLower(f[0]) + ")"
	}
	return ""
}
