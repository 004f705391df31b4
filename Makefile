# sluice — common tasks. `make test` is what CI runs (.ci/run).
GO ?= go
PKGS := ./...

.PHONY: test test-long bench bench-micro bench-e2e lint build demo

## test: every test with the race detector, against real redis-server and NATS started by the tests
test:
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

## test-long: the end-to-end pacing cases on both backends, with 30s runs (skipped by `make test`)
test-long:
	SLUICE_LONG=1 $(GO) test -race -count=1 -timeout 30m ./e2e/ -run '^TestExact'

## bench: the micro benchmarks, then the end-to-end table (4 dispatcher processes, real Redis and NATS)
bench: bench-micro bench-e2e

bench-micro:
	$(GO) test -run '^$$' -bench . -benchtime 2s -count 1 ./pacer/ ./queue/... ./internal/dispatch/

bench-e2e:
	@SLUICE_BENCH=1 $(GO) test -count=1 -run TestBenchTable -v -timeout 20m ./e2e/ | grep -vE '^(=== |--- PASS|    --- PASS|PASS$$)'

## lint: go vet and staticcheck
lint:
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)

## build: static binaries into ./bin, with the flags the Dockerfile uses
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ ./cmd/...

## demo: the one-command demo (no servers needed)
demo:
	$(GO) run ./cmd/dispatcher --demo
