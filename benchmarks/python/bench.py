"""Fluxion's Python package against NumPy (and PyTorch when importable), in
one process: medians of repeated runs and their ratios.

Run: PYTHONPATH=build/python /usr/bin/python3 benchmarks/python/bench.py
(`--dispatch`: only the dispatch-overhead table, issue 18 item 4.)
"""

import statistics
import sys
import time

import numpy as np

import fluxion.core as mx

try:
    import torch
except ImportError:  # Debian's python3-torch is optional
    torch = None


def median_time(fn, repeats=7, warmup=2):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def report(name, results, unit="ms", scale=1e3):
    base = results["fluxion"]
    parts = [f"fluxion {base * scale:9.2f} {unit}"]
    for k, v in results.items():
        if k != "fluxion":
            parts.append(f"{k} {v * scale:9.2f} {unit} "
                         f"(fluxion/{k} {base / v:5.2f}x)")
    print(f"{name:<34}" + "  ".join(parts))


def bench_dispatch(n=1000, repeats=21):
    """Per-op cost of the Python dispatch path (issue 18 item 4): chains of
    1000 ops on 16 float32 elements built and evaluated, and single calls
    that only build a node, each against NumPy in the same run."""
    x = mx.ones((16,))
    mx.eval(x)
    xn = np.ones(16, dtype=np.float32)
    m = mx.ones((4, 4))
    mx.eval(m)
    mn = np.ones((4, 4), dtype=np.float32)

    def chain(step, start, evaluate):
        def run():
            y = start
            for _ in range(n):
                y = step(y)
            if evaluate:
                mx.eval(y)
        return run

    chains = [
        ("y = y + 1.0", lambda y: y + 1.0),
        ("y = y * x (array)", None),
        ("y = 2 * y", lambda y: 2 * y),
        ("y = y ** 2", lambda y: y ** 2),
    ]
    rows = []
    for name, step in chains:
        if step is None:
            fx_step, np_step = (lambda y: y * x), (lambda y: y * xn)
        else:
            fx_step = np_step = step
        t_fx = median_time(chain(fx_step, x, True), repeats) / n
        t_np = median_time(chain(np_step, xn, False), repeats) / n
        rows.append((f"chain {name}, build+eval", t_fx, t_np))

    def calls(fn, arg):
        def run():
            for _ in range(n):
                fn(arg)
        return run

    singles = [
        ("x.sum() (build)", lambda a: a.sum()),
        ("x[0] (build)", lambda a: a[0]),
        ("m.T (build)", lambda a: a.T),
        ("m.reshape(16) (build)", lambda a: a.reshape(16)),
    ]
    for name, fn in singles:
        arg, narg = (m, mn) if name.startswith("m") else (x, xn)
        t_fx = median_time(calls(fn, arg), repeats) / n
        t_np = median_time(calls(fn, narg), repeats) / n
        rows.append((name, t_fx, t_np))
    for name, t_fx, t_np in rows:
        print(f"{'dispatch ' + name:<44}fluxion {t_fx * 1e6:7.2f} us/op  "
              f"numpy {t_np * 1e6:7.2f} us/op  (fluxion/numpy "
              f"{t_fx / t_np:5.2f}x)")


def bench_add_chain(n=1000):
    x = mx.ones((16,))
    xn = np.ones(16, dtype=np.float32)

    def fx_chain():
        y = x
        for _ in range(n):
            y = y + 1.0
        mx.eval(y)

    def np_chain():
        y = xn
        for _ in range(n):
            y = y + np.float32(1.0)

    res = {"fluxion": median_time(fx_chain) / n,
           "numpy": median_time(np_chain) / n}
    if torch is not None:
        xt = torch.ones(16)

        def torch_chain():
            y = xt
            for _ in range(n):
                y = y + 1.0

        res["torch"] = median_time(torch_chain) / n
    report("chain of 1000 adds, 16 elems /op", res, "us", 1e6)


def bench_big_add(n=1 << 24):
    a, b = mx.ones((n,)), mx.ones((n,))
    an, bn = np.ones(n, dtype=np.float32), np.ones(n, dtype=np.float32)
    mx.eval(a, b)

    def fx_add():
        mx.eval(a + b)

    res = {"fluxion": median_time(fx_add), "numpy": median_time(lambda: an + bn)}
    if torch is not None:
        at, bt = torch.ones(n), torch.ones(n)
        res["torch"] = median_time(lambda: at + bt)
    report("add of 16M float32", res)


def mlp_params(rng, sizes):
    return [(rng.normal(0, np.sqrt(2 / i), (i, o)).astype(np.float32),
             np.zeros(o, dtype=np.float32)) for i, o in zip(sizes[:-1],
                                                           sizes[1:])]


def bench_mlp_step(batch=256, sizes=(784, 512, 512, 10)):
    rng = np.random.default_rng(0)
    p_np = mlp_params(rng, sizes)
    x_np = rng.normal(size=(batch, sizes[0])).astype(np.float32)
    y_np = rng.integers(0, sizes[-1], batch).astype(np.int32)
    lr = 1e-3

    params = [{"w": mx.array(w), "b": mx.array(b)} for w, b in p_np]
    x, y = mx.array(x_np), mx.array(y_np)

    def loss_fn(params, x, y):
        h = x
        for layer in params[:-1]:
            h = mx.maximum(h @ layer["w"] + layer["b"], 0.0)
        logits = h @ params[-1]["w"] + params[-1]["b"]
        logp = mx.log_softmax(logits, axis=-1)
        return -mx.mean(mx.take_along_axis(logp, mx.expand_dims(y, -1), -1))

    vg = mx.value_and_grad(loss_fn)
    state = {"p": params}

    def fx_step():
        loss, grads = vg(state["p"], x, y)
        state["p"] = [{k: l[k] - lr * g[k] for k in l}
                      for l, g in zip(state["p"], grads)]
        mx.eval(state["p"], loss)

    def np_step():
        # Hand-written forward and backward.
        acts, h = [x_np], x_np
        for w, b in p_np[:-1]:
            h = np.maximum(h @ w + b, 0)
            acts.append(h)
        logits = h @ p_np[-1][0] + p_np[-1][1]
        logits = logits - logits.max(-1, keepdims=True)
        e = np.exp(logits)
        probs = e / e.sum(-1, keepdims=True)
        d = probs
        d[np.arange(batch), y_np] -= 1
        d /= batch
        for i in range(len(p_np) - 1, -1, -1):
            w, b = p_np[i]
            gw, gb = acts[i].T @ d, d.sum(0)
            if i > 0:
                d = (d @ w.T) * (acts[i] > 0)
            p_np[i] = (w - lr * gw, b - lr * gb)

    res = {"fluxion": median_time(fx_step), "numpy": median_time(np_step)}
    if torch is not None:
        tp = [(torch.tensor(w, requires_grad=True),
               torch.tensor(b, requires_grad=True)) for w, b in p_np]
        xt, yt = torch.tensor(x_np), torch.tensor(y_np).long()

        def torch_step():
            h = xt
            for w, b in tp[:-1]:
                h = torch.relu(h @ w + b)
            loss = torch.nn.functional.cross_entropy(h @ tp[-1][0] + tp[-1][1],
                                                     yt)
            loss.backward()
            with torch.no_grad():
                for w, b in tp:
                    w -= lr * w.grad
                    b -= lr * b.grad
                    w.grad = None
                    b.grad = None

        res["torch"] = median_time(torch_step)
    report("MLP step 784-512-512-10, b=256", res)


def bench_per_example(batch=64, dim=100):
    rng = np.random.default_rng(1)
    w = mx.array(rng.normal(size=(dim, 10)).astype(np.float32))
    xs = mx.array(rng.normal(size=(batch, dim)).astype(np.float32))
    ys = mx.array(rng.integers(0, 10, batch).astype(np.int32))

    def loss(w, x, y):
        logp = mx.log_softmax(mx.tanh(x @ w), axis=-1)
        return -logp[y]

    g = mx.grad(loss)
    pe = mx.vmap(g, in_axes=(None, 0, 0))

    def fx_vmap():
        mx.eval(pe(w, xs, ys))

    def fx_loop():
        mx.eval([g(w, xs[i], ys[i]) for i in range(batch)])

    ref = np.stack([np.array(g(w, xs[i], ys[i])) for i in range(batch)])
    assert np.allclose(np.array(pe(w, xs, ys)), ref, rtol=1e-4, atol=1e-5)
    t_vmap, t_loop = median_time(fx_vmap), median_time(fx_loop)
    print(f"{'per-example grads, 64 x (100x10)':<34}fluxion vmap(grad) "
          f"{t_vmap * 1e3:9.2f} ms  loop of grad {t_loop * 1e3:9.2f} ms "
          f"(vmap/loop {t_vmap / t_loop:5.2f}x)")


def bench_fast(n=4096, heads=16, length=1024, dim=64):
    rng = np.random.default_rng(0)
    xn = rng.standard_normal((n, n), dtype=np.float32)
    wn = rng.standard_normal(n, dtype=np.float32)
    bn = rng.standard_normal(n, dtype=np.float32)
    x, w, b = mx.array(xn), mx.array(wn), mx.array(bn)

    def np_layer_norm():
        mu = xn.mean(-1, keepdims=True)
        xc = xn - mu
        return xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5) * wn + bn

    res = {"fluxion": median_time(
               lambda: mx.eval(mx.fast.layer_norm(x, w, b, 1e-5))),
           "numpy": median_time(np_layer_norm)}
    if torch is not None:
        xt, wt, bt = (torch.from_numpy(a) for a in (xn, wn, bn))
        res["torch"] = median_time(
            lambda: torch.nn.functional.layer_norm(xt, (n,), wt, bt, 1e-5))
    report(f"fast.layer_norm {n}x{n}", res)

    qn, kn, vn = (rng.standard_normal((1, heads, length, dim),
                                      dtype=np.float32) for _ in range(3))
    q, k, v = mx.array(qn), mx.array(kn), mx.array(vn)
    scale = dim ** -0.5

    def np_sdpa():
        s = (qn * scale) @ np.swapaxes(kn, -1, -2)
        s = np.exp(s - s.max(-1, keepdims=True))
        return (s / s.sum(-1, keepdims=True)) @ vn

    res = {"fluxion": median_time(lambda: mx.eval(
               mx.fast.scaled_dot_product_attention(q, k, v, scale=scale))),
           "numpy": median_time(np_sdpa)}
    if torch is not None:
        qt, kt, vt = (torch.from_numpy(a) for a in (qn, kn, vn))
        f = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
        if f is None:  # older torch: the same computation composed
            def f(a, b, c):
                return torch.softmax((a * scale) @ b.transpose(-1, -2),
                                     -1) @ c
        res["torch"] = median_time(lambda: f(qt, kt, vt))
    report(f"fast.sdpa h{heads} l{length} d{dim}", res)
def bench_fft():
    # NumPy < 2 computes every transform in complex128 (pocketfft in double);
    # torch.fft (pocketfft in single precision on the CPU) is the
    # like-for-like complex64 reference when installed.
    rng = np.random.default_rng(0)

    def cplx(*shape):
        return (rng.standard_normal(shape)
                + 1j * rng.standard_normal(shape)).astype(np.complex64)

    cases = [
        ("fft 2^20 complex64", cplx(1 << 20), "fft", {}),
        ("rfft 2^20 float32",
         rng.standard_normal(1 << 20).astype(np.float32), "rfft", {}),
        ("fft prime 1000003 complex64", cplx(1000003), "fft", {}),
        ("fft 4096x1024 last axis", cplx(4096, 1024), "fft", {}),
    ]
    for name, x, fn, kw in cases:
        xa = mx.array(x)
        mx.eval(xa)
        f = getattr(mx.fft, fn)
        res = {"fluxion": median_time(lambda: mx.eval(f(xa, **kw)), 5, 1),
               "numpy": median_time(lambda: getattr(np.fft, fn)(x, **kw), 5,
                                    1)}
        if torch is not None:
            xt = torch.from_numpy(x)
            tf = getattr(torch.fft, fn)
            res["torch"] = median_time(lambda: tf(xt, **kw), 5, 1)
        report(name, res)
def bench_conv2d(n=8, hw=56, c=64, k=3):
    """conv2d forward, channels last, against torch's NCHW conv2d (skipped
    without torch: NumPy has no convolution of this kind)."""
    if torch is None:
        print(f"{'conv2d 8x56x56x64, 3x3':<34}skipped (torch not installed)")
        return
    rng = np.random.default_rng(2)
    x_np = rng.normal(size=(n, hw, hw, c)).astype(np.float32)
    w_np = rng.normal(size=(c, k, k, c)).astype(np.float32)
    x, w = mx.array(x_np), mx.array(w_np)
    xt = torch.from_numpy(np.ascontiguousarray(x_np.transpose(0, 3, 1, 2)))
    wt = torch.from_numpy(np.ascontiguousarray(w_np.transpose(0, 3, 1, 2)))
    mx.eval(x, w)
    out = np.array(mx.conv2d(x, w, padding=1))
    ref = torch.nn.functional.conv2d(xt, wt, padding=1).numpy()
    assert np.allclose(out, ref.transpose(0, 2, 3, 1), rtol=1e-3, atol=1e-3)

    def torch_conv():
        with torch.no_grad():
            torch.nn.functional.conv2d(xt, wt, padding=1)

    res = {"fluxion": median_time(lambda: mx.eval(mx.conv2d(x, w, padding=1))),
           "torch": median_time(torch_conv)}
    report("conv2d 8x56x56x64, 3x3, pad 1", res)


def main():
    print("torch:", "available" if torch is not None else "not installed "
          "(skipped)")
    bench_dispatch()
    if "--dispatch" in sys.argv:
        return
    bench_add_chain()
    bench_big_add()
    bench_mlp_step()
    bench_per_example()
    bench_fast()
    bench_fft()
    bench_conv2d()


if __name__ == "__main__":
    main()
