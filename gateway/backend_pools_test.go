package gateway

import (
	"testing"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/wire"
	"github.com/hashicorp/go-hclog"
)

// TestPoolsPerBackendAccount: a backend keeps one pool per backend
// account and CLIENT_FOUND_ROWS, opened on first use; a session uses its
// user's account (the cluster's when the user has none or the same one);
// a reload's prune closes the pools of accounts no user has any more.
func TestPoolsPerBackendAccount(t *testing.T) {
	cfg, err := config.Parse([]byte(`users:
  - {user: plain}
  - {user: alice, backend_user: a, backend_password: pa}
  - {user: same, backend_user: g, backend_password: gp}
clusters: [{name: main, backend_user: g, backend_password: gp, backends: ["127.0.0.1:1"], pool: {min_idle: 0}}]`))
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{name: "main", log: hclog.NewNullLogger()}
	c.conf.Store(&cfg.Clusters[0])
	be := &backend{addr: "127.0.0.1:1", cluster: c}
	t.Cleanup(be.close)
	keyOf := func(u config.User, caps uint32) poolKey {
		ss := &Session{identity: identity{user: u}, cluster: c, clientSide: clientSide{caps: caps}}
		return ss.poolKey()
	}
	if k := keyOf(cfg.Users[0], 0); k != (poolKey{}) {
		t.Errorf("plain user: %+v", k)
	}
	if k := keyOf(cfg.Users[2], 0); k != (poolKey{}) {
		t.Errorf("user with the cluster's account: %+v", k)
	}
	ka := keyOf(cfg.Users[1], wire.CapFoundRows)
	if ka != (poolKey{user: "a", password: "pa", foundRows: true}) {
		t.Errorf("alice: %+v", ka)
	}
	p1, err := be.poolFor(poolKey{})
	if err != nil {
		t.Fatal(err)
	}
	pa, err := be.poolFor(ka)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := be.poolFor(ka); again != pa {
		t.Error("a second pool for the same key")
	}
	if again, _ := be.pool(false); again != p1 {
		t.Error("pool(false) is not the cluster account's pool")
	}
	n := 0
	be.eachPool(func(poolKey, *pools.Pool[*backendConn]) { n++ })
	if n != 2 {
		t.Errorf("%d pools", n)
	}
	be.prune(func(k poolKey) bool { return false })
	if got, _ := be.poolFor(poolKey{}); got != p1 {
		t.Error("prune dropped the cluster account's pool")
	}
	if got, _ := be.poolFor(ka); got == pa {
		t.Error("prune kept alice's pool")
	}
	be.close()
	if _, err := be.poolFor(poolKey{user: "z"}); err == nil {
		t.Error("a pool opened on a closed backend")
	}
}
