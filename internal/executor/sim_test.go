package executor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/flavor"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/topology"
)

// The simulated cluster of the scenario tests: one object is the
// executor's Client (statements change the simulated servers), Monitor
// (checks at ticks, a snapshot with a writer and a term) and Router, and
// it keeps a trace of everything the executor did, in order. Time is a
// fake clock that only moves when a scenario says so: statements take no
// time, and a timed-out statement fails at once.

// simVersion is what the simulated servers of a flavour report as
// @@version.
var simVersion = map[flavor.Flavor]string{flavor.MariaDB: "10.11.6-MariaDB", flavor.MySQL80: "8.0.36", flavor.MySQL84: "8.4.3", flavor.MySQLLegacy: "8.0.21"}

// simT0 is the scenarios' time zero.
var simT0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

type simClock struct {
	mu sync.Mutex
	t  time.Time
	// waits counts the executor's waits (After); a run that never ends
	// one (a condition the simulation never meets, on a clock that does
	// not move) panics instead of hanging.
	waits int
}

// maxSimWaits bounds the waits of one test.
const maxSimWaits = 1_000_000

// After fires at once and time does not move: in the simulation waiting
// takes no time, as statements take none.
func (c *simClock) After(time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits++
	if c.waits > maxSimWaits {
		panic("the executor waits for something the simulation never does")
	}
	ch := make(chan time.Time, 1)
	ch <- c.t
	return ch
}

func (c *simClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *simClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// since renders a time as an offset from simT0 ("+4s").
func since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return "+" + t.Sub(simT0).String()
}

// gtids is a server's transactions: per origin server id the last
// sequence number (MariaDB, domain 0: sequence numbers shared by the
// domain) or the count (MySQL: uuid:1-n).
type gtids map[uint32]uint64

// merge adds what o holds.
func (g gtids) merge(o gtids) {
	for k, v := range o {
		g[k] = max(g[k], v)
	}
}

func (g gtids) contains(o gtids) bool {
	for k, v := range o {
		if g[k] < v {
			return false
		}
	}
	return true
}

// last is the origin and number of the highest sequence number.
func (g gtids) last() (uint32, uint64) {
	var id uint32
	var n uint64
	for k, v := range g {
		if v > n || v == n && k < id {
			id, n = k, v
		}
	}
	return id, n
}

func simUUID(id uint32) string { return fmt.Sprintf("00000000-0000-0000-0000-%012d", id) }

// pos is the server's GTID position: MariaDB gtid_current_pos (one
// domain), MySQL gtid_executed.
func (w *simWorld) pos(g gtids) string {
	if w.flavor.MySQL() {
		var parts []string
		for _, id := range slices.Sorted(maps.Keys(g)) {
			if g[id] > 0 {
				parts = append(parts, fmt.Sprintf("%s:1-%d", simUUID(id), g[id]))
			}
		}
		return strings.Join(parts, ",")
	}
	id, n := g.last()
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("0-%d-%d", id, n)
}

// binlogState is MariaDB's gtid_binlog_state: every origin's last GTID.
func (w *simWorld) binlogState(g gtids) string {
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(g)) {
		if g[id] > 0 {
			parts = append(parts, fmt.Sprintf("0-%d-%d", id, g[id]))
		}
	}
	return strings.Join(parts, ",")
}

// reached reports whether a server holding g has applied the position
// text of a wait statement.
func (w *simWorld) reached(g gtids, text string) bool {
	if w.flavor.MySQL() {
		ok, err := topology.MySQLGTIDSetContains(w.pos(g), text)
		return err == nil && ok
	}
	p, err := topology.ParseGTIDPos(text)
	if err != nil {
		return false
	}
	_, n := g.last()
	s, _ := p.Seq(0)
	return n >= s
}

type simServer struct {
	name, addr string
	id         uint32
	down       string // "", "dead" (connections refused), "paused" (time out)
	started    time.Time
	vars       map[string]string // read_only, super_read_only, rpl_semi_sync_*
	source     string            // replication source, "" for none
	io, sql    bool
	// noApply: the SQL thread receives but does not apply (a lagging
	// replica: waits for it time out).
	noApply           bool
	applied, received gtids
	heartbeats        int64
	wsrep             string // Galera: synced, donor, nonprimary
	index, weight     int
	sessions          int      // client transactions bound to it (router)
	preConns          []uint32 // Vigil's connections open at its fence (router)

	// The monitor's side.
	obs          *topology.Observation
	checks       uint64
	failingSince time.Time
	fenced       bool
}

func (s *simServer) on(v string) bool { return s.vars[v] == "ON" }

// simRule makes statements fail or block on a server.
type simRule struct {
	server, prefix string
	mode           string // "err", "timeout", "refused", "block"
	code           uint16
	once           bool
	spent          bool
	reached        chan struct{} // block: closed when the statement is reached
	release        chan struct{} // block: closed to let it run
}

// traceEntry is one thing the executor did.
type traceEntry struct {
	text string
	// server and parallel: statements of the steps the executor runs at
	// once (parallelRun) are printed sorted by server.
	server   string
	sql      bool
	parallel bool
}

type simWorld struct {
	mu      sync.Mutex
	clock   *simClock
	cluster string
	typ     string
	flavor  flavor.Flavor
	servers []*simServer
	// designated is the server the monitor routes writes to (when it
	// answers and, for replication, is writable).
	designated string
	term       uint64
	writer     string // the published writer, "" for none
	snap       *topology.Snapshot
	version    uint64
	changed    chan struct{} // closed by the next publish (Changed)
	rules      []*simRule
	trace      []traceEntry
	semiSync   bool
	unknown    []string    // statements the simulation does not know
	sent       [][2]string // server and statement of everything sent, reads too
	ran        [][2]string // server and statement of every change that ran
}

func (w *simWorld) server(name string) *simServer {
	for _, s := range w.servers {
		if s.name == name {
			return s
		}
	}
	return nil
}

func (w *simWorld) byAddr(addr string) *simServer {
	for _, s := range w.servers {
		if s.addr == addr {
			return s
		}
	}
	return nil
}

func (w *simWorld) note(e traceEntry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.trace = append(w.trace, e)
}

// takeTrace returns the trace since the last call, rendered.
func (w *simWorld) takeTrace() []string {
	w.mu.Lock()
	tr := w.trace
	w.trace = nil
	w.mu.Unlock()
	// The executor runs a run of best-effort read-only / IO-thread steps
	// at once: their order is the scheduler's.
	for i := 0; i < len(tr); {
		j := i
		for j < len(tr) && tr[j].parallel {
			j++
		}
		sort.SliceStable(tr[i:j], func(a, b int) bool { return tr[i+a].server < tr[i+b].server })
		i = max(j, i+1)
	}
	out := make([]string, len(tr))
	for i, e := range tr {
		out[i] = e.text
	}
	return out
}

// parallelSQL are the statements of the steps parallelRun runs at once.
var parallelSQL = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range flavor.All {
		for _, k := range []failover.StepKind{failover.SetReadOnly, failover.StopIOThread} {
			for _, q := range failover.StepSQL(f, failover.Step{Kind: k}) {
				m[q] = true
			}
		}
	}
	return m
}()

func isRead(q string) bool {
	return strings.HasPrefix(q, "SELECT") || strings.HasPrefix(q, "SHOW")
}

func isWait(q string) bool {
	return strings.HasPrefix(q, "SELECT MASTER_GTID_WAIT") || strings.HasPrefix(q, "SELECT WAIT_FOR_EXECUTED_GTID_SET")
}

// Run is the Client: the statements run on the simulated server in order
// until one fails. The trace shows every statement that changes something
// (and waits, with their result); reads are not shown.
func (w *simWorld) Run(_ context.Context, server, _ string, _ time.Duration, stmts ...string) ([]string, [][]string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.server(server)
	var shown []string
	var cols []string
	var rows [][]string
	var err error
	parallel := true
	for _, q := range stmts {
		w.sent = append(w.sent, [2]string{server, q})
		if r := w.rule(server, q); r != nil {
			if r.mode == "block" {
				w.mu.Unlock()
				close(r.reached)
				<-r.release
				w.mu.Lock()
			} else {
				err = r.err(server, s.addr, q)
			}
		}
		if err == nil {
			err = w.connErr(s)
		}
		if err == nil {
			cols, rows, err = w.exec(s, q)
		}
		if err == nil && !isRead(q) {
			w.ran = append(w.ran, [2]string{server, q})
		}
		if !isRead(q) || isWait(q) {
			line := q
			if isWait(q) && err == nil && len(rows) == 1 {
				line += " => " + rows[0][0]
			}
			shown = append(shown, line)
			parallel = parallel && (parallelSQL[q] || strings.HasPrefix(q, "SET GLOBAL rpl_semi_sync_slave_kill_conn_timeout"))
		}
		if err != nil {
			break
		}
	}
	if len(shown) > 0 {
		text := server + ": " + strings.Join(shown, "; ")
		if err != nil {
			text += " => error: " + err.Error()
		}
		w.trace = append(w.trace, traceEntry{text: text, server: server, sql: true, parallel: parallel})
	}
	if err != nil {
		return nil, nil, err
	}
	return cols, rows, nil
}

func (w *simWorld) rule(server, q string) *simRule {
	for _, r := range w.rules {
		if r.server == server && strings.HasPrefix(q, r.prefix) && !r.spent {
			if r.once || r.mode == "block" {
				r.spent = true
			}
			return r
		}
	}
	return nil
}

func (r *simRule) err(server, addr, q string) error {
	switch r.mode {
	case "timeout":
		return fmt.Errorf("%s on %s: read tcp %s: i/o timeout", Redact(q), server, addr)
	case "refused":
		return fmt.Errorf("connecting to %s: dial tcp %s: connect: connection refused", server, addr)
	}
	return fmt.Errorf("%s on %s: %w", Redact(q), server, &mysqlproto.SQLError{Code: r.code, State: "HY000", Message: "simulated failure"})
}

func (w *simWorld) connErr(s *simServer) error {
	switch s.down {
	case "dead":
		return fmt.Errorf("connecting to %s: dial tcp %s: connect: connection refused", s.name, s.addr)
	case "paused":
		return fmt.Errorf("connecting to %s: dial tcp %s: i/o timeout", s.name, s.addr)
	}
	return nil
}

func sqlErr(code uint16, msg string) error {
	return &mysqlproto.SQLError{Code: code, State: "HY000", Message: msg}
}

var (
	reSetGlobal = regexp.MustCompile(`^SET GLOBAL (\w+) = (\S+)$`)
	reChange    = regexp.MustCompile(`^CHANGE (?:MASTER|REPLICATION SOURCE) TO (?:MASTER|SOURCE)_HOST='([^']*)', (?:MASTER|SOURCE)_PORT=(\d+)`)
	reWait      = regexp.MustCompile(`^SELECT (?:MASTER_GTID_WAIT|WAIT_FOR_EXECUTED_GTID_SET)\('([^']*)'`)
	reKill      = regexp.MustCompile(`^KILL CONNECTION (\d+)$`)
)

// exec runs one statement on a server that answers.
func (w *simWorld) exec(s *simServer, q string) ([]string, [][]string, error) {
	one := func(v ...string) ([]string, [][]string, error) { return nil, [][]string{v}, nil }
	running := s.io || s.sql
	switch q {
	case "SELECT @@log_bin, @@log_slave_updates", "SELECT @@log_bin, @@log_replica_updates":
		return one("1", "1")
	case "SHOW GLOBAL STATUS LIKE 'Slave_heartbeat_period'":
		return one("Slave_heartbeat_period", "1.000")
	case "SHOW GLOBAL STATUS LIKE 'Slave_received_heartbeats'":
		return one("Slave_received_heartbeats", strconv.FormatInt(s.heartbeats, 10))
	case "SHOW GLOBAL VARIABLES LIKE 'rpl\\_semi\\_sync\\_%'":
		var rows [][]string
		for _, k := range slices.Sorted(maps.Keys(s.vars)) {
			if strings.HasPrefix(k, "rpl_semi_sync_") {
				rows = append(rows, []string{k, s.vars[k]})
			}
		}
		return nil, rows, nil
	case "SHOW SLAVE STATUS", "SHOW REPLICA STATUS":
		rs := w.replicaStatus(s)
		if rs == nil {
			return replicaColumns, nil, nil
		}
		return replicaColumns, [][]string{replicaRow(rs)}, nil
	case "SELECT @@global.gtid_current_pos, @@global.gtid_binlog_pos, @@global.gtid_slave_pos, @@global.gtid_binlog_state, @@global.read_only":
		p := w.pos(s.applied)
		return one(p, p, p, w.binlogState(s.applied), boolNum(s.on("read_only")))
	case "SELECT @@global.gtid_executed, @@global.read_only":
		return one(w.pos(s.applied), boolNum(s.on("read_only")))
	case "SELECT @@gtid_binlog_pos", "SELECT @@gtid_current_pos", "SELECT @@gtid_executed":
		return one(w.pos(s.applied))
	case "SHOW BINARY LOGS":
		return nil, nil, errors.New("the simulated servers keep no binary log files")
	case "STOP SLAVE IO_THREAD", "STOP REPLICA IO_THREAD":
		s.io = false
		return nil, nil, nil
	case "START SLAVE IO_THREAD", "START REPLICA IO_THREAD":
		s.io = s.source != ""
		return nil, nil, nil
	case "START SLAVE SQL_THREAD", "START REPLICA SQL_THREAD":
		s.sql = s.source != ""
		return nil, nil, nil
	case "STOP SLAVE", "STOP REPLICA":
		s.io, s.sql = false, false
		return nil, nil, nil
	case "START SLAVE", "START REPLICA":
		if s.source == "" {
			return nil, nil, sqlErr(1200, "The server is not configured as slave; fix in config file or with CHANGE MASTER TO")
		}
		s.io, s.sql = true, true
		return nil, nil, nil
	case "RESET SLAVE ALL", "RESET REPLICA ALL":
		if running {
			return nil, nil, sqlErr(1198, "This operation cannot be performed as you have a running slave; run STOP SLAVE first")
		}
		s.source = ""
		s.received = maps.Clone(s.applied)
		return nil, nil, nil
	}
	if strings.HasPrefix(q, "SELECT IFNULL(MAX(TIME),0) FROM information_schema.PROCESSLIST") {
		return one("0")
	}
	if m := reSetGlobal.FindStringSubmatch(q); m != nil {
		v := strings.ToUpper(m[2])
		switch v {
		case "1":
			v = "ON"
		case "0":
			v = "OFF"
		}
		s.vars[m[1]] = v
		return nil, nil, nil
	}
	if m := reChange.FindStringSubmatch(q); m != nil {
		if running {
			return nil, nil, sqlErr(1198, "This operation cannot be performed as you have a running slave; run STOP SLAVE first")
		}
		src := w.byAddr(net.JoinHostPort(m[1], m[2]))
		if src == nil {
			return nil, nil, fmt.Errorf("the simulation has no server at %s:%s", m[1], m[2])
		}
		s.source = src.name
		s.received = maps.Clone(s.applied) // the relay log is discarded
		return nil, nil, nil
	}
	if m := reWait.FindStringSubmatch(q); m != nil {
		if !w.reached(s.applied, m[1]) && !s.noApply {
			// It applies what it received, and what its source sends.
			if src := w.server(s.source); src != nil && s.io && s.sql && src.down == "" {
				s.received.merge(src.applied)
			}
			if s.sql {
				s.applied.merge(s.received)
			}
		}
		if w.reached(s.applied, m[1]) {
			return one("0")
		}
		return one("-1")
	}
	if m := reKill.FindStringSubmatch(q); m != nil {
		id, _ := strconv.ParseUint(m[1], 10, 32)
		if !slices.Contains(s.preConns, uint32(id)) {
			return nil, nil, sqlErr(1094, "Unknown thread id: "+m[1])
		}
		s.preConns = slices.DeleteFunc(s.preConns, func(x uint32) bool { return x == uint32(id) })
		return nil, nil, nil
	}
	w.unknown = append(w.unknown, q)
	return nil, nil, fmt.Errorf("the simulation does not know the statement %q", q)
}

func boolNum(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

var replicaColumns = []string{"Source_Host", "Source_Port", "Replica_IO_Running", "Replica_SQL_Running", "Seconds_Behind_Source",
	"Last_IO_Errno", "Last_IO_Error", "Using_Gtid", "Auto_Position", "Gtid_IO_Pos", "Retrieved_Gtid_Set", "Executed_Gtid_Set",
	"Replica_received_heartbeats", "SQL_Remaining_Delay"}

func replicaRow(rs *topology.ReplicaStatus) []string {
	behind := "NULL"
	if rs.SecondsBehind >= 0 {
		behind = strconv.FormatInt(rs.SecondsBehind, 10)
	}
	auto := "0"
	if rs.UsingGTID == "Auto_Position" {
		auto = "1"
	}
	return []string{rs.SourceHost, strconv.Itoa(rs.SourcePort), rs.IORunning.String(), yesNo(rs.SQLRunning), behind,
		strconv.Itoa(rs.LastIOErrno), rs.LastIOError, rs.UsingGTID, auto, rs.GTIDIOPos, rs.RetrievedGTIDSet, rs.ExecutedGTIDSet,
		strconv.FormatInt(rs.ReceivedHeartbeats, 10), ""}
}

func yesNo(b bool) string {
	if b {
		return "Yes"
	}
	return "No"
}

// replicaStatus is what SHOW SLAVE STATUS says, nil when the server has
// no source.
func (w *simWorld) replicaStatus(s *simServer) *topology.ReplicaStatus {
	src := w.server(s.source)
	if src == nil {
		return nil
	}
	host, port, _ := net.SplitHostPort(src.addr)
	rs := &topology.ReplicaStatus{SourceHost: host, IORunning: topology.IOYes, SQLRunning: s.sql, SecondsBehind: 0,
		UsingGTID: "Slave_Pos", SQLRemainingDelay: -1, ReceivedHeartbeats: s.heartbeats}
	// The monitor reads MariaDB's counter with every check.
	rs.HeartbeatsRead = !w.flavor.MySQL()
	rs.SourcePort, _ = strconv.Atoi(port)
	switch {
	case !s.io:
		rs.IORunning = topology.IONo
	case src.down == "dead":
		rs.IORunning, rs.LastIOErrno = topology.IOConnecting, 2003
		rs.LastIOError = fmt.Sprintf("Can't connect to server on '%s' (111)", host)
	}
	switch {
	case !s.sql:
		rs.SecondsBehind = -1
	case !s.applied.contains(s.received):
		rs.SecondsBehind = 1
	}
	if w.flavor.MySQL() {
		rs.UsingGTID, rs.RetrievedGTIDSet, rs.ExecutedGTIDSet = "Auto_Position", w.pos(s.received), w.pos(s.applied)
	} else {
		rs.GTIDIOPos = w.pos(s.received)
	}
	return rs
}

// replicate is time passing between checks: every replica whose IO
// thread runs receives what its source holds (and a heartbeat), unless
// the source is down; its SQL thread applies it unless it lags.
func (w *simWorld) replicate() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.servers {
		src := w.server(s.source)
		if s.down != "" || src == nil || src.down != "" || !s.io {
			continue
		}
		s.received.merge(src.applied)
		s.heartbeats++
		if s.sql && !s.noApply {
			s.applied.merge(s.received)
		}
	}
}

// write commits n transactions on a server. Semi-sync replicas receive
// them at once (the commits wait for that).
func (w *simWorld) write(name string, n uint64) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.server(name)
	if w.flavor.MySQL() {
		s.applied[s.id] += n
	} else {
		_, last := s.applied.last()
		s.applied[s.id] = last + n
	}
	s.received.merge(s.applied)
	src, rep := w.semiSyncNames()
	if s.on(src + "_enabled") {
		for _, r := range w.servers {
			if r.source == name && r.down == "" && r.io && r.on(rep+"_enabled") {
				r.received.merge(s.applied)
			}
		}
	}
	return w.pos(s.applied)
}

// semiSyncNames prefix the semi-sync variables: MariaDB's, and MySQL's
// new plugins' where the flavour has them.
func (w *simWorld) semiSyncNames() (source, replica string) {
	p := w.flavor.SemiSyncPlugins()
	return p[len(p)-1][0], p[len(p)-1][1]
}

// observe is one monitor check of a server.
func (w *simWorld) observe(s *simServer) {
	now := w.clock.Now()
	s.checks++
	o := &topology.Observation{Server: s.name, Seq: s.checks, Time: now, HeartbeatLag: -1, Uptime: -1}
	s.obs = o
	switch s.down {
	case "dead":
		o.Refused, o.Err = true, "dial tcp "+s.addr+": connect: connection refused"
	case "paused":
		o.TimedOut, o.Err = true, "dial tcp "+s.addr+": i/o timeout"
	}
	if s.down != "" {
		if s.failingSince.IsZero() {
			s.failingSince = now
		}
		return
	}
	s.failingSince = time.Time{}
	o.OK, o.Flavor, o.Version, o.ServerID = true, w.flavor.Family(), simVersion[w.flavor], s.id
	if w.flavor.MySQL() {
		o.GTID.Executed = w.pos(s.applied)
		o.SuperReadOnly = s.on("super_read_only")
	} else {
		p, _ := topology.ParseGTIDPos(w.pos(s.applied))
		o.GTID = topology.GTIDState{Current: p, Binlog: p, Slave: p}
		o.GTID.BinlogState, _ = topology.ParseGTIDList(w.binlogState(s.applied))
	}
	o.ReadOnly = s.on("read_only")
	if !w.flavor.MySQL() {
		// The check reads them on MariaDB (as exec answers them).
		o.Binlog = topology.BinlogSettings{Read: true, LogBin: true, LogReplicaUpdates: true, HeartbeatPeriod: 1}
		// Built-in variables (MariaDB 10.3.3+): as SHOW GLOBAL VARIABLES
		// lists them.
		_, rows, _ := w.exec(s, `SHOW GLOBAL VARIABLES LIKE 'rpl\_semi\_sync\_%'`)
		o.Binlog.SemiSync = append([][]string{}, rows...)
	}
	o.Uptime = int64(now.Sub(s.started) / time.Second)
	o.Replica = w.replicaStatus(s)
	src, rep := w.semiSyncNames()
	if _, ok := s.vars[src+"_enabled"]; ok {
		o.SemiSync = topology.SemiSyncStatus{Known: true, SourceOn: s.on(src + "_enabled"),
			ReplicaOn: s.on(rep+"_enabled") && o.Replica != nil && o.Replica.IORunning == topology.IOYes}
	}
	if w.typ == failover.TypeGalera {
		ws := &topology.WsrepStatus{On: true, LocalState: topology.WsrepSynced, LocalStateComment: "Synced", ClusterStatus: "Primary",
			Ready: true, Connected: true, RejectQueries: "NONE", LocalIndex: s.index}
		switch s.wsrep {
		case "donor":
			ws.LocalState, ws.LocalStateComment = topology.WsrepDonor, "Donor/Desynced"
		case "nonprimary":
			ws.ClusterStatus = "non-Primary"
		}
		o.Wsrep = ws
	}
}

// check is one round of monitor checks: every server, then a snapshot.
func (w *simWorld) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.servers {
		was := s.obs
		w.observe(s)
		switch {
		case (was == nil || was.OK) && !s.obs.OK:
			w.trace = append(w.trace, traceEntry{text: "monitor: " + s.name + " does not answer: " + s.obs.Err})
		case was != nil && !was.OK && s.obs.OK:
			w.trace = append(w.trace, traceEntry{text: "monitor: " + s.name + " answers again"})
		}
	}
	w.publish()
}

// publish makes the snapshot from the latest checks. The writer is the
// designated server while it answers (and, in a replication cluster, is
// writable); the term grows when another server becomes the writer.
func (w *simWorld) publish() {
	w.version++
	snap := &topology.Snapshot{Version: w.version, Cluster: w.cluster, Type: w.typ, Writer: -1}
	for i, s := range w.servers {
		o := s.obs
		srv := topology.Server{Name: s.name, Addr: s.addr, Weight: s.weight, Role: topology.RoleReplica, State: topology.Online,
			Readable: true, LagSeconds: -1, Fenced: s.fenced}
		switch {
		case w.typ == failover.TypeGalera:
			srv.Role = topology.RoleGalera
		case s.name == w.designated:
			srv.Role = topology.RolePrimary
		}
		if o == nil || !o.OK || s.fenced {
			srv.State, srv.Readable = topology.OfflineHard, false
		}
		if o != nil && o.OK {
			srv.GTID, srv.LagSeconds = o.GTID.String(), o.Lag()
		}
		switch {
		case s.name != w.designated:
		case srv.State == topology.Online && (w.typ == failover.TypeGalera || !o.ReadOnly):
			snap.Writer, srv.Writable = i, true
		case w.typ == failover.TypeGalera && o != nil && !s.fenced:
			// A Galera writer that fails its checks stays the writer: the
			// executor moves writes once detect_after has passed.
			snap.Writer = i
		}
		snap.Servers = append(snap.Servers, srv)
	}
	ws := snap.WriterServer()
	if ws == nil {
		snap.WriterReason = "the primary is not writable"
	}
	if ws != nil && ws.Name != w.writer {
		if w.writer != "" || w.snap != nil {
			w.term++
		}
		w.writer = ws.Name
		w.trace = append(w.trace, traceEntry{text: fmt.Sprintf("monitor: %s is the writer (term %d)", ws.Name, w.term)})
	} else if ws == nil && w.snap != nil && w.snap.Writer >= 0 {
		w.trace = append(w.trace, traceEntry{text: "monitor: no writer"})
	}
	snap.Term = w.term
	w.snap = snap
	if w.changed != nil {
		close(w.changed)
		w.changed = nil
	}
}

// The Monitor.

func (w *simWorld) Snapshot() *topology.Snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.snap
}

func (w *simWorld) Changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.changed == nil {
		w.changed = make(chan struct{})
	}
	return w.changed
}

func (w *simWorld) Observations() []topology.Health {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]topology.Health, len(w.servers))
	for i, s := range w.servers {
		out[i] = topology.Health{Name: s.name, Last: s.obs, FailingSince: s.failingSince, Fenced: s.fenced}
	}
	return out
}

// SetWriter designates the server and checks it at once (the real
// monitor's CheckNow).
func (w *simWorld) SetWriter(server, reason string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.server(server)
	if s == nil {
		return fmt.Errorf("no server %q", server)
	}
	if s.fenced {
		return fmt.Errorf("server %s is fenced", server)
	}
	w.trace = append(w.trace, traceEntry{text: fmt.Sprintf("monitor: set writer %s (%s)", server, reason)})
	w.designated = server
	w.observe(s)
	w.publish()
	return nil
}

func (w *simWorld) Fence(server, reason string) error { return w.setFenced(server, true, reason) }
func (w *simWorld) Unfence(server string) error       { return w.setFenced(server, false, "") }
func (w *simWorld) SetTerm(uint64) error              { return nil }

// CheckFresh is a check of each answering server now, returned but not
// kept (the executor read positions this way before the monitor did it).
func (w *simWorld) CheckFresh(_ context.Context, servers ...string) map[string]*topology.Observation {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]*topology.Observation{}
	for _, name := range servers {
		s := w.server(name)
		if s == nil || s.down != "" || w.connErr(s) != nil {
			continue
		}
		checks, obs, since := s.checks, s.obs, s.failingSince
		w.observe(s)
		out[name] = s.obs
		s.checks, s.obs, s.failingSince = checks, obs, since
	}
	return out
}

func (w *simWorld) setFenced(server string, on bool, reason string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.server(server)
	if s == nil {
		return fmt.Errorf("no server %q", server)
	}
	s.fenced = on
	text := "monitor: unfence " + server
	if on {
		text = fmt.Sprintf("monitor: fence %s (%s)", server, reason)
	}
	w.trace = append(w.trace, traceEntry{text: text})
	w.publish()
	return nil
}

// simRouter is the Router: indexes are the servers' order.
type simRouter struct{ w *simWorld }

func (r simRouter) Fence(idx int, reason string) int {
	r.w.note(traceEntry{text: fmt.Sprintf("router: fence %s (%s)", r.w.servers[idx].name, reason)})
	return 0
}

func (r simRouter) Unfence(idx int) {
	r.w.note(traceEntry{text: "router: unfence " + r.w.servers[idx].name})
}

func (r simRouter) Hold(reason string, most time.Duration) {
	r.w.note(traceEntry{text: fmt.Sprintf("router: hold new statements (%s, at most %s)", reason, most)})
}

func (r simRouter) Release() { r.w.note(traceEntry{text: "router: release held statements"}) }

// BoundSessions: the transactions bound to a server end one per look.
func (r simRouter) BoundSessions(idx int) int {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	s := r.w.servers[idx]
	n := s.sessions
	s.sessions = max(0, n-1)
	return n
}

func (r simRouter) KillBound(idx int) int {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	n := r.w.servers[idx].sessions
	r.w.servers[idx].sessions = 0
	if n > 0 {
		r.w.trace = append(r.w.trace, traceEntry{text: fmt.Sprintf("router: killed %d transactions on %s", n, r.w.servers[idx].name)})
	}
	return n
}

func (r simRouter) PreFenceConns(idx int) []uint32 {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	return slices.Clone(r.w.servers[idx].preConns)
}

func (r simRouter) ForgetPreFenceConns(idx int, ids []uint32) {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	s := r.w.servers[idx]
	s.preConns = slices.DeleteFunc(s.preConns, func(x uint32) bool { return slices.Contains(ids, x) })
}

// onEvent traces the executor's events.
func (w *simWorld) onEvent(ev Event) {
	text := "event " + ev.Kind
	if ev.Server != "" {
		text += " " + ev.Server
	}
	w.note(traceEntry{text: text + ": " + indent(ev.Message)})
}

// indent keeps a multi-line text inside one trace entry.
func indent(s string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}
