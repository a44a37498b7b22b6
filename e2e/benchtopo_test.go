package e2e

// vigil-bench topology on servers it did not create (issue 18): the
// servers of a Vigil config, as a user points it at their own cluster.

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/vigil-db/vigil/internal/sandbox"
)

// --config measures the servers of a config: it checks them read-only
// first, works in a schema of its own that it marks and drops, refuses a
// schema of that name it did not create, and with --vary-durability puts
// back every global it set.
func TestBenchTopologyOnConfigServers(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	if _, err := exec.LookPath("sysbench"); err != nil {
		t.Fatal("sysbench is not installed: run scripts/install-deps.sh")
	}
	ctx := context.Background()
	sb := Sandbox(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3, SemiSync: true})
	durability := func() string {
		rows, err := sb.SQL(ctx, "node1", "SELECT @@global.sync_binlog, @@global.innodb_flush_log_at_trx_commit")
		if err != nil || len(rows) != 1 {
			t.Fatalf("durability on node1: %v %v", rows, err)
		}
		return strings.Join(rows[0], " ")
	}
	schemas := func() string {
		rows, err := sb.SQL(ctx, "node1", "SHOW DATABASES LIKE 'vigil_bench_topology'")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(strings.Repeat("vigil_bench_topology ", len(rows)))
	}
	before := durability()
	args := []string{"topology", "--config", sb.ConfigPath(), "--workloads", "oltp_insert", "--threads", "2",
		"--duration", "1s", "--warmup", "0s", "--paths", "direct", "--tables", "1", "--table-size", "100", "--out", t.TempDir()}
	res, err := RunVigilBench(t, append(args, "--vary-durability")...)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("vigil-bench topology --config: %v (exit %d)\n%s\n%s", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	for _, want := range []string{"check: node1:", "primary, semi-sync", "check: node2:", "replica (IO Yes, SQL Yes", "may create schema vigil_bench_topology", "dropped schema vigil_bench_topology"} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("the run did not report %q:\n%s", want, res.Stderr)
		}
	}
	if !strings.Contains(res.Stdout, "sync_binlog=1") && !strings.Contains(res.Stderr, "sync_binlog=1") {
		t.Errorf("--vary-durability ran no sync_binlog=1 variant:\n%s\n%s", res.Stdout, res.Stderr)
	}
	if after := durability(); after != before {
		t.Errorf("sync_binlog, innodb_flush_log_at_trx_commit: %s before, %s after: not restored", before, after)
	}
	if s := schemas(); s != "" {
		t.Errorf("schema left behind: %s", s)
	}

	// A schema of that name that is not the bench's is neither used nor
	// dropped.
	for _, q := range []string{"CREATE DATABASE vigil_bench_topology", "CREATE TABLE vigil_bench_topology.keep (a INT)"} {
		if _, err := sb.SQL(ctx, "node1", q); err != nil {
			t.Fatal(err)
		}
	}
	res, err = RunVigilBench(t, args...)
	if err == nil && res.ExitCode == 0 {
		t.Fatalf("the bench used a schema it did not create:\n%s", res.Stderr)
	}
	if !strings.Contains(res.Stderr, "without the bench's marker table") {
		t.Errorf("the refusal does not say why:\n%s", res.Stderr)
	}
	if rows, err := sb.SQL(ctx, "node1", "SHOW TABLES FROM vigil_bench_topology"); err != nil || len(rows) != 1 || rows[0][0] != "keep" {
		t.Errorf("the user's schema was touched: %v %v", rows, err)
	}
}
