package topology

import "strings"

// Galera node states (wsrep_local_state).
const (
	WsrepJoining = 1
	WsrepDonor   = 2 // Donor/Desynced
	WsrepJoined  = 3
	WsrepSynced  = 4
)

// WsrepStatus is a Galera node's state from SHOW GLOBAL STATUS LIKE
// 'wsrep_%' and the wsrep variables.
type WsrepStatus struct {
	// On is @@wsrep_on (true when the variable was not read).
	On bool
	// LocalState is wsrep_local_state (see the Wsrep* constants), 0 when
	// unknown or Initialized.
	LocalState        int
	LocalStateComment string
	// ClusterStatus is Primary, non-Primary or Disconnected.
	ClusterStatus string
	ClusterSize   int
	// ClusterStateUUID identifies the cluster's history.
	ClusterStateUUID string
	Ready            bool
	Connected        bool
	// Desync is @@wsrep_desync.
	Desync bool
	// RejectQueries is @@wsrep_reject_queries: NONE, ALL or ALL_KILL.
	RejectQueries string
	// SSTDonorRejectsQueries is @@wsrep_sst_donor_rejects_queries.
	SSTDonorRejectsQueries bool
	// LocalRecvQueue is wsrep_local_recv_queue, write-sets waiting to be
	// applied: Galera's form of lag.
	LocalRecvQueue int64
	// LocalIndex is wsrep_local_index, the node's place in the membership
	// (the same on every node's view), -1 when unknown.
	LocalIndex int
}

// ParseWsrepStatus reads a map of lower-case wsrep status and variable
// names (StatusMap of SHOW GLOBAL STATUS LIKE 'wsrep%' plus the variables
// wsrep_on, wsrep_desync, wsrep_reject_queries,
// wsrep_sst_donor_rejects_queries) into a WsrepStatus.
func ParseWsrepStatus(m map[string]string) WsrepStatus {
	w := WsrepStatus{
		On:                true,
		LocalState:        int(mapInt(m, "wsrep_local_state", 0)),
		LocalStateComment: m["wsrep_local_state_comment"],
		ClusterStatus:     m["wsrep_cluster_status"],
		ClusterSize:       int(mapInt(m, "wsrep_cluster_size", 0)),
		ClusterStateUUID:  m["wsrep_cluster_state_uuid"],
		Ready:             ParseBool(m["wsrep_ready"]),
		Connected:         ParseBool(m["wsrep_connected"]),
		Desync:            ParseBool(m["wsrep_desync"]),
		RejectQueries:     strings.ToUpper(m["wsrep_reject_queries"]),
		LocalRecvQueue:    mapInt(m, "wsrep_local_recv_queue", 0),
		LocalIndex:        int(mapInt(m, "wsrep_local_index", -1)),
	}
	if v, ok := m["wsrep_on"]; ok {
		w.On = ParseBool(v)
	}
	if w.RejectQueries == "" {
		w.RejectQueries = "NONE"
	}
	w.SSTDonorRejectsQueries = ParseBool(m["wsrep_sst_donor_rejects_queries"])
	return w
}

// Synced: the node is in the Synced state.
func (w *WsrepStatus) Synced() bool { return w.LocalState == WsrepSynced }

// Donor: the node is a donor or desynced (wsrep_local_state 2).
func (w *WsrepStatus) Donor() bool { return w.LocalState == WsrepDonor }

// Primary: the node is in the primary component.
func (w *WsrepStatus) Primary() bool { return w.ClusterStatus == "Primary" }

// RejectingQueries: the node refuses client queries
// (wsrep_reject_queries other than NONE).
func (w *WsrepStatus) RejectingQueries() bool {
	return w.RejectQueries != "" && w.RejectQueries != "NONE"
}
