package e2e

// The fault lab: what TestChaos (chaos_test.go) and the scripted
// compound-fault reproductions (compound_test.go) share. A lab is a
// 3-node semi-synchronous replication sandbox with Vigil in front
// (failover.auto on, min_interval 1 s), a writer through Vigil that keeps
// every write's outcome, the operator's steps (heal everything, ack,
// rejoin) and the invariants:
//
//	(a) every acknowledged write is on the routed writer;
//	(b) every transaction a node holds that the writer lacks is in a
//	    salvage file (state_dir/salvage/*.sql), or the node is fenced or
//	    quarantined with a reason;
//	(c) every node replicates from the writer, or is fenced or
//	    quarantined with a reason;
//	(d) Vigil is running and its log shows no panic.
//
// The checks return what they found instead of failing the test, so the
// chaos test can report every violation with its seed and schedule.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
	"github.com/vigil-db/vigil/internal/topology"
)

// labTable holds the writer's numbered rows.
const labTable = "vigil_test.acked"

type faultLab struct {
	t        *testing.T
	env      *clusterEnv
	sb       *sandbox.Sandbox
	dsn      string
	stateDir string
	nodes    []string
	w        *ackWriter
}

// newFaultLab starts the sandbox and Vigil; the writer is started by
// startWriting.
func newFaultLab(t *testing.T, tweaks ...func(*config.Config)) *faultLab {
	t.Helper()
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3, SemiSync: true}, func(c *config.Config) {
		c.Clusters[0].Failover.Auto = true
		c.Clusters[0].Failover.MinInterval = config.Duration{Duration: time.Second}
		// The lab's tests play the operator (ack, `vigil ctl rejoin`,
		// rebuild) and check what each step does; a tweak may turn
		// automatic rejoin back on.
		manualRejoin(c)
		for _, f := range tweaks {
			f(c)
		}
	})
	cfg, err := config.Load(env.sb.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	return &faultLab{
		t: t, env: env, sb: env.sb, stateDir: cfg.StateDir, nodes: env.sb.NodeNames(),
		dsn: fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s&readTimeout=5s&writeTimeout=5s", env.addr),
	}
}

// startWriting starts the writer: workers connections inserting rows
// through Vigil, each pausing gap between writes.
func (l *faultLab) startWriting(workers int, gap time.Duration) *ackWriter {
	l.w = startAckWriter(l.t, l.dsn, workers, gap)
	return l.w
}

// ---------------------------------------------------------------------
// The writer.

// ackWrite is one insert through Vigil.
type ackWrite struct {
	n          int
	start, end time.Time
	ok         bool
}

// ackWriter inserts numbered rows into labTable through Vigil from
// several connections. It never stops on errors: every write's outcome
// and timing is kept.
type ackWriter struct {
	mu       sync.Mutex
	writes   []ackWrite
	next     atomic.Int64
	held     atomic.Bool
	inFlight atomic.Int64
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

func startAckWriter(t *testing.T, dsn string, workers int, gap time.Duration) *ackWriter {
	t.Helper()
	db := openDB(t, dsn)
	db.SetMaxOpenConns(workers)
	db.SetMaxIdleConns(workers)
	Eventually(t, 30*time.Second, "create "+labTable+" through Vigil", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+labTable+" (n INT PRIMARY KEY, at TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6))")
		return err
	})
	w := &ackWriter{stop: make(chan struct{})}
	for range workers {
		w.wg.Add(1)
		go w.loop(db, gap)
	}
	t.Cleanup(w.halt)
	return w
}

func (w *ackWriter) loop(db *sql.DB, gap time.Duration) {
	defer w.wg.Done()
	for {
		select {
		case <-w.stop:
			return
		case <-time.After(gap):
		}
		if w.held.Load() {
			continue
		}
		w.inFlight.Add(1)
		if w.held.Load() {
			w.inFlight.Add(-1)
			continue
		}
		n := int(w.next.Add(1))
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := db.ExecContext(ctx, "INSERT INTO "+labTable+" (n) VALUES (?)", n)
		cancel()
		w.mu.Lock()
		w.writes = append(w.writes, ackWrite{n: n, start: start, end: time.Now(), ok: err == nil})
		w.mu.Unlock()
		w.inFlight.Add(-1)
	}
}

// halt stops the writer for good and waits for its last writes.
func (w *ackWriter) halt() {
	w.stopOnce.Do(func() { close(w.stop) })
	w.wg.Wait()
}

// hold stops new writes and waits (at most 10 s) until none is in
// flight; release lets them go on.
func (w *ackWriter) hold() (release func()) {
	w.held.Store(true)
	deadline := time.Now().Add(10 * time.Second)
	for w.inFlight.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return func() { w.held.Store(false) }
}

// acked lists the acknowledged rows so far.
func (w *ackWriter) acked() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []int
	for _, r := range w.writes {
		if r.ok {
			out = append(out, r.n)
		}
	}
	return out
}

// counts returns how many writes were acknowledged and how many failed
// among those that ended after since.
func (w *ackWriter) counts(since time.Time) (ok, failed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.writes {
		switch {
		case r.end.Before(since):
		case r.ok:
			ok++
		default:
			failed++
		}
	}
	return ok, failed
}

// firstAck is when the first write that started at or after t0 was
// acknowledged (zero if none was yet): the end of an outage that began
// at t0.
func (w *ackWriter) firstAck(t0 time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var first time.Time
	for _, r := range w.writes {
		if r.ok && !r.start.Before(t0) && (first.IsZero() || r.end.Before(first)) {
			first = r.end
		}
	}
	return first
}

// slowest is the longest acknowledged write that started at or after t0.
func (w *ackWriter) slowest(t0 time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var d time.Duration
	for _, r := range w.writes {
		if r.ok && !r.start.Before(t0) {
			d = max(d, r.end.Sub(r.start))
		}
	}
	return d
}

// waitAck waits up to limit for a write started at or after t0 to be
// acknowledged and returns the outage since t0.
func (w *ackWriter) waitAck(t0 time.Time, limit time.Duration) (time.Duration, bool) {
	deadline := time.Now().Add(limit)
	for {
		if f := w.firstAck(t0); !f.IsZero() {
			return f.Sub(t0), true
		}
		if time.Now().After(deadline) {
			return 0, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------
// Looking at nodes and at Vigil.

// query runs a statement as root on a node, bounded by 5 s.
func (l *faultLab) query(node, q string) ([][]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return l.sb.SQL(ctx, node, q)
}

// value is the first column of the first row of q on node.
func (l *faultLab) value(node, q string) (string, error) {
	rows, err := l.query(node, q)
	if err != nil {
		return "", err
	}
	if len(rows) == 0 || len(rows[0]) == 0 {
		return "", fmt.Errorf("%s: %s: no rows", node, q)
	}
	return rows[0][0], nil
}

// serverMap is `vigil ctl --json servers` by name.
func (l *faultLab) serverMap() map[string]admin.ServerView {
	m := map[string]admin.ServerView{}
	for _, s := range l.env.servers(l.t) {
		m[s.Name] = s
	}
	return m
}

// fencedReason says why Vigil keeps s out of routing when it fenced or
// quarantined it: the reason an operator acts on.
func fencedReason(s admin.ServerView) (string, bool) {
	if s.State == "ONLINE" || s.Reason == "" {
		return "", false
	}
	if strings.Contains(s.Reason, "fenced") || strings.Contains(s.Reason, "quarantin") {
		return s.Reason, true
	}
	return "", false
}

// eventList is Vigil's event journal, oldest first.
func (l *faultLab) eventList() []admin.Event {
	out, err := l.env.ctl(l.t, "--json", "events", "--limit", "1000")
	var list []admin.Event
	if err != nil || json.Unmarshal([]byte(out), &list) != nil {
		l.t.Logf("events: %v\n%s", err, out)
	}
	return list
}

// eventsSince renders the events at or after t0 that match (all when
// match is nil), one a line.
func (l *faultLab) eventsSince(t0 time.Time, match func(admin.Event) bool) string {
	var b strings.Builder
	for _, e := range l.eventList() {
		if e.Time.Before(t0) || (match != nil && !match(e)) {
			continue
		}
		fmt.Fprintf(&b, "%s %s %s: %s\n", e.Time.Format("15:04:05.000"), e.Server, e.Kind, e.Message)
	}
	return b.String()
}

// replicaState is one node's replication as the sandbox sees it.
func (l *faultLab) replicaState(node string) (sandbox.NodeStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := l.sb.Status(ctx)
	if err != nil {
		return sandbox.NodeStatus{}, err
	}
	ns, ok := st.Node(node)
	if !ok {
		return ns, fmt.Errorf("no node %s", node)
	}
	return ns, nil
}

func describeReplica(ns sandbox.NodeStatus) string {
	s := fmt.Sprintf("replicating=%v source=%q io=%s sql=%s", ns.Replicating, ns.Source, ns.IOState, ns.SQLState)
	if ns.LastIOError != "" {
		s += " io_error=" + strconv.Quote(ns.LastIOError)
	}
	if ns.LastSQLError != "" {
		s += " sql_error=" + strconv.Quote(ns.LastSQLError)
	}
	if ns.Error != "" {
		s += " error=" + strconv.Quote(ns.Error)
	}
	return s
}

// awaitNewWriter waits up to limit until Vigil routes a writer other than
// old and returns it ("" if none came).
func (l *faultLab) awaitNewWriter(old string, limit time.Duration) string {
	var nw string
	waitUntil(limit, func() bool {
		nw = l.env.writer(l.t)
		return nw != "" && nw != old
	})
	if nw == old {
		return ""
	}
	return nw
}

// awaitEvent waits up to limit for an event at or after t0 that match
// accepts, and returns it.
func (l *faultLab) awaitEvent(t0 time.Time, limit time.Duration, match func(admin.Event) bool) (admin.Event, bool) {
	var found admin.Event
	ok := waitUntil(limit, func() bool {
		for _, e := range l.eventList() {
			if !e.Time.Before(t0) && match(e) {
				found = e
				return true
			}
		}
		return false
	})
	return found, ok
}

// waitUntil polls f every 200 ms for at most limit.
func waitUntil(limit time.Duration, f func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if f() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------
// GTIDs.

var gtidInText = regexp.MustCompile(`GTID (\d+-\d+-\d+)`)

// extraTransactions lists the transactions in node's binary log that
// writer lacks: for every (domain, server id) of node's
// @@gtid_binlog_state, the GTIDs beyond writer's last of that pair. It is
// the engine's comparison done independently, down to each GTID.
func (l *faultLab) extraTransactions(node, writer string) ([]string, error) {
	ns, err := l.value(node, "SELECT @@gtid_binlog_state")
	if err != nil {
		return nil, err
	}
	ws, err := l.value(writer, "SELECT @@gtid_binlog_state")
	if err != nil {
		return nil, err
	}
	nodeState, err := topology.ParseGTIDList(ns)
	if err != nil {
		return nil, err
	}
	writerState, err := topology.ParseGTIDList(ws)
	if err != nil {
		return nil, err
	}
	type pair struct{ d, s uint32 }
	have := map[pair]uint64{}
	for _, g := range writerState {
		have[pair{g.Domain, g.Server}] = g.Seq
	}
	beyond := false
	for _, g := range nodeState {
		if g.Seq > have[pair{g.Domain, g.Server}] {
			beyond = true
		}
	}
	if !beyond {
		return nil, nil
	}
	// List them from node's binary logs.
	logs, err := l.query(node, "SHOW BINARY LOGS")
	if err != nil {
		return nil, err
	}
	var extra []string
	for _, lg := range logs {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		rows, err := l.sb.SQL(ctx, node, "SHOW BINLOG EVENTS IN '"+lg[0]+"'")
		cancel()
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if len(r) < 6 || r[2] != "Gtid" {
				continue
			}
			m := gtidInText.FindStringSubmatch(r[5])
			if m == nil {
				continue
			}
			gs, err := topology.ParseGTIDList(m[1])
			if err != nil || len(gs) != 1 {
				continue
			}
			g := gs[0]
			if g.Seq > have[pair{g.Domain, g.Server}] {
				extra = append(extra, g.String())
			}
		}
	}
	return extra, nil
}

// salvaged maps every GTID found in a salvage file under state_dir to
// the file.
func (l *faultLab) salvaged() map[string]string {
	out := map[string]string{}
	files, _ := filepath.Glob(filepath.Join(l.stateDir, "salvage", "*.sql"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, m := range gtidInText.FindAllStringSubmatch(string(data), -1) {
			out[m[1]] = filepath.Base(f)
		}
	}
	return out
}

// compactGTIDs renders a list of GTIDs briefly: the first few and the
// count.
func compactGTIDs(gs []string) string {
	if len(gs) <= 6 {
		return strings.Join(gs, ",")
	}
	return fmt.Sprintf("%s … %s (%d)", strings.Join(gs[:3], ","), strings.Join(gs[len(gs)-2:], ","), len(gs))
}

// ---------------------------------------------------------------------
// Invariants.

// missingAcked returns the acknowledged rows node lacks.
func (l *faultLab) missingAcked(node string, acked []int) ([]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rows, err := l.sb.SQL(ctx, node, "SELECT n FROM "+labTable)
	if err != nil {
		return nil, err
	}
	have := make(map[int]bool, len(rows))
	for _, r := range rows {
		n, _ := strconv.Atoi(r[0])
		have[n] = true
	}
	var missing []int
	for _, n := range acked {
		if !have[n] {
			missing = append(missing, n)
		}
	}
	return missing, nil
}

// compactInts renders sorted numbers as ranges: 3-7,12.
func compactInts(ns []int) string {
	s := slices.Clone(ns)
	sort.Ints(s)
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(s[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", s[i], s[j]))
		}
		i = j + 1
	}
	if len(parts) > 12 {
		parts = append(parts[:12], "…")
	}
	return strings.Join(parts, ",")
}

// checkAckedOn is invariant (a): every write acknowledged so far is on
// writer. It returns a violation or "".
func (l *faultLab) checkAckedOn(writer string) string {
	acked := l.w.acked()
	missing, err := l.missingAcked(writer, acked)
	if err != nil {
		return fmt.Sprintf("cannot read %s on the writer %s: %v", labTable, writer, err)
	}
	if len(missing) > 0 {
		return fmt.Sprintf("%d of %d acknowledged rows are missing on the writer %s: n=%s", len(missing), len(acked), writer, compactInts(missing))
	}
	return ""
}

// checkDivergence is invariant (b). It returns violations and notes
// (divergence that Vigil does report).
func (l *faultLab) checkDivergence(writer string) (violations, notes []string) {
	salv := l.salvaged()
	servers := l.serverMap()
	for _, node := range l.nodes {
		if node == writer {
			continue
		}
		extra, err := l.extraTransactions(node, writer)
		if err != nil {
			violations = append(violations, fmt.Sprintf("cannot compare %s's binary log with the writer %s: %v", node, writer, err))
			continue
		}
		var unreported, inFile []string
		for _, g := range extra {
			if f, ok := salv[g]; ok {
				inFile = append(inFile, g+" in "+f)
			} else {
				unreported = append(unreported, g)
			}
		}
		if len(inFile) > 0 {
			notes = append(notes, fmt.Sprintf("%s holds %d transactions the writer %s lacks, salvaged: %s", node, len(inFile), writer, compactGTIDs(inFile)))
		}
		if len(unreported) == 0 {
			continue
		}
		s := servers[node]
		if reason, ok := fencedReason(s); ok {
			notes = append(notes, fmt.Sprintf("%s holds %d transactions the writer %s lacks (%s), in no salvage file; it is kept out: %s",
				node, len(unreported), writer, compactGTIDs(unreported), reason))
			continue
		}
		violations = append(violations, fmt.Sprintf("%s holds %d transactions the writer %s lacks (%s), in no salvage file, and is not fenced: state %s, reason %q",
			node, len(unreported), writer, compactGTIDs(unreported), s.State, s.Reason))
	}
	return violations, notes
}

// checkReplicating is invariant (c): within limit, every node replicates
// from writer or is fenced or quarantined with a reason.
func (l *faultLab) checkReplicating(writer string, limit time.Duration) []string {
	var problems []string
	deadline := time.Now().Add(limit)
	for {
		problems = problems[:0]
		servers := l.serverMap()
		for _, node := range l.nodes {
			if node == writer {
				continue
			}
			ns, err := l.replicaState(node)
			if err == nil && ns.Replicating && ns.Source == writer {
				continue
			}
			if _, ok := fencedReason(servers[node]); ok {
				continue
			}
			problems = append(problems, fmt.Sprintf("%s neither replicates from the writer %s nor is fenced with a reason: %s; Vigil: %s %q",
				node, writer, describeReplica(ns), servers[node].State, servers[node].Reason))
		}
		if len(problems) == 0 || time.Now().After(deadline) {
			return problems
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkVigil is invariant (d): the vigil process runs and its log shows
// no panic.
func (l *faultLab) checkVigil() string {
	select {
	case <-l.env.v.exited:
		return "the vigil process exited: " + tailLines(l.env.v.logf, 20)
	default:
	}
	data, _ := os.ReadFile(l.env.v.logf)
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "panic") {
			return "vigil's log shows a panic: " + line
		}
	}
	return ""
}

// ---------------------------------------------------------------------
// The operator.

// healAll resumes every paused node, heals every isolated one and starts
// every stopped one; it returns what it did.
func (l *faultLab) healAll() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	st, err := l.sb.Status(ctx)
	if err != nil {
		return nil, err
	}
	var did []string
	var errs []error
	for _, ns := range st.Nodes {
		switch {
		case !ns.Running:
			if err := l.sb.Start(ctx, ns.Name); err != nil {
				errs = append(errs, err)
			}
			did = append(did, "start "+ns.Name)
		case ns.Paused:
			if err := l.sb.Resume(ctx, ns.Name); err != nil {
				errs = append(errs, err)
			}
			did = append(did, "resume "+ns.Name)
		}
		if ns.Isolated {
			if err := l.sb.Heal(ctx, ns.Name); err != nil {
				errs = append(errs, err)
			}
			did = append(did, "heal "+ns.Name)
		}
	}
	return did, errors.Join(errs...)
}

// settleWriter waits until Vigil routes a writer (whether writes are
// acknowledged depends on its replicas: see requireAck). When there is none it takes, in turn, the steps
// docs/failover.md and Vigil's refusals point an operator to: `vigil ctl
// ack` after 8 s, `failover` after 16 s, `switchover` after 24 s (a
// returned primary that is alive but read-only), `failover --force` after
// 32 s, and after 40 s, when Vigil knows no primary at all ("NoPrimary:
// none reports read_only=OFF"), it names one: the node holding the most
// acknowledged rows is made writable. It returns the writer and the steps
// it took.
func (l *faultLab) settleWriter(limit time.Duration) (string, []string, error) {
	t0 := time.Now()
	deadline := t0.Add(limit)
	var steps []string
	ctl := func(args ...string) func() string {
		return func() string {
			out, err := l.env.ctl(l.t, args...)
			return "vigil ctl " + strings.Join(args, " ") + ": " + okOr(err, out)
		}
	}
	escalation := []struct {
		after time.Duration
		do    func() string
	}{
		{8 * time.Second, ctl("ack")},
		{16 * time.Second, ctl("failover")},
		{24 * time.Second, ctl("switchover")},
		{32 * time.Second, ctl("failover", "--force")},
		{40 * time.Second, l.nameWriter},
	}
	for {
		if w := l.env.writer(l.t); w != "" {
			return w, steps, nil
		}
		if since := time.Since(t0); len(escalation) > 0 && since > escalation[0].after {
			if did := escalation[0].do(); did != "" {
				steps = append(steps, fmt.Sprintf("no writer after %s: %s", since.Round(time.Second), did))
			}
			escalation = escalation[1:]
		}
		if time.Now().After(deadline) {
			clusters, _ := l.env.ctl(l.t, "clusters")
			return "", steps, fmt.Errorf("no routed writer within %s:\n%s", limit, clusters)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// nameWriter is the operator's answer to NoPrimary: when Vigil knows no
// primary, the node that holds the most acknowledged rows stops
// replicating and is made writable, so that Vigil finds it. It says what
// it did ("" when Vigil knows a primary).
func (l *faultLab) nameWriter() string {
	clusters, _ := l.env.ctl(l.t, "clusters")
	if !strings.Contains(clusters, "no primary") {
		return ""
	}
	acked := l.w.acked()
	best, fewest := "", -1
	for _, n := range l.nodes {
		missing, err := l.missingAcked(n, acked)
		if err == nil && (fewest < 0 || len(missing) < fewest) {
			best, fewest = n, len(missing)
		}
	}
	if best == "" {
		return "no primary, and no node answers"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := l.sb.Exec(ctx, best, "STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = 0")
	return fmt.Sprintf("no primary known: made %s (missing %d of %d acknowledged rows) writable: %s", best, fewest, len(acked), okOr(err, ""))
}

// okOr is "ok: <last line of out>" or the error with out's last line.
func okOr(err error, out string) string {
	if err != nil {
		return fmt.Sprintf("%v: %s", err, lastLine(out))
	}
	return "ok: " + lastLine(out)
}

// requireAck waits up to limit for a write through Vigil, started from
// now on, to be acknowledged.
func (l *faultLab) requireAck(limit time.Duration) error {
	if _, ok := l.w.waitAck(time.Now(), limit); !ok {
		return fmt.Errorf("no write through Vigil was acknowledged within %s (writer %q)", limit, l.env.writer(l.t))
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// rejoinOutcome is what `vigil ctl rejoin NODE` answered.
type rejoinOutcome struct {
	node     string
	accepted bool
	message  string
}

// rejoinStragglers runs `vigil ctl rejoin` for every node that is fenced
// or does not replicate from writer (a replica left alone by a failover
// must be rejoined by the operator, docs/failover.md).
func (l *faultLab) rejoinStragglers(writer string) []rejoinOutcome {
	var out []rejoinOutcome
	servers := l.serverMap()
	for _, node := range l.nodes {
		if node == writer {
			continue
		}
		ns, err := l.replicaState(node)
		_, fenced := fencedReason(servers[node])
		if err == nil && ns.Replicating && ns.Source == writer && !fenced {
			continue
		}
		msg, err := l.env.ctl(l.t, "rejoin", node)
		out = append(out, rejoinOutcome{node: node, accepted: err == nil, message: strings.TrimSpace(msg)})
	}
	return out
}

// rebuild makes node a copy of writer, as an operator restoring it from
// a backup of the primary would: with the writes held, it copies the
// writer's rows, binary log state and position to node, which then
// replicates from the writer. Whatever node held that the writer lacks
// is dropped (after it was checked by invariant (b)).
func (l *faultLab) rebuild(node, writer string) error {
	release := l.w.hold()
	defer release()
	state, err := l.value(writer, "SELECT @@gtid_binlog_state")
	if err != nil {
		return err
	}
	pos, err := l.value(writer, "SELECT @@gtid_binlog_pos")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rows, err := l.sb.SQL(ctx, writer, "SELECT n, at FROM "+labTable)
	if err != nil {
		return err
	}
	wn, err := l.sb.Node(writer)
	if err != nil {
		return err
	}
	repl := l.sb.Accounts().Repl
	db, err := l.sb.RootDB(node)
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	stmts := []string{
		"STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = 1", "SET SESSION sql_log_bin = 0",
		"TRUNCATE TABLE " + labTable,
	}
	for i := 0; i < len(rows); i += 1000 {
		var vals []string
		for _, r := range rows[i:min(i+1000, len(rows))] {
			vals = append(vals, fmt.Sprintf("(%s,'%s')", r[0], r[1]))
		}
		stmts = append(stmts, "INSERT INTO "+labTable+" (n, at) VALUES "+strings.Join(vals, ","))
	}
	stmts = append(stmts, "RESET MASTER",
		"SET GLOBAL gtid_binlog_state = '"+state+"'",
		"SET GLOBAL gtid_slave_pos = '"+pos+"'",
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%d, MASTER_USER='%s', MASTER_PASSWORD='%s', MASTER_USE_GTID=slave_pos, MASTER_HEARTBEAT_PERIOD=0.25, MASTER_CONNECT_RETRY=1",
			wn.Host, wn.Port, repl.User, repl.Password),
		"START SLAVE")
	for _, s := range stmts {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %.80s: %w", node, s, err)
		}
	}
	return nil
}

// answers reports whether node answers, within 3 s, what comparing its
// binary log needs (its GTID state, SHOW BINARY LOGS); for a node that
// does not (it waits, say, for semi-sync acknowledgements that never
// come, holding the binary log) it says why, from its process list.
func (l *faultLab) answers(node string) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := l.sb.SQL(ctx, node, "SELECT @@gtid_binlog_state; SHOW BINARY LOGS"); err == nil {
		return true, ""
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel2()
	rows, err := l.sb.SQL(ctx2, node, "SELECT ID, USER, COMMAND, TIME, STATE, LEFT(IFNULL(INFO,''),60) FROM information_schema.PROCESSLIST WHERE COMMAND <> 'Sleep' AND STATE <> ''")
	if err != nil {
		return false, err.Error()
	}
	var b []string
	for _, r := range rows {
		b = append(b, strings.Join(r, " | "))
	}
	return false, strings.Join(b, "\n")
}
