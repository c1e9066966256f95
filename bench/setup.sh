#!/usr/bin/env bash
# Installs what the benchmarks compare against on Debian 12: PyTorch 1.13 and numpy for the
# system python3, OpenBLAS as their BLAS (without it they run the reference BLAS), hyperfine.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq python3-torch python3-numpy libopenblas0-pthread hyperfine >/dev/null
echo "setup: benchmark peers present"
