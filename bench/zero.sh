#!/usr/bin/env bash
# ZeRO-1 and ZeRO-2 against DDP on N ranks x 1 thread, the same global batch (one micro-batch a
# rank): tokens/s of each (median of the steps after the first quarter), the ratio to DDP, and
# the step's wait for communication. usage: bench/zero.sh baby|small [STEPS] [ROUNDS] [N]
# (from the repository root, after a build; the data is ../shared/data/tinyshakespeare.txt).
set -euo pipefail
CFG=${1:-baby}
STEPS=${2:-60}
ROUNDS=${3:-1}
N=${4:-2}
TRIT=${TRIT:-build/trit}
DATA=${DATA:-../shared/data/tinyshakespeare.txt}
case "$CFG" in
baby) M=(--layers 4 --heads 4 --dim 128 --seq 64 --batch 12); TOK=$((N * 12 * 64)) ;;
small) M=(--layers 6 --heads 6 --dim 384 --seq 256 --batch 16); TOK=$((N * 16 * 256)) ;;
*) echo "usage: bench/zero.sh baby|small [STEPS] [ROUNDS] [N]" >&2; exit 2 ;;
esac
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
FLAGS=(--data "$DATA" "${M[@]}" --total-batch-tokens "$TOK" --steps "$STEPS" --warmup 5 --threads 1
       --eval-every 0 --eval-batches 1 --sample-tokens 0 --log-every 1 --ckpt-every 0)
export OMP_NUM_THREADS=1
stats() {
    python3 - "$1/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = rows[len(rows) // 4:]
print(f'{statistics.median(r["tokens_per_s"] for r in rows):.0f} {statistics.median(r["ms"] for r in rows):.2f} '
      f'{statistics.median(r["comm_ms"] for r in rows):.2f}')
PY
}
for r in $(seq "$ROUNDS"); do
    line="$CFG round $r, $N ranks:"
    for d in ddp zero1 zero2; do
        mpirun --allow-run-as-root --oversubscribe -np "$N" -x OMP_NUM_THREADS "$TRIT" train --dist $d "${FLAGS[@]}" \
            --out "$W/$d$r" >/dev/null
        read -r tps ms comm < <(stats "$W/$d$r")
        [ "$d" = ddp ] && base=$tps
        line="$line $d $tps tok/s ($ms ms/step, comm $comm ms, $(python3 -c "print(f'{$tps / $base:.3f}')")x)"
    done
    echo "$line"
done
