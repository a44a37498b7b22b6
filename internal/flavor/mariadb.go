package flavor

import (
	"fmt"

	"github.com/vigil-db/vigil/internal/topology"
)

// MariaDB 10.5+: the SLAVE/MASTER forms (MariaDB accepts them in every
// version; Vigil sends the same statements it always did), GTIDs as
// domain-server-sequence with MASTER_GTID_WAIT, semi-sync built in
// (rpl_semi_sync_master_*/_slave_*).
var mariadb = dialect{
	name:   "MariaDB",
	family: topology.FlavorMariaDB,

	startReplica:    "START SLAVE",
	stopReplica:     "STOP SLAVE",
	resetReplicaAll: "RESET SLAVE ALL",
	startSQLThread:  "START SLAVE SQL_THREAD",
	startIOThread:   "START SLAVE IO_THREAD",
	stopIOThread:    "STOP SLAVE IO_THREAD",
	replicaStatus:   "SHOW SLAVE STATUS",
	changeSource: func(host, port, user, pass, mode string) string {
		return fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%s, MASTER_USER=%s, MASTER_PASSWORD=%s, MASTER_USE_GTID=%s, MASTER_HEARTBEAT_PERIOD=0.25, MASTER_CONNECT_RETRY=1", host, port, user, pass, mode)
	},

	readOnlyOn:  []string{"SET GLOBAL read_only = 1"},
	readOnlyOff: []string{"SET GLOBAL read_only = 0"},

	waitFunc:   "MASTER_GTID_WAIT",
	binlogPos:  "@@gtid_binlog_pos",
	currentPos: "@@gtid_current_pos",
	positions:  "SELECT @@global.gtid_current_pos, @@global.gtid_binlog_pos, @@global.gtid_slave_pos, @@global.gtid_binlog_state, @@global.read_only",
	parsePositions: func(r []string, o *topology.Observation) bool {
		if len(r) != 5 {
			return false
		}
		mariadbPositions(r[0], r[1], r[2], r[3], o)
		o.ReadOnly = topology.ParseBool(r[4])
		return true
	},
	parseCheck: func(v map[string]string, o *topology.Observation) {
		mariadbPositions(v["gtid_current_pos"], v["gtid_binlog_pos"], v["gtid_slave_pos"], v["gtid_binlog_state"], o)
		o.Binlog.Read = true
		o.Binlog.LogBin, o.Binlog.LogReplicaUpdates = v["log_bin"] == "1", v["log_slave_updates"] == "1"
	},

	logBin:            "SELECT @@log_bin, @@log_slave_updates",
	heartbeatPeriod:   "SHOW GLOBAL STATUS LIKE 'Slave_heartbeat_period'",
	receivedHeartbeat: "SHOW GLOBAL STATUS LIKE 'Slave_received_heartbeats'",
	longestQuery:      "SELECT IFNULL(MAX(TIME),0) FROM information_schema.PROCESSLIST WHERE COMMAND NOT IN ('Sleep','Binlog Dump','Daemon','Slave_IO','Slave_SQL','Slave_worker') AND USER NOT IN ('system user','event_scheduler') AND ID <> CONNECTION_ID()",

	semiSync:           [][2]string{{"rpl_semi_sync_master", "rpl_semi_sync_slave"}},
	semiSyncEnabledVar: "rpl_semi_sync_master_enabled",
	semiSyncSettingVars: []string{"rpl_semi_sync_master_enabled", "rpl_semi_sync_slave_enabled",
		"rpl_semi_sync_master_wait_no_slave", "rpl_semi_sync_master_timeout"},
	killConnTimeout: "rpl_semi_sync_slave_kill_conn_timeout",

	checkVariables: []string{"gtid_current_pos", "gtid_binlog_pos", "gtid_slave_pos", "gtid_binlog_state", "log_bin", "log_slave_updates"},
	checkStatus:    checkStatusBoth,
}

// checkStatusBoth are the status names of MariaDB and MySQL 8.0 checks:
// both semi-sync plugins' names (MySQL 8.0 loads either), and MariaDB's
// heartbeat counter, read at every check so that when the source went
// silent is known from before its checks fail.
var checkStatusBoth = []string{
	"Threads_connected", "Connection_errors_max_connections", "Uptime",
	"Rpl_semi_sync_master_status", "Rpl_semi_sync_master_clients", "Rpl_semi_sync_master_no_tx",
	"Rpl_semi_sync_master_wait_sessions", "Rpl_semi_sync_slave_status",
	"Rpl_semi_sync_source_status", "Rpl_semi_sync_source_clients", "Rpl_semi_sync_source_no_tx",
	"Rpl_semi_sync_source_wait_sessions",
	"Rpl_semi_sync_replica_status",
	"Slave_received_heartbeats", "Slave_heartbeat_period",
}

// mariadbPositions parses MariaDB's GTID variables; a malformed one
// leaves its field empty.
func mariadbPositions(current, binlog, slave, state string, o *topology.Observation) {
	o.GTID.Current, _ = topology.ParseGTIDPos(current)
	o.GTID.Binlog, _ = topology.ParseGTIDPos(binlog)
	o.GTID.Slave, _ = topology.ParseGTIDPos(slave)
	o.GTID.BinlogState, _ = topology.ParseGTIDList(state)
}
