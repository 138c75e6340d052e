# iop — build, test and run.
#
# Tools are pinned and installed by this Makefile (no protoc binary needed:
# tools/protogen compiles .proto files in Go).

GO        ?= go
BIN       := bin
PKG       := github.com/iop-gateway/iop
PROTO_SRC := iop/runtime.proto
GOFLAGS_TEST ?= -race -count=1 -timeout 15m

.PHONY: all build test vet unit proto proto-check run fuzz chaos soak bench fleetbench gobench benchstat clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/iop-edge ./cmd/iop-node

vet:
	$(GO) vet ./...

unit:
	$(GO) test $(GOFLAGS_TEST) ./...
	# Scheduler-order and allocation-count tests skip themselves under
	# -race (the race detector shuffles the run queue, and sync.Pool drops
	# a quarter of what is put back); they run here without it.
	$(GO) test -count=1 -run '^Test(Sched|Alloc)' ./nodewire/
	# Linearity tests time a parser at n and at a multiple of n; the race
	# detector's instrumentation swamps what they time, so they skip
	# themselves under -race and run here without it.
	$(GO) test -count=1 -run 'IsLinear' ./gateway/ ./gateway/openaiapi/ ./gateway/anthropicapi/ ./nodeagent/adapter/texttool/

## test: the whole suite (vet, generated-code check, race-enabled tests).
test: vet proto-check unit

## proto: regenerate proto/gen/iop from proto/iop/runtime.proto.
proto:
	cd tools && $(GO) run ./protogen -I ../proto -out .. -module $(PKG) $(PROTO_SRC)

## proto-check: fail when the committed generated code differs from a fresh
## generation.
proto-check:
	@tmp=$$(mktemp -d); \
	(cd tools && $(GO) run ./protogen -I ../proto -out $$tmp -module $(PKG) $(PROTO_SRC)) || exit 1; \
	if ! diff -ru proto/gen/iop $$tmp/proto/gen/iop; then \
		echo "proto/gen/iop is stale: run 'make proto' and commit the result" >&2; rm -rf $$tmp; exit 1; \
	fi; rm -rf $$tmp; echo "proto-check: generated code is up to date"

## run: edge + node + the built-in mock provider on loopback (model "demo").
## Ctrl-C stops both.
# run needs bash for `wait -n`: when either process stops (the edge's port
# taken, a bad config), the other is stopped too and run exits with its
# status, instead of waiting on a node that retries forever.
# The two run in process groups of their own (set -m), so a signal reaches
# each of them exactly once, from the trap: Ctrl-C at a terminal signals
# the whole foreground group, and a second copy from the trap would be
# each binary's "second signal, stop at once", cutting the requests in
# flight that the first is meant to let finish. A further Ctrl-C is
# forwarded as such (the node then stops at once). SIGTERM is forwarded
# once: sent to the group, it comes to this shell twice (make passes its
# own on), and a supervisor that means "now" sends SIGKILL. SIGHUP (the
# terminal closed) stops both too: alone, the edge would take it as a
# reload and outlive the terminal. A signal that comes before both have
# started is kept (pend) and forwarded once they have: lost, it left the
# two running and a second SIGTERM ignored, so make run never stopped.
# Once one has stopped on its own (died), run exits with its status even
# if a signal comes during the teardown: that signal used to turn the
# failure into "stopped on SIG…" and exit 0. While job control is on,
# the shell's own stderr goes to /dev/null (the binaries keep the real
# one, as fd 3): a binary that stopped at once had bash print its job
# line ("[1]- Exit 2 …") beside the binary's own error. Such a job is
# also gone from the job table, so `wait -n` would miss it and wait on
# the other: one already gone is waited for by pid (bash keeps its
# status) before `wait -n`.
run: SHELL := /bin/bash
run: build
	@mkdir -p var
	@echo "edge: http://127.0.0.1:8080  (model: demo)"; \
	sig=; pend=; edge=; node=; \
	fwd() { if [ -z "$$node" ]; then pend=$$1; else pend=; kill -$$1 $$edge $$node 2>/dev/null; fi; }; \
	trap 'sig=INT; fwd INT' INT; \
	trap '[ -n "$$sig" ] || { sig=TERM; fwd TERM; }' TERM; \
	trap '[ -n "$$sig" ] || { sig=HUP; fwd TERM; }' HUP; \
	exec 3>&2 2>/dev/null; \
	set -m; \
	$(BIN)/iop-edge --config configs/edge.yaml 2>&3 3>&- & edge=$$!; \
	$(BIN)/iop-node --config configs/node.yaml 2>&3 3>&- & node=$$!; \
	set +m; \
	exec 2>&3 3>&-; \
	if [ -n "$$pend" ]; then fwd $$pend; fi; \
	status=; for p in $$edge $$node; do \
		if ! kill -0 $$p 2>/dev/null; then wait $$p; status=$$?; break; fi; \
	done; \
	if [ -z "$$status" ]; then wait -n; status=$$?; fi; died=; \
	if [ -z "$$sig" ]; then died=1; kill $$edge $$node 2>/dev/null; fi; \
	until wait; do :; done; \
	if [ -z "$$died" ]; then echo "iop: stopped on SIG$$sig" >&2; exit 0; fi; \
	echo "iop: a process stopped (exit $$status); the other was stopped too" >&2; \
	exit $$status

## fuzz: run each fuzz target for FUZZTIME (default 30s).
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
			echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

## chaos: the long chaos run (a short version runs in make test).
chaos:
	CHAOS_LONG=1 $(GO) test -race -count=1 -timeout 60m -run 'Chaos' -v ./chaos/

## soak: steady mixed load against a loopback stack; DURATION=10m.
DURATION ?= 10m
soak:
	$(GO) run ./chaos/soak -duration $(DURATION)

## bench: latency/throughput against direct, nginx (when installed), tunnel
## and run paths; results to docs/benchmarks.md; then the routing
## strategies on a simulated vLLM fleet (fleetbench).
bench: fleetbench
	$(GO) run ./bench/iopbench -out docs/benchmarks.md

## fleetbench: routing strategies (ordered, least_load, prefix_affinity)
## against round robin on four simulated vLLM backends, and what a Redis
## lease ledger adds per request (needs redis-server); docs/routing.md,
## docs/cluster.md.
FLEETCOUNT ?= 3
fleetbench:
	$(GO) test -run '^$$' -bench Fleet -benchtime 1x -count $(FLEETCOUNT) ./bench/fleetbench/ | tee fleet.txt
	$(GO) test -run '^$$' -bench ClusterLease -benchtime 2000x -count $(FLEETCOUNT) ./bench/fleetbench/ | tee -a fleet.txt

## gobench: the Go benchmarks (framing, dispatch, request parsing, the
## in-process edge+node stack) COUNT times each, to $(BENCHOUT); compare two
## such files with `make benchstat OLD=a.txt NEW=b.txt`.
COUNT ?= 6
BENCHOUT ?= bench.txt
GOBENCH_PKGS = ./nodewire/ ./dispatch/ ./gateway/... ./nodeagent/... ./bench/stackbench/
gobench:
	$(GO) test -run '^$$' -bench . -benchmem -count $(COUNT) $(GOBENCH_PKGS) | tee $(BENCHOUT)

## benchstat: compare two `make gobench` outputs (benchstat pinned in tools/go.mod).
benchstat:
	@test -n "$(OLD)" -a -n "$(NEW)" || { echo "usage: make benchstat OLD=old.txt NEW=new.txt"; exit 2; }
	cd tools && $(GO) tool benchstat $(abspath $(OLD)) $(abspath $(NEW))

clean:
	rm -rf $(BIN) var
