package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"

	_ "github.com/go-sql-driver/mysql"
)

func TestMain(m *testing.M) { Main(m) }

// cliSandbox drives one sandbox directory through the vigil binary.
type cliSandbox struct {
	t   *testing.T
	dir string
}

// run runs `vigil sandbox CMD ARGS... --dir DIR` (flags after the
// positional arguments, as a person types them).
func (c cliSandbox) run(cmd string, args ...string) string {
	c.t.Helper()
	return Vigil(c.t, append(append([]string{"sandbox", cmd}, args...), "--dir", c.dir)...)
}

func (c cliSandbox) try(cmd string, args ...string) Result {
	c.t.Helper()
	r, err := RunVigil(c.t, append(append([]string{"sandbox", cmd}, args...), "--dir", c.dir)...)
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

func (c cliSandbox) status() sandbox.StatusReport {
	c.t.Helper()
	r := c.try("status", "--json")
	if r.ExitCode != 0 {
		c.t.Fatalf("status: exit %d: %s", r.ExitCode, r.Stderr)
	}
	if r.Took > 6*time.Second {
		c.t.Errorf("status took %s: it must not hang on a paused or isolated node", r.Took)
	}
	var st sandbox.StatusReport
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
		c.t.Fatalf("status --json: %v\n%s", err, r.Stdout)
	}
	return st
}

func (c cliSandbox) node(name string) sandbox.NodeStatus {
	c.t.Helper()
	n, ok := c.status().Node(name)
	if !ok {
		c.t.Fatalf("status has no %s", name)
	}
	return n
}

// tcpQuery runs a query as app over TCP with one-second timeouts.
func tcpQuery(addr, q string) (string, error) {
	db, err := sql.Open("mysql", sandbox.TCPDSN(addr, "app", "app", "")+"?timeout=1s&readTimeout=1s&writeTimeout=1s")
	if err != nil {
		return "", err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var v string
	err = db.QueryRowContext(ctx, q).Scan(&v)
	return v, err
}

// TestSandboxReplicationCLI is the acceptance of `vigil sandbox` with a
// three-node replication sandbox, driven through the real binary.
func TestSandboxReplicationCLI(t *testing.T) {
	RequireMariaDB(t)
	BuildVigil(t)
	c := cliSandbox{t: t, dir: SandboxDir(t)}

	t0 := time.Now()
	out := c.run("up", "--topology", "replication", "--nodes", "3", "--json")
	t.Logf("replication sandbox with 3 nodes up in %s", time.Since(t0).Round(time.Millisecond))
	var m sandbox.Manifest
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("up --json: %v\n%s", err, out)
	}
	onDisk, err := os.ReadFile(filepath.Join(c.dir, "sandbox.json"))
	if err != nil || string(onDisk) != out {
		t.Errorf("up --json did not print sandbox.json exactly (%v)", err)
	}
	if m.Topology != sandbox.Replication || len(m.Nodes) != 3 || m.Proxy.Port == 0 || m.Admin.Port == 0 || m.Accounts.App.User != "app" {
		t.Fatalf("manifest: %+v", m)
	}
	cfg, err := config.Load(filepath.Join(c.dir, "vigil.yaml"))
	if err != nil {
		t.Fatalf("vigil.yaml: %v", err)
	}
	if cl := cfg.Clusters[0]; cl.Name != "sandbox" || cl.Listen != m.Proxy.Addr() || len(cl.Servers) != 3 || cl.Servers[0].Role != "primary" {
		t.Errorf("vigil.yaml cluster: %+v", cl)
	}
	addr := func(name string) string {
		for _, n := range m.Nodes {
			if n.Name == name {
				return n.Addr()
			}
		}
		t.Fatalf("no %s", name)
		return ""
	}

	t.Run("status", func(t *testing.T) {
		st := c.status()
		want := map[string]string{"node1": "primary", "node2": "replica", "node3": "replica"}
		for _, n := range st.Nodes {
			if !n.Running || n.Role != want[n.Name] || n.PID == 0 || n.Port == 0 || n.Socket == "" || n.Host != "127.0.0.1" {
				t.Errorf("%s: %+v", n.Name, n)
			}
			if n.Role == "replica" && (!n.Replicating || n.SecondsBehind == nil || n.Source != "node1") {
				t.Errorf("%s is not replicating from node1: %+v", n.Name, n)
			}
		}
	})

	t.Run("accounts", func(t *testing.T) {
		for _, acct := range [][2]string{{"app", "app"}, {"monitor", "monitor"}, {"repl", "repl"}} {
			db, err := sql.Open("mysql", sandbox.TCPDSN(addr("node2"), acct[0], acct[1], "")+"?timeout=2s")
			if err != nil {
				t.Fatal(err)
			}
			var user string
			if err := db.QueryRow("SELECT CURRENT_USER()").Scan(&user); err != nil || user != acct[0]+"@%" {
				t.Errorf("login as %s: %q, %v", acct[0], user, err)
			}
			db.Close()
		}
		if got := c.run("sql", "node1", "SELECT COUNT(*) FROM mysql.user WHERE user = ''"); got != "0\n" {
			t.Errorf("anonymous users left: %q", got)
		}
		if got := c.run("sql", "node3", "SHOW DATABASES LIKE 'sbtest'"); got != "sbtest\n" {
			t.Errorf("no sbtest database: %q", got)
		}
	})

	t.Run("replicates within a second", func(t *testing.T) {
		c.run("sql", "node1", "CREATE TABLE vigil_test.acceptance (id INT PRIMARY KEY, v VARCHAR(32))")
		c.run("sql", "node1", "INSERT INTO vigil_test.acceptance VALUES (1, 'written on node1')")
		start := time.Now()
		Eventually(t, time.Second, "row visible on node3", func() error {
			r := c.try("sql", "node3", "SELECT v FROM vigil_test.acceptance WHERE id = 1")
			if r.ExitCode != 0 || r.Stdout != "written on node1\n" {
				return fmt.Errorf("exit %d: %q %s", r.ExitCode, r.Stdout, r.Stderr)
			}
			return nil
		})
		t.Logf("row visible on node3 %s after the insert", time.Since(start).Round(time.Millisecond))
	})

	t.Run("errors", func(t *testing.T) {
		r := c.try("sql", "node2", "SELECT nosuchcolumn FROM vigil_test.acceptance")
		if r.ExitCode != 1 || !strings.HasPrefix(r.Stderr, "vigil sandbox: ") || !strings.Contains(r.Stderr, "nosuchcolumn") || strings.Count(r.Stderr, "\n") != 1 {
			t.Errorf("bad SQL: exit %d, stderr %q", r.ExitCode, r.Stderr)
		}
		r = c.try("kill", "node7")
		if r.ExitCode != 1 || !strings.Contains(r.Stderr, "node1, node2, node3") {
			t.Errorf("unknown node: exit %d, stderr %q", r.ExitCode, r.Stderr)
		}
		r = c.try("up")
		if r.ExitCode != 1 || !strings.Contains(r.Stderr, "vigil sandbox down --dir "+c.dir) {
			t.Errorf("up over a running sandbox: exit %d, stderr %q", r.ExitCode, r.Stderr)
		}
	})

	t.Run("kill and start", func(t *testing.T) {
		pid := c.node("node1").PID
		c.run("kill", "node1")
		if ProcessAlive(pid) {
			t.Fatalf("node1 (pid %d) still alive after kill", pid)
		}
		if n := c.node("node1"); n.Running || n.Reachable {
			t.Errorf("node1 after kill: %+v", n)
		}
		if conn, err := net.DialTimeout("tcp", addr("node1"), time.Second); err == nil {
			conn.Close()
			t.Error("node1's port still accepts connections after kill")
		}
		if r := c.try("sql", "node1", "SELECT 1"); r.ExitCode != 1 {
			t.Errorf("sql on a killed node: exit %d", r.ExitCode)
		}
		// Flags before the node this time.
		Vigil(t, "sandbox", "start", "--dir", c.dir, "node1")
		if got := c.run("sql", "node1", "SELECT 1"); got != "1\n" {
			t.Errorf("node1 after start: %q", got)
		}
		if n := c.node("node1"); !n.Running || n.Role != "primary" || n.PID == pid {
			t.Errorf("node1 after start: %+v", n)
		}
		Eventually(t, 20*time.Second, "replicas replicate again", func() error {
			for _, name := range []string{"node2", "node3"} {
				if n := c.node(name); !n.Replicating {
					return fmt.Errorf("%s: %+v", name, n)
				}
			}
			return nil
		})
	})

	t.Run("pause and resume", func(t *testing.T) {
		c.run("pause", "node2")
		start := time.Now()
		if _, err := tcpQuery(addr("node2"), "SELECT 1"); err == nil {
			t.Error("a query to paused node2 answered")
		}
		if took := time.Since(start); took > 4*time.Second {
			t.Errorf("query to paused node2 took %s to fail", took)
		}
		if n := c.node("node2"); !n.Running || !n.Paused || n.Reachable {
			t.Errorf("node2 while paused: %+v", n)
		}
		c.run("resume", "node2")
		Eventually(t, 5*time.Second, "node2 answers after resume", func() error {
			_, err := tcpQuery(addr("node2"), "SELECT 1")
			return err
		})
		if n := c.node("node2"); n.Paused || !n.Reachable {
			t.Errorf("node2 after resume: %+v", n)
		}
	})

	t.Run("isolate and heal", func(t *testing.T) {
		c.run("isolate", "node2")
		start := time.Now()
		if _, err := tcpQuery(addr("node2"), "SELECT 1"); err == nil {
			t.Error("isolated node2 answered over TCP")
		}
		if conn, err := net.DialTimeout("tcp", addr("node2"), time.Second); err == nil {
			conn.Close()
			t.Error("TCP connect to isolated node2 succeeded")
		}
		if took := time.Since(start); took > 6*time.Second {
			t.Errorf("failing against isolated node2 took %s", took)
		}
		n := c.node("node2")
		if !n.Running || !n.Isolated || !ProcessAlive(n.PID) {
			t.Errorf("node2 while isolated: %+v", n)
		}
		// The process is alive: it still answers over its unix socket.
		if got := c.run("sql", "node2", "SELECT @@port"); got != strconv.Itoa(n.Port)+"\n" {
			t.Errorf("node2 over its socket while isolated: %q", got)
		}
		c.run("heal", "node2")
		Eventually(t, 5*time.Second, "node2 answers over TCP after heal", func() error {
			_, err := tcpQuery(addr("node2"), "SELECT 1")
			return err
		})
		if n := c.node("node2"); n.Isolated {
			t.Errorf("node2 after heal: %+v", n)
		}
		Eventually(t, 20*time.Second, "node2 replicates after heal", func() error {
			if n := c.node("node2"); !n.Replicating {
				return fmt.Errorf("%+v", n)
			}
			return nil
		})
	})

	t.Run("down", func(t *testing.T) {
		var pids []int
		for _, n := range c.status().Nodes {
			pids = append(pids, n.PID)
		}
		c.run("pause", "node3") // down must not hang on a paused node
		c.run("down")
		for _, pid := range pids {
			if ProcessAlive(pid) {
				t.Errorf("pid %d still alive after down", pid)
			}
		}
		if left := ServerPIDs(c.dir); len(left) > 0 {
			t.Errorf("mariadbd processes of the sandbox left after down: %v", left)
		}
		for _, n := range c.status().Nodes {
			if n.Running {
				t.Errorf("%s running after down", n.Name)
			}
		}
	})
}

// TestSandboxGalera checks a three-node Galera cluster through the Go API.
func TestSandboxGalera(t *testing.T) {
	t0 := time.Now()
	sb := Sandbox(t, sandbox.Options{Topology: sandbox.Galera, Nodes: 3})
	t.Logf("galera sandbox with 3 nodes up in %s", time.Since(t0).Round(time.Millisecond))
	ctx := context.Background()
	clusterSize := func(node string) (string, error) {
		rows, err := sb.SQL(ctx, node, "SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'")
		if err != nil {
			return "", err
		}
		if len(rows) != 1 || len(rows[0]) != 2 {
			return "", fmt.Errorf("rows %q", rows)
		}
		return rows[0][1], nil
	}
	for _, node := range sb.NodeNames() {
		if got, err := clusterSize(node); err != nil || got != "3" {
			t.Errorf("%s: wsrep_cluster_size = %q, %v; want 3", node, got, err)
		}
	}

	db, err := sql.Open("mysql", sb.DSN("node1", "app", "app", "vigil_test"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE g (id INT PRIMARY KEY AUTO_INCREMENT, v VARCHAR(16))"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO g (v) VALUES ('galera')"); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 5*time.Second, "row on node3", func() error {
		v, err := tcpQuery(sb.Addr("node3"), "SELECT v FROM vigil_test.g")
		if err == nil && v != "galera" {
			err = fmt.Errorf("v = %q", v)
		}
		return err
	})

	t.Run("isolate splits the cluster, heal joins it", func(t *testing.T) {
		if err := sb.Isolate(ctx, "node3"); err != nil {
			t.Fatal(err)
		}
		Eventually(t, 30*time.Second, "node1 and node2 form a cluster of 2", func() error {
			for _, n := range []string{"node1", "node2"} {
				if got, err := clusterSize(n); err != nil || got != "2" {
					return fmt.Errorf("%s: %q %v", n, got, err)
				}
			}
			return nil
		})
		Eventually(t, 30*time.Second, "isolated node3 leaves the primary component", func() error {
			st, err := sb.Status(ctx)
			if err != nil {
				return err
			}
			if n, _ := st.Node("node3"); !n.Running || !n.Isolated || n.ClusterStatus == "Primary" {
				return fmt.Errorf("node3: running %v isolated %v cluster status %q size %d", n.Running, n.Isolated, n.ClusterStatus, n.ClusterSize)
			}
			return nil
		})
		if err := sb.Heal(ctx, "node3"); err != nil {
			t.Fatal(err)
		}
		Eventually(t, 60*time.Second, "cluster of 3 again", func() error {
			for _, n := range sb.NodeNames() {
				if got, err := clusterSize(n); err != nil || got != "3" {
					return fmt.Errorf("%s: %q %v", n, got, err)
				}
			}
			return nil
		})
	})
}

// TestSandboxSemiSync checks that --semi-sync makes commits wait for a
// replica's acknowledgement, that replicas keep applying (their own
// semi-sync master side must not make their applier wait) and stop
// promptly.
func TestSandboxSemiSync(t *testing.T) {
	sb := Sandbox(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3, SemiSync: true})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := sb.Exec(ctx, "node1",
		"CREATE TABLE vigil_test.s (id INT PRIMARY KEY)",
		"INSERT INTO vigil_test.s VALUES (1)",
		"INSERT INTO vigil_test.s VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	rows, err := sb.SQL(ctx, "node1", "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN ('RPL_SEMI_SYNC_MASTER_STATUS', 'RPL_SEMI_SYNC_MASTER_YES_TX', 'RPL_SEMI_SYNC_MASTER_NO_TX')")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[strings.ToLower(r[0])] = r[1]
	}
	yes, _ := strconv.Atoi(got["rpl_semi_sync_master_yes_tx"])
	if got["rpl_semi_sync_master_status"] != "ON" || yes < 3 || got["rpl_semi_sync_master_no_tx"] != "0" {
		t.Errorf("semi-sync status on node1: %v", got)
	}
	for _, n := range []string{"node2", "node3"} {
		Eventually(t, 5*time.Second, n+" applies every transaction", func() error {
			rows, err := sb.SQL(ctx, n, "SELECT COUNT(*) FROM vigil_test.s")
			if err == nil && rows[0][0] != "2" {
				err = fmt.Errorf("%s has %s rows", n, rows[0][0])
			}
			return err
		})
	}
	rows, err = sb.SQL(ctx, "node2", "SELECT @@rpl_semi_sync_slave_enabled, @@rpl_semi_sync_master_enabled, @@rpl_semi_sync_master_wait_point, @@rpl_semi_sync_master_timeout")
	if err != nil || len(rows) != 1 || rows[0][0] != "1" || rows[0][1] != "1" || rows[0][2] != "AFTER_SYNC" || rows[0][3] != "3600000" {
		t.Errorf("semi-sync settings on node2: %q, %v", rows, err)
	}
	start := time.Now()
	if err := sb.Stop(ctx, "node2"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("stopping a semi-sync replica took %s", took)
	}
}

// TestSandboxStandalone checks a single server and the Go API's stop and
// start.
func TestSandboxStandalone(t *testing.T) {
	sb := Sandbox(t, sandbox.Options{Topology: sandbox.Standalone})
	ctx := context.Background()
	st, err := sb.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 1 || st.Nodes[0].Role != "standalone" || !st.Nodes[0].Running {
		t.Fatalf("status: %+v", st.Nodes)
	}
	cfg, err := config.Load(sb.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if cl := cfg.Clusters[0]; cl.Type != "replication" || cl.Servers[0].Role != "primary" {
		t.Errorf("vigil.yaml for one standalone node: %+v", cl)
	}
	if err := sb.Stop(ctx, "node1"); err != nil {
		t.Fatal(err)
	}
	if running, _ := sb.IsRunning("node1"); running {
		t.Fatal("node1 running after Stop")
	}
	if err := sb.Start(ctx, "node1"); err != nil {
		t.Fatal(err)
	}
	if v, err := tcpQuery(sb.Addr("node1"), "SELECT CURRENT_USER()"); err != nil || v != "app@%" {
		t.Errorf("app over TCP after restart: %q, %v", v, err)
	}
}
