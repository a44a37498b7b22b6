package executor

import (
	"context"
	"fmt"

	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/flavor"
	"github.com/vigil-db/vigil/internal/topology"
)

// Client runs SQL on the cluster's servers with the monitor account: the
// statements on one connection, in order, each bounded by timeout; it
// returns the last statement's columns and rows. Every statement the
// executor sends goes through it, so tests run plans against a fake and
// compare what ran with what the plan shows.
type Client interface {
	Run(ctx context.Context, server, addr string, timeout time.Duration, stmts ...string) (cols []string, rows [][]string, err error)
}

// run runs statements on a server through the client and returns the
// last one's columns and rows.
func (e *Executor) run(ctx context.Context, name string, timeout time.Duration, stmts ...string) ([]string, [][]string, error) {
	addr := e.addr(name)
	if addr == "" {
		return nil, nil, fmt.Errorf("no server %q", name)
	}
	return e.client.Run(ctx, name, addr, timeout, stmts...)
}

// exec is run without the columns.
func (e *Executor) exec(ctx context.Context, name string, timeout time.Duration, stmts ...string) ([][]string, error) {
	_, rows, err := e.run(ctx, name, timeout, stmts...)
	return rows, err
}

// Redact hides a replication password (MASTER_PASSWORD, SOURCE_PASSWORD)
// and everything after it in a statement shown in an error.
func Redact(q string) string {
	u := strings.ToUpper(q)
	for _, k := range []string{"MASTER_PASSWORD", "SOURCE_PASSWORD"} {
		if i := strings.Index(u, k); i >= 0 {
			return q[:i] + k + "='…'"
		}
	}
	return q
}

// refreshFacts reads, from every reachable server, what the engine needs
// beyond the monitor's observations: all servers at once, each bounded by
// a short timeout, so that a paused server delays a decision by at most
// that timeout, not by one per server. Unreachable servers keep their
// last known facts.
func (e *Executor) refreshFacts(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range e.o().Servers {
		if s.Removed {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.refreshFactsOf(ctx, s.Name)
		}()
	}
	wg.Wait()
}

func (e *Executor) refreshFactsOf(ctx context.Context, name string) {
	f, err := e.readFacts(ctx, name)
	if err != nil {
		return
	}
	e.mu.Lock()
	old := e.facts[name]
	f.FailingSince = old.FailingSince
	f.LongestQuerySeconds = old.LongestQuerySeconds
	e.facts[name] = f
	e.mu.Unlock()
}

// factsTimeout bounds each server's facts: connecting and every query.
const factsTimeout = time.Second

func (e *Executor) readFacts(ctx context.Context, name string) (failover.ServerFacts, error) {
	f := failover.ServerFacts{SecondsSinceSourceEvent: -1}
	fl := e.flavorOf(name)
	if o := e.lastObs(name); o != nil && o.OK && o.Binlog.Read {
		// The monitor's check read the binary log settings, the heartbeat
		// period, the replica status and, where they are built in, the
		// semi-sync settings (their variables exist only with a plugin
		// loaded on MySQL and MariaDB before 10.3.3: read here then).
		r := o.Binlog.SemiSync
		if r == nil {
			var err error
			if r, err = e.exec(ctx, name, factsTimeout, fl.ReadSemiSyncSettings()); err != nil {
				return f, fmt.Errorf("facts of %s: %w", name, err)
			}
		}
		f.SemiSync = parseSemiSyncSettings(r)
		f.LogBin, f.LogSlaveUpdates, f.HeartbeatPeriod = o.Binlog.LogBin, o.Binlog.LogReplicaUpdates, o.Binlog.HeartbeatPeriod
		if o.Replica != nil {
			f.Filters = o.Replica.Filters
		}
		return f, nil
	}
	rows, err := e.exec(ctx, name, factsTimeout, fl.ReadLogBin())
	if err != nil || len(rows) != 1 || len(rows[0]) != 2 {
		return f, fmt.Errorf("facts of %s: %v", name, err)
	}
	f.LogBin = rows[0][0] == "1"
	f.LogSlaveUpdates = rows[0][1] == "1"
	if q := fl.ReadHeartbeatPeriod(); q != "" {
		if r, err := e.exec(ctx, name, factsTimeout, q); err == nil && len(r) == 1 && len(r[0]) == 2 {
			f.HeartbeatPeriod, _ = strconv.ParseFloat(r[0][1], 64)
		}
	}
	if r, err := e.exec(ctx, name, factsTimeout, fl.ReadSemiSyncSettings()); err == nil {
		f.SemiSync = parseSemiSyncSettings(r)
	}
	cols, rows, err := e.run(ctx, name, factsTimeout, fl.ReplicaStatus())
	if err == nil && len(rows) == 1 {
		f.Filters = topology.ParseReplicaStatus(cols, rows[0]).Filters
	}
	return f, nil
}

// parseSemiSyncSettings reads SHOW GLOBAL VARIABLES LIKE 'rpl_semi_sync_%'.
func parseSemiSyncSettings(rows [][]string) failover.SemiSyncSettings {
	var ss failover.SemiSyncSettings
	for _, r := range rows {
		if len(r) < 2 {
			continue
		}
		name, val := strings.ToLower(r[0]), r[1]
		on := strings.EqualFold(val, "ON") || val == "1"
		for _, side := range flavor.MySQL80.SemiSyncPlugins() { // both plugins' names
			src, rep := side[0], side[1]
			switch name {
			case src + "_enabled":
				ss.Known, ss.SourceEnabled = true, on
				ss.SourceName, ss.ReplicaName = src, rep
			case rep + "_enabled":
				ss.Known, ss.ReplicaEnabled = true, on
			case src + "_wait_no_slave", src + "_wait_no_replica":
				ss.WaitNoReplica = on
			case src + "_timeout":
				if ms, err := strconv.ParseInt(val, 10, 64); err == nil {
					ss.Timeout = time.Duration(ms) * time.Millisecond
				}
			}
		}
	}
	if src, _ := flavor.MariaDB.SemiSyncNames(); ss.SourceName == src {
		ss.SourceName, ss.ReplicaName = "", "" // the default names (the flavour's)
	}
	return ss
}

// refreshRunning reads the longest running query of every server (for the
// switchover check).
func (e *Executor) refreshRunning(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range e.o().Servers {
		if s.Removed {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows, err := e.exec(ctx, s.Name, factsTimeout, e.flavorOf(s.Name).ReadLongestQuery())
			if err != nil || len(rows) != 1 {
				return
			}
			v, _ := strconv.ParseFloat(rows[0][0], 64)
			e.mu.Lock()
			f := e.facts[s.Name]
			f.LongestQuerySeconds = v
			e.facts[s.Name] = f
			e.mu.Unlock()
		}()
	}
	wg.Wait()
}

// flavorOf is the SQL flavour of a server, from the monitor's latest
// check of it that read its version, else from another server of the
// cluster's (a cluster is of one flavour); Unknown (MariaDB's SQL) before
// any check answered.
func (e *Executor) flavorOf(name string) flavor.Flavor {
	other := flavor.Unknown
	for _, h := range e.mon.Observations() {
		o := h.Last
		if o == nil || o.Version == "" {
			continue
		}
		if h.Name == name {
			return flavor.OfObservation(o)
		}
		if other == flavor.Unknown {
			other = flavor.OfObservation(o)
		}
	}
	return other
}
