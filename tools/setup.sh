#!/usr/bin/env bash
# Installs what trit needs to build, test and benchmark on Debian 12.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
# libclang-rt-14-dev: libFuzzer and the sanitizer runtimes for clang (tools/fuzz.sh).
# libicu-dev: Unicode character classes for GPT-2's pre-tokenization.
# python3-numpy, python3-pytest: the Python bindings' tests (python/tests, ctest python_bindings).
# liblapacke-dev, libopenblas-dev: the SVD of GaLore's projection bases (src/optim/galore.c).
# libopenmpi-dev, openmpi-bin: training on many processes (--dist, src/dist) and its tests.
# iproute2: the network namespaces that stand for two hosts (tests/dist/test_hosts.sh).
pkgs=(build-essential cmake pkg-config clang libclang-rt-14-dev libomp-dev libcmocka-dev libcjson-dev libicu-dev
      python3-numpy python3-pytest liblapacke-dev libopenblas-dev libopenmpi-dev openmpi-bin iproute2)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
echo "setup: build dependencies present"
