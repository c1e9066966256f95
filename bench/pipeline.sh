#!/usr/bin/env bash
# Pipeline parallelism on 2 ranks x 1 thread against 1 process x 1 thread, the same global batch
# (M micro-batches a step: accumulated in one process, through 2 stages in the pipeline): tokens/s
# of each and the ratio, and the pipeline's measured bubble (the stages' idle share of the
# schedule) beside (P - 1) / (M + P - 1).
# usage: bench/pipeline.sh baby|small [M] [STEPS] [SCHEDULE gpipe|1f1b] [ROUNDS]
# (from the repository root, after a build; the data is ../shared/data/tinyshakespeare.txt; BATCH=B
# sets the micro-batch, 12 for baby and 16 for small unless given). REPLAY=1 also traces the
# pipeline's actions (TRIT_LOG=debug) and prints bench/pipeline_replay.py's account of its bubble.
set -euo pipefail
CFG=${1:-baby}
M=${2:-4}
STEPS=${3:-40}
SCHED=${4:-1f1b}
ROUNDS=${5:-1}
TRIT=${TRIT:-build/trit}
DATA=${DATA:-../shared/data/tinyshakespeare.txt}
case "$CFG" in
baby) ARCH=(--layers 4 --heads 4 --dim 128 --seq 64 --batch "${BATCH:-12}") ;;
small) ARCH=(--layers 6 --heads 6 --dim 384 --seq 256 --batch "${BATCH:-16}") ;;
*) echo "usage: bench/pipeline.sh baby|small [M] [STEPS] [SCHEDULE] [ROUNDS]" >&2; exit 2 ;;
esac
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
FLAGS=(--data "$DATA" "${ARCH[@]}" --micro-batches "$M" --steps "$STEPS" --warmup 5 --threads 1
       --eval-every 0 --eval-batches 1 --sample-tokens 0 --log-every 1 --ckpt-every 0)
export OMP_NUM_THREADS=1
# Medians of the steps after the first quarter (warm caches): tokens/s, ms, bubble.
stats() {
    python3 - "$1/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = rows[len(rows) // 4:]
med = lambda k: statistics.median(r[k] for r in rows) if k in rows[0] else float("nan")
print(f"{med('tokens_per_s'):.0f} {med('ms'):.2f} {med('bubble'):.4f} {med('bubble_ideal'):.4f}")
PY
}
for r in $(seq "$ROUNDS"); do
    "$TRIT" train "${FLAGS[@]}" --out "$W/one$r" >/dev/null
    log=()
    [ -z "${REPLAY:-}" ] || log=(-x TRIT_LOG=debug)
    mpirun --allow-run-as-root --oversubscribe -np 2 -x OMP_NUM_THREADS "${log[@]}" "$TRIT" train --dist pipeline \
        --pipeline-schedule "$SCHED" "${FLAGS[@]}" --out "$W/two$r" >/dev/null 2>"$W/two$r.err" ||
        { cat "$W/two$r.err" >&2; exit 1; }
    read -r t1 ms1 _ _ < <(stats "$W/one$r")
    read -r t2 ms2 bub ideal < <(stats "$W/two$r")
    python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); bu, id = float(sys.argv[5]), float(sys.argv[6]); print(f'$CFG $SCHED M=$M round $r: 1 process {a:.0f} tok/s ({sys.argv[3]} ms/step), 2 stages {b:.0f} tok/s ({sys.argv[4]} ms/step): {b / a:.2f}x; bubble {bu:.3f} measured, {id:.3f} = (P-1)/(M+P-1) ({(bu - id) / id * 100:+.0f}%)')" \
        "$t1" "$t2" "$ms1" "$ms2" "$bub" "$ideal"
    [ -z "${REPLAY:-}" ] || python3 "$(dirname "$0")/pipeline_replay.py" "$W/two$r.err"
done
