package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/router"
	"github.com/vigil-db/vigil/internal/sandbox"
)

func TestAdminAPIAndCtl(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	const token = "e2e-s3cret"
	t.Setenv("VIGIL_ADMIN_TOKEN", token)
	const secretPW = "S3cr3t-pw-4711"
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3}, func(c *config.Config) {
		c.Admin.Token = token
		// A rule and a query log sink, so every series of the Grafana
		// dashboard exists.
		c.Clusters[0].Rules = []config.Rule{{Name: "never", Match: config.RuleMatch{User: "nobody"}, Route: "writer"}}
		c.Log.File = &config.LogFile{Path: filepath.Join(c.StateDir, "queries.jsonl")}
		c.Users = append(c.Users, config.User{Name: "secretive", Password: secretPW, BackendUser: "app", BackendPassword: "app",
			ReadYourWrites: router.RYWGTID, SessionWindow: config.Duration{Duration: 2 * time.Second}})
	})
	request := func(method, path, body string, auth bool) (int, string) {
		req, _ := http.NewRequest(method, "http://"+env.admin+path, strings.NewReader(body))
		if method != "GET" {
			req.Header.Set("Content-Type", "application/json")
		}
		if auth {
			req.Header.Set("Authorization", "Bearer "+token)
		} else {
			req.Header["Authorization"] = nil // present: no token added (admintoken_test.go)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	get := func(path string, auth bool) (int, string) { return request("GET", path, "", auth) }
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
		"vigil_routed_total{", "vigil_pool_connections{", "vigil_session_pins_total{", "vigil_cluster_writer_term{", "vigil_threads ", "go_goroutines"} {
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
	// Reload with a broken config: rejected with the key, traffic goes on
	// (sysbench runs through both reloads without a failed statement).
	sysbench(t, env.addr, "oltp_point_select", "--tables=1", "prepare")
	type sbResult struct {
		out string
		err error
	}
	sbDone := make(chan sbResult, 1)
	go func() {
		host, port, _ := strings.Cut(env.addr, ":")
		cmd := exec.Command("sysbench", "--db-driver=mysql", "--mysql-host="+host, "--mysql-port="+port,
			"--mysql-user=app", "--mysql-password=app", "--mysql-db=sbtest", "--tables=1", "--table-size=10000",
			"oltp_point_select", "--threads=8", "--time=6", "--report-interval=0", "run")
		out, err := cmd.CombinedOutput()
		sbDone <- sbResult{string(out), err}
	}()
	time.Sleep(1500 * time.Millisecond)
	defer func() {
		r := <-sbDone
		if r.err != nil || sysbenchErrors(r.out) != 0 || strings.Contains(r.out, "FATAL") {
			t.Errorf("sysbench during the reloads: %v\n%s", r.err, r.out)
		}
	}()
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
	// Moving the writer is refused as a whole (servers move live, the
	// writer only after a switchover).
	moved := regexp.MustCompile(`address: 127\.0\.0\.1:(\d+)`).ReplaceAllString(string(good), "address: 127.0.0.2:$1")
	os.WriteFile(cfgPath, []byte(moved), 0o644)
	if out, err := env.ctl(t, "reload"); err == nil || !strings.Contains(out, "is the writer") || !strings.Contains(out, "servers") {
		t.Errorf("reload that moves the writer: %v\n%s", err, out)
	}
	os.WriteFile(cfgPath, good, 0o644)

	// A new admin token by reload: the old one stops working at once.
	withToken := func(method, path, tok string) int {
		req, _ := http.NewRequest(method, "http://"+env.admin+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	os.WriteFile(cfgPath, []byte(strings.Replace(string(good), token, "e2e-rotated", 1)), 0o644)
	if code := withToken("POST", "/api/v1/config/reload", token); code != 200 {
		t.Errorf("reload with a new admin token: HTTP %d", code)
	}
	if old, rotated := withToken("GET", "/api/v1/servers", token), withToken("GET", "/api/v1/servers", "e2e-rotated"); old != 401 || rotated != 200 {
		t.Errorf("after the token changed by reload: old token HTTP %d (want 401), new token HTTP %d (want 200)", old, rotated)
	}
	os.WriteFile(cfgPath, good, 0o644)
	if code := withToken("POST", "/api/v1/config/reload", "e2e-rotated"); code != 200 {
		t.Errorf("reload back to the first token: HTTP %d", code)
	}

	// threads: a fixed count applies at the reload (the controller reads
	// the running config ten times a second); a bad value is refused.
	threads := func() string {
		_, m := get("/metrics", true)
		for _, line := range strings.Split(m, "\n") {
			if v, ok := strings.CutPrefix(line, "vigil_threads "); ok {
				return v
			}
		}
		return "absent"
	}
	withThreads := func(v string) []byte {
		re := regexp.MustCompile(`(?m)^threads: .*$`)
		if re.Match(good) {
			return re.ReplaceAll(good, []byte("threads: "+v))
		}
		return []byte("threads: " + v + "\n" + string(good))
	}
	os.WriteFile(cfgPath, withThreads("many"), 0o644)
	if out, err := env.ctl(t, "reload"); err == nil || !strings.Contains(out, "threads: must be auto or a number") {
		t.Errorf("reload with threads: many: %v\n%s", err, out)
	}
	os.WriteFile(cfgPath, withThreads("3"), 0o644)
	if out, err := env.ctl(t, "reload"); err != nil {
		t.Errorf("reload with threads: 3: %v\n%s", err, out)
	}
	Eventually(t, 5*time.Second, "vigil_threads 3 after the reload", func() error {
		if v := threads(); v != "3" {
			return fmt.Errorf("vigil_threads %s", v)
		}
		return nil
	})
	os.WriteFile(cfgPath, good, 0o644)
	if out, err := env.ctl(t, "reload"); err != nil {
		t.Errorf("reload back to threads: auto: %v\n%s", err, out)
	}
	Eventually(t, 5*time.Second, "vigil_threads within the CPUs with auto", func() error {
		if v := threads(); v == "3" || v == "absent" || v == "0" {
			return fmt.Errorf("vigil_threads %s", v)
		}
		return nil
	})

	do := func(method, path, body string) (int, string) { return request(method, path, body, true) }
	t.Run("OpenAPIAndConfig", func(t *testing.T) {
		code, body := get("/api/v1/openapi.json", false)
		if code != 200 || !strings.Contains(body, `"openapi"`) || !strings.Contains(body, "/api/v1/digests") {
			t.Errorf("openapi.json: %d %.200s", code, body)
		}
		for _, p := range []string{"/api/v1/config", "/api/v1/digests", "/api/v1/rules", "/api/v1/query_cache", "/api/v1/query_log"} {
			if code, _ := get(p, false); code != 401 {
				t.Errorf("GET %s without a token: %d, want 401", p, code)
			}
			if code, body := get(p, true); code != 200 {
				t.Errorf("GET %s: %d %s", p, code, body)
			}
		}
		_, body = get("/api/v1/config", true)
		if strings.Contains(body, token) || strings.Contains(body, secretPW) || !strings.Contains(body, "<redacted>") {
			t.Errorf("running config shows secrets:\n%s", body)
		}
		code, body = do("POST", "/api/v1/config/validate", "clusters: [{name: x, listen: nowhere}]\n")
		if code != 422 || !strings.Contains(body, "clusters[0].listen") {
			t.Errorf("validate of a bad config: %d %s", code, body)
		}
		good, _ := os.ReadFile(cfgPath)
		if code, body := do("POST", "/api/v1/config/validate", string(good)); code != 200 {
			t.Errorf("validate of the running config: %d %s", code, body)
		}
	})
	t.Run("Clusters", func(t *testing.T) {
		var list []struct {
			Name    string   `json:"name"`
			Writer  string   `json:"writer"`
			Servers []string `json:"servers"`
			Term    uint64   `json:"term"`
		}
		_, body := get("/api/v1/clusters", true)
		if err := json.Unmarshal([]byte(body), &list); err != nil || len(list) != 1 || list[0].Writer != "node1" || len(list[0].Servers) != 3 || list[0].Term == 0 {
			t.Errorf("clusters: %v %s", err, body)
		}
		if out, err := env.ctl(t, "clusters"); err != nil || !strings.Contains(out, "node1") {
			t.Errorf("ctl clusters: %v\n%s", err, out)
		}
	})
	t.Run("QueryProcessingCommands", func(t *testing.T) {
		for _, args := range [][]string{{"digests", "--limit", "3"}, {"digests", "--by", "key", "--sort", "p99"}, {"rules"},
			{"cache"}, {"cache", "--purge"}, {"querylog"}, {"--json", "digests"}, {"digests", "--reset"}} {
			out, err := env.ctl(t, args...)
			if err != nil {
				t.Errorf("ctl %v: %v\n%s", args, err, out)
			}
			switch args[0] {
			case "rules":
				if !strings.Contains(out, "never") {
					t.Errorf("ctl rules lacks the configured rule:\n%s", out)
				}
			case "querylog":
				if !strings.Contains(out, `"enabled": true`) {
					t.Errorf("ctl querylog:\n%s", out)
				}
			}
		}
		if out, err := env.ctl(t, "digests", "--sort", "sideways"); err == nil {
			t.Errorf("ctl digests with a bad sort succeeded:\n%s", out)
		}
	})
	t.Run("KillSession", func(t *testing.T) {
		victim := openDB(t, fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s", env.addr))
		victim.SetMaxOpenConns(1)
		errc := make(chan error, 1)
		go func() {
			var v int
			errc <- victim.QueryRow("SELECT SLEEP(20)").Scan(&v)
		}()
		var id uint32
		Eventually(t, 10*time.Second, "the sleeping session listed", func() error {
			var list []struct {
				ID      uint32 `json:"id"`
				Command string `json:"command"`
			}
			_, body := get("/api/v1/sessions", true)
			_ = json.Unmarshal([]byte(body), &list)
			for _, s := range list {
				if strings.Contains(s.Command, "SLEEP") {
					id = s.ID
					return nil
				}
			}
			return fmt.Errorf("not yet: %s", body)
		})
		if out, err := env.ctl(t, "kill", fmt.Sprint(id)); err != nil {
			t.Fatalf("ctl kill: %v\n%s", err, out)
		}
		select {
		case err := <-errc:
			if err == nil {
				t.Errorf("the killed session's statement succeeded")
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("the killed session's statement still runs")
		}
		if code, _ := do("DELETE", "/api/v1/sessions/999999", ""); code != 404 {
			t.Errorf("kill of an unknown session: %d, want 404", code)
		}
	})
	t.Run("MetricsSeries", func(t *testing.T) {
		secret := openDB(t, fmt.Sprintf("secretive:%s@tcp(%s)/vigil_test?timeout=5s", secretPW, env.addr))
		for range 5 {
			var one int
			if err := secret.QueryRow("SELECT 1").Scan(&one); err != nil {
				t.Fatal(err)
			}
		}
		wrong := openDB(t, fmt.Sprintf("secretive:%s-wrong@tcp(%s)/vigil_test?timeout=5s", secretPW, env.addr))
		_ = wrong.Ping()
		_, metrics := get("/metrics", true)
		for _, series := range []string{`vigil_query_duration_seconds_bucket{cluster=`, `vigil_user_queries_total{cluster="`, `user="secretive"`,
			"vigil_server_queries_total{", "vigil_pool_waits_total{", "vigil_operations_total{", "vigil_operation_duration_seconds_bucket{",
			"vigil_query_log_dropped_total", "vigil_rule_actions_total{", "vigil_digest_entries{", "vigil_query_cache_operations_total{"} {
			if !strings.Contains(metrics, series) {
				t.Errorf("/metrics lacks %s", series)
			}
		}
	})
	t.Run("GrafanaSeriesExist", func(t *testing.T) {
		root, err := RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(root, "docs", "grafana", "vigil.json"))
		if err != nil {
			t.Fatal(err)
		}
		var dash struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(data, &dash); err != nil {
			t.Fatalf("docs/grafana/vigil.json: %v", err)
		}
		_, metrics := get("/metrics", true)
		exposed := map[string]bool{}
		for _, line := range strings.Split(metrics, "\n") {
			if line == "" || line[0] == '#' {
				continue
			}
			name, _, _ := strings.Cut(line, "{")
			name, _, _ = strings.Cut(name, " ")
			exposed[name] = true
		}
		seriesName := regexp.MustCompile(`\b(vigil_[a-z0-9_]+|go_[a-z0-9_]+|process_[a-z0-9_]+)\b`)
		n := 0
		for _, p := range dash.Panels {
			for _, tg := range p.Targets {
				for _, m := range seriesName.FindAllString(tg.Expr, -1) {
					n++
					if !exposed[m] {
						t.Errorf("panel %q uses %s, which /metrics does not expose", p.Title, m)
					}
				}
			}
		}
		if n < 20 {
			t.Errorf("only %d series references found in the dashboard", n)
		}
	})
	t.Run("NoSecretsInLogs", func(t *testing.T) {
		data, err := os.ReadFile(env.v.logf)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{secretPW, token} {
			if strings.Contains(string(data), secret) {
				t.Errorf("vigil's log (debug level) contains a secret %q", secret)
			}
		}
		if !strings.Contains(string(data), "client authentication failed") {
			t.Errorf("the failed login is not in the log")
		}
	})
}
