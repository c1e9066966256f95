#!/usr/bin/env bash
# fp32 DDP against --dist ddp --terngrad, 2 ranks x 1 thread, rounds alternating. usage (from the
# repository root, after a build; the data is ../shared/data/tinyshakespeare.txt):
#   bench/ddp_terngrad.sh speed [ROUNDS]      baby, B=12 a rank, 60 steps: median tokens/s, comm
#                                             wait and comm_bytes of each, and the bytes' ratio
#   bench/ddp_terngrad.sh quality [FLAGS...]  the baby recipe (README: 2000 steps, the global batch
#                                             12 x 64 as 6 a rank) both ways: val loss every 250
#                                             steps and the final ones' ratio; FLAGS go to the
#                                             ternary run (e.g. --terngrad-bucket 2048)
set -euo pipefail
MODE=${1:-speed}
shift || true
TRIT=${TRIT:-build/trit}
DATA=${DATA:-../shared/data/tinyshakespeare.txt}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
export OMP_NUM_THREADS=1
MPI=(mpirun --allow-run-as-root --oversubscribe -np 2 -x OMP_NUM_THREADS)
case "$MODE" in
speed)
    F=(--data "$DATA" --layers 4 --heads 4 --dim 128 --seq 64 --batch 12 --total-batch-tokens 1536 --steps 60
       --warmup 5 --threads 1 --eval-every 0 --eval-batches 1 --sample-tokens 0 --log-every 1 --ckpt-every 0)
    for r in $(seq "${1:-1}"); do
        for mode in fp32 terngrad; do
            extra=()
            [ "$mode" = terngrad ] && extra=(--terngrad)
            "${MPI[@]}" "$TRIT" train --dist ddp "${extra[@]}" "${F[@]}" --out "$W/$mode$r" >/dev/null
            python3 - "$W/$mode$r/metrics.jsonl" "round $r $mode" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = rows[len(rows) // 4:]
print(f"{sys.argv[2]}: {statistics.median(r['tokens_per_s'] for r in rows):.0f} tok/s, comm wait "
      f"{statistics.median(r['comm_ms'] for r in rows):.2f} ms/step, {rows[0]['comm_bytes']:.0f} bytes a step")
PY
        done
    done
    ;;
quality)
    R=(--data "$DATA" --layers 4 --heads 4 --dim 128 --seq 64 --batch 6 --total-batch-tokens 768 --lr 1e-3
       --min-lr 1e-4 --steps 2000 --warmup 100 --beta2 0.99 --eval-batches 50 --threads 1 --sample-tokens 0)
    "${MPI[@]}" "$TRIT" train --dist ddp "${R[@]}" --out "$W/fp32" >/dev/null
    "${MPI[@]}" "$TRIT" train --dist ddp --terngrad "${R[@]}" "$@" --out "$W/terngrad" >/dev/null
    python3 - "$W/fp32/metrics.jsonl" "$W/terngrad/metrics.jsonl" <<'PY'
import json, sys
runs = [[json.loads(l) for l in open(p)] for p in sys.argv[1:]]
val = [{r["step"]: r["val_loss"] for r in rows if "val_loss" in r} for rows in runs]
for s in sorted(val[0]):
    print(f"step {s}: val {val[0][s]:.4f} fp32 DDP, {val[1][s]:.4f} terngrad")
last = max(val[0])
print(f"final: terngrad / fp32 = {val[1][last] / val[0][last]:.4f}; bytes a step "
      f"{runs[1][-1]['comm_bytes']:.0f} / {runs[0][-1]['comm_bytes']:.0f} = 1/{runs[0][-1]['comm_bytes'] / runs[1][-1]['comm_bytes']:.1f}")
PY
    ;;
*) echo "usage: bench/ddp_terngrad.sh speed [ROUNDS] | quality [FLAGS...]" >&2; exit 2 ;;
esac
