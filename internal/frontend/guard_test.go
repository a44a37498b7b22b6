package frontend

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestGuardAdmission(t *testing.T) {
	g := NewGuard(GuardOptions{MaxUnauthenticated: 3, MaxPerHost: 2}, nil)
	log := slog.New(slog.DiscardHandler)
	c1, c2, c3 := &closer{}, &closer{}, &closer{}
	k1, e1 := g.admit(log, "10.0.0.1", c1)
	_, e2 := g.admit(log, "10.0.0.1", c2)
	if e1 != nil || e2 != nil {
		t.Fatal(e1, e2)
	}
	// A third from one address makes room among its own: the oldest goes.
	k3, e3 := g.admit(log, "10.0.0.1", c3)
	if e3 != nil || !c1.closed.Load() || c2.closed.Load() {
		t.Fatalf("third from one address: %v, closed %v %v", e3, c1.closed.Load(), c2.closed.Load())
	}
	k1.release() // the evicted one's session ends: nothing more to release
	k4, e4 := g.admit(log, "10.0.0.2", &closer{})
	if e4 != nil || g.Unauthenticated() != 3 {
		t.Fatal(e4, g.Unauthenticated())
	}
	// Full: 10.0.0.1 holds the most, its oldest (c2) makes room.
	if _, e := g.admit(log, "10.0.0.3", &closer{}); e != nil || !c2.closed.Load() {
		t.Fatal("full table did not evict the biggest address's oldest:", e)
	}
	// Nothing evictable: every connection is checking with the servers.
	k3.stage(stageCheck)
	k4.stage(stageCheck)
	k6, e := g.admit(log, "10.0.0.4", &closer{}) // evicts 10.0.0.3's
	if e != nil {
		t.Fatal(e)
	}
	k6.stage(stageCheck)
	if _, e := g.admit(log, "10.0.0.5", &closer{}); e == nil || e.Code != 1040 {
		t.Fatalf("nothing evictable: %v", e)
	}
	k3.release()
	k3.release() // twice is once
	if g.Unauthenticated() != 2 {
		t.Fatalf("%d unauthenticated", g.Unauthenticated())
	}
	k4.release()
	k6.release()
	if g.Refused.Load() != 1 || g.Evicted.Load() != 3 || g.Unauthenticated() != 0 || len(g.table.hosts) != 0 {
		t.Fatalf("refused %d evicted %d", g.Refused.Load(), g.Evicted.Load())
	}
}

type closer struct{ closed atomic.Bool }

func (c *closer) Close() error { c.closed.Store(true); return nil }

func TestGuardThrottle(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	var events []string
	g := NewGuard(GuardOptions{Free: 3, FreePerHost: 10, Delay: time.Second, MaxDelay: 8 * time.Second, Window: time.Minute,
		BlockAfter: 8, BlockFor: 5 * time.Minute}, func(kind, host, user, _ string) { events = append(events, kind+" "+user+"@"+host) })
	g.now = func() time.Time { return now }
	var got []time.Duration
	for range 9 {
		got = append(got, g.failed("app", "10.0.0.9"))
		now = now.Add(time.Second)
	}
	want := []time.Duration{0, 0, 0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
	// Blocked after 8 failures: even the right password is refused.
	if !g.blocked("app", "10.0.0.9") {
		t.Fatal("not blocked")
	}
	// Another address and another user are not affected by the user's
	// record (the address's own count is 9 of 10 free).
	if g.blocked("app", "10.0.0.8") || g.failed("app", "10.0.0.8") != 0 || g.failed("other", "10.0.0.9") != 0 {
		t.Fatal("another source or user throttled")
	}
	// Spraying many users from one address: the address's record slows
	// it once past free_per_host.
	if d := g.failed("third", "10.0.0.9"); d == 0 {
		t.Fatal("the address's 11th failure is not slowed")
	}
	// The block ends; a success forgets the user's failures.
	now = now.Add(6 * time.Minute)
	if g.blocked("app", "10.0.0.9") {
		t.Fatal("block did not end")
	}
	g.succeeded("app", "10.0.0.9")
	if g.blocked("app", "10.0.0.9") {
		t.Fatal("blocked after a success")
	}
	if fmt.Sprint(events) != "[login_throttled app@10.0.0.9 login_blocked app@10.0.0.9 login_throttled @10.0.0.9]" {
		t.Fatalf("events %v", events)
	}
}

// TestGuardBounded: cycling through user names does not grow the guard
// past maxTracked records.
func TestGuardBounded(t *testing.T) {
	g := NewGuard(GuardOptions{Free: 1, FreePerHost: 1 << 30, Delay: time.Millisecond, MaxDelay: time.Millisecond, Window: time.Hour}, nil)
	for i := range maxTracked + 1000 {
		g.failed(fmt.Sprintf("u%d", i), "10.0.0.1")
	}
	if len(g.fails) > maxTracked {
		t.Fatalf("%d records", len(g.fails))
	}
}

// Admissions, stage changes and releases from many goroutines (run with
// -race): every slot comes back, and the bounds hold throughout.
func TestGuardAdmissionConcurrent(t *testing.T) {
	g := NewGuard(GuardOptions{MaxUnauthenticated: 40, MaxPerHost: 10}, nil)
	log := slog.New(slog.DiscardHandler)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				k, e := g.admit(log, fmt.Sprintf("10.0.0.%d", (w+i)%7), &closer{})
				if n := g.Unauthenticated(); n > 40 {
					t.Errorf("%d unauthenticated over 40", n)
				}
				if e != nil {
					continue
				}
				switch i % 3 {
				case 1:
					k.stage(stageWait)
				case 2:
					k.stage(stageCheck)
				}
				k.release()
			}
		}()
	}
	wg.Wait()
	if n := g.Unauthenticated(); n != 0 || len(g.table.hosts) != 0 {
		t.Fatalf("after every release: %d unauthenticated, %d addresses", n, len(g.table.hosts))
	}
}
