package bench

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

// The donor's read load: point selects on a 10,000-row table (in the
// buffer pool, so the load measures CPU and I/O contention, not misses),
// a fixed number of threads with a connection each, straight to the
// donor (not through Vigil). A sampler records the completed count every
// 100 ms; windows are cut out of the samples afterwards (QPSBetween).

type readLoad struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	db     *sql.DB
	count  atomic.Int64
	errs   atomic.Int64

	mu      sync.Mutex
	samples []QPSSample
}

func startReadLoad(ctx context.Context, addr, user, pass string, threads int) (*readLoad, error) {
	mc := mysql.NewConfig()
	mc.User, mc.Passwd, mc.Net, mc.Addr, mc.DBName = user, pass, "tcp", addr, cloneSchema
	mc.Timeout, mc.ReadTimeout, mc.WriteTimeout = 2*time.Second, 10*time.Second, 10*time.Second
	db, err := sql.Open("mysql", mc.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(threads)
	db.SetMaxIdleConns(threads)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("read load to %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &readLoad{cancel: cancel, db: db}
	for range threads {
		l.wg.Go(func() {
			var c string
			for ctx.Err() == nil {
				err := db.QueryRowContext(ctx, "SELECT c FROM point WHERE id = ?", 1+rand.IntN(10000)).Scan(&c)
				switch {
				case ctx.Err() != nil:
					return
				case err != nil:
					l.errs.Add(1)
					sleepCtx(ctx, 10*time.Millisecond)
				default:
					l.count.Add(1)
				}
			}
		})
	}
	l.wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			l.sample()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return l, nil
}

func (l *readLoad) sample() {
	s := QPSSample{At: time.Now(), Count: l.count.Load()}
	l.mu.Lock()
	l.samples = append(l.samples, s)
	l.mu.Unlock()
}

// qps is the queries per second between from and to (0, false before the
// samples cover to).
func (l *readLoad) qps(from, to time.Time) (float64, bool) {
	l.sample()
	l.mu.Lock()
	defer l.mu.Unlock()
	return QPSBetween(l.samples, from, to)
}

func (l *readLoad) stop() {
	l.cancel()
	l.wg.Wait()
	l.db.Close()
}

// donorLoad measures, Reps times, the donor's read qps alone then during
// an unlimited clone, and alone then during a clone at --rate.
func (e *cloneEnv) donorLoad(ctx context.Context) error {
	n, err := e.sb.Node(cloneDonor)
	if err != nil {
		return err
	}
	app := e.sb.Accounts().App
	l, err := startReadLoad(ctx, n.Addr(), app.User, app.Password, e.o.LoadThreads)
	if err != nil {
		return err
	}
	defer l.stop()
	sleepCtx(ctx, 2*time.Second) // warm-up
	for i := 1; i <= e.o.Reps; i++ {
		q := QPSRun{Run: i}
		errs0 := l.errs.Load()
		// Each clone is compared with the window just before it: on a
		// shared machine the load of other work drifts over minutes.
		baseline := func() float64 {
			t0 := time.Now()
			sleepCtx(ctx, e.o.Baseline)
			v, _ := l.qps(t0, time.Now())
			return v
		}
		q.Baseline = baseline()
		un := e.cloneRun(ctx, CloneKindLoaded, i, 0)
		e.res.Clones = append(e.res.Clones, un)
		q.BaselineThrottled = baseline()
		th := e.cloneRun(ctx, CloneKindThrottled, i, e.o.Rate)
		e.res.Clones = append(e.res.Clones, th)
		q.Errors = l.errs.Load() - errs0
		var ok1, ok2 bool
		q.Unthrottled, ok1 = l.qps(un.StreamFrom, un.StreamTo)
		q.Throttled, ok2 = l.qps(th.StreamFrom, th.StreamTo)
		switch {
		case un.Error != "":
			q.Error = "unlimited clone: " + un.Error
		case th.Error != "":
			q.Error = "limited clone: " + th.Error
		case !ok1 || !ok2:
			q.Error = "a clone's streaming phase was not seen"
		}
		e.res.QPS = append(e.res.QPS, q)
		e.progress("[load %d/%d] baseline %.0f qps, unlimited clone %.0f qps (%s); baseline %.0f qps, at %.1f MB/s %.0f qps (%s); %d errors",
			i, e.o.Reps, q.Baseline, q.Unthrottled, cloneLine(un), q.BaselineThrottled, float64(e.o.Rate)/1e6, q.Throttled, cloneLine(th), q.Errors)
		if err := ctx.Err(); err != nil {
			return err
		}
		if q.Error != "" {
			return fmt.Errorf("load run %d: %s", i, q.Error)
		}
	}
	return nil
}
