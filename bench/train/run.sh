#!/usr/bin/env bash
# bench/train/run.sh — real PyTorch training (examples/deepfm.py, examples/lm.py, 4 CPU ranks
# under torchrun via pipelines/train.sh) through trainwire's DDP hooks against torch's own, in
# one run: every ratio printed compares runs of this invocation.
#
#   bench/train/run.sh [--quick] [--out DIR] [--sections LIST] [--deepfm-rates LIST]
#                      [--lm-rates LIST] [--deepfm-rows N] [--steps N] [--lm-steps N]
#
#   --quick            a short version: 100k rows, 6 steps, DeepFM at 1gbit only (LM rates as
#                      --lm-rates)
#   --out DIR          output directory (default <repo>/out/bench/train): metrics, wire bytes,
#                      logs, table.txt, train.png
#   --sections LIST    which of deepfm,lm,overhead to run (default all three)
#   --deepfm-rates L   link rates for DeepFM (default 1gbit,100mbit)
#   --lm-rates L       link rates for the LM (default 100mbit)
#   --deepfm-rows N    embedding rows (default 200000; the example's own default is 1M, which at
#                      100 Mbit/s makes a gloo DDP step take ~10 s on this machine)
#   --steps N          DeepFM and overhead steps per run (default 10; the first 3 are warm-up)
#   --lm-steps N       LM steps per run (default 8; the first 3 are warm-up)
#
# Sections (each run is its own torchrun job, one after the other; the emulated cluster of
# bench/cluster.sh is brought up for each cluster run by pipelines/train.sh, under its lock):
#   deepfm    --sync ddp | sparse | hashsync --scheme zen | none, at each DeepFM rate
#   lm        --sync ddp | powersgd | compressor --algo topk --ratio 0.01 --memory residual | none
#   overhead  on loopback: --sync ddp vs --sync hashsync --scheme dense (the ring through the hook)
# Columns (bench/train/table.py): samples/s, ratio to gloo DDP (and to sparse DDP for DeepFM),
# mean step time, communication share (step time minus the `none` run's), gloo's share over
# this run's, final loss and its difference from gloo's, megabytes the hosts sent on their links.
# Env: RUN_TIMEOUT (seconds per run, default 600). Needs root for the cluster. Exit 1 if a run
# failed (the others are still reported).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

OUT="$ROOT/out/bench/train"
SECTIONS=deepfm,lm,overhead
DF_RATES=1gbit,100mbit
LM_RATES=100mbit
ROWS=200000
STEPS=10
LM_STEPS=8
QUICK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --out) [ $# -gt 1 ] || usage; OUT="$2"; shift ;;
    --sections) [ $# -gt 1 ] || usage; SECTIONS="$2"; shift ;;
    --deepfm-rates) [ $# -gt 1 ] || usage; DF_RATES="$2"; shift; DF_RATES_SET=1 ;;
    --lm-rates) [ $# -gt 1 ] || usage; LM_RATES="$2"; shift ;;
    --deepfm-rows) [ $# -gt 1 ] || usage; ROWS="$2"; shift; ROWS_SET=1 ;;
    --steps) [ $# -gt 1 ] || usage; STEPS="$2"; shift; STEPS_SET=1 ;;
    --lm-steps) [ $# -gt 1 ] || usage; LM_STEPS="$2"; shift; LM_STEPS_SET=1 ;;
    -h|--help) usage ;;
    *) usage ;;
  esac
  shift
done
if [ "$QUICK" = 1 ]; then
  [ -n "${ROWS_SET:-}" ] || ROWS=100000
  [ -n "${DF_RATES_SET:-}" ] || DF_RATES=1gbit
  [ -n "${STEPS_SET:-}" ] || STEPS=6
  [ -n "${LM_STEPS_SET:-}" ] || LM_STEPS=6
fi
RUN_TIMEOUT="${RUN_TIMEOUT:-600}"
[ -x "$ROOT/bin/hashsync" ] && [ -x "$ROOT/bin/compressor" ] || { log "build first: make build"; exit 1; }
mkdir -p "$OUT/logs"
rm -f "$OUT"/*.jsonl "$OUT"/*.bytes "$OUT"/runs.txt
FAILED=0

# one TAG RATE SCRIPT ARGS...: one training job (RATE "loopback" or a tc rate), its metrics in
# $OUT/TAG.jsonl, the bytes on the wire in $OUT/TAG.bytes, its log in $OUT/logs/TAG.log
one() {
  local tag="$1" rate="$2" script="$3"; shift 3
  local t0 rc=0
  t0=$(date +%s)
  log "$tag: $script $*${rate:+ ($rate)}"
  if [ "$rate" = loopback ]; then
    TIMEOUT="$RUN_TIMEOUT" bash "$ROOT/pipelines/train.sh" "$ROOT/$script" "$@" \
      --metrics "$OUT/$tag.jsonl" >"$OUT/logs/$tag.log" 2>&1 || rc=$?
  else
    CLUSTER_RATE="$rate" WIRE_BYTES="$OUT/$tag.bytes" TIMEOUT="$RUN_TIMEOUT" \
      bash "$ROOT/pipelines/train.sh" "$ROOT/$script" "$@" \
      --metrics "$OUT/$tag.jsonl" >"$OUT/logs/$tag.log" 2>&1 || rc=$?
  fi
  if [ "$rc" != 0 ]; then
    FAILED=1
    log "$tag FAILED (exit $rc), last lines of $OUT/logs/$tag.log:"
    tail -n 5 "$OUT/logs/$tag.log" | sed 's/^/  /' >&2
  fi
  echo "$tag $rate rc=$rc $(( $(date +%s) - t0 ))s $script $*" >>"$OUT/runs.txt"
}

has() { [[ ",$SECTIONS," == *",$1,"* ]]; }
T0=$(date +%s)
IFS=, read -r -a df_rates <<<"$DF_RATES"
IFS=, read -r -a lm_rates <<<"$LM_RATES"
if has deepfm; then
  for rate in "${df_rates[@]}"; do
    common=(--rows "$ROWS" --steps "$STEPS")
    one "deepfm-$rate-ddp" "$rate" examples/deepfm.py --sync ddp "${common[@]}"
    one "deepfm-$rate-sparse" "$rate" examples/deepfm.py --sync sparse "${common[@]}"
    one "deepfm-$rate-zen" "$rate" examples/deepfm.py --sync hashsync --scheme zen "${common[@]}"
    one "deepfm-$rate-none" "$rate" examples/deepfm.py --sync none "${common[@]}"
  done
fi
if has lm; then
  for rate in "${lm_rates[@]}"; do
    one "lm-$rate-ddp" "$rate" examples/lm.py --sync ddp --steps "$LM_STEPS"
    one "lm-$rate-powersgd" "$rate" examples/lm.py --sync powersgd --steps "$LM_STEPS"
    one "lm-$rate-topk" "$rate" examples/lm.py --sync compressor --algo topk --ratio 0.01 \
      --memory residual --steps "$LM_STEPS"
    one "lm-$rate-none" "$rate" examples/lm.py --sync none --steps "$LM_STEPS"
  done
fi
if has overhead; then
  one "overhead-loopback-ddp" loopback examples/deepfm.py --sync ddp --rows "$ROWS" --steps "$STEPS"
  one "overhead-loopback-dense" loopback examples/deepfm.py --sync hashsync --scheme dense \
    --rows "$ROWS" --steps "$STEPS"
fi
log "runs took $(( $(date +%s) - T0 )) s"
"$PY" "$ROOT/bench/train/table.py" --png "$OUT/train.png" "$OUT" | tee "$OUT/table.txt"
exit "$FAILED"
