#!/usr/bin/env bash
# bench/gpu/run.sh — on a GPU machine: the CPU/GPU parity tests, then each GPU kernel path
# against PyTorch on the same GPU and against the GPU's memory bandwidth.
#
#   bench/gpu/build.sh          # here, with Go and CUDA headers: writes out/gpu/
#   bench/gpu/run.sh            # there (no Go needed), from the repository root
#
# Environment: SIZES (elements, default 1048576,67108864), ITERS (default 20), RATIO (sparsifiers'
# density, default 0.001 as MSTopK's Fig. 6), ALGOS (default all GPU codecs), ZEN_SIZES (rows for
# Zen's hash partition, default 28000,1048576,16777216; none skips it), BIN (default
# out/gpu), OUT_DIR (default out/bench). Python: $PY (default python3; needs torch with CUDA).
# Exit status: non-zero if a parity test fails. Raw JSON lines: $OUT_DIR/gpu.jsonl.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${BIN:-$ROOT/out/gpu}"
OUT_DIR="${OUT_DIR:-$ROOT/out/bench}"
SIZES="${SIZES:-1048576,67108864}"
ITERS="${ITERS:-20}"
RATIO="${RATIO:-0.001}"
ALGOS="${ALGOS:-}"
export ZEN_SIZES="${ZEN_SIZES:-28000,1048576,16777216}"
PY="${PY:-python3}"
mkdir -p "$OUT_DIR"
# build.sh gzips the binaries (the carry limit): unpack them where they can run
UNPACK="$(mktemp -d)"
trap 'rm -rf "$UNPACK"' EXIT
for b in gpu.test compressor-cuda.test compressor-cuda hashsync-cuda.test hashsync-cuda hashsync; do
  if [[ -f "$BIN/$b.gz" ]]; then
    gunzip -c "$BIN/$b.gz" >"$UNPACK/$b" && chmod +x "$UNPACK/$b"
  elif [[ -x "$BIN/$b" ]]; then
    cp "$BIN/$b" "$UNPACK/$b"
  else
    echo "run.sh: $BIN/$b(.gz) missing: run bench/gpu/build.sh where Go is" >&2; exit 1
  fi
done
BIN="$UNPACK"
nvidia-smi -L >&2 || true
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv >&2 || true

echo "== parity: lib/gpu on the device (emulator and GPU side by side)" >&2
rc=0
(cd "$ROOT/lib/gpu" && "$BIN/gpu.test" -test.v -test.timeout 20m >"$OUT_DIR/gpu-parity.log" 2>&1) || rc=$?
grep -E '^(--- |FAIL|PASS|ok)' "$OUT_DIR/gpu-parity.log" >&2 || true
[[ $rc == 0 ]] || { echo "run.sh: lib/gpu parity FAILED, exit $rc (see $OUT_DIR/gpu-parity.log)" >&2; exit 1; }

echo "== parity: compressor encode --device gpu vs --device cpu" >&2
(cd "$ROOT/tools/compressor" && "$BIN/compressor-cuda.test" -test.v -test.run 'TestDevice' >"$OUT_DIR/compressor-gpu.log" 2>&1) || rc=$?
grep -E '^(--- |FAIL|PASS|ok)' "$OUT_DIR/compressor-gpu.log" >&2 || true
[[ $rc == 0 ]] || { echo "run.sh: compressor --device gpu parity FAILED, exit $rc (see $OUT_DIR/compressor-gpu.log)" >&2; exit 1; }

echo "== parity: hashsync sync --device gpu (ranks 0 and 2 on the GPU, rank 1 on the CPU) vs hashsync ref" >&2
(cd "$ROOT/tools/hashsync" && TRAINWIRE_BIN="$BIN" "$BIN/hashsync-cuda.test" -test.v -test.run 'TestSyncOnDevice|TestDevice' >"$OUT_DIR/hashsync-gpu.log" 2>&1) || rc=$?
grep -E '^(--- |FAIL|PASS|ok)' "$OUT_DIR/hashsync-gpu.log" >&2 || true
[[ $rc == 0 ]] || { echo "run.sh: hashsync --device gpu parity FAILED, exit $rc (see $OUT_DIR/hashsync-gpu.log)" >&2; exit 1; }

echo "== benchmark: SIZES=$SIZES ITERS=$ITERS RATIO=$RATIO" >&2
RAW="$OUT_DIR/gpu.jsonl"
(cd "$ROOT/lib/gpu" && TRAINWIRE_GPU_BENCH=1 TRAINWIRE_GPU_BENCH_SIZES="$SIZES" TRAINWIRE_GPU_BENCH_ITERS="$ITERS" \
  TRAINWIRE_GPU_BENCH_RATIO="$RATIO" TRAINWIRE_GPU_BENCH_ALGOS="$ALGOS" TRAINWIRE_GPU_BENCH_ZEN="$ZEN_SIZES" \
  "$BIN/gpu.test" -test.run 'TestGPUBench$' -test.timeout 30m | grep '^{' >"$RAW")
if "$PY" "$ROOT/bench/gpu/torch_peer.py" "$SIZES" "$ITERS" "$RATIO" "$ALGOS" >>"$RAW"; then :; else
  echo "run.sh: the torch peer did not run (exit $?); the table has no torch column" >&2
fi
"$PY" "$ROOT/bench/gpu/table.py" <"$RAW"
