"""compile: fused kernels against eager Fluxion and NumPy, in one process
(medians and same-run ratios), plus first-call latency with a cold and a
warm kernel cache (fresh processes).

Run: PYTHONPATH=build/python /usr/bin/python3 benchmarks/python/bench_compile.py
"""

import math
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import median_time, report  # noqa: E402

import fluxion.core as mx  # noqa: E402

C = math.sqrt(2 / math.pi)


def gelu(x):
    return 0.5 * x * (1 + mx.tanh(C * (x + 0.044715 * x * x * x)))


def np_gelu(x):
    return 0.5 * x * (1 + np.tanh(C * (x + 0.044715 * x * x * x)))


def bench_gelu(n=1 << 24):
    xn = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    x = mx.array(xn)
    cgelu = mx.compile(gelu)
    dst = np.empty_like(xn)
    res = {
        "fluxion": median_time(lambda: mx.eval(cgelu(x))),
        "eager": median_time(lambda: mx.eval(gelu(x))),
        "numpy": median_time(lambda: np_gelu(xn)),
        # One pass over memory: read 64 MB, write 64 MB.
        "memory pass": median_time(lambda: np.copyto(dst, xn)),
    }
    report("gelu 16M f32 (compiled)", res)
    err = np.abs(np.array(cgelu(x)) - np_gelu(xn)).max()
    print(f"{'':34}max |compiled - numpy| = {err:.2e}")


def bench_layer_norm(n=4096):
    xn = np.random.default_rng(1).standard_normal((n, n)).astype(np.float32)
    x = mx.array(xn)
    w = mx.ones((n,))
    b = mx.zeros((n,))

    def ln(x, w, b):
        mu = mx.mean(x, axis=-1, keepdims=True)
        xc = x - mu
        var = mx.mean(xc * xc, axis=-1, keepdims=True)
        return xc * mx.rsqrt(var + 1e-5) * w + b

    cln = mx.compile(ln)

    def np_ln():
        mu = xn.mean(-1, keepdims=True)
        xc = xn - mu
        return xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5)

    res = {"fluxion": median_time(lambda: mx.eval(cln(x, w, b))),
           "eager": median_time(lambda: mx.eval(ln(x, w, b))),
           "numpy": median_time(np_ln)}
    report("layer norm 4096^2 (compiled)", res)


def bench_batch_norm(shape=(64, 28, 28, 128)):
    # Statistics over the leading axes (NHWC): compiled, the mean, the
    # variance's sum and the output are one column kernel.
    xn = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    x = mx.array(xn)
    w = mx.ones((shape[-1],))
    axes = tuple(range(len(shape) - 1))

    def bn(x, w):
        mu = mx.mean(x, axis=axes, keepdims=True)
        var = mx.var(x, axis=axes, keepdims=True)
        return (x - mu) * mx.rsqrt(var + 1e-5) * w

    cbn = mx.compile(bn)

    def np_bn():
        mu = xn.mean(axes, keepdims=True)
        return (xn - mu) / np.sqrt(xn.var(axes, keepdims=True) + 1e-5)

    res = {"fluxion": median_time(lambda: mx.eval(cbn(x, w))),
           "eager": median_time(lambda: mx.eval(bn(x, w))),
           "numpy": median_time(np_bn)}
    report("batch norm 64x28x28x128 (compiled)", res)


def bench_softmax(n=4096):
    # Composed softmax: compiled it is one fused kernel (max pass, exp-sum
    # pass, write pass per row); eager it is five nodes and three
    # intermediates of the input's size.
    xn = np.random.default_rng(3).standard_normal((n, n)).astype(np.float32)
    x = mx.array(xn)

    def softmax(x):
        e = mx.exp(x - mx.max(x, -1, keepdims=True))
        return e / mx.sum(e, -1, keepdims=True)

    def np_softmax():
        e = np.exp(xn - xn.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    csm = mx.compile(softmax)
    res = {"fluxion": median_time(lambda: mx.eval(csm(x))),
           "eager": median_time(lambda: mx.eval(softmax(x))),
           "mx.softmax": median_time(lambda: mx.eval(mx.softmax(x, -1))),
           "numpy": median_time(np_softmax)}
    report("softmax 4096^2 f32 (compiled)", res)


def bench_mse(n=1 << 24):
    # mean(square(x - y)): the fused total reads x and y once and writes
    # one number; eager writes two 64 MB intermediates.
    rng = np.random.default_rng(4)
    xn = rng.standard_normal(n).astype(np.float32)
    yn = rng.standard_normal(n).astype(np.float32)
    x, y = mx.array(xn), mx.array(yn)
    mse = lambda a, b: mx.mean(mx.square(a - b))
    cmse = mx.compile(mse)
    res = {"fluxion": median_time(lambda: mx.eval(cmse(x, y))),
           "eager": median_time(lambda: mx.eval(mse(x, y))),
           "numpy": median_time(lambda: np.mean(np.square(xn - yn)))}
    report("mean(square(x-y)) 16M (compiled)", res)


def bench_mlp_step(batch=256, sizes=(784, 512, 512, 10)):
    rng = np.random.default_rng(2)
    params = []
    for i, o in zip(sizes[:-1], sizes[1:]):
        params += [mx.array(rng.standard_normal((i, o)).astype(np.float32)
                            / math.sqrt(i)), mx.zeros((o,))]
    x = mx.array(rng.standard_normal((batch, sizes[0])).astype(np.float32))
    y = mx.array(rng.integers(0, sizes[-1], batch))

    def loss(params, x, y):
        h = x
        for k in range(0, len(params) - 2, 2):
            h = gelu(h @ params[k] + params[k + 1])
        logits = h @ params[-2] + params[-1]
        lse = mx.logsumexp(logits, axis=-1)
        return (lse - mx.take_along_axis(logits, y[:, None], -1)[:, 0]).mean()

    vg = mx.value_and_grad(loss)

    def step(params, x, y):
        value, grads = vg(params, x, y)
        return value, [p - 0.01 * g for p, g in zip(params, grads)]

    cstep = mx.compile(step)
    res = {"fluxion": median_time(lambda: mx.eval(cstep(params, x, y))),
           "eager": median_time(lambda: mx.eval(step(params, x, y)))}
    report("mlp step b256 gelu (compiled)", res)


LATENCY = """
import time, fluxion.core as mx
x = mx.ones((1 << 10,))
f = lambda x: 0.5 * x * (1 + mx.tanh(0.79788456 * (x + 0.044715 * x * x * x)))
mx.eval(f(x))
t = time.perf_counter(); mx.eval(f(x)); eager = time.perf_counter() - t
t = time.perf_counter(); mx.eval(mx.compile(f)(x))
print(time.perf_counter() - t - eager)
"""


def bench_compile_latency():
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, FLUXION_CACHE_DIR=d)

        def first_call():
            out = subprocess.run([sys.executable, "-c", LATENCY], env=env,
                                 capture_output=True, text=True, check=True)
            return float(out.stdout)

        cold = first_call()
        warm = sorted(first_call() for _ in range(3))[1]
    print(f"{'gelu first call: compile latency':<34}cold cache "
          f"{cold * 1e3:8.1f} ms  warm cache {warm * 1e3:8.2f} ms")


def main():
    bench_gelu()
    bench_layer_norm()
    bench_batch_norm()
    bench_softmax()
    bench_mse()
    bench_mlp_step()
    bench_compile_latency()


if __name__ == "__main__":
    main()
