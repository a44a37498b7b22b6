package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
)

func TestAdminAPIAndCtl(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	const token = "e2e-s3cret"
	t.Setenv("VIGIL_ADMIN_TOKEN", token)
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3}, func(c *config.Config) {
		c.Admin.Token = token
	})
	get := func(path string, auth bool) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+env.admin+path, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, p := range []string{"/api/v1/servers", "/api/v1/events", "/api/v1/sessions", "/metrics"} {
		if code, _ := get(p, false); code != 401 {
			t.Errorf("GET %s without a token: %d, want 401", p, code)
		}
	}
	if code, _ := get("/healthz", false); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
	if code, body := get("/readyz", false); code != 200 {
		t.Errorf("/readyz: %d %s", code, body)
	}
	code, body := get("/api/v1/servers", true)
	var servers []map[string]any
	if code != 200 || json.Unmarshal([]byte(body), &servers) != nil || len(servers) != 3 {
		t.Fatalf("servers: %d %s", code, body)
	}
	for _, k := range []string{"name", "address", "cluster", "role", "state", "readable", "writable", "lag_seconds", "gtid"} {
		if _, ok := servers[0][k]; !ok {
			t.Errorf("server JSON lacks %q: %v", k, servers[0])
		}
	}
	// Some traffic, then the metrics show it.
	db := openDB(t, fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s", env.addr))
	for range 20 {
		var one int
		if err := db.QueryRow("SELECT 1").Scan(&one); err != nil {
			t.Fatal(err)
		}
	}
	_, metrics := get("/metrics", true)
	for _, series := range []string{"vigil_server_state{", "vigil_server_readable{", "vigil_server_writer{", "vigil_queries_total{",
		"vigil_routed_total{", "vigil_pool_connections{", "vigil_session_pins_total{", "vigil_cluster_writer_term{", "go_goroutines"} {
		if !strings.Contains(metrics, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	// ctl commands.
	if out, err := env.ctl(t, "servers"); err != nil || !strings.Contains(out, "node1") || !strings.Contains(out, "rw*") {
		t.Errorf("ctl servers: %v\n%s", err, out)
	}
	if out, err := env.ctl(t, "--json", "sessions"); err != nil || !strings.HasPrefix(strings.TrimSpace(out), "[") {
		t.Errorf("ctl sessions: %v\n%s", err, out)
	}
	if out, err := env.ctl(t, "events", "--kind", "writer_change"); err != nil || !strings.Contains(out, "writer_change") {
		t.Errorf("ctl events: %v\n%s", err, out)
	}
	if out, err := env.ctl(t, "set-state", "node3", "OFFLINE_SOFT"); err != nil {
		t.Fatalf("set-state: %v\n%s", err, out)
	}
	if s := env.server(t, "node3"); s.State != "OFFLINE_SOFT" {
		t.Errorf("node3 is %s after set-state OFFLINE_SOFT", s.State)
	}
	if out, err := env.ctl(t, "set-state", "node3", "ONLINE"); err != nil {
		t.Fatalf("set-state ONLINE: %v\n%s", err, out)
	}
	Eventually(t, 10*time.Second, "node3 ONLINE again", func() error {
		if s := env.server(t, "node3"); s.State != "ONLINE" {
			return fmt.Errorf("node3 %s", s.State)
		}
		return nil
	})
	if out, err := env.ctl(t, "set-state", "node3", "SIDEWAYS"); err == nil {
		t.Errorf("set-state with a bad state succeeded:\n%s", out)
	}
	if out, err := env.ctl(t, "failover"); err == nil || !strings.Contains(out, "alive") {
		t.Errorf("failover of a healthy primary was not refused: %v\n%s", err, out)
	}
	if out, err := env.ctl(t, "--token", "wrong", "servers"); err == nil || !strings.Contains(out, "401") {
		t.Errorf("wrong token: %v\n%s", err, out)
	}
	// Reload with a broken config: rejected with the key, traffic goes on.
	cfgPath := filepath.Join(env.sb.Dir(), "vigil-e2e.yaml")
	good, _ := os.ReadFile(cfgPath)
	broken := strings.Replace(string(good), "type: replication", "type: sharded", 1)
	if err := os.WriteFile(cfgPath, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := env.ctl(t, "reload")
	if err == nil || !strings.Contains(out, "clusters[0].type") {
		t.Errorf("reload of a broken config: %v\n%s", err, out)
	}
	os.WriteFile(cfgPath, good, 0o644)
	var one int
	if err := db.QueryRow("SELECT 1").Scan(&one); err != nil {
		t.Fatalf("traffic after a rejected reload: %v", err)
	}
	if out, err := env.ctl(t, "reload"); err != nil {
		t.Errorf("reload of the good config: %v\n%s", err, out)
	}
}
