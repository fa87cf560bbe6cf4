# baton: `make run` starts a server, `make test` checks everything.
GO       ?= go
BIN      := $(CURDIR)/bin
TOOLS    := $(CURDIR)/.tools
STATICCHECK_VERSION := v0.8.2
CYCLONEDX_GOMOD_VERSION := v1.10.0
CYCLONEDX_GOMOD := $(TOOLS)/cyclonedx-gomod-$(CYCLONEDX_GOMOD_VERSION)

.PHONY: all build test test-hog test-tools screenshots test-short fuzz fuzz-short fault soak lint cross release release-check run bench bench-quick bench-go bench-tools demo clean

all: build

## build: the baton file in bin/: the client program with the full program packed after it (ADR 0030); static: no cgo, no dynamic loader at start-up (ADR 0028)
build:
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -o $(BIN)/.baton-full ./cmd/baton
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -tags baton_client -o $(BIN)/.baton-client ./cmd/baton
	$(GO) run ./cmd/baton-pack -o $(BIN)/baton $(BIN)/.baton-client $(BIN)/.baton-full

## test: unit, integration (real nats-servers, a 3-node cluster) and e2e (the built binary), with -race; every fuzz target's seeds run as tests (make fuzz fuzzes them, and make fault does first); the rate limiter's 10 s test of eight processes runs alone afterwards, since with other packages beside it on two cores its takers answer the limiter late and are admitted less than it allows
# The benchmark (e2e/bench, a module of its own) runs on Linux only.
LINUX := $(filter Linux,$(shell uname -s))

test: test-tools
	$(GO) test -race -count=1 -timeout 9m -skip '^TestRate_EightProcessesHoldALimitExactly$$' ./...
	$(GO) test -count=1 -run '^TestIndex_AMillionKeysLeaveNothingBehind$$' ./queue/
	$(GO) test -race -count=1 -run '^TestRate_EightProcessesHoldALimitExactly$$' ./e2e/
	$(if $(LINUX),cd e2e/bench && $(GO) test -race -count=1 ./...)
	$(if $(LINUX),cd e2e/fault && $(GO) test -race -count=1 ./...)

# Chromium for the dashboard's browser tests (Debian's, if missing); the
# nats CLI the context tests save contexts with (built into .tools/).
test-tools:
	$(if $(LINUX),./scripts/install-chromium.sh)
	GO=$(GO) ./scripts/install-natscli.sh >/dev/null

## screenshots: the dashboard's browser test, leaving its screenshots in docs/img (the README shows them)
screenshots: test-tools
	BATON_SCREENSHOTS=$(CURDIR)/docs/img $(GO) test -count=1 -run TestUI_InABrowser ./e2e

## test-short: the same without the tests that wait out TTLs or start clusters
test-short:
	$(GO) test -race -count=1 -short ./...

## fuzz: every fuzz target (record decoding, names, the command line) for 30s each; crashers land in PKG/testdata/fuzz
fuzz:
	GO=$(GO) ./scripts/fuzz.sh 30s

## fuzz-short: the same for 3s each (about four minutes from a cold build cache: fuzzing builds everything instrumented)
fuzz-short:
	GO=$(GO) ./scripts/fuzz.sh 3s

## fault: every fuzz target for 30s (about 13 minutes), then three baton up as one cluster, each server and client host in a network namespace of its own (as root), under a randomized workload (sessions, runs, leaders, a work queue with a schedule and delayed tasks, a rate-limited queue with key rates, a semaphore, a rate limiter, path reservations) while clients and servers are killed, paused and fed garbage (sessions, leaders, every kind of queue record), links are partitioned, flapped and slowed (toxiproxy), one server's disk fills (its store on a tmpfs, as root), then a rolling restart (FAULT_SECONDS of workload, default 240; about 17 minutes in all); the last line is the verdict
FAULT_SECONDS ?= 240
fault: build
	GO=$(GO) ./scripts/fuzz.sh 30s
	./scripts/install-iproute2.sh
	cd e2e/fault && $(GO) build -o $(BIN)/batonfault .
	$(BIN)/batonfault -baton $(BIN)/baton -duration $(FAULT_SECONDS)s

## soak: the fault workload of make fault for an hour (SOAK_SECONDS, default 3600), without the fuzzing before it; not in CI; the last line is the verdict
SOAK_SECONDS ?= 3600
soak: build
	./scripts/install-iproute2.sh
	cd e2e/fault && $(GO) build -o $(BIN)/batonfault .
	$(BIN)/batonfault -baton $(BIN)/baton -duration $(SOAK_SECONDS)s

## lint: go vet, gofmt and staticcheck (installed into .tools/)
lint: $(TOOLS)/staticcheck
	$(GO) vet ./...
	$(GO) vet -tags baton_client ./cmd/baton
	$(if $(LINUX),cd e2e/bench && $(GO) vet ./...)
	$(if $(LINUX),cd e2e/fault && $(GO) vet ./...)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt -l:"; echo "$$out"; exit 1; fi
	$(TOOLS)/staticcheck ./...
	$(TOOLS)/staticcheck -tags baton_client ./cmd/baton
	$(if $(LINUX),cd e2e/bench && $(TOOLS)/staticcheck ./...)
	$(if $(LINUX),cd e2e/fault && $(TOOLS)/staticcheck ./...)

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

## cross: both programs built for every platform baton is released for but this one (linux and darwin on amd64 and arm64, windows on amd64 and arm64; ADR 0036) as make release builds them, and go vet for each different set of files they select (PLATFORMS="darwin/arm64 ..." to choose); this platform is make lint's and make build's (about 10 minutes from a cold build cache on 2 cores with other work beside it, 25 s warm)
cross:
	GO=$(GO) ./scripts/cross.sh

## release: dist/ gets, for linux and darwin on amd64 and arm64, a .tar.gz of the baton file make build makes for that platform and README.md; for windows on amd64 and arm64 a .zip of the full program alone (baton.exe) and README.md; a CycloneDX SBOM of each (cyclonedx-gomod, installed into .tools/); SHA256SUMS. Of HEAD, from a clone of it, reproducibly (ADR 0036; about 100 s after make cross)
release: $(CYCLONEDX_GOMOD)
	GO=$(GO) CYCLONEDX_GOMOD=$(CYCLONEDX_GOMOD) ./scripts/release.sh $(CURDIR)/dist

## release-check: two releases of HEAD, each from its own clone, the second with an empty build cache, compared byte for byte (about 10 minutes on 2 cores, 23 with other work beside it; not in CI)
release-check: $(CYCLONEDX_GOMOD)
	GO=$(GO) CYCLONEDX_GOMOD=$(CYCLONEDX_GOMOD) ./scripts/release-check.sh

# Built with -trimpath and without cgo: the SBOMs name its SHA-256, which
# is then the same wherever the same Go builds it.
$(CYCLONEDX_GOMOD):
	mkdir -p $(TOOLS)
	tmp=$$(mktemp -d $(TOOLS)/cyclonedx.XXXXXX) && \
	GOBIN=$$tmp GOFLAGS=-trimpath CGO_ENABLED=0 $(GO) install github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_GOMOD_VERSION) && \
	mv $$tmp/cyclonedx-gomod $@; status=$$?; rm -rf $$tmp; exit $$status

## run: baton up on the embedded default (127.0.0.1:4222, state in ~/.local/state/baton) with the dashboard at http://127.0.0.1:7070/
run: build
	$(BIN)/baton up --ui 127.0.0.1:7070

## demo: a short unattended story of slots, an election, a crash, a handover, a work queue whose worker is killed, status and doctor (about 15 s)
demo: build
	timeout 120 ./scripts/demo.sh

## test-hog: make test 10 times in a row beside one busy loop per core (RUNS=N to change; about 8 minutes a run on 2 cores)
test-hog:
	./scripts/test-beside-hog.sh

## bench: baton beside the raw KV floor and etcd, one run, one table; writes e2e/bench/RESULTS.md (about 6 minutes)
bench: bench-tools
	$(BIN)/batonbench -baton $(BIN)/baton -kvfloor $(BIN)/kvfloor -peakrss $(BIN)/peakrss -out e2e/bench/RESULTS.md

## bench-quick: the same workloads, smaller (50k sessions and waiting tasks where bench has 100k, fewer rounds), for a smoke test (under 2 minutes)
bench-quick: bench-tools
	$(BIN)/batonbench -quick -baton $(BIN)/baton -kvfloor $(BIN)/kvfloor -peakrss $(BIN)/peakrss

# etcd and etcdctl (Debian's, if missing), baton, the harness and its floor client
bench-tools: build
	./e2e/bench/install-etcd.sh
	cd e2e/bench && $(GO) build -o $(BIN)/batonbench . && CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./cmd/kvfloor ./cmd/kvlist ./cmd/peakrss ./cmd/stamp ./cmd/qworker

## bench-go: the library's Go benchmarks against the raw KV op (benchstat-friendly)
bench-go:
	$(GO) test -run '^$$' -bench . -benchtime 2000x -count 3 ./session/ ./lease/

clean:
	rm -rf $(BIN) $(TOOLS) $(CURDIR)/dist
