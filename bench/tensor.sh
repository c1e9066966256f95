#!/usr/bin/env bash
# Tensor parallelism on 2 ranks x 1 thread (one group: every block's matrices split in two) against
# 1 process x 1 thread, the same global batch (2 micro-batches a step, both run by the group):
# tokens/s of each and the ratio, the wait for the group's sums per step, and each side's weights,
# gradients and optimizer state from the memory report (a rank's against one process's).
# usage: bench/tensor.sh baby|small [STEPS] [ROUNDS]
# (from the repository root, after a build; the data is ../shared/data/tinyshakespeare.txt).
set -euo pipefail
CFG=${1:-baby}
STEPS=${2:-40}
ROUNDS=${3:-1}
TRIT=${TRIT:-build/trit}
DATA=${DATA:-../shared/data/tinyshakespeare.txt}
N=2
USAGE="bench/tensor.sh baby|small [STEPS] [ROUNDS]"
. "$(dirname "$0")/dist_common.sh"
# mem LOG: "parameters gradients optimizer" bytes from the run's memory report.
mem() { awk '/^memory: (parameters|gradients|optimizer) /{printf "%s ", $3} END {print ""}' "$1"; }
for r in $(seq "$ROUNDS"); do
    "$TRIT" train "${FLAGS[@]}" --out "$W/one$r" >"$W/one$r.log"
    mpirun --allow-run-as-root --oversubscribe -np 2 -x OMP_NUM_THREADS "$TRIT" train --dist tensor "${FLAGS[@]}" \
        --out "$W/two$r" >"$W/two$r.log"
    read -r t1 ms1 _ < <(stats "$W/one$r")
    read -r t2 ms2 comm < <(stats "$W/two$r")
    python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print(f'$CFG round $r: 1 rank {a:.0f} tok/s ({sys.argv[3]} ms/step), tp 2 ranks {b:.0f} tok/s ({sys.argv[4]} ms/step, comm wait {sys.argv[5]} ms/step): {b / a:.2f}x')" \
        "$t1" "$t2" "$ms1" "$ms2" "$comm"
done
read -r p1 g1 o1 < <(mem "$W/one1.log")
read -r p2 g2 o2 < <(mem "$W/two1.log")
grep '^tensor:' "$W/two1.log"
python3 -c "import sys; v = [int(x) for x in sys.argv[1:]]; n = ['weights', 'gradients', 'optimizer']; print('$CFG per rank: ' + ', '.join(f'{n[i]} {v[3 + i] / 1e6:.2f} MB of {v[i] / 1e6:.2f} MB ({v[3 + i] / v[i]:.3f}x)' for i in range(3)))" \
    "$p1" "$g1" "$o1" "$p2" "$g2" "$o2"
