#!/usr/bin/env bash
# bench/compressor/run.sh — compressor's codecs against PyTorch on the CPU, same tensor, same run.
#
#   bench/compressor/run.sh
#
# Environment: N (elements, default 67108864 = 64 Mi floats, 256 MiB), THREADS (default 2: both
# torch.set_num_threads and GOMAXPROCS), ITERS (default 5; torch.topk at most 3), SEED (default 1),
# ALGOS (default topk,mstopk,signsgd,efsignsgd,onebit,fp16,bf16,qsgd,terngrad,natural,randomk),
# TORCH_OPS (default: all of torch_ref.py's ops; memcpy_numpy is needed), COMPRESSOR (default
# <repo>/bin/compressor, built if missing — rebuild it after changing lib/codec), OUT_DIR (default
# <repo>/out/bench).
#
# It writes one N(0,1) tensor (numpy, seeded) as a trainwire stream, times torch's ops on it
# (torch_ref.py) and ours (`compressor bench --input`), both with THREADS threads, and prints
# table.py's merge: speedup over torch and the fraction of the memcpy bandwidth measured in the
# same run. Raw JSON lines go to $OUT_DIR/compressor.jsonl.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY=/usr/bin/python3
N="${N:-67108864}"
THREADS="${THREADS:-2}"
ITERS="${ITERS:-5}"
SEED="${SEED:-1}"
ALGOS="${ALGOS:-topk,mstopk,signsgd,efsignsgd,onebit,fp16,bf16,qsgd,terngrad,natural,randomk}"
OUT_DIR="${OUT_DIR:-$ROOT/out/bench}"
COMPRESSOR="${COMPRESSOR:-$ROOT/bin/compressor}"
mkdir -p "$OUT_DIR"
if [[ ! -x "$COMPRESSOR" ]]; then
  COMPRESSOR="$OUT_DIR/compressor"
  (cd "$ROOT/tools/compressor" && go build -o "$COMPRESSOR" .)
fi
T="$OUT_DIR/compressor-tensor.tw"
$PY "$ROOT/bench/compressor/torch_ref.py" gen "$T" "$N" "$SEED"
RAW="$OUT_DIR/compressor.jsonl"
: >"$RAW"
echo "compressor bench: N=$N ($((N * 4 / 1048576)) MiB), threads=$THREADS, iters=$ITERS, $(nproc) CPUs" >&2
$PY "$ROOT/bench/compressor/torch_ref.py" time "$T" "$THREADS" "$ITERS" ${TORCH_OPS:+"$TORCH_OPS"} >>"$RAW"
GOMAXPROCS="$THREADS" "$COMPRESSOR" bench --input "$T" --algos "$ALGOS" --iters "$ITERS" --warmup 1 \
  | "$COMPRESSOR" dump >>"$RAW"
$PY "$ROOT/bench/compressor/table.py" <"$RAW"
rm -f "$T"
