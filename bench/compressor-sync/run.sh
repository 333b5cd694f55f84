#!/usr/bin/env bash
# bench/compressor-sync/run.sh — compressed collectives over real TCP between processes:
# `compressor sync` against torch.distributed (gloo) and DDP's compression hooks on the same
# gradients, 4 ranks in the emulated cluster of bench/cluster.sh, ratios from one run.
#
#   bench/compressor-sync/run.sh [--rate RATE] [--steps S] [--models LIST]
#
#   --rate RATE     link rate of the emulated cluster (default 1gbit); needs root; takes
#                   /tmp/tw-cluster.lock for the whole up ... down sequence
#   --steps S       gradient steps per run (default 3); the first is warm-up and not reported
#   --models LIST   built-in models (profiler model --builtin), default resnet101
#
# Workload: one gradient stream per rank (gen.py): every tensor of the model (ResNet-101: 314,
# 44.5 M floats, 170 MiB) as a dense f32 frame, N(0,1) values seeded per rank and step.
# Ours (bin/compressor sync, --no-unix, each rank bound to its host's address):
#   dense     --collective dense (ring allreduce of f32, no codec)
#   topk      --algo topk --ratio 0.01 --collective allgather --memory residual
#   fp16      --algo fp16 --collective ring (the compressed ring: re-encoded at every hop)
#   powersgd  --algo powersgd --powersgd-rank 4 --memory powersgd
#   plan      --plan P --ratio 0.01 --memory residual, P = `compressor plan --cpu-job --algo topk
#             --ratio 0.01` for this model and a cluster JSON of 4 nodes x 1 rank at RATE
#             (codec CPU times: tools/compressor/testdata/plan/bench-cpu.tw)
#   topk-fused, fp16-fused, plan-fused   topk, fp16 and plan with a `fuser plan` (Cupcake) too:
#             --plan F (F,P for plan-fused); F for this model with a per-group cost of 2.5 ms
#             + 0.08 GB/s (what this cluster's 4-rank collectives measured per tensor) and
#             compression at 100 us + 1 GB/s
# Torch (torch_peer.py, /usr/bin/python3, gloo, 1 thread per rank): DDP-like 25 MiB buckets
# through dist.all_reduce, fp16_compress_hook, powerSGD_hook (rank 4, start_powerSGD_iter=2).
# Time per iteration: ours, the sum of time_s.total over the step's batches (--stats: one frame
# per batch of tensors synced together, its wall time; input reading and output writing excluded);
# torch, hooks started to last future done (bucket packing excluded); both the slowest rank's,
# median over the reported steps.
# Bytes: ours' payload sent per rank (sent_bytes.* of --stats) and, for both, what the rank's
# namespace sent on eth0 (/proc/net/dev: TCP/IP headers and setup included; ours over the whole
# run / steps).
#
# Environment: COMPRESSOR, PROFILER (default <repo>/bin/...), OUT_DIR (default <repo>/out/bench),
# RUN_TIMEOUT (seconds per launch, 900), IMPLS (default: all of the above and torch-dense,
# torch-fp16, torch-powersgd), PROFILE=1 (each of ours' ranks writes a Go CPU profile,
# $OUT_DIR/compressor-sync/logs/MODEL-IMPL-rR.pprof).
# Output: the table on stdout and in $OUT_DIR/compressor-sync-table.txt; raw JSON lines in
# $OUT_DIR/compressor-sync/; rank logs in $OUT_DIR/compressor-sync/logs. Exit 1 if a run failed.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
HERE="$ROOT/bench/compressor-sync"
COMPRESSOR="${COMPRESSOR:-$ROOT/bin/compressor}"
PROFILER="${PROFILER:-$ROOT/bin/profiler}"
OUT_DIR="${OUT_DIR:-$ROOT/out/bench}"
W="$OUT_DIR/compressor-sync"
RUN_TIMEOUT="${RUN_TIMEOUT:-900}"
IMPLS="${IMPLS:-torch-dense dense topk fp16 torch-fp16 powersgd torch-powersgd plan topk-fused fp16-fused plan-fused}"
N=4
RATE=1gbit
STEPS=3
MODELS=resnet101
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) [ $# -gt 1 ] || usage; RATE="$2"; shift ;;
    --steps) [ $# -gt 1 ] || usage; STEPS="$2"; shift ;;
    --models) [ $# -gt 1 ] || usage; MODELS="$2"; shift ;;
    -h|--help) usage ;;
    *) usage ;;
  esac
  shift
done
for b in "$COMPRESSOR" "$PROFILER"; do
  [ -x "$b" ] || { log "no $b (make build)"; exit 1; }
done
mkdir -p "$W/logs"
FAILED=0
GBIT="$(awk -v r="${RATE,,}" 'BEGIN{ if (r ~ /gbit$/) print r+0; else if (r ~ /mbit$/) print (r+0)/1000; else print 1 }')"

# prepare MODEL: the model, one stream per rank, the plan
prepare() {
  local m="$1" d="$W/data/$1" r
  mkdir -p "$d"
  "$PROFILER" model --builtin "$m" >"$d/model.tw" 2>/dev/null
  "$PROFILER" dump "$d/model.tw" >"$d/model.jsonl"
  for ((r = 0; r < N; r++)); do
    [ -s "$d/r$r-s$STEPS.tw" ] || "$PY" "$HERE/gen.py" "$d/model.jsonl" "$r" "$STEPS" 1 "$d/r$r-s$STEPS.tw"
  done
  printf '{"nodes": %d, "gpus_per_node": 1, "intra_gbit_s": %s, "inter_gbit_s": %s, "intra_alpha_us": 100, "inter_alpha_us": 100, "cpu_workers": 2, "comment": "bench/compressor-sync: %d CPU ranks at %s"}\n' \
    "$N" "$GBIT" "$GBIT" "$N" "$RATE" >"$d/cluster.json"
  local plan=("$COMPRESSOR" plan --cpu-job --algo topk --ratio 0.01 --model "$d/model.tw"
    --cluster "$d/cluster.json" --samples "$ROOT/tools/compressor/testdata/plan/bench-cpu.tw")
  "${plan[@]}" --format frames >"$d/plan.tw"
  "${plan[@]}" --format table >"$d/plan.txt" 2>&1
  local fuse=("$ROOT/bin/fuser" plan --model "$d/model.tw" --comm-alpha-us 2500 --comm-gbps 0.08
    --comp-alpha-us 100 --comp-gbps 1)
  "${fuse[@]}" --format frames >"$d/fuser.tw"
  "${fuse[@]}" --format table >"$d/fuser.txt" 2>&1
}

free_port() {
  timeout 20 "$CLUSTER" exec 0 "$PY" -c 'import socket; s=socket.socket(); s.bind(("10.99.0.1",0)); print(s.getsockname()[1])'
}
tx_of() { "$CLUSTER" exec "$1" cat /proc/net/dev | awk -F'[: ]+' '$2 == "eth0" { print $11 }'; }

# launch MODEL IMPL: N ranks of IMPL; results → $W/$MODEL.jsonl
launch() {
  local m="$1" impl="$2" tag="$1-$2" r master p pid status=0 q
  local -a cmd pending rest tx0
  local d="$W/data/$m"
  master="10.99.0.1:$(free_port)"
  log "$tag"
  for ((r = 0; r < N; r++)); do tx0[r]="$(tx_of "$r")"; done
  PIDS=()
  for ((r = 0; r < N; r++)); do
    case "$impl" in
      torch-*) cmd=(env GLOO_SOCKET_IFNAME=eth0 "$PY" "$HERE/torch_peer.py" --rank "$r" --world "$N"
                    --master "$master" --impl "${impl#torch-}" /dev/stdin) ;;
      *) cmd=("$COMPRESSOR" sync --rank "$r" --world "$N" --master "$master" --bind "10.99.0.$((r + 1))"
              --no-unix --timeout 300s --stats "$W/logs/$tag-r$r.stats")
         [ "${PROFILE:-0}" = 1 ] && cmd+=(--cpu-profile "$W/logs/$tag-r$r.pprof")
         case "$impl" in
           dense) cmd+=(--collective dense) ;;
           topk) cmd+=(--algo topk --ratio 0.01 --collective allgather --memory residual) ;;
           fp16) cmd+=(--algo fp16 --collective ring) ;;
           powersgd) cmd+=(--algo powersgd --powersgd-rank 4 --memory powersgd) ;;
           plan) cmd+=(--plan "$d/plan.tw" --ratio 0.01 --memory residual) ;;
           topk-fused) cmd+=(--algo topk --ratio 0.01 --collective allgather --memory residual
                             --plan "$d/fuser.tw") ;;
           fp16-fused) cmd+=(--algo fp16 --collective ring --plan "$d/fuser.tw") ;;
           plan-fused) cmd+=(--plan "$d/plan.tw,$d/fuser.tw" --ratio 0.01 --memory residual) ;;
           *) log "unknown impl $impl"; exit 2 ;;
         esac ;;
    esac
    local out="$W/logs/$tag-r$r.out"
    [[ "$impl" = torch-* ]] || out=/dev/null
    "$CLUSTER" exec "$r" timeout -k 5 "$RUN_TIMEOUT" "${cmd[@]}" <"$d/r$r-s$STEPS.tw" \
      >"$out" 2>"$W/logs/$tag-r$r.err" &
    PIDS+=($!)
  done
  wait_ranks
  status=$WAIT_STATUS
  if [ "$status" != 0 ]; then
    FAILED=1
    log "$tag FAILED (status $status)"
    for ((r = 0; r < N; r++)); do tail -n 2 "$W/logs/$tag-r$r.err" 2>/dev/null | sed "s/^/  r$r: /" >&2; done
    return 0
  fi
  local txs=()
  for ((r = 0; r < N; r++)); do txs+=("$(( $(tx_of "$r") - tx0[r] ))"); done
  if [[ "$impl" = torch-* ]]; then
    "$PY" -c 'import json,sys
m=sys.argv[1]
for l in open(sys.argv[2]):
    if l.startswith("{"):
        d=json.loads(l); d["model"]=m; print(json.dumps(d))' "$m" "$W/logs/$tag-r0.out" >>"$W/$m.jsonl"
  else
    for ((r = 0; r < N; r++)); do "$COMPRESSOR" dump "$W/logs/$tag-r$r.stats"; done |
      "$PY" -c 'import json,sys,collections
m,impl,txs=sys.argv[1],sys.argv[2],[int(x) for x in sys.argv[3:]]
t=collections.defaultdict(float); b=collections.defaultdict(float); coll=collections.Counter()
for l in sys.stdin:
    d=json.loads(l)
    if d.get("t")!="stats": continue
    k=(d["step"],d["rank"])
    t[k]+=d["values"].get("time_s.total",0)
    b[k]+=sum(v for n,v in d["values"].items() if n.startswith("sent_bytes."))
    coll[d["labels"].get("collective","")]+=1
steps=sorted({s for s,_ in t})
for s in steps:
    print(json.dumps({"model":m,"impl":impl,"step":s,"warmup":s==steps[0],"collectives":dict(coll),
        "ranks":[{"rank":r,"time_s":t[(s,r)],"sent_bytes":b[(s,r)],"tx_bytes":txs[r]/len(steps)}
                 for r in range(len(txs))]}))' "$m" "$impl" "${txs[@]}" >>"$W/$m.jsonl"
  fi
}

HDR="# compressor-sync benchmark $(date -u +%Y-%m-%dT%H:%M:%SZ): $N ranks, emulated cluster at $RATE, steps $STEPS (first not reported), host $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for m in ${MODELS//,/ }; do prepare "$m"; done
cluster_up "$N" "$RATE"
for m in ${MODELS//,/ }; do
  : >"$W/$m.jsonl"
  for impl in $IMPLS; do launch "$m" "$impl"; done
done
cluster_down
{
  echo "$HDR"
  for m in ${MODELS//,/ }; do
    "$PY" "$HERE/table.py" --model "$m" --plan "$W/data/$m/plan.txt" "$W/$m.jsonl"
  done
} | tee "$OUT_DIR/compressor-sync-table.txt"
exit "$FAILED"
