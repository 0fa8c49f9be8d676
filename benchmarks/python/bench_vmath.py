"""Eager transcendental kernels (the vectorized-math path: SLEEF or glibc's
libmvec, chosen at configure time by FLUXION_VECTOR_MATH) against NumPy,
and against PyTorch when importable, in one process: medians and ratios.

Run: PYTHONPATH=build/python /usr/bin/python3 benchmarks/python/bench_vmath.py [--label NAME]
Build once with -DFLUXION_VECTOR_MATH=SLEEF and once with =LIBMVEC to
compare the two libraries (the label names the build in the output).
"""

import argparse
import os
import sys

import numpy as np

import fluxion.core as mx

sys.path.insert(0, os.path.dirname(__file__))
from bench import median_time, report  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

OPS = ["exp", "log", "sin", "tanh", "expm1", "arctan", "erf"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--label", default="build")
    p.add_argument("--n", type=int, default=1 << 24)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    for dtype, n in (("float32", args.n), ("float64", args.n // 4)):
        xn = rng.uniform(0.1, 3.0, n).astype(dtype)
        x = mx.array(xn)
        mx.eval(x)
        for op in OPS:
            f = getattr(mx, op)
            res = {"fluxion": median_time(lambda: mx.eval(f(x)))}
            nf = {"arctan": np.arctan}.get(op, getattr(np, op, None))
            if nf is not None:
                res["numpy"] = median_time(lambda: nf(xn))
            if torch is not None:
                xt = torch.from_numpy(xn)
                tf = getattr(torch, {"arctan": "atan"}.get(op, op))
                res["torch"] = median_time(lambda: tf(xt))
            report(f"[{args.label}] {op} {n >> 20}M {dtype}", res)


if __name__ == "__main__":
    main()
