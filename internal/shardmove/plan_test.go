package shardmove

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

func testCluster(name string, domain uint32, has bool) Cluster {
	rep := Server{Host: name + "-r", Port: 3306, User: "vigil", Password: "pw"}
	return Cluster{Name: name, Primary: Server{Host: name + "-p", Port: 3306, User: "vigil", Password: "pw"}, Replica: &rep,
		Repl: Account{User: "repl", Password: "replpw"}, DomainID: domain, HasSchema: has}
}

func TestDecide(t *testing.T) {
	running := &Journal{Kind: KindMove, Schema: "other", From: "east", To: "west", Step: 2, State: StateRunning}
	cases := []struct {
		name     string
		req      Request
		src, dst Cluster
		running  *Journal
		want     error
		msg      string
		steps    []StepKind
	}{
		{name: "ok", req: Request{Schema: "shop"}, src: testCluster("east", 0, true), dst: testCluster("west", 1, false),
			steps: []StepKind{StepCheck, StepCopy, StepCatchUp, StepVerify, StepCutover}},
		{name: "reverse", req: Request{Schema: "shop", Reverse: true}, src: testCluster("east", 0, true), dst: testCluster("west", 1, false),
			steps: []StepKind{StepCheck, StepCopy, StepCatchUp, StepVerify, StepCutover, StepReverse}},
		{name: "finished move does not block", req: Request{Schema: "shop"}, src: testCluster("east", 0, true), dst: testCluster("west", 1, false),
			running: &Journal{State: StateDone}, steps: []StepKind{StepCheck, StepCopy, StepCatchUp, StepVerify, StepCutover}},
		{name: "request names other clusters", req: Request{Schema: "shop", From: "north"}, src: testCluster("east", 0, true), dst: testCluster("west", 1, false),
			want: errAny, msg: `from "north"`},
		{name: "same cluster", req: Request{Schema: "shop"}, src: testCluster("east", 0, true), dst: testCluster("east", 1, false), want: ErrSameCluster},
		{name: "same domain", req: Request{Schema: "shop"}, src: testCluster("east", 3, true), dst: testCluster("west", 3, false), want: ErrSameDomain,
			msg: "east and west both use gtid_domain_id 3"},
		{name: "missing on source", req: Request{Schema: "shop"}, src: testCluster("east", 0, false), dst: testCluster("west", 1, false), want: ErrNoSchema},
		{name: "present on target", req: Request{Schema: "shop"}, src: testCluster("east", 0, true), dst: testCluster("west", 1, true), want: ErrSchemaOnTarget},
		{name: "system schema", req: Request{Schema: "MySQL"}, src: testCluster("east", 0, true), dst: testCluster("west", 1, false), want: ErrSystemSchema},
		{name: "empty", req: Request{}, src: testCluster("east", 0, true), dst: testCluster("west", 1, false), want: ErrBadSchema},
		{name: "too long", req: Request{Schema: strings.Repeat("x", 60)}, src: testCluster("east", 0, true), dst: testCluster("west", 1, false), want: ErrBadSchema},
		{name: "quote", req: Request{Schema: "a'b"}, src: testCluster("east", 0, true), dst: testCluster("west", 1, false), want: ErrBadSchema},
		{name: "another move", req: Request{Schema: "shop"}, src: testCluster("east", 0, true), dst: testCluster("west", 1, false), running: running,
			want: ErrMoveRunning, msg: "schema other from east to west is at step 3"},
		{name: "failed move holds too", req: Request{Schema: "shop"}, src: testCluster("east", 0, true), dst: testCluster("west", 1, false),
			running: &Journal{State: StateFailed}, want: ErrMoveRunning},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Decide(c.req, c.src, c.dst, c.running)
			if c.want != nil {
				if err == nil || (c.want != errAny && !errors.Is(err, c.want)) || !strings.Contains(err.Error(), c.msg) {
					t.Fatalf("err %v, want %v containing %q", err, c.want, c.msg)
				}
				if c.want == ErrSameDomain && !strings.Contains(err.Error(), "gtid_domain_id in the my.cnf") {
					t.Errorf("no fix in %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []StepKind
			for _, s := range p.Steps {
				got = append(got, s.Name)
				if s.Detail == "" {
					t.Errorf("%s has no detail", s.Name)
				}
			}
			if strings.Join(stepNames(got), ",") != strings.Join(stepNames(c.steps), ",") {
				t.Errorf("steps %v, want %v", got, c.steps)
			}
			if p.Request.From != "east" || p.Request.To != "west" || p.Kind != KindMove {
				t.Errorf("plan %+v", p)
			}
			out := p.String()
			if strings.Contains(out, "pw") {
				t.Errorf("the plan shows a password:\n%s", out)
			}
			b, _ := json.Marshal(p)
			if strings.Contains(string(b), "pw") {
				t.Errorf("the plan's JSON has a password: %s", b)
			}
		})
	}
}

// errAny stands for a refusal without a sentinel error.
var errAny = errors.New("any")

func stepNames(s []StepKind) []string {
	out := make([]string, len(s))
	for i, k := range s {
		out[i] = string(k)
	}
	return out
}

func TestResume(t *testing.T) {
	steps := []StepKind{StepCheck, StepCopy, StepCatchUp, StepVerify, StepCutover}
	at := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	started := func(k StepKind) StepResult { return StepResult{Name: k, Started: at} }
	done := func(k StepKind) StepResult { return StepResult{Name: k, Started: at, Finished: at.Add(time.Second)} }
	cases := []struct {
		name     string
		j        Journal
		action   ResumeAction
		step     int
		canAbort bool
	}{
		{"not started", Journal{Kind: KindMove, Steps: steps, State: StateRunning}, ResumeContinue, 0, true},
		{"copy interrupted", Journal{Kind: KindMove, Steps: steps, Step: 1, State: StateRunning, Results: []StepResult{done(StepCheck), started(StepCopy)}},
			ResumeUndoCopy, 1, true},
		{"copy done, catch-up next", Journal{Kind: KindMove, Steps: steps, Step: 2, State: StateRunning, Results: []StepResult{done(StepCheck), done(StepCopy)}},
			ResumeContinue, 2, true},
		{"catch-up interrupted", Journal{Kind: KindMove, Steps: steps, Step: 2, State: StateRunning, Results: []StepResult{done(StepCheck), done(StepCopy), started(StepCatchUp)}},
			ResumeContinue, 2, true},
		{"cutover interrupted", Journal{Kind: KindMove, Steps: steps, Step: 4, State: StateRunning, Results: []StepResult{started(StepCutover)}},
			ResumeCheckMap, 4, true},
		{"cutover interrupted after the flip", Journal{Kind: KindMove, Steps: steps, Step: 4, Flipped: true, State: StateRunning, Results: []StepResult{started(StepCutover)}},
			ResumeContinue, 5, false},
		{"failed verify", Journal{Kind: KindMove, Steps: steps, Step: 3, State: StateFailed, Results: []StepResult{{Name: StepVerify, Started: at, Finished: at, Error: "x"}}},
			ResumeNothing, 3, true},
		{"done", Journal{Kind: KindMove, Steps: steps, Step: 5, Flipped: true, State: StateDone}, ResumeNothing, 5, false},
		{"all ran, state not saved", Journal{Kind: KindMove, Steps: steps, Step: 5, Flipped: true, State: StateRunning}, ResumeContinue, 5, false},
		{"cleanup interrupted", Journal{Kind: KindCleanup, Steps: []StepKind{StepResetConnections, StepDropSource}, Step: 1, State: StateRunning,
			Results: []StepResult{done(StepResetConnections), started(StepDropSource)}}, ResumeContinue, 1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The journal survives JSON, as the daemon stores it.
			b, err := json.Marshal(c.j)
			if err != nil {
				t.Fatal(err)
			}
			var j Journal
			if err := json.Unmarshal(b, &j); err != nil {
				t.Fatal(err)
			}
			r := Resume(j)
			if r.Action != c.action || r.Step != c.step || r.CanAbort != c.canAbort || r.Reason == "" {
				t.Errorf("Resume = %+v, want %s at %d, canAbort %v", r, c.action, c.step, c.canAbort)
			}
		})
	}
}

func TestStartPos(t *testing.T) {
	p := topology.MustParseGTIDPos
	cases := []struct {
		name              string
		slave, binlog, at string
		domain            uint32
		want              string
		wantErr           bool
	}{
		{name: "fresh primary", binlog: "1-3-14", at: "0-1-13", want: "0-1-13,1-3-14"},
		{name: "old own entry raised to the binary log", slave: "1-3-2", binlog: "1-3-14", at: "0-1-13", want: "0-1-13,1-3-14"},
		{name: "other domains kept", slave: "5-5-5", binlog: "1-3-14", at: "0-1-13", want: "0-1-13,1-3-14,5-5-5"},
		{name: "stale source entry replaced", slave: "0-1-4", binlog: "0-1-4,1-3-14", at: "0-1-13", want: "0-1-13,1-3-14"},
		{name: "resumed: never backwards", slave: "0-1-40", binlog: "0-1-38,1-3-14", at: "0-1-13", want: "0-1-40,1-3-14"},
		{name: "only the source domain of at counts", binlog: "1-3-14", at: "0-1-13,1-3-99,7-7-7", want: "0-1-13,1-3-14"},
		{name: "source domain missing", binlog: "1-3-14", at: "7-7-7", wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := startPos(p(c.slave), p(c.binlog), c.domain, p(c.at))
			if c.wantErr {
				if err == nil {
					t.Fatalf("got %s, want an error", got)
				}
				return
			}
			if err != nil || got.String() != c.want {
				t.Errorf("startPos = %s, %v; want %s", got, err, c.want)
			}
		})
	}
}

func TestGTIDScanner(t *testing.T) {
	dump := "-- MariaDB dump\n-- CHANGE MASTER TO MASTER_USE_GTID=slave_pos;\n" +
		"INSERT INTO `t` VALUES (1,'-- SET GLOBAL gtid_slave_pos=\\'9-9-9\\';');\n" +
		strings.Repeat("x", 10000) + "\n" +
		"-- The deferred gtid setting for slave corresponding to the master-data CHANGE-MASTER follows\n\n" +
		"-- Preferably use GTID to start replication from GTID position:\n\n" +
		"-- SET GLOBAL gtid_slave_pos='0-1-6,3-2-1';\n/*!40103 SET TIME_ZONE=@OLD_TIME_ZONE */;\n"
	// Fed in every chunk size, the line is found whole.
	for _, n := range []int{1, 3, 7, 64, 4096, len(dump)} {
		var g gtidScanner
		for i := 0; i < len(dump); i += n {
			w, err := g.Write([]byte(dump[i:min(i+n, len(dump))]))
			if err != nil || w != min(n, len(dump)-i) {
				t.Fatalf("write %d, %v", w, err)
			}
		}
		if got := g.position(); got != "0-1-6,3-2-1" {
			t.Errorf("chunks of %d: %q", n, got)
		}
	}
}

func TestQuoting(t *testing.T) {
	for in, want := range map[string]string{"shop_1": `shop\_1`, "a%b": `a\%b`, `a\b`: `a\\b`, "plain": "plain"} {
		if got := wildTableEscape(in); got != want {
			t.Errorf("wildTableEscape(%q) = %q, want %q", in, got, want)
		}
	}
	if got := quoteString("it's \\ \n"); got != `'it\'s \\ \n'` {
		t.Errorf("quoteString: %s", got)
	}
	if got := quoteIdent("a`b"); got != "`a``b`" {
		t.Errorf("quoteIdent: %s", got)
	}
	if got := optionValue(`p"w\`); got != `"p\"w\\"` {
		t.Errorf("optionValue: %s", got)
	}
}

func TestTailBuffer(t *testing.T) {
	var b tailBuffer
	b.Write([]byte("--------------\nINSERT INTO `t1` VALUES (1,'secret row'),\n(16\n--------------\n\n"))
	b.Write([]byte("ERROR 1064 (42000) at line 59: You have an error in your SQL syntax; check the manual near '' at line 17\n"))
	got := b.String()
	if strings.Contains(got, "secret") || !strings.HasPrefix(got, "ERROR 1064") {
		t.Errorf("tail %q", got)
	}
}

func TestMeetMaster(t *testing.T) {
	p := topology.MustParseGTIDPos
	cases := []struct {
		pos, master string
		want        string
		lowered     bool
	}{
		{pos: "0-1-13,1-3-14", master: "0-1-50", want: "0-1-13,1-3-14"},
		{pos: "0-1-13,1-3-14", master: "0-1-50,1-3-9", want: "0-1-13,1-3-9", lowered: true},
		{pos: "0-1-13,1-3-14", master: "0-1-50,1-3-20", want: "0-1-13,1-3-14"},
		// The connection's own domain is never touched.
		{pos: "0-1-60,1-3-14", master: "0-1-50", want: "0-1-60,1-3-14"},
	}
	for _, c := range cases {
		got, lowered := meetMaster(p(c.pos), p(c.master), 0)
		if got.String() != c.want || lowered != c.lowered {
			t.Errorf("meetMaster(%s, %s) = %s %v, want %s %v", c.pos, c.master, got, lowered, c.want, c.lowered)
		}
	}
}
