#!/usr/bin/env bash
# A build without MPI: `trit train --dist ddp` (and --dist tensor) says that the build has no MPI
# and exits non-zero, before it writes anything. usage: no_mpi.sh TRIT
set -u
TRIT=$1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
for dist in ddp tensor; do
    out=$("$TRIT" train --dist $dist --digits 2 --layers 1 --dim 32 --heads 2 --steps 2 --out "$W/run" 2>&1)
    rc=$?
    echo "$out"
    [ "$rc" -ne 0 ] || { echo "FAIL: --dist $dist in a build without MPI exited 0"; exit 1; }
    echo "$out" | grep -q "this build of trit has no MPI, so --dist cannot run: install Open MPI" ||
        { echo "FAIL: no message saying the build has no MPI (--dist $dist)"; exit 1; }
    [ ! -e "$W/run" ] || { echo "FAIL: the refused run wrote $W/run"; exit 1; }
done
echo "ok"
