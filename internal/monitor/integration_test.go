package monitor

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/sandbox"
	"github.com/vigil-db/vigil/internal/topology"
)

// These tests run the monitor against real mariadbd processes started by
// internal/sandbox. They need root and MariaDB 10.11 (+ galera-4 for the
// Galera test) and take about a minute; -short skips them.

func integrationSandbox(t *testing.T, topo sandbox.Topology) *sandbox.Sandbox {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs real servers")
	}
	if os.Geteuid() != 0 {
		t.Skip("integration test: needs root to run mariadbd as mysql")
	}
	if _, err := exec.LookPath("mariadbd"); err != nil {
		if _, err := os.Stat("/usr/sbin/mariadbd"); err != nil {
			t.Skip("integration test: mariadbd not installed")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sb, err := sandbox.Up(ctx, sandbox.Options{Dir: filepath.Join(t.TempDir(), "sb"), Topology: topo, Nodes: 3})
	if err != nil {
		t.Fatalf("sandbox: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := sb.Down(ctx, true); err != nil {
			t.Errorf("sandbox down: %v", err)
		}
	})
	return sb
}

// sandboxOptions are the monitor options for a sandbox, with the timings of
// the acceptance criteria: 500ms interval and timeout, fail after 2,
// recover after 5.
func sandboxOptions(sb *sandbox.Sandbox, typ string) Options {
	acc := sb.Accounts()
	o := Options{Cluster: "it", Type: typ, User: acc.Monitor.User, Password: acc.Monitor.Password,
		Interval: 500 * time.Millisecond, Timeout: 500 * time.Millisecond, FailAfter: 2, RecoverAfter: 5,
		MaxReplicationLag: 2 * time.Second}
	for _, n := range sb.Nodes() {
		role := ""
		if typ == TypeReplication {
			role = "replica"
			if n.Role == sandbox.RolePrimary {
				role = "primary"
			}
		}
		o.Servers = append(o.Servers, Server{Name: n.Name, Addr: n.Addr(), Role: role, Weight: 1})
	}
	return o
}

type running struct {
	m      *Monitor
	holder *topology.Holder
	events <-chan Event
	seen   []Event
}

func startMonitor(t *testing.T, opts Options) *running {
	t.Helper()
	r := &running{holder: &topology.Holder{}}
	m, err := New(opts, r.holder, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	r.m = m
	var unsubscribe func()
	r.events, unsubscribe = m.Subscribe(1000)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("monitor did not stop")
		}
		unsubscribe()
	})
	return r
}

// server returns the named server of the current snapshot.
func (r *running) server(name string) topology.Server {
	s := r.holder.Load()
	return s.Servers[s.Index(name)]
}

func (r *running) writer() string {
	if w := r.holder.Load().WriterServer(); w != nil {
		return w.Name
	}
	return ""
}

// waitEvent waits for an event of kind about server.
func (r *running) waitEvent(t *testing.T, kind EventKind, server string, timeout time.Duration) Event {
	t.Helper()
	for _, e := range r.seen {
		if e.Kind == kind && e.Server == server {
			return e
		}
	}
	deadline := time.After(timeout)
	for {
		select {
		case e := <-r.events:
			r.seen = append(r.seen, e)
			if e.Kind == kind && e.Server == server {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s event for %s within %v; events: %v", kind, server, timeout, r.m.Events())
		}
	}
}

func sqlOn(t *testing.T, sb *sandbox.Sandbox, node string, stmts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sb.Exec(ctx, node, stmts...); err != nil {
		t.Fatalf("%s: %v", node, err)
	}
}

func TestIntegrationReplication(t *testing.T) {
	sb := integrationSandbox(t, sandbox.Replication)
	sqlOn(t, sb, "node1", "CREATE DATABASE IF NOT EXISTS vigil",
		"CREATE TABLE IF NOT EXISTS vigil.heartbeat (ts varchar(26) NOT NULL, server_id int unsigned NOT NULL PRIMARY KEY)",
		"GRANT INSERT, UPDATE, DELETE ON vigil.heartbeat TO 'monitor'@'%'",
		"CREATE TABLE IF NOT EXISTS vigil.t (id int auto_increment primary key, v varchar(100))")
	opts := sandboxOptions(sb, TypeReplication)
	opts.Heartbeat = Heartbeat{Table: "vigil.heartbeat", Write: true}
	r := startMonitor(t, opts)
	ctx := context.Background()

	waitFor(t, "all ONLINE, node1 writer", 20*time.Second, func() bool {
		s := r.holder.Load()
		for _, srv := range s.Servers {
			if srv.State != topology.Online || !srv.Readable {
				return false
			}
		}
		return r.writer() == "node1"
	})
	waitFor(t, "heartbeats on the replicas", 10*time.Second, func() bool {
		o := r.m.Observations()[1].LastOK
		return o != nil && o.HeartbeatLag >= 0
	})
	if s := r.server("node2"); s.Writable || s.Role != topology.RoleReplica || s.GTID == "" || s.LagSeconds < 0 || s.LagSeconds >= 2 {
		t.Fatalf("node2: %+v", s)
	}
	obs := r.m.Observations()
	if o := obs[1].LastOK; o == nil || o.Replica == nil || !o.Replica.Running() || o.HeartbeatLag < 0 || o.Flavor != topology.FlavorMariaDB {
		t.Fatalf("node2 observation: %+v", o)
	}
	if o := obs[0].LastOK; o.ReadOnly || !o.SemiSync.Known || o.GTID.Current == nil {
		t.Fatalf("node1 observation: %+v", o)
	}
	term := r.holder.Load().Term

	t.Run("pause", func(t *testing.T) {
		start := time.Now()
		if err := sb.Pause(ctx, "node2"); err != nil {
			t.Fatal(err)
		}
		took := waitFor(t, "node2 out of routing", 10*time.Second, func() bool {
			s := r.server("node2")
			return s.State != topology.Online || !s.Readable
		})
		t.Logf("node2 out of routing %v after SIGSTOP", took)
		if took > 2500*time.Millisecond {
			t.Errorf("node2 left routing after %v, want about 2s (interval 500ms, timeout 500ms, fail_after 2)", took)
		}
		if s := r.server("node2"); s.State != topology.Shunned {
			t.Errorf("node2 %s, want SHUNNED", s.State)
		}
		if err := sb.Resume(ctx, "node2"); err != nil {
			t.Fatal(err)
		}
		back := waitFor(t, "node2 ONLINE", 15*time.Second, func() bool {
			s := r.server("node2")
			return s.State == topology.Online && s.Readable
		})
		t.Logf("node2 back %v after SIGCONT (%v in all)", back, time.Since(start))
		if back < 1500*time.Millisecond {
			t.Errorf("node2 back after %v: recover_after 5 needs 4 intervals after the first good check", back)
		}
	})

	t.Run("sql thread stopped", func(t *testing.T) {
		sqlOn(t, sb, "node3", "STOP SLAVE SQL_THREAD")
		sqlOn(t, sb, "node1", "INSERT INTO vigil.t (v) VALUES ('a'), ('b')")
		waitFor(t, "node3 SHUNNED", 10*time.Second, func() bool {
			s := r.server("node3")
			return s.State == topology.Shunned && !s.Readable
		})
		if s := r.server("node3"); !strings.Contains(s.Reason, "SQL thread not running") {
			t.Errorf("reason %q", s.Reason)
		}
		sqlOn(t, sb, "node3", "START SLAVE SQL_THREAD")
		waitFor(t, "node3 ONLINE", 15*time.Second, func() bool { return r.server("node3").State == topology.Online })
	})

	t.Run("lag", func(t *testing.T) {
		// Delayed apply: the heartbeat the monitor writes on node1 reaches
		// node3 3s late, more than max_replication_lag (2s).
		sqlOn(t, sb, "node3", "STOP SLAVE", "CHANGE MASTER TO MASTER_DELAY=3", "START SLAVE")
		e := r.waitEvent(t, EventLag, "node3", 15*time.Second)
		t.Logf("lag event: %s", e)
		waitFor(t, "node3 SHUNNED for lag", 10*time.Second, func() bool { return r.server("node3").State == topology.Shunned })
		if s := r.server("node3"); !strings.Contains(s.Reason, "max_replication_lag") || s.LagSeconds < 2 {
			t.Errorf("node3 %+v", s)
		}
		sqlOn(t, sb, "node3", "STOP SLAVE", "CHANGE MASTER TO MASTER_DELAY=0", "START SLAVE")
		r.waitEvent(t, EventLagCleared, "node3", 15*time.Second)
		waitFor(t, "node3 ONLINE after catching up", 15*time.Second, func() bool {
			s := r.server("node3")
			return s.State == topology.Online && s.Readable && s.LagSeconds < 1
		})
	})

	t.Run("overload", func(t *testing.T) {
		// Binlog dump threads of the replicas and the monitor connection
		// count; app connections fill the rest of max_connections (10 is
		// MariaDB's minimum).
		sqlOn(t, sb, "node1", "SET GLOBAL max_connections = 5")
		defer sqlOn(t, sb, "node1", "SET GLOBAL max_connections = 151")
		acc := sb.Accounts()
		var held []*mysqlproto.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		var refused error
		for range 10 {
			dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			c, _, err := mysqlproto.Dial(dctx, &mysqlproto.DialConfig{Addr: sb.Addr("node1"), User: acc.App.User, Password: acc.App.Password})
			cancel()
			if err != nil {
				refused = err
				break
			}
			held = append(held, c)
		}
		var se *mysqlproto.SQLError
		if !errors.As(refused, &se) || se.Code != 1040 {
			t.Fatalf("expected error 1040 after %d connections, got %v", len(held), refused)
		}
		t.Logf("node1 full after %d app connections", len(held))
		e := r.waitEvent(t, EventOverloaded, "node1", 10*time.Second)
		t.Logf("overloaded event: %s", e)
		// Still the writer, still ONLINE, for several checks.
		for range 6 {
			if w := r.writer(); w != "node1" {
				t.Fatalf("writer %q while node1 is overloaded", w)
			}
			if s := r.server("node1"); s.State != topology.Online || !s.Writable || !s.Overloaded {
				t.Fatalf("node1 %+v", s)
			}
			time.Sleep(500 * time.Millisecond)
		}
		for _, c := range held {
			c.Close()
		}
		held = nil
		r.waitEvent(t, EventOverloadCleared, "node1", 10*time.Second)
	})

	if w, s := r.writer(), r.holder.Load(); w != "node1" || s.Term != term {
		t.Fatalf("writer %q term %d, want node1 term %d", w, s.Term, term)
	}
	for _, e := range r.m.Events() {
		if e.Kind == EventConflict || e.Kind == EventWriterChange && e.Term != term {
			t.Errorf("unexpected event %s", e)
		}
	}

	t.Run("primary crash", func(t *testing.T) {
		// The replicas' I/O threads reconnect to a dead primary: they keep
		// serving reads; there is no writer and no promotion.
		if err := sb.Kill(ctx, "node1"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "node1 OFFLINE_HARD", 10*time.Second, func() bool { return r.server("node1").State == topology.OfflineHard })
		if w := r.writer(); w != "" {
			t.Fatalf("writer %q with the primary dead", w)
		}
		for range 8 {
			for _, n := range []string{"node2", "node3"} {
				if s := r.server(n); s.State != topology.Online || !s.Readable || s.Writable {
					t.Fatalf("%s: %+v", n, s)
				}
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err := sb.Start(ctx, "node1"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "node1 writer again", 20*time.Second, func() bool { return r.writer() == "node1" })
		if s := r.holder.Load(); s.Term != term+2 {
			t.Errorf("term %d, want %d", s.Term, term+2)
		}
	})
}

func TestIntegrationGalera(t *testing.T) {
	sb := integrationSandbox(t, sandbox.Galera)
	r := startMonitor(t, sandboxOptions(sb, TypeGalera))

	waitFor(t, "all ONLINE with a writer", 20*time.Second, func() bool {
		s := r.holder.Load()
		for _, srv := range s.Servers {
			if srv.State != topology.Online || !srv.Readable || !srv.Writable {
				return false
			}
		}
		return s.Writer >= 0
	})
	// The writer is the node with the lowest wsrep_local_index (equal
	// weights).
	obs := r.m.Observations()
	first := r.writer()
	for _, h := range obs {
		if h.LastOK.Wsrep.LocalIndex < obs[r.holder.Load().Writer].LastOK.Wsrep.LocalIndex {
			t.Fatalf("writer %s does not have the lowest wsrep_local_index", first)
		}
	}
	term := r.holder.Load().Term

	sqlOn(t, sb, first, "SET GLOBAL wsrep_desync = 1")
	waitFor(t, "writer moved", 10*time.Second, func() bool {
		w := r.writer()
		return w != "" && w != first
	})
	second := r.writer()
	if s := r.server(first); s.Readable || s.Writable || s.State == topology.Online {
		t.Fatalf("desynced %s: %+v", first, s)
	}
	if s := r.holder.Load(); s.Term != term+1 {
		t.Fatalf("term %d, want %d", s.Term, term+1)
	}
	t.Logf("writer %s → %s after desync", first, second)

	sqlOn(t, sb, first, "SET GLOBAL wsrep_desync = 0")
	waitFor(t, first+" readable again", 15*time.Second, func() bool {
		s := r.server(first)
		return s.State == topology.Online && s.Readable
	})
	time.Sleep(2 * time.Second)
	if w := r.writer(); w != second {
		t.Fatalf("writer %q, want it to stay on %s", w, second)
	}
	for _, e := range r.m.Events() {
		t.Log(e.String())
	}
}
