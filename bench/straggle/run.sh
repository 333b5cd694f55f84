#!/usr/bin/env bash
# bench/straggle/run.sh — straggler benchmark: RNA (straggle sync --mode rna) against our blocking
# ring allreduce (--mode allreduce), Prague-style random groups (--mode groups) and PyTorch's gloo
# allreduce, all in the same run, 4 ranks on loopback, rank 0 optionally 4x slower.
#
#   bench/straggle/run.sh [--world W] [--slow S] [--rounds R] [--dim D]
#
# Two parts:
#   1. Round time: every rank computes COMPUTE + U(0, DELAY) per iteration (a sleep), rank 0 S times
#      slower in the straggler case; each implementation runs R rounds of a D-element gradient.
#      Targets (issue 8): RNA's round time with the straggler within 1.3x of RNA's without it,
#      and blocking allreduce (ours and gloo) >= 3x slower than RNA with the straggler.
#   2. Time to target loss on the seed's quadratic toy (f = ½|x|², D=20, sigma=1, lr=0.01, target 0.5),
#      with the straggler, for SEEDS seeds: RNA vs our allreduce vs gloo.
#   3. The same with two speed classes (ranks 2,3 HET_SLOW times slower): RNA vs rna-h (fast/slow groups,
#      the parameter server adding each group's progress every 5 rounds of a group) vs our allreduce.
#
# Environment: STRAGGLE (default: built from source into a temp dir), COMPUTE (20ms), DELAY (20ms),
# SEEDS (3), HET_SLOW (8: part 3's slowdown, large enough that the ζ > v rule splits the groups),
# PARTS ("1 2 3": which parts to run; the table shows every part whose reports are in OUT_DIR,
# from this run or an earlier one),
# OUT_DIR (<repo>/out/bench). Output: a table on stdout, JSON reports in $OUT_DIR/straggle/.
# Loopback only (no cluster), so no lock on the shared emulated cluster is needed; the machine's
# other load shows in the absolute times, the ratios are measured in the same run.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY=/usr/bin/python3
WORLD=4 SLOW=4 ROUNDS=200 DIM=262144
COMPUTE="${COMPUTE:-20ms}" DELAY="${DELAY:-20ms}" SEEDS="${SEEDS:-3}" HET_SLOW="${HET_SLOW:-8}"
PARTS="${PARTS:-1 2 3}"
OUT_DIR="${OUT_DIR:-$ROOT/out/bench}/straggle"
while [ $# -gt 0 ]; do
  case "$1" in
    --world) WORLD="$2"; shift ;;
    --slow) SLOW="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --dim) DIM="$2"; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$OUT_DIR"
if [ -z "${STRAGGLE:-}" ]; then
  tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
  (cd "$ROOT/tools/straggle" && go build -o "$tmp/" .)
  STRAGGLE="$tmp/straggle"
fi
port() { echo $((20000 + RANDOM % 30000)); }
ms() { echo "${1%ms}"; }

# ours MODE NAME SLOWFACTOR EXTRA...: run WORLD ranks, leave rank 0's report in $OUT_DIR/NAME.json
ours() {
  local mode=$1 name=$2 s=$3; shift 3
  local p; p=$(port) pids=()
  for ((r = 0; r < WORLD; r++)); do
    "$STRAGGLE" sync --mode "$mode" --rank $r --world "$WORLD" --master 127.0.0.1:$p --toy quadratic --emit none \
      --compute "$COMPUTE" --delay "uniform:0ms,$DELAY" --slow "k=1,s=$s" --report "$OUT_DIR/$name-r$r.json" "$@" \
      2> "$OUT_DIR/$name-r$r.log" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
}
gloo() {
  local name=$1 s=$2; shift 2
  local p; p=$(port) pids=()
  for ((r = 0; r < WORLD; r++)); do
    "$PY" "$ROOT/bench/straggle/gloo_toy.py" --rank $r --world "$WORLD" --port $p --compute-ms "$(ms "$COMPUTE")" \
      --delay-ms "$(ms "$DELAY")" --slow "$s" "$@" > "$OUT_DIR/$name-gloo-r$r.out" 2> "$OUT_DIR/$name-gloo-r$r.log" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  cp "$OUT_DIR/$name-gloo-r0.out" "$OUT_DIR/$name-r0.json"
}

if [[ " $PARTS " == *" 1 "* ]]; then
echo "run.sh: part 1, round time: $WORLD ranks, $ROUNDS rounds of $DIM float32, compute $COMPUTE + U(0,$DELAY), rank 0 x$SLOW" >&2
ours rna rna-even 1 --rounds "$ROUNDS" --dim "$DIM"
ours rna rna-slow "$SLOW" --rounds "$ROUNDS" --dim "$DIM"
ours allreduce ar-even 1 --rounds "$ROUNDS" --dim "$DIM"
ours allreduce ar-slow "$SLOW" --rounds "$ROUNDS" --dim "$DIM"
ours groups groups-slow "$SLOW" --rounds "$ROUNDS" --dim "$DIM"
gloo gloo-even 1 --rounds "$ROUNDS" --dim "$DIM"
gloo gloo-slow "$SLOW" --rounds "$ROUNDS" --dim "$DIM"

fi
if [[ " $PARTS " == *" 2 "* ]]; then
echo "run.sh: part 2, time to loss 0.5 on the quadratic toy (D=20), rank 0 x$SLOW, $SEEDS seeds" >&2
for ((s = 1; s <= SEEDS; s++)); do
  ours rna toy-rna-$s "$SLOW" --dim 20 --target-loss 0.5 --seed $s
  ours allreduce toy-ar-$s "$SLOW" --dim 20 --target-loss 0.5 --seed $s
  gloo toy-gloo-$s "$SLOW" --rounds 100000 --dim 20 --target-loss 0.5 --seed $s
done

fi
if [[ " $PARTS " == *" 3 "* ]]; then
echo "run.sh: part 3, deterministic heterogeneity: ranks 2,3 x$HET_SLOW, time to loss 0.5: rna vs rna-h vs allreduce" >&2
for ((s = 1; s <= SEEDS; s++)); do
  ours rna het-rna-$s 1 --dim 20 --target-loss 0.5 --seed $s --slow "ranks=2,3,s=$HET_SLOW"
  ours rna-h het-rnah-$s 1 --dim 20 --target-loss 0.5 --seed $s --slow "ranks=2,3,s=$HET_SLOW" --ps-period 5
  ours allreduce het-ar-$s 1 --dim 20 --target-loss 0.5 --seed $s --slow "ranks=2,3,s=$HET_SLOW"
done

fi
"$PY" - "$OUT_DIR" "$SEEDS" "$SLOW" "$HET_SLOW" "$WORLD" <<'PY'
import json, os, sys
d, seeds, slow, het, world = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
def rep(n, r=0): return json.load(open(f"{d}/{n}-r{r}.json"))
def first_to_target(n):
    """When the first replica reached the target (what stops the run; rna-h's groups hold different models)."""
    ts = [rep(n, r)["time_to_target_s"] for r in range(world)]
    ts = [t for t in ts if t >= 0]
    return min(ts) if ts else float("nan")
def have(n): return os.path.exists(f"{d}/{n}-r0.json")
tt = {}
if have("rna-even"):
    rows = [("RNA (q=2), no straggler", "rna-even"), (f"RNA (q=2), rank 0 x{slow}", "rna-slow"),
            ("ours allreduce, no straggler", "ar-even"), (f"ours allreduce, rank 0 x{slow}", "ar-slow"),
            ("gloo allreduce, no straggler", "gloo-even"), (f"gloo allreduce, rank 0 x{slow}", "gloo-slow"),
            (f"groups (size 2), rank 0 x{slow}", "groups-slow")]
    base = rep("rna-even")["round_ms_mean"]
    rs = rep("rna-slow")["round_ms_mean"]
    print(f"{'run':34s} {'round ms mean':>14s} {'p50':>8s} {'Σw/round':>9s} {'vs RNA slow':>12s}")
    for label, n in rows:
        r = rep(n)
        print(f"{label:34s} {r['round_ms_mean']:14.2f} {r['round_ms_p50']:8.2f} {r['contributors_mean']:9.2f} {r['round_ms_mean']/rs:11.2f}x")
    print(f"\nRNA with straggler / RNA without: {rs/base:.2f}x (target <= 1.3x)")
    print(f"ours allreduce with straggler / RNA with straggler: {rep('ar-slow')['round_ms_mean']/rs:.2f}x (target >= 3x)")
    print(f"gloo allreduce with straggler / RNA with straggler: {rep('gloo-slow')['round_ms_mean']/rs:.2f}x (target >= 3x)")
if have("toy-rna-1"):
    print(f"\ntime to loss 0.5 (toy, rank 0 x{slow}), mean of {seeds} seeds:")
    for impl in ("rna", "ar", "gloo"):
        xs = [rep(f"toy-{impl}-{s}") for s in range(1, seeds + 1)]
        t = [x["time_to_target_s"] for x in xs]
        k = [x["rounds_to_target"] for x in xs]
        tt[impl] = sum(t) / len(t)
        print(f"  {impl:5s} {tt[impl]:7.3f} s  rounds {sum(k)/len(k):6.1f}  per seed {['%.3f' % v for v in t]}")
    print(f"  speedup of RNA: {tt['ar']/tt['rna']:.2f}x over ours allreduce, {tt['gloo']/tt['rna']:.2f}x over gloo")
if have("het-rna-1"):
    print(f"\ntime to loss 0.5 (toy, ranks 2,3 x{het}: two speed classes), mean of {seeds} seeds:")
    for impl in ("rna", "rnah", "ar"):
        t = [first_to_target(f"het-{impl}-{s}") for s in range(1, seeds + 1)]
        tt[impl] = sum(t) / len(t)
        print(f"  {impl:5s} {tt[impl]:7.3f} s  per seed {['%.3f' % v for v in t]}")
    print(f"  speedup over ours allreduce: rna {tt['ar']/tt['rna']:.2f}x, rna-h {tt['ar']/tt['rnah']:.2f}x; rna-h over rna {tt['rna']/tt['rnah']:.2f}x")
PY
