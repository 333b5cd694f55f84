#!/usr/bin/env bash
# bench/ckpt/interfere.sh — the delay checkpoint traffic adds to a training allreduce, in the
# emulated cluster (bench/cluster.sh; needs root): 4 hosts on RATE links, one ckpt agent and one
# synthetic trainer per host (compute A, gloo allreduce of GRAD bytes, compute B, then a checkpoint of
# STATE bytes, every iteration, m=2), in the modes none, blocking, async, nopipe (Algorithm 6.2
# interleaving with p=1) and interleave (p=4). Takes /tmp/tw-cluster.lock itself.
#
#   bench/ckpt/interfere.sh [RATE]     (default 200mbit)
#
# Environment: CKPT (default <repo>/bin/ckpt), OUT_DIR, GRAD (4194304), STATE (14680064),
# A and B (0.4 s each), ITERS (10), WARM (6: online profiling of the idle spans runs over the
# first 5), MODES, LIVE (1: the trainers report each allreduce to their agent as it starts and
# ends — `with agent.comm()` — so interleaved chunks pause during it; 0: ticks only, the
# time-based schedule), TIMELINE (set: the agents write --timeline files to OUT_DIR/logs and
# bench/ckpt/timeline.py prints the checkpoint bytes on the links during each allreduce).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
RATE="${1:-200mbit}"
CKPT="${CKPT:-$ROOT/bin/ckpt}"
CL="$CLUSTER"
OUT_DIR="${OUT_DIR:-$ROOT/out/bench}"
GRAD="${GRAD:-4194304}"; STATE="${STATE:-14680064}"; A="${A:-0.4}"; B="${B:-0.4}"
ITERS="${ITERS:-10}"; WARM="${WARM:-6}"
MODES="${MODES:-none blocking async nopipe interleave}"
N=4
mkdir -p "$OUT_DIR/logs"
WORK="$(mktemp -d /tmp/ckpt-interfere.XXXXXX)"
RES="$OUT_DIR/ckpt-interfere.jsonl"; : >"$RES"
on_exit 'rm -rf "$WORK"'
cluster_up "$N" "$RATE"
# B for Algorithm 6.2: the TCP goodput of a shaped link, about 85% of its rate here (LINK_SHARE).
BPS=$(awk -v r="$RATE" -v f="${LINK_SHARE:-0.85}" 'BEGIN{ n=r+0; u=substr(r, length(n "")+1); m=(u=="gbit")?1e9/8:(u=="mbit")?1e6/8:1e3/8; printf "%.0f", n*m*f }')
PEERS=""; for i in $(seq 0 $((N-1))); do PEERS="$PEERS${PEERS:+,}$("$CL" addr "$i"):29700"; done
export TRAINWIRE_TOKEN="interfere-$$"
for mode in $MODES; do
  AG=()
  if [ "$mode" != none ]; then
    extra=(--buffer 4MiB --parts 4)
    case "$mode" in
      nopipe) extra=(--buffer 4MiB --parts 1 --interleave --profile-iters 5 --bandwidth "$BPS" --mu 0.9) ;;
      interleave) extra=(--buffer 4MiB --parts 4 --interleave --profile-iters 5 --bandwidth "$BPS" --mu 0.9) ;;
    esac
    for i in $(seq 0 $((N-1))); do
      rm -f "$WORK/s$i"
      tl=(); if [ -n "${TIMELINE:-}" ]; then rm -f "$OUT_DIR/logs/ckpt-timeline-$mode-$i.jsonl"; tl=(--timeline "$OUT_DIR/logs/ckpt-timeline-$mode-$i.jsonl"); fi
      "$CL" exec "$i" "$CKPT" agent "${tl[@]}" --rank "$i" --world "$N" --run-id interfere --peers "$PEERS" \
        --socket "$WORK/s$i" --m 2 --timeout 60s "${extra[@]}" >"$OUT_DIR/logs/ckpt-interfere-$mode-$i.log" 2>&1 &
      AG+=($!)
    done
    for i in $(seq 0 $((N-1))); do for _ in $(seq 1 200); do [ -S "$WORK/s$i" ] && break; sleep 0.05; done; done
  fi
  TP=()
  MPORT=$((29800 + RANDOM % 100))
  for i in $(seq 0 $((N-1))); do
    "$CL" exec "$i" env GLOO_SOCKET_IFNAME=eth0 timeout 300 $PY "$ROOT/bench/ckpt/interfere.py" --rank "$i" --world "$N" --master "$("$CL" addr 0):$MPORT" \
      --socket "$WORK/s$i" --mode "$mode" --grad "$GRAD" --state "$STATE" --a "$A" --b "$B" --iters "$ITERS" --warm "$WARM" --live "${LIVE:-1}" \
      >"$WORK/out-$mode-$i.json" 2>"$OUT_DIR/logs/ckpt-interfere-$mode-trainer-$i.log" &
    TP+=($!)
  done
  for p in "${TP[@]}"; do wait "$p" || echo "interfere.sh: a $mode trainer failed (see $OUT_DIR/logs)" >&2; done
  for p in "${AG[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  cat "$WORK"/out-"$mode"-*.json >>"$RES"
done
$PY - "$RES" "$RATE" <<'PYEOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows: by.setdefault(r["mode"], []).append(r)
base = statistics.mean(r["iter_s"] for r in by.get("none", [])) if "none" in by else None
r0 = rows[0]
print("interference, 4 hosts on %s links: compute %.2f s, allreduce of %d MB, compute %.2f s; %d MB checkpoint per rank every iteration, m=2" % (
    sys.argv[2], r0["a"], r0["grad"] // 10**6, r0["b"], r0["state"] // 10**6))
print("%-11s %10s %10s %12s %10s" % ("mode", "iter ms", "delay", "allreduce ms", "stall ms"))
for m in ("none", "blocking", "async", "nopipe", "interleave"):
    if m not in by: continue
    it = statistics.mean(r["iter_s"] for r in by[m]); ar = statistics.mean(r["allreduce_s"] for r in by[m])
    st = statistics.mean(r["stall_s"] for r in by[m])
    d = "%+.1f%%" % (100 * (it / base - 1)) if base else "-"
    print("%-11s %10.1f %10s %12.1f %10.1f" % (m, it * 1e3, d, ar * 1e3, st * 1e3))
PYEOF
if [ -n "${TIMELINE:-}" ]; then
  $PY "$ROOT/bench/ckpt/timeline.py" "$RES" "$OUT_DIR/logs" "$(awk -v r="$RATE" 'BEGIN{ n=r+0; u=substr(r, length(n "")+1); m=(u=="gbit")?1e9/8:(u=="mbit")?1e6/8:1e3/8; printf "%.0f", n*m }')"
fi
