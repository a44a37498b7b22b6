package mysqlproto

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ErrStatementMemory is returned by ReadPacket and ReadFrame when a packet
// could not get memory from the connection's Budget within its wait. The
// rest of the packet has been read and discarded: the connection can read
// the next one.
var ErrStatementMemory = errors.New("statement memory budget exhausted")

// DefaultBudgetWait is how long a reader waits for budget before its
// packet is refused.
const DefaultBudgetWait = 10 * time.Second

// Budget bounds the bytes that the large packets of every connection
// sharing it hold at once (packets that do not fit a connection's 16 KiB
// read buffer: the buffers they are assembled in). A reader reserves
// before it allocates and waits when the budget is used up; a reader
// that waits longer than its wait gets ErrStatementMemory.
//
// A packet of one frame reserves its size. A packet of several frames
// (over 16 MiB) is admitted whole at its first frame, for as much as it
// may be (max_allowed_packet): its size is known only at its last frame,
// and readers that each held part of the budget while waiting for more
// could wait for each other forever. Buffers of finished packets are kept
// for reuse while the limit has room (spares), so a steady stream of
// large statements allocates nothing.
//
// Waiting readers are served in the order they came. Two rules guarantee
// progress whatever the sizes: the first in line is always served when
// nothing is reserved (a packet larger than the whole budget passes
// alone), and a reader that holds budget and needs more (a LOAD
// DATA LOCAL frame larger than the one before) may exceed the limit when
// no other reader does (the overdraft, one at a time).
type Budget struct {
	mu        sync.Mutex
	limit     int64
	wait      time.Duration
	used      int64
	overdraft *Conn
	wake      chan struct{} // closed and replaced when bytes are released
	// continuing: readers that hold budget and wait for more.
	continuing int
	// spare: buffers kept for reuse, by capacity (alloc, free).
	spare      map[int][][]byte
	spareBytes int64
	closed     bool  // Close: waiters and new waits are refused at once
	freed      int64 // bytes of buffers over 1 MiB released since the last TakeFreed
	// queue: tickets of first reservations waiting, oldest first.
	queue   []uint64
	tickets uint64

	// Waited counts reservations that had to wait, Refused those that
	// waited in vain (their packet got ErrStatementMemory), Overdrafts
	// those served over the limit.
	Waited, Refused, Overdrafts atomic.Int64
	inUse                       atomic.Int64
}

// NewBudget returns a budget of limit bytes (0 or less: unlimited, only
// counted).
func NewBudget(limit int64) *Budget {
	return &Budget{limit: limit, wait: DefaultBudgetWait, wake: make(chan struct{})}
}

// SetLimit changes the limit (config reload); waiters recheck.
func (b *Budget) SetLimit(limit int64) {
	b.mu.Lock()
	b.limit = limit
	b.wakeLocked()
	b.mu.Unlock()
}

// SetWait changes how long a reader waits before its packet is refused.
func (b *Budget) SetWait(d time.Duration) {
	b.mu.Lock()
	b.wait = d
	b.mu.Unlock()
}

// Close refuses every wait from now on, so that sessions waiting for
// budget end at once when the daemon stops.
func (b *Budget) Close() {
	b.mu.Lock()
	b.closed = true
	b.wakeLocked()
	b.mu.Unlock()
}

// Limit is the configured limit.
func (b *Budget) Limit() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limit
}

// InUse is the number of bytes reserved now.
func (b *Budget) InUse() int64 { return b.inUse.Load() }

func (b *Budget) wakeLocked() {
	close(b.wake)
	b.wake = make(chan struct{})
}

// reserve takes n bytes for c, which holds held bytes already.
// Packets under way come first: a packet's first reservation waits while
// one that holds budget waits for more. First reservations are served in
// the order they came (a queue of tickets), so that under a flood each
// waits its turn instead of some losing every race until their wait ends.
func (b *Budget) reserve(c *Conn, n, held int64) error {
	var timer *time.Timer
	var ticket uint64 // in b.queue while waiting (first reservations)
	waiting := false
	b.mu.Lock()
	defer b.mu.Unlock()
	leave := func() {
		if timer != nil {
			timer.Stop()
		}
		if !waiting {
			return
		}
		if held > 0 {
			b.continuing--
		} else {
			b.queue = slices.DeleteFunc(b.queue, func(t uint64) bool { return t == ticket })
		}
		b.wakeLocked() // the next in line may go now
	}
	for {
		var ok bool
		if held > 0 {
			ok = b.limit <= 0 || b.used+n <= b.limit
			if !ok && (b.overdraft == nil || b.overdraft == c) {
				if b.overdraft == nil {
					b.Overdrafts.Add(1)
				}
				b.overdraft, ok = c, true
			}
		} else {
			first := len(b.queue) == 0 || (waiting && b.queue[0] == ticket)
			ok = first && (b.limit <= 0 || b.used == 0 || (b.used+n <= b.limit && b.continuing == 0))
		}
		if ok {
			leave()
			b.used += n
			b.inUse.Store(b.used)
			return nil
		}
		if b.closed {
			leave()
			b.Refused.Add(1)
			return ErrStatementMemory
		}
		if !waiting {
			waiting = true
			if held > 0 {
				b.continuing++
			} else {
				b.tickets++
				ticket = b.tickets
				b.queue = append(b.queue, ticket)
			}
			b.Waited.Add(1)
			timer = time.NewTimer(b.wait)
		}
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-wake:
			b.mu.Lock()
		case <-timer.C:
			b.mu.Lock()
			leave()
			b.Refused.Add(1)
			return ErrStatementMemory
		}
	}
}

// spareStep: buffers whose size is a whole number of these (the ones of
// packets over 16 MiB, ReadPacket) are kept for reuse.
const spareStep = MaxPayload + 1

// alloc reserves size bytes for c (holding held already) and returns an
// empty buffer of that capacity: a spare one when there is one. Without
// reuse every buffer of a 64 MiB statement (16, 32, then 64 MiB) would be
// garbage once done with, and the heap would run ahead of the budget
// until the GC caught up.
func (b *Budget) alloc(c *Conn, size int, held int64) ([]byte, error) {
	if err := b.reserve(c, int64(size), held); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if l := b.spare[size]; len(l) > 0 {
		buf := l[len(l)-1]
		l[len(l)-1] = nil
		b.spare[size] = l[:len(l)-1]
		b.spareBytes -= int64(size)
		return buf, nil
	}
	// Spares and reservations together stay within the limit: drop
	// spares (to the GC) to make room for the new buffer.
	for sz, l := range b.spare {
		for len(l) > 0 && b.used+b.spareBytes > b.limit {
			l[len(l)-1] = nil
			l = l[:len(l)-1]
			b.spareBytes -= int64(sz)
		}
		b.spare[sz] = l
	}
	return make([]byte, 0, size), nil
}

// free gives back the reservation of buf, which c no longer uses (left:
// what c still holds), and keeps buf as a spare when its size suits and
// the limit has room for it.
func (b *Budget) free(c *Conn, buf []byte, left int64) {
	n := int64(cap(buf))
	b.mu.Lock()
	b.releaseLocked(c, n, left)
	if n%spareStep == 0 && b.used+b.spareBytes+n <= b.limit {
		if b.spare == nil {
			b.spare = map[int][][]byte{}
		}
		b.spare[int(n)] = append(b.spare[int(n)], buf[:0])
		b.spareBytes += n
	}
	b.mu.Unlock()
}

// release gives back n bytes of c; left is what c still holds after.
func (b *Budget) release(c *Conn, n, left int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.releaseLocked(c, n, left)
	b.mu.Unlock()
}

func (b *Budget) releaseLocked(c *Conn, n, left int64) {
	b.used -= n
	if n >= 1<<20 {
		// Only large buffers make a return to the OS worth its GC.
		b.freed += n
	}
	b.inUse.Store(b.used)
	if left == 0 && b.overdraft == c {
		b.overdraft = nil
	}
	b.wakeLocked()
}

// Spare is the bytes of buffers kept for reuse.
func (b *Budget) Spare() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spareBytes
}

// TakeFreed returns the bytes of buffers over 1 MiB released since the
// last call when nothing is reserved now, and drops the spare buffers (the owner then gives
// memory back to the OS); else 0.
func (b *Budget) TakeFreed() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used != 0 {
		return 0
	}
	clear(b.spare)
	b.spareBytes = 0
	f := b.freed
	b.freed = 0
	return f
}
