package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/agent"
	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/executor"
	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/flavor"
	"github.com/vigil-db/vigil/internal/lifecycle"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/topology"
)

// The daemon clones servers through their agents (docs/lifecycle.md).
var _ admin.Cloner = (*daemon)(nil)

// cloneStats are the per-cluster clone counters (metrics).
type cloneStats struct {
	mu       sync.Mutex
	bytes    map[string]int64
	failures map[string]int64
}

func (s *cloneStats) addBytes(cluster string, n int64) {
	s.mu.Lock()
	if s.bytes == nil {
		s.bytes = map[string]int64{}
	}
	s.bytes[cluster] += n
	s.mu.Unlock()
}

func (s *cloneStats) failed(cluster string) {
	s.mu.Lock()
	if s.failures == nil {
		s.failures = map[string]int64{}
	}
	s.failures[cluster]++
	s.mu.Unlock()
}

func (s *cloneStats) get(cluster string) (bytes, failures int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes[cluster], s.failures[cluster]
}

// cloneManager is the daemon's clone manager, made on first use.
func (d *daemon) cloneManager() *lifecycle.Manager {
	d.clonesOnce.Do(func() { d.clones = lifecycle.NewManager() })
	return d.clones
}

// agentClient builds a client of the agent at addr with the agents:
// section of the running config (read now: a reload applies to the next
// clone).
func agentClient(a config.Agents, addr string) (*agent.Client, error) {
	if a.CA == "" || a.Cert == "" || a.Key == "" {
		return nil, errors.New("agents.ca, agents.cert and agents.key are not set")
	}
	if err := agent.CheckVigilCertificate(a.Cert, a.Key); err != nil {
		return nil, err
	}
	cc := agent.ClientConfig{Addr: addr, CA: a.CA, Cert: a.Cert, Key: a.Key}
	if a.TokenFile != "" {
		tok, err := os.ReadFile(a.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("agents.token_file: %w", err)
		}
		cc.Token = strings.TrimSpace(string(tok))
	}
	return agent.NewClient(cc)
}

// Clone implements admin.Cloner: choose the donor, then start the clone
// or rebuild in the background (under the daemon's context) and return
// it.
// A configured spare that is not a member yet is added first (as a
// replacement adds it), then cloned.
func (d *daemon) Clone(ctx context.Context, r admin.CloneRequest) (any, error) {
	if rt, err := d.cluster(r.Cluster); err == nil && rt.shared != nil && !rt.exec.Acting() {
		// Lifecycle operations run on the acting instance: it has the
		// journal, the fences and the agents' work.
		return d.forwardLifecycle(ctx, rt, r)
	}
	if rt, err := d.cluster(r.Cluster); err == nil && (r.Kind == "" || r.Kind == lifecycle.KindClone) {
		if sp, ok := rt.spare(r.Target); ok {
			if r.DryRun {
				steps := append([]string{fmt.Sprintf("add: the spare %s (%s, agent %s) joins cluster %s as a member, out of routing until it replicates", sp.Name, sp.Address, sp.Agent, rt.name)},
					lifecycle.PlanSteps(lifecycle.Plan{Cluster: rt.name, Target: sp.Name, Donor: orUnknown(r.From), Rate: r.Rate, Named: r.From != ""}, "the primary then")...)
				return lifecycle.DryRun{DryRun: true, Kind: lifecycle.KindClone, Cluster: rt.name, Target: sp.Name, Donor: orUnknown(r.From),
					DonorReason: "chosen once the spare is a member", Writer: "the primary then", Steps: steps}, nil
			}
			return d.addAndStart(ctx, rt, sp, r, "")
		}
	}
	return d.startLifecycle(ctx, r, "")
}

// spare is the configured spare name, when it is not a member.
func (rt *clusterRuntime) spare(name string) (config.Spare, bool) {
	cc := rt.cfg.Load()
	for _, s := range cc.Servers {
		if s.Name == name {
			return config.Spare{}, false
		}
	}
	for _, sp := range cc.Lifecycle.Spares {
		if sp.Name == name {
			return sp, true
		}
	}
	return config.Spare{}, false
}

// addAndStart adds the spare sp as a member and starts r on it once the
// monitor has checked it (replaces: the lost member it replaces). When the
// operation cannot start, the spare leaves the cluster again.
func (d *daemon) addAndStart(ctx context.Context, rt *clusterRuntime, sp config.Spare, r admin.CloneRequest, replaces string) (any, error) {
	if err := d.AddServer(ctx, rt.name, admin.ServerSpec{Name: sp.Name, Address: sp.Address, Agent: sp.Agent, Role: "replica"}); err != nil {
		return nil, fmt.Errorf("adding the spare %s as a member: %w", sp.Name, err)
	}
	r.Cluster, r.Target = rt.name, sp.Name
	var p any
	var err error
	for range 60 { // the monitor checks the new member first
		p, err = d.startLifecycle(ctx, r, replaces)
		if err == nil || !(strings.Contains(err.Error(), "not a server") || strings.Contains(err.Error(), "not been checked")) {
			break
		}
		if sleepCtx(ctx, 500*time.Millisecond) != nil {
			break
		}
	}
	if err != nil {
		if rerr := d.RemoveServer(context.WithoutCancel(ctx), rt.name, sp.Name); rerr != nil {
			return nil, fmt.Errorf("%w; the spare %s stays a member out of routing (%v): vigil ctl server remove %s", err, sp.Name, rerr, sp.Name)
		}
		return nil, fmt.Errorf("%w (the spare %s left the cluster again)", err, sp.Name)
	}
	return p, nil
}

// startLifecycle starts a clone, rebuild or replacement (replaces names
// the lost member a spare replaces) and returns its progress, or its
// plan for a dry run.
func (d *daemon) startLifecycle(_ context.Context, r admin.CloneRequest, replaces string) (any, error) {
	rt, err := d.cluster(r.Cluster)
	if err != nil {
		return nil, err
	}
	kind := r.Kind
	switch {
	case kind == "":
		kind = lifecycle.KindClone
	case kind != lifecycle.KindClone && kind != lifecycle.KindRebuild && kind != lifecycle.KindReplace:
		return nil, &admin.Error{Status: http.StatusBadRequest, Message: "kind must be clone or rebuild"}
	}
	if r.Rate < 0 {
		return nil, &admin.Error{Status: http.StatusBadRequest, Message: "rate must not be negative"}
	}
	if !rt.exec.Acting() {
		return nil, &admin.Error{Status: http.StatusConflict, Message: fmt.Sprintf("refused: this Vigil instance does not act for cluster %s (instance %s does): lifecycle operations run on the acting instance only; send the request to it",
			rt.name, orUnknown(rt.leader()))}
	}
	if op := rt.exec.Running(); op != "" {
		return nil, &admin.Error{Status: http.StatusConflict, Message: "refused: " + op + " runs in cluster " + rt.name + "; " + kind + " after it (vigil ctl events)"}
	}
	if j := d.healerOf(rt.name).resolvingNow(); j != nil {
		return nil, &admin.Error{Status: http.StatusConflict, Message: fmt.Sprintf("refused: the interrupted %s of %s is being resolved; try again in a moment (vigil ctl events)", j.Kind, j.Target)}
	}
	cc := rt.cfg.Load()
	cfg := d.running.Load()
	in := rt.donorInput(r.Target)
	in.Rebuild = kind == lifecycle.KindRebuild
	agentAddr := in.agentAddr
	m := d.cloneManager()
	if err := m.Check(rt.name, ""); err != nil {
		return nil, &admin.Error{Status: http.StatusConflict, Message: err.Error()}
	}
	_, in.Busy = m.Busy(rt.name)
	in.From = r.From
	choice, err := lifecycle.ChooseDonor(in.DonorInput)
	var refused *lifecycle.Refusal
	if errors.As(err, &refused) {
		status := http.StatusConflict
		if strings.Contains(refused.Reason, "not a server") {
			status = http.StatusNotFound
		}
		return nil, &admin.Error{Status: status, Message: err.Error()}
	}
	if err != nil {
		return nil, err
	}
	if kind == lifecycle.KindRebuild {
		if why := rt.exec.SalvagePending(r.Target); why != "" {
			return nil, &admin.Error{Status: http.StatusConflict, Message: "refused: " + why + "; a rebuild waits for the salvage, so that nothing " + r.Target + " holds is destroyed unread"}
		}
	}
	plan := lifecycle.Plan{Cluster: rt.name, Target: r.Target, Donor: choice.Donor, DonorReason: choice.Reason,
		DonorAgent: agentAddr[choice.Donor], ReplUser: cc.Failover.ReplUser, ReplPass: cc.Failover.ReplPassword, Rate: r.Rate,
		Named: r.From != "", Kind: kind, Replaces: replaces}
	if r.DryRun {
		writer := "none known now"
		if w, err := rt.cloneWriter(); err == nil {
			writer = w.Name
		}
		return lifecycle.DryRun{DryRun: true, Kind: kind, Cluster: rt.name, Target: r.Target, Donor: choice.Donor, DonorReason: choice.Reason,
			Writer: writer, Steps: lifecycle.PlanSteps(plan, writer)}, nil
	}
	donor, err := agentClient(cfg.Agents, agentAddr[choice.Donor])
	if err != nil {
		return nil, &admin.Error{Status: http.StatusBadRequest, Message: "donor " + choice.Donor + "'s agent: " + err.Error()}
	}
	target, err := agentClient(cfg.Agents, agentAddr[r.Target])
	if err != nil {
		donor.Close()
		return nil, &admin.Error{Status: http.StatusBadRequest, Message: "target " + r.Target + "'s agent: " + err.Error()}
	}
	for _, s := range cc.Servers {
		if s.Name == r.Target {
			plan.TargetAddr = s.Address
		}
	}
	deps := rt.lifecycleDeps(d, donor, target, r.Target)
	deps.NextDonor = func(ctx context.Context, failed map[string]bool) (lifecycle.Donor, error) {
		in := rt.donorInput(r.Target)
		in.Busy, in.Rebuild = failed, kind == lifecycle.KindRebuild
		c, err := lifecycle.ChooseDonor(in.DonorInput)
		if err != nil {
			return lifecycle.Donor{}, err
		}
		next, err := agentClient(d.running.Load().Agents, in.agentAddr[c.Donor])
		if err != nil {
			return lifecycle.Donor{}, fmt.Errorf("donor %s's agent: %w", c.Donor, err)
		}
		donor.Close()
		donor = next
		return lifecycle.Donor{Name: c.Donor, Reason: c.Reason, AgentAddr: in.agentAddr[c.Donor], Agent: next}, nil
	}
	deps.Event = func(k, msg string) {
		if strings.HasSuffix(k, "_failed") {
			d.cloneStats.failed(rt.name)
			d.healerOf(rt.name).failed(r.Target, time.Now())
		}
		if strings.HasSuffix(k, "_finished") || strings.HasSuffix(k, "_failed") { // the last event
			donor.Close()
			target.Close()
		}
		d.journal.add(admin.Event{Cluster: rt.name, Server: r.Target, Kind: k, Message: msg})
	}
	deps.Journal = func(j lifecycle.Journal) {
		rt.saveJournal(d, j)
		lifecycleFailpoint(j.Phase)
	}
	if kind == lifecycle.KindRebuild {
		deps.PrepareTarget = func(ctx context.Context) (string, error) { return rt.exec.PrepareRebuild(ctx, r.Target) }
	}
	p, err := m.Start(d.ctx, plan, deps)
	if errors.As(err, &refused) {
		donor.Close()
		target.Close()
		return nil, &admin.Error{Status: http.StatusConflict, Message: err.Error()}
	}
	return p, err
}

// lifecycleDeps are the I/O of a lifecycle operation on rt's target,
// without the donor choice and the events.
func (rt *clusterRuntime) lifecycleDeps(d *daemon, donor, target lifecycle.Agent, name string) lifecycle.Deps {
	cc := rt.cfg.Load()
	return lifecycle.Deps{
		Donor: donor, Target: target, Routing: rt.exec,
		SQL:     sqlRunner{user: cc.Monitor.User, pass: cc.Monitor.Password},
		Writer:  rt.cloneWriter,
		Log:     rt.log,
		OnBytes: func(n int64) { d.cloneStats.addBytes(rt.name, n) },
		Journal: func(j lifecycle.Journal) { rt.saveJournal(d, j) },
		Event: func(k, msg string) {
			d.journal.add(admin.Event{Cluster: rt.name, Server: name, Kind: k, Message: msg})
		},
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "none known now"
	}
	return s
}

// cloneWriter is the primary a clone's target replicates from: the
// designated primary, routed or not (a primary shunned for a slow check
// still serves its replicas).
func (rt *clusterRuntime) cloneWriter() (lifecycle.Writer, error) {
	st, snap := rt.mon.State(), rt.topo.Load()
	i := st.Designated
	if i < 0 || snap == nil || i >= len(snap.Servers) || i >= len(st.Servers) {
		reason := "no primary known"
		if snap != nil {
			reason = snap.WriterReason
		}
		return lifecycle.Writer{}, fmt.Errorf("cluster %s has no primary now (%s)", rt.name, reason)
	}
	f := flavor.MariaDB
	if o := st.Servers[i].LastOK; o != nil {
		f = flavor.OfObservation(o)
	}
	return lifecycle.Writer{Name: snap.Servers[i].Name, Addr: snap.Servers[i].Addr, Flavor: f}, nil
}

// cloneInput is a donor choice's input from the running cluster, with
// the servers' agent addresses.
type cloneInput struct {
	lifecycle.DonorInput
	agentAddr map[string]string
}

func (rt *clusterRuntime) donorInput(target string) cloneInput {
	cc := rt.cfg.Load()
	in := cloneInput{DonorInput: lifecycle.DonorInput{Snapshot: rt.topo.Load(), Target: target, Agents: map[string]bool{},
		Load: map[string]int64{}, MaxLag: cc.Monitor.MaxReplicationLag.Seconds()}, agentAddr: map[string]string{}}
	for _, s := range cc.Servers {
		if s.Agent != "" {
			in.Agents[s.Name], in.agentAddr[s.Name] = true, s.Agent
		}
	}
	if snap := in.Snapshot; snap != nil {
		for i, s := range snap.Servers {
			_, waiting := rt.activity(i)
			in.Load[s.Name] = waiting
		}
		in.Errant = errantReplicas(rt.mon.Observations(), snap.WriterServer())
	}
	return in
}

// Clones implements admin.Cloner: the running and the last clones.
func (d *daemon) Clones() any {
	running, finished := d.cloneManager().List()
	return map[string]any{"running": nonNil(running), "finished": nonNil(finished)}
}

func nonNil(p []lifecycle.Progress) []lifecycle.Progress {
	if p == nil {
		return []lifecycle.Progress{}
	}
	return p
}

// sqlRunner runs a clone's statements with the cluster's monitor account,
// on a connection of its own per call (a clone runs a handful).
type sqlRunner struct{ user, pass string }

func (s sqlRunner) Run(ctx context.Context, addr string, stmts ...string) ([]string, [][]string, error) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	mc, g, err := mysqlproto.Dial(dctx, &mysqlproto.DialConfig{Addr: addr, User: s.user, Password: s.pass})
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to %s: %w", addr, err)
	}
	c := &backend.Conn{Conn: mc, SessionTrack: g.Capabilities&mysqlproto.CapabilityClientSessionTrack != 0,
		DeprecateEOF: g.Capabilities&mysqlproto.CapabilityClientDeprecateEOF != 0}
	defer c.Close()
	var cols []string
	var rows [][]string
	for _, q := range stmts {
		qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		stop := context.AfterFunc(qctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
		cols, rows, err = c.ExecColumns(qctx, q)
		stop()
		cancel()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", executor.Redact(q), err)
		}
	}
	return cols, rows, nil
}

// errantReplicas names the members whose latest check held transactions
// the writer's latest check lacks (failover.ErrantOf), nil without a
// writer.
func errantReplicas(obs []topology.Health, writer *topology.Server) map[string]string {
	if writer == nil {
		return nil
	}
	var w *topology.Observation
	for _, o := range obs {
		if o.Name == writer.Name {
			w = o.Last
		}
	}
	out := map[string]string{}
	for _, o := range obs {
		if o.Name == writer.Name {
			continue
		}
		if x, _ := failover.ErrantOf(o.Last, w); x != "" {
			out[o.Name] = x
		}
	}
	return out
}
