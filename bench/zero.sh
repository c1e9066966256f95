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
USAGE="bench/zero.sh baby|small [STEPS] [ROUNDS] [N]"
. "$(dirname "$0")/dist_common.sh"
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
