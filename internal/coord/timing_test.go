package coord

import (
	"strings"
	"testing"
	"time"
)

func TestLeaseTiming(t *testing.T) {
	for _, c := range []struct {
		ttl, election, renew, margin, rideOver, minTTL time.Duration
		ok                                             bool
	}{
		{4 * time.Second, time.Second, 250 * time.Millisecond, 800 * time.Millisecond, 2750 * time.Millisecond, 4 * time.Second, true},
		{2 * time.Second, 500 * time.Millisecond, 125 * time.Millisecond, 400 * time.Millisecond, 1375 * time.Millisecond, 2 * time.Second, true},
		{2 * time.Second, time.Second, 250 * time.Millisecond, 400 * time.Millisecond, 1150 * time.Millisecond, 4 * time.Second, false},
		{3 * time.Second, time.Second, 250 * time.Millisecond, 600 * time.Millisecond, 1950 * time.Millisecond, 4 * time.Second, false},
		// 1.5s rounds up to 2s, as etcd counts whole seconds.
		{1500 * time.Millisecond, 200 * time.Millisecond, 50 * time.Millisecond, 400 * time.Millisecond, 1510 * time.Millisecond, 2 * time.Second, true},
	} {
		tm := LeaseTiming(c.ttl, c.election)
		if tm.RenewEvery != c.renew || tm.Margin != c.margin || tm.RideOver != c.rideOver || MinLeaseTTL(c.election) != c.minTTL {
			t.Errorf("LeaseTiming(%s, %s) = %+v, MinLeaseTTL %s", c.ttl, c.election, tm, MinLeaseTTL(c.election))
		}
		if tm.Attempt != c.election || time.Duration(tm.MaxInFlight)*tm.RenewEvery <= tm.Attempt {
			t.Errorf("LeaseTiming(%s, %s): attempts %s, %d in flight", c.ttl, c.election, tm.Attempt, tm.MaxInFlight)
		}
		err := CheckTiming(c.ttl, c.election)
		if (err == nil) != c.ok {
			t.Errorf("CheckTiming(%s, %s) = %v", c.ttl, c.election, err)
		}
		if err != nil && !strings.Contains(err.Error(), "use lease_ttl "+c.minTTL.String()) {
			t.Errorf("CheckTiming(%s, %s) does not say what TTL is enough: %v", c.ttl, c.election, err)
		}
	}
	if o := (Options{}).WithDefaults(); o.ElectionTimeout != time.Second || o.LeaseTTL != 4*time.Second {
		t.Errorf("defaults: election timeout %s, lease %s", o.ElectionTimeout, o.LeaseTTL)
	}
}
