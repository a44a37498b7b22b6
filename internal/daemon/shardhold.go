package daemon

// A coordinated move's hold: with several instances, the move's owner
// puts the hold in the shard map in etcd; every instance (the owner too)
// holds the schema's statements at its sharded listener when its watch
// brings that version, and acknowledges in etcd once nothing runs there
// on the schema; the owner goes on when every live instance did. The
// version that removes the hold (with the flip, at a cutover) releases
// each instance's statements to where that version routes them. A hold
// has a bound (moveHoldTTL): an owner that dies holding does not hold
// the schema forever; the owner flips only well inside the bound.

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// shardHoldSpec is a hold in the shard map.
type shardHoldSpec struct {
	Schema string `json:"schema"`
	ID     string `json:"id"`
	TTLms  int64  `json:"ttl_ms"`
}

// moveHoldTTL bounds a coordinated hold on every instance; holdAckWait
// bounds how long the owner waits for every instance to hold.
const (
	moveHoldTTL = 60 * time.Second
	holdAckWait = 10 * time.Second
	// flipMargin: the owner flips only this long before the bound.
	flipMargin = 5 * time.Second
)

// localHold is this instance's part of one coordinated hold.
type localHold struct {
	id      string
	mu      sync.Mutex
	release func() // set once the listener holds
	ended   bool
	cancel  context.CancelFunc
}

// end releases the statements (or stops the hold being taken).
func (h *localHold) end() {
	h.mu.Lock()
	rel := h.release
	h.ended, h.release = true, nil
	h.mu.Unlock()
	h.cancel()
	if rel != nil {
		rel()
	}
}

// syncHold makes this instance's hold follow the map's: take a new one,
// end one the map no longer has.
func (sr *shardRuntime) syncHold(d *daemon, spec *shardHoldSpec) {
	if !sr.coord {
		return
	}
	sr.holdMu.Lock()
	defer sr.holdMu.Unlock()
	if spec != nil && (spec.ID == sr.expired || (sr.held != nil && sr.held.id == spec.ID)) {
		return
	}
	if sr.held != nil {
		sr.held.end()
		sr.held = nil
	}
	if spec == nil {
		return
	}
	ctx, cancel := context.WithCancel(d.ctx)
	h := &localHold{id: spec.ID, cancel: cancel}
	sr.held = h
	d.wg.Go(func() { sr.takeHold(ctx, d, h, *spec) })
}

// takeHold holds the schema at this listener, acknowledges, and ends the
// hold at its bound if the map has not ended it by then.
func (sr *shardRuntime) takeHold(ctx context.Context, d *daemon, h *localHold, spec shardHoldSpec) {
	rel, err := sr.srv.Hold(ctx, []string{spec.Schema}, 5*time.Second)
	if err != nil {
		d.log.Warn("could not hold a schema for a move's cutover; the move's owner will give up", "schema", spec.Schema, "err", err)
		return
	}
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		rel()
		return
	}
	h.release = rel
	h.mu.Unlock()
	if err := d.coord.AckShardHold(ctx, spec.ID); err != nil && ctx.Err() == nil {
		d.log.Warn("could not acknowledge a move's hold in etcd", "schema", spec.Schema, "err", err)
	}
	ttl := time.Duration(spec.TTLms) * time.Millisecond
	if ttl <= 0 {
		ttl = moveHoldTTL
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(ttl):
	}
	// The bound passed and the map still holds: read it again (an owner
	// that died after the flip left a map that routes to the target) and
	// release; without etcd keep holding (statements answer 7003 after
	// their own bound) and try again.
	for ctx.Err() == nil {
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ver, data, err := d.coord.Shards(gctx)
		cancel()
		if err == nil {
			sr.holdMu.Lock()
			sr.expired = spec.ID
			sr.holdMu.Unlock()
			d.log.Warn("a move's hold outlived its bound; released (its owner is gone or stuck)", "schema", spec.Schema, "bound", ttl)
			if data != nil {
				sr.applyStored(d)(ver, data)
			}
			sr.holdMu.Lock()
			if sr.held == h {
				sr.held = nil
			}
			sr.holdMu.Unlock()
			h.end()
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// coordMoveRouter is the sharded listeners of every instance as a move's
// router.
type coordMoveRouter struct {
	d *daemon
	// flipBy: the last moment a flip is safe under the current hold.
	mu     sync.Mutex
	flipBy time.Time
}

func (m *coordMoveRouter) Hold(ctx context.Context, schema string) (func(), error) {
	d := m.d
	id := fmt.Sprintf("%s-%d", d.coord.Instance(), time.Now().UnixNano())
	t0 := time.Now()
	if err := d.changeShards(ctx, func(ov *shardOverlay) {
		ov.Hold = &shardHoldSpec{Schema: schema, ID: id, TTLms: moveHoldTTL.Milliseconds()}
	}); err != nil {
		return nil, fmt.Errorf("put the hold in the shard map: %w", err)
	}
	var once sync.Once
	release := func() {
		once.Do(func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := d.changeShards(rctx, func(ov *shardOverlay) {
				if ov.Hold != nil && ov.Hold.ID == id {
					ov.Hold = nil
				}
			}); err != nil {
				d.log.Error("could not remove a move's hold from the shard map; every instance ends it at its bound", "schema", schema, "bound", moveHoldTTL, "err", err)
			}
		})
	}
	if err := d.coord.WaitShardHold(ctx, id, holdAckWait); err != nil {
		release()
		return nil, err
	}
	m.mu.Lock()
	m.flipBy = t0.Add(moveHoldTTL - flipMargin)
	m.mu.Unlock()
	return release, nil
}

func (m *coordMoveRouter) Flip(ctx context.Context, schema, to string) error {
	m.mu.Lock()
	by := m.flipBy
	m.mu.Unlock()
	if time.Now().After(by) {
		return fmt.Errorf("the hold on every instance ends %s after it began; too close to that bound to flip safely", moveHoldTTL)
	}
	return moveRouter{m.d}.Flip(ctx, schema, to)
}
