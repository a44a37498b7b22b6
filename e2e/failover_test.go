package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// clusterEnv is a sandbox with Vigil (proxy and admin API) in front.
type clusterEnv struct {
	sb    *sandbox.Sandbox
	v     *vigilProc
	addr  string
	admin string
	bin   string
}

func newClusterEnv(t *testing.T, opts sandbox.Options, tweak func(*config.Config)) *clusterEnv {
	sb := Sandbox(t, opts)
	cfg, err := config.Load(sb.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(cfg)
	}
	data, _ := cfg.Marshal()
	data = dropKeys(data, os.Getenv("VIGIL_E2E_DROP_KEYS"))
	path := filepath.Join(sb.Dir(), "vigil-e2e.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	env := &clusterEnv{sb: sb, addr: cfg.Clusters[0].Listen, admin: cfg.Admin.Listen, bin: BuildVigil(t)}
	env.v = startVigil(t, path, env.addr)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("vigil events:\n%s", env.events(t))
		}
	})
	// The admin API starts after the proxy listener: wait for it too.
	Eventually(t, 15*time.Second, "the admin API", func() error {
		c, err := net.DialTimeout("tcp", env.admin, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
	// Wait until the monitor found the writer.
	Eventually(t, 15*time.Second, "a routed writer", func() error {
		if w := env.writer(t); w == "" {
			return fmt.Errorf("no writer yet")
		}
		return nil
	})
	return env
}

// manualRejoin turns failover.auto_rejoin off: for tests of what an
// operator's `vigil ctl rejoin` does, and of a returned old primary that
// stays fenced until then.
func manualRejoin(c *config.Config) {
	off := false
	c.Clusters[0].Failover.AutoRejoin = &off
}

func (e *clusterEnv) ctl(t testing.TB, args ...string) (string, error) {
	t.Helper()
	res, err := RunVigil(t, append([]string{"ctl", "--admin", e.admin}, args...)...)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("vigil ctl %s: exit %d", strings.Join(args, " "), res.ExitCode)
	}
	return res.Stdout + res.Stderr, err
}

func (e *clusterEnv) servers(t testing.TB) []admin.ServerView {
	t.Helper()
	out, err := e.ctl(t, "--json", "servers")
	if err != nil {
		t.Fatalf("ctl servers: %v\n%s", err, out)
	}
	var list []admin.ServerView
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("ctl servers: %v\n%s", err, out)
	}
	return list
}

func (e *clusterEnv) writer(t testing.TB) string {
	for _, s := range e.servers(t) {
		if s.Writer && s.Writable && s.State == "ONLINE" {
			return s.Name
		}
	}
	return ""
}

func (e *clusterEnv) server(t testing.TB, name string) admin.ServerView {
	for _, s := range e.servers(t) {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no server %s", name)
	return admin.ServerView{}
}

func (e *clusterEnv) events(t testing.TB) string {
	out, _ := e.ctl(t, "events", "--limit", "200")
	return out
}

// writerLoop inserts numbered rows through Vigil and remembers which were
// acknowledged.
type writerLoop struct {
	mu           sync.Mutex
	acked        []int
	errs         int
	lastOK       time.Time
	firstOKAfter func(time.Time) time.Time
	stop         chan struct{}
	done         chan struct{}
}

func startWriter(t *testing.T, dsn string) *writerLoop {
	db := openDB(t, dsn)
	db.SetMaxOpenConns(1)
	mustExec(t, db, "CREATE TABLE IF NOT EXISTS vigil_test.acked (n INT PRIMARY KEY, at TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6))")
	w := &writerLoop{stop: make(chan struct{}), done: make(chan struct{})}
	var oks []time.Time
	var fails []time.Time
	// firstOKAfter is when writes worked again after the outage that
	// followed t0: the first acknowledgement after the last failure or,
	// when no write failed (Vigil held them until the new primary
	// answered), the acknowledgement that ended the longest wait after t0
	// (the first one may be a write the old primary answered just before
	// it died).
	w.firstOKAfter = func(t0 time.Time) time.Time {
		w.mu.Lock()
		defer w.mu.Unlock()
		from := t0
		for _, f := range fails {
			if f.After(from) {
				from = f
			}
		}
		if from.After(t0) {
			for _, t := range oks {
				if t.After(from) {
					return t
				}
			}
			return time.Time{}
		}
		var end time.Time
		prev, longest := t0, time.Duration(-1)
		for _, t := range oks {
			if !t.After(t0) {
				continue
			}
			if gap := t.Sub(prev); gap > longest {
				end, longest = t, gap
			}
			prev = t
		}
		return end
	}
	go func() {
		defer close(w.done)
		for n := 1; ; n++ {
			select {
			case <-w.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := db.ExecContext(ctx, "INSERT INTO vigil_test.acked (n) VALUES (?)", n)
			cancel()
			w.mu.Lock()
			if err == nil {
				w.acked = append(w.acked, n)
				now := time.Now()
				w.lastOK = now
				oks = append(oks, now)
			} else {
				w.errs++
				fails = append(fails, time.Now())
			}
			w.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return w
}

func (w *writerLoop) finish() (acked []int, errs int) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int(nil), w.acked...), w.errs
}

// checkAcked verifies every acknowledged row is on node.
func checkAcked(t *testing.T, sb *sandbox.Sandbox, node string, acked []int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := sb.SQL(ctx, node, "SELECT n FROM vigil_test.acked")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, r := range rows {
		have[r[0]] = true
	}
	missing := 0
	for _, n := range acked {
		if !have[fmt.Sprint(n)] {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged rows are missing on %s", missing, len(acked), node)
	}
}

// waitFailover waits until a server other than old is the routed writer
// and returns it with the time the writer loop's first write after t0
// was acknowledged.
func waitFailover(t *testing.T, env *clusterEnv, w *writerLoop, old string, t0 time.Time) (string, time.Duration) {
	var newPrimary string
	Eventually(t, 30*time.Second, "a new writer", func() error {
		nw := env.writer(t)
		if nw == "" || nw == old {
			return fmt.Errorf("writer is %q", nw)
		}
		newPrimary = nw
		return nil
	})
	var first time.Time
	routed := time.Now()
	Eventually(t, 15*time.Second, "an acknowledged write on the new primary", func() error {
		w.mu.Lock()
		last := w.lastOK
		w.mu.Unlock()
		if !last.After(routed) {
			return fmt.Errorf("no write acknowledged since the new writer was routed")
		}
		if first = w.firstOKAfter(t0); first.IsZero() {
			return fmt.Errorf("no write acknowledged yet")
		}
		return nil
	})
	return newPrimary, first.Sub(t0)
}

func replicatesFrom(t *testing.T, sb *sandbox.Sandbox, node, source string) {
	t.Helper()
	Eventually(t, 20*time.Second, node+" replicating from "+source, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := sb.Status(ctx)
		if err != nil {
			return err
		}
		ns, ok := st.Node(node)
		if !ok {
			return fmt.Errorf("no %s", node)
		}
		if !ns.Replicating || ns.Source != source {
			return fmt.Errorf("%s: replicating %v from %q", node, ns.Replicating, ns.Source)
		}
		return nil
	})
}

func TestFailoverKillPrimary(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	hookOut := filepath.Join(t.TempDir(), "post-failover.env")
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3, SemiSync: true}, func(c *config.Config) {
		c.Clusters[0].Failover.PostFailover = "env | grep ^VIGIL_ > " + hookOut
		manualRejoin(c) // it tests the operator's rejoin
	})
	dsn := fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s", env.addr)
	w := startWriter(t, dsn)
	time.Sleep(time.Second)
	ctx := context.Background()
	t0 := time.Now()
	if err := env.sb.Kill(ctx, "node1"); err != nil {
		t.Fatal(err)
	}
	newPrimary, took := waitFailover(t, env, w, "node1", t0)
	t.Logf("kill -9 node1 → first acknowledged write on %s after %s", newPrimary, took.Round(time.Millisecond))
	time.Sleep(500 * time.Millisecond)
	acked, errs := w.finish()
	t.Logf("%d writes acknowledged, %d failed during the failover", len(acked), errs)
	checkAcked(t, env.sb, newPrimary, acked)
	Eventually(t, 10*time.Second, "the post_failover hook", func() error {
		data, err := os.ReadFile(hookOut)
		if err != nil {
			return err
		}
		if !strings.Contains(string(data), "VIGIL_OLD_PRIMARY=node1") || !strings.Contains(string(data), "VIGIL_NEW_PRIMARY="+newPrimary) {
			return fmt.Errorf("hook environment: %s", data)
		}
		return nil
	})
	logDials(t, env.v.logf)
	other := "node2"
	if newPrimary == "node2" {
		other = "node3"
	}
	replicatesFrom(t, env.sb, other, newPrimary)

	// The old primary comes back: never routed, never writable, until rejoin.
	if err := env.sb.Start(ctx, "node1"); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 15*time.Second, "node1 made read-only while fenced", func() error {
		rows, err := env.sb.SQL(ctx, "node1", "SELECT @@read_only")
		if err != nil || len(rows) != 1 || rows[0][0] != "1" {
			return fmt.Errorf("read_only %v %v", rows, err)
		}
		return nil
	})
	if s := env.server(t, "node1"); s.State != "OFFLINE_HARD" || s.Readable || s.Writable || s.Writer {
		t.Fatalf("returned old primary is routed: %+v", s)
	}
	// Semi-sync: nothing acknowledged is missing (checkAcked above). The
	// old primary may still hold the write that was in flight when it
	// was killed: written to its binary log, never acknowledged, never
	// received by a replica. Then the salvage report counts it and rejoin
	// must refuse; otherwise rejoin makes node1 a replica again.
	var salvage string
	Eventually(t, 15*time.Second, "a salvage report", func() error {
		ev := env.events(t)
		i := strings.Index(ev, "salvage: node1 has ")
		if i < 0 {
			return fmt.Errorf("no salvage report yet")
		}
		salvage = ev[i:]
		return nil
	})
	if strings.HasPrefix(salvage, "salvage: node1 has no transaction") {
		if out, err := env.ctl(t, "rejoin", "node1"); err != nil {
			t.Fatalf("rejoin: %v\n%s", err, out)
		}
		replicatesFrom(t, env.sb, "node1", newPrimary)
		Eventually(t, 15*time.Second, "node1 routed as a replica again", func() error {
			if s := env.server(t, "node1"); s.State != "ONLINE" || !s.Readable || s.Writable {
				return fmt.Errorf("node1 %+v", s)
			}
			return nil
		})
	} else {
		t.Logf("the kill left node1 with an unacknowledged write: %.200s", salvage)
		out, err := env.ctl(t, "rejoin", "node1")
		if err == nil || !strings.Contains(out, "holds transactions the primary") {
			t.Fatalf("rejoin of a node1 with transactions the primary lacks: err %v\n%s", err, out)
		}
	}

	// A second failure within min_interval: no automatic failover.
	w2 := startWriter(t, dsn)
	t1 := time.Now()
	if err := env.sb.Kill(ctx, newPrimary); err != nil {
		t.Fatal(err)
	}
	time.Sleep(6 * time.Second)
	if wr := env.writer(t); wr != "" {
		t.Fatalf("automatic failover ran within min_interval: writer %s", wr)
	}
	if ev := env.events(t); !strings.Contains(ev, "min_interval") && !strings.Contains(ev, "RecentFailover") {
		t.Fatalf("no event says why there was no failover:\n%s", ev)
	}
	// After ack a new failover works.
	if out, err := env.ctl(t, "ack"); err != nil {
		t.Fatalf("ack: %v\n%s", err, out)
	}
	third, took2 := waitFailover(t, env, w2, newPrimary, t1)
	acked2, _ := w2.finish()
	t.Logf("after ack: %s is the primary; first write %s after the kill", third, took2.Round(time.Millisecond))
	checkAcked(t, env.sb, third, acked2)
}

func TestSwitchoverUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3, SemiSync: true}, nil)
	sysbench(t, env.addr, "oltp_read_write", "prepare")
	time.Sleep(time.Second)
	done := make(chan string, 1)
	go func() {
		done <- sysbenchNoFail(env.addr, "oltp_read_write", "--threads=32", "--time=20", "--report-interval=0", "run")
	}()
	time.Sleep(6 * time.Second)
	out, err := env.ctl(t, "--json", "switchover")
	if err != nil {
		t.Fatalf("switchover: %v\n%s", err, out)
	}
	var res admin.OpResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.OK {
		t.Fatalf("switchover result: %v %s", err, out)
	}
	t.Logf("switchover %s → %s took %.0f ms; writes held %.0f ms", res.Old, res.New, res.ElapsedMs, res.PauseMs)
	sb := <-done
	if strings.Contains(sb, "FATAL") || !strings.Contains(sb, "queries:") {
		t.Fatalf("sysbench saw a client error during the switchover:\n%s", sb)
	}
	if n := sysbenchErrors(sb); n > 0 {
		t.Logf("%d deadlocks retried by sysbench (inherent to oltp_read_write)", n)
	}
	if w := env.writer(t); w != res.New {
		t.Fatalf("writer is %s, want %s", w, res.New)
	}
	replicatesFrom(t, env.sb, res.Old, res.New)
	// The new primary was named the writer before it turned writable: no
	// "conflict" of two writable servers was reported on the way.
	if ev := env.events(t); strings.Contains(ev, " conflict ") {
		t.Errorf("the switchover reported a conflict:\n%s", ev)
	}
	// A second request while none runs works; a dry run changes nothing.
	if out, err := env.ctl(t, "switchover", "--dry-run"); err != nil || !strings.Contains(out, "CHOSEN") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
}

func sysbenchNoFail(addr string, args ...string) string {
	host, port, _ := strings.Cut(addr, ":")
	base := []string{"--db-driver=mysql", "--mysql-host=" + host, "--mysql-port=" + port,
		"--mysql-user=app", "--mysql-password=app", "--mysql-db=sbtest", "--tables=2", "--table-size=10000"}
	out, err := execCombined("sysbench", append(base, args...)...)
	if err != nil {
		return out + "\nFATAL: sysbench exited: " + err.Error()
	}
	return out
}

func TestFailoverPausedAndIsolatedPrimary(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	for _, fault := range []string{"pause", "isolate"} {
		t.Run(fault, func(t *testing.T) {
			// manualRejoin: it checks the returned old primary stays fenced.
			env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3, SemiSync: true}, manualRejoin)
			dsn := fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s&readTimeout=5s&writeTimeout=5s", env.addr)
			w := startWriter(t, dsn)
			time.Sleep(time.Second)
			ctx := context.Background()
			t0 := time.Now()
			var err error
			if fault == "pause" {
				err = env.sb.Pause(ctx, "node1")
			} else {
				err = env.sb.Isolate(ctx, "node1")
			}
			if err != nil {
				t.Fatal(err)
			}
			newPrimary, took := waitFailover(t, env, w, "node1", t0)
			t.Logf("%s node1 → first acknowledged write on %s after %s", fault, newPrimary, took.Round(time.Millisecond))
			acked, errs := w.finish()
			t.Logf("%d writes acknowledged, %d failed", len(acked), errs)
			checkAcked(t, env.sb, newPrimary, acked)
			if fault == "pause" {
				err = env.sb.Resume(ctx, "node1")
			} else {
				err = env.sb.Heal(ctx, "node1")
			}
			if err != nil {
				t.Fatal(err)
			}
			Eventually(t, 20*time.Second, "a salvage report", func() error {
				if !strings.Contains(env.events(t), "salvage: node1 has") {
					return fmt.Errorf("no salvage report yet")
				}
				return nil
			})
			// After it is back: never two writable primaries routed.
			deadline := time.Now().Add(6 * time.Second)
			for time.Now().Before(deadline) {
				writers := 0
				for _, s := range env.servers(t) {
					if s.Writer {
						writers++
					}
					if s.Name == "node1" && (s.Writable || s.Readable) {
						t.Fatalf("old primary routed after %s: %+v", fault, s)
					}
				}
				if writers != 1 {
					t.Fatalf("%d routed writers", writers)
				}
				time.Sleep(300 * time.Millisecond)
			}
		})
	}
}

func TestOverloadedPrimaryNoFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3}, nil)
	ctx := context.Background()
	if _, err := env.sb.SQL(ctx, "node1", "SET GLOBAL max_connections = 20"); err != nil {
		t.Fatal(err)
	}
	defer env.sb.SQL(ctx, "node1", "SET GLOBAL max_connections = 1000")
	// Fill the primary with plain connections until it refuses (1040).
	var held []*sql.DB
	defer func() {
		for _, db := range held {
			db.Close()
		}
	}()
	refused := false
	for i := 0; i < 40 && !refused; i++ {
		db, _ := sql.Open("mysql", env.sb.DSN("node1", "app", "app", ""))
		db.SetMaxIdleConns(1)
		if err := db.Ping(); err != nil {
			if strings.Contains(err.Error(), "1040") || strings.Contains(err.Error(), "Too many connections") {
				refused = true
			}
			db.Close()
			continue
		}
		held = append(held, db)
	}
	if !refused {
		t.Fatal("the primary never refused a connection")
	}
	time.Sleep(6 * time.Second)
	if w := env.writer(t); w != "node1" {
		t.Fatalf("writer moved to %q while the primary was only overloaded", w)
	}
	if ev := env.events(t); !strings.Contains(strings.ToLower(ev), "overload") {
		t.Fatalf("no overloaded event:\n%s", ev)
	}
}

func TestFailoverCandidateChoice(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	ctx := context.Background()
	t.Run("LaggingReplicaNotChosen", func(t *testing.T) {
		env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3, SemiSync: true}, nil)
		dsn := fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s", env.addr)
		// node2 stops receiving: it falls behind node3.
		if _, err := env.sb.SQL(ctx, "node2", "STOP SLAVE IO_THREAD"); err != nil {
			t.Fatal(err)
		}
		w := startWriter(t, dsn)
		time.Sleep(2 * time.Second)
		t0 := time.Now()
		if err := env.sb.Kill(ctx, "node1"); err != nil {
			t.Fatal(err)
		}
		newPrimary, _ := waitFailover(t, env, w, "node1", t0)
		acked, _ := w.finish()
		if newPrimary != "node3" {
			t.Fatalf("promoted %s; node2 was behind, node3 up to date", newPrimary)
		}
		checkAcked(t, env.sb, "node3", acked)
	})
	t.Run("RelayLogAppliedBeforePromotion", func(t *testing.T) {
		env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3, SemiSync: true}, func(c *config.Config) {
			c.Clusters[0].Failover.Candidates = []string{"node2"}
		})
		dsn := fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s", env.addr)
		// node2 receives but does not apply: its relay log holds the writes.
		if _, err := env.sb.SQL(ctx, "node2", "STOP SLAVE SQL_THREAD"); err != nil {
			t.Fatal(err)
		}
		w := startWriter(t, dsn)
		time.Sleep(2 * time.Second)
		t0 := time.Now()
		if err := env.sb.Kill(ctx, "node1"); err != nil {
			t.Fatal(err)
		}
		newPrimary, _ := waitFailover(t, env, w, "node1", t0)
		acked, _ := w.finish()
		t.Logf("promoted %s", newPrimary)
		// Whichever was promoted, nothing acknowledged is missing: a
		// candidate with unapplied relay log applies it first.
		checkAcked(t, env.sb, newPrimary, acked)
		if newPrimary == "node2" && !strings.Contains(env.events(t), "wait-relay-applied") && !strings.Contains(env.events(t), "start-sql-thread") {
			t.Errorf("node2 was promoted without applying its relay log first:\n%s", env.events(t))
		}
	})
	t.Run("StuckCandidateReplaced", func(t *testing.T) {
		// node2, the preferred candidate, received everything but its
		// applier waits for a row lock a local session holds: the
		// failover gives up on it after apply_timeout and promotes node3,
		// which received as much. Before, the failover failed and the
		// cluster stayed without a primary.
		env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3, SemiSync: true}, func(c *config.Config) {
			c.Clusters[0].Failover.Candidates = []string{"node2"}
			c.Clusters[0].Failover.ApplyTimeout = config.Duration{Duration: 3 * time.Second}
		})
		db := openDB(t, fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s", env.addr))
		mustExec(t, db, "CREATE TABLE vigil_test.stuck (id INT PRIMARY KEY, v INT)")
		mustExec(t, db, "INSERT INTO vigil_test.stuck VALUES (1, 0)")
		Eventually(t, 10*time.Second, "the row on node2", func() error {
			rows, err := env.sb.SQL(ctx, "node2", "SELECT COUNT(*) FROM vigil_test.stuck")
			if err != nil || rows[0][0] != "1" {
				return fmt.Errorf("%v %v", rows, err)
			}
			return nil
		})
		root, err := env.sb.RootDB("node2")
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		lock, err := root.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Rollback()
		if _, err := lock.ExecContext(ctx, "SELECT * FROM vigil_test.stuck WHERE id = 1 FOR UPDATE"); err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, "UPDATE vigil_test.stuck SET v = 1 WHERE id = 1")
		mustExec(t, db, "INSERT INTO vigil_test.stuck VALUES (2, 2)")
		pos, err := env.sb.SQL(ctx, "node1", "SELECT @@gtid_binlog_pos")
		if err != nil {
			t.Fatal(err)
		}
		Eventually(t, 10*time.Second, "node2 received all, applied not; node3 applied all", func() error {
			io2, err := replicaField(ctx, root, "Gtid_IO_Pos")
			if err != nil {
				return err
			}
			a2, err := env.sb.SQL(ctx, "node2", "SELECT @@gtid_slave_pos")
			if err != nil {
				return err
			}
			a3, err := env.sb.SQL(ctx, "node3", "SELECT @@gtid_slave_pos")
			if err != nil {
				return err
			}
			if io2 != pos[0][0] || a3[0][0] != pos[0][0] || a2[0][0] == pos[0][0] {
				return fmt.Errorf("node1 at %s; node2 received %s, applied %s; node3 applied %s", pos[0][0], io2, a2[0][0], a3[0][0])
			}
			return nil
		})
		t0 := time.Now()
		if err := env.sb.Kill(ctx, "node1"); err != nil {
			t.Fatal(err)
		}
		var nw string
		Eventually(t, 30*time.Second, "a new writer", func() error {
			if nw = env.writer(t); nw == "" || nw == "node1" {
				return fmt.Errorf("writer %q", nw)
			}
			return nil
		})
		ev := env.events(t)
		t.Logf("kill -9 node1 → %s the writer after %s", nw, time.Since(t0).Round(time.Millisecond))
		if nw != "node3" || !strings.Contains(ev, "did not apply its relay log within apply_timeout") {
			t.Fatalf("writer %s; want node3 after node2 did not apply its relay log; events:\n%s", nw, ev)
		}
		rows, err := env.sb.SQL(ctx, "node3", "SELECT id, v FROM vigil_test.stuck ORDER BY id")
		if err != nil || len(rows) != 2 || rows[0][1] != "1" || rows[1][1] != "2" {
			t.Errorf("node3 rows %v %v, want (1,1),(2,2)", rows, err)
		}
		// The lock goes away: node2, repointed, replicates from node3.
		_ = lock.Rollback()
		replicatesFrom(t, env.sb, "node2", "node3")
	})
}

// dropKeys removes the lines of a rendered configuration that set one of
// keys (comma-separated, without their section): an older build run with
// VIGIL_E2E_BIN rejects keys it does not know, and this build writes every
// default.
func dropKeys(data []byte, keys string) []byte {
	if keys == "" {
		return data
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		k, _, _ := strings.Cut(strings.TrimSpace(line), ":")
		if !slices.Contains(strings.Split(keys, ","), k) {
			out = append(out, line)
		}
	}
	return []byte(strings.Join(out, "\n"))
}

// logDials shows the executor's count of SQL calls and of connections it
// opened for each operation so far (a call per connection before it kept
// them).
func logDials(t *testing.T, logf string) {
	data, _ := os.ReadFile(logf)
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, "admin connections opened during the operation") {
			t.Logf("executor: %s", l)
		}
	}
}

// replicaField is one column of SHOW SLAVE STATUS on db's server.
func replicaField(ctx context.Context, db *sql.DB, name string) (string, error) {
	rows, err := db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil || !rows.Next() {
		return "", fmt.Errorf("SHOW SLAVE STATUS: no row (%v)", err)
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return "", err
	}
	for i, c := range cols {
		if c == name {
			return vals[i].String, nil
		}
	}
	return "", fmt.Errorf("SHOW SLAVE STATUS has no %s", name)
}
