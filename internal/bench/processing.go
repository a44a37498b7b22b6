package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/vigil-db/vigil/internal/config"
)

// TargetVigilRules is a second Vigil with query processing on: digests,
// ProcessingRules rules and a file query log of every statement. Its qps
// next to the plain "vigil" target (digests off, no rules, no log) is the
// cost of query processing.
const TargetVigilRules = "vigil+rules"

// ProcessingRules is how many rules the processing target runs.
const ProcessingRules = 100

// processingRules are rules a real deployment might have that do not match
// sysbench's statements, so every statement is checked against all of
// them: digest patterns (one cached lookup per statement), user and schema
// rules, and a few statement-text patterns.
func processingRules(n int) []config.Rule {
	var out []config.Rule
	for i := range n {
		r := config.Rule{Name: fmt.Sprintf("bench-%03d", i+1), Route: "writer"}
		switch i % 4 {
		case 0, 1:
			r.Match.Digest = fmt.Sprintf(`^SELECT report_%d FROM`, i)
		case 2:
			r.Match.User = fmt.Sprintf("reporting_%d", i)
		case 3:
			r.Match.Schema = fmt.Sprintf("archive_%d", i)
			r.Match.Query = fmt.Sprintf(`(?i)^\s*SELECT\s+export_%d`, i)
		}
		out = append(out, r)
	}
	return out
}

// writeVigilConfigs writes the plain Vigil's config (query processing off)
// and, with Processing, the second Vigil's (everything on, its own ports).
func (e *env) writeVigilConfigs() (plain, rules string, err error) {
	cfg, err := config.Load(e.sb.ConfigPath())
	if err != nil {
		return "", "", err
	}
	if !e.o.Processing {
		return e.sb.ConfigPath(), "", nil
	}
	off := false
	cfg.Digests.Enabled = &off
	plain = filepath.Join(e.work, "vigil-plain.yaml")
	if err := writeConfig(cfg, plain); err != nil {
		return "", "", err
	}
	on := true
	cfg.Digests.Enabled = &on
	cfg.Log.Queries = true
	cfg.Log.File = &config.LogFile{Path: filepath.Join(e.work, "queries.jsonl"), MaxSize: 256 << 20, Keep: 1}
	cfg.Clusters[0].Rules = processingRules(ProcessingRules)
	if cfg.Clusters[0].Listen, err = freeLoopbackAddr(); err != nil {
		return "", "", err
	}
	if cfg.Admin.Listen, err = freeLoopbackAddr(); err != nil {
		return "", "", err
	}
	cfg.StateDir = filepath.Join(e.work, "state-rules")
	rules = filepath.Join(e.work, "vigil-rules.yaml")
	return plain, rules, writeConfig(cfg, rules)
}

func writeConfig(cfg *config.Config, path string) error {
	data, err := cfg.Marshal()
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// startVigilRules runs the second Vigil.
func (e *env) startVigilRules(ctx context.Context, cfgPath string) error {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	addr := cfg.Clusters[0].Listen
	e.vigilRules, err = startChild("vigil+rules", filepath.Join(e.work, "vigil-rules.log"), e.o.VigilBin, "run", "--config", cfgPath)
	if err != nil {
		return err
	}
	if err := e.vigilRules.waitListening(ctx, addr, 30*time.Second); err != nil {
		return err
	}
	if err := e.waitSQL(ctx, "vigil+rules", addr); err != nil {
		return err
	}
	e.targets = append(e.targets, Target{Name: TargetVigilRules, Addr: addr, PID: e.vigilRules.PID(),
		Description: fmt.Sprintf("Vigil with digests, %d query rules and a file query log of every statement", ProcessingRules)})
	e.progress("vigil+rules (pid %d) serves %s", e.vigilRules.PID(), addr)
	return nil
}
