#!/usr/bin/env bash
# bench/gpu/build.sh — builds, on a machine with Go and the CUDA headers (scripts/deps-cuda.sh),
# everything bench/gpu/run.sh needs on the GPU machine (which has no Go), into out/gpu/:
#   gpu.test              lib/gpu's tests (parity on the device, TestGPUBench)   go test -c -tags cuda
#   compressor-cuda.test  tools/compressor's tests (TestDeviceGPUParity)         go test -c -tags cuda
#   compressor-cuda       the CUDA build of compressor                           go build -tags cuda
#   hashsync-cuda.test    tools/hashsync's tests (TestSyncOnDevice)              go test -c -tags cuda
#   hashsync-cuda         the CUDA build of hashsync                             go build -tags cuda
#   hashsync              the plain build (the test's CPU rank, gen and ref)     go build
# Linked against the link stub libcuda.so (the driver's libcuda.so.1 is loaded at run time).
# Carry out/gpu to the device machine (the device tool's carry: ["out/gpu"]).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${OUT:-$ROOT/out/gpu}"
STUBS="${CUDA_STUBS:-/usr/lib/x86_64-linux-gnu/stubs}"
mkdir -p "$OUT"
export CGO_LDFLAGS="${CGO_LDFLAGS:-} -L$STUBS"
(cd "$ROOT/lib" && go test -c -tags cuda -o "$OUT/gpu.test" ./gpu/)
(cd "$ROOT/tools/compressor" && go test -c -tags cuda -o "$OUT/compressor-cuda.test" .)
(cd "$ROOT/tools/compressor" && go build -tags cuda -o "$OUT/compressor-cuda" .)
(cd "$ROOT/tools/hashsync" && go test -c -tags cuda -o "$OUT/hashsync-cuda.test" .)
(cd "$ROOT/tools/hashsync" && go build -tags cuda -o "$OUT/hashsync-cuda" .)
(cd "$ROOT/tools/hashsync" && go build -o "$OUT/hashsync" .)
ls -la "$OUT" >&2
