package e2e

// Semi-sync fallback seen live (issue 18): the monitor's event, the
// metrics, the server view and the bench's count.

import (
	"context"
	"database/sql"
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

// adminGet is GET path on env's admin API with the sandbox config's token.
func adminGet(t *testing.T, env *clusterEnv, path string) string {
	t.Helper()
	cfg, err := config.Load(env.sb.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "http://"+env.admin+path, nil)
	if cfg.Admin.Token != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.Admin.Token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

// The primary's replicas stop acknowledging (their IO threads stopped)
// and rpl_semi_sync_master_timeout is small: the primary falls back to
// asynchronous replication. Vigil journals it, shows it in /metrics and
// in the server view while it lasts, and journals its end with how many
// commits went unacknowledged.
func TestSemiSyncFallbackDetected(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	ctx := context.Background()
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3, SemiSync: true}, nil)
	p := env.writer(t)
	db := openDB(t, fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s&readTimeout=10s&writeTimeout=5s", env.addr))
	mustExec(t, db, "CREATE TABLE IF NOT EXISTS vigil_test.fallback (n INT PRIMARY KEY)")
	asyncSeries := fmt.Sprintf(`vigil_semi_sync_async{cluster="sandbox",server="%s"}`, p)
	fallsSeries := fmt.Sprintf(`vigil_semi_sync_fallbacks_total{cluster="sandbox",server="%s"}`, p)
	if v := metricIn(adminGet(t, env, "/metrics"), asyncSeries); v != 0 {
		t.Fatalf("%s = %v before any fallback", asyncSeries, v)
	}
	if _, err := env.sb.SQL(ctx, p, "SET GLOBAL rpl_semi_sync_master_timeout = 200"); err != nil {
		t.Fatal(err)
	}
	var replicas []string
	for _, n := range env.sb.NodeNames() {
		if n != p {
			replicas = append(replicas, n)
			if _, err := env.sb.SQL(ctx, n, "STOP SLAVE IO_THREAD"); err != nil {
				t.Fatal(err)
			}
		}
	}
	t0 := time.Now()
	for i := 1; i <= 20; i++ {
		mustExec(t, db, fmt.Sprintf("INSERT INTO vigil_test.fallback VALUES (%d)", i))
	}
	Eventually(t, 15*time.Second, "the semi_sync_fallback event", func() error {
		if ev := env.events(t); !strings.Contains(ev, "semi_sync_fallback") {
			return fmt.Errorf("no event yet:\n%s", ev)
		}
		return nil
	})
	ev := env.events(t)
	if !strings.Contains(ev, "fell back to asynchronous replication") || !strings.Contains(ev, "a failover now could lose") {
		t.Errorf("the fallback event does not say what it means:\n%s", ev)
	}
	body := adminGet(t, env, "/metrics")
	if metricIn(body, asyncSeries) != 1 || metricIn(body, fallsSeries) < 1 {
		t.Errorf("metrics during the fallback: %s = %v, %s = %v", asyncSeries, metricIn(body, asyncSeries), fallsSeries, metricIn(body, fallsSeries))
	}
	if s := env.server(t, p); s.SemiSyncAsyncSince == nil || s.SemiSyncAsyncSince.Before(t0.Add(-time.Second)) {
		t.Errorf("server view of %s during the fallback: semi_sync_async_since %v", p, s.SemiSyncAsyncSince)
	}
	if n := metricIn(body, fmt.Sprintf(`vigil_semi_sync_unacknowledged_commits{cluster="sandbox",server="%s"}`, p)); n < 1 {
		t.Errorf("vigil_semi_sync_unacknowledged_commits = %v after commits acknowledged without a replica", n)
	}
	t.Logf("fallback seen %s after the replicas stopped acknowledging", time.Since(t0).Round(time.Millisecond))

	// The bench measures the same thing on the same servers: time
	// fallen back and commits acknowledged without a replica.
	out := t.TempDir()
	res, err := RunVigilBench(t, "topology", "--sandbox", env.sb.Dir(), "--workloads", "oltp_insert", "--threads", "2",
		"--duration", "3s", "--warmup", "0s", "--paths", "direct", "--tables", "1", "--table-size", "100", "--out", out)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("vigil-bench topology: %v (exit %d)\n%s\n%s", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	var results struct {
		Runs []struct {
			Topology string `json:"topology"`
			SemiSync *struct {
				NoTxDelta    int64   `json:"no_tx_delta"`
				YesTxDelta   int64   `json:"yes_tx_delta"`
				AsyncSeconds float64 `json:"async_seconds"`
				RunSeconds   float64 `json:"run_seconds"`
			} `json:"semi_sync"`
		} `json:"runs"`
	}
	data, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err == nil {
		err = json.Unmarshal(data, &results)
	}
	if err != nil || len(results.Runs) == 0 || results.Runs[0].SemiSync == nil {
		t.Fatalf("bench results: %v\n%s", err, data)
	}
	ss := results.Runs[0].SemiSync
	t.Logf("bench on the fallen-back primary: %d commits without an acknowledgement, %d with; async %.1f s of %.1f s",
		ss.NoTxDelta, ss.YesTxDelta, ss.AsyncSeconds, ss.RunSeconds)
	if ss.NoTxDelta < 1 || ss.YesTxDelta != 0 || ss.AsyncSeconds < ss.RunSeconds*0.8 {
		t.Errorf("the bench did not count the fallback: %+v", *ss)
	}

	// The replicas acknowledge again: the fallback ends.
	for _, n := range replicas {
		if _, err := env.sb.SQL(ctx, n, "START SLAVE IO_THREAD"); err != nil {
			t.Fatal(err)
		}
	}
	Eventually(t, 30*time.Second, "the semi_sync_restored event", func() error {
		mustExec(t, db, "REPLACE INTO vigil_test.fallback VALUES (1000)") // a commit that can be acknowledged
		if ev := env.events(t); !strings.Contains(ev, "semi_sync_restored") {
			return fmt.Errorf("no event yet")
		}
		return nil
	})
	ev = env.events(t)
	if !strings.Contains(ev, "commits were acknowledged without a replica") {
		t.Errorf("the end of the fallback does not count the unacknowledged commits:\n%s", ev)
	}
	body = adminGet(t, env, "/metrics")
	if v := metricIn(body, asyncSeries); v != 0 {
		t.Errorf("%s = %v after the fallback ended", asyncSeries, v)
	}
	if v := metricIn(body, fmt.Sprintf(`vigil_semi_sync_async_seconds_total{cluster="sandbox",server="%s"}`, p)); v <= 0 {
		t.Errorf("vigil_semi_sync_async_seconds_total = %v after a fallback", v)
	}
	if s := env.server(t, p); s.SemiSyncAsyncSince != nil {
		t.Errorf("server view still shows the fallback: %v", s.SemiSyncAsyncSince)
	}
	semiSyncReplicaStall(t, env, db, replicas[0])
}

// semiSyncReplicaStall: a replica gets a former primary's semi-sync
// settings (master on, wait_no_slave on), as one rebuilt and repointed by
// hand keeps them: its applier's commits would each wait an hour for an
// acknowledgement. Vigil finds it from its checks, gives it a replica's
// settings, and it applies what the primary commits (it did not before:
// in CI a failover then waited 30 s in vain for such a replica).
func semiSyncReplicaStall(t *testing.T, env *clusterEnv, db *sql.DB, r string) {
	ctx := context.Background()
	mustExec(t, db, "CREATE TABLE IF NOT EXISTS vigil_test.stall (n INT PRIMARY KEY)")
	if _, err := env.sb.SQL(ctx, r, "SET GLOBAL rpl_semi_sync_master_enabled = ON, GLOBAL rpl_semi_sync_master_wait_no_slave = ON, GLOBAL rpl_semi_sync_master_timeout = 3600000"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for i := 1; i <= 20; i++ {
		mustExec(t, db, fmt.Sprintf("INSERT INTO vigil_test.stall VALUES (%d)", i))
	}
	Eventually(t, 20*time.Second, r+" applies the rows and its semi-sync master side is off", func() error {
		rows, err := env.sb.SQL(ctx, r, "SELECT COUNT(*), @@rpl_semi_sync_master_enabled FROM vigil_test.stall")
		if err != nil {
			return err
		}
		if got := rows[0][0] + " " + rows[0][1]; got != "20 0" {
			return fmt.Errorf("rows, master_enabled on %s: %s", r, got)
		}
		return nil
	})
	ev := env.events(t)
	if !strings.Contains(ev, "role_settings") || !strings.Contains(ev, "rpl_semi_sync_master_enabled=OFF") {
		t.Errorf("no role_settings event for %s:\n%s", r, ev)
	}
	t.Logf("%s applied again %s after it got a primary's semi-sync settings", r, time.Since(t0).Round(time.Millisecond))
}
