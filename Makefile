# directgate. Targets:
#   build  bin/gateway
#   run    build, then the local stack (MariaDB on 13306, gateway on 15306): e2e/local/run.sh
#   test   install MariaDB and sysbench if missing (apt, as root), go vet, go test -race
#   lint   gofmt check and go vet
#   bench  build, then sysbench direct vs through the gateway (e2e/bench); BENCH_QUICK=1 for a short run
#   clean  remove bin/ (stops nothing; .local/ keeps the local stack's data)

GO ?= go
TEST_TIMEOUT ?= 15m

.PHONY: build run test lint clean bench

build:
	$(GO) build -o bin/gateway ./cmd/gateway

run: build
	e2e/local/run.sh

test:
	e2e/local/deps.sh --with-sysbench
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

lint:
	@files="$$(gofmt -l .)"; \
	if [ -n "$$files" ]; then \
		echo "gofmt: these files need formatting (run gofmt -w on them):"; \
		echo "$$files"; \
		exit 1; \
	fi
	$(GO) vet ./...

# Settings come from BENCH_* variables (BENCH_QUICK, BENCH_TIME, BENCH_ROUNDS,
# BENCH_CASES, ...): bin/sbbench -help lists them.
bench: build
	e2e/local/deps.sh --with-sysbench
	$(GO) build -o bin/sbbench ./e2e/bench/cmd/sbbench
	bin/sbbench -gateway bin/gateway

clean:
	rm -rf bin
