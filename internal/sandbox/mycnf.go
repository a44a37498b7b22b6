package sandbox

import (
	"fmt"
	"strings"
)

// GaleraProvider is where Debian's galera-4 package puts the provider.
const GaleraProvider = "/usr/lib/galera/libgalera_smm.so"

// semiSyncTimeoutMS is the semi-sync ack timeout: an hour, so a primary
// without replicas blocks commits instead of silently falling back to
// asynchronous replication (what failover tests want to see). Accounts are
// created at install time, so the sandbox itself never waits on it.
const semiSyncTimeoutMS = 3600000

// renderMyCnf is the option file of one node. It is complete on purpose:
// mariadbd starts with --defaults-file, so nothing of /etc/mysql leaks in.
func renderMyCnf(m *Manifest, n Node) string {
	var b strings.Builder
	w := func(k string, v any) { fmt.Fprintf(&b, "%s = %v\n", k, v) }
	fmt.Fprintf(&b, "# %s of the %s sandbox in %s, written by vigil sandbox.\n", n.Name, m.Topology, m.Dir)
	fmt.Fprintf(&b, "# Started as: mariadbd --defaults-file=%s --user=mysql\n\n", n.Config)
	b.WriteString("[mariadbd]\n")
	w("user", "mysql")
	w("datadir", n.Datadir)
	w("socket", n.Socket)
	w("pid-file", n.PIDFile)
	w("log-error", n.ErrorLog)
	w("tmpdir", n.tmpdir())
	w("bind-address", n.Host)
	w("port", n.Port)
	w("server_id", n.ServerID)
	b.WriteString("skip-name-resolve\n")
	w("performance_schema", "OFF")
	w("max_connections", 1000)
	w("table_open_cache", 400)
	w("innodb_buffer_pool_size", "64M")
	w("innodb_log_file_size", "48M")
	w("innodb_flush_log_at_trx_commit", 2)

	switch m.Topology {
	case Galera:
		b.WriteString("\n# Galera: every node says its own ports (several nodes share 127.0.0.1).\n")
		w("binlog_format", "ROW")
		w("innodb_autoinc_lock_mode", 2)
		w("default_storage_engine", "InnoDB")
		w("wsrep_on", "ON")
		w("wsrep_provider", GaleraProvider)
		w("wsrep_cluster_name", "vigil-sandbox")
		w("wsrep_cluster_address", "gcomm://"+strings.Join(gcommAddrs(m), ","))
		w("wsrep_node_name", n.Name)
		w("wsrep_node_address", fmt.Sprintf("%s:%d", n.Host, n.GcommPort))
		w("wsrep_provider_options", fmt.Sprintf(`"gmcast.listen_addr=tcp://%s:%d;ist.recv_addr=%s:%d;gcache.size=64M;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT8S"`,
			n.Host, n.GcommPort, n.Host, n.ISTPort))
		w("wsrep_sst_method", "rsync")
		w("wsrep_sst_receive_address", fmt.Sprintf("%s:%d", n.Host, n.SSTPort))
		w("wsrep_slave_threads", 2)
	default:
		b.WriteString("\n# Replication: MariaDB GTID, row events, fast failure detection.\n")
		w("log_bin", "mysql-bin")
		w("relay_log", "relay-bin")
		w("log_slave_updates", "ON")
		w("binlog_format", "ROW")
		w("gtid_strict_mode", "ON")
		if d, ok := m.gtidDomain(n); ok {
			// Each cluster of a sandbox of several writes its own
			// domain, so GTIDs say which cluster they came from.
			w("gtid_domain_id", d)
		}
		w("sync_binlog", 0)
		w("slave_net_timeout", 4)
		w("report_host", n.Host)
		w("report_port", n.Port)
		// A spare is configured as the replica it becomes once cloned;
		// read_only=ON also lets an agent restore onto it.
		if n.Role == RoleReplica || n.isSpare() {
			w("read_only", "ON")
		}
		if m.SemiSync {
			b.WriteString("\n# Semi-synchronous replication (built into MariaDB 10.3+).\n")
			w("rpl_semi_sync_master_enabled", "ON")
			w("rpl_semi_sync_slave_enabled", "ON")
			w("rpl_semi_sync_master_wait_point", "AFTER_SYNC")
			w("rpl_semi_sync_master_timeout", semiSyncTimeoutMS)
			if n.Role == RoleReplica || n.isSpare() {
				// With log_slave_updates a replica's applier commits go
				// through its own (enabled) semi-sync master too; with no
				// replicas of its own and wait_no_slave=ON each would wait
				// the whole timeout and replication would stall.
				w("rpl_semi_sync_master_wait_no_slave", "OFF")
			} else {
				w("rpl_semi_sync_master_wait_no_slave", "ON")
			}
		}
	}
	b.WriteString("\n# For clients: mariadb --defaults-file=" + n.Config + "\n[client]\n")
	w("socket", n.Socket)
	return b.String()
}

func gcommAddrs(m *Manifest) []string {
	var out []string
	for _, n := range m.Nodes {
		out = append(out, fmt.Sprintf("%s:%d", n.Host, n.GcommPort))
	}
	return out
}

// renderBootstrapSQL runs inside mariadb-install-db (--extra-file), so
// every node starts with the same accounts and databases and nothing of it
// is in a binary log: replicas attach with empty, equal GTID positions.
func renderBootstrapSQL(a Accounts, hostname string) string {
	q := sqlString
	var b strings.Builder
	b.WriteString("-- Written by vigil sandbox; run by mariadb-install-db --extra-file.\n")
	// Anonymous accounts shadow 'app'@'%' for connections from localhost.
	b.WriteString("DELETE FROM mysql.global_priv WHERE User = '';\n")
	b.WriteString("DELETE FROM mysql.db WHERE User = '';\n")
	// Loads the grant tables so the account statements below work in
	// bootstrap mode.
	b.WriteString("FLUSH PRIVILEGES;\n")
	b.WriteString("DROP USER IF EXISTS ''@'localhost';\n")
	if hostname != "" && hostname != "localhost" {
		fmt.Fprintf(&b, "DROP USER IF EXISTS ''@%s;\n", q(hostname))
	}
	fmt.Fprintf(&b, "CREATE USER %s@'%%' IDENTIFIED BY %s;\n", q(a.App.User), q(a.App.Password))
	fmt.Fprintf(&b, "GRANT ALL PRIVILEGES ON *.* TO %s@'%%' WITH GRANT OPTION;\n", q(a.App.User))
	fmt.Fprintf(&b, "CREATE USER %s@'%%' IDENTIFIED BY %s;\n", q(a.Monitor.User), q(a.Monitor.Password))
	fmt.Fprintf(&b, "GRANT %s ON *.* TO %s@'%%';\n", strings.Join(MonitorPrivileges(), ", "), q(a.Monitor.User))
	fmt.Fprintf(&b, "CREATE USER %s@'%%' IDENTIFIED BY %s;\n", q(a.Repl.User), q(a.Repl.Password))
	fmt.Fprintf(&b, "GRANT REPLICATION SLAVE, REPLICATION SLAVE ADMIN ON *.* TO %s@'%%';\n", q(a.Repl.User))
	b.WriteString("CREATE DATABASE IF NOT EXISTS sbtest;\n")
	b.WriteString("CREATE DATABASE IF NOT EXISTS vigil_test;\n")
	return b.String()
}

// MonitorPrivileges are what Vigil's monitor and failover manager need on
// MariaDB 10.11: watch (PROCESS, SLAVE MONITOR, BINLOG MONITOR, REPLICATION
// CLIENT), repoint replicas (REPLICATION SLAVE ADMIN), fence and promote
// (READ_ONLY ADMIN, SUPER, BINLOG ADMIN, REPLICATION MASTER ADMIN), kill
// client connections (CONNECTION ADMIN), flush (RELOAD) and read.
func MonitorPrivileges() []string {
	return []string{
		"PROCESS", "REPLICATION CLIENT", "REPLICATION SLAVE ADMIN", "SLAVE MONITOR",
		"BINLOG MONITOR", "READ_ONLY ADMIN", "SUPER", "RELOAD",
		"REPLICATION MASTER ADMIN", "CONNECTION ADMIN", "BINLOG ADMIN", "SELECT",
	}
}

// sqlString quotes s as a SQL string literal.
func sqlString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return "'" + r.Replace(s) + "'"
}

// changeMasterSQL points a replica at its primary with MariaDB GTID.
func changeMasterSQL(primary Node, repl Account) string {
	return fmt.Sprintf("CHANGE MASTER TO MASTER_HOST=%s, MASTER_PORT=%d, MASTER_USER=%s, MASTER_PASSWORD=%s, "+
		"MASTER_USE_GTID=slave_pos, MASTER_HEARTBEAT_PERIOD=0.25, MASTER_CONNECT_RETRY=1",
		sqlString(primary.Host), primary.Port, sqlString(repl.User), sqlString(repl.Password))
}
