package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/compat/mtr"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// TestMTRCompat runs the selection of MariaDB's own test suite in
// compat/mtr (mariadb-test-run --extern, from the mariadb-test package)
// against a standalone and a replication sandbox, each directly and
// through Vigil, in the text protocol and with --ps-protocol. It fails for
// every test that passes direct but fails through Vigil, unless
// compat/mtr/known-differences.txt excuses that failure. The table, the
// report and every failing test's diff go to
// test-artifacts/TestMTRCompat/<topology>/ (kept whether the test passes
// or not). Without mariadb-test it skips, unless VIGIL_E2E_REQUIRE_MTR=1.
// docs/compatibility.md ("MariaDB test suite") explains the selection.
func TestMTRCompat(t *testing.T) {
	RequireMariaDB(t)
	if err := mtr.Available(""); err != nil {
		if os.Getenv("VIGIL_E2E_REQUIRE_MTR") == "1" {
			t.Fatalf("mtr: %v", err)
		}
		t.Skipf("mtr: %v (VIGIL_E2E_REQUIRE_MTR=1 makes this a failure)", err)
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	artifacts := filepath.Join(root, "test-artifacts", "TestMTRCompat")
	if err := os.RemoveAll(artifacts); err != nil {
		t.Fatal(err)
	}
	bin := BuildVigil(t)
	tests := mtr.Selection()
	known := mtr.KnownDifferences()
	t.Logf("mtr: %d tests from compat/mtr/selection.txt; results in %s", len(tests), artifacts)

	// The topologies run side by side: each mariadb-test-run mostly waits
	// on its server, and one after the other they take twice as long.
	for _, tc := range []struct {
		topo  sandbox.Topology
		nodes int
	}{{sandbox.Standalone, 1}, {sandbox.Replication, 3}} {
		t.Run(string(tc.topo), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			sb := Sandbox(t, sandbox.Options{Topology: tc.topo, Nodes: tc.nodes})
			t0 := time.Now()
			target, err := mtr.Prepare(ctx, sb, "", t.Logf)
			if err != nil {
				t.Fatalf("mtr: prepare: %v", err)
			}
			t.Logf("mtr: sandbox prepared in %s", time.Since(t0).Round(time.Millisecond))
			out := filepath.Join(artifacts, string(tc.topo))
			if err := os.MkdirAll(out, 0o755); err != nil {
				t.Fatal(err)
			}
			cfg := filepath.Join(out, "vigil.yaml")
			if err := mtr.VigilConfig(sb.ConfigPath(), cfg, mtr.Users(), mtr.PoolIdleTimeout); err != nil {
				t.Fatal(err)
			}
			report, err := os.Create(filepath.Join(out, "report.md"))
			if err != nil {
				t.Fatal(err)
			}
			defer report.Close()
			fmt.Fprintf(report, "# mariadb-test-run direct and through Vigil: %s\n\n", tc.topo)
			direct := sb.Addr(target.Primary.Name)
			for _, proto := range []mtr.Protocol{mtr.Text, mtr.PS} {
				run := func(label, addr string) *mtr.RunResult {
					t.Helper()
					res, err := target.Run(ctx, mtr.RunOptions{
						Label: label, Addr: addr, Protocol: proto, Tests: tests,
						WorkDir: filepath.Join(sb.Dir(), "mtr-"+label+"-"+string(proto)),
						OutDir:  filepath.Join(out, label+"-"+string(proto)),
					})
					if err != nil {
						t.Fatalf("mtr %s %s: %v", label, proto, err)
					}
					t.Logf("mtr: %s, %s protocol, %s: %s in %s", tc.topo, proto, label, res.Summary(), res.Elapsed.Round(100*time.Millisecond))
					fmt.Fprintf(report, "`%s-%s`: `%s`\n\n", label, proto, res.Command)
					return res
				}
				// Vigil runs only for its own runs: its monitor's and
				// pool's connections would show in Threads_connected,
				// which tests read, during the direct runs.
				d := run("direct", direct)
				stop, err := mtr.StartVigil(bin, cfg, filepath.Join(out, "vigil-"+string(proto)+".log"), sb.ProxyAddr())
				if err != nil {
					t.Fatal(err)
				}
				v := run("vigil", sb.ProxyAddr())
				stop()

				cmp := mtr.Compare(string(tc.topo), d, v, known)
				var table strings.Builder
				cmp.WriteTable(&table, 30)
				cmp.WriteTable(report, 60)
				t.Logf("mtr:\n%s", table.String())
				for name, reason := range cmp.KnownDiffs {
					t.Logf("mtr: %s (%s protocol) fails through Vigil, known: %s", name, proto, reason)
				}
				for _, name := range cmp.Regressions {
					r := v.Tests[name]
					t.Errorf("mtr: %s passes direct but fails through Vigil (%s, %s protocol); diff in %s", name, tc.topo, proto, r.DiffFile)
				}
			}
		})
	}
}
