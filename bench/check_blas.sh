#!/usr/bin/env bash
# Refuses to compare against a BLAS that is not OpenBLAS: without an OpenBLAS package Debian's
# numpy and PyTorch fall back to the reference BLAS (about 6 GFLOP/s), and every ratio against
# them would be meaningless. bench/setup.sh installs what the comparisons need.
set -euo pipefail
lib=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 || true)
case "$lib" in
  *openblas*) ;;
  *) echo "check_blas.sh: libblas.so.3 is '$lib', not OpenBLAS; run bash bench/setup.sh" >&2; exit 1 ;;
esac
