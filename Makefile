# sluice — common tasks. `make test` is what CI runs (.ci/run).
GO ?= go
PKGS := ./...

.PHONY: test bench lint build

## test: every test with the race detector, against real redis-server and NATS started by the tests
test:
	$(GO) test -race -count=1 -timeout 9m $(PKGS)

## bench: the benchmarks, printed as tables
bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s -count 1 ./pacer/ ./queue/...

## lint: go vet and staticcheck
lint:
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)

## build: the binaries into ./bin
build:
	$(GO) build -o bin/ ./cmd/...
