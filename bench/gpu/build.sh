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
# Stripped (-s -w: stack traces keep their function names and lines) and gzipped, so that they
# fit the 64 MiB a device call may carry (≈ 25 MB; run.sh unpacks them into a temporary
# directory). Carry out/gpu to the device machine (the device tool's carry: ["out/gpu"]).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${OUT:-$ROOT/out/gpu}"
STUBS="${CUDA_STUBS:-/usr/lib/x86_64-linux-gnu/stubs}"
rm -rf "$OUT" && mkdir -p "$OUT"
export CGO_LDFLAGS="${CGO_LDFLAGS:-} -L$STUBS"
L=(-ldflags '-s -w')
(cd "$ROOT/lib" && go test -c -tags cuda "${L[@]}" -o "$OUT/gpu.test" ./gpu/)
(cd "$ROOT/tools/compressor" && go test -c -tags cuda "${L[@]}" -o "$OUT/compressor-cuda.test" .)
(cd "$ROOT/tools/compressor" && go build -tags cuda "${L[@]}" -o "$OUT/compressor-cuda" .)
(cd "$ROOT/tools/hashsync" && go test -c -tags cuda "${L[@]}" -o "$OUT/hashsync-cuda.test" .)
(cd "$ROOT/tools/hashsync" && go build -tags cuda "${L[@]}" -o "$OUT/hashsync-cuda" .)
(cd "$ROOT/tools/hashsync" && go build "${L[@]}" -o "$OUT/hashsync" .)
gzip -9 "$OUT"/*
ls -la "$OUT" >&2
echo "build.sh: $(du -sh "$OUT" | cut -f1) in $OUT" >&2
