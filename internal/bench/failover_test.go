package bench

import (
	"testing"
	"time"
)

// events builds writes at the given offsets in ms from t0; negative
// offsets in fails are failures.
func events(t0 time.Time, oks, fails []int) []WriteEvent {
	var out []WriteEvent
	for _, ms := range oks {
		out = append(out, WriteEvent{At: t0.Add(time.Duration(ms) * time.Millisecond), OK: true})
	}
	for _, ms := range fails {
		out = append(out, WriteEvent{At: t0.Add(time.Duration(ms) * time.Millisecond)})
	}
	return out
}

func TestFirstAckAfterOutage(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	// Acks before the kill, failures at 5 ms and 2100 ms, an ack at 40 ms
	// on the dying primary does not end the outage; 2900 ms does.
	ev := events(t0, []int{-50, -10, 40, 2900, 2950}, []int{5, 2100})
	got, ok := FirstAckAfterOutage(ev, t0)
	if !ok || got.Sub(t0) != 2900*time.Millisecond {
		t.Errorf("got %s %v", got.Sub(t0), ok)
	}
	// Held writes (no failure at all): the first ack after the kill.
	got, ok = FirstAckAfterOutage(events(t0, []int{-5, 2500, 2600}, nil), t0)
	if !ok || got.Sub(t0) != 2500*time.Millisecond {
		t.Errorf("held writes: %s %v", got.Sub(t0), ok)
	}
	if _, ok := FirstAckAfterOutage(events(t0, []int{-5}, []int{100}), t0); ok {
		t.Error("an outage that has not ended")
	}
}

func TestMaxAckGap(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	// Steady acks every 10 ms, a 120 ms hold from 100 ms, the request ran
	// from 90 to 260 ms; a longer gap before the request does not count.
	oks := []int{-400, -100}
	for ms := -90; ms <= 100; ms += 10 {
		oks = append(oks, ms)
	}
	for ms := 220; ms <= 400; ms += 10 {
		oks = append(oks, ms)
	}
	gap, ok := MaxAckGap(events(t0, oks, []int{150}), t0.Add(90*time.Millisecond), t0.Add(260*time.Millisecond))
	if !ok || gap != 120*time.Millisecond {
		t.Errorf("gap %s %v", gap, ok)
	}
	if _, ok := MaxAckGap(events(t0, []int{0, 10}, nil), t0.Add(5*time.Millisecond), t0.Add(50*time.Millisecond)); ok {
		t.Error("no ack after the request ended")
	}
}

func TestTimeline(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	ev := events(t0, []int{-1500, -950, -900, 0, 50, 99, 100, 2999, 3000}, []int{10, 20})
	tl := Timeline(ev, t0, -time.Second, 3*time.Second)
	if len(tl) != 40 || tl[0].Ms != -1000 || tl[39].Ms != 2900 {
		t.Fatalf("%d points from %d to %d", len(tl), tl[0].Ms, tl[len(tl)-1].Ms)
	}
	if tl[0].Acks != 1 || tl[1].Acks != 1 || tl[10].Acks != 3 || tl[10].Errors != 2 || tl[11].Acks != 1 || tl[39].Acks != 1 {
		t.Errorf("buckets %+v %+v %+v %+v %+v", tl[0], tl[1], tl[10], tl[11], tl[39])
	}
	if Timeline(ev, t0, time.Second, time.Second) != nil {
		t.Error("an empty window has points")
	}
}
