package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/qstats"
)

// cmdConfig: `vigil config validate FILE` checks a config file as
// `vigil run` and a reload would, without starting anything: parsed and
// validated, then every cluster's parts built — rules compiled, TLS
// files loaded, monitor and failover options validated by their owners.
func cmdConfig(_ context.Context, args []string) int {
	if len(args) == 0 || args[0] != "validate" {
		fmt.Fprintln(os.Stderr, "usage: vigil config validate FILE")
		return 2
	}
	fs := flag.NewFlagSet("config validate", flag.ContinueOnError)
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: vigil config validate FILE")
		return 2
	}
	path := fs.Arg(0)
	if err := validateConfigFile(path); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
		return 1
	}
	fmt.Printf("%s: valid\n", path)
	return 0
}

func validateConfigFile(path string) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	d := &daemon{cache: newCache(cfg)}
	var errs []error
	for i, cc := range cfg.Clusters {
		key := fmt.Sprintf("clusters[%d]", i)
		if _, err := d.processing(cfg, cc, qstats.New(cfg.Digests.MaxEntries), nil); err != nil {
			errs = append(errs, fmt.Errorf("%s.rules: %w", key, err))
		}
		if _, err := frontendOptions(cc, nil); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
		if err := monitorOptions(cc, nil).Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s.monitor: %w", key, err))
		}
		var names []string
		for _, s := range cc.Servers {
			names = append(names, s.Name)
		}
		if err := executorOptions(cfg, cc).Engine.Validate(names); err != nil {
			errs = append(errs, fmt.Errorf("%s.failover: %w", key, err))
		}
	}
	return errors.Join(errs...)
}
