package monitor

import (
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// TestReadableWritableTable covers every row of the table in
// docs/monitoring.md for every cluster type, as published once the state
// has settled (enough checks for hysteresis either way).
func TestReadableWritableTable(t *testing.T) {
	type row struct {
		name string
		typ  string
		obs  topology.Observation
		r, w bool
	}
	notOK := failedObs("read tcp: i/o timeout")
	sqlStopped := withReplica(replicaObs(-1), func(rs *topology.ReplicaStatus) { rs.SQLRunning = false })
	sqlError := withReplica(replicaObs(-1), func(rs *topology.ReplicaStatus) {
		rs.SQLRunning, rs.LastSQLErrno, rs.LastSQLError = false, 1062, "Duplicate entry"
	})
	ioStopped := withReplica(replicaObs(-1), func(rs *topology.ReplicaStatus) { rs.IORunning = topology.IONo })
	ioConnecting := withReplica(replicaObs(-1), func(rs *topology.ReplicaStatus) {
		rs.IORunning, rs.LastIOErrno = topology.IOConnecting, 2003
	})
	noReplica := topology.Observation{OK: true, ReadOnly: true, HeartbeatLag: -1}
	rows := []row{
		// MySQL not OK: r=0 w=0 everywhere.
		{"not OK", TypeReadOnly, notOK, false, false},
		{"not OK", TypeReplication, notOK, false, false},
		{"not OK", TypeGalera, notOK, false, false},
		// read_only=OFF: r=1 w=1.
		{"read_only=OFF", TypeReadOnly, writableObs(), true, true},
		{"read_only=OFF", TypeReplication, writableObs(), true, true},
		// read_only=ON, replication OK: r=1 w=0.
		{"read_only=ON repl OK", TypeReadOnly, replicaObs(0), true, false},
		{"read_only=ON repl OK", TypeReplication, replicaObs(0), true, false},
		// read_only=ON, replication not OK: read-only type r=1 w=0,
		// replication type r=0 w=0.
		{"no replica status", TypeReadOnly, noReplica, true, false},
		{"no replica status", TypeReplication, noReplica, false, false},
		{"SQL thread stopped", TypeReadOnly, sqlStopped, true, false},
		{"SQL thread stopped", TypeReplication, sqlStopped, false, false},
		{"SQL thread error", TypeReadOnly, sqlError, true, false},
		{"SQL thread error", TypeReplication, sqlError, false, false},
		{"IO thread stopped", TypeReadOnly, ioStopped, true, false},
		{"IO thread stopped", TypeReplication, ioStopped, false, false},
		{"IO connecting longer than max_replication_lag, writer up", TypeReplication, ioConnecting, false, false},
		// Galera check OK: r=1 w=1; not OK: r=0 w=0.
		{"Galera Synced", TypeGalera, galeraObs(0, nil), true, true},
		{"Galera non-Primary", TypeGalera, galeraObs(0, func(w *topology.WsrepStatus) { w.ClusterStatus = "non-Primary" }), false, false},
		{"Galera not ready", TypeGalera, galeraObs(0, func(w *topology.WsrepStatus) { w.Ready = false }), false, false},
		{"Galera rejecting", TypeGalera, galeraObs(0, func(w *topology.WsrepStatus) { w.RejectQueries = "ALL" }), false, false},
		{"Galera joining", TypeGalera, galeraObs(0, func(w *topology.WsrepStatus) {
			w.LocalState, w.LocalStateComment = topology.WsrepJoining, "Joining"
		}), false, false},
		{"Galera donor", TypeGalera, galeraObs(0, func(w *topology.WsrepStatus) {
			w.LocalState, w.LocalStateComment = topology.WsrepDonor, "Donor/Desynced"
		}), false, false},
		{"Galera desync flag", TypeGalera, galeraObs(0, func(w *topology.WsrepStatus) { w.Desync = true }), false, false},
		{"Galera wsrep off", TypeGalera, galeraObs(0, func(w *topology.WsrepStatus) { w.On = false }), false, false},
		{"Galera no status", TypeGalera, topology.Observation{OK: true, HeartbeatLag: -1}, false, false},
	}
	for _, r := range rows {
		t.Run(r.typ+"/"+r.name, func(t *testing.T) {
			// node1 is a healthy writer; node2 is the server of the row.
			h := newHarness(t, r.typ, 2, func(o *Options) { o.MaxReplicationLag = 300 * time.Millisecond })
			first := writableObs()
			if r.typ == TypeGalera {
				first = galeraObs(0, nil)
			}
			h.round(first, first)
			h.expectWriter("node1")
			h.seeN("node2", 6, r.obs)
			want := topology.Online
			if !r.r {
				want = topology.Shunned
			}
			h.expect("node2", want, r.r, r.w)
			h.expectWriter("node1")
			// The verdict itself, before hysteresis, says the same.
			v := judge(r.typ, &r.obs, &h.opts, judgeEnv{WriterUp: true, IODownFor: time.Hour})
			if v.Readable != r.r || v.Writable != r.w || v.Reason == "" {
				t.Fatalf("judge: %+v", v)
			}
		})
	}
}

func TestJudgeDetails(t *testing.T) {
	opts := Options{MaxReplicationLag: 10 * time.Second}
	up := judgeEnv{WriterUp: true}
	ioConnecting := withReplica(replicaObs(-1), func(rs *topology.ReplicaStatus) { rs.IORunning = topology.IOConnecting })
	cases := []struct {
		name    string
		typ     string
		obs     topology.Observation
		env     judgeEnv
		opts    Options
		r, w    bool
		lagging bool
		reason  string
	}{
		{"IO connecting, writer down: holds what it has", TypeReplication, ioConnecting, judgeEnv{IODownFor: time.Hour}, opts, true, false, false, "replicating"},
		{"IO connecting briefly, writer up", TypeReplication, ioConnecting, judgeEnv{WriterUp: true, IODownFor: 9 * time.Second}, opts, true, false, false, "replicating"},
		{"IO connecting too long, writer up", TypeReplication, ioConnecting, judgeEnv{WriterUp: true, IODownFor: 11 * time.Second}, opts, false, false, false, "I/O thread reconnecting for 11s while the writer is up"},
		{"IO connecting, no lag limit", TypeReplication, ioConnecting, judgeEnv{WriterUp: true, IODownFor: time.Hour}, Options{MaxReplicationLag: -1}, true, false, false, "replicating"},
		{"lag above max", TypeReplication, replicaObs(11), up, opts, false, false, true, "lag 11s > max_replication_lag 10s"},
		{"lag at max", TypeReplication, replicaObs(10), up, opts, true, false, false, "lag 10s"},
		{"lag limit off", TypeReplication, replicaObs(1000), up, Options{MaxReplicationLag: -1}, true, false, false, ""},
		{"read-only type lags too", TypeReadOnly, replicaObs(11), up, opts, false, false, true, "max_replication_lag"},
		{"heartbeat beats Seconds_Behind_Master", TypeReplication, func() topology.Observation {
			o := replicaObs(100)
			o.HeartbeatLag = 0.25
			return o
		}(), up, opts, true, false, false, "lag 0.2s"},
		{"heartbeat lag too high", TypeReplication, func() topology.Observation {
			o := replicaObs(0)
			o.HeartbeatLag = 12.5
			return o
		}(), up, opts, false, false, true, "lag 12s"},
		{"replica status unreadable", TypeReplication, topology.Observation{OK: true, ReadOnly: true, HeartbeatLag: -1,
			ReplicaErr: "ERROR 1227"}, up, opts, false, false, false, "unreadable"},
		{"galera donor readable when configured", TypeGalera, galeraObs(0, func(w *topology.WsrepStatus) {
			w.LocalState, w.LocalStateComment = topology.WsrepDonor, "Donor/Desynced"
		}), up, Options{DesyncedReadable: true}, true, false, false, "Donor/Desynced"},
		{"galera donor rejecting queries", TypeGalera, galeraObs(0, func(w *topology.WsrepStatus) {
			w.LocalState, w.LocalStateComment, w.SSTDonorRejectsQueries = topology.WsrepDonor, "Donor/Desynced", true
		}), up, Options{DesyncedReadable: true}, false, false, false, "Donor"},
		{"galera read_only node", TypeGalera, func() topology.Observation {
			o := galeraObs(0, nil)
			o.ReadOnly = true
			return o
		}(), up, opts, true, false, false, "read_only=ON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := judge(c.typ, &c.obs, &c.opts, c.env)
			if v.Readable != c.r || v.Writable != c.w || v.Lagging != c.lagging || !strings.Contains(v.Reason, c.reason) {
				t.Fatalf("%+v", v)
			}
		})
	}
}
