package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/daemon"
)

// cmdRun: `vigil run --config FILE`; the runtime is internal/daemon.
func cmdRun(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "config file (YAML)")
	logFormat := fs.String("log-format", "", "text or json (overrides log.format)")
	logLevel := fs.String("log-level", "", "debug, info, warn or error (overrides log.level)")
	pprofAddr := fs.String("pprof", "", "serve Go profiles on this address (e.g. 127.0.0.1:6061), for performance work")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *cfgPath == "" {
		fmt.Fprintln(os.Stderr, "vigil run: --config FILE is required")
		return 2
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vigil run: %v\n", err)
		return 1
	}
	if *logFormat != "" {
		cfg.Log.Format = *logFormat
	}
	if *logLevel != "" {
		cfg.Log.Level = *logLevel
	}
	return daemon.Run(ctx, cfg, daemon.RunOptions{ConfigPath: *cfgPath, Version: version, Pprof: *pprofAddr})
}
