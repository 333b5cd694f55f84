#!/usr/bin/env bash
# bench/ckpt/persist.sh — the persistent tier: `ckpt persist` (fetch every rank's committed shard
# from the agents over TCP, write + fsync + rename, publish in the pebble catalog), `ckpt verify`
# (re-hash every shard) and `ckpt restore --from persistent`, against `cp` + `sync` of the same
# bytes to the same file system, measured in the same run.
#
# Environment: CKPT (default <repo>/bin/ckpt), STATE per rank (default 256MiB), WORLD (4),
# DIR (the persistent directory; default a temp dir on $TMPDIR's file system).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
CKPT="${CKPT:-$ROOT/bin/ckpt}"
STATE="${STATE:-256MiB}"
WORLD="${WORLD:-4}"
[ -x "$CKPT" ] || { log "$CKPT not built (make build, or CKPT=...)"; exit 1; }
WORK="$(mktemp -d "${TMPDIR:-/tmp}/ckpt-persist.XXXXXX")"
DIR="${DIR:-$WORK/persistent}"
on_exit 'rm -rf "$WORK"'
export TRAINWIRE_TOKEN=bench-$RANDOM$RANDOM
bytes=$(/usr/bin/python3 -c "import sys; s='$STATE'; m={'KiB':1<<10,'MiB':1<<20,'GiB':1<<30}; print(int(s[:-3])*m[s[-3:]])")
peers=$(for ((r = 0; r < WORLD; r++)); do /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print("127.0.0.1:%d" % s.getsockname()[1])'; done | paste -sd,)
for ((r = 0; r < WORLD; r++)); do
  "$CKPT" agent --rank "$r" --world "$WORLD" --run-id bench --peers "$peers" --socket "$WORK/s$r" --m 2 --log-level warn &
  PIDS+=($!)
done
for ((r = 0; r < WORLD; r++)); do
  head -c "$bytes" /dev/urandom >"$WORK/state$r"
  for _ in $(seq 100); do [ -S "$WORK/s$r" ] && break; sleep 0.05; done
done
SAVES=()
for ((r = 0; r < WORLD; r++)); do
  "$CKPT" save --rank "$r" --world "$WORLD" --run-id bench --socket "$WORK/s$r" --iter 1 --format raw --commit "$WORK/state$r" 2>>"$WORK/save.log" &
  SAVES+=($!)
done
for p in "${SAVES[@]}"; do wait "$p" || { cat "$WORK/save.log" >&2; exit 1; }; done
now() { date +%s.%N; }
ms() { /usr/bin/python3 -c "print('%.0f' % (($2 - $1) * 1000))"; }
mkdir -p "$WORK/cp"
sync
t0=$(now); for ((r = 0; r < WORLD; r++)); do cp "$WORK/state$r" "$WORK/cp/"; done; sync; t1=$(now)
"$CKPT" persist --dir "$DIR" --peers "$peers" --run-id bench --progress never 2>"$WORK/persist.log"; t2=$(now)
"$CKPT" verify --dir "$DIR" --progress never 2>"$WORK/verify.log"; t3=$(now)
"$CKPT" restore --from persistent --dir "$DIR" --rank 0 --world "$WORLD" --socket /nonexistent -o "$WORK/restored" 2>/dev/null; t4=$(now)
cmp -s "$WORK/restored" "$WORK/state0" || { echo "persist.sh: restored state differs" >&2; exit 1; }
total=$((bytes * WORLD))
cpms=$(ms "$t0" "$t1"); pms=$(ms "$t1" "$t2"); vms=$(ms "$t2" "$t3"); rms=$(ms "$t3" "$t4")
echo "state: $WORLD ranks x $STATE ($total bytes) in $DIR"
echo "cp + sync (baseline)        : ${cpms} ms"
echo "ckpt persist                : ${pms} ms ($(/usr/bin/python3 -c "print('%.2f' % ($pms / max($cpms, 1)))")x the baseline; $(/usr/bin/python3 -c "print('%.0f' % ($total / 1e6 / ($pms / 1000)))") MB/s)"
echo "ckpt verify                 : ${vms} ms ($(/usr/bin/python3 -c "print('%.0f' % ($total / 1e6 / ($vms / 1000)))") MB/s)"
echo "restore --from persistent   : ${rms} ms (one rank, $bytes bytes)"
