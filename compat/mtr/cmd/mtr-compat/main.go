// Command mtr-compat runs a selection of MariaDB's own test suite
// (mariadb-test-run --extern) against a sandbox directly and through
// Vigil, and reports, per protocol, "N passed, M failed" for each and the
// tests that pass direct but fail through Vigil, with their diffs.
//
//	mtr-compat --topology standalone|replication [--protocol text|ps|both] [--out DIR]
//	mtr-compat --sandbox DIR ...        use an existing sandbox (it is changed: see compat/mtr)
//
// It exits 1 when a test passes direct and fails through Vigil without
// being listed in compat/mtr/known-differences.txt, 2 on other errors.
// compat/mtr/run.sh builds Vigil and runs it; docs/compatibility.md
// explains the selection.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vigil-db/vigil/compat/mtr"
	"github.com/vigil-db/vigil/internal/sandbox"
)

func main() {
	os.Exit(run())
}

func run() int {
	var (
		topology  = flag.String("topology", "", "create a sandbox of this topology (standalone: 1 node, replication: 3 nodes) and tear it down at the end")
		nodes     = flag.Int("nodes", 0, "nodes of the created sandbox (default 1 standalone, 3 replication)")
		sbDir     = flag.String("sandbox", "", "use the existing sandbox in this directory instead (standalone with one node, or replication)")
		protocol  = flag.String("protocol", "both", "text, ps (mysqltest --ps-protocol) or both")
		out       = flag.String("out", "", "directory for the report and artifacts (default compat-out/mtr-<time>)")
		vigilBin  = flag.String("vigil", "bin/vigil", "the vigil binary")
		vigilAddr = flag.String("vigil-addr", "", "use a Vigil already running there (its users must include those of compat/mtr/users.txt) instead of starting one")
		testsFile = flag.String("tests", "", "file with the tests to run (default compat/mtr/selection.txt)")
		knownFile = flag.String("known", "", "known differences file (default compat/mtr/known-differences.txt)")
		mtrDir    = flag.String("mtr-dir", mtr.DefaultMTRDir, "the installed mysql-test directory")
		timeout   = flag.Duration("testcase-timeout", mtr.DefaultTestTimeout, "bound on each test")
		only      = flag.String("only", "both", "direct, vigil or both")
		prepOnly  = flag.Bool("prepare-only", false, "with --sandbox: prepare it and write OUT/vigil.yaml, run nothing")
		idle      = flag.Duration("pool-idle-timeout", mtr.PoolIdleTimeout, "pool.idle_timeout of the Vigil configuration (0 keeps the sandbox's)")
	)
	flag.Parse()
	if (*topology == "") == (*sbDir == "") {
		fmt.Fprintln(os.Stderr, "mtr-compat: give --topology or --sandbox (one of them)")
		return 2
	}
	if err := mtr.Available(*mtrDir); err != nil {
		fmt.Fprintln(os.Stderr, "mtr-compat:", err)
		return 2
	}
	protos := []mtr.Protocol{mtr.Text, mtr.PS}
	switch *protocol {
	case "text":
		protos = []mtr.Protocol{mtr.Text}
	case "ps":
		protos = []mtr.Protocol{mtr.PS}
	case "both":
	default:
		fmt.Fprintf(os.Stderr, "mtr-compat: --protocol is text, ps or both, not %q\n", *protocol)
		return 2
	}
	tests := mtr.Selection()
	if *testsFile != "" {
		var err error
		if tests, err = mtr.ReadSelection(*testsFile); err != nil {
			fmt.Fprintln(os.Stderr, "mtr-compat:", err)
			return 2
		}
	}
	known := mtr.KnownDifferences()
	if *knownFile != "" {
		var err error
		if known, err = mtr.ReadKnown(*knownFile); err != nil {
			fmt.Fprintln(os.Stderr, "mtr-compat:", err)
			return 2
		}
	}
	if *out == "" {
		*out = filepath.Join("compat-out", "mtr-"+time.Now().Format("20060102-150405"))
	}
	outDir, err := filepath.Abs(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mtr-compat:", err)
		return 2
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "mtr-compat:", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

	var sb *sandbox.Sandbox
	work, err := os.MkdirTemp("/tmp", "vigil-mtr-")
	if err != nil {
		logf("mtr-compat: %v", err)
		return 2
	}
	defer os.RemoveAll(work)
	if *sbDir != "" {
		if sb, err = sandbox.Load(*sbDir); err != nil {
			logf("mtr-compat: %v", err)
			return 2
		}
	} else {
		t0 := time.Now()
		sb, err = sandbox.Up(ctx, sandbox.Options{Dir: filepath.Join(work, "sb"), Topology: sandbox.Topology(*topology), Nodes: *nodes})
		if err != nil {
			logf("mtr-compat: sandbox up: %v", err)
			return 2
		}
		logf("mtr-compat: %s sandbox up in %s", *topology, time.Since(t0).Round(time.Millisecond))
		defer func() {
			dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := sb.Down(dctx, true); err != nil {
				logf("mtr-compat: sandbox down: %v", err)
			}
		}()
	}
	topo := string(sb.Topology())
	target, err := mtr.Prepare(ctx, sb, *mtrDir, logf)
	if err != nil {
		logf("mtr-compat: prepare: %v", err)
		return 2
	}

	// Vigil runs only during the runs through it: its monitor's and pool's
	// server connections would change Threads_connected, which tests that
	// wait for their sessions to end read, in the direct runs too.
	cfg := filepath.Join(outDir, "vigil.yaml")
	if *vigilAddr == "" && (*only != "direct" || *prepOnly) {
		if err := mtr.VigilConfig(sb.ConfigPath(), cfg, mtr.Users(), *idle); err != nil {
			logf("mtr-compat: %v", err)
			return 2
		}
	}
	if *prepOnly {
		logf("mtr-compat: %s prepared; Vigil configuration in %s", sb.Dir(), cfg)
		return 0
	}
	startRun := func(label string) (addr string, stop func(), err error) {
		if label == "direct" {
			return target.Primary.Host + ":" + fmt.Sprint(target.Primary.Port), func() {}, nil
		}
		if *vigilAddr != "" {
			return *vigilAddr, func() {}, nil
		}
		stop, err = mtr.StartVigil(*vigilBin, cfg, filepath.Join(outDir, label+"-vigil.log"), sb.ProxyAddr())
		return sb.ProxyAddr(), stop, err
	}

	code := 0
	report, err := os.Create(filepath.Join(outDir, "report.md"))
	if err != nil {
		logf("mtr-compat: %v", err)
		return 2
	}
	defer report.Close()
	fmt.Fprintf(report, "# mariadb-test-run through Vigil: %s\n\n%d tests (compat/mtr/selection.txt), %s\n\n", topo, len(tests), time.Now().Format(time.RFC3339))
	for _, proto := range protos {
		var runs = map[string]*mtr.RunResult{}
		for _, which := range []string{"direct", "vigil"} {
			if *only != "both" && *only != which {
				continue
			}
			label := which + "-" + string(proto)
			addr, stopVigil, err := startRun(which)
			if err != nil {
				logf("mtr-compat: %s: %v", label, err)
				return 2
			}
			res, err := target.Run(ctx, mtr.RunOptions{
				Label: which, Addr: addr, Protocol: proto, Tests: tests,
				WorkDir: filepath.Join(work, label), OutDir: filepath.Join(outDir, label), TestTimeout: *timeout,
			})
			stopVigil()
			if err != nil {
				logf("mtr-compat: %s: %v", label, err)
				return 2
			}
			logf("mtr-compat: %s %s %s: %s in %s", topo, proto, which, res.Summary(), res.Elapsed.Round(100*time.Millisecond))
			fmt.Fprintf(report, "`%s`: `%s`\n\n", label, res.Command)
			runs[which] = res
		}
		if runs["direct"] == nil || runs["vigil"] == nil {
			continue
		}
		cmp := mtr.Compare(topo, runs["direct"], runs["vigil"], known)
		cmp.WriteTable(report, 40)
		cmp.WriteTable(os.Stdout, 15)
		if len(cmp.Regressions) > 0 {
			code = 1
		}
	}
	logf("mtr-compat: report in %s", filepath.Join(outDir, "report.md"))
	return code
}
