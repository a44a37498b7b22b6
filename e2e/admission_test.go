package e2e

// Admission before login (issue 25 item 3): silent connections must not
// keep every login out.

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestHostileSilentFlood: 1,500 silent connections from 15 addresses
// (127.0.0.10 .. .24, 100 each: every address at
// max_unauthenticated_per_host, together 1.5x
// max_unauthenticated_connections; a third of each address's trickle
// their handshake response a byte every 2 s, slowloris) held for 30 s,
// every closed one reopened at once. Meanwhile a client from 127.0.0.200 logs in every
// 200 ms and must succeed every time, and one from an attacking address
// (127.0.0.10) every second must succeed within three tries. With the
// defaults (1000 / 100 / 10s); before issue 25 every login was refused
// with 1040 during such a flood.
func TestHostileSilentFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	env := newHostileEnv(t, 1, nil)
	sec := env.cfg.Security
	const addrs, perAddr = 15, 100
	if sec.MaxUnauthenticated >= addrs*perAddr || sec.MaxUnauthenticatedPerHost > perAddr {
		t.Fatalf("limits %d / %d: the test wants the defaults (1000 / 100)", sec.MaxUnauthenticated, sec.MaxUnauthenticatedPerHost)
	}
	baseLat := baseline(t, startLogins(env.addr, "127.0.0.200", "", 100*time.Millisecond, 1))
	evicted0 := env.mustMetric(t, `vigil_login_guard_total{action="evicted"}`)
	refused0 := env.mustMetric(t, `vigil_login_guard_total{action="refused"}`)

	// Every connection closed by Vigil comes back at once.
	f := newFloodAttack(env.addr)
	defer f.closeAll(t)
	start := time.Now()
	for i := range addrs * perAddr {
		f.wg.Add(1)
		kind := "stall"
		if i/addrs%3 == 2 {
			kind = "trickle" // bytes arriving do not protect a handshake
		}
		go f.worker(kind, fmt.Sprintf("127.0.0.%d", 10+i%addrs))
	}
	// The table fills (the logins are measured from then on).
	var full time.Duration
	Eventually(t, 15*time.Second, "the unauthenticated table full", func() error {
		v, err := env.metric("vigil_unauthenticated_connections")
		if err != nil {
			return err
		}
		if int(v) < sec.MaxUnauthenticated*95/100 {
			return fmt.Errorf("%v unauthenticated connections", v)
		}
		full = time.Since(start)
		return nil
	})
	legit := startLogins(env.addr, "127.0.0.200", "", 200*time.Millisecond, 1)
	sharer := startLogins(env.addr, "127.0.0.10", "", time.Second, 3)
	var gaugeMax, gaugeMin atomic.Int64
	gaugeMin.Store(1 << 30)
	gaugeStop, gaugeDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(gaugeDone)
		for {
			if v, err := env.metric("vigil_unauthenticated_connections"); err == nil {
				gaugeMax.Store(max(gaugeMax.Load(), int64(v)))
				gaugeMin.Store(min(gaugeMin.Load(), int64(v)))
			}
			select {
			case <-gaugeStop:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	time.Sleep(30*time.Second - time.Since(start))
	lat, errs := legit.stop()
	shLat, shErrs := sharer.stop()
	close(gaugeStop)
	<-gaugeDone
	attack := time.Since(start)
	f.closeAll(t)
	evicted := env.mustMetric(t, `vigil_login_guard_total{action="evicted"}`) - evicted0
	refused := env.mustMetric(t, `vigil_login_guard_total{action="refused"}`) - refused0

	logData, _ := os.ReadFile(env.v.logf)
	evictLines := strings.Count(string(logData), "closed the oldest connection that had not logged in")
	f.mu.Lock()
	refusedSeen, closed := 0, 0
	for _, n := range f.refused {
		refusedSeen += n
	}
	for _, l := range f.stalledLife {
		closed += len(l)
	}
	t.Logf("flood: %d workers from %d addresses for %s (table full after %s): %d dials, %d greetings, %d refused (1040), %d closed before and %d after the greeting; vigil_login_guard_total evicted +%.0f refused +%.0f; eviction log lines %d; unauthenticated %d..%d",
		addrs*perAddr, addrs, attack.Round(time.Millisecond), full.Round(time.Millisecond), f.dials, f.greetings, refusedSeen, f.evictedEarly, closed,
		evicted, refused, evictLines, gaugeMin.Load(), gaugeMax.Load())
	other := f.badFirst
	f.mu.Unlock()
	t.Logf("logins from 127.0.0.200 without the attack: %d, p50 %s p95 %s max %s",
		len(baseLat), ms(pct(baseLat, .5)), ms(pct(baseLat, .95)), ms(pct(baseLat, 1)))
	t.Logf("logins from 127.0.0.200 every 200ms under the flood: %d ok, %d failed, p50 %s p95 %s max %s",
		len(lat), len(errs), ms(pct(lat, .5)), ms(pct(lat, .95)), ms(pct(lat, 1)))
	t.Logf("logins from attacking 127.0.0.10 every 1s under the flood: %d of %d ok (%d retries), p50 %s p95 %s max %s",
		len(shLat), sharer.attempts, sharer.retries, ms(pct(shLat, .5)), ms(pct(shLat, .95)), ms(pct(shLat, 1)))

	if len(errs) > 0 {
		t.Errorf("%d of %d logins from 127.0.0.200 failed under the flood: %v", len(errs), legit.attempts, errs[:min(5, len(errs))])
	}
	// One login at a time: a slow machine (shared cores) makes fewer.
	if len(lat) < 50 {
		t.Errorf("only %d logins from 127.0.0.200 under the flood", len(lat))
	}
	// "Within a second or two" (issue 25); about 0.2 s on a quiet 2-core
	// machine (docs/security.md).
	if p := pct(lat, .95); p > 2*time.Second {
		t.Errorf("logins from 127.0.0.200 under the flood: p95 %s (limit 2s)", p)
	}
	if len(shErrs) > 0 {
		t.Errorf("%d of %d logins from attacking 127.0.0.10 failed after 3 tries: %v", len(shErrs), sharer.attempts, shErrs[:min(5, len(shErrs))])
	}
	if evicted == 0 {
		t.Errorf("vigil_login_guard_total{action=\"evicted\"} did not grow")
	}
	if g := gaugeMax.Load(); g > int64(sec.MaxUnauthenticated) {
		t.Errorf("vigil_unauthenticated_connections reached %d (max_unauthenticated_connections %d)", g, sec.MaxUnauthenticated)
	}
	if limit := int(time.Since(start)/time.Second) + 2; evictLines > limit {
		t.Errorf("%d eviction log lines in %s (at most one a second)", evictLines, time.Since(start).Round(time.Second))
	}
	if len(other) > 0 {
		t.Errorf("%d attacker connections got something else than a greeting or 1040: %v", len(other), other[:min(5, len(other))])
	}
}
