package executor

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/vigil-db/vigil/internal/failover"
)

// The crash failpoint is for fault tests only, never set in production:
// VIGIL_TEST_FAILPOINT_FILE names a file that holds "KIND N ACTION" (for
// example "failover 3 kill"): the acting instance running an operation of
// that kind (failover, switchover, rejoin) sends itself SIGKILL (kill) or
// SIGSTOP (stop) once N of its steps are done, before it journals the
// N-th as done. The next acting instance then finds the operation in etcd
// with step N not marked done and must complete it (running step N again)
// or roll it back. A file lets a test move the point between rounds
// without restarting the daemons; a resumed operation never crashes.
const failpointEnv = "VIGIL_TEST_FAILPOINT_FILE"

// crashPoint is the failpoint of one run of a plan (n 0: none).
type crashPoint struct {
	n   int
	sig syscall.Signal
}

// failpointFor reads the failpoint for a plan of kind (none when resumed).
func failpointFor(kind failover.PlanKind, resumed bool) crashPoint {
	path := os.Getenv(failpointEnv)
	if path == "" || resumed {
		return crashPoint{}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return crashPoint{}
	}
	cp, k, err := parseFailpoint(string(b))
	if err != nil || k != kind.String() {
		return crashPoint{}
	}
	return cp
}

// parseFailpoint reads "KIND N ACTION" (empty: none).
func parseFailpoint(s string) (crashPoint, string, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return crashPoint{}, "", nil
	}
	if len(f) != 3 {
		return crashPoint{}, "", fmt.Errorf("failpoint %q: want KIND N kill|stop", s)
	}
	n, err := strconv.Atoi(f[1])
	if err != nil || n < 1 {
		return crashPoint{}, "", fmt.Errorf("failpoint %q: N must be a step number from 1", s)
	}
	cp := crashPoint{n: n}
	switch f[2] {
	case "kill":
		cp.sig = syscall.SIGKILL
	case "stop":
		cp.sig = syscall.SIGSTOP
	default:
		return crashPoint{}, "", fmt.Errorf("failpoint %q: action must be kill or stop", s)
	}
	return cp, f[0], nil
}

// after fires once done steps (or more: steps run together) are done.
func (c *crashPoint) after(done int) {
	if c.n == 0 || done < c.n {
		return
	}
	c.n = 0
	_ = syscall.Kill(os.Getpid(), c.sig)
	if c.sig == syscall.SIGSTOP {
		return // continued by the test: carry on as a paused instance would
	}
	select {} // SIGKILL is on its way
}
