package fleet

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/e2e/etcdtest"
)

// startEtcd starts a throwaway etcd and a Client of it with a 2 s lease
// TTL, both stopped at the end of the test.
func startEtcd(t *testing.T) (*etcdtest.Server, *Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := etcdtest.Start(ctx)
	if errors.Is(err, etcdtest.ErrNoEtcd) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	c, err := Dial(&config.Etcd{Endpoints: []string{srv.Endpoint}, Prefix: "/test", DialTimeout: 2 * time.Second, LeaseTTL: 2 * time.Second}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return srv, c
}

const topoDoc = `
users: [{user: app, password: app}]
clusters:
  - name: main
    backend_user: gateway
    backends: ["127.0.0.1:13306"]
`

func baseConfig(t *testing.T) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte("topology: {etcd: {endpoints: [\"127.0.0.1:1\"]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTopologyPutGet(t *testing.T) {
	_, c := startEtcd(t)
	ctx := context.Background()
	if _, _, err := c.GetTopology(ctx); !errors.Is(err, ErrNoTopology) {
		t.Fatalf("empty etcd: %v, want ErrNoTopology", err)
	}
	if _, err := c.PutTopology(ctx, baseConfig(t), []byte("users: []\n")); err == nil {
		t.Fatal("an unusable topology was stored")
	}
	rev, err := c.PutTopology(ctx, baseConfig(t), []byte(topoDoc))
	if err != nil {
		t.Fatal(err)
	}
	doc, got, err := c.GetTopology(ctx)
	if err != nil || got != rev || string(doc) != topoDoc {
		t.Fatalf("get: %q rev %d (want %d) %v", doc, got, rev, err)
	}
}

// fakeReloader records what it is asked to apply and refuses configs whose
// first user is "refuse".
type fakeReloader struct {
	mu    sync.Mutex
	users []string
}

func (f *fakeReloader) Reload(c *config.Config) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.Users[0].User == "refuse" {
		return errors.New("refused")
	}
	f.users = append(f.users, c.Users[0].User)
	return nil
}

func (f *fakeReloader) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.users) == 0 {
		return ""
	}
	return f.users[len(f.users)-1]
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAgentAppliesTopologyAndSurvivesEtcdOutage(t *testing.T) {
	srv, c := startEtcd(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base := baseConfig(t)
	if _, err := c.PutTopology(ctx, base, []byte(topoDoc)); err != nil {
		t.Fatal(err)
	}
	cfg, rev, doc, err := c.LoadTopology(ctx, base)
	if err != nil || cfg.Users[0].User != "app" {
		t.Fatalf("load: %v %v", cfg, err)
	}
	r := &fakeReloader{}
	a := c.StartAgent(ctx, Member{ID: "gw1", Addr: "127.0.0.1:1"}, base, doc, rev, r)
	waitFor(t, "registration", func() bool {
		ms, err := c.Members(ctx, KindGateway)
		return err == nil && len(ms) == 1 && ms[0].ID == "gw1" && ms[0].Revision == rev
	})

	rev2, err := c.PutTopology(ctx, base, []byte(strings.Replace(topoDoc, "user: app", "user: second", 1)))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second topology", func() bool { return r.last() == "second" && a.Status().Revision == rev2 })
	waitFor(t, "the applied revision in etcd", func() bool {
		ms, _ := c.Members(ctx, KindGateway)
		return len(ms) == 1 && ms[0].Revision == rev2
	})

	// A document the gateway refuses leaves the running one and says why.
	rev3, err := c.PutTopology(ctx, base, []byte(strings.Replace(topoDoc, "user: app", "user: refuse", 1)))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refusal", func() bool { s := a.Status(); return s.Latest == rev3 && s.Revision == rev2 && s.ApplyError != "" })

	// etcd down for longer than the lease: the gateway says so, and
	// registers again once etcd is back.
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "disconnected status", func() bool { return !a.Status().Connected })
	time.Sleep(3 * time.Second) // the 2 s lease expires meanwhile
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "connected again", func() bool { return a.Status().Connected })
	waitFor(t, "registered again", func() bool {
		ms, err := c.Members(ctx, KindGateway)
		return err == nil && len(ms) == 1
	})
	// Changes made while the watch was broken still arrive.
	if _, err := c.PutTopology(ctx, base, []byte(strings.Replace(topoDoc, "user: app", "user: third", 1))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the third topology", func() bool { return r.last() == "third" })

	cancel()
	<-a.Done()
	ms, err := c.Members(context.Background(), KindGateway)
	if err != nil || len(ms) != 0 {
		t.Fatalf("after stop: members %v, %v; want none (the lease is revoked)", ms, err)
	}
}
