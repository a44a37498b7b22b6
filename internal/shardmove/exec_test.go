package shardmove

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// fakeServer answers the statements a move sends, from a few fields.
type fakeServer struct {
	mu        sync.Mutex
	name      string
	domain    uint32
	schemas   map[string]bool
	conns     []string
	slavePos  string
	binlogPos string
	// waits are MASTER_GTID_WAIT's answers in turn; "0" when empty.
	waits []string
	// tables are schema tables with checksum and count.
	tables map[string][2]string
	log    []string
	// conflictOnce: the next SET gtid_slave_pos under gtid_strict_mode
	// fails with 1947 (a transaction committed meanwhile).
	conflictOnce bool
	strictOff    bool
}

func (f *fakeServer) Exec(_ context.Context, q string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, q)
	switch {
	case strings.HasPrefix(q, "DROP DATABASE IF EXISTS "):
		delete(f.schemas, strings.Trim(strings.TrimPrefix(q, "DROP DATABASE IF EXISTS "), "`"))
	case strings.HasPrefix(q, "CHANGE MASTER '"):
		c := strings.Split(q, "'")[1]
		if !slices.Contains(f.conns, c) {
			f.conns = append(f.conns, c)
		}
	case strings.HasPrefix(q, "RESET SLAVE '"):
		c := strings.Split(q, "'")[1]
		f.conns = slices.DeleteFunc(f.conns, func(s string) bool { return s == c })
	case q == "SET GLOBAL gtid_strict_mode = 0":
		f.strictOff = true
	case q == "SET GLOBAL gtid_strict_mode = 1":
		f.strictOff = false
	case strings.HasPrefix(q, "SET GLOBAL gtid_slave_pos = '"):
		if f.conflictOnce && !f.strictOff {
			f.conflictOnce = false
			return &mysql.MySQLError{Number: 1947, Message: "Specified GTID conflicts with the binary log which contains a more recent GTID"}
		}
		f.slavePos = strings.Split(q, "'")[1]
	}
	return nil
}

func (f *fakeServer) Query(_ context.Context, q string) ([][]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, q)
	one := func(v ...string) [][]string { return [][]string{make([]string, len(v)), v} }
	switch {
	case q == sqlServerFacts:
		return one(fmt.Sprint(f.domain), "1", "1"), nil
	case strings.HasPrefix(q, "SELECT COUNT(*) FROM information_schema.SCHEMATA"):
		s := strings.Split(q, "'")[1]
		if f.schemas[s] {
			return one("1"), nil
		}
		return one("0"), nil
	case q == sqlAllSlaves:
		out := [][]string{{"Connection_name", "Slave_IO_Running"}}
		for _, c := range f.conns {
			out = append(out, []string{c, "Yes"})
		}
		return out, nil
	case strings.HasPrefix(q, "SHOW SLAVE '"):
		return [][]string{{"Slave_IO_Running", "Slave_SQL_Running", "Last_IO_Error", "Last_SQL_Error"}, {"Yes", "Yes", "", ""}}, nil
	case q == sqlGTIDPositions:
		return one(f.slavePos, f.binlogPos), nil
	case q == sqlBinlogPos:
		return one(f.binlogPos), nil
	case q == sqlStrictMode:
		return one("1"), nil
	case strings.HasPrefix(q, "SELECT MASTER_GTID_WAIT("):
		v := "0"
		if len(f.waits) > 0 {
			v, f.waits = f.waits[0], f.waits[1:]
		}
		return one(v), nil
	case strings.HasPrefix(q, "SELECT TABLE_NAME FROM information_schema.TABLES"):
		out := [][]string{{"TABLE_NAME"}}
		for _, t := range slices.Sorted(mapKeys(f.tables)) {
			out = append(out, []string{t})
		}
		return out, nil
	case strings.HasPrefix(q, "CHECKSUM TABLE "):
		t := tableOf(q)
		return [][]string{{"Table", "Checksum"}, {t, f.tables[t][0]}}, nil
	case strings.HasPrefix(q, "SELECT COUNT(*) FROM `"):
		return one(f.tables[tableOf(q)][1]), nil
	}
	return nil, fmt.Errorf("fake %s: unexpected %q", f.name, q)
}

func (f *fakeServer) Close() error { return nil }

func (f *fakeServer) ran(prefix string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.ContainsFunc(f.log, func(q string) bool { return strings.HasPrefix(q, prefix) })
}

func mapKeys(m map[string][2]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func tableOf(q string) string {
	f := strings.Split(q, "`")
	return f[len(f)-2]
}

type fakeRouter struct {
	holds, releases int
	flips           []string
	flipErr         error
}

func (r *fakeRouter) Hold(context.Context, string) (func(), error) {
	r.holds++
	return func() { r.releases++ }, nil
}

func (r *fakeRouter) Flip(_ context.Context, schema, to string) error {
	if r.flipErr != nil {
		return r.flipErr
	}
	r.flips = append(r.flips, schema+"->"+to)
	return nil
}

// fakeTools "loads" the schema into the target, even when it fails
// half-way (a partial copy).
type fakeTools struct {
	dst  *fakeServer
	gtid string
	err  error
}

func (t fakeTools) DumpLoad(_ context.Context, _, _ Server, schema string) (string, error) {
	t.dst.mu.Lock()
	t.dst.schemas[schema] = true
	t.dst.mu.Unlock()
	return t.gtid, t.err
}

type fixture struct {
	src, dst *fakeServer
	router   *fakeRouter
	tools    fakeTools
	plan     Plan
	saved    []Journal
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	tables := map[string][2]string{"a": {"111", "10"}, "b": {"222", "20"}}
	src := &fakeServer{name: "src", domain: 0, schemas: map[string]bool{"shop_1": true}, binlogPos: "0-1-50,7-9-3", tables: tables}
	dst := &fakeServer{name: "dst", domain: 1, schemas: map[string]bool{}, binlogPos: "1-3-14", slavePos: "1-3-2",
		tables: map[string][2]string{"a": {"111", "10"}, "b": {"222", "20"}}}
	sc, dc := testCluster("east", 0, true), testCluster("west", 1, false)
	sc.Primary.Host, dc.Primary.Host = "src", "dst"
	plan, err := Decide(Request{Schema: "shop_1", To: "west"}, sc, dc, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{src: src, dst: dst, router: &fakeRouter{}, tools: fakeTools{dst: dst, gtid: "0-1-13,7-9-1"}, plan: plan}
}

func (x *fixture) deps() Deps {
	return Deps{
		Dial: func(addr, _, _ string) (DB, error) {
			switch {
			case strings.HasPrefix(addr, "src:"):
				return x.src, nil
			case strings.HasPrefix(addr, "dst:"):
				return x.dst, nil
			}
			return nil, errors.New("no such server " + addr)
		},
		Router: x.router, Tools: x.tools,
	}
}

func (x *fixture) run(j *Journal) error {
	return Run(context.Background(), x.plan, x.deps(), j, func(j Journal) error { x.saved = append(x.saved, j); return nil })
}

func TestRunMove(t *testing.T) {
	x := newFixture(t)
	var j Journal
	if err := x.run(&j); err != nil {
		t.Fatal(err)
	}
	if j.State != StateDone || !j.Flipped || j.Step != 5 || j.SnapshotGTID != "0-1-13" || j.CutoverGTID != "1-3-14" {
		t.Fatalf("journal %+v", j)
	}
	if x.router.holds != 2 || x.router.releases != 2 || !slices.Equal(x.router.flips, []string{"shop_1->west"}) {
		t.Fatalf("router %+v", x.router)
	}
	// Started + finished per step, and the final state.
	if len(x.saved) != 2*5+1 {
		t.Errorf("saved %d times", len(x.saved))
	}
	// The start position: the source's domain from the snapshot only
	// (not domain 7 of the dump), the target's own domain raised to its
	// binary log.
	if x.dst.slavePos != "0-1-13,1-3-14" {
		t.Errorf("gtid_slave_pos %q", x.dst.slavePos)
	}
	for _, want := range []string{
		"CHANGE MASTER 'vigil_move_shop_1' TO MASTER_HOST='src', MASTER_PORT=3306, MASTER_USER='repl', MASTER_PASSWORD='replpw', MASTER_USE_GTID=slave_pos, DO_DOMAIN_IDS=(0)",
		"SET GLOBAL `vigil_move_shop_1`.replicate_wild_do_table = 'shop\\\\_1.%'",
		"SELECT MASTER_GTID_WAIT('0-1-50', 5.000)",
		"STOP SLAVE 'vigil_move_shop_1'",
	} {
		if !x.dst.ran(want) {
			t.Errorf("target never ran %s\nlog: %q", want, x.dst.log)
		}
	}
	// A journal of another plan is refused.
	other := NewJournal(x.plan)
	other.Schema = "shop_2"
	if err := x.run(&other); err == nil {
		t.Error("ran a plan with another move's journal")
	}
	// Run again on a finished journal: nothing.
	n := len(x.dst.log)
	if err := x.run(&j); err != nil || len(x.dst.log) != n {
		t.Errorf("second run: %v, %d statements", err, len(x.dst.log)-n)
	}
}

func TestRunDumpFails(t *testing.T) {
	x := newFixture(t)
	x.tools.err = errors.New("mariadb-dump: exit status 2: Got error: 2013: Lost connection")
	var j Journal
	err := x.run(&j)
	if err == nil || !strings.Contains(err.Error(), "partial copy on west was dropped") {
		t.Fatalf("err %v", err)
	}
	if j.State != StateFailed || j.Step != 1 || j.Flipped {
		t.Fatalf("journal %+v", j)
	}
	if x.dst.schemas["shop_1"] || !x.dst.ran("DROP DATABASE IF EXISTS `shop_1`") {
		t.Errorf("partial copy left on the target: %q", x.dst.log)
	}
	if x.router.holds != 0 || len(x.router.flips) != 0 || x.dst.ran("CHANGE MASTER") {
		t.Errorf("went on after a failed dump: router %+v", x.router)
	}
	// Retried with a dump that works, the move finishes.
	x.tools.err = nil
	if err := Run(context.Background(), x.plan, Deps{Dial: x.deps().Dial, Router: x.router, Tools: x.tools}, &j, func(Journal) error { return nil }); err != nil || j.State != StateDone {
		t.Fatalf("retry: %v %+v", err, j)
	}
}

func TestRunSnapshotWithoutSourceDomain(t *testing.T) {
	x := newFixture(t)
	x.tools.gtid = "7-9-1"
	var j Journal
	if err := x.run(&j); err == nil || j.State != StateFailed || x.dst.schemas["shop_1"] {
		t.Fatalf("err %v, journal %+v, target schemas %v", err, j, x.dst.schemas)
	}
}

func TestRunChecksumDiffers(t *testing.T) {
	x := newFixture(t)
	x.dst.tables["b"] = [2]string{"999", "20"}
	var j Journal
	err := x.run(&j)
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "table b: checksum 222 on the source, 999 on the target") {
		t.Fatalf("err %v", err)
	}
	if j.State != StateFailed || j.Steps[j.Step] != StepVerify || j.Flipped {
		t.Fatalf("journal %+v", j)
	}
	// The connection stopped for the compare runs again (for inspection).
	if x.router.holds != 1 || x.router.releases != 1 || len(x.router.flips) != 0 || x.dst.log[len(x.dst.log)-1] != "START SLAVE 'vigil_move_shop_1'" {
		t.Errorf("router %+v; target log %q", x.router, x.dst.log)
	}
	// The source compared inside its consistent snapshot.
	i, k := slices.Index(x.src.log, sqlSnapshot), slices.Index(x.src.log, "CHECKSUM TABLE `shop_1`.`a`")
	if i < 0 || k < i || x.src.log[len(x.src.log)-1] != "COMMIT" {
		t.Errorf("source log %q", x.src.log)
	}
}

func TestRunCountDiffers(t *testing.T) {
	x := newFixture(t)
	delete(x.dst.tables, "a")
	var j Journal
	if err := x.run(&j); !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "table a missing on the target") {
		t.Fatalf("err %v", err)
	}
}

func TestRunCutoverTimeout(t *testing.T) {
	x := newFixture(t)
	x.dst.waits = []string{"0", "0", "0", "-1"} // verify catches up (before and under its hold), the cutover before its hold only
	var j Journal
	err := x.run(&j)
	if !errors.Is(err, ErrCutoverTimeout) || !strings.Contains(err.Error(), "routing untouched") {
		t.Fatalf("err %v", err)
	}
	if j.State != StateFailed || j.Steps[j.Step] != StepCutover || j.Flipped {
		t.Fatalf("journal %+v", j)
	}
	// The verify stopped the connection for its compare and started it
	// again; the cutover, which timed out, never stopped it.
	cut := slices.Index(x.dst.log, "SELECT MASTER_GTID_WAIT('0-1-50', 5.000)")
	if x.router.holds != 2 || x.router.releases != 2 || len(x.router.flips) != 0 || cut < 0 || slices.ContainsFunc(x.dst.log[cut:], func(q string) bool { return strings.HasPrefix(q, "STOP SLAVE") }) {
		t.Errorf("router %+v; target log %q", x.router, x.dst.log)
	}
	if r := Resume(j); r.Action != ResumeNothing || !r.CanAbort {
		t.Errorf("resume %+v", r)
	}
	// Run again: the cutover is retried and succeeds.
	if err := x.run(&j); err != nil || j.State != StateDone || len(x.router.flips) != 1 {
		t.Fatalf("retry: %v %+v", err, j)
	}
}

func TestRunFlipFails(t *testing.T) {
	x := newFixture(t)
	x.router.flipErr = errors.New("etcd: context deadline exceeded")
	var j Journal
	err := x.run(&j)
	if err == nil || j.Flipped || j.State != StateFailed {
		t.Fatalf("err %v journal %+v", err, j)
	}
	// The connection was stopped for the flip and runs again.
	log := strings.Join(x.dst.log, "\n")
	stop := strings.LastIndex(log, "STOP SLAVE 'vigil_move_shop_1'")
	start := strings.LastIndex(log, "START SLAVE 'vigil_move_shop_1'")
	if stop < 0 || start < stop {
		t.Errorf("connection not restarted after the failed flip:\n%s", log)
	}
	if x.router.releases != x.router.holds {
		t.Errorf("router %+v", x.router)
	}
}

func TestRunCleanupAndAbort(t *testing.T) {
	x := newFixture(t)
	var j Journal
	if err := x.run(&j); err != nil {
		t.Fatal(err)
	}
	if _, err := DecideAbort(j, x.plan.Source, x.plan.Target); err == nil {
		t.Error("abort of a move that cut over")
	}
	cp, err := DecideCleanup(j, x.plan.Source, x.plan.Target)
	if err != nil {
		t.Fatal(err)
	}
	x.plan = cp
	var cj Journal
	if err := x.run(&cj); err != nil || cj.State != StateCleaned {
		t.Fatalf("cleanup %v %+v", err, cj)
	}
	if x.src.ran("DROP DATABASE IF EXISTS `shop_1`") != true || len(x.dst.conns) != 0 {
		t.Errorf("src log %q, dst conns %v", x.src.log, x.dst.conns)
	}

	// Abort of a failed move drops the target's copy and connection.
	y := newFixture(t)
	y.dst.tables["a"] = [2]string{"0", "10"}
	var fj Journal
	if err := y.run(&fj); !errors.Is(err, ErrChecksum) {
		t.Fatal(err)
	}
	if _, err := DecideCleanup(fj, y.plan.Source, y.plan.Target); err == nil {
		t.Error("cleanup of a move that did not cut over")
	}
	ap, err := DecideAbort(fj, y.plan.Source, y.plan.Target)
	if err != nil {
		t.Fatal(err)
	}
	y.plan = ap
	var aj Journal
	if err := y.run(&aj); err != nil || aj.State != StateAborted {
		t.Fatalf("abort %v %+v", err, aj)
	}
	if y.dst.schemas["shop_1"] || len(y.dst.conns) != 0 || y.src.ran("DROP DATABASE") {
		t.Errorf("after abort: dst schemas %v conns %v; src log %q", y.dst.schemas, y.dst.conns, y.src.log)
	}
}

func TestRunReverse(t *testing.T) {
	x := newFixture(t)
	x.plan.Request.Reverse = true
	sc, dc := x.plan.Source, x.plan.Target
	sc.HasSchema, dc.HasSchema = true, false
	p, err := Decide(x.plan.Request, sc, dc, nil)
	if err != nil {
		t.Fatal(err)
	}
	x.plan = p
	x.src.slavePos = ""
	var j Journal
	if err := x.run(&j); err != nil {
		t.Fatal(err)
	}
	// The source starts the target's domain at the cutover, keeps its own
	// domains at its binary log.
	if x.src.slavePos != "0-1-50,1-3-14,7-9-3" {
		t.Errorf("source gtid_slave_pos %q", x.src.slavePos)
	}
	if !x.src.ran("CHANGE MASTER 'vigil_back_shop_1' TO MASTER_HOST='dst', MASTER_PORT=3306, MASTER_USER='repl', MASTER_PASSWORD='replpw', MASTER_USE_GTID=slave_pos, DO_DOMAIN_IDS=(1)") {
		t.Errorf("source log %q", x.src.log)
	}
}

// A move with ManualCutover stops after catch-up, replicating, and runs
// the verify and the cutover only once the operator asks.
func TestRunManualCutover(t *testing.T) {
	x := newFixture(t)
	x.plan.Request.ManualCutover = true
	var j Journal
	if err := x.run(&j); err != nil {
		t.Fatal(err)
	}
	if j.State != StateWaiting || j.Step != 3 || !j.Connected() || !j.Active() || x.router.holds != 0 || len(x.router.flips) != 0 {
		t.Fatalf("journal %+v, router %+v", j, x.router)
	}
	if r := Resume(j); r.Action != ResumeWait || !r.CanAbort {
		t.Errorf("resume of a waiting move: %+v", r)
	}
	n := len(x.dst.log)
	if err := x.run(&j); err != nil || j.State != StateWaiting || len(x.dst.log) != n {
		t.Fatalf("run again before the operator asked: %v %+v, %d statements", err, j, len(x.dst.log)-n)
	}
	j.CutoverAsked = true
	if err := x.run(&j); err != nil || j.State != StateDone || !j.Flipped || x.router.holds != 2 {
		t.Fatalf("after the operator asked: %v %+v, router %+v", err, j, x.router)
	}
	if j.Connected() {
		t.Error("a finished move still counts as connected")
	}
}

// A copy retried after a failed one whose cleanup could not run (the
// target's primary died during the load) drops the stale partial copy
// before it loads.
func TestRunCopyDropsStalePartialCopy(t *testing.T) {
	x := newFixture(t)
	j := NewJournal(x.plan)
	j.Step = 1 // the check ran
	x.dst.schemas["shop_1"] = true
	if err := x.run(&j); err != nil || j.State != StateDone {
		t.Fatalf("%v %+v", err, j)
	}
	i := slices.Index(x.dst.log, "DROP DATABASE IF EXISTS `shop_1`")
	k := slices.IndexFunc(x.dst.log, func(q string) bool { return strings.HasPrefix(q, "CHANGE MASTER") })
	if i < 0 || k < i {
		t.Errorf("the stale copy was not dropped before the move went on: %q", x.dst.log)
	}
}

// A move with the reverse connection is rolled back: the old copy
// catches up over it, the map routes back, the connection goes; cleanup
// then drops the new cluster's copy.
func TestRunRollback(t *testing.T) {
	x := newFixture(t)
	sc, dc := x.plan.Source, x.plan.Target
	var j Journal
	if err := x.run(&j); err != nil {
		t.Fatal(err)
	}
	if _, err := DecideRollback(j, sc, dc); err == nil || !strings.Contains(err.Error(), "without --reverse") {
		t.Fatalf("rollback of a move without --reverse: %v", err)
	}
	j.Reverse = true
	p, err := DecideRollback(j, sc, dc)
	if err != nil {
		t.Fatal(err)
	}
	x.plan = p
	var rj Journal
	if err := x.run(&rj); err != nil || rj.State != StateRolledBack || rj.Flipped {
		t.Fatalf("rollback: %v %+v", err, rj)
	}
	if !slices.Equal(x.router.flips, []string{"shop_1->west", "shop_1->east"}) {
		t.Errorf("flips %v", x.router.flips)
	}
	for _, want := range []string{"SELECT MASTER_GTID_WAIT('1-3-14', 5.000)", "STOP SLAVE 'vigil_back_shop_1'"} {
		if !x.src.ran(want) {
			t.Errorf("the old copy never ran %s: %q", want, x.src.log)
		}
	}
	if _, err := DecideRollback(rj, sc, dc); err == nil {
		t.Error("a rollback of a rollback")
	}
	cp, err := DecideCleanup(rj, sc, dc)
	if err != nil || len(cp.Steps) != 1 || cp.Steps[0].Name != StepDropTarget {
		t.Fatalf("cleanup after a rollback: %v %+v", err, cp)
	}
	x.plan = cp
	var cj Journal
	if err := x.run(&cj); err != nil || cj.State != StateCleaned || x.dst.schemas["shop_1"] {
		t.Fatalf("cleanup: %v %+v, target schemas %v", err, cj, x.dst.schemas)
	}
}

// A move back: the source's binary log holds a sparse copy of the
// target's own domain (an earlier move the other way), behind the
// target's position. The target's entry of that domain is lowered to the
// source's, with gtid_strict_mode off for the SET alone, else MariaDB
// refuses the connection (1236).
func TestRunMoveBackLowersOwnDomain(t *testing.T) {
	x := newFixture(t)
	x.src.binlogPos = "0-1-50,1-3-9,7-9-3"
	var j Journal
	if err := x.run(&j); err != nil || j.State != StateDone {
		t.Fatalf("%v %+v", err, j)
	}
	if x.dst.slavePos != "0-1-13,1-3-9" {
		t.Errorf("gtid_slave_pos %q, want the target's own domain at the source's 1-3-9", x.dst.slavePos)
	}
	i := slices.Index(x.dst.log, "SET GLOBAL gtid_strict_mode = 0")
	k := slices.IndexFunc(x.dst.log, func(q string) bool { return strings.HasPrefix(q, "SET GLOBAL gtid_slave_pos") })
	m := slices.Index(x.dst.log, "SET GLOBAL gtid_strict_mode = 1")
	if i < 0 || k < i || m < k {
		t.Errorf("strict mode not relaxed around the SET: %q", x.dst.log)
	}
}

// The target committed a transaction of its own domain between the read
// of its position and the SET (a primary under load: seen in TestShards):
// 1947 under gtid_strict_mode; the SET is made again with strict mode off
// for it alone.
func TestRunSlavePosRaceWithOwnWrites(t *testing.T) {
	x := newFixture(t)
	x.dst.conflictOnce = true
	var j Journal
	if err := x.run(&j); err != nil || j.State != StateDone {
		t.Fatalf("%v %+v", err, j)
	}
	if x.dst.slavePos != "0-1-13,1-3-14" || x.dst.strictOff || !x.dst.ran("SET GLOBAL gtid_strict_mode = 0") {
		t.Errorf("gtid_slave_pos %q, strict off %v; log %q", x.dst.slavePos, x.dst.strictOff, x.dst.log)
	}
}
