package sandbox

import (
	"context"
	"encoding/json"
	"strconv"
	"time"
)

// statusTimeout bounds what Status waits for one node, so a paused or
// isolated node cannot hang it.
const statusTimeout = 2 * time.Second

// NodeStatus is what Status observed of one node.
type NodeStatus struct {
	Name    string `json:"name"`
	Host    string `json:"host"`
	Port    int    `json:"port"`
	Socket  string `json:"socket"`
	PID     int    `json:"pid"`
	Running bool   `json:"running"`
	// Reachable: the node answered over its socket just now.
	Reachable bool `json:"reachable"`
	// Role is observed where the node answered (primary: writable and not
	// replicating; replica: has replication configured), else recorded.
	Role string `json:"role"`
	// Replicating and SecondsBehind are only meaningful for replicas.
	Replicating   bool   `json:"-"`
	SecondsBehind *int64 `json:"-"`
	// IOState and SQLState are Slave_IO_Running and Slave_SQL_Running.
	IOState, SQLState string `json:"-"`
	// Source is the node a replica replicates from, when it is one of ours.
	Source       string `json:"-"`
	ReadOnly     *bool  `json:"read_only,omitempty"`
	GTIDCurrent  string `json:"gtid_current_pos,omitempty"`
	LastIOError  string `json:"last_io_error,omitempty"`
	LastSQLError string `json:"last_sql_error,omitempty"`
	// Galera.
	WsrepState    string `json:"wsrep_local_state_comment,omitempty"`
	ClusterStatus string `json:"wsrep_cluster_status,omitempty"`
	ClusterSize   int    `json:"wsrep_cluster_size,omitempty"`
	// Failure injection.
	Paused   bool `json:"paused"`
	Isolated bool `json:"isolated"`
	// Error is why the node could not be queried, if it could not.
	Error string `json:"error,omitempty"`
}

// MarshalJSON adds replicating, seconds_behind (null when unknown) and
// source for replicas only.
func (n NodeStatus) MarshalJSON() ([]byte, error) {
	type plain NodeStatus
	if n.Role != RoleReplica {
		return json.Marshal(plain(n))
	}
	return json.Marshal(struct {
		plain
		Replicating   bool   `json:"replicating"`
		SecondsBehind *int64 `json:"seconds_behind"`
		Source        string `json:"source,omitempty"`
		IOState       string `json:"slave_io_running,omitempty"`
		SQLState      string `json:"slave_sql_running,omitempty"`
	}{plain(n), n.Replicating, n.SecondsBehind, n.Source, n.IOState, n.SQLState})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (n *NodeStatus) UnmarshalJSON(data []byte) error {
	type plain NodeStatus
	var v struct {
		plain
		Replicating   bool   `json:"replicating"`
		SecondsBehind *int64 `json:"seconds_behind"`
		Source        string `json:"source"`
		IOState       string `json:"slave_io_running"`
		SQLState      string `json:"slave_sql_running"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*n = NodeStatus(v.plain)
	n.Replicating, n.SecondsBehind, n.Source = v.Replicating, v.SecondsBehind, v.Source
	n.IOState, n.SQLState = v.IOState, v.SQLState
	return nil
}

// StatusReport is the status of every node.
type StatusReport struct {
	Topology Topology     `json:"topology"`
	Dir      string       `json:"dir"`
	Nodes    []NodeStatus `json:"nodes"`
}

// Node returns the status of the named node, or false.
func (r StatusReport) Node(name string) (NodeStatus, bool) {
	for _, n := range r.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return NodeStatus{}, false
}

// Status looks at every node at once, each bounded by about two seconds.
func (s *Sandbox) Status(ctx context.Context) (*StatusReport, error) {
	if err := s.refresh(); err != nil {
		return nil, err
	}
	m := s.Manifest()
	r := &StatusReport{Topology: m.Topology, Dir: m.Dir, Nodes: make([]NodeStatus, len(m.Nodes))}
	_ = parallel(len(m.Nodes), func(i int) error {
		r.Nodes[i] = nodeStatus(ctx, &m, m.Nodes[i])
		return nil
	})
	return r, nil
}

func nodeStatus(ctx context.Context, m *Manifest, n Node) NodeStatus {
	st := NodeStatus{
		Name: n.Name, Host: n.Host, Port: n.Port, Socket: n.Socket, PID: n.PID,
		Role: n.Role, Paused: n.Paused, Isolated: n.Isolated,
	}
	st.Running = processAlive(n.PID, n.Config)
	if !st.Running {
		st.Paused = false
		return st
	}
	if processState(n.PID) == "T" {
		st.Paused = true
	}
	if st.Paused {
		st.Error = "paused (SIGSTOP)"
		return st
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	res, err := query(ctx, n.Socket, "SELECT @@read_only, @@gtid_current_pos", statusTimeout)
	if err != nil {
		st.Error = err.Error()
		return st
	}
	st.Reachable = true
	if rows := res.strings(); len(rows) == 1 && len(rows[0]) == 2 {
		ro := rows[0][0] == "1" || rows[0][0] == "ON"
		st.ReadOnly = &ro
		st.GTIDCurrent = rows[0][1]
	}
	if m.Topology == Galera {
		g, err := globalStatus(ctx, n.Socket, statusTimeout, "wsrep_local_state_comment", "wsrep_cluster_status", "wsrep_cluster_size")
		if err != nil {
			st.Error = err.Error()
			return st
		}
		st.WsrepState, st.ClusterStatus = g["wsrep_local_state_comment"], g["wsrep_cluster_status"]
		st.ClusterSize, _ = strconv.Atoi(g["wsrep_cluster_size"])
		return st
	}
	rs, err := replicaStatus(ctx, n.Socket, statusTimeout)
	if err != nil {
		st.Error = err.Error()
		return st
	}
	st.Role = observedRole(n.Role, m.Topology, st.ReadOnly, rs)
	if rs != nil {
		st.Replicating = rs.running()
		st.IOState, st.SQLState = rs.IO, rs.SQL
		st.SecondsBehind = rs.SecondsBehind
		st.LastIOError, st.LastSQLError = rs.LastIOError, rs.LastSQLError
		for _, o := range m.Nodes {
			if o.Port == rs.MasterPort && (rs.MasterHost == o.Host || rs.MasterHost == "localhost") {
				st.Source = o.Name
			}
		}
	}
	return st
}

// observedRole decides a node's role from what it says about itself: a
// node with replication configured is a replica, a writable one without is
// the primary; anything else keeps the recorded role.
func observedRole(recorded string, t Topology, readOnly *bool, rs *replStatus) string {
	switch {
	case t == Galera:
		return RoleGalera
	case rs != nil:
		return RoleReplica
	case t == Standalone:
		return RoleStandalone
	case readOnly != nil && !*readOnly:
		return RolePrimary
	}
	return recorded
}

// replStatus is the part of SHOW SLAVE STATUS the sandbox looks at.
type replStatus struct {
	MasterHost    string
	MasterPort    int
	IO, SQL       string
	SecondsBehind *int64
	LastIOError   string
	LastSQLError  string
}

func (r *replStatus) running() bool { return r.IO == "Yes" && r.SQL == "Yes" }

// parseReplicaStatus reads SHOW SLAVE STATUS rows; nil means the server
// has no replication configured.
func parseReplicaStatus(rows []map[string]string) *replStatus {
	if len(rows) == 0 || rows[0]["Master_Host"] == "" {
		return nil
	}
	row := rows[0]
	r := &replStatus{
		MasterHost:   row["Master_Host"],
		IO:           row["Slave_IO_Running"],
		SQL:          row["Slave_SQL_Running"],
		LastIOError:  row["Last_IO_Error"],
		LastSQLError: row["Last_SQL_Error"],
	}
	r.MasterPort, _ = strconv.Atoi(row["Master_Port"])
	if v, err := strconv.ParseInt(row["Seconds_Behind_Master"], 10, 64); err == nil {
		r.SecondsBehind = &v
	}
	return r
}

func replicaStatus(ctx context.Context, socket string, timeout time.Duration) (*replStatus, error) {
	res, err := query(ctx, socket, "SHOW SLAVE STATUS", timeout)
	if err != nil {
		return nil, err
	}
	return parseReplicaStatus(res.maps()), nil
}
