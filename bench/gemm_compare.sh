#!/usr/bin/env bash
# trit's f32 GEMM against torch.mm (PyTorch from bench/setup.sh: 2.x from PyPI with MKL, or
# Debian's 1.13 on OpenBLAS) on the same shapes and transposes, one after the other, with the
# share of the machine's fp32 FMA peak that examples/gemm_speed measures beside it; then
# OpenBLAS sgemm through Debian's numpy on the NN shapes.
# Usage: bench/gemm_compare.sh [threads] [avx512|avx2]
# avx512 (the default where the CPU has it): trit's AVX-512 kernel against the peers at their
# best. avx2: trit's AVX2 kernel (TRIT_CPU level avx2) against PyTorch held to AVX2
# (ATEN_CPU_CAPABILITY=avx2, MKL_ENABLE_INSTRUCTIONS=AVX2) and OpenBLAS's Haswell kernels, as
# on AVX2-only machines. The machine's OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE are dropped for OpenBLAS.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
level=${2:-}
build=${BUILD:-build}
if [ -z "$level" ]; then
  if grep -q avx512f /proc/cpuinfo; then level=avx512; else level=avx2; fi
fi
core=""
torch_env=()
case "$level" in
  avx512) core="OPENBLAS_CORETYPE=SkylakeX" ;;
  avx2) grep -q avx512f /proc/cpuinfo && core="OPENBLAS_CORETYPE=Haswell"
        torch_env=(ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2) ;;
  *) echo "gemm_compare.sh: level must be avx512 or avx2, not '$level'" >&2; exit 2 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "== trit (examples/gemm_speed, $level, $threads threads) =="
"$build/gemm_speed" "$level" "$threads" | tee "$work/trit.txt"
if py=$(bash bench/peer_python.sh); then
  echo "== torch.mm ($py, $threads threads${torch_env:+, ${torch_env[*]}}) =="
  env "${torch_env[@]}" OMP_NUM_THREADS="$threads" "$py" bench/torch_mm.py "$threads" < "$work/trit.txt" | tee "$work/torch.txt"
  echo "== trit / torch.mm =="
  /usr/bin/python3 - "$work/trit.txt" "$work/torch.txt" <<'PY'
import re, sys
pat = re.compile(r"^(\w+)\s+(\w\w)\s+M=\s*(\d+) N=\s*(\d+) K=\s*(\d+)\s+([\d.]+) GFLOP/s(?:\s+([\d.]+)% of peak)?")
def rows(path):
    return {m.group(1, 2, 3, 4, 5): (float(m[6]), m[7]) for m in map(pat.match, open(path)) if m}
trit, torch = rows(sys.argv[1]), rows(sys.argv[2])
print("| shape | trit GFLOP/s | of FMA peak | torch.mm GFLOP/s | trit / torch |")
print("|---|---|---|---|---|")
ratios = []
for k, (g, share) in trit.items():
    if k in torch:
        ratios.append(g / torch[k][0])
        print(f"| {k[0]} {k[1]} {k[2]}x{k[3]}x{k[4]} | {g:.1f} | {share or '-'}% | {torch[k][0]:.1f} | {ratios[-1]:.2f} |")
if ratios:
    print(f"\ntrit / torch.mm over {len(ratios)} shapes: lowest {min(ratios):.2f}, highest {max(ratios):.2f}")
PY
fi
if bash bench/check_blas.sh 2>/dev/null; then
  echo "== OpenBLAS via numpy ($threads threads${core:+, $core}) =="
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $core OPENBLAS_NUM_THREADS="$threads" /usr/bin/python3 bench/numpy_sgemm.py "$threads"
fi
