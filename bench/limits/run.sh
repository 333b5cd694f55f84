#!/usr/bin/env bash
# bench/limits/run.sh — issue 26's figures in one run: each measured against its limit and against
# the peer it must beat, with the target next to it (met / not met).
#
#   bench/limits/run.sh [--rate RATE] [--skip LIST]
#
#   --rate RATE   the emulated cluster's link rate (default 1gbit); needs root
#   --skip LIST   parts not to run, comma-separated, from: tcp,ring,zen,restore,local,rnah
#                 (the table then reads that part's results from an earlier run in OUT_DIR)
#
# Parts, in order (each is its own bench script, run with OUT_DIR below; see each one's header):
#   tcp      bench/cluster.sh check: one flow, then a ring of 4 flows at once (the TCP goodput
#            ceiling on this shaper; 1448/1514 = 95.6 % of the link in theory)
#   ring     bench/allreduce/run.sh --cluster RATE --no-loopback, 1/4/16/64 MiB: ours vs gloo
#   zen      bench/hashsync/run.sh --cluster RATE --no-loopback --worlds 2,4,8 with SCHEMES
#            "zen agsparse sparcml dense auto": zen vs its lower bound and torch; auto's choice
#   restore  bench/ckpt/restore.sh RATE: restore from peers' memory vs torch.load from another host
#   local    bench/ckpt/run.sh: local and peer-memory restore vs torch.load (page cache)
#   rnah     bench/straggle/run.sh part 3 (PARTS=3): RNA-H vs RNA vs blocking allreduce
# Then bench/limits/table.py prints one table of every figure, its ratio and target.
#
# Environment: OUT_DIR (default <repo>/out/bench/limits), SEEDS (rnah, default 3), STATE (restore
# and local, default 512MiB), HASHSYNC_STEPS (zen, default 8: auto profiles 3 steps and times sparcml for 2). Needs `make build` first.
# Takes 20–30 minutes on 2 cores. Output: the table on stdout and in $OUT_DIR/limits-table.md,
# each part's own tables and raw results in $OUT_DIR. Exit 1 if a part failed (the table is still
# printed from what exists).
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
RATE=1gbit
SKIP=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) [ $# -gt 1 ] || usage; RATE="$2"; shift ;;
    --skip) [ $# -gt 1 ] || usage; SKIP="$2"; shift ;;
    -h|--help) usage ;;
    *) log "unknown argument $1"; usage ;;
  esac
  shift
done
for p in ${SKIP//,/ }; do
  [[ "$p" =~ ^(tcp|ring|zen|restore|local|rnah)$ ]] || { log "--skip: unknown part '$p'"; exit 2; }
done
for b in hashsync ckpt straggle; do
  [ -x "$ROOT/bin/$b" ] || { log "bin/$b not built (make build)"; exit 1; }
done
OUT_DIR="${OUT_DIR:-$ROOT/out/bench/limits}"
export OUT_DIR
mkdir -p "$OUT_DIR"
FAILED=0
skipped() { [[ ",$SKIP," == *",$1,"* ]]; }

# part NAME CMD...: run one part unless skipped; its stdout (tables) into OUT_DIR/NAME.txt
part() {
  local name="$1"; shift
  if skipped "$name"; then log "$name: skipped"; return 0; fi
  log "$name: $* (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  if ! "$@" >"$OUT_DIR/$name.txt"; then
    FAILED=1
    log "$name FAILED (its output: $OUT_DIR/$name.txt)"
  fi
}

tcp_check() {
  cluster_up 4 "$RATE"
  "$CLUSTER" check 5
  cluster_down
}

echo "# limits $(date -u +%Y-%m-%dT%H:%M:%SZ), rate $RATE, host $(nproc) cores," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')" \
  >"$OUT_DIR/header.txt"
part tcp tcp_check
part ring env SIZES=1MiB,4MiB,16MiB,64MiB bash "$ROOT/bench/allreduce/run.sh" --cluster "$RATE" --no-loopback
part zen env SCHEMES="zen agsparse sparcml dense auto" bash "$ROOT/bench/hashsync/run.sh" --cluster "$RATE" \
  --no-loopback --worlds 2,4,8 --steps "${HASHSYNC_STEPS:-8}"
part restore bash "$ROOT/bench/ckpt/restore.sh" "$RATE"
part local bash "$ROOT/bench/ckpt/run.sh"
part rnah env PARTS=3 STRAGGLE="$ROOT/bin/straggle" bash "$ROOT/bench/straggle/run.sh"
"$PY" "$ROOT/bench/limits/table.py" --rate "$RATE" "$OUT_DIR" |
  tee "$OUT_DIR/limits-table.md"
exit "$FAILED"
