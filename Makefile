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

.PHONY: all deps build test test-go test-race-short test-purego test-python test-demo fuzz fuzz-short bench bench-limits demo lint race clean \
	deps-cuda cuda cuda-test-bins ptx test-cudaemu test-gpu-emu

all: build

## deps: install the system packages the tests, benchmarks and demo use
deps:
	bash scripts/deps.sh

## build: every tool into bin/
build:
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix trainwire.dev/tools/,$(TOOLS))

## test: lint, then unit, property, multi-process and interop tests, then a short fuzz pass
test: deps build lint test-go test-race-short test-purego test-gpu-emu test-python test-demo fuzz-short

## test-go: every Go package; the srun/sbatch tests run against a single-node Slurm cluster that
## scripts/slurm.sh starts for the run and stops after (if it cannot, it prints why and they skip)
test-go:
	@if bash scripts/slurm.sh start >/dev/null; then req=1; else req=0; fi; \
	TRAINWIRE_REQUIRE_SLURM=$$req TRAINWIRE_BIN=$(BIN) TRAINWIRE_REQUIRE_PYTHON=1 $(GO) test -count=1 -timeout 15m $(PKGS); \
	rc=$$?; bash scripts/slurm.sh stop; exit $$rc

## test-race-short: the concurrent hot paths under the race detector (Zen's CAS partitioner, the
## sync schemes: no index lost, and compressor sync's encode-while-exchanging buckets); `make race`
## runs everything
test-race-short:
	cd lib && $(GO) test -race -count=1 ./zen/
	cd tools/hashsync && $(GO) test -race -count=1 ./internal/scheme/
	cd tools/compressor && $(GO) test -race -count=1 ./internal/csync/

## test-purego: the portable build (no unsafe views, as on big-endian hosts) of the packages that
## read and write tensors in byte buffers, against the same tests
test-purego:
	cd lib && $(GO) test -tags purego -count=1 ./tensor/ ./codec/ ./collective/
	cd tools/hashsync && $(GO) test -tags purego -count=1 ./internal/scheme/
	cd tools/straggle && $(GO) test -tags purego -count=1 ./internal/engine/

test-python:
	@log=$$(mktemp); cd clients/python && \
	if TRAINWIRE_BIN=$(BIN) TRAINWIRE_REQUIRE_PYTHON=1 /usr/bin/python3 -m unittest discover -s tests -t . -v > $$log 2>&1; \
	then tail -n 3 $$log; rm -f $$log; else cat $$log; rm -f $$log; exit 1; fi

## test-demo: the demo's short version (loopback, small model), then its promises checked
test-demo:
	@out=$$(mktemp -d); \
	if SHORT=1 OUT=$$out bash pipelines/demo.sh 2> $$out.log; then sed -n '/^trainwire demo/,/^demo: done/p' $$out.log; else cat $$out.log; rm -rf $$out $$out.log; exit 1; fi; \
	/usr/bin/python3 pipelines/check_demo.py $$out; rc=$$?; rm -rf $$out $$out.log; exit $$rc

## fuzz-short: every fuzz target for a few seconds (CI)
fuzz-short:
	FUZZTIME=5s bash scripts/fuzz.sh

## fuzz: every fuzz target for FUZZTIME (default 60s)
fuzz:
	FUZZTIME=$(FUZZTIME) bash scripts/fuzz.sh

## race: the Go tests under the race detector
race:
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

## bench: every benchmark against its peer (allreduce vs gloo on loopback and in the emulated
## cluster; fuser vs the spec's Python reference; codecs vs torch and memcpy; the planner's
## selection time; trace parsing vs json.load; RNA vs blocking allreduce and gloo; hashsync vs
## gloo and torch sparse; the serve sidecar vs check and gloo; checkpoint stall vs torch.save;
## restore from a peer's memory vs torch.load from another host). Needs
## root for the emulated cluster.
bench: deps build
	bash bench/allreduce/run.sh --cluster 1gbit
	/usr/bin/python3 bench/fuser/bench.py --fuser $(BIN)/fuser
	bash bench/compressor/run.sh
	bash bench/compressor/plan.sh
	bash bench/profiler/run.sh
	bash bench/straggle/run.sh
	bash bench/hashsync/run.sh --cluster 1gbit
	bash bench/compressor-sync/run.sh --models resnet101,bert-base
	bash bench/serve/run.sh
	bash bench/ckpt/run.sh
	bash bench/ckpt/interfere.sh 200mbit
	bash bench/ckpt/restore.sh 1gbit
	bash bench/ckpt/persist.sh
	bash bench/train/run.sh

## bench-limits: the performance targets in one run (zen vs its lower bound and torch, the ring vs
## the TCP ceiling and gloo, restore vs the link and torch.load, RNA-H vs RNA): bench/limits/run.sh
bench-limits: deps build
	bash bench/limits/run.sh

## demo: the main job on its embedded default
demo: deps build
	bash pipelines/demo.sh

## lint: formatting, vet, and every module's go.mod and go.sum tidy on its own (GOWORK=off: a
## tool module must build outside the workspace too, through its replace of ../../lib)
lint:
	@test -z "$$(gofmt -l lib tools)" || { gofmt -l lib tools; echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet $(PKGS)
	@for m in lib $(addprefix tools/,$(TOOLS)); do \
	  (cd $$m && GOWORK=off $(GO) mod tidy -diff) || { echo "lint: $$m: go.mod/go.sum not tidy (run: cd $$m && GOWORK=off go mod tidy)"; exit 1; }; \
	done

## deps-cuda: CUDA 11.8 toolkit, headers and link stub from Debian non-free (large; not part of `make test`)
deps-cuda:
	bash scripts/deps-cuda.sh

CUDA_STUBS ?= /usr/lib/x86_64-linux-gnu/stubs

## cuda: the CUDA builds of the GPU tools (bin/compressor-cuda, bin/hashsync-cuda); docs/gpu.md
cuda: deps-cuda
	@mkdir -p $(BIN)
	CGO_LDFLAGS="-L$(CUDA_STUBS)" $(GO) build -tags cuda -ldflags '$(LDFLAGS)' -o $(BIN)/compressor-cuda trainwire.dev/tools/compressor
	CGO_LDFLAGS="-L$(CUDA_STUBS)" $(GO) build -tags cuda -ldflags '$(LDFLAGS)' -o $(BIN)/hashsync-cuda trainwire.dev/tools/hashsync
	cd lib && CGO_LDFLAGS="-L$(CUDA_STUBS)" $(GO) vet -tags cuda ./gpu/
	cd tools/hashsync && CGO_LDFLAGS="-L$(CUDA_STUBS)" $(GO) vet -tags cuda .
	cd tools/compressor && CGO_LDFLAGS="-L$(CUDA_STUBS)" $(GO) vet -tags cuda .

## cuda-test-bins: what bench/gpu/run.sh needs on a GPU machine (which has no Go), into out/gpu/
cuda-test-bins: deps-cuda
	bash bench/gpu/build.sh

## ptx: regenerate lib/gpu/kernels/*.ptx from the CUDA C (needs nvcc)
ptx: deps-cuda
	cd lib && $(GO) generate ./gpu/

## test-gpu-emu: the tools' --device gpu paths end to end (hashsync sync, compressor encode) with
## the GPU kernels' CUDA C run on the CPU (-tags cudaemu; part of `make test`, ~15 s)
test-gpu-emu:
	cd tools/hashsync && $(GO) test -tags cudaemu -count=1 -run 'TestSyncOnDevice|TestDevice' .
	cd tools/compressor && $(GO) test -tags cudaemu -count=1 -run 'TestDevice' .

## test-cudaemu: lib/gpu's CUDA C run on the CPU (g++, one fiber per CUDA thread; ~3 min), then
## test-gpu-emu
test-cudaemu: test-gpu-emu
	cd lib && $(GO) test -tags cudaemu -run CUDAEmu ./gpu/

clean:
	rm -rf $(BIN) out
