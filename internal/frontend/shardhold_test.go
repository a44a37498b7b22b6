package frontend

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/mysqlproto"
)

func TestShardHoldWaitsForRunningStatements(t *testing.T) {
	s := NewShardServer(nil)
	g := s.hold.enter() // a statement running before the hold
	done := make(chan func())
	go func() {
		release, err := s.Hold(context.Background(), []string{"t1"}, 5*time.Second)
		if err != nil {
			t.Error(err)
		}
		done <- release
	}()
	select {
	case <-done:
		t.Fatal("the hold returned while a statement still ran")
	case <-time.After(50 * time.Millisecond):
	}
	h := s.hold.current()
	if h == nil || !h.concerns([]string{"x", "t1"}) || h.concerns([]string{"t2"}) {
		t.Fatalf("hold %+v", h)
	}
	s.hold.exit(g)
	release := <-done
	// A statement that starts now sees the hold and waits for the release.
	g2 := s.hold.enter()
	if s.hold.current() == nil {
		t.Fatal("no hold")
	}
	s.hold.exit(g2)
	waited := make(chan error)
	go func() { waited <- h.wait(context.Background()) }()
	release()
	if err := <-waited; err != nil {
		t.Fatalf("held statement: %v", err)
	}
	if s.hold.current() != nil {
		t.Fatal("still held after release")
	}
	release() // twice is harmless
	// The next hold can start.
	r2, err := s.Hold(context.Background(), []string{"t1"}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r2()
}

func TestShardHoldWaitsForTransactions(t *testing.T) {
	s := NewShardServer(nil)
	sh := &shardSession{srv: s, parts: map[string]*Session{}}
	p := &Session{}
	p.bind.inTrx = true
	sh.parts["c1"] = p
	sh.noteTrx([]string{"t1"})
	if !sh.trxUsed([]string{"t1"}) || sh.trxUsed([]string{"t2"}) {
		t.Fatal("trxUsed")
	}
	if _, err := s.Hold(context.Background(), []string{"t1"}, 30*time.Millisecond); err == nil {
		t.Fatal("a hold succeeded with a transaction that used the schema open")
	}
	if s.hold.current() != nil {
		t.Fatal("a failed hold left the schema held")
	}
	p.bind.inTrx = false
	sh.noteTrx(nil) // the transaction ended
	release, err := s.Hold(context.Background(), []string{"t1"}, time.Second)
	if err != nil {
		t.Fatalf("hold after the transaction ended: %v", err)
	}
	release()
}

func TestShardHoldTooLong(t *testing.T) {
	h := &schemaHold{schemas: []string{"t1"}, released: make(chan struct{}), maxWait: 20 * time.Millisecond}
	var se *mysqlproto.SQLError
	if err := h.wait(context.Background()); !errors.As(err, &se) || se.Code != mysqlproto.ERVigilFailoverHeld {
		t.Fatalf("got %v, want 7003", err)
	}
}
