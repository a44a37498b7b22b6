package flavor

import (
	"fmt"
	"strings"

	"github.com/vigil-db/vigil/internal/topology"
)

// MySQL 8.0.23 to 8.3: the REPLICA/SOURCE statements, auto-positioned
// GTIDs (uuid:1-n) with WAIT_FOR_EXECUTED_GTID_SET, super_read_only. The
// semi-sync variables depend on the plugin loaded (semisync_master:
// rpl_semi_sync_master_*, semisync_source from 8.0.26:
// rpl_semi_sync_source_*); Vigil reads which from the server.
var mysql80 = dialect{
	name:   "MySQL",
	family: topology.FlavorMySQL,

	startReplica:    "START REPLICA",
	stopReplica:     "STOP REPLICA",
	resetReplicaAll: "RESET REPLICA ALL",
	startSQLThread:  "START REPLICA SQL_THREAD",
	startIOThread:   "START REPLICA IO_THREAD",
	stopIOThread:    "STOP REPLICA IO_THREAD",
	replicaStatus:   "SHOW REPLICA STATUS",
	changeSource:    changeReplicationSource,

	readOnlyOn:  []string{"SET GLOBAL read_only = 1", "SET GLOBAL super_read_only = 1"},
	readOnlyOff: []string{"SET GLOBAL super_read_only = 0", "SET GLOBAL read_only = 0"},

	waitFunc:       "WAIT_FOR_EXECUTED_GTID_SET",
	binlogPos:      "@@gtid_executed",
	currentPos:     "@@gtid_executed",
	positions:      "SELECT @@global.gtid_executed, @@global.read_only",
	parsePositions: mysqlPositions,
	parseCheck:     mysqlCheck,

	logBin: "SELECT @@log_bin, @@log_slave_updates",
	// MySQL has no Slave_heartbeat_period status (performance_schema
	// holds it); the read finds nothing, as it always did.
	heartbeatPeriod: "SHOW GLOBAL STATUS LIKE 'Slave_heartbeat_period'",
	longestQuery:    "SELECT IFNULL(MAX(TIME),0) FROM information_schema.PROCESSLIST WHERE COMMAND NOT IN ('Sleep','Binlog Dump','Daemon','Slave_IO','Slave_SQL','Slave_worker') AND USER NOT IN ('system user','event_scheduler') AND ID <> CONNECTION_ID()",

	// semisync_master/_slave, or from 8.0.26 semisync_source/_replica.
	semiSync: [][2]string{{"rpl_semi_sync_master", "rpl_semi_sync_slave"}, {"rpl_semi_sync_source", "rpl_semi_sync_replica"}},

	checkVariables: []string{"super_read_only", "gtid_executed"},
	checkStatus:    checkStatusBoth,
}

func changeReplicationSource(host, port, user, pass, _ string) string {
	return fmt.Sprintf("CHANGE REPLICATION SOURCE TO SOURCE_HOST='%s', SOURCE_PORT=%s, SOURCE_USER=%s, SOURCE_PASSWORD=%s, SOURCE_AUTO_POSITION=1", host, port, user, pass)
}

// mysqlLegacy is MySQL before 8.0.23 (5.7 included): what MySQL 8.0 says,
// in the SLAVE/MASTER forms those versions know.
var mysqlLegacy = func() dialect {
	d := mysql80
	d.name = "MySQL (before 8.0.23)"
	d.startReplica, d.stopReplica, d.resetReplicaAll = "START SLAVE", "STOP SLAVE", "RESET SLAVE ALL"
	d.startSQLThread, d.startIOThread, d.stopIOThread = "START SLAVE SQL_THREAD", "START SLAVE IO_THREAD", "STOP SLAVE IO_THREAD"
	d.replicaStatus = "SHOW SLAVE STATUS"
	d.semiSync = d.semiSync[:1] // semisync_source arrived in 8.0.26
	d.changeSource = func(host, port, user, pass, _ string) string {
		return fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%s, MASTER_USER=%s, MASTER_PASSWORD=%s, MASTER_AUTO_POSITION=1", host, port, user, pass)
	}
	return d
}()

// mysqlPositions reads SELECT @@global.gtid_executed, @@global.read_only
// (gtid_executed comes with newlines between its UUIDs).
func mysqlPositions(r []string, o *topology.Observation) bool {
	if len(r) != 2 {
		return false
	}
	o.GTID.Executed = strings.ReplaceAll(r[0], "\n", "")
	o.ReadOnly = topology.ParseBool(r[1])
	return true
}

func mysqlCheck(v map[string]string, o *topology.Observation) {
	o.GTID.Executed = strings.ReplaceAll(v["gtid_executed"], "\n", "")
	o.SuperReadOnly = topology.ParseBool(v["super_read_only"])
}
