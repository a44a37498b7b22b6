package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Measuring one run on a topology: the status around it, the semi-sync
// state during it, and the replicas after it.

// topoCounters are the cumulative status counters whose deltas a run
// records on every node.
var topoCounters = []string{
	"Innodb_data_fsyncs", "Innodb_os_log_fsyncs", "Binlog_commits", "Binlog_group_commits",
	"Com_commit", "Rpl_semi_sync_master_no_tx", "Rpl_semi_sync_master_yes_tx", "Rpl_semi_sync_master_no_times",
	"wsrep_flow_control_paused_ns", "wsrep_flow_control_sent", "wsrep_flow_control_recv",
	"wsrep_replicated", "wsrep_received", "wsrep_local_cert_failures", "wsrep_local_bf_aborts",
}

// semiSyncPoll is how often the semi-sync status is read during a run.
const semiSyncPoll = 150 * time.Millisecond

// nameValues runs a query of (name, value) rows, as SHOW GLOBAL STATUS
// and SHOW GLOBAL VARIABLES return, into a map; NULL is "".
func nameValues(ctx context.Context, db *sql.DB, q string, args ...any) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name string
		var v sql.NullString
		if err := rows.Scan(&name, &v); err != nil {
			return nil, err
		}
		out[name] = v.String
	}
	return out, rows.Err()
}

// readVariables reads global variables by name.
func readVariables(ctx context.Context, db *sql.DB, names ...string) (map[string]string, error) {
	q := make([]string, len(names))
	args := make([]any, len(names))
	for i, n := range names {
		q[i], args[i] = "?", n
	}
	return nameValues(ctx, db, "SHOW GLOBAL VARIABLES WHERE Variable_name IN ("+strings.Join(q, ",")+")", args...)
}

// readStatus is the whole of SHOW GLOBAL STATUS.
func readStatus(ctx context.Context, db *sql.DB) (map[string]string, error) {
	return nameValues(ctx, db, "SHOW GLOBAL STATUS")
}

// StatusDeltas are after − before of the counters present in both; a
// counter that went backwards (FLUSH STATUS, a restart) is left out.
func StatusDeltas(before, after map[string]string, names []string) map[string]int64 {
	out := map[string]int64{}
	for _, n := range names {
		b, err1 := strconv.ParseInt(before[n], 10, 64)
		a, err2 := strconv.ParseInt(after[n], 10, 64)
		if err1 != nil || err2 != nil || a < b {
			continue
		}
		out[n] = a - b
	}
	return out
}

// perUnit is num/den, nil when den is 0.
func perUnit(num, den int64) *float64 {
	if den <= 0 {
		return nil
	}
	return ptr(float64(num) / float64(den))
}

// OnOffSample is one reading of Rpl_semi_sync_master_status.
type OnOffSample struct {
	At time.Time
	On bool
}

// OffSeconds integrates the time the status was OFF between start and
// end: each reading holds until the next one, the first one also back to
// start.
func OffSeconds(start, end time.Time, samples []OnOffSample) float64 {
	if len(samples) == 0 || !end.After(start) {
		return 0
	}
	var off time.Duration
	for i, s := range samples {
		from := s.At
		if i == 0 || from.Before(start) {
			from = start
		}
		to := end
		if i+1 < len(samples) && samples[i+1].At.Before(end) {
			to = samples[i+1].At
		}
		if !s.On && to.After(from) {
			off += to.Sub(from)
		}
	}
	return off.Seconds()
}

// semiPoller reads the semi-sync status every semiSyncPoll until stopped.
type semiPoller struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	samples []OnOffSample
}

func startSemiPoller(ctx context.Context, db *sql.DB, every time.Duration) *semiPoller {
	ctx, cancel := context.WithCancel(ctx)
	p := &semiPoller{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			var name, v string
			qctx, qcancel := context.WithTimeout(ctx, time.Second)
			err := db.QueryRowContext(qctx, "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_status'").Scan(&name, &v)
			qcancel()
			if err == nil {
				p.mu.Lock()
				p.samples = append(p.samples, OnOffSample{At: time.Now(), On: isOn(v)})
				p.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return p
}

// stop ends the poller and returns its readings.
func (p *semiPoller) stop() []OnOffSample {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.samples
}

// ParseGTIDPos reads a MariaDB GTID position (0-1-100,1-2-5) into the
// sequence number per domain.
func ParseGTIDPos(pos string) map[string]int64 {
	out := map[string]int64{}
	for _, g := range strings.Split(pos, ",") {
		parts := strings.Split(strings.TrimSpace(g), "-")
		if len(parts) != 3 {
			continue
		}
		n, err := strconv.ParseInt(parts[2], 10, 64)
		if err == nil && n > out[parts[0]] {
			out[parts[0]] = n
		}
	}
	return out
}

// GTIDBehind is how many transactions the replica's position is behind
// the primary's, summed over the primary's domains.
func GTIDBehind(primary, replica string) int64 {
	r := ParseGTIDPos(replica)
	var n int64
	for d, seq := range ParseGTIDPos(primary) {
		if seq > r[d] {
			n += seq - r[d]
		}
	}
	return n
}

// ParseProviderOption finds one option in wsrep_provider_options
// ("a = 1; gcs.fc_limit = 16; ...").
func ParseProviderOption(opts, key string) (string, bool) {
	for _, kv := range strings.Split(opts, ";") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// setGlobal sets one global; wsrep_provider_options takes one option.
func setGlobal(ctx context.Context, db *sql.DB, s setting) error {
	var q string
	switch {
	case s.Name == "wsrep_provider_options":
		q = "SET GLOBAL wsrep_provider_options = '" + strings.ReplaceAll(s.Value, "'", "") + "'"
	case isSQLWord(s.Value):
		q = "SET GLOBAL " + s.Name + " = " + s.Value
	default:
		return fmt.Errorf("refusing to set %s to %q", s.Name, s.Value)
	}
	if _, err := db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	return nil
}

// isSQLWord: a number or a bare keyword, safe to put into SET GLOBAL.
func isSQLWord(v string) bool {
	if v == "" {
		return false
	}
	for _, c := range v {
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_') {
			return false
		}
	}
	return true
}

// currentValue is what restoring s needs: the option itself for
// wsrep_provider_options, else the variable.
func currentValue(ctx context.Context, db *sql.DB, name string) (string, error) {
	v, err := readVariables(ctx, db, name)
	if err != nil {
		return "", err
	}
	val, ok := v[name]
	if !ok {
		return "", fmt.Errorf("the server has no variable %s", name)
	}
	if name == "wsrep_provider_options" {
		fc, ok := ParseProviderOption(val, "gcs.fc_limit")
		if !ok {
			return "", errors.New("wsrep_provider_options has no gcs.fc_limit")
		}
		return "gcs.fc_limit=" + fc, nil
	}
	return val, nil
}

// applyVariant sets a variant's globals, remembering every original value
// of servers that are not the bench's own so restore can put it back.
func (te *topoEnv) applyVariant(ctx context.Context, v topoVariant) error {
	if v.Current {
		return nil
	}
	set := func(node string, s setting) error {
		db := te.setDB(node)
		if !te.own {
			if te.saved == nil {
				te.saved = map[string]map[string]string{}
			}
			if te.saved[node] == nil {
				te.saved[node] = map[string]string{}
			}
			if _, done := te.saved[node][s.Name]; !done {
				old, err := currentValue(ctx, db, s.Name)
				if err != nil {
					return fmt.Errorf("%s: %w", node, err)
				}
				te.saved[node][s.Name] = old
				te.savedOrder = append(te.savedOrder, [2]string{node, s.Name})
			}
		}
		if err := setGlobal(ctx, db, s); err != nil {
			return fmt.Errorf("%s: %w", node, err)
		}
		return nil
	}
	for _, n := range te.nodes {
		for _, s := range v.All {
			if err := set(n, s); err != nil {
				return err
			}
		}
	}
	for _, s := range v.Primary {
		if err := set(te.primary, s); err != nil {
			return err
		}
	}
	if v.Topology == TopoSemiSync {
		return te.waitSemiSyncOn(ctx)
	}
	return nil
}

// setDB is the handle SET GLOBAL goes through on node.
func (te *topoEnv) setDB(node string) *sql.DB {
	if db, ok := te.setDBs[node]; ok {
		return db
	}
	return te.rootDBs[node]
}

// restore puts back every global applyVariant changed, in reverse order,
// with its own deadline (ctx may be cancelled already).
func (te *topoEnv) restore() error {
	if len(te.savedOrder) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for i := len(te.savedOrder) - 1; i >= 0; i-- {
		node, name := te.savedOrder[i][0], te.savedOrder[i][1]
		if err := setGlobal(ctx, te.setDB(node), setting{name, te.saved[node][name]}); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s on %s to %s: %w", name, node, te.saved[node][name], err))
		}
	}
	te.savedOrder = nil
	return errors.Join(errs...)
}

// waitSemiSyncOn waits until the primary runs semi-sync with a replica;
// the replicas' IO threads reconnect once if none registered.
func (te *topoEnv) waitSemiSyncOn(ctx context.Context) error {
	db := te.rootDBs[te.primary]
	check := func() (bool, error) {
		st, err := nameValues(ctx, db, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Rpl_semi_sync_master_status','Rpl_semi_sync_master_clients')")
		if err != nil {
			return false, err
		}
		return isOn(st["Rpl_semi_sync_master_status"]) && st["Rpl_semi_sync_master_clients"] != "0", nil
	}
	for attempt := 0; attempt < 2; attempt++ {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			ok, err := check()
			if err != nil {
				return err
			}
			if ok {
				return nil
			}
			sleepCtx(ctx, 200*time.Millisecond)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		if !te.own {
			break
		}
		for _, r := range te.replicas {
			for _, q := range []string{"STOP SLAVE IO_THREAD", "START SLAVE IO_THREAD"} {
				if _, err := te.rootDBs[r].ExecContext(ctx, q); err != nil {
					return fmt.Errorf("%s: %s: %w", r, q, err)
				}
			}
		}
	}
	return errors.New("semi-sync did not come on: Rpl_semi_sync_master_status stays OFF or no semi-sync replica is connected")
}

// runVariants measures every variant × workload × threads × path.
func (r *topologyRunner) runVariants(ctx context.Context, te *topoEnv, variants []topoVariant) error {
	paths := []string{PathDirect}
	if te.vigil != nil && contains(r.o.Paths, PathVigil) {
		paths = []string{PathDirect, PathVigil}
	}
	if !contains(r.o.Paths, PathDirect) {
		paths = paths[1:]
	}
	if len(paths) == 0 {
		return errors.New("no path to measure: --paths vigil needs a Vigil (--vigil HOST:PORT with --config)")
	}
	for _, v := range variants {
		if err := te.applyVariant(ctx, v); err != nil {
			return fmt.Errorf("%s %s: %w", v.Topology, v.Name, err)
		}
		dv, err := readVariables(ctx, te.rootDBs[te.primary], "innodb_flush_log_at_trx_commit", "sync_binlog")
		if err != nil {
			return fmt.Errorf("%s: %w", te.primary, err)
		}
		te.trxCommit, te.syncBinlog = dv["innodb_flush_log_at_trx_commit"], dv["sync_binlog"]
		r.progress("%s %s: innodb_flush_log_at_trx_commit=%s sync_binlog=%s", v.Topology, v.Name, te.trxCommit, te.syncBinlog)
		for _, w := range r.o.Workloads {
			if r.o.Warmup > 0 {
				c := te.direct
				args := RunArgs(Scenario{Workload: w}, c, r.o.Threads[len(r.o.Threads)-1], int(r.o.Warmup/time.Second))
				if _, out, err := runSysbench(ctx, r.o.Warmup+time.Minute, "sysbench", args); err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					r.note("%s %s %s warm-up failed: %v\n%s", v.Topology, v.Name, w, err, lastLines(out, 5))
				}
				te.settle(ctx)
			}
			for _, threads := range r.o.Threads {
				for _, p := range paths {
					run := r.measureRun(ctx, te, v, w, threads, p)
					if err := ctx.Err(); err != nil {
						return err
					}
					r.res.Runs = append(r.res.Runs, run)
					r.progress("[%d/%d] %s", r.seq, r.total, topoRunLine(run))
				}
			}
		}
	}
	return nil
}

// settle waits until the replicas or Galera nodes applied everything
// and returns how long that took; errors are noted in the run instead.
func (te *topoEnv) settle(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	switch {
	case len(te.replicas) > 0:
		err := te.waitReplicas(ctx)
		return time.Since(t0), err
	case te.kind == "galera":
		err := waitFor(ctx, 5*time.Minute, "the Galera receive queues to drain", func() error {
			for _, n := range te.nodes {
				st, err := nameValues(ctx, te.rootDBs[n], "SHOW GLOBAL STATUS LIKE 'wsrep_local_recv_queue'")
				if err != nil {
					return err
				}
				if q := st["wsrep_local_recv_queue"]; q != "0" {
					return fmt.Errorf("%s still has %s write sets queued", n, q)
				}
			}
			return nil
		})
		return time.Since(t0), err
	}
	return 0, nil
}

// measureRun runs sysbench once and reads the servers around it.
func (r *topologyRunner) measureRun(ctx context.Context, te *topoEnv, v topoVariant, workload string, threads int, path string) TopoRun {
	r.seq++
	run := TopoRun{Seq: r.seq, Topology: v.Topology, Variant: v.Name, Workload: workload, Threads: threads, Path: path,
		SlaveThreads: v.SlaveThreads, FCLimit: v.FCLimit, TrxCommit: te.trxCommit, SyncBinlog: te.syncBinlog}
	conn := te.direct
	if path == PathVigil {
		conn = *te.vigil
	}
	if te.kind == "galera" && te.flushStatus {
		for _, n := range te.nodes {
			if _, err := te.rootDBs[n].ExecContext(ctx, "FLUSH STATUS"); err != nil {
				run.Notes = append(run.Notes, fmt.Sprintf("%s: FLUSH STATUS: %v", n, err))
			}
		}
	}
	before := te.snapshot(ctx, &run)
	var poller *semiPoller
	if v.Topology == TopoSemiSync {
		poller = startSemiPoller(ctx, te.rootDBs[te.primary], semiSyncPoll)
	}
	args := RunArgs(Scenario{Workload: workload}, conn, threads, int(r.o.Duration/time.Second))
	t0 := time.Now()
	_, out, err := runSysbench(ctx, r.o.Duration+2*time.Minute, "sysbench", args)
	t1 := time.Now()
	var samples []OnOffSample
	if poller != nil {
		samples = poller.stop()
	}
	name := fmt.Sprintf("%03d-%s-%s-%s-t%d-%s.txt", run.Seq, v.Topology, fileSafe(v.Name), workload, threads, path)
	_ = os.WriteFile(filepath.Join(r.out, "runs", name), out, 0o644)
	sb := ParseSysbench(string(out))
	run.TPS, run.QPS, run.P95Ms, run.P99Ms, run.AvgMs = sb.TPS, sb.QPS, sb.P95(), sb.P99Ms, sb.AvgMs
	run.Transactions, run.Errors = sb.Transactions, sb.Errors()
	run.Seconds = t1.Sub(t0).Seconds()
	if err != nil || sb.Failed() {
		run.Failed = strings.TrimSpace(fmt.Sprintf("%v %s", err, strings.Join(sb.Fatal, "; ")))
		if run.Failed == "" || run.Failed == "<nil>" {
			run.Failed = "no statistics: " + lastLines(out, 3)
		}
	}
	after := te.snapshot(ctx, &run)
	if ctx.Err() != nil {
		return run
	}
	run.derive(te, before, after)
	if poller != nil {
		ss := run.SemiSync
		ss.AsyncSeconds = OffSeconds(t0, t1, samples)
		ss.RunSeconds = run.Seconds
		ss.Samples = len(samples)
		if len(samples) > 0 {
			ss.OffAtEnd = !samples[len(samples)-1].On
		}
	}
	te.endLag(ctx, &run)
	return run
}

// snapshot reads SHOW GLOBAL STATUS on every node.
func (te *topoEnv) snapshot(ctx context.Context, run *TopoRun) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, n := range te.nodes {
		st, err := readStatus(ctx, te.rootDBs[n])
		if err != nil {
			run.Notes = append(run.Notes, fmt.Sprintf("%s: SHOW GLOBAL STATUS: %v", n, err))
			continue
		}
		out[n] = st
	}
	return out
}

// derive fills the deltas and the ratios from the two snapshots.
func (run *TopoRun) derive(te *topoEnv, before, after map[string]map[string]string) {
	d := StatusDeltas(before[te.primary], after[te.primary], topoCounters)
	run.Primary = te.primary
	run.StatusDelta = d
	run.FsyncsPerTrx = perUnit(d["Innodb_data_fsyncs"], run.Transactions)
	run.CommitsPerGroup = perUnit(d["Binlog_commits"], d["Binlog_group_commits"])
	switch {
	case run.Topology == TopoSemiSync:
		run.SemiSync = &SemiSyncStats{NoTxDelta: d["Rpl_semi_sync_master_no_tx"], YesTxDelta: d["Rpl_semi_sync_master_yes_tx"],
			NoTimesDelta: d["Rpl_semi_sync_master_no_times"], TimeoutMs: te.semiTimeoutMs}
		if v, err := strconv.ParseInt(after[te.primary]["Rpl_semi_sync_master_clients"], 10, 64); err == nil {
			run.SemiSync.Clients = v
		}
	case te.kind == "galera":
		g := &GaleraStats{}
		for _, n := range te.nodes {
			nd := StatusDeltas(before[n], after[n], topoCounters)
			gn := GaleraNode{Node: n, PausedNs: nd["wsrep_flow_control_paused_ns"],
				FCSent: nd["wsrep_flow_control_sent"], FCRecv: nd["wsrep_flow_control_recv"]}
			if run.Seconds > 0 {
				gn.PausedFraction = float64(gn.PausedNs) / (run.Seconds * 1e9)
			}
			gn.RecvQueueAvg, _ = strconv.ParseFloat(after[n]["wsrep_local_recv_queue_avg"], 64)
			gn.PausedSinceFlush, _ = strconv.ParseFloat(after[n]["wsrep_flow_control_paused"], 64)
			g.Nodes = append(g.Nodes, gn)
			g.PausedFraction = max(g.PausedFraction, gn.PausedFraction)
			g.RecvQueueAvg = max(g.RecvQueueAvg, gn.RecvQueueAvg)
			g.FCSent += gn.FCSent
			g.FCRecv = max(g.FCRecv, gn.FCRecv)
		}
		run.Galera = g
	}
}

// endLag reads how far behind the replicas (or Galera appliers) are when
// the run ends, then times their catch-up.
func (te *topoEnv) endLag(ctx context.Context, run *TopoRun) {
	if len(te.replicas) > 0 {
		var ppos string
		if err := te.rootDBs[te.primary].QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&ppos); err != nil {
			run.Notes = append(run.Notes, fmt.Sprintf("%s: gtid_binlog_pos: %v", te.primary, err))
			return
		}
		for _, rn := range te.replicas {
			rl := ReplicaLag{Node: rn}
			var rpos string
			if err := te.rootDBs[rn].QueryRowContext(ctx, "SELECT @@gtid_slave_pos").Scan(&rpos); err == nil {
				rl.TrxBehind = GTIDBehind(ppos, rpos)
			}
			if st, err := slaveStatus(ctx, te.rootDBs[rn]); err == nil {
				if s, err := strconv.ParseInt(st["Seconds_Behind_Master"], 10, 64); err == nil {
					rl.SecondsBehind = ptr(s)
				}
			}
			run.Replicas = append(run.Replicas, rl)
		}
	}
	if te.kind == "galera" && run.Galera != nil {
		for i, n := range te.nodes {
			st, err := nameValues(ctx, te.rootDBs[n], "SHOW GLOBAL STATUS LIKE 'wsrep_local_recv_queue'")
			if err == nil {
				run.Galera.Nodes[i].RecvQueueEnd, _ = strconv.ParseInt(st["wsrep_local_recv_queue"], 10, 64)
			}
		}
	}
	d, err := te.settle(ctx)
	if d > 0 || err != nil {
		run.CatchUpSeconds = ptr(d.Seconds())
	}
	if err != nil {
		run.Notes = append(run.Notes, "catching up: "+err.Error())
	}
}

// slaveStatus is SHOW SLAVE STATUS as a map of column to value.
func slaveStatus(ctx context.Context, db *sql.DB) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if !rows.Next() {
		return nil, errors.Join(errors.New("not a replica"), rows.Err())
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i, c := range cols {
		out[c] = vals[i].String
	}
	return out, nil
}

// fileSafe turns a variant name into a file name part.
func fileSafe(s string) string {
	return strings.NewReplacer(" ", "", ",", "_", "=", "", "+", "_", "/", "_").Replace(s)
}

// topoRunLine is the progress line of one run.
func topoRunLine(r TopoRun) string {
	s := fmt.Sprintf("%-9s %-38s %-15s t=%-3d %-6s tps %8.1f p95 %7.2f ms", r.Topology, r.Variant, r.Workload, r.Threads, r.Path, r.TPS, r.P95Ms)
	if r.FsyncsPerTrx != nil {
		s += fmt.Sprintf(" fsync/trx %.2f", *r.FsyncsPerTrx)
	}
	if r.CommitsPerGroup != nil {
		s += fmt.Sprintf(" commits/group %.1f", *r.CommitsPerGroup)
	}
	if r.SemiSync != nil {
		s += fmt.Sprintf(" semi-sync off %.1fs no_tx %d", r.SemiSync.AsyncSeconds, r.SemiSync.NoTxDelta)
	}
	if r.Galera != nil {
		s += fmt.Sprintf(" fc paused %.1f%%", r.Galera.PausedFraction*100)
	}
	if b := r.MaxTrxBehind(); b > 0 {
		s += fmt.Sprintf(" behind %d trx", b)
	}
	if r.CatchUpSeconds != nil && *r.CatchUpSeconds >= 0.05 {
		s += fmt.Sprintf(" catch-up %.1fs", *r.CatchUpSeconds)
	}
	if r.Failed != "" {
		s += " FAILED: " + r.Failed
	}
	return s
}
