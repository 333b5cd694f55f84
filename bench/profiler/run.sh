#!/usr/bin/env bash
# bench/profiler/run.sh — trace parsing: `profiler ingest --count` (the streaming tokenizer and
# the normalization of every event, no output) against Python's json.load of the same file with
# the garbage collector on (the default) and off, all in the same run; then the profiler again
# on a file twice the size, to show its peak memory stays flat.
#
#   bench/profiler/run.sh [SIZE_MB]        (default 1000: a 1 GB trace, and a 2 GB one)
#
# Environment: PROFILER (default <repo>/bin/profiler, built if missing), TMPDIR_BENCH (default
# /tmp; the traces are generated there and deleted at the end, never committed), OUT_DIR
# (default <repo>/out/bench), REPEAT (runs per measurement, best kept; default 1), EXTRA=1 also
# times `profiler summary` on the base file, BASELINE=PATH also times another profiler binary (an
# older build) on the base file and prints the CPU ratio.
#
# Output: a table on stdout — wall-clock MB/s, CPU seconds (user+sys, which the shared machine's
# load does not inflate), peak RSS, and the ratios against json.load gc off / gc on — and the raw
# JSON lines in $OUT_DIR/profiler.jsonl.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY=/usr/bin/python3
SIZE_MB="${1:-1000}"
TMPD="${TMPDIR_BENCH:-/tmp}"
OUT_DIR="${OUT_DIR:-$ROOT/out/bench}"
PROFILER="${PROFILER:-$ROOT/bin/profiler}"
if [[ ! -x "$PROFILER" ]]; then
  PROFILER="$(mktemp -d)/profiler"
  (cd "$ROOT/tools/profiler" && go build -o "$PROFILER" .)
fi
mkdir -p "$OUT_DIR"
A="$TMPD/tw-profiler-bench-${SIZE_MB}.json"
B="$TMPD/tw-profiler-bench-$((2 * SIZE_MB)).json"
trap 'rm -f "$A" "$B"' EXIT
echo "generating $A and $B (synthetic Kineto traces)..." >&2
$PY "$ROOT/bench/profiler/gen_trace.py" "$A" "$SIZE_MB"
$PY "$ROOT/bench/profiler/gen_trace.py" "$B" "$((2 * SIZE_MB))"
$PY "$ROOT/bench/profiler/measure.py" --profiler "$PROFILER" --base "$A" --double "$B" \
  --repeat "${REPEAT:-1}" ${EXTRA:+--extra} ${BASELINE:+--baseline "$BASELINE"} --jsonl "$OUT_DIR/profiler.jsonl"
