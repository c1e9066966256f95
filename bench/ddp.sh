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
N=2
USAGE="bench/ddp.sh baby|small [STEPS] [ROUNDS]"
. "$(dirname "$0")/dist_common.sh"
for r in $(seq "$ROUNDS"); do
    "$TRIT" train "${FLAGS[@]}" --out "$W/one$r" >/dev/null
    mpirun --allow-run-as-root --oversubscribe -np 2 -x OMP_NUM_THREADS "$TRIT" train --dist ddp "${FLAGS[@]}" \
        --out "$W/two$r" >/dev/null
    read -r t1 ms1 _ < <(stats "$W/one$r")
    read -r t2 ms2 comm < <(stats "$W/two$r")
    python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print(f'$CFG round $r: 1 rank {a:.0f} tok/s ({sys.argv[3]} ms/step), 2 ranks {b:.0f} tok/s ({sys.argv[4]} ms/step, comm wait {sys.argv[5]} ms/step): {b / a:.2f}x')" \
        "$t1" "$t2" "$ms1" "$ms2" "$comm"
done
