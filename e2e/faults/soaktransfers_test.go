package faults

import (
	"flag"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/directgate/directgate/e2e/faultproxy"
)

// soakTransfers runs TestSoakTransfers this long (0 skips).
var soakTransfers = flag.Duration("soak.transfers", 0, "run TestSoakTransfers this long")

// soakTransfersDirect runs TestSoakTransfers without gateways: the
// clients log in to the primary through the same fault proxies.
var soakTransfersDirect = flag.Bool("soak.transfers.direct", false, "run TestSoakTransfers straight to MariaDB (a control)")

// TestSoakTransfers (-soak.transfers D) is the soak narrowed to what a
// wrong read of the accounts needs, to meet one faster: the soak's stack,
// 16 clients that only transfer and read (half each), the replica
// getting no reads (the wrong read seen was on the primary), and faults
// only on the gateways' links to the primary. It checks the accounts'
// total after every read and at the end. With -soak.transfers.direct the
// clients skip the gateways: a control for what the gateway adds.
func TestSoakTransfers(t *testing.T) {
	if *soakTransfers <= 0 {
		t.Skip("go test -soak.transfers D")
	}
	pair, roots, st := startSoak(t, false)
	root := roots[0]
	var primaries []*faultproxy.Link
	for _, l := range st.links {
		if strings.HasPrefix(l.Name(), "gateway") && strings.HasSuffix(l.Name(), "-primary") {
			primaries = append(primaries, l)
		}
	}
	r := newSoakRun()
	r.diagnose = true
	addrs := []string{st.addr(0), st.addr(1)}
	if *soakTransfersDirect {
		r.direct = true
		primaries = nil
		for i := range addrs {
			l := faultproxy.New(t, fmt.Sprintf("direct%d-primary", i+1), pair.primary.Addr())
			primaries = append(primaries, l)
			addrs[i] = l.Addr()
		}
	}
	start := time.Now()
	deadline := start.Add(*soakTransfers)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() { soakClient(t, r, addrs[i%2], i, i%2 == 0, true, deadline) })
	}
	soakFaults(r, st, primaries, deadline)
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	byKind := map[string]int{}
	for _, w := range r.windows {
		byKind[w.kind]++
	}
	t.Logf("%v: faults %v; operations ok %v; reads by server %v; failed by fault %v; the longest operation %v",
		time.Since(start).Round(time.Second), byKind, r.ok, r.readsBy, r.fails, r.slowest)
	var total int64
	if err := root.QueryRow("SELECT SUM(bal) FROM soak_accounts").Scan(&total); err != nil || total != 10_000 {
		t.Errorf("accounts total %d (%v), want 10000: half a transaction landed", total, err)
	}
	if r.badReads > 0 {
		t.Errorf("%d reads saw a wrong row count or total, e.g. %s", r.badReads, r.badRead)
	}
}
