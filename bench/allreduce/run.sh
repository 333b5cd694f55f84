#!/usr/bin/env bash
# bench/allreduce/run.sh — allreduce benchmark: trainwire (bin/hashsync check) against PyTorch's
# gloo backend, both measured in the same run, size by size, on loopback and (with --cluster) in
# the emulated cluster of bench/cluster.sh.
#
#   bench/allreduce/run.sh [--cluster [RATE]] [--no-loopback] [--only ours|gloo] [--world W]
#
#   --cluster [RATE]   also run inside an emulated cluster of W hosts with links of RATE
#                      (default 1gbit); needs root. The cluster is created and removed here.
#   --no-loopback      skip the loopback runs
#   --only ours|gloo   run one implementation
#   --world W          ranks (default $WORLD or 4)
#
# Environment: SIZES (default 1MiB,4MiB,16MiB,64MiB,256MiB; 1MiB = 1M = 2^20, 1MB = 10^6),
# WORLD, OURS_FLAGS (extra flags for hashsync check, e.g. --no-unix), OUT_DIR (default
# <repo>/out/bench), HASHSYNC (default <repo>/bin/hashsync), LOOP_BUDGET / CLUSTER_BUDGET
# (bytes allreduced per size and implementation, default 512MiB / 128MiB: iterations =
# budget/size clamped to [MIN_ITERS=2, MAX_ITERS=50]), RUN_TIMEOUT (seconds per launch, 600).
#
# Output: a table on stdout (ratio = gloo time / ours time: > 1 means ours is faster; in the
# cluster, "link%" = the ring bound 2(n-1)/n*M/B over the measured time), raw JSON lines in
# $OUT_DIR/allreduce-<env>.jsonl, rank logs in $OUT_DIR/logs/. Exit 1 if any launch failed or
# any result was incorrect.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
HASHSYNC="${HASHSYNC:-$ROOT/bin/hashsync}"
GLOO="$ROOT/bench/allreduce/gloo_allreduce.py"
TABLE="$ROOT/bench/allreduce/table.py"
SIZES="${SIZES:-1MiB,4MiB,16MiB,64MiB,256MiB}"
WORLD="${WORLD:-4}"
OUT_DIR="${OUT_DIR:-$ROOT/out/bench}"
LOOP_BUDGET="${LOOP_BUDGET:-512MiB}"
CLUSTER_BUDGET="${CLUSTER_BUDGET:-128MiB}"
MIN_ITERS="${MIN_ITERS:-2}"
MAX_ITERS="${MAX_ITERS:-50}"
RUN_TIMEOUT="${RUN_TIMEOUT:-600}"


do_loopback=1
do_cluster=0
RATE=1gbit
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cluster)
      do_cluster=1
      if [ $# -gt 1 ] && [[ "$2" != --* ]]; then RATE="$2"; shift; fi ;;
    --no-loopback) do_loopback=0 ;;
    --only) [ $# -gt 1 ] || usage; only="$2"; shift
            [[ "$only" =~ ^(ours|gloo)$ ]] || usage ;;
    --world) [ $# -gt 1 ] || usage; WORLD="$2"; shift ;;
    -h|--help) usage ;;
    *) usage ;;
  esac
  shift
done
[[ "$WORLD" =~ ^[0-9]+$ ]] && [ "$WORLD" -ge 2 ] || { log "WORLD must be >= 2"; exit 2; }

size_bytes() { "$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import gloo_allreduce as g; print(g.parse_size(sys.argv[2]))' "$ROOT/bench/allreduce" "$1"; }

# --- what runs -------------------------------------------------------------------------------
impls=()
have_ours=0
if [ "$only" != gloo ]; then
  if [ -x "$HASHSYNC" ] && timeout 20 "$HASHSYNC" check --help >/dev/null 2>&1; then
    impls+=(ours); have_ours=1
  else
    log "ours: $HASHSYNC has no 'check' verb yet; measuring gloo only (ours plugs in when it exists)"
  fi
fi
[ "$only" = ours ] || impls+=(gloo)
[ "${#impls[@]}" -gt 0 ] || { log "nothing to run"; exit 1; }

mkdir -p "$OUT_DIR/logs"
FAILED=0

free_port() {  # free_port [HOST_INDEX]: a free TCP port on loopback or on host I's address
  local code='import socket,sys; s=socket.socket(); s.bind((sys.argv[1],0)); print(s.getsockname()[1])'
  if [ $# -eq 0 ]; then
    timeout 20 "$PY" -c "$code" 127.0.0.1
  else
    timeout 20 "$CLUSTER" exec "$1" "$PY" -c "$code" "10.99.0.$(($1 + 1))"
  fi
}

# launch ENV IMPL SIZE ITERS WARMUP RESULTS: W ranks; rank 0's JSON lines go to RESULTS
launch() {
  local env="$1" impl="$2" size="$3" iters="$4" warmup="$5" results="$6"
  local r master tag pid status=0 p
  local -a cmd pre
  if [ "$env" = loopback ]; then master="127.0.0.1:$(free_port)"; else master="10.99.0.1:$(free_port 0)"; fi
  tag="$env-$impl-$size"
  PIDS=()
  for ((r = 0; r < WORLD; r++)); do
    pre=()
    [ "$env" = loopback ] || pre=("$CLUSTER" exec "$r")
    if [ "$impl" = gloo ]; then
      cmd=(env "GLOO_SOCKET_IFNAME=$([ "$env" = loopback ] && echo lo || echo eth0)"
           "$PY" "$GLOO" --rank "$r" --world "$WORLD" --master "$master" --sizes "$size"
           --iters "$iters" --warmup "$warmup" --timeout "$RUN_TIMEOUT")
    else
      cmd=("$HASHSYNC" check --rank "$r" --world "$WORLD" --master "$master" --sizes "$size"
           --iters "$iters" --warmup "$warmup" --format json)
      # in the cluster every rank is a separate host: TCP only (a Unix socket would share
      # the filesystem between namespaces and bypass the shaped links)
      [ "$env" = loopback ] || cmd+=(--bind "10.99.0.$((r + 1))" --no-unix)
      # shellcheck disable=SC2206
      cmd+=(${OURS_FLAGS:-})
    fi
    "${pre[@]}" timeout -k 5 "$RUN_TIMEOUT" "${cmd[@]}" \
      >"$OUT_DIR/logs/$tag-r$r.out" 2>"$OUT_DIR/logs/$tag-r$r.err" </dev/null &
    PIDS+=($!)
  done
  # wait for every rank; the first failure stops the others (no waiting for the timeout)
  local -a pending=("${PIDS[@]}") rest
  while [ "${#pending[@]}" -gt 0 ]; do
    set +e
    wait -n -p pid "${pending[@]}"
    p=$?
    set -e
    rest=()
    for q in "${pending[@]}"; do [ "$q" = "$pid" ] || rest+=("$q"); done
    pending=("${rest[@]}")
    if [ "$p" != 0 ] && [ "$status" = 0 ]; then
      status="$p"
      log "$tag: a rank exited with status $p; stopping the others"
      for q in "${pending[@]}"; do kill -TERM "$q" 2>/dev/null || true; done
    fi
  done
  PIDS=()
  grep '^{' "$OUT_DIR/logs/$tag-r0.out" >>"$results" || true
  if [ "$status" != 0 ] || ! grep -q '^{' "$OUT_DIR/logs/$tag-r0.out"; then
    FAILED=1
    log "$tag FAILED (status $status); last lines of the rank logs:"
    for ((r = 0; r < WORLD; r++)); do tail -n 3 "$OUT_DIR/logs/$tag-r$r.err" 2>/dev/null | sed "s/^/  r$r: /" >&2; done
  elif grep -q '"correct": *false' "$OUT_DIR/logs/$tag-r0.out"; then
    FAILED=1
    log "$tag: result INCORRECT"
  elif [ "$env" != loopback ] && grep -q '"transport": *"\(unix\|mixed\)"' "$OUT_DIR/logs/$tag-r0.out"; then
    FAILED=1
    log "$tag: transport was not tcp inside the cluster: the result did not cross the links"
  fi
}

# run ENV BUDGET: every size, ours then gloo back to back
run_env() {
  local env="$1" budget results size bytes iters warmup impl
  budget="$(size_bytes "$2")"
  results="$OUT_DIR/allreduce-$env.jsonl"
  : >"$results"
  for size in ${SIZES//,/ }; do
    bytes="$(size_bytes "$size")"
    iters=$(( budget / bytes ))
    iters=$(( iters < MIN_ITERS ? MIN_ITERS : iters > MAX_ITERS ? MAX_ITERS : iters ))
    warmup=$(( bytes >= 64 << 20 ? 1 : 2 ))
    for impl in "${impls[@]}"; do
      log "$env: $impl allreduce ${size} x $WORLD ranks, $warmup warmup + $iters iters"
      launch "$env" "$impl" "$size" "$iters" "$warmup" "$results"
    done
  done
  log "$env: raw results in $results"
}

stamp="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
{
  echo "# allreduce benchmark $stamp: world $WORLD, sizes $SIZES, impls ${impls[*]}," \
    "host $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT_DIR/allreduce-table.txt"

if [ "$do_loopback" = 1 ]; then
  log "loopback: load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  run_env loopback "$LOOP_BUDGET"
  "$PY" "$TABLE" --env loopback --world "$WORLD" "$OUT_DIR/allreduce-loopback.jsonl" |
    tee -a "$OUT_DIR/allreduce-table.txt"
fi

if [ "$do_cluster" = 1 ]; then
  cluster_up "$WORLD" "$RATE"
  run_env "cluster-$RATE" "$CLUSTER_BUDGET"
  "$PY" "$TABLE" --env "cluster-$RATE" --world "$WORLD" --rate "$RATE" \
    "$OUT_DIR/allreduce-cluster-$RATE.jsonl" | tee -a "$OUT_DIR/allreduce-table.txt"
  cluster_down
fi

[ "$have_ours" = 1 ] || [ "$only" = gloo ] || log "note: ours was not measured (no 'hashsync check')"
log "table in $OUT_DIR/allreduce-table.txt"
exit "$FAILED"
