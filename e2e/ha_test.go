package e2e

// High availability of Vigil itself: two Vigil instances (vigil1, vigil2)
// in front of a 3-node semi-synchronous replication sandbox, coordinating
// through a 3-member etcd cluster (internal/coord). Each test starts its
// own sandbox (sandbox.Options{Etcd: 3, Vigils: 2}), writes through both
// instances with Go writers that stamp every row with the @@server_id of
// the server that executed it (INSERT ... RETURNING), injects one fault
// (a dead primary, a dead acting Vigil, a Vigil cut off from etcd, a
// switchover under load, a lost etcd quorum) and checks the invariants:
// one writer per term, no acknowledged write lost, nothing routed by an
// instance that cannot prove it still holds its role.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
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

	"github.com/go-sql-driver/mysql"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/coord"
	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// ---------------------------------------------------------------------
// The environment: sandbox, etcd client, admin API of each instance.

const (
	haCluster = sandbox.ClusterName
	haTable   = "vigil_test.ha"
	// haSelfFenced is Vigil's error for a write refused by an instance
	// that cannot renew its etcd lease (or has not caught up).
	haSelfFenced      = 7015
	haSelfFencedState = "08V01"
)

type haEnv struct {
	t     *testing.T
	sb    *sandbox.Sandbox
	m     sandbox.Manifest
	token string
	etcd  *clientv3.Client
	sids  map[string]int // node → server_id
	ids   atomic.Int64   // row ids, unique across writers
	t0    time.Time
}

// newHAEnv starts the sandbox (after the caller set any environment the
// Vigil daemons must inherit) and waits until both instances hold their
// lease, agree on the first writer record (node1, term 1) and allow
// writes.
func newHAEnv(t *testing.T) *haEnv {
	t.Helper()
	return newHAEnvWith(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3, SemiSync: true, Etcd: 3, Vigils: 2})
}

// newHAEnvWith is newHAEnv on a sandbox of opts (with the test's Vigil
// binary).
func newHAEnvWith(t *testing.T, opts sandbox.Options) *haEnv {
	t.Helper()
	opts.VigilBinary = BuildVigil(t)
	sb := Sandbox(t, opts)
	e := &haEnv{t: t, sb: sb, m: sb.Manifest(), sids: map[string]int{}, t0: time.Now()}
	e.token = e.m.AdminToken
	for _, n := range e.m.Nodes {
		e.sids[n.Name] = n.ServerID
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.m.EtcdEndpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	e.etcd = cli
	// Registered after Sandbox: runs before the sandbox is torn down.
	t.Cleanup(func() {
		if t.Failed() {
			e.saveArtifacts()
		}
		_ = cli.Close()
	})
	Eventually(t, 30*time.Second, "both Vigil instances holding their lease with the first writer record applied", func() error {
		var recs []coord.Record
		for i := range e.m.Vigils {
			c, err := e.coordination(i)
			if err != nil {
				return err
			}
			cs, ok := c.Clusters[haCluster]
			if c.Lease == nil || c.Lease.Lease != "held" || !ok || cs.Record == nil || !cs.CaughtUp || cs.Writes != "allowed" {
				return fmt.Errorf("%s: %s", e.m.Vigils[i].Name, c.describe())
			}
			recs = append(recs, *cs.Record)
		}
		if recs[0].Seq != recs[1].Seq || recs[0].Writer != "node1" || recs[1].Writer != "node1" {
			return fmt.Errorf("records differ or do not name node1: %+v / %+v", recs[0], recs[1])
		}
		if _, err := e.actingName(); err != nil {
			return err
		}
		return nil
	})
	e.sql("node1", "CREATE TABLE IF NOT EXISTS "+haTable+" (id BIGINT PRIMARY KEY, via VARCHAR(16) NOT NULL, sid INT NOT NULL, at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))")
	replicas := []string{"node2", "node3"}
	if cs := sb.Clusters(); len(cs) > 0 {
		replicas = cs[0].Nodes[1:] // several clusters: the first one's
	}
	e.waitRowsOn(replicas, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'vigil_test' AND TABLE_NAME = 'ha'", "1")
	return e
}

// saveArtifacts copies the Vigil and etcd logs next to the nodes' logs
// (test-artifacts/<Test>/) and logs what the instances saw.
func (e *haEnv) saveArtifacts() {
	t := e.t
	root, err := RepoRoot()
	if err != nil {
		return
	}
	dest := filepath.Join(root, "test-artifacts", unsafeName.ReplaceAllString(t.Name(), "_"))
	_ = os.MkdirAll(dest, 0o755)
	for _, v := range e.m.Vigils {
		_ = copyFile(v.Log, filepath.Join(dest, v.Name+".log"))
		t.Logf("last lines of %s's log (all of it in %s):\n%s", v.Name, dest, tailLines(v.Log, 40))
	}
	for _, m := range e.m.Etcd {
		_ = copyFile(m.Log, filepath.Join(dest, m.Name+".log"))
	}
	for i, v := range e.m.Vigils {
		if c, err := e.coordination(i); err == nil {
			t.Logf("%s coordination: %s", v.Name, c.describe())
		}
		t.Logf("%s events:\n%s", v.Name, e.eventsText(i, e.t0))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if r, err := e.etcd.Get(ctx, sandbox.CoordinationPrefix, clientv3.WithPrefix(), clientv3.WithSerializable()); err == nil {
		var b strings.Builder
		for _, kv := range r.Kvs {
			fmt.Fprintf(&b, "%s = %.400s\n", kv.Key, kv.Value)
		}
		t.Logf("etcd keys:\n%s", b.String())
	}
}

func (e *haEnv) vigil(name string) int {
	for i, v := range e.m.Vigils {
		if v.Name == name {
			return i
		}
	}
	e.t.Fatalf("no Vigil instance %s", name)
	return -1
}

func (e *haEnv) proxy(i int) string { return e.m.Vigils[i].Proxy.Addr() }

// haCoordination is GET /api/v1/coordination.
type haCoordination struct {
	Enabled  bool                          `json:"enabled"`
	Lease    *coord.State                  `json:"lease"`
	Clusters map[string]coord.ClusterState `json:"clusters"`
}

func (c haCoordination) describe() string {
	if c.Lease == nil {
		return "no lease state"
	}
	cs := c.Clusters[haCluster]
	rec := "no record"
	if cs.Record != nil {
		rec = haRec(*cs.Record)
	}
	return fmt.Sprintf("lease %s, acting %v (leader %q), %s, caught up %v, writes %s", c.Lease.Lease, cs.Acting, cs.Leader, rec, cs.CaughtUp, cs.Writes)
}

func haRec(r coord.Record) string {
	return fmt.Sprintf("term %d writer %q phase %s seq %d by %s fenced %v", r.Term, r.Writer, r.Phase, r.Seq, r.By, r.Fenced)
}

// api GETs a path of instance i's admin API.
func (e *haEnv) api(i int, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.m.Vigils[i].Admin.Addr()+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return body, nil
}

func (e *haEnv) coordination(i int) (haCoordination, error) {
	var c haCoordination
	body, err := e.api(i, "/api/v1/coordination")
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return c, fmt.Errorf("coordination: %v: %s", err, body)
	}
	return c, nil
}

func (e *haEnv) mustCoordination(i int) haCoordination {
	e.t.Helper()
	c, err := e.coordination(i)
	if err != nil {
		e.t.Fatalf("%s: %v", e.m.Vigils[i].Name, err)
	}
	return c
}

// actingName is the instance that says it acts (exactly one must).
func (e *haEnv) actingName() (string, error) {
	var acting []string
	for i, v := range e.m.Vigils {
		c, err := e.coordination(i)
		if err != nil {
			return "", err
		}
		if c.Clusters[haCluster].Acting {
			acting = append(acting, v.Name)
		}
	}
	if len(acting) != 1 {
		return "", fmt.Errorf("acting instances: %v", acting)
	}
	return acting[0], nil
}

func (e *haEnv) events(i int, since time.Time) []admin.Event {
	body, err := e.api(i, "/api/v1/events?limit=1000&since="+since.UTC().Format(time.RFC3339))
	if err != nil {
		return nil
	}
	var ev []admin.Event
	_ = json.Unmarshal(body, &ev)
	sort.SliceStable(ev, func(a, b int) bool { return ev[a].Time.Before(ev[b].Time) })
	return ev
}

func (e *haEnv) eventsText(i int, since time.Time) string {
	var b strings.Builder
	for _, ev := range e.events(i, since) {
		fmt.Fprintf(&b, "  %s %-22s %-6s %s\n", ev.Time.Format("15:04:05.000"), ev.Kind, ev.Server, ev.Message)
	}
	return b.String()
}

func (e *haEnv) metric(i int, series string) (float64, error) {
	body, err := e.api(i, "/metrics")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(l, series+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	return 0, fmt.Errorf("no %s in /metrics", series)
}

// ctl runs `vigil ctl` against instance i.
func (e *haEnv) ctl(i int, args ...string) (string, error) {
	e.t.Helper()
	res, err := RunVigil(e.t, append([]string{"ctl", "--admin", "http://" + e.m.Vigils[i].Admin.Addr(), "--token", e.token}, args...)...)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("vigil ctl %s: exit %d", strings.Join(args, " "), res.ExitCode)
	}
	return res.Stdout + res.Stderr, err
}

// ---------------------------------------------------------------------
// etcd: the writer record, the operation journal, the shared history.

func (e *haEnv) etcdGet(key string, serializable bool) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	opts := []clientv3.OpOption{}
	if serializable {
		opts = append(opts, clientv3.WithSerializable())
	}
	r, err := e.etcd.Get(ctx, sandbox.CoordinationPrefix+"clusters/"+haCluster+"/"+key, opts...)
	if err != nil {
		return nil, false, err
	}
	if len(r.Kvs) == 0 {
		return nil, false, nil
	}
	return r.Kvs[0].Value, true, nil
}

func (e *haEnv) record(serializable bool) (coord.Record, error) {
	var rec coord.Record
	v, ok, err := e.etcdGet("writer", serializable)
	if err != nil {
		return rec, err
	}
	if !ok {
		return rec, errors.New("no writer record in etcd")
	}
	err = json.Unmarshal(v, &rec)
	return rec, err
}

func (e *haEnv) mustRecord() coord.Record {
	e.t.Helper()
	r, err := e.record(false)
	if err != nil {
		e.t.Fatalf("writer record: %v", err)
	}
	return r
}

func (e *haEnv) op(serializable bool) (*coord.Op, error) {
	v, ok, err := e.etcdGet("op", serializable)
	if err != nil || !ok {
		return nil, err
	}
	var op coord.Op
	if err := json.Unmarshal(v, &op); err != nil {
		return nil, err
	}
	return &op, nil
}

func (e *haEnv) history() []failover.Record {
	e.t.Helper()
	v, ok, err := e.etcdGet("history", false)
	if err != nil {
		e.t.Fatalf("history: %v", err)
	}
	if !ok {
		return nil
	}
	var h []failover.Record
	if err := json.Unmarshal(v, &h); err != nil {
		e.t.Fatalf("history: %v: %s", err, v)
	}
	return h
}

// historySince is the shared history's records of kind that started
// after t0.
func (e *haEnv) historySince(t0 time.Time) []failover.Record {
	var out []failover.Record
	for _, r := range e.history() {
		if !r.Started.Before(t0) {
			out = append(out, r)
		}
	}
	return out
}

func haDescribeHistory(h []failover.Record) string {
	var parts []string
	for _, r := range h {
		parts = append(parts, fmt.Sprintf("%s auto=%v %s→%s ok=%v started %s ended %s err=%q",
			r.Kind, r.Auto, r.OldPrimary, r.NewPrimary, r.OK, r.Started.Format("15:04:05.000"), r.Ended.Format("15:04:05.000"), r.Error))
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// waitNewWriter waits until the record in etcd names a writer other than
// old, serving, and no operation is journaled; it returns the record.
func (e *haEnv) waitNewWriter(old string, limit time.Duration) coord.Record {
	e.t.Helper()
	var rec coord.Record
	Eventually(e.t, limit, "a new writer in the record (serving, no operation running)", func() error {
		r, err := e.record(false)
		if err != nil {
			return err
		}
		op, err := e.op(false)
		if err != nil {
			return err
		}
		if r.Phase != coord.PhaseServing || r.Writer == "" || r.Writer == old || op != nil {
			return fmt.Errorf("record %s; operation journaled %v", haRec(r), op != nil)
		}
		rec = r
		return nil
	})
	return rec
}

// requireAgreement checks that both instances applied the record rec and
// allow writes.
func (e *haEnv) requireAgreement(rec coord.Record, limit time.Duration) {
	e.t.Helper()
	Eventually(e.t, limit, "both instances on the record "+haRec(rec)+" with writes allowed", func() error {
		for i, v := range e.m.Vigils {
			c, err := e.coordination(i)
			if err != nil {
				return err
			}
			cs := c.Clusters[haCluster]
			if cs.Record == nil || cs.Record.Seq != rec.Seq || cs.Record.Term != rec.Term || cs.Record.Writer != rec.Writer || cs.Record.Phase != rec.Phase {
				return fmt.Errorf("%s: %s", v.Name, c.describe())
			}
			if c.Lease.Lease != "held" || !cs.CaughtUp || cs.Writes != "allowed" {
				return fmt.Errorf("%s: %s", v.Name, c.describe())
			}
		}
		return nil
	})
	e.requireSameTerm(rec, limit)
}

// requireSameTerm checks that every instance shows the record's term and
// writer, in the API and in `vigil ctl clusters`: the term is the
// cluster's fencing token, one for all instances (issue 24: each showed
// its own counter, and a restarted instance term 1).
func (e *haEnv) requireSameTerm(rec coord.Record, limit time.Duration) {
	e.t.Helper()
	Eventually(e.t, limit, fmt.Sprintf("every instance showing term %d, writer %s", rec.Term, rec.Writer), func() error {
		for i, v := range e.m.Vigils {
			body, err := e.api(i, "/api/v1/clusters")
			if err != nil {
				return err
			}
			var list []admin.ClusterView
			if err := json.Unmarshal(body, &list); err != nil {
				return err
			}
			for _, cl := range list {
				if cl.Name == haCluster && (cl.Term != rec.Term || cl.Writer != rec.Writer) {
					return fmt.Errorf("%s: /api/v1/clusters says term %d writer %q", v.Name, cl.Term, cl.Writer)
				}
			}
			out, err := e.ctl(i, "clusters")
			if err != nil {
				return err
			}
			for _, line := range strings.Split(out, "\n") {
				f := strings.Fields(line)
				if len(f) > 4 && f[0] == haCluster && (f[3] != rec.Writer || f[4] != fmt.Sprint(rec.Term)) {
					return fmt.Errorf("%s: vigil ctl clusters says %q", v.Name, line)
				}
			}
		}
		return nil
	})
}

// ---------------------------------------------------------------------
// The nodes.

func (e *haEnv) sql(node, q string) [][]string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := e.sb.SQL(ctx, node, q)
	if err != nil {
		e.t.Fatalf("%s: %s: %v", node, q, err)
	}
	return rows
}

func (e *haEnv) waitRowsOn(nodes []string, q, want string) {
	e.t.Helper()
	for _, n := range nodes {
		Eventually(e.t, 15*time.Second, n+": "+q+" = "+want, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			rows, err := e.sb.SQL(ctx, n, q)
			if err != nil {
				return err
			}
			if len(rows) != 1 || rows[0][0] != want {
				return fmt.Errorf("%v", rows)
			}
			return nil
		})
	}
}

// haRow is a row of vigil_test.ha as a node has it.
type haRow struct {
	via string
	sid int
}

func (e *haEnv) rowsOn(node string) map[int64]haRow {
	e.t.Helper()
	out := map[int64]haRow{}
	for _, r := range e.sql(node, "SELECT id, via, sid FROM "+haTable) {
		id, _ := strconv.ParseInt(r[0], 10, 64)
		sid, _ := strconv.Atoi(r[2])
		out[id] = haRow{via: r[1], sid: sid}
	}
	return out
}

// requireAckedOn: every write acknowledged by any writer is on node, as
// stamped.
func (e *haEnv) requireAckedOn(node string, ws ...*haWriter) {
	e.t.Helper()
	rows := e.rowsOn(node)
	total := 0
	var missing, wrong []string
	for _, w := range ws {
		for _, a := range w.acked() {
			total++
			r, ok := rows[a.id]
			switch {
			case !ok:
				missing = append(missing, fmt.Sprintf("%d (%s, sid %d, acknowledged %s)", a.id, a.via, a.sid, a.end.Format("15:04:05.000")))
			case r.sid != a.sid || r.via != a.via:
				wrong = append(wrong, fmt.Sprintf("%d: acknowledged as %s sid %d, on %s as %s sid %d", a.id, a.via, a.sid, node, r.via, r.sid))
			}
		}
	}
	if len(missing) > 0 {
		e.t.Errorf("%d of %d acknowledged writes are missing on %s: %s", len(missing), total, node, haFirst(missing, 20))
	}
	if len(wrong) > 0 {
		e.t.Errorf("%d acknowledged writes differ on %s: %s", len(wrong), node, haFirst(wrong, 20))
	}
	if len(missing)+len(wrong) == 0 {
		e.t.Logf("all %d acknowledged writes are on %s, as acknowledged (%d rows there)", total, node, len(rows))
	}
}

func haFirst(l []string, n int) string {
	if len(l) > n {
		return strings.Join(l[:n], ", ") + fmt.Sprintf(" … (%d more)", len(l)-n)
	}
	return strings.Join(l, ", ")
}

func (e *haEnv) readOnly(node string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	rows, err := e.sb.SQL(ctx, node, "SELECT @@read_only")
	if err != nil {
		return "", err
	}
	if len(rows) != 1 || len(rows[0]) != 1 {
		return "", fmt.Errorf("read_only: %v", rows)
	}
	return rows[0][0], nil
}

// replicatesFrom waits until node's replication runs from source.
func (e *haEnv) replicatesFrom(node, source string, limit time.Duration) {
	e.t.Helper()
	Eventually(e.t, limit, node+" replicating from "+source, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := e.sb.Status(ctx)
		if err != nil {
			return err
		}
		ns, ok := st.Node(node)
		if !ok {
			return fmt.Errorf("no %s", node)
		}
		if !ns.Replicating || ns.Source != source {
			return fmt.Errorf("%s: replicating %v from %q (io %s %q, sql %s %q, gtid %s, read_only %v)", node, ns.Replicating, ns.Source,
				ns.IOState, ns.LastIOError, ns.SQLState, ns.LastSQLError, ns.GTIDCurrent, ns.ReadOnly != nil && *ns.ReadOnly)
		}
		return nil
	})
}

// writableSampler reads @@read_only on every node every 100 ms and keeps
// the moments when more than one server was writable.
type writableSampler struct {
	mu         sync.Mutex
	samples    int
	violations []string
	writable   map[string]int // node → samples it was writable in
	ignored    map[string]bool
	stop, done chan struct{}
}

// ignore leaves node out of the check (on) or takes it back (off): an old
// primary the sandbox restarts comes back with its my.cnf's read_only=OFF
// until the rejoin makes it read-only, while Vigil routes nothing to it.
func (s *writableSampler) ignore(node string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ignored[node] = on
}

func (e *haEnv) sampleWritable() *writableSampler {
	s := &writableSampler{writable: map[string]int{}, ignored: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	nodes := make([]string, 0, len(e.m.Nodes))
	for _, n := range e.m.Nodes {
		nodes = append(nodes, n.Name)
	}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			at := time.Now()
			ro := make([]string, len(nodes))
			var wg sync.WaitGroup
			for i, n := range nodes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if v, err := e.readOnly(n); err == nil {
						ro[i] = v
					} else {
						ro[i] = "-"
					}
				}()
			}
			wg.Wait()
			var w []string
			s.mu.Lock()
			for i, n := range nodes {
				if ro[i] == "0" && !s.ignored[n] {
					w = append(w, n)
				}
			}
			s.samples++
			for _, n := range w {
				s.writable[n]++
			}
			if len(w) > 1 {
				s.violations = append(s.violations, fmt.Sprintf("%s: %v writable", at.Format("15:04:05.000"), w))
			}
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// count is the number of samples so far.
func (s *writableSampler) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

func (s *writableSampler) finish() (samples int, violations []string, writable map[string]int) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples, s.violations, s.writable
}

// ---------------------------------------------------------------------
// Writers: one session through one instance, inserting rows stamped with
// the executing server's @@server_id and a unique id, recording what was
// acknowledged.

type haWrite struct {
	id         int64
	via        string
	start, end time.Time
	sid        int // server_id the acknowledged insert ran on
	err        error
}

type haWriter struct {
	via        string
	paused     atomic.Bool // sends nothing while set
	mu         sync.Mutex
	writes     []haWrite
	stop, done chan struct{}
	stopOnce   sync.Once
}

// startWriter writes through instance i every gap until stopped (at the
// latest at cleanup).
func (e *haEnv) startWriter(i int, gap time.Duration) *haWriter {
	via := e.m.Vigils[i].Name
	dsn := fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=3s&readTimeout=20s&writeTimeout=5s&interpolateParams=true", e.proxy(i))
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		e.t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	w := &haWriter{via: via, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer db.Close()
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			if w.paused.Load() {
				select {
				case <-w.stop:
					return
				case <-time.After(gap):
				}
				continue
			}
			id := e.ids.Add(1)
			hw := haWrite{id: id, via: via, start: time.Now()}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			hw.err = db.QueryRowContext(ctx, "INSERT INTO "+haTable+" (id, via, sid) VALUES (?, ?, @@server_id) RETURNING sid", id, via).Scan(&hw.sid)
			cancel()
			hw.end = time.Now()
			w.mu.Lock()
			w.writes = append(w.writes, hw)
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-time.After(gap):
			}
		}
	}()
	e.t.Cleanup(w.halt)
	return w
}

func (w *haWriter) halt() {
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
}

func (w *haWriter) all() []haWrite {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.writes)
}

func (w *haWriter) acked() []haWrite {
	var out []haWrite
	for _, x := range w.all() {
		if x.err == nil {
			out = append(out, x)
		}
	}
	return out
}

// firstAckAfter is the first acknowledgement of a write started after t0.
func (w *haWriter) firstAckAfter(t0 time.Time) (haWrite, bool) {
	for _, x := range w.all() {
		if x.err == nil && x.start.After(t0) {
			return x, true
		}
	}
	return haWrite{}, false
}

// firstErrAfter is the first failed write started after t0 for which
// match holds.
func (w *haWriter) firstErrAfter(t0 time.Time, match func(error) bool) (haWrite, bool) {
	for _, x := range w.all() {
		if x.err != nil && x.start.After(t0) && match(x.err) {
			return x, true
		}
	}
	return haWrite{}, false
}

// summary counts the writes and their errors by kind.
func (w *haWriter) summary() string {
	all := w.all()
	ok := 0
	errs := map[string]int{}
	for _, x := range all {
		if x.err == nil {
			ok++
		} else {
			errs[haErrKey(x.err)]++
		}
	}
	keys := make([]string, 0, len(errs))
	for k := range errs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d× %s", errs[k], k))
	}
	return fmt.Sprintf("writer through %s: %d writes, %d acknowledged, errors: [%s]", w.via, len(all), ok, strings.Join(parts, "; "))
}

// haErrKey shortens an error to its code (MySQL errors) or text.
func haErrKey(err error) string {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return fmt.Sprintf("%d (%s) %.90s", me.Number, string(me.SQLState[:]), me.Message)
	}
	s := err.Error()
	if len(s) > 90 {
		s = s[:90]
	}
	return s
}

// isSelfFenced: Vigil's 7015 with SQLSTATE 08V01.
func isSelfFenced(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == haSelfFenced && string(me.SQLState[:]) == haSelfFencedState
}

// readThrough runs a read through instance i.
func (e *haEnv) readThrough(i int) error {
	db, err := sql.Open("mysql", fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=3s&readTimeout=5s", e.proxy(i)))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n int
	return db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+haTable).Scan(&n)
}

// freshReadsThrough opens n new connections through instance i, each
// with a default schema no login used before (so the login is checked on
// a server, not taken from the login cache), and reads on each.
func (e *haEnv) freshReadsThrough(i, n int) (ok int, failed []string) {
	for k := range n {
		schema := []string{"information_schema", ""}[k%2]
		db, err := sql.Open("mysql", fmt.Sprintf("app:app@tcp(%s)/%s?timeout=3s&readTimeout=5s", e.proxy(i), schema))
		if err != nil {
			failed = append(failed, err.Error())
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var c int
		err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+haTable).Scan(&c)
		cancel()
		db.Close()
		if err != nil {
			failed = append(failed, haErrKey(err))
			continue
		}
		ok++
	}
	return ok, failed
}

// ---------------------------------------------------------------------
// The tests.

// TestHAKillPrimaryTwoVigils: writers through both instances; kill -9
// the primary. Exactly one failover (by the acting instance), the term
// grows by one, both instances route by the same record, writes resume
// through both to the new primary, no acknowledged write is lost and
// nothing acknowledged after the kill ran on the old primary.
func TestHAKillPrimaryTwoVigils(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	e := newHAEnv(t)
	ctx := context.Background()
	rec0, acting, start, w1, w2 := e.writeThroughBoth(10*time.Millisecond, 1500*time.Millisecond)

	tKill := time.Now()
	haMust(t, "kill node1", e.sb.Kill(ctx, "node1"))
	killed := time.Now() // node1 is gone: nothing sent from now on can run there
	rec := e.waitNewWriter("node1", 30*time.Second)
	took := time.Since(tKill)
	newW, oldSid := rec.Writer, e.sids["node1"]
	newSid := e.sids[newW]
	t.Logf("kill -9 node1 → record %s after %s", haRec(rec), took.Round(time.Millisecond))
	t.Logf("first acknowledged write after the kill: %s", awaitAckAfter(t, tKill, w1, w2))
	time.Sleep(time.Second)
	w1.halt()
	w2.halt()
	t.Log(w1.summary())
	t.Log(w2.summary())

	// Exactly one failover, by the acting instance, term + 1.
	if rec.Term != rec0.Term+1 {
		t.Errorf("term went from %d to %d, want +1", rec0.Term, rec.Term)
	}
	if rec.By != acting {
		t.Errorf("the record was written by %s; %s was acting", rec.By, acting)
	}
	h := e.historySince(start)
	if len(h) != 1 || h[0].Kind != failover.RecordFailover || !h[0].OK || h[0].OldPrimary != "node1" || h[0].NewPrimary != newW {
		t.Errorf("history since the kill: %s, want exactly one successful failover node1 → %s", haDescribeHistory(h), newW)
	}
	// The record says what each instance saw of node1 (issue 24 item 5).
	if len(h) == 1 {
		t.Logf("views when the failover started: %s", h[0].Views)
	}
	if len(h) == 1 && (!strings.Contains(h[0].Views, "vigil1: node1 ") || !strings.Contains(h[0].Views, "vigil2: node1 ")) {
		t.Errorf("the failover's record does not say what each instance saw of node1: %q", h[0].Views)
	}
	if fin := e.mustRecord(); fin.Term != rec0.Term+1 || fin.Writer != newW {
		t.Errorf("final record %s", haRec(fin))
	}
	e.requireAgreement(rec, 5*time.Second)

	// Writes after the kill ran on the new primary only; rows of the old
	// primary were all started before the kill.
	for _, w := range []*haWriter{w1, w2} {
		for _, a := range w.acked() {
			if a.start.After(killed) && a.sid != newSid {
				t.Errorf("%s: write %d started %s after node1 was gone was acknowledged by server_id %d, not the new primary's %d",
					w.via, a.id, a.start.Sub(killed), a.sid, newSid)
			}
			if a.sid != oldSid && a.sid != newSid {
				t.Errorf("%s: write %d ran on server_id %d", w.via, a.id, a.sid)
			}
		}
	}
	attempts := map[int64]haWrite{}
	for _, w := range []*haWriter{w1, w2} {
		for _, x := range w.all() {
			attempts[x.id] = x
		}
	}
	rows := e.rowsOn(newW)
	for id, r := range rows {
		if r.sid == oldSid && !attempts[id].start.Before(killed) {
			t.Errorf("row %d on %s is stamped by the old primary (server_id %d) but was sent %s after node1 was gone", id, newW, oldSid, attempts[id].start.Sub(killed))
		}
	}
	e.requireAckedOn(newW, w1, w2)
	third := "node2"
	if newW == "node2" {
		third = "node3"
	}
	e.replicatesFrom(third, newW, 20*time.Second)

	// A restarted instance shows the cluster's term and writer, not a
	// count of its own from 1.
	other := "vigil1"
	if acting == "vigil1" {
		other = "vigil2"
	}
	haMust(t, "kill "+other, e.sb.Kill(ctx, other))
	haMust(t, "start "+other, e.sb.Start(ctx, other))
	e.requireAgreement(e.mustRecord(), 20*time.Second)
}

// TestHALeaderDiesMidFailover: the acting instance is killed in the
// middle of a failover (held by the VIGIL_TEST_STEP_DELAY failpoint
// before one of its steps); the other instance is elected, finds the
// operation in etcd and finishes it. At no sampled moment are two
// servers writable.
func TestHALeaderDiesMidFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	for _, step := range []string{"set-writable", "repoint"} {
		t.Run(step, func(t *testing.T) { haLeaderDiesBefore(t, step) })
	}
}

func haLeaderDiesBefore(t *testing.T, step string) {
	// The daemons inherit this process's environment when they start.
	t.Setenv("VIGIL_TEST_STEP_DELAY", step+"=8s")
	e := newHAEnv(t)
	ctx := context.Background()
	rec0 := e.mustRecord()
	acting, err := e.actingName()
	if err != nil {
		t.Fatal(err)
	}
	ai := e.vigil(acting)
	si := 1 - ai
	survivor := e.m.Vigils[si].Name
	t.Logf("before: %s; %s acts, %s survives", haRec(rec0), acting, survivor)
	start := time.Now()
	sampler := e.sampleWritable()
	defer func() {
		select {
		case <-sampler.done:
		default:
			sampler.finish()
		}
	}()
	w := e.startWriter(si, 20*time.Millisecond)
	time.Sleep(time.Second)

	tKill := time.Now()
	haMust(t, "kill node1", e.sb.Kill(ctx, "node1"))
	killed := time.Now() // node1 is gone: nothing sent from now on can run there
	var stalled *coord.Op
	var stalledRec coord.Record
	Eventually(t, 30*time.Second, "the failover journaled in etcd and held before "+step, func() error {
		op, err := e.op(false)
		if err != nil {
			return err
		}
		if op == nil {
			return errors.New("no operation journaled")
		}
		if op.Done >= len(op.Plan.Steps) || op.Plan.Steps[op.Done].Kind.String() != step {
			next := "end"
			if op.Done < len(op.Plan.Steps) {
				next = op.Plan.Steps[op.Done].Kind.String()
			}
			return fmt.Errorf("operation at step %d (%s)", op.Done+1, next)
		}
		r, err := e.record(false)
		if err != nil {
			return err
		}
		if step == "set-writable" && r.Phase != coord.PhaseFencing {
			return fmt.Errorf("record %s, want phase fencing", haRec(r))
		}
		stalled, stalledRec = op, r
		return nil
	})
	var plan []string
	for i, s := range stalled.Plan.Steps {
		mark := ""
		if i == stalled.Done {
			mark = "*"
		}
		plan = append(plan, mark+s.Kind.String()+" "+s.Server)
	}
	t.Logf("%s after the kill: operation by %s at step %d of [%s]; record %s", time.Since(tKill).Round(time.Millisecond), stalled.Instance, stalled.Done+1, strings.Join(plan, ", "), haRec(stalledRec))
	if stalled.Instance != acting {
		t.Fatalf("the operation was started by %s; %s was acting", stalled.Instance, acting)
	}
	if stalled.Plan.Kind != failover.KindFailover || stalled.Plan.OldPrimary != "node1" {
		t.Fatalf("journaled operation: %s %s → %s", stalled.Plan.Kind, stalled.Plan.OldPrimary, stalled.Plan.NewPrimary)
	}

	// The acting instance dies mid-failover.
	tV := time.Now()
	haMust(t, "kill "+acting, e.sb.Kill(ctx, acting))
	var rec coord.Record
	var elected time.Duration
	Eventually(t, 15*time.Second, survivor+" acting and the failover finished", func() error {
		c, err := e.coordination(si)
		if err != nil {
			return err
		}
		if !c.Clusters[haCluster].Acting {
			return fmt.Errorf("%s: %s", survivor, c.describe())
		}
		if elected == 0 {
			elected = time.Since(tV)
		}
		r, err := e.record(false)
		if err != nil {
			return err
		}
		op, err := e.op(false)
		if err != nil {
			return err
		}
		if r.Phase != coord.PhaseServing || r.Writer == "" || r.Writer == "node1" || op != nil {
			return fmt.Errorf("record %s; operation journaled %v", haRec(r), op != nil)
		}
		rec = r
		return nil
	})
	done := time.Since(tV)
	t.Logf("kill -9 %s → %s acting after %s, failover finished after %s: %s", acting, survivor, elected.Round(time.Millisecond), done.Round(time.Millisecond), haRec(rec))
	if done > 10*time.Second {
		t.Errorf("the survivor took %s to finish the failover, want ≤ 10 s", done.Round(time.Millisecond))
	}
	newW := rec.Writer
	if rec.Term != rec0.Term+1 {
		t.Errorf("term went from %d to %d, want +1", rec0.Term, rec.Term)
	}
	if newW != stalled.Plan.NewPrimary {
		t.Errorf("the survivor made %s the writer; the journaled plan promoted %s", newW, stalled.Plan.NewPrimary)
	}
	h := e.historySince(start)
	t.Logf("history: %s", haDescribeHistory(h))
	var fo []failover.Record
	for _, r := range h {
		if r.Kind == failover.RecordFailover {
			fo = append(fo, r)
		}
	}
	if len(fo) != 1 || !fo[0].OK || fo[0].OldPrimary != "node1" || fo[0].NewPrimary != newW {
		t.Errorf("history since the kill: %s, want exactly one successful failover node1 → %s", haDescribeHistory(h), newW)
	}
	// The record says what each instance saw of node1 (issue 24 item 5).
	if len(h) == 1 {
		t.Logf("views when the failover started: %s", h[0].Views)
	}
	if len(h) == 1 && (!strings.Contains(h[0].Views, "vigil1: node1 ") || !strings.Contains(h[0].Views, "vigil2: node1 ")) {
		t.Errorf("the failover's record does not say what each instance saw of node1: %q", h[0].Views)
	}
	if ev := e.events(si, start); !slices.ContainsFunc(ev, func(x admin.Event) bool { return x.Kind == "operation_resumed" }) {
		t.Errorf("%s reported no operation_resumed event:\n%s", survivor, e.eventsText(si, start))
	} else {
		for _, x := range ev {
			if x.Kind == "operation_resumed" {
				t.Logf("%s: %s", survivor, x.Message)
			}
		}
	}

	// Writes through the survivor go to the new primary.
	Eventually(t, 15*time.Second, "a write through "+survivor+" on the new primary", func() error {
		for _, a := range w.acked() {
			if a.start.After(tV) && a.sid == e.sids[newW] {
				return nil
			}
		}
		return errors.New("none yet")
	})
	time.Sleep(500 * time.Millisecond)
	w.halt()
	t.Log(w.summary())
	for _, a := range w.acked() {
		if a.start.After(killed) && a.sid != e.sids[newW] {
			t.Errorf("write %d sent %s after node1 was gone was acknowledged by server_id %d, not the new primary", a.id, a.start.Sub(killed), a.sid)
		}
	}
	e.requireAckedOn(newW, w)
	third := "node2"
	if newW == "node2" {
		third = "node3"
	}
	e.replicatesFrom(third, newW, 20*time.Second)
	if ro, err := e.readOnly(third); err != nil || ro != "1" {
		t.Errorf("%s read_only %q %v", third, ro, err)
	}
	// The failover may be over in well under a second: sample the
	// settled cluster too, so the check rests on enough samples.
	for deadline := time.Now().Add(10 * time.Second); sampler.count() < 50 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	samples, violations, writable := sampler.finish()
	t.Logf("read_only sampled %d times every 100 ms; samples with the server writable: %v", samples, writable)
	if len(violations) > 0 {
		t.Errorf("two servers writable at once in %d samples: %s", len(violations), haFirst(violations, 10))
	}
	if samples < 50 {
		t.Errorf("only %d read_only samples", samples)
	}
}

// TestHAIsolatedVigilSelfFences: vigil2 is cut off from etcd. Within 3 s
// it refuses writes (7015, SQLSTATE 08V01) and still serves reads; a
// failover by vigil1 meanwhile gets no write from vigil2; healed, vigil2
// catches up and writes to the new primary.
func TestHAIsolatedVigilSelfFences(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	e := newHAEnv(t)
	ctx := context.Background()
	rec0, _, start, w1, w2 := e.writeThroughBoth(20*time.Millisecond, time.Second)

	tIso := time.Now()
	haMust(t, "isolate vigil2", e.sb.Isolate(ctx, "vigil2"))
	Eventually(t, 3*time.Second, "vigil2 refusing writes with 7015", func() error {
		if _, ok := w2.firstErrAfter(tIso, isSelfFenced); !ok {
			return errors.New("no 7015 yet")
		}
		return nil
	})
	f, _ := w2.firstErrAfter(tIso, isSelfFenced)
	var me *mysql.MySQLError
	errors.As(f.err, &me)
	t.Logf("isolate vigil2 → first 7015 after %s: %s", f.end.Sub(tIso).Round(time.Millisecond), me.Message)
	if !strings.Contains(me.Message, "refuses writes") || !strings.Contains(me.Message, "another Vigil instance") {
		t.Errorf("7015 message does not say what to do: %q", me.Message)
	}
	fenceBy := tIso.Add(3 * time.Second)
	if err := e.readThrough(1); err != nil {
		t.Errorf("a read through the isolated vigil2 failed: %v", err)
	}
	// New connections too, with a login the login cache has not seen
	// (its check went to the writer through the write gate: 7015).
	reads, failed := e.freshReadsThrough(1, 10)
	t.Logf("isolated vigil2: %d of 10 reads on new connections served, %d refused", reads, len(failed))
	if len(failed) > 0 {
		t.Errorf("reads on new connections through the isolated vigil2 failed: %s", haFirst(failed, 3))
	}
	c2 := e.mustCoordination(1)
	if c2.Lease.Lease != "lost" || c2.Clusters[haCluster].Writes == "allowed" {
		t.Errorf("vigil2 while isolated: %s", c2.describe())
	}
	if v, err := e.metric(1, `vigil_coordination_writes_fenced{cluster="sandbox"}`); err != nil || v != 1 {
		t.Errorf("vigil2's vigil_coordination_writes_fenced: %v %v", v, err)
	}
	if v, err := e.metric(1, `vigil_coordination_lease_held{instance="vigil2"}`); err != nil || v != 0 {
		t.Errorf("vigil2's vigil_coordination_lease_held: %v %v", v, err)
	}
	Eventually(t, 10*time.Second, "vigil1 acting", func() error {
		c, err := e.coordination(0)
		if err != nil {
			return err
		}
		if !c.Clusters[haCluster].Acting {
			return fmt.Errorf("vigil1: %s", c.describe())
		}
		return nil
	})
	time.Sleep(time.Until(fenceBy))

	// Nothing vigil2's writer sent after the fence deadline reached node1.
	tKill := time.Now()
	lateOnOld := e.sql("node1", fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE via = 'vigil2' AND id > %d", haTable, haLastIDBefore(w2, fenceBy)))
	haMust(t, "kill node1", e.sb.Kill(ctx, "node1"))
	killed := time.Now() // node1 is gone: nothing sent from now on can run there
	if lateOnOld[0][0] != "0" {
		t.Errorf("node1 holds %s rows vigil2's writer sent after it should have fenced itself", lateOnOld[0][0])
	}
	rec := e.waitNewWriter("node1", 30*time.Second)
	newW := rec.Writer
	t.Logf("kill -9 node1 → record %s after %s", haRec(rec), time.Since(tKill).Round(time.Millisecond))
	if rec.By != "vigil1" || rec.Term != rec0.Term+1 {
		t.Errorf("record %s, want term %d by vigil1", haRec(rec), rec0.Term+1)
	}
	Eventually(t, 20*time.Second, "a write through vigil1 on the new primary", func() error {
		if a, ok := w1.firstAckAfter(killed); !ok || a.sid != e.sids[newW] {
			return fmt.Errorf("first acknowledgement after the kill: %+v %v", a, ok)
		}
		return nil
	})
	time.Sleep(time.Second) // vigil2 still cut off while the new writer serves

	tHeal := time.Now()
	haMust(t, "heal vigil2", e.sb.Heal(ctx, "vigil2"))
	Eventually(t, 10*time.Second, "a write through the healed vigil2", func() error {
		if _, ok := w2.firstAckAfter(tHeal); !ok {
			return errors.New("none yet")
		}
		return nil
	})
	a, _ := w2.firstAckAfter(tHeal)
	t.Logf("heal vigil2 → first acknowledged write through it after %s, on server_id %d", a.end.Sub(tHeal).Round(time.Millisecond), a.sid)
	time.Sleep(500 * time.Millisecond)
	w1.halt()
	w2.halt()
	t.Log(w1.summary())
	t.Log(w2.summary())

	// While cut off (from the fence deadline to the heal), vigil2
	// acknowledged nothing and refused every write with 7015.
	var other []string
	for _, x := range w2.all() {
		if x.end.Before(fenceBy) || x.start.After(tHeal) {
			continue
		}
		if x.err == nil {
			t.Errorf("vigil2 acknowledged write %d (server_id %d) at %s, %s after it was cut off from etcd",
				x.id, x.sid, x.end.Format("15:04:05.000"), x.end.Sub(tIso).Round(time.Millisecond))
		} else if !isSelfFenced(x.err) {
			other = append(other, haErrKey(x.err))
		}
	}
	if len(other) > 0 {
		t.Errorf("vigil2 refused writes while cut off with errors other than 7015: %s", haFirst(other, 5))
	}
	for _, x := range w2.acked() {
		if x.start.After(tHeal) && x.sid != e.sids[newW] {
			t.Errorf("vigil2 write %d after the heal ran on server_id %d, not the new primary %s", x.id, x.sid, newW)
		}
	}
	// And none of the writes it refused exists on the new primary.
	rows := e.rowsOn(newW)
	for _, x := range w2.all() {
		if x.err != nil && isSelfFenced(x.err) {
			if _, ok := rows[x.id]; ok {
				t.Errorf("write %d was refused with 7015 by vigil2 but is on %s", x.id, newW)
			}
		}
	}
	h := e.historySince(start)
	if len(h) != 1 || h[0].Kind != failover.RecordFailover || !h[0].OK || h[0].NewPrimary != newW {
		t.Errorf("history: %s, want exactly one successful failover to %s", haDescribeHistory(h), newW)
	}
	e.requireAgreement(e.mustRecord(), 10*time.Second)
	e.requireAckedOn(newW, w1, w2)
}

// haLastIDBefore is the largest id the writer sent before t.
func haLastIDBefore(w *haWriter, t time.Time) int64 {
	var id int64
	for _, x := range w.all() {
		if x.start.Before(t) && x.id > id {
			id = x.id
		}
	}
	return id
}

// TestHASwitchoverUnderLoad: sysbench oltp_read_write through both
// instances; a switchover to node2 asked of the instance that does not
// act (forwarded through etcd). Neither load sees an error, the writes
// pause once, the history has one switchover.
func TestHASwitchoverUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	if _, err := exec.LookPath("sysbench"); err != nil {
		t.Fatal("sysbench is not installed: run scripts/install-deps.sh")
	}
	e := newHAEnv(t)
	rec0 := e.mustRecord()
	acting, err := e.actingName()
	if err != nil {
		t.Fatal(err)
	}
	oi := 1 - e.vigil(acting)
	other := e.m.Vigils[oi].Name
	t.Logf("before: %s; %s acts, the switchover is asked of %s", haRec(rec0), acting, other)
	if out, err := haSysbench(e.proxy(0), 2*time.Minute, "oltp_read_write", "prepare"); err != nil {
		t.Fatalf("sysbench prepare: %v\n%s", err, out)
	}
	e.waitRowsOn([]string{"node2", "node3"}, "SELECT COUNT(*) FROM sbtest.sbtest2", "10000")
	start := time.Now()

	type run struct {
		via string
		out string
		err error
	}
	results := make(chan run, 2)
	for i := range e.m.Vigils {
		go func() {
			out, err := haSysbench(e.proxy(i), 2*time.Minute, "oltp_read_write", "--threads=4", "--time=16",
				"--report-interval=0", "--rand-type=uniform", "run")
			results <- run{e.m.Vigils[i].Name, out, err}
		}()
	}
	time.Sleep(6 * time.Second)
	out, err := e.ctl(oi, "--json", "switchover", "--to", "node2")
	if err != nil {
		t.Fatalf("switchover through %s: %v\n%s", other, err, out)
	}
	var res admin.OpResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.OK {
		t.Fatalf("switchover result: %v %s", err, out)
	}
	t.Logf("switchover through %s: %s → %s in %.0f ms, writes held %.1f ms: %s", other, res.Old, res.New, res.ElapsedMs, res.PauseMs, res.Message)
	if res.Old != "node1" || res.New != "node2" {
		t.Errorf("switchover %s → %s, want node1 → node2", res.Old, res.New)
	}
	if res.PauseMs <= 0 {
		t.Errorf("the switchover result reports no write pause: %s", out)
	}
	for range e.m.Vigils {
		r := <-results
		switch {
		case r.err != nil || strings.Contains(r.out, "FATAL"):
			t.Errorf("sysbench through %s failed: %v\n%s", r.via, r.err, r.out)
		case haCount(r.out, haReReconnects) != 0:
			t.Errorf("sysbench through %s reconnected:\n%s", r.via, r.out)
		default:
			q := haReQueries.FindStringSubmatch(r.out)
			if q == nil {
				t.Errorf("sysbench through %s: no summary\n%s", r.via, r.out)
				continue
			}
			t.Logf("sysbench through %s: %s queries (%s qps), 0 errors, 0 reconnects (%d deadlocks retried by sysbench)",
				r.via, q[1], q[2], haCount(r.out, haReIgnored))
		}
	}

	h := e.historySince(start)
	if len(h) != 1 || h[0].Kind != failover.RecordSwitchover || !h[0].OK || h[0].OldPrimary != "node1" || h[0].NewPrimary != "node2" {
		t.Errorf("history: %s, want exactly one successful switchover node1 → node2", haDescribeHistory(h))
	}
	rec := e.mustRecord()
	if rec.Writer != "node2" || rec.Phase != coord.PhaseServing || rec.By != acting {
		t.Errorf("record after the switchover: %s, want node2 serving, written by %s", haRec(rec), acting)
	}
	e.requireAgreement(rec, 5*time.Second)
	// One write pause: the instance that does not act held its writes
	// once (one holding record applied), and the writer record went
	// through holding once.
	var holds []string
	for _, ev := range e.events(oi, start) {
		if ev.Kind == "coordination_applied" && strings.Contains(ev.Message, coord.PhaseHolding) {
			holds = append(holds, ev.Message)
		}
	}
	if len(holds) != 1 {
		t.Errorf("%s applied %d holding records, want 1: %v", other, len(holds), holds)
	}
	e.replicatesFrom("node1", "node2", 20*time.Second)
	e.replicatesFrom("node3", "node2", 20*time.Second)
	for n, want := range map[string]string{"node1": "1", "node2": "0", "node3": "1"} {
		if ro, err := e.readOnly(n); err != nil || ro != want {
			t.Errorf("%s read_only %q (%v), want %s", n, ro, err, want)
		}
	}
}

var (
	haReQueries    = regexp.MustCompile(`queries:\s+(\d+)\s+\(([\d.]+) per sec`)
	haReIgnored    = regexp.MustCompile(`ignored errors:\s+(\d+)`)
	haReReconnects = regexp.MustCompile(`reconnects:\s+(\d+)`)
)

// haCount is the number re finds in sysbench's summary, -1 without one.
func haCount(out string, re *regexp.Regexp) int {
	m := re.FindStringSubmatch(out)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func haMust(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// haSysbench runs sysbench against addr (the sbtest schema, 2 tables of
// 10000 rows), bounded by limit.
func haSysbench(addr string, limit time.Duration, args ...string) (string, error) {
	host, port, _ := strings.Cut(addr, ":")
	base := []string{"--db-driver=mysql", "--mysql-host=" + host, "--mysql-port=" + port,
		"--mysql-user=app", "--mysql-password=app", "--mysql-db=sbtest", "--tables=2", "--table-size=10000"}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "sysbench", append(base, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestHAEtcdQuorumLost: two of the three etcd members die. Both
// instances refuse writes (7015) within the lease and serve reads; the
// primary dies meanwhile and nobody fails over (no instance can prove
// its role). When etcd is back, both instances hold their lease again,
// exactly one failover runs and writes resume through both.
func TestHAEtcdQuorumLost(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	e := newHAEnv(t)
	ctx := context.Background()
	rec0, _, start, w1, w2 := e.writeThroughBoth(20*time.Millisecond, time.Second)

	tLoss := time.Now()
	haMust(t, "kill etcd2", e.sb.Kill(ctx, "etcd2"))
	haMust(t, "kill etcd3", e.sb.Kill(ctx, "etcd3"))
	for _, w := range []*haWriter{w1, w2} {
		Eventually(t, time.Until(tLoss.Add(4*time.Second)), w.via+" refusing writes with 7015", func() error {
			if _, ok := w.firstErrAfter(tLoss, isSelfFenced); !ok {
				return errors.New("no 7015 yet")
			}
			return nil
		})
		f, _ := w.firstErrAfter(tLoss, isSelfFenced)
		t.Logf("etcd quorum lost → %s refuses writes (7015) after %s", w.via, f.end.Sub(tLoss).Round(time.Millisecond))
	}
	fencedBy := time.Now()
	for i, v := range e.m.Vigils {
		if err := e.readThrough(i); err != nil {
			t.Errorf("a read through %s without etcd quorum failed: %v", v.Name, err)
		}
		if c := e.mustCoordination(i); c.Lease.Lease != "lost" || c.Clusters[haCluster].Writes == "allowed" {
			t.Errorf("%s without etcd quorum: %s", v.Name, c.describe())
		}
	}

	// The primary dies while nobody can act.
	tKill := time.Now()
	haMust(t, "kill node1", e.sb.Kill(ctx, "node1"))
	killed := time.Now() // node1 is gone: nothing sent from now on can run there
	time.Sleep(6 * time.Second)
	if r, err := e.record(true); err != nil || r.Seq != rec0.Seq || r.Term != rec0.Term || r.Writer != rec0.Writer {
		t.Errorf("the writer record changed without etcd quorum: %s (%v), was %s", haRec(r), err, haRec(rec0))
	}
	if op, err := e.op(true); err != nil || op != nil {
		t.Errorf("an operation was journaled without etcd quorum: %+v %v", op, err)
	}
	for _, n := range []string{"node2", "node3"} {
		if ro, err := e.readOnly(n); err != nil || ro != "1" {
			t.Errorf("%s read_only %q (%v) without etcd quorum: nobody may promote", n, ro, err)
		}
	}
	for i, v := range e.m.Vigils {
		for _, ev := range e.events(i, tKill) {
			if strings.HasPrefix(ev.Kind, "failover_started") || ev.Kind == "promoted" {
				t.Errorf("%s started a failover without etcd quorum: %s %s", v.Name, ev.Kind, ev.Message)
			}
		}
	}

	// etcd comes back.
	tBack := time.Now()
	haMust(t, "start etcd2", e.sb.Start(ctx, "etcd2"))
	haMust(t, "start etcd3", e.sb.Start(ctx, "etcd3"))
	t.Logf("etcd2 and etcd3 answer again %s after they were started", time.Since(tBack).Round(time.Millisecond))
	Eventually(t, 15*time.Second, "both instances holding their lease again", func() error {
		for i, v := range e.m.Vigils {
			c, err := e.coordination(i)
			if err != nil {
				return err
			}
			if c.Lease.Lease != "held" {
				return fmt.Errorf("%s: %s", v.Name, c.describe())
			}
		}
		return nil
	})
	rec := e.waitNewWriter("node1", 30*time.Second)
	newW := rec.Writer
	t.Logf("etcd back → record %s %s after etcd was started", haRec(rec), time.Since(tBack).Round(time.Millisecond))
	if rec.Term != rec0.Term+1 {
		t.Errorf("term went from %d to %d, want +1", rec0.Term, rec.Term)
	}
	for _, w := range []*haWriter{w1, w2} {
		Eventually(t, 20*time.Second, "a write through "+w.via+" on the new primary", func() error {
			for _, a := range w.acked() {
				if a.start.After(tBack) && a.sid == e.sids[newW] {
					return nil
				}
			}
			return errors.New("none yet")
		})
	}
	time.Sleep(500 * time.Millisecond)
	w1.halt()
	w2.halt()
	t.Log(w1.summary())
	t.Log(w2.summary())
	for _, w := range []*haWriter{w1, w2} {
		for _, a := range w.acked() {
			if a.end.After(fencedBy) && a.start.Before(tBack) {
				t.Errorf("%s acknowledged write %d (server_id %d) at %s while etcd had no quorum", w.via, a.id, a.sid, a.end.Format("15:04:05.000"))
			}
			if a.start.After(killed) && a.sid != e.sids[newW] {
				t.Errorf("%s write %d sent after node1 was gone ran on server_id %d", w.via, a.id, a.sid)
			}
		}
	}
	h := e.historySince(start)
	if len(h) != 1 || h[0].Kind != failover.RecordFailover || !h[0].OK || h[0].NewPrimary != newW {
		t.Errorf("history: %s, want exactly one successful failover to %s", haDescribeHistory(h), newW)
	}
	if len(h) == 1 && h[0].Started.Before(tBack) {
		t.Errorf("the failover started at %s, before etcd was back (%s)", h[0].Started.Format("15:04:05.000"), tBack.Format("15:04:05.000"))
	}
	// Exactly one writer.
	var writable []string
	for _, n := range []string{"node2", "node3"} {
		if ro, err := e.readOnly(n); err == nil && ro == "0" {
			writable = append(writable, n)
		}
	}
	if len(writable) != 1 || writable[0] != newW {
		t.Errorf("writable servers %v, want only %s", writable, newW)
	}
	e.requireAgreement(e.mustRecord(), 10*time.Second)
	e.requireAckedOn(newW, w1, w2)
}

// writeThroughBoth starts a writer through each instance (a write every
// gap), lets them write for warm and checks that both were acknowledged:
// the record before, the acting instance, when the writers started, the
// writers.
func (e *haEnv) writeThroughBoth(gap, warm time.Duration) (coord.Record, string, time.Time, *haWriter, *haWriter) {
	e.t.Helper()
	rec0 := e.mustRecord()
	acting, _ := e.actingName()
	e.t.Logf("before: %s; %s acts", haRec(rec0), acting)
	start := time.Now()
	w1, w2 := e.startWriter(0, gap), e.startWriter(1, gap)
	time.Sleep(warm)
	for _, w := range []*haWriter{w1, w2} {
		if len(w.acked()) == 0 {
			e.t.Fatalf("nothing acknowledged before the fault: %s", w.summary())
		}
	}
	return rec0, acting, start, w1, w2
}

// awaitAckAfter waits until every writer had a write acknowledged after
// t0 and says how long after t0 each came.
func awaitAckAfter(t *testing.T, t0 time.Time, ws ...*haWriter) string {
	t.Helper()
	var firsts []string
	for _, w := range ws {
		Eventually(t, 20*time.Second, "a write through "+w.via+" acknowledged after the fault", func() error {
			if _, ok := w.firstAckAfter(t0); !ok {
				return errors.New("none yet")
			}
			return nil
		})
		a, _ := w.firstAckAfter(t0)
		firsts = append(firsts, fmt.Sprintf("%s after %s", w.via, a.end.Sub(t0).Round(time.Millisecond)))
	}
	return strings.Join(firsts, ", ")
}

// Galera with two Vigil instances: the writer node is killed while both
// instances write. The acting instance moves the writer and publishes it;
// both route writes to that node only (one writer, not one per
// instance), and every acknowledged write is on it.
func TestHAGaleraWriterDiesTwoVigils(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	e := newHAEnvWith(t, sandbox.Options{Topology: sandbox.Galera, Nodes: 3, Etcd: 3, Vigils: 2})
	ctx := context.Background()
	_, acting, start, w1, w2 := e.writeThroughBoth(10*time.Millisecond, 1500*time.Millisecond)
	tKill := time.Now()
	haMust(t, "kill node1", e.sb.Kill(ctx, "node1"))
	killed := time.Now() // node1 is gone: nothing sent from now on can run there
	rec := e.waitNewWriter("node1", 30*time.Second)
	t.Logf("kill -9 node1 → record %s after %s", haRec(rec), time.Since(tKill).Round(time.Millisecond))
	t.Logf("first acknowledged write after the kill: %s", awaitAckAfter(t, tKill, w1, w2))
	time.Sleep(time.Second)
	w1.halt()
	w2.halt()
	t.Log(w1.summary())
	t.Log(w2.summary())
	e.requireAgreement(rec, 5*time.Second)
	if rec.By != acting {
		t.Errorf("the record was written by %s; %s was acting", rec.By, acting)
	}
	newSid := e.sids[rec.Writer]
	for _, w := range []*haWriter{w1, w2} {
		for _, a := range w.acked() {
			if a.start.After(killed) && a.sid != newSid {
				t.Errorf("%s: write %d started %s after the kill ran on server_id %d, not on the writer %s (%d): two writers",
					w.via, a.id, a.start.Sub(killed).Round(time.Millisecond), a.sid, rec.Writer, newSid)
			}
		}
	}
	for _, r := range e.historySince(start) {
		if r.OK && r.NewPrimary != rec.Writer {
			t.Errorf("history since the kill: %s, want every move to %s", haDescribeHistory(e.historySince(start)), rec.Writer)
			break
		}
	}
	e.requireAckedOn(rec.Writer, w1, w2)
}
