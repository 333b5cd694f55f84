# trainwire — build, test, fuzz, bench, demo, lint.
# `make test` and `make demo` do all set-up on a fresh Debian machine.

SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
GO ?= go
TOOLS := profiler hashsync compressor fuser ckpt straggle
BIN := $(CURDIR)/bin
# Every module of the workspace, as package patterns (go test ./... does
# not work at a go.work root).
PKGS = $(shell $(GO) list -f '{{.Dir}}/...' -m)
FUZZTIME ?= 60s
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X trainwire.dev/lib/cli.Version=$(VERSION)

.PHONY: all deps build test test-go test-python fuzz fuzz-short bench demo lint race clean

all: build

## deps: install the system packages the tests, benchmarks and demo use
deps:
	bash scripts/deps.sh

## build: every tool into bin/
build:
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix trainwire.dev/tools/,$(TOOLS))

## test: unit, property, multi-process and interop tests, then a short fuzz pass
test: deps build test-go test-python fuzz-short

test-go:
	TRAINWIRE_BIN=$(BIN) TRAINWIRE_REQUIRE_PYTHON=1 $(GO) test -count=1 -timeout 15m $(PKGS)

test-python:
	cd clients/python && /usr/bin/python3 -m unittest discover -s tests -t . -v 2>&1 | tail -n 3

## fuzz-short: every fuzz target for a few seconds (CI)
fuzz-short:
	FUZZTIME=5s bash scripts/fuzz.sh

## fuzz: every fuzz target for FUZZTIME (default 60s)
fuzz:
	FUZZTIME=$(FUZZTIME) bash scripts/fuzz.sh

## race: the Go tests under the race detector
race:
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

## bench: every benchmark against its peer (allreduce vs gloo on loopback and in the
## emulated cluster; fuser vs the spec's Python reference; codecs vs torch and memcpy)
bench: deps build
	bash bench/allreduce/run.sh --cluster 1gbit
	/usr/bin/python3 bench/fuser/bench.py --fuser $(BIN)/fuser
	bash bench/compressor/run.sh

## demo: the main job on its embedded default
demo: deps build
	bash pipelines/demo.sh

## lint: formatting and vet
lint:
	@test -z "$$(gofmt -l lib tools)" || { gofmt -l lib tools; echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet $(PKGS)

clean:
	rm -rf $(BIN) out
