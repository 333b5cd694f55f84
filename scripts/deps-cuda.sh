#!/usr/bin/env bash
# Installs the CUDA toolkit (nvcc, cuda.h, the libcuda link stub) that the
# `cuda` build tag of lib/gpu needs, from Debian bookworm's non-free section
# (CUDA 11.8). Not needed by the default build or `make test`.
#
# Debian ships CUDA in non-free, which the base image's sources do not enable;
# this script adds a separate sources entry for bookworm contrib non-free
# non-free-firmware on the same mirror as the existing debian.sources entry.
# Idempotent: does nothing when nvcc and cuda.h are already installed.
set -euo pipefail
pkgs=(nvidia-cuda-toolkit nvidia-cuda-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps-cuda: ${pkgs[*]} already installed" >&2
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

src=/etc/apt/sources.list.d/trainwire-nonfree.sources
if [ ! -f "$src" ]; then
  mirror=http://deb.debian.org/debian
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    # first URIs: line of the main (non-security) entry
    m=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
    [ -n "$m" ] && mirror=$m
  fi
  echo "deps-cuda: adding $src (bookworm contrib non-free non-free-firmware from $mirror)" >&2
  $SUDO tee "$src" >/dev/null <<SRC
Types: deb
URIs: $mirror
Suites: bookworm
Components: contrib non-free non-free-firmware
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
echo "deps-cuda: installing ${missing[*]} (large: ~3 GB unpacked)" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
command -v nvcc >/dev/null && nvcc --version >&2
