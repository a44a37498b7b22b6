package sqlscan

// killTarget is what Scan read of "KILL [HARD|SOFT] [CONNECTION|QUERY]
// <id>" (an optional trailing ';' allowed) at the start of the text.
type killTarget struct {
	id    uint64
	query bool
	ok    bool
}

// KillTarget returns the thread id of a "KILL [HARD|SOFT]
// [CONNECTION|QUERY] <id>" statement (an optional trailing ';' allowed)
// and whether only the query is killed. ok is false for anything else,
// including MariaDB's "KILL QUERY ID <query_id>" and "KILL USER <name>",
// whose target is not a connection id.
func (i Info) KillTarget() (id uint64, query bool, ok bool) {
	if !i.kill.ok {
		return 0, false, false
	}
	return i.kill.id, i.kill.query, true
}

// killState follows the tokens of a KILL statement (factTracker.observe).
type killState uint8

const (
	killNone   killState = iota // not a KILL statement (or not one Vigil answers)
	killStart                   // after KILL
	killMode                    // after HARD or SOFT
	killWhat                    // after CONNECTION or QUERY
	killNumber                  // after the id: only ';' may follow
)

// observeKill advances the KILL state machine by one token.
func (f *factTracker) observeKill(t Token, src []byte) {
	switch f.killAt {
	case killNone:
		return
	case killNumber:
		if t.Kind != TokSemicolon {
			f.killAt, f.kill = killNone, killTarget{}
		}
		return
	}
	switch {
	case f.killAt == killStart && (t.Keyword == KwHard || t.Keyword == KwSoft):
		f.killAt = killMode
	case f.killAt != killWhat && t.Keyword == KwConnection:
		f.killAt = killWhat
	case f.killAt != killWhat && t.Keyword == KwQuery:
		f.killAt, f.kill.query = killWhat, true
	case t.Kind == TokNumber:
		id, ok := decimalID(src[t.Start:t.End])
		if !ok {
			f.killAt = killNone
			return
		}
		f.killAt, f.kill = killNumber, killTarget{id: id, query: f.kill.query, ok: true}
	default:
		f.killAt = killNone
	}
}

// decimalID parses a thread id: decimal digits only, at most 2^64-1.
func decimalID(b []byte) (id uint64, ok bool) {
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		d := uint64(c - '0')
		if id > (1<<64-1-d)/10 {
			return 0, false // overflow
		}
		id = id*10 + d
	}
	return id, true
}
