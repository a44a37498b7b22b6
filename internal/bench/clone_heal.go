package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vigil-db/vigil/internal/topology"
)

// The third measurement of issue 27: kill -9 of the primary → full
// redundancy again (a writer and two replicating members, all ONLINE),
// with `lifecycle: {self_healing: true}` in the cluster. The key is new;
// a daemon that does not know it is skipped with a message, not failed.

// WithSelfHealing adds `lifecycle: {self_healing: true}` to every
// cluster of a rendered configuration.
func WithSelfHealing(data []byte) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	clusters, ok := doc["clusters"].([]any)
	if !ok || len(clusters) == 0 {
		return nil, errors.New("the configuration has no clusters")
	}
	for i, c := range clusters {
		m, ok := c.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("clusters[%d] is not a mapping", i)
		}
		lc, _ := m["lifecycle"].(map[string]any)
		if lc == nil {
			lc = map[string]any{}
		}
		lc["self_healing"] = true
		m["lifecycle"] = lc
	}
	return yaml.Marshal(doc)
}

// heal restarts the daemon with self-healing on and measures HealRuns
// kills of the primary.
func (e *cloneEnv) heal(ctx context.Context) error {
	data, err := e.cfg.Marshal()
	if err != nil {
		return err
	}
	if e.o.HealNoKey {
		e.note("heal: --heal-key=false: the kills run without lifecycle.self_healing (the baseline: full redundancy is not expected)")
	} else if data, err = WithSelfHealing(data); err != nil {
		return err
	}
	path := filepath.Join(e.work, "vigil-heal.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, e.o.VigilBin, "config", "validate", path).CombinedOutput()
	if err != nil {
		e.res.HealSkipped = fmt.Sprintf("this vigil rejects lifecycle.self_healing (%v): %s", err, FirstLine(string(out)))
		e.progress("heal: skipped: %s", e.res.HealSkipped)
		return nil
	}
	e.progress("heal: restarting vigil with %s", path)
	if err := e.vigil.stop(15 * time.Second); err != nil {
		return err
	}
	if err := e.startVigil(ctx, path); err != nil {
		return fmt.Errorf("vigil with self-healing: %w", err)
	}
	for i := 1; i <= e.o.HealRuns; i++ {
		if err := e.waitRedundant(ctx, 2*time.Minute); err != nil {
			e.note("heal run %d not started: the cluster is not fully redundant: %v", i, err)
			return nil
		}
		r := e.healRun(ctx, i)
		e.res.Heal = append(e.res.Heal, r)
		line := fmt.Sprintf("kill -9 %s", r.Old)
		if r.WriterSeconds != nil {
			line += fmt.Sprintf(" → writer %s in %.1f s", r.New, *r.WriterSeconds)
		}
		if r.RedundantSeconds != nil {
			line += fmt.Sprintf(" → 3 members in %.1f s", *r.RedundantSeconds)
		}
		if r.Error != "" {
			line += ": " + r.Error
		}
		e.progress("[heal %d/%d] %s", i, e.o.HealRuns, line)
		if err := ctx.Err(); err != nil {
			return err
		}
		if r.Error != "" {
			return nil
		}
	}
	return nil
}

func (e *cloneEnv) healRun(ctx context.Context, i int) HealRun {
	r := HealRun{Run: i}
	old, err := e.api.writer(ctx)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Old = old
	t0 := time.Now()
	if err := e.sb.Kill(ctx, old); err != nil {
		r.Error = fmt.Sprintf("kill %s: %v", old, err)
		return r
	}
	if r.New, err = e.api.waitNewWriter(ctx, old, e.o.HealTimeout); err != nil {
		r.Error = err.Error()
		return r
	}
	r.WriterSeconds = ptr(time.Since(t0).Seconds())
	// The host comes back (a reboot after the crash): self-healing
	// rejoins the old primary, or rebuilds it when it diverged. A lost
	// host is replaced by a spare instead (TestSelfHealing); this
	// sandbox has none.
	if err := e.sb.Start(ctx, old); err != nil {
		r.Error = fmt.Sprintf("start %s again: %v", old, err)
		return r
	}
	if err := e.waitRedundant(ctx, (e.o.HealTimeout - time.Since(t0)).Round(time.Second)); err != nil {
		r.Error = err.Error()
		return r
	}
	r.RedundantSeconds = ptr(time.Since(t0).Seconds())
	return r
}

// waitRedundant waits until Vigil shows three ONLINE servers, one of
// them the writer, and both others replicate (IO and SQL threads
// running, no error).
func (e *cloneEnv) waitRedundant(ctx context.Context, timeout time.Duration) error {
	return waitFor(ctx, max(timeout, time.Second), "full redundancy (3 ONLINE members, 2 replicating)", func() error {
		list, err := e.api.servers(ctx)
		if err != nil {
			return err
		}
		var writers int
		var replicas, bad []string
		for _, s := range list {
			switch {
			case s.State != "ONLINE":
				bad = append(bad, s.Name+" "+s.State)
			case s.Writer && s.Writable:
				writers++
			default:
				replicas = append(replicas, s.Name)
			}
		}
		if len(bad) > 0 || writers != 1 || len(replicas) != 2 {
			return fmt.Errorf("%d writer(s), replicas %v, not ONLINE: %s", writers, replicas, strings.Join(bad, ", "))
		}
		for _, n := range replicas {
			if err := e.replicating(ctx, n); err != nil {
				return err
			}
		}
		return nil
	})
}

// replicating checks node's replica status over its socket.
func (e *cloneEnv) replicating(ctx context.Context, node string) error {
	db, err := e.sb.RootDB(node)
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return fmt.Errorf("%s: %w", node, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	if !rows.Next() {
		return fmt.Errorf("%s does not replicate", node)
	}
	raw := make([]any, len(cols))
	vals := make([]*string, len(cols))
	for i := range raw {
		raw[i] = &vals[i]
	}
	if err := rows.Scan(raw...); err != nil {
		return err
	}
	row := make([]string, len(cols))
	for i, v := range vals {
		if v != nil {
			row[i] = *v
		}
	}
	rs := topology.ParseReplicaStatus(cols, row)
	if rs.IORunning != topology.IOYes || !rs.SQLRunning || rs.LastIOErrno != 0 || rs.LastSQLErrno != 0 {
		return fmt.Errorf("%s: IO thread %s, SQL thread running %t", node, rs.IORunning, rs.SQLRunning)
	}
	return nil
}
