# bench/lib.sh — what every bench/*/*.sh script shares; source it after `set -euo pipefail`:
#
#   . "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
#
# It sets ROOT (the repository), PY (/usr/bin/python3: Debian's torch lives there), CLUSTER
# (bench/cluster.sh) and an EXIT trap that stops every pid in PIDS, runs the commands given to
# on_exit and takes the emulated cluster down if cluster_up brought it up. INT and TERM exit 130.
#
#   usage                  print the script's header comment to stderr and exit 2
#   log MSG...             "<script>: MSG" to stderr
#   on_exit CMD            run CMD (a string for eval) when the script exits, in order given
#   cluster_up N RATE      (root) wait for /tmp/tw-cluster.lock, bring up N hosts on RATE links,
#                          export TRAINWIRE_TOKEN (random unless set)
#   cluster_down           take the cluster down and release the lock
#   wait_ranks             wait for every pid in PIDS; the first that fails stops the others
#                          (SIGTERM); WAIT_STATUS is its status (0: all succeeded); PIDS emptied

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY=/usr/bin/python3
CLUSTER="$ROOT/bench/cluster.sh"
PIDS=()
_BENCH_EXIT=()
_BENCH_CLUSTER_UP=0

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2; }
log() { echo "$(basename "$0"): $*" >&2; }
on_exit() { _BENCH_EXIT+=("$1"); }

cluster_up() {
  [ "$(id -u)" = 0 ] || { log "the emulated cluster needs root"; exit 1; }
  exec 9>/tmp/tw-cluster.lock
  if ! flock -n 9; then
    log "waiting for /tmp/tw-cluster.lock (another cluster benchmark is running)"
    flock 9
  fi
  "$CLUSTER" down >/dev/null 2>&1 || true # a cluster left by a killed run
  _BENCH_CLUSTER_UP=1
  "$CLUSTER" up "$1" "$2" >&2
  export TRAINWIRE_TOKEN="${TRAINWIRE_TOKEN:-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')}"
}

cluster_down() {
  if [ "$_BENCH_CLUSTER_UP" = 1 ]; then
    "$CLUSTER" down >&2 || true
    _BENCH_CLUSTER_UP=0
    flock -u 9 || true
  fi
}

wait_ranks() {
  local pending rest p q pid
  WAIT_STATUS=0
  pending=("${PIDS[@]}")
  while [ "${#pending[@]}" -gt 0 ]; do
    set +e; wait -n -p pid "${pending[@]}"; p=$?; set -e
    rest=(); for q in "${pending[@]}"; do [ "$q" = "$pid" ] || rest+=("$q"); done
    pending=("${rest[@]}")
    if [ "$p" != 0 ] && [ "$WAIT_STATUS" = 0 ]; then
      WAIT_STATUS="$p"
      for q in "${pending[@]}"; do kill -TERM "$q" 2>/dev/null || true; done
    fi
  done
  PIDS=()
}

_bench_cleanup() {
  local p c
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
  cluster_down
  for c in "${_BENCH_EXIT[@]}"; do eval "$c" || true; done
}
trap _bench_cleanup EXIT
trap 'exit 130' INT TERM
