package frontend

import (
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/topology"
)

// TestWriteGate: with coordination, writes are routed only until the
// deadline the lease gives; after it (or at once with a zero deadline)
// they fail with 7015 / 08V01 without reaching the writer, reads go on
// unless refused too, and an open transaction on the writer is cut.
func TestWriteGate(t *testing.T) {
	primary := newFakeBackend(t)
	replica := newFakeBackend(t)
	srv, addr := twoServerProxy(t, primary, replica)
	db, err := sql.Open("mysql", "app:secret@tcp("+addr+")/?timeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	insert := func() error { _, err := db.Exec("INSERT INTO t VALUES (1)"); return err }
	is7015 := func(err error) bool {
		var me *mysql.MySQLError
		return errors.As(err, &me) && me.Number == 7015 && string(me.SQLState[:]) == "08V01"
	}

	if err := insert(); err != nil {
		t.Fatalf("no coordination: %v", err)
	}
	// A deadline in the future: writes go on.
	srv.SetWriteDeadline(time.Now().Add(300*time.Millisecond), false, "it could not renew its etcd lease in time")
	if err := insert(); err != nil {
		t.Fatalf("before the deadline: %v", err)
	}
	// Past it: refused without a renewal, with the reason.
	time.Sleep(350 * time.Millisecond)
	before := primary.seen("INSERT")
	if err := insert(); !is7015(err) {
		t.Fatalf("after the deadline: %v", err)
	} else if want := "could not renew its etcd lease"; !strings.Contains(err.Error(), want) {
		t.Fatalf("message %q lacks %q", err, want)
	}
	if primary.seen("INSERT") != before {
		t.Fatal("a refused write reached the writer")
	}
	if !srv.WritesFenced() {
		t.Fatal("WritesFenced false")
	}
	var v, n string
	if err := db.QueryRow("SELECT 'read'").Scan(&v, &n); err != nil || v != "read" {
		t.Fatalf("reads continue: %q %v", v, err)
	}
	// Refusing reads too.
	srv.SetWriteDeadline(time.Time{}, true, "this instance does not hold its etcd lease")
	if err := db.QueryRow("SELECT 'read'").Scan(&v, &n); !is7015(err) {
		t.Fatalf("reads refused: %v", err)
	}
	// Renewed: writes again.
	srv.SetWriteDeadline(time.Now().Add(time.Minute), false, "")
	if err := insert(); err != nil {
		t.Fatalf("renewed: %v", err)
	}
	// An open transaction on the writer is cut when writes are refused.
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT INTO t VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	srv.SetWriteDeadline(time.Time{}, false, "lease lost")
	if _, err := tx.Exec("INSERT INTO t VALUES (3)"); err == nil {
		t.Fatal("a transaction went on after writes were refused")
	}
	_ = tx.Rollback() // refused too (7015): the transaction is gone either way
	srv.ClearWriteDeadline()
	// The session's next statement learns that its transaction was lost
	// (7004), then it goes on.
	if err := insert(); err != nil {
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 7004 {
			t.Fatalf("after the cut transaction: %v", err)
		}
	}
	if err := insert(); err != nil {
		t.Fatalf("coordination off: %v", err)
	}
}

// TestSelfFencedServesReads: an instance that refuses writes (self-fenced)
// still logs clients in and serves their reads from the replicas, as
// documented (reads_when_fenced: continue): the login check goes to a
// replica, not to the writer through the write gate. A read that only
// the writer could serve gets 7015.
func TestSelfFencedServesReads(t *testing.T) {
	primary := newFakeBackend(t)
	replica := newFakeBackend(t)
	srv, addr := twoServerProxy(t, primary, replica)
	srv.SetWriteDeadline(time.Time{}, false, "this instance does not hold its etcd lease")
	is7015 := func(err error) bool {
		var me *mysql.MySQLError
		return errors.As(err, &me) && me.Number == 7015 && string(me.SQLState[:]) == "08V01"
	}
	// A schema no login checked yet: the check cannot be served from
	// the login cache.
	for i, schema := range []string{"shop", "shop", "crm"} {
		db, err := sql.Open("mysql", "app:secret@tcp("+addr+")/"+schema+"?timeout=5s")
		if err != nil {
			t.Fatal(err)
		}
		var v, n string
		err = db.QueryRow("SELECT 'fenced-read'").Scan(&v, &n)
		if err != nil || v != "fenced-read" {
			t.Fatalf("read %d through a self-fenced instance (schema %s): %q %v", i, schema, v, err)
		}
		if _, err := db.Exec("INSERT INTO t VALUES (1)"); !is7015(err) {
			t.Fatalf("write through a self-fenced instance: %v", err)
		}
		db.Close()
	}
	if n := primary.seen("fenced-read"); n != 0 {
		t.Fatalf("the writer served %d reads while this instance was self-fenced", n)
	}
	if n := replica.seen("fenced-read"); n != 3 {
		t.Fatalf("the replica served %d of 3 reads", n)
	}
	// No replica left: the read would go to the writer, and is refused.
	snap := *srv.topo.Load()
	snap.Servers = append([]topology.Server(nil), snap.Servers...)
	snap.Servers[1].State, snap.Servers[1].Readable = topology.Shunned, false
	snap.Version++
	srv.topo.Publish(&snap)
	db, err := sql.Open("mysql", "app:secret@tcp("+addr+")/?timeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v, n string
	if err := db.QueryRow("SELECT 'writer-only'").Scan(&v, &n); !is7015(err) {
		t.Fatalf("a read only the writer could serve: %q %v", v, err)
	}
	if primary.seen("writer-only") != 0 {
		t.Fatal("the writer served a read while this instance was self-fenced")
	}
}

// TestWriteGateAfterHold: a write that arrived while a switchover held
// statements, with the lease valid, and was released after the deadline
// passed (the process was stopped, the lease lost) is refused with 7015
// and never reaches the writer this instance last knew.
func TestWriteGateAfterHold(t *testing.T) {
	primary := newFakeBackend(t)
	replica := newFakeBackend(t)
	srv, addr := twoServerProxy(t, primary, replica)
	db, err := sql.Open("mysql", "app:secret@tcp("+addr+")/?timeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	srv.SetWriteDeadline(time.Now().Add(200*time.Millisecond), false, "it could not renew its etcd lease in time")
	srv.Hold("switchover in progress", 5*time.Second)
	done := make(chan error, 1)
	before := primary.seen("INSERT")
	go func() { _, err := db.Exec("INSERT INTO t VALUES (2)"); done <- err }()
	time.Sleep(400 * time.Millisecond) // held past the deadline
	srv.Release()
	err = <-done
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 7015 {
		t.Fatalf("a write held past the deadline: %v", err)
	}
	if primary.seen("INSERT") != before {
		t.Fatal("a write held past the lease reached the writer")
	}
}
