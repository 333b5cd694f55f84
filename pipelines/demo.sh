#!/usr/bin/env bash
# trainwire demo: 4 ranks on loopback synchronize gradients with the ring
# allreduce every tool builds on, check the result against the reference
# sum element by element, and report the throughput.
#
# Usage: pipelines/demo.sh        (make demo builds bin/ first)
# Env:   WORLD (4), SIZES (1MiB,16MiB,64MiB), ITERS (5)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-$PWD/bin}
WORLD=${WORLD:-4}
SIZES=${SIZES:-1MiB,16MiB,64MiB}
ITERS=${ITERS:-5}
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export TRAINWIRE_TOKEN=${TRAINWIRE_TOKEN:-demo-$RANDOM$RANDOM}

echo "demo: $WORLD ranks on loopback, allreduce of $SIZES, $ITERS iterations each" >&2
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
for ((r = 1; r < WORLD; r++)); do
  timeout 300 "$BIN/hashsync" check --rank "$r" --world "$WORLD" --master "127.0.0.1:$port" \
    --sizes "$SIZES" --iters "$ITERS" --log-level warn &
  pids+=($!)
done
timeout 300 "$BIN/hashsync" check --rank 0 --world "$WORLD" --master "127.0.0.1:$port" \
  --sizes "$SIZES" --iters "$ITERS" --format table --log-level warn
for p in "${pids[@]}"; do wait "$p"; done
pids=()
echo "demo: every rank's result matched the reference sum" >&2

# Stage 2: plan Cupcake's tensor fusion for a 314-gradient ResNet-101-like
# profile: DGC-like compression (0.4 ms launch, 250 GB/s) and an allgather of
# 1 % of the bytes over 10 Gbit/s among 8 ranks.
echo "demo: optimal tensor fusion for a 314-gradient model (fuser plan)" >&2
"$BIN/fuser" plan --model tools/fuser/testdata/resnet101-like.json \
  --comm-alpha-us 50 --comm-gbps 15.625 --comp-alpha-us 400 --comp-gbps 250 \
  --format table --log-level warn
