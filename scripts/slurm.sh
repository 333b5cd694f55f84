#!/usr/bin/env bash
# scripts/slurm.sh — a real single-node Slurm cluster on this machine, for the tests that run the
# tools under srun and sbatch (make test-go starts and stops it; docs/launch.md, "Slurm").
#
#   bash scripts/slurm.sh start   # install (Debian's slurmctld, slurmd, slurm-client, munge) if
#                                 # missing, write the configuration, start munged, slurmctld and
#                                 # slurmd, wait until the node is idle; prints SLURM_CONF=… on stdout
#   bash scripts/slurm.sh stop    # stop the daemons it started
#   bash scripts/slurm.sh status  # sinfo
#
# Everything lives in $TRAINWIRE_SLURM_DIR (default /tmp/trainwire-slurm): slurm.conf, state, spool,
# logs. The node declares 8 CPUs whatever the machine has (SlurmdParameters=config_overrides), so
# that 4-rank jobs run on a 2-core machine; TaskPlugin=task/none and ProctrackType=proctrack/linuxproc
# need no cgroup delegation, so it runs inside containers. Ports: $TRAINWIRE_SLURM_PORT (default
# 16817) for slurmctld and the next one for slurmd.
#
# When a daemon cannot start, `start` exits 1 and writes why to $TRAINWIRE_SLURM_DIR/skip (the
# Slurm tests then skip, printing that reason); on success it removes that file.
# Needs root (the daemons run as root here, as in the project's test machines).
set -euo pipefail
DIR="${TRAINWIRE_SLURM_DIR:-/tmp/trainwire-slurm}"
PORT="${TRAINWIRE_SLURM_PORT:-16817}"
CONF="$DIR/slurm.conf"
export SLURM_CONF="$CONF"

fail() {
  mkdir -p "$DIR"
  echo "$*" >"$DIR/skip"
  echo "slurm.sh: $*" >&2
  exit 1
}

install() {
  local pkgs=(slurmctld slurmd slurm-client munge) missing=()
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  [[ $(id -u) == 0 ]] || fail "Slurm is not installed and this is not root (apt-get install ${missing[*]})"
  echo "slurm.sh: installing ${missing[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
    { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; } ||
    fail "apt-get install ${missing[*]} failed"
}

write_conf() {
  local host
  host="$(hostname -s)"
  mkdir -p "$DIR"/{state,spool,log,run}
  cat >"$CONF" <<EOF
# written by scripts/slurm.sh: one node, this machine, for trainwire's tests
ClusterName=trainwire
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmUser=root
SlurmdUser=root
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=8 Boards=1 SocketsPerBoard=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=2000 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
}

start_munge() {
  if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
    return 0
  fi
  [[ -f /etc/munge/munge.key ]] || fail "munge has no key (/etc/munge/munge.key)"
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
  runuser -u munge -- /usr/sbin/munged 2>"$DIR/log/munged.err" || fail "munged did not start: $(cat "$DIR/log/munged.err")"
  touch "$DIR/run/munged.ours"
  for _ in $(seq 50); do
    munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  fail "munged started but does not answer"
}

start() {
  [[ $(id -u) == 0 ]] || fail "the Slurm daemons need root here"
  install
  stop_daemons
  rm -rf "$DIR/state" "$DIR/spool"
  write_conf
  start_munge
  slurmctld -f "$CONF" 2>"$DIR/log/slurmctld.err" || fail "slurmctld did not start: $(tail -3 "$DIR/log/slurmctld.err" "$DIR/log/slurmctld.log" 2>/dev/null)"
  slurmd -f "$CONF" 2>"$DIR/log/slurmd.err" || fail "slurmd did not start: $(tail -3 "$DIR/log/slurmd.err" "$DIR/log/slurmd.log" 2>/dev/null)"
  for _ in $(seq 100); do
    if [[ "$(sinfo -h -o %T 2>/dev/null)" == idle ]]; then
      rm -f "$DIR/skip"
      echo "slurm.sh: node $(hostname -s) idle (SLURM_CONF=$CONF)" >&2
      echo "SLURM_CONF=$CONF"
      return 0
    fi
    sleep 0.2
  done
  fail "the node did not become idle within 20 s: $(sinfo -h -o '%T %E' 2>&1); $(tail -3 "$DIR/log/slurmctld.log" 2>/dev/null)"
}

stop_daemons() {
  [[ -f "$CONF" ]] || return 0
  scontrol shutdown >/dev/null 2>&1 || true
  for f in "$DIR/run/slurmd.pid" "$DIR/run/slurmctld.pid"; do
    [[ -f $f ]] && kill "$(cat "$f")" 2>/dev/null || true
  done
  for _ in $(seq 50); do
    pgrep -f "slurm(ctld|d) -f $CONF" >/dev/null || break
    sleep 0.1
  done
}

stop() {
  stop_daemons
  if [[ -f "$DIR/run/munged.ours" ]]; then
    pkill -x munged 2>/dev/null || true
    rm -f "$DIR/run/munged.ours"
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) sinfo ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 80 ;;
esac
