#!/usr/bin/env bash
# bench/serve/run.sh — the serve sidecar (docs/serve.md) against its peers, in one run, on loopback:
#
#   bench/serve/run.sh
#
# 1. Round trip of an empty request (ping) from Python through `hashsync serve --world 1`: p50, p99.
# 2. A SIZE (default 64MiB) f32 allreduce of WORLD (default 4) ranks through `hashsync serve --scheme
#    dense` (each rank's Python client hands a memfd over once, then every iteration is one sync
#    request: the tensor crosses no socket), against the same allreduce in `hashsync check` and in
#    gloo (bench/allreduce/gloo_allreduce.py), back to back. serve: the slowest rank's median
#    round trip of a request as its client sees it; check and gloo: their median iteration, each
#    timed by its slowest rank.
#
# Environment: SIZE, WORLD, ITERS (default 10), WARMUP (2), PINGS (20000), HASHSYNC (bin/hashsync).
# Output: JSON lines and a summary with the ratios serve/check and gloo/serve on stdout.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
HASHSYNC="${HASHSYNC:-$ROOT/bin/hashsync}"
SIZE="${SIZE:-64MiB}" WORLD="${WORLD:-4}" ITERS="${ITERS:-10}" WARMUP="${WARMUP:-2}" PINGS="${PINGS:-20000}"
CLIENT="$ROOT/bench/serve/serve_client.py"
DIR="$(mktemp -d)"
on_exit "rm -rf '$DIR'"
bytes=$("$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import gloo_allreduce as g; print(g.parse_size(sys.argv[2]))' "$ROOT/bench/allreduce" "$SIZE")
port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

log "ping: $PINGS round trips through hashsync serve --world 1"
"$HASHSYNC" serve --world 1 --rank 0 --socket "$DIR/ping.sock" 2>"$DIR/ping.log" & PIDS+=($!)
ping=$("$PY" "$CLIENT" "$DIR/ping.sock" ping "$PINGS")
wait "${PIDS[-1]}"
echo "$ping"

log "serve: $SIZE x $WORLD ranks, $WARMUP warmup + $ITERS iters"
master=$(port)
for r in $(seq 0 $((WORLD - 1))); do
  "$HASHSYNC" serve --rank "$r" --world "$WORLD" --master "127.0.0.1:$master" --scheme dense \
    --socket "$DIR/r$r.sock" 2>"$DIR/serve$r.log" & PIDS+=($!)
done
cpids=()
for r in $(seq 0 $((WORLD - 1))); do
  RANK=$r WORLD_SIZE=$WORLD "$PY" "$CLIENT" "$DIR/r$r.sock" sync "$bytes" "$ITERS" "$WARMUP" >"$DIR/client$r.json" & cpids+=($!)
done
for p in "${cpids[@]}"; do wait "$p"; done
# the slowest rank's median, as check and gloo time an iteration by its slowest rank
serve=$("$PY" -c 'import json, sys; print(json.dumps(max((json.load(open(f)) for f in sys.argv[1:]), key=lambda j: j["time_s_median"])))' "$DIR"/client*.json)
echo "$serve"

log "check: the same allreduce in hashsync check"
master=$(port)
for r in $(seq 0 $((WORLD - 1))); do
  "$HASHSYNC" check --rank "$r" --world "$WORLD" --master "127.0.0.1:$master" --sizes "$SIZE" \
    --iters "$ITERS" --warmup "$WARMUP" --format json >"$DIR/check$r.json" 2>"$DIR/check$r.log" & cpids+=($!)
done
for p in "${cpids[@]}"; do wait "$p"; done
check=$(cat "$DIR/check0.json")
echo "$check"

log "gloo: the same allreduce in torch.distributed (gloo)"
gloo=$("$PY" "$ROOT/bench/allreduce/gloo_allreduce.py" --spawn --world "$WORLD" --sizes "$SIZE" --iters "$ITERS" --warmup "$WARMUP" 2>"$DIR/gloo.log")
echo "$gloo"

"$PY" - "$ping" "$serve" "$check" "$gloo" <<'PYEOF'
import json, sys
ping, serve, check, gloo = (json.loads(a) for a in sys.argv[1:])
s, c, g = serve["time_s_median"], check["time_s_median"], gloo["time_s_median"]
print("ping round trip: p50 %.1f us, p99 %.1f us (%d requests)" % (ping["p50_us"], ping["p99_us"], ping["iters"]))
print("allreduce %d MiB x %d ranks (median): serve %.1f ms, check %.1f ms, gloo %.1f ms" % (serve["bytes"] >> 20, serve["world"], 1e3 * s, 1e3 * c, 1e3 * g))
print("serve/check = %.2f (target <= 1.1), gloo/serve = %.2f (target >= 1.3), correct: serve %s, check %s, gloo %s" % (s / c, g / s, serve["correct"], check.get("correct"), gloo.get("correct")))
PYEOF
