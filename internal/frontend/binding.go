package frontend

import (
	"sync/atomic"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/sqlscan"
)

// binding is what ties a session to server connections: the connection
// it holds between statements and the reasons it must keep it (a
// transaction, autocommit off, temporary tables, pins), and, with
// multiplexing off, its one connection per server. heldIdx and heldConn
// show the held connection to other goroutines (Fence, the write gate);
// the rest is the session goroutine's. Acquiring and giving back
// connections needs the pools and stays on Session (conns.go).
type binding struct {
	// conn is the server connection the session holds between
	// statements (transaction, pin), or nil.
	conn *backend.Conn
	// sticky holds one connection per server when multiplexing is off.
	sticky map[int]*backend.Conn

	inTrx         bool
	autocommitOff bool
	pins          [numPins]int // per reason (PinNames); PinTempTable counts in tempTables
	tempTables    int

	heldIdx  atomic.Int32
	heldConn atomic.Pointer[backend.Conn]
}

// pinSet is a set of pin reasons: bit i is reason i.
type pinSet uint32

// set makes c the held connection (nil: none).
func (b *binding) set(c *backend.Conn) {
	b.conn = c
	if c == nil {
		b.heldIdx.Store(-1)
		b.heldConn.Store(nil)
	} else {
		b.heldIdx.Store(int32(c.Index))
		b.heldConn.Store(c)
	}
}

// bound reports whether the session must keep its server connection.
func (b *binding) bound() bool {
	if b.inTrx || b.autocommitOff || b.tempTables > 0 {
		return true
	}
	for _, n := range b.pins {
		if n > 0 {
			return true
		}
	}
	return false
}

// noteStatus records the transaction state a reply's status flags show.
func (b *binding) noteStatus(status uint16) {
	b.inTrx = status&mysqlproto.ServerStatusInTrans != 0
	b.autocommitOff = status&mysqlproto.ServerStatusAutocommit == 0
}

// status is the transaction state as the status flags of Vigil's own
// replies show it.
func (b *binding) status() uint16 {
	var st uint16
	if !b.autocommitOff {
		st |= mysqlproto.ServerStatusAutocommit
	}
	if b.inTrx {
		st |= mysqlproto.ServerStatusInTrans
	}
	return st
}

// clear forgets the transaction and every pin (the connection that held
// them is gone, or the session was reset).
func (b *binding) clear() {
	b.inTrx, b.autocommitOff = false, false
	b.pins = [numPins]int{}
	b.tempTables = 0
}

// pin adds one hold for reason; it reports whether the reason is new.
func (b *binding) pin(reason int) (first bool) {
	first = b.pins[reason] == 0
	b.pins[reason]++
	return first
}

// unpin drops every hold for reason.
func (b *binding) unpin(reason int) { b.pins[reason] = 0 }

// flagPins are the statements that pin the session to its server
// connection by what they leave there.
var flagPins = [...]struct {
	flag sqlscan.Flags
	pin  int
}{
	{sqlscan.FlagCalcFoundRows, PinFoundRows},
	{sqlscan.FlagPrepare, PinPrepare},
	{sqlscan.FlagUserVar, PinUserVar},
	{sqlscan.FlagSqlLogBinOff, PinSqlLogBin},
	// Session status counters and profiles describe one server
	// connection: read them from one.
	{sqlscan.FlagSessionStatus, PinSessionStatus},
	// LASTVAL() / PREVIOUS VALUE FOR answer from the NEXTVAL connection.
	{sqlscan.FlagSequence, PinSequence},
	{sqlscan.FlagRole, PinRole},
	{sqlscan.FlagHandler, PinHandler},
	// What a stored procedure left on the connection (temporary tables,
	// user variables, OUT parameters in @x, SET @@x) is reported by no
	// reply: the session keeps the connection that has it.
	{sqlscan.FlagCall, PinCall},
}

// notePins records what a successful statement did to the session's
// ability to move between server connections. nextTrxSet: the statement
// was SET TRANSACTION (for the next transaction only). It returns the
// reasons that are new.
func (b *binding) notePins(info sqlscan.Info, nextTrxSet bool) (added pinSet) {
	f := info.Flags
	pin := func(reason int) {
		if b.pin(reason) {
			added |= 1 << reason
		}
	}
	if f&sqlscan.FlagTempTable != 0 {
		if b.tempTables == 0 {
			added |= 1 << PinTempTable
		}
		b.tempTables++
	}
	if f&sqlscan.FlagDropTemp != 0 && b.tempTables > 0 {
		b.tempTables--
	}
	if f&sqlscan.FlagGetLock != 0 {
		pin(PinGetLock)
	}
	if f&sqlscan.FlagLockTables != 0 {
		pin(PinLockTables)
	}
	if f&sqlscan.FlagUnlockTables != 0 {
		b.unpin(PinLockTables)
	}
	for _, fp := range flagPins {
		if f&fp.flag != 0 {
			pin(fp.pin)
		}
	}
	if f&sqlscan.FlagXA != 0 {
		switch info.Class {
		case sqlscan.ClassBegin:
			pin(PinXA)
		case sqlscan.ClassCommit, sqlscan.ClassRollback:
			b.unpin(PinXA)
		}
	}
	// SET TRANSACTION (without SESSION) applies to the next transaction
	// only: keep the connection until a statement ends outside one.
	if nextTrxSet && b.pins[PinTrxCharacteristics] == 0 {
		pin(PinTrxCharacteristics)
	} else if b.pins[PinTrxCharacteristics] > 0 && info.Class != sqlscan.ClassSet && !b.inTrx {
		b.unpin(PinTrxCharacteristics)
	}
	return added
}

// setStmtPins records how many prepared statements hold an open cursor
// and how many wait with long data (stmtRegistry.held); it returns the
// reasons that are new.
func (b *binding) setStmtPins(cursors, longData int) (added pinSet) {
	if cursors > 0 && b.pins[PinCursor] == 0 {
		added |= 1 << PinCursor
	}
	if longData > 0 && b.pins[PinLongData] == 0 {
		added |= 1 << PinLongData
	}
	b.pins[PinCursor], b.pins[PinLongData] = cursors, longData
	return added
}
