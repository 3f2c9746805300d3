package fleet

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/directgate/directgate/config"
)

// Client is a connection to the fleet's etcd with the fleet's key layout.
// It is safe for concurrent use.
type Client struct {
	etcd   *clientv3.Client
	prefix string
	ttl    time.Duration
	// hold is topology.etcd.budget_hold: how long a missing gateway's
	// floor stays reserved (0: the protection is off; see floors.go).
	hold time.Duration
	log  hclog.Logger
}

// opTimeout bounds one etcd request: a fleet operation that cannot reach
// etcd in that time fails and is retried by its loop.
const opTimeout = 3 * time.Second

// Dial connects to etcd as cfg says. It does not wait for etcd to answer:
// the first request does (and fails after DialTimeout when it cannot).
func Dial(cfg *config.Etcd, log hclog.Logger) (*Client, error) {
	tlsConf, err := cfg.TLS.ClientConfig()
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.Endpoints,
		DialTimeout:          cfg.DialTimeout,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		Username:             cfg.Username,
		Password:             cfg.Password,
		TLS:                  tlsConf,
		Logger:               zap.NewNop(),
		// gRPC's reconnect backoff grows to 2 minutes: after an outage of
		// a minute a gateway waited 13 s for etcd that was back, at its
		// floor shares meanwhile. A few seconds at most.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 250 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: cfg.DialTimeout,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	c := &Client{etcd: cli, prefix: cfg.Prefix, ttl: cfg.LeaseTTL, log: log}
	if cfg.BudgetHold != nil {
		c.hold = *cfg.BudgetHold
	}
	return c, nil
}

// Close ends the connection. Leases it holds expire after their TTL unless
// their owners revoked them first.
func (c *Client) Close() error { return c.etcd.Close() }

// LeaseTTL is the lifetime of the leases this client grants.
func (c *Client) LeaseTTL() time.Duration { return c.ttl }

// key is the full etcd key of the fleet key elems.
func (c *Client) key(elems ...string) string {
	return path.Join(append([]string{c.prefix}, elems...)...)
}

// ErrNoTopology says etcd holds no topology under the prefix yet: store one
// with `gateway topo put`.
var ErrNoTopology = errors.New("etcd holds no topology yet: store one with gateway topo put --config FILE --file TOPOLOGY.yaml")

// reqCtx bounds one request.
func reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, opTimeout)
}
