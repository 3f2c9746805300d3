# directgate. Targets:
#   build  bin/gateway
#   run    build, then the local stack (MariaDB on 13306, gateway on 15306): e2e/local/run.sh
#   run-fleet  build, then a local fleet on etcd: MariaDB primary and replica, two owners,
#          three gateways (15306, 15316, 15326): e2e/local/run-fleet.sh
#   test   install MariaDB and sysbench if missing (apt, as root), go vet, go test -race,
#          and beside it every fuzz target for TEST_FUZZTIME (default 3000x executions: a count,
#          not a duration, because go test -fuzz with a short duration can fail with "context
#          deadline exceeded" without any crasher; "0" skips)
#   lint   gofmt check and go vet
#   bench  build, then sysbench direct vs through the gateway (e2e/bench); BENCH_QUICK=1 for a short run
#   fuzz   run every fuzz target of FUZZ_PKGS for FUZZTIME (default 30s) each; prints
#          executions and time per target; a crasher lands in <pkg>/testdata/fuzz/<Target>/;
#          then the differential multiplexing fuzzer (e2e/difffuzz) for DIFFFUZZ_SCRIPTS
#          client scripts (default 1000; 0 skips; make test runs its short pass in go test)
#   compat build, then MariaDB's own regression tests (mysql-test/main, the list in
#          e2e/compat/tests.txt) with mariadb-test-run.pl --extern, directly and through
#          the gateway, in text, --ps-protocol and --cursor-protocol modes, one test at a
#          time with the server's state restored in between; prints the pass counts side
#          by side and fails below 95 % of the direct passes (e2e/compat/run.sh; installs
#          mariadb-test with apt when missing, as root). COMPAT_ARGS passes options
#   faults the fault-injection suite (e2e/faults, issue 35), verbose, with the long scenarios
#          make test skips (go test -faults.long); FAULTS_RUN narrows it (a -run regexp);
#          then e2e/fleet's etcd faults (a gateway cut from etcd, etcd down a minute under
#          load): FAULTS_FLEET_RUN ('^$' skips them)
#   soak   two gateways, an owner, a primary with a replica; Go clients, a message queue
#          and sysbench (in segments) while faults fire at random on every link for
#          SOAK_DURATION (default 30m): e2e/faults TestSoak; reports failures per fault
#          kind and workload, invariants, RSS/goroutines/sessions/connections
#   clean  remove bin/ (stops nothing; .local/ keeps the local stack's data)

GO ?= go
TEST_TIMEOUT ?= 15m
FUZZTIME ?= 30s
TEST_FUZZTIME ?= 3000x
DIFFFUZZ_SCRIPTS ?= 1000
FUZZ_PKGS ?= ./wire ./querypath
FAULTS_RUN ?= .
FAULTS_FLEET_RUN ?= ^(TestGatewayCutFromEtcd|TestTopologyFromEtcd)$$
SOAK_DURATION ?= 30m

.PHONY: build run run-fleet test lint clean bench bench-memory fuzz compat pgo faults soak

build:
	$(GO) build -o bin/gateway ./cmd/gateway

run: build
	e2e/local/run.sh

run-fleet: build
	e2e/local/run-fleet.sh

# The fuzz targets run beside go test, on one thread at the lowest
# priority: the end-to-end tests spend much of their time waiting for
# MariaDB, and the fuzzing fills that time instead of adding its own
# after it, without taking the CPU from the tests when they want it.
test:
	e2e/local/deps.sh --with-sysbench --with-etcd
	$(GO) vet ./...
	@fuzzlog=$$(mktemp); fuzzpid=; \
	if [ "$(TEST_FUZZTIME)" != "0" ]; then \
		GOMAXPROCS=1 nice -n 19 $(MAKE) --no-print-directory fuzz FUZZTIME=$(TEST_FUZZTIME) DIFFFUZZ_SCRIPTS=0 > $$fuzzlog 2>&1 & fuzzpid=$$!; \
	fi; \
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...; testrc=$$?; \
	fuzzrc=0; if [ -n "$$fuzzpid" ]; then wait $$fuzzpid; fuzzrc=$$?; echo "fuzz targets ($(TEST_FUZZTIME) each, beside go test):"; cat $$fuzzlog; fi; \
	rm -f $$fuzzlog; \
	[ $$testrc -eq 0 ] && [ $$fuzzrc -eq 0 ]

lint:
	@files="$$(gofmt -l .)"; \
	if [ -n "$$files" ]; then \
		echo "gofmt: these files need formatting (run gofmt -w on them):"; \
		echo "$$files"; \
		exit 1; \
	fi
	$(GO) vet ./...

# Settings come from BENCH_* variables (BENCH_QUICK, BENCH_TIME, BENCH_ROUNDS,
# BENCH_CASES, BENCH_TARGETS, BENCH_PEERS, ...): bin/sbbench -help lists them.
# PROXYSQL_UP is the up.sh of a ProxySQL built by ../shared/anchors/proxysql
# (default ../proxysql/up.sh when present; PROXYSQL_BIN the binary it runs):
# ProxySQL is then the proxysql target of every case; without it summary.md
# says "ProxySQL: not built".
PROXYSQL_UP ?= $(wildcard ../proxysql/up.sh)
export PROXYSQL_UP
bench: build
	e2e/local/deps.sh --with-bench
	$(GO) build -o bin/sbbench ./e2e/bench/cmd/sbbench
	$(GO) build -o bin/gorelay ./e2e/bench/cmd/gorelay
	bin/sbbench -gateway bin/gateway -gorelay bin/gorelay

# Profile-guided optimisation: go build uses cmd/gateway/default.pgo, the
# gateway's CPU profile under sbbench's point-select and read-only cases
# (8 and 64 clients, both ps modes, and the 512-client mux case), on
# goroutines and on an io_uring loop, merged. Refresh it after hot-path
# changes (about 8 minutes) and commit it; PGO_CASES picks the cases.
PGO_CASES ?= ^(point_select|read_only) ps=(auto|disable) t=(8|64)$$|^mux point_select
pgo: build
	$(GO) build -o bin/sbbench ./e2e/bench/cmd/sbbench
	rm -rf bin/pgo-results
	BENCH_CASES='$(PGO_CASES)' BENCH_TARGETS=gateway,gateway-loop BENCH_TIME=15 BENCH_ROUNDS=1 \
		BENCH_WARMUP=0 BENCH_TABLE_SIZE=10000 BENCH_CPUPROFILE=1 \
		bin/sbbench -gateway bin/gateway -rate 0 -results bin/pgo-results
	$(GO) tool pprof -proto bin/pgo-results/latest/gateway-*.pprof > cmd/gateway/default.pgo.new
	mv cmd/gateway/default.pgo.new cmd/gateway/default.pgo

# The gateway's resident memory with many idle clients (plain and TLS):
# benchmarks of the e2e package, run once each.
bench-memory:
	$(GO) test -count=1 -run '^$$' -bench ClientMemory -benchtime 1x ./e2e/

# One target at a time (go test -fuzz takes one); the last "execs:" line of
# each run is the count. Every target runs even when one finds a crasher;
# the exit status says whether any did. A run that ends with the toolchain's
# "context deadline exceeded" and wrote no failing input is not a crasher
# (a known go test -fuzz timing failure): it is reported as "ok*".
fuzz:
	@failed=""; \
	for pkg in $(FUZZ_PKGS); do \
		for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			start=$$(date +%s); \
			if out=$$($(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$pkg 2>&1); then status=ok; \
			elif echo "$$out" | grep -q 'context deadline exceeded' && ! echo "$$out" | grep -q 'Failing input written'; then status='ok*'; \
			else status=FAIL; failed="$$failed $$pkg:$$t"; echo "$$out" | tail -30; fi; \
			execs=$$(echo "$$out" | grep -o 'execs: [0-9]*' | tail -1 | cut -d' ' -f2); \
			printf '%-4s %-12s %-30s %10s execs %4ss\n' $$status $$pkg $$t "$${execs:-?}" $$(( $$(date +%s) - start )); \
		done; \
	done; \
	if [ "$(DIFFFUZZ_SCRIPTS)" != "0" ]; then \
		start=$$(date +%s); \
		if DIFFFUZZ_SCRIPTS=$(DIFFFUZZ_SCRIPTS) $(GO) test -count=1 -timeout 0 -run '^TestDifferential$$' -v ./e2e/difffuzz > difffuzz.log 2>&1; then status=ok; \
		else status=FAIL; failed="$$failed e2e/difffuzz"; grep -v '^=== RUN' difffuzz.log | tail -60; fi; \
		printf '%-4s %-12s %-30s %10s scripts %4ss (log: difffuzz.log)\n' $$status ./e2e/difffuzz TestDifferential $(DIFFFUZZ_SCRIPTS) $$(( $$(date +%s) - start )); \
	fi; \
	if [ -n "$$failed" ]; then echo "fuzz: failures in:$$failed (inputs saved under testdata/fuzz/; divergences in difffuzz.log)"; exit 1; fi

faults:
	e2e/local/deps.sh --with-etcd
	$(GO) test -count=1 -timeout 30m -v -run '$(FAULTS_RUN)' ./e2e/faults -faults.long
	$(GO) test -count=1 -timeout 30m -v -run '$(FAULTS_FLEET_RUN)' ./e2e/fleet -faults.long

soak:
	e2e/local/deps.sh --with-sysbench
	$(GO) test -count=1 -timeout 0 -v -run '^TestSoak$$' ./e2e/faults -soak.duration $(SOAK_DURATION)

compat: build
	e2e/local/deps.sh --with-mariadb-test
	e2e/compat/run.sh $(COMPAT_ARGS)

clean:
	rm -rf bin
