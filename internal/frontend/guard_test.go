package frontend

import (
	"fmt"
	"testing"
	"time"
)

func TestGuardAdmission(t *testing.T) {
	g := NewGuard(GuardOptions{MaxUnauthenticated: 3, MaxPerHost: 2}, nil)
	r1, e1 := g.admit("10.0.0.1")
	_, e2 := g.admit("10.0.0.1")
	if e1 != nil || e2 != nil {
		t.Fatal(e1, e2)
	}
	if _, e := g.admit("10.0.0.1"); e == nil || e.Code != 1040 {
		t.Fatalf("third from one address: %v", e)
	}
	r4, e4 := g.admit("10.0.0.2")
	if e4 != nil {
		t.Fatal(e4)
	}
	if _, e := g.admit("10.0.0.3"); e == nil {
		t.Fatal("over the total")
	}
	r1()
	r1() // twice is once
	if g.Unauthenticated() != 2 {
		t.Fatalf("%d unauthenticated", g.Unauthenticated())
	}
	if _, e := g.admit("10.0.0.1"); e != nil {
		t.Fatal("released slot not reused:", e)
	}
	r4()
	if g.Refused.Load() != 2 {
		t.Fatalf("refused %d", g.Refused.Load())
	}
}

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
