package flavor

// MySQL 8.4+: START/STOP/RESET SLAVE, SHOW SLAVE STATUS, CHANGE MASTER TO
// (and its MASTER_* options), RESET MASTER, SHOW MASTER STATUS and
// log_slave_updates are gone; only the semisync_source/semisync_replica
// plugins exist (rpl_semi_sync_source_*/_replica_*). The statements are
// MySQL 8.0's REPLICA/SOURCE forms; what differs is set here. Nothing sent
// to it may say SLAVE or MASTER: Foreign says which words, and the
// executor's and the monitor's flavour tests hold every statement to it.
var mysql84 = func() dialect {
	d := mysql80
	d.name = "MySQL 8.4"
	d.logBin = "SELECT @@log_bin, @@log_replica_updates"
	d.heartbeatPeriod = ""
	// Replication threads run as 'system user'; the dump thread is
	// 'Binlog Dump GTID' with auto-positioning.
	d.longestQuery = "SELECT IFNULL(MAX(TIME),0) FROM information_schema.PROCESSLIST WHERE COMMAND NOT IN ('Sleep','Binlog Dump','Binlog Dump GTID','Daemon') AND USER NOT IN ('system user','event_scheduler') AND ID <> CONNECTION_ID()"
	d.semiSync = [][2]string{{"rpl_semi_sync_source", "rpl_semi_sync_replica"}}
	d.checkStatus = []string{
		"Threads_connected", "Connection_errors_max_connections", "Uptime",
		"Rpl_semi_sync_source_status", "Rpl_semi_sync_source_clients", "Rpl_semi_sync_source_no_tx",
		"Rpl_semi_sync_source_wait_sessions",
		"Rpl_semi_sync_replica_status",
	}
	return d
}()
