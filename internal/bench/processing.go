package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// RulesTarget names the Vigil of the rules_scaling scenario with n rules.
// The one without rules is a fresh Vigil too, not the plain target, so
// that the three differ only in their rules (the plain one has served
// thousands of clients by then, and its heap shows it).
func RulesTarget(n int) string { return fmt.Sprintf("vigil+%drules", n) }

// RuleCountOf is the inverse of RulesTarget: the rules of a target of the
// rules_scaling scenario, false for other targets.
func RuleCountOf(target string) (int, bool) {
	var n int
	if _, err := fmt.Sscanf(target, "vigil+%drules", &n); err != nil || RulesTarget(n) != target {
		return 0, false
	}
	return n, true
}

// processingRules are rules a real deployment might have that do not match
// sysbench's statements, so every statement is checked against all of
// them: digest patterns (one cached lookup per statement), user and schema
// rules, and a few statement-text patterns.
func processingRules(n int) []config.Rule {
	var out []config.Rule
	for i := range n {
		r := config.Rule{Name: fmt.Sprintf("bench-%04d", i+1), Route: "writer"}
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

// writeVigilConfig writes the plain Vigil's configuration: the sandbox's
// and, with Processing, digests off so that vigil+rules measures the
// whole cost of processing.
func (e *env) writeVigilConfig() (string, error) {
	cfg, err := config.Load(e.sb.ConfigPath())
	if err != nil {
		return "", err
	}
	if e.o.Processing {
		off := false
		cfg.Digests.Enabled = &off
	}
	path := filepath.Join(e.work, "vigil.yaml")
	return path, writeConfig(cfg, path)
}

// derivedVigilConfig writes the configuration of another Vigil on the
// same servers: the plain one changed by mutate, with its own listen and
// admin ports and state directory.
func (e *env) derivedVigilConfig(name string, mutate func(*config.Config)) (string, error) {
	cfg, err := config.Load(e.vigilCfg)
	if err != nil {
		return "", err
	}
	mutate(cfg)
	if cfg.Clusters[0].Listen, err = freeLoopbackAddr(); err != nil {
		return "", err
	}
	if cfg.Admin.Listen, err = freeLoopbackAddr(); err != nil {
		return "", err
	}
	cfg.StateDir = filepath.Join(e.work, "state-"+name)
	path := filepath.Join(e.work, "vigil-"+name+".yaml")
	return path, writeConfig(cfg, path)
}

func writeConfig(cfg *config.Config, path string) error {
	data, err := cfg.Marshal()
	if err != nil {
		return err
	}
	data = DropKeys(data, os.Getenv("VIGIL_BENCH_DROP_KEYS"))
	return os.WriteFile(path, data, 0o644)
}

// DropKeys removes the lines of a rendered configuration that set one of
// keys (comma-separated, without their section), with the block a
// dropped key opens (the lines indented deeper below it). Marshal writes
// every default, and an older build — measured against this one with
// --vigil-binary, VIGIL_BENCH_DROP_KEYS naming the keys it does not know
// — rejects unknown keys.
func DropKeys(data []byte, keys string) []byte {
	if keys == "" {
		return data
	}
	drop := strings.Split(keys, ",")
	var out []string
	block := -1 // the indentation of the dropped key whose block is being skipped
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if block >= 0 && (trimmed == "" || indent > block || strings.HasPrefix(trimmed, "- ") && indent == block) {
			continue
		}
		block = -1
		k, _, _ := strings.Cut(trimmed, ":")
		if slices.Contains(drop, k) {
			block = indent
			continue
		}
		out = append(out, line)
	}
	return []byte(strings.Join(out, "\n"))
}

// logName is a child's log file name: vigil+100rules → vigil-100rules.log.
func logName(name string) string {
	return strings.NewReplacer("+", "-", "=", "-").Replace(name) + ".log"
}

// startExtraVigil runs another Vigil with the configuration at cfgPath
// and returns it as a target.
func (e *env) startExtraVigil(ctx context.Context, name, cfgPath, description string) (*child, Target, error) {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, Target{}, err
	}
	addr := cfg.Clusters[0].Listen
	bin, args := e.proxyCommand(e.o.VigilBin, "run", "--config", cfgPath)
	c, err := startChild(name, filepath.Join(e.work, logName(name)), bin, args...)
	if err != nil {
		return nil, Target{}, err
	}
	e.extra = append(e.extra, c)
	if err := c.waitListening(ctx, addr, 30*time.Second); err != nil {
		return c, Target{}, err
	}
	if err := e.waitSQL(ctx, name, addr); err != nil {
		return c, Target{}, err
	}
	e.progress("%s (pid %d) serves %s", name, c.PID(), addr)
	return c, Target{Name: name, Addr: addr, PID: c.PID(), Description: description}, nil
}

// startVigilRules runs the processing Vigil (--processing).
func (e *env) startVigilRules(ctx context.Context) error {
	path, err := e.derivedVigilConfig("rules", func(cfg *config.Config) {
		on := true
		cfg.Digests.Enabled = &on
		cfg.Log.Queries = true
		cfg.Log.File = &config.LogFile{Path: filepath.Join(e.work, "queries.jsonl"), MaxSize: 256 << 20, Keep: 1}
		cfg.Clusters[0].Rules = processingRules(ProcessingRules)
	})
	if err != nil {
		return err
	}
	c, t, err := e.startExtraVigil(ctx, TargetVigilRules, path,
		fmt.Sprintf("Vigil with digests, %d query rules and a file query log of every statement", ProcessingRules))
	e.vigilRules = c
	if err != nil {
		return err
	}
	e.targets = append(e.targets, t)
	return nil
}

// runRules measures Vigils that differ only in their number of rules:
// none and Options.RuleCounts, started for this case and stopped after
// it.
func (e *env) runRules(ctx context.Context, c Case, res *Results) error {
	var targets []Target
	var started []*child
	defer func() {
		for _, ch := range started {
			if err := ch.stop(15 * time.Second); err != nil {
				e.note("%v", err)
			}
		}
	}()
	for _, n := range ruleCounts(e.o.RuleCounts) {
		name := RulesTarget(n)
		path, err := e.derivedVigilConfig(fmt.Sprintf("%drules", n), func(cfg *config.Config) {
			cfg.Clusters[0].Rules = processingRules(n)
		})
		if err != nil {
			return err
		}
		ch, t, err := e.startExtraVigil(ctx, name, path, fmt.Sprintf("Vigil with %d query rules that match no statement of the workload", n))
		if ch != nil {
			started = append(started, ch)
		}
		if err != nil {
			return err
		}
		targets = append(targets, t)
	}
	return e.runCase(ctx, c, targets, res)
}

// ruleCounts are the rule counts of the rules_scaling case: none, then
// the positive counts asked for, without repeats.
func ruleCounts(asked []int) []int {
	out := []int{0}
	for _, n := range asked {
		if n > 0 && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
