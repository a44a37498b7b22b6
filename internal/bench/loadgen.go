package bench

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// The Go load generator covers what sysbench 1.0 cannot do: a connection
// per event (it has no reconnect option) and thousands of idle
// connections next to a few busy ones. It reports like sysbench
// (SysbenchResult), so the summaries and checks treat both alike.

// LoadResult is what the Go load generator measured in one run.
type LoadResult struct {
	// Events are completed units of work (a connect-query-disconnect
	// cycle, or one query), Queries the statements they ran.
	Events, Queries int64
	Errors          int64
	FirstError      string
	Elapsed         time.Duration
	// Latencies of the completed events, in any order.
	Latencies []time.Duration
}

// NearestRank is the p-th percentile of sorted durations by the nearest
// rank method (the smallest value with at least p percent at or below
// it); 0 for none.
func NearestRank(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(n))) - 1
	return sorted[min(max(i, 0), n-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// over reports the end of a run: ctx is done or its deadline has passed.
// A dial cut short by the deadline can return before ctx says so, and its
// error is the run ending, not a failure.
func over(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && time.Until(d) < 5*time.Millisecond
}

// Sysbench renders the result as sysbench would have printed it: events
// are transactions, rates are per second of Elapsed. A run without a
// single completed event is not complete and carries its first error as
// a FATAL line.
func (r LoadResult) Sysbench() SysbenchResult {
	s := SysbenchResult{
		Queries: r.Queries, Transactions: r.Events, IgnoredErrors: r.Errors, FirstError: r.FirstError,
		TotalTime: r.Elapsed.Seconds(),
	}
	if secs := r.Elapsed.Seconds(); secs > 0 {
		s.QPS = float64(r.Queries) / secs
		s.TPS = float64(r.Events) / secs
	}
	if len(r.Latencies) > 0 {
		sorted := slices.Clone(r.Latencies)
		slices.Sort(sorted)
		var sum time.Duration
		for _, d := range sorted {
			sum += d
		}
		s.AvgMs = ms(sum / time.Duration(len(sorted)))
		s.MaxMs = ms(sorted[len(sorted)-1])
		s.P50Ms, s.P95Ms, s.P99Ms = ms(NearestRank(sorted, 50)), ms(NearestRank(sorted, 95)), ms(NearestRank(sorted, 99))
		s.Percentile, s.PercentileMs = 95, s.P95Ms
	}
	s.Complete = r.Events > 0
	if !s.Complete {
		msg := "no event completed"
		if r.FirstError != "" {
			msg += ": " + r.FirstError
		}
		s.Fatal = []string{msg}
	}
	return s
}

// recorder gathers the workers' counts; each worker keeps its own
// latencies and hands them over once, at its end.
type recorder struct {
	mu         sync.Mutex
	events     int64
	queries    int64
	errors     int64
	firstError string
	latencies  []time.Duration
}

func (r *recorder) fail(err error) {
	r.mu.Lock()
	r.errors++
	if r.firstError == "" {
		r.firstError = err.Error()
	}
	r.mu.Unlock()
}

func (r *recorder) add(events, queries int64, lat []time.Duration) {
	r.mu.Lock()
	r.events += events
	r.queries += queries
	r.latencies = append(r.latencies, lat...)
	r.mu.Unlock()
}

func (r *recorder) result(elapsed time.Duration) LoadResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return LoadResult{Events: r.events, Queries: r.queries, Errors: r.errors, FirstError: r.firstError,
		Elapsed: elapsed, Latencies: r.latencies}
}

// GenConn is where and as whom the Go load generator connects.
type GenConn struct {
	Addr, User, Password, DB string
	Tables, TableSize        int
}

// connector builds a go-sql-driver connector. InterpolateParams keeps a
// point select at one round trip, like a text-protocol client.
func (c GenConn) connector() (driver.Connector, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = c.User, c.Password, "tcp", c.Addr, c.DB
	cfg.InterpolateParams = true
	cfg.Timeout = 10 * time.Second
	cfg.ReadTimeout, cfg.WriteTimeout = 30*time.Second, 30*time.Second
	return mysql.NewConnector(cfg)
}

// queryAll runs a query on a driver connection and reads every row.
func queryAll(ctx context.Context, conn driver.Conn, query string, args ...driver.NamedValue) error {
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return errors.New("the driver connection cannot run queries")
	}
	rows, err := q.QueryContext(ctx, query, args)
	if err != nil {
		return err
	}
	dest := make([]driver.Value, len(rows.Columns()))
	for {
		if err := rows.Next(dest); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			rows.Close()
			return err
		}
	}
	return rows.Close()
}

// RunChurn runs threads workers for d; each event opens a connection,
// runs SELECT 1, reads the row and closes the connection (COM_QUIT).
// The latency of an event is the whole cycle.
func RunChurn(ctx context.Context, c GenConn, threads int, d time.Duration) LoadResult {
	conn, err := c.connector()
	if err != nil {
		return LoadResult{Errors: 1, FirstError: err.Error()}
	}
	var rec recorder
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	t0 := time.Now()
	var wg sync.WaitGroup
	for range threads {
		wg.Go(func() {
			var lat []time.Duration
			var n int64
			for ctx.Err() == nil {
				start := time.Now()
				if err := churnOnce(ctx, conn); err != nil {
					if over(ctx) {
						break // cut short by the end of the run
					}
					rec.fail(err)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				lat = append(lat, time.Since(start))
				n++
			}
			rec.add(n, n, lat)
		})
	}
	wg.Wait()
	return rec.result(time.Since(t0))
}

func churnOnce(ctx context.Context, c driver.Connector) error {
	conn, err := c.Connect(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if err := queryAll(ctx, conn, "SELECT 1"); err != nil {
		conn.Close()
		return fmt.Errorf("SELECT 1: %w", err)
	}
	return conn.Close()
}

// IdleSet is a set of open, unused connections.
type IdleSet struct {
	conns []driver.Conn
	// Errors counts connections that could not be opened.
	Errors     int64
	FirstError string
	Took       time.Duration
}

// OpenIdle opens n connections with parallel openers and keeps them.
func OpenIdle(ctx context.Context, c GenConn, n, parallel int) *IdleSet {
	s := &IdleSet{}
	conn, err := c.connector()
	if err != nil {
		s.Errors, s.FirstError = int64(n), err.Error()
		return s
	}
	t0 := time.Now()
	var mu sync.Mutex
	next := make(chan struct{})
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for range next {
				cn, err := conn.Connect(ctx)
				mu.Lock()
				if err != nil {
					s.Errors++
					if s.FirstError == "" {
						s.FirstError = err.Error()
					}
				} else {
					s.conns = append(s.conns, cn)
				}
				mu.Unlock()
			}
		})
	}
	for range n {
		if ctx.Err() != nil {
			break
		}
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	s.Took = time.Since(t0)
	return s
}

// Open is the number of connections held.
func (s *IdleSet) Open() int { return len(s.conns) }

// Close closes every connection, in parallel.
func (s *IdleSet) Close() {
	var wg sync.WaitGroup
	ch := make(chan driver.Conn)
	for range 32 {
		wg.Go(func() {
			for c := range ch {
				c.Close()
			}
		})
	}
	for _, c := range s.conns {
		ch <- c
	}
	close(ch)
	wg.Wait()
	s.conns = nil
}

// RunPointSelects runs threads workers for d, each on its own connection,
// issuing sysbench's point select (SELECT c FROM sbtestN WHERE id=?) on
// random tables and rows.
func RunPointSelects(ctx context.Context, c GenConn, threads int, d time.Duration) LoadResult {
	conn, err := c.connector()
	if err != nil {
		return LoadResult{Errors: 1, FirstError: err.Error()}
	}
	var rec recorder
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tables, size := max(c.Tables, 1), max(c.TableSize, 1)
	t0 := time.Now()
	var wg sync.WaitGroup
	for range threads {
		wg.Go(func() {
			var lat []time.Duration
			var n int64
			var cn driver.Conn
			defer func() {
				if cn != nil {
					cn.Close()
				}
				rec.add(n, n, lat)
			}()
			for ctx.Err() == nil {
				if cn == nil {
					var err error
					if cn, err = conn.Connect(ctx); err != nil {
						cn = nil
						if !over(ctx) {
							rec.fail(fmt.Errorf("connect: %w", err))
							time.Sleep(10 * time.Millisecond)
						}
						continue
					}
				}
				q := fmt.Sprintf("SELECT c FROM sbtest%d WHERE id=?", 1+rand.IntN(tables))
				start := time.Now()
				err := queryAll(ctx, cn, q, driver.NamedValue{Ordinal: 1, Value: int64(1 + rand.IntN(size))})
				if err != nil {
					if over(ctx) {
						break
					}
					rec.fail(err)
					cn.Close() // a fresh connection for the next try
					cn = nil
					continue
				}
				lat = append(lat, time.Since(start))
				n++
			}
		})
	}
	wg.Wait()
	return rec.result(time.Since(t0))
}
