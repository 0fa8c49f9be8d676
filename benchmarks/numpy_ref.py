"""NumPy timings for the reference column of fluxion_bench.

Prints one `name seconds` line per workload (median of several runs). The
C++ harness runs this script in the same invocation so ratios compare like
with like on the same machine state.
"""
import statistics
import sys
import time

import numpy as np


def median_time(f, repeat=15, warmup=3):
    for _ in range(warmup):
        f()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    n = 1 << 24
    a = np.random.rand(n).astype(np.float32)
    b = np.random.rand(n).astype(np.float32)
    small = np.ones(16, dtype=np.float32)

    def chain():
        x = small
        for _ in range(1000):
            x = x + small
        return x

    def chain_scalar():
        x = small
        for _ in range(1000):
            x = x + 1.0
        return x

    def chain_mul():
        x = small
        for _ in range(1000):
            x = x * small
        return x

    m = np.random.rand(1024, 1024).astype(np.float32)
    results = {
        "chain_1000_adds": median_time(chain, repeat=20) / 1000,
        "chain_1000_add_scalar": median_time(chain_scalar, repeat=20) / 1000,
        "chain_1000_mul_array": median_time(chain_mul, repeat=20) / 1000,
        "add_16M_f32": median_time(lambda: a + b),
        "sum_16M_f32": median_time(lambda: a.sum()),
        "matmul_1024_f32": median_time(lambda: m @ m, repeat=5),
    }
    for k, v in results.items():
        print(k, v)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
