package frontend

import "time"

// rywState is where the session's last write is, for read-your-writes
// (router.RYW*): when it ended and its GTID, and the servers known to have
// applied that GTID.
type rywState struct {
	lastWrite time.Time
	gtid      string // the last GTID a write of the session (or, RYWGlobal, of any) reported
	fresh     bool   // the statement that just ran reported a new GTID
	seen      uint64 // bit i: server i is known to have applied gtid
}

// wrote records the GTID a write on server idx reported: only that server
// has it so far.
func (r *rywState) wrote(gtid string, idx int) {
	r.gtid, r.fresh, r.seen = gtid, true, 1<<uint(idx)
}

// follow makes gtid (the newest write of any session) the one reads wait
// for; it reports whether that changed it (no server known to have it).
func (r *rywState) follow(gtid string) bool {
	if gtid == r.gtid {
		return false
	}
	r.gtid, r.seen = gtid, 0
	return true
}

// seenOn reports whether server idx is known to have applied gtid.
func (r *rywState) seenOn(idx int) bool { return r.seen&(1<<uint(idx)) != 0 }

// markSeen records that server idx applied gtid.
func (r *rywState) markSeen(idx int) { r.seen |= 1 << uint(idx) }

// forget drops the last write (a reset session). fresh stays: it is the
// running statement's, cleared when that statement ends (Session.after).
func (r *rywState) forget() {
	r.gtid, r.seen = "", 0
	r.lastWrite = time.Time{}
}
