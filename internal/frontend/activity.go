package frontend

import "sync/atomic"

// Passive evidence for the monitor. A server that completes client
// statements on Vigil's own pooled connections is alive, whatever its
// health checks say: under CPU starvation a check can time out while the
// server keeps answering real traffic. The session counts every reply it
// read to the end (an error reply too: the server answered) of a statement
// it sent after the monitor's latest look (Activity) at that server; the
// monitor looks when a check starts and when it ends (see
// monitor.Options.Activity), so a check counts exactly the statements sent
// during it and completed during it. A reply sent before a server stopped
// and read late (Vigil itself short of CPU) belongs to an earlier
// statement and does not count: a stopped server completes nothing new.
// The statements in flight (the balancer's count) tell the monitor whether
// clients were waiting on a server that completed nothing.
//
// The cost on the statement path is two atomic loads and an add on a
// cache line of the server's own: no clock read, no allocation.

// replyCounter is one server's count, padded so that sessions of different
// servers do not write the same cache line.
type replyCounter struct {
	n     atomic.Uint64
	epoch atomic.Uint64 // bumped by every Activity call
	_     [48]byte
}

func newReplyCounters(n int) []replyCounter { return make([]replyCounter, n) }

// replyEpoch is what a session notes when it sends a statement to server
// idx, for noteReply.
func (s *Server) replyEpoch(idx int) uint64 {
	if idx >= 0 && idx < len(s.replies) {
		return s.replies[idx].epoch.Load()
	}
	return 0
}

// noteReply counts a reply of server idx read to the end, of a statement
// sent in epoch (replyEpoch then), if the monitor did not look since.
func (s *Server) noteReply(idx int, epoch uint64) {
	if idx >= 0 && idx < len(s.replies) && s.replies[idx].epoch.Load() == epoch {
		s.replies[idx].n.Add(1)
	}
}

// Activity is passive evidence about server idx (its index in the
// snapshot) for the monitor: replies is how many client statements it has
// completed on Vigil's pooled connections (the reply read to the end, an
// error reply included; it only grows) that were sent after the previous
// call of Activity for it and completed before this one; inFlight is how
// many are waiting for its reply now. Each call starts a new period.
func (s *Server) Activity(idx int) (replies uint64, inFlight int64) {
	if idx < 0 || idx >= len(s.replies) {
		return 0, 0
	}
	r := &s.replies[idx]
	n := r.n.Load()
	r.epoch.Add(1)
	return n, s.bal.Outstanding(idx)
}

// OnServerLost sets what Vigil calls when a statement's server connection
// fails with an I/O error (reset, EOF): the monitor checks that server at
// once instead of at its next interval, so a server that died is known
// dead from the moment its clients saw it, not up to a check interval
// later. The hook must not block.
func (s *Server) OnServerLost(f func(idx int)) { s.lostHook.Store(&f) }

func (s *Server) serverLost(idx int) {
	if f := s.lostHook.Load(); f != nil && *f != nil {
		(*f)(idx)
	}
}
