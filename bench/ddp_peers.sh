#!/usr/bin/env bash
# trit DDP against PyTorch DDP (gloo), both 2 ranks x 1 thread, the same model (bench/pytorch_gpt.py's
# GPT-2, as trit's) and global batch (one micro-batch of the config's B x T on each rank), rounds
# alternating trit and PyTorch: tokens/s of each and the ratio. usage: bench/ddp_peers.sh
# baby|small [STEPS] [ROUNDS] (from the repository root, after a build, with PyTorch 2.x in
# PYTHON, default ../venv/bin/python; trit reads ../shared/data/tinyshakespeare.txt, PyTorch random
# tokens: the step's work does not depend on the values).
set -euo pipefail
CFG=${1:-baby}
STEPS=${2:-30}
ROUNDS=${3:-1}
TRIT=${TRIT:-build/trit}
PYTHON=${PYTHON:-../venv/bin/python}
DATA=${DATA:-../shared/data/tinyshakespeare.txt}
case "$CFG" in
baby) M=(--layers 4 --heads 4 --dim 128 --seq 64 --batch 12); TOK=$((2 * 12 * 64)) ;;
small) M=(--layers 6 --heads 6 --dim 384 --seq 256 --batch 16); TOK=$((2 * 16 * 256)) ;;
*) echo "usage: bench/ddp_peers.sh baby|small [STEPS] [ROUNDS]" >&2; exit 2 ;;
esac
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
# AdamW at PyTorch's settings of the peer script (lr 6e-4, betas 0.9/0.95, weight decay 0.1, clip 1).
FLAGS=(--data "$DATA" "${M[@]}" --total-batch-tokens "$TOK" --steps "$STEPS" --warmup 5 --threads 1 --lr 6e-4
       --beta2 0.95 --weight-decay 0.1 --clip 1.0 --eval-every 0 --eval-batches 1 --sample-tokens 0 --log-every 1
       --ckpt-every 0)
export OMP_NUM_THREADS=1
for r in $(seq "$ROUNDS"); do
    mpirun --allow-run-as-root --oversubscribe -np 2 -x OMP_NUM_THREADS "$TRIT" train --dist ddp "${FLAGS[@]}" \
        --out "$W/trit$r" >/dev/null
    # Median tokens/s of the steps after the first quarter (warm caches), as bench/ddp.sh.
    t=$(python3 -c 'import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(round(statistics.median(r["tokens_per_s"] for r in rows[len(rows) // 4:])))' "$W/trit$r/metrics.jsonl")
    p=$("$PYTHON" bench/ddp_pytorch.py --config "$CFG" --ranks 2 --steps "$STEPS" --warmup 3 --json |
        python3 -c 'import json, sys; r = json.loads(sys.stdin.read().strip().splitlines()[-1]); print(round(r["tokens_per_s"]), r["torch_version"])')
    read -r ptps pver <<<"$p"
    python3 -c "import sys; t, p = float(sys.argv[1]), float(sys.argv[2]); print(f'$CFG round $r: trit DDP {t:.0f} tok/s, PyTorch {sys.argv[3]} DDP (gloo) {p:.0f} tok/s, 2 ranks x 1 thread each: trit {t / p:.2f}x')" \
        "$t" "$ptps" "$pver"
done
