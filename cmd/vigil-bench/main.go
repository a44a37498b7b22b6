// Command vigil-bench measures Vigil: next to the primary alone and
// HAProxy (vigil-bench), and what each durability and HA choice costs
// (vigil-bench topology); internal/bench does the work. It is a program
// of its own so that the daemon, which holds every client's session,
// links none of the bench's plotting, font and PDF code (docs/design.md).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/vigil-db/vigil/internal/bench"
)

// Set by the linker: -X main.version=... -X main.commit=...
var (
	version = "dev"
	commit  = "unknown"
)

func main() {
	os.Exit(realMain(os.Args[1:]))
}

func realMain(args []string) int {
	if len(args) == 1 && (args[0] == "version" || args[0] == "--version") {
		fmt.Printf("vigil-bench %s (commit %s)\n", version, commit)
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return bench.Command(ctx, args, os.Stdout, os.Stderr)
}
