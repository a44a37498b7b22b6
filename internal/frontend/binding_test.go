package frontend

import (
	"testing"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
)

// TestBindingPins: which statements pin the session, for which reason,
// which reasons are reported new (counted once), and what frees it.
func TestBindingPins(t *testing.T) {
	var b binding
	steps := []struct {
		q        string
		nextTrx  bool
		added    pinSet
		bound    bool
		tempTabs int
	}{
		{q: "SELECT 1"},
		{q: "SELECT GET_LOCK('a', 1)", added: 1 << PinGetLock, bound: true},
		{q: "SELECT GET_LOCK('b', 1)", bound: true}, // a second lock: not new
		{q: "CREATE TEMPORARY TABLE t (a INT)", added: 1 << PinTempTable, bound: true, tempTabs: 1},
		{q: "DROP TEMPORARY TABLE t", bound: true},
		{q: "LOCK TABLES t WRITE", added: 1 << PinLockTables, bound: true},
		{q: "UNLOCK TABLES", bound: true},
	}
	for _, st := range steps {
		added := b.notePins(scan(st.q), st.nextTrx)
		if added != st.added || b.bound() != st.bound {
			t.Errorf("%s: added %b bound %v, want %b %v", st.q, added, b.bound(), st.added, st.bound)
		}
	}
	if b.pins[PinGetLock] != 2 || b.pins[PinLockTables] != 0 || b.tempTables != 0 {
		t.Errorf("pins: get_lock %d lock_tables %d temp %d", b.pins[PinGetLock], b.pins[PinLockTables], b.tempTables)
	}
	b.unpin(PinGetLock)
	if b.bound() {
		t.Error("bound with no reason left")
	}
	if !b.pin(PinUserVar) || b.pin(PinUserVar) {
		t.Error("pin: the first hold of a reason must be reported new, the second not")
	}
	b.clear()
	if b.bound() || b.pins != [numPins]int{} {
		t.Error("clear left pins")
	}
}

// TestBindingNextTransaction: SET TRANSACTION pins until a statement ends
// outside a transaction.
func TestBindingNextTransaction(t *testing.T) {
	var b binding
	if added := b.notePins(scan("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"), true); added != 1<<PinTrxCharacteristics {
		t.Fatalf("SET TRANSACTION: added %b", added)
	}
	b.noteStatus(mysqlproto.ServerStatusAutocommit | mysqlproto.ServerStatusInTrans)
	b.notePins(scan("SELECT 1"), false)
	if b.pins[PinTrxCharacteristics] == 0 {
		t.Fatal("unpinned inside the transaction")
	}
	b.noteStatus(mysqlproto.ServerStatusAutocommit)
	b.notePins(scan("COMMIT"), false)
	if b.pins[PinTrxCharacteristics] != 0 || b.bound() {
		t.Error("still pinned after the transaction ended")
	}
}

// TestBindingStatus: the transaction state from status flags and back.
func TestBindingStatus(t *testing.T) {
	var b binding
	for _, st := range []uint16{0, mysqlproto.ServerStatusAutocommit, mysqlproto.ServerStatusInTrans,
		mysqlproto.ServerStatusAutocommit | mysqlproto.ServerStatusInTrans} {
		b.noteStatus(st | mysqlproto.ServerMoreResultsExists)
		if b.status() != st {
			t.Errorf("status %04x read back as %04x", st, b.status())
		}
		if want := st != mysqlproto.ServerStatusAutocommit; b.bound() != want {
			t.Errorf("status %04x: bound %v, want %v", st, b.bound(), want)
		}
	}
}

func TestBindingStmtPinsAndHeld(t *testing.T) {
	var b binding
	if added := b.setStmtPins(1, 0); added != 1<<PinCursor {
		t.Errorf("a cursor: added %b", added)
	}
	if added := b.setStmtPins(2, 1); added != 1<<PinLongData || !b.bound() {
		t.Errorf("another cursor and long data: added %b bound %v", added, b.bound())
	}
	b.setStmtPins(0, 0)
	if b.bound() {
		t.Error("bound with no cursor and no long data")
	}
	c := &backend.Conn{Index: 2}
	b.set(c)
	if b.conn != c || b.heldIdx.Load() != 2 || b.heldConn.Load() != c {
		t.Error("set: the held connection is not shown")
	}
	b.set(nil)
	if b.conn != nil || b.heldIdx.Load() != -1 || b.heldConn.Load() != nil {
		t.Error("set(nil) left a held connection")
	}
}
