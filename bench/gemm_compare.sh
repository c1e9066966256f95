#!/usr/bin/env bash
# trit's f32 GEMM and OpenBLAS sgemm (through numpy) on the same shapes, one after the other.
# Usage: bench/gemm_compare.sh [threads] [avx512|avx2]
# avx512 (the default where the CPU has it): trit's AVX-512 kernel against OpenBLAS at its best
# (where 0.3.21 does not recognise an AVX-512 CPU, its SkylakeX kernels are named). avx2: trit's
# AVX2 kernel (TRIT_CPU=avx2) against OpenBLAS's Haswell kernels, its AVX2 code, as on AVX2-only
# machines. The machine's OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE are dropped for OpenBLAS.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
level=${2:-}
build=${BUILD:-build}
if [ -z "$level" ]; then
  if grep -q avx512f /proc/cpuinfo; then level=avx512; else level=avx2; fi
fi
core=""
case "$level" in
  avx512) core="OPENBLAS_CORETYPE=SkylakeX" ;;
  avx2) grep -q avx512f /proc/cpuinfo && core="OPENBLAS_CORETYPE=Haswell" ;;
  *) echo "gemm_compare.sh: level must be avx512 or avx2, not '$level'" >&2; exit 2 ;;
esac
bash bench/check_blas.sh
echo "== trit (examples/gemm_speed, $level, $threads threads) =="
"$build/gemm_speed" "$level" "$threads" | grep -E '^(square|gpt) +NN'
echo "== OpenBLAS via numpy ($threads threads${core:+, $core}) =="
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $core OPENBLAS_NUM_THREADS="$threads" /usr/bin/python3 bench/numpy_sgemm.py "$threads"
