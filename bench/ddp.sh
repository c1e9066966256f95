#!/usr/bin/env bash
# DDP on 2 ranks x 1 thread against 1 process x 1 thread, the same global batch (2 micro-batches a
# step: accumulated in one process, one per rank in DDP): tokens/s of each and the ratio, and
# DDP's wait for the gradient all-reduce per step. usage: bench/ddp.sh baby|small [STEPS] [ROUNDS]
# (from the repository root, after a build; the data is ../shared/data/tinyshakespeare.txt).
set -euo pipefail
CFG=${1:-baby}
STEPS=${2:-40}
ROUNDS=${3:-1}
TRIT=${TRIT:-build/trit}
DATA=${DATA:-../shared/data/tinyshakespeare.txt}
case "$CFG" in
baby) M=(--layers 4 --heads 4 --dim 128 --seq 64 --batch 12); TOK=$((2 * 12 * 64)) ;;
small) M=(--layers 6 --heads 6 --dim 384 --seq 256 --batch 16); TOK=$((2 * 16 * 256)) ;;
*) echo "usage: bench/ddp.sh baby|small [STEPS] [ROUNDS]" >&2; exit 2 ;;
esac
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
FLAGS=(--data "$DATA" "${M[@]}" --total-batch-tokens "$TOK" --steps "$STEPS" --warmup 5 --threads 1
       --eval-every 0 --eval-batches 1 --sample-tokens 0 --log-every 1 --ckpt-every 0)
export OMP_NUM_THREADS=1
# Median tokens/s and comm_ms of the steps after the first quarter (warm caches).
stats() {
    python3 - "$1/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = rows[len(rows) // 4:]
tps = statistics.median(r["tokens_per_s"] for r in rows)
comm = [r["comm_ms"] for r in rows if "comm_ms" in r]
ms = statistics.median(r["ms"] for r in rows)
print(f"{tps:.0f} {ms:.2f} {statistics.median(comm) if comm else float('nan'):.2f}")
PY
}
for r in $(seq "$ROUNDS"); do
    "$TRIT" train "${FLAGS[@]}" --out "$W/one$r" >/dev/null
    mpirun --allow-run-as-root --oversubscribe -np 2 -x OMP_NUM_THREADS "$TRIT" train --dist ddp "${FLAGS[@]}" \
        --out "$W/two$r" >/dev/null
    read -r t1 ms1 _ < <(stats "$W/one$r")
    read -r t2 ms2 comm < <(stats "$W/two$r")
    python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print(f'$CFG round $r: 1 rank {a:.0f} tok/s ({sys.argv[3]} ms/step), 2 ranks {b:.0f} tok/s ({sys.argv[4]} ms/step, comm wait {sys.argv[5]} ms/step): {b / a:.2f}x')" \
        "$t1" "$t2" "$ms1" "$ms2" "$comm"
done
