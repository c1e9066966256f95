#!/usr/bin/env bash
# ZeRO-1, ZeRO-2 and ZeRO-3 against DDP on N ranks x 1 thread, the same global batch (one
# micro-batch a rank): tokens/s of each (median of the steps after the first quarter), the ratio
# to DDP, the step's wait for communication, and memory: rank 0's parameter + gradient + optimizer
# bytes from the memory report (ZeRO-3's parameters with the groups it holds gathered at most)
# against DDP's, and the peak RSS in the steps of rank 0 (which also gathers the weights to
# evaluate at the end) and the largest of the others' (MB). DIST="ddp zero3" picks the runs. usage: bench/zero.sh baby|small [STEPS] [ROUNDS] [N]
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
    for d in ${DIST:-ddp zero1 zero2 zero3}; do
        mpirun --allow-run-as-root --oversubscribe -np "$N" -x OMP_NUM_THREADS "$TRIT" train --dist $d "${FLAGS[@]}" \
            --out "$W/$d$r" >"$W/$d$r.log"
        read -r tps ms comm < <(stats "$W/$d$r")
        mem=$(grep -Eo "^memory: (parameters|gradients|optimizer) +[0-9]+" "$W/$d$r.log" | awk '{s += $3} END {print s}')
        rss0=$(grep -Eo "^peak RSS: [0-9.]+" "$W/$d$r.log" | grep -Eo "[0-9.]+$")
        rss=$(grep -Eo "^peak RSS of rank [0-9]+: [0-9.]+" "$W/$d$r.log" | awk '{v = $NF; if (v > m) m = v} END {print m}')
        [ "$d" = ddp ] && base=$tps && base_mem=$mem
        line="$line $d $tps tok/s ($ms ms/step, comm $comm ms, $(python3 -c "print(f'{$tps / $base:.3f}')")x;"
        line="$line p+g+o $(python3 -c "print(f'{$mem / 1e6:.2f} MB = {$mem / $base_mem:.3f}x')"), peak RSS rank 0 $rss0 MB, others $rss MB)"
    done
    echo "$line"
done
