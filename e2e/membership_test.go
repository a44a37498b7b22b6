package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// TestMembershipLive changes a running Vigil's membership under a steady
// sysbench load (oltp_read_write in transactions plus point selects that
// reach the replicas) and a writer that holds one session for the whole
// run: a node added by reload joins and takes reads, a replica removed by
// reload leaves, removing the writer is refused, a cluster is added and
// removed by reload, the listen address moves while a transaction is
// open, and `server remove|add` through the API persists across a
// restart. Neither the load nor the writer may see one error or
// reconnect, and every acknowledged row must be on the primary.
func TestMembershipLive(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	if _, err := exec.LookPath("sysbench"); err != nil {
		t.Fatal("sysbench is not installed: run scripts/install-deps.sh")
	}
	t0 := time.Now()
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3}, func(c *config.Config) {
		c.Clusters[0].Failover.DrainTimeout = config.Duration{Duration: 5 * time.Second}
	})
	m := &memberEnv{clusterEnv: env, t: t, cfgPath: filepath.Join(env.sb.Dir(), "vigil-e2e.yaml")}
	m.token = m.load().Admin.Token
	cluster := m.load().Clusters[0].Name
	step := func(name string) func() {
		s := time.Now()
		t.Logf("--- %s", name)
		return func() { t.Logf("--- %s: done in %s", name, time.Since(s).Round(time.Millisecond)) }
	}

	// The load. sysbench's tables are filled through Vigil first.
	done := step("prepare")
	sysbench(t, env.addr, "oltp_read_write", "prepare")
	m.waitCaughtUp([]string{"node2", "node3"})
	stopFile := filepath.Join(t.TempDir(), "stop")
	script := writeStoppableSysbench(t)
	rw := startSysbenchUntil(t, "oltp_read_write", env.addr, script, stopFile, "oltp_read_write", 4)
	ro := startSysbenchUntil(t, "oltp_point_select", env.addr, script, stopFile, "oltp_point_select", 2)
	w := startMemberWriter(t, env.addr)
	stopLoad := sync.OnceFunc(func() {
		if err := os.WriteFile(stopFile, nil, 0o644); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(stopLoad)
	time.Sleep(2 * time.Second)
	for _, sb := range []*sysbenchRun{rw, ro} {
		if sb.exited() {
			t.Fatalf("%s ended at once:\n%s", sb.name, sb.output())
		}
	}
	done()

	// 1. A node added by reload joins OFFLINE_SOFT, then is routed and
	// takes reads.
	done = step("1: add node4 by reload")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	node4, err := env.sb.AddNode(ctx)
	cancel()
	if err != nil {
		t.Fatalf("AddNode: %v", err)
	}
	if node4.Name != "node4" {
		t.Fatalf("AddNode made %s, want node4", node4.Name)
	}
	// node4 stops applying so that it is behind the writer when it is
	// added: it must stay joining (and get no reads) until it catches up.
	m.sqlOn("node4", "STOP SLAVE SQL_THREAD")
	cfg := m.load()
	cfg.Clusters[0].Servers = append(cfg.Clusters[0].Servers, config.Server{Name: "node4", Address: node4.Addr(), Role: "replica", Weight: 1, Datadir: node4.Datadir})
	m.write(cfg)
	since := time.Now()
	if code, body := m.reload(); code != http.StatusOK {
		t.Fatalf("reload adding node4: %d %s", code, body)
	}
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		v, ok := m.find(cluster, "node4")
		if !ok || v.State != "OFFLINE_SOFT" || !strings.HasPrefix(v.Reason, "joining") || v.Queries != 0 {
			t.Fatalf("node4, added while behind the writer, is not joining without traffic: listed %v, %s (%s), %d statements", ok, v.State, v.Reason, v.Queries)
		}
	}
	m.sqlOn("node4", "START SLAVE SQL_THREAD")
	m.waitJoin(cluster, "node4", since, true)
	m.waitReads(cluster, "node4")
	if ev := m.eventsOf("server_added", "node4"); len(ev) != 1 {
		t.Errorf("server_added events for node4: %+v", ev)
	}
	if metrics := m.metrics(); !strings.Contains(metrics, `vigil_server_queries_total{cluster="`+cluster+`",server="node4"}`) {
		t.Errorf("no vigil_server_queries_total series for node4 in /metrics")
	}
	m.checkLoad(rw, ro, w)
	done()

	// 2. A replica removed by reload is drained and leaves.
	done = step("2: remove node3 by reload")
	if v, _ := m.find(cluster, "node3"); v.Queries == 0 || v.State != "ONLINE" {
		t.Fatalf("node3 should be serving reads before its removal: %s, %d statements", v.State, v.Queries)
	}
	cfg = m.load()
	cfg.Clusters[0].Servers = slices.DeleteFunc(cfg.Clusters[0].Servers, func(s config.Server) bool { return s.Name == "node3" })
	m.write(cfg)
	if code, body := m.reload(); code != http.StatusOK {
		t.Fatalf("reload removing node3: %d %s", code, body)
	}
	Eventually(t, 30*time.Second, "node3 gone from /api/v1/servers", func() error {
		if _, ok := m.find(cluster, "node3"); ok {
			return errors.New("node3 still listed")
		}
		return nil
	})
	Eventually(t, 10*time.Second, "a server_removed event for node3", func() error {
		if len(m.eventsOf("server_removed", "node3")) == 0 {
			return errors.New("none yet")
		}
		return nil
	})
	if metrics := m.metrics(); strings.Contains(metrics, `server="node3"`) {
		var lines []string
		for _, l := range strings.Split(metrics, "\n") {
			if strings.Contains(l, `server="node3"`) {
				lines = append(lines, l)
			}
		}
		t.Errorf("/metrics still has node3 after its removal:\n%s", strings.Join(lines, "\n"))
	}
	if out, err := env.ctl(t, "servers"); err != nil || strings.Contains(out, "node3") {
		t.Errorf("vigil ctl servers after removing node3 (%v):\n%s", err, out)
	}
	m.checkLoad(rw, ro, w)
	done()

	// 3. Removing the writer is refused and changes nothing.
	done = step("3: remove the writer by reload (refused)")
	good := m.load()
	if wr := m.writerOf(cluster); wr != "node1" {
		t.Fatalf("writer is %q, want node1", wr)
	}
	before := m.names(cluster)
	bad := m.load()
	bad.Clusters[0].Servers = slices.DeleteFunc(bad.Clusters[0].Servers, func(s config.Server) bool { return s.Name == "node1" })
	m.write(bad)
	code, body := m.reload()
	m.write(good)
	if code == http.StatusOK {
		t.Fatalf("a reload removing the writer was accepted: %s", body)
	}
	if !strings.Contains(body, "clusters[0].servers") || !strings.Contains(body, "node1") || !strings.Contains(body, "switch over to another server") {
		t.Errorf("the refusal should name the key, the writer and what to do: %d %s", code, body)
	}
	if ev := m.eventsOf("config_rejected", ""); len(ev) == 0 || !strings.Contains(ev[0].Message, "node1") {
		t.Errorf("config_rejected events: %+v", ev)
	}
	if wr := m.writerOf(cluster); wr != "node1" {
		t.Errorf("after the refused reload the writer is %q", wr)
	}
	if after := m.names(cluster); !slices.Equal(after, before) {
		t.Errorf("a refused reload changed the servers: %v, was %v", after, before)
	}
	if ev := m.eventsOf("server_removed", "node1"); len(ev) != 0 {
		t.Errorf("node1 was removed: %+v", ev)
	}
	for _, n := range before {
		if s, _ := m.find(cluster, n); s.State != "ONLINE" {
			t.Errorf("after the refused reload %s is %s (%s)", n, s.State, s.Reason)
		}
	}
	m.checkLoad(rw, ro, w)
	done()

	// 4. A cluster added by reload serves at once; removed, its port
	// closes.
	done = step("4: add and remove a second cluster by reload")
	secondAddr := freeAddr(t)
	cfg = m.load()
	second := cfg.Clusters[0]
	second.Name, second.Listen = "second", secondAddr
	second.Failover.Auto = false
	second.Rules, second.ServerGroups = nil, nil
	second.Servers = nil
	for _, s := range cfg.Clusters[0].Servers {
		if s.Name == "node1" || s.Name == "node2" {
			second.Servers = append(second.Servers, s)
		}
	}
	cfg.Clusters = append(cfg.Clusters, second)
	m.write(cfg)
	if code, body := m.reload(); code != http.StatusOK {
		t.Fatalf("reload adding cluster second: %d %s", code, body)
	}
	var serverID int
	Eventually(t, 30*time.Second, "a query through cluster second", func() error {
		db, err := sql.Open("mysql", fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s&readTimeout=10s", secondAddr))
		if err != nil {
			return err
		}
		defer db.Close()
		return db.QueryRow("SELECT @@server_id").Scan(&serverID)
	})
	if serverID != 1 && serverID != 2 {
		t.Errorf("cluster second answered from server_id %d: it has node1 and node2 only", serverID)
	}
	t.Logf("cluster second on %s answered from server_id %d", secondAddr, serverID)
	if len(m.eventsOf("cluster_added", "")) == 0 {
		t.Errorf("no cluster_added event")
	}
	m.write(good)
	if code, body := m.reload(); code != http.StatusOK {
		t.Fatalf("reload removing cluster second: %d %s", code, body)
	}
	Eventually(t, 10*time.Second, "cluster second's port closed", func() error {
		if c, err := net.DialTimeout("tcp", secondAddr, time.Second); err == nil {
			c.Close()
			return fmt.Errorf("%s still accepts", secondAddr)
		}
		return nil
	})
	if list := m.servers(); slices.ContainsFunc(list, func(s admin.ServerView) bool { return s.Cluster == "second" }) {
		t.Errorf("cluster second's servers are still listed after its removal")
	}
	m.checkLoad(rw, ro, w)
	done()

	// 5. The listen address moves while a transaction is open: the new
	// address accepts, the session goes on, the old address refuses.
	done = step("5: move the listen address with a transaction open")
	oldAddr, newAddr := env.addr, freeAddr(t)
	odb := openDB(t, fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s&readTimeout=30s", oldAddr))
	octx, ocancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer ocancel()
	oconn, err := odb.Conn(octx)
	if err != nil {
		t.Fatal(err)
	}
	defer oconn.Close()
	mustExec(t, oconn, "CREATE TABLE IF NOT EXISTS vigil_test.listen_move (n INT PRIMARY KEY)")
	mustExec(t, oconn, "BEGIN")
	mustExec(t, oconn, "INSERT INTO vigil_test.listen_move VALUES (1)")
	var inTx int
	if err := oconn.QueryRowContext(octx, "SELECT @@server_id").Scan(&inTx); err != nil || inTx != 1 {
		t.Fatalf("in the transaction: server_id %d %v (want the writer, 1)", inTx, err)
	}
	cfg = m.load()
	cfg.Clusters[0].Listen = newAddr
	m.write(cfg)
	good = cfg
	if code, body := m.reload(); code != http.StatusOK {
		t.Fatalf("reload moving listen to %s: %d %s", newAddr, code, body)
	}
	env.addr = newAddr
	func() {
		ndb := openDB(t, fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s&readTimeout=10s", newAddr))
		defer ndb.Close()
		var one int
		if err := ndb.QueryRow("SELECT 1").Scan(&one); err != nil {
			t.Errorf("a new client on the new listen address %s: %v", newAddr, err)
		}
	}()
	mustExec(t, oconn, "INSERT INTO vigil_test.listen_move VALUES (2)")
	var cnt int
	if err := oconn.QueryRowContext(octx, "SELECT COUNT(*), @@server_id FROM vigil_test.listen_move").Scan(&cnt, &inTx); err != nil || cnt != 2 || inTx != 1 {
		t.Errorf("the open transaction after the move: count %d server_id %d %v", cnt, inTx, err)
	}
	mustExec(t, oconn, "COMMIT")
	if err := oconn.QueryRowContext(octx, "SELECT 1").Scan(&cnt); err != nil {
		t.Errorf("the old session after its commit: %v", err)
	}
	Eventually(t, 10*time.Second, "the old listen address refusing", func() error {
		if c, err := net.DialTimeout("tcp", oldAddr, time.Second); err == nil {
			c.Close()
			return fmt.Errorf("%s still accepts", oldAddr)
		}
		return nil
	})
	if len(m.eventsOf("listen_changed", "")) == 0 {
		t.Errorf("no listen_changed event")
	}
	oconn.Close()
	odb.Close()
	m.checkLoad(rw, ro, w)
	done()

	// 6. server remove / server add through the API, kept in
	// membership.json.
	done = step("6: vigil ctl server remove node4, POST /api/v1/servers node4")
	if out, err := env.ctl(t, "server", "remove", "node4"); err != nil {
		t.Fatalf("vigil ctl server remove node4: %v\n%s", err, out)
	}
	if _, ok := m.find(cluster, "node4"); ok {
		t.Errorf("node4 still listed after vigil ctl server remove returned")
	}
	if ev := m.eventsOf("server_removed", "node4"); len(ev) != 1 {
		t.Errorf("server_removed events for node4: %+v", ev)
	}
	addBody, _ := json.Marshal(admin.ServerSpec{Name: "node4", Address: node4.Addr(), Weight: 1, Cluster: cluster})
	since = time.Now()
	if code, body := m.do("POST", "/api/v1/servers", addBody); code != http.StatusOK {
		t.Fatalf("POST /api/v1/servers node4: %d %s", code, body)
	}
	// node4 is caught up: it may finish joining before the call returns.
	m.waitJoin(cluster, "node4", since, false)
	m.waitReads(cluster, "node4")
	stateDir := m.load().StateDir
	ov, err := os.ReadFile(filepath.Join(stateDir, "membership.json"))
	if err != nil {
		t.Fatalf("membership.json: %v", err)
	}
	var overlay struct {
		Clusters map[string]struct {
			Add []struct {
				Name, Address string
			} `json:"add"`
			Remove []string `json:"remove"`
		} `json:"clusters"`
	}
	if err := json.Unmarshal(ov, &overlay); err != nil {
		t.Fatalf("membership.json: %v\n%s", err, ov)
	}
	co := overlay.Clusters[cluster]
	if !slices.ContainsFunc(co.Add, func(a struct{ Name, Address string }) bool {
		return a.Name == "node4" && a.Address == node4.Addr()
	}) || slices.Contains(co.Remove, "node4") {
		t.Errorf("membership.json does not record node4 as added:\n%s", ov)
	}
	m.checkLoad(rw, ro, w)
	done()

	// 7. The load saw no error and no reconnect, and what the writer got
	// acknowledged is on the primary (and the replicas agree with it).
	done = step("7: stop the load and check it")
	if rw.exited() || ro.exited() {
		t.Errorf("sysbench ended before the steps did: raise its --time bound")
	}
	stopLoad()
	for _, sb := range []*sysbenchRun{rw, ro} {
		out, err := sb.wait(60 * time.Second)
		if err != nil || strings.Contains(out, "FATAL") {
			t.Errorf("%s: %v\n%s", sb.name, err, out)
			continue
		}
		errs, reconn := sysbenchCount(out, reErrors), sysbenchCount(out, reReconnects)
		if errs != 0 || reconn != 0 {
			t.Errorf("%s: %d errors, %d reconnects\n%s", sb.name, errs, reconn, out)
		}
		if q := reQueries.FindStringSubmatch(out); q != nil {
			t.Logf("%s: %s queries (%s qps) through Vigil, 0 errors, 0 reconnects", sb.name, q[1], q[2])
		} else {
			t.Errorf("%s: no summary\n%s", sb.name, out)
		}
	}
	acked, werrs := w.finish()
	if werrs != nil {
		t.Errorf("the writer's session failed: %v", werrs)
	}
	t.Logf("writer: %d rows acknowledged through Vigil on one session", acked)
	if got := m.count("node1", "SELECT COUNT(*), IFNULL(MAX(n), 0) FROM vigil_test.members"); got != fmt.Sprintf("%d/%d", acked, acked) {
		t.Errorf("the primary has COUNT/MAX %s of vigil_test.members; the writer had %d rows acknowledged", got, acked)
	}
	m.waitCaughtUp([]string{"node2", "node4"})
	for _, q := range []string{"SELECT COUNT(*), IFNULL(MAX(n), 0) FROM vigil_test.members", "CHECKSUM TABLE sbtest.sbtest1", "CHECKSUM TABLE sbtest.sbtest2"} {
		want := m.count("node1", q)
		for _, n := range []string{"node2", "node4"} {
			if got := m.count(n, q); got != want {
				t.Errorf("%s: %s on %s, %s on the primary", q, got, n, want)
			}
		}
	}
	done()

	// 6, continued: a restart keeps node4 because membership.json has it
	// (the file no longer lists it) and keeps node3 out.
	done = step("6b: restart Vigil")
	cfg = m.load()
	cfg.Clusters[0].Servers = slices.DeleteFunc(cfg.Clusters[0].Servers, func(s config.Server) bool { return s.Name == "node4" })
	m.write(cfg)
	env.v.stop()
	logs := []string{env.v.logf}
	env.v = startVigil(t, m.cfgPath, newAddr)
	logs = append(logs, env.v.logf)
	defer func() {
		// Not a failure by itself, but worth a look.
		for _, l := range logs {
			data, _ := os.ReadFile(l)
			for _, line := range strings.Split(string(data), "\n") {
				if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
					t.Logf("%s: %s", filepath.Base(l), line)
				}
			}
		}
	}()
	Eventually(t, 30*time.Second, "node4 ONLINE after the restart", func() error {
		s, ok := m.find(cluster, "node4")
		if !ok {
			return fmt.Errorf("node4 not listed: %v", m.names(cluster))
		}
		if s.State != "ONLINE" {
			return fmt.Errorf("node4 is %s (%s)", s.State, s.Reason)
		}
		return nil
	})
	if names := m.names(cluster); !slices.Equal(names, []string{"node1", "node2", "node4"}) {
		t.Errorf("servers after the restart: %v, want node1 node2 node4", names)
	}
	// A reload of the file (which does not list node4) keeps it too.
	if code, body := m.reload(); code != http.StatusOK {
		t.Fatalf("reload after the restart: %d %s", code, body)
	}
	if names := m.names(cluster); !slices.Equal(names, []string{"node1", "node2", "node4"}) {
		t.Errorf("servers after a reload of a file without node4: %v, want node1 node2 node4", names)
	}
	Eventually(t, 30*time.Second, "the acknowledged rows read through Vigil after the restart", func() error {
		db, err := sql.Open("mysql", fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s&readTimeout=10s", newAddr))
		if err != nil {
			return err
		}
		defer db.Close()
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM vigil_test.members").Scan(&n); err != nil {
			return err
		}
		if n != acked {
			return fmt.Errorf("%d rows, %d acknowledged", n, acked)
		}
		return nil
	})
	done()
	t.Logf("TestMembershipLive took %s", time.Since(t0).Round(time.Millisecond))
}

// memberEnv is a clusterEnv with the config file and admin API at hand.
type memberEnv struct {
	*clusterEnv
	t       *testing.T
	cfgPath string
	token   string
}

func (m *memberEnv) load() *config.Config {
	m.t.Helper()
	c, err := config.Load(m.cfgPath)
	if err != nil {
		m.t.Fatal(err)
	}
	return c
}

func (m *memberEnv) write(c *config.Config) {
	m.t.Helper()
	data, err := c.Marshal()
	if err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(m.cfgPath, data, 0o644); err != nil {
		m.t.Fatal(err)
	}
}

// do calls the admin API; a transport error fails the test.
func (m *memberEnv) do(method, path string, body []byte) (int, string) {
	m.t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+m.admin+path, r)
	if err != nil {
		m.t.Fatal(err)
	}
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	if m.token != "" {
		req.Header.Set("Authorization", "Bearer "+m.token)
	}
	c := &http.Client{Timeout: 60 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		m.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

func (m *memberEnv) reload() (int, string) {
	m.t.Helper()
	s := time.Now()
	code, body := m.do("POST", "/api/v1/config/reload", nil)
	m.t.Logf("reload: %d in %s: %s", code, time.Since(s).Round(time.Millisecond), strings.TrimSpace(body))
	return code, body
}

func (m *memberEnv) servers() []admin.ServerView {
	m.t.Helper()
	code, body := m.do("GET", "/api/v1/servers", nil)
	if code != http.StatusOK {
		m.t.Fatalf("GET /api/v1/servers: %d %s", code, body)
	}
	var list []admin.ServerView
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		m.t.Fatalf("GET /api/v1/servers: %v\n%s", err, body)
	}
	return list
}

func (m *memberEnv) find(cluster, name string) (admin.ServerView, bool) {
	m.t.Helper()
	for _, s := range m.servers() {
		if s.Cluster == cluster && s.Name == name {
			return s, true
		}
	}
	return admin.ServerView{}, false
}

// names are the cluster's servers, sorted.
func (m *memberEnv) names(cluster string) []string {
	m.t.Helper()
	var out []string
	for _, s := range m.servers() {
		if s.Cluster == cluster {
			out = append(out, s.Name)
		}
	}
	slices.Sort(out)
	return out
}

func (m *memberEnv) writerOf(cluster string) string {
	m.t.Helper()
	for _, s := range m.servers() {
		if s.Cluster == cluster && s.Writer && s.Writable && s.State == "ONLINE" {
			return s.Name
		}
	}
	return ""
}

// eventsOf are the journal's events of kind (about server, unless ""),
// newest first.
func (m *memberEnv) eventsOf(kind, server string) []admin.Event {
	m.t.Helper()
	path := "/api/v1/events?limit=1000&kind=" + kind
	if server != "" {
		path += "&server=" + server
	}
	code, body := m.do("GET", path, nil)
	if code != http.StatusOK {
		m.t.Fatalf("GET %s: %d %s", path, code, body)
	}
	var list []admin.Event
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		m.t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
	slices.SortStableFunc(list, func(a, b admin.Event) int { return b.Time.Compare(a.Time) })
	return list
}

func (m *memberEnv) metrics() string {
	m.t.Helper()
	code, body := m.do("GET", "/metrics", nil)
	if code != http.StatusOK {
		m.t.Fatalf("GET /metrics: %d", code)
	}
	return body
}

// waitJoin waits until name, just added, is listed: first OFFLINE_SOFT
// with a "joining" reason, then ONLINE; and server_joined is journaled.
//
// catchingUp says the server is behind when it is added, so that it must
// be seen joining; one that is caught up may be ONLINE when the API is
// first asked. since is when the change was asked for.
func (m *memberEnv) waitJoin(cluster, name string, since time.Time, catchingUp bool) {
	m.t.Helper()
	var seen []string
	Eventually(m.t, 45*time.Second, name+" joining, then ONLINE", func() error {
		v, ok := m.find(cluster, name)
		if !ok {
			return fmt.Errorf("%s not listed", name)
		}
		st := v.State
		if v.State == "OFFLINE_SOFT" && strings.HasPrefix(v.Reason, "joining") {
			st = "OFFLINE_SOFT(joining)"
		}
		if len(seen) == 0 || seen[len(seen)-1] != st {
			seen = append(seen, st)
			m.t.Logf("%s: %s %s", name, v.State, v.Reason)
		}
		if v.State != "ONLINE" {
			return fmt.Errorf("%s is %s (%s)", name, v.State, v.Reason)
		}
		return nil
	})
	m.t.Logf("%s: %s, ONLINE %s after the change", name, strings.Join(seen, " → "), time.Since(since).Round(time.Millisecond))
	// The journal tells the whole story: server_added (joining), then
	// server_joined. A server that is caught up already may finish
	// joining before the change returns, so the API may show it ONLINE
	// at once.
	var added, joined admin.Event
	Eventually(m.t, 10*time.Second, "server_added and server_joined events for "+name, func() error {
		ad, jo := m.eventsOf("server_added", name), m.eventsOf("server_joined", name)
		if len(ad) == 0 || ad[0].Time.Before(since) {
			return errors.New("no server_added since the change")
		}
		if len(jo) == 0 || jo[0].Time.Before(ad[0].Time) {
			return errors.New("no server_joined since server_added")
		}
		added, joined = ad[0], jo[0]
		return nil
	})
	if !strings.Contains(added.Message, "joining") {
		m.t.Errorf("server_added for %s does not say it is joining: %q", name, added.Message)
	}
	m.t.Logf("%s: joined %s after it was added", name, joined.Time.Sub(added.Time).Round(time.Millisecond))
	if seen[0] != "OFFLINE_SOFT(joining)" && (catchingUp || seen[0] != "ONLINE") {
		m.t.Errorf("%s was first seen %s, not OFFLINE_SOFT joining: %v", name, seen[0], seen)
	}
}

// waitReads waits until Vigil's per-server statement counter of name
// grows.
func (m *memberEnv) waitReads(cluster, name string) {
	m.t.Helper()
	v, _ := m.find(cluster, name)
	first := v.Queries
	Eventually(m.t, 20*time.Second, name+" taking reads", func() error {
		v, ok := m.find(cluster, name)
		if !ok {
			return fmt.Errorf("%s not listed", name)
		}
		if v.Queries <= first || v.Queries < 50 {
			return fmt.Errorf("%s ran %d statements (%d before)", name, v.Queries, first)
		}
		return nil
	})
}

// sqlOn runs stmt on node over its socket.
func (m *memberEnv) sqlOn(node, stmt string) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := m.sb.SQL(ctx, node, stmt); err != nil {
		m.t.Fatalf("%s on %s: %v", stmt, node, err)
	}
}

// count runs q on node over its socket and joins the row's columns with
// "/" (CHECKSUM TABLE's first column, the table name, is dropped).
func (m *memberEnv) count(node, q string) string {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := m.sb.SQL(ctx, node, q)
	if err != nil || len(rows) != 1 {
		m.t.Fatalf("%s on %s: %v %v", q, node, rows, err)
	}
	r := rows[0]
	if strings.HasPrefix(q, "CHECKSUM") {
		r = r[1:]
	}
	return strings.Join(r, "/")
}

// waitCaughtUp waits until the replicas have applied the primary's
// current GTID position.
func (m *memberEnv) waitCaughtUp(replicas []string) {
	m.t.Helper()
	pos := m.count("node1", "SELECT @@gtid_binlog_pos")
	for _, r := range replicas {
		Eventually(m.t, 30*time.Second, r+" at the primary's position "+pos, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			rows, err := m.sb.SQL(ctx, r, "SELECT MASTER_GTID_WAIT('"+pos+"', 1)")
			if err != nil {
				return err
			}
			if len(rows) != 1 || rows[0][0] != "0" {
				return fmt.Errorf("MASTER_GTID_WAIT: %v", rows)
			}
			return nil
		})
	}
}

// checkLoad lets the load run on for a while after a step, then fails
// the test at once when it already failed.
func (m *memberEnv) checkLoad(rw, ro *sysbenchRun, w *memberWriter) {
	m.t.Helper()
	time.Sleep(2 * time.Second)
	for _, sb := range []*sysbenchRun{rw, ro} {
		if sb.exited() {
			m.t.Fatalf("%s ended early (an error?):\n%s", sb.name, sb.output())
		}
	}
	if err := w.failure(); err != nil {
		m.t.Fatalf("the writer's session failed: %v", err)
	}
}

// stoppableSysbench wraps a stock sysbench workload (SB_WORKLOAD) so that
// it ends when the file SB_STOP exists: sysbench stops a thread whose
// event() returns true, and prints its report as after --time.
const stoppableSysbench = `
require(os.getenv("SB_WORKLOAD"))
local stock_event = event
local stop = os.getenv("SB_STOP")
local n = 0
function event(thread_id)
  stock_event(thread_id)
  n = n + 1
  if n % 10 == 0 then
    local f = io.open(stop, "r")
    if f ~= nil then
      f:close()
      return true
    end
  end
end
`

func writeStoppableSysbench(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "stoppable.lua")
	if err := os.WriteFile(p, []byte(stoppableSysbench), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// sysbenchRun is a sysbench process running in the background.
type sysbenchRun struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
}

func (s *sysbenchRun) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.Write(p)
}

func (s *sysbenchRun) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

func (s *sysbenchRun) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *sysbenchRun) wait(d time.Duration) (string, error) {
	select {
	case <-s.done:
		return s.output(), s.err
	case <-time.After(d):
		return s.output(), fmt.Errorf("still running after %s", d)
	}
}

// startSysbenchUntil runs workload through addr with threads until the
// stop file exists (at most four minutes): any client error is fatal
// (--mysql-ignore-errors=none), so sysbench then exits non-zero.
func startSysbenchUntil(t *testing.T, name, addr, script, stopFile, workload string, threads int) *sysbenchRun {
	host, port, _ := strings.Cut(addr, ":")
	args := []string{script, "--db-driver=mysql", "--mysql-host=" + host, "--mysql-port=" + port,
		"--mysql-user=app", "--mysql-password=app", "--mysql-db=sbtest", "--tables=2", "--table-size=10000",
		"--mysql-ignore-errors=none", "--rand-type=uniform", "--threads=" + strconv.Itoa(threads),
		"--time=240", "--report-interval=10", "run"}
	s := &sysbenchRun{name: name, done: make(chan struct{})}
	s.cmd = exec.Command("sysbench", args...)
	s.cmd.Env = append(os.Environ(), "SB_WORKLOAD="+workload, "SB_STOP="+stopFile)
	s.cmd.Stdout, s.cmd.Stderr = s, s
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		if !s.exited() {
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, s.output())
		}
	})
	return s
}

var reReconnects = regexp.MustCompile(`reconnects:\s+(\d+)`)

func sysbenchCount(out string, re *regexp.Regexp) int {
	m := re.FindStringSubmatch(out)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// memberWriter inserts numbered rows through Vigil on one session held
// for its whole life: any error (a dropped connection included) stops
// it and is kept.
type memberWriter struct {
	mu    sync.Mutex
	acked int
	err   error
	stop  chan struct{}
	done  chan struct{}
}

func startMemberWriter(t *testing.T, addr string) *memberWriter {
	db := openDB(t, fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s&readTimeout=30s&interpolateParams=true", addr))
	mustExec(t, db, "CREATE TABLE IF NOT EXISTS vigil_test.members (n INT PRIMARY KEY)")
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := &memberWriter{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer cancel()
		defer conn.Close()
		for n := 1; ; n++ {
			select {
			case <-w.stop:
				return
			default:
			}
			qctx, qcancel := context.WithTimeout(ctx, 30*time.Second)
			_, err := conn.ExecContext(qctx, "INSERT INTO vigil_test.members (n) VALUES (?)", n)
			qcancel()
			w.mu.Lock()
			if err != nil {
				w.err = fmt.Errorf("INSERT %d: %w", n, err)
				w.mu.Unlock()
				return
			}
			w.acked = n
			w.mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	t.Cleanup(func() {
		select {
		case <-w.stop:
		default:
			close(w.stop)
		}
		<-w.done
	})
	return w
}

func (w *memberWriter) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *memberWriter) finish() (int, error) {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked, w.err
}
