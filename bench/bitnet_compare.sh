#!/usr/bin/env bash
# trit's ternary batch-1 decoding against bitnet.cpp's ternary kernels on the gpt2 shape, in
# alternating rounds. bitnet.cpp is built beside the project (bench/README.md says how) and runs
# its own BitNet b1.58 files of the same shape (bench/bitnet_model.py, converted by its own
# tools): every ggml-model-*.gguf in MODEL_DIR except f32/f16 ones; a file whose name holds
# "tl2" runs with the TL2 build (BITNET_TL2_BIN; skipped with a message when it is not set),
# the others (I2_S) with BITNET_BIN. llama-bench checks no output: the TL2 build measured so far
# computed wrong ones for prompts (bench/README.md, "bitnet.cpp"), so check a build before
# quoting it.
# trit runs `trit bench --decode --config gpt2 --format F --kv-cache f16` twice a round: with
# --tokens 128 (its decode rate: 128 tokens after a 128-token prompt) and --tokens 512 (its
# prefill rate: a 512-token prompt); bitnet.cpp `llama-bench -p 512 -n 128 -r 3` (pp512 and
# tg128, from an empty context).
# Usage: BITNET_BIN=DIR [BITNET_TL2_BIN=DIR] [BENCH_WRAP=CMD] [BENCH_RESULTS=FILE] bash bench/bitnet_compare.sh
#          MODEL_DIR [rounds] [threads] [formats]
#   formats: trit's, default ternary,ternary/int4,ternary-b3 (2-bit and base-3 blocks, the
#   head in int8 unless /int4 says otherwise)
# Prints one table row per trit format and bitnet.cpp file: medians (min-max) over the rounds
# and the ratios (trit / bitnet.cpp) with the range of the per-round ratios; BENCH_RESULTS=FILE
# keeps every run (the lines bench/decode_summary.py reads).
set -euo pipefail
cd "$(dirname "$0")/.."
model_dir=${1:?usage: BITNET_BIN=DIR bash bench/bitnet_compare.sh MODEL_DIR [rounds] [threads] [formats]}
rounds=${2:-3}
threads=${3:-2}
formats=${4:-ternary,ternary/int4,ternary-b3}
build=${BUILD:-build}
: "${BITNET_BIN:?set BITNET_BIN to the directory holding the llama-bench of a bitnet.cpp I2_S build}"
. bench/decode_common.sh
need_bins "$BITNET_BIN" llama-bench
[ -n "${BITNET_TL2_BIN:-}" ] && need_bins "$BITNET_TL2_BIN" llama-bench
[ -x "$build/trit" ] || { echo "bitnet_compare.sh: no $build/trit: build trit first (or set BUILD)" >&2; exit 1; }
files=()
for f in "$model_dir"/ggml-model-*.gguf; do
  [ -e "$f" ] || continue
  case $(basename "$f") in
    ggml-model-f32.gguf | ggml-model-f16.gguf) continue ;;
    *tl2*) [ -n "${BITNET_TL2_BIN:-}" ] || { echo "skipped $f: a TL2 file needs BITNET_TL2_BIN" >&2; continue; } ;;
  esac
  files+=("$f")
done
[ ${#files[@]} -gt 0 ] || { echo "bitnet_compare.sh: no ggml-model-*.gguf (other than f32/f16) in $model_dir" >&2; exit 1; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
for r in $(seq "$rounds"); do
  trit_decode "$W/results" "$r" "$formats" "$threads" 128
  trit_decode "$W/results" "$r" "$formats" "$threads" 512
  for f in "${files[@]}"; do
    bin=$BITNET_BIN
    [[ $(basename "$f") == *tl2* ]] && bin=$BITNET_TL2_BIN
    label=$(basename "$f" .gguf)
    peer_bench "$W/results" "$r" '*' "${label#ggml-model-}" "$bin/llama-bench" -m "$f" \
      -p 512 -n 128 -t "$threads" -r 3
  done
done
python3 - "$W/results" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("peer "):
        t = json.loads(line.split(" ", 4)[4])[0]
        print(f"bitnet.cpp: llama.cpp commit {t['build_commit']}, {t['cpu_info']}")
        break
PY
[ -n "${BENCH_RESULTS:-}" ] && cp "$W/results" "$BENCH_RESULTS"
python3 bench/decode_summary.py "$W/results" bitnet.cpp --prefill-tokens 512 --round-ratios
