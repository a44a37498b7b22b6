package frontend

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// attackTable fills a table of 1,000 (100 per address) from 15 addresses
// that reopen every evicted connection, rounds times over.
func attackTable(t *testing.T, rounds int) (*admitTable, map[string][]*admission) {
	t.Helper()
	tb := newAdmitTable()
	held := map[string][]*admission{}
	for r := range rounds {
		for i := range 15 {
			host := fmt.Sprintf("10.0.0.%d", i+1)
			a, v, why := tb.admit(host, nil, 1000, 100)
			if why != admitted {
				t.Fatalf("round %d: attacker refused (%d) though every connection is evictable", r, why)
			}
			held[host] = append(held[host], a)
			if v != nil {
				tb.release(v) // its session ends
			}
		}
	}
	checkTable(t, tb, 1000)
	return tb, held
}

func TestAdmitFairShareUnderSilentFlood(t *testing.T) {
	tb, _ := attackTable(t, 100) // 1,500 connections tried
	for name, h := range tb.hosts {
		// 1,000 / 15 = 66.7: every address holds its share.
		if h.charged < 66 || h.charged > 67 {
			t.Errorf("%s holds %d", name, h.charged)
		}
	}
	// A client from another address gets in and survives a long flood
	// of reconnections: its address holds one, the attackers 66.
	legit, v, why := tb.admit("10.9.9.9", nil, 1000, 100)
	if why != admitted || v == nil || v.host.name == "10.9.9.9" {
		t.Fatalf("legit: %d, victim %v", why, v)
	}
	tb.release(v)
	for r := range 10_000 {
		host := fmt.Sprintf("10.0.0.%d", r%15+1)
		_, v, _ := tb.admit(host, nil, 1000, 100)
		if v == legit {
			t.Fatalf("legit evicted after %d attacker connections", r)
		}
		tb.release(v)
	}
	checkTable(t, tb, 1000)
	// From an attacking address at its share: the attacker's own oldest
	// makes room, and the client outlives all but the last 60 of that
	// address's reconnections.
	mine, v, why := tb.admit("10.0.0.3", nil, 1000, 100)
	if why != admitted || v == nil || v.host.name != "10.0.0.3" {
		t.Fatalf("from an attacking address: %d, victim %v", why, v)
	}
	tb.release(v)
	for r := range 60 {
		_, v, _ := tb.admit("10.0.0.3", nil, 1000, 100)
		if v == mine {
			t.Fatalf("evicted after %d connections of its address", r)
		}
		tb.release(v)
	}
}

func TestAdmitPerHostMakesRoomAmongItsOwn(t *testing.T) {
	tb := newAdmitTable()
	var first *admission
	for i := range 100 {
		a, _, _ := tb.admit("10.0.0.1", nil, 1000, 100)
		if i == 0 {
			first = a
		}
	}
	other, _, _ := tb.admit("10.0.0.2", nil, 1000, 100)
	a, v, why := tb.admit("10.0.0.1", nil, 1000, 100)
	if why != admitted || v != first || tb.charged("10.0.0.1") != 100 {
		t.Fatalf("over the share: %d, victim %v, charged %d", why, v, tb.charged("10.0.0.1"))
	}
	// Its connections all past the handshake: refused, others untouched.
	for _, h := range tb.hosts["10.0.0.1"].hand.all() {
		tb.setStage(h, stageCheck)
	}
	if _, _, why := tb.admit("10.0.0.1", nil, 1000, 100); why != refusedPerHost {
		t.Fatalf("nothing of its own evictable: %d", why)
	}
	if other.stage != stageHandshake || a.stage != stageCheck {
		t.Fatal("stages", other.stage, a.stage)
	}
	checkTable(t, tb, 1000)
}

// A reload that lowers the bounds below what the table holds: each new
// connection evicts one, the table never grows, and it shrinks as
// connections leave.
func TestAdmitLoweredBoundsDoNotGrow(t *testing.T) {
	tb := newAdmitTable()
	var open []*admission
	for range 10 {
		a, _, _ := tb.admit("10.0.0.1", nil, 100, 100)
		open = append(open, a)
	}
	a, v, why := tb.admit("10.0.0.1", nil, 5, 5)
	if why != admitted || v != open[0] || tb.live != 10 || tb.charged("10.0.0.1") != 10 {
		t.Fatalf("lowered: %d, victim %v, live %d", why, v, tb.live)
	}
	for _, o := range append(open[1:], a) {
		tb.release(o)
	}
	checkTable(t, tb, 5)
}

// A failed login waiting out its throttle delay can be evicted from a
// full table, but its address stays charged until the wait ends: the
// throttle's bound of guesses per address holds.
func TestAdmitEvictedWaitKeepsItsCharge(t *testing.T) {
	tb := newAdmitTable()
	var waits []*admission
	for range 3 {
		a, _, _ := tb.admit("10.0.0.1", nil, 4, 3)
		tb.setStage(a, stageWait)
		waits = append(waits, a)
	}
	if _, _, why := tb.admit("10.0.0.1", nil, 4, 3); why != refusedPerHost {
		t.Fatalf("waits do not make room for their own address: %d", why)
	}
	b, _, _ := tb.admit("10.0.0.2", nil, 4, 3)
	_, v, why := tb.admit("10.0.0.3", nil, 4, 3)
	if why != admitted || v != waits[0] || v.stage != stageEvictedWait {
		t.Fatalf("full: %d, victim %v", why, v)
	}
	if tb.live != 4 || tb.charged("10.0.0.1") != 3 {
		t.Fatalf("live %d, charged %d", tb.live, tb.charged("10.0.0.1"))
	}
	if _, _, why := tb.admit("10.0.0.1", nil, 5, 3); why != refusedPerHost {
		t.Fatalf("evicted wait still charged: %d", why)
	}
	tb.release(waits[0]) // its wait ended
	tb.release(waits[0])
	if tb.live != 4 || tb.charged("10.0.0.1") != 2 {
		t.Fatalf("after the wait: live %d, charged %d", tb.live, tb.charged("10.0.0.1"))
	}
	tb.setStage(waits[0], stageCheck) // released: no effect
	tb.release(b)
	checkTable(t, tb, 4)
}

// Any sequence of admissions, stage changes and releases keeps the
// counts consistent and within the bounds.
func TestAdmitRandomKeepsCounts(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tb := newAdmitTable()
	var open []*admission
	for range 50_000 {
		switch n := r.IntN(10); {
		case n < 6 || len(open) == 0:
			a, v, why := tb.admit(fmt.Sprintf("h%d", r.IntN(20)), nil, 50, 8)
			if why == admitted {
				open = append(open, a)
			}
			if v != nil && v.stage == stageGone && v.host.charged > 8 {
				t.Fatal("evicted but over the share")
			}
		case n < 8:
			tb.setStage(open[r.IntN(len(open))], admitStage(r.IntN(3)))
		default:
			i := r.IntN(len(open))
			tb.release(open[i])
			open = append(open[:i], open[i+1:]...)
		}
		checkTable(t, tb, 50)
	}
	for _, a := range open {
		tb.release(a)
	}
	if tb.live != 0 || len(tb.hosts) != 0 {
		t.Fatalf("all released: live %d, %d hosts", tb.live, len(tb.hosts))
	}
}

func (l *admitList) all() []*admission {
	var out []*admission
	for a := l.head; a != nil; a = a.next {
		out = append(out, a)
	}
	return out
}

// checkTable verifies the table's counts against its lists.
func checkTable(t *testing.T, tb *admitTable, maxTotal int) {
	t.Helper()
	if tb.live > maxTotal {
		t.Fatalf("%d live over %d", tb.live, maxTotal)
	}
	listed := 0
	for name, h := range tb.hosts {
		if h.name != name || h.charged <= 0 {
			t.Fatalf("host %s: name %s, charged %d", name, h.name, h.charged)
		}
		for i, l := range []*admitList{&h.hand, &h.wait} {
			all := l.all()
			if len(all) != l.n {
				t.Fatalf("host %s: list of %d counts %d", name, len(all), l.n)
			}
			for j, a := range all {
				if a.host != h || a.stage != admitStage(i) {
					t.Fatalf("host %s: %v in the wrong list", name, a)
				}
				// Handshakes are in admission order (waits in the order
				// their waits began).
				if i == 0 && j > 0 && all[j-1].seq >= a.seq {
					t.Fatalf("host %s: handshakes out of order", name)
				}
			}
		}
		listed += h.evictable()
		if h.evictable() > h.charged {
			t.Fatalf("host %s: %d evictable, %d charged", name, h.evictable(), h.charged)
		}
	}
	if listed > tb.live {
		t.Fatalf("%d listed, %d live", listed, tb.live)
	}
}
