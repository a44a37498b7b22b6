package failover

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// The scenario language describes one Input in a few lines. Times are
// seconds after t0. Later "server" lines for a name already seen add to or
// override its keys, so a table row can start from a base cluster.
//
//	now 100
//	cluster main type=replication term=7 [writer=NAME|none]
//	options auto=yes detect_after=2s detect_after_refused=300ms detect_after_silent=1s min_interval=1h apply_timeout=30s hold_timeout=10s
//	        drain_timeout=5s max_lag=10 max_running=60 candidates=a,b never_promote=c fence_command=CMD
//	server NAME role=primary|replica|galera [addr=H:P] [weight=N] [state=online|shunned|offline_soft|offline_hard|standby]
//	       [unchecked] [down=refused|timeout|error:CODE|overload:CODE] [since=T] [seen=T]
//	       [flavor=mariadb|mysql] [version=V] [ro=yes|no] [gtid=POS] [binlog_pos=POS] [slave_pos=POS]
//	       [source=NAME] [srcname=NAME] [io=yes|connecting|no|lost] [ioerr=N] [sql=yes|no] [sqlerr=N]
//	       [delay=N] [lag=N] [iopos=POS] [retrieved=SET] [relay=pending]
//	       [nofacts] [binlog=no] [lsu=no] [filters=TEXT] [longq=N] [since_event=N] [hb=N]
//	       [wsrep=synced|donor|joined|joining|nonprimary] [index=N] [ready=no] [reject=ALL]
//	history KIND started=T [ended=T] ok=yes|no [acked=yes] [auto=yes] old=NAME [new=NAME] [error="TEXT"] [left_ro=NAME]
//	                         (KIND: failover, switchover, galera, rejoin, restore)
//	ack                      (acknowledge every history record so far)
//	running KIND started=T [old=NAME] [new=NAME]
//	fenced NAME...
//	request failover|switchover|rejoin [to=NAME] [force] [dry-run]
//	views self=NAME [err="TEXT"] [max_age=DURATION]   (the other instances' views were read)
//	view INSTANCE at=T SERVER ok|refused|timeout [checked=T] [last_ok=T] [since=T]
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// tokens splits a line into words; key="quoted value" stays one word.
func tokens(line string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range line {
		switch {
		case r == '"':
			quoted = !quoted
		case (r == ' ' || r == '\t') && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

func keyvals(words []string) map[string]string {
	m := map[string]string{}
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			v = "yes"
		}
		m[k] = v
	}
	return m
}

type scenarioParser struct {
	now     float64
	cluster map[string]string
	options map[string]string
	order   []string
	servers map[string]map[string]string
	in      Input
}

// parseInput reads a scenario description into an Input.
func parseInput(text string) (Input, error) {
	p := &scenarioParser{now: 100, cluster: map[string]string{}, options: map[string]string{}, servers: map[string]map[string]string{}}
	for n, line := range strings.Split(text, "\n") {
		if i := strings.Index(line, "#"); i >= 0 && !strings.Contains(line[:i], `"`) {
			line = line[:i]
		}
		w := tokens(line)
		if len(w) == 0 {
			continue
		}
		if err := p.line(w); err != nil {
			return Input{}, fmt.Errorf("line %d %q: %w", n+1, line, err)
		}
	}
	return p.build()
}

func (p *scenarioParser) line(w []string) error {
	kv := keyvals(w[1:])
	switch w[0] {
	case "now":
		f, err := strconv.ParseFloat(w[1], 64)
		p.now = f
		return err
	case "cluster":
		p.cluster = keyvals(w[2:])
		p.cluster["name"] = w[1]
	case "options":
		for k, v := range kv {
			p.options[k] = v
		}
	case "server":
		name := w[1]
		if p.servers[name] == nil {
			p.servers[name] = map[string]string{}
			p.order = append(p.order, name)
		}
		for k, v := range keyvals(w[2:]) {
			p.servers[name][k] = v
		}
	case "views":
		p.in.Views = &Views{Self: kv["self"], Err: kv["err"]}
		if m, ok := kv["max_age"]; ok {
			d, err := time.ParseDuration(m)
			if err != nil {
				return err
			}
			p.in.Views.MaxAge = d
		}
	case "view":
		if p.in.Views == nil || len(w) < 5 {
			return fmt.Errorf("view needs a views line before it and INSTANCE at=T SERVER STATE")
		}
		kv = keyvals(w[2:])
		pv := PeerView{Instance: w[1], At: at(num(kv["at"])), Servers: map[string]ServerView{}}
		sv := ServerView{OK: w[4] == "ok", Checked: pv.At}
		if c, ok := kv["checked"]; ok {
			sv.Checked = at(num(c))
		}
		if sv.OK {
			sv.LastOK = sv.Checked
		} else {
			sv.Failure = w[4]
			sv.FailingSince = sv.Checked
		}
		if c, ok := kv["last_ok"]; ok {
			sv.LastOK = at(num(c))
		}
		if c, ok := kv["since"]; ok {
			sv.FailingSince = at(num(c))
		}
		pv.Servers[w[3]] = sv
		p.in.Views.Peers = append(p.in.Views.Peers, pv)
	case "history", "running":
		r, err := record(w[1], keyvals(w[2:]))
		if err != nil {
			return err
		}
		if w[0] == "running" {
			p.in.Running = &r
		} else {
			p.in.History.Records = append(p.in.History.Records, r)
		}
	case "ack":
		p.in.History = p.in.History.Ack()
	case "fenced":
		p.in.Fenced = append(p.in.Fenced, w[1:]...)
	case "cut":
		p.in.Cut = append(p.in.Cut, w[1:]...)
	case "stuck":
		p.in.Stuck = append(p.in.Stuck, w[1:]...)
	case "acked":
		// acked SERVER gtid=POS [semisync=yes] [async=yes] [at=T]
		kv := keyvals(w[2:])
		pos, err := topology.ParseGTIDPos(kv["gtid"])
		if err != nil {
			return err
		}
		m := &AckedMark{Server: w[1], Pos: pos, SemiSync: kv["semisync"] == "yes", Async: kv["async"] == "yes"}
		if v, ok := kv["at"]; ok {
			f, _ := strconv.ParseFloat(v, 64)
			m.At = at(f)
		}
		p.in.Acked = m
	case "request":
		r := &Request{}
		switch w[1] {
		case "failover":
			r.Kind = RequestFailover
		case "switchover":
			r.Kind = RequestSwitchover
		case "rejoin":
			r.Kind = RequestRejoin
		default:
			return fmt.Errorf("unknown request %q", w[1])
		}
		rk := keyvals(w[2:])
		r.To, r.Force, r.DryRun, r.AcceptLoss = rk["to"], rk["force"] == "yes", rk["dry-run"] == "yes", rk["accept-loss"] == "yes"
		p.in.Request = r
	default:
		return fmt.Errorf("unknown line kind %q", w[0])
	}
	return nil
}

func record(kind string, kv map[string]string) (Record, error) {
	r := Record{OK: kv["ok"] == "yes", Acked: kv["acked"] == "yes", Auto: kv["auto"] == "yes", RolledBack: kv["rolled_back"] == "yes",
		OldPrimary: kv["old"], NewPrimary: kv["new"], Error: kv["error"], LeftReadOnly: kv["left_ro"]}
	switch kind {
	case "failover":
		r.Kind = RecordFailover
	case "switchover":
		r.Kind = RecordSwitchover
	case "galera":
		r.Kind = RecordGaleraMove
	case "rejoin":
		r.Kind = RecordRejoin
	case "restore":
		r.Kind = RecordRestoreWriter
	default:
		return r, fmt.Errorf("unknown record kind %q", kind)
	}
	if v, ok := kv["started"]; ok {
		f, _ := strconv.ParseFloat(v, 64)
		r.Started = at(f)
	}
	if v, ok := kv["ended"]; ok {
		f, _ := strconv.ParseFloat(v, 64)
		r.Ended = at(f)
	}
	return r, nil
}

func (p *scenarioParser) build() (Input, error) {
	in := p.in
	in.Now = at(p.now)
	snap := &topology.Snapshot{Version: 1, Cluster: p.cluster["name"], Type: p.cluster["type"], Writer: -1}
	if snap.Type == "" {
		snap.Type = TypeReplication
	}
	snap.Term, _ = strconv.ParseUint(p.cluster["term"], 10, 64)
	in.Obs = map[string]*topology.Observation{}
	in.Facts = map[string]ServerFacts{}
	for _, name := range p.order {
		kv := p.servers[name]
		addr := kv["addr"]
		if addr == "" {
			addr = name + ":3306"
		}
		srv := topology.Server{Name: name, Addr: addr, Weight: 1, LagSeconds: -1, Readable: true}
		if w, ok := kv["weight"]; ok {
			srv.Weight, _ = strconv.Atoi(w)
		}
		switch kv["role"] {
		case "primary":
			srv.Role = topology.RolePrimary
		case "replica":
			srv.Role = topology.RoleReplica
		case "galera":
			srv.Role = topology.RoleGalera
		}
		o, err := p.observation(name, kv)
		if err != nil {
			return in, fmt.Errorf("server %s: %w", name, err)
		}
		if o != nil {
			in.Obs[name] = o
			srv.GTID = o.GTID.String()
			if o.OK {
				srv.LagSeconds = o.Lag()
			}
		}
		srv.State = topology.Online
		if o == nil || !o.OK {
			srv.State, srv.Readable = topology.OfflineHard, false
		}
		switch kv["state"] {
		case "shunned":
			srv.State = topology.Shunned
		case "offline_soft":
			srv.State = topology.OfflineSoft
		case "offline_hard":
			srv.State = topology.OfflineHard
		case "standby":
			srv.State, srv.Readable, srv.Standby = topology.OfflineSoft, false, true
		}
		if _, ok := kv["nofacts"]; !ok {
			f := ServerFacts{LogBin: kv["binlog"] != "no", LogSlaveUpdates: kv["lsu"] != "no", Filters: kv["filters"],
				Source: kv["srcname"], SecondsSinceSourceEvent: -1}
			f.LongestQuerySeconds, _ = strconv.ParseFloat(kv["longq"], 64)
			if v, ok := kv["since_event"]; ok {
				f.SecondsSinceSourceEvent, _ = strconv.ParseFloat(v, 64)
			}
			f.HeartbeatPeriod, _ = strconv.ParseFloat(kv["hb"], 64)
			if v, ok := kv["semisync"]; ok {
				// semisync=master,slave,wait,timeout_ms: the server's
				// rpl_semi_sync_* variables (master, slave, wait_no_slave
				// each on/off).
				parts := strings.Split(v, ",")
				ms, _ := strconv.Atoi(parts[3])
				f.SemiSync = SemiSyncSettings{Known: true, SourceEnabled: parts[0] == "on", ReplicaEnabled: parts[1] == "on",
					WaitNoReplica: parts[2] == "on", Timeout: time.Duration(ms) * time.Millisecond}
			}
			if o != nil && !o.OK {
				f.FailingSince = at(p.now - 10)
				if v, ok := kv["since"]; ok {
					s, _ := strconv.ParseFloat(v, 64)
					f.FailingSince = at(s)
				}
			}
			in.Facts[name] = f
		}
		srv.Fenced = slices.Contains(p.in.Fenced, name)
		snap.Servers = append(snap.Servers, srv)
	}
	switch w := p.cluster["writer"]; {
	case w == "none":
	case w != "":
		snap.Writer = snap.Index(w)
		if snap.Writer < 0 {
			return in, fmt.Errorf("writer %q is not a server", w)
		}
	case snap.Type == TypeReplication:
		i := slices.IndexFunc(snap.Servers, func(s topology.Server) bool { return s.Role == topology.RolePrimary })
		if i >= 0 && in.Obs[snap.Servers[i].Name] != nil && in.Obs[snap.Servers[i].Name].OK {
			snap.Writer = i
		}
	}
	if snap.Writer >= 0 {
		snap.Servers[snap.Writer].Writable = true
	} else {
		snap.WriterReason = "primary not writable"
	}
	in.Snapshot = snap

	o := p.options
	in.Options.Auto = o["auto"] == "yes"
	in.Options.AutoRejoin = o["auto_rejoin"] == "yes"
	dur := func(key string) time.Duration {
		d, _ := time.ParseDuration(o[key])
		return d
	}
	in.Options.DetectAfter, in.Options.MinInterval, in.Options.ApplyTimeout = dur("detect_after"), dur("min_interval"), dur("apply_timeout")
	in.Options.HoldTimeout, in.Options.DrainTimeout = dur("hold_timeout"), dur("drain_timeout")
	in.Options.DetectAfterRefused = dur("detect_after_refused")
	in.Options.DetectAfterSilent = dur("detect_after_silent")
	in.Options.MaxLagSeconds, _ = strconv.ParseFloat(o["max_lag"], 64)
	in.Options.MaxRunningSeconds, _ = strconv.ParseFloat(o["max_running"], 64)
	if v := o["candidates"]; v != "" {
		in.Options.Candidates = strings.Split(v, ",")
	}
	if v := o["never_promote"]; v != "" {
		in.Options.NeverPromote = strings.Split(v, ",")
	}
	in.Options.FenceCommand = o["fence_command"]
	in.Options.SemiSync = SemiSyncPolicy{Manage: SemiSyncManage(o["semi_sync"]), AsyncWithoutReplica: o["async_without_replica"] == "yes", Timeout: dur("semi_timeout")}
	return in, nil
}

func (p *scenarioParser) observation(name string, kv map[string]string) (*topology.Observation, error) {
	if _, ok := kv["unchecked"]; ok {
		return nil, nil
	}
	o := &topology.Observation{Server: name, Seq: 1, Time: at(p.now), OK: true, HeartbeatLag: -1, Flavor: topology.FlavorMariaDB, Version: "10.11.6-MariaDB"}
	if v, ok := kv["seen"]; ok {
		s, _ := strconv.ParseFloat(v, 64)
		o.Time = at(s)
	}
	if v, ok := kv["took"]; ok {
		s, _ := strconv.ParseFloat(v, 64)
		o.Took = time.Duration(s * float64(time.Second))
	}
	if kv["flavor"] == "mysql" {
		o.Flavor, o.Version = topology.FlavorMySQL, "8.0.36"
	}
	if v := kv["server_id"]; v != "" {
		n, _ := strconv.ParseUint(v, 10, 32)
		o.ServerID = uint32(n)
	}
	if v := kv["version"]; v != "" {
		o.Version = v
	}
	if d := kv["down"]; d != "" {
		o.OK = false
		kind, code, _ := strings.Cut(d, ":")
		n, _ := strconv.Atoi(code)
		switch kind {
		case "refused":
			o.Refused, o.Err = true, "dial tcp: connect: connection refused"
		case "timeout":
			o.Err = "dial tcp: i/o timeout"
		case "error":
			o.ErrCode, o.Err = uint16(n), fmt.Sprintf("Error %d", n)
		case "overload":
			o.ErrCode, o.Overloaded, o.OverloadCode, o.Err = uint16(n), true, uint16(n), fmt.Sprintf("Error %d", n)
			o.OverloadReason = "refuses new connections"
		default:
			return nil, fmt.Errorf("down=%s", d)
		}
		return o, nil
	}
	role := kv["role"]
	o.ReadOnly = role != "primary"
	if v, ok := kv["ro"]; ok {
		o.ReadOnly = v == "yes"
	}
	gtid := kv["gtid"]
	if o.Flavor == topology.FlavorMySQL {
		o.GTID.Executed = gtid
	} else {
		var err error
		pos := func(s string) topology.GTIDPos {
			q, e := topology.ParseGTIDPos(s)
			if e != nil {
				err = e
			}
			return q
		}
		o.GTID.Current = pos(gtid)
		o.GTID.Binlog = pos(gtid)
		if v, ok := kv["binlog_state"]; ok {
			st, err := topology.ParseGTIDList(v)
			if err != nil {
				panic(err)
			}
			o.GTID.BinlogState = st
		}
		if v, ok := kv["binlog_pos"]; ok {
			o.GTID.Binlog = pos(v)
		}
		if role == "replica" {
			o.GTID.Slave = pos(gtid)
		}
		if v, ok := kv["slave_pos"]; ok {
			o.GTID.Slave = pos(v)
		}
		if err != nil {
			return nil, err
		}
	}
	if role == "galera" || kv["wsrep"] != "" {
		w := &topology.WsrepStatus{On: true, LocalState: topology.WsrepSynced, LocalStateComment: "Synced", ClusterStatus: "Primary",
			Ready: true, Connected: true, RejectQueries: "NONE", LocalIndex: -1}
		switch kv["wsrep"] {
		case "donor":
			w.LocalState, w.LocalStateComment = topology.WsrepDonor, "Donor/Desynced"
		case "joined":
			w.LocalState, w.LocalStateComment = topology.WsrepJoined, "Joined"
		case "joining":
			w.LocalState, w.LocalStateComment = topology.WsrepJoining, "Joining"
		case "nonprimary":
			w.ClusterStatus = "non-Primary"
		}
		if v, ok := kv["index"]; ok {
			w.LocalIndex, _ = strconv.Atoi(v)
		}
		w.Ready = kv["ready"] != "no"
		if v := kv["reject"]; v != "" {
			w.RejectQueries = v
		}
		o.Wsrep = w
	}
	src := kv["source"]
	if src == "" {
		return o, nil
	}
	srcAddr := src + ":3306"
	if sk := p.servers[src]; sk != nil && sk["addr"] != "" {
		srcAddr = sk["addr"]
	}
	host, port, _ := net.SplitHostPort(srcAddr)
	r := &topology.ReplicaStatus{SourceHost: host, IORunning: topology.IOYes, SQLRunning: kv["sql"] != "no", SecondsBehind: 0,
		UsingGTID: "Slave_Pos", GTIDIOPos: gtid, SQLRemainingDelay: -1}
	r.SourcePort, _ = strconv.Atoi(port)
	if o.Flavor == topology.FlavorMySQL {
		r.UsingGTID, r.GTIDIOPos, r.ExecutedGTIDSet, r.RetrievedGTIDSet = "Auto_Position", "", gtid, kv["retrieved"]
	}
	switch kv["io"] {
	case "connecting":
		r.IORunning = topology.IOConnecting
	case "no":
		r.IORunning = topology.IONo
	case "lost":
		r.IORunning, r.LastIOErrno = topology.IOConnecting, 2003
		r.LastIOError = fmt.Sprintf("Can't connect to server on '%s' (111)", host)
	}
	if v := kv["ioerr"]; v != "" {
		r.LastIOErrno, _ = strconv.Atoi(v)
		r.LastIOError = "error " + v
	}
	if v := kv["sqlerr"]; v != "" {
		r.LastSQLErrno, _ = strconv.Atoi(v)
		r.LastSQLError = "Error 'Duplicate entry' on query"
	}
	if v := kv["delay"]; v != "" {
		r.SQLDelay, _ = strconv.ParseInt(v, 10, 64)
	}
	if v := kv["lag"]; v != "" {
		r.SecondsBehind, _ = strconv.ParseInt(v, 10, 64)
		if v == "null" {
			r.SecondsBehind = -1
		}
	}
	if v, ok := kv["iopos"]; ok {
		r.GTIDIOPos = v
	}
	if kv["relay"] == "pending" {
		r.SourceLogFile, r.RelaySourceLogFile, r.ReadSourceLogPos, r.ExecSourceLogPos = "bin.000002", "bin.000002", 9000, 4000
	}
	o.Replica = r
	return o, nil
}

func num(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// decide parses a scenario and decides, failing the test on a bad
// scenario.
func decide(t *testing.T, text string) Decision {
	t.Helper()
	in, err := parseInput(text)
	if err != nil {
		t.Fatalf("scenario: %v", err)
	}
	return Decide(in)
}
