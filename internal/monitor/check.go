package monitor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/flavor"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/topology"
)

// The SQL of one check. Every statement runs on the persistent monitor
// connection; the whole check shares one deadline (Options.Timeout).

// The flavour (internal/flavor) spells the replication reads: its
// variables, the status names and the replica status statement.

// wsrepStatusNames are added for Galera clusters.
var wsrepStatusNames = []string{
	"wsrep_local_state", "wsrep_local_state_comment", "wsrep_cluster_status", "wsrep_cluster_size",
	"wsrep_cluster_state_uuid", "wsrep_ready", "wsrep_connected", "wsrep_local_recv_queue", "wsrep_local_index",
}

// wsrepVariables are read with the other variables for Galera clusters.
var wsrepVariables = []string{"wsrep_on", "wsrep_desync", "wsrep_reject_queries", "wsrep_sst_donor_rejects_queries"}

// variablesSQL is the SELECT of server variables for a flavour; the column
// order is fixed, so Exec (no column names) is enough.
func variablesSQL(f flavor.Flavor, galera, semiSyncVar bool) (string, []string) {
	vars := []string{"version", "server_id", "read_only", "max_connections", "max_allowed_packet", "net_buffer_length"}
	vars = append(vars, f.CheckVariables()...)
	if semiSyncVar && f.SemiSyncEnabledVar() != "" {
		vars = append(vars, f.SemiSyncEnabledVar())
		for _, n := range f.SemiSyncSettingVars() {
			if n != f.SemiSyncEnabledVar() {
				vars = append(vars, n)
			}
		}
	}
	if galera {
		vars = append(vars, wsrepVariables...)
	}
	var b strings.Builder
	b.WriteString("SELECT ")
	for i, v := range vars {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("@@global.")
		b.WriteString(v)
	}
	return b.String(), vars
}

// hasSemiSyncVar: a server of this version has
// @@rpl_semi_sync_master_enabled whether or not a plugin is loaded
// (MariaDB 10.3.3+, where semi-sync is built in).
func hasSemiSyncVar(version string) bool { return flavor.SemiSyncVarBuiltIn(version) }

func statusSQL(f flavor.Flavor, galera bool) string {
	names := f.CheckStatus()
	if galera {
		names = append(append([]string(nil), names...), wsrepStatusNames...)
	}
	var b strings.Builder
	b.WriteString("SHOW GLOBAL STATUS WHERE Variable_name IN (")
	for i, n := range names {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("'" + n + "'")
	}
	b.WriteString(")")
	return b.String()
}

// heartbeatReadSQL is the newest heartbeat row and its age in
// microseconds on the server's own clock.
func heartbeatReadSQL(table string) string {
	return "SELECT MAX(ts), TIMESTAMPDIFF(MICROSECOND, MAX(ts), UTC_TIMESTAMP(6)) FROM " + table
}

// heartbeatLayout is pt-heartbeat's ts format.
const heartbeatLayout = "2006-01-02T15:04:05.999999"

// heartbeatWriteSQL stamps the writer's row the way pt-heartbeat --utc does.
func heartbeatWriteSQL(table string) string {
	return "REPLACE INTO " + table + " (ts, server_id) VALUES " +
		"(DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%dT%H:%i:%s.%f'), @@global.server_id)"
}

// collect runs the check's queries on c and fills o. It returns an error
// only for failures that fail the check: a network error or timeout, or a
// server error on the statements every check needs. A missing privilege for
// the replica status or a missing heartbeat table is recorded in o instead.
//
// semiSyncVar: the server has @@rpl_semi_sync_master_enabled whether or
// not a plugin is loaded (MariaDB 10.3.3+, where semi-sync is built in).
//
// family is the server family from the handshake; the flavour of the
// statements after the first comes from the @@version that one reads.
func collect(ctx context.Context, c *backend.Conn, family topology.Flavor, semiSyncVar bool, opts *Options, writeHeartbeat bool, o *topology.Observation) error {
	galera := opts.Type == TypeGalera
	q, vars := variablesSQL(flavor.For(family, ""), galera, semiSyncVar)
	res, err := c.Exec(ctx, q)
	if err != nil {
		return fmt.Errorf("reading variables: %w", err)
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != len(vars) {
		return fmt.Errorf("reading variables: unexpected result (%d rows)", len(res.Rows))
	}
	v := make(map[string]string, len(vars))
	for i, name := range vars {
		v[name] = res.Rows[0][i]
	}
	o.Version = v["version"]
	fl := flavor.For(family, o.Version)
	if id, err := strconv.ParseUint(v["server_id"], 10, 32); err == nil {
		o.ServerID = uint32(id)
	}
	o.ReadOnly = topology.ParseBool(v["read_only"])
	o.MaxPacket = maxPacket(v["max_allowed_packet"], v["net_buffer_length"])
	maxConn, err := strconv.ParseInt(v["max_connections"], 10, 64)
	if err != nil {
		maxConn = -1
	}
	fl.ParseCheckVariables(v, o)

	res, err = c.Exec(ctx, statusSQL(fl, galera))
	if err != nil {
		return fmt.Errorf("reading status: %w", err)
	}
	st := topology.StatusMap(res.Rows)
	o.SemiSync = topology.ParseSemiSyncStatus(st)
	if semiSyncVar {
		o.SemiSync.SourceEnabled = topology.ParseBool(v[fl.SemiSyncEnabledVar()])
		for _, n := range fl.SemiSyncSettingVars() {
			o.Binlog.SemiSync = append(o.Binlog.SemiSync, []string{n, v[n]})
		}
	}
	if p, err := strconv.ParseFloat(st["slave_heartbeat_period"], 64); err == nil {
		o.Binlog.HeartbeatPeriod = p
	}
	o.Uptime = -1
	if v, err := strconv.ParseInt(st["uptime"], 10, 64); err == nil {
		o.Uptime = v
	}
	o.Connections = topology.ParseConnectionStatus(st, maxConn)
	if galera {
		for _, name := range wsrepVariables {
			st[name] = v[name]
		}
		w := topology.ParseWsrepStatus(st)
		o.Wsrep = &w
	}

	cols, rows, err := c.ExecColumns(ctx, fl.ReplicaStatus())
	switch {
	case err == nil && len(rows) > 0:
		rs := topology.ParseReplicaStatus(cols, rows[0])
		// MariaDB's heartbeat counter grows with every heartbeat from an
		// idle source; read at every check so that when the source goes
		// silent is known from before its checks fail.
		if n, err := strconv.ParseInt(st["slave_received_heartbeats"], 10, 64); err == nil && !fl.MySQL() {
			rs.ReceivedHeartbeats, rs.HeartbeatsRead = n, true
		}
		o.Replica = &rs
	case err != nil:
		if !isSQLError(err) {
			return fmt.Errorf("reading replica status: %w", err)
		}
		o.ReplicaErr = err.Error()
	}

	if hb := opts.Heartbeat.Table; hb != "" {
		if writeHeartbeat && !o.ReadOnly {
			if _, err := c.Exec(ctx, heartbeatWriteSQL(hb)); err != nil && !isSQLError(err) {
				return fmt.Errorf("writing heartbeat: %w", err)
			}
		}
		res, err := c.Exec(ctx, heartbeatReadSQL(hb))
		switch {
		case err == nil && len(res.Rows) == 1 && len(res.Rows[0]) == 2 && res.Rows[0][0] != "":
			if ts, err := time.ParseInLocation(heartbeatLayout, strings.Replace(res.Rows[0][0], " ", "T", 1), time.UTC); err == nil {
				o.HeartbeatTS = ts
			}
			if us, err := strconv.ParseFloat(res.Rows[0][1], 64); err == nil {
				o.HeartbeatLag = max(us/1e6, 0)
			}
		case err != nil && !isSQLError(err):
			return fmt.Errorf("reading heartbeat: %w", err)
		}
	}
	return nil
}

// maxPacket is Observation.MaxPacket from the two variables' values
// (0 when max_allowed_packet cannot be read).
func maxPacket(maxAllowed, netBuffer string) int {
	m, err := strconv.Atoi(maxAllowed)
	if err != nil || m <= 0 {
		return 0
	}
	if n, err := strconv.Atoi(netBuffer); err == nil && n > m {
		return n
	}
	return m
}

func isSQLError(err error) bool {
	var se *mysqlproto.SQLError
	return errors.As(err, &se)
}

// sqlErrorCode is the server error code in err, or 0.
func sqlErrorCode(err error) uint16 {
	var se *mysqlproto.SQLError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// Error codes that mean "alive but not taking this connection".
const (
	erConCount         = 1040 // ER_CON_COUNT_ERROR: too many connections
	erTooManyUserConns = 1203 // ER_TOO_MANY_USER_CONNECTIONS
	erUserLimitReached = 1226 // ER_USER_LIMIT_REACHED (max_user_connections, max_connections_per_hour)
	erAccessDenied     = 1045 // ER_ACCESS_DENIED_ERROR
)

// overloadCode reports whether a connection error is an overload (or a
// refused monitor login), which does not make a server down.
func overloadCode(code uint16) bool {
	switch code {
	case erConCount, erTooManyUserConns, erUserLimitReached, erAccessDenied:
		return true
	}
	return false
}

func overloadText(code uint16, err error) string {
	switch code {
	case erConCount:
		return "too many connections (error 1040): " + err.Error()
	case erTooManyUserConns, erUserLimitReached:
		return fmt.Sprintf("connection limit of the monitor user reached (error %d): %s", code, err)
	case erAccessDenied:
		return "the monitor user cannot log in (error 1045): " + err.Error()
	}
	return err.Error()
}
