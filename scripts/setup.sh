#!/usr/bin/env bash
# Installs the Debian packages meshtrain builds with, when any is missing. Quick when all are there.
# As root it runs apt-get itself; otherwise it prints the exact command and stops.
set -euo pipefail

packages=(
  cmake g++ make pkg-config
  libopenblas-dev          # CPU GEMMs (f32)
  libdnnl-dev              # CPU GEMMs (bf16, oneDNN)
  libboost-graph-dev       # topology graphs
  libopenmpi-dev openmpi-bin
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev       # safetensors headers, metrics
  libcli11-dev             # the command line
  libtomlplusplus-dev      # its --config files (TOML)
  zlib1g-dev               # CRC32 checksums of checkpoint shards
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "meshtrain needs these Debian packages; install them with:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
