#!/usr/bin/python3
"""f32 GEMM rate of OpenBLAS through numpy, for the same shapes as examples/gemm_speed."""
import sys
import time

import numpy as np

threads = sys.argv[1] if len(sys.argv) > 1 else "2"
shapes = [("square", n, n, n) for n in (256, 512, 1024, 2048)]
shapes += [("gpt", 4096, n, k) for k in (384, 1152, 1536) for n in (384, 1152, 1536)]
rng = np.random.default_rng(0)
for kind, m, n, k in shapes:
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    a @ b
    best = float("inf")
    reps = max(1, int(2e9 / (2 * m * n * k)))
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            a @ b
        best = min(best, (time.perf_counter() - t0) / reps)
    print(f"{kind:6s}  NN  M={m:5d} N={n:5d} K={k:5d} {2 * m * n * k / best / 1e9:8.1f} GFLOP/s")
