package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/admin"
)

// TestChaos is the randomized compound-fault test (`make chaos`,
// docs/failover.md "Chaos testing"): rounds of faults drawn from a seeded
// generator — kill -9, SIGSTOP and isolation of the primary or a replica,
// switchovers, and overlaps of them — on a 3-node semi-sync sandbox with a
// writer through Vigil. After each round every node is healed and
// started, the operator's documented steps run (ack, rejoin), and the
// invariants of faultlab_test.go are checked. Skipped unless
// VIGIL_CHAOS=1; VIGIL_CHAOS_SEED replays a run, VIGIL_CHAOS_BUDGET
// (default 5m) bounds its time and VIGIL_CHAOS_ROUNDS its rounds.
func TestChaos(t *testing.T) {
	if os.Getenv("VIGIL_CHAOS") != "1" {
		t.Skip("set VIGIL_CHAOS=1 to run (make chaos)")
	}
	seed := envKnob(t, "VIGIL_CHAOS_SEED", time.Now().UnixNano(), func(v string) (int64, error) { return strconv.ParseInt(v, 10, 64) })
	budget := envKnob(t, "VIGIL_CHAOS_BUDGET", 5*time.Minute, func(v string) (time.Duration, error) {
		d, err := time.ParseDuration(v)
		if err == nil && d <= 0 {
			err = fmt.Errorf("not positive")
		}
		return d, err
	})
	maxRounds := envKnob(t, "VIGIL_CHAOS_ROUNDS", 0, strconv.Atoi)
	t.Logf("chaos: seed %d, budget %s, rounds %s — replay with VIGIL_CHAOS_SEED=%d", seed, budget, orAll(maxRounds), seed)
	end := time.Now().Add(budget)

	c := &chaosRun{t: t, seed: seed, rng: rand.New(rand.NewPCG(uint64(seed), 0x5eed)), faults: map[string]int{}, outages: map[string][]time.Duration{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chaos: replay with VIGIL_CHAOS_SEED=%d (round %d); schedule:\n%s", seed, c.round, strings.Join(c.schedule, "\n"))
		}
	})
	c.lab = newFaultLab(t)
	c.lab.startWriting(1, 20*time.Millisecond)
	time.Sleep(time.Second)

	// A round takes about a minute when things go well; none starts
	// with less than that left.
	const roundTime = 60 * time.Second
	for c.round = 1; maxRounds == 0 || c.round <= maxRounds; c.round++ {
		if time.Until(end) < roundTime {
			c.note("budget: %s left, no new round", time.Until(end).Round(time.Second))
			break
		}
		if !c.runRound() {
			break
		}
	}
	c.round--
	c.final()
}

// envKnob is the environment variable name parsed, or def when it is
// unset or empty.
func envKnob[T any](t *testing.T, name string, def T, parse func(string) (T, error)) T {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	x, err := parse(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return x
}

func orAll(n int) string {
	if n == 0 {
		return "unbounded"
	}
	return strconv.Itoa(n)
}

// A chaos fault: class is the outage class of a fault that hits the
// primary (kill, pause, isolate), "" for the others.
type chaosFault struct {
	name, class string
	run         func(c *chaosRun, d chaosDraw, primary string, replicas []string)
}

// chaosDraw is every random choice of a round, drawn up front so the
// generator's sequence does not depend on what the cluster did.
type chaosDraw struct {
	fault int
	pick  int           // which replica
	hold  time.Duration // 2–12 s: how long a pause or isolation lasts
	gap   time.Duration // 0–2 s: between overlapping faults
	coin  bool
}

// chaosCtx is the context of the fault injections (each bounds itself).
var chaosCtx = context.Background()

var chaosFaults = []chaosFault{
	{"kill-primary", "kill", func(c *chaosRun, d chaosDraw, p string, _ []string) {
		t0 := c.fault(func() error { return c.lab.sb.Kill(chaosCtx, p) }, "kill -9 %s (primary)", p)
		c.awaitFailover(p, t0, 30*time.Second)
	}},
	{"kill-replica", "", func(c *chaosRun, d chaosDraw, _ string, r []string) {
		c.fault(func() error { return c.lab.sb.Kill(chaosCtx, r[d.pick]) }, "kill -9 %s (replica)", r[d.pick])
		time.Sleep(d.hold)
	}},
	{"pause-primary", "pause", func(c *chaosRun, d chaosDraw, p string, _ []string) {
		c.holdFault("pause", p, "primary", d.hold)
	}},
	{"pause-replica", "", func(c *chaosRun, d chaosDraw, _ string, r []string) {
		c.holdFault("pause", r[d.pick], "replica", d.hold)
	}},
	{"isolate-primary", "isolate", func(c *chaosRun, d chaosDraw, p string, _ []string) {
		// 5–15 s: both sides of the ~12 s failover.
		c.holdFault("isolate", p, "primary", d.hold+3*time.Second)
	}},
	{"isolate-replica", "", func(c *chaosRun, d chaosDraw, _ string, r []string) {
		c.holdFault("isolate", r[d.pick], "replica", d.hold)
	}},
	{"switchover", "", func(c *chaosRun, d chaosDraw, _ string, r []string) {
		args := []string{"--json", "switchover"}
		if d.coin {
			args = append(args, "--to", r[d.pick])
		}
		c.fault(func() error { c.switchover(args); return nil }, "vigil ctl %s", strings.Join(args[1:], " "))
	}},
	// Case 1 of the issue: the new primary's only replica dies right
	// after the failover; writes go on; then (coin) the new primary dies
	// and the dead replica comes back.
	{"kill-primary+kill-new-replica", "kill", func(c *chaosRun, d chaosDraw, p string, _ []string) {
		t0 := c.fault(func() error { return c.lab.sb.Kill(chaosCtx, p) }, "kill -9 %s (primary)", p)
		np := c.awaitFailover(p, t0, 30*time.Second)
		if np == "" {
			return
		}
		other := ""
		for _, n := range c.lab.nodes {
			if n != p && n != np {
				other = n
			}
		}
		c.step("kill -9 %s (the new primary %s's only replica)", other, np)
		c.try(c.lab.sb.Kill(chaosCtx, other))
		time.Sleep(d.hold / 2)
		if d.coin {
			c.step("kill -9 %s (the new primary); start %s", np, other)
			c.try(c.lab.sb.Kill(chaosCtx, np))
			c.try(c.lab.sb.Start(chaosCtx, other))
			time.Sleep(10 * time.Second)
			if w := c.lab.env.writer(c.t); w != "" {
				c.step("writer now: %s", w)
			}
		}
	}},
	// Case 2: the primary resumes in the middle of its failover.
	{"pause-primary+resume-mid-failover", "pause", func(c *chaosRun, d chaosDraw, p string, _ []string) {
		c.fault(func() error { return c.lab.sb.Pause(chaosCtx, p) }, "SIGSTOP %s (primary) until it is fenced", p)
		fenced := waitUntil(20*time.Second, func() bool {
			_, ok := fencedReason(c.lab.serverMap()[p])
			return ok
		})
		time.Sleep(d.gap / 2)
		c.step("SIGCONT %s (fenced: %v)", p, fenced)
		c.try(c.lab.sb.Resume(chaosCtx, p))
	}},
	{"kill-replica+kill-primary", "kill", func(c *chaosRun, d chaosDraw, p string, r []string) {
		c.step("kill -9 %s (replica)", r[d.pick])
		c.try(c.lab.sb.Kill(chaosCtx, r[d.pick]))
		time.Sleep(d.gap)
		t0 := c.fault(func() error { return c.lab.sb.Kill(chaosCtx, p) }, "kill -9 %s (primary), %s after its replica", p, d.gap)
		c.awaitFailover(p, t0, 30*time.Second)
	}},
	{"isolate-replica+switchover", "", func(c *chaosRun, d chaosDraw, _ string, r []string) {
		c.fault(func() error { return c.lab.sb.Isolate(chaosCtx, r[d.pick]) }, "isolate %s (replica), then vigil ctl switchover", r[d.pick])
		time.Sleep(d.gap + time.Second)
		c.switchover([]string{"--json", "switchover"})
		time.Sleep(d.hold / 2)
		c.step("heal %s", r[d.pick])
		c.try(c.lab.sb.Heal(chaosCtx, r[d.pick]))
	}},
}

// chaosRun is the state and the record of one TestChaos run.
type chaosRun struct {
	t          *testing.T
	lab        *faultLab
	seed       int64
	rng        *rand.Rand
	round      int
	roundStart time.Time
	schedule   []string
	violations []string
	notes      []string
	faults     map[string]int
	outages    map[string][]time.Duration // by class, failovers only
	noFailover []string
	failovers  []string
	operator   []string
	faultAt    time.Time // the round's fault on the primary, for its outage
	lost       map[int]bool
	vigilDown  bool
}

// step records one action of the schedule.
func (c *chaosRun) step(format string, args ...any) {
	line := fmt.Sprintf("round %d +%5.1fs  %s", c.round, time.Since(c.roundStart).Seconds(), fmt.Sprintf(format, args...))
	c.schedule = append(c.schedule, line)
	c.t.Log(line)
}

// fault records the round's fault, injects it and returns when it took
// effect (the start of its outage).
func (c *chaosRun) fault(inject func() error, format string, args ...any) time.Time {
	c.step(format, args...)
	c.try(inject())
	c.faultAt = time.Now()
	return c.faultAt
}

// holdFault pauses (SIGSTOP) or isolates node for hold, then resumes or
// heals it.
func (c *chaosRun) holdFault(kind, node, role string, hold time.Duration) {
	do, undo, verb, unverb := c.lab.sb.Pause, c.lab.sb.Resume, "SIGSTOP", "SIGCONT"
	if kind == "isolate" {
		do, undo, verb, unverb = c.lab.sb.Isolate, c.lab.sb.Heal, "isolate", "heal"
	}
	c.fault(func() error { return do(chaosCtx, node) }, "%s %s (%s) for %s", verb, node, role, hold)
	time.Sleep(hold)
	c.step("%s %s", unverb, node)
	c.try(undo(chaosCtx, node))
}

func (c *chaosRun) note(format string, args ...any) {
	line := fmt.Sprintf("round %d: %s", c.round, fmt.Sprintf(format, args...))
	c.notes = append(c.notes, line)
	c.t.Log(line)
}

// violate reports an invariant violation with what replays it.
func (c *chaosRun) violate(inv, format string, args ...any) {
	msg := fmt.Sprintf("invariant %s: %s", inv, fmt.Sprintf(format, args...))
	c.violations = append(c.violations, fmt.Sprintf("round %d: %s", c.round, msg))
	c.t.Errorf("chaos seed %d round %d: %s\nschedule so far:\n%s", c.seed, c.round, msg, strings.Join(c.schedule, "\n"))
}

func (c *chaosRun) try(err error) {
	if err != nil {
		c.step("  (error: %v)", err)
	}
}

// awaitFailover waits until a server other than old is the routed
// writer; it returns it, or "" if none came within limit.
func (c *chaosRun) awaitFailover(old string, t0 time.Time, limit time.Duration) string {
	nw := c.lab.awaitNewWriter(old, limit)
	if nw == "" {
		c.step("no failover from %s within %s", old, limit)
		return ""
	}
	c.step("failover: %s is the writer (%s after the fault)", nw, time.Since(t0).Round(100*time.Millisecond))
	return nw
}

func (c *chaosRun) switchover(args []string) {
	out, err := c.lab.env.ctl(c.t, args...)
	var res admin.OpResult
	if json.Unmarshal([]byte(out), &res) == nil {
		c.step("switchover: ok=%v %s → %s, writes held %.0f ms: %s", res.OK, res.Old, res.New, res.PauseMs, firstLine(res.Message))
		return
	}
	c.step("switchover: %v %s", err, firstLine(out))
}

// runRound draws and runs one round, settles the cluster and checks the
// invariants. It returns false when the run cannot go on.
func (c *chaosRun) runRound() bool {
	d := chaosDraw{
		fault: c.rng.IntN(len(chaosFaults)),
		pick:  c.rng.IntN(2),
		hold:  2*time.Second + time.Duration(c.rng.Int64N(int64(10*time.Second))).Round(100*time.Millisecond),
		gap:   time.Duration(c.rng.Int64N(int64(2 * time.Second))).Round(100 * time.Millisecond),
		coin:  c.rng.IntN(2) == 1,
	}
	c.roundStart = time.Now()
	c.faultAt = time.Time{}
	primary := c.lab.env.writer(c.t)
	var replicas []string
	for _, n := range c.lab.nodes {
		if n != primary {
			replicas = append(replicas, n)
		}
	}
	f := chaosFaults[d.fault]
	c.faults[f.name]++
	c.step("== %s (writer %s)", f.name, primary)
	if primary == "" || len(replicas) != 2 {
		c.violate("settle", "round starts without a routed writer")
		return false
	}
	f.run(c, d, primary, replicas)

	// Heal everything and let Vigil settle.
	did, err := c.lab.healAll()
	if len(did) > 0 || err != nil {
		c.step("heal all: %s %v", strings.Join(did, ", "), errOrEmpty(err))
	}
	writer, steps, err := c.lab.settleWriter(60 * time.Second)
	for _, s := range steps {
		c.step("operator: %s", s)
		c.operator = append(c.operator, fmt.Sprintf("round %d: %s", c.round, s))
	}
	if err != nil {
		c.violate("settle", "%v\nevents:\n%s", err, c.lab.eventsSince(c.roundStart, nil))
		return c.checkVigil()
	}
	c.step("settled: writer %s", writer)
	// Let Vigil see the returned nodes (salvage runs when an old primary
	// answers again).
	time.Sleep(3 * time.Second)
	if !c.checkVigil() {
		return false
	}
	c.checkAcked(writer)
	// A node that does not answer cannot be compared: say why, and
	// restart it as an operator would.
	for _, n := range c.lab.nodes {
		if ok, why := c.lab.answers(n); !ok && n != writer {
			c.violate("b (divergence)", "%s does not answer, so what it holds cannot be compared with the writer %s; its process list:\n%s", n, writer, why)
			c.step("operator: restart %s (kill -9, start): it hangs", n)
			c.try(c.lab.sb.Kill(chaosCtx, n))
			c.try(c.lab.sb.Start(chaosCtx, n))
			c.operator = append(c.operator, fmt.Sprintf("round %d: restarted %s, which hung", c.round, n))
			time.Sleep(3 * time.Second)
		}
	}
	viol, notes := c.lab.checkDivergence(writer)
	for _, v := range viol {
		c.violate("b (divergence)", "%s\nevents:\n%s", v, c.lab.eventsSince(c.roundStart, nil))
	}
	for _, n := range notes {
		c.note("%s", n)
	}

	// The operator brings every node back: rejoin, and where rejoin is
	// refused for transactions the writer lacks, rebuild the node from
	// the writer (what docs/failover.md says to do once they are
	// salvaged) and rejoin again.
	for _, r := range c.lab.rejoinStragglers(writer) {
		c.step("operator: vigil ctl rejoin %s: accepted=%v %s", r.node, r.accepted, lastLine(r.message))
		if !r.accepted {
			c.bringBack(r, writer)
		}
	}
	for _, p := range c.lab.checkReplicating(writer, 30*time.Second) {
		c.violate("c (replicating)", "%s", p)
	}
	// The writer may have changed while the operator worked; with every
	// node back, writes through Vigil must be acknowledged.
	if w, _, err := c.lab.settleWriter(30 * time.Second); err != nil {
		c.violate("settle", "after the operator's steps: %v", err)
	} else if w != writer {
		c.step("writer moved to %s during the operator's steps", w)
	}
	if err := c.lab.requireAck(20 * time.Second); err != nil {
		c.violate("settle", "after the operator's steps: %v\nevents:\n%s", err, c.lab.eventsSince(c.roundStart, nil))
	}
	c.noteOutage(f, primary)
	return c.checkVigil()
}

// noteOutage records the outage of a fault on the primary: from the fault
// to the first acknowledged write after it.
func (c *chaosRun) noteOutage(f chaosFault, primary string) {
	if f.class == "" || c.faultAt.IsZero() {
		return
	}
	out := c.lab.w.firstAck(c.faultAt)
	if out.IsZero() {
		return
	}
	o := out.Sub(c.faultAt)
	if writer := c.lab.env.writer(c.t); writer != primary {
		c.outages[f.class] = append(c.outages[f.class], o)
		c.failovers = append(c.failovers, fmt.Sprintf("round %d %s: %s → %s, outage %s", c.round, f.name, primary, writer, o.Round(time.Millisecond)))
	} else {
		c.noFailover = append(c.noFailover, fmt.Sprintf("round %d %s: writer stayed %s, outage %s", c.round, f.name, primary, o.Round(time.Millisecond)))
	}
}

// bringBack is the operator's answer to a refused or failed rejoin. A
// refusal for transactions the writer lacks is right when node holds
// some (they were checked by invariant (b)): node is rebuilt from the
// writer and rejoined. Any other failure is a violation; when node hangs
// in semi-sync waits the operator turns its semi-sync master off, and
// rejoins or rebuilds it.
func (c *chaosRun) bringBack(r rejoinOutcome, writer string) {
	extra, _ := c.lab.extraTransactions(r.node, writer)
	diverged := strings.Contains(r.message, "holds transactions")
	switch {
	case diverged && len(extra) == 0:
		c.violate("c (rejoin)", "rejoin of %s refused, but it holds nothing the writer %s lacks: %s", r.node, writer, r.message)
	case !diverged:
		_, why := c.lab.answers(r.node)
		procs, _ := c.lab.query(r.node, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE LIKE '%semi-sync%'")
		c.violate("c (rejoin)", "rejoin of %s failed: %s\nits waits on semi-sync: %v %s", r.node, lastLine(r.message), procs, why)
		if len(procs) == 1 && procs[0][0] != "0" {
			c.step("operator: SET GLOBAL rpl_semi_sync_master_enabled = OFF on %s (%s sessions wait for semi-sync acknowledgements)", r.node, procs[0][0])
			c.try(c.lab.sb.Exec(chaosCtx, r.node, "SET GLOBAL rpl_semi_sync_master_enabled = OFF"))
			c.operator = append(c.operator, fmt.Sprintf("round %d: semi-sync master off on %s (hung)", c.round, r.node))
			out, err := c.lab.env.ctl(c.t, "rejoin", r.node)
			c.step("operator: vigil ctl rejoin %s: %s", r.node, okOr(err, out))
			if err == nil {
				return
			}
		}
	}
	if err := c.lab.rebuild(r.node, writer); err != nil {
		c.step("operator: rebuild %s from %s failed: %v", r.node, writer, err)
		return
	}
	out, err := c.lab.env.ctl(c.t, "rejoin", r.node)
	c.step("operator: rebuilt %s from %s (%d transactions it held dropped); vigil ctl rejoin: %s", r.node, writer, len(extra), okOr(err, out))
	c.operator = append(c.operator, fmt.Sprintf("round %d: rebuilt %s from %s", c.round, r.node, writer))
}

func errOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// checkAcked is invariant (a); rows already reported lost are not
// reported again.
func (c *chaosRun) checkAcked(writer string) {
	if c.lost == nil {
		c.lost = map[int]bool{}
	}
	missing, err := c.lab.missingAcked(writer, c.lab.w.acked())
	if err != nil {
		c.violate("a (acknowledged writes)", "cannot read the writer %s: %v", writer, err)
		return
	}
	var fresh []int
	for _, n := range missing {
		if !c.lost[n] {
			c.lost[n] = true
			fresh = append(fresh, n)
		}
	}
	if len(fresh) > 0 {
		c.violate("a (acknowledged writes)", "%d acknowledged rows are missing on the writer %s: n=%s\nevents:\n%s",
			len(fresh), writer, compactInts(fresh), c.lab.eventsSince(c.roundStart, nil))
	}
}

func (c *chaosRun) checkVigil() bool {
	if msg := c.lab.checkVigil(); msg != "" {
		if !c.vigilDown {
			c.violate("d (vigil runs)", "%s", msg)
		}
		c.vigilDown = true
		return !strings.HasPrefix(msg, "the vigil process exited")
	}
	return true
}

// final checks the invariants once more with the writer stopped, and
// reports the run.
func (c *chaosRun) final() {
	c.lab.w.halt()
	c.roundStart = time.Now()
	if c.checkVigil() {
		if writer := c.lab.env.writer(c.t); writer == "" {
			c.violate("settle", "no routed writer at the end")
		} else {
			c.checkAcked(writer)
			viol, _ := c.lab.checkDivergence(writer)
			for _, v := range viol {
				c.violate("b (divergence)", "at the end: %s", v)
			}
			for _, p := range c.lab.checkReplicating(writer, 20*time.Second) {
				c.violate("c (replicating)", "at the end: %s", p)
			}
		}
	}
	acked := len(c.lab.w.acked())
	ok, failed := c.lab.w.counts(time.Time{})
	var b strings.Builder
	fmt.Fprintf(&b, "chaos report — seed %d (replay: VIGIL_CHAOS_SEED=%d)\n", c.seed, c.seed)
	fmt.Fprintf(&b, "rounds: %d; writes: %d acknowledged, %d failed (%d rows acknowledged)\n", c.round, ok, failed, acked)
	names := make([]string, 0, len(c.faults))
	for n := range c.faults {
		names = append(names, n)
	}
	slices.Sort(names)
	b.WriteString("faults:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-36s %d\n", n, c.faults[n])
	}
	b.WriteString("failover outages (fault → first acknowledged write):\n")
	for _, class := range []string{"kill", "pause", "isolate"} {
		o := c.outages[class]
		if len(o) == 0 {
			fmt.Fprintf(&b, "  %-8s no failover\n", class)
			continue
		}
		s := slices.Clone(o)
		slices.Sort(s)
		fmt.Fprintf(&b, "  %-8s median %s (min %s, max %s, %d failovers)\n", class, s[len(s)/2].Round(time.Millisecond),
			s[0].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), len(s))
	}
	for _, l := range c.failovers {
		b.WriteString("  " + l + "\n")
	}
	for _, l := range c.noFailover {
		b.WriteString("  " + l + "\n")
	}
	fmt.Fprintf(&b, "operator steps: %d\n", len(c.operator))
	for _, l := range c.operator {
		b.WriteString("  " + l + "\n")
	}
	fmt.Fprintf(&b, "notes: %d\n", len(c.notes))
	for _, l := range c.notes {
		b.WriteString("  " + l + "\n")
	}
	fmt.Fprintf(&b, "invariant violations: %d\n", len(c.violations))
	for _, v := range c.violations {
		b.WriteString("  " + firstLine(v) + "\n")
	}
	c.t.Log(b.String())
}
