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
