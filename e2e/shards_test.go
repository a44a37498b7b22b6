package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/sandbox"
	"github.com/vigil-db/vigil/internal/shardmove"
)

// shardEnv is two replication clusters behind one Vigil with a sharded
// listener, and eight tenant schemas: tenant1-4 on the first cluster,
// tenant5-8 on the second.
type shardEnv struct {
	*clusterEnv
	shards   string            // the sharded listener's address
	primary  map[string]string // cluster -> primary node
	clusters []string
}

const shardTenants = 8

func tenantCluster(e *shardEnv, i int) string { return e.clusters[(i-1)*len(e.clusters)/shardTenants] }

func newShardEnv(t *testing.T) *shardEnv {
	t.Helper()
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3, Clusters: 2}, nil)
	e := &shardEnv{clusterEnv: env, shards: env.sb.ShardsAddr(), primary: map[string]string{}}
	for _, c := range env.sb.Clusters() {
		e.clusters = append(e.clusters, c.Name)
		e.primary[c.Name] = c.Nodes[0]
	}
	if e.shards == "" || len(e.clusters) != 2 {
		t.Fatalf("the sandbox has no sharded listener or not two clusters: %q %v", e.shards, e.clusters)
	}
	Eventually(t, 20*time.Second, "a writer in every cluster behind the sharded listener", func() error {
		v := e.shardsView(t)
		for _, c := range v.Clusters {
			if c.Writer == "" {
				return fmt.Errorf("cluster %s has no writer yet", c.Name)
			}
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 1; i <= shardTenants; i++ {
		db := fmt.Sprintf("tenant%d", i)
		if err := env.sb.Exec(ctx, e.primary[tenantCluster(e, i)],
			"CREATE DATABASE "+db,
			"CREATE TABLE "+db+".acct (id INT AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL, v VARCHAR(64) NOT NULL, KEY(k))",
			"INSERT INTO "+db+".acct (k, v) SELECT seq, CONCAT('"+db+"-', seq) FROM "+db+".seq_1_to_100"); err != nil {
			t.Fatalf("creating %s: %v", db, err)
		}
	}
	// Every replica has the tenants before the load reads them.
	for _, c := range env.sb.Clusters() {
		pos, err := env.sb.SQL(ctx, c.Nodes[0], "SELECT @@gtid_binlog_pos")
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range c.Nodes[1:] {
			if r, err := env.sb.SQL(ctx, n, fmt.Sprintf("SELECT MASTER_GTID_WAIT('%s', 30)", pos[0][0])); err != nil || r[0][0] != "0" {
				t.Fatalf("%s did not replicate the tenants: %v %v", n, r, err)
			}
		}
	}
	return e
}

func (e *shardEnv) shardsView(t testing.TB) admin.ShardsView {
	t.Helper()
	out, err := e.ctl(t, "--json", "shards")
	if err != nil {
		t.Fatalf("vigil ctl shards: %v: %s", err, out)
	}
	var v admin.ShardsView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("vigil ctl shards: %v: %s", err, out)
	}
	return v
}

// db opens a pool on the sharded listener with schema as the connect-time
// schema ("" for none).
func (e *shardEnv) db(t testing.TB, schema string) *sql.DB {
	return openDB(t, fmt.Sprintf("app:app@tcp(%s)/%s?timeout=5s&readTimeout=20s&writeTimeout=20s", e.shards, schema))
}

// TestShards runs a write load over eight tenants on two clusters through
// one sharded listener, and checks every row landed on its tenant's
// cluster, the refusals (7016 to 7019) and the merged SHOW DATABASES.
func TestShards(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	RequireMariaDB(t)
	e := newShardEnv(t)

	// The load: a worker per tenant connected with the tenant as its
	// schema (autocommit inserts, reads, a transaction, a prepared
	// statement), and two workers with no schema that name a random
	// tenant in every statement.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var acked [shardTenants + 1]atomic.Int64
	var statements atomic.Int64
	var errMu sync.Mutex
	var loadErrs []string
	fail := func(who string, err error) {
		errMu.Lock()
		defer errMu.Unlock()
		if len(loadErrs) < 20 {
			loadErrs = append(loadErrs, fmt.Sprintf("%s: %v", who, err))
		}
	}
	for i := 1; i <= shardTenants; i++ {
		db := e.db(t, fmt.Sprintf("tenant%d", i))
		db.SetMaxOpenConns(1)
		wg.Go(func() { tenantWorker(ctx, db, i, &acked[i], &statements, fail) })
	}
	for w := range 2 {
		db := e.db(t, "")
		db.SetMaxOpenConns(1)
		wg.Go(func() {
			for ctx.Err() == nil {
				i := 1 + rand.IntN(shardTenants)
				if _, err := db.Exec(fmt.Sprintf("INSERT INTO tenant%d.acct (k, v) VALUES (?, 'qualified')", i), w); err != nil {
					fail(fmt.Sprintf("qualified worker %d tenant%d", w, i), err)
					continue
				}
				acked[i].Add(1)
				var n int
				if err := db.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM tenant%d.acct WHERE k = ?", i), w).Scan(&n); err != nil {
					fail(fmt.Sprintf("qualified worker %d tenant%d read", w, i), err)
				}
				statements.Add(2)
			}
		})
	}

	// While it runs: what is refused, and SHOW DATABASES.
	probe := e.db(t, "tenant1")
	probe.SetMaxOpenConns(1)
	if _, err := probe.Exec("SELECT a.k FROM tenant1.acct a JOIN tenant5.acct b USING (k) LIMIT 1"); mysqlCode(err) != 7016 ||
		!strings.Contains(err.Error(), "tenant1") || !strings.Contains(err.Error(), "tenant5") {
		t.Errorf("a join over two clusters: got %v, want 7016 naming both schemas", err)
	}
	func() {
		conn, err := probe.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		bg := context.Background()
		mustExec(t, conn, "BEGIN")
		mustExec(t, conn, "INSERT INTO acct (k, v) VALUES (-1, 'rolled back')")
		if _, err := conn.ExecContext(bg, "UPDATE tenant6.acct SET v = 'x' WHERE k = -1"); mysqlCode(err) != 7016 {
			t.Errorf("another cluster inside a transaction: got %v, want 7016", err)
		}
		mustExec(t, conn, "ROLLBACK")
		var n int
		if err := conn.QueryRowContext(bg, "SELECT COUNT(*) FROM tenant5.acct WHERE k = -1").Scan(&n); err != nil || n != 0 {
			t.Errorf("after ROLLBACK another cluster's tenant: %d rows, %v", n, err)
		}
	}()
	// A transaction begun with no default schema runs on the cluster of
	// the first schema it names (here the second cluster, on a fresh
	// connection whose previous statement went nowhere): the BEGIN waits
	// for it. Through database/sql's BeginTx (START TRANSACTION) and SQL.
	func() {
		bg := context.Background()
		noSchema := e.db(t, "")
		tx, err := noSchema.BeginTx(bg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec("INSERT INTO tenant6.acct (k, v) VALUES (-2, 'begun without a schema')"); err != nil {
			t.Errorf("the first statement of a transaction begun with no default schema, on another cluster: %v", err)
		}
		if _, err := tx.Exec("UPDATE tenant1.acct SET v = 'x' WHERE k = -2"); mysqlCode(err) != 7016 {
			t.Errorf("a second cluster in that transaction: got %v, want 7016", err)
		}
		if err := tx.Rollback(); err != nil {
			t.Errorf("rollback: %v", err)
		}
		var n int
		if err := noSchema.QueryRowContext(bg, "SELECT COUNT(*) FROM tenant6.acct WHERE k = -2").Scan(&n); err != nil || n != 0 {
			t.Errorf("after ROLLBACK: %d rows, %v", n, err)
		}
		conn, err := noSchema.Conn(bg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		mustExec(t, conn, "BEGIN")
		mustExec(t, conn, "COMMIT") // a transaction that named nothing
		mustExec(t, conn, "BEGIN")
		mustExec(t, conn, "INSERT INTO tenant7.acct (k, v) VALUES (-3, 'committed')")
		mustExec(t, conn, "COMMIT")
		if err := conn.QueryRowContext(bg, "SELECT COUNT(*) FROM tenant7.acct WHERE k = -3").Scan(&n); err != nil || n != 1 {
			t.Errorf("after COMMIT: %d rows, %v", n, err)
		}
		acked[7].Add(1)
	}()
	rows, err := probe.Query("SHOW DATABASES")
	if err != nil {
		t.Fatalf("SHOW DATABASES: %v", err)
	}
	var names []string
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		names = append(names, n)
	}
	rows.Close()
	for i := 1; i <= shardTenants; i++ {
		if !slices.Contains(names, fmt.Sprintf("tenant%d", i)) {
			t.Errorf("SHOW DATABASES through the sharded listener lacks tenant%d: %v", i, names)
		}
	}
	// A schema on both clusters that the map does not name.
	for _, c := range e.clusters {
		if err := e.sb.Exec(context.Background(), e.primary[c], "CREATE DATABASE twice", "CREATE TABLE twice.t (a INT)"); err != nil {
			t.Fatal(err)
		}
	}
	// A look at the clusters between the two CREATEs saw it on one only:
	// the next look (discover_interval) sees both.
	Eventually(t, 15*time.Second, "7017 for a schema on both clusters", func() error {
		if _, err := probe.Exec("SELECT * FROM twice.t"); mysqlCode(err) != 7017 {
			return fmt.Errorf("got %v", err)
		}
		return nil
	})

	// Move tenant4 from the first cluster to the second while its
	// worker and the qualified workers write to it.
	time.Sleep(time.Second)
	out, err := e.ctl(t, "shard", "move", "tenant4", "--to", e.clusters[1], "--wait")
	if err != nil {
		t.Fatalf("shard move: %v\n%s", err, out)
	}
	t.Logf("vigil ctl shard move tenant4 --to %s --wait:\n%s", e.clusters[1], out)
	requireHeldAtMost(t, out, time.Second)
	moved := map[int]string{4: e.clusters[1]}

	time.Sleep(2 * time.Second) // the load goes on after the move
	stop()
	wg.Wait()
	for _, s := range loadErrs {
		t.Errorf("load: %s", s)
	}
	t.Logf("%d statements through the sharded listener, 0 expected errors, %d seen", statements.Load(), len(loadErrs))

	// Every acknowledged insert is on its tenant's cluster, none on the
	// other.
	bg, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 1; i <= shardTenants; i++ {
		c := tenantCluster(e, i)
		if m, ok := moved[i]; ok {
			c = m
		}
		got, err := e.sb.SQL(bg, e.primary[c], fmt.Sprintf("SELECT COUNT(*) FROM tenant%d.acct", i))
		if err != nil {
			t.Fatalf("tenant%d on %s: %v", i, c, err)
		}
		if want := fmt.Sprint(100 + acked[i].Load()); got[0][0] != want {
			t.Errorf("tenant%d on cluster %s has %s rows, want %s (100 + acknowledged inserts)", i, c, got[0][0], want)
		}
		for _, other := range e.clusters {
			if other == c || moved[i] != "" {
				continue // a moved schema's source copy stays until cleanup
			}
			if r, _ := e.sb.SQL(bg, e.primary[other], fmt.Sprintf("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = 'tenant%d'", i)); len(r) != 1 || r[0][0] != "0" {
				t.Errorf("tenant%d exists on cluster %s too", i, other)
			}
		}
	}

	var n int
	// The moved tenant's checksums are equal on both copies (nothing
	// writes to the source any more), then cleanup drops the source's.
	for _, tbl := range []string{"tenant4.acct"} {
		a, err1 := e.sb.SQL(bg, e.primary[e.clusters[0]], "CHECKSUM TABLE "+tbl)
		b, err2 := e.sb.SQL(bg, e.primary[e.clusters[1]], "CHECKSUM TABLE "+tbl)
		if err1 != nil || err2 != nil || len(a) != 1 || len(b) != 1 {
			t.Fatalf("checksums: %v %v %v %v", a, b, err1, err2)
		}
		t.Logf("%s checksum: source %s, target %s (the target took writes after the cutover)", tbl, a[0][1], b[0][1])
	}
	if out, err := e.ctl(t, "shard", "cleanup", "tenant4", "--wait"); err != nil {
		t.Fatalf("shard cleanup: %v\n%s", err, out)
	}
	if r, _ := e.sb.SQL(bg, e.primary[e.clusters[0]], "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = 'tenant4'"); len(r) != 1 || r[0][0] != "0" {
		t.Errorf("tenant4 still on the source after cleanup: %v", r)
	}
	if err := probe.QueryRow("SELECT COUNT(*) FROM tenant4.acct").Scan(&n); err != nil {
		t.Errorf("tenant4 after the cleanup: %v", err)
	}

	// The dashboard's Shards panel: tenant4 on the second cluster, the
	// last move (its cleanup) drawn with its steps.
	t.Run("dashboard", func(t *testing.T) {
		chrome := findChromium(t)
		b := newBrowser(t, chrome)
		url := "http://" + e.admin + "/ui/"
		if err := b.run(30*time.Second, chromedp.Navigate(url), chromedp.WaitVisible("#login-form", chromedp.ByQuery)); err != nil {
			t.Fatalf("open %s: %v", url, err)
		}
		if err := b.run(15*time.Second, chromedp.SendKeys("#token-input", adminToken(e.admin), chromedp.ByQuery),
			chromedp.Click("#login-submit", chromedp.ByQuery), chromedp.WaitNotVisible("#login", chromedp.ByQuery)); err != nil {
			t.Fatalf("sign in: %v", err)
		}
		b.waitJS(t, 20*time.Second, "the Shards panel with tenant4 on "+e.clusters[1]+" and the last move drawn", fmt.Sprintf(
			`!document.querySelector('#shards').hidden &&
			 !!document.querySelector('#shard-schemas tr[data-schema="tenant4"][data-cluster="%s"]') &&
			 !!document.querySelector('#shard-move .move[data-schema="tenant4"][data-state="cleaned"]') &&
			 document.querySelectorAll('#shard-move .move-step[data-state="done"]').length === 2 &&
			 document.querySelectorAll('#shard-clusters tr.shard-cluster').length === 2`, e.clusters[1]))
	})

	// Shard states.
	if out, err := e.ctl(t, "shard", "state", "tenant3", "read_only"); err != nil {
		t.Fatalf("shard state: %v: %s", err, out)
	}
	if _, err := probe.Exec("INSERT INTO tenant3.acct (k, v) VALUES (1, 'refused')"); mysqlCode(err) != 7018 {
		t.Errorf("a write to a read_only schema: got %v, want 7018", err)
	}
	if err := probe.QueryRow("SELECT COUNT(*) FROM tenant3.acct").Scan(&n); err != nil || n == 0 {
		t.Errorf("a read of a read_only schema: %d rows, %v", n, err)
	}
	if out, err := e.ctl(t, "shard", "state", "tenant3", "offline"); err != nil {
		t.Fatalf("shard state: %v: %s", err, out)
	}
	if err := probe.QueryRow("SELECT COUNT(*) FROM tenant3.acct").Scan(&n); mysqlCode(err) != 7019 {
		t.Errorf("a read of an offline schema: got %v, want 7019", err)
	}
	if out, err := e.ctl(t, "shard", "state", "tenant3", "online"); err != nil {
		t.Fatalf("shard state: %v: %s", err, out)
	}
	if _, err := probe.Exec("INSERT INTO tenant3.acct (k, v) VALUES (1, 'online again')"); err != nil {
		t.Errorf("a write once online again: %v", err)
	}
	v := e.shardsView(t)
	if v.Refused["cross_cluster"] < 2 || v.Refused["ambiguous"] < 1 || v.Refused["read_only"] < 1 || v.Refused["offline"] < 1 {
		t.Errorf("refusal counters: %v", v.Refused)
	}
	for _, c := range e.clusters {
		if v.Statements[c] == 0 {
			t.Errorf("no statement counted on cluster %s: %v", c, v.Statements)
		}
	}
	var conflict bool
	for _, s := range v.Schemas {
		if s.Name == "twice" && len(s.Conflict) == 2 {
			conflict = true
		}
	}
	if !conflict {
		t.Errorf("vigil ctl shards does not show the conflict of schema twice: %+v", v.Schemas)
	}
}

// tenantWorker writes and reads tenant i through its own connection.
func tenantWorker(ctx context.Context, db *sql.DB, i int, acked, statements *atomic.Int64, fail func(string, error)) {
	who := fmt.Sprintf("tenant%d worker", i)
	stmt, err := db.Prepare("SELECT v FROM acct WHERE k = ? LIMIT 1")
	if err != nil {
		fail(who+" prepare", err)
		return
	}
	defer stmt.Close()
	for n := 0; ctx.Err() == nil; n++ {
		if _, err := db.Exec("INSERT INTO acct (k, v) VALUES (?, ?)", n, fmt.Sprintf("w%d", n)); err != nil {
			fail(who, err)
			continue
		}
		acked.Add(1)
		var v string
		if err := stmt.QueryRow(1 + n%100).Scan(&v); err != nil {
			fail(who+" prepared read", err)
		} else if !strings.HasPrefix(v, fmt.Sprintf("tenant%d-", i)) && !strings.HasPrefix(v, "w") {
			fail(who+" prepared read", fmt.Errorf("read %q: another tenant's row", v))
		}
		statements.Add(2)
		if n%10 == 0 {
			tx, err := db.Begin()
			if err != nil {
				fail(who+" begin", err)
				continue
			}
			_, err1 := tx.Exec("INSERT INTO acct (k, v) VALUES (?, 'trx')", -n)
			_, err2 := tx.Exec("UPDATE acct SET v = 'trx-updated' WHERE k = ?", -n)
			err3 := tx.Commit()
			if err := errors.Join(err1, err2, err3); err != nil {
				fail(who+" transaction", err)
				continue
			}
			acked.Add(1)
			statements.Add(4)
		}
	}
}

// TestShardsHA: with two Vigil instances on etcd, a shard state set
// through one is applied by the other from etcd: both route by the same
// version of the map.
func TestShardsHA(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	RequireMariaDB(t)
	e := newHAEnvWith(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 2, Clusters: 2, Etcd: 1, Vigils: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i, c := range e.sb.Clusters() {
		db := fmt.Sprintf("hatenant%d", i+1)
		if err := e.sb.Exec(ctx, c.Nodes[0], "CREATE DATABASE "+db, "CREATE TABLE "+db+".t (a INT)"); err != nil {
			t.Fatal(err)
		}
	}
	dbs := make([]*sql.DB, 2)
	for i := range dbs {
		if e.m.Vigils[i].Shards == nil {
			t.Fatalf("vigil %d has no sharded listener in sandbox.json", i)
		}
		dbs[i] = openDB(t, fmt.Sprintf("app:app@tcp(%s)/?timeout=5s&readTimeout=10s", e.m.Vigils[i].Shards.Addr()))
		i := i
		Eventually(t, 30*time.Second, fmt.Sprintf("writes to both tenants through vigil %d's sharded listener", i), func() error {
			for _, db := range []string{"hatenant1", "hatenant2"} {
				if _, err := dbs[i].ExecContext(ctx, "INSERT INTO "+db+".t VALUES (1)"); err != nil {
					return err
				}
			}
			return nil
		})
	}
	version := func(i int) uint64 {
		out, err := e.ctl(i, "--json", "shards")
		if err != nil {
			t.Fatalf("vigil ctl shards on %d: %v: %s", i, err, out)
		}
		var v admin.ShardsView
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return v.Version
	}
	if out, err := e.ctl(0, "shard", "state", "hatenant2", "read_only"); err != nil {
		t.Fatalf("shard state through vigil 0: %v: %s", err, out)
	}
	Eventually(t, 10*time.Second, "vigil 1 refusing writes to hatenant2 (read_only set through vigil 0)", func() error {
		_, err := dbs[1].ExecContext(ctx, "INSERT INTO hatenant2.t VALUES (2)")
		if mysqlCode(err) != 7018 {
			return fmt.Errorf("got %v, want 7018", err)
		}
		return nil
	})
	if _, err := dbs[1].ExecContext(ctx, "INSERT INTO hatenant1.t VALUES (2)"); err != nil {
		t.Errorf("another tenant's write: %v", err)
	}
	Eventually(t, 10*time.Second, "both instances at the same map version", func() error {
		if a, b := version(0), version(1); a != b || a == 0 {
			return fmt.Errorf("versions %d and %d", a, b)
		}
		return nil
	})
	if out, err := e.ctl(1, "shard", "state", "hatenant2", "online"); err != nil {
		t.Fatalf("shard state through vigil 1: %v: %s", err, out)
	}
	Eventually(t, 10*time.Second, "vigil 0 taking writes to hatenant2 again", func() error {
		_, err := dbs[0].ExecContext(ctx, "INSERT INTO hatenant2.t VALUES (3)")
		return err
	})

	// A move with two instances: written through both, held on both at
	// the cutover, flipped on both; then a move that waits for its
	// cutover survives its owner's kill -9: the other instance takes it
	// over from the journal in etcd and cuts over.
	src, dst := e.sb.Clusters()[0], e.sb.Clusters()[1]
	for _, db := range []string{"hamove", "hamove2"} {
		if err := e.sb.Exec(ctx, src.Nodes[0], "CREATE DATABASE "+db,
			"CREATE TABLE "+db+".acct (id INT AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL, v VARCHAR(64) NOT NULL, KEY(k))"); err != nil {
			t.Fatal(err)
		}
	}
	shardsAt := func(i int) string { return e.m.Vigils[i].Shards.Addr() }
	w0 := startTenantAcksAt(t, shardsAt(0), "hamove", 1_000_000)
	w1 := startTenantAcksAt(t, shardsAt(1), "hamove", 2_000_000)
	w0.awaitMore(t, 20, "through vigil 0")
	w1.awaitMore(t, 20, "through vigil 1")
	errs0, errs1 := w0.errCount(), w1.errCount()
	out, err := e.ctl(0, "shard", "move", "hamove", "--to", dst.Name, "--wait")
	if err != nil {
		t.Fatalf("shard move hamove through vigil 0: %v\n%s", err, out)
	}
	t.Logf("vigil ctl shard move hamove --to %s --wait (two instances):\n%s", dst.Name, out)
	requireHeldAtMost(t, out, time.Second)
	w0.awaitMore(t, 20, "through vigil 0 after the move")
	w1.awaitMore(t, 20, "through vigil 1 after the move")
	if d0, d1 := w0.errCount()-errs0, w1.errCount()-errs1; d0+d1 != 0 {
		t.Errorf("client errors during the move: %d through vigil 0, %d through vigil 1 (last: %s / %s)", d0, d1, w0.lastErr(), w1.lastErr())
	}
	w0.requireAllOn(t, e.sb, dst.Nodes[0], "hamove")
	w1.requireAllOn(t, e.sb, dst.Nodes[0], "hamove")

	w := startTenantAcksAt(t, shardsAt(1), "hamove2", 3_000_000)
	w.awaitMore(t, 20, "through vigil 1")
	if out, err := e.ctl(0, "shard", "move", "hamove2", "--to", dst.Name, "--manual-cutover", "--wait"); err != nil || !strings.Contains(out, "waiting for the cutover") {
		t.Fatalf("shard move hamove2 --manual-cutover through vigil 0: %v\n%s", err, out)
	}
	mustRun(t, "kill vigil 0", e.sb.Kill(ctx, e.m.Vigils[0].Name))
	Eventually(t, 60*time.Second, "vigil 1 taking over the waiting move", func() error {
		out, err := e.ctl(1, "--json", "shard", "moves")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		var v struct {
			Running *shardmove.Journal `json:"running"`
			Owner   string             `json:"owner"`
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			return err
		}
		if v.Owner != e.m.Vigils[1].Name || v.Running == nil || v.Running.State != shardmove.StateWaiting {
			return fmt.Errorf("owner %q, running %+v", v.Owner, v.Running)
		}
		return nil
	})
	w.awaitMore(t, 30, "through vigil 1 while it owns the move")
	out, err = e.ctl(1, "shard", "cutover", "hamove2", "--wait")
	if err != nil || !strings.Contains(out, "checksums equal") {
		t.Fatalf("shard cutover hamove2 through vigil 1: %v\n%s", err, out)
	}
	t.Logf("vigil ctl shard cutover hamove2 --wait (vigil 1, after vigil 0 was killed):\n%s", out)
	requireHeldAtMost(t, out, time.Second)
	w.awaitMore(t, 20, "on the target after the cutover")
	w.requireAllOn(t, e.sb, dst.Nodes[0], "hamove2")

	// A waiting move aborted: the target's copy goes, the journal in etcd
	// says aborted, and the schema can move again.
	if out, err := e.ctl(1, "shard", "move", "hatenant1", "--to", dst.Name, "--manual-cutover", "--wait"); err != nil {
		t.Fatalf("shard move hatenant1 --manual-cutover: %v\n%s", err, out)
	}
	if out, err := e.ctl(1, "shard", "abort", "hatenant1", "--wait"); err != nil || !strings.Contains(out, "aborted") {
		t.Fatalf("shard abort hatenant1: %v\n%s", err, out)
	}
	if r := e.sql(dst.Nodes[0], "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = 'hatenant1'"); r[0][0] != "0" {
		t.Errorf("hatenant1 still on %s after the abort", dst.Name)
	}
	if out, err := e.ctl(1, "shard", "move", "hatenant1", "--to", dst.Name, "--dry-run"); err != nil {
		t.Errorf("a move after the abort: %v\n%s", err, out)
	}
}

// requireHeldAtMost checks the cutover's "writes held" in a move's output.
func requireHeldAtMost(t *testing.T, out string, limit time.Duration) {
	t.Helper()
	if m := regexp.MustCompile(`(?m)^\s*cutover\s.*writes held ([0-9.]+[mµn]?s)`).FindStringSubmatch(out); m == nil {
		t.Errorf("the cutover does not say how long writes were held: %s", out)
	} else if d, _ := time.ParseDuration(m[1]); d > limit {
		t.Errorf("writes held %s at the cutover, want at most %s", d, limit)
	}
}
