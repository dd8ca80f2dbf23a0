# walproxy — every target installs what it needs, idempotently, on a fresh Debian machine.
#   make demo    the main job: a 3-broker cluster with sidecars, a workload, what flowed where
#   make test    every test: unit + the e2e suite on the newest Kafka + the protocol-sensitive
#                e2e files on the older releases still supported (KAFKA_COMPAT)
SHELL := /bin/bash
.DEFAULT_GOAL := help
KAFKA_VERSION ?= 4.4.0
export KAFKA_VERSION
# The Kafka releases `make e2e-matrix` runs the e2e suite on: 3.9.x and 4.0.x (replica Fetch v17)
# and the newest 4.x (replica Fetch v18).
KAFKA_MATRIX ?= 3.9.2 4.0.2 4.4.0
# Test files (vitest filters) the matrix runs on each release; empty: the whole e2e suite.
KAFKA_MATRIX_TESTS ?=
# What `make test` also runs on the older releases (replica Fetch v17, Produce v11/v12): the files
# whose outcome depends on the Kafka version's wire formats. The whole suite on every release is
# `make e2e-matrix` (~35 min here, too long for every run).
KAFKA_COMPAT ?= 3.9.2 4.0.2
KAFKA_COMPAT_TESTS ?= java-perf-tools replication-path replication-mixed replication-zones kcat kafkajs-exactly-once zone-local-routing

STAMP := node_modules/.walproxy-install-stamp
APT_STAMP := .cache/apt-updated

.PHONY: help deps build kafka system-deps zone-deps promtool apt-install helm versitygw jaeger test test-unit e2e e2e-matrix e2e-compat demo bench bench-start bench-pass-through bench-replication bench-zone-local bench-cost bench-soak bench-charts lint format docs clean

help:
	@echo "make demo | test | test-unit | e2e | e2e-matrix | bench | lint | format | clean   (KAFKA_VERSION=$(KAFKA_VERSION))"

# npm packages, exactly as locked; reinstalled only when the lock file changes.
$(STAMP): package-lock.json package.json shared/package.json proxy/package.json e2e/package.json
	npm ci --no-audit --no-fund
	@touch $(STAMP)
deps: $(STAMP)

build: deps
	npx tsc -b shared proxy e2e
	node proxy/bundle.mjs
	npx tsc --noEmit -p deploy

# Stock Apache Kafka from Maven Central into .cache/kafka/$(KAFKA_VERSION)/.
kafka:
	@command -v java >/dev/null || { echo "make: java (17+) is required" >&2; exit 1; }
	@command -v mvn >/dev/null || $(MAKE) --no-print-directory apt-install PKGS=maven
	bash e2e/kafka/fetch-kafka.sh $(KAFKA_VERSION)

# Debian packages the e2e tests use: kcat (librdkafka) as a real client, the three-zone network
# (zone-deps), prometheus to scrape (and its promtool to check the alert rules).
system-deps: zone-deps promtool
	@command -v kcat >/dev/null || $(MAKE) --no-print-directory apt-install PKGS=kcat

# The three-zone network (e2e/src/net/zone-network.ts): iproute2 for the zones' network namespaces,
# nftables to count the bytes between zones in the kernel.
zone-deps:
	@command -v nft >/dev/null || $(MAKE) --no-print-directory apt-install PKGS=nftables
	@command -v ip >/dev/null || $(MAKE) --no-print-directory apt-install PKGS=iproute2

# Debian's prometheus package brings promtool (the unit tests check the alert rules with it).
promtool:
	@command -v promtool >/dev/null && command -v prometheus >/dev/null || $(MAKE) --no-print-directory apt-install PKGS=prometheus

apt-install:
	@SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  if [ ! -f $(APT_STAMP) ]; then $$SUDO apt-get update -qq && mkdir -p .cache && touch $(APT_STAMP); fi; \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(PKGS) >/dev/null

# helm, pinned, built from the Go module proxy into .cache/bin (the chart tests in deploy/test run it);
# skipped when .cache/bin/helm already reports the pinned version.
HELM_VERSION := v3.22.0
helm:
	@if [ "$$(.cache/bin/helm version --template '{{.Version}}' 2>/dev/null)" = "$(HELM_VERSION)" ]; then :; else \
	  command -v go >/dev/null || { echo "make: go is required to build helm" >&2; exit 1; }; \
	  mkdir -p .cache/bin && GOBIN=$(CURDIR)/.cache/bin GOFLAGS=-buildvcs=false nice -n 19 go install \
	    -ldflags '-X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION)' helm.sh/helm/v3/cmd/helm@$(HELM_VERSION); fi

# versitygw (S3 API gateway, posix backend), pinned, built from the Go module proxy into .cache/bin:
# the fast S3 server of the benchmarks and the store front's tests (e2e/src/s3/versitygw.ts).
# Skipped when .cache/bin/versitygw already reports the pinned version (set by -ldflags, as the
# project's own Makefile does; `go install` alone would report "git").
VERSITYGW_VERSION := v1.8.0
versitygw:
	@if [ "$$(.cache/bin/versitygw --version 2>/dev/null | awk '$$1 == "Version" {print $$3}')" = "$(VERSITYGW_VERSION)" ]; then :; else \
	  command -v go >/dev/null || { echo "make: go is required to build versitygw" >&2; exit 1; }; \
	  mkdir -p .cache/bin && GOBIN=$(CURDIR)/.cache/bin GOFLAGS=-buildvcs=false nice -n 19 go install \
	    -ldflags '-X main.Version=$(VERSITYGW_VERSION)' github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION); fi

# Jaeger v2 (OTLP receiver, in-memory store, query API), pinned by e2e/tracing/jaeger-tool/go.mod
# and built from the Go module proxy into .cache/bin for the trace e2e test; skipped when
# .cache/bin/jaeger was built from that version. ~4 min of two cores on a fresh machine.
JAEGER_VERSION := v1.76.0
jaeger:
	@if go version -m .cache/bin/jaeger 2>/dev/null | grep -qE "^\s+mod\s+github.com/jaegertracing/jaeger\s+$(JAEGER_VERSION)\s"; then :; else \
	  command -v go >/dev/null || { echo "make: go is required to build jaeger" >&2; exit 1; }; \
	  mkdir -p .cache/bin && cd e2e/tracing/jaeger-tool && GOFLAGS=-buildvcs=false nice -n 19 go build \
	    -o $(CURDIR)/.cache/bin/jaeger github.com/jaegertracing/jaeger/cmd/jaeger; fi

test: test-unit e2e e2e-compat

e2e-compat:
	$(MAKE) --no-print-directory e2e-matrix KAFKA_MATRIX="$(KAFKA_COMPAT)" KAFKA_MATRIX_TESTS="$(KAFKA_COMPAT_TESTS)"

test-unit: build helm versitygw promtool
	npx vitest run --project unit

e2e: build kafka system-deps versitygw jaeger
	npx vitest run --project e2e

# The e2e suite (or KAFKA_MATRIX_TESTS) once per Kafka release in KAFKA_MATRIX, each on its own
# jars; every release runs even when an earlier one fails, and the target fails if any did.
e2e-matrix: build system-deps versitygw jaeger
	@failed=""; for v in $(KAFKA_MATRIX); do \
	  echo "e2e-matrix: Kafka $$v" >&2; start=$$(date +%s); \
	  if $(MAKE) --no-print-directory kafka KAFKA_VERSION=$$v && KAFKA_VERSION=$$v npx vitest run --project e2e $(KAFKA_MATRIX_TESTS); \
	  then result=passed; else result=FAILED; failed="$$failed $$v"; fi; \
	  echo "e2e-matrix: Kafka $$v $$result in $$(( $$(date +%s) - start )) s" >&2; \
	done; \
	if [ -n "$$failed" ]; then echo "e2e-matrix: failed on$$failed" >&2; exit 1; fi

# As root the demo puts each broker pod in its own zone (network namespaces) and the kernel counts
# what crosses between zones; that needs zone-deps. Elsewhere it runs on one loopback and says so.
demo: build kafka
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory zone-deps; \
	  else echo "make demo: not root, so no network namespaces: the demo runs on one loopback" >&2; fi
	npx tsx e2e/src/demo.ts

bench: build kafka system-deps versitygw
	npx tsx shared/bench/crc32c.bench.ts
	npx tsx shared/bench/fetch-walk.bench.ts
	node --expose-gc --import tsx proxy/bench/batch-index.bench.ts 1000000
	npx tsx proxy/bench/fetch-fill.bench.ts
	npx tsx proxy/bench/frame-relay.bench.ts
	npx tsx e2e/bench/proxy-overhead.bench.ts
	npx tsx e2e/bench/wal-writer.bench.ts
	npx tsx e2e/bench/object-store.bench.ts
	npx tsx e2e/bench/store-front.bench.ts
	$(MAKE) --no-print-directory bench-start
	$(MAKE) --no-print-directory bench-pass-through
	$(MAKE) --no-print-directory bench-replication
	$(MAKE) --no-print-directory bench-zone-local
	$(MAKE) --no-print-directory bench-cost
	$(MAKE) --no-print-directory bench-soak
	$(MAKE) --no-print-directory bench-charts

# SVG charts from the JSON results the benchmarks wrote under .runs/bench/ (those that exist),
# into docs/charts/ (e2e/bench/charts.ts).
bench-charts: deps
	npx tsx e2e/bench/charts.ts

# Spawn to `sidecar ready`, the bundled CLI against the unbundled one, interleaved
# (e2e/bench/sidecar-start.bench.ts); written to .runs/bench/sidecar-start.json.
bench-start: build
	npx tsx e2e/bench/sidecar-start.bench.ts

# Memory soak (issue #12): ~5,000 produce batches/s per broker through WAL topics for SOAK_SECONDS
# (default 600), every sidecar's RSS sampled; written to .runs/bench/soak.json (e2e/bench/soak.bench.ts).
bench-soak: build kafka versitygw
	npx tsx e2e/bench/soak.bench.ts

# walproxy without the WAL against a bare Node socket.pipe() relay on the same ports, one run:
# CPU-seconds per GiB each way, written to .runs/bench/pass-through.json (issue #13).
bench-pass-through: build kafka
	npx tsx e2e/bench/pass-through.bench.ts

# Three zones, three arms in one run (stock, replication only, zone-local): kernel-counted bytes
# between zones per produced GB, and the produce latency zone-local produce adds with S3
# Express-like store latency; written to .runs/bench/zone-local.json (issue #15).
bench-zone-local: build kafka system-deps versitygw
	npx tsx e2e/bench/zone-local.bench.ts

# stock / sidecar inline / WAL on versitygw with S3 Express-like latency / WAL on moto / a bare
# Node pipe in the sidecars' place (the relaying floor), interleaved in one run on the three-zone
# network (root; ~16 min here), written to .runs/bench/replication.json
# (issue #13). Bounded by BENCH_ROUNDS, BENCH_BYTES, BENCH_PHASE_SECONDS (docs/benchmarks.md).
bench-replication: build kafka system-deps versitygw
	npx tsx e2e/bench/replication.bench.ts

# Cost-aware replication (issue #14): 0.1, 1, 10 and 30 MB/s per broker on the three-zone network,
# stock vs the sealing policy at 25 and 50 ms budgets, priced from the sidecars' counters and the
# kernel's byte counts; written to .runs/bench/cost.json. Root (network namespaces).
bench-cost: build kafka system-deps versitygw
	npx tsx e2e/bench/cost.bench.ts

# The import check (scripts/check-imports.mjs): floors (shared/ < proxy/src < cli/), yargs only in
# cli/ and config/, no import circles, no source file over 600 lines; exceptions, each with its
# reason, in scripts/import-allow-list.mjs.
lint: deps
	npx biome check .
	node scripts/check-imports.mjs
	npx tsc -b shared proxy e2e
	npx tsc --noEmit -p deploy

format: deps
	npx biome check --write .

# docs/cli.md from the yargs definitions (proxy/test/cli/cli-docs.test.ts fails when it drifts), and
# the Grafana dashboard and alert rules from their declarations in proxy/src/telemetry/operator-view
# (proxy/test/telemetry/operator-view.test.ts fails when they drift).
docs: deps
	npx tsc -b shared proxy
	node proxy/dist/cli/gen-docs.js
	node proxy/dist/telemetry/operator-view/generate.js

clean:
	rm -rf node_modules */node_modules */dist */*.tsbuildinfo e2e/.runs
