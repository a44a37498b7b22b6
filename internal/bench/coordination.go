package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/config"
)

// TargetVigilEtcd is a second Vigil configured like the plain "vigil"
// target plus coordination through a single-member etcd the bench runs
// (--coordination). With coordination on, every statement that could
// write passes the frontend's write gate (an atomic load and a monotonic
// clock read) and a goroutine renews the etcd lease; its qps and CPU per
// query next to the plain target are what coordination costs the
// statement hot path.
const TargetVigilEtcd = "vigil+etcd"

// The coordination of the vigil+etcd target.
const (
	benchInstance = "bench"
	// The default with etcd's default election timeout (the bench's
	// etcd keeps etcd's timing): the lease rides over an election.
	benchLeaseTTL   = 4 * time.Second
	benchEtcdPrefix = "/vigil-bench/"
)

// etcdReadyTimeout bounds the wait for the bench's etcd to be healthy,
// writesAllowedTimeout the wait for vigil+etcd to route writes.
const (
	etcdReadyTimeout     = 30 * time.Second
	writesAllowedTimeout = 30 * time.Second
)

// NoiseFloor is the smallest tolerance of the coordination check: the
// ratios of two identical Vigils measured in turn move by a few percent
// even on a quiet machine.
const NoiseFloor = 0.05

// benchCoordination is the coordination section of vigil+etcd, with the
// etcd client address etcdAddr (host:port).
func benchCoordination(etcdAddr string) config.Coordination {
	return config.Coordination{
		Instance: benchInstance,
		LeaseTTL: config.Duration{Duration: benchLeaseTTL},
		Etcd: config.Etcd{
			Endpoints: []string{etcdAddr},
			Prefix:    benchEtcdPrefix,
		},
	}
}

// etcdArgs are the arguments of the bench's single-member etcd: data in
// dataDir, clients on client and the (unused) peer port on peer, both
// host:port on loopback, logging to stderr (the child's log file).
func etcdArgs(dataDir, client, peer string) []string {
	c, p := "http://"+client, "http://"+peer
	return []string{
		"--name", benchInstance,
		"--data-dir", dataDir,
		"--listen-client-urls", c,
		"--advertise-client-urls", c,
		"--listen-peer-urls", p,
		"--initial-advertise-peer-urls", p,
		"--initial-cluster", benchInstance + "=" + p,
		"--initial-cluster-state", "new",
		"--initial-cluster-token", "vigil-bench",
		// 3.4's default logger (capnslog) warns that it is deprecated.
		"--logger", "zap",
		"--log-outputs", "stderr",
	}
}

// etcdEnv is the environment without ETCD_* and ETCDCTL_* variables:
// etcd reads ETCD_<FLAG> as flags.
func etcdEnv(environ []string) []string {
	var env []string
	for _, kv := range environ {
		if strings.HasPrefix(kv, "ETCD_") || strings.HasPrefix(kv, "ETCDCTL_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// startEtcd runs the bench's etcd and waits until it is healthy; it
// returns its client address.
func (e *env) startEtcd(ctx context.Context) (string, error) {
	bin, err := lookProgram("etcd")
	if err != nil {
		return "", fmt.Errorf("--coordination runs etcd, which is not installed (scripts/install-deps.sh, or apt-get install etcd-server)")
	}
	client, err := freeLoopbackAddr()
	if err != nil {
		return "", err
	}
	peer, err := freeLoopbackAddr()
	if err != nil {
		return "", err
	}
	// Not a proxy: on the servers' CPUs when they are pinned, on all of
	// them when only the client is (the bench's own pinning would be
	// inherited).
	cpus := e.o.Pin.Servers
	if cpus == "" && e.o.Pin.Client != "" {
		cpus = allCPUs()
	}
	ebin, eargs := tasksetWrap(cpus, bin, etcdArgs(filepath.Join(e.work, "etcd"), client, peer)...)
	e.etcd, err = startChildEnv("etcd", filepath.Join(e.work, "etcd.log"), etcdEnv(os.Environ()), ebin, eargs...)
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(etcdReadyTimeout)
	for {
		if e.etcd.exited() {
			return "", fmt.Errorf("etcd exited at start (%v); its log %s ends with:\n%s", e.etcd.err, e.etcd.log, tailFile(e.etcd.log, 15))
		}
		err := etcdHealthy(ctx, client)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("etcd on %s is not healthy within %s (%v); its log %s ends with:\n%s", client, etcdReadyTimeout, err, e.etcd.log, tailFile(e.etcd.log, 15))
		}
		time.Sleep(200 * time.Millisecond)
	}
	e.progress("etcd (pid %d) serves %s", e.etcd.PID(), client)
	return client, nil
}

// etcdHealthy asks etcd's GET /health.
func etcdHealthy(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if strings.Contains(strings.Join(strings.Fields(string(body)), ""), `"health":"true"`) {
		return nil
	}
	return fmt.Errorf("GET /health: %s %s", resp.Status, strings.TrimSpace(string(body)))
}

// coordinationView is the part of GET /api/v1/coordination the bench
// reads.
type coordinationView struct {
	Enabled bool `json:"enabled"`
	Lease   *struct {
		Lease   string `json:"lease"`
		LeaseID string `json:"lease_id"`
	} `json:"lease"`
	Clusters map[string]struct {
		Writes string `json:"writes"`
	} `json:"clusters"`
}

// writesAllowed says whether the view lets cluster route writes, and if
// not, why.
func (v coordinationView) writesAllowed(cluster string) (bool, string) {
	if !v.Enabled {
		return false, "coordination is not enabled"
	}
	c, ok := v.Clusters[cluster]
	switch {
	case !ok:
		lease := "unknown"
		if v.Lease != nil {
			lease = v.Lease.Lease
		}
		return false, fmt.Sprintf("cluster %s not coordinated yet (lease %s)", cluster, lease)
	case c.Writes != "allowed":
		return false, "writes " + c.Writes
	}
	return true, ""
}

func (a adminAPI) coordination(ctx context.Context) (coordinationView, error) {
	var v coordinationView
	err := a.do(ctx, http.MethodGet, "/api/v1/coordination", nil, &v)
	return v, err
}

// leaseID is the etcd lease the view shows ("" none).
func (v coordinationView) leaseID() string {
	if v.Lease == nil {
		return ""
	}
	return v.Lease.LeaseID
}

// waitWritesAllowed polls a Vigil's coordination until it routes writes
// of cluster, and returns what it showed then.
func waitWritesAllowed(ctx context.Context, api adminAPI, cluster string, timeout time.Duration) (coordinationView, error) {
	deadline := time.Now().Add(timeout)
	for {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		v, err := api.coordination(qctx)
		cancel()
		why := ""
		if err == nil {
			var ok bool
			if ok, why = v.writesAllowed(cluster); ok {
				return v, nil
			}
		} else {
			why = err.Error()
		}
		if ctx.Err() != nil {
			return v, ctx.Err()
		}
		if time.Now().After(deadline) {
			return v, fmt.Errorf("does not route writes within %s: %s", timeout, why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startVigilEtcd runs etcd and the coordinated Vigil (--coordination),
// and waits until that Vigil routes writes.
func (e *env) startVigilEtcd(ctx context.Context) error {
	etcdAddr, err := e.startEtcd(ctx)
	if err != nil {
		return err
	}
	path, err := e.derivedVigilConfig("etcd", func(cfg *config.Config) {
		cfg.Coordination = benchCoordination(etcdAddr)
	})
	if err != nil {
		return err
	}
	_, t, err := e.startExtraVigil(ctx, TargetVigilEtcd, path,
		fmt.Sprintf("Vigil like the plain one, coordinated through a single-member etcd (instance %s, lease_ttl %s): every statement that could write checks the lease",
			benchInstance, benchLeaseTTL))
	if err != nil {
		return err
	}
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	t.Admin, t.adminToken = cfg.Admin.Listen, cfg.Admin.Token
	e.coordCluster = cfg.Clusters[0].Name
	t0 := time.Now()
	v, err := waitWritesAllowed(ctx, adminAPI{addr: t.Admin, token: t.adminToken}, e.coordCluster, writesAllowedTimeout)
	if err != nil {
		return fmt.Errorf("%s %w", TargetVigilEtcd, err)
	}
	e.coordLease = v.leaseID()
	e.progress("%s routes writes (its etcd lease held, the writer record applied) after %s", TargetVigilEtcd, time.Since(t0).Round(10*time.Millisecond))
	e.targets = append(e.targets, t)
	return nil
}

// checkCoordinationEnd notes when vigil+etcd lost its etcd lease during
// the bench (it could not renew it in time on a starved machine, say) or
// no longer routes writes at the end: it refuses writes while fenced and
// reads go on, so a read-only case would not show it.
func (e *env) checkCoordinationEnd(ctx context.Context) {
	for _, t := range e.targets {
		if t.Name != TargetVigilEtcd {
			continue
		}
		v, err := adminAPI{addr: t.Admin, token: t.adminToken}.coordination(ctx)
		if err != nil {
			e.note("%s: coordination state at the end: %v", t.Name, err)
			return
		}
		if id := v.leaseID(); id != e.coordLease {
			data, _ := os.ReadFile(filepath.Join(e.work, logName(t.Name)))
			e.note("%s lost its etcd lease during the bench (lease %s at the start, %s at the end; lost at %s, see %s): it refused writes until it held a new one",
				t.Name, e.coordLease, id, strings.Join(leaseLosses(string(data)), ", "), logName(t.Name))
		}
		if ok, why := v.writesAllowed(e.coordCluster); !ok {
			e.note("%s did not route writes at the end of the bench: %s", t.Name, why)
		}
	}
}

// leaseLosses are the times (time= of Vigil's text log) of every lease
// loss a Vigil logged; "?" for a line without one.
func leaseLosses(log string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "etcd lease lost") {
			continue
		}
		ts := "?"
		if i := strings.Index(line, "time="); i >= 0 {
			ts, _, _ = strings.Cut(line[i+len("time="):], " ")
		}
		out = append(out, ts)
	}
	return out
}

// spread is the range of a measurement over its reps relative to its
// median: 0.1 for 950–1050 around 1000.
func spread(s *Stat) float64 {
	if s == nil || s.Median == 0 {
		return 0
	}
	return (s.Max - s.Min) / s.Median
}

// noise is the tolerance of a ratio of two targets: the larger spread of
// their reps, at least NoiseFloor.
func noise(a, b *Stat) float64 {
	return math.Max(NoiseFloor, math.Max(spread(a), spread(b)))
}

// CoordinationCost is vigil+etcd against vigil in one case: the ratios of
// the medians and how much the reps themselves moved.
type CoordinationCost struct {
	QPS, CPU           *float64
	QPSNoise, CPUNoise float64
}

// coordinationCost compares vigil+etcd with vigil in a case; false when
// either did not run.
func coordinationCost(ss ScenarioSummary) (CoordinationCost, bool) {
	v, ok1 := ss.Target(TargetVigil)
	c, ok2 := ss.Target(TargetVigilEtcd)
	if !ok1 || !ok2 || v.Runs == 0 || c.Runs == 0 {
		return CoordinationCost{}, false
	}
	var cc CoordinationCost
	if r, ok := ss.Ratio("qps", TargetVigilEtcd, TargetVigil); ok {
		cc.QPS = ptr(r)
	}
	if r, ok := ss.Ratio("proxy_cpu_us_per_query", TargetVigilEtcd, TargetVigil); ok {
		cc.CPU = ptr(r)
	}
	cc.QPSNoise = noise(v.QPS, c.QPS)
	cc.CPUNoise = noise(v.ProxyCPUUsPerQuery, c.ProxyCPUUsPerQuery)
	return cc, true
}

// coordinationCheck is the verdict of a case: vigil+etcd's qps no lower
// and its CPU per query no higher than vigil's by more than the noise.
func coordinationCheck(ss ScenarioSummary) (Check, bool) {
	cc, ok := coordinationCost(ss)
	if !ok {
		return Check{}, false
	}
	c := Check{Name: fmt.Sprintf("Coordination (etcd lease, write gate) costs nothing measurable: vigil+etcd qps and CPU per query within noise of vigil on %s", ss.Label())}
	if cc.QPS == nil || cc.CPU == nil {
		c.Detail = "not measured"
		if cc.QPS != nil {
			c.Detail = fmt.Sprintf("vigil+etcd/vigil qps %.2f, CPU per query not measured", *cc.QPS)
		}
		return c, true
	}
	c.Value = cc.QPS
	c.Pass = *cc.QPS >= 1-cc.QPSNoise && *cc.CPU <= 1+cc.CPUNoise
	c.Detail = fmt.Sprintf("vigil+etcd/vigil qps %.2f, CPU/query %.2f; noise ±%.0f%% qps, ±%.0f%% CPU (spread of the reps, at least %.0f%%)",
		*cc.QPS, *cc.CPU, 100*cc.QPSNoise, 100*cc.CPUNoise, 100*NoiseFloor)
	return c, true
}

// pairedRatios are vigil+etcd over vigil rep by rep in one case (the two
// ran within seconds of each other, so a neighbour's burst moves both):
// qps and CPU per query, in the order of the reps, leaving out reps where
// either failed or has no CPU.
func pairedRatios(runs []Measurement, key string) (qps, cpu []float64) {
	type pair struct{ v, c *Measurement }
	byRep := map[int]*pair{}
	var reps []int
	for i := range runs {
		r := &runs[i]
		if r.Key() != key || r.Skipped != "" || r.Failed() || (r.Target != TargetVigil && r.Target != TargetVigilEtcd) {
			continue
		}
		p := byRep[r.Rep]
		if p == nil {
			p = &pair{}
			byRep[r.Rep] = p
			reps = append(reps, r.Rep)
		}
		if r.Target == TargetVigil {
			p.v = r
		} else {
			p.c = r
		}
	}
	slices.Sort(reps)
	for _, rep := range reps {
		p := byRep[rep]
		if p.v == nil || p.c == nil || p.v.Sysbench.QPS == 0 {
			continue
		}
		qps = append(qps, p.c.Sysbench.QPS/p.v.Sysbench.QPS)
		if p.v.ProxyCPUUsPerQuery != nil && p.c.ProxyCPUUsPerQuery != nil && *p.v.ProxyCPUUsPerQuery > 0 {
			cpu = append(cpu, *p.c.ProxyCPUUsPerQuery / *p.v.ProxyCPUUsPerQuery)
		}
	}
	return qps, cpu
}

func fmtRatios(v []float64) string {
	if len(v) == 0 {
		return na
	}
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt2(x)
	}
	return strings.Join(s, " ")
}

// writeCoordination is the report's section on vigil+etcd: one row per
// case it ran.
func writeCoordination(w io.Writer, cases []ScenarioSummary, runs []Measurement) {
	var rows [][]string
	for _, ss := range cases {
		cc, ok := coordinationCost(ss)
		if !ok {
			continue
		}
		v, _ := ss.Target(TargetVigil)
		t, _ := ss.Target(TargetVigilEtcd)
		rows = append(rows, []string{
			ss.Label(),
			fmtStat(v.QPS, fmtInt) + " (" + fmtRange(v.QPS, fmtInt) + ")",
			fmtStat(t.QPS, fmtInt) + " (" + fmtRange(t.QPS, fmtInt) + ")",
			fmtRatio(cc.QPS),
			fmtStat(v.ProxyCPUUsPerQuery, fmt1) + " (" + fmtRange(v.ProxyCPUUsPerQuery, fmt1) + ")",
			fmtStat(t.ProxyCPUUsPerQuery, fmt1) + " (" + fmtRange(t.ProxyCPUUsPerQuery, fmt1) + ")",
			fmtRatio(cc.CPU),
			fmt.Sprintf("±%.0f%% / ±%.0f%%", 100*cc.QPSNoise, 100*cc.CPUNoise),
		})
		q, c := pairedRatios(runs, ss.Case)
		rows[len(rows)-1] = append(rows[len(rows)-1], fmtRatios(q), fmtRatios(c))
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\n## Coordination\n\nvigil+etcd is configured like vigil plus `coordination:` with a single-member etcd the bench runs (instance %s, lease_ttl %s): it holds a live etcd lease, renewed in the background, and every statement that could write passes the write gate. Medians (min–max over the reps); the ratios are median over median; the noise is the larger spread of the two targets' reps, at least %.0f%%. The per-rep ratios pair the two runs of each rep, a few seconds apart. This is one instance with a live lease, not the multi-instance failover path.\n\n",
		benchInstance, benchLeaseTTL, 100*NoiseFloor)
	mdHeader(w, []string{"case", "vigil qps", "vigil+etcd qps", "qps ratio", "vigil CPU µs/query", "vigil+etcd CPU µs/query", "CPU ratio", "noise qps / CPU", "qps ratio per rep", "CPU ratio per rep"})
	for _, r := range rows {
		mdRow(w, r)
	}
}
