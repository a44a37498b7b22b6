package shardmove

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// Every statement a move sends, spelled once. Moves use MariaDB's
// multi-source replication (named connections, per-connection filters,
// DO_DOMAIN_IDS), which MySQL does not have: there is no other flavour.

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

func quoteString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\x00", `\0`, "\n", `\n`, "\r", `\r`)
	return "'" + r.Replace(s) + "'"
}

// wildTableEscape escapes a schema name for a replicate_wild_do_table
// pattern, where _ and % are wildcards: tenant_1.% would also match
// tenantX1.
func wildTableEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `_`, `\_`, `%`, `\%`)
	return r.Replace(s)
}

func sqlSchemaExists(schema string) string {
	return "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = " + quoteString(schema)
}

const sqlServerFacts = "SELECT @@gtid_domain_id, @@log_bin, @@log_slave_updates"

const sqlAllSlaves = "SHOW ALL SLAVES STATUS"

func sqlSlaveStatus(conn string) string { return "SHOW SLAVE " + quoteString(conn) + " STATUS" }

func sqlStopSlave(conn string) string  { return "STOP SLAVE " + quoteString(conn) }
func sqlStartSlave(conn string) string { return "START SLAVE " + quoteString(conn) }
func sqlResetSlaveAll(conn string) string {
	return "RESET SLAVE " + quoteString(conn) + " ALL"
}

// sqlChangeMaster points a named connection at a primary. DO_DOMAIN_IDS
// keeps the connection to the one domain it exists for: a transaction of
// another domain in the source's binary log (a third cluster, the reverse
// connection of an earlier move) is not this move's business.
func sqlChangeMaster(conn string, from Server, repl Account, domain uint32) string {
	return fmt.Sprintf("CHANGE MASTER %s TO MASTER_HOST=%s, MASTER_PORT=%d, MASTER_USER=%s, MASTER_PASSWORD=%s, MASTER_USE_GTID=slave_pos, DO_DOMAIN_IDS=(%d)",
		quoteString(conn), quoteString(from.Host), from.Port, quoteString(repl.User), quoteString(repl.Password), domain)
}

// sqlFilter keeps a connection to one schema. replicate_wild_do_table
// rather than replicate_do_db: do_db judges a statement-logged event by
// its default schema (USE), so `USE other; UPDATE s.t ...` would be lost
// and `USE s; UPDATE other.t ...` applied; the table filter judges by the
// tables the event changes, for row events and statements alike. The
// connection must be stopped.
func sqlFilter(conn, schema string) string {
	return fmt.Sprintf("SET GLOBAL %s.replicate_wild_do_table = %s", quoteIdent(conn), quoteString(wildTableEscape(schema)+".%"))
}

const sqlGTIDPositions = "SELECT @@GLOBAL.gtid_slave_pos, @@GLOBAL.gtid_binlog_pos"

const sqlBinlogPos = "SELECT @@GLOBAL.gtid_binlog_pos"

const sqlStrictMode = "SELECT @@GLOBAL.gtid_strict_mode"

// sqlSnapshot starts the source's read view for the compare.
const sqlSnapshot = "START TRANSACTION WITH CONSISTENT SNAPSHOT"

func sqlSetSlavePos(pos topology.GTIDPos) string {
	return "SET GLOBAL gtid_slave_pos = " + quoteString(pos.String())
}

// sqlWait is MASTER_GTID_WAIT: 0 when the server's gtid_slave_pos has
// reached pos, -1 on timeout.
func sqlWait(pos topology.GTIDPos, timeout time.Duration) string {
	return fmt.Sprintf("SELECT MASTER_GTID_WAIT(%s, %.3f)", quoteString(pos.String()), timeout.Seconds())
}

func sqlTables(schema string) string {
	return "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = " + quoteString(schema) +
		" AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME"
}

func sqlChecksum(schema, table string) string {
	return "CHECKSUM TABLE " + quoteIdent(schema) + "." + quoteIdent(table)
}

func sqlCount(schema, table string) string {
	return "SELECT COUNT(*) FROM " + quoteIdent(schema) + "." + quoteIdent(table)
}

func sqlDropDatabase(schema string) string { return "DROP DATABASE IF EXISTS " + quoteIdent(schema) }

// startPos is the gtid_slave_pos to set on a server before a connection of
// domain `domain` starts at `at` (only at's entry of that domain counts).
// gtid_slave_pos is global, shared by every connection of the server, so
// every other domain keeps what it had, raised to the server's own binary
// log: with gtid_strict_mode MariaDB refuses a gtid_slave_pos older than
// the binary log ("conflicts with the binary log", error 1947), which is
// what the server's own domain would be on a primary whose gtid_slave_pos
// is empty or dates from when it was a replica. Asking the source for a
// domain it has never written is harmless (checked on 10.11: the source
// ignores it). The domain's entry is never lowered: a connection that has
// already applied past `at` (a resumed catch-up) must not apply twice.
func startPos(slave, binlog topology.GTIDPos, domain uint32, at topology.GTIDPos) (topology.GTIDPos, error) {
	g, ok := gtidOf(at, domain)
	if !ok {
		return nil, fmt.Errorf("position %q has no GTID of domain %d", at.String(), domain)
	}
	out := topology.MaxGTIDPos(slave, binlog)
	if cur, ok := gtidOf(out, domain); ok && cur.Seq >= g.Seq {
		return out, nil
	}
	return setDomain(out, g), nil
}

// meetMaster lowers every domain of pos but the connection's own
// (`domain`) that the master's binary log holds less of, to the master's
// last GTID of that domain. MariaDB validates a connecting replica's whole
// gtid_slave_pos against the master's binary log, domains outside
// DO_DOMAIN_IDS included (MDEV-28213), and refuses one it is ahead in
// (1236 "connecting slave requested to start from GTID ..., which is not
// in the master's binlog"). That is the case of a move back: the earlier
// move left a sparse copy of this server's own domain in the master's
// binary log, behind this server's position. The connection ignores
// those domains anyway; the lowered entries only tell the master where to
// start looking. lowered says whether any entry went below what the server
// holds (gtid_strict_mode refuses that, error 1947, unless relaxed for the
// SET).
func meetMaster(pos, masterBinlog topology.GTIDPos, domain uint32) (out topology.GTIDPos, lowered bool) {
	out = slices.Clone(pos)
	for i, g := range out {
		if g.Domain == domain {
			continue
		}
		if m, ok := gtidOf(masterBinlog, g.Domain); ok && m.Seq < g.Seq {
			out[i], lowered = m, true
		}
	}
	return out, lowered
}

// gtidOf is the GTID of one domain of a position.
func gtidOf(p topology.GTIDPos, domain uint32) (topology.GTID, bool) {
	for _, g := range p {
		if g.Domain == domain {
			return g, true
		}
	}
	return topology.GTID{}, false
}

// onlyDomain is the position restricted to one domain (empty when the
// domain is absent).
func onlyDomain(p topology.GTIDPos, domain uint32) topology.GTIDPos {
	if g, ok := gtidOf(p, domain); ok {
		return topology.GTIDPos{g}
	}
	return nil
}

func setDomain(p topology.GTIDPos, g topology.GTID) topology.GTIDPos {
	out := make(topology.GTIDPos, 0, len(p)+1)
	for _, x := range p {
		if x.Domain != g.Domain {
			out = append(out, x)
		}
	}
	out = append(out, g)
	// ParseGTIDPos sorts by domain; so does String's reader.
	s, _ := topology.ParseGTIDPos(out.String())
	return s
}
