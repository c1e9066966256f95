#!/bin/sh
# trit against PyTorch on the same GPT configs, one after the other in one session: trit first,
# then bench/pytorch_gpt.py. The PyTorch side runs with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
# removed from its environment so OpenBLAS picks its best kernels for this CPU (and, where its
# detection does not know an AVX-512 CPU, with its AVX-512 core named); trit's side and
# everything else keep the environment as it is.
#
# usage: bench/compare.sh [--config baby|small|bpe50k|all] [--steps N] [--warmup N] [--threads N]
#                         [--precision fp32|bf16]   (PyTorch: torch.autocast to bf16)
#                         [--level avx2]  both sides held to AVX2 on an AVX-512 machine, as a
#                           stand-in for AVX2-only CPUs: trit with TRIT_CPU=avx2, PyTorch with
#                           OpenBLAS's Haswell kernels, ATen's AVX2 kernels and oneDNN off
#   TRIT=path/to/trit (default: build/trit under the repository root)
#   PEER_CORETYPE=name  the OpenBLAS core named when detection fails (default SkylakeX)
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
trit=${TRIT:-$root/build/trit}
config=baby
steps=20
warmup=3
threads=2
precision=fp32
level=
while [ $# -gt 0 ]; do
    case $1 in
    --config) config=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --level) level=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
if [ ! -x "$trit" ]; then
    echo "compare.sh: no trit binary at $trit: build first, or set TRIT=path/to/trit" >&2
    exit 2
fi

case $level in
'') trit_env= ;;
avx2) trit_env=TRIT_CPU=avx2 ;;
*) echo "compare.sh: --level takes avx2, not '$level'" >&2; exit 2 ;;
esac
bash "$root/bench/check_blas.sh"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "load before: $(cat /proc/loadavg)" >&2
echo "== trit ${trit_env} ==" >&2
env $trit_env "$trit" bench --json --config "$config" --steps "$steps" --warmup "$warmup" --threads "$threads" \
    --precision "$precision" >"$out/trit.jsonl"
# OpenBLAS 0.3.21 does not know every CPU model: on some AVX-512 machines its detection falls
# back to Prescott (SSE3) kernels, a third of its AVX-512 speed. Then name its AVX-512 core.
peer_env=
core=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_VERBOSE=2 /usr/bin/python3 -c 'import torch' 2>&1 |
    sed -n 's/^Core: //p' | head -n 1)
if [ "$level" = avx2 ]; then
    # oneDNN's bf16 path needs AVX-512, and capped at AVX2 it fails rather than falls back;
    # without it PyTorch takes the path an AVX2-only CPU takes (its own bf16 GEMM).
    peer_env="OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2 PEER_NO_ONEDNN=1"
    echo "the PyTorch side runs with $peer_env" >&2
elif grep -qw avx512f /proc/cpuinfo; then
    case $core in
    SkylakeX|Cooperlake|SapphireRapids) ;;
    *) peer_env=OPENBLAS_CORETYPE=${PEER_CORETYPE:-SkylakeX}
       echo "OpenBLAS detects '${core:-?}' on this AVX-512 CPU: the PyTorch side runs with $peer_env" >&2 ;;
    esac
fi
echo "== PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)') ==" >&2
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $peer_env /usr/bin/python3 "$root/bench/pytorch_gpt.py" \
    --json --config "$config" --steps "$steps" --warmup "$warmup" --threads "$threads" \
    --precision "$precision" >"$out/torch.jsonl"
echo "load after: $(cat /proc/loadavg)" >&2

/usr/bin/python3 - "$out/trit.jsonl" "$out/torch.jsonl" "$threads" "$precision" <<'EOF'
import json, sys
def load(path):
    return {r["config"]: r for r in (json.loads(l) for l in open(path) if l.strip())}
trit, torch = load(sys.argv[1]), load(sys.argv[2])
print(f"\n{sys.argv[4]}, {sys.argv[3]} threads; ratio = trit tokens/s / PyTorch tokens/s")
head = ("config", "trit ms", "torch ms", "trit tok/s", "torch tok/s", "ratio",
        "trit MFU", "torch MFU", "trit GFLOP/s", "torch GFLOP/s", "trit MB", "torch MB")
print("| " + " | ".join(head) + " |")
print("|" + "|".join("---" for _ in head) + "|")
for name, a in trit.items():
    b = torch.get(name)
    if b is None:
        continue
    print(f"| {name} | {a['ms_per_step']:.1f} | {b['ms_per_step']:.1f} | {a['tokens_per_s']:.0f} | "
          f"{b['tokens_per_s']:.0f} | {a['tokens_per_s'] / b['tokens_per_s']:.2f}x | "
          f"{100 * a['mfu']:.1f}% | {100 * b['model_flops_per_s'] / a['fma_peak_flops_per_s']:.1f}% | "
          f"{a['model_flops_per_s'] / 1e9:.1f} | "
          f"{b['model_flops_per_s'] / 1e9:.1f} | {a['peak_rss_bytes'] / 1e6:.0f} | "
          f"{b['peak_rss_bytes'] / 1e6:.0f} |")
print(f"\nMFU of both against trit's FMA peak, {next(iter(trit.values()))['fma_peak_flops_per_s'] / 1e9:.1f} GFLOP/s")
print(f"GEMM peak: trit {next(iter(trit.values()))['gemm_peak_flops_per_s'] / 1e9:.1f} GFLOP/s, "
      f"PyTorch torch.mm {next(iter(torch.values()))['gemm_peak_flops_per_s'] / 1e9:.1f} GFLOP/s")
EOF
