#!/usr/bin/env python3
"""Prints this machine's single-core sgemm speed in GFLOP/s (best of 5, 1024^3, OpenBLAS
through numpy with one thread): the 'one core here' that the time dilation of
cluster/edge.sh compares with a real device's published one-core sgemm."""
import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"
import time  # noqa: E402

import numpy as np  # noqa: E402

n = 1024
a = np.random.default_rng(1).random((n, n), dtype=np.float32)
b = np.random.default_rng(2).random((n, n), dtype=np.float32)
a @ b  # warm-up
times = []
for _ in range(5):
    t0 = time.perf_counter()
    a @ b
    times.append(time.perf_counter() - t0)
print(f"{2 * n**3 / min(times) / 1e9:.1f}")
