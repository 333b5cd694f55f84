#!/usr/bin/env bash
# bench/ckpt/run.sh — checkpoint benchmark: ckpt's in-memory checkpoints (4 agents, m=2) against
# torch.save/torch.load on local disk, measured in the same run.
#
#   bench/ckpt/run.sh [--state SIZE] [--iters N] [--world W]
#
# 1. save stall seen by the trainer: torch.save to local disk + fsync, against ckpt's
#    shared-memory hand-over (begin, one memcpy into the agent's memfd buffer, commit);
# 2. time to global commit (replication to the peer, CRC32C per chunk, digest per shard) and the
#    replication throughput it implies, against raw loopback TCP streams of the same bytes (one
#    alone, and WORLD at once: the fair limit, as every rank replicates at the same time);
# 3. restore from local memory (as a trainer that stayed up and keeps its save's mapping; then as a
#    restarted one: a new process, after the one that saved has exited) and, after kill -9
#    of rank 1's agent and a fresh replacement, from peer memory, against torch.load of the same
#    state (from the page cache); every rank at once, after a barrier, on both sides; the local
#    restore ITERS rounds (the median of each rank's rounds, then the median over ranks).
#
# Environment: CKPT (default <repo>/bin/ckpt), OUT_DIR (default <repo>/out/bench), STATE
# (default 512MiB per rank), ITERS (3), PROFILE (set: each agent writes a Go CPU profile to
# OUT_DIR/logs/ckpt-agent-R.pprof). Needs ~2.5 GB of memory per rank (state, two versions
# of two slots in the agent, torch.load's copy) and as much free disk for torch.save's files.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
CKPT="${CKPT:-$ROOT/bin/ckpt}"
OUT_DIR="${OUT_DIR:-$ROOT/out/bench}"
STATE="${STATE:-512MiB}"
ITERS="${ITERS:-3}"
BUFFER="${BUFFER:-128MiB}"
WORLD=4
while [ $# -gt 0 ]; do
  case "$1" in
    --state) STATE="$2"; shift ;;
    --iters) ITERS="$2"; shift ;;
    --world) WORLD="$2"; shift ;;
    -h|--help) usage ;;
    *) log "unknown argument $1"; exit 2 ;;
  esac
  shift
done
[ -x "$CKPT" ] || { log "$CKPT not built (make build, or CKPT=...)"; exit 1; }
mkdir -p "$OUT_DIR/logs"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/ckpt-bench.XXXXXX")"
on_exit 'rm -rf "$WORK"'

port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PEERS=""
for r in $(seq 0 $((WORLD - 1))); do PEERS="$PEERS${PEERS:+,}127.0.0.1:$(port)"; done
export TRAINWIRE_TOKEN="bench-$$"
start_agent() {
  "$CKPT" agent --rank "$1" --world "$WORLD" --run-id bench --peers "$PEERS" --socket "$WORK/s$1" \
    --m 2 --buffer "$BUFFER" --parts 4 --timeout 60s ${PROFILE:+--cpu-profile "$OUT_DIR/logs/ckpt-agent-$1.pprof"} \
    >>"$OUT_DIR/logs/ckpt-agent-$1.log" 2>&1 &
  AGENT[$1]=$!
  PIDS+=($!)
  for _ in $(seq 1 200); do [ -S "$WORK/s$1" ] && return; sleep 0.05; done
  echo "run.sh: agent $1 did not start" >&2; exit 1
}
declare -A AGENT
for r in $(seq 0 $((WORLD - 1))); do : >"$OUT_DIR/logs/ckpt-agent-$r.log"; start_agent "$r"; done

RES="$OUT_DIR/ckpt.jsonl"
: >"$RES"
echo "run.sh: $WORLD ranks, $STATE of state each, m=2; measuring (the machine is shared: figures vary)" >&2
TP=()
for r in $(seq 0 $((WORLD - 1))); do
  $PY "$ROOT/bench/ckpt/bench.py" --rank "$r" --world "$WORLD" --socket "$WORK/s$r" --dir "$WORK" \
    --state "$STATE" --iters "$ITERS" >"$WORK/out-$r.json" 2>"$OUT_DIR/logs/ckpt-bench-$r.log" &
  TP+=($!)
done
for p in "${TP[@]}"; do wait "$p"; done
cat "$WORK"/out-*.json >>"$RES"

# The trainers that saved have exited; restarted ones restore, ITERS rounds, every rank at once.
for i in $(seq 1 "$ITERS"); do
  TP=()
  for r in $(seq 0 $((WORLD - 1))); do
    $PY "$ROOT/bench/ckpt/bench.py" --rank "$r" --world "$WORLD" --socket "$WORK/s$r" --dir "$WORK" \
      --state "$STATE" --restarted --tag "rr$i" >>"$WORK/restarted-$r.json" 2>>"$OUT_DIR/logs/ckpt-bench-$r.log" &
    TP+=($!)
  done
  for p in "${TP[@]}"; do wait "$p"; done
done
cat "$WORK"/restarted-*.json >>"$RES"
$PY "$ROOT/bench/ckpt/bench.py" --rank 0 --world "$WORLD" --socket - --dir "$WORK" --merge "$RES"

# Raw TCP streams of the same bytes on loopback: the link limit replication runs against — one
# stream alone, and WORLD streams at once (what the agents do: every rank sends its shard while it
# receives a peer's, on the same cores).
$PY - "$STATE" "$WORLD" >>"$RES" <<'PYEOF'
import json, socket, sys, threading, time
def size(s):
    u = s.upper()
    for suf, m in (("GIB", 1 << 30), ("MIB", 1 << 20), ("GB", 10**9), ("MB", 10**6)):
        if u.endswith(suf): return int(float(u[:-len(suf)]) * m)
    return int(u)
n = size(sys.argv[1]); k = int(sys.argv[2]); buf = bytearray(n)
def run(streams):
    ls, ths = [], []
    for _ in range(streams):
        l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1); ls.append(l)
    def sink(l):
        c, _ = l.accept(); v = memoryview(bytearray(1 << 22)); got = 0
        while got < n:
            r = c.recv_into(v); got += r
            if not r: break
        c.close()
    def src(l):
        s = socket.create_connection(l.getsockname()); s.sendall(buf); s.close()
    for l in ls:
        ths.append(threading.Thread(target=sink, args=(l,)))
    for t in ths: t.start()
    t0 = time.perf_counter()
    snd = [threading.Thread(target=src, args=(l,)) for l in ls]
    for t in snd: t.start()
    for t in snd + ths: t.join()
    return time.perf_counter() - t0
print(json.dumps({"kind": "tcp_stream", "bytes": n, "s": run(1)}))
print(json.dumps({"kind": "tcp_streams", "streams": k, "bytes": n, "s": run(k)}))
PYEOF

# Rank 1's agent dies; a fresh one takes rank 1 and restores from rank 0's memory.
kill -9 "${AGENT[1]}"; wait "${AGENT[1]}" 2>/dev/null || true
rm -f "$WORK/s1"
start_agent 1
$PY "$ROOT/bench/ckpt/bench.py" --rank 1 --world "$WORLD" --socket "$WORK/s1" --dir "$WORK" \
  --state "$STATE" --restore-peer >>"$RES" 2>>"$OUT_DIR/logs/ckpt-bench-1.log"

$PY "$ROOT/bench/ckpt/table.py" "$RES"
