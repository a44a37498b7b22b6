package mysqlproto

import (
	"errors"
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
// before it allocates, per frame (a packet over 16 MiB arrives as several
// frames and its size is known only at its last one), and waits when the
// budget is used up.
//
// Progress is guaranteed without a deadlock when every reader holds part
// of the budget and wants more: a reader that already holds budget for a
// packet and needs more may exceed the limit when no other reader does
// (the overdraft, one packet at a time), and a reader is always served
// when nothing is reserved. So the bytes held stay under Limit plus one
// packet's buffer (at most 1.5 max_allowed_packet while it grows), and
// the overdraft's packet always completes. A reader that waits longer
// than Wait gets ErrStatementMemory.
type Budget struct {
	mu        sync.Mutex
	limit     int64
	wait      time.Duration
	used      int64
	overdraft *Conn
	wake      chan struct{} // closed and replaced when bytes are released
	// continuing: readers that hold budget and wait for more.
	continuing int
	freed      int64 // bytes released since the last TakeFreed

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
// one that holds budget waits for more, so that packets finish rather
// than all start.
func (b *Budget) reserve(c *Conn, n, held int64) error {
	var timer *time.Timer
	waiting := false
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		ok := b.limit <= 0 || b.used == 0 || (b.used+n <= b.limit && (held > 0 || b.continuing == 0))
		if !ok && held > 0 && (b.overdraft == nil || b.overdraft == c) {
			if b.overdraft == nil {
				b.Overdrafts.Add(1)
			}
			b.overdraft, ok = c, true
		}
		if ok {
			if waiting && held > 0 {
				b.continuing--
			}
			b.used += n
			b.inUse.Store(b.used)
			return nil
		}
		if !waiting {
			waiting = true
			if held > 0 {
				b.continuing++
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
			if held > 0 {
				b.continuing--
				b.wakeLocked() // first reservations may go now
			}
			b.Refused.Add(1)
			return ErrStatementMemory
		}
	}
}

// release gives back n bytes of c; left is what c still holds after.
func (b *Budget) release(c *Conn, n, left int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.freed += n
	b.inUse.Store(b.used)
	if left == 0 && b.overdraft == c {
		b.overdraft = nil
	}
	b.wakeLocked()
	b.mu.Unlock()
}

// TakeFreed returns the bytes released since the last call when nothing
// is reserved now (the owner then gives memory back to the OS), else 0.
func (b *Budget) TakeFreed() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used != 0 {
		return 0
	}
	f := b.freed
	b.freed = 0
	return f
}
