package agent_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// TestSandboxSpares: `vigil sandbox up --spares 1` runs spare1, an empty
// mariadbd with read_only=ON that replicates from nobody, with an agent
// that answers over mutual TLS; vigil.yaml names it under
// lifecycle.spares and loads; `sandbox add --spare` adds spare2 and says
// how to give it to Vigil; kill and start work on a spare by name; down
// stops spares and their agents.
func TestSandboxSpares(t *testing.T) {
	requireIntegration(t)
	bin := buildVigil(t)
	dir, err := os.MkdirTemp("", "vigil-spare-sb-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append(args, "--dir", dir)...).CombinedOutput()
		if err != nil {
			t.Fatalf("vigil %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	defer func() {
		if out, err := exec.Command(bin, "sandbox", "down", "--dir", dir, "--purge").CombinedOutput(); err != nil {
			t.Errorf("sandbox down: %v\n%s", err, out)
		}
	}()
	t.Logf("%s", run("sandbox", "up", "--nodes", "2", "--spares", "1", "--self-healing", "--replace-after", "30s"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := sandbox.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if names := strings.Join(sb.NodeNames(), ","); names != "node1,node2" {
		t.Errorf("nodes: %s", names)
	}
	sp := sb.Spares()
	if len(sp) != 1 || sp[0].Name != "spare1" {
		t.Fatalf("spares: %+v", sp)
	}
	checkSpare := func(name string) {
		t.Helper()
		n, err := sb.Node(name)
		if err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("mysql", sb.DSN(name, "app", "app", ""))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var ro, sid int
		if err := db.QueryRowContext(ctx, "SELECT @@read_only, @@server_id").Scan(&ro, &sid); err != nil || ro != 1 || sid != n.ServerID {
			t.Errorf("%s: read_only=%d server_id=%d (want 1, %d): %v", name, ro, sid, n.ServerID, err)
		}
		rows, err := db.QueryContext(ctx, "SHOW SLAVE STATUS")
		if err != nil {
			t.Fatal(err)
		}
		if rows.Next() {
			t.Errorf("%s replicates", name)
		}
		_ = rows.Close()
		c, err := sb.AgentClient(name)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		st, err := c.Status(ctx)
		if err != nil || !st.Answering || !st.ReadOnly || st.Replica || st.Datadir != n.Datadir {
			t.Errorf("%s's agent status over mTLS: %+v %v", name, st, err)
		}
	}
	checkSpare("spare1")

	cfg, err := config.Load(sb.ConfigPath())
	if err != nil {
		t.Fatalf("vigil.yaml with spares: %v", err)
	}
	lc := cfg.Clusters[0].Lifecycle
	if len(cfg.Clusters[0].Servers) != 2 || len(lc.Spares) != 1 || lc.Spares[0].Name != "spare1" ||
		lc.Spares[0].Address != sp[0].Addr() || !lc.SelfHealing || lc.ReplaceAfter.Duration != 30*time.Second {
		t.Errorf("vigil.yaml: servers %+v, lifecycle %+v", cfg.Clusters[0].Servers, lc)
	}

	out := run("sandbox", "add", "--spare")
	if !strings.Contains(out, "- name: spare2") || !strings.Contains(out, "reload") {
		t.Errorf("add --spare does not say how to use spare2:\n%s", out)
	}
	if sb, err = sandbox.Load(dir); err != nil {
		t.Fatal(err)
	}
	checkSpare("spare2")

	var st sandbox.StatusReport
	if err := json.Unmarshal([]byte(run("sandbox", "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if n, ok := st.Node("spare2"); !ok || n.Role != sandbox.RoleSpare || !n.Reachable || len(st.Agents) != 4 || !st.Agents[3].Answering || st.Agents[3].Node != "spare2" {
		t.Errorf("status: %+v", st)
	}
	run("sandbox", "kill", "spare1")
	if running, err := sb.IsRunning("spare1"); err != nil || running {
		t.Errorf("spare1 runs after kill: %v", err)
	}
	run("sandbox", "start", "spare1")
	checkSpare("spare1")

	run("sandbox", "down")
	for _, a := range sb.Manifest().Agents {
		if out, _ := exec.Command("pgrep", "-f", a.Config).Output(); len(out) > 0 {
			t.Errorf("%s still runs after down", a.Name)
		}
	}
	if out, _ := exec.Command("pgrep", "-f", filepath.Join(dir, "spare")).Output(); len(out) > 0 {
		t.Errorf("a spare still runs after down: %s", out)
	}
}
