package failover

import (
	"strings"

	"github.com/vigil-db/vigil/internal/topology"
)

// The statements of the steps that run fixed SQL, per server flavour: one
// table for the plan's text and for the executor, so that what a dry run
// shows is what runs. (Repoint: RepointSQL; waits and reads of positions
// are built at run time from what they read.)

// ReadOnlySQL makes a server read-only (on) or writable, in its flavour:
// MySQL's super_read_only goes on after read_only and off before it.
func ReadOnlySQL(f topology.Flavor, on bool) []string {
	switch {
	case f == topology.FlavorMySQL && on:
		return []string{"SET GLOBAL read_only = 1", "SET GLOBAL super_read_only = 1"}
	case f == topology.FlavorMySQL:
		return []string{"SET GLOBAL super_read_only = 0", "SET GLOBAL read_only = 0"}
	case on:
		return []string{"SET GLOBAL read_only = 1"}
	}
	return []string{"SET GLOBAL read_only = 0"}
}

// StepSQL is the statements step s runs on its server, nil for a step
// that runs none of fixed text.
func StepSQL(f topology.Flavor, s Step) []string {
	my := f == topology.FlavorMySQL
	pick := func(maria, mysql string) []string {
		if my {
			return []string{mysql}
		}
		return []string{maria}
	}
	switch s.Kind {
	case SetReadOnly:
		return ReadOnlySQL(f, true)
	case SetWritable:
		return ReadOnlySQL(f, false)
	case SetSemiSync:
		out := make([]string, len(s.Settings))
		for i, st := range s.Settings {
			out[i] = st.SQL()
		}
		return out
	case StartSQLThread:
		return pick("START SLAVE SQL_THREAD", "START REPLICA SQL_THREAD")
	case StopIOThread:
		out := make([]string, 0, len(s.Settings)+1)
		for _, st := range s.Settings {
			out = append(out, st.SQL())
		}
		return append(out, pick("STOP SLAVE IO_THREAD", "STOP REPLICA IO_THREAD")...)
	case StopReplication:
		return pick("STOP SLAVE", "STOP REPLICA")
	case ResetReplica:
		return pick("RESET SLAVE ALL", "RESET REPLICA ALL")
	case StartReplication:
		return pick("START SLAVE", "START REPLICA")
	}
	return nil
}

// sqlText is statements as a plan shows them.
func sqlText(stmts []string) string { return strings.Join(stmts, "; ") }
