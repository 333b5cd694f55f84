#!/usr/bin/env bash
# bench/hashsync/pattern.sh — zen's step traffic with bare TCP and no computation, in the emulated
# cluster (bench/hashsync/pattern.py): the time the network itself takes for the pattern, to set
# beside hashsync's zen step (bench/hashsync/run.sh --cluster) on the same host.
#
#   bench/hashsync/pattern.sh [--rate RATE] [--world N] [--steps S] [-- pattern.py flags, e.g. --pieces 8]
#
# Needs root (the cluster). Output: one JSON line per step from rank 0 on stdout (the first is
# warm-up), then the medians of the rest on stderr.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
RATE=1gbit
WORLD=4
STEPS=11
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) RATE="$2"; shift ;;
    --world) WORLD="$2"; shift ;;
    --steps) STEPS="$2"; shift ;;
    --) shift; break ;;
    -h|--help) usage ;;
    *) log "unknown argument $1"; usage ;;
  esac
  shift
done
cluster_up "$WORLD" "$RATE"
hosts=""
for ((r = 0; r < WORLD; r++)); do hosts+="${hosts:+,}10.99.0.$((r + 1))"; done
out="$(mktemp)"
on_exit "rm -f '$out'"
PIDS=()
for ((r = 0; r < WORLD; r++)); do
  if [ "$r" = 0 ]; then
    timeout -k 5 300 "$CLUSTER" exec "$r" "$PY" "$ROOT/bench/hashsync/pattern.py" --rank "$r" --world "$WORLD" \
      --hosts "$hosts" --steps "$STEPS" "$@" >"$out" &
  else
    timeout -k 5 300 "$CLUSTER" exec "$r" "$PY" "$ROOT/bench/hashsync/pattern.py" --rank "$r" --world "$WORLD" \
      --hosts "$hosts" --steps "$STEPS" "$@" >/dev/null &
  fi
  PIDS+=($!)
done
wait_ranks
cat "$out"
"$PY" - "$out" <<'PY' >&2
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][1:]
if rows:
    print("pattern: %d steps after warm-up: step %.1f ms (median; %.1f-%.1f), every push in %.1f ms (median)" % (
        len(rows), 1e3 * statistics.median(r["step_s"] for r in rows), 1e3 * min(r["step_s"] for r in rows),
        1e3 * max(r["step_s"] for r in rows), 1e3 * statistics.median(r["push_in_s"] for r in rows)))
PY
[ "$WAIT_STATUS" = 0 ]
