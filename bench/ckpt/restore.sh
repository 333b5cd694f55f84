#!/usr/bin/env bash
# bench/ckpt/restore.sh — restore after losing a machine, where it matters: in the emulated cluster
# (bench/cluster.sh; needs root), 4 hosts on RATE links, one ckpt agent per host (m=2). Every rank
# saves STATE bytes (iteration 1, globally committed) and torch.saves the same state into a
# directory that host 0 serves over HTTP (the persistent store on another host a user without ckpt
# restores from). Rank 1's agent is killed (-9) and a replacement started; rank 1 then restores
# (a) from its peers' memory through the replacement agent (timed from the replacement's start to
# the state's tensors filled: the replacement fetches its shard from its peers as it starts), (b)
# with torch.load of its file fetched from host 0 over the same shaped link (timed from the request
# to the state dict in hand). Both are compared with the state. Takes
# /tmp/tw-cluster.lock itself.
#
#   bench/ckpt/restore.sh [RATE]     (default 1gbit)
#
# Environment: CKPT (default <repo>/bin/ckpt), OUT_DIR (default <repo>/out/bench), STATE (512MiB),
# ROUNDS (3: the whole measurement, agents restarted each time).
# Output: a table on stdout (restore s, MB/s, share of the link rate; the TCP goodput ceiling of a
# 1500-byte MTU is 1448/1514 = 95.6 % of it), JSON lines in $OUT_DIR/ckpt-restore.jsonl.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
RATE="${1:-1gbit}"
CKPT="${CKPT:-$ROOT/bin/ckpt}"
CL="$CLUSTER"
OUT_DIR="${OUT_DIR:-$ROOT/out/bench}"
STATE="${STATE:-512MiB}"; ROUNDS="${ROUNDS:-3}"
N=4 VICTIM=1 HTTP_PORT=29790
mkdir -p "$OUT_DIR/logs"
WORK="$(mktemp -d /tmp/ckpt-restore.XXXXXX)"
RES="$OUT_DIR/ckpt-restore.jsonl"; : >"$RES"
on_exit 'rm -rf "$WORK"'
cluster_up "$N" "$RATE"
BPS=$(awk -v r="$RATE" 'BEGIN{ n=r+0; u=substr(r, length(n "")+1); m=(u=="gbit")?1e9/8:(u=="mbit")?1e6/8:1e3/8; printf "%.0f", n*m }')
PEERS=""; for i in $(seq 0 $((N-1))); do PEERS="$PEERS${PEERS:+,}$("$CL" addr "$i"):29700"; done
export TRAINWIRE_TOKEN="restore-$$"
R="$ROOT/bench/ckpt/restore_remote.py"

agent() {  # agent I ROUND: start rank I's agent in host I, wait for its socket
  rm -f "$WORK/s$1"
  "$CL" exec "$1" "$CKPT" agent --rank "$1" --world "$N" --run-id restore --peers "$PEERS" --socket "$WORK/s$1" \
    --m 2 --timeout 60s >>"$OUT_DIR/logs/ckpt-restore-agent-$1.log" 2>&1 &
  PIDS+=($!); AG[$1]=$!
  for _ in $(seq 1 400); do [ -S "$WORK/s$1" ] && return 0; sleep 0.05; done
  log "agent $1 did not start (see $OUT_DIR/logs/ckpt-restore-agent-$1.log)"; exit 1
}

for round in $(seq 1 "$ROUNDS"); do
  log "round $round: $N agents, $STATE per rank"
  rm -rf "$WORK/persist"; mkdir -p "$WORK/persist"
  declare -A AG=()
  for i in $(seq 0 $((N-1))); do agent "$i"; done
  SP=()
  for i in $(seq 0 $((N-1))); do
    "$CL" exec "$i" $PY "$R" save --rank "$i" --world "$N" --socket "$WORK/s$i" --state "$STATE" \
      --persist "$WORK/persist" >/dev/null 2>>"$OUT_DIR/logs/ckpt-restore-save-$i.log" &
    SP+=($!)
  done
  for p in "${SP[@]}"; do wait "$p" || { log "a save failed (see $OUT_DIR/logs)"; exit 1; }; done
  "$CL" exec 0 $PY -m http.server "$HTTP_PORT" --bind "$("$CL" addr 0)" --directory "$WORK/persist" \
    >/dev/null 2>&1 &
  HTTP=$!; PIDS+=($HTTP)
  kill -9 "${AG[$VICTIM]}"; wait "${AG[$VICTIM]}" 2>/dev/null || true
  rm -f "$WORK/s$VICTIM" "$WORK/ready" "$WORK/started"
  # The restoring trainer is ready first (torch imported, state allocated); the clock starts
  # with the replacement agent.
  "$CL" exec "$VICTIM" $PY "$R" restore --rank "$VICTIM" --world "$N" --socket "$WORK/s$VICTIM" --state "$STATE" \
    --url "http://$("$CL" addr 0):$HTTP_PORT/rank$VICTIM.pt" --rate "$BPS" --ready "$WORK/ready" --started "$WORK/started" \
    >>"$RES" 2>>"$OUT_DIR/logs/ckpt-restore-restore.log" &
  RP=$!; PIDS+=($RP)
  for _ in $(seq 1 1200); do [ -e "$WORK/ready" ] && break; sleep 0.05; done
  date +%s.%N >"$WORK/started"
  agent "$VICTIM"
  wait "$RP" || { log "the restore failed (see $OUT_DIR/logs)"; exit 1; }
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  PIDS=()
done
$PY - "$RES" "$RATE" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("restore of rank 1 after its machine is lost, 4 hosts on %s links, %d MB per rank" % (sys.argv[2], rows[0]["bytes"] // 10**6))
print("%5s %8s %14s %9s %10s %11s %16s %8s %6s" % ("round", "source", "ckpt restore s", "MB/s", "link rate", "TCP ceiling",
                                                   "torch.load s", "ratio", "equal"))
for i, r in enumerate(rows, 1):
    mbs = r["bytes"] / r["ckpt_s"] / 1e6
    print("%5d %8s %14.3f %9.1f %9.1f%% %10.1f%% %16.3f %7.2fx %6s" % (
        i, r["source"], r["ckpt_s"], mbs, 100 * r["ckpt_link_share"], 100 * r["ckpt_link_share"] / (1448 / 1514),
        r["torch_load_remote_s"], r["torch_load_remote_s"] / r["ckpt_s"], r["equal"]))
PYEOF
