package frontend

import "sync/atomic"

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
	numPins
)

// PinNames names the pin reasons for metrics and session listings.
var PinNames = [numPins]string{"temporary_table", "get_lock", "lock_tables", "found_rows",
	"text_prepare", "user_variable", "sql_log_bin", "xa", "cursor", "long_data", "next_transaction"}

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
	Pins         [numPins]atomic.Int64
}

func newStats() *Stats { return &Stats{} }
