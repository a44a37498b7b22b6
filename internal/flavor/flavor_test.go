package flavor

import (
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

func TestOf(t *testing.T) {
	for _, c := range []struct {
		version string
		want    Flavor
	}{
		{"5.5.5-10.11.19-MariaDB-0+deb12u1-log", MariaDB},
		{"11.4.2-MariaDB", MariaDB},
		{"8.0.36", MySQL80},
		{"8.0.23-commercial", MySQL80},
		{"8.0.22", MySQLLegacy},
		{"5.7.44-log", MySQLLegacy},
		{"8.3.0", MySQL80},
		{"8.4.3", MySQL84},
		{"9.1.0", MySQL84},
		{"", Unknown},
	} {
		if got := Of(c.version); got != c.want {
			t.Errorf("Of(%q) = %s, want %s", c.version, got, c.want)
		}
	}
	if got := For(topology.FlavorMySQL, ""); got != MySQL80 {
		t.Errorf("a MySQL server of unknown version is %s", got)
	}
}

// Every statement a flavour spells is one it speaks.
func TestFlavorsSpeakTheirOwnSQL(t *testing.T) {
	for _, f := range All {
		stmts := []string{f.StartReplica(), f.StopReplica(), f.ResetReplicaAll(), f.StartSQLThread(), f.StartIOThread(),
			f.StopIOThread(), f.ReplicaStatus(), f.ChangeSource("db", "3306", "'u'", "'p'", "slave_pos"),
			f.WaitGTID("x", time.Second), f.ReadBinlogPos(), f.ReadCurrentPos(), f.ReadPositions(), f.ReadLogBin(),
			f.ReadHeartbeatPeriod(), f.ReadReceivedHeartbeats(), f.ReadSemiSyncSettings(), f.ReadLongestQuery(),
			f.SemiSyncEnabledVar(), f.KillConnTimeoutVar(), f.SetReplicaStartPos("0-1-5")}
		stmts = append(stmts, f.ReadOnly(true)...)
		stmts = append(stmts, f.ReadOnly(false)...)
		stmts = append(stmts, f.CheckVariables()...)
		stmts = append(stmts, f.CheckStatus()...)
		for _, p := range f.SemiSyncPlugins() {
			stmts = append(stmts, p[0], p[1])
		}
		for _, q := range stmts {
			if bad := f.Foreign(q); bad != nil {
				t.Errorf("%s: %q says %v", f, q, bad)
			}
		}
	}
	if bad := MySQL84.Foreign("SHOW SLAVE STATUS"); len(bad) != 1 {
		t.Errorf("MySQL 8.4 takes SHOW SLAVE STATUS: %v", bad)
	}
	if bad := MySQL84.Foreign("SET GLOBAL rpl_semi_sync_master_enabled = ON"); len(bad) != 1 {
		t.Errorf("MySQL 8.4 takes rpl_semi_sync_master_enabled: %v", bad)
	}
}
