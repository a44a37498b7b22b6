package frontend

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/qlog"
	"github.com/vigil-db/vigil/internal/qstats"
	"github.com/vigil-db/vigil/internal/router"
	"github.com/vigil-db/vigil/internal/rules"
	"github.com/vigil-db/vigil/internal/sqlscan"
	"github.com/vigil-db/vigil/internal/topology"
)

type discardLog struct{}

func (discardLog) Log(*qlog.Entry) bool { return true }

// BenchmarkProcessing is the per-statement cost of query processing on
// the session goroutine: 100 rules, digest statistics and a query log
// entry. It must not allocate.
func BenchmarkProcessing(b *testing.B) {
	var specs []rules.Spec
	for i := range 100 {
		specs = append(specs, rules.Spec{Name: fmt.Sprintf("r%d", i), Digest: fmt.Sprintf("^SELECT report_%d", i), Route: "writer"})
	}
	set, err := rules.Compile(specs, nil)
	if err != nil {
		b.Fatal(err)
	}
	srv := New(Options{Cluster: "c1"}, []User{{Name: "app", RYW: router.RYWNone}}, &topology.Holder{}, nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv.SetProcessing(Processing{Rules: set, Digests: qstats.New(10000), Log: discardLog{}, LogQueries: true})
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	s := newSession(srv, 1, c1)
	s.setUser((*srv.users.Load())["app"])
	s.vars.state.SetSchema("sbtest")
	q := []byte("SELECT c FROM sbtest1 WHERE id=5000")
	info := sqlscan.Scan(q)
	p := srv.proc.Load()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s.result.begin()
		run := stmtRun{start: time.Now(), digest: info.Digest, query: q}
		s.setCurrent(q, run.start)
		res := s.applyRules(p, q, info.Digest)
		run.rule, run.log = res.Rule, res.Log
		run.target, run.hostgroup = s.routeByRule(p, res.Route, router.Reader)
		s.result.idx, s.result.rows = -1, 1
		s.finishStmt(p, &run)
	}
}

// BenchmarkProcessingLargeStatement is the same processing for one
// 64 MiB statement (SELECT LENGTH('xxx…')): the session listing, rules,
// digest statistics and the query log must not copy the whole text.
func BenchmarkProcessingLargeStatement(b *testing.B) {
	set, err := rules.Compile([]rules.Spec{{Name: "r", Query: "^SELECT report", Route: "writer"}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	srv := New(Options{Cluster: "c1"}, []User{{Name: "app", RYW: router.RYWNone}}, &topology.Holder{}, nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	q := make([]byte, 64<<20)
	copy(q, "SELECT LENGTH('")
	for i := 15; i < len(q)-2; i++ {
		q[i] = 'x'
	}
	copy(q[len(q)-2:], "')")
	info := sqlscan.Scan(q)
	b.ReportAllocs()
	b.SetBytes(int64(len(q)))
	for b.Loop() {
		// A new digest store each time: the first statement of a shape is
		// the one that costs (its masked text is kept).
		srv.SetProcessing(Processing{Rules: set, Digests: qstats.New(10000), Log: discardLog{}, LogQueries: true})
		p := srv.proc.Load()
		// A new session too: the first large statement of a session is
		// the one that costs (what it copies is kept for the next).
		s := newSession(srv, 1, c1)
		s.setUser((*srv.users.Load())["app"])
		s.vars.state.SetSchema("sbtest")
		s.result.begin()
		run := stmtRun{start: time.Now(), digest: info.Digest, query: q}
		s.setCurrent(q, run.start)
		_ = s.Info()
		res := s.applyRules(p, q, info.Digest)
		run.rule, run.log = res.Rule, res.Log
		run.target, run.hostgroup = s.routeByRule(p, res.Route, router.Reader)
		s.result.idx, s.result.rows = -1, 1
		s.finishStmt(p, &run)
	}
}
