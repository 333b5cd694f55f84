#!/usr/bin/env bash
# ckpt's cron job: persist the latest committed in-memory checkpoint of every
# rank to the persistent tier, prune old ones, and (with `verify`) re-hash
# every persisted shard. Safe to run as often as you like: persist and prune
# take a lock in the persistent directory (an overlapping run skips at once:
# ckpt exits 75, which this script logs and treats as done), persist is
# idempotent, and a killed run publishes nothing.
# Metrics go to Prometheus textfiles for node_exporter's textfile collector.
#
# Usage: pipelines/ckpt-cron.sh [persist|verify]      (default: persist, then prune)
# Env:   TRAINWIRE_CKPT_PERSISTENT  the persistent directory (required)
#        TRAINWIRE_CKPT_PEERS       every rank's agent host:port, rank order (required for persist)
#        TRAINWIRE_TOKEN            the job token the agents share
#        TRAINWIRE_RUN_ID           the agents' run id
#        KEEP (24), KEEP_EVERY (0)  prune: the newest KEEP, and every iteration divisible by KEEP_EVERY
#        METRICS_DIR                textfile collector directory (default /var/lib/prometheus/node-exporter)
#        CKPT                       the ckpt binary (default: bin/ckpt next to this script, else on PATH)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
CKPT=${CKPT:-$here/bin/ckpt}
[ -x "$CKPT" ] || CKPT=$(command -v ckpt)
: "${TRAINWIRE_CKPT_PERSISTENT:?set TRAINWIRE_CKPT_PERSISTENT to the persistent directory}"
KEEP=${KEEP:-24}
KEEP_EVERY=${KEEP_EVERY:-0}
METRICS_DIR=${METRICS_DIR:-/var/lib/prometheus/node-exporter}
metrics() { [ -d "$METRICS_DIR" ] && echo "$METRICS_DIR/ckpt_$1.prom" || echo ""; }
# ckpt VERB …, where exit 75 (another run holds the lock: skipped) is no failure.
ckpt() {
  local rc=0
  "$CKPT" "$@" || rc=$?
  if [ "$rc" -eq 75 ]; then
    echo "ckpt-cron: ckpt $1 skipped: another persist or prune holds the lock" >&2
    return 0
  fi
  return "$rc"
}

case "${1:-persist}" in
persist)
  : "${TRAINWIRE_CKPT_PEERS:?set TRAINWIRE_CKPT_PEERS to every rank agent address}"
  ckpt persist --progress never ${TRAINWIRE_RUN_ID:+--run-id "$TRAINWIRE_RUN_ID"} \
    --metrics "$(metrics persist)"
  ckpt prune --keep "$KEEP" --keep-every "$KEEP_EVERY"
  ;;
verify)
  "$CKPT" verify --progress never --metrics "$(metrics verify)"
  ;;
*)
  echo "usage: $0 [persist|verify]" >&2
  exit 80
  ;;
esac
