package difffuzz

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// envInt reads an integer environment variable, def when unset.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

// TestDifferential runs random stateful client scripts straight against
// MariaDB and through a gateway with a pool of one or two connections,
// and fails with every divergence, shrunk. See the package documentation
// for the environment variables.
func TestDifferential(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("DIFFFUZZ_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("DIFFFUZZ_SEED=%q: %v", v, err)
		}
		seed = s
	}
	t.Logf("DIFFFUZZ_SEED=%d", seed)
	o := Options{
		Scripts:   envInt(t, "DIFFFUZZ_SCRIPTS", 60),
		Seed:      seed,
		Round:     envInt(t, "DIFFFUZZ_ROUND", -1),
		SelfCheck: os.Getenv("DIFFFUZZ_SELFCHECK") == "1",
		Dump:      os.Getenv("DIFFFUZZ_DUMP") == "1",
		Gen: GenOptions{
			Clients: envInt(t, "DIFFFUZZ_CLIENTS", 8),
			Kill:    os.Getenv("DIFFFUZZ_KILL") == "1",
		},
		Shrink: ShrinkOptions{
			MaxTime: envDuration(t, "DIFFFUZZ_SHRINK_TIME", 15*time.Second),
		},
		MaxShrunk: envInt(t, "DIFFFUZZ_SHRINK", 6),
		MaxTime:   envDuration(t, "DIFFFUZZ_TIME", 0),
		Logf:      t.Logf,
	}
	if o.MaxShrunk == 0 {
		o.MaxShrunk = -1
	}
	if ps := envInt(t, "DIFFFUZZ_POOL", 0); ps > 0 {
		o.Gen.PoolSizes = []int{ps}
	}
	if po := os.Getenv("DIFFFUZZ_POOL_ORDER"); po != "" {
		o.Gen.PoolOrders = []string{po}
	}
	if n := envInt(t, "DIFFFUZZ_IO_LOOPS", -1); n >= 0 {
		o.Gen.IOLoops = []int{n}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	e, err := StartEnv(ctx, EnvOptions{GatewayLog: os.Stderr, GatewayLogLevel: os.Getenv("DIFFFUZZ_LOG"), GeneralLog: os.Getenv("DIFFFUZZ_GENERAL_LOG"), Pipelining: envInt(t, "DIFFFUZZ_PIPELINING", 0)})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})

	rep := Run(context.Background(), e, o)
	t.Log(rep.Summary())
	for _, f := range rep.Findings {
		t.Error(f.String(rep.Seed))
	}
	for _, err := range rep.Errors {
		t.Error(err)
	}
	if len(rep.Findings) > 0 {
		t.Logf("replay with DIFFFUZZ_SEED=%d (and DIFFFUZZ_ROUND=<round> for one round)", seed)
	}
}
