package sandbox

import (
	"strings"
	"testing"
)

func testManifest(t *testing.T, topo Topology, nodes int, semi bool) *Manifest {
	t.Helper()
	plan, err := PlanPorts(23306, nodes, topo == Galera)
	if err != nil {
		t.Fatal(err)
	}
	return newManifest("/tmp/sb", Options{Topology: topo, Nodes: nodes, SemiSync: semi}, plan, true)
}

func hasLines(t *testing.T, text string, lines ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		have[strings.TrimSpace(l)] = true
	}
	for _, l := range lines {
		if !have[l] {
			t.Errorf("missing line %q in:\n%s", l, text)
		}
	}
}

func lacksPrefix(t *testing.T, text string, prefixes ...string) {
	t.Helper()
	for _, l := range strings.Split(text, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				t.Errorf("unexpected line %q", l)
			}
		}
	}
}

func TestMyCnfReplication(t *testing.T) {
	m := testManifest(t, Replication, 3, false)
	primary := renderMyCnf(m, m.Nodes[0])
	hasLines(t, primary,
		"[mariadbd]",
		"datadir = /tmp/sb/node1/data",
		"socket = /tmp/sb/node1/mysqld.sock",
		"pid-file = /tmp/sb/node1/mysqld.pid",
		"log-error = /tmp/sb/node1/error.log",
		"bind-address = 127.0.0.1",
		"port = 23306",
		"server_id = 1",
		"skip-name-resolve",
		"performance_schema = OFF",
		"max_connections = 1000",
		"innodb_buffer_pool_size = 64M",
		"innodb_log_file_size = 48M",
		"innodb_flush_log_at_trx_commit = 2",
		"sync_binlog = 0",
		"log_bin = mysql-bin",
		"log_slave_updates = ON",
		"binlog_format = ROW",
		"gtid_strict_mode = ON",
		"slave_net_timeout = 4",
		"report_host = 127.0.0.1",
		"report_port = 23306",
	)
	lacksPrefix(t, primary, "read_only", "wsrep", "rpl_semi_sync")

	replica := renderMyCnf(m, m.Nodes[2])
	hasLines(t, replica, "port = 23308", "server_id = 3", "report_port = 23308", "read_only = ON")
}

func TestMyCnfSemiSync(t *testing.T) {
	m := testManifest(t, Replication, 2, true)
	for _, n := range m.Nodes {
		hasLines(t, renderMyCnf(m, n),
			"rpl_semi_sync_master_enabled = ON",
			"rpl_semi_sync_slave_enabled = ON",
			"rpl_semi_sync_master_wait_point = AFTER_SYNC",
			"rpl_semi_sync_master_timeout = 3600000")
	}
}

func TestMyCnfGalera(t *testing.T) {
	m := testManifest(t, Galera, 3, false)
	cnf := renderMyCnf(m, m.Nodes[1])
	hasLines(t, cnf,
		"wsrep_on = ON",
		"wsrep_provider = /usr/lib/galera/libgalera_smm.so",
		"wsrep_cluster_address = gcomm://127.0.0.1:23406,127.0.0.1:23409,127.0.0.1:23412",
		"wsrep_node_name = node2",
		"wsrep_node_address = 127.0.0.1:23409",
		"wsrep_sst_method = rsync",
		"wsrep_sst_receive_address = 127.0.0.1:23411",
		"binlog_format = ROW",
		"innodb_autoinc_lock_mode = 2",
	)
	if !strings.Contains(cnf, "gmcast.listen_addr=tcp://127.0.0.1:23409;ist.recv_addr=127.0.0.1:23410;") {
		t.Errorf("provider options lack node2's own ports:\n%s", cnf)
	}
	lacksPrefix(t, cnf, "log_bin", "read_only", "rpl_semi_sync")
}

func TestBootstrapSQL(t *testing.T) {
	sql := renderBootstrapSQL(DefaultAccounts(), "vm")
	for _, want := range []string{
		"DROP USER IF EXISTS ''@'localhost';",
		"DROP USER IF EXISTS ''@'vm';",
		"CREATE USER 'app'@'%' IDENTIFIED BY 'app';",
		"GRANT ALL PRIVILEGES ON *.* TO 'app'@'%' WITH GRANT OPTION;",
		"CREATE USER 'monitor'@'%' IDENTIFIED BY 'monitor';",
		"GRANT PROCESS, REPLICATION CLIENT, REPLICATION SLAVE ADMIN, SLAVE MONITOR, BINLOG MONITOR, READ_ONLY ADMIN, SUPER, RELOAD, REPLICATION MASTER ADMIN, CONNECTION ADMIN, BINLOG ADMIN, SELECT ON *.* TO 'monitor'@'%';",
		"GRANT REPLICATION SLAVE, REPLICATION SLAVE ADMIN ON *.* TO 'repl'@'%';",
		"CREATE DATABASE IF NOT EXISTS sbtest;",
		"CREATE DATABASE IF NOT EXISTS vigil_test;",
	} {
		if !strings.Contains(sql, want) {
			t.Errorf("bootstrap SQL lacks %q:\n%s", want, sql)
		}
	}
	if strings.Index(sql, "FLUSH PRIVILEGES") > strings.Index(sql, "CREATE USER") {
		t.Error("FLUSH PRIVILEGES must come before CREATE USER (bootstrap mode)")
	}
}

func TestSQLString(t *testing.T) {
	for in, want := range map[string]string{
		"app":    "'app'",
		"it's":   `'it\'s'`,
		`a\b`:    `'a\\b'`,
		"":       "''",
		"a'; --": `'a\'; --'`,
	} {
		if got := sqlString(in); got != want {
			t.Errorf("sqlString(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestChangeMasterSQL(t *testing.T) {
	m := testManifest(t, Replication, 2, false)
	got := changeMasterSQL(m.Nodes[0], DefaultAccounts().Repl)
	want := "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=23306, MASTER_USER='repl', MASTER_PASSWORD='repl', MASTER_USE_GTID=slave_pos, MASTER_HEARTBEAT_PERIOD=0.25, MASTER_CONNECT_RETRY=1"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
