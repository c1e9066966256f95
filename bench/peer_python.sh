#!/usr/bin/env bash
# Prints the python that runs the PyTorch side of the benchmarks, as bench/setup.sh installed it:
# the virtual environment's (PyTorch 2.x from PyPI) if it imports torch, else Debian's
# /usr/bin/python3 with python3-torch (the 1.13 fallback; its BLAS must then be OpenBLAS,
# bench/check_blas.sh). Exits 1 with a message when neither imports torch.
#   TRIT_BENCH_VENV=DIR   the environment (default ~/.cache/trit/bench-venv)
#   PEER_PYTHON=path      use this python as it is
set -euo pipefail
if [ -n "${PEER_PYTHON:-}" ]; then
    echo "$PEER_PYTHON"
    exit 0
fi
venv=${TRIT_BENCH_VENV:-$HOME/.cache/trit/bench-venv}
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import torch' 2>/dev/null; then
    echo "$venv/bin/python"
    exit 0
fi
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    bash "$(dirname "$0")/check_blas.sh"
    echo /usr/bin/python3
    exit 0
fi
echo "peer_python.sh: no PyTorch in $venv nor for /usr/bin/python3: run bash bench/setup.sh" >&2
exit 1
