// Package qstats keeps statement statistics by digest: for each (digest,
// user, schema, hostgroup) the count, errors, rows, total/min/max time, a
// latency histogram and first/last seen. Memory is bounded by a maximum
// number of entries; when it is reached the least recently used entry of a
// small random sample is evicted (an approximate LRU that needs no list
// maintenance on the hot path) and the eviction is counted.
//
// Record is called once per statement by every session. The store is
// sharded by digest so sessions rarely contend; recording an entry that
// exists does not allocate.
package qstats

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-db/vigil/internal/sqlscan"
)

// Key identifies one row of statistics.
type Key struct {
	Digest uint64
	User   string
	Schema string
	// Hostgroup is where the statement went: writer, reader, a server
	// group, cache or blocked.
	Hostgroup string
}

// Histogram buckets: bucket i counts latencies up to bucketBound(i);
// bounds grow by √2 from 10 µs, so 48 buckets reach ~2.8 hours and the
// percentile error is at most ~19%.
const numBuckets = 48

var bounds = func() [numBuckets]float64 {
	var b [numBuckets]float64
	for i := range b {
		b[i] = 10e-6 * math.Pow(math.Sqrt2, float64(i))
	}
	return b
}()

func bucketOf(d time.Duration) int {
	s := d.Seconds()
	if s <= bounds[0] {
		return 0
	}
	// log_√2(s/10µs) = 2*log2(s/10µs)
	i := int(math.Ceil(2 * math.Log2(s/10e-6)))
	if i >= numBuckets {
		return numBuckets - 1
	}
	for i > 0 && s <= bounds[i-1] {
		i--
	}
	return i
}

type entry struct {
	key       Key
	text      string
	count     uint64
	errors    uint64
	rows      uint64
	total     time.Duration
	min, max  time.Duration
	first     time.Time
	last      time.Time
	histogram [numBuckets]uint64
}

const numShards = 32

type shard struct {
	mu sync.Mutex
	m  map[Key]*entry
}

// Store holds the statistics. The zero value is not usable: use New.
type Store struct {
	shards    [numShards]shard
	maxShard  atomic.Int64 // entries per shard
	evictions atomic.Uint64
}

// New returns a store that keeps at most maxEntries entries.
func New(maxEntries int) *Store {
	s := &Store{}
	for i := range s.shards {
		s.shards[i].m = map[Key]*entry{}
	}
	s.SetMaxEntries(maxEntries)
	return s
}

// SetMaxEntries changes the bound (hot reload); extra entries go as new
// ones arrive.
func (s *Store) SetMaxEntries(n int) {
	per := int64((n + numShards - 1) / numShards)
	if per < 1 {
		per = 1
	}
	s.maxShard.Store(per)
}

// maxText bounds the statement text masked and kept per digest.
const maxText = 64 << 10

// Record adds one execution that ended with error code errCode (0 for
// none). query is the statement's text, used only the first time a key is
// seen (to keep its masked text: no literal, and no name if the server
// could not parse it).
func (s *Store) Record(k Key, query []byte, d time.Duration, rows int64, errCode uint16, now time.Time) {
	failed := errCode != 0
	if k.Digest == 0 {
		return
	}
	sh := &s.shards[k.Digest%numShards]
	sh.mu.Lock()
	e := sh.m[k]
	if e == nil {
		if int64(len(sh.m)) >= s.maxShard.Load() {
			sh.evictLocked()
			s.evictions.Add(1)
		}
		// The text of a shape is its first statement's, up to maxText
		// bytes: a 64 MiB statement is not masked and kept whole.
		e = &entry{key: k, text: string(sqlscan.Mask(nil, query[:min(len(query), maxText)], sqlscan.ParseFailed(errCode))), min: d, first: now}
		sh.m[k] = e
	}
	e.count++
	if failed {
		e.errors++
	}
	if rows > 0 {
		e.rows += uint64(rows)
	}
	e.total += d
	e.min = min(e.min, d)
	e.max = max(e.max, d)
	e.last = now
	e.histogram[bucketOf(d)]++
	sh.mu.Unlock()
}

// evictLocked removes the least recently seen of a few entries (map
// iteration order is random, so this samples).
func (sh *shard) evictLocked() {
	var victim *entry
	n := 0
	for _, e := range sh.m {
		if victim == nil || e.last.Before(victim.last) {
			victim = e
		}
		if n++; n == 8 {
			break
		}
	}
	if victim != nil {
		delete(sh.m, victim.key)
	}
}

// Evictions is the number of entries evicted to stay within the bound.
func (s *Store) Evictions() uint64 { return s.evictions.Load() }

// Len is the number of entries.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// Reset forgets every entry.
func (s *Store) Reset() {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		clear(sh.m)
		sh.mu.Unlock()
	}
}

// Row is one entry as listings show it. Times are in microseconds.
type Row struct {
	Digest    string    `json:"digest"`
	Text      string    `json:"digest_text"`
	User      string    `json:"user,omitempty"`
	Schema    string    `json:"schema,omitempty"`
	Hostgroup string    `json:"hostgroup,omitempty"`
	Count     uint64    `json:"count"`
	Errors    uint64    `json:"errors"`
	Rows      uint64    `json:"rows"`
	TotalUs   int64     `json:"total_us"`
	MinUs     int64     `json:"min_us"`
	MaxUs     int64     `json:"max_us"`
	AvgUs     int64     `json:"avg_us"`
	P50Us     int64     `json:"p50_us"`
	P95Us     int64     `json:"p95_us"`
	P99Us     int64     `json:"p99_us"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`

	hist [numBuckets]uint64
}

// Query selects and orders rows.
type Query struct {
	// ByDigest sums the rows of each digest over users, schemas and
	// hostgroups.
	ByDigest bool
	// Sort is count, total (default), errors, rows, max or p99.
	Sort  string
	Limit int
	// Digest, User, Schema filter when set.
	Digest, User, Schema string
}

// Rows returns the statistics.
func (s *Store) Rows(q Query) []Row {
	var rows []Row
	idx := map[uint64]int{}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, e := range sh.m {
			if (q.User != "" && e.key.User != q.User) || (q.Schema != "" && e.key.Schema != q.Schema) ||
				(q.Digest != "" && FormatDigest(e.key.Digest) != q.Digest) {
				continue
			}
			r := Row{Digest: FormatDigest(e.key.Digest), Text: e.text, User: e.key.User, Schema: e.key.Schema, Hostgroup: e.key.Hostgroup,
				Count: e.count, Errors: e.errors, Rows: e.rows, TotalUs: e.total.Microseconds(),
				MinUs: e.min.Microseconds(), MaxUs: e.max.Microseconds(), FirstSeen: e.first, LastSeen: e.last, hist: e.histogram}
			if !q.ByDigest {
				rows = append(rows, r)
				continue
			}
			j, ok := idx[e.key.Digest]
			if !ok {
				r.User, r.Schema, r.Hostgroup = "", "", ""
				idx[e.key.Digest] = len(rows)
				rows = append(rows, r)
				continue
			}
			a := &rows[j]
			a.Count += r.Count
			a.Errors += r.Errors
			a.Rows += r.Rows
			a.TotalUs += r.TotalUs
			a.MinUs = min(a.MinUs, r.MinUs)
			a.MaxUs = max(a.MaxUs, r.MaxUs)
			if r.FirstSeen.Before(a.FirstSeen) {
				a.FirstSeen = r.FirstSeen
			}
			if r.LastSeen.After(a.LastSeen) {
				a.LastSeen = r.LastSeen
			}
			for b := range a.hist {
				a.hist[b] += r.hist[b]
			}
		}
		sh.mu.Unlock()
	}
	for i := range rows {
		r := &rows[i]
		if r.Count > 0 {
			r.AvgUs = r.TotalUs / int64(r.Count)
		}
		r.P50Us = percentile(&r.hist, r.Count, 0.50, r.MaxUs)
		r.P95Us = percentile(&r.hist, r.Count, 0.95, r.MaxUs)
		r.P99Us = percentile(&r.hist, r.Count, 0.99, r.MaxUs)
	}
	key := func(r *Row) int64 {
		switch q.Sort {
		case "count":
			return int64(r.Count)
		case "errors":
			return int64(r.Errors)
		case "rows":
			return int64(r.Rows)
		case "max":
			return r.MaxUs
		case "p99":
			return r.P99Us
		}
		return r.TotalUs
	}
	slices.SortFunc(rows, func(a, b Row) int {
		ka, kb := key(&a), key(&b)
		switch {
		case ka > kb:
			return -1
		case ka < kb:
			return 1
		}
		if a.Digest != b.Digest {
			if a.Digest < b.Digest {
				return -1
			}
			return 1
		}
		return 0
	})
	if q.Limit > 0 && len(rows) > q.Limit {
		rows = rows[:q.Limit]
	}
	return rows
}

// percentile returns the upper bound of the bucket holding quantile p, in
// microseconds, capped by the maximum seen.
func percentile(h *[numBuckets]uint64, count uint64, p float64, maxUs int64) int64 {
	if count == 0 {
		return 0
	}
	want := uint64(math.Ceil(p * float64(count)))
	var seen uint64
	for i, n := range h {
		seen += n
		if seen >= want {
			us := int64(bounds[i] * 1e6)
			return min(us, maxUs)
		}
	}
	return maxUs
}

// FormatDigest writes a digest the way listings and logs show it.
func FormatDigest(d uint64) string {
	const hex = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = hex[d&15]
		d >>= 4
	}
	return string(b[:])
}
