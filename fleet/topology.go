package fleet

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/directgate/directgate/config"
)

const topologyKey = "topology"

// PutTopology stores a topology document (YAML with clusters and users, the
// schema of the file's keys of those names) after checking it against
// base, the configuration of the process storing it: a document no gateway
// could apply is refused here rather than by every gateway. It returns the
// etcd revision of the change.
func (c *Client) PutTopology(ctx context.Context, base *config.Config, doc []byte) (int64, error) {
	if _, err := base.WithTopology(doc); err != nil {
		return 0, err
	}
	ctx, cancel := reqCtx(ctx)
	defer cancel()
	resp, err := c.etcd.Put(ctx, c.key(topologyKey), string(doc))
	if err != nil {
		return 0, fmt.Errorf("etcd: store the topology: %w", err)
	}
	return resp.Header.Revision, nil
}

// GetTopology returns the stored topology document and the revision it was
// last changed at, or ErrNoTopology.
func (c *Client) GetTopology(ctx context.Context) (doc []byte, rev int64, err error) {
	ctx, cancel := reqCtx(ctx)
	defer cancel()
	resp, err := c.etcd.Get(ctx, c.key(topologyKey))
	if err != nil {
		return nil, 0, fmt.Errorf("etcd: read the topology: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, resp.Header.Revision, ErrNoTopology
	}
	kv := resp.Kvs[0]
	return kv.Value, kv.ModRevision, nil
}

// WatchTopology calls apply with every topology document stored after
// revision from, in order, until ctx ends. When the watch breaks (etcd
// down, revision compacted) it reads the current document again, calls
// apply if it changed, and watches on from there, retrying every second;
// onError hears of each failure.
func (c *Client) WatchTopology(ctx context.Context, from int64, apply func(doc []byte, rev int64), onError func(error)) {
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		ch := c.etcd.Watch(wctx, c.key(topologyKey), clientv3.WithRev(from+1))
		for resp := range ch {
			if err := resp.Err(); err != nil {
				onError(fmt.Errorf("etcd: watch the topology: %w", err))
				break
			}
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypePut {
					from = ev.Kv.ModRevision
					apply(ev.Kv.Value, from)
				}
			}
		}
		cancel()
		// Catch up with a read: the watch may have missed changes.
		for ctx.Err() == nil {
			doc, rev, err := c.GetTopology(ctx)
			if err == nil {
				if rev > from {
					from = rev
					apply(doc, rev)
				}
				break
			}
			onError(err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}
