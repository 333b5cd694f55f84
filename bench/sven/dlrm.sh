#!/usr/bin/env bash
# bench/sven/dlrm.sh — Sven's four-stage pipeline on examples/dlrm.py (4 ranks, 8 tables, batch 64
# per rank): samples/s of plain torch model parallelism (torch.distributed all_to_all_single,
# gloo), of Sven's schedule run sequentially (--schedule seq) and pipelined (--schedule pipe),
# staleness 3, alltoalls through `hashsync serve`, in one run; and the measured step times against
# Eq. 6.1 (sequential) and Eq. 6.2 (pipelined) predicted from the stage times the sequential run
# measured (rank 0's means).
#
#   bench/sven/dlrm.sh [--cluster [RATE]] [--no-loopback] [--steps N] [--rounds K]
#
#   --cluster [RATE]  also run in the emulated cluster of bench/cluster.sh (default 1gbit; root)
#   --no-loopback     skip the loopback runs
#   --steps N         training steps per run (default 40; the first is not timed)
#   --rounds K        runs of each configuration, interleaved (default 2); medians reported
# Output: the table on stdout and in $OUT_DIR/sven-dlrm-table.txt; rank 0's JSON in $OUT_DIR/sven-dlrm/.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
OUT_DIR="${OUT_DIR:-$ROOT/out/bench}"
W="$OUT_DIR/sven-dlrm"
export PYTHONPATH="$ROOT/clients/python${PYTHONPATH:+:$PYTHONPATH}" TRAINWIRE_BIN="${TRAINWIRE_BIN:-$ROOT/bin}"
do_loopback=1 do_cluster=0 RATE=1gbit STEPS=40 ROUNDS=2 N=4
while [ $# -gt 0 ]; do
  case "$1" in
    --cluster) do_cluster=1
      if [ $# -gt 1 ] && [[ "$2" != --* ]]; then RATE="$2"; shift; fi ;;
    --no-loopback) do_loopback=0 ;;
    --steps) [ $# -gt 1 ] || usage; STEPS="$2"; shift ;;
    --rounds) [ $# -gt 1 ] || usage; ROUNDS="$2"; shift ;;
    *) usage ;;
  esac
  shift
done
[ -x "$TRAINWIRE_BIN/hashsync" ] || { log "no $TRAINWIRE_BIN/hashsync (make build)"; exit 1; }
mkdir -p "$W"

port() {
  local code='import socket,sys; s=socket.socket(); s.bind((sys.argv[1],0)); print(s.getsockname()[1])'
  if [ "$1" = loopback ]; then "$PY" -c "$code" 127.0.0.1; else "$CLUSTER" exec 0 "$PY" -c "$code" 10.99.0.1; fi
}

# one ENV NAME ARGS...: N ranks of examples/dlrm.py, rank 0's summary appended to $W/ENV.jsonl
one() {
  local env="$1" name="$2" r addr p ifname
  shift 2
  if [ "$env" = loopback ]; then addr=127.0.0.1 ifname=lo; else addr=10.99.0.1 ifname=eth0; fi
  p="$(port "$env")"
  log "$env $name"
  PIDS=()
  for ((r = 0; r < N; r++)); do
    local -a pre=() extra=()
    [ "$env" = loopback ] || { pre=("$CLUSTER" exec "$r"); extra=(--sidecar-args "--bind 10.99.0.$((r + 1)) --no-unix"); }
    "${pre[@]}" env RANK="$r" LOCAL_RANK="$r" WORLD_SIZE="$N" MASTER_ADDR="$addr" MASTER_PORT="$p" \
      GLOO_SOCKET_IFNAME="$ifname" OMP_NUM_THREADS=1 timeout -k 5 600 \
      "$PY" "$ROOT/examples/dlrm.py" --steps "$STEPS" "$@" "${extra[@]}" >"$W/$env-$name-r$r.out" 2>"$W/$env-$name-r$r.err" &
    PIDS+=($!)
  done
  wait_ranks
  [ "$WAIT_STATUS" = 0 ] || { log "$env $name FAILED"; tail -n 5 "$W/$env-$name-r"*.err >&2; exit 1; }
  grep '"summary"' "$W/$env-$name-r0.out" | "$PY" -c 'import json,sys
d=json.loads(sys.stdin.read()); d["config"]=sys.argv[1]; print(json.dumps(d))' "$name" >>"$W/$env.jsonl"
}

run_env() {
  local env="$1" k
  : >"$W/$env.jsonl"
  for ((k = 0; k < ROUNDS; k++)); do
    one "$env" torch --transport torch
    one "$env" seq --schedule seq --staleness 3
    one "$env" pipe --schedule pipe --staleness 3
  done
  echo "## $env, load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT_DIR/sven-dlrm-table.txt"
  "$PY" "$ROOT/bench/sven/dlrm_table.py" "$W/$env.jsonl" | tee -a "$OUT_DIR/sven-dlrm-table.txt"
}

echo "# sven dlrm benchmark $(date -u +%Y-%m-%dT%H:%M:%SZ): $N ranks, $STEPS steps, $ROUNDS rounds," \
  "host $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" >"$OUT_DIR/sven-dlrm-table.txt"
[ "$do_loopback" = 1 ] && run_env loopback
if [ "$do_cluster" = 1 ]; then
  cluster_up "$N" "$RATE"
  run_env "cluster-$RATE"
  cluster_down
fi
log "table in $OUT_DIR/sven-dlrm-table.txt"
