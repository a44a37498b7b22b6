package router

import (
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/sqlscan"
	"github.com/vigil-db/vigil/internal/topology"
)

func TestRoute(t *testing.T) {
	now := time.Now()
	cases := []struct {
		q    string
		sess Session
		want Target
	}{
		{"SELECT c FROM sbtest1 WHERE id=1", Session{}, Reader},
		{"select * from t", Session{RYW: RYWNone}, Reader},
		{"SHOW TABLES", Session{}, Reader},
		{"SELECT 1", Session{Bound: true}, Keep},
		{"UPDATE t SET a=1", Session{}, Writer},
		{"INSERT INTO t VALUES (1)", Session{}, Writer},
		{"SELECT * FROM t FOR UPDATE", Session{}, Writer},
		{"SELECT * FROM t LOCK IN SHARE MODE", Session{}, Writer},
		{"SELECT GET_LOCK('a', 1)", Session{}, Writer},
		{"SELECT LAST_INSERT_ID()", Session{}, Writer},
		{"SELECT @x := 1", Session{}, Writer},
		{"BEGIN", Session{}, Writer},
		{"START TRANSACTION", Session{}, Writer},
		{"START TRANSACTION READ ONLY", Session{}, Reader},
		{"SET autocommit=0", Session{}, Writer},
		{"CALL p()", Session{}, Writer},
		{"SELECT 1; SELECT 2", Session{}, Writer},
		{"FROBNICATE", Session{}, Writer},
		{"SELECT 1", Session{RYW: RYWSession, LastWrite: now.Add(-time.Second), SessionWindow: 2 * time.Second}, Writer},
		{"SELECT 1", Session{RYW: RYWSession, LastWrite: now.Add(-3 * time.Second), SessionWindow: 2 * time.Second}, Reader},
		{"SELECT 1", Session{RYW: RYWNone, LastWrite: now, SessionWindow: 2 * time.Second}, Reader},
		{"SELECT 1", Session{ForceWriter: true}, Writer},
	}
	for _, tc := range cases {
		s := tc.sess
		if got := Route(sqlscan.Scan([]byte(tc.q)), &s, now).Target; got != tc.want {
			t.Errorf("%q with %+v: got %s, want %s", tc.q, tc.sess, got, tc.want)
		}
	}
}

func snap(servers ...topology.Server) *topology.Snapshot {
	s := &topology.Snapshot{Writer: 0, Servers: servers}
	return s
}

func TestPickReader(t *testing.T) {
	on := func(name string, w int) topology.Server {
		return topology.Server{Name: name, Weight: w, State: topology.Online, Readable: true}
	}
	s := snap(topology.Server{Name: "p", Weight: 1, State: topology.Online, Readable: true, Writable: true}, on("r1", 1), on("r2", 1))
	b := NewBalancer(3)
	seen := map[int]int{}
	for range 100 {
		i, _ := b.PickReader(s, false, -1)
		seen[i]++
	}
	if seen[0] != 0 || seen[1] == 0 || seen[2] == 0 {
		t.Fatalf("reads should spread over replicas only: %v", seen)
	}
	// Least outstanding wins.
	b.Begin(1)
	b.Begin(1)
	if i, _ := b.PickReader(s, false, -1); i != 2 {
		t.Fatalf("busy replica chosen: %d", i)
	}
	b.End(1)
	b.End(1)
	// Exclusion and fallback to the writer.
	if i, _ := b.PickReader(s, false, 1); i != 2 {
		t.Fatalf("excluded replica chosen: %d", i)
	}
	s.Servers[1].State = topology.Shunned
	s.Servers[2].Readable = false
	if i, _ := b.PickReader(s, false, -1); i != 0 {
		t.Fatalf("writer should serve reads when no replica can: %d", i)
	}
	s.Servers[0].State = topology.OfflineHard
	if i, reason := b.PickReader(s, false, -1); i != -1 || reason == "" {
		t.Fatalf("no reader: %d %q", i, reason)
	}
}

func TestWriterFor(t *testing.T) {
	s := snap(topology.Server{Name: "p", State: topology.Online, Writable: true})
	if i, _ := WriterFor(s); i != 0 {
		t.Fatal("writer")
	}
	s.Servers[0].State = topology.OfflineHard
	s.Servers[0].Reason = "failover in progress"
	if i, r := WriterFor(s); i != -1 || r != "p OFFLINE_HARD (failover in progress)" {
		t.Fatalf("got %d %q", i, r)
	}
}

func BenchmarkRoutePointSelect(b *testing.B) {
	q := []byte("SELECT c FROM sbtest1 WHERE id=4242")
	s := Session{}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		Route(sqlscan.Scan(q), &s, now)
	}
}
