package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/daemon"
)

// cmdConfig: `vigil config init` writes a starter file and `vigil config
// show [--effective] FILE` prints one (internal/config does both).
// `vigil config validate FILE` checks a config file as
// `vigil run` and a reload would, without starting anything: parsed and
// validated, then every cluster's parts built — rules compiled, TLS
// files loaded, monitor and failover options validated by their owners.
func cmdConfig(_ context.Context, args []string) int {
	if len(args) > 0 && args[0] == "init" {
		return config.InitCommand(args[1:], os.Stdout, os.Stderr)
	}
	if len(args) > 0 && args[0] == "show" {
		return config.ShowCommand(args[1:], os.Stdout, os.Stderr)
	}
	if len(args) == 0 || args[0] != "validate" {
		fmt.Fprintln(os.Stderr, "usage: vigil config validate FILE | init [flags] | show [--effective] FILE")
		return 2
	}
	fs := flag.NewFlagSet("config validate", flag.ContinueOnError)
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: vigil config validate FILE")
		return 2
	}
	path := fs.Arg(0)
	if err := daemon.ValidateFile(path); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
		return 1
	}
	fmt.Printf("%s: valid\n", path)
	return 0
}
