#!/usr/bin/env bash
# trit's f32 GEMM and OpenBLAS sgemm (through numpy) on the same shapes, one after the other.
# OpenBLAS runs at its best: the machine's OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE are dropped for
# it, and where 0.3.21 does not recognise an AVX-512 CPU, its SkylakeX kernels are named.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
build=${BUILD:-build}
echo "== trit (examples/gemm_speed, AVX-512, $threads threads) =="
"$build/gemm_speed" avx512 "$threads" | grep -E '^(square|gpt) +NN'
core=""
if grep -q avx512f /proc/cpuinfo; then core="OPENBLAS_CORETYPE=SkylakeX"; fi
echo "== OpenBLAS via numpy ($threads threads${core:+, $core}) =="
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $core OPENBLAS_NUM_THREADS="$threads" /usr/bin/python3 bench/numpy_sgemm.py "$threads"
