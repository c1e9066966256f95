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
N=2
USAGE="bench/ddp_peers.sh baby|small [STEPS] [ROUNDS]"
. "$(dirname "$0")/dist_common.sh"
# AdamW at PyTorch's settings of the peer script (lr 6e-4, betas 0.9/0.95, weight decay 0.1, clip 1).
FLAGS+=(--lr 6e-4 --beta2 0.95 --weight-decay 0.1 --clip 1.0)
for r in $(seq "$ROUNDS"); do
    mpirun --allow-run-as-root --oversubscribe -np 2 -x OMP_NUM_THREADS "$TRIT" train --dist ddp "${FLAGS[@]}" \
        --out "$W/trit$r" >/dev/null
    read -r t _ < <(stats "$W/trit$r")
    p=$("$PYTHON" bench/ddp_pytorch.py --config "$CFG" --ranks 2 --steps "$STEPS" --warmup 3 --json |
        python3 -c 'import json, sys; r = json.loads(sys.stdin.read().strip().splitlines()[-1]); print(round(r["tokens_per_s"]), r["torch_version"])')
    read -r ptps pver <<<"$p"
    python3 -c "import sys; t, p = float(sys.argv[1]), float(sys.argv[2]); print(f'$CFG round $r: trit DDP {t:.0f} tok/s, PyTorch {sys.argv[3]} DDP (gloo) {p:.0f} tok/s, 2 ranks x 1 thread each: trit {t / p:.2f}x')" \
        "$t" "$ptps" "$pver"
done
