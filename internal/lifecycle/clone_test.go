package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/agent"
	"github.com/vigil-db/vigil/internal/flavor"
	"github.com/vigil-db/vigil/internal/topology"
)

type fakeAgent struct {
	backup     []byte
	backupErr  error
	restoreErr error
	gtid       string
	block      chan struct{} // Backup waits for it when set
	writable   bool
	free       int64 // FreeBytes in the status (0: unknown)
	copyBytes  int64 // CopyBytes in the status (0: unknown)
	received   bytes.Buffer
	cleaned    bool
}

func (a *fakeAgent) Status(context.Context) (agent.Status, error) {
	return agent.Status{Running: true, Answering: true, ReadOnly: !a.writable, DatadirBytes: int64(len(a.backup)), FreeBytes: a.free, CopyBytes: a.copyBytes}, nil
}

func (a *fakeAgent) Backup(ctx context.Context, w io.Writer, _ agent.BackupOptions) (int64, error) {
	if a.block != nil {
		select {
		case <-a.block:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	n, err := w.Write(a.backup)
	if err != nil {
		return int64(n), err
	}
	return int64(n), a.backupErr
}

func (a *fakeAgent) Restore(ctx context.Context, r io.Reader, _ agent.RestoreOptions) (agent.RestoreResult, error) {
	n, err := io.Copy(&a.received, r)
	if err != nil {
		return agent.RestoreResult{}, fmt.Errorf("stream: %w", err)
	}
	if a.restoreErr != nil {
		return agent.RestoreResult{}, a.restoreErr
	}
	return agent.RestoreResult{BytesReceived: n, GTID: a.gtid, OldDatadir: "/data.vigil-old-1"}, nil
}

func (a *fakeAgent) Cleanup(context.Context) (agent.CleanupResult, error) {
	a.cleaned = true
	return agent.CleanupResult{Removed: []string{"/data.vigil-old-1"}}, nil
}

type fakeSQL struct {
	mu     sync.Mutex
	ran    []string
	status [][]string // rows of SHOW SLAVE STATUS answered in turn (last repeats)
	err    error
}

var statusCols = []string{"Slave_IO_Running", "Slave_SQL_Running", "Last_IO_Errno", "Last_IO_Error", "Last_SQL_Errno", "Last_SQL_Error"}

func (s *fakeSQL) Run(_ context.Context, addr string, stmts ...string) ([]string, [][]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, nil, s.err
	}
	s.ran = append(s.ran, stmts...)
	if len(stmts) == 1 && strings.HasPrefix(stmts[0], "SHOW") {
		row := s.status[0]
		if len(s.status) > 1 {
			s.status = s.status[1:]
		}
		return statusCols, [][]string{row}, nil
	}
	return nil, nil, nil
}

type fakeRouting struct {
	mu     sync.Mutex
	states []string
}

func (r *fakeRouting) set(server string, st topology.State, reason string) error {
	r.mu.Lock()
	r.states = append(r.states, server+"="+st.String()+" ("+reason+")")
	r.mu.Unlock()
	return nil
}

func (r *fakeRouting) Exclude(_ context.Context, server, reason string) error {
	return r.set(server, topology.OfflineHard, reason)
}

func (r *fakeRouting) Include(_ context.Context, server, reason string) error {
	return r.set(server, topology.Online, reason)
}

type events struct {
	mu   sync.Mutex
	list []string
}

func (e *events) add(kind, msg string) {
	e.mu.Lock()
	e.list = append(e.list, kind+": "+msg)
	e.mu.Unlock()
}

func setup(donor, target *fakeAgent, sql *fakeSQL) (Plan, Deps, *fakeRouting, *events) {
	rt, ev := &fakeRouting{}, &events{}
	p := Plan{Cluster: "c", Target: "n3", TargetAddr: "127.0.0.1:3", Donor: "n2", DonorReason: "named", DonorAgent: "127.0.0.1:72", ReplUser: "repl", ReplPass: "s3cret"}
	d := Deps{Donor: donor, Target: target, SQL: sql, Routing: rt, Event: ev.add, Poll: time.Millisecond, ReplicaTimeout: time.Second,
		Writer: func() (Writer, error) { return Writer{Name: "n1", Addr: "127.0.0.1:1", Flavor: flavor.MariaDB}, nil }}
	return p, d, rt, ev
}

func runOne(t *testing.T, p Plan, d Deps) Progress {
	t.Helper()
	m := NewManager()
	if _, err := m.Start(context.Background(), p, d); err != nil {
		t.Fatal(err)
	}
	m.Wait()
	_, fin := m.List()
	if len(fin) != 1 {
		t.Fatalf("finished: %+v", fin)
	}
	return fin[0]
}

func TestCloneRuns(t *testing.T) {
	donor := &fakeAgent{backup: bytes.Repeat([]byte("x"), 1<<20)}
	target := &fakeAgent{gtid: "0-1-42"}
	sql := &fakeSQL{status: [][]string{{"Connecting", "Yes", "0", "", "0", ""}, {"Yes", "Yes", "0", "", "0", ""}}}
	p, d, rt, ev := setup(donor, target, sql)
	var counted int64
	d.OnBytes = func(n int64) { counted += n }
	pr := runOne(t, p, d)
	if pr.Phase != PhaseDone || pr.Error != "" || pr.Bytes != 1<<20 || counted != 1<<20 || pr.GTID != "0-1-42" || pr.Running || pr.Finished == nil {
		t.Fatalf("progress: %+v", pr)
	}
	if target.received.Len() != 1<<20 || !target.cleaned {
		t.Fatalf("target received %d bytes, cleaned %t", target.received.Len(), target.cleaned)
	}
	want := []string{"n3=OFFLINE_HARD (being cloned from n2)", "n3=ONLINE (cloned from n2)"}
	if strings.Join(rt.states, "|") != strings.Join(want, "|") {
		t.Fatalf("routing: %q", rt.states)
	}
	all := strings.Join(sql.ran, "; ")
	for _, w := range []string{"SET GLOBAL read_only = 1", "RESET SLAVE ALL", "SET GLOBAL gtid_slave_pos = '0-1-42'",
		"MASTER_HOST='127.0.0.1', MASTER_PORT=1", "MASTER_USE_GTID=slave_pos", "START SLAVE"} {
		if !strings.Contains(all, w) {
			t.Errorf("statements lack %q: %s", w, all)
		}
	}
	if len(ev.list) != 2 || !strings.HasPrefix(ev.list[0], "clone_started: cloning n3 from n2") || !strings.HasPrefix(ev.list[1], "clone_finished: n3 cloned from n2") {
		t.Fatalf("events: %q", ev.list)
	}
	if strings.Contains(strings.Join(ev.list, ""), "s3cret") {
		t.Fatal("an event shows the replication password")
	}
}

// A failure at any step leaves the target out of routing, and says so.
func TestCloneFailuresLeaveTargetOut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		donor  *fakeAgent
		target *fakeAgent
		sql    *fakeSQL
		want   string
	}{
		{"backup fails", &fakeAgent{backup: []byte("half"), backupErr: errors.New("mariadb-backup exited 1")}, &fakeAgent{gtid: "0-1-1"},
			&fakeSQL{status: [][]string{{"Yes", "Yes", "0", "", "0", ""}}}, "mariadb-backup exited 1"},
		{"restore refused", &fakeAgent{backup: []byte("data")}, &fakeAgent{restoreErr: errors.New("no_space")},
			&fakeSQL{status: [][]string{{"Yes", "Yes", "0", "", "0", ""}}}, "restore: no_space"},
		{"no gtid", &fakeAgent{backup: []byte("data")}, &fakeAgent{},
			&fakeSQL{status: [][]string{{"Yes", "Yes", "0", "", "0", ""}}}, "carries no GTID"},
		{"replication error", &fakeAgent{backup: []byte("data")}, &fakeAgent{gtid: "0-1-1"},
			&fakeSQL{status: [][]string{{"Yes", "No", "0", "", "1062", "Duplicate entry"}}}, "SQL thread error 1062"},
		{"never connects", &fakeAgent{backup: []byte("data")}, &fakeAgent{gtid: "0-1-1"},
			&fakeSQL{status: [][]string{{"Connecting", "Yes", "2003", "can't connect", "0", ""}}}, "not replicating after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, d, rt, ev := setup(tc.donor, tc.target, tc.sql)
			pr := runOne(t, p, d)
			if pr.Phase != PhaseFailed || !strings.Contains(pr.Error, tc.want) {
				t.Fatalf("progress: %+v, want error containing %q", pr, tc.want)
			}
			for _, s := range rt.states {
				if strings.Contains(s, "ONLINE") && !strings.Contains(s, "OFFLINE") {
					t.Fatalf("the target was routed after a failure: %q", rt.states)
				}
			}
			last := ev.list[len(ev.list)-1]
			if !strings.HasPrefix(last, "clone_failed:") || !strings.Contains(last, "stays out of routing (OFFLINE_HARD)") || !strings.Contains(last, "vigil ctl clone n3") {
				t.Fatalf("event: %s", last)
			}
		})
	}
}

// A preflight failure changes nothing: the target stays routed.
func TestClonePreflight(t *testing.T) {
	p, d, rt, ev := setup(&fakeAgent{backup: []byte("data")}, &fakeAgent{writable: true}, &fakeSQL{})
	pr := runOne(t, p, d)
	if pr.Phase != PhaseFailed || !strings.Contains(pr.Error, "read_only=OFF") {
		t.Fatalf("progress: %+v", pr)
	}
	if len(rt.states) != 0 {
		t.Fatalf("routing touched: %q", rt.states)
	}
	if len(ev.list) != 1 || !strings.Contains(ev.list[0], "Nothing was changed: n3 is still routed") {
		t.Fatalf("events: %q", ev.list)
	}
}

// A target without room for a copy of the donor's datadir is refused
// before it leaves routing, with both sizes in the message. The copy is
// the datadir without what a restored server starts empty (binary and
// relay logs: the agent's CopyBytes): a donor whose datadir is mostly
// binary logs fits.
func TestClonePreflightNoSpace(t *testing.T) {
	p, d, _, _ := setup(&fakeAgent{backup: make([]byte, 3<<20), copyBytes: 512 << 10}, &fakeAgent{free: 1 << 20}, &fakeSQL{})
	if pr := runOne(t, p, d); pr.Bytes == 0 || strings.Contains(pr.Error, "disk space") {
		t.Fatalf("a copy of 0.5 MiB into 1 MiB free did not stream: %+v", pr)
	}
	p, d, rt, ev := setup(&fakeAgent{backup: make([]byte, 3<<20), copyBytes: 2 << 20}, &fakeAgent{free: 1 << 20}, &fakeSQL{})
	pr := runOne(t, p, d)
	want := "target n3 has too little disk space: 1.0 MiB free beside its datadir, a copy of the donor's datadir needs 2.0 MiB"
	if pr.Phase != PhaseFailed || !strings.Contains(pr.Error, want) {
		t.Fatalf("progress: %+v, want an error with %q", pr, want)
	}
	if len(rt.states) != 0 || len(ev.list) != 1 || !strings.Contains(ev.list[0], "Nothing was changed") {
		t.Fatalf("routing %q, events %q", rt.states, ev.list)
	}
}

// One clone per cluster and per donor agent at a time.
func TestOneCloneAtATime(t *testing.T) {
	block := make(chan struct{})
	donor := &fakeAgent{backup: []byte("data"), block: block}
	p, d, _, _ := setup(donor, &fakeAgent{gtid: "0-1-1"}, &fakeSQL{status: [][]string{{"Yes", "Yes", "0", "", "0", ""}}})
	m := NewManager()
	first, err := m.Start(context.Background(), p, d)
	if err != nil {
		t.Fatal(err)
	}
	if busy, servers := m.Busy("c"); !busy || !servers["n2"] || !servers["n3"] {
		t.Fatalf("busy: %t %v", busy, servers)
	}
	var r *Refusal
	if _, err := m.Start(context.Background(), p, d); !errors.As(err, &r) || !strings.Contains(err.Error(), "cluster c already runs a clone") {
		t.Fatalf("second clone in the cluster: %v", err)
	}
	other := p
	other.Cluster = "d"
	if _, err := m.Start(context.Background(), other, d); !errors.As(err, &r) || !strings.Contains(err.Error(), "already serves a clone") {
		t.Fatalf("second clone from the donor's agent: %v", err)
	}
	if running, _ := m.List(); len(running) != 1 || running[0].ID != first.ID || !running[0].Running {
		t.Fatalf("running: %+v", running)
	}
	close(block)
	m.Wait()
	if pr, ok := m.Get(first.ID); !ok || pr.Phase != PhaseDone {
		t.Fatalf("first: %+v", pr)
	}
	if m.Running("c") != 0 {
		t.Fatal("still running")
	}
}

// A target that runs out of space mid-stream fails the clone: another
// donor would fill the same disk.
func TestCloneTargetFullNotRestarted(t *testing.T) {
	full := &agent.Error{Status: 507, Code: agent.CodeNoSpace, Message: "the file system of /var/lib ran out of space during the restore"}
	p, d, _, _ := setup(&fakeAgent{backup: []byte("data")}, &fakeAgent{restoreErr: full}, &fakeSQL{})
	d.NextDonor = func(context.Context, map[string]bool) (Donor, error) {
		t.Error("the clone restarted from another donor after the target's disk filled")
		return Donor{}, errors.New("no")
	}
	pr := runOne(t, p, d)
	if pr.Phase != PhaseFailed || !strings.Contains(pr.Error, "ran out of space") || pr.DonorRestarts != 0 {
		t.Fatalf("progress: %+v", pr)
	}
}

// A stream that fails from a donor Vigil chose restarts from the next
// one; a named donor is never replaced.
func TestCloneRestartsFromAnotherDonor(t *testing.T) {
	bad := &fakeAgent{backup: []byte("half"), backupErr: errors.New("mariadb-backup exited 1")}
	good := &fakeAgent{backup: []byte("the whole backup")}
	target := &fakeAgent{gtid: "0-1-7"}
	p, d, _, ev := setup(bad, target, &fakeSQL{status: [][]string{{"Yes", "Yes", "0", "", "0", ""}}})
	var asked []map[string]bool
	d.NextDonor = func(_ context.Context, failed map[string]bool) (Donor, error) {
		asked = append(asked, failed)
		return Donor{Name: "n1", Reason: "the writer: no other member can serve", AgentAddr: "127.0.0.1:71", Agent: good}, nil
	}
	pr := runOne(t, p, d)
	if pr.Phase != PhaseDone || pr.Donor != "n1" || pr.DonorRestarts != 1 || pr.Bytes != int64(len(good.backup)) {
		t.Fatalf("progress: %+v", pr)
	}
	if len(asked) != 1 || !asked[0]["n2"] {
		t.Fatalf("NextDonor asked with %v", asked)
	}
	if all := strings.Join(ev.list, "\n"); !strings.Contains(all, "clone_donor_changed: the stream from n2 failed") || !strings.Contains(all, "clone_finished: n3 cloned from n1") {
		t.Fatalf("events:\n%s", all)
	}

	p, d, _, _ = setup(bad, &fakeAgent{gtid: "0-1-7"}, &fakeSQL{})
	p.Named = true
	d.NextDonor = func(context.Context, map[string]bool) (Donor, error) {
		t.Fatal("a named donor was replaced")
		return Donor{}, nil
	}
	if pr := runOne(t, p, d); pr.Phase != PhaseFailed || pr.Donor != "n2" {
		t.Fatalf("named donor: %+v", pr)
	}
}

// peerFake is a fakeAgent that can stream agent to agent: its status says
// so, it issues tickets, and as a target it pulls from the donor it was
// given the ticket of.
type peerFake struct {
	*fakeAgent
	noPull  bool
	ticket  string
	donors  map[string]*peerFake // by agent address
	pulls   int
	extract float64
	// progress is what Progress answers while a pull runs; seen is
	// whether the clone read it before the pull ended.
	mu       sync.Mutex
	progress *agent.RestoreProgress
	polled   chan struct{}
	told     bool
}

func (a *peerFake) Status(ctx context.Context) (agent.Status, error) {
	st, err := a.fakeAgent.Status(ctx)
	st.PeerPull = !a.noPull
	return st, err
}

func (a *peerFake) Progress(context.Context) (*agent.RestoreProgress, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.progress == nil {
		return nil, nil
	}
	p := *a.progress
	if a.polled != nil && !a.told {
		close(a.polled)
		a.told = true
	}
	return &p, nil
}

func (a *peerFake) Ticket(_ context.Context, rate int64) (agent.TicketResult, error) {
	a.ticket = fmt.Sprintf("t-%d", rate)
	return agent.TicketResult{Ticket: a.ticket}, nil
}

func (a *peerFake) RestoreFrom(ctx context.Context, from, ticket string, o agent.RestoreOptions) (agent.RestoreResult, error) {
	d := a.donors[from]
	if d == nil || ticket == "" || ticket != d.ticket {
		return agent.RestoreResult{}, &agent.Error{Status: 502, Code: agent.CodeNoPeer, Message: "no valid backup ticket"}
	}
	d.ticket = ""
	a.pulls++
	if a.polled != nil {
		// Half the stream arrived; the rest once the clone polled it.
		a.mu.Lock()
		a.progress = &agent.RestoreProgress{Phase: agent.RestoreReceiving, Bytes: int64(len(d.backup) / 2), From: from}
		a.mu.Unlock()
		<-a.polled
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := d.Backup(ctx, pw, agent.BackupOptions{})
		pw.CloseWithError(err)
	}()
	res, err := a.fakeAgent.Restore(ctx, pr, o)
	res.ExtractSeconds = a.extract
	return res, err
}

// Both agents can: the target's agent pulls the stream itself with the
// donor's ticket (Vigil relays nothing), the progress counts its bytes
// and the rate is the target's own timing. A donor that cannot: relayed.
func TestCloneAgentToAgent(t *testing.T) {
	for _, donorPulls := range []bool{true, false} {
		donor := &peerFake{fakeAgent: &fakeAgent{backup: bytes.Repeat([]byte("x"), 1<<20)}, noPull: !donorPulls}
		target := &peerFake{fakeAgent: &fakeAgent{gtid: "0-1-42"}, extract: 0.5}
		sql := &fakeSQL{status: [][]string{{"Yes", "Yes", "0", "", "0", ""}}}
		p, d, _, ev := setup(donor.fakeAgent, target.fakeAgent, sql)
		d.Donor, d.Target = donor, target
		target.donors = map[string]*peerFake{p.DonorAgent: donor}
		p.Rate = 7
		var counted int64
		d.OnBytes = func(n int64) { counted += n }
		pr := runOne(t, p, d)
		if pr.Phase != PhaseDone || pr.Bytes != 1<<20 || counted != 1<<20 || target.received.Len() != 1<<20 {
			t.Fatalf("donor pulls %v: progress %+v, counted %d, received %d", donorPulls, pr, counted, target.received.Len())
		}
		want, path := 0, PathRelayed
		if donorPulls {
			want, path = 1, PathDirect
			if pr.RateBytes != float64(1<<20)/0.5 {
				t.Errorf("rate %.0f, want the target's own timing %.0f", pr.RateBytes, float64(1<<20)/0.5)
			}
		}
		if target.pulls != want || pr.Path != path || !strings.Contains(ev.list[0], "the stream "+path) {
			t.Errorf("donor pulls %v: %d pulls, path %q, event %q", donorPulls, target.pulls, pr.Path, ev.list[0])
		}
	}
}

// The target's agent cannot open the donor's stream (another CA, a
// firewall): nothing streamed, so Vigil relays it, and says so.
func TestCloneAgentToAgentFallsBack(t *testing.T) {
	donor := &peerFake{fakeAgent: &fakeAgent{backup: []byte("data")}}
	target := &peerFake{fakeAgent: &fakeAgent{gtid: "0-1-42"}} // knows no donor: no_peer
	sql := &fakeSQL{status: [][]string{{"Yes", "Yes", "0", "", "0", ""}}}
	p, d, _, _ := setup(donor.fakeAgent, target.fakeAgent, sql)
	d.Donor, d.Target = donor, target
	pr := runOne(t, p, d)
	if pr.Phase != PhaseDone || target.received.String() != "data" || !strings.HasPrefix(pr.Path, PathRelayed+" (agent to agent failed") {
		t.Fatalf("progress %+v, received %q", pr, target.received.String())
	}
}

// While the target's agent pulls, the clone's progress follows the
// agent's own count (its cheap progress read), not only the end result.
func TestCloneAgentToAgentProgress(t *testing.T) {
	donor := &peerFake{fakeAgent: &fakeAgent{backup: bytes.Repeat([]byte("x"), 1<<20)}}
	target := &peerFake{fakeAgent: &fakeAgent{gtid: "0-1-42"}, polled: make(chan struct{})}
	sql := &fakeSQL{status: [][]string{{"Yes", "Yes", "0", "", "0", ""}}}
	p, d, _, _ := setup(donor.fakeAgent, target.fakeAgent, sql)
	d.Donor, d.Target = donor, target
	target.donors = map[string]*peerFake{p.DonorAgent: donor}
	var mu sync.Mutex
	var adds []int64
	d.OnBytes = func(n int64) { mu.Lock(); adds = append(adds, n); mu.Unlock() }
	pr := runOne(t, p, d)
	mu.Lock()
	defer mu.Unlock()
	if pr.Phase != PhaseDone || pr.Bytes != 1<<20 || len(adds) != 2 || adds[0] != 1<<19 || adds[1] != 1<<19 {
		t.Fatalf("progress %+v, counted in %v: want half from the agent's progress, the rest at the end", pr, adds)
	}
}
