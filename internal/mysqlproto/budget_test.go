package mysqlproto

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"
)

// sendPackets writes each payload as a packet (sequence 0) from a.
func sendPackets(t *testing.T, a *Conn, payloads ...[]byte) {
	t.Helper()
	go func() {
		for _, p := range payloads {
			a.Seq = 0
			if err := a.WritePacket(p); err != nil {
				t.Error(err)
				return
			}
			if err := a.Flush(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
}

func TestBudgetPacketSizes(t *testing.T) {
	a, b := pipe(t)
	budget := NewBudget(256 << 20)
	b.SetBudget(budget)
	b.MaxPacket = DefaultMaxAllowedBytes
	sizes := []int{0, 100, defaultReadBuf + 10, MaxPayload - 1, MaxPayload, MaxPayload + 5, 3*MaxPayload + 3, 4 * MaxPayload}
	var payloads [][]byte
	for _, n := range sizes {
		payloads = append(payloads, bytes.Repeat([]byte{byte(n % 251)}, n))
	}
	sendPackets(t, a, payloads...)
	for i, n := range sizes {
		b.Seq = 0
		p, err := b.ReadPacket()
		if err != nil {
			t.Fatalf("size %d: %v", n, err)
		}
		if !bytes.Equal(p, payloads[i]) {
			t.Fatalf("size %d: got %d bytes, not the packet sent", n, len(p))
		}
		// One buffer of max_allowed_packet for a packet of several frames.
		if n >= MaxPayload && cap(p) != DefaultMaxAllowedBytes {
			t.Errorf("size %d: buffer of %d bytes, want %d", n, cap(p), DefaultMaxAllowedBytes)
		}
		if got := budget.InUse(); got != int64(cap(b.big)) || (n > defaultReadBuf && got < int64(n)) {
			t.Errorf("size %d: %d bytes reserved for a buffer of %d", n, got, cap(b.big))
		}
		b.ReleaseBig()
		if got := budget.InUse(); got != 0 {
			t.Fatalf("size %d: %d bytes still reserved after ReleaseBig", n, got)
		}
	}
}

// A packet that cannot get budget in time is refused, its bytes are
// read and dropped, and the next packet reads normally.
func TestBudgetRefusesAndDiscards(t *testing.T) {
	a, b := pipe(t)
	budget := NewBudget(20 << 20)
	budget.SetWait(50 * time.Millisecond)
	b.SetBudget(budget)
	b.MaxPacket = DefaultMaxAllowedBytes
	// Another connection holds most of the budget.
	other := &Conn{budget: budget}
	if err := budget.reserve(other, 15<<20, 0); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte{'x'}, 2*MaxPayload+7)
	sendPackets(t, a, big, []byte("\x03SELECT 1"))
	if _, err := b.ReadPacket(); !errors.Is(err, ErrStatementMemory) {
		t.Fatalf("want ErrStatementMemory, got %v", err)
	}
	if budget.Waited.Load() != 1 || budget.Refused.Load() != 1 {
		t.Errorf("waited %d refused %d, want 1 1", budget.Waited.Load(), budget.Refused.Load())
	}
	b.Seq = 0
	p, err := b.ReadPacket()
	if err != nil || string(p) != "\x03SELECT 1" {
		t.Fatalf("the next packet: %q %v", p, err)
	}
	if got := budget.InUse(); got != 15<<20 {
		t.Fatalf("%d bytes reserved, want only the other connection's", got)
	}
}

// Every reader holds part of the budget and wants more: one of them
// overdraws, finishes and releases, so all finish (no deadlock).
func TestBudgetOverdraftGuaranteesProgress(t *testing.T) {
	budget := NewBudget(64 << 20)
	budget.SetWait(5 * time.Second)
	const readers = 4
	conns := make([]*Conn, readers)
	for i := range conns {
		conns[i] = &Conn{budget: budget}
		if err := budget.reserve(conns[i], 16<<20, 0); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := budget.reserve(c, 32<<20, 16<<20); err != nil {
				errs <- err
				return
			}
			budget.release(c, 48<<20, 0)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if budget.InUse() != 0 || budget.Overdrafts.Load() == 0 {
		t.Fatalf("in use %d, overdrafts %d", budget.InUse(), budget.Overdrafts.Load())
	}
}

// A packet larger than the whole budget still passes when nothing else
// is reserved.
func TestBudgetSmallerThanPacket(t *testing.T) {
	a, b := pipe(t)
	b.SetBudget(NewBudget(1 << 20))
	b.MaxPacket = DefaultMaxAllowedBytes
	big := bytes.Repeat([]byte{'y'}, MaxPayload+100)
	sendPackets(t, a, big)
	p, err := b.ReadPacket()
	if err != nil || !bytes.Equal(p, big) {
		t.Fatalf("got %d bytes, %v", len(p), err)
	}
}

// A large packet written keeps no reference to its payload afterwards.
func TestWriteLargeKeepsNoPayload(t *testing.T) {
	a, b := pipe(t)
	go func() {
		b.Seq = 0
		_, _ = b.ReadPacket()
	}()
	if err := a.WritePacket(make([]byte, MaxPayload+10)); err != nil {
		t.Fatal(err)
	}
	for i, v := range a.vec {
		if v != nil {
			t.Fatalf("vec[%d] still refers to %d bytes", i, len(v))
		}
	}
}

// Buffers of finished packets are reused: a second large packet
// allocates nothing, and the spares go when the budget is idle.
func TestBudgetReusesBuffers(t *testing.T) {
	a, b := pipe(t)
	budget := NewBudget(256 << 20)
	b.SetBudget(budget)
	b.MaxPacket = DefaultMaxAllowedBytes
	big := bytes.Repeat([]byte{'z'}, 2*MaxPayload+9)
	sendPackets(t, a, big, big)
	p, err := b.ReadPacket()
	if err != nil || !bytes.Equal(p, big) {
		t.Fatalf("got %d bytes, %v", len(p), err)
	}
	first := &p[:1][0]
	b.ReleaseBig()
	if budget.Spare() != DefaultMaxAllowedBytes {
		t.Fatalf("spare %d bytes, want the buffer's %d", budget.Spare(), DefaultMaxAllowedBytes)
	}
	b.Seq = 0
	if p, err = b.ReadPacket(); err != nil || !bytes.Equal(p, big) || &p[:1][0] != first {
		t.Fatalf("the second packet (%d bytes, %v) is not in the first one's buffer", len(p), err)
	}
	b.ReleaseBig()
	if f := budget.TakeFreed(); f != 2*DefaultMaxAllowedBytes || budget.Spare() != 0 {
		t.Fatalf("freed %d, spare %d after TakeFreed", f, budget.Spare())
	}
}

// Close ends waits at once (the daemon stops).
func TestBudgetCloseEndsWaits(t *testing.T) {
	budget := NewBudget(16 << 20)
	budget.SetWait(time.Minute)
	holder, waiter := &Conn{}, &Conn{}
	if err := budget.reserve(holder, 16<<20, 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- budget.reserve(waiter, 1<<20, 0) }()
	for budget.Waited.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	budget.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrStatementMemory) {
			t.Fatalf("got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the wait did not end at Close")
	}
}

// First reservations are served in the order they came.
func TestBudgetServesInOrder(t *testing.T) {
	budget := NewBudget(64 << 20)
	budget.SetWait(time.Minute)
	holder := &Conn{}
	if err := budget.reserve(holder, 64<<20, 0); err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 3)
	conns := []*Conn{{}, {}, {}}
	for i, c := range conns {
		go func() {
			if err := budget.reserve(c, 64<<20, 0); err != nil {
				t.Error(err)
				return
			}
			order <- i
		}()
		for budget.Waited.Load() != int64(i+1) {
			time.Sleep(time.Millisecond)
		}
	}
	budget.release(holder, 64<<20, 0)
	for want := range 3 {
		select {
		case got := <-order:
			if got != want {
				t.Fatalf("reader %d served before reader %d", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("reader %d not served", want)
		}
		budget.release(conns[want], 64<<20, 0)
	}
}
