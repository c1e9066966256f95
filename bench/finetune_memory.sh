#!/usr/bin/env bash
# Fine-tuning memory side by side: each way trit cuts weights, gradients, optimizer state or
# activations, on one base and one data set, with the memory report's lines and the measured
# peak RSS (/usr/bin/time -f %M) of the same run, and the ms/step of its last step.
#
#   bench/finetune_memory.sh gpt2|small [WORKDIR] [ROWS...]
#
# gpt2:  12 x 768, vocabulary 50257 (GPT-2's tokenizer from ../shared/data/gpt2 over
#        tinyshakespeare.txt), seq 512, batch 4; the base is `trit train` at that shape for 1 step.
# small: 6 x 384, character vocabulary, seq 256, batch 16 (trit bench's "small"); the same.
# ROWS (default all): full bf16 frozen_attn lora qlora qlora_mlp qlora_rc galore adamw8bit recompute
# offload; also lora_bf16 qlora_bf16 (bf16 compute, f32 adapter) and lora_bf16a qlora_bf16a (bf16
# compute, bf16 adapter);
# base: only make the base and the data.
# TRIT (./build/trit), STEPS (2) and THREADS (2) may be set; WRAP, a command each run goes
# through (e.g. a script that pauses other work while it runs), makes the ms/step column
# meaningful on a shared machine. Prints a Markdown table; each run's log stays in WORKDIR (its
# run directory, gigabytes of checkpoint at the gpt2 shape, does not).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
shape=${1:?usage: finetune_memory.sh gpt2|small [WORKDIR] [ROWS...]}
work=${2:-/tmp/trit-finetune-memory}
shift $(($# < 2 ? $# : 2))
trit=${TRIT:-$here/build/trit}
steps=${STEPS:-2}
threads=${THREADS:-2}
wrap=${WRAP:-}
data_dir=$here/../shared/data
rows=("$@")
[ ${#rows[@]} -gt 0 ] || rows=(full bf16 frozen_attn lora qlora qlora_mlp qlora_rc galore adamw8bit recompute offload)
mkdir -p "$work"
lora_spec=r=8,alpha=16,targets=c_attn,attn.c_proj,c_fc,mlp.c_proj

case $shape in
gpt2)
    data=$work/gpt2-tokens
    [ -f "$data/train.bin" ] ||
        nice -n 19 "$trit" prepare --data "$data_dir/tinyshakespeare.txt" --tokenizer "gpt2:$data_dir/gpt2" --out "$data" >/dev/null
    arch=(--layers 12 --heads 12 --dim 768 --seq 512)
    batch=4
    label="gpt2 shape: 12 x 768, V 50257, T 512, B 4"
    ;;
small)
    data=$data_dir/tinyshakespeare.txt
    arch=(--layers 6 --heads 6 --dim 384 --seq 256)
    batch=16
    label="small: 6 x 384, V 65, T 256, B 16"
    ;;
*) echo "finetune_memory.sh: unknown shape '$shape' (gpt2 or small)" >&2; exit 2 ;;
esac

base=$work/base-$shape
if [ ! -f "$base/model.safetensors" ]; then
    rm -rf "$base"
    nice -n 19 "$trit" train --data "$data" "${arch[@]}" --batch "$batch" --steps 1 --eval-batches 1 --sample-tokens 0 \
        --threads "$threads" --out "$base" >"$work/base-$shape.log" 2>&1
fi

[ "${rows[*]}" != base ] || exit 0  # ROWS "base": only the base and the data (bench/peft_anchor.sh)

flags_of() {
    case $1 in
    full) echo "" ;;
    bf16) echo "--precision bf16" ;;
    frozen_attn) echo "--freeze h.*.attn.*" ;;
    lora) echo "--lora $lora_spec" ;;
    qlora) echo "--lora $lora_spec --quantize-base nf4 --double-quant" ;;
    qlora_rc) echo "--lora $lora_spec --quantize-base nf4 --double-quant --recompute block" ;;
    qlora_mlp) echo "--lora $lora_spec --quantize-base nf4 --double-quant --recompute mlp" ;;
    lora_bf16) echo "--lora $lora_spec --precision bf16" ;;
    lora_bf16a) echo "--lora $lora_spec --precision bf16 --adapter-dtype bf16" ;;
    qlora_bf16) echo "--lora $lora_spec --quantize-base nf4 --double-quant --precision bf16" ;;
    qlora_bf16a) echo "--lora $lora_spec --quantize-base nf4 --double-quant --precision bf16 --adapter-dtype bf16" ;;
    galore) echo "--optimizer galore --galore-rank 128" ;;
    adamw8bit) echo "--optimizer adamw8bit" ;;
    recompute) echo "--recompute block" ;;
    offload) echo "--offload optimizer" ;;
    *) echo "finetune_memory.sh: unknown row '$1'" >&2; return 2 ;;
    esac
}

name_of() {
    case $1 in
    full) echo "full fine-tune, fp32" ;;
    bf16) echo "full fine-tune, bf16" ;;
    frozen_attn) echo "frozen attention (--freeze 'h.*.attn.*')" ;;
    lora) echo "LoRA r=8, all four matrices" ;;
    qlora) echo "QLoRA r=8, NF4 + double quant" ;;
    qlora_rc) echo "QLoRA r=8, NF4 + double quant, --recompute block" ;;
    qlora_mlp) echo "QLoRA r=8, NF4 + double quant, --recompute mlp" ;;
    lora_bf16) echo "LoRA r=8, --precision bf16, f32 adapter" ;;
    lora_bf16a) echo "LoRA r=8, --precision bf16 --adapter-dtype bf16" ;;
    qlora_bf16) echo "QLoRA r=8, NF4 + double quant, --precision bf16, f32 adapter" ;;
    qlora_bf16a) echo "QLoRA r=8, NF4 + double quant, --precision bf16 --adapter-dtype bf16" ;;
    galore) echo "GaLore r=128" ;;
    adamw8bit) echo "8-bit AdamW" ;;
    recompute) echo "full fp32, --recompute block" ;;
    offload) echo "full fp32, --offload optimizer" ;;
    esac
}

mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }
field() { awk -v k="$1" '$1 == "memory:" && $2 == k { print $3; exit }' "$2"; }

echo "| $label ($threads threads) | weights MB | gradients MB | optimizer MB | activations MB | report total MB | peak RSS MB | RSS / report | ms/step |"
echo "|---|---|---|---|---|---|---|---|---|"
for row in "${rows[@]}"; do
    read -ra extra <<<"$(flags_of "$row")"
    out=$work/run-$shape-$row
    log=$work/run-$shape-$row.log
    rm -rf "$out"
    # shellcheck disable=SC2086
    $wrap /usr/bin/time -f "peak_rss_kb %M" "$trit" finetune "$base" --data "$data" --batch "$batch" --steps "$steps" \
        --warmup 1 --eval-batches 1 --sample-tokens 0 --log-every 1 --threads "$threads" "${extra[@]}" --out "$out" \
        >"$log" 2>&1 || { echo "| $(name_of "$row") | failed: see $log |"; continue; }
    rss_kb=$(awk '$1 == "peak_rss_kb" { print $2 }' "$log")
    total=$(field total "$log")
    ms=$(awk '/^step / { for (i = 1; i < NF; i++) if ($(i + 1) == "ms/step") v = $i } END { print v }' "$log")
    rss=$((rss_kb * 1024))
    optim=$(mb "$(field optimizer "$log")")
    # Offloaded: what stays resident (the report's total counts that), then the file's share.
    resident=$(awk '/\(optimizer: offloaded/ { for (i = 1; i < NF; i++) if ($i == "most") print $(i + 1) }' "$log")
    [ -z "$resident" ] || optim="$resident resident ($optim in the file)"
    echo "| $(name_of "$row") | $(mb "$(field parameters "$log")") | $(mb "$(field gradients "$log")") |" \
        "$optim | $(mb "$(field arena "$log")") | $(mb "$total") | $(mb "$rss") |" \
        "$(awk -v a="$rss" -v b="$total" 'BEGIN { printf "%.3f", a / b }') | $ms |"
    rm -rf "$out"
done
