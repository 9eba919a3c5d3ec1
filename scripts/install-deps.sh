#!/usr/bin/env bash
# Installs what cclz builds with, from Debian's packages, where it is missing. Needs root (or sudo).
# The CUDA toolkit is optional and not installed here: with nvcc on PATH the kernels build too.
set -euo pipefail
packages=(cmake ninja-build g++ python3 python3-dev libgtest-dev libcli11-dev nlohmann-json3-dev libfmt-dev
          openmpi-bin libopenmpi-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
