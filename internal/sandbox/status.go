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
	// Cluster is the node's cluster in a sandbox of several.
	Cluster string `json:"cluster,omitempty"`
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

// StatusReport is the status of every node, etcd member and Vigil daemon.
type StatusReport struct {
	Topology Topology     `json:"topology"`
	Dir      string       `json:"dir"`
	Nodes    []NodeStatus `json:"nodes"`
	// Etcd and Vigils are absent when the sandbox runs none.
	Etcd   []EtcdStatus  `json:"etcd,omitempty"`
	Vigils []VigilStatus `json:"vigils,omitempty"`
	// Agents are absent without up --agents.
	Agents []AgentStatus `json:"agents,omitempty"`
	// Clusters and Shards are the manifest's, in a sandbox of several
	// clusters (up --clusters); absent otherwise.
	Clusters []Cluster `json:"clusters,omitempty"`
	Shards   *Endpoint `json:"shards,omitempty"`
}

// States of etcd members and Vigil daemons in a StatusReport.
const (
	StateRunning = "running"
	StateStopped = "stopped"
	StatePaused  = "paused"
)

// EtcdStatus is what Status observed of one etcd member.
type EtcdStatus struct {
	Name string `json:"name"`
	// Client is the client address, host:port.
	Client   string `json:"client"`
	PeerPort int    `json:"peer_port"`
	PID      int    `json:"pid"`
	// State is running, stopped or paused.
	State   string `json:"state"`
	Running bool   `json:"running"`
	// Healthy: GET /health said "health":"true" just now.
	Healthy  bool `json:"healthy"`
	Paused   bool `json:"paused"`
	Isolated bool `json:"isolated"`
	// Error is why the member is not healthy, if it is not.
	Error string `json:"error,omitempty"`
}

// VigilStatus is what Status observed of one Vigil daemon.
type VigilStatus struct {
	Name          string `json:"name"`
	Proxy         string `json:"proxy"`
	Admin         string `json:"admin"`
	SourceAddress string `json:"source_address"`
	PID           int    `json:"pid"`
	// State is running, stopped or paused.
	State   string `json:"state"`
	Running bool   `json:"running"`
	// Answering: its admin port answered HTTP and its proxy port accepted
	// a connection just now.
	Answering bool `json:"answering"`
	Paused    bool `json:"paused"`
	Isolated  bool `json:"isolated"`
	// Error is why it is not answering, if it is not.
	Error string `json:"error,omitempty"`
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

// Status looks at every node, etcd member and Vigil daemon at once, each
// bounded by about two seconds.
func (s *Sandbox) Status(ctx context.Context) (*StatusReport, error) {
	if err := s.refresh(); err != nil {
		return nil, err
	}
	m := s.Manifest()
	r := &StatusReport{Topology: m.Topology, Dir: m.Dir, Nodes: make([]NodeStatus, len(m.Nodes)),
		Clusters: m.Clusters, Shards: m.Shards}
	if len(m.Etcd) > 0 {
		r.Etcd = make([]EtcdStatus, len(m.Etcd))
	}
	if len(m.Vigils) > 0 {
		r.Vigils = make([]VigilStatus, len(m.Vigils))
	}
	if len(m.Agents) > 0 {
		r.Agents = make([]AgentStatus, len(m.Agents))
	}
	n, ne, nv := len(m.Nodes), len(m.Etcd), len(m.Vigils)
	_ = parallel(n+ne+nv+len(m.Agents), func(i int) error {
		switch {
		case i < n:
			r.Nodes[i] = nodeStatus(ctx, &m, m.Nodes[i])
		case i < n+ne:
			r.Etcd[i-n] = etcdStatus(ctx, m.Etcd[i-n])
		case i < n+ne+nv:
			r.Vigils[i-n-ne] = vigilStatus(ctx, m.Vigils[i-n-ne])
		default:
			r.Agents[i-n-ne-nv] = agentStatus(ctx, m.Dir, m.Agents[i-n-ne-nv])
		}
		return nil
	})
	return r, nil
}

// procState is the state of a recorded process: running, stopped or
// paused (seen stopped by SIGSTOP, whatever the manifest says).
func procState(pid int, id procID) string {
	switch {
	case !procAlive(pid, id):
		return StateStopped
	case processState(pid) == "T":
		return StatePaused
	}
	return StateRunning
}

func etcdStatus(ctx context.Context, e EtcdMember) EtcdStatus {
	st := EtcdStatus{
		Name: e.Name, Client: e.ClientAddr(), PeerPort: e.PeerPort, PID: e.PID,
		State: procState(e.PID, e.proc()), Isolated: e.Isolated,
	}
	st.Running = st.State != StateStopped
	st.Paused = st.State == StatePaused
	switch st.State {
	case StatePaused:
		st.Error = "paused (SIGSTOP)"
	case StateRunning:
		_, ok, err := etcdHealth(ctx, e, statusTimeout)
		st.Healthy = ok
		if err != nil {
			st.Error = err.Error()
		}
	}
	return st
}

func vigilStatus(ctx context.Context, v VigilInstance) VigilStatus {
	st := VigilStatus{
		Name: v.Name, Proxy: v.Proxy.Addr(), Admin: v.Admin.Addr(), SourceAddress: v.SourceAddress, PID: v.PID,
		State: procState(v.PID, v.proc()), Isolated: v.Isolated,
	}
	st.Running = st.State != StateStopped
	st.Paused = st.State == StatePaused
	switch st.State {
	case StatePaused:
		st.Error = "paused (SIGSTOP)"
	case StateRunning:
		if err := vigilAnswers(ctx, v, statusTimeout); err != nil {
			st.Error = err.Error()
		} else {
			st.Answering = true
		}
	}
	return st
}

func nodeStatus(ctx context.Context, m *Manifest, n Node) NodeStatus {
	st := NodeStatus{
		Name: n.Name, Host: n.Host, Port: n.Port, Socket: n.Socket, PID: n.PID,
		Role: n.Role, Paused: n.Paused, Isolated: n.Isolated, Cluster: n.Cluster,
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
	case recorded == RoleSpare:
		return RoleSpare
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
