#!/usr/bin/env bash
# Installs the Debian 12 packages tiletrain needs (build, run, tests), configures build/
# and builds TARGETS (default: everything). Idempotent: installs only what is missing.
# Needs root or sudo for apt-get. Usage: scripts/setup.sh [TARGET...] | scripts/setup.sh --install-only
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config libdnnl-dev openmpi-bin libopenmpi-dev
          nlohmann-json3-dev libcli11-dev libhwy-dev libopenblas-openmp-dev libgtest-dev zlib1g-dev libstb-dev dataset-fashion-mnist darknet
          python3 python3-numpy python3-pil python3-matplotlib procps)
# Test oracles only: Darknet's library and PyTorch (scripts/test.sh asks for the latter: the
# MobileNetV2 oracle runs it live, and tests/reference/make_fixtures.py regenerates fixtures).
[ "${TILETRAIN_WITH_TORCH:-0}" = 1 ] && packages+=(python3-torch)
# The sanitizer build and the fuzz targets (scripts/sanitize.sh, scripts/fuzz.sh): clang and
# its runtimes (ASan, UBSan, libFuzzer), and omp.h for clang (the build links GNU libgomp).
[ "${TILETRAIN_WITH_CLANG:-0}" = 1 ] && packages+=(clang libclang-rt-14-dev libomp-14-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --install-only: the packages, no build (scripts/sanitize.sh and scripts/fuzz.sh build elsewhere)
[ "${1:-}" = --install-only ] && exit 0

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build ${1:+--target "$@"}
