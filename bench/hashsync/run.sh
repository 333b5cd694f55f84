#!/usr/bin/env bash
# bench/hashsync/run.sh — sparse gradient synchronization: hashsync sync (zen and every baseline
# scheme) against three torch.distributed (gloo) peers on the same data, in one run, on loopback
# and (with --cluster) in the emulated cluster of bench/cluster.sh.
#
#   bench/hashsync/run.sh [--cluster [RATE]] [--no-loopback] [--worlds LIST] [--steps S]
#
#   --cluster [RATE]  also run in an emulated cluster with links of RATE (default 1gbit); needs
#                     root; takes /tmp/tw-cluster.lock for the whole up ... down sequence.
#   --no-loopback     skip the loopback runs
#   --worlds LIST     world sizes of the scheme table (default 2,4,8); the torch comparison
#                     always runs at 4 ranks
#   --steps S         iterations per run of the scheme table (default 6; the first is warm-up and
#                     not reported); the torch comparison runs 2S−1 iterations
#
# Workload: `hashsync gen --preset deepfm` (1M rows × 16 float32, 2.8% of the rows per rank,
# Zipf(1.0) rows: the hot rows are shared across ranks), one file per rank.
# Comparison (4 ranks): zen (sparse and dense result) against torch gloo all_reduce of the dense
# tensor, AGsparse (all_gather of COO), and torch's sparse all_reduce of a row-sparse
# sparse_coo_tensor, each with a sparse and a dense result (bench/hashsync/torch_peers.py).
# Table: every hashsync scheme at each world size: median step time and payload bytes received
# per rank, next to the closed form of `hashsync model`.
#
# Environment: HASHSYNC (default <repo>/bin/hashsync), OUT_DIR (default <repo>/out/bench),
# RUN_TIMEOUT (seconds per launch, 600), SCHEMES (default: all), OURS_FLAGS (more `hashsync sync`
# flags for every run of ours), PROFILE=1 (each of ours' ranks
# writes a Go CPU profile, $OUT_DIR/hashsync/logs/TAG-rR.pprof).
# Output: tables on stdout and in $OUT_DIR/hashsync-table.txt; raw JSON lines in
# $OUT_DIR/hashsync/; rank logs in $OUT_DIR/hashsync/logs. Exit 1 if a launch failed.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
HASHSYNC="${HASHSYNC:-$ROOT/bin/hashsync}"
PEERS="$ROOT/bench/hashsync/torch_peers.py"
TABLE="$ROOT/bench/hashsync/table.py"
OUT_DIR="${OUT_DIR:-$ROOT/out/bench}"
W="$OUT_DIR/hashsync"
RUN_TIMEOUT="${RUN_TIMEOUT:-600}"
SCHEMES="${SCHEMES:-zen bp-coo agsparse sparcml sparse-ps omnireduce hitopk dense auto}"


do_loopback=1
do_cluster=0
RATE=1gbit
WORLDS=2,4,8
STEPS=6
while [ $# -gt 0 ]; do
  case "$1" in
    --cluster) do_cluster=1
      if [ $# -gt 1 ] && [[ "$2" != --* ]]; then RATE="$2"; shift; fi ;;
    --no-loopback) do_loopback=0 ;;
    --worlds) [ $# -gt 1 ] || usage; WORLDS="$2"; shift ;;
    --steps) [ $# -gt 1 ] || usage; STEPS="$2"; shift ;;
    -h|--help) usage ;;
    *) usage ;;
  esac
  shift
done
[ -x "$HASHSYNC" ] || { log "no $HASHSYNC (build it: go build -o bin/ trainwire.dev/tools/hashsync)"; exit 1; }


mkdir -p "$W/logs"
FAILED=0

# data N [STEPS [DIR]]: one deepfm stream per rank
data() {
  local n="$1" steps="${2:-$STEPS}" d="$W/data/${3:-n$1}" r
  mkdir -p "$d"
  for ((r = 0; r < n; r++)); do
    [ -s "$d/r$r.tw" ] && continue
    "$HASHSYNC" gen --preset deepfm --rank "$r" --world "$n" --steps "$steps" --seed 1 >"$d/r$r.tw"
  done
}

free_port() {
  local code='import socket,sys; s=socket.socket(); s.bind((sys.argv[1],0)); print(s.getsockname()[1])'
  if [ "$1" = loopback ]; then timeout 20 "$PY" -c "$code" 127.0.0.1
  else timeout 20 "$CLUSTER" exec 0 "$PY" -c "$code" 10.99.0.1; fi
}

# launch ENV N TAG KIND ARGS...: N ranks of KIND (ours: hashsync sync ARGS; torch: peers ARGS)
launch() {
  local env="$1" n="$2" tag="$3" kind="$4"; shift 4
  local r master p pid status=0
  local -a pre cmd pending rest
  if [ "$env" = loopback ]; then master="127.0.0.1:$(free_port loopback)"; else master="10.99.0.1:$(free_port cluster)"; fi
  PIDS=()
  for ((r = 0; r < n; r++)); do
    pre=()
    [ "$env" = loopback ] || pre=("$CLUSTER" exec "$r")
    if [ "$kind" = ours ]; then
      cmd=("$HASHSYNC" sync --rank "$r" --world "$n" --master "$master" --barrier --timeout 120s
           --stats "$W/logs/$tag-r$r.stats" "$@")
      # shellcheck disable=SC2206
      cmd+=(${OURS_FLAGS:-})
      [ "$env" = loopback ] || cmd+=(--bind "10.99.0.$((r + 1))" --no-unix)
      [ "${PROFILE:-0}" = 1 ] && cmd+=(--cpu-profile "$W/logs/$tag-r$r.pprof")
    else
      cmd=(env "GLOO_SOCKET_IFNAME=$([ "$env" = loopback ] && echo lo || echo eth0)"
           "$PY" "$PEERS" --rank "$r" --world "$n" --master "$master" "$@")
    fi
    # our results go to /dev/null (their stats carry the times and bytes)
    local out="$W/logs/$tag-r$r.out"
    [ "$kind" = ours ] && out=/dev/null
    "${pre[@]}" timeout -k 5 "$RUN_TIMEOUT" "${cmd[@]}" <"$W/data/${DATA:-n$n}/r$r.tw" \
      >"$out" 2>"$W/logs/$tag-r$r.err" &
    PIDS+=($!)
  done
  wait_ranks
  status=$WAIT_STATUS
  if [ "$status" != 0 ]; then
    FAILED=1
    log "$tag FAILED (status $status)"
    for ((r = 0; r < n; r++)); do tail -n 2 "$W/logs/$tag-r$r.err" 2>/dev/null | sed "s/^/  r$r: /" >&2; done
    return 0
  fi
}

# ours ENV N SCHEME FORM RESULTS: one run of hashsync sync; stats of every rank → RESULTS
ours() {
  local env="$1" n="$2" scheme="$3" form="$4" results="$5" tag r
  tag="$env-n$n-$scheme-$form${DATA:+-$DATA}"
  log "$tag"
  launch "$env" "$n" "$tag" ours --scheme "$scheme" --output "$form"
  for ((r = 0; r < n; r++)); do
    [ -s "$W/logs/$tag-r$r.stats" ] || continue
    "$HASHSYNC" dump "$W/logs/$tag-r$r.stats" |
      "$PY" -c 'import json,sys
env,n,form,scheme,set_=sys.argv[1],int(sys.argv[2]),sys.argv[3],sys.argv[4],sys.argv[5]
for l in sys.stdin:
    d=json.loads(l)
    if d.get("t")=="stats":
        print(json.dumps({"env":env,"world":n,"form":form,"impl":"hashsync-"+scheme,"set":set_,
              "choice":d["labels"].get("choice",""),"scheme":d["labels"].get("scheme",""),"rank":d["rank"],"step":d["step"],"values":d["values"]}))' "$env" "$n" "$form" "$scheme" "${DATA:+cmp}" >>"$results"
  done
}

torch_peer() {
  local env="$1" n="$2" impl="$3" results="$4" tag r
  tag="$env-n$n-torch-$impl"
  log "$tag"
  launch "$env" "$n" "$tag" torch --impl "$impl" /dev/stdin
  "$PY" -c 'import json,sys
env=sys.argv[1]
for l in open(sys.argv[2]):
    if l.startswith("{"):
        d=json.loads(l); d["env"]=env; print(json.dumps(d))' "$env" "$W/logs/$tag-r0.out" >>"$results"
}

run_env() {
  local env="$1" results="$W/$1.jsonl" n s
  : >"$results"
  # the comparison: more steps, ours and the peers interleaved, on its own data
  data 4 $((2 * STEPS - 1)) cmp4
  DATA=cmp4
  ours "$env" 4 zen sparse "$results"
  torch_peer "$env" 4 sparse "$results"
  torch_peer "$env" 4 dense "$results"
  ours "$env" 4 zen dense "$results"
  torch_peer "$env" 4 agsparse "$results"
  DATA=
  data 4
  for n in ${WORLDS//,/ }; do
    data "$n"
    for s in $SCHEMES; do
      [ "$s" = sparcml ] && [ $((n & (n - 1))) != 0 ] && continue
      ours "$env" "$n" "$s" sparse "$results"
    done
  done
  "$PY" "$TABLE" --env "$env" --hashsync "$HASHSYNC" "$results" | tee -a "$OUT_DIR/hashsync-table.txt"
}

echo "# hashsync benchmark $(date -u +%Y-%m-%dT%H:%M:%SZ): deepfm 1M x 16, d=2.8%, steps $STEPS," \
  "host $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" >"$OUT_DIR/hashsync-table.txt"

if [ "$do_loopback" = 1 ]; then
  run_env loopback
fi

if [ "$do_cluster" = 1 ]; then
  maxw=4
  for n in ${WORLDS//,/ }; do [ "$n" -gt "$maxw" ] && maxw="$n"; done
  cluster_up "$maxw" "$RATE"
  run_env "cluster-$RATE"
  cluster_down
fi
log "tables in $OUT_DIR/hashsync-table.txt"
exit "$FAILED"
