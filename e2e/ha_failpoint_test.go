package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/coord"
)

// TestHAActingDiesAtEveryStep: the acting instance dies (SIGKILL) or
// stops (SIGSTOP) after step N of a failover, of a rejoin and of a
// switchover, for every N of each plan (the VIGIL_TEST_FAILPOINT_FILE
// failpoint, moved from round to round in one sandbox). Each time the
// other instance is elected, finds the operation in etcd and completes
// it or rolls it back; at no sampled moment are two servers writable; no
// acknowledged write is lost; every replica replicates from the writer
// the record names; both instances show the same term and writer.
func TestHAActingDiesAtEveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	fp := filepath.Join(t.TempDir(), "failpoint")
	if err := os.WriteFile(fp, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The daemons inherit this process's environment when they start.
	t.Setenv("VIGIL_TEST_FAILPOINT_FILE", fp)
	e := newHAEnv(t)
	r := &crashRounds{e: e, fp: fp, steps: map[string]int{}}
	sampler := e.sampleWritable()
	r.sampler = sampler
	defer func() {
		select {
		case <-sampler.done:
		default:
			sampler.finish()
		}
	}()
	w1, w2 := e.startWriter(0, 25*time.Millisecond), e.startWriter(1, 25*time.Millisecond)
	r.ws = []*haWriter{w1, w2}
	time.Sleep(500 * time.Millisecond)
	for n := 1; n <= 40; n++ {
		ran := false
		if r.active("failover", n) || r.active("rejoin", n) {
			r.round("failover", n)
			r.round("rejoin", n)
			ran = true
		}
		if r.active("switchover", n) {
			r.round("switchover", n)
			ran = true
		}
		if !ran || t.Failed() {
			break
		}
	}
	time.Sleep(300 * time.Millisecond)
	w1.halt()
	w2.halt()
	samples, violations, writable := sampler.finish()
	t.Logf("rounds: %s", strings.Join(r.log, "; "))
	t.Logf("plans: %v steps; the acting instance died in %d rounds", r.steps, r.fired)
	t.Logf("writable sampler: %d samples, writable per node %v", samples, writable)
	t.Log(w1.summary())
	t.Log(w2.summary())
	if len(violations) > 0 {
		t.Errorf("two servers writable at once: %s", haFirst(violations, 5))
	}
	for _, k := range []string{"failover", "rejoin", "switchover"} {
		if r.steps[k] == 0 {
			t.Errorf("the %s rounds did not reach the end of the plan", k)
		}
	}
	e.requireAckedOn(e.mustRecord().Writer, w1, w2)
}

type crashRounds struct {
	e  *haEnv
	fp string
	ws []*haWriter
	// sampler checks that one server at most is writable.
	sampler *writableSampler
	old     string         // the primary the last failover replaced
	steps   map[string]int // kind → its plan's steps, once a round went past the end
	fired   int
	log     []string
}

// active: a round of kind with the failpoint after step n is still to run.
func (r *crashRounds) active(kind string, n int) bool {
	s, ok := r.steps[kind]
	return !ok || n <= s
}

// stopped: the instance's process is gone or stopped (SIGSTOP).
func (r *crashRounds) stopped(name string) bool {
	pid, err := r.e.sb.PID(name)
	if err != nil || pid <= 0 {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) STATE ...
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'T' || s[i+2] == 'Z'
	}
	return false
}

// round runs one operation of kind with the failpoint after step n (no
// failpoint when that kind's plan is known to be shorter), restores the
// instance it stopped, and checks the cluster.
func (r *crashRounds) round(kind string, n int) {
	e, t := r.e, r.e.t
	t.Helper()
	ctx := context.Background()
	action := "kill"
	if n%2 == 0 {
		action = "stop"
	}
	fire := r.active(kind, n)
	point := ""
	if fire {
		point = fmt.Sprintf("%s %d %s", kind, n, action)
	}
	if err := os.WriteFile(r.fp, []byte(point), 0o644); err != nil {
		t.Fatal(err)
	}
	var acting string
	Eventually(t, 20*time.Second, "one instance acting", func() (err error) {
		acting, err = e.actingName()
		return err
	})
	ai := e.vigil(acting)
	rec0 := e.mustRecord()
	start := time.Now()
	to := ""
	var ask func() bool // an operator's request, retried until taken
	switch kind {
	case "failover":
		// No write in flight when the primary dies: the old primary
		// stays compatible and the rejoin round can rejoin it.
		r.pause(true)
		r.old = rec0.Writer
		haMust(t, "kill "+r.old, e.sb.Kill(ctx, r.old))
	case "rejoin":
		// It restarts with its my.cnf's read_only=OFF (it was the
		// primary) until the rejoin sets read_only; Vigil routes nothing
		// to it meanwhile (the acknowledged writes are checked below).
		r.sampler.ignore(r.old, true)
		haMust(t, "start "+r.old, e.sb.Start(ctx, r.old))
		Eventually(t, 20*time.Second, r.old+" checked and fenced, waiting for rejoin", func() error {
			_, err := e.sb.SQL(ctx, r.old, "SELECT 1")
			return err
		})
		ask = func() bool {
			// Refused while the monitor has not checked it back yet.
			_, err := e.ctl(ai, "rejoin", r.old)
			return err == nil
		}
	case "switchover":
		for _, nd := range e.m.Nodes {
			if nd.Name != rec0.Writer && !rec0.IsFenced(nd.Name) {
				to = nd.Name
				break
			}
		}
		ask = func() bool {
			_, err := e.ctl(ai, "switchover", "--to", to)
			return err == nil
		}
	}
	asked := make(chan struct{})
	go func() {
		defer close(asked)
		if ask == nil {
			return
		}
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
			if ask() || r.stopped(acting) || len(e.historySince(start)) > 0 {
				return
			}
		}
	}()
	// The operation ends: by the acting instance, or by the other one
	// after it died.
	var done []string
	Eventually(t, 60*time.Second, kind+" ended", func() error {
		if op, err := e.op(false); err != nil || op != nil {
			return fmt.Errorf("operation journaled (%v)", err)
		}
		done = nil
		for _, h := range e.historySince(start) {
			if h.Kind.String() == kind && !h.Ended.IsZero() {
				done = append(done, fmt.Sprintf("ok=%v %s", h.OK, h.Error))
			}
		}
		if len(done) == 0 {
			return errors.New("not in the history yet")
		}
		return nil
	})
	died := fire && r.stopped(acting)
	what := fmt.Sprintf("%s after step %d: %s", kind, n, strings.Join(done, ","))
	switch {
	case died:
		r.fired++
		what += fmt.Sprintf(", %s %s, resumed by the other", acting, map[string]string{"kill": "killed", "stop": "stopped"}[action])
		si := 1 - ai
		if ev := e.events(si, start); !slices.ContainsFunc(ev, func(x admin.Event) bool { return x.Kind == "operation_resumed" }) {
			t.Errorf("%s: %s reported no operation_resumed event:\n%s", what, e.m.Vigils[si].Name, e.eventsText(si, start))
		}
		if action == "kill" {
			haMust(t, "start "+acting, e.sb.Start(ctx, acting))
		} else {
			haMust(t, "resume "+acting, e.sb.Resume(ctx, acting))
		}
	case fire:
		r.steps[kind] = n - 1 // the plan ended before step n
		what += " (plan shorter: no failpoint reached)"
	}
	if err := os.WriteFile(r.fp, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	<-asked
	r.log = append(r.log, what)
	t.Log(what)

	rec := e.mustRecord()
	if rec.Phase != coord.PhaseServing || rec.Writer == "" {
		t.Fatalf("%s: record %s", what, haRec(rec))
	}
	if kind == "failover" && rec.Writer == r.old {
		t.Fatalf("%s: the old primary %s is still the writer: %s", what, r.old, haRec(rec))
	}
	e.requireAgreement(rec, 30*time.Second)
	{
		// An operator's ack after every round: anti-flapping
		// (min_interval) holds back the next automatic failover, and a
		// failed one (or a switchover whose rollback failed) disarms it
		// until acknowledged.
		Eventually(t, 20*time.Second, "vigil ctl ack", func() error {
			name, err := e.actingName()
			if err != nil {
				return err
			}
			out, err := e.ctl(e.vigil(name), "ack")
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		})
	}
	for _, nd := range e.m.Nodes {
		if nd.Name == rec.Writer || kind == "failover" && nd.Name == r.old {
			continue
		}
		e.replicatesFrom(nd.Name, rec.Writer, 30*time.Second)
	}
	if kind == "rejoin" {
		Eventually(t, 10*time.Second, r.old+" read-only after the rejoin", func() error {
			if ro, err := e.readOnly(r.old); err != nil || ro != "1" {
				return fmt.Errorf("read_only %q %v", ro, err)
			}
			return nil
		})
		r.sampler.ignore(r.old, false)
	}
	r.pause(false)
}

func (r *crashRounds) pause(on bool) {
	for _, w := range r.ws {
		w.paused.Store(on)
	}
	if on {
		time.Sleep(100 * time.Millisecond) // a write in flight ends
	}
}
