"""Training steps with fluxion.nn + fluxion.optimizers, eager and under
mx.compile (model, optimizer and random state captured), against the same
models in PyTorch, measured in the same run (median step times and ratios).

Models: the Fashion-MNIST CNN and the character-level Transformer of
examples/ (same architectures, initialisation aside), and a small MLP where
per-op overhead dominates. A step is forward, backward and the AdamW update
(plus gradient clipping for the Transformer), ending with everything
evaluated.

PyTorch is timed with all cores and with one thread, and the faster of the
two is the reference. Its OpenMP threads wait passively
(OMP_WAIT_POLICY=PASSIVE, unless set): with the default spinning policy,
on a machine whose cores are shared with other processes, a small step
took 30x longer (a 64-sample MLP step: 32 ms instead of 0.8 ms).

Run: PYTHONPATH=build/python /usr/bin/python3 benchmarks/python/bench_nn.py
     [--quick]  (fewer repeats)
"""

import argparse
import importlib.util
import math
import os
from functools import partial

import numpy as np

os.environ.setdefault(
    "OMP_WAIT_POLICY", "PASSIVE"
)  # before torch loads OpenMP

import fluxion.core as mx  # noqa: E402
import fluxion.nn as nn  # noqa: E402
import fluxion.optimizers as optim  # noqa: E402

EXAMPLES = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"
)


def load_example(name):
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(EXAMPLES, name + ".py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- Fluxion steps ------------------------------------------------------------


def fluxion_steps(model, loss_fn, batch, clip=None):
    """(eager step, compiled step), each running one evaluated step."""
    optimizer = optim.AdamW(learning_rate=1e-3)
    state = [model.state, optimizer.state, mx.random.state]

    def step(*batch):
        loss, grads = nn.value_and_grad(model, loss_fn)(model, *batch)
        if clip is not None:
            grads, _ = optim.clip_grad_norm(grads, clip)
        optimizer.update(model, grads)
        return loss

    compiled = partial(mx.compile, inputs=state, outputs=state)(step)

    def run(fn):
        loss = fn(*batch)
        mx.eval(state, loss)

    return (lambda: run(step)), (lambda: run(compiled))


# -- PyTorch models -----------------------------------------------------------


def torch_cnn(torch, channels=(16, 32), hidden=128):
    tnn = torch.nn
    c1, c2 = channels
    return tnn.Sequential(
        tnn.Conv2d(1, c1, 3, padding=1),
        tnn.BatchNorm2d(c1),
        tnn.ReLU(),
        tnn.MaxPool2d(2),
        tnn.Conv2d(c1, c2, 3, padding=1),
        tnn.BatchNorm2d(c2),
        tnn.ReLU(),
        tnn.MaxPool2d(2),
        tnn.Flatten(),
        tnn.Linear(7 * 7 * c2, hidden),
        tnn.ReLU(),
        tnn.Dropout(0.25),
        tnn.Linear(hidden, 10),
    )


def torch_char_transformer(torch, vocab, dims, heads, layers):
    tnn = torch.nn
    F = torch.nn.functional

    def rope(x):
        # Non-traditional RoPE (halves rotated), as nn.RoPE.
        L, d = x.shape[-2], x.shape[-1]
        freqs = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
        theta = torch.arange(L, dtype=torch.float32)[:, None] * freqs[None]
        cos, sin = theta.cos(), theta.sin()
        a, b = x[..., : d // 2], x[..., d // 2 :]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], -1)

    class Block(tnn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = tnn.LayerNorm(dims)
            self.qkv = tnn.Linear(dims, 3 * dims, bias=False)
            self.proj = tnn.Linear(dims, dims, bias=False)
            self.ln2 = tnn.LayerNorm(dims)
            self.mlp = tnn.Sequential(
                tnn.Linear(dims, 4 * dims),
                tnn.GELU(),
                tnn.Linear(4 * dims, dims),
            )

        def forward(self, x, mask):
            B, L, D = x.shape
            q, k, v = self.qkv(self.ln1(x)).chunk(3, -1)

            def heads_(t):
                return t.reshape(B, L, heads, -1).transpose(1, 2)

            q, k, v = rope(heads_(q)), rope(heads_(k)), heads_(v)
            s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + mask
            y = F.softmax(s, -1) @ v
            x = x + self.proj(y.transpose(1, 2).reshape(B, L, D))
            return x + self.mlp(self.ln2(x))

    class Model(tnn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = tnn.Embedding(vocab, dims)
            self.blocks = tnn.ModuleList([Block() for _ in range(layers)])
            self.ln = tnn.LayerNorm(dims)

        def forward(self, x):
            L = x.shape[1]
            mask = torch.triu(torch.full((L, L), float("-inf")), 1)
            h = self.embedding(x)
            for b in self.blocks:
                h = b(h, mask)
            return self.ln(h) @ self.embedding.weight.T

    return Model()


def torch_step(torch, model, batch, loss_fn, clip=None):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model, *batch)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        loss.item()

    return step


# -- benchmarks ---------------------------------------------------------------


def interleaved(fns, repeats, warmup=2):
    """Median time of each function, measured in interleaved rounds (one
    call of each per round) so that load from other processes on a shared
    machine falls on all of them alike."""
    import statistics
    import time

    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def with_threads(torch, fn, n):
    def run():
        torch.set_num_threads(n)
        fn()

    return run


def measure(torch, name, tstep, eager, compiled, repeats):
    threads = os.cpu_count()
    times = interleaved(
        {
            "torch": with_threads(torch, tstep, threads),
            "torch-1t": with_threads(torch, tstep, 1),
            "eager": eager,
            "compiled": compiled,
        },
        repeats,
    )
    torch.set_num_threads(threads)
    report(name, times)
    return times


def report(name, times):
    base = min(times["torch"], times["torch-1t"])
    best = "1 thread" if times["torch-1t"] < times["torch"] else "all cores"
    parts = [
        f"{k} {times[k] * 1e3:8.2f} ms ({times[k] / base:4.2f}x)"
        for k in ("eager", "compiled")
    ]
    print(
        f"{name:<24} torch {base * 1e3:8.2f} ms ({best})   "
        + "   ".join(parts)
    )


def bench_cnn(torch, repeats, batch_size=128):
    fm = load_example("fashion_mnist_cnn")
    rng = np.random.default_rng(0)
    x = rng.random((batch_size, 28, 28, 1), dtype=np.float32)
    y = rng.integers(0, 10, batch_size).astype(np.int32)
    eager, compiled = fluxion_steps(
        fm.CNN(), fm.loss_fn, (mx.array(x), mx.array(y))
    )
    tmodel = torch_cnn(torch)
    tstep = torch_step(
        torch,
        tmodel,
        (
            torch.from_numpy(x.transpose(0, 3, 1, 2).copy()),
            torch.from_numpy(y).long(),
        ),
        lambda m, x, y: torch.nn.functional.cross_entropy(m(x), y),
    )
    return measure(
        torch, f"CNN step, batch {batch_size}", tstep, eager, compiled, repeats
    )


def bench_transformer(
    torch, repeats, batch_size=16, context=128, dims=96, heads=4, layers=3
):
    lm = load_example("char_lm_transformer")
    vocab = 104
    rng = np.random.default_rng(1)
    data = rng.integers(0, vocab, (batch_size, context + 1)).astype(np.int32)
    x, y = data[:, :-1], data[:, 1:]
    model = lm.CharTransformer(vocab, dims, heads, layers)
    eager, compiled = fluxion_steps(
        model, lm.loss_fn, (mx.array(x), mx.array(y)), clip=1.0
    )
    tmodel = torch_char_transformer(torch, vocab, dims, heads, layers)
    F = torch.nn.functional
    tstep = torch_step(
        torch,
        tmodel,
        (torch.from_numpy(x).long(), torch.from_numpy(y).long()),
        lambda m, x, y: F.cross_entropy(
            m(x).reshape(-1, vocab), y.reshape(-1)
        ),
        clip=1.0,
    )
    return measure(
        torch,
        f"char LM step, {batch_size}x{context}",
        tstep,
        eager,
        compiled,
        repeats,
    )


def bench_mlp(torch, repeats, batch_size=64):
    rng = np.random.default_rng(2)
    x = rng.random((batch_size, 64), dtype=np.float32)
    y = rng.integers(0, 10, batch_size).astype(np.int32)
    model = nn.Sequential(
        nn.Linear(64, 128),
        nn.ReLU(),
        nn.Linear(128, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )

    def loss_fn(model, x, y):
        return nn.losses.cross_entropy(model(x), y, reduction="mean")

    eager, compiled = fluxion_steps(model, loss_fn, (mx.array(x), mx.array(y)))
    tnn = torch.nn
    tmodel = tnn.Sequential(
        tnn.Linear(64, 128),
        tnn.ReLU(),
        tnn.Linear(128, 128),
        tnn.ReLU(),
        tnn.Linear(128, 10),
    )
    tstep = torch_step(
        torch,
        tmodel,
        (torch.from_numpy(x), torch.from_numpy(y).long()),
        lambda m, x, y: torch.nn.functional.cross_entropy(m(x), y),
    )
    return measure(
        torch,
        f"MLP step, batch {batch_size}",
        tstep,
        eager,
        compiled,
        repeats * 10,
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        raise SystemExit("bench_nn needs PyTorch (Debian: python3-torch)")
    threads = os.cpu_count()
    torch.set_num_threads(threads)
    mx.random.seed(0)
    torch.manual_seed(0)
    repeats = 3 if args.quick else 7
    print(
        f"training steps, median of {repeats} interleaved rounds (torch "
        f"{torch.__version__}, "
        f"{threads} cores); ratios are time / torch's best time, lower is "
        "better"
    )
    bench_mlp(torch, repeats)
    bench_cnn(torch, repeats)
    bench_transformer(torch, repeats)


if __name__ == "__main__":
    main()
