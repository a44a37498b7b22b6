package coord

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestLeaseRidesOverEtcdLeaderKills (issue 24, item 3): with three etcd
// members, the one that leads is killed 20 times (restarted and healthy
// again before the next kill); the instance's lease never stops surely
// holding (Valid sampled every 2 ms) through an election shorter than
// the bound it rides over (LeaseTiming.RideOver). A longer one (two
// members split their votes: another round of 1–2 election timeouts) may
// fence, as docs/ha.md says; it is logged. etcd runs with the sandbox's
// timing (--heartbeat-interval 50 --election-timeout 500 --pre-vote) and
// the instance with its lease_ttl 2s.
func TestLeaseRidesOverEtcdLeaderKills(t *testing.T) {
	rideOverLeaderKills(t, 50*time.Millisecond, 500*time.Millisecond, 2*time.Second, 20)
}

func rideOverLeaderKills(t *testing.T, heartbeat, election, ttl time.Duration, kills int) {
	ms := startEtcdCluster(t, 3, heartbeat, election)
	cli := testClient(t, ms)
	var eps []string
	for _, m := range ms {
		eps = append(eps, m.client)
	}
	co, err := New(Options{Endpoints: eps, Prefix: fmt.Sprintf("/vigil-test-%d/", time.Now().UnixNano()), Instance: "solo",
		LeaseTTL: ttl, ElectionTimeout: election}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	type attempt struct {
		sent time.Time
		took time.Duration
		err  error
	}
	var amu sync.Mutex
	var attempts []attempt
	co.onRenewal = func(sent time.Time, took time.Duration, err error) {
		amu.Lock()
		attempts = append(attempts, attempt{sent, took, err})
		amu.Unlock()
	}
	tm := LeaseTiming(co.Options().LeaseTTL, election)
	t.Logf("lease %s, etcd election timeout %s: renewal every %s, margin %s, rides over elections shorter than %s",
		tm.TTL, election, tm.RenewEvery, tm.Margin, tm.RideOver)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = co.Run(ctx) }()
	defer func() { cancel(); wg.Wait(); _ = co.Close() }()
	eventually(t, "lease held", 10*time.Second, co.Valid)

	// The sampler: the least validity left, every moment not valid, and
	// the longest time without a renewal answered (the deadline moving).
	var mu sync.Mutex
	minLeft := time.Duration(1<<63 - 1)
	var fenced []time.Time
	var gap time.Duration
	var gapStart time.Time
	lastUntil, lastMoved := co.ValidUntil(), time.Now()
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tk := time.NewTicker(2 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			now := time.Now()
			until := co.ValidUntil()
			left := until.Sub(now)
			valid := co.Valid()
			mu.Lock()
			if until.After(lastUntil) {
				lastUntil, lastMoved = until, now
			}
			if g := now.Sub(lastMoved); g > gap {
				gap, gapStart = g, lastMoved
			}
			if left < minLeft {
				minLeft = left
			}
			if !valid {
				fenced = append(fenced, now)
			}
			mu.Unlock()
		}
	}()

	var elections []time.Duration
	var fencedKills, longKills int
	for i := range kills {
		var leader *etcdMember
		eventually(t, "an etcd leader", 10*time.Second, func() bool { leader = etcdLeader(cli, ms, nil); return leader != nil })
		mu.Lock()
		nf0 := len(fenced)
		mu.Unlock()
		leader.kill()
		killed := time.Now()
		var next *etcdMember
		eventually(t, "a new etcd leader", 10*time.Second, func() bool { next = etcdLeader(cli, ms, leader); return next != nil })
		took := time.Since(killed)
		elections = append(elections, took)
		leader.start()
		leader.waitHealthy(cli, 30*time.Second)
		eventually(t, "the lease valid again", 10*time.Second, co.Valid)
		mu.Lock()
		nf, g, gs := len(fenced)-nf0, gap, gapStart
		gap = 0
		mu.Unlock()
		t.Logf("kill %d: %s led, %s elected %s later; longest without a renewal answered %s, from %s after the kill; not valid in %d samples",
			i+1, leader.name, next.name, took.Round(time.Millisecond), g.Round(time.Millisecond), gs.Sub(killed).Round(time.Millisecond), nf)
		long := took >= tm.RideOver
		if long {
			longKills++
		}
		if nf == 0 {
			continue
		}
		fencedKills++
		if long {
			t.Logf("kill %d: the election took %s, longer than the %s the lease rides over (documented): not valid for about %s",
				i+1, took.Round(time.Millisecond), tm.RideOver, time.Duration(nf)*2*time.Millisecond)
			continue
		}
		t.Errorf("kill %d: the lease stopped surely holding (%d samples, about %s) during an etcd election of %s, shorter than the %s it rides over",
			i+1, nf, time.Duration(nf)*2*time.Millisecond, took.Round(time.Millisecond), tm.RideOver)
		amu.Lock()
		for _, a := range attempts {
			if a.sent.After(gs.Add(-time.Second)) && a.sent.Before(gs.Add(g+time.Second)) {
				t.Logf("  renewal sent %s after the kill, answered in %s: %v", a.sent.Sub(killed).Round(time.Millisecond), a.took.Round(time.Millisecond), a.err)
			}
		}
		amu.Unlock()
		if dir := os.Getenv("VIGIL_TEST_ETCD_LOGS"); dir != "" {
			for _, m := range ms {
				b, _ := os.ReadFile(filepath.Join(m.dir, "etcd.log"))
				_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-kill%d.log", m.name, i+1)), b, 0o644)
			}
		}
	}
	close(stop)
	<-sampled
	slices.Sort(elections)
	t.Logf("%d leader kills: elections took %s (min) %s (median) %s (max), %d longer than the %s the lease rides over; least validity left %s; not valid after %d kills",
		kills, elections[0].Round(time.Millisecond), elections[len(elections)/2].Round(time.Millisecond),
		elections[len(elections)-1].Round(time.Millisecond), longKills, tm.RideOver, minLeft.Round(time.Millisecond), fencedKills)
}
