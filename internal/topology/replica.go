package topology

import (
	"net"
	"slices"
	"strconv"
	"strings"
)

// IOThread is the state of a replica's receiver (I/O) thread as
// Slave_IO_Running / Replica_IO_Running report it.
type IOThread uint8

const (
	// IONo: stopped (by STOP SLAVE or a fatal error).
	IONo IOThread = iota
	// IOConnecting: trying to reach the source (or re-authenticating).
	IOConnecting
	// IOYes: connected and receiving.
	IOYes
)

func (t IOThread) String() string {
	switch t {
	case IOYes:
		return "Yes"
	case IOConnecting:
		return "Connecting"
	}
	return "No"
}

// ReplicaStatus is one row of SHOW SLAVE STATUS (MariaDB, MySQL before
// 8.0.22) or SHOW REPLICA STATUS (MySQL 8.0.22+, MariaDB 10.5+). Field names
// follow the MySQL 8 column names; MariaDB's Master_*/Slave_* columns map to
// them.
type ReplicaStatus struct {
	// ConnectionName is MariaDB's multi-source connection name or MySQL's
	// Channel_Name; empty for the default connection.
	ConnectionName string

	SourceHost     string
	SourcePort     int
	SourceUser     string
	SourceServerID uint32
	// SourceUUID is MySQL's Source_UUID.
	SourceUUID string

	IORunning  IOThread
	SQLRunning bool
	// IOState and SQLState are the threads' descriptions (Slave_IO_State,
	// Slave_SQL_Running_State).
	IOState  string
	SQLState string

	// SecondsBehind is Seconds_Behind_Master / Seconds_Behind_Source, -1 when
	// NULL (the SQL thread is stopped, or caught up while the I/O thread is
	// not connected).
	SecondsBehind int64

	LastIOErrno  int
	LastIOError  string
	LastSQLErrno int
	LastSQLError string

	// UsingGTID is MariaDB's Using_Gtid (No, Current_Pos, Slave_Pos), or
	// "Auto_Position" for MySQL with Auto_Position=1, else "No".
	UsingGTID string
	// GTIDIOPos is MariaDB's Gtid_IO_Pos, the last GTID received.
	GTIDIOPos string
	// RetrievedGTIDSet and ExecutedGTIDSet are MySQL's.
	RetrievedGTIDSet string
	ExecutedGTIDSet  string

	// SQLDelay is the configured MASTER_DELAY / SOURCE_DELAY in seconds;
	// SQLRemainingDelay is -1 when NULL.
	SQLDelay int64
	// ReceivedHeartbeats is MariaDB's Slave_received_heartbeats: it grows
	// with every heartbeat from an idle source, so a counter that stops
	// (with the GTID IO position) says the source went silent.
	ReceivedHeartbeats int64
	// HeartbeatsRead: the monitor read ReceivedHeartbeats with the check
	// (MariaDB's Slave_received_heartbeats status variable).
	HeartbeatsRead    bool
	SQLRemainingDelay int64
	// Filters are the replication filters (Replicate_Do_DB and the other
	// Replicate_* columns, each list sorted), "" for none: replicas that
	// filter differently hold different data.
	Filters string

	SourceLogFile      string
	ReadSourceLogPos   uint64
	RelaySourceLogFile string
	ExecSourceLogPos   uint64
}

// canonicalColumn maps MariaDB and pre-8.0.22 MySQL column names to the
// MySQL 8 names: Master→Source, Slave→Replica.
func canonicalColumn(c string) string {
	c = strings.ReplaceAll(c, "Master", "Source")
	c = strings.ReplaceAll(c, "Slave", "Replica")
	return c
}

// ParseReplicaStatus reads one row of SHOW SLAVE STATUS or SHOW REPLICA
// STATUS given the column names of the result. Missing columns keep zero
// values (numbers that may be NULL keep -1); unknown columns are ignored, so
// new server versions do not break it.
func ParseReplicaStatus(cols, row []string) ReplicaStatus {
	rs := ReplicaStatus{SecondsBehind: -1, SQLRemainingDelay: -1, UsingGTID: "No"}
	for i, c := range cols {
		if i >= len(row) {
			break
		}
		v := row[i]
		switch canonicalColumn(c) {
		case "Connection_name", "Channel_Name":
			rs.ConnectionName = v
		case "Source_Host":
			rs.SourceHost = v
		case "Source_Port":
			rs.SourcePort, _ = strconv.Atoi(v)
		case "Source_User":
			rs.SourceUser = v
		case "Source_Server_Id":
			n, _ := strconv.ParseUint(v, 10, 32)
			rs.SourceServerID = uint32(n)
		case "Source_UUID":
			rs.SourceUUID = v
		case "Replica_IO_Running":
			rs.IORunning = parseIOThread(v)
		case "Replica_SQL_Running":
			rs.SQLRunning = strings.EqualFold(v, "Yes")
		case "Replica_IO_State":
			rs.IOState = v
		case "Replica_SQL_Running_State":
			rs.SQLState = v
		case "Seconds_Behind_Source":
			rs.SecondsBehind = intOr(v, -1)
		case "Last_IO_Errno":
			rs.LastIOErrno, _ = strconv.Atoi(v)
		case "Last_IO_Error":
			rs.LastIOError = v
		case "Last_SQL_Errno":
			rs.LastSQLErrno, _ = strconv.Atoi(v)
		case "Last_SQL_Error":
			rs.LastSQLError = v
		case "Using_Gtid":
			if v != "" {
				rs.UsingGTID = v
			}
		case "Auto_Position":
			if v == "1" {
				rs.UsingGTID = "Auto_Position"
			}
		case "Gtid_IO_Pos":
			rs.GTIDIOPos = v
		case "Retrieved_Gtid_Set":
			rs.RetrievedGTIDSet = normalizeGTIDSet(v)
		case "Executed_Gtid_Set":
			rs.ExecutedGTIDSet = normalizeGTIDSet(v)
		case "Replica_received_heartbeats":
			rs.ReceivedHeartbeats = intOr(v, 0)
		case "SQL_Delay":
			rs.SQLDelay = intOr(v, 0)
		case "SQL_Remaining_Delay":
			rs.SQLRemainingDelay = intOr(v, -1)
		case "Source_Log_File":
			rs.SourceLogFile = v
		case "Read_Source_Log_Pos":
			rs.ReadSourceLogPos, _ = strconv.ParseUint(v, 10, 64)
		case "Relay_Source_Log_File":
			rs.RelaySourceLogFile = v
		case "Exec_Source_Log_Pos":
			rs.ExecSourceLogPos, _ = strconv.ParseUint(v, 10, 64)
		}
		switch c {
		case "Replicate_Do_DB", "Replicate_Ignore_DB", "Replicate_Do_Table", "Replicate_Ignore_Table",
			"Replicate_Wild_Do_Table", "Replicate_Wild_Ignore_Table":
			l := strings.Split(v, ",")
			slices.Sort(l)
			if rs.Filters != "" {
				rs.Filters += ";"
			}
			rs.Filters += c + "=" + strings.Join(l, ",")
		}
	}
	return rs
}

func parseIOThread(v string) IOThread {
	switch strings.ToLower(v) {
	case "yes":
		return IOYes
	case "connecting", "preparing":
		return IOConnecting
	}
	return IONo
}

// intOr parses a decimal integer; NULL (an empty string or "NULL") and
// garbage give def.
func intOr(v string, def int64) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return def
	}
	return n
}

// normalizeGTIDSet removes the newlines MySQL puts after the commas of long
// GTID sets.
func normalizeGTIDSet(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "")), "")
}

// Running reports whether both replication threads run.
func (rs *ReplicaStatus) Running() bool {
	return rs.IORunning == IOYes && rs.SQLRunning
}

// Source is the source address as host:port.
func (rs *ReplicaStatus) Source() string {
	if rs.SourceHost == "" {
		return ""
	}
	return net.JoinHostPort(rs.SourceHost, strconv.Itoa(rs.SourcePort))
}
