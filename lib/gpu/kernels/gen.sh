#!/usr/bin/env bash
# Regenerates lib/gpu/kernels/*.ptx from the CUDA C next to them (run by
# `go generate ./gpu/` in lib, or directly). The PTX is committed so that
# building with -tags cuda needs no nvcc; the driver JIT-compiles it for the
# GPU at load time (compute_70 PTX runs on Volta and every later GPU,
# H100/H200 included).
#
#   nvcc -ptx -arch=compute_70 -fmad=false -O3 -std=c++14 X.cu -o X.ptx
#
# -fmad=false: no a*b+c is contracted into an FMA, so float arithmetic
# rounds step by step exactly as lib/codec's Go code does.
# SOURCES.sha256 records the sources the PTX was built from; a test in
# lib/gpu fails when a .cu or .cuh changes without regenerating.
set -euo pipefail
cd "$(dirname "$0")"
NVCC=${NVCC:-nvcc}
command -v "$NVCC" >/dev/null || { echo "gen.sh: nvcc not found (scripts/deps-cuda.sh installs it)" >&2; exit 1; }
for cu in *.cu; do
  "$NVCC" -ptx -arch=compute_70 -fmad=false -O3 -std=c++14 "$cu" -o "${cu%.cu}.ptx"
done
"$NVCC" --version | tail -1 > NVCC_VERSION
sha256sum *.cu *.cuh > SOURCES.sha256
echo "gen.sh: $(ls *.ptx | tr '\n' ' ')" >&2
