// Package flavor owns what SQL Vigil speaks to each server flavour: every
// replication statement, wait, status read and variable name the monitor,
// the failover engine and the executor send comes from here, one file per
// flavour (mariadb.go, mysql80.go, mysql84.go). Nothing else spells a
// replication statement. The choice of a flavour from a server's version
// is made in one place, Of.
package flavor

import (
	"fmt"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// Flavor is a server family and version range that speaks one SQL
// dialect. The zero value (Unknown) speaks MariaDB's, as Vigil did before
// it knew a server. Plans carry it and the journal keeps it as a number:
// the values 1 and 2 are topology.FlavorMariaDB and FlavorMySQL's, so a
// plan journaled before flavours had versions reads back the same; new
// flavours get new numbers.
type Flavor uint8

const (
	Unknown Flavor = iota
	// MariaDB 10.5+.
	MariaDB
	// MySQL80 is MySQL 8.0.23 up to 8.3: REPLICA/SOURCE statements, the
	// semi-sync variables of whichever plugin is loaded.
	MySQL80
	// MySQL84 is MySQL 8.4+: the SLAVE/MASTER forms are gone.
	MySQL84
	// MySQLLegacy is MySQL before 8.0.23 (CHANGE REPLICATION SOURCE TO
	// arrived in 8.0.23, START/STOP REPLICA and SHOW REPLICA STATUS in
	// 8.0.22): the SLAVE/MASTER forms.
	MySQLLegacy
)

// Of chooses the flavour from a server's version (@@version, or the
// handshake's, which is the same string). The one place that compares
// versions for the SQL Vigil sends.
func Of(version string) Flavor {
	return For(topology.FlavorOf(version), version)
}

// For is Of with the family already known; a MySQL server whose version is
// not known yet is taken for MySQL 8.0 (REPLICA/SOURCE forms).
func For(family topology.Flavor, version string) Flavor {
	switch family {
	case topology.FlavorMariaDB:
		return MariaDB
	case topology.FlavorMySQL:
		switch {
		case version == "":
			return MySQL80
		case topology.VersionAtLeast(version, 8, 4, 0):
			return MySQL84
		case topology.VersionAtLeast(version, 8, 0, 23):
			return MySQL80
		}
		return MySQLLegacy
	}
	return Unknown
}

// OfObservation is the flavour of the server a check saw; Unknown for nil.
func OfObservation(o *topology.Observation) Flavor {
	if o == nil {
		return Unknown
	}
	return For(o.Flavor, o.Version)
}

// All is every flavour, for tests that run something in each.
var All = []Flavor{MariaDB, MySQL80, MySQL84, MySQLLegacy}

// String is what plans show: "MySQL" for MySQL 8.0, as plans always said.
func (f Flavor) String() string {
	if f == Unknown {
		return "unknown"
	}
	return f.d().name
}

// Family is the server family (GTID format, failover rules).
func (f Flavor) Family() topology.Flavor {
	if f == Unknown {
		return topology.FlavorUnknown
	}
	return f.d().family
}

// MySQL reports whether the flavour is one of MySQL's.
func (f Flavor) MySQL() bool { return f.Family() == topology.FlavorMySQL }

// dialect is one flavour's SQL; each flavour's file fills one.
type dialect struct {
	name   string
	family topology.Flavor

	startReplica, stopReplica, resetReplicaAll  string
	startSQLThread, startIOThread, stopIOThread string
	replicaStatus                               string
	// changeSource makes the server a replica of host:port; user and
	// pass are quoted literals; mode is MariaDB's MASTER_USE_GTID.
	changeSource func(host, port, user, pass, mode string) string

	readOnlyOn, readOnlyOff []string

	// waitFunc(pos, seconds) returns 0 once pos is applied.
	waitFunc string
	// binlogPos: the transactions a server wrote to its binlog (what a
	// replica must reach); currentPos: everything it holds.
	binlogPos, currentPos string
	// positions reads the GTID state and read_only at once (freshObs);
	// parsePositions reads its row.
	positions      string
	parsePositions func(row []string, o *topology.Observation) bool
	// parseCheck reads the flavour's checkVariables into o.
	parseCheck func(v map[string]string, o *topology.Observation)

	logBin            string // SELECT @@log_bin, @@log_*_updates
	heartbeatPeriod   string // "" when the flavour has no such status
	receivedHeartbeat string // "" when the flavour has no such status
	longestQuery      string

	// semiSync are the prefixes of the semi-sync variables (source,
	// replica side) of the plugins the flavour's servers may run; the
	// first is assumed when the server does not tell (SHOW GLOBAL
	// VARIABLES).
	semiSync [][2]string
	// semiSyncEnabledVar is readable whether or not a plugin is loaded
	// (MariaDB 10.3.3+); killConnTimeout bounds a semi-sync replica's
	// kill of its source's dump thread. "" when the flavour has none.
	semiSyncEnabledVar, killConnTimeout string
	// semiSyncSettingVars are the semi-sync settings every server of the
	// flavour with semiSyncEnabledVar has (none with plugins).
	semiSyncSettingVars []string

	// checkVariables are the flavour's global variables every monitor
	// check reads (beside version, read_only and the like that all
	// flavours have); checkStatus the SHOW GLOBAL STATUS names.
	checkVariables []string
	checkStatus    []string
}

func (f Flavor) d() *dialect {
	switch f {
	case MySQL80:
		return &mysql80
	case MySQL84:
		return &mysql84
	case MySQLLegacy:
		return &mysqlLegacy
	}
	return &mariadb
}

func (f Flavor) StartReplica() string    { return f.d().startReplica }
func (f Flavor) StopReplica() string     { return f.d().stopReplica }
func (f Flavor) ResetReplicaAll() string { return f.d().resetReplicaAll }
func (f Flavor) StartSQLThread() string  { return f.d().startSQLThread }
func (f Flavor) StartIOThread() string   { return f.d().startIOThread }
func (f Flavor) StopIOThread() string    { return f.d().stopIOThread }

// ReplicaStatus is SHOW SLAVE STATUS or SHOW REPLICA STATUS; the
// columns differ too and topology.ParseReplicaStatus reads both.
func (f Flavor) ReplicaStatus() string { return f.d().replicaStatus }

// ChangeSource is the statement that points a server at host:port; user
// and pass are SQL literals (quoted, or a mask). mode is MariaDB's
// MASTER_USE_GTID (slave_pos, current_pos); MySQL auto-positions.
func (f Flavor) ChangeSource(host, port, user, pass, mode string) string {
	return f.d().changeSource(host, port, user, pass, mode)
}

// SetReplicaStartPos sets where a server restored from a backup starts
// replicating: the GTID position the backup was consistent at (MariaDB
// gtid_slave_pos, used by MASTER_USE_GTID=slave_pos; MySQL gtid_purged,
// which needs an empty gtid_executed). pos must be a GTID list; quotes
// are refused by leaving it out.
func (f Flavor) SetReplicaStartPos(pos string) string {
	pos = strings.NewReplacer("'", "", "\\", "").Replace(pos)
	if f.MySQL() {
		return "SET GLOBAL gtid_purged = '" + pos + "'"
	}
	return "SET GLOBAL gtid_slave_pos = '" + pos + "'"
}

// ReadOnly makes a server read-only (on) or writable: MySQL's
// super_read_only goes on after read_only and off before it.
func (f Flavor) ReadOnly(on bool) []string {
	if on {
		return f.d().readOnlyOn
	}
	return f.d().readOnlyOff
}

// WaitFunc is the name of the function that waits for a GTID position.
func (f Flavor) WaitFunc() string { return f.d().waitFunc }

// WaitGTID waits up to timeout until the server has applied pos; it
// returns one row whose value is "0" when it has.
func (f Flavor) WaitGTID(pos string, timeout time.Duration) string {
	return fmt.Sprintf("SELECT %s('%s', %.3f)", f.d().waitFunc, pos, timeout.Seconds())
}

// BinlogPosVar is the variable of the transactions a server wrote
// (@@gtid_binlog_pos, @@gtid_executed); CurrentPosVar of all it holds.
func (f Flavor) BinlogPosVar() string  { return f.d().binlogPos }
func (f Flavor) CurrentPosVar() string { return f.d().currentPos }

// ReadBinlogPos and ReadCurrentPos select them.
func (f Flavor) ReadBinlogPos() string  { return "SELECT " + f.d().binlogPos }
func (f Flavor) ReadCurrentPos() string { return "SELECT " + f.d().currentPos }

// ReadPositions reads the GTID state and read_only in one row: MariaDB
// current, binlog, slave pos, binlog state, read_only; MySQL
// gtid_executed, read_only.
func (f Flavor) ReadPositions() string { return f.d().positions }

// ParsePositions reads a row of ReadPositions into o (GTID state and
// read_only); false when the row does not have its columns.
func (f Flavor) ParsePositions(row []string, o *topology.Observation) bool {
	return f.d().parsePositions(row, o)
}

// ParseCheckVariables reads the values of CheckVariables (by name) into o.
// A malformed position leaves its field empty rather than failing the
// check: positions inform failover, not health.
func (f Flavor) ParseCheckVariables(v map[string]string, o *topology.Observation) {
	f.d().parseCheck(v, o)
}

// SemiSyncVarBuiltIn: a server of this version has its flavour's
// SemiSyncEnabledVar whether or not a plugin is loaded (MariaDB 10.3.3+,
// where semi-sync is built in); reading it elsewhere fails the query.
func SemiSyncVarBuiltIn(version string) bool {
	return Of(version) == MariaDB && topology.VersionAtLeast(version, 10, 3, 3)
}

// ReadLogBin reads @@log_bin and whether replicated transactions are
// logged too (log_slave_updates, log_replica_updates).
func (f Flavor) ReadLogBin() string { return f.d().logBin }

// ReadHeartbeatPeriod and ReadReceivedHeartbeats are MariaDB's status
// reads of the replica heartbeat; "" in flavours without them.
func (f Flavor) ReadHeartbeatPeriod() string    { return f.d().heartbeatPeriod }
func (f Flavor) ReadReceivedHeartbeats() string { return f.d().receivedHeartbeat }

// ReadSemiSyncSettings reads every semi-sync variable (either plugin's
// names).
func (f Flavor) ReadSemiSyncSettings() string {
	return `SHOW GLOBAL VARIABLES LIKE 'rpl\_semi\_sync\_%'`
}

// ReadLongestQuery is the longest running client statement in seconds,
// replication and system threads left out.
func (f Flavor) ReadLongestQuery() string { return f.d().longestQuery }

// SemiSyncNames prefix the semi-sync variables when the server's own
// variables do not say which plugin it runs.
func (f Flavor) SemiSyncNames() (source, replica string) {
	p := f.d().semiSync[0]
	return p[0], p[1]
}

// SemiSyncPlugins are the prefixes (source, replica side) of every
// semi-sync plugin the flavour's servers may run.
func (f Flavor) SemiSyncPlugins() [][2]string { return f.d().semiSync }

// SemiSyncEnabledVar is the source-side enabled variable every server of
// the flavour has (plugin loaded or not), "" when none.
func (f Flavor) SemiSyncEnabledVar() string { return f.d().semiSyncEnabledVar }

// SemiSyncSettingVars are the semi-sync settings (enabled on either side,
// wait with no replica, timeout) that servers with SemiSyncEnabledVar
// have, plugin loaded or not: a check reads them with its variables.
func (f Flavor) SemiSyncSettingVars() []string { return f.d().semiSyncSettingVars }

// KillConnTimeoutVar bounds how long a semi-sync replica's stopping IO
// thread tries to kill its source's dump thread; "" when the flavour has
// no such variable.
func (f Flavor) KillConnTimeoutVar() string { return f.d().killConnTimeout }

// CheckVariables are the flavour's global variables every monitor check
// reads, beside those every flavour has.
func (f Flavor) CheckVariables() []string { return f.d().checkVariables }

// CheckStatus are the SHOW GLOBAL STATUS names every monitor check reads.
func (f Flavor) CheckStatus() []string { return f.d().checkStatus }
