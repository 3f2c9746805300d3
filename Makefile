# directgate. Targets:
#   build  bin/gateway
#   run    build, then the local stack (MariaDB on 13306, gateway on 15306): e2e/local/run.sh
#   test   install MariaDB and sysbench if missing (apt, as root), go vet, go test -race
#   lint   gofmt check and go vet
#   clean  remove bin/ (stops nothing; .local/ keeps the local stack's data)

GO ?= go
TEST_TIMEOUT ?= 15m

.PHONY: build run test lint clean

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

clean:
	rm -rf bin
