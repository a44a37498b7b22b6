// Command vigil is the Vigil daemon and its tools: run (the proxy and
// failover manager), agent (the datadir agent of a database host), sandbox
// (local MariaDB topologies), ctl (the operator CLI), config and version. The benchmarks are a program of their own,
// vigil-bench, so that this one links no plotting code (deps_test.go).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/vigil-db/vigil/internal/agent"
	"github.com/vigil-db/vigil/internal/ctl"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// Set by the linker: -X main.version=... -X main.commit=...
var (
	version = "dev"
	commit  = "unknown"
)

const usage = `vigil — a MySQL/MariaDB proxy that routes, watches and fails over

Usage:
  vigil run --config FILE          serve the clusters of FILE
  vigil agent COMMAND ...          the datadir agent of a database host (vigil agent help)
  vigil sandbox COMMAND ...        local MariaDB topologies (vigil sandbox help)
  vigil ctl COMMAND ...            operate a running Vigil (vigil ctl --help)
  vigil config validate FILE       check FILE as vigil run and a reload would
  vigil config init [--out FILE]   write a starter config, every key explained
  vigil config show FILE           FILE without its defaults (--effective: every key resolved)
  vigil version                    print version and commit

Run "vigil COMMAND --help" for the flags of a command. The benchmarks are
a program of their own, vigil-bench (docs/benchmarks.md).
`

func main() {
	os.Exit(realMain(os.Args[1:]))
}

func realMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "version", "--version", "-v":
		fmt.Printf("vigil %s (commit %s)\n", version, commit)
		return 0
	case "run":
		return cmdRun(ctx, rest)
	case "agent":
		return agent.Command(ctx, rest, os.Stdout, os.Stderr)
	case "sandbox":
		return sandbox.Command(ctx, rest, os.Stdout, os.Stderr)
	case "bench":
		// Said rather than forwarded: a daemon that execs programs found
		// beside itself is a surprise, and scripts should learn the name.
		fmt.Fprintf(os.Stderr, "vigil: the benchmarks are their own command now, vigil-bench (make build writes it beside bin/vigil; docs/benchmarks.md):\n  vigil-bench %s\n", strings.Join(rest, " "))
		return 2
	case "ctl":
		return ctl.Command(ctx, rest)
	case "config":
		return cmdConfig(ctx, rest)
	case "help", "--help", "-h":
		fmt.Print(usage)
		return 0
	default:
		fmt.Fprintf(os.Stderr, "vigil: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}
