# Vigil — build, test, demo, bench. `make test` is what CI runs.
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
E2E_TIMEOUT ?= 50m

.PHONY: all build deps test unit e2e fuzz bench bench-go bench-failover bench-clone demo demo-ha demo-shards bench-shards clean vet compat

all: build

# bin/vigil is the daemon and its tools (sandbox, ctl, config); the
# benchmarks are bin/vigil-bench, apart so that the daemon links no
# plotting code (docs/design.md).
build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/vigil ./cmd/vigil
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/vigil-bench ./cmd/vigil-bench

# deps installs what the tests, the demo and the benchmarks need, only when
# something is missing.
deps:
	@scripts/install-deps.sh --check >/dev/null 2>&1 || scripts/install-deps.sh

vet:
	$(GO) vet ./...

# Raw socket I/O is not built with the race detector (rawio_linux.go):
# its tests run once more without it.
unit:
	$(GO) test -race -short -count=1 ./...
	$(GO) test -short -count=1 ./internal/mysqlproto/

# Short fuzz runs of the parsers that face untrusted bytes. Budgets are
# execution counts (about 10 s each here), not durations: with a duration,
# Go 1.26's fuzz coordinator can report a spurious "context deadline
# exceeded" when the deadline hits a starved worker (golang/go#75804,
# fixed in Go 1.27).
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzScan -fuzztime=300000x ./internal/sqlscan/
	$(GO) test -run='^$$' -fuzz=FuzzReadPacket -fuzztime=30000x ./internal/mysqlproto/
	$(GO) test -run='^$$' -fuzz=FuzzHandshakeResponse -fuzztime=100000x ./internal/mysqlproto/
	$(GO) test -run='^$$' -fuzz=FuzzCommands -fuzztime=100000x ./internal/mysqlproto/
	$(GO) test -run='^$$' -fuzz=FuzzChangeUser -fuzztime=100000x ./internal/mysqlproto/
	$(GO) test -run='^$$' -fuzz=FuzzReplies -fuzztime=100000x ./internal/mysqlproto/
	$(GO) test -run='^$$' -fuzz=FuzzSessionCommands -fuzztime=300x ./internal/frontend/

# Every fuzzer for FUZZ_TIME each (default 10m), for a nightly job;
# crashers land in testdata/fuzz as regression seeds (scripts/fuzz-long.sh).
.PHONY: fuzz-long
fuzz-long:
	FUZZ_TIME=$(or $(FUZZ_TIME),10m) scripts/fuzz-long.sh

e2e: build
	VIGIL_E2E_REQUIRE_BROWSER=1 VIGIL_E2E_REQUIRE_DRIVERS=1 VIGIL_E2E_REQUIRE_MTR=1 $(GO) test -count=1 -p 1 -timeout $(E2E_TIMEOUT) ./e2e/ ./internal/monitor/ ./internal/agent/ ./internal/shardmove/

# Drop-in correctness alone (docs/compatibility.md): real client drivers
# (TestDriverCompat) and MariaDB's own test suite (TestMTRCompat), each
# direct and through Vigil; a check that passes direct and fails through
# Vigil fails the target. Results in test-artifacts/<test>/. make e2e runs
# them too.
COMPAT_TESTS ?= TestDriverCompat|TestMTRCompat
compat: deps build
	VIGIL_E2E_REQUIRE_DRIVERS=1 VIGIL_E2E_REQUIRE_MTR=1 $(GO) test -count=1 -p 1 -timeout $(E2E_TIMEOUT) -v -run '^($(COMPAT_TESTS))$$' ./e2e/

test: deps vet build unit fuzz e2e

# The benchmarks (docs/benchmarks.md), bin/vigil-bench measuring bin/vigil:
# a replication sandbox, Vigil and HAProxy; every scenario against direct,
# vigil and haproxy, interleaved; results, report and plots in
# bench/out/<timestamp>/. About 25 minutes on 2 cores; bench-quick under
# 5. BENCH_FLAGS adds options (--scenarios, --threads, --pin-client 0
# --pin-proxy 1 --pin-servers 0-1, ...).
bench: deps build
	bin/vigil-bench $(BENCH_FLAGS)

.PHONY: bench-quick
bench-quick: deps build
	bin/vigil-bench --quick $(BENCH_FLAGS)

# What each durability and HA choice costs (docs/benchmarks.md, "Choosing
# a topology"): standalone durability steps, async, semi-sync and Galera,
# direct and through Vigil; results in bench/out/topology-<timestamp>/.
# About 20 minutes on 2 cores; bench-topology-quick under 5.
# BENCH_TOPOLOGY_FLAGS adds options (--topologies, --threads, --sandbox DIR, ...).
.PHONY: bench-topology bench-topology-quick
bench-topology: deps build
	bin/vigil-bench topology $(BENCH_TOPOLOGY_FLAGS)

bench-topology-quick: deps build
	bin/vigil-bench topology --quick $(BENCH_TOPOLOGY_FLAGS)

# The replica lifecycle (issue 27, docs/benchmarks.md "Cloning a
# replica"): clone throughput through the agents and the daemon against a
# raw mariadb-backup | mbstream pipe, the donor's read qps during a clone
# with and without --rate, and (--self-healing) kill -9 → full
# redundancy. A benchmark, not a test: never part of `make test`. About
# 9 minutes at the default 1 GB and 3 reps on 2 cores; results in
# bench/out/clone-<timestamp>/. BENCH_CLONE_FLAGS adds options (--size-mb
# 300 --reps 2, --rate 50MiB, --self-healing, --keep, ...).
.PHONY: bench-clone
bench-clone: deps build
	bin/vigil-bench clone $(BENCH_CLONE_FLAGS)

# The sharded listener against a cluster's own listener on one tenant
# (issue 28), interleaved: bench/out/shards-<timestamp>/.
# BENCH_SHARDS_FLAGS adds options (--threads 8, --reps 5, ...).
.PHONY: bench-shards
bench-shards: deps build
	bin/vigil-bench shards $(BENCH_SHARDS_FLAGS)

# Micro-benchmarks of the hot path (classifier, framing, routing), with
# allocations.
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/sqlscan/ ./internal/mysqlproto/ ./internal/router/

# Failover timing over several runs: kill -9, SIGSTOP and isolation of
# the primary → first acknowledged write, and the switchover write pause,
# with one Vigil (TestFailoverTiming) and with two coordinated through
# etcd (TestFailoverTimingHA) (docs/failover.md, docs/benchmarks.md).
bench-failover: deps build
	VIGIL_BENCH_FAILOVER=$${RUNS:-5} $(GO) test -count=1 -v -run 'TestFailoverTiming' -timeout 40m ./e2e/ | grep -E 'run [0-9]+:|median|^(ok|FAIL|---)'

# The acceptance soak of issue 13: ten minutes of CPU starvation (40 hog
# processes beside a standalone and a replication sandbox, load average
# 20 and more, clients running flat out through Vigil): no writer loss on
# a healthy primary, no failed write, and a SIGSTOPped replica out of
# routing within 1.5 s each time. `make test` runs the same test for 90 s.
# DURATION=5m shortens it; STARVATION_FLAGS adds VIGIL_STARVATION_HOGS=N
# or VIGIL_STARVATION_HOG=SPIN,PAUSE.
.PHONY: soak-starvation
soak-starvation: deps build
	VIGIL_STARVATION_DURATION=$${DURATION:-10m} $(STARVATION_FLAGS) $(GO) test -count=1 -v -run '^TestMonitorUnderCPUStarvation$$' -timeout 30m ./e2e/

# Randomized compound faults (docs/failover.md, "Chaos testing"): kill -9,
# SIGSTOP and isolation of primaries and replicas, switchovers and their
# overlaps on a 3-node semi-sync sandbox under writes, every invariant
# checked after each round. Not part of `make test`. CHAOS_SEED replays a
# run (its seed is always logged), CHAOS_BUDGET bounds its time (default
# 5m), CHAOS_ROUNDS its rounds. The test timeout is the budget plus 10
# minutes ("5m10m" is a valid Go duration: 15m).
CHAOS_BUDGET ?= 5m
.PHONY: chaos
chaos: deps build
	VIGIL_CHAOS=1 VIGIL_CHAOS_SEED=$(CHAOS_SEED) VIGIL_CHAOS_BUDGET=$(CHAOS_BUDGET) VIGIL_CHAOS_ROUNDS=$(CHAOS_ROUNDS) \
		$(GO) test -count=1 -p 1 -v -run '^TestChaos$$' -timeout $(CHAOS_BUDGET)10m ./e2e/

demo: deps build
	scripts/demo.sh

# Two Vigil instances coordinated through etcd (docs/ha.md).
demo-ha: deps build
	scripts/demo-ha.sh

# Two clusters behind one sharded listener, a tenant moved under load
# (docs/shards.md).
demo-shards: deps build
	scripts/demo-shards.sh

clean:
	rm -rf bin test-artifacts
