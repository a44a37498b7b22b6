package monitor

import (
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/topology"
)

func fakeOptions(addrs ...string) Options {
	o := Options{Cluster: "fake", User: "monitor", Password: "pw", Interval: 40 * time.Millisecond,
		Timeout: time.Second, ConnectCheckEvery: -1}
	for i, a := range addrs {
		s := Server{Name: "node" + string(rune('1'+i)), Addr: a, Weight: 1, Role: "replica"}
		if i == 0 {
			s.Role = "primary"
		}
		o.Servers = append(o.Servers, s)
	}
	return o
}

// checkOnce runs one check of server 0 the way the probe goroutine does.
func checkOnce(t *testing.T, m *Monitor) *topology.Observation {
	t.Helper()
	opts := m.options()
	return m.probes[0].check(context.Background(), &opts, time.Now())
}

func newTestMonitor(t *testing.T, opts Options) *Monitor {
	t.Helper()
	m, err := New(opts, &topology.Holder{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, p := range m.probes {
			p.closeConn()
		}
	})
	return m
}

func TestCheckPrimary(t *testing.T) {
	f := newFakeServer(t)
	m := newTestMonitor(t, fakeOptions(f.addr()))
	o := checkOnce(t, m)
	if !o.OK || o.Err != "" {
		t.Fatalf("%+v", o)
	}
	if o.Flavor != topology.FlavorMariaDB || o.ReadOnly || o.ServerID != 1 || o.Replica != nil || o.ReplicaErr != "" {
		t.Fatalf("%+v", o)
	}
	if o.GTID.String() != "0-1-42" || o.Connections.MaxConnections != 151 || o.Connections.ThreadsConnected != 3 {
		t.Fatalf("%+v", o)
	}
	if !o.SemiSync.Known || o.SemiSync.SourceOn || o.Overloaded || o.Seq != 1 || o.Took <= 0 {
		t.Fatalf("%+v", o)
	}
	// The connection persists across checks.
	o = checkOnce(t, m)
	if n := f.dialCount(); !o.OK || o.Seq != 2 || n != 1 {
		t.Fatalf("seq %d, %d dials", o.Seq, n)
	}
}

func TestCheckReplica(t *testing.T) {
	f := newFakeServer(t)
	f.set(func(f *fakeServer) { f.answer = replicaScript("Yes", "Yes", "3") })
	m := newTestMonitor(t, fakeOptions(f.addr()))
	o := checkOnce(t, m)
	if !o.OK || !o.ReadOnly || o.Replica == nil {
		t.Fatalf("%+v", o)
	}
	rs := o.Replica
	if !rs.Running() || rs.SecondsBehind != 3 || rs.UsingGTID != "Slave_Pos" || rs.SourcePort != 3306 || o.Lag() != 3 {
		t.Fatalf("%+v", rs)
	}
	f.set(func(f *fakeServer) { f.answer = replicaScript("Connecting", "Yes", "NULL") })
	o = checkOnce(t, m)
	if o.Replica.IORunning != topology.IOConnecting || o.Replica.SecondsBehind != -1 || o.Lag() != -1 {
		t.Fatalf("%+v", o.Replica)
	}
}

func TestCheckReplicaStatusPrivilege(t *testing.T) {
	f := newFakeServer(t)
	f.set(func(f *fakeServer) {
		f.answer = func(q string) reply {
			if strings.HasPrefix(q, "SHOW SLAVE") {
				return reply{err: mysqlproto.NewError(1227, "42000", "Access denied; you need (at least one of) the SLAVE MONITOR privilege(s)")}
			}
			return f.primary(q)
		}
	})
	m := newTestMonitor(t, fakeOptions(f.addr()))
	o := checkOnce(t, m)
	if !o.OK || o.Replica != nil || !strings.Contains(o.ReplicaErr, "1227") {
		t.Fatalf("%+v", o)
	}
}

func TestCheckMySQL8(t *testing.T) {
	f := newFakeServer(t)
	f.set(func(f *fakeServer) {
		f.version = "8.0.36"
		f.answer = func(q string) reply {
			switch {
			case strings.HasPrefix(q, "SELECT @@global."):
				if strings.Contains(q, "gtid_current_pos") {
					return reply{err: mysqlproto.NewError(1193, "HY000", "Unknown system variable 'gtid_current_pos'")}
				}
				return serverVars(q, map[string]string{"version": "8.0.36", "server_id": "3", "read_only": "1",
					"super_read_only": "1", "max_connections": "151",
					"gtid_executed": "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5,\n4a6b2c5d-71ca-11e1-9e33-c80aa9429562:1-3"})
			case strings.HasPrefix(q, "SHOW GLOBAL STATUS"):
				return statusRows(map[string]string{"Threads_connected": "2", "Rpl_semi_sync_replica_status": "ON"})
			case q == "SHOW REPLICA STATUS":
				return reply{cols: []string{"Replica_IO_Running", "Replica_SQL_Running", "Seconds_Behind_Source", "Auto_Position",
					"Executed_Gtid_Set"}, rows: [][]string{{"Yes", "Yes", "0", "1", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"}}}
			}
			return reply{err: mysqlproto.NewError(1064, "42000", "unexpected query %q", q)}
		}
	})
	m := newTestMonitor(t, fakeOptions(f.addr()))
	o := checkOnce(t, m)
	if !o.OK || o.Flavor != topology.FlavorMySQL || !o.SuperReadOnly || o.Replica == nil || o.Replica.UsingGTID != "Auto_Position" {
		t.Fatalf("%+v %v", o, o.Replica)
	}
	if o.GTID.Executed != "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5,4a6b2c5d-71ca-11e1-9e33-c80aa9429562:1-3" {
		t.Fatalf("%q", o.GTID.Executed)
	}
	if !o.SemiSync.ReplicaOn {
		t.Fatalf("%+v", o.SemiSync)
	}
}

func TestCheckTimeout(t *testing.T) {
	f := newFakeServer(t)
	opts := fakeOptions(f.addr())
	opts.Timeout = 150 * time.Millisecond
	m := newTestMonitor(t, opts)
	if o := checkOnce(t, m); !o.OK {
		t.Fatal(o.Err)
	}
	f.setHang(true)
	defer f.setHang(false)
	start := time.Now()
	o := checkOnce(t, m)
	took := time.Since(start)
	if o.OK || o.Refused || o.Overloaded || !strings.Contains(o.Err, "timeout") {
		t.Fatalf("%+v", o)
	}
	if took > time.Second {
		t.Fatalf("a check took %v with a 150ms timeout", took)
	}
	// The broken connection is replaced; the new one hangs too.
	start = time.Now()
	o = checkOnce(t, m)
	if o.OK || !strings.Contains(o.Err, "connecting") || time.Since(start) > time.Second {
		t.Fatalf("%+v after %v", o, time.Since(start))
	}
}

func TestCheckRefused(t *testing.T) {
	f := newFakeServer(t)
	m := newTestMonitor(t, fakeOptions(f.addr()))
	f.close()
	o := checkOnce(t, m)
	if o.OK || !o.Refused || o.ErrCode != 0 {
		t.Fatalf("%+v", o)
	}
}

func TestCheckOverloadAtConnect(t *testing.T) {
	for _, code := range []uint16{1040, 1203, 1226, 1045} {
		f := newFakeServer(t)
		f.set(func(f *fakeServer) { f.greetErr = mysqlproto.NewError(code, "08004", "Too many connections") })
		m := newTestMonitor(t, fakeOptions(f.addr()))
		o := checkOnce(t, m)
		if o.OK || !o.Overloaded || o.OverloadCode != code || o.ErrCode != code || o.Refused {
			t.Fatalf("%d: %+v", code, o)
		}
	}
	// Other errors are failures.
	f := newFakeServer(t)
	f.set(func(f *fakeServer) { f.greetErr = mysqlproto.NewError(1129, "HY000", "Host is blocked") })
	m := newTestMonitor(t, fakeOptions(f.addr()))
	if o := checkOnce(t, m); o.OK || o.Overloaded || o.ErrCode != 1129 {
		t.Fatalf("%+v", o)
	}
	// A wrong password is an overload-like refusal, not death.
	f = newFakeServer(t)
	opts := fakeOptions(f.addr())
	opts.Password = "wrong"
	m = newTestMonitor(t, opts)
	if o := checkOnce(t, m); o.OK || !o.Overloaded || o.OverloadCode != 1045 {
		t.Fatalf("%+v", o)
	}
}

func TestConnectabilityTest(t *testing.T) {
	f := newFakeServer(t)
	opts := fakeOptions(f.addr())
	opts.ConnectCheckEvery = 2
	m := newTestMonitor(t, opts)
	checkOnce(t, m) // connects: that was a fresh connection
	if n := f.dialCount(); n != 1 {
		t.Fatalf("%d dials", n)
	}
	o := checkOnce(t, m) // second check on the same connection: test
	if !o.OK || o.Overloaded {
		t.Fatalf("%+v", o)
	}
	checkOnce(t, m)
	if n := f.dialCount(); n != 2 {
		t.Fatalf("%d dials", n)
	}
	// The server fills up: the monitor connection still works, the test
	// connection gets 1040.
	f.set(func(f *fakeServer) { f.greetErr = mysqlproto.NewError(1040, "08004", "Too many connections") })
	o = checkOnce(t, m)
	if !o.OK || !o.Overloaded || o.OverloadCode != 1040 || !strings.Contains(o.OverloadReason, "too many connections") {
		t.Fatalf("%+v", o)
	}
}

func TestCheckConnectionsFull(t *testing.T) {
	f := newFakeServer(t)
	refused := "0"
	threads := "151"
	f.set(func(f *fakeServer) {
		f.answer = func(q string) reply {
			if strings.HasPrefix(q, "SHOW GLOBAL STATUS") {
				st := defaultStatus()
				st["Threads_connected"] = threads
				st["Connection_errors_max_connections"] = refused
				return statusRows(st)
			}
			return f.primary(q)
		}
	})
	m := newTestMonitor(t, fakeOptions(f.addr()))
	o := checkOnce(t, m)
	if !o.OK || !o.Overloaded || !strings.Contains(o.OverloadReason, "Threads_connected 151 ≥ max_connections 151") {
		t.Fatalf("%+v", o)
	}
	f.set(func(*fakeServer) { threads, refused = "10", "4" })
	o = checkOnce(t, m)
	if !o.OK || !o.Overloaded || !strings.Contains(o.OverloadReason, "4 connections refused") {
		t.Fatalf("%+v", o)
	}
	o = checkOnce(t, m)
	if o.Overloaded {
		t.Fatalf("%+v", o)
	}
}

func TestCheckHeartbeat(t *testing.T) {
	f := newFakeServer(t)
	f.set(func(f *fakeServer) {
		f.answer = func(q string) reply {
			switch {
			case strings.HasPrefix(q, "SELECT MAX(ts)"):
				return reply{cols: []string{"ts", "lag"}, rows: [][]string{{"2026-11-22T12:00:00.125000", "250000"}}}
			case strings.HasPrefix(q, "REPLACE INTO"):
				return reply{}
			}
			return f.primary(q)
		}
	})
	opts := fakeOptions(f.addr())
	opts.Heartbeat = Heartbeat{Table: "percona.heartbeat", Write: true}
	m := newTestMonitor(t, opts)
	o := checkOnce(t, m)
	if !o.OK || o.HeartbeatLag != 0.25 || o.Lag() != 0.25 || !o.HeartbeatTS.Equal(time.Date(2026, 11, 22, 12, 0, 0, 125e6, time.UTC)) {
		t.Fatalf("%+v", o)
	}
	// Not the writer yet (no snapshot names it): no heartbeat write.
	for _, q := range f.queries {
		if strings.HasPrefix(q, "REPLACE") {
			t.Fatal("heartbeat written by a non-writer")
		}
	}
	// A missing table is not a failed check.
	f.set(func(f *fakeServer) {
		f.answer = func(q string) reply {
			if strings.HasPrefix(q, "SELECT MAX(ts)") {
				return reply{err: mysqlproto.NewError(1146, "42S02", "Table 'percona.heartbeat' doesn't exist")}
			}
			return f.primary(q)
		}
	})
	o = checkOnce(t, m)
	if !o.OK || o.HeartbeatLag != -1 || !o.HeartbeatTS.IsZero() {
		t.Fatalf("%+v", o)
	}
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < timeout {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s", timeout, what)
	return 0
}

func stateOf(h *topology.Holder, i int) (topology.State, bool, bool) {
	s := h.Load()
	return s.Servers[i].State, s.Servers[i].Readable, s.Servers[i].Writable
}

func TestMonitorRun(t *testing.T) {
	primary, replica := newFakeServer(t), newFakeServer(t)
	replica.set(func(f *fakeServer) { f.answer = replicaScript("Yes", "Yes", "0") })
	var holder topology.Holder
	m, err := New(fakeOptions(primary.addr(), replica.addr()), &holder, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if s := holder.Load(); s == nil || s.Writer != -1 || len(s.Servers) != 2 {
		t.Fatalf("first snapshot %+v", s)
	}
	events, unsubscribe := m.Subscribe(100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	stopped := false
	defer func() {
		cancel()
		if stopped {
			return
		}
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			t.Fatal("Run did not return after cancel")
		}
	}()

	waitFor(t, "writer node1 and node2 ONLINE", 2*time.Second, func() bool {
		s := holder.Load()
		return s.Writer == 0 && s.Servers[1].State == topology.Online && s.Servers[1].Readable
	})
	if err := m.Run(ctx); err == nil {
		t.Fatal("a second Run must fail")
	}

	// The replica stops answering: out within fail_after × timeout (1s)
	// plus an interval.
	replica.setHang(true)
	took := waitFor(t, "node2 SHUNNED", 6*time.Second, func() bool {
		st, _, _ := stateOf(&holder, 1)
		return st == topology.Shunned
	})
	// Generous: test machines are shared and loaded.
	if took > 4*time.Second {
		st := m.State()
		for _, s := range st.Servers {
			t.Logf("%s seq=%d bad=%d err=%s took=%v", s.Name, s.Seq, s.Bad, s.LastErr, s.Last.Took)
		}
		t.Errorf("shunned after %v", took)
	}
	replica.setHang(false)
	waitFor(t, "node2 ONLINE again", 6*time.Second, func() bool {
		st, r, _ := stateOf(&holder, 1)
		return st == topology.Online && r
	})

	// Operator and failover commands.
	if err := m.SetAdminState("node2", topology.OfflineSoft, "being rebuilt from node1"); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := stateOf(&holder, 1); st != topology.OfflineSoft {
		t.Fatal(st)
	}
	// The reason says who set it (it used to read "set by operator: …"
	// for a rebuild's exclusion too).
	if r := holder.Load().Servers[1].Reason; r != "being rebuilt from node1" {
		t.Errorf("reason %q", r)
	}
	if err := m.SetAdminState("node9", topology.OfflineSoft, ""); err == nil {
		t.Fatal("unknown server accepted")
	}
	_ = m.SetAdminState("node2", topology.Online, "")
	term := holder.Load().Term
	if err := m.Fence("node1", "test"); err != nil {
		t.Fatal(err)
	}
	if s := holder.Load(); s.Writer != -1 || s.Term != term+1 || s.Servers[0].State != topology.OfflineHard {
		t.Fatalf("term before %d: %+v\n%v", term, s, m.Events())
	}
	// node2 is promoted by "the executor" and named the writer.
	replica.set(func(f *fakeServer) { f.answer = f.primary })
	if err := m.SetWriter("node2", "failover test"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node2 writer", time.Second, func() bool { return holder.Load().Writer == 1 })
	if s := holder.Load(); s.Term != term+2 || s.Servers[1].Role != topology.RolePrimary {
		t.Fatalf("%+v", s)
	}
	if err := m.Unfence("node1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node1 conflict", time.Second, func() bool { return holder.Load().Servers[0].Conflict })
	if holder.Load().Writer != 1 {
		t.Fatal("unfenced node1 took the writer back")
	}

	// Observations for the failover engine.
	obs := m.Observations()
	if len(obs) != 2 || obs[1].Last == nil || obs[1].LastOK == nil || obs[1].State != topology.Online || obs[1].LastSuccess.IsZero() {
		t.Fatalf("%+v", obs)
	}

	// Hot reload: thresholds yes, another server list no.
	o := fakeOptions(primary.addr(), replica.addr())
	o.FailAfter = 3
	if err := m.SetOptions(o); err != nil {
		t.Fatal(err)
	}
	if err := m.SetOptions(fakeOptions(primary.addr())); err == nil {
		t.Fatal("a changed server list was accepted")
	}

	// Events went to the log and to the subscriber.
	all := m.Events()
	if len(all) == 0 {
		t.Fatal("no events")
	}
	kinds := map[EventKind]bool{}
	for _, e := range all {
		kinds[e.Kind] = true
		if e.Time.IsZero() || e.Cluster != "fake" {
			t.Fatalf("%+v", e)
		}
	}
	for _, k := range []EventKind{EventStateChange, EventWriterChange, EventConflict} {
		if !kinds[k] {
			t.Errorf("no %s event in %v", k, all)
		}
	}
	got := 0
	for len(events) > 0 {
		<-events
		got++
	}
	if got != len(all) {
		t.Errorf("subscriber got %d of %d events", got, len(all))
	}
	unsubscribe()
	unsubscribe()
	if _, ok := <-events; ok {
		t.Fatal("channel not closed")
	}

	cancel()
	stopped = true
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return")
	}
	// Every monitor connection is closed.
	waitFor(t, "connections closed", time.Second, func() bool {
		primary.mu.Lock()
		defer primary.mu.Unlock()
		return len(primary.conns) == 0
	})
}

func TestEventRing(t *testing.T) {
	var r ring
	r.resize(3)
	for i := range 5 {
		r.add(Event{Reason: string(rune('a' + i))})
	}
	got := ""
	for _, e := range r.all() {
		got += e.Reason
	}
	if got != "cde" {
		t.Fatal(got)
	}
	r.resize(2)
	if all := r.all(); len(all) != 2 || all[1].Reason != "e" {
		t.Fatal(all)
	}
}

func TestOptions(t *testing.T) {
	o := Options{Servers: []Server{{Name: "a", Addr: "x:1"}}}.WithDefaults()
	if o.Type != TypeReplication || o.Interval != DefaultInterval || o.Timeout != DefaultTimeout || o.FailAfter != 2 ||
		o.RecoverAfter != 5 || o.MaxReplicationLag != 30*time.Second || o.ConnectCheckEvery != 4 || o.EventBuffer != 1000 {
		t.Fatalf("%+v", o)
	}
	bad := Options{Type: "mesh", Servers: []Server{{Name: "a"}, {Name: "a", Addr: "y"}}, Heartbeat: Heartbeat{Table: "x; DROP"}}
	err := bad.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"type", "empty address", "twice", "heartbeat"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %s", err, want)
		}
	}
	if _, err := New(Options{}, &topology.Holder{}, nil); err == nil {
		t.Fatal("New accepted no servers")
	}
}

// testLogger sends the monitor's log to the test log (shown with -v or on
// failure).
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestCheckBinlogSettings: a MariaDB check reads what the failover engine
// needs of a candidate (the executor no longer asks for it): log_bin,
// log_slave_updates, the heartbeat period and the replication filters.
func TestCheckBinlogSettings(t *testing.T) {
	f := newFakeServer(t)
	f.set(func(f *fakeServer) {
		f.answer = func(q string) reply {
			switch {
			case strings.HasPrefix(q, "SELECT @@global."):
				v := defaultVars("1")
				v["log_bin"], v["log_slave_updates"] = "1", "0"
				v["rpl_semi_sync_master_enabled"], v["rpl_semi_sync_slave_enabled"] = "ON", "OFF"
				v["rpl_semi_sync_master_wait_no_slave"], v["rpl_semi_sync_master_timeout"] = "ON", "10000"
				return serverVars(q, v)
			case strings.HasPrefix(q, "SHOW GLOBAL STATUS"):
				st := defaultStatus()
				st["Slave_heartbeat_period"] = "1.500"
				return statusRows(st)
			case strings.HasPrefix(q, "SHOW SLAVE STATUS"):
				return reply{cols: append(append([]string(nil), replicaCols...), "Replicate_Do_DB", "Replicate_Ignore_Table"),
					rows: [][]string{append(replicaRow("Yes", "Yes", "0"), "b,a", "")}}
			}
			return reply{}
		}
	})
	m := newTestMonitor(t, fakeOptions(f.addr()))
	o := checkOnce(t, m)
	want := topology.BinlogSettings{Read: true, LogBin: true, HeartbeatPeriod: 1.5,
		SemiSync: [][]string{{"rpl_semi_sync_master_enabled", "ON"}, {"rpl_semi_sync_slave_enabled", "OFF"},
			{"rpl_semi_sync_master_wait_no_slave", "ON"}, {"rpl_semi_sync_master_timeout", "10000"}}}
	if !o.OK || !reflect.DeepEqual(o.Binlog, want) {
		t.Fatalf("binlog settings %+v, want %+v (%+v)", o.Binlog, want, o)
	}
	if o.Replica == nil || o.Replica.Filters != "Replicate_Do_DB=a,b;Replicate_Ignore_Table=" {
		t.Fatalf("replica %+v", o.Replica)
	}
}

// TestCheckFresh: the servers are checked at once, not at their next
// interval, and only checks started after the call count; a server that
// does not answer costs the check's timeout, not a hang.
func TestCheckFresh(t *testing.T) {
	primary, replica := newFakeServer(t), newFakeServer(t)
	replica.set(func(f *fakeServer) { f.answer = replicaScript("Yes", "Yes", "0") })
	opts := fakeOptions(primary.addr(), replica.addr())
	opts.Interval, opts.Timeout = time.Hour, 200*time.Millisecond
	var holder topology.Holder
	m, err := New(opts, &holder, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.CheckFresh(context.Background(), "node1"); len(got) != 0 {
		t.Fatalf("before Run: %v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	time.Sleep(100 * time.Millisecond) // the first checks
	start := time.Now()
	got := m.CheckFresh(ctx, "node1", "node2", "nosuch")
	if len(got) != 2 || got["node1"] == nil || got["node2"] == nil {
		t.Fatalf("CheckFresh: %v", got)
	}
	for name, o := range got {
		if !o.OK || o.Time.Before(start) || o.Seq < 2 {
			t.Fatalf("%s: %+v", name, o)
		}
	}
	if got["node2"].Replica == nil {
		t.Fatalf("node2: no replica status")
	}
	replica.setHang(true)
	defer replica.setHang(false)
	t0 := time.Now()
	got = m.CheckFresh(ctx, "node2")
	if o := got["node2"]; o != nil && o.OK || time.Since(t0) > 2*time.Second {
		t.Fatalf("a hung server: %+v after %s", o, time.Since(t0))
	}
}
