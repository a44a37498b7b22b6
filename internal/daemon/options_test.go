package daemon

import (
	"testing"

	"github.com/vigil-db/vigil/internal/config"
)

// failover.auto_rejoin reaches the engine: on unless set off, and only for
// replication clusters. A reload builds the executor's options the same
// way (swapCluster → Executor.SetOptions).
func TestExecutorOptionsAutoRejoin(t *testing.T) {
	off, on := false, true
	for _, tc := range []struct {
		name string
		typ  string
		set  *bool
		want bool
	}{
		{"replication, unset", "replication", nil, true},
		{"replication, off", "replication", &off, false},
		{"replication, on", "replication", &on, true},
		{"galera", "galera", nil, false},
		{"read-only", "read-only", nil, false},
	} {
		cc := config.Cluster{Name: "c", Type: tc.typ}
		cc.Failover.AutoRejoin = tc.set
		if got := executorOptions(&config.Config{}, cc, nil).Engine.AutoRejoin; got != tc.want {
			t.Errorf("%s: AutoRejoin %v, want %v", tc.name, got, tc.want)
		}
	}
}
