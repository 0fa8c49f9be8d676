"""compile: fused kernels against eager Fluxion and NumPy, in one process
(medians and same-run ratios), plus first-call latency with a cold and a
warm kernel cache (fresh processes).

Run: PYTHONPATH=build/python /usr/bin/python3 benchmarks/python/bench_compile.py
[names: gelu, adamw, softmax_shapeless, ... to run only those]; threads:
FLUXION_NUM_THREADS (torch, when importable, is given as many).
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


def softmax(x):
    """Softmax composed of ops (what the compile rows fuse)."""
    e = mx.exp(x - mx.max(x, -1, keepdims=True))
    return e / mx.sum(e, -1, keepdims=True)


def numpy_softmax(xn):
    e = np.exp(xn - xn.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def bench_softmax(n=4096):
    # Composed softmax: compiled it is one fused kernel (max pass, exp-sum
    # pass, write pass per row); eager it is five nodes and three
    # intermediates of the input's size.
    xn = np.random.default_rng(3).standard_normal((n, n)).astype(np.float32)
    x = mx.array(xn)

    np_softmax = lambda: numpy_softmax(xn)  # noqa: E731

    csm = mx.compile(softmax)
    res = {"fluxion": median_time(lambda: mx.eval(csm(x))),
           "eager": median_time(lambda: mx.eval(softmax(x))),
           "mx.softmax": median_time(lambda: mx.eval(mx.softmax(x, -1))),
           "numpy": median_time(np_softmax)}
    report("softmax 4096^2 f32 (compiled)", res)


def bench_softmax_shapeless(n=4096):
    # The composed softmax compiled shapeless: traced at another shape, the
    # one generated row kernel replays at n x n (the rows' length comes
    # from the call), against the same function compiled for this shape.
    xn = np.random.default_rng(3).standard_normal((n, n)).astype(np.float32)
    x = mx.array(xn)

    np_softmax = lambda: numpy_softmax(xn)  # noqa: E731

    ssm = mx.compile(softmax, shapeless=True)
    mx.eval(ssm(mx.ones((3, 100))))  # the trace, at another shape
    csm = mx.compile(softmax)
    res = {"fluxion": median_time(lambda: mx.eval(ssm(x))),
           "shaped": median_time(lambda: mx.eval(csm(x))),
           "eager": median_time(lambda: mx.eval(softmax(x))),
           "numpy": median_time(np_softmax)}
    torch = torch_threads()
    if torch is not None:
        xt = torch.from_numpy(xn)
        res["torch"] = median_time(lambda: torch.softmax(xt, -1))
    report("softmax 4096^2 f32 (shapeless)", res)


def bench_row_range(n=4096):
    # max and min folds of one row kernel (compiled): the NaN-propagating
    # select must stay vectorized (a 64-byte lane vector once made it 9x
    # slower than eager's max).
    xn = np.random.default_rng(5).standard_normal((n, n)).astype(np.float32)
    x = mx.array(xn)

    def row_range(x):
        return mx.max(x, -1) - mx.min(x, -1)

    crr = mx.compile(row_range)
    res = {"fluxion": median_time(lambda: mx.eval(crr(x))),
           "eager": median_time(lambda: mx.eval(row_range(x))),
           "numpy": median_time(lambda: np.ptp(xn, -1))}
    torch = torch_threads()
    if torch is not None:
        xt = torch.from_numpy(xn)
        res["torch"] = median_time(
            lambda: torch.amax(xt, -1) - torch.amin(xt, -1))
    report("row max - min 4096^2 f32 (compiled)", res)


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


def torch_threads():
    """torch with as many threads as Fluxion, or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(int(os.environ.get("FLUXION_NUM_THREADS",
                                             os.cpu_count())))
    return torch


def bench_adamw(layers=4, size=1024):
    # AdamW over a parameter tree (a 4-layer MLP's weights): compiled, one
    # fused node per parameter reads p, g, m, v once and writes p, m, v
    # (112 MB here); eager writes a dozen intermediates per parameter.
    rng = np.random.default_rng(5)
    shape = (size, size)
    tree = {k: [rng.standard_normal(shape).astype(np.float32)
                for _ in range(layers)] for k in ("p", "g", "m")}
    tree["v"] = [np.abs(a) for a in tree["g"]]
    b1, b2, lr, eps, wd = 0.9, 0.999, 1e-3, 1e-8, 0.01

    def update(ps, gs, ms, vs, sqrt=mx.sqrt):
        out = []
        for p, g, m, v in zip(ps, gs, ms, vs):
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            out += [p * (1 - lr * wd) - lr * m / (sqrt(v) + eps), m, v]
        return out

    args = [[mx.array(a) for a in tree[k]] for k in "pgmv"]
    cupdate = mx.compile(update)
    np_args = [tree[k] for k in "pgmv"]
    # One fused node per output (what single-output groups gave): m and v
    # written by their own nodes, both read back for p, g read twice.
    cm = mx.compile(lambda m, g: b1 * m + (1 - b1) * g)
    cv = mx.compile(lambda v, g: b2 * v + (1 - b2) * g * g)
    cp = mx.compile(lambda p, m, v: p * (1 - lr * wd) - lr * m /
                    (mx.sqrt(v) + eps))

    def split(ps, gs, ms, vs):
        out = []
        for p, g, m, v in zip(ps, gs, ms, vs):
            m, v = cm(m, g), cv(v, g)
            out += [cp(p, m, v), m, v]
        return out

    res = {"fluxion": median_time(lambda: mx.eval(cupdate(*args))),
           "node per output": median_time(lambda: mx.eval(split(*args))),
           "eager": median_time(lambda: mx.eval(update(*args))),
           "numpy": median_time(lambda: update(*np_args, sqrt=np.sqrt))}
    torch = torch_threads()
    if torch is not None:
        tp = [torch.tensor(a, requires_grad=True) for a in tree["p"]]
        opt = torch.optim.AdamW(tp, lr=lr, betas=(b1, b2), eps=eps,
                                weight_decay=wd)
        for t, g in zip(tp, tree["g"]):
            t.grad = torch.tensor(g)
        res["torch AdamW"] = median_time(opt.step)
    report(f"adamw {layers}x{size}^2 f32 (compiled)", res)
    gbs = 7 * layers * size * size * 4 / res["fluxion"] / 1e9
    print(f"{'':34}compiled moves {gbs:.1f} GB/s (7 arrays read or written)")


def bench_cross_entropy(n=1024, classes=32000):
    # mean(logsumexp(x) - x[i, y_i]): compiled, one row kernel (max pass,
    # exp-sum pass, the target's logit picked from the row) and the mean.
    rng = np.random.default_rng(6)
    xn = rng.standard_normal((n, classes)).astype(np.float32)
    yn = rng.integers(0, classes, n)
    x, y = mx.array(xn), mx.array(yn)

    def ce(x, y):
        picked = mx.take_along_axis(x, y[:, None], -1).squeeze(-1)
        return mx.mean(mx.logsumexp(x, -1) - picked)

    def np_ce():
        m = xn.max(-1, keepdims=True)
        lse = m[:, 0] + np.log(np.exp(xn - m).sum(-1))
        return np.mean(lse - xn[np.arange(n), yn])

    cce = mx.compile(ce)
    # The gather outside the row kernel (as before it joined): logsumexp's
    # row node, the gather, the subtraction and mean.
    clse = mx.compile(lambda x: mx.logsumexp(x, -1))
    cmean = mx.compile(lambda a, b: mx.mean(a - b))

    def split(x, y):
        return cmean(clse(x), mx.take_along_axis(x, y[:, None], -1)[:, 0])

    res = {"fluxion": median_time(lambda: mx.eval(cce(x, y))),
           "gather apart": median_time(lambda: mx.eval(split(x, y))),
           "eager": median_time(lambda: mx.eval(ce(x, y))),
           "numpy": median_time(np_ce)}
    torch = torch_threads()
    if torch is not None:
        tx, ty = torch.from_numpy(xn), torch.from_numpy(yn)
        res["torch"] = median_time(
            lambda: torch.nn.functional.cross_entropy(tx, ty))
    report(f"cross-entropy {n}x{classes} (compiled)", res)
    grad = mx.grad(ce)
    cgrad = mx.compile(grad)
    res = {"fluxion": median_time(lambda: mx.eval(cgrad(x, y))),
           "eager": median_time(lambda: mx.eval(grad(x, y)))}
    if torch is not None:
        tx.requires_grad_(True)

        def torch_grad():
            torch.nn.functional.cross_entropy(tx, ty).backward()
            tx.grad = None
        res["torch"] = median_time(torch_grad)
    report("  its gradient (compiled)", res)


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
    benches = [bench_gelu, bench_layer_norm, bench_batch_norm, bench_softmax,
               bench_softmax_shapeless, bench_row_range, bench_mse,
               bench_mlp_step, bench_adamw, bench_cross_entropy,
               bench_compile_latency]
    chosen = sys.argv[1:]
    for bench in benches:
        if not chosen or bench.__name__[len("bench_"):] in chosen:
            bench()


if __name__ == "__main__":
    main()
