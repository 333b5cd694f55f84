#!/usr/bin/env bash
# Runs a training script on NPROC local CPU processes under torchrun, with trainwire's tools on
# PATH (the hooks start `hashsync serve` and the other sidecars from there) and its Python
# package importable (clients/python, unless it is pip-installed).
#
# Usage: pipelines/train.sh SCRIPT [ARGS...]          e.g. pipelines/train.sh examples/deepfm.py --sync hashsync
# Env:   NPROC (4)            processes (ranks) on this machine
#        MASTER_PORT          torch's rendezvous port (default: a free one; the sidecars take +1)
#        MAX_RESTARTS (0)     torchrun --max_restarts: restart every rank after one dies
#        TIMEOUT (1200)       seconds before the whole run is stopped
#        TORCHRUN_ARGS        more torchrun flags (e.g. "--monitor_interval 1")
#        WIRE_BYTES           in the cluster: write the bytes every host sent on its link during
#                             the run (the sum of eth0's tx_bytes deltas) to this file
#        BIN                  trainwire's binaries (default: bin/ next to this script)
#        CLUSTER_RATE         run in the emulated cluster of bench/cluster.sh instead of on
#                             loopback: one host (network namespace) per rank, each with a link
#                             shaped at this rate (e.g. 1gbit, 100mbit); needs root and iproute2.
#                             Each host runs torchrun --nnodes NPROC --node_rank r; gloo and the
#                             sidecars use the hosts' addresses (TRAINWIRE_BIND, no Unix sockets).
# Exit: torchrun's (0 when every rank exited 0; in the cluster, the first failing host's), 124 on
# timeout.
#
# Debian's torch 1.13 on Python 3.11: torchrun's default --redirects/--tee ("0") crash at start
# (AttributeError: 'NoneType' object has no attribute 'get'): Std.from_str looks the value up by
# iterating the IntFlag Std, and since Python 3.11 that iteration skips the zero member NONE, so
# "0" maps to None. A mapping for a local rank that does not exist ("9:0") means "no redirection"
# for every rank and parses; PET_REDIRECTS/PET_TEE are the environment forms of the two flags.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
BIN=${BIN:-$here/bin}
NPROC=${NPROC:-4}
MAX_RESTARTS=${MAX_RESTARTS:-0}
TIMEOUT=${TIMEOUT:-1200}
PY=/usr/bin/python3   # Debian's python3-torch; another python3 on PATH may lack torch
if [ -z "${MASTER_PORT:-}" ]; then
  # a free port whose successor is free too: the sidecars' rendezvous takes MASTER_PORT+1
  MASTER_PORT=$($PY -c '
import socket
while True:
    a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
    b = socket.socket()
    try:
        b.bind(("127.0.0.1", p + 1)); print(p); break
    except OSError:
        pass
')
fi
export PATH="$BIN:$PATH" TRAINWIRE_BIN="$BIN"
$PY -c 'import trainwire' 2>/dev/null || export PYTHONPATH="$here/clients/python${PYTHONPATH:+:$PYTHONPATH}"
export PET_REDIRECTS=${PET_REDIRECTS:-9:0} PET_TEE=${PET_TEE:-9:0}
if [ -z "${CLUSTER_RATE:-}" ]; then
  # shellcheck disable=SC2086 # TORCHRUN_ARGS: several flags
  exec timeout -k 10 "$TIMEOUT" $PY -m torch.distributed.run --nproc_per_node "$NPROC" \
    --master_addr 127.0.0.1 --master_port "$MASTER_PORT" --max_restarts "$MAX_RESTARTS" ${TORCHRUN_ARGS:-} "$@"
fi

. "$here/bench/lib.sh"   # cluster_up/cluster_down, and a trap that stops PIDS and the cluster
cluster_up "$NPROC" "$CLUSTER_RATE"
# tx_bytes: the bytes every host has sent on its link so far, summed
tx_bytes() {
  local r sum=0 n
  for ((r = 0; r < NPROC; r++)); do
    n=$("$CLUSTER" exec "$r" cat /sys/class/net/eth0/statistics/tx_bytes)
    sum=$((sum + n))
  done
  echo "$sum"
}
tx0=$(tx_bytes)
for ((r = 0; r < NPROC; r++)); do
  "$CLUSTER" exec "$r" env TRAINWIRE_BIND="10.99.0.$((r + 1))" TRAINWIRE_NO_UNIX=1 GLOO_SOCKET_IFNAME=eth0 \
    timeout -k 10 "$TIMEOUT" $PY -m torch.distributed.run --nnodes "$NPROC" --node_rank "$r" \
    --nproc_per_node 1 --master_addr 10.99.0.1 --master_port "$MASTER_PORT" \
    --max_restarts "$MAX_RESTARTS" ${TORCHRUN_ARGS:-} "$@" &
  PIDS+=($!)
done
status=0
for p in "${PIDS[@]}"; do
  rc=0
  wait "$p" || rc=$?
  [ "$status" != 0 ] || status=$rc
done
PIDS=()
sent=$(($(tx_bytes) - tx0))
echo "train: the hosts sent $sent bytes on their links" >&2
[ -z "${WIRE_BYTES:-}" ] || echo "$sent" > "$WIRE_BYTES"
exit "$status"
