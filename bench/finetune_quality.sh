#!/usr/bin/env bash
# Quality of the memory-saving recipes, each against the run it replaces, on "small" (6 x 384,
# character vocabulary, T = 256):
#
#   pretrain: tinyshakespeare from scratch with AdamW, GaLore (r = 128) and 8-bit AdamW, the
#             same seed, data order, schedule and steps (and GaLore again at 4x the lr, as its
#             recipe has it); final val loss and the memory report's optimizer bytes of each.
#   finetune: AdamW's run as the base, fine-tuned on a second public-domain text (the King James
#             Bible from Debian's bible-kjv, bench/kjv_text.sh) in full, with LoRA r = 8 on the
#             four block matrices and with QLoRA (the same over an NF4 base with double-quantized
#             scales); final val loss on the text's held-out tail and trainable parameters.
#
#   bench/finetune_quality.sh [pretrain|finetune|all] [WORKDIR]
#
# TRIT (./build/trit), THREADS (2), PRE_STEPS (500), FT_STEPS (250) and BATCH (8) may be set. Runs
# already finished in WORKDIR are read, not run again (every run is deterministic). Prints two
# Markdown tables.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-all}
work=${2:-/tmp/trit-finetune-quality}
trit=${TRIT:-$here/build/trit}
threads=${THREADS:-2}
pre_steps=${PRE_STEPS:-500}
ft_steps=${FT_STEPS:-250}
batch=${BATCH:-8}
mkdir -p "$work"
arch=(--layers 6 --heads 6 --dim 384 --seq 256 --batch "$batch" --threads "$threads" --eval-batches 50 \
    --eval-every 0 --sample-tokens 0 --ckpt-every 0 --log-every 50)
lora_spec=r=8,alpha=16,targets=c_attn,attn.c_proj,c_fc,mlp.c_proj

# run NAME VERB ARGS...: one run into WORKDIR/NAME, its log beside it; skipped when it finished.
run() {
    local name=$1
    shift
    if ! grep -q '^done at step' "$work/$name.log" 2>/dev/null; then
        rm -rf "${work:?}/$name"
        echo "finetune_quality.sh: $name" >&2
        "$trit" "$@" --out "$work/$name" >"$work/$name.log" 2>&1 ||
            { echo "finetune_quality.sh: $name failed (its log: $work/$name.log)" >&2; tail -n 3 "$work/$name.log" >&2; exit 1; }
    fi
}

val_of() { sed -n 's/^done at step [0-9]*: .*val loss \([0-9.]*\).*/\1/p' "$work/$1.log"; }
optim_mb() { awk '/^memory: optimizer/ {print $5; exit}' "$work/$1.log"; }
# An adapter's log line names its trainable parameters; a full fine-tune trains them all.
trainable() {
    local n
    n=$(sed -n 's/.*: \([0-9]*\) trainable.*/\1/p' "$work/$1.log" | head -n 1)
    [ -n "$n" ] || n=$(sed -n 's/^model: .*: \([0-9]*\) parameters.*/\1/p' "$work/$1.log" | head -n 1)
    echo "$n"
}
pct() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%+.2f%%", 100 * (a / b - 1)}'; }

pretrain() {
    local data=$here/../shared/data/tinyshakespeare.txt
    local common=(--data "$data" "${arch[@]}" --steps "$pre_steps" --warmup $((pre_steps / 10)))
    run pre-adamw train "${common[@]}"
    run pre-galore train "${common[@]}" --optimizer galore --galore-rank 128
    run pre-adamw8bit train "${common[@]}" --optimizer adamw8bit
    # GaLore's own recipe: the projected step scaled by 0.25 and the lr raised to match (its paper
    # pre-trains at 10x AdamW's lr); the same lr as AdamW is the row above.
    run pre-galore-lr4x train "${common[@]}" --optimizer galore --galore-rank 128 --lr 4e-3
    local ref opt
    ref=$(val_of pre-adamw)
    opt=$(optim_mb pre-adamw)
    echo "| pre-training small, $pre_steps steps of $batch x 256 | val loss | against AdamW | optimizer MB | against AdamW |"
    echo "|---|---|---|---|---|"
    for r in adamw galore adamw8bit galore-lr4x; do
        local v m
        v=$(val_of "pre-$r")
        m=$(optim_mb "pre-$r")
        echo "| $r | $v | $(pct "$v" "$ref") | $m | $(pct "$m" "$opt") |"
    done
}

finetune() {
    [ -f "$work/kjv.txt" ] || bash "$here/bench/kjv_text.sh" "$work/kjv.txt" >&2
    [ -f "$work/pre-adamw/model.safetensors" ] || { echo "finetune_quality.sh: run 'pretrain' first" >&2; exit 2; }
    local common=(finetune "$work/pre-adamw" --data "$work/kjv.txt" "${arch[@]}" --steps "$ft_steps" \
        --warmup $((ft_steps / 10)))
    run ft-full "${common[@]}" --lr 3e-4
    # LoRA and QLoRA at two lrs; each QLoRA row is compared with the LoRA row of its lr.
    run ft-lora "${common[@]}" --lr 2e-3 --lora "$lora_spec"
    run ft-qlora "${common[@]}" --lr 2e-3 --lora "$lora_spec" --quantize-base nf4 --double-quant
    run ft-lora-lr5e-3 "${common[@]}" --lr 5e-3 --lora "$lora_spec"
    run ft-qlora-lr5e-3 "${common[@]}" --lr 5e-3 --quantize-base nf4 --double-quant --lora "$lora_spec"
    local full
    full=$(val_of ft-full)
    echo "| fine-tuning on the KJV, $ft_steps steps of $batch x 256 | val loss | against full | against LoRA | trainable parameters |"
    echo "|---|---|---|---|---|"
    echo "| full (lr 3e-4) | $full | | | $(trainable ft-full) |"
    local suffix lr lora q
    for suffix in "" -lr5e-3; do
        lr=${suffix#-lr}
        lr=${lr:-2e-3}
        lora=$(val_of "ft-lora$suffix")
        q=$(val_of "ft-qlora$suffix")
        echo "| LoRA r=8 (lr $lr) | $lora | $(pct "$lora" "$full") | | $(trainable "ft-lora$suffix") |"
        echo "| QLoRA r=8, NF4 + double quant (lr $lr) | $q | $(pct "$q" "$full") | $(pct "$q" "$lora") | $(trainable "ft-qlora$suffix") |"
    done
}

case $what in
pretrain) pretrain ;;
finetune) finetune ;;
all) pretrain && echo && finetune ;;
*) echo "finetune_quality.sh: unknown part '$what' (pretrain, finetune or all)" >&2; exit 2 ;;
esac
