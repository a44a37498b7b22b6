// Package qlog owns the query log: one JSON object per client statement
// and per authentication attempt, shipped to a rotating file, standard
// output and Kafka.
//
// # Design
//
// The data path — one goroutine per client session, calling [Logger.Log]
// for every statement — must never wait for a sink. Log copies the entry
// into a bounded ring of preallocated slots (a lock-free multi-producer,
// single-consumer queue; each slot keeps its statement buffer, so a
// steady stream of ordinary statements does not allocate) and returns. It
// never blocks: when the ring is full, or the logger is closed, the entry
// is dropped and counted in [Stats].Dropped, and Log returns false.
// Statements longer than Config.MaxStatement are truncated, and large
// statements held in the ring share a byte budget, so that a burst of
// multi-megabyte statements cannot make the ring hold gigabytes. The ring
// costs about 240 bytes per entry of Config.Buffer (15 MB for the default
// 65536), plus the statement buffers of its slots (at most 1 KiB each).
//
// One writer goroutine ([Logger.Run]) drains the ring in batches. It is
// the only place where statements are masked (Config.Statements "masked",
// the default: the text is replaced by its normalised form from
// [sqlscan.Mask], with every literal written as "?", so a password in a
// string literal never reaches a sink; an identifier left open at the end
// is written "?", and so is every name of a statement that failed with a
// syntax error, where a misplaced quote can leave a password outside any
// string. Error messages are masked too, in query and auth entries,
// because servers echo statement text in them: quoted strings and numbers
// become "?", the raw text a syntax error quotes ("near '...' at line 1")
// becomes one "?", and so does everything after a quote that is never
// closed; backquoted names stay) and encoded as JSON, by a small
// append-based encoder. Each encoded batch is then offered to every sink,
// and each sink has its own goroutine and its own bounded queue of
// batches: a sink that is slow or stuck (a full disk, a blocked pipe on
// standard output, unreachable Kafka brokers) drops batches and counts
// them as its own drops, while the other sinks and the data path go on.
//
// Accounting: Logged counts entries accepted by Log, Dropped those it
// refused. Per sink, Written counts entries handed over (flushed to the
// file or standard output, acknowledged by Kafka), Dropped entries the sink
// had no room for (its queue was full, or the Kafka client's buffer was),
// and Errors entries lost to an error (a failed write, a failed delivery).
// Warnings about a failing sink are logged at most once per 10 s per sink.
//
// Shutdown ([Logger.Close], or the end of Run's context) stops accepting
// entries, drains the ring into the sinks, flushes them and closes them.
// It is bounded: Kafka gets about 2 s to deliver what it buffers, and a
// sink whose writer is stuck is abandoned after a few seconds.
//
// # Output
//
// One object per line, for example
//
//	{"time":"2026-11-22T21:00:00.123456Z","type":"query","session":12,"cluster":"c1","user":"app","client":"127.0.0.1:5555","schema":"sbtest","digest":"a1b2c3d4e5f60708","statement":"SELECT c FROM sbtest1 WHERE id = ?","server":"node2","duration_us":123,"rows":1,"error":0}
//	{"time":"2026-11-22T21:00:00.200000Z","type":"auth","session":3,"cluster":"c1","user":"app","client":"127.0.0.1:5556","success":false,"error":1045,"message":"Access denied"}
//
// Query entries carry "message", "rule", "cached":true and
// "truncated":true only when set, and "digest" only when it is not 0. Auth
// entries carry "schema" and "message" only when set. Times are UTC with
// microseconds; the digest is 16 lowercase hex digits.
package qlog
