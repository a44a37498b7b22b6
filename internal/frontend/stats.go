package frontend

import (
	"sync"
	"sync/atomic"
	"time"
)

// Pin reasons: why a session keeps its server connection.
const (
	PinTempTable = iota
	PinGetLock
	PinLockTables
	PinFoundRows
	PinPrepare
	PinUserVar
	PinSqlLogBin
	PinXA
	PinCursor
	PinLongData
	PinTrxCharacteristics
	PinSessionStatus
	PinSequence
	PinRole
	PinHandler
	PinCall
	numPins
)

// PinNames names the pin reasons for metrics and session listings.
var PinNames = [numPins]string{"temporary_table", "get_lock", "lock_tables", "found_rows",
	"text_prepare", "user_variable", "sql_log_bin", "xa", "cursor", "long_data", "next_transaction",
	"session_status", "sequence", "role", "handler", "call"}

// Stats are the listener's counters, read by metrics.
type Stats struct {
	Connections  atomic.Int64
	AuthFailures atomic.Int64
	Queries      atomic.Int64
	ToWriter     atomic.Int64
	ToReader     atomic.Int64
	ReadRetries  atomic.Int64
	GTIDWaits    atomic.Int64
	GTIDFallback atomic.Int64
	GTIDKnown    atomic.Int64 // waits skipped: the monitor saw the replica past the write
	Errors       atomic.Int64
	Held         atomic.Int64 // statements that waited at a hold
	Rewrites     atomic.Int64 // statements a rule rewrote
	Blocked      atomic.Int64 // statements a rule refused
	Timeouts     atomic.Int64 // statements a rule's timeout killed
	CacheHits    atomic.Int64 // reads answered from the query cache
	LogDrops     atomic.Int64 // query log entries dropped (buffer full)
	Mirrored     atomic.Int64 // statements mirrored
	MirrorDrops  atomic.Int64 // mirrors dropped (queue full)
	MirrorErrors atomic.Int64 // mirrors that failed
	// The previous statement's connection (prev.go): soft holds taken,
	// ended by an idle client, statements that ran on the held connection,
	// statements sent with Vigil's values for ROW_COUNT() and the like,
	// diagnostics areas cleared before a statement read one.
	SoftHolds       atomic.Int64
	SoftHoldExpired atomic.Int64
	PrevReads       atomic.Int64
	SessionRewrites atomic.Int64
	DiagClears      atomic.Int64
	Panics          atomic.Int64 // sessions ended by a recovered panic
	PrepareRetries  atomic.Int64 // prepares retried on the writer after a replica lacked an object
	InsertIDFetches atomic.Int64 // LAST_INSERT_ID() asked after a statement that may set it unseen
	Pins            [numPins]atomic.Int64

	// Latency of statements by route, and statements and errors by server
	// (indexed like the pools) and by user.
	Latency       [numRoutes]Histogram
	RouteErrors   [numRoutes]atomic.Int64
	ServerQueries []atomic.Int64
	ServerErrors  []atomic.Int64
	users         sync.Map // user name -> *UserStats
}

func newStats(servers int) *Stats {
	return &Stats{ServerQueries: make([]atomic.Int64, servers), ServerErrors: make([]atomic.Int64, servers)}
}

// Routes of the latency histograms.
const (
	RouteWriter = iota
	RouteReader
	RouteGroup
	RouteCache
	RouteBlocked
	numRoutes
)

// RouteNames name the latency routes for metrics.
var RouteNames = [numRoutes]string{"writer", "reader", "group", "cache", "blocked"}

func routeIndex(hostgroup string) int {
	switch hostgroup {
	case "writer":
		return RouteWriter
	case "reader":
		return RouteReader
	case "cache":
		return RouteCache
	case "blocked", "refused":
		return RouteBlocked
	}
	return RouteGroup
}

// LatencyBounds are the upper bounds (seconds) of the latency buckets.
var LatencyBounds = [...]float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Histogram is a lock-free latency histogram (cumulated at scrape time).
type Histogram struct {
	Buckets [len(LatencyBounds) + 1]atomic.Uint64 // the last one is +Inf
	SumNs   atomic.Uint64
}

// Observe adds one duration.
func (h *Histogram) Observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(LatencyBounds) && s > LatencyBounds[i] {
		i++
	}
	h.Buckets[i].Add(1)
	h.SumNs.Add(uint64(d))
}

// UserStats count one user's statements.
type UserStats struct {
	Queries atomic.Int64
	Errors  atomic.Int64
}

// User returns the counters of a user, creating them.
func (s *Stats) User(name string) *UserStats {
	if u, ok := s.users.Load(name); ok {
		return u.(*UserStats)
	}
	u, _ := s.users.LoadOrStore(name, &UserStats{})
	return u.(*UserStats)
}

// EachUser calls f for every user's counters.
func (s *Stats) EachUser(f func(name string, u *UserStats)) {
	s.users.Range(func(k, v any) bool {
		f(k.(string), v.(*UserStats))
		return true
	})
}
