#!/usr/bin/env bash
# bench/cluster.sh — an emulated cluster on one Linux machine (needs root, iproute2).
#
#   cluster.sh up N RATE [DELAY]   N hosts tw-h0..tw-h{N-1} (network namespaces), each with one
#                                  link shaped at RATE (tc syntax: 1gbit, 100mbit, 10gbit) in both
#                                  directions, joined by a bridge in its own namespace tw-sw.
#                                  DELAY (e.g. 1ms) adds one-way latency on each host's egress
#                                  with netem (so host-to-host RTT = 2*DELAY); needs sch_netem.
#                                  CLUSTER_CC (e.g. reno) sets the hosts' TCP congestion control
#                                  (default: the machine's; a namespace may only pick one listed
#                                  in net.ipv4.tcp_allowed_congestion_control).
#   cluster.sh down                removes everything `up` created (idempotent, also after a
#                                  partial up); processes still running inside the namespaces
#                                  (started with `exec`) are terminated first.
#   cluster.sh status              layout, addresses and qdiscs; exit 1 when the cluster is down.
#   cluster.sh exec I CMD...       runs CMD inside host I's namespace.
#   cluster.sh addr I              prints host I's address (10.99.0.(I+1)).
#   cluster.sh check [SECONDS]     TCP throughput h0->h1 alone, then a ring (every host sending
#                                  to the next one at once), with bench/netcheck.py.
#
# Layout: host I owns veth eth0 = 10.99.0.(I+1)/24 and lo; its peer pI sits in tw-sw, enslaved to
# bridge tw-br. Nothing is added to the root namespace (no links, no routes), the namespaces have
# no default route, so the only reachable addresses are 10.99.0.1..N and each host's loopback.
# Shaping: tbf at RATE on eth0 (host -> switch) and on pI (switch -> host); IPv6 is disabled in
# every namespace so no background traffic (DAD, router solicitations) crosses the links.
set -euo pipefail

PREFIX=tw
SW="${PREFIX}-sw"
BR="${PREFIX}-br"
NET=10.99.0
STATE_DIR=/run/trainwire-cluster
PY=/usr/bin/python3
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
T=(timeout -k 5)   # every external command is bounded

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2; exit 2; }
die() { echo "cluster: $*" >&2; exit 1; }
need_root() { [ "$(id -u)" = 0 ] || die "needs root (network namespaces, tc)"; }

hosts() {  # existing host namespaces, in index order
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX}-h[0-9]+$" | sort -t h -k 2 -n || true
}
ns_exists() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1"; }

# rate in tc syntax -> bytes per second (for the tbf burst)
rate_bytes() {
  local r="${1,,}" num unit
  [[ "$r" =~ ^([0-9]+([.][0-9]+)?)(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps)$ ]] ||
    die "bad RATE '$1' (want e.g. 100mbit, 1gbit, 10gbit)"
  num="${BASH_REMATCH[1]}"; unit="${BASH_REMATCH[3]}"
  awk -v n="$num" -v u="$unit" 'BEGIN{
    m["bit"]=1/8; m["kbit"]=1000/8; m["mbit"]=1e6/8; m["gbit"]=1e9/8; m["tbit"]=1e12/8;
    m["bps"]=1; m["kbps"]=1000; m["mbps"]=1e6; m["gbps"]=1e9; printf "%.0f\n", n*m[u] }'
}

kill_ns_procs() {  # terminate processes left in a namespace (started there by `exec`)
  local ns="$1" pids i
  pids="$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')"
  [ -n "${pids// /}" ] || return 0
  echo "cluster: terminating processes in $ns: $pids" >&2
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  for i in 1 2 3 4 5 6 7 8 9 10; do
    pids="$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')"
    [ -n "${pids// /}" ] || return 0
    sleep 0.2
  done
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null || true
}

cmd_down() {
  need_root
  local ns any=0
  for ns in $(hosts) "$SW"; do
    ns_exists "$ns" || continue
    any=1
    kill_ns_procs "$ns"
    "${T[@]}" 10 ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$STATE_DIR"
  [ "$any" = 1 ] && echo "cluster: down" >&2
  return 0
}

shape() {  # shape NS DEV: tbf at $RATE (+ netem DELAY child), egress of DEV
  local ns="$1" dev="$2"
  ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: tbf rate "$RATE" burst "$BURST" \
    limit "$LIMIT"
  if [ -n "${3:-}" ]; then
    ip netns exec "$ns" tc qdisc add dev "$dev" parent 1:1 handle 10: netem delay "$3" limit 100000 ||
      die "netem is not available in this kernel (sch_netem); run without DELAY"
  fi
}

cmd_up() {
  need_root
  [ $# -ge 2 ] && [ $# -le 3 ] || usage
  local n="$1" i ns bps
  RATE="$2"; DELAY="${3:-}"
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 250 ] || die "N must be 1..250"
  bps="$(rate_bytes "$RATE")"
  # burst: 1 ms at line rate, at least 64 KiB (one GSO super-packet); queue: 10 ms at line rate
  BURST=$(( bps / 1000 > 65536 ? bps / 1000 : 65536 ))
  LIMIT=$(( bps / 100 > 4 * BURST ? bps / 100 : 4 * BURST ))
  if [ -n "$DELAY" ]; then [[ "$DELAY" =~ ^[0-9]+(\.[0-9]+)?(us|ms|s)$ ]] || die "bad DELAY '$DELAY'"; fi
  cmd_down
  local ok=0
  trap 'if [ "$ok" = 0 ]; then echo "cluster: up failed, removing what was created" >&2; cmd_down; fi' EXIT
  ip netns add "$SW"
  ip -n "$SW" link set lo up
  ip netns exec "$SW" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  ip -n "$SW" link add "$BR" type bridge
  ip -n "$SW" link set "$BR" up
  for ((i = 0; i < n; i++)); do
    ns="${PREFIX}-h$i"
    ip netns add "$ns"
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    if [ -n "${CLUSTER_CC:-}" ]; then
      ip netns exec "$ns" sysctl -qw "net.ipv4.tcp_congestion_control=$CLUSTER_CC" ||
        die "CLUSTER_CC=$CLUSTER_CC: not in $(cat /proc/sys/net/ipv4/tcp_available_congestion_control)"
    fi
    ip -n "$ns" link set lo up
    ip -n "$SW" link add "p$i" type veth peer name eth0 netns "$ns"
    ip -n "$SW" link set "p$i" master "$BR"
    ip -n "$SW" link set "p$i" up
    ip -n "$ns" addr add "$NET.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    shape "$ns" eth0 "$DELAY"
    shape "$SW" "p$i"
  done
  mkdir -p "$STATE_DIR"
  printf 'N=%s\nRATE=%s\nDELAY=%s\nBURST=%s\nLIMIT=%s\n' "$n" "$RATE" "$DELAY" "$BURST" "$LIMIT" \
    >"$STATE_DIR/state"
  ok=1
  trap - EXIT
  layout
}

layout() {
  local N RATE DELAY BURST LIMIT i
  # shellcheck disable=SC1091
  . "$STATE_DIR/state"
  echo "cluster: $N hosts, links shaped at $RATE each direction (tbf burst ${BURST}B, queue ${LIMIT}B)${DELAY:+, one-way delay $DELAY on host egress}"
  echo "  namespace  address        link (host side -> switch side)"
  for ((i = 0; i < N; i++)); do
    printf '  %-10s %-14s eth0 <-> %s:p%d -> bridge %s\n' "${PREFIX}-h$i" "$NET.$((i + 1))/24" "$SW" "$i" "$BR"
  done
  echo "  run in host I:  bench/cluster.sh exec I CMD...   (addresses only 10.99.0.1..$NET.$N)"
}

cmd_status() {
  local hs i
  hs="$(hosts)"
  if [ -z "$hs" ] || [ ! -f "$STATE_DIR/state" ]; then
    echo "cluster: down${hs:+ (stray namespaces: $(echo $hs); run down)}"
    return 1
  fi
  layout
  for ns in $hs; do
    echo "  $ns: $(ip -n "$ns" -brief addr show dev eth0 2>/dev/null | awk '{print $2, $3}') ;" \
      "qdisc: $(ip netns exec "$ns" tc qdisc show dev eth0 | head -1)"
  done
}

cmd_exec() {
  [ $# -ge 2 ] || usage
  local i="$1"; shift
  [[ "$i" =~ ^[0-9]+$ ]] || die "bad host index '$i'"
  ns_exists "${PREFIX}-h$i" || die "no host $i (is the cluster up?)"
  exec ip netns exec "${PREFIX}-h$i" "$@"
}

# --- throughput check -------------------------------------------------------------------------

CHECK_PIDS=()
CHECK_TMP=""
check_cleanup() {
  local p
  for p in "${CHECK_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${CHECK_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -n "$CHECK_TMP" ] && rm -rf "$CHECK_TMP"
  return 0
}

wait_port() {  # wait_port FILE: the PORT line a netcheck receiver prints
  local f="$1" k
  for ((k = 0; k < 100; k++)); do
    if grep -q '^PORT ' "$f" 2>/dev/null; then awk '/^PORT /{print $2; exit}' "$f"; return 0; fi
    sleep 0.1
  done
  die "receiver did not start ($f: $(cat "$f" 2>/dev/null))"
}

# check_pairs SECONDS "SRC DST" ...: concurrent flows; prints the receivers' rates
check_pairs() {
  local secs="$1"; shift
  local pair src dst port k=0 to=$((${secs%.*} + 30))
  local -a recv_files=() send_pids=()
  for pair in "$@"; do
    read -r src dst <<<"$pair"
    ip netns exec "${PREFIX}-h$dst" "${T[@]}" "$to" "$PY" "$HERE/netcheck.py" recv \
      --bind "$NET.$((dst + 1))" --timeout "$to" >"$CHECK_TMP/r$k" 2>&1 &
    CHECK_PIDS+=($!)
    recv_files+=("$CHECK_TMP/r$k")
    k=$((k + 1))
  done
  k=0
  for pair in "$@"; do
    read -r src dst <<<"$pair"
    port="$(wait_port "${recv_files[$k]}")"
    ip netns exec "${PREFIX}-h$src" "${T[@]}" "$to" "$PY" "$HERE/netcheck.py" send \
      --to "$NET.$((dst + 1)):$port" --seconds "$secs" --timeout "$to" >"$CHECK_TMP/s$k" 2>&1 &
    send_pids+=($!)
    CHECK_PIDS+=($!)
    k=$((k + 1))
  done
  for p in "${send_pids[@]}"; do wait "$p" || die "a sender failed: $(cat "$CHECK_TMP"/s* 2>/dev/null)"; done
  k=0
  for pair in "$@"; do
    read -r src dst <<<"$pair"
    for ((w = 0; w < 50; w++)); do grep -q '"role": "recv"' "${recv_files[$k]}" && break; sleep 0.1; done
    printf '  h%s -> h%s: %s\n' "$src" "$dst" "$(grep '"role": "recv"' "${recv_files[$k]}" || echo 'no result')"
    k=$((k + 1))
  done
}

cmd_check() {
  need_root
  local secs="${1:-3}" N RATE DELAY BURST LIMIT i
  [ -f "$STATE_DIR/state" ] || die "cluster is down (run: $0 up N RATE)"
  # shellcheck disable=SC1091
  . "$STATE_DIR/state"
  [ "$N" -ge 2 ] || die "check needs at least 2 hosts"
  CHECK_TMP="$(mktemp -d)"
  trap check_cleanup EXIT
  trap 'exit 130' INT TERM
  echo "check: one TCP flow h0 -> h1 for ${secs}s (link $RATE):"
  check_pairs "$secs" "0 1"
  local -a ring=()
  for ((i = 0; i < N; i++)); do ring+=("$i $(((i + 1) % N))"); done
  echo "check: ring, $N concurrent flows h(i) -> h(i+1) for ${secs}s:"
  check_pairs "$secs" "${ring[@]}"
}

main() {
  [ $# -ge 1 ] || usage
  local cmd="$1"; shift
  case "$cmd" in
    up) cmd_up "$@" ;;
    down) [ $# -eq 0 ] || usage; cmd_down ;;
    status) cmd_status ;;
    exec) cmd_exec "$@" ;;
    addr) [ $# -eq 1 ] || usage; echo "$NET.$(($1 + 1))" ;;
    check) cmd_check "$@" ;;
    -h|--help|help) usage ;;
    *) usage ;;
  esac
}

main "$@"
