package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// pollEvery is how often the waits look again.
const pollEvery = 50 * time.Millisecond

// poll calls check until it returns done, the timeout passes or ctx ends;
// on timeout the error says what was last seen.
func poll(ctx context.Context, timeout time.Duration, check func() (done bool, err error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, err := check()
		if done {
			return err
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return fmt.Errorf("%w (%w)", ctx.Err(), err)
		case <-time.After(pollEvery):
		}
	}
}

// waitAnswer waits until a node answers over its socket, failing early
// with the error log's last error if its process exits.
func waitAnswer(ctx context.Context, n Node, timeout time.Duration) error {
	return poll(ctx, timeout, func() (bool, error) {
		if !processAlive(n.PID, n.Config) {
			return true, fmt.Errorf("%s exited while starting: %s", n.Name, logSummary(n.ErrorLog))
		}
		if err := ping(ctx, n.Socket, time.Second); err != nil {
			return false, fmt.Errorf("%s did not answer within %s (%v); see %s", n.Name, timeout, err, n.ErrorLog)
		}
		return true, nil
	})
}

// waitSynced waits until a Galera node is Synced in a primary component of
// at least size nodes.
func waitSynced(ctx context.Context, n Node, size int, timeout time.Duration) error {
	return poll(ctx, timeout, func() (bool, error) {
		if !processAlive(n.PID, n.Config) {
			return true, fmt.Errorf("%s exited while joining the cluster: %s", n.Name, logSummary(n.ErrorLog))
		}
		st, err := globalStatus(ctx, n.Socket, time.Second, "wsrep_local_state_comment", "wsrep_cluster_size", "wsrep_cluster_status")
		if err != nil {
			return false, fmt.Errorf("%s: %w", n.Name, err)
		}
		got, _ := strconv.Atoi(st["wsrep_cluster_size"])
		if st["wsrep_local_state_comment"] == "Synced" && st["wsrep_cluster_status"] == "Primary" && got >= size {
			return true, nil
		}
		return false, fmt.Errorf("%s is not Synced in a cluster of %d within %s: state %q, cluster_status %q, cluster_size %d; see %s",
			n.Name, size, timeout, st["wsrep_local_state_comment"], st["wsrep_cluster_status"], got, n.ErrorLog)
	})
}

// waitReplicating waits until both replication threads of a replica run.
func waitReplicating(ctx context.Context, n Node, timeout time.Duration) error {
	return poll(ctx, timeout, func() (bool, error) {
		rs, err := replicaStatus(ctx, n.Socket, time.Second)
		if err != nil {
			return false, fmt.Errorf("%s: %w", n.Name, err)
		}
		if rs == nil {
			return false, fmt.Errorf("%s has no replication configured", n.Name)
		}
		if rs.running() {
			return true, nil
		}
		return false, fmt.Errorf("%s is not replicating within %s: Slave_IO_Running=%s Slave_SQL_Running=%s %s",
			n.Name, timeout, rs.IO, rs.SQL, strings.TrimSpace(rs.LastIOError+" "+rs.LastSQLError))
	})
}

// logSummary is the last [ERROR] lines of a server log (or its last line),
// on one line, for error messages.
func logSummary(path string) string {
	tail := readTail(path, 32<<10)
	lines := strings.Split(strings.TrimSpace(tail), "\n")
	var errs []string
	for _, l := range lines {
		if strings.Contains(l, "[ERROR]") || strings.Contains(l, "ERROR:") {
			errs = append(errs, strings.TrimSpace(l))
		}
	}
	if len(errs) > 3 {
		errs = errs[len(errs)-3:]
	}
	if len(errs) == 0 && len(lines) > 0 && lines[len(lines)-1] != "" {
		errs = lines[len(lines)-1:]
	}
	if len(errs) == 0 {
		return "no log (see " + path + ")"
	}
	return strings.Join(errs, " | ") + " (see " + path + ")"
}

// readTail is the last max bytes of a file, or "".
func readTail(path string, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	if off := st.Size() - max; off > 0 {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return ""
		}
	}
	data, _ := io.ReadAll(f)
	return string(data)
}
