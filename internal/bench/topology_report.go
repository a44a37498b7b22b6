package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The pure half of `vigil-bench topology`: from the runs to the shapes,
// the failover sentences, report.md and the plots.

// okRuns are the runs that completed and match keep.
func okRuns(runs []TopoRun, keep func(TopoRun) bool) []TopoRun {
	var out []TopoRun
	for _, r := range runs {
		if r.Failed == "" && r.TPS > 0 && keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// findRun is the completed run of a cell, or nil.
func findRun(runs []TopoRun, topo, variant, workload string, threads int, path string) *TopoRun {
	for i, r := range runs {
		if r.Topology == topo && r.Variant == variant && r.Workload == workload && r.Threads == threads && r.Path == path && r.Failed == "" && r.TPS > 0 {
			return &runs[i]
		}
	}
	return nil
}

// distinct lists the values of f over runs in the order they first
// appear.
func distinct[T comparable](runs []TopoRun, f func(TopoRun) T) []T {
	var out []T
	seen := map[T]bool{}
	for _, r := range runs {
		if v := f(r); !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

func sortedThreads(runs []TopoRun) []int {
	t := distinct(runs, func(r TopoRun) int { return r.Threads })
	sort.Ints(t)
	return t
}

// config is how a report row names a topology variant.
func (r TopoRun) config() string {
	if r.Variant == "" {
		return r.Topology
	}
	return r.Topology + " " + r.Variant
}

const (
	variantOff      = "off"
	variantTrx1     = "trx_commit=1"
	variantSync1    = "trx_commit=1+sync_binlog=1"
	variantSync1000 = "sync_binlog=1000"
)

// Shapes says which known shapes the runs reproduced.
func Shapes(runs []TopoRun) []Shape {
	return []Shape{syncBinlogShape(runs), groupCommitShape(runs), semiSyncShape(runs), flowControlShape(runs)}
}

// durabilityPair is the standalone direct runs of sync_binlog=1 and of
// the fastest less durable variant measured, per workload and threads.
type durabilityPair struct {
	workload  string
	threads   int
	base      string
	baseTPS   float64
	syncTPS   float64
	syncRatio float64
}

func durabilityPairs(runs []TopoRun) []durabilityPair {
	var out []durabilityPair
	sa := okRuns(runs, func(r TopoRun) bool { return r.Topology == TopoStandalone && r.Path == PathDirect })
	for _, w := range distinct(sa, func(r TopoRun) string { return r.Workload }) {
		for _, t := range sortedThreads(sa) {
			s := findRun(sa, TopoStandalone, variantSync1, w, t, PathDirect)
			if s == nil {
				continue
			}
			for _, b := range []string{variantTrx1, variantOff} {
				if br := findRun(sa, TopoStandalone, b, w, t, PathDirect); br != nil {
					out = append(out, durabilityPair{w, t, b, br.TPS, s.TPS, s.TPS / br.TPS})
					break
				}
			}
		}
	}
	return out
}

func syncBinlogShape(runs []TopoRun) Shape {
	sh := Shape{Name: "durability costs grow with sync_binlog=1"}
	pairs := durabilityPairs(runs)
	if len(pairs) == 0 {
		sh.Evidence = "not measured: needs standalone runs of trx_commit=1+sync_binlog=1 and of a less durable setting"
		return sh
	}
	sh.Measured = true
	var parts []string
	for _, p := range pairs {
		parts = append(parts, fmt.Sprintf("%s@%d %.2f× of %s", p.workload, p.threads, p.syncRatio, p.base))
		if p.syncRatio < 0.9 {
			sh.Reproduced = true
		}
	}
	if sh.Reproduced {
		sh.Evidence = "sync_binlog=1 throughput relative to the less durable setting: " + strings.Join(parts, ", ")
	} else {
		sh.Evidence = "not reproduced here, because sync_binlog=1 cost less than 10% everywhere (" + strings.Join(parts, ", ") +
			"): fsync is cheap on this storage, or the 2 shared cores, not the disk, are the bottleneck"
	}
	return sh
}

func groupCommitShape(runs []TopoRun) Shape {
	sh := Shape{Name: "group commit narrows the gap as threads rise"}
	byWorkload := map[string][]durabilityPair{}
	var order []string
	for _, p := range durabilityPairs(runs) {
		if _, ok := byWorkload[p.workload]; !ok {
			order = append(order, p.workload)
		}
		byWorkload[p.workload] = append(byWorkload[p.workload], p)
	}
	var parts []string
	for _, w := range order {
		ps := byWorkload[w]
		if len(ps) < 2 {
			continue
		}
		lo, hi := ps[0], ps[len(ps)-1]
		sh.Measured = true
		s := fmt.Sprintf("%s: sync_binlog=1 at %.2f× of %s with %d thread(s), %.2f× with %d", w, lo.syncRatio, lo.base, lo.threads, hi.syncRatio, hi.threads)
		if c1, c2 := commitsPerGroup(runs, w, lo.threads), commitsPerGroup(runs, w, hi.threads); c1 != nil && c2 != nil {
			s += fmt.Sprintf(" (commits per group %.1f → %.1f)", *c1, *c2)
		}
		parts = append(parts, s)
		if hi.syncRatio > lo.syncRatio+0.05 {
			sh.Reproduced = true
		}
	}
	sh.conclude(parts, "standalone sync_binlog=1 runs at two thread counts or more",
		"the ratio did not rise by 0.05 or more with threads", "when sync_binlog=1 costs little to begin with there is no gap to narrow")
	return sh
}

// commitsPerGroup of the standalone sync_binlog=1 direct run.
func commitsPerGroup(runs []TopoRun, workload string, threads int) *float64 {
	if r := findRun(runs, TopoStandalone, variantSync1, workload, threads, PathDirect); r != nil {
		return r.CommitsPerGroup
	}
	return nil
}

func semiSyncShape(runs []TopoRun) Shape {
	sh := Shape{Name: "semi-sync costs latency at low concurrency"}
	var parts []string
	for _, w := range distinct(runs, func(r TopoRun) string { return r.Workload }) {
		low := okRuns(runs, func(r TopoRun) bool {
			return r.Workload == w && r.Path == PathDirect && (r.Topology == TopoAsync || r.Topology == TopoSemiSync)
		})
		th := sortedThreads(low)
		if len(th) == 0 {
			continue
		}
		a, s := pick(low, TopoAsync, w, th[0]), pick(low, TopoSemiSync, w, th[0])
		if a == nil || s == nil || a.AvgMs <= 0 {
			continue
		}
		sh.Measured = true
		ratio := s.AvgMs / a.AvgMs
		parts = append(parts, fmt.Sprintf("%s@%d: avg latency %.2f ms semi-sync vs %.2f ms async (%.2f×), %.0f vs %.0f tps", w, th[0], s.AvgMs, a.AvgMs, ratio, s.TPS, a.TPS))
		if ratio > 1.05 {
			sh.Reproduced = true
		}
	}
	sh.conclude(parts, "direct async and semisync runs", "semi-sync added less than 5% latency",
		"on loopback the replica's acknowledgement is a local round trip of microseconds, far less than the fsyncs of a commit")
	return sh
}

// conclude writes the evidence of a shape from the measured parts: what
// was missing, or why it was not reproduced.
func (sh *Shape) conclude(parts []string, needs, because, why string) {
	switch {
	case !sh.Measured:
		sh.Evidence = "not measured: needs " + needs
	case sh.Reproduced:
		sh.Evidence = strings.Join(parts, "; ")
	default:
		sh.Evidence = "not reproduced here, because " + because + " (" + strings.Join(parts, "; ") + "): " + why
	}
}

// pick is the first completed direct run of a topology, workload and
// thread count (any variant).
func pick(runs []TopoRun, topo, workload string, threads int) *TopoRun {
	for i, r := range runs {
		if r.Topology == topo && r.Workload == workload && r.Threads == threads && r.Path == PathDirect && r.Failed == "" {
			return &runs[i]
		}
	}
	return nil
}

func flowControlShape(runs []TopoRun) Shape {
	sh := Shape{Name: "Galera flow-control pauses shrink with a larger gcs.fc_limit"}
	g := okRuns(runs, func(r TopoRun) bool { return r.Topology == TopoGalera && r.Galera != nil && r.Path == PathDirect })
	var small, large float64
	n := 0
	for _, r := range g {
		if r.FCLimit != 16 {
			continue
		}
		for _, o := range g {
			if o.FCLimit == 512 && o.SlaveThreads == r.SlaveThreads && o.Workload == r.Workload && o.Threads == r.Threads {
				small += r.Galera.PausedFraction
				large += o.Galera.PausedFraction
				n++
			}
		}
	}
	if n == 0 {
		sh.Evidence = "not measured: needs Galera runs with gcs.fc_limit 16 and 512 at the same slave threads, workload and threads"
		return sh
	}
	sh.Measured = true
	small, large = small/float64(n), large/float64(n)
	ev := fmt.Sprintf("mean paused fraction over %d paired runs: %.1f%% with fc_limit=16, %.1f%% with fc_limit=512", n, small*100, large*100)
	switch {
	case small < 0.005:
		sh.Evidence = "not reproduced here, because flow control hardly engaged even at fc_limit=16 (" + ev +
			"): the three nodes share one machine and apply as fast as the writer commits"
	case large < small:
		sh.Reproduced = true
		sh.Evidence = ev
	default:
		sh.Evidence = "not reproduced here (" + ev + "): the pauses did not shrink; with 2 shared cores the appliers compete with the writer for CPU whatever the queue limit"
	}
	return sh
}

// FailoverLosses is, per topology (and standalone durability variant),
// one sentence on what a failover or crash can lose, from the runs.
func FailoverLosses(runs []TopoRun) []Loss {
	var out []Loss
	ok := okRuns(runs, func(TopoRun) bool { return true })
	for _, v := range distinct(okRuns(ok, func(r TopoRun) bool { return r.Topology == TopoStandalone }), func(r TopoRun) string { return r.Variant }) {
		rs := okRuns(ok, func(r TopoRun) bool { return r.Topology == TopoStandalone && r.Variant == v })
		out = append(out, Loss{Topology: TopoStandalone, Variant: v, Sentence: standaloneLoss(rs)})
	}
	if rs := okRuns(ok, func(r TopoRun) bool { return r.Topology == TopoAsync }); len(rs) > 0 {
		out = append(out, Loss{Topology: TopoAsync, Sentence: asyncLoss(rs)})
	}
	if rs := okRuns(runs, func(r TopoRun) bool { return r.Topology == TopoSemiSync && r.SemiSync != nil }); len(rs) > 0 {
		out = append(out, Loss{Topology: TopoSemiSync, Sentence: SemiSyncLoss(rs)})
	}
	if rs := okRuns(ok, func(r TopoRun) bool { return r.Topology == TopoGalera }); len(rs) > 0 {
		out = append(out, Loss{Topology: TopoGalera, Sentence: galeraLoss(rs)})
	}
	return out
}

// peak is the run of the highest tps.
func peak(rs []TopoRun) TopoRun {
	best := rs[0]
	for _, r := range rs {
		if r.TPS > best.TPS {
			best = r
		}
	}
	return best
}

func standaloneLoss(rs []TopoRun) string {
	p := peak(rs)
	trx, syncB := p.TrxCommit, p.SyncBinlog
	noFailover := " There is no replica to fail over to: losing the server loses everything since the last backup."
	switch {
	case trx != "1":
		return fmt.Sprintf("innodb_flush_log_at_trx_commit=%s: a crash loses up to about a second of acknowledged commits (InnoDB flushes its log about once a second), at the measured peak of %.0f tps about %.0f transactions.%s", trx, p.TPS, p.TPS, noFailover)
	case syncB == "0" || syncB == "":
		return fmt.Sprintf("trx_commit=1, sync_binlog=0: a mariadbd crash loses nothing acknowledged, but an OS crash or power loss can lose binary log events the OS had not written yet (%s InnoDB fsyncs per transaction, none for the binlog), so replicas and point-in-time recovery can miss commits InnoDB kept.%s", fmtOpt(p.FsyncsPerTrx, fmt2), noFailover)
	case syncB == "1":
		return fmt.Sprintf("trx_commit=1, sync_binlog=1: nothing acknowledged is lost on a crash; both logs are fsynced at every group commit (%s commits per group at %d threads).%s", fmtOpt(p.CommitsPerGroup, fmt1), p.Threads, noFailover)
	}
	n, _ := strconv.ParseFloat(syncB, 64)
	groups := float64(p.StatusDelta["Binlog_group_commits"])
	if groups <= 0 || p.Seconds <= 0 {
		return fmt.Sprintf("sync_binlog=%s: an OS crash can lose up to %s binlog group commits.%s", syncB, syncB, noFailover)
	}
	gps := groups / p.Seconds
	secs := n / gps
	return fmt.Sprintf("sync_binlog=%s: an OS crash can lose up to %s binlog group commits; at the measured %.0f groups/s (%.0f tps) that is up to %.1f s of writes, about %.0f transactions.%s",
		syncB, syncB, gps, p.TPS, secs, min(secs, p.Seconds)*p.TPS, noFailover)
}

// worstLag is the run whose replicas were furthest behind at the end.
func worstLag(rs []TopoRun) TopoRun {
	w := rs[0]
	for _, r := range rs {
		if r.MaxTrxBehind() > w.MaxTrxBehind() {
			w = r
		}
	}
	return w
}

func lagDetail(w TopoRun) string {
	s := fmt.Sprintf("%d transactions behind", w.MaxTrxBehind())
	var sbm int64 = -1
	for _, l := range w.Replicas {
		if l.SecondsBehind != nil {
			sbm = max(sbm, *l.SecondsBehind)
		}
	}
	if sbm >= 0 {
		s += fmt.Sprintf(" (Seconds_Behind_Master %d)", sbm)
	}
	if w.CatchUpSeconds != nil {
		s += fmt.Sprintf(" and took %.1f s to catch up", *w.CatchUpSeconds)
	}
	return s
}

func asyncLoss(rs []TopoRun) string {
	w := worstLag(rs)
	if w.MaxTrxBehind() == 0 {
		return "Every acknowledged write not yet on a replica: here the replicas kept up (0 transactions behind at the end of every run), but nothing bounds it; under a heavier load the gap is what a failover loses."
	}
	return fmt.Sprintf("Every acknowledged write not yet on a replica: at the end of %s at %d threads (%s) the replicas were %s; a failover at that moment would have lost those transactions.",
		w.Workload, w.Threads, w.Path, lagDetail(w))
}

// SemiSyncLoss says what semi-sync runs measured about a fallback to
// async: the time spent fallen back and the unacknowledged commits.
func SemiSyncLoss(rs []TopoRun) string {
	var off, total float64
	var noTx, yesTx int64
	timeout := 0
	for _, r := range rs {
		s := r.SemiSync
		off += s.AsyncSeconds
		total += s.RunSeconds
		noTx += s.NoTxDelta
		yesTx += s.YesTxDelta
		timeout = max(timeout, s.TimeoutMs)
	}
	if off > 0 || noTx > 0 {
		return fmt.Sprintf("Semi-sync fell back to async for %.1f s of %.0f s (%d commits without a replica's acknowledgement, %d with): acknowledged writes in those seconds could be lost by a failover.", off, total, noTx, yesTx)
	}
	s := fmt.Sprintf("Semi-sync never fell back to async in %.0f s of runs (%d commits acknowledged by a replica, 0 without): with AFTER_SYNC every acknowledged write was in a replica's relay log, so a failover to the most advanced replica loses nothing acknowledged", total, yesTx)
	if timeout > 0 {
		s += fmt.Sprintf(" — until a replica is slower than rpl_semi_sync_master_timeout (%s s) and the primary silently falls back", strconv.FormatFloat(float64(timeout)/1000, 'f', -1, 64))
	}
	return s + "."
}

func galeraLoss(rs []TopoRun) string {
	var queue int64
	var paused float64
	for _, r := range rs {
		if r.Galera == nil {
			continue
		}
		paused = max(paused, r.Galera.PausedFraction)
		for _, n := range r.Galera.Nodes {
			queue = max(queue, n.RecvQueueEnd)
		}
	}
	return fmt.Sprintf("Certification-based: a committed write is on every node; nothing acknowledged is lost when one node dies (at the end of a run a node had at most %d certified write sets still to apply, which it applies anyway; the price is flow control, which paused writes up to %.0f%% of a run).", queue, paused*100)
}

// writeTopologyOutputs writes results.json, report.md and the plots.
func writeTopologyOutputs(dir string, res *TopologyResults) error {
	plots, perr := writeTopologyPlots(dir, res.Runs)
	res.Plots = plots
	var errs []error
	if perr != nil {
		errs = append(errs, perr)
	}
	for name, write := range map[string]func(io.Writer) error{
		"results.json": func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		},
		"report.md": func(w io.Writer) error { return WriteTopologyMarkdown(w, res) },
	} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := write(f); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		if err := f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// WriteTopologyMarkdown is report.md.
func WriteTopologyMarkdown(w io.Writer, res *TopologyResults) error {
	bw := &errWriter{w: w}
	p := func(format string, args ...any) { fmt.Fprintf(bw, format+"\n", args...) }
	m := res.Machine
	p("# vigil-bench topology — %s", res.Started.UTC().Format("2006-01-02 15:04 UTC"))
	p("")
	p("%d CPUs (%s), kernel %s, load %s → %s; %s; %s; vigil %s.", m.CPUs, m.CPUModel, m.Kernel, m.LoadStart, m.LoadEnd, m.Mariadbd, m.Sysbench, m.Vigil)
	p("Datadirs: %s. Runs of %s after a %s warm-up per variant and workload; %d tables × %d rows; wall time %s.",
		res.Storage, res.Config.Duration, res.Config.Warmup, res.Config.Tables, res.Config.TableSize,
		res.Finished.Sub(res.Started).Round(1e9))
	p("")
	if res.Config.Sandbox == "" && res.Config.VigilConfig == "" {
		p("Caveats: every server, Vigil and sysbench share the machine's cores over loopback, so replication and certification cost no network time and the topologies compete for CPU; one run per cell on a shared machine moves ±20%%. Async and semi-sync run with innodb_flush_log_at_trx_commit=1 and sync_binlog=1 on every node, Galera with innodb_flush_log_at_trx_commit=1 (no binary log); the semi-sync timeout is %d ms.", res.Config.SemiSyncTimeoutMs)
	} else {
		p("Servers measured as they are (see the checks) unless --vary-durability; one run per cell moves with whatever else the machines do.")
	}
	bullets(bw, "Read-only checks of the servers", res.Checks)
	p("")
	p("## What a failover can lose")
	p("")
	for _, l := range res.Losses {
		p("- **%s**: %s", l.Name(), l.Sentence)
	}
	p("")
	p("## Known shapes")
	p("")
	mdHeader(bw, []string{"shape", "reproduced", "evidence"})
	for _, s := range res.Shapes {
		mdRow(bw, []string{s.Name, s.Verdict("no", "not measured", "**yes**"), s.Evidence})
	}
	writeThroughput(bw, res.Runs)
	writeDurabilityCost(bw, res.Runs)
	writeGroupCommit(bw, res.Runs)
	writeSemiSync(bw, res.Runs)
	writeGalera(bw, res.Runs)
	if len(res.Plots) > 0 {
		p("")
		p("## Plots")
		p("")
		for _, pl := range res.Plots {
			p("![%s](%s)", pl, pl)
		}
	}
	bullets(bw, "Notes", res.Notes)
	writeTopoRuns(bw, res.Runs)
	return bw.err
}

// bullets writes a section of one bullet per item, nothing for none.
func bullets(w io.Writer, title string, items []string) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(w, "\n## %s\n\n", title)
	for _, it := range items {
		fmt.Fprintf(w, "- %s\n", it)
	}
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return len(b), nil
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, nil
}

func threadHeader(first []string, threads []int) []string {
	h := append([]string{}, first...)
	for _, t := range threads {
		h = append(h, "t="+strconv.Itoa(t))
	}
	return h
}

func writeThroughput(w io.Writer, runs []TopoRun) {
	fmt.Fprint(w, "\n## Throughput vs threads (transactions per second)\n")
	threads := sortedThreads(runs)
	for _, wl := range distinct(runs, func(r TopoRun) string { return r.Workload }) {
		fmt.Fprintf(w, "\n### %s\n\n", wl)
		mdHeader(w, threadHeader([]string{"topology", "variant", "path"}, threads))
		rs := okRuns(runs, func(r TopoRun) bool { return r.Workload == wl })
		type row struct{ topo, variant, path string }
		for _, k := range distinct(rs, func(r TopoRun) row { return row{r.Topology, r.Variant, r.Path} }) {
			cells := []string{k.topo, k.variant, k.path}
			for _, t := range threads {
				cell := "—"
				if r := findRun(rs, k.topo, k.variant, wl, t, k.path); r != nil {
					cell = fmt.Sprintf("%.0f", r.TPS)
				}
				cells = append(cells, cell)
			}
			mdRow(w, cells)
		}
	}
}

func writeDurabilityCost(w io.Writer, runs []TopoRun) {
	direct := okRuns(runs, func(r TopoRun) bool { return r.Path == PathDirect })
	if len(direct) == 0 {
		return
	}
	fmt.Fprint(w, "\n## Cost of each durability and HA step (direct, tps as a ratio to the fastest configuration at each thread count)\n")
	threads := sortedThreads(direct)
	for _, wl := range distinct(direct, func(r TopoRun) string { return r.Workload }) {
		fmt.Fprintf(w, "\n### %s\n\n", wl)
		mdHeader(w, threadHeader([]string{"configuration"}, threads))
		rs := okRuns(direct, func(r TopoRun) bool { return r.Workload == wl })
		best := map[int]float64{}
		for _, r := range rs {
			best[r.Threads] = max(best[r.Threads], r.TPS)
		}
		for _, c := range distinct(rs, func(r TopoRun) string { return r.config() }) {
			cells := []string{c}
			for _, t := range threads {
				cell := "—"
				for _, r := range rs {
					if r.config() == c && r.Threads == t {
						cell = fmt.Sprintf("%.2f (%.0f)", r.TPS/best[t], r.TPS)
					}
				}
				cells = append(cells, cell)
			}
			mdRow(w, cells)
		}
	}
}

func writeGroupCommit(w io.Writer, runs []TopoRun) {
	rs := okRuns(runs, func(r TopoRun) bool { return r.Path == PathDirect && r.CommitsPerGroup != nil })
	if len(rs) == 0 {
		return
	}
	fmt.Fprint(w, "\n## Group commit efficiency (direct, primary)\n\n")
	fmt.Fprint(w, "Commits per group is Binlog_commits / Binlog_group_commits: how many transactions share one binlog write (and, with sync_binlog=1, one fsync). Fsyncs per transaction is Innodb_data_fsyncs / transactions (InnoDB's own; the binlog's fsyncs are one per group with sync_binlog=1 and are not counted there).\n\n")
	mdHeader(w, []string{"configuration", "workload", "threads", "tps", "commits/group", "InnoDB fsyncs/trx", "binlog groups/s"})
	for _, r := range rs {
		gps := "—"
		if r.Seconds > 0 {
			gps = fmt.Sprintf("%.0f", float64(r.StatusDelta["Binlog_group_commits"])/r.Seconds)
		}
		mdRow(w, []string{r.config(), r.Workload, strconv.Itoa(r.Threads), fmt.Sprintf("%.0f", r.TPS), fmtOpt(r.CommitsPerGroup, fmt1), fmtOpt(r.FsyncsPerTrx, fmt2), gps})
	}
}

func writeSemiSync(w io.Writer, runs []TopoRun) {
	semi := okRuns(runs, func(r TopoRun) bool { return r.Topology == TopoSemiSync })
	if len(semi) == 0 {
		return
	}
	fmt.Fprint(w, "\n## Semi-sync vs async\n\n")
	mdHeader(w, []string{"workload", "threads", "path", "async tps", "semi-sync tps", "async avg / p95 ms", "semi-sync avg / p95 ms", "latency ×"})
	for _, s := range semi {
		a := findRun(runs, TopoAsync, asyncVariant().Name, s.Workload, s.Threads, s.Path)
		if a == nil {
			continue
		}
		ratio := "—"
		if a.AvgMs > 0 {
			ratio = fmt.Sprintf("%.2f", s.AvgMs/a.AvgMs)
		}
		mdRow(w, []string{s.Workload, strconv.Itoa(s.Threads), s.Path, fmt.Sprintf("%.0f", a.TPS), fmt.Sprintf("%.0f", s.TPS),
			fmt.Sprintf("%.2f / %.2f", a.AvgMs, a.P95Ms), fmt.Sprintf("%.2f / %.2f", s.AvgMs, s.P95Ms), ratio})
	}
	fmt.Fprint(w, "\nFallback to async during each semi-sync run (Rpl_semi_sync_master_status polled every 150 ms), and how far the replicas were behind at its end:\n\n")
	mdHeader(w, []string{"workload", "threads", "path", "async s / run s", "no_tx Δ", "yes_tx Δ", "replicas behind", "catch-up s"})
	for _, s := range okRuns(runs, func(r TopoRun) bool { return r.SemiSync != nil }) {
		mdRow(w, []string{s.Workload, strconv.Itoa(s.Threads), s.Path, fmt.Sprintf("%.1f / %.1f", s.SemiSync.AsyncSeconds, s.SemiSync.RunSeconds),
			strconv.FormatInt(s.SemiSync.NoTxDelta, 10), strconv.FormatInt(s.SemiSync.YesTxDelta, 10),
			strconv.FormatInt(s.MaxTrxBehind(), 10), fmtOpt(s.CatchUpSeconds, fmt1)})
	}
}

func writeGalera(w io.Writer, runs []TopoRun) {
	g := okRuns(runs, func(r TopoRun) bool { return r.Galera != nil })
	if len(g) == 0 {
		return
	}
	fmt.Fprint(w, "\n## Galera flow control\n\n")
	fmt.Fprint(w, "Paused is the largest share of the run any node spent paused by flow control (wsrep_flow_control_paused_ns delta over the run time; wsrep_flow_control_paused itself is a fraction since the last FLUSH STATUS). Receive queue is the largest wsrep_local_recv_queue_avg.\n\n")
	mdHeader(w, []string{"slave_threads", "fc_limit", "workload", "threads", "path", "tps", "paused", "recv queue avg", "fc sent", "catch-up s"})
	for _, r := range g {
		mdRow(w, []string{strconv.Itoa(r.SlaveThreads), strconv.Itoa(r.FCLimit), r.Workload, strconv.Itoa(r.Threads), r.Path,
			fmt.Sprintf("%.0f", r.TPS), fmtPct1(r.Galera.PausedFraction), fmt.Sprintf("%.2f", r.Galera.RecvQueueAvg),
			strconv.FormatInt(r.Galera.FCSent, 10), fmtOpt(r.CatchUpSeconds, fmt1)})
	}
}

func fmtPct1(v float64) string { return fmt.Sprintf("%.1f%%", v*100) }

func writeTopoRuns(w io.Writer, runs []TopoRun) {
	fmt.Fprint(w, "\n## Every run\n\n")
	mdHeader(w, []string{"#", "topology", "variant", "workload", "threads", "path", "tps", "qps", "p95 ms", "p99 ms", "errors", "fsyncs/trx", "commits/group", "behind", "catch-up s", "failed"})
	for _, r := range runs {
		mdRow(w, []string{strconv.Itoa(r.Seq), r.Topology, r.Variant, r.Workload, strconv.Itoa(r.Threads), r.Path,
			fmt.Sprintf("%.0f", r.TPS), fmt.Sprintf("%.0f", r.QPS), fmt2(r.P95Ms), fmt2(r.P99Ms), strconv.FormatInt(r.Errors, 10),
			fmtOpt(r.FsyncsPerTrx, fmt2), fmtOpt(r.CommitsPerGroup, fmt1), strconv.FormatInt(r.MaxTrxBehind(), 10),
			fmtOpt(r.CatchUpSeconds, fmt1), r.Failed})
	}
}

// writeTopologyPlots draws tps against threads per topology and workload
// and the durability cost ratios per workload.
func writeTopologyPlots(dir string, runs []TopoRun) ([]string, error) {
	var names []string
	var errs []error
	ok := okRuns(runs, func(TopoRun) bool { return true })
	if len(sortedThreads(ok)) > 1 {
		for _, topo := range distinct(ok, func(r TopoRun) string { return r.Topology }) {
			for _, wl := range distinct(ok, func(r TopoRun) string { return r.Workload }) {
				rs := okRuns(ok, func(r TopoRun) bool { return r.Topology == topo && r.Workload == wl })
				if len(rs) == 0 {
					continue
				}
				name := fmt.Sprintf("topology-%s-%s.png", topo, wl)
				if err := plotTopoThreads(filepath.Join(dir, name), topo+", "+wl+": transactions per second", rs); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", name, err))
					continue
				}
				names = append(names, name)
			}
		}
	}
	direct := okRuns(ok, func(r TopoRun) bool { return r.Path == PathDirect })
	for _, wl := range distinct(direct, func(r TopoRun) string { return r.Workload }) {
		rs := okRuns(direct, func(r TopoRun) bool { return r.Workload == wl })
		best := map[int]float64{}
		for _, r := range rs {
			best[r.Threads] = max(best[r.Threads], r.TPS)
		}
		var groups []barGroup
		for _, t := range sortedThreads(rs) {
			g := barGroup{label: fmt.Sprintf("%d threads", t), values: map[string]float64{}}
			for _, r := range rs {
				if r.Threads == t && (r.Topology != TopoGalera || r.FCLimit == 512) {
					g.values[r.config()] = r.TPS / best[t]
				}
			}
			groups = append(groups, g)
		}
		series := distinct(okRuns(rs, func(r TopoRun) bool { return r.Topology != TopoGalera || r.FCLimit == 512 }), func(r TopoRun) string { return r.config() })
		p, err := bars(wl+": tps as a ratio to the fastest (direct)", "ratio", groups, series, newPalette(series))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		name := fmt.Sprintf("durability-cost-%s.png", wl)
		if err := p.Save(vg.Length(max(7, 1.2*float64(len(groups))))*vg.Inch, 5*vg.Inch, filepath.Join(dir, name)); err != nil {
			errs = append(errs, err)
			continue
		}
		names = append(names, name)
	}
	return names, errors.Join(errs...)
}

// plotTopoThreads draws one line per variant and path: solid direct,
// dashed through Vigil.
func plotTopoThreads(path, title string, rs []TopoRun) error {
	threads := sortedThreads(rs)
	idx := map[int]int{}
	var labels []string
	for i, t := range threads {
		idx[t] = i
		labels = append(labels, strconv.Itoa(t))
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "client threads"
	p.Y.Label.Text = "tps"
	p.Y.Min = 0
	p.Y.Tick.Marker = readableTicks{}
	variants := distinct(rs, func(r TopoRun) string { return r.Variant })
	pal := newPalette(variants)
	for _, v := range variants {
		for _, pathName := range []string{PathDirect, PathVigil} {
			var xys plotter.XYs
			for _, r := range rs {
				if r.Variant == v && r.Path == pathName {
					xys = append(xys, plotter.XY{X: float64(idx[r.Threads]), Y: r.TPS})
				}
			}
			if len(xys) == 0 {
				continue
			}
			sort.Slice(xys, func(i, j int) bool { return xys[i].X < xys[j].X })
			l, sc, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			l.Color, sc.Color = pal[v], pal[v]
			l.Width = vg.Points(1.5)
			if pathName == PathVigil {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
				sc.GlyphStyle.Shape = draw.TriangleGlyph{}
			}
			p.Add(l, sc)
			label := pathName
			if v != "" {
				label = v + " " + pathName
			}
			p.Legend.Add(label, l, sc)
		}
	}
	p.NominalX(labels...)
	p.X.Min, p.X.Max = -0.3, float64(len(labels)-1)+0.3
	p.Legend.Top, p.Legend.Left = true, true
	p.Y.Max *= 1.4
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}
