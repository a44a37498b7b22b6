package bench

import (
	"strings"
	"testing"
	"time"
)

func TestNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for _, tt := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {95, 95 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := NearestRank(d, tt.p); got != tt.want {
			t.Errorf("p%v = %s, want %s", tt.p, got, tt.want)
		}
	}
	if NearestRank(nil, 50) != 0 {
		t.Error("percentile of nothing")
	}
	if got := NearestRank([]time.Duration{7}, 99); got != 7 {
		t.Errorf("one sample: %s", got)
	}
}

func TestLoadResultSysbench(t *testing.T) {
	lat := []time.Duration{4 * time.Millisecond, time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}
	r := LoadResult{Events: 4000, Queries: 4000, Errors: 2, FirstError: "connect: refused", Elapsed: 2 * time.Second, Latencies: lat}
	s := r.Sysbench()
	if s.QPS != 2000 || s.TPS != 2000 || s.Queries != 4000 || s.IgnoredErrors != 2 || s.Errors() != 2 {
		t.Errorf("rates %+v", s)
	}
	if s.P50Ms != 2 || s.P95Ms != 4 || s.P99Ms != 4 || s.AvgMs != 2.5 || s.MaxMs != 4 || s.P95() != 4 {
		t.Errorf("latencies %+v", s)
	}
	if !s.Complete || s.Failed() || s.FirstError != "connect: refused" {
		t.Errorf("complete %v failed %v", s.Complete, s.Failed())
	}
	// Latencies are not reordered in place.
	if lat[0] != 4*time.Millisecond {
		t.Error("Sysbench sorted the caller's latencies")
	}
	dead := LoadResult{Errors: 64, FirstError: "dial tcp: connection refused", Elapsed: time.Second}.Sysbench()
	if !dead.Failed() || dead.Complete || len(dead.Fatal) != 1 || !strings.Contains(dead.Fatal[0], "connection refused") {
		t.Errorf("a run without events: %+v", dead)
	}
}

func TestParseLimits(t *testing.T) {
	data := `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            20000                20000                files
Max locked memory         8388608              8388608              bytes
`
	if got := ParseLimits(data); got != 20000 {
		t.Errorf("got %d", got)
	}
	if got := ParseLimits("Max open files            unlimited            unlimited            files\n"); got != 0 {
		t.Errorf("unlimited: %d", got)
	}
	if ParseLimits("") != 0 {
		t.Error("empty")
	}
}
