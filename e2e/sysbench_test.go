package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sysbenchTime is each sysbench run's length in seconds: long enough for
// ~100,000 statements per workload through every routing path on 2
// cores (12 s), short enough for CI; VIGIL_E2E_SYSBENCH_TIME overrides it.
func sysbenchTime() string {
	if v := os.Getenv("VIGIL_E2E_SYSBENCH_TIME"); v != "" {
		return v
	}
	return "12"
}

func sysbench(t *testing.T, addr string, args ...string) string {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	base := []string{"--db-driver=mysql", "--mysql-host=" + host, "--mysql-port=" + port,
		"--mysql-user=app", "--mysql-password=app", "--mysql-db=sbtest", "--tables=2", "--table-size=10000"}
	cmd := exec.Command("sysbench", append(base, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sysbench %v: %v\n%s", args, err, out)
	}
	return string(out)
}

var (
	reErrors  = regexp.MustCompile(`ignored errors:\s+(\d+)`)
	reQueries = regexp.MustCompile(`queries:\s+(\d+)\s+\(([\d.]+) per sec`)
)

func sysbenchErrors(out string) int {
	m := reErrors.FindStringSubmatch(out)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func testSysbench(t *testing.T, env *proxyEnv) {
	if _, err := exec.LookPath("sysbench"); err != nil {
		t.Fatal("sysbench is not installed: run scripts/install-deps.sh")
	}
	sysbench(t, env.addr, "oltp_read_write", "prepare")
	// Let the replicas catch up with the load.
	time.Sleep(2 * time.Second)
	runs := []struct {
		name string
		args []string
		// writesOnly: reads must reach the replicas in this workload
		readsOnReplicas bool
	}{
		{"oltp_read_write", []string{"oltp_read_write"}, false},
		{"oltp_read_only", []string{"oltp_read_only"}, false},
		{"oltp_read_only_skip_trx", []string{"oltp_read_only", "--skip_trx=on"}, true},
		{"oltp_point_select", []string{"oltp_point_select"}, true},
		{"oltp_insert", []string{"oltp_insert"}, false},
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			before := readCounters(t, env.sb, env.nodes)
			args := append(append([]string{}, r.args...), "--threads=32", "--time="+sysbenchTime(), "--report-interval=0", "run")
			out := sysbench(t, env.addr, args...)
			after := readCounters(t, env.sb, env.nodes)
			// A client error makes sysbench stop with FATAL and a non-zero
			// exit (checked in sysbench()). "Ignored errors" are deadlocks
			// (1213) that sysbench retries; oltp_read_write has them on a
			// direct connection too, so they are only reported there.
			if strings.Contains(out, "FATAL") {
				t.Errorf("%s: sysbench reported a failure\n%s", r.name, out)
			}
			if n := sysbenchErrors(out); n != 0 {
				if r.name == "oltp_read_write" {
					t.Logf("%s: %d deadlocks retried by sysbench (inherent to the workload)", r.name, n)
				} else {
					t.Errorf("%s: %d errors\n%s", r.name, n, out)
				}
			}
			if m := reQueries.FindStringSubmatch(out); m != nil {
				t.Logf("%s: %s queries (%s qps) through Vigil", r.name, m[1], m[2])
			}
			for _, n := range []string{"node2", "node3"} {
				if d := after.delta(before, n, "write"); d != 0 {
					t.Errorf("%s: replica %s ran %d writes from the app user", r.name, n, d)
				}
			}
			if r.readsOnReplicas {
				rep := after.delta(before, "node2", "select") + after.delta(before, "node3", "select")
				prim := after.delta(before, "node1", "select")
				t.Logf("%s: SELECTs on replicas %d, on primary %d", r.name, rep, prim)
				if rep == 0 || prim > rep/50 {
					t.Errorf("%s: reads outside transactions should go to replicas: replicas %d, primary %d", r.name, rep, prim)
				}
			}
		})
	}
}
