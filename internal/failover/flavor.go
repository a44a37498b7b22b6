package failover

import (
	"strings"

	"github.com/vigil-db/vigil/internal/flavor"
)

// The statements of the steps that run fixed SQL, in the server's flavour
// (internal/flavor spells them): one table for the plan's text and for
// the executor, so that what a dry run shows is what runs. (Repoint:
// RepointSQL; waits and reads of positions are built at run time from
// what they read.)

// ReadOnlySQL makes a server read-only (on) or writable, in its flavour.
func ReadOnlySQL(f flavor.Flavor, on bool) []string { return f.ReadOnly(on) }

// StepSQL is the statements step s runs on its server, nil for a step
// that runs none of fixed text.
func StepSQL(f flavor.Flavor, s Step) []string {
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
		return []string{f.StartSQLThread()}
	case StopIOThread:
		out := make([]string, 0, len(s.Settings)+1)
		for _, st := range s.Settings {
			out = append(out, st.SQL())
		}
		return append(out, f.StopIOThread())
	case StopReplication:
		return []string{f.StopReplica()}
	case ResetReplica:
		return []string{f.ResetReplicaAll()}
	case StartReplication:
		return []string{f.StartReplica()}
	}
	return nil
}

// sqlText is statements as a plan shows them.
func sqlText(stmts []string) string { return strings.Join(stmts, "; ") }
