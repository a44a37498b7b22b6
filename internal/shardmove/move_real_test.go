package shardmove

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/sandbox"
	"github.com/vigil-db/vigil/internal/topology"
)

// realSandbox starts two replication clusters of two nodes (GTID domains
// 0 and 1) and tears them down with the test.
func realSandbox(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	if testing.Short() {
		t.Skip("real servers: not with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("real servers: needs root to run mariadbd as mysql")
	}
	if _, err := exec.LookPath("mariadbd"); err != nil {
		if _, err := os.Stat("/usr/sbin/mariadbd"); err != nil {
			t.Skip("real servers: mariadbd not installed")
		}
	}
	for _, p := range []string{"mariadb-dump", "mariadb"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("real servers: %s not installed", p)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := sandbox.Up(ctx, sandbox.Options{Dir: filepath.Join(t.TempDir(), "sb"), Topology: sandbox.Replication, Nodes: 2, Clusters: 2})
	if err != nil {
		t.Fatalf("sandbox: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := sb.Down(ctx, true); err != nil {
			t.Errorf("sandbox down: %v", err)
		}
	})
	return sb
}

func clusterOf(t *testing.T, sb *sandbox.Sandbox, c sandbox.Cluster, schema string) Cluster {
	t.Helper()
	acc := sb.Accounts()
	server := func(name string) Server {
		n, err := sb.Node(name)
		if err != nil {
			t.Fatal(err)
		}
		return Server{Host: n.Host, Port: n.Port, User: acc.App.User, Password: acc.App.Password}
	}
	out := Cluster{Name: c.Name, Primary: server(c.Nodes[0]), Repl: Account{User: acc.Repl.User, Password: acc.Repl.Password},
		DomainID: uint32(c.GTIDDomain)}
	if len(c.Nodes) > 1 {
		r := server(c.Nodes[1])
		out.Replica = &r
	}
	db := openTCP(t, out.Primary)
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	out.HasSchema = n > 0
	return out
}

func openTCP(t *testing.T, s Server) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", sandbox.TCPDSN(s.Addr(), s.User, s.Password, ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func mustExec(t *testing.T, db *sql.DB, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// writer inserts rows into the schema until stopped, on whichever cluster
// the fake router routes it to; Hold waits for the statement in flight.
type writer struct {
	gate  sync.Mutex // held while a statement runs, and by Hold
	mu    sync.Mutex
	db    *sql.DB
	acked []int64 // ids of t1 rows whose INSERT returned OK
	fails int
	flips []string
	dbs   map[string]*sql.DB
}

func (w *writer) run(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	for i := 0; ctx.Err() == nil; i++ {
		w.gate.Lock()
		w.mu.Lock()
		db := w.db
		w.mu.Unlock()
		// Not ctx: a statement cancelled by stop may still commit, and its
		// row would not count as acknowledged.
		res, err := db.Exec("INSERT INTO mv.t1 (v, note) VALUES (?, 'live')", i)
		if err == nil {
			id, _ := res.LastInsertId()
			_, err = db.Exec("UPDATE mv.t2 SET n = n + 1 WHERE id = ?", 1+i%100)
			w.mu.Lock()
			w.acked = append(w.acked, id)
			w.mu.Unlock()
		}
		if err != nil && ctx.Err() == nil {
			w.mu.Lock()
			w.fails++
			w.mu.Unlock()
		}
		w.gate.Unlock()
		time.Sleep(2 * time.Millisecond)
	}
}

// start runs the writer until the returned stop, which waits for it (and
// may be called again).
func (w *writer) start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go w.run(ctx, done)
	return func() { cancel(); <-done }
}

func (w *writer) Hold(ctx context.Context, schema string) (func(), error) {
	w.gate.Lock()
	return func() { w.gate.Unlock() }, nil
}

func (w *writer) Flip(ctx context.Context, schema, to string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flips = append(w.flips, schema+"->"+to)
	w.db = w.dbs[to]
	return nil
}

func (w *writer) ackedIDs() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int64(nil), w.acked...)
}

func TestRealMove(t *testing.T) {
	sb := realSandbox(t)
	t0 := time.Now()
	cls := sb.Clusters()
	if len(cls) != 2 {
		t.Fatalf("clusters: %+v", cls)
	}
	srcPrim := clusterOf(t, sb, cls[0], "mv").Primary
	srcDB := openTCP(t, srcPrim)
	mustExec(t, srcDB,
		"CREATE DATABASE mv",
		"CREATE TABLE mv.t1 (id BIGINT PRIMARY KEY AUTO_INCREMENT, v INT NOT NULL, note VARCHAR(64)) ENGINE=InnoDB",
		"CREATE TABLE mv.t2 (id INT PRIMARY KEY, n INT NOT NULL, b VARBINARY(32)) ENGINE=InnoDB",
		"CREATE DATABASE other_db",
		"CREATE DATABASE IF NOT EXISTS seq",
		"CREATE TABLE other_db.o (id INT PRIMARY KEY AUTO_INCREMENT, v INT)",
		"INSERT INTO mv.t1 (v, note) SELECT seq, CONCAT('seed ', seq, ' it''s') FROM seq.seq_1_to_3000",
		"INSERT INTO mv.t2 (id, n, b) SELECT seq, 0, UNHEX('00FF0D0A5C27') FROM seq.seq_1_to_100",
		"CREATE TRIGGER mv.t1_bi BEFORE INSERT ON mv.t1 FOR EACH ROW SET NEW.note = COALESCE(NEW.note, 'trg')",
		"CREATE PROCEDURE mv.p() SELECT COUNT(*) FROM mv.t1",
	)
	src := clusterOf(t, sb, cls[0], "mv")
	dst := clusterOf(t, sb, cls[1], "mv")
	dstDB := openTCP(t, dst.Primary)

	// The source domain must have reached the replica the dump reads.
	waitReplica(t, openTCP(t, *src.Replica), srcDB)

	w := &writer{db: srcDB, dbs: map[string]*sql.DB{src.Name: srcDB, dst.Name: dstDB}}
	stopWriter := w.start()
	defer stopWriter()

	plan, err := Decide(Request{Schema: "mv", From: src.Name, To: dst.Name}, src, dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plan:\n%s", plan)
	var (
		j     Journal
		saves int
	)
	save := func(Journal) error { saves++; return nil }
	deps := Deps{Dial: Dial, Router: w, Tools: Client{}}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// Run up to the verify step, then write across schemas on the source:
	// a DDL on mv issued from another default schema must reach the
	// target (replicate_wild_do_table), one on other_db must not.
	short := plan
	short.Steps = plan.Steps[:3]
	j = NewJournal(short)

	// A dump that dies half-way: the move stops, the partial copy goes.
	broken := filepath.Join(t.TempDir(), "broken-dump")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\nmariadb-dump \"$@\" | head -c 2500\necho 'mariadb-dump: Lost connection' >&2\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bad := deps
	bad.Tools = Client{Dump: broken}
	err = Run(ctx, short, bad, &j, save)
	var n int
	dstDB.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'mv'").Scan(&n)
	if err == nil || j.State != StateFailed || j.Steps[j.Step] != StepCopy || n != 0 || len(w.flips) != 0 {
		t.Fatalf("broken dump: %v; journal %+v; target has mv: %d", err, j, n)
	}
	t.Logf("broken dump: %v", err)

	// Run again: the copy is retried and the move goes on.
	if err := Run(ctx, short, deps, &j, save); err != nil {
		t.Fatalf("copy/catch up: %v\njournal: %+v", err, j)
	}
	t.Logf("snapshot %s; %d rows acknowledged so far", j.SnapshotGTID, len(w.ackedIDs()))
	conn, err := srcDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"USE other_db", "CREATE TABLE mv.t3 (id INT PRIMARY KEY)", "INSERT INTO mv.t3 VALUES (1), (2)", "INSERT INTO o (v) VALUES (7)"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	conn.Close()
	time.Sleep(500 * time.Millisecond)

	// The rest of the plan on the same journal.
	full := j
	full.Steps = NewJournal(plan).Steps
	full.State = StateRunning
	j = full
	if err := Run(ctx, plan, deps, &j, save); err != nil {
		t.Fatalf("verify/cutover: %v\njournal: %+v", err, j)
	}
	moved := time.Since(t0)
	for _, r := range j.Results {
		t.Logf("step %-9s %6s  %s", r.Name, r.Finished.Sub(r.Started).Round(time.Millisecond), r.Detail)
	}
	if j.State != StateDone || !j.Flipped || len(w.flips) != 1 || w.flips[0] != "mv->"+dst.Name {
		t.Fatalf("journal %+v, flips %v", j, w.flips)
	}
	beforeCut := len(w.ackedIDs())
	time.Sleep(300 * time.Millisecond) // the writer goes on, now on the target
	stopWriter()
	acked := w.ackedIDs()
	if w.fails > 0 {
		t.Errorf("%d writes failed", w.fails)
	}
	t.Logf("writer: %d rows acknowledged (%d before the flip), journal saved %d times, move took %s", len(acked), beforeCut, saves, moved.Round(time.Millisecond))

	// Every acknowledged row is on the target.
	var missing int
	for _, id := range acked {
		var n int
		if err := dstDB.QueryRow("SELECT COUNT(*) FROM mv.t1 WHERE id = ?", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged rows missing on the target", missing, len(acked))
	}
	// The source is untouched: it has exactly what was written before the
	// flip, the target has that plus what came after; no connection.
	var srcRows, dstRows int
	srcDB.QueryRow("SELECT COUNT(*) FROM mv.t1").Scan(&srcRows)
	dstDB.QueryRow("SELECT COUNT(*) FROM mv.t1").Scan(&dstRows)
	if want := 3000 + len(acked); dstRows != want {
		t.Errorf("target has %d rows in mv.t1, want %d", dstRows, want)
	}
	if srcRows >= dstRows || srcRows < 3000+beforeCut-1 {
		t.Errorf("source has %d rows, target %d, %d acknowledged before the flip", srcRows, dstRows, beforeCut)
	}
	t.Logf("mv.t1: %d rows on the source, %d on the target", srcRows, dstRows)
	if err := dstDB.QueryRow("SELECT COUNT(*) FROM mv.t3").Scan(&n); err != nil || n != 2 {
		t.Errorf("mv.t3 created from another default schema: %d rows, %v", n, err)
	}
	if err := dstDB.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'other_db'").Scan(&n); err != nil || n != 0 {
		t.Errorf("other_db reached the target: %d, %v", n, err)
	}
	if err := dstDB.QueryRow("SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = 'mv'").Scan(&n); err != nil || n != 1 {
		t.Errorf("routines on the target: %d, %v", n, err)
	}
	if err := dstDB.QueryRow("SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'mv'").Scan(&n); err != nil || n != 1 {
		t.Errorf("triggers on the target: %d, %v", n, err)
	}
	// Before the flip the source had what the target had: compare the
	// rows the source has with the target's same ids.
	var sc, tc string
	srcDB.QueryRow("SELECT COALESCE(SUM(CRC32(CONCAT_WS('|', id, v, note))), 0) FROM mv.t1").Scan(&sc)
	dstDB.QueryRow("SELECT COALESCE(SUM(CRC32(CONCAT_WS('|', id, v, note))), 0) FROM mv.t1 WHERE id <= ?", maxID(srcDB)).Scan(&tc)
	if sc != tc {
		t.Errorf("the source's rows differ from the target's same rows: %s vs %s", sc, tc)
	}
	var conns int
	rows, err := srcDB.Query("SHOW ALL SLAVES STATUS")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		conns++
	}
	rows.Close()
	if conns != 0 {
		t.Errorf("source primary has %d replication connections", conns)
	}

	// A target failover would restart the connection at the new target
	// primary's gtid_binlog_pos in the source's domain: the target's
	// replica has the move connection's transactions in its binary log
	// under the source's domain (log_slave_updates).
	tRep := openTCP(t, *dst.Replica)
	waitReplica(t, tRep, dstDB)
	var tp, rp string
	dstDB.QueryRow("SELECT @@gtid_binlog_pos").Scan(&tp)
	tRep.QueryRow("SELECT @@gtid_binlog_pos").Scan(&rp)
	tpp, _ := topology.ParseGTIDPos(tp)
	rpp, _ := topology.ParseGTIDPos(rp)
	ts, _ := tpp.Seq(src.DomainID)
	rs, ok := rpp.Seq(src.DomainID)
	t.Logf("target primary gtid_binlog_pos %s; its replica %s", tp, rp)
	if !ok || rs != ts {
		t.Errorf("target replica's gtid_binlog_pos %s lacks the source domain's %d at %d", rp, src.DomainID, ts)
	}

	// Cleanup on the operator's word: the source's copy goes, the
	// connection too.
	cplan, err := DecideCleanup(j, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	cj := NewJournal(cplan)
	if err := Run(ctx, cplan, deps, &cj, save); err != nil || cj.State != StateCleaned {
		t.Fatalf("cleanup: %v, %+v", err, cj)
	}
	if err := srcDB.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'mv'").Scan(&n); err != nil || n != 0 {
		t.Errorf("after cleanup the source still has mv: %d, %v", n, err)
	}
	rows, err = dstDB.Query("SHOW ALL SLAVES STATUS")
	if err != nil {
		t.Fatal(err)
	}
	conns = 0
	for rows.Next() {
		conns++
	}
	rows.Close()
	if conns != 0 {
		t.Errorf("after cleanup the target has %d connections", conns)
	}
	t.Logf("total %s", time.Since(t0).Round(time.Millisecond))
}

func maxID(db *sql.DB) int64 {
	var n int64
	db.QueryRow("SELECT COALESCE(MAX(id), 0) FROM mv.t1").Scan(&n)
	return n
}

// seedSchema creates schema mv (t1 with rows rows, t2 with 100) on the
// first cluster and waits until its replica has it.
func seedSchema(t *testing.T, sb *sandbox.Sandbox, rows int) (src, dst Cluster, srcDB *sql.DB) {
	t.Helper()
	cls := sb.Clusters()
	src = clusterOf(t, sb, cls[0], "mv")
	srcDB = openTCP(t, src.Primary)
	mustExec(t, srcDB,
		"CREATE DATABASE mv",
		"CREATE TABLE mv.t1 (id BIGINT PRIMARY KEY AUTO_INCREMENT, v INT NOT NULL, note VARCHAR(64))",
		"CREATE TABLE mv.t2 (id INT PRIMARY KEY, n INT NOT NULL)",
		"CREATE DATABASE IF NOT EXISTS seq",
		fmt.Sprintf("INSERT INTO mv.t1 (v, note) SELECT seq, 'seed' FROM seq.seq_1_to_%d", rows),
		"INSERT INTO mv.t2 (id, n) SELECT seq, 0 FROM seq.seq_1_to_100",
	)
	src = clusterOf(t, sb, cls[0], "mv")
	dst = clusterOf(t, sb, cls[1], "mv")
	waitReplica(t, openTCP(t, *src.Replica), srcDB)
	return src, dst, srcDB
}

// waitReplica waits until replica has applied what primary has written.
func waitReplica(t *testing.T, replica, primary *sql.DB) {
	t.Helper()
	var pos string
	if err := primary.QueryRow("SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatal(err)
	}
	var r sql.NullInt64
	if err := replica.QueryRow(fmt.Sprintf("SELECT MASTER_GTID_WAIT('%s', 20)", pos)).Scan(&r); err != nil || r.Int64 != 0 {
		t.Fatalf("replica did not reach %s: %v %v", pos, r, err)
	}
}

// TestRealMoveFailovers fails over both clusters while the move catches up
// under writes: the connection follows the source's new primary, and is
// recreated on the target's new primary at its gtid_binlog_pos in the
// source's domain; then verify and cutover run against the new primaries.
func TestRealMoveFailovers(t *testing.T) {
	sb := realSandbox(t)
	t0 := time.Now()
	cls := sb.Clusters()
	src, dst, srcDB := seedSchema(t, sb, 2000)
	srcRepDB, dstDB, dstRepDB := openTCP(t, *src.Replica), openTCP(t, dst.Primary), openTCP(t, *dst.Replica)

	w := &writer{db: srcDB, dbs: map[string]*sql.DB{dst.Name: dstRepDB}}
	stopWriter := w.start()
	defer stopWriter()

	plan, err := Decide(Request{Schema: "mv"}, src, dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	deps := Deps{Dial: Dial, Router: w, Tools: Client{}}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	short := plan
	short.Steps = plan.Steps[:3]
	j := NewJournal(short)
	if err := Run(ctx, short, deps, &j, func(Journal) error { return nil }); err != nil {
		t.Fatalf("copy/catch up: %v", err)
	}
	// The rest of the plan will run on this journal.
	j.Steps, j.State = NewJournal(plan).Steps, StateRunning
	time.Sleep(300 * time.Millisecond)

	// Source failover: hold the writer, let the replica catch up, stop the
	// primary, promote the replica, write there.
	release, _ := w.Hold(ctx, "mv")
	waitReplica(t, srcRepDB, srcDB)
	if err := sb.Stop(ctx, cls[0].Nodes[0]); err != nil {
		t.Fatal(err)
	}
	mustExec(t, srcRepDB, "STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = 0")
	w.mu.Lock()
	w.db = srcRepDB
	w.mu.Unlock()
	release()
	if err := FollowSource(ctx, Dial, j, dst.Primary, *src.Replica, src.Repl, src.DomainID); err != nil {
		t.Fatalf("follow source: %v", err)
	}
	t.Logf("source failed over to %s after %d rows; the connection follows it", src.Replica.Addr(), len(w.ackedIDs()))
	time.Sleep(300 * time.Millisecond)

	// Target failover: the target's replica becomes its primary. It is
	// made to lag on purpose (its replication stopped while the old
	// primary applies more of the source), so it must get the rest from
	// the source.
	mustExec(t, dstRepDB, "STOP SLAVE")
	time.Sleep(300 * time.Millisecond)
	var oldBinlog, repBinlog string
	dstDB.QueryRow("SELECT @@gtid_binlog_pos").Scan(&oldBinlog)
	if err := sb.Stop(ctx, cls[1].Nodes[0]); err != nil {
		t.Fatal(err)
	}
	mustExec(t, dstRepDB, "RESET SLAVE ALL", "SET GLOBAL read_only = 0")
	dstRepDB.QueryRow("SELECT @@gtid_binlog_pos").Scan(&repBinlog)
	if repBinlog == oldBinlog {
		t.Errorf("the target's replica did not lag: %s", repBinlog)
	}
	pos, err := RecreateOnTarget(ctx, Dial, j, *dst.Replica, *src.Replica, src.Repl, src.DomainID)
	if err != nil {
		t.Fatalf("recreate on target: %v", err)
	}
	t.Logf("target failed over: old primary was at %s, new primary's gtid_binlog_pos %s; connection recreated at %s", oldBinlog, repBinlog, pos)
	time.Sleep(300 * time.Millisecond)

	// Verify and cut over between the new primaries.
	newPlan := plan
	newPlan.Source.Primary, newPlan.Source.Replica = *src.Replica, nil
	newPlan.Target.Primary, newPlan.Target.Replica = *dst.Replica, nil
	if err := Run(ctx, newPlan, deps, &j, func(Journal) error { return nil }); err != nil {
		t.Fatalf("verify/cutover: %v\njournal %+v", err, j)
	}
	for _, r := range j.Results {
		t.Logf("step %-9s %6s  %s", r.Name, r.Finished.Sub(r.Started).Round(time.Millisecond), r.Detail)
	}
	time.Sleep(200 * time.Millisecond)
	stopWriter()
	acked := w.ackedIDs()
	if w.fails > 0 {
		t.Errorf("%d writes failed", w.fails)
	}
	var missing, rows int
	for _, id := range acked {
		var n int
		if err := dstRepDB.QueryRow("SELECT COUNT(*) FROM mv.t1 WHERE id = ?", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			missing++
		}
	}
	dstRepDB.QueryRow("SELECT COUNT(*) FROM mv.t1").Scan(&rows)
	if missing > 0 || rows != 2000+len(acked) {
		t.Errorf("new target primary: %d of %d acknowledged rows missing, %d rows (want %d)", missing, len(acked), rows, 2000+len(acked))
	}
	t.Logf("%d rows acknowledged, all on the new target primary (%d rows); %s", len(acked), rows, time.Since(t0).Round(time.Millisecond))
}

// TestRealMoveReverse runs a move with the reverse connection: after the
// cutover the writes go to the target and come back to the source, so
// the source's copy stays a rollback target; cleanup then removes both
// connections and the source's copy.
func TestRealMoveReverse(t *testing.T) {
	sb := realSandbox(t)
	src, dst, srcDB := seedSchema(t, sb, 1000)
	dstDB := openTCP(t, dst.Primary)
	w := &writer{db: srcDB, dbs: map[string]*sql.DB{dst.Name: dstDB}}
	stopWriter := w.start()
	defer stopWriter()

	plan, err := Decide(Request{Schema: "mv", Reverse: true}, src, dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	deps := Deps{Dial: Dial, Router: w, Tools: Client{}}
	var j Journal
	if err := Run(ctx, plan, deps, &j, func(Journal) error { return nil }); err != nil {
		t.Fatalf("move: %v", err)
	}
	time.Sleep(500 * time.Millisecond) // writes on the target
	stopWriter()
	waitReplica(t, srcDB, dstDB)
	var sn, dn int
	srcDB.QueryRow("SELECT COUNT(*) FROM mv.t1").Scan(&sn)
	dstDB.QueryRow("SELECT COUNT(*) FROM mv.t1").Scan(&dn)
	var ssum, dsum string
	srcDB.QueryRow("CHECKSUM TABLE mv.t2").Scan(new(string), &ssum)
	dstDB.QueryRow("CHECKSUM TABLE mv.t2").Scan(new(string), &dsum)
	if sn != dn || sn != 1000+len(w.ackedIDs()) || ssum != dsum {
		t.Errorf("after the cutover: source %d rows (t2 %s), target %d (t2 %s), %d acknowledged", sn, ssum, dn, dsum, len(w.ackedIDs()))
	}
	var back string
	srcDB.QueryRow("SELECT @@gtid_slave_pos").Scan(&back)
	t.Logf("reverse: %s; source and target both have %d rows; source gtid_slave_pos %s", j.Results[len(j.Results)-1].Detail, sn, back)

	cplan, err := DecideCleanup(j, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	var cj Journal
	if err := Run(ctx, cplan, deps, &cj, func(Journal) error { return nil }); err != nil || cj.State != StateCleaned {
		t.Fatalf("cleanup: %v %+v", err, cj)
	}
	for name, db := range map[string]*sql.DB{"source": srcDB, "target": dstDB} {
		rows, err := db.Query("SHOW ALL SLAVES STATUS")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			n++
		}
		rows.Close()
		if n != 0 {
			t.Errorf("%s has %d connections after cleanup", name, n)
		}
	}
	var n int
	srcDB.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'mv'").Scan(&n)
	dstDB.QueryRow("SELECT COUNT(*) FROM mv.t1").Scan(&dn)
	if n != 0 || dn != sn {
		t.Errorf("after cleanup: source has mv %d, target %d rows", n, dn)
	}
}
