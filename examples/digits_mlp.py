"""Train a 64-128-10 MLP on scikit-learn's bundled handwritten digits
(1,797 8x8 images, read from the package's data files: no network) with
Fluxion's value_and_grad and a hand-written Adam update, the whole training
step under mx.compile (parameters and optimizer moments captured as state);
then per-example gradient norms with vmap(grad).

Run: make demo  (PYTHONPATH=build/python python3 examples/digits_mlp.py)
"""

import time
from functools import partial

import numpy as np
from sklearn.datasets import load_digits

import fluxion.core as mx


def init_params(rng, sizes):
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        scale = np.sqrt(2.0 / fan_in)
        params.append({
            "w": mx.array(rng.normal(0, scale, (fan_in, fan_out))
                          .astype(np.float32)),
            "b": mx.zeros((fan_out,)),
        })
    return params


def forward(params, x):
    for layer in params[:-1]:
        x = mx.maximum(x @ layer["w"] + layer["b"], 0.0)
    return x @ params[-1]["w"] + params[-1]["b"]


def loss_fn(params, x, y):
    """Mean cross-entropy; the logits come back as an auxiliary output."""
    logits = forward(params, x)
    logp = mx.log_softmax(logits, axis=-1)
    nll = -mx.take_along_axis(logp, mx.expand_dims(y, -1), axis=-1)
    return mx.mean(nll), logits


def tree_map(f, *trees):
    t0 = trees[0]
    if isinstance(t0, list):
        return [tree_map(f, *(t[i] for t in trees)) for i in range(len(t0))]
    if isinstance(t0, dict):
        return {k: tree_map(f, *(t[k] for t in trees)) for k in t0}
    return f(*trees)


class Adam:
    """Adam with the bias correction folded into the step size, which the
    caller passes in as an array so a compiled step is traced once."""

    def __init__(self, lr=1e-2, b1=0.9, b2=0.999, eps=1e-8):
        self.lr, self.b1, self.b2, self.eps, self.t = lr, b1, b2, eps, 0

    def next_step_size(self):
        self.t += 1
        return self.lr * np.sqrt(1 - self.b2**self.t) / (1 - self.b1**self.t)

    def apply(self, params, m, v, grads, step_size):
        b1, b2, eps = self.b1, self.b2, self.eps
        m = tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
        v = tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
        params = tree_map(
            lambda p, m, v: p - step_size * m / (mx.sqrt(v) + eps), params,
            m, v)
        return params, m, v


def main():
    digits = load_digits()
    x_all = (digits.data / 16.0).astype(np.float32)
    y_all = digits.target.astype(np.int32)
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(x_all))
    n_test = 360
    test, train = perm[:n_test], perm[n_test:]
    x_train, y_train = x_all[train], y_all[train]
    x_test, y_test = mx.array(x_all[test]), mx.array(y_all[test])
    print(f"digits: {len(train)} training and {n_test} test images, "
          f"{x_all.shape[1]} pixels")

    params = init_params(rng, [64, 128, 10])
    opt = Adam(lr=5e-3)
    loss_and_grad = mx.value_and_grad(loss_fn)
    # Parameters and Adam's moments are state the compiled step reads and
    # replaces: captured through inputs= and outputs=.
    state = [params, tree_map(mx.zeros_like, params),
             tree_map(mx.zeros_like, params)]

    @partial(mx.compile, inputs=state, outputs=state)
    def train_step(xb, yb, step_size):
        (loss, _), grads = loss_and_grad(state[0], xb, yb)
        state[0], state[1], state[2] = opt.apply(state[0], state[1], state[2],
                                                 grads, step_size)
        return loss

    batch = 64
    start = time.perf_counter()
    for epoch in range(1, 16):
        order = rng.permutation(len(train))
        total, count = 0.0, 0
        for i in range(0, len(order), batch):
            idx = order[i:i + batch]
            xb, yb = mx.array(x_train[idx]), mx.array(y_train[idx])
            step_size = mx.array(opt.next_step_size(), dtype=mx.float32)
            loss = train_step(xb, yb, step_size)
            mx.eval(state, loss)
            total += loss.item() * len(idx)
            count += len(idx)
        params = state[0]
        logits = forward(params, x_test)
        acc = mx.mean(mx.argmax(logits, axis=-1) == y_test).item()
        print(f"epoch {epoch:2d}  train loss {total / count:.4f}  "
              f"test accuracy {100 * acc:.2f}%")
    print(f"training took {time.perf_counter() - start:.2f} s "
          "(compiled step; a first run also builds its kernels)")

    # Per-example gradients: grad of one example's loss, vectorized over the
    # batch (the parameters are shared: in_axes None).
    def example_loss(params, x, y):
        return loss_fn(params, x[None], y[None])[0]

    per_example = mx.vmap(mx.grad(example_loss), in_axes=(None, 0, 0))
    xb, yb = x_test[:8], y_test[:8]
    grads = per_example(params, xb, yb)
    sq = sum(mx.sum(g * g, axis=tuple(range(1, g.ndim)))
             for layer in grads for g in layer.values())
    norms = mx.sqrt(sq)
    # Check one against a plain grad call.
    g0 = mx.grad(example_loss)(params, xb[0], yb[0])
    n0 = np.sqrt(sum(float(mx.sum(g * g).item())
                     for layer in g0 for g in layer.values()))
    print("per-example gradient norms (vmap(grad)) on 8 test images:")
    print("  " + " ".join(f"{v:.4f}" for v in norms.tolist()))
    print(f"  example 0 by a single grad call: {n0:.4f}")
    if acc < 0.95:
        raise SystemExit(f"test accuracy {100 * acc:.2f}% is below 95%")


if __name__ == "__main__":
    main()
