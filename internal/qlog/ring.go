package qlog

import (
	"sync/atomic"
)

// ring is a bounded multi-producer, single-consumer queue of preallocated
// entries (Dmitry Vyukov's bounded queue). Producers claim a position with
// one compare-and-swap on tail, fill the slot and publish it by storing its
// sequence number; the consumer reads slots in order and hands them back by
// advancing their sequence by the ring's size. No producer ever waits: a
// slot still held by the consumer means the ring is full.
//
// The top bit of tail closes the ring: once set, every claim fails, and the
// positions below it are exactly the entries accepted.
type ring struct {
	_     [64]byte
	tail  atomic.Uint64 // next position to claim, | closedBit
	_     [56]byte
	head  uint64 // next position to read; consumer only
	mask  uint64
	slots []slot
}

const closedBit = 1 << 63

type slot struct {
	seq atomic.Uint64 // pos+1: published for pos; pos: free for pos
	e   Entry         // e.Statement is the ring's own copy
	// trunc: the statement was truncated; charge: bytes charged to the
	// logger's large-statement budget.
	trunc  bool
	charge int64
}

func newRing(size int) *ring {
	n := 1
	for n < size {
		n <<= 1
	}
	r := &ring{mask: uint64(n - 1), slots: make([]slot, n)}
	for i := range r.slots {
		r.slots[i].seq.Store(uint64(i))
	}
	return r
}

// claim reserves the next slot for a producer, which must fill it and then
// call publish. It fails when the ring is full or closed.
func (r *ring) claim() (*slot, uint64, bool) {
	pos := r.tail.Load()
	for {
		if pos&closedBit != 0 {
			return nil, 0, false
		}
		s := &r.slots[pos&r.mask]
		switch d := int64(s.seq.Load() - pos); {
		case d == 0:
			if r.tail.CompareAndSwap(pos, pos+1) {
				return s, pos, true
			}
		case d < 0:
			return nil, 0, false // the consumer has not released it: full
		}
		pos = r.tail.Load()
	}
}

func (r *ring) publish(s *slot, pos uint64) { s.seq.Store(pos + 1) }

// peek returns the next slot for the consumer, or nil if it is not
// published yet.
func (r *ring) peek() *slot {
	s := &r.slots[r.head&r.mask]
	if s.seq.Load() != r.head+1 {
		return nil
	}
	return s
}

// release hands the slot returned by peek back to the producers.
func (r *ring) release(s *slot) {
	s.seq.Store(r.head + r.mask + 1)
	r.head++
}

// close stops further claims and returns the number of entries ever
// accepted: the consumer is done when head reaches it.
func (r *ring) close() uint64 { return r.tail.Or(closedBit) &^ closedBit }

// accepted returns the number of entries ever accepted.
func (r *ring) accepted() uint64 { return r.tail.Load() &^ closedBit }
