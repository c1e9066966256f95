#!/usr/bin/env bash
# trit against PyTorch on the same GPT configs in one session, in alternating rounds (trit, then
# each PyTorch peer, then trit again...), each side in its own processes: `trit bench --json` and
# bench/pytorch_gpt.py. Prints medians, spreads, ratios and peak RSS.
#
# usage: bench/compare.sh [--config baby|small|bpe50k|all] [--steps N] [--warmup N] [--threads N]
#                         [--precision fp32|bf16]   (PyTorch: torch.autocast to bf16)
#                         [--peer eager|compile|eager,compile]   (default eager)
#                         [--compile-mode auto|default|max-autotune-no-cudagraphs]
#                           auto (default): the first round runs both modes, the faster per
#                           config is kept for the other rounds and named in the table
#                         [--rounds N]   (default 1)   [--json-out FILE]   every run and the summary
#                         [--level avx2]  both sides held to AVX2 on an AVX-512 machine, as a
#                           stand-in for AVX2-only CPUs: trit with TRIT_CPU=avx2, PyTorch with
#                           ATen's AVX2 kernels, MKL at AVX2 (OpenBLAS's Haswell kernels on the
#                           Debian fallback) and oneDNN off
#   TRIT=path/to/trit (default: build/trit under the repository root)
#   PEER_PYTHON / TRIT_BENCH_VENV: the PyTorch side's python (bench/peer_python.sh)
#   BENCH_WRAP=CMD   run each timed process as CMD PROCESS... (e.g. a script that quiets the machine)
#   PEER_CORETYPE=name  Debian fallback only: the OpenBLAS core named when detection fails
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
trit=${TRIT:-$root/build/trit}
config=baby steps=20 warmup=3 threads=2 precision=fp32 level= peers=eager rounds=1
compile_mode=auto json_out=
while [ $# -gt 0 ]; do
    case $1 in
    --config) config=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --level) level=$2; shift 2 ;;
    --peer) peers=$2; shift 2 ;;
    --compile-mode) compile_mode=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --json-out) json_out=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
if [ ! -x "$trit" ]; then
    echo "compare.sh: no trit binary at $trit: build first, or set TRIT=path/to/trit" >&2
    exit 2
fi
case $rounds in ''|*[!0-9]*|0) echo "compare.sh: --rounds takes a positive count, not '$rounds'" >&2; exit 2 ;; esac
for p in ${peers//,/ }; do
    case $p in eager|compile) ;; *) echo "compare.sh: --peer takes eager, compile or eager,compile, not '$p'" >&2; exit 2 ;; esac
done
case $compile_mode in auto|default|max-autotune-no-cudagraphs) ;;
*) echo "compare.sh: --compile-mode takes auto, default or max-autotune-no-cudagraphs" >&2; exit 2 ;;
esac
case $level in
'') trit_env= ;;
avx2) trit_env=TRIT_CPU=avx2 ;;
*) echo "compare.sh: --level takes avx2, not '$level'" >&2; exit 2 ;;
esac
py=$(bash "$root/bench/peer_python.sh")
wrap=${BENCH_WRAP:-}

# The peer's environment. PyPI's PyTorch brings MKL and oneDNN; Debian's 1.13 uses OpenBLAS 0.3.21,
# whose detection does not know every AVX-512 CPU (it falls back to Prescott kernels, a third of
# its AVX-512 speed): there the AVX-512 core is named.
peer_env=
if [ "$level" = avx2 ]; then
    # oneDNN's bf16 path needs AVX-512, and capped at AVX2 it fails rather than falls back;
    # without it PyTorch takes the path an AVX2-only CPU takes (its own bf16 GEMM).
    peer_env="ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 OPENBLAS_CORETYPE=Haswell PEER_NO_ONEDNN=1"
elif [ "$py" = /usr/bin/python3 ] && grep -qw avx512f /proc/cpuinfo; then
    core=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_VERBOSE=2 "$py" -c 'import torch' 2>&1 |
        sed -n 's/^Core: //p' | head -n 1)
    case $core in
    SkylakeX|Cooperlake|SapphireRapids) ;;
    *) peer_env=OPENBLAS_CORETYPE=${PEER_CORETYPE:-SkylakeX} ;;
    esac
fi
[ -n "$peer_env" ] && echo "the PyTorch side runs with $peer_env" >&2

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
names=$config
[ "$config" = all ] && names="baby small bpe50k"
echo "load before: $(cat /proc/loadavg)" >&2

peer_run() {  # peer_run ROUND CONFIG MODE: one PyTorch process; MODE "" is eager
    local tag=eager
    [ -n "$3" ] && tag=compile:$3
    local w=$warmup
    [ -n "$3" ] && [ "$w" -lt 2 ] && w=2
    echo "== round $1: PyTorch $tag, $2 ==" >&2
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $peer_env $wrap "$py" "$root/bench/pytorch_gpt.py" \
        --json --config "$2" --steps "$steps" --warmup "$w" --threads "$threads" \
        --precision "$precision" ${3:+--compile "$3"} |
        sed "s/^{/{\"side\": \"torch\", \"round\": $1, /" >>"$out/runs.jsonl"
}

best_mode() {  # best_mode CONFIG: the torch.compile mode that was faster in round 1
    "$py" - "$out/runs.jsonl" "$1" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = [r for r in rows if r["side"] == "torch" and r["round"] == 1 and r["config"] == sys.argv[2]
        and r["peer"] != "eager"]
print(min(rows, key=lambda r: r["ms_per_step"])["peer"].split(":", 1)[1])
EOF
}

# One process per side and round for all configs (each config still runs in a child process of
# its own, so its peak RSS is its own); torch.compile's automatic mode needs a process per config
# after the first round.
for r in $(seq 1 "$rounds"); do
    echo "== round $r: trit ${trit_env}, $config ==" >&2
    env $trit_env $wrap "$trit" bench --json --config "$config" --steps "$steps" --warmup "$warmup" \
        --threads "$threads" --precision "$precision" |
        sed "s/^{/{\"side\": \"trit\", \"round\": $r, \"level\": \"${level:-native}\", /" >>"$out/runs.jsonl"
    for p in ${peers//,/ }; do
        if [ "$p" = eager ]; then
            peer_run "$r" "$config" ""
        elif [ "$compile_mode" != auto ]; then
            peer_run "$r" "$config" "$compile_mode"
        elif [ "$r" = 1 ]; then
            peer_run 1 "$config" default
            peer_run 1 "$config" max-autotune-no-cudagraphs
        else
            for c in $names; do peer_run "$r" "$c" "$(best_mode "$c")"; done
        fi
    done
done
echo "load after: $(cat /proc/loadavg)" >&2

"$py" "$root/bench/compare_summary.py" "$out/runs.jsonl" "$threads" "$precision" "${json_out:-}"
