package executor

import (
	"context"
	"time"
)

// Clock is the executor's time: when things happened (operations, events,
// the engine's Input.Now), the deadlines of its waits (a writer routed, a
// replica replicating, transactions drained) and the waits themselves.
// The executor reads time nowhere else (TestExecutorReadsOnlyItsClock),
// so the scenario tests run it on a fake clock. Statement timeouts are
// not its business: they bound real sockets (connClient).
type Clock interface {
	Now() time.Time
	// After fires once d has passed.
	After(d time.Duration) <-chan time.Time
}

// realClock is the wall clock of a running Vigil.
type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// now is the executor's clock's time.
func (e *Executor) now() time.Time { return e.clock.Now() }

// wait waits d on c, or until ctx ends.
func wait(ctx context.Context, c Clock, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.After(d):
		return nil
	}
}
