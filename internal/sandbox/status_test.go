package sandbox

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseReplicaStatus(t *testing.T) {
	if parseReplicaStatus(nil) != nil {
		t.Error("no rows must mean no replication")
	}
	rs := parseReplicaStatus([]map[string]string{{
		"Master_Host": "127.0.0.1", "Master_Port": "23306",
		"Slave_IO_Running": "Yes", "Slave_SQL_Running": "Yes", "Seconds_Behind_Master": "3",
	}})
	if rs == nil || !rs.running() || rs.MasterPort != 23306 || rs.SecondsBehind == nil || *rs.SecondsBehind != 3 {
		t.Errorf("parsed %+v", rs)
	}
	rs = parseReplicaStatus([]map[string]string{{
		"Master_Host": "127.0.0.1", "Master_Port": "23306",
		"Slave_IO_Running": "Connecting", "Slave_SQL_Running": "Yes", "Seconds_Behind_Master": "",
	}})
	if rs.running() || rs.SecondsBehind != nil {
		t.Errorf("connecting replica parsed as %+v", rs)
	}
}

func TestObservedRole(t *testing.T) {
	f, tr := false, true
	rs := &replStatus{}
	for _, c := range []struct {
		recorded string
		topo     Topology
		ro       *bool
		rs       *replStatus
		want     string
	}{
		{"replica", Replication, &f, nil, "primary"}, // promoted
		{"primary", Replication, &tr, rs, "replica"}, // demoted
		{"primary", Replication, &tr, nil, "primary"},
		{"replica", Replication, nil, nil, "replica"},
		{"galera", Galera, &f, nil, "galera"},
		{"standalone", Standalone, &f, nil, "standalone"},
	} {
		if got := observedRole(c.recorded, c.topo, c.ro, c.rs); got != c.want {
			t.Errorf("observedRole(%q, %s, %v, %v) = %q, want %q", c.recorded, c.topo, c.ro, c.rs, got, c.want)
		}
	}
}

func TestNodeStatusJSON(t *testing.T) {
	primary, _ := json.Marshal(NodeStatus{Name: "node1", Role: RolePrimary, Running: true})
	if strings.Contains(string(primary), "seconds_behind") || strings.Contains(string(primary), "replicating") {
		t.Errorf("primary has replica fields: %s", primary)
	}
	replica, _ := json.Marshal(NodeStatus{Name: "node2", Role: RoleReplica, Running: true})
	if !strings.Contains(string(replica), `"seconds_behind":null`) || !strings.Contains(string(replica), `"replicating":false`) {
		t.Errorf("replica lacks replicating/seconds_behind: %s", replica)
	}
	lag := int64(2)
	data, _ := json.Marshal(StatusReport{Nodes: []NodeStatus{{Name: "node3", Role: RoleReplica, Replicating: true, SecondsBehind: &lag, Source: "node1"}}})
	var back StatusReport
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	n, ok := back.Node("node3")
	if !ok || !n.Replicating || n.SecondsBehind == nil || *n.SecondsBehind != 2 || n.Source != "node1" {
		t.Errorf("round trip: %+v", n)
	}
}
