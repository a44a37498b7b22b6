package executor

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/topology"
)

// Salvage: once the old primary of a failover answers again, write every
// transaction it committed that never reached the new primary to
// state_dir/salvage/<time>-<node>.sql (with its GTIDs) and report the
// count. Nothing acknowledged under semi-sync can be there; when the old
// primary had fallen back to asynchronous replication the event says that
// data could be lost.

// salvageSettle is how long after a returned old primary first answers
// its salvage check runs again: statements still in flight towards it
// (retransmitted once a partition heals) may commit in the first moments,
// after the first check.
const salvageSettle = 5 * time.Second

// salvageDue returns the latest successful failover whose old primary was
// not salvaged yet, or whose first check is older than salvageSettle and
// not re-checked.
func (e *Executor) salvageDue() (failover.Record, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.history.Records) - 1; i >= 0; i-- {
		r := e.history.Records[i]
		if r.Kind != failover.RecordFailover {
			continue
		}
		if !r.OK {
			return r, false
		}
		st := e.salvaged[r.Started.UnixNano()]
		switch {
		case st == nil:
			return r, true
		case !st.settled && e.now().Sub(st.first) >= salvageSettle:
			return r, true
		}
		return r, false
	}
	return failover.Record{}, false
}

// salvageState is a failover's salvage progress.
type salvageState struct {
	first   time.Time // the first check
	settled bool      // checked again after salvageSettle
	extra   uint64    // transactions found missing so far
}

func (e *Executor) checkSalvage(ctx context.Context) {
	rec, due := e.salvageDue()
	if !due {
		return
	}
	var oldObs, newObs *topology.Observation
	for _, h := range e.mon.Observations() {
		switch h.Name {
		case rec.OldPrimary:
			oldObs = h.Last
		case rec.NewPrimary:
			newObs = h.Last
		}
	}
	if oldObs == nil || !oldObs.OK || newObs == nil || !newObs.OK {
		return // wait until both answer
	}
	key := rec.Started.UnixNano()
	e.mu.Lock()
	st := e.salvaged[key]
	again := st != nil
	if st == nil {
		st = &salvageState{first: e.now()}
		e.salvaged[key] = st
	} else {
		st.settled = true
	}
	before := st.extra
	e.mu.Unlock()
	if again {
		// The same moment for both servers: checked now.
		fresh := e.mon.CheckFresh(ctx, rec.OldPrimary, rec.NewPrimary)
		if o := fresh[rec.OldPrimary]; o != nil && o.OK {
			oldObs = o
		}
		if o := fresh[rec.NewPrimary]; o != nil && o.OK {
			newObs = o
		}
	}
	extra := e.salvage(ctx, rec, oldObs, newObs, again, before)
	e.mu.Lock()
	st.extra = max(before, extra)
	e.mu.Unlock()
}

// salvage compares what rec's old primary holds with the new primary,
// writes what the new primary lacks to a salvage file and reports it.
// again: a later check, which reports only when it finds more than
// before.
func (e *Executor) salvage(ctx context.Context, rec failover.Record, oldObs, newObs *topology.Observation, again bool, before uint64) uint64 {
	extra, start := missing(oldObs.GTID.Binlog, newObs.GTID.Current)
	if n, st, ok := missingByState(oldObs.GTID.BinlogState, newObs.GTID.BinlogState); ok && n > extra {
		// Positions miss a last transaction that no replica received once
		// the new primary wrote further in the domain; binlog states
		// (per server id) do not.
		extra, start = n, st
	}
	if again && extra <= before {
		return extra
	}
	label := "salvage"
	if again {
		label = "salvage (checked again after it settled)"
	}
	if extra == 0 {
		// Nothing it committed is missing: whatever its semi-sync
		// counters say, no data was lost.
		e.event(rec.OldPrimary, "salvage", fmt.Sprintf("%s: %s has no transaction that %s lacks (0 transactions)", label, rec.OldPrimary, rec.NewPrimary))
		return 0
	}
	fallback := ""
	if n := e.unackedAsPrimary(rec.OldPrimary, oldObs.SemiSync.NoTx); n > 0 {
		fallback = fmt.Sprintf("; %s had committed %d transactions without a semi-sync acknowledgement as primary (it fell back to asynchronous replication), so data could be lost", rec.OldPrimary, n)
	}
	path, counted, err := e.writeSalvage(ctx, rec, oldObs, start, newObs.GTID.BinlogState)
	if counted > 0 && uint64(counted) < extra {
		// The file counted: the sequence gap overcounts (countMissing).
		extra = uint64(counted)
	}
	if err != nil {
		e.event(rec.OldPrimary, "salvage", fmt.Sprintf("%s: %s has %d transactions %s lacks (binlog position %s vs %s), but they could not be written: %v%s",
			label, rec.OldPrimary, extra, rec.NewPrimary, oldObs.GTID.Binlog, newObs.GTID.Current, err, fallback))
		return extra
	}
	e.event(rec.OldPrimary, "salvage", fmt.Sprintf("%s: %s has %d transactions %s lacks (its binlog position %s, the new primary's %s); written to %s — review and re-apply what is needed, then `vigil ctl rejoin` refuses until they are dealt with%s",
		label, rec.OldPrimary, extra, rec.NewPrimary, oldObs.GTID.Binlog, newObs.GTID.Current, path, fallback))
	return extra
}

// noteReplicaNoTx records, for every server that replicates now, its
// Rpl_semi_sync_master_no_tx: the counter runs since the server started,
// and what it counted while the server was a replica (a former primary
// with semi-sync master still on counts the transactions it applies) is
// not what it committed unacknowledged as primary.
func (e *Executor) noteReplicaNoTx() {
	obs := e.mon.Observations()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, h := range obs {
		if o := h.Last; o != nil && o.OK && o.Replica != nil && o.ReadOnly {
			e.noTxBase[h.Name] = o.SemiSync.NoTx
		}
	}
}

// unackedAsPrimary is how many of noTx (a server's
// Rpl_semi_sync_master_no_tx now) it counted since it last replicated:
// the unacknowledged commits of its latest time as primary. A counter
// below the recorded base was reset by a restart and counts from there.
func (e *Executor) unackedAsPrimary(server string, noTx int64) int64 {
	e.mu.Lock()
	base, ok := e.noTxBase[server]
	e.mu.Unlock()
	if !ok || noTx < base {
		return noTx
	}
	return noTx - base
}

// missing counts the transactions of old that cur lacks, per domain, and
// returns the GTID position to start reading old's binary log from.
func missing(old, cur topology.GTIDPos) (uint64, string) {
	var n uint64
	var start []string
	for _, g := range old {
		have, ok := cur.Seq(g.Domain)
		if !ok {
			have = 0
		}
		if g.Seq > have {
			n += g.Seq - have
			if ok {
				for _, c := range cur {
					if c.Domain == g.Domain {
						start = append(start, fmt.Sprintf("%d-%d-%d", c.Domain, c.Server, c.Seq))
					}
				}
			}
		}
	}
	return n, strings.Join(start, ",")
}

// missingByState counts, by @@gtid_binlog_state, the transactions of
// old's binary log that cur's lacks: for each (domain, server id) pair
// the sequence numbers beyond cur's last of that pair (at least one when
// cur has none). start is where to read old's binary log from: cur's
// last GTID of each such pair. ok is false when either state is unknown.
func missingByState(old, cur []topology.GTID) (n uint64, start string, ok bool) {
	if len(old) == 0 || len(cur) == 0 {
		return 0, "", false
	}
	var from []string
	for _, gap := range topology.StateBeyond(old, cur) {
		if !gap.Known {
			n++
			continue
		}
		n += gap.Last.Seq - gap.Other.Seq
		from = append(from, gap.Other.String())
	}
	return n, strings.Join(from, ","), true
}

// salvageGTID finds the GTID of each transaction in mariadb-binlog's
// output ("... GTID 0-1-609 trans").
var salvageGTID = regexp.MustCompile(`\tGTID (\d+)-(\d+)-(\d+)`)

// countMissing counts the transactions in mariadb-binlog's output that
// cur, a binlog state, lacks: beyond cur's last of their (domain, server
// id). The file starts at cur's last of each pair, but other servers'
// transactions in between are in it too (cur has those), so the gap of
// sequence numbers says how many there could be, this how many there
// are. -1 when cur is unknown.
func countMissing(out []byte, cur []topology.GTID) int {
	if len(cur) == 0 {
		return -1
	}
	n := 0
	for _, m := range salvageGTID.FindAllSubmatch(out, -1) {
		d, _ := strconv.ParseUint(string(m[1]), 10, 32)
		sv, _ := strconv.ParseUint(string(m[2]), 10, 32)
		seq, _ := strconv.ParseUint(string(m[3]), 10, 64)
		i := slices.IndexFunc(cur, func(c topology.GTID) bool { return c.Domain == uint32(d) && c.Server == uint32(sv) })
		if i < 0 || cur[i].Seq < seq {
			n++
		}
	}
	return n
}

// writeSalvage writes what oldObs's server holds from start on to a
// salvage file, and counts the transactions in it that cur (the binlog
// state of the server it is compared with) lacks (-1: unknown).
func (e *Executor) writeSalvage(ctx context.Context, rec failover.Record, oldObs *topology.Observation, start string, cur []topology.GTID) (string, int, error) {
	dir := filepath.Join(e.o().StateDir, "salvage")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", -1, err
	}
	rows, err := e.exec(ctx, rec.OldPrimary, 3*time.Second, "SHOW BINARY LOGS")
	if err != nil || len(rows) == 0 {
		return "", -1, fmt.Errorf("listing the binary logs of %s: %v", rec.OldPrimary, err)
	}
	host, port, _ := net.SplitHostPort(e.addr(rec.OldPrimary))
	args := []string{"--no-defaults", "--read-from-remote-server", "--host=" + host, "--port=" + port,
		"--user=" + e.o().ReplUser, "--to-last-log"}
	if start != "" {
		args = append(args, "--start-position="+start)
	}
	args = append(args, rows[0][0])
	bctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(bctx, "mariadb-binlog", args...)
	cmd.Env = append(os.Environ(), "MYSQL_PWD="+e.o().ReplPass)
	out, err := cmd.Output()
	if err != nil {
		return "", -1, fmt.Errorf("mariadb-binlog: %w", err)
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%s.sql", e.now().UTC().Format("20060102T150405Z"), rec.OldPrimary))
	header := fmt.Sprintf("-- Vigil salvage: transactions %s committed that %s did not have at the failover of %s.\n-- %s binlog position %s; read from GTID %s on.\n-- Review before applying anything.\n",
		rec.OldPrimary, rec.NewPrimary, rec.Started.Format(time.RFC3339), rec.OldPrimary, oldObs.GTID.Binlog, start)
	if err := os.WriteFile(path, append([]byte(header), out...), 0o640); err != nil {
		return "", -1, err
	}
	return path, countMissing(out, cur), nil
}

// salvageAtRejoin writes the transactions a server to rejoin holds that
// the primary lacks to a salvage file, once per position of the server,
// and returns a sentence naming it ("" when none was written).
func (e *Executor) salvageAtRejoin(ctx context.Context, in failover.Input, node string) string {
	w := in.Snapshot.WriterServer()
	no, po := in.Obs[node], (*topology.Observation)(nil)
	if w != nil {
		po = in.Obs[w.Name]
	}
	if w == nil || no == nil || po == nil || !no.OK || !po.OK || no.Flavor == topology.FlavorMySQL {
		return ""
	}
	key := no.GTID.Binlog.String()
	e.mu.Lock()
	done := e.rejoinSalvaged[node] == key
	e.rejoinSalvaged[node] = key
	e.mu.Unlock()
	if done {
		return " (its salvage file was written at the first refused rejoin: see the salvage event)"
	}
	_, start := missing(no.GTID.Binlog, po.GTID.Current)
	if _, st, ok := missingByState(no.GTID.BinlogState, po.GTID.BinlogState); ok && st != "" {
		start = st
	}
	rec := failover.Record{Kind: failover.RecordRejoin, Started: e.now(), OldPrimary: node, NewPrimary: w.Name}
	path, _, err := e.writeSalvage(ctx, rec, no, start, po.GTID.BinlogState)
	if err != nil {
		e.event(node, "salvage", fmt.Sprintf("salvage at rejoin: %s holds transactions %s lacks, but they could not be written: %v", node, w.Name, err))
		return ""
	}
	e.event(node, "salvage", fmt.Sprintf("salvage at rejoin: the transactions %s holds that %s lacks are written to %s", node, w.Name, path))
	return " (written to " + path + ")"
}
