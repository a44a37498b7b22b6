package monitor

import (
	"slices"
	"strings"
	"testing"

	"github.com/vigil-db/vigil/internal/flavor"
	"github.com/vigil-db/vigil/internal/topology"
)

// Every check in every flavour — a primary and a replica, replication and
// Galera, with a heartbeat table — against the fake server: every
// statement sent is one the check builds from its flavour, and none says
// a word the flavour does not speak (nothing says SLAVE or MASTER to MySQL
// 8.4). The flavour comes from the @@version the check reads.
func TestCheckSpeaksItsFlavour(t *testing.T) {
	for _, c := range []struct {
		version string
		want    flavor.Flavor
		galera  bool
	}{
		{"5.5.5-10.11.19-MariaDB-log", flavor.MariaDB, false},
		{"5.5.5-10.11.19-MariaDB-log", flavor.MariaDB, true},
		{"8.0.36", flavor.MySQL80, false},
		{"8.0.21", flavor.MySQLLegacy, false},
		{"8.4.3", flavor.MySQL84, false},
	} {
		for _, role := range []string{"primary", "replica"} {
			name := c.version + "/" + role
			if c.galera {
				name += "/galera"
			}
			t.Run(name, func(t *testing.T) {
				fl := flavor.Of(c.version)
				if fl != c.want {
					t.Fatalf("%s is %s, want %s", c.version, fl, c.want)
				}
				vars := map[string]string{"version": c.version, "server_id": "1", "read_only": "0", "max_connections": "151",
					"gtid_current_pos": "0-1-42", "gtid_binlog_pos": "0-1-42", "super_read_only": "0",
					"gtid_executed": "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5", "wsrep_on": "ON"}
				src, rep := fl.SemiSyncNames()
				status := map[string]string{"Threads_connected": "3", "R" + src[1:] + "_status": "ON", "R" + rep[1:] + "_status": "OFF",
					"wsrep_local_state": "4", "wsrep_cluster_status": "Primary"}
				cols := replicaCols
				if fl.MySQL() {
					cols = []string{"Replica_IO_State", "Source_Host", "Source_Port", "Replica_IO_Running", "Replica_SQL_Running",
						"Seconds_Behind_Source", "Last_IO_Errno", "Last_IO_Error", "Last_SQL_Errno", "Last_SQL_Error", "Auto_Position", "Executed_Gtid_Set", "SQL_Delay"}
				}
				f := newFakeServer(t)
				f.set(func(f *fakeServer) {
					f.version = c.version
					f.answer = func(q string) reply {
						switch {
						case strings.HasPrefix(q, "SELECT @@global."):
							return serverVars(q, vars)
						case strings.HasPrefix(q, "SHOW GLOBAL STATUS"):
							return statusRows(status)
						case q == fl.ReplicaStatus() && role == "replica":
							return reply{cols: cols, rows: [][]string{{"Waiting", "127.0.0.1", "3306", "Yes", "Yes", "0", "0", "", "0", "", "1", "x", "0"}}}
						case q == fl.ReplicaStatus():
							return reply{cols: cols}
						case strings.HasPrefix(q, "SELECT MAX(ts)"):
							return reply{cols: []string{"ts", "lag"}, rows: [][]string{{"2026-11-27T10:00:00.000000", "1000"}}}
						case strings.HasPrefix(q, "REPLACE INTO"):
							return reply{}
						}
						return reply{err: nil, cols: []string{"unexpected"}}
					}
				})
				opts := fakeOptions(f.addr())
				opts.Heartbeat = Heartbeat{Table: "vigil.heartbeat", Write: true}
				if c.galera {
					opts.Type = TypeGalera
				}
				m := newTestMonitor(t, opts)
				o := checkOnce(t, m)
				if !o.OK {
					t.Fatalf("%+v", o)
				}
				if role == "replica" && o.Replica == nil || !o.SemiSync.SourceOn {
					t.Fatalf("the check did not read the replica status or semi-sync: %+v %+v", o.Replica, o.SemiSync)
				}
				first, _ := variablesSQL(flavor.For(topology.FlavorOf(c.version), ""), c.galera, hasSemiSyncVar(c.version))
				own := []string{first, statusSQL(fl, c.galera), fl.ReplicaStatus(),
					heartbeatWriteSQL(opts.Heartbeat.Table), heartbeatReadSQL(opts.Heartbeat.Table)}
				f.mu.Lock()
				sent := append([]string(nil), f.queries...)
				f.mu.Unlock()
				if len(sent) < 4 {
					t.Fatalf("only %q sent", sent)
				}
				for _, q := range sent {
					if bad := fl.Foreign(q); bad != nil {
						t.Errorf("%s was sent %q, which says %v", fl, q, bad)
					}
					if !slices.Contains(own, q) {
						t.Errorf("%s was sent %q, which its flavour does not build", fl, q)
					}
				}
			})
		}
	}
}
