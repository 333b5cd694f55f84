#!/usr/bin/env bash
# Installs the system packages trainwire's tests, benchmarks and demo need
# (Debian bookworm; g++ builds lib/gpu's CUDA C for the CPU in make test-gpu-emu).
# Idempotent: skips apt entirely when everything is present.
set -euo pipefail
pkgs=(openmpi-bin python3-torch python3-msgpack python3-numpy python3-xxhash iproute2 etcd-server g++
  python3-pip python3-venv python3-setuptools  # these three: pip install ./clients/python (test_package)
  python3-matplotlib)  # the demo report's pictures (pipelines/report.py)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
