#!/usr/bin/env python3
"""torch.mm's f32 rate on the shapes and transposes examples/gemm_speed printed.

Usage: build/gemm_speed LEVEL THREADS | python bench/torch_mm.py THREADS
Reads gemm_speed's lines ("square NN M= 256 N= 256 K= 256 ..."), times torch.mm on operands
stored as gemm_speed stores them (a T operand is a transposed view of its stored matrix, which
PyTorch hands to its BLAS as such), best of 5 timed runs as there, and prints one line per shape
in the same format followed by the versions and the BLAS PyTorch reports.
"""
import re
import sys
import time

import torch

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
torch.set_num_threads(threads)
shape_re = re.compile(r"^(\w+)\s+([NT])([NT])\s+M=\s*(\d+) N=\s*(\d+) K=\s*(\d+)")
g = torch.Generator().manual_seed(0)
for line in sys.stdin:
    m = shape_re.match(line)
    if not m:
        continue
    label, ta, tb = m[1], m[2] == "T", m[3] == "T"
    M, N, K = int(m[4]), int(m[5]), int(m[6])
    a = torch.rand((K, M) if ta else (M, K), generator=g) * 2 - 1
    b = torch.rand((N, K) if tb else (K, N), generator=g) * 2 - 1
    a, b = (a.t() if ta else a), (b.t() if tb else b)
    c = torch.empty(M, N)
    flop = 2.0 * M * N * K
    reps = int(2e8 / flop) + 1
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.1:
        torch.mm(a, b, out=c)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            torch.mm(a, b, out=c)
        best = min(best, (time.perf_counter() - t0) / reps)
    print(f"{label:<7} {m[2]}{m[3]}  M={M:5d} N={N:5d} K={K:5d}  {flop / best * 1e-9:7.1f} GFLOP/s", flush=True)
blas = "mkl" if torch.backends.mkl.is_available() else "other"
print(f"torch {torch.__version__}, {threads} threads, BLAS {blas}, CPU capability {torch.backends.cpu.get_cpu_capability()}")
