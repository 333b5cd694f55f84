#!/usr/bin/env bash
# bench/sven/run.sh — Sven's asynchronous alltoall (hashsync alltoall --mode async, and scatter)
# against the synchronous pairwise alltoallv (--mode sync) and torch.distributed's
# all_to_all_single (gloo), on the same data, in one run: 4 ranks, the forward alltoall of a DLRM
# step (each rank sends every rank B pooled lookups of width D: 512 × 128 f32 = 256 KiB per
# part), balanced and with one rank arriving late.
#
#   bench/sven/run.sh [--cluster [RATE]] [--no-loopback] [--repeat K] [--late-by SECONDS]
#
#   --cluster [RATE]  also run in the emulated cluster of bench/cluster.sh (default 1gbit; root)
#   --no-loopback     skip the loopback runs
#   --repeat K        alltoalls per run (default 20; the first is warm-up and not reported)
#   --late-by S       how late rank 3 arrives in the skewed runs (default 0.05 s)
#
# Every run: a barrier, rank 3 sleeps (skewed runs), then the alltoall (split sizes, then rows),
# each rank timing from its own arrival to the end of its alltoall. Reported per implementation:
# the median over runs of the slowest rank's time (step), of the mean over ranks, and of the late
# rank's own time (its latency once it arrives).
# Environment: HASHSYNC (default <repo>/bin/hashsync), OUT_DIR (default <repo>/out/bench).
# Output: the table on stdout and in $OUT_DIR/sven-table.txt; raw JSON lines in $OUT_DIR/sven/.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
HASHSYNC="${HASHSYNC:-$ROOT/bin/hashsync}"
PEER="$ROOT/bench/sven/peer.py"
OUT_DIR="${OUT_DIR:-$ROOT/out/bench}"
W="$OUT_DIR/sven"
export PYTHONPATH="$ROOT/clients/python${PYTHONPATH:+:$PYTHONPATH}"
do_loopback=1 do_cluster=0 RATE=1gbit REPEAT=20 LATE=0.05 N=4
while [ $# -gt 0 ]; do
  case "$1" in
    --cluster) do_cluster=1
      if [ $# -gt 1 ] && [[ "$2" != --* ]]; then RATE="$2"; shift; fi ;;
    --no-loopback) do_loopback=0 ;;
    --repeat) [ $# -gt 1 ] || usage; REPEAT="$2"; shift ;;
    --late-by) [ $# -gt 1 ] || usage; LATE="$2"; shift ;;
    *) usage ;;
  esac
  shift
done
[ -x "$HASHSYNC" ] || { log "no $HASHSYNC (make build)"; exit 1; }
mkdir -p "$W/logs" "$W/data"
for ((r = 0; r < N; r++)); do "$PY" "$PEER" gen --rank "$r" --world "$N" >"$W/data/r$r.tw"; done

free_port() {
  local code='import socket,sys; s=socket.socket(); s.bind((sys.argv[1],0)); print(s.getsockname()[1])'
  if [ "$1" = loopback ]; then "$PY" -c "$code" 127.0.0.1; else "$CLUSTER" exec 0 "$PY" -c "$code" 10.99.0.1; fi
}

# one ENV IMPL LATE RESULTS: N ranks of one implementation, JSON lines appended to RESULTS
one() {
  local env="$1" impl="$2" late="$3" results="$4" r master tag
  local -a pre cmd
  tag="$env-$impl-late$late"
  if [ "$env" = loopback ]; then master="127.0.0.1:$(free_port loopback)"; else master="10.99.0.1:$(free_port cluster)"; fi
  log "$tag"
  PIDS=()
  for ((r = 0; r < N; r++)); do
    pre=(); [ "$env" = loopback ] || pre=("$CLUSTER" exec "$r")
    if [ "$impl" = torch ]; then
      cmd=(env "GLOO_SOCKET_IFNAME=$([ "$env" = loopback ] && echo lo || echo eth0)" "$PY" "$PEER" torch
           --rank "$r" --world "$N" --master "$master" --repeat "$REPEAT" --late-rank 3 --late-by "$late")
    else
      cmd=("$HASHSYNC" alltoall --rank "$r" --world "$N" --master "$master" --mode "$impl" --repeat "$REPEAT"
           --barrier --late-rank 3 --late-by "${late}s" --timeout 120s --stats "$W/logs/$tag-r$r.stats")
      [ "$env" = loopback ] || cmd+=(--bind "10.99.0.$((r + 1))" --no-unix)
    fi
    "${pre[@]}" timeout -k 5 600 "${cmd[@]}" <"$W/data/r$r.tw" >"$W/logs/$tag-r$r.out" 2>"$W/logs/$tag-r$r.err" &
    PIDS+=($!)
  done
  wait_ranks
  [ "$WAIT_STATUS" = 0 ] || { log "$tag FAILED"; tail -n 3 "$W/logs/$tag-r"*.err >&2; exit 1; }
  for ((r = 0; r < N; r++)); do
    if [ "$impl" = torch ]; then
      grep '^{' "$W/logs/$tag-r$r.out"
    else
      "$HASHSYNC" dump "$W/logs/$tag-r$r.stats" | "$PY" -c 'import json,sys
for l in sys.stdin:
    d=json.loads(l)
    if d.get("t")=="stats":
        print(json.dumps({"impl":"hashsync-"+d["labels"]["mode"],"rank":d["rank"],"run":int(d["values"]["run"]),"ns":d["values"]["ns"]}))'
    fi
  done | "$PY" -c 'import json,sys
env,late=sys.argv[1],float(sys.argv[2])
for l in sys.stdin:
    d=json.loads(l); d["env"]=env; d["late"]=late; print(json.dumps(d))' "$env" "$late" >>"$results"
}

run_env() {
  local env="$1" results="$W/$1.jsonl" late impl
  : >"$results"
  for late in 0 "$LATE"; do
    for impl in async torch sync scatter; do one "$env" "$impl" "$late" "$results"; done
  done
  "$PY" "$ROOT/bench/sven/table.py" "$results" | tee -a "$OUT_DIR/sven-table.txt"
}

echo "# sven alltoall benchmark $(date -u +%Y-%m-%dT%H:%M:%SZ): $N ranks, 512 x 128 f32 per part, repeat $REPEAT," \
  "host $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" >"$OUT_DIR/sven-table.txt"
[ "$do_loopback" = 1 ] && run_env loopback
if [ "$do_cluster" = 1 ]; then
  cluster_up "$N" "$RATE"
  run_env "cluster-$RATE"
  cluster_down
fi
log "table in $OUT_DIR/sven-table.txt"
