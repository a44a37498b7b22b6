package topology

import (
	"strconv"
	"strings"
)

// ParseBool reads a server's boolean as SHOW STATUS, SHOW VARIABLES and
// SELECT @@var print it: ON/OFF, 1/0, Yes/No, true/false. Anything else is
// false, except that MariaDB 11's read_only values other than OFF
// (NO_LOCK, NO_LOCK_NO_ADMIN) count as on.
func ParseBool(v string) bool {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "ON", "1", "YES", "TRUE", "NO_LOCK", "NO_LOCK_NO_ADMIN":
		return true
	}
	return false
}

// StatusMap turns the two-column rows of SHOW STATUS / SHOW VARIABLES into
// a map with lower-case names.
func StatusMap(rows [][]string) map[string]string {
	m := make(map[string]string, len(rows))
	for _, r := range rows {
		if len(r) >= 2 {
			m[strings.ToLower(r[0])] = r[1]
		}
	}
	return m
}

func mapInt(m map[string]string, key string, def int64) int64 {
	v, ok := m[key]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return def
	}
	return n
}

// SemiSyncStatus is the semi-synchronous replication state of a server.
// MariaDB and MySQL before 8.0.26 name the variables Rpl_semi_sync_master_*
// and Rpl_semi_sync_slave_*; MySQL 8.0.26+ with the new plugins names them
// Rpl_semi_sync_source_* and Rpl_semi_sync_replica_*.
type SemiSyncStatus struct {
	// Known: the server reported semi-sync status at all (the plugin is
	// loaded on MySQL; always on MariaDB 10.3+).
	Known bool
	// SourceOn is Rpl_semi_sync_master_status: commits wait for an ack.
	SourceOn bool
	// SourceEnabled is @@rpl_semi_sync_master_enabled (MariaDB; read with
	// the variables). Enabled but not SourceOn: the server fell back to
	// asynchronous replication (no replica acknowledged within
	// rpl_semi_sync_master_timeout, or none is connected).
	SourceEnabled bool
	// Clients is Rpl_semi_sync_master_clients, the connected semi-sync
	// replicas.
	Clients int
	// NoTx is Rpl_semi_sync_master_no_tx, commits not acknowledged in time
	// (a counter that only grows).
	NoTx int64
	// WaitSessions is Rpl_semi_sync_master_wait_sessions: commits waiting
	// for an acknowledgement now. While it is 0 (and SourceOn), every
	// transaction in the binary log was acknowledged by a replica.
	WaitSessions int64
	// ReplicaOn is Rpl_semi_sync_slave_status.
	ReplicaOn bool
}

// ParseSemiSyncStatus reads SHOW GLOBAL STATUS rows (as a StatusMap).
func ParseSemiSyncStatus(m map[string]string) SemiSyncStatus {
	var s SemiSyncStatus
	for _, side := range []string{"master", "source"} {
		if v, ok := m["rpl_semi_sync_"+side+"_status"]; ok {
			s.Known = true
			s.SourceOn = s.SourceOn || ParseBool(v)
		}
		if v := mapInt(m, "rpl_semi_sync_"+side+"_clients", -1); v >= 0 {
			s.Clients = max(s.Clients, int(v))
		}
		if v := mapInt(m, "rpl_semi_sync_"+side+"_no_tx", -1); v >= 0 {
			s.NoTx = max(s.NoTx, v)
		}
		if v := mapInt(m, "rpl_semi_sync_"+side+"_wait_sessions", -1); v >= 0 {
			s.WaitSessions = max(s.WaitSessions, v)
		}
	}
	for _, side := range []string{"slave", "replica"} {
		if v, ok := m["rpl_semi_sync_"+side+"_status"]; ok {
			s.Known = true
			s.ReplicaOn = s.ReplicaOn || ParseBool(v)
		}
	}
	return s
}

// ConnectionStatus is what a check learns about a server's connection
// limits, to tell an overloaded server from a dead one.
type ConnectionStatus struct {
	MaxConnections   int64 // @@max_connections, -1 when unknown
	ThreadsConnected int64 // Threads_connected, -1 when unknown
	// RefusedTotal is Connection_errors_max_connections: connections refused
	// with error 1040 since the server started.
	RefusedTotal int64
}

// ParseConnectionStatus reads SHOW GLOBAL STATUS rows (as a StatusMap);
// maxConnections comes from @@max_connections.
func ParseConnectionStatus(m map[string]string, maxConnections int64) ConnectionStatus {
	return ConnectionStatus{
		MaxConnections:   maxConnections,
		ThreadsConnected: mapInt(m, "threads_connected", -1),
		RefusedTotal:     mapInt(m, "connection_errors_max_connections", 0),
	}
}

// Full reports whether new ordinary connections get error 1040 now.
func (c ConnectionStatus) Full() bool {
	return c.MaxConnections > 0 && c.ThreadsConnected >= c.MaxConnections
}
