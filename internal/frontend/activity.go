package frontend

import "sync/atomic"

// Passive evidence for the monitor. A server that completes client
// statements on Vigil's own pooled connections is alive, whatever its
// health checks say: under CPU starvation a check can time out while the
// server keeps answering real traffic. The session counts every reply it
// read to the end (an error reply too: the server answered); the monitor
// reads the counter when a check starts and when it ends (see
// monitor.Options.Activity). Only completions count: a statement stuck on
// a stopped server never does. The statements in flight (the balancer's
// count) tell the monitor whether clients were waiting on a server that
// completed nothing.
//
// The cost on the statement path is one atomic add on a counter that has a
// cache line of its own: no clock read, no allocation.

// replyCounter is one server's count, padded so that sessions of different
// servers do not write the same cache line.
type replyCounter struct {
	n atomic.Uint64
	_ [56]byte
}

func newReplyCounters(n int) []replyCounter { return make([]replyCounter, n) }

// noteReply counts a reply of server idx read to the end.
func (s *Server) noteReply(idx int) {
	if idx >= 0 && idx < len(s.replies) {
		s.replies[idx].n.Add(1)
	}
}

// Activity is passive evidence about server idx (its index in the
// snapshot) for the monitor: replies is how many client statements it has
// completed on Vigil's pooled connections since the start (the reply read
// to the end, an error reply included; it only grows), inFlight how many
// are waiting for its reply now.
func (s *Server) Activity(idx int) (replies uint64, inFlight int64) {
	if idx < 0 || idx >= len(s.replies) {
		return 0, 0
	}
	return s.replies[idx].n.Load(), s.bal.Outstanding(idx)
}
