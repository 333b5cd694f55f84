#!/usr/bin/env bash
# bench/compressor/codecs.sh — every codec's encoder and decoder as % of memcpy, Go only.
#
#   bench/compressor/codecs.sh                          # this CPU's kernels
#   GODEBUG=cpu.avx512f=off bench/compressor/codecs.sh  # the AVX2 kernels on an AVX-512 host
#   bench/compressor/codecs_table.py BEFORE AFTER       # two builds' RAW files: before → after
#
# Environment: COUNT (repetitions, default 5), ITERS (iterations per repetition, default 5),
# THREADS (GOMAXPROCS, default 2), ALGOS (a regexp of codec names, default all), RAW (a file that
# also gets the raw benchmark lines, appended: codecs_table.py reads several runs' lines at once).
# It runs lib/codec's BenchmarkTable (16 Mi N(0,1) floats, 64 MiB; each iteration times a Go copy
# of the tensor and the codec back to back) COUNT times and prints, per codec, encode and decode
# % of memcpy from the best iterations of all repetitions (STAT=median: the median of each
# repetition's ratio), with the targets of issue 18 (quantizers and sign codecs ≥ 70 % encode,
# every decoder ≥ 50 %).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
COUNT="${COUNT:-5}"
ITERS="${ITERS:-5}"
THREADS="${THREADS:-2}"
ALGOS="${ALGOS:-.}"
echo "codecs: GOMAXPROCS=$THREADS count=$COUNT iters=$ITERS GODEBUG=${GODEBUG:-} $(nproc) CPUs" >&2
cd "$ROOT/lib"
GOMAXPROCS="$THREADS" go test -run '^$' -bench "Table/($ALGOS)/" -benchtime "${ITERS}x" -count "$COUNT" ./codec/ |
  tee -a "${RAW:-/dev/null}" | /usr/bin/python3 "$ROOT/bench/compressor/codecs_table.py"
