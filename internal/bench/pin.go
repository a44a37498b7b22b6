package bench

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"time"

	"github.com/vigil-db/vigil/internal/sandbox"
)

// Pinning binds the client, the proxies and the servers to CPU lists with
// taskset ("0", "1", "0-1", "0,2"). An empty list leaves that part
// unpinned, which is the default: on a shared 2-core machine pinning made
// comparisons less stable, not more (docs/benchmarks.md).
type Pinning struct {
	// Client is sysbench and the bench's own Go load generator.
	Client string `json:"client,omitempty"`
	// Proxy is Vigil (every one the bench starts) and HAProxy.
	Proxy string `json:"proxy,omitempty"`
	// Servers are the mariadbd processes (all their threads), pinned
	// after start and after every restart.
	Servers string `json:"servers,omitempty"`
}

var reCPUList = regexp.MustCompile(`^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$`)

func (p Pinning) validate() error {
	for _, f := range []struct{ name, v string }{{"client", p.Client}, {"proxy", p.Proxy}, {"servers", p.Servers}} {
		if f.v != "" && !reCPUList.MatchString(f.v) {
			return fmt.Errorf("--pin-%s %q: want a CPU list such as 0, 1-3 or 0,2", f.name, f.v)
		}
	}
	return nil
}

// Any reports whether anything is pinned.
func (p Pinning) Any() bool { return p.Client != "" || p.Proxy != "" || p.Servers != "" }

// String is "client 0, proxy 1, servers 0-1" or "none".
func (p Pinning) String() string {
	if !p.Any() {
		return "none"
	}
	s := ""
	add := func(name, v string) {
		if v == "" {
			return
		}
		if s != "" {
			s += ", "
		}
		s += name + " " + v
	}
	add("client", p.Client)
	add("proxy", p.Proxy)
	add("servers", p.Servers)
	return s
}

// tasksetWrap runs bin under `taskset -c cpus` when cpus is set.
func tasksetWrap(cpus, bin string, args ...string) (string, []string) {
	if cpus == "" {
		return bin, args
	}
	return "taskset", append([]string{"-c", cpus, bin}, args...)
}

// proxyCommand is how a proxy is started: pinned to the proxy CPUs, or
// explicitly to all CPUs when only the client is pinned (the bench pins
// itself around Go load runs, and children would inherit that).
func (e *env) proxyCommand(bin string, args ...string) (string, []string) {
	cpus := e.o.Pin.Proxy
	if cpus == "" && e.o.Pin.Client != "" {
		cpus = allCPUs()
	}
	return tasksetWrap(cpus, bin, args...)
}

// clientCommand is how sysbench is started.
func (e *env) clientCommand(args ...string) (string, []string) {
	return tasksetWrap(e.o.Pin.Client, "sysbench", args...)
}

func allCPUs() string { return "0-" + strconv.Itoa(runtime.NumCPU()-1) }

// setAffinity runs `taskset -apc cpus pid`: every thread of the process.
func setAffinity(ctx context.Context, cpus string, pid int) error {
	out, err := runCommand(ctx, 10*time.Second, "taskset", "-apc", cpus, strconv.Itoa(pid))
	if err != nil {
		return fmt.Errorf("taskset -apc %s %d: %v: %s", cpus, pid, err, lastLines(out, 2))
	}
	return nil
}

// pinServers pins every running mariadbd of sb; a failure is a note.
func (e *env) pinServers(ctx context.Context, sb *sandbox.Sandbox) {
	if e.o.Pin.Servers == "" || sb == nil {
		return
	}
	for _, n := range sb.Nodes() {
		if n.PID == 0 {
			continue
		}
		if err := setAffinity(ctx, e.o.Pin.Servers, n.PID); err != nil {
			e.note("pinning %s: %v", n.Name, err)
		}
	}
}

// pinSelf binds the bench's own threads to the client CPUs for a run of
// the Go load generator; the returned function unbinds them.
func (e *env) pinSelf(ctx context.Context) func() {
	if e.o.Pin.Client == "" {
		return func() {}
	}
	if err := setAffinity(ctx, e.o.Pin.Client, os.Getpid()); err != nil {
		e.note("pinning the load generator: %v", err)
		return func() {}
	}
	return func() {
		if err := setAffinity(context.Background(), allCPUs(), os.Getpid()); err != nil {
			e.note("unpinning the load generator: %v", err)
		}
	}
}
