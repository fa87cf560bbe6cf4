# baton: `make run` starts a server, `make test` checks everything.
GO       ?= go
BIN      := $(CURDIR)/bin
TOOLS    := $(CURDIR)/.tools
STATICCHECK_VERSION := v0.8.2

.PHONY: all build test test-short lint run bench demo clean

all: build

## build: the baton binary in bin/
build:
	$(GO) build -o $(BIN)/baton ./cmd/baton

## test: unit, integration (real nats-servers, a 3-node cluster) and e2e (the built binary), with -race
test:
	$(GO) test -race -count=1 -timeout 9m ./...

## test-short: the same without the tests that wait out TTLs or start clusters
test-short:
	$(GO) test -race -count=1 -short ./...

## lint: go vet, gofmt and staticcheck (installed into .tools/)
lint: $(TOOLS)/staticcheck
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt -l:"; echo "$$out"; exit 1; fi
	$(TOOLS)/staticcheck ./...

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

## run: baton up on the embedded default (127.0.0.1:4222, state in ~/.local/state/baton)
run: build
	$(BIN)/baton up

## demo: a short unattended story of slots, an election, a crash, a handover, status and doctor (about 15 s)
demo: build
	timeout 120 ./scripts/demo.sh

## bench: library benchmarks against the raw KV floor, and cold CLI processes (about 2 minutes)
bench:
	$(GO) test -run '^$$' -bench . -benchtime 2000x -count 3 ./session/ ./lease/
	$(GO) test -run '^$$' -bench . -benchtime 200x -count 1 ./e2e/

clean:
	rm -rf $(BIN) $(TOOLS)
