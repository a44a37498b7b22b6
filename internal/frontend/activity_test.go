package frontend

import (
	"context"
	"testing"
)

// TestRepliesCountCompletedStatements: the monitor's passive evidence
// counts replies read to the end (errors included) of statements sent
// since its last look, never a statement still waiting for its server.
func TestRepliesCountCompletedStatements(t *testing.T) {
	tp := newTestProxy(t, nil)
	db := tp.db(t, "secret")
	db.SetMaxOpenConns(2)
	replies := func() uint64 { n, _ := tp.srv.Activity(0); return n }
	before := replies()
	for range 5 {
		var v, n string
		if err := db.QueryRow("SELECT 'x'").Scan(&v, &n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec("SELECT nosuchthing FROM nowhere"); err == nil {
		t.Fatal("the fake backend answered an unknown statement")
	}
	if got := replies() - before; got != 6 {
		t.Fatalf("%d replies counted for 5 results and 1 error", got)
	}

	// A statement in flight does not count until its reply is read.
	id, errc := runSleep(t, tp, db)
	running, inFlight := tp.srv.Activity(0)
	if running != before+6 || inFlight != 1 {
		t.Fatalf("%d replies and %d in flight while the sleep runs, want %d and 1", running, inFlight, before+6)
	}
	if err := tp.srv.KillSession(context.Background(), id, true); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err == nil {
		t.Fatal("the killed sleep succeeded")
	}
	// The server answered the killed query with an error, but the sleep
	// was sent before the monitor's last look: it does not count for the
	// period since (a reply read late is no evidence of life now).
	if got, inFlight := tp.srv.Activity(0); got != running || inFlight != 0 {
		t.Fatalf("%d replies and %d in flight after the kill, want %d and 0", got, inFlight, running)
	}
	// One sent after that look does.
	if _, err := db.Exec("SELECT nosuchthing FROM nowhere"); err == nil {
		t.Fatal("the fake backend answered an unknown statement")
	}
	if got, _ := tp.srv.Activity(0); got != running+1 {
		t.Fatalf("%d replies after one more statement, want %d", got, running+1)
	}
	if n, w := tp.srv.Activity(-1); n != 0 || w != 0 {
		t.Fatal("activity of a server that does not exist")
	}
	if n, w := tp.srv.Activity(1); n != 0 || w != 0 {
		t.Fatal("activity of a server that does not exist")
	}
}

// BenchmarkNoteReply is the data path's cost of the monitor's passive
// evidence: two atomic loads and an add per statement, sessions of two servers in
// parallel (each server's counter has its own cache line).
func BenchmarkNoteReply(b *testing.B) {
	s := &Server{replies: newReplyCounters(2)}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			s.noteReply(i&1, s.replyEpoch(i&1))
			i++
		}
	})
}
