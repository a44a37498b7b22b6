package frontend

// stmtRegistry is the client's prepared statements by the ids Vigil gave
// them. Ids are never reused within a session, not even after a close
// or a COM_RESET_CONNECTION (the counter is not reset).
type stmtRegistry struct {
	byID map[uint32]*clientStmt
	last uint32 // the last id given
	// holding is false while no statement can hold its connection: held
	// then counts nothing without looking at every statement (it runs
	// after every execute). noteHeld sets it where a statement arrives,
	// opens a cursor or gets long data; held clears it when its count
	// finds none.
	holding bool
}

// get returns the statement with id, or nil.
func (r *stmtRegistry) get(id uint32) *clientStmt { return r.byID[id] }

// nextID is the id the next statement added gets.
func (r *stmtRegistry) nextID() uint32 { return r.last + 1 }

// add gives st the next id and registers it.
func (r *stmtRegistry) add(st *clientStmt) {
	r.last++
	st.id = r.last
	if r.byID == nil {
		r.byID = map[uint32]*clientStmt{}
	}
	r.byID[st.id] = st
	r.noteHeld(st)
}

// adopt adds st with the id it has (a statement another part of a
// sharded session prepared: shard.go).
func (r *stmtRegistry) adopt(st *clientStmt) {
	if r.byID == nil {
		r.byID = map[uint32]*clientStmt{}
	}
	r.byID[st.id] = st
	r.last = max(r.last, st.id)
	r.noteHeld(st)
}

// noteHeld marks the registry as holding when st has a cursor or long
// data (as it is added, or after either is set).
func (r *stmtRegistry) noteHeld(st *clientStmt) {
	if st.cursor || st.longData {
		r.holding = true
	}
}

// close forgets the statement with id (unknown ids are ignored, as
// COM_STMT_CLOSE has no reply).
func (r *stmtRegistry) close(id uint32) { delete(r.byID, id) }

// clear forgets every statement (COM_RESET_CONNECTION, COM_CHANGE_USER).
func (r *stmtRegistry) clear() { clear(r.byID) }

// held counts the statements that keep their server connection: those
// with an open cursor and those with parameters sent ahead of the
// execute (COM_STMT_SEND_LONG_DATA).
func (r *stmtRegistry) held() (cursors, longData int) {
	if !r.holding {
		return 0, 0
	}
	for _, st := range r.byID {
		if st.cursor {
			cursors++
		}
		if st.longData {
			longData++
		}
	}
	r.holding = cursors+longData > 0
	return cursors, longData
}
