package coord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/failover"
)

// startEtcd runs a real one-member etcd on free loopback ports for the
// test (skipped when Debian's etcd-server is not installed).
func startEtcd(t *testing.T) (endpoint string, stop func(), cont func()) {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("etcd not installed (scripts/install-deps.sh installs etcd-server)")
	}
	port := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}
	cp, pp := port(), port()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--name", "t", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", cp), "--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", cp),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", pp), "--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", pp),
		"--initial-cluster", fmt.Sprintf("t=http://127.0.0.1:%d", pp), "--heartbeat-interval", "100", "--election-timeout", "1000",
		"--logger", "zap", "--log-outputs", filepath.Join(dir, "etcd.log"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			<-done
		})
	}
	t.Cleanup(stop)
	endpoint = fmt.Sprintf("127.0.0.1:%d", cp)
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", endpoint, 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
			t.Fatalf("etcd did not start: %s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return endpoint, stop, func() { _ = cmd.Process.Signal(syscall.SIGCONT) }
}

type instance struct {
	co      *Coordinator
	cl      *Cluster
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	applied []Record
	acting  bool
}

func newInstance(t *testing.T, ep, name, prefix string) *instance {
	t.Helper()
	co, err := New(Options{Endpoints: []string{ep}, Prefix: prefix, Instance: name, LeaseTTL: 2 * time.Second},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	in := &instance{co: co}
	in.cl = co.Cluster("c1", Callbacks{
		Apply: func(_ context.Context, r Record) error {
			in.mu.Lock()
			in.applied = append(in.applied, r)
			in.mu.Unlock()
			return nil
		},
		Serve: func(_ context.Context, f Forwarded) (json.RawMessage, bool, error) {
			if f.Request != nil && f.Request.To == "refuse" {
				return nil, true, errors.New("refused by the engine")
			}
			return json.RawMessage(`{"served_by":"` + name + `"}`), false, nil
		},
		Elected: func(on bool) {
			in.mu.Lock()
			in.acting = on
			in.mu.Unlock()
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	in.cancel = cancel
	in.wg.Add(2)
	go func() { defer in.wg.Done(); _ = co.Run(ctx) }()
	go func() { defer in.wg.Done(); in.cl.Run(ctx) }()
	t.Cleanup(in.stop)
	return in
}

func (in *instance) stop() {
	in.cancel()
	in.wg.Wait()
	_ = in.co.Close()
}

func eventually(t *testing.T, what string, d time.Duration, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTwoInstancesAgainstRealEtcd: one instance acts; only it can change
// the writer record; the other applies and acknowledges every record;
// requests sent to the follower run on the acting instance; an instance
// that stops is treated as fenced once its lease is gone; the follower
// takes over and finds the journaled operation.
func TestTwoInstancesAgainstRealEtcd(t *testing.T) {
	ep, _, _ := startEtcd(t)
	prefix := fmt.Sprintf("/vigil-test-%d/", time.Now().UnixNano())
	a := newInstance(t, ep, "a", prefix)
	eventually(t, "a acting", 10*time.Second, a.cl.Acting)
	b := newInstance(t, ep, "b", prefix)
	eventually(t, "b registered with a lease", 10*time.Second, b.co.Valid)
	if b.cl.Acting() {
		t.Fatal("two instances act")
	}
	ctx := context.Background()
	// Only the acting instance writes the record.
	if _, err := b.cl.Publish(ctx, Record{Term: 1, Writer: "n1", Phase: PhaseServing}); !errors.Is(err, ErrNotActing) {
		t.Fatalf("follower published: %v", err)
	}
	r1, err := a.cl.Publish(ctx, Record{Term: 1, Writer: "n1", Phase: PhaseServing})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "b applied record 1", 5*time.Second, b.cl.CaughtUp)
	if err := a.cl.WaitAcks(ctx, r1.Seq); err != nil {
		t.Fatalf("acks: %v", err)
	}
	r2, err := a.cl.Publish(ctx, Record{Term: 2, Writer: "", Phase: PhaseFencing, From: "n1", To: "n2", Fenced: []string{"n1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.cl.WaitAcks(ctx, r2.Seq); err != nil {
		t.Fatalf("acks: %v", err)
	}
	b.mu.Lock()
	got := append([]Record(nil), b.applied...)
	b.mu.Unlock()
	if len(got) != 2 || got[1].Term != 2 || !got[1].IsFenced("n1") || got[1].Phase != PhaseFencing {
		t.Fatalf("b applied %+v", got)
	}
	// Requests through the follower run on the acting instance, once.
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	out, err := b.cl.Forward(fctx, Forwarded{Kind: "request", Request: &failover.Request{Kind: failover.RequestSwitchover, To: "n2"}})
	cancel()
	if err != nil || string(out) != `{"served_by":"a"}` {
		t.Fatalf("forward: %s %v", out, err)
	}
	fctx, cancel = context.WithTimeout(ctx, 5*time.Second)
	_, err = b.cl.Forward(fctx, Forwarded{Kind: "request", Request: &failover.Request{To: "refuse"}})
	cancel()
	var re *RemoteError
	if !errors.As(err, &re) || !re.Refused || re.By != "a" {
		t.Fatalf("refused forward: %v", err)
	}
	// An operation journaled by a, which then dies.
	if err := a.cl.BeginOp(ctx, Op{ID: "op1", Plan: failover.Plan{NewPrimary: "n2"}, Done: 3}); err != nil {
		t.Fatal(err)
	}
	if err := a.cl.BeginOp(ctx, Op{ID: "op2"}); err == nil {
		t.Fatal("a second operation was journaled")
	}
	a.stop() // revokes its lease: b takes over at once
	eventually(t, "b acting", 10*time.Second, b.cl.Acting)
	op, err := b.cl.PendingOp(ctx)
	if err != nil || op == nil || op.ID != "op1" || op.Done != 3 || op.Instance != "a" {
		t.Fatalf("pending op: %+v %v", op, err)
	}
	r3, err := b.cl.Publish(ctx, Record{Term: 2, Writer: "n2", Phase: PhaseServing, Fenced: []string{"n1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.cl.WaitAcks(ctx, r3.Seq); err != nil {
		t.Fatalf("acks with a gone: %v", err)
	}
	if err := b.cl.EndOp(ctx, []failover.Record{{Kind: failover.RecordFailover, OK: true}}); err != nil {
		t.Fatal(err)
	}
	if op, _ := b.cl.PendingOp(ctx); op != nil {
		t.Fatalf("op left: %+v", op)
	}
	h, err := b.cl.History(ctx)
	if err != nil || len(h) != 1 || !h[0].OK {
		t.Fatalf("history %+v %v", h, err)
	}
}

// TestLeaseLossSelfFences: when etcd stops answering, the instance stops
// considering its lease valid before etcd could expire it, and writes
// are refused (the write deadline goes to zero); when etcd answers again
// it takes a new lease and allows writes once it applied the record.
func TestLeaseLossSelfFences(t *testing.T) {
	ep, _, cont := startEtcd(t)
	prefix := fmt.Sprintf("/vigil-test-%d/", time.Now().UnixNano())
	var mu sync.Mutex
	var deadlines []time.Time
	co, err := New(Options{Endpoints: []string{ep}, Prefix: prefix, Instance: "solo", LeaseTTL: 2 * time.Second},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	cl := co.Cluster("c1", Callbacks{WriteDeadline: func(u time.Time) {
		mu.Lock()
		deadlines = append(deadlines, u)
		mu.Unlock()
	}})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = co.Run(ctx) }()
	go func() { defer wg.Done(); cl.Run(ctx) }()
	defer func() { cancel(); wg.Wait(); _ = co.Close() }()
	eventually(t, "acting", 10*time.Second, cl.Acting)
	if _, err := cl.Publish(context.Background(), Record{Term: 1, Writer: "n1", Phase: PhaseServing}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "writes allowed", 5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(deadlines) > 0 && !deadlines[len(deadlines)-1].IsZero()
	})
	// Freeze etcd: renewals stop being answered.
	pid := etcdPID(t, ep)
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	frozen := time.Now()
	eventually(t, "lease no longer valid", 5*time.Second, func() bool { return !co.Valid() })
	if took := time.Since(frozen); took > 2*time.Second {
		t.Fatalf("self-fenced after %s, later than the 2s lease", took)
	}
	if co.State().Lease != "lost" {
		t.Fatalf("state %+v", co.State())
	}
	cont()
	eventually(t, "lease held again", 15*time.Second, co.Valid)
	eventually(t, "caught up", 5*time.Second, cl.CaughtUp)
}

// etcdPID finds the etcd process serving endpoint.
func etcdPID(t *testing.T, ep string) int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(b, []byte("http://"+ep)) {
			var pid int
			fmt.Sscan(e.Name(), &pid)
			return pid
		}
	}
	t.Fatal("etcd process not found")
	return 0
}

// TestResumedInstanceDoesNotActWithANewLease (issue 24, item 4): an
// acting instance is paused past its lease (stalled: no grant, no
// renewal reaches etcd), the other is elected; when it resumes it takes a
// new lease, and at no sampled moment does it act (Acting, or what its
// Elected callback said) while the other one acts. Twice, each instance
// in turn.
func TestResumedInstanceDoesNotActWithANewLease(t *testing.T) {
	ep, _, _ := startEtcd(t)
	prefix := fmt.Sprintf("/vigil-test-%d/", time.Now().UnixNano())
	a := newInstance(t, ep, "a", prefix)
	eventually(t, "a acting", 10*time.Second, a.cl.Acting)
	b := newInstance(t, ep, "b", prefix)
	eventually(t, "b holds a lease", 10*time.Second, b.co.Valid)
	cbActing := func(in *instance) bool {
		in.mu.Lock()
		defer in.mu.Unlock()
		return in.acting
	}
	for round, pair := range [][2]*instance{{a, b}, {b, a}} {
		old, next := pair[0], pair[1]
		if !old.cl.Acting() || next.cl.Acting() {
			t.Fatalf("round %d: %s acting %v, %s acting %v", round, old.cl.Instance(), old.cl.Acting(), next.cl.Instance(), next.cl.Acting())
		}
		stop := make(chan struct{})
		var both, bothCB, samples int
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := next.cl.Acting()
				o := old.cl.Acting()
				ocb := cbActing(old)
				samples++
				if n && o {
					both++
				}
				if n && ocb {
					bothCB++
				}
			}
		}()
		oldLease := old.co.leaseID()
		old.co.stalled.Store(true)
		eventually(t, next.cl.Instance()+" elected", 10*time.Second, next.cl.Acting)
		old.co.stalled.Store(false)
		eventually(t, old.cl.Instance()+" holds a new lease", 10*time.Second, func() bool {
			id := old.co.leaseID()
			return id != 0 && id != oldLease && old.co.Valid()
		})
		time.Sleep(300 * time.Millisecond)
		close(stop)
		<-done
		t.Logf("round %d: %d samples, both acting in %d, %s's Elected callback said acting while %s acted in %d", round, samples, both, old.cl.Instance(), next.cl.Instance(), bothCB)
		if both > 0 || bothCB > 0 {
			t.Fatalf("round %d: %s acted with its new lease while %s was elected (%d of %d samples; callback %d)", round, old.cl.Instance(), next.cl.Instance(), both, samples, bothCB)
		}
		if old.cl.Acting() || cbActing(old) || !next.cl.Acting() || !cbActing(next) {
			t.Fatalf("round %d: after the pause %s acting %v (callback %v), %s acting %v (callback %v)", round,
				old.cl.Instance(), old.cl.Acting(), cbActing(old), next.cl.Instance(), next.cl.Acting(), cbActing(next))
		}
	}
}
