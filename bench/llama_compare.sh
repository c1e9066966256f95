#!/usr/bin/env bash
# trit's batch-1 decoding against llama.cpp on the gpt2 shape (L=12 C=768 V=50257, random
# weights), in alternating rounds, each format against three GGUF files of the same model:
#   export   `trit export --random gpt2 --format gguf --type T`: the blocks and the tied head in
#            T (the files trit itself writes)
#   default  llama-quantize of the f32 export to T with llama.cpp's defaults (its own choice of
#            the output head's and token embedding's types)
#   q8head   the same with `--output-tensor-type q8_0 --token-embedding-type q8_0`: an int8 head
# trit runs `trit bench --decode --config gpt2 --format F --kv-cache f16` (a 128-token prompt,
# then 128 tokens); llama.cpp `llama-bench -p 128 -n 128 -r 3`.
# Usage: LLAMA_BIN=DIR bash bench/llama_compare.sh [rounds] [threads] [formats]
#   DIR holds llama-bench and llama-quantize; formats from fp32,int8,int4,ternary,ternary-b3
#   (default all), ternary/int4 (trit's ternary with an int4 head) is added beside ternary.
# Prints one table row per format and file: medians (min-max) over the rounds and the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
threads=${2:-2}
formats=${3:-fp32,int8,int4,ternary,ternary-b3}
build=${BUILD:-build}
: "${LLAMA_BIN:?set LLAMA_BIN to the directory holding llama-bench and llama-quantize}"
. bench/decode_common.sh
need_bins "$LLAMA_BIN" llama-bench llama-quantize
declare -A TYPE=([fp32]=f32 [int8]=q8_0 [int4]=q4_0 [ternary]=tq2_0 [ternary-b3]=tq1_0)
declare -A QNAME=([f32]=F32 [q8_0]=Q8_0 [q4_0]=Q4_0 [tq2_0]=TQ2_0 [tq1_0]=TQ1_0)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
"$build/trit" export --random gpt2 --format gguf --type f32 --out "$W/f32-export.gguf" > /dev/null
IFS=, read -ra FMTS <<< "$formats"
for f in "${FMTS[@]}"; do
  t=${TYPE[$f]:?unknown format $f}
  [ "$t" = f32 ] && continue
  "$build/trit" export --random gpt2 --format gguf --type "$t" --out "$W/$t-export.gguf" > /dev/null
  "$LLAMA_BIN/llama-quantize" --allow-requantize "$W/f32-export.gguf" "$W/$t-default.gguf" "${QNAME[$t]}" \
    > "$W/quantize.log" 2>&1 || { cat "$W/quantize.log" >&2; exit 1; }
  "$LLAMA_BIN/llama-quantize" --allow-requantize --output-tensor-type q8_0 --token-embedding-type q8_0 \
    "$W/f32-export.gguf" "$W/$t-q8head.gguf" "${QNAME[$t]}" > "$W/quantize.log" 2>&1 \
    || { cat "$W/quantize.log" >&2; exit 1; }
done
trit_formats=$formats
[[ ",$formats," == *,ternary,* ]] && trit_formats="$formats,ternary/int4"
echo "llama.cpp: $("$LLAMA_BIN/llama-bench" --version 2>&1 | head -1 || true)"
for r in $(seq "$rounds"); do
  trit_decode "$W/results" "$r" "$trit_formats" "$threads" 128
  for f in "${FMTS[@]}"; do
    t=${TYPE[$f]}
    for kind in export default q8head; do
      [ "$t" = f32 ] && [ "$kind" != export ] && continue
      peer_bench "$W/results" "$r" "$f" "$kind" "$LLAMA_BIN/llama-bench" -m "$W/$t-$kind.gguf" \
        -p 128 -n 128 -t "$threads" -r 3
    done
  done
done
python3 bench/decode_summary.py "$W/results" llama.cpp
