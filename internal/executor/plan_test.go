package executor

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/topology"
)

// recClient is a fake Client: it records every statement and answers the
// reads a plan makes (waits succeed, replicas replicate, positions are
// equal).
type recClient struct {
	mu    sync.Mutex
	ran   []string // "server: statement"
	mysql bool
}

func (c *recClient) Run(_ context.Context, server, _ string, _ time.Duration, stmts ...string) ([]string, [][]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var cols []string
	var rows [][]string
	for _, q := range stmts {
		c.ran = append(c.ran, server+": "+q)
		cols, rows = nil, nil
		pos := "0-1-100"
		if c.mysql {
			pos = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100"
		}
		switch {
		case strings.HasPrefix(q, "SELECT MASTER_GTID_WAIT"), strings.HasPrefix(q, "SELECT WAIT_FOR_EXECUTED_GTID_SET"):
			rows = [][]string{{"0"}}
		case q == "SHOW SLAVE STATUS" || q == "SHOW REPLICA STATUS":
			cols = []string{"Slave_IO_Running", "Slave_SQL_Running", "Gtid_IO_Pos"}
			rows = [][]string{{"Yes", "Yes", pos}}
		case strings.HasPrefix(q, "SELECT @@global.gtid_current_pos"):
			rows = [][]string{{pos, pos, pos, pos, "1"}}
		case strings.HasPrefix(q, "SELECT @@global.gtid_executed"):
			rows = [][]string{{pos, "1"}}
		case q == "SELECT @@gtid_binlog_pos" || q == "SELECT @@gtid_executed" || q == "SELECT @@gtid_current_pos":
			rows = [][]string{{pos}}
		}
	}
	return cols, rows, nil
}

// planMonitor is a fake Monitor whose SetWriter routes the server at once.
type planMonitor struct {
	mu   sync.Mutex
	snap *topology.Snapshot
	obs  map[string]*topology.Observation
}

func (m *planMonitor) Snapshot() *topology.Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.snap
}

func (m *planMonitor) Observations() []topology.Health {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []topology.Health
	for _, s := range m.snap.Servers {
		out = append(out, topology.Health{Name: s.Name, Last: m.obs[s.Name]})
	}
	return out
}

func (m *planMonitor) SetWriter(server, _ string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	next := *m.snap
	next.Servers = append([]topology.Server(nil), m.snap.Servers...)
	next.Writer = next.Index(server)
	next.Servers[next.Writer].State, next.Servers[next.Writer].Writable = topology.Online, true
	m.snap = &next
	return nil
}
func (m *planMonitor) Fence(string, string) error { return nil }
func (m *planMonitor) Unfence(string) error       { return nil }
func (m *planMonitor) SetTerm(uint64) error       { return nil }
func (m *planMonitor) CheckFresh(context.Context, ...string) map[string]*topology.Observation {
	return nil
}

// Changed: only SetWriter changes the snapshot, and it returns after.
func (m *planMonitor) Changed() <-chan struct{} { return nil }

type nopRouter struct{}

func (nopRouter) Fence(int, string) int             { return 0 }
func (nopRouter) Unfence(int)                       {}
func (nopRouter) Hold(string, time.Duration)        {}
func (nopRouter) Release()                          {}
func (nopRouter) BoundSessions(int) int             { return 0 }
func (nopRouter) KillBound(int) int                 { return 0 }
func (nopRouter) PreFenceConns(int) []uint32        { return nil }
func (nopRouter) ForgetPreFenceConns(int, []uint32) {}

// planCluster is three servers, node1 the primary (down when dead), with
// semi-sync on, in the given flavour.
func planCluster(f topology.Flavor, dead bool) (*planMonitor, map[string]failover.ServerFacts) {
	now := time.Now()
	snap := &topology.Snapshot{Cluster: "c", Type: "replication", Writer: 0, Term: 3}
	obs := map[string]*topology.Observation{}
	facts := map[string]failover.ServerFacts{}
	pos := "0-1-100"
	for i, name := range []string{"node1", "node2", "node3"} {
		addr := "127.0.0.1:" + []string{"3311", "3312", "3313"}[i]
		srv := topology.Server{Name: name, Addr: addr, Role: topology.RoleReplica, State: topology.Online}
		o := &topology.Observation{Server: name, Seq: 2, Time: now, OK: true, Flavor: f, Version: "10.11.6-MariaDB", ReadOnly: true, HeartbeatLag: -1,
			SemiSync: topology.SemiSyncStatus{Known: true}}
		if f == topology.FlavorMySQL {
			o.Version = "8.0.36"
			o.GTID.Executed = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100"
		} else {
			p := topology.MustParseGTIDPos(pos)
			o.GTID = topology.GTIDState{Current: p, Binlog: p, Slave: p}
		}
		fs := failover.ServerFacts{LogBin: true, LogSlaveUpdates: true, SecondsSinceSourceEvent: -1,
			SemiSync: failover.SemiSyncSettings{Known: true, SourceEnabled: i == 0, ReplicaEnabled: true, WaitNoReplica: true, Timeout: 10 * time.Second}}
		if i == 0 {
			srv.Role, srv.Writable = topology.RolePrimary, true
			o.ReadOnly = false
			if dead {
				o = &topology.Observation{Server: name, Seq: 3, Time: now, Err: "connection refused", Refused: true}
				fs.FailingSince = now.Add(-10 * time.Second)
				snap.Writer = -1
			}
		} else {
			io := topology.IOYes
			if dead {
				io = topology.IOConnecting
			}
			o.Replica = &topology.ReplicaStatus{SourceHost: "127.0.0.1", SourcePort: 3311, IORunning: io, SQLRunning: true,
				SecondsBehind: 0, SQLRemainingDelay: -1, GTIDIOPos: pos, RetrievedGTIDSet: o.GTID.Executed}
		}
		snap.Servers = append(snap.Servers, srv)
		obs[name] = o
		facts[name] = fs
	}
	return &planMonitor{snap: snap, obs: obs}, facts
}

// Every statement a plan runs is one its rendering shows (the replication
// account masked): failover, switchover and rejoin, MariaDB and MySQL.
// Reads (SELECT, SHOW) are the plan's checks and waits, built from what
// they read.
func TestPlansRunWhatTheyShow(t *testing.T) {
	for _, f := range []topology.Flavor{topology.FlavorMariaDB, topology.FlavorMySQL} {
		for _, kind := range []failover.RequestKind{failover.RequestFailover, failover.RequestSwitchover, failover.RequestRejoin} {
			t.Run(f.String()+"/"+kind.String(), func(t *testing.T) {
				mon, facts := planCluster(f, kind == failover.RequestFailover)
				req := failover.Request{Kind: kind}
				var fenced []string
				if kind == failover.RequestRejoin {
					// node3 was fenced by an earlier failover and returns.
					req.To = "node3"
					fenced = []string{"node3"}
					mon.snap.Servers[2].Fenced = true
					mon.obs["node3"].Replica = nil
				}
				client := &recClient{mysql: f == topology.FlavorMySQL}
				var servers []Server
				for _, s := range mon.snap.Servers {
					servers = append(servers, Server{Name: s.Name, Addr: s.Addr})
				}
				e, err := New(Options{Cluster: "c", Servers: servers, StateDir: t.TempDir(), ReplUser: "repl", ReplPass: "s3cr'et",
					Engine: failover.Options{Auto: true}, Client: client}, mon, nopRouter{}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
				if err != nil {
					t.Fatal(err)
				}
				in := e.input(&req)
				in.Facts, in.Fenced = facts, fenced
				d := failover.Decide(in)
				if d.Plan == nil {
					t.Fatalf("no plan:\n%s", d)
				}
				shown := d.String()
				res := e.execute(context.Background(), d)
				if !res.OK {
					t.Fatalf("plan failed: %s\n%s", res.Message, strings.Join(res.Steps, "\n"))
				}
				shown += "\n" + res.Decision.String() // a failover's second phase
				n := 0
				for _, r := range client.ran {
					server, q, _ := strings.Cut(r, ": ")
					if strings.HasPrefix(q, "SELECT") || strings.HasPrefix(q, "SHOW") || strings.HasPrefix(q, "KILL") {
						continue
					}
					n++
					q = strings.ReplaceAll(strings.ReplaceAll(q, `'repl'`, "'…'"), `'s3cr\'et'`, "'…'")
					if !strings.Contains(shown, q) {
						t.Errorf("%s ran %q, which the plan does not show:\n%s", server, q, shown)
					}
				}
				if n == 0 {
					t.Fatalf("no statement ran")
				}
			})
		}
	}
}
