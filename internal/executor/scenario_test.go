package executor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/flavor"
)

var update = flag.Bool("update", false, "rewrite testdata/scenarios/*.txt with what the executor does now")

// TestScenarios runs the data-driven scenarios of testdata/scenarios (in
// the style of etcd raft's data-driven tests): decide → execute → decide
// against the simulated cluster of sim_test.go, with a fake clock. A file
// is a sequence of commands, each followed by "----" and what the
// executor did, up to a blank line:
//
//	cluster [name=c] [flavor=mariadb|mysql|mysql84|mysql-legacy] [semisync=on] [writer=NAME] ENGINE-OPTIONS
//	NAME primary|replica|galera [gtid=N|NAME:N,...] [received=...] [source=NAME] [io=no] [sql=no]
//	     [apply=no] [ro=yes|no] [wsrep=synced|donor|nonprimary] [weight=N] [index=N]
//	     [down=dead|paused] [sessions=N] [conns=ID,...]
//	                            servers, one a line after the command; gtid=N
//	                            is N transactions of the first primary
//	options ENGINE-OPTIONS      a configuration reload (SetOptions)
//	kill NAME | pause NAME      the server refuses connections | stops answering
//	start NAME [ro=yes|no]      a killed server restarts | resume NAME: a paused one goes on
//	write NAME [n=N]            N transactions commit on NAME
//	set NAME KEY=VALUE...       change a server (the keys of a server line)
//	fail NAME "PREFIX" [err=CODE|timeout|refused] [once]
//	                            statements on NAME starting with PREFIX fail
//	fail NAME "PREFIX" block    the next such statement waits until unblock
//	heal [NAME]                 no more failures
//	tick [DURATION]             time passes (default 1s); replicas replicate,
//	                            the monitor checks, the executor decides once
//	request failover|switchover [to=NAME] [force] [accept-loss] [dry-run] [async]
//	request rejoin NAME         an operator's request; async: runs until it blocks
//	unblock                     the blocked statement runs; the async request ends
//	decide                      what the engine would decide now (no action)
//	ack | restart | running | show | history | journal [records]
//
// ENGINE-OPTIONS: auto=yes|no auto_rejoin=yes|no (default no) detect_after=
// detect_after_refused= detect_after_silent= (off unless set) min_interval= apply_timeout=
// hold_timeout= drain_timeout= max_lag= candidates=a,b never_promote=a
// fence_command= semi_sync=auto|on|off pre_failover= post_failover=.
//
// The output is the trace of the executor's actions in order: the
// statements it sent that change something (waits with their result;
// reads are not shown), router and monitor calls, and its events. Run
// with -update (or VIGIL_UPDATE_SCENARIOS=1) to rewrite the expected
// outputs after a deliberate change of behaviour.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/scenarios/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	rewrite := *update || os.Getenv("VIGIL_UPDATE_SCENARIOS") == "1"
	if len(files) < 8 && !rewrite {
		t.Fatalf("only %d scenario files", len(files))
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txt")
		t.Run(name, func(t *testing.T) { runScenarioFile(t, file, rewrite) })
	}
}

// runScenarioFile runs one file's commands in order and compares (or,
// with rewrite, replaces) their outputs.
func runScenarioFile(t *testing.T, file string, rewrite bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cases, tail := parseScenarioFile(string(b))
	sc := &scenario{t: t, dir: t.TempDir(), ctx: context.Background()}
	defer sc.close()
	var out strings.Builder
	for i := range cases {
		c := &cases[i]
		got := strings.Join(sc.run(c), "\n")
		if !rewrite && got != c.want {
			t.Errorf("%s:%d: %s\n--- got\n%s\n--- want\n%s", file, c.line, c.cmd, got, c.want)
		}
		out.WriteString(c.pre + c.cmd + "\n")
		for _, l := range c.input {
			out.WriteString(l + "\n")
		}
		out.WriteString("----\n" + got + "\n")
		if i < len(cases)-1 || tail != "" {
			out.WriteString("\n")
		}
	}
	out.WriteString(tail)
	if rewrite {
		if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// scenarioCase is one command of a file with its expected output.
type scenarioCase struct {
	pre   string // comments and blank lines before it, verbatim
	cmd   string
	input []string
	want  string
	line  int
}

// parseScenarioFile splits a file into cases; tail is what follows the
// last one.
func parseScenarioFile(text string) ([]scenarioCase, string) {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	var cases []scenarioCase
	var pre strings.Builder
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			pre.WriteString(l + "\n")
			continue
		}
		c := scenarioCase{pre: pre.String(), cmd: l, line: i + 1}
		pre.Reset()
		for i++; i < len(lines) && lines[i] != "----"; i++ {
			c.input = append(c.input, lines[i])
		}
		var want []string
		for i++; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		c.want = strings.Join(want, "\n")
		cases = append(cases, c)
	}
	return cases, pre.String()
}

// scenario is one file's run.
type scenario struct {
	t     *testing.T
	dir   string
	ctx   context.Context
	w     *simWorld
	e     *Executor
	opts  Options
	async *asyncRequest
}

type asyncRequest struct {
	req  failover.Request
	rule *simRule
	done chan struct{}
	res  Result
	err  error
}

func (sc *scenario) close() {
	if sc.async != nil {
		sc.unblock()
	}
	if sc.e != nil {
		sc.e.j.close()
	}
}

// args splits a command line into words; a "quoted text" is one word
// (without its quotes), also as key="value".
func args(line string) []string {
	var out []string
	var cur strings.Builder
	quoted, word := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted, word = !quoted, true
		case r == ' ' && !quoted:
			if word {
				out = append(out, cur.String())
				cur.Reset()
				word = false
			}
		default:
			cur.WriteRune(r)
			word = true
		}
	}
	if word {
		out = append(out, cur.String())
	}
	return out
}

// keyvals reads key=value words; a bare word is key=yes.
func keyvals(words []string) map[string]string {
	m := make(map[string]string, len(words))
	for _, w := range words {
		if k, v, ok := strings.Cut(w, "="); ok {
			m[k] = v
		} else {
			m[w] = "yes"
		}
	}
	return m
}

// run runs one command and returns its output lines.
func (sc *scenario) run(c *scenarioCase) []string {
	t := sc.t
	words := args(c.cmd)
	cmd, rest := words[0], words[1:]
	kv := keyvals(rest)
	if cmd != "cluster" && sc.e == nil {
		t.Fatalf("line %d: %s before cluster", c.line, cmd)
	}
	var out []string
	var err error
	switch cmd {
	case "cluster":
		err = sc.cluster(kv, c.input)
		if err == nil {
			out = append(sc.w.takeTrace(), sc.show()...)
		}
	case "options":
		o := *sc.e.o()
		if err = engineOptions(&o, kv); err == nil {
			sc.opts = o
			sc.e.SetOptions(o)
			out = sc.w.takeTrace()
		}
	case "kill", "pause", "start", "resume", "set":
		err = sc.change(cmd, rest[0], keyvals(rest[1:]))
		out = []string{"ok"}
	case "write":
		n := uint64(1)
		if v, ok := kv["n"]; ok {
			n, err = strconv.ParseUint(v, 10, 64)
		}
		out = []string{rest[0] + " at " + sc.w.write(rest[0], n)}
	case "fail":
		err = sc.fail(rest)
		out = []string{"ok"}
	case "heal":
		sc.w.mu.Lock()
		sc.w.rules = slices.DeleteFunc(sc.w.rules, func(r *simRule) bool { return len(rest) == 0 || r.server == rest[0] })
		sc.w.mu.Unlock()
		out = []string{"ok"}
	case "tick":
		out, err = sc.tick(rest)
	case "request":
		out, err = sc.request(rest)
	case "unblock":
		if sc.async == nil {
			t.Fatalf("line %d: nothing is blocked", c.line)
		}
		out = sc.unblock()
	case "decide":
		out = strings.Split(strings.TrimSuffix(failover.Decide(sc.e.input(nil)).String(), "\n"), "\n")
	case "ack":
		sc.e.Ack()
		out = sc.w.takeTrace()
	case "restart":
		sc.e.j.close()
		err = sc.newExecutor()
		out = append(sc.w.takeTrace(), fmt.Sprintf("history: %d records", len(sc.e.History().Records)))
	case "running":
		out = []string{orNone(sc.e.Running())}
	case "show":
		out = sc.show()
	case "history":
		for _, r := range sc.e.History().Records {
			out = append(out, recordText(r))
		}
	case "journal":
		out, err = sc.journal(kv["records"] == "yes")
	default:
		t.Fatalf("line %d: unknown command %q", c.line, cmd)
	}
	if err != nil {
		t.Fatalf("line %d: %s: %v", c.line, c.cmd, err)
	}
	if u := sc.w.unknown; len(u) > 0 {
		t.Errorf("line %d: %s: the executor sent statements the simulation does not know: %q", c.line, c.cmd, u)
		sc.w.unknown = nil
	}
	if len(out) == 0 {
		out = []string{"(nothing)"}
	}
	return out
}

func (sc *scenario) cluster(kv map[string]string, lines []string) error {
	w := &simWorld{clock: &simClock{t: simT0}, cluster: "c", typ: failover.TypeReplication, flavor: flavor.MariaDB, term: 1}
	if v := kv["name"]; v != "" {
		w.cluster = v
	}
	switch kv["flavor"] {
	case "mysql":
		w.flavor = flavor.MySQL80
	case "mysql84":
		w.flavor = flavor.MySQL84
	case "mysql-legacy":
		w.flavor = flavor.MySQLLegacy
	}
	w.semiSync = kv["semisync"] == "on"
	sc.w = w
	type line struct {
		name, role string
		kv         map[string]string
	}
	var ls []line
	for i, l := range lines {
		words := args(l)
		if len(words) < 2 {
			return fmt.Errorf("server line %q: NAME ROLE ...", l)
		}
		ls = append(ls, line{words[0], words[1], keyvals(words[2:])})
		s := &simServer{name: words[0], id: uint32(i + 1), addr: fmt.Sprintf("10.0.0.%d:3306", i+1), index: i, weight: 1,
			started: simT0.Add(-time.Hour), vars: map[string]string{}, applied: gtids{}, received: gtids{}}
		w.servers = append(w.servers, s)
		switch words[1] {
		case "primary":
			if w.designated == "" {
				w.designated = s.name
			}
		case "galera":
			w.typ = failover.TypeGalera
			if w.designated == "" {
				w.designated = s.name
			}
		}
	}
	if v := kv["writer"]; v != "" {
		w.designated = v
	}
	src, rep := w.semiSyncNames()
	wait := src + "_wait_no_slave"
	if strings.HasSuffix(src, "_source") {
		wait = src + "_wait_no_replica"
	}
	for i, l := range ls {
		s := w.servers[i]
		s.vars["read_only"] = "ON"
		if l.role != "replica" {
			s.vars["read_only"] = "OFF"
		}
		if l.role == "replica" {
			s.source, s.io, s.sql = w.designated, true, true
		}
		if w.semiSync {
			s.vars[src+"_enabled"], s.vars[rep+"_enabled"] = "OFF", "ON"
			if l.role == "primary" {
				s.vars[src+"_enabled"], s.vars[rep+"_enabled"] = "ON", "OFF"
			}
			s.vars[src+"_timeout"], s.vars[wait] = "10000", "ON"
		}
		if err := sc.setServer(s, l.kv); err != nil {
			return fmt.Errorf("server %s: %w", s.name, err)
		}
	}
	o := Options{Cluster: w.cluster, User: "vigil", Password: "pw", ReplUser: "repl", ReplPass: "replpass", StateDir: sc.dir, Client: w}
	for _, s := range w.servers {
		o.Servers = append(o.Servers, Server{Name: s.name, Addr: s.addr})
	}
	o.Engine.Auto = true
	// Off unless a scenario sets it: the scenarios written before it
	// kill primaries to test detect_after.
	o.Engine.DetectAfterRefused = -1
	o.Engine.DetectAfterSilent = -1
	if err := engineOptions(&o, kv); err != nil {
		return err
	}
	sc.opts = o
	if err := sc.newExecutor(); err != nil {
		return err
	}
	w.check()
	sc.e.refreshFacts(sc.ctx)
	return nil
}

func (sc *scenario) newExecutor() error {
	e, err := New(sc.opts, sc.w, simRouter{sc.w}, slog.New(slog.NewTextHandler(io.Discard, nil)), sc.w.onEvent)
	if err != nil {
		return err
	}
	e.clock = sc.w.clock
	sc.e = e
	return nil
}

// engineOptions applies ENGINE-OPTIONS to o.
func engineOptions(o *Options, kv map[string]string) error {
	var err error
	dur := func(d *time.Duration, v string) {
		x, e := time.ParseDuration(v)
		*d, err = x, errors.Join(err, e)
	}
	list := func(v string) []string {
		if v == "" {
			return nil
		}
		return strings.Split(v, ",")
	}
	en := &o.Engine
	for k, v := range kv {
		switch k {
		case "auto":
			en.Auto = v == "yes"
		case "auto_rejoin":
			en.AutoRejoin = v == "yes"
		case "detect_after":
			dur(&en.DetectAfter, v)
		case "detect_after_refused":
			dur(&en.DetectAfterRefused, v)
		case "detect_after_silent":
			dur(&en.DetectAfterSilent, v)
		case "min_interval":
			dur(&en.MinInterval, v)
		case "apply_timeout":
			dur(&en.ApplyTimeout, v)
		case "hold_timeout":
			dur(&en.HoldTimeout, v)
		case "drain_timeout":
			dur(&en.DrainTimeout, v)
		case "max_lag":
			en.MaxLagSeconds, err = strconv.ParseFloat(v, 64)
		case "candidates":
			en.Candidates = list(v)
		case "never_promote":
			en.NeverPromote = list(v)
		case "fence_command":
			en.FenceCommand = v
		case "semi_sync":
			en.SemiSync.Manage = failover.SemiSyncManage(v)
		case "pre_failover":
			o.PreFailover = v
		case "post_failover":
			o.PostFailover = v
		case "name", "flavor", "semisync", "writer":
		default:
			return fmt.Errorf("unknown option %q", k)
		}
	}
	return err
}

// setServer applies the keys of a server line (or of set) to s.
func (sc *scenario) setServer(s *simServer, kv map[string]string) error {
	w := sc.w
	yes := func(v string) bool { return v == "yes" }
	for k, v := range kv {
		switch k {
		case "gtid", "received":
			g, err := sc.gtidSpec(v)
			if err != nil {
				return err
			}
			if k == "gtid" {
				s.applied = g
			}
			s.received = maps.Clone(g)
			s.received.merge(s.applied)
		case "source":
			s.source = v
		case "io":
			s.io = yes(v)
		case "sql":
			s.sql = yes(v)
		case "apply":
			s.noApply = !yes(v)
		case "ro":
			s.vars["read_only"] = map[bool]string{true: "ON", false: "OFF"}[yes(v)]
		case "wsrep":
			s.wsrep = v
		case "weight":
			s.weight, _ = strconv.Atoi(v)
		case "index":
			s.index, _ = strconv.Atoi(v)
		case "down":
			s.down = v
		case "sessions":
			s.sessions, _ = strconv.Atoi(v)
		case "conns":
			s.preConns = nil
			for _, x := range strings.Split(v, ",") {
				n, _ := strconv.ParseUint(x, 10, 32)
				s.preConns = append(s.preConns, uint32(n))
			}
		default:
			return fmt.Errorf("unknown server key %q", k)
		}
	}
	if w.server(s.source) == nil && s.source != "" {
		return fmt.Errorf("source %q is not a server", s.source)
	}
	return nil
}

// gtidSpec reads N (transactions of the first primary) or NAME:N,...
func (sc *scenario) gtidSpec(v string) (gtids, error) {
	g := gtids{}
	for _, part := range strings.Split(v, ",") {
		name, n, ok := strings.Cut(part, ":")
		if !ok {
			name, n = sc.w.servers[0].name, part
			if p := sc.w.server(sc.w.designated); p != nil {
				name = p.name
			}
		}
		s := sc.w.server(name)
		x, err := strconv.ParseUint(n, 10, 64)
		if s == nil || err != nil {
			return nil, fmt.Errorf("gtid %q: NAME:N", part)
		}
		g[s.id] = x
	}
	return g, nil
}

// change is kill, pause, start, resume and set.
func (sc *scenario) change(cmd, name string, kv map[string]string) error {
	w := sc.w
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.server(name)
	if s == nil {
		return fmt.Errorf("no server %q", name)
	}
	switch cmd {
	case "kill":
		s.down = "dead"
	case "pause":
		s.down = "paused"
	case "resume":
		s.down = ""
	case "start":
		if s.down != "dead" {
			return fmt.Errorf("%s is not dead", name)
		}
		s.down, s.started = "", w.clock.Now()
		s.io, s.sql = s.source != "", s.source != ""
	}
	return sc.setServer(s, kv)
}

// fail: NAME "PREFIX" [err=CODE|timeout|refused|block] [once].
func (sc *scenario) fail(words []string) error {
	if len(words) < 2 {
		return errors.New(`fail NAME "PREFIX" ...`)
	}
	r := &simRule{server: words[0], prefix: words[1], mode: "err", code: 1290}
	for _, w := range words[2:] {
		k, v, _ := strings.Cut(w, "=")
		switch k {
		case "err":
			n, err := strconv.ParseUint(v, 10, 16)
			if err != nil {
				return err
			}
			r.code = uint16(n)
		case "timeout", "refused":
			r.mode = k
		case "block":
			r.mode, r.reached, r.release = k, make(chan struct{}), make(chan struct{})
		case "once":
			r.once = true
		default:
			return fmt.Errorf("fail: unknown word %q", w)
		}
	}
	sc.w.mu.Lock()
	defer sc.w.mu.Unlock()
	sc.w.rules = append(sc.w.rules, r)
	return nil
}

// tick: time passes, replicas replicate, the monitor checks every
// server, and the executor does what one turn of its Run loop does.
func (sc *scenario) tick(words []string) ([]string, error) {
	d := time.Second
	if len(words) > 0 {
		var err error
		if d, err = time.ParseDuration(words[0]); err != nil {
			return nil, err
		}
	}
	w := sc.w
	w.clock.Advance(d)
	w.replicate()
	w.check()
	sc.e.refreshFacts(sc.ctx)
	at := sc.e.decideAuto(sc.ctx)
	out := append([]string{"now " + since(w.clock.Now())}, w.takeTrace()...)
	if at.After(w.clock.Now()) {
		out = append(out, "recheck at "+since(at))
	}
	return out, nil
}

func (sc *scenario) request(words []string) ([]string, error) {
	kv := keyvals(words[1:])
	req := failover.Request{To: kv["to"], Force: kv["force"] == "yes", DryRun: kv["dry-run"] == "yes", AcceptLoss: kv["accept-loss"] == "yes"}
	switch words[0] {
	case "failover":
		req.Kind = failover.RequestFailover
	case "switchover":
		req.Kind = failover.RequestSwitchover
	case "rejoin":
		req.Kind, req.To = failover.RequestRejoin, words[1]
	default:
		return nil, fmt.Errorf("request %q", words[0])
	}
	sc.w.mu.Lock()
	var block *simRule
	for _, r := range sc.w.rules {
		if r.mode == "block" && !r.spent {
			block = r
		}
	}
	sc.w.mu.Unlock()
	if kv["async"] != "yes" {
		res, err := sc.e.Request(sc.ctx, req)
		return sc.requestOutput(req, res, err), nil
	}
	if block == nil {
		return nil, errors.New("request async needs a fail ... block first")
	}
	a := &asyncRequest{req: req, rule: block, done: make(chan struct{})}
	sc.async = a
	go func() {
		defer close(a.done)
		a.res, a.err = sc.e.Request(sc.ctx, req)
	}()
	select {
	case <-block.reached:
	case <-a.done:
		sc.async = nil
		return sc.requestOutput(req, a.res, a.err), nil
	case <-time.After(10 * time.Second):
		return nil, errors.New("the request neither blocked nor ended")
	}
	return append(sc.w.takeTrace(), fmt.Sprintf("blocked: %s: %s…", block.server, block.prefix)), nil
}

func (sc *scenario) unblock() []string {
	a := sc.async
	sc.async = nil
	close(a.rule.release)
	<-a.done
	return sc.requestOutput(a.req, a.res, a.err)
}

// requestOutput is the decision shown to the operator (when it has a
// plan), the trace, the steps the events do not show (skips) and the
// result. It checks that every statement the request ran is one
// the decision shows.
func (sc *scenario) requestOutput(req failover.Request, res Result, err error) []string {
	var out []string
	shown := res.Text
	if res.Decision.Plan != nil {
		out = append(out, "decision:")
		for _, l := range strings.Split(strings.TrimSuffix(res.Text, "\n"), "\n") {
			out = append(out, "  "+l)
		}
		// A failover's second phase is planned after the cut.
		shown += "\n" + res.Decision.String()
	}
	trace := sc.w.takeTrace()
	for _, l := range trace {
		server, stmts, ok := strings.Cut(l, ": ")
		if !ok || sc.w.server(server) == nil {
			continue
		}
		stmts, _, _ = strings.Cut(stmts, " => error: ")
		for _, q := range strings.Split(stmts, "; ") {
			q = strings.ReplaceAll(strings.ReplaceAll(q, "'repl'", "'…'"), "'replpass'", "'…'")
			if !isRead(q) && !strings.HasPrefix(q, "KILL") && !strings.Contains(shown, q) {
				sc.t.Errorf("%s ran %q, which the decision does not show:\n%s", server, q, shown)
			}
		}
	}
	out = append(out, trace...)
	for _, s := range res.Steps {
		if strings.HasPrefix(s, "skip") || strings.HasPrefix(s, "re-planned") {
			out = append(out, "step: "+strings.Join(strings.Fields(s), " "))
		}
	}
	var refused *RefusedError
	switch {
	case errors.As(err, &refused):
		out = append(out, "refused: "+refused.Reason)
	case err != nil:
		out = append(out, "error: "+err.Error())
	case req.DryRun:
		out = append(out, "dry run: nothing ran")
	default:
		out = append(out, "ok: "+res.Message)
	}
	return out
}

// show is the simulated cluster and the monitor's snapshot.
func (sc *scenario) show() []string {
	w := sc.w
	w.mu.Lock()
	defer w.mu.Unlock()
	writer := "(none)"
	if ws := w.snap.WriterServer(); ws != nil {
		writer = ws.Name
	}
	out := []string{fmt.Sprintf("monitor: writer %s, term %d", writer, w.snap.Term)}
	for i, s := range w.servers {
		state := "up"
		if s.down != "" {
			state = s.down
		}
		parts := []string{s.name + ":", state, w.snap.Servers[i].Role.String()}
		if s.on("read_only") {
			parts = append(parts, "read-only")
		} else {
			parts = append(parts, "writable")
		}
		if rs := w.replicaStatus(s); rs != nil {
			parts = append(parts, fmt.Sprintf("source=%s io=%s sql=%s", s.source, rs.IORunning, yesNo(rs.SQLRunning)))
		}
		if p := w.pos(s.applied); p != "" {
			parts = append(parts, "gtid="+p)
		}
		if !s.received.contains(s.applied) || !s.applied.contains(s.received) {
			parts = append(parts, "received="+w.pos(s.received))
		}
		if src, rep := w.semiSyncNames(); s.on(src + "_enabled") {
			parts = append(parts, "semi-sync-source")
		} else if s.on(rep + "_enabled") {
			parts = append(parts, "semi-sync-replica")
		}
		if w.typ == failover.TypeGalera {
			parts = append(parts, "wsrep="+orDefault(s.wsrep, "synced"))
		}
		if s.fenced {
			parts = append(parts, "fenced")
		}
		out = append(out, strings.Join(parts, " "))
	}
	return out
}

func recordText(r failover.Record) string {
	how := "requested"
	if r.Auto {
		how = "automatic"
	}
	s := fmt.Sprintf("%s %s %s → %s, started %s", how, r.Kind, orNone(r.OldPrimary), orNone(r.NewPrimary), since(r.Started))
	switch {
	case r.Ended.IsZero():
		s += ", running"
	case r.OK:
		s += ", ended " + since(r.Ended) + ": ok"
	default:
		s += ", ended " + since(r.Ended) + ": failed: " + r.Error
	}
	if r.Acked {
		s += " (acknowledged)"
	}
	return s
}

// journal is the journal file as it is on disk.
func (sc *scenario) journal(recordsOnly bool) ([]string, error) {
	f, err := os.Open(filepath.Join(sc.dir, "journal-"+sc.w.cluster+".jsonl"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		var l journalLine
		if err := json.Unmarshal(s.Bytes(), &l); err != nil {
			return nil, err
		}
		switch {
		case l.Record != nil:
			out = append(out, "record: "+recordText(*l.Record))
		case l.Event != nil && !recordsOnly:
			ev := l.Event
			out = append(out, fmt.Sprintf("event %s %s %s: %s", since(ev.Time), ev.Kind, orNone(ev.Server), indent(ev.Message)))
		}
	}
	return out, s.Err()
}
