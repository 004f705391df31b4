# sluice — common tasks. `make test` is what CI runs (.ci/run).
GO ?= go
PKGS := ./...

.PHONY: test test-long tidy-check bench bench-micro bench-e2e lint build demo

## test: go.mod and go.sum tidy, then every test of both modules (the root, and deploy/ with the
## Compose, BuildKit and Prometheus libraries its checks need) with the race detector, against
## real redis-server and NATS started by the tests
## Packages run one at a time (-p 1): the pacing tests judge arrival times to the millisecond, and
## a second package's test binary on the same two cores would be judged with them.
## e2e runs without the race detector: its test binary is also the recording provider, and a
## race-instrumented provider stamps arrivals milliseconds late (the dispatchers it judges are plain
## binaries either way).
## The test binaries are built first on every core (-exec true runs none of them): -p 1 also builds
## one package at a time, which on a clean 2-core machine took 313 s where this takes 192 (and 180
## against 133 for e2e's).
UNIT_PKGS = $$($(GO) list ./... | grep -v /e2e$$)
test: tidy-check
	$(GO) test -race -count=1 -exec true $(UNIT_PKGS) > /dev/null
	$(GO) test -race -p 1 -count=1 -timeout 15m $(UNIT_PKGS)
	$(GO) test -count=1 -exec true ./e2e/ > /dev/null
	$(GO) test -p 1 -count=1 -timeout 15m ./e2e/
	cd deploy && $(GO) test -race -count=1 -timeout 15m $(PKGS)

## tidy-check: fail when go mod tidy would change either module's go.mod or go.sum
tidy-check:
	$(GO) mod tidy -diff
	cd deploy && $(GO) mod tidy -diff

## test-long: the end-to-end pacing cases on both backends, with 30s runs, and the longer topology
## cases (a NATS stream leader that rejoins at once), skipped by `make test`
test-long:
	SLUICE_LONG=1 $(GO) test -count=1 -timeout 30m ./e2e/ -run '^(TestExact|TestTopology)'

## bench: the micro benchmarks, then the end-to-end table (4 dispatcher processes, real Redis and NATS)
## and the ingest table (jobs/s through serve-api, one job and batches of 100, beside the Go producer)
## and the performance table beside a bare Redis list worker (TestBenchTablePerf: ceiling, CPU and
## allocations per job, latency under the cap, round trips per job, RSS, pacer grants/s)
bench: bench-micro bench-e2e

bench-micro:
	$(GO) test -run '^$$' -bench . -benchtime 2s -count 1 ./pacer/ ./queue/... ./internal/dispatch/ ./sink/

bench-e2e:
	@SLUICE_BENCH=1 $(GO) test -count=1 -run 'TestBenchTable|TestBenchIngest' -v -timeout 25m ./e2e/ | grep -vE '^(=== |--- PASS|    --- PASS|PASS$$)'

## lint: go vet and staticcheck
lint:
	$(GO) vet $(PKGS)
	cd deploy && $(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)

## build: the static binaries the image ships, into ./bin, as the Dockerfile builds them:
## -tags production leaves the demo (embedded Redis and NATS, charts) out of the dispatcher
BINARIES := ./cmd/dispatcher ./cmd/producer ./cmd/mockprovider ./cmd/healthcheck
build:
	CGO_ENABLED=0 $(GO) build -trimpath -tags production -o bin/ $(BINARIES)

## demo: the one-command demo (no servers needed); go run ./cmd/dispatcher --demo runs the same
demo:
	$(GO) run ./cmd/demo
