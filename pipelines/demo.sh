#!/usr/bin/env bash
# trainwire's main job on one machine: a real PyTorch training run profiled, planned, and trained
# through trainwire side by side with gloo DDP, then a report and a picture.
#
#   1. profile  examples/deepfm.py under torchrun (4 CPU ranks, gloo DDP) with torch.profiler
#   2. plan     profiler summary + model on those traces → fuser plan and compressor plan
#               (pipelines/profile-plan.sh)
#   3. train    the same model, seed and data three times: gloo DDP; DDP with trainwire's
#               hashsync hook (Zen's hashed sparse sync through this rank's `hashsync serve`);
#               DDP with trainwire's compressor hook executing the compression plan of stage 2
#               (`compressor serve`: top-k 1% with error feedback where the plan says so); the full
#               demo also trains with both plans at once (split_hook: the embedding by zen, the
#               dense layers by the compressor as the plan says)
#   4. crash    the trainwire run again with checkpoints every STEPS/4 steps to 4 ckpt agents; rank
#               1 kills itself (SIGKILL) mid-run, torchrun restarts the job, which resumes from the
#               newest committed iteration; pipelines/ckpt-cron.sh then persists and verifies it
#   5. report   a table (samples/s, step time, final loss against gloo DDP's) and pictures
#               in OUTDIR: report.png (loss curves, throughput), timeline.png (one profiled step)
#
# Usage: pipelines/demo.sh              (make demo installs what it needs and builds bin/ first)
# Env:   OUT (out/demo)  where everything goes; each stage's log is OUT/logs/<stage>.log
#        SHORT=1         a short run (the test suite's): fewer rows and steps, on loopback
#        NET (auto)      where the training stages run: cluster (the emulated cluster of
#                        bench/cluster.sh, RATE links: needs root, iproute2 and tc), loopback, or
#                        auto (cluster when possible, else loopback; the report says which)
#        RATE (1gbit)    the cluster's per-host link
#        STEPS, ROWS, BATCH   override the run's size
# Exit:  0, or the failing stage's exit code after a line naming the stage and its log.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(realpath -m "${OUT:-$here/out/demo}")
cd "$here"
BIN=${BIN:-$here/bin}
export BIN
if [ "${SHORT:-0}" = 1 ]; then
  STEPS=${STEPS:-12} ROWS=${ROWS:-50000} BATCH=${BATCH:-256}
else
  STEPS=${STEPS:-40} ROWS=${ROWS:-200000} BATCH=${BATCH:-512}
fi
MODEL=(examples/deepfm.py --rows "$ROWS" --batch "$BATCH" --seed 1)
RATE=${RATE:-1gbit}
NET=${NET:-auto}
[ "${SHORT:-0}" != 1 ] || [ "$NET" != auto ] || NET=loopback
if [ "$NET" = auto ]; then
  NET=loopback
  if [ "$(id -u)" = 0 ] && command -v ip > /dev/null && command -v tc > /dev/null && ip netns list > /dev/null 2>&1; then
    NET=cluster
  fi
fi
case "$NET" in
cluster) where="the emulated cluster (one network namespace per rank, $RATE links)"; export CLUSTER_RATE=$RATE ;;
loopback) where="loopback (one machine, no link shaping)" ;;
*) echo "demo: NET is cluster, loopback or auto, not '$NET'" >&2; exit 2 ;;
esac
rm -rf "$OUT"
mkdir -p "$OUT/logs"
export TRAINWIRE_DEMO=$OUT   # marks every process the demo starts (check_demo.py looks for leftovers)
t0=$SECONDS

# stage NAME CMD...: runs CMD with its output in OUT/logs/NAME.log; on failure says which stage
# failed, shows the log's tail and exits with CMD's code.
stage() {
  local name=$1 log="$OUT/logs/$1.log" rc=0 t=$SECONDS
  shift
  echo "demo: [$name] $*" >&2
  "$@" > "$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "demo: stage '$name' failed (exit $rc); read $log — its last lines:" >&2
    tail -n 15 "$log" | sed 's/^/  | /' >&2
    exit "$rc"
  fi
  echo "demo: [$name] done in $((SECONDS - t)) s" >&2
}

echo "demo: training stages run on $where" >&2
stage profile-plan pipelines/profile-plan.sh "$OUT/plan" "${MODEL[@]}"
WIRE_BYTES="$OUT/ddp.wire" stage train-ddp pipelines/train.sh "${MODEL[@]}" --sync ddp --steps "$STEPS" --metrics "$OUT/ddp.jsonl"
WIRE_BYTES="$OUT/trainwire.wire" stage train-trainwire pipelines/train.sh "${MODEL[@]}" --sync hashsync --scheme zen --steps "$STEPS" \
  --metrics "$OUT/trainwire.jsonl"
WIRE_BYTES="$OUT/compressor.wire" stage train-compressor pipelines/train.sh "${MODEL[@]}" --sync compressor --plan "$OUT/plan/compression.tw" \
  --steps "$STEPS" --metrics "$OUT/compressor.jsonl"
# Both plans in one run (the full demo only: the test's short run keeps to 3 minutes): the
# embedding by hashsync zen, the dense layers by the compressor as the Espresso plan says.
runs=()
if [ "${SHORT:-0}" != 1 ]; then
  WIRE_BYTES="$OUT/split.wire" stage train-split pipelines/train.sh "${MODEL[@]}" --sync split --scheme zen \
    --plan "$OUT/plan/compression.tw" --steps "$STEPS" --metrics "$OUT/split.jsonl"
  runs+=("trainwire (zen + compressor plan)=$OUT/split.jsonl" --wire "trainwire (zen + compressor plan)=$OUT/split.wire")
fi

# Crash and resume: 4 ckpt agents (one per rank, peers on loopback) hold the checkpoints in
# memory; the trainers checkpoint every CKPT_EVERY steps; rank 1 kills itself with SIGKILL after
# step CRASH_AT and its machine's agent dies with it (SIGKILL) — a replacement agent starts in its
# place; torchrun restarts the job, which resumes from the newest committed iteration: rank 1's
# shard from a peer's memory, the others' from their own agent's. On loopback (torchrun's restart
# of a static multi-node rendezvous is not what this shows).
CKPT_EVERY=$((STEPS / 4)) CRASH_AT=$((STEPS / 2 + 1))
ckdir="$OUT/ckpt"
mkdir -p "$ckdir"
peers=$(/usr/bin/python3 -c 'import socket
ss=[socket.socket() for _ in range(4)]
[s.bind(("127.0.0.1", 0)) for s in ss]
print(",".join("127.0.0.1:%d" % s.getsockname()[1] for s in ss))')
# every agent's pid, one per line (a replacement's too: it starts in a subshell)
agent_pids="$ckdir/agent.pids"
: > "$agent_pids"
stop_agents() {
  local p
  while read -r p; do kill "$p" 2> /dev/null || true; done < "$agent_pids"
  while read -r p; do while kill -0 "$p" 2> /dev/null; do sleep 0.1; done; done < "$agent_pids"
  : > "$agent_pids"
}
trap stop_agents EXIT
# start_agent R [LOG SUFFIX]: rank R's ckpt agent, in the background
start_agent() {
  "$BIN/ckpt" agent --rank "$1" --world 4 --run-id demo --peers "$peers" --socket "$ckdir/agent-$1.sock" \
    --m 2 --memory 512MiB --buffer 64MiB > "$OUT/logs/ckpt-agent-$1${2:-}.log" 2>&1 &
  echo $! >> "$agent_pids"
}
for r in 0 1 2 3; do start_agent "$r"; done
for r in 0 1 2 3; do
  for _ in $(seq 600); do [ -S "$ckdir/agent-$r.sock" ] && break; sleep 0.1; done
  [ -S "$ckdir/agent-$r.sock" ] || { echo "demo: ckpt agent $r did not start; read $OUT/logs/ckpt-agent-$r.log" >&2; exit 1; }
done
# The machine of rank 1 goes down with it: once rank 1 crashes, its agent is killed too and a
# replacement agent starts (it heals its replicas from the peers).
: > "$OUT/logs/train-crash.log"
(
  for _ in $(seq 6000); do grep -q "crashing on purpose" "$OUT/logs/train-crash.log" && break; sleep 0.1; done
  old=$(sed -n 2p "$agent_pids")
  kill -9 "$old" 2> /dev/null || true
  # SIGKILL is asynchronous: the replacement binds the same peer port, so wait (10 s at most)
  # until the killed agent is gone with its listening socket ("address already in use" once,
  # on a loaded machine).
  for _ in $(seq 200); do kill -0 "$old" 2> /dev/null || break; sleep 0.05; done
  rm -f "$ckdir/agent-1.sock"
  start_agent 1 -replacement
) &
watcher=$!
CLUSTER_RATE='' MAX_RESTARTS=1 TORCHRUN_ARGS="--monitor_interval 1" TRAINWIRE_CKPT_SOCKET="$ckdir/agent-{rank}.sock" \
  stage train-crash pipelines/train.sh "${MODEL[@]}" --sync hashsync --scheme zen --steps "$STEPS" \
  --ckpt-every "$CKPT_EVERY" --crash-rank 1 --crash-at "$CRASH_AT" --metrics "$OUT/crash.jsonl"
wait "$watcher"
TRAINWIRE_CKPT_PERSISTENT="$ckdir/persistent" TRAINWIRE_CKPT_PEERS="$peers" TRAINWIRE_RUN_ID=demo \
  METRICS_DIR="$ckdir" stage ckpt-persist pipelines/ckpt-cron.sh persist
TRAINWIRE_CKPT_PERSISTENT="$ckdir/persistent" METRICS_DIR="$ckdir" stage ckpt-verify pipelines/ckpt-cron.sh verify
stop_agents

stage report /usr/bin/python3 pipelines/report.py --png "$OUT/report.png" --json "$OUT/report.json" \
  --wire "gloo DDP=$OUT/ddp.wire" --wire "trainwire (hashsync zen)=$OUT/trainwire.wire" \
  --wire "trainwire (compressor, Espresso plan)=$OUT/compressor.wire" \
  "gloo DDP=$OUT/ddp.jsonl" "trainwire (hashsync zen)=$OUT/trainwire.jsonl" \
  "trainwire (compressor, Espresso plan)=$OUT/compressor.jsonl" \
  "${runs[@]}" "trainwire (zen, rank 1 killed, resumed)=$OUT/crash.jsonl"
stage timeline "$BIN/profiler" plot --title "profiled steps of every rank (gloo DDP)" \
  -o "$OUT/timeline.png" "$OUT/plan/traces/rank-0.json" "$OUT/plan/traces/rank-1.json"

{
  echo
  echo "trainwire demo: DeepFM-like model ($ROWS × 16 embedding, batch $BATCH per rank), 4 CPU ranks, $STEPS steps"
  echo "trained on $where"
  echo
  cat "$OUT/logs/report.log" | grep -v '^report: wrote'
  echo
  predicted=$(sed -n 's/^predicted iteration: \([0-9.]*\) ms.*/\1/p' "$OUT/plan/compression.txt")
  measured=$(/usr/bin/python3 -c 'import json,sys; print("%.1f" % json.load(open(sys.argv[1]))[2]["step_ms"])' "$OUT/report.json")
  echo "Espresso's plan (compressor plan, topk 1%): predicted $predicted ms per iteration, measured $measured ms"
  grep -E '^[0-9]+ ' "$OUT/plan/compression.txt" | awk '{printf "  %-14s %-10s %s\n", $2, $3, substr($0, index($0,$7))}'
  echo
  echo "crash and resume: rank 1 and its ckpt agent killed with SIGKILL after step $CRASH_AT; the replacement agent"
  echo "fetched rank 1's shards from a peer's memory as it started; torchrun restarted the job from the newest"
  echo "committed iteration (checkpoints every $CKPT_EVERY steps, in the agents' memory);"
  grep -h "fetched a shard" "$OUT/logs/ckpt-agent-1-replacement.log" | sed 's/^time=[^ ]* /  agent 1 (replacement): /'
  echo "then pipelines/ckpt-cron.sh persisted $(cd "$ckdir/persistent" && ls -d iter-* | tail -n 1) and verified it:"
  grep -h "resumes from" "$OUT/logs/train-crash.log" | sort | sed 's/^/  /'
  echo
  echo "plan (Cupcake's fusion of the profiled model's gradients):"
  sed -n '1p;/^  group/,/^baselines/p' "$OUT/plan/fusion.txt" | grep -v '^baselines' | sed 's/^/  /'
  echo
  echo "demo: done in $((SECONDS - t0)) s; everything it wrote is under $OUT:"
  (cd "$OUT" && find . -type f | sed 's|^\./|  |' | sort)
} >&2
