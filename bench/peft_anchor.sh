#!/usr/bin/env bash
# LoRA against peft on transformers' GPT-2: the same base (a gpt2-shaped trit run, exported with
# `trit export --format hf` for transformers), the same GPT-2-token data read in the same order,
# the same first A and B (peft's init saved with save_pretrained, read by trit with --lora-init),
# the same AdamW settings (betas 0.9 / 0.999, eps 1e-8, no decay, constant lr, no clipping), fp32;
# PRECISION=bf16 runs trit with --precision bf16 and peft under torch.autocast(bfloat16), both with
# fp32 weights, gradients and optimizer. QLORA=1: the base's block matrices in NF4 with
# double-quantized scales on both sides (trit --quantize-base nf4 --double-quant; transformers
# with bitsandbytes' BitsAndBytesConfig, whose CPU path is what `pip install bitsandbytes` gives).
# Prints each step's two losses and their relative difference, and the median step times.
#
#   bench/peft_anchor.sh [WORKDIR] [ROUNDS]
#
# WORKDIR (/tmp/trit-finetune-memory) is shared with bench/finetune_memory.sh, whose gpt2 base
# and data it uses (made there if missing). ROUNDS (1) alternates trit and peft runs. TRIT
# (./build/trit), PYTHON (python3 with torch, transformers and peft), STEPS (8), THREADS (2) and
# WRAP (a command each timed run goes through) may be set.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/trit-finetune-memory}
rounds=${2:-1}
trit=${TRIT:-$here/build/trit}
python=${PYTHON:-python3}
steps=${STEPS:-8}
threads=${THREADS:-2}
wrap=${WRAP:-}
precision=${PRECISION:-fp32}
trit_q=()
peft_q=()
if [ -n "${QLORA:-}" ]; then
    trit_q=(--quantize-base nf4 --double-quant)
    peft_q=(--quantize-base nf4)
fi
lr=1e-3
base=$work/base-gpt2
data=$work/gpt2-tokens
[ -f "$base/model.safetensors" ] || TRIT="$trit" "$here/bench/finetune_memory.sh" gpt2 "$work" base
[ -f "$work/hf-gpt2/model.safetensors" ] || nice -n 19 "$trit" export "$base" --format hf --out "$work/hf-gpt2" >/dev/null
[ -f "$work/lora-seed/adapter_model.safetensors" ] ||
    nice -n 19 "$python" "$here/bench/peft_anchor.py" init --hf "$work/hf-gpt2" --out "$work/lora-seed" 2>/dev/null

run_trit() {  # $1: round
    local out=$work/anchor-trit-$1
    rm -rf "$out"
    $wrap "$trit" finetune "$base" --data "$data" --lora r=8,alpha=16,targets=c_attn,attn.c_proj,c_fc,mlp.c_proj \
        --lora-init "$work/lora-seed" --order sequential --batch 4 --steps "$steps" --lr $lr --min-lr $lr --warmup 0 \
        --weight-decay 0 --clip 0 --beta2 0.999 --eps 1e-8 --log-every 1 --eval-every 0 --eval-batches 1 \
        --sample-tokens 0 --threads "$threads" --precision "$precision" "${trit_q[@]}" --out "$out" >"$out.log" 2>&1
    # metrics.jsonl: one object a logged step, with its loss and step time
    "$python" -c 'import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(json.dumps({"step": r["step"], "loss": r["loss"], "ms": r["ms"]}))' "$out/metrics.jsonl" >"$work/anchor-trit-$1.jsonl"
    rm -rf "$out"
}

run_peft() {  # $1: round
    # shellcheck disable=SC2086
    $wrap "$python" "$here/bench/peft_anchor.py" train --hf "$work/hf-gpt2" --adapter "$work/lora-seed" \
        --data "$data/train.bin" --steps "$steps" --batch 4 --seq 512 --lr $lr --threads "$threads" \
        --precision "$precision" "${peft_q[@]}" >"$work/anchor-peft-$1.jsonl" 2>"$work/anchor-peft-$1.log"
}

for r in $(seq 1 "$rounds"); do
    run_trit "$r"
    run_peft "$r"
done

"$python" - "$work" "$rounds" <<'EOF'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def read(kind, r):
    return [json.loads(l) for l in open(f"{work}/anchor-{kind}-{r}.jsonl") if l.strip()]
t1, p1 = read("trit", 1), read("peft", 1)
print("| step | trit loss | peft loss | relative difference |")
print("|---|---|---|---|")
worst = 0.0
for a, b in zip(t1, p1):
    d = abs(a["loss"] - b["loss"]) / abs(b["loss"])
    worst = max(worst, d)
    print(f"| {a['step']} | {a['loss']:.5f} | {b['loss']:.5f} | {d:.2e} |")
tm = [s["ms"] for r in range(1, rounds + 1) for s in read("trit", r)[1:]]  # the first step warms up
pm = [s["ms"] for r in range(1, rounds + 1) for s in read("peft", r)[1:]]
mt, mp = statistics.median(tm), statistics.median(pm)
print(f"\nlargest relative loss difference {worst:.2e}; median ms/step (steps 2..): trit {mt:.0f}, peft {mp:.0f}, "
      f"trit / peft {mt / mp:.3f} ({rounds} round(s))")
EOF
