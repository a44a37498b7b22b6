package agent

import (
	"context"
	"io"
	"math"
	"time"
)

// throttledWriter passes writes through at most rate bytes per second, as
// a token bucket holding up to burst bytes. mariadb-backup's own
// --throttle counts I/O operations, not bytes, so the limit lives here,
// on the stream the donor sends.
type throttledWriter struct {
	ctx    context.Context
	w      io.Writer
	rate   float64 // bytes per second
	burst  float64
	tokens float64
	last   time.Time
	now    func() time.Time
	sleep  func(context.Context, time.Duration) error
}

// newThrottledWriter limits w to rate bytes per second; rate <= 0 returns
// w itself.
func newThrottledWriter(ctx context.Context, w io.Writer, rate int64) io.Writer {
	if rate <= 0 {
		return w
	}
	burst := float64(rate) / 10 // a tenth of a second of data
	if burst < 16<<10 {
		burst = 16 << 10
	}
	return &throttledWriter{ctx: ctx, w: w, rate: float64(rate), burst: burst, tokens: burst,
		now: time.Now, sleep: sleepCtx}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (t *throttledWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		now := t.now()
		if !t.last.IsZero() {
			t.tokens += now.Sub(t.last).Seconds() * t.rate
			if t.tokens > t.burst {
				t.tokens = t.burst
			}
		}
		t.last = now
		// Wait for a whole chunk (up to the burst), not for one byte: a
		// writer woken for every few KiB spent 12× the CPU of an
		// unthrottled one at 20 MiB/s (make bench-clone).
		want := min(float64(len(p)), t.burst)
		if t.tokens < want-0.5 { // a sleep's rounding may leave a fraction short
			need := (want - t.tokens) / t.rate
			if need < 0.001 {
				need = 0.001
			}
			if err := t.sleep(t.ctx, time.Duration(need*float64(time.Second))); err != nil {
				return written, err
			}
			continue
		}
		n := min(len(p), int(math.Round(t.tokens))) // at least 1: tokens ≥ 0.5
		m, err := t.w.Write(p[:n])
		written += m
		t.tokens -= float64(m)
		if err != nil {
			return written, err
		}
		p = p[m:]
	}
	return written, nil
}
