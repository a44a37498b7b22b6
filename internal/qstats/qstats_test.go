package qstats

import (
	"fmt"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/sqlscan"
)

func rec(s *Store, user, q string, d time.Duration, rows int64, failed bool, now time.Time) {
	var code uint16
	if failed {
		code = 1146
	}
	s.Record(Key{Digest: sqlscan.Scan([]byte(q)).Digest, User: user, Schema: "app", Hostgroup: "reader"}, []byte(q), d, rows, code, now)
}

func TestRecordAndRows(t *testing.T) {
	s := New(100)
	t0 := time.Unix(1000, 0)
	for i := range 100 {
		rec(s, "a", fmt.Sprintf("SELECT c FROM t WHERE id = %d", i), time.Duration(i+1)*time.Millisecond, 1, i%10 == 0, t0.Add(time.Duration(i)*time.Second))
	}
	rec(s, "b", "SELECT c FROM t WHERE id = 7", 500*time.Millisecond, 1, false, t0)
	rec(s, "a", "UPDATE t SET c = 'x' WHERE id = 1", time.Millisecond, 1, false, t0)

	rows := s.Rows(Query{})
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3: %+v", len(rows), rows)
	}
	top := rows[0] // sorted by total time
	if top.Text != "SELECT c FROM t WHERE id = ?" || top.User != "a" || top.Count != 100 || top.Errors != 10 || top.Rows != 100 {
		t.Errorf("top row %+v", top)
	}
	if top.MinUs != 1000 || top.MaxUs != 100000 || top.AvgUs != 50500 {
		t.Errorf("min/max/avg %d %d %d", top.MinUs, top.MaxUs, top.AvgUs)
	}
	// Percentiles are bucket bounds: within a factor √2 of the truth.
	for _, c := range []struct {
		got, want int64
	}{{top.P50Us, 50000}, {top.P95Us, 95000}, {top.P99Us, 99000}} {
		if float64(c.got) < float64(c.want)/1.01 || float64(c.got) > float64(c.want)*1.42 {
			t.Errorf("percentile %d, want about %d", c.got, c.want)
		}
	}
	if !top.FirstSeen.Equal(t0) || !top.LastSeen.Equal(t0.Add(99*time.Second)) {
		t.Errorf("first/last %v %v", top.FirstSeen, top.LastSeen)
	}

	by := s.Rows(Query{ByDigest: true, Sort: "count"})
	if len(by) != 2 || by[0].Count != 101 || by[0].User != "" || by[0].MaxUs != 500000 {
		t.Errorf("by digest %+v", by)
	}
	if got := s.Rows(Query{User: "b"}); len(got) != 1 || got[0].Count != 1 {
		t.Errorf("filter by user: %+v", got)
	}
}

func TestBoundedWithEviction(t *testing.T) {
	s := New(64)
	now := time.Unix(0, 0)
	for i := range 1000 {
		now = now.Add(time.Millisecond)
		rec(s, "u", fmt.Sprintf("SELECT c%d FROM t", i), time.Millisecond, 0, false, now)
	}
	if n := s.Len(); n > 64 {
		t.Errorf("%d entries, bound 64", n)
	}
	if s.Evictions() < 1000-64 {
		t.Errorf("evictions %d", s.Evictions())
	}
	// The newest survive.
	if got := s.Rows(Query{Digest: FormatDigest(sqlscan.Scan([]byte("SELECT c999 FROM t")).Digest)}); len(got) != 1 {
		t.Errorf("newest entry evicted")
	}
}

func TestBucketOf(t *testing.T) {
	for _, d := range []time.Duration{0, time.Microsecond, 10 * time.Microsecond, 11 * time.Microsecond, time.Millisecond, time.Second, 100 * time.Hour} {
		b := bucketOf(d)
		if d.Seconds() > bounds[b] && b != numBuckets-1 {
			t.Errorf("%v in bucket %d bound %v", d, b, bounds[b])
		}
		if b > 0 && d.Seconds() <= bounds[b-1] {
			t.Errorf("%v in bucket %d, fits %d", d, b, b-1)
		}
	}
}

func BenchmarkRecord(b *testing.B) {
	s := New(10000)
	q := []byte("SELECT c FROM sbtest1 WHERE id=5000")
	k := Key{Digest: sqlscan.Scan(q).Digest, User: "sbtest", Schema: "sbtest", Hostgroup: "reader"}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		s.Record(k, q, 120*time.Microsecond, 1, 0, now)
	}
}
