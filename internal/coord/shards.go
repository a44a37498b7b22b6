package coord

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The sharded listener's map, shared by every instance: one key whose
// value the daemon owns (JSON: schemas' clusters and states set at run
// time) and whose etcd modification revision is the map's version, so
// that every instance routes by the same version.

// ErrShardsChanged: the shard map changed since it was read (another
// instance or operator wrote it); read it again and retry.
var ErrShardsChanged = errors.New("the shard map changed in etcd since it was read: read it again and retry")

func (c *Coordinator) shardsKey() string { return c.key("shards", "map") }

// Shards is the stored shard map and its version (0, nil: none yet).
func (c *Coordinator) Shards(ctx context.Context) (version int64, data []byte, err error) {
	gctx, cancel := context.WithTimeout(ctx, c.opts.LeaseTTL)
	defer cancel()
	r, err := c.cli.Get(gctx, c.shardsKey())
	if err != nil {
		return 0, nil, fmt.Errorf("reading the shard map from etcd: %w", err)
	}
	if len(r.Kvs) == 0 {
		return 0, nil, nil
	}
	return r.Kvs[0].ModRevision, r.Kvs[0].Value, nil
}

// SaveShards stores data as the shard map if it is still at version
// (0: none stored) and returns the new version.
func (c *Coordinator) SaveShards(ctx context.Context, version int64, data []byte) (int64, error) {
	pctx, cancel := context.WithTimeout(ctx, c.opts.LeaseTTL)
	defer cancel()
	k := c.shardsKey()
	r, err := c.cli.Txn(pctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", version)).
		Then(clientv3.OpPut(k, string(data))).Commit()
	if err != nil {
		return 0, fmt.Errorf("writing the shard map to etcd: %w", err)
	}
	if !r.Succeeded {
		return 0, ErrShardsChanged
	}
	return r.Header.Revision, nil
}

// WatchShards calls apply with every version of the shard map, the
// current one first, until ctx ends; it reconnects by itself.
func (c *Coordinator) WatchShards(ctx context.Context, apply func(version int64, data []byte)) {
	for ctx.Err() == nil {
		gctx, cancel := context.WithTimeout(ctx, c.opts.LeaseTTL)
		r, err := c.cli.Get(gctx, c.shardsKey())
		cancel()
		if err != nil {
			_ = sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		if len(r.Kvs) > 0 {
			apply(r.Kvs[0].ModRevision, r.Kvs[0].Value)
		}
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wr := range c.cli.Watch(wctx, c.shardsKey(), clientv3.WithRev(r.Header.Revision+1)) {
			if wr.Err() != nil {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypePut {
					apply(ev.Kv.ModRevision, ev.Kv.Value)
				}
			}
		}
		wcancel()
		_ = sleepCtx(ctx, 100*time.Millisecond)
	}
}

// A move of a schema between clusters, when several instances share the
// shard map: its journal (a key without a lease: it outlives its owner),
// its owner (a key with the owner's lease: the next instance takes the
// move over when it goes), the operator's word for a waiting move (an
// instance that does not own it leaves it there for the owner), and every
// instance's acknowledgement of the hold the move put in the map.

// ErrMoveOwned: another instance owns the running move.
var ErrMoveOwned = errors.New("another Vigil instance owns the running shard move")

// MoveKeys is the move's key space as read.
type MoveKeys struct {
	Owner   string
	Journal []byte
	Signal  string
}

func (c *Coordinator) moveKey(k string) string { return c.key("shards", "move", k) }

// Instance is this instance's name.
func (c *Coordinator) Instance() string { return c.opts.Instance }

// ReadMove reads the move's keys.
func (c *Coordinator) ReadMove(ctx context.Context) (MoveKeys, error) {
	gctx, cancel := context.WithTimeout(ctx, c.opts.LeaseTTL)
	defer cancel()
	r, err := c.cli.Txn(gctx).Then(clientv3.OpGet(c.moveKey("owner")), clientv3.OpGet(c.moveKey("journal")), clientv3.OpGet(c.moveKey("signal"))).Commit()
	if err != nil {
		return MoveKeys{}, fmt.Errorf("reading the shard move from etcd: %w", err)
	}
	var m MoveKeys
	for i, resp := range r.Responses {
		kvs := resp.GetResponseRange().Kvs
		if len(kvs) == 0 {
			continue
		}
		switch i {
		case 0:
			m.Owner = string(kvs[0].Value)
		case 1:
			m.Journal = kvs[0].Value
		case 2:
			m.Signal = string(kvs[0].Value)
		}
	}
	return m, nil
}

// ClaimMove makes this instance the move's owner, with its lease, when no
// instance owns it, and stores journal (nil: keeps the stored one). A
// stale operator's word is removed with a new journal.
func (c *Coordinator) ClaimMove(ctx context.Context, journal []byte) error {
	id := c.leaseID()
	if id == 0 {
		return fmt.Errorf("claiming the shard move: this instance holds no etcd lease")
	}
	pctx, cancel := context.WithTimeout(ctx, c.opts.LeaseTTL)
	defer cancel()
	ops := []clientv3.Op{clientv3.OpPut(c.moveKey("owner"), c.opts.Instance, clientv3.WithLease(id))}
	if journal != nil {
		ops = append(ops, clientv3.OpPut(c.moveKey("journal"), string(journal)), clientv3.OpDelete(c.moveKey("signal")))
	}
	r, err := c.cli.Txn(pctx).If(clientv3.Compare(clientv3.CreateRevision(c.moveKey("owner")), "=", 0)).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("claiming the shard move in etcd: %w", err)
	}
	if !r.Succeeded {
		return ErrMoveOwned
	}
	return nil
}

// SaveMove stores the journal while this instance owns the move.
func (c *Coordinator) SaveMove(ctx context.Context, journal []byte) error {
	pctx, cancel := context.WithTimeout(ctx, c.opts.LeaseTTL)
	defer cancel()
	r, err := c.cli.Txn(pctx).If(clientv3.Compare(clientv3.Value(c.moveKey("owner")), "=", c.opts.Instance)).
		Then(clientv3.OpPut(c.moveKey("journal"), string(journal))).Commit()
	if err != nil {
		return fmt.Errorf("saving the shard move's journal in etcd: %w", err)
	}
	if !r.Succeeded {
		return fmt.Errorf("saving the shard move's journal: %w (this instance lost its lease)", ErrMoveOwned)
	}
	return nil
}

// ReleaseMove ends this instance's ownership; the journal stays.
func (c *Coordinator) ReleaseMove(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, c.opts.LeaseTTL)
	defer cancel()
	_, err := c.cli.Txn(pctx).If(clientv3.Compare(clientv3.Value(c.moveKey("owner")), "=", c.opts.Instance)).
		Then(clientv3.OpDelete(c.moveKey("owner"))).Commit()
	return err
}

// SignalMove leaves the operator's word (cutover or abort of schema) for
// the move's owner.
func (c *Coordinator) SignalMove(ctx context.Context, word string) error {
	pctx, cancel := context.WithTimeout(ctx, c.opts.LeaseTTL)
	defer cancel()
	_, err := c.cli.Put(pctx, c.moveKey("signal"), word)
	return err
}

// TakeSignal removes and returns the operator's word ("" for none).
func (c *Coordinator) TakeSignal(ctx context.Context) (string, error) {
	pctx, cancel := context.WithTimeout(ctx, c.opts.LeaseTTL)
	defer cancel()
	r, err := c.cli.Delete(pctx, c.moveKey("signal"), clientv3.WithPrevKV())
	if err != nil || len(r.PrevKvs) == 0 {
		return "", err
	}
	return string(r.PrevKvs[0].Value), nil
}

func (c *Coordinator) holdAckKey(instance string) string {
	return c.key("shards", "holdacks", instance)
}

// AckShardHold records, with this instance's lease, that it holds the
// statements of the map's hold id.
func (c *Coordinator) AckShardHold(ctx context.Context, id string) error {
	lease := c.leaseID()
	if lease == 0 {
		return fmt.Errorf("acknowledging the shard hold: this instance holds no etcd lease")
	}
	pctx, cancel := context.WithTimeout(ctx, c.opts.LeaseTTL)
	defer cancel()
	_, err := c.cli.Put(pctx, c.holdAckKey(c.opts.Instance), id, clientv3.WithLease(lease))
	return err
}

// WaitShardHold waits until every live instance acknowledged hold id (or
// its lease ended: an instance without a lease routes no writes), at most
// timeout.
func (c *Coordinator) WaitShardHold(ctx context.Context, id string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		missing, err := c.shardHoldMissing(ctx, id)
		if err == nil && len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("reading the hold's acknowledgements from etcd: %w", err)
			}
			return fmt.Errorf("instance(s) %v did not hold the schema within %s (nor lose their lease)", missing, timeout)
		}
		if sleepCtx(ctx, 10*time.Millisecond) != nil {
			return ctx.Err()
		}
	}
}

func (c *Coordinator) shardHoldMissing(ctx context.Context, id string) ([]string, error) {
	gctx, cancel := context.WithTimeout(ctx, c.opts.LeaseTTL)
	defer cancel()
	ap := c.key("shards", "holdacks") + "/"
	r, err := c.cli.Txn(gctx).Then(
		clientv3.OpGet(c.key("instances")+"/", clientv3.WithPrefix()),
		clientv3.OpGet(ap, clientv3.WithPrefix())).Commit()
	if err != nil {
		return nil, err
	}
	acks := map[string]string{}
	for _, kv := range r.Responses[1].GetResponseRange().Kvs {
		acks[string(kv.Key[len(ap):])] = string(kv.Value)
	}
	ip := len(c.key("instances") + "/")
	var missing []string
	for _, kv := range r.Responses[0].GetResponseRange().Kvs {
		if name := string(kv.Key[ip:]); acks[name] != id {
			missing = append(missing, name)
		}
	}
	return missing, nil
}
