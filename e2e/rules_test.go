package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// rulesConfig adds the rules the query-processing tests exercise.
func rulesConfig(logPath string) func(*config.Config) {
	return func(c *config.Config) {
		cl := &c.Clusters[0]
		cl.ServerGroups = map[string][]string{"shadow": {"node3"}}
		cl.Rules = []config.Rule{
			{Name: "no-drop", Match: config.RuleMatch{Query: `(?i)^DROP TABLE vigil_test\.precious`},
				Block: &config.RuleBlock{Code: 4242, SQLState: "HY000", Message: "precious is precious"}},
			{Name: "hot-to-primary", Match: config.RuleMatch{Digest: "^SELECT v FROM vigil_test\\.hot WHERE id = \\?$"}, Route: "writer"},
			{Name: "sb2-to-sb1", Match: config.RuleMatch{Query: `sbtest2`}, Rewrite: &config.RuleRewrite{Pattern: `\bsbtest2\b`, Replace: "sbtest1"}},
			{Name: "cache-slow", Match: config.RuleMatch{Digest: "cached_tbl"}, CacheTTL: config.Duration{Duration: time.Minute}},
			{Name: "sleep-limit", Match: config.RuleMatch{Query: `(?i)SLEEP\(10\)`}, Timeout: config.Duration{Duration: time.Second}},
			{Name: "shadow", Match: config.RuleMatch{Query: `mirror-probe`}, Route: "writer", Mirror: "shadow"},
		}
		t := true
		c.Log.Queries = true
		c.Log.Auth = &t
		c.Log.File = &config.LogFile{Path: logPath}
	}
}

func TestQueryProcessing(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	dir := SandboxDir(t)
	logPath := filepath.Join(dir, "queries.jsonl")
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3}, rulesConfig(logPath))
	nodes := []string{"node1", "node2", "node3"}
	enableUserStats(t, env.sb, nodes)
	waitServersOnline(t, env, 3)
	dsn := fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s", env.addr)
	setup := openDB(t, dsn)
	for _, q := range []string{
		"CREATE TABLE IF NOT EXISTS hot (id INT PRIMARY KEY, v VARCHAR(32))",
		"CREATE TABLE IF NOT EXISTS other (id INT PRIMARY KEY, v VARCHAR(32))",
		"CREATE TABLE IF NOT EXISTS sbtest1 (id INT PRIMARY KEY, v VARCHAR(32))",
		"CREATE TABLE IF NOT EXISTS sbtest2 (id INT PRIMARY KEY, v VARCHAR(32))",
		"CREATE TABLE IF NOT EXISTS cached_tbl (id INT PRIMARY KEY, v VARCHAR(32))",
		"CREATE TABLE IF NOT EXISTS precious (id INT PRIMARY KEY)",
		"REPLACE INTO hot VALUES (1, 'hot')", "REPLACE INTO other VALUES (1, 'other')",
		"REPLACE INTO sbtest1 VALUES (1, 'from sbtest1')", "REPLACE INTO sbtest2 VALUES (1, 'from sbtest2')",
		"REPLACE INTO cached_tbl VALUES (1, 'cached')",
	} {
		mustExec(t, setup, q)
	}
	setup.Close()
	time.Sleep(time.Second) // replicas apply the setup; read-your-writes windows pass
	db := openDB(t, dsn)
	db.SetMaxOpenConns(4)
	writer := env.writer(t)
	var replicas []string
	for _, n := range nodes {
		if n != writer {
			replicas = append(replicas, n)
		}
	}
	queryOne := func(q string) (string, error) {
		var v string
		err := db.QueryRow(q).Scan(&v)
		return v, err
	}

	t.Run("RouteRule", func(t *testing.T) {
		before := readCounters(t, env.sb, nodes)
		for i := range 20 {
			if _, err := queryOne(fmt.Sprintf("SELECT v FROM vigil_test.hot WHERE id = %d", 1+i%1)); err != nil {
				t.Fatal(err)
			}
		}
		mid := readCounters(t, env.sb, nodes)
		if d := mid.delta(before, writer, "select"); d < 20 {
			t.Errorf("rule-routed SELECTs on the writer %s: %d, want 20", writer, d)
		}
		for _, r := range replicas {
			if d := mid.delta(before, r, "select"); d != 0 {
				t.Errorf("rule-routed SELECTs reached replica %s: %d", r, d)
			}
		}
		for range 20 {
			if _, err := queryOne("SELECT v FROM vigil_test.other WHERE id = 1"); err != nil {
				t.Fatal(err)
			}
		}
		after := readCounters(t, env.sb, nodes)
		if d := after.delta(mid, writer, "select"); d != 0 {
			t.Errorf("other SELECTs reached the writer: %d", d)
		}
		var onReplicas int64
		for _, r := range replicas {
			onReplicas += after.delta(mid, r, "select")
		}
		if onReplicas < 20 {
			t.Errorf("other SELECTs on replicas: %d, want 20", onReplicas)
		}
	})

	t.Run("Rewrite", func(t *testing.T) {
		v, err := queryOne("SELECT v FROM vigil_test.sbtest2 WHERE id = 1")
		if err != nil || v != "from sbtest1" {
			t.Errorf("rewritten SELECT returned %q, %v; want the sbtest1 row", v, err)
		}
	})

	t.Run("Block", func(t *testing.T) {
		_, err := db.Exec("DROP TABLE vigil_test.precious")
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 4242 || me.Message != "precious is precious" || string(me.SQLState[:]) != "HY000" {
			t.Fatalf("blocked DROP: %v", err)
		}
		for _, n := range nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			rows, err := env.sb.SQL(ctx, n, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA='vigil_test' AND TABLE_NAME='precious'")
			cancel()
			if err != nil || rows[0][0] != "1" {
				t.Errorf("%s: precious table gone or unreadable: %v %v", n, rows, err)
			}
		}
	})

	t.Run("Cache", func(t *testing.T) {
		q := "SELECT v, NOW(6) FROM vigil_test.cached_tbl WHERE id = 1"
		read := func() (string, string) {
			var v, now string
			if err := db.QueryRow(q).Scan(&v, &now); err != nil {
				t.Fatal(err)
			}
			return v, now
		}
		v1, t1 := read()
		before := readCounters(t, env.sb, nodes)
		time.Sleep(10 * time.Millisecond)
		v2, t2 := read()
		after := readCounters(t, env.sb, nodes)
		if v1 != "cached" || v1 != v2 || t1 != t2 {
			t.Errorf("cached reply differs: (%s %s) then (%s %s)", v1, t1, v2, t2)
		}
		for _, n := range nodes {
			if d := after.delta(before, n, "select"); d != 0 {
				t.Errorf("the cached SELECT reached %s (%d selects)", n, d)
			}
		}
		var cs struct{ Hits, Stores uint64 }
		apiGet(t, env, "/api/v1/query_cache", &cs)
		if cs.Hits < 1 || cs.Stores < 1 {
			t.Errorf("query cache stats %+v", cs)
		}
		// Prepared statements (go-sql-driver sends a query with arguments
		// as COM_STMT_PREPARE + COM_STMT_EXECUTE) are cached too, per
		// parameter values, apart from the text protocol's entries.
		qb := "SELECT v, NOW(6) FROM vigil_test.cached_tbl WHERE id = ?"
		readB := func(id int) (string, string, error) {
			var v, now string
			err := db.QueryRow(qb, id).Scan(&v, &now)
			return v, now, err
		}
		bv1, bt1, err := readB(1)
		if err != nil {
			t.Fatal(err)
		}
		before = readCounters(t, env.sb, nodes)
		time.Sleep(10 * time.Millisecond)
		bv2, bt2, err := readB(1)
		if err != nil {
			t.Fatal(err)
		}
		after = readCounters(t, env.sb, nodes)
		if bv1 != "cached" || bv1 != bv2 || bt1 != bt2 {
			t.Errorf("cached binary reply differs: (%s %s) then (%s %s)", bv1, bt1, bv2, bt2)
		}
		if bt1 == t1 {
			t.Errorf("the prepared statement was answered from the text protocol's entry")
		}
		for _, n := range nodes {
			if d := after.delta(before, n, "select"); d != 0 {
				t.Errorf("the cached execute reached %s (%d selects)", n, d)
			}
		}
		before = readCounters(t, env.sb, nodes)
		if _, _, err := readB(2); !errors.Is(err, sql.ErrNoRows) {
			t.Errorf("id 2: %v, want no rows", err)
		}
		after = readCounters(t, env.sb, nodes)
		sum := 0
		for _, n := range nodes {
			sum += int(after.delta(before, n, "select"))
		}
		if sum != 1 {
			t.Errorf("an execute with other parameter values reached the servers %d times, want 1", sum)
		}
		// Inside a transaction the cache is never used.
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		var v, now string
		if err := tx.QueryRow(q).Scan(&v, &now); err != nil {
			t.Fatal(err)
		}
		_ = tx.Rollback()
		if now == t1 {
			t.Errorf("a SELECT inside a transaction was served from the cache")
		}
	})

	t.Run("Timeout", func(t *testing.T) {
		start := time.Now()
		_, err := queryOne("SELECT SLEEP(10)")
		took := time.Since(start)
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 7008 || !strings.Contains(me.Message, "sleep-limit") {
			t.Fatalf("SELECT SLEEP(10) under a 1 s rule timeout: %v (after %s)", err, took)
		}
		if took >= 10*time.Second {
			t.Errorf("the statement ran to the end (%s): not killed", took)
		}
		// Nothing is left running on the servers.
		for _, n := range nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			rows, _ := env.sb.SQL(ctx, n, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT SLEEP(10)%'")
			cancel()
			if len(rows) == 1 && rows[0][0] != "0" {
				t.Errorf("%s still runs the SLEEP", n)
			}
		}
		// The session goes on.
		if v, err := queryOne("SELECT 'still here'"); err != nil || v != "still here" {
			t.Errorf("after the timeout: %q %v", v, err)
		}
	})

	t.Run("Mirror", func(t *testing.T) {
		before := readCounters(t, env.sb, nodes)
		for range 10 {
			if _, err := queryOne("SELECT 'mirror-probe'"); err != nil {
				t.Fatal(err)
			}
		}
		Eventually(t, 10*time.Second, "mirrored statements on node3", func() error {
			after := readCounters(t, env.sb, nodes)
			if d := after.delta(before, "node3", "select"); d < 10 {
				return fmt.Errorf("node3 ran %d of 10 mirrored SELECTs", d)
			}
			if d := after.delta(before, writer, "select"); d < 10 {
				return fmt.Errorf("writer ran %d of 10", d)
			}
			return nil
		})
	})

	t.Run("DigestsAndRulesAPI", func(t *testing.T) {
		var rows []struct {
			Digest    string `json:"digest"`
			Text      string `json:"digest_text"`
			Hostgroup string `json:"hostgroup"`
			User      string `json:"user"`
			Count     uint64 `json:"count"`
			P99       int64  `json:"p99_us"`
		}
		apiGet(t, env, "/api/v1/digests?by=key&user=app", &rows)
		found := false
		for _, r := range rows {
			if r.Text == "SELECT v FROM vigil_test.hot WHERE id = ?" {
				found = true
				if r.Count != 20 || r.Hostgroup != "writer" || r.P99 <= 0 {
					t.Errorf("hot digest row %+v", r)
				}
			}
			if strings.Contains(r.Text, "SLEEP") && r.Count != 1 {
				t.Errorf("sleep digest %+v", r)
			}
		}
		if !found {
			t.Errorf("no digest for the hot SELECT in %+v", rows)
		}
		var rl []struct {
			Name string `json:"name"`
			Hits uint64 `json:"hits"`
		}
		apiGet(t, env, "/api/v1/rules", &rl)
		hits := map[string]uint64{}
		for _, r := range rl {
			hits[r.Name] = r.Hits
		}
		if hits["hot-to-primary"] != 20 || hits["no-drop"] != 1 || hits["sleep-limit"] != 1 || hits["shadow"] != 10 {
			t.Errorf("rule hits %v", hits)
		}
		if out, err := env.ctl(t, "digests", "--limit", "5"); err != nil || !strings.Contains(out, "DIGEST") {
			t.Errorf("ctl digests: %v\n%s", err, out)
		}
		if out, err := env.ctl(t, "rules"); err != nil || !strings.Contains(out, "hot-to-primary") {
			t.Errorf("ctl rules: %v\n%s", err, out)
		}
	})

	t.Run("QueryLogMasked", func(t *testing.T) {
		if _, err := queryOne("SELECT 'secret-password'"); err != nil {
			t.Fatal(err)
		}
		bad := openDB(t, fmt.Sprintf("app:wrong@tcp(%s)/vigil_test?timeout=5s", env.addr))
		if err := bad.Ping(); err == nil {
			t.Fatal("login with a wrong password worked")
		}
		var sawMasked, sawAuthFail bool
		Eventually(t, 10*time.Second, "the statements in the query log", func() error {
			data, err := os.ReadFile(logPath)
			if err != nil {
				return err
			}
			if strings.Contains(string(data), "secret-password") {
				t.Fatalf("the query log holds a literal although statements are masked")
			}
			sc := bufio.NewScanner(strings.NewReader(string(data)))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var e map[string]any
				if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
					t.Fatalf("query log line is not JSON: %v: %s", err, sc.Text())
				}
				if e["type"] == "query" && e["statement"] == "SELECT ?" {
					sawMasked = true
				}
				if e["type"] == "auth" && e["success"] == false && e["user"] == "app" {
					sawAuthFail = true
				}
			}
			if !sawMasked || !sawAuthFail {
				return fmt.Errorf("masked statement %v, failed login %v", sawMasked, sawAuthFail)
			}
			return nil
		})
	})

	t.Run("ReloadRules", func(t *testing.T) {
		cfgPath := filepath.Join(env.sb.Dir(), "vigil-e2e.yaml")
		data, _ := os.ReadFile(cfgPath)
		next := strings.Replace(string(data), "precious is precious", "still precious", 1)
		bad := strings.Replace(string(data), `\bsbtest2\b`, `(unclosed`, 1)
		if err := os.WriteFile(cfgPath, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := env.ctl(t, "reload"); err == nil || !strings.Contains(out, "rewrite.pattern") {
			t.Errorf("reload with a bad regular expression: %v\n%s", err, out)
		}
		if err := os.WriteFile(cfgPath, []byte(next), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := env.ctl(t, "reload"); err != nil {
			t.Fatalf("reload: %v\n%s", err, out)
		}
		_, err := db.Exec("DROP TABLE vigil_test.precious")
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 4242 || me.Message != "still precious" {
			t.Errorf("after reload: %v", err)
		}
		var rl []struct {
			Name string `json:"name"`
			Hits uint64 `json:"hits"`
		}
		apiGet(t, env, "/api/v1/rules", &rl)
		if rl[0].Name != "no-drop" || rl[0].Hits != 2 {
			t.Errorf("rule counters after reload: %+v", rl[0])
		}
	})
}

// waitServersOnline waits until the monitor has n servers ONLINE.
func waitServersOnline(t *testing.T, env *clusterEnv, n int) {
	Eventually(t, 20*time.Second, "servers online", func() error {
		on := 0
		for _, s := range env.servers(t) {
			if s.State == "ONLINE" {
				on++
			}
		}
		if on < n {
			return fmt.Errorf("%d of %d online", on, n)
		}
		return nil
	})
}

// apiGet decodes a GET of the admin API.
func apiGet(t testing.TB, env *clusterEnv, path string, v any) {
	t.Helper()
	resp, err := http.Get("http://" + env.admin + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, body)
	}
}

var _ = sql.ErrNoRows
