#!/usr/bin/env bash
# Installs what the benchmarks compare against.
#
# PyTorch 2.x, numpy and tiktoken from PyPI into a virtual environment (`pip install torch numpy
# tiktoken`: PyTorch's default Linux x86-64 wheel, which runs on the CPU with its bundled MKL and
# oneDNN; Inductor, torch.compile's CPU backend, compiles C++ with g++ and the Python headers;
# tiktoken is bench/tokenizer_gpt2.sh's peer). Where PyPI cannot be
# reached, Debian's PyTorch 1.13 (python3-torch) for the system python3 instead, with OpenBLAS as
# its BLAS (without it Debian's numpy and PyTorch run the reference BLAS). Both paths also install
# numpy with OpenBLAS for /usr/bin/python3 (bench/gemm_compare.sh), hyperfine, and Debian's King
# James Bible (bible-kjv: bench/finetune_quality.sh's second text).
#
#   TRIT_BENCH_VENV=DIR   where the environment goes (default ~/.cache/trit/bench-venv); one that
#                         already imports torch 2.x is kept as it is
#   TRIT_BENCH_PEER=debian  skip PyPI and take the Debian fallback
# bench/peer_python.sh finds what this installed; bench/compare.sh and bench/report.sh use it.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
venv=${TRIT_BENCH_VENV:-$HOME/.cache/trit/bench-venv}

$SUDO apt-get update -qq
$SUDO apt-get install -y -qq python3-numpy libopenblas0-pthread hyperfine python3-venv python3-dev g++ bible-kjv \
    >/dev/null

torch2_in() {
    "$1" -c 'import sys, torch; sys.exit(0 if int(torch.__version__.split(".")[0]) >= 2 else 1)' \
        2>/dev/null
}

if [ "${TRIT_BENCH_PEER:-}" != debian ]; then
    if [ -x "$venv/bin/python" ] && torch2_in "$venv/bin/python"; then
        echo "setup: $venv already has PyTorch $("$venv/bin/python" -c 'import torch; print(torch.__version__)')"
        exit 0
    fi
    if python3 -m venv "$venv" && "$venv/bin/pip" install -q --upgrade pip &&
        "$venv/bin/pip" install -q torch numpy tiktoken && torch2_in "$venv/bin/python"; then
        echo "setup: PyTorch $("$venv/bin/python" -c 'import torch; print(torch.__version__)') from PyPI in $venv"
        exit 0
    fi
    echo "setup: PyTorch 2.x from PyPI could not be installed in $venv; falling back to Debian's python3-torch" >&2
fi
$SUDO apt-get install -y -qq python3-torch >/dev/null
echo "setup: Debian's PyTorch $(python3 -c 'import torch; print(torch.__version__)') for /usr/bin/python3 (fallback)"
