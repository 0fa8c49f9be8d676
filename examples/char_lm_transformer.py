"""A character-level Transformer language model trained on the fortune
cookies that ship with Debian (the ``fortunes`` package:
/usr/share/games/fortunes), with fluxion.nn and fluxion.optimizers, written
as an MLX program would be.

The model is a stack of pre-norm causal self-attention blocks with rotary
position encodings (nn.RoPE) and tied input/output embeddings. The training
step runs under ``mx.compile`` with the model and optimizer state captured.
It prints generated text as it learns, writes the loss curve
(loss_curve.png) and the weights (model.safetensors) to ``--out``, then
reloads the weights into a fresh model and checks that it scores the
validation text identically.

Run:  PYTHONPATH=build/python /usr/bin/python3 examples/char_lm_transformer.py
      (--steps N, --device gpu, --smoke for a few-second check)
"""

import argparse
import glob
import math
import os
import sys
import time
from functools import partial

import numpy as np

import fluxion.core as mx
import fluxion.nn as nn
import fluxion.optimizers as optim
from fluxion.utils import tree_flatten

# The examples' shared set-up, beside this file (also when it is loaded
# by path, as the tests do).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from example_common import add_run_arguments, start_run  # noqa: E402

FORTUNES_DIR = "/usr/share/games/fortunes"


def load_fortunes(directory=FORTUNES_DIR):
    """All fortunes of the package's plain-text files (not the .dat
    indices, .u8 duplicates or the offensive subdirectory), each ending
    with a blank line."""
    texts = []
    for path in sorted(glob.glob(os.path.join(directory, "*"))):
        if not os.path.isfile(path) or os.path.splitext(path)[1] in (
            ".dat",
            ".u8",
        ):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for cookie in f.read().split("\n%\n"):
                cookie = cookie.strip("%\n")
                if cookie:
                    texts.append(cookie + "\n\n")
    if not texts:
        raise SystemExit(
            f"no fortunes found in {directory} (apt-get install fortunes)"
        )
    return texts


class Vocabulary:
    """Characters seen at least ``min_count`` times, plus one id for all
    others."""

    def __init__(self, text, min_count=5):
        chars, counts = np.unique(
            np.frombuffer(text.encode("utf-32-le"), np.uint32),
            return_counts=True,
        )
        self.chars = ["\ufffd"] + [
            chr(c) for c, n in zip(chars, counts) if n >= min_count
        ]
        self.index = {c: i for i, c in enumerate(self.chars)}

    def __len__(self):
        return len(self.chars)

    def encode(self, text):
        return np.array([self.index.get(c, 0) for c in text], dtype=np.int32)

    def decode(self, ids):
        return "".join(self.chars[i] for i in ids)


class Block(nn.Module):
    """Pre-norm causal self-attention (with RoPE) and a GELU MLP."""

    def __init__(self, dims, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.ln1 = nn.LayerNorm(dims)
        self.qkv = nn.Linear(dims, 3 * dims, bias=False)
        self.proj = nn.Linear(dims, dims, bias=False)
        self.rope = nn.RoPE(dims // num_heads)
        self.ln2 = nn.LayerNorm(dims)
        self.mlp = nn.Sequential(
            nn.Linear(dims, 4 * dims), nn.GELU(), nn.Linear(4 * dims, dims)
        )

    def __call__(self, x, mask):
        B, L, D = x.shape
        q, k, v = mx.split(self.qkv(self.ln1(x)), 3, axis=-1)

        def heads(t):  # (B, L, D) -> (B, heads, L, D / heads)
            return t.reshape(B, L, self.num_heads, -1).transpose(0, 2, 1, 3)

        q, k, v = heads(q), heads(k), heads(v)
        q, k = self.rope(q), self.rope(k)
        scale = 1.0 / math.sqrt(q.shape[-1])
        y = mx.fast.scaled_dot_product_attention(
            q, k, v, scale=scale, mask=mask
        )
        x = x + self.proj(y.transpose(0, 2, 1, 3).reshape(B, L, D))
        return x + self.mlp(self.ln2(x))


class CharTransformer(nn.Module):
    def __init__(self, vocab_size, dims=96, num_heads=4, num_layers=3):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, dims)
        self.blocks = [Block(dims, num_heads) for _ in range(num_layers)]
        self.ln = nn.LayerNorm(dims)

    def __call__(self, x):
        L = x.shape[1]
        mask = nn.MultiHeadAttention.create_additive_causal_mask(L)
        h = self.embedding(x)
        for block in self.blocks:
            h = block(h, mask)
        # Tied embeddings: the output layer is the embedding transposed.
        return self.embedding.as_linear(self.ln(h))


def loss_fn(model, x, y):
    return nn.losses.cross_entropy(model(x), y, reduction="mean")


def sample(model, vocab, prompt, length, context, temperature=0.8, seed=0):
    """Generate ``length`` characters after ``prompt`` (no KV cache: each
    step re-reads the last ``context`` characters)."""
    model.eval()
    key = mx.random.key(seed)
    ids = list(vocab.encode(prompt))
    for _ in range(length):
        x = mx.array(np.array(ids[-context:], dtype=np.int32))[None]
        logits = model(x)[0, -1]
        key, sub = mx.random.split(key)
        ids.append(mx.random.categorical(logits / temperature, key=sub).item())
    model.train()
    return vocab.decode(ids)


def random_batch(data, batch_size, context, rng):
    starts = rng.integers(0, len(data) - context - 1, size=batch_size)
    idx = starts[:, None] + np.arange(context + 1)[None]
    chunk = data[idx]
    return mx.array(chunk[:, :-1]), mx.array(chunk[:, 1:])


def eval_loss(model, data, batch_size, context, batches=8, seed=1234):
    """Mean loss over a fixed set of validation windows."""
    rng = np.random.default_rng(seed)
    model.eval()
    total = 0.0
    for _ in range(batches):
        x, y = random_batch(data, batch_size, context, rng)
        total += loss_fn(model, x, y).item()
    model.train()
    return total / batches


def save_plot(out_dir, train_losses, val_points):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    steps = np.arange(1, len(train_losses) + 1)
    ax.plot(steps, train_losses, lw=0.5, alpha=0.4, label="batch loss")
    window = max(1, min(50, len(train_losses) // 10))
    if len(train_losses) >= window:
        smooth = np.convolve(
            train_losses, np.ones(window) / window, mode="valid"
        )
        ax.plot(steps[window - 1 :], smooth, lw=1.5, label=f"mean of {window}")
    if val_points:
        vs, vl = zip(*val_points)
        ax.plot(vs, vl, "o-", label="validation")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats / char)")
    ax.set_title("Character-level Transformer on Debian's fortunes (Fluxion)")
    ax.legend()
    fig.tight_layout()
    path = os.path.join(out_dir, "loss_curve.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--dims", type=int, default=96)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--sample-every", type=int, default=300)
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny model and a few steps, for CI",
    )
    add_run_arguments(ap, FORTUNES_DIR, "out/char_lm")
    args = ap.parse_args(argv)
    if args.smoke:
        args.steps, args.batch_size, args.context = min(args.steps, 20), 8, 32
        args.dims, args.heads, args.layers, args.sample_every = 32, 2, 1, 10

    from tqdm import tqdm

    rng = start_run(args)

    fortunes = load_fortunes(args.data_dir)
    order = rng.permutation(len(fortunes))
    n_val = max(1, len(fortunes) // 20)
    val_text = "".join(fortunes[i] for i in order[:n_val])
    train_text = "".join(fortunes[i] for i in order[n_val:])
    vocab = Vocabulary(train_text)
    train_data, val_data = vocab.encode(train_text), vocab.encode(val_text)
    print(
        f"{len(fortunes)} fortunes: {len(train_data):,} training and "
        f"{len(val_data):,} validation characters, vocabulary {len(vocab)}; "
        f"device {mx.default_device()}"
    )

    def make_model():
        return CharTransformer(len(vocab), args.dims, args.heads, args.layers)

    model = make_model()
    mx.eval(model.parameters())
    n_params = sum(
        v.size for _, v in tree_flatten(model.trainable_parameters())
    )
    print(
        f"model: {n_params:,} parameters, {args.layers} layers of width "
        f"{args.dims}"
    )

    warmup = max(1, min(100, args.steps // 10))
    schedule = optim.join_schedules(
        [
            optim.linear_schedule(0.0, args.lr, warmup),
            optim.cosine_decay(
                args.lr, max(1, args.steps - warmup), args.lr * 0.05
            ),
        ],
        [warmup],
    )
    optimizer = optim.AdamW(learning_rate=schedule, weight_decay=0.01)
    state = [model.state, optimizer.state]

    def train_step(x, y):
        loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)
        grads, _ = optim.clip_grad_norm(grads, max_norm=1.0)
        optimizer.update(model, grads)
        return loss

    step_fn = (
        train_step
        if args.no_compile
        else partial(mx.compile, inputs=state, outputs=state)(train_step)
    )

    train_losses, val_points = [], []
    t0 = time.perf_counter()
    bar = tqdm(
        range(1, args.steps + 1), desc="training", disable=args.no_progress
    )
    for step in bar:
        x, y = random_batch(train_data, args.batch_size, args.context, rng)
        loss = step_fn(x, y)
        mx.eval(state, loss)
        train_losses.append(loss.item())
        if step % 20 == 0:
            bar.set_postfix(loss=f"{np.mean(train_losses[-20:]):.3f}")
        if step % args.sample_every == 0 or step == args.steps:
            val = eval_loss(model, val_data, args.batch_size, args.context)
            val_points.append((step, val))
            text = sample(
                model,
                vocab,
                "The ",
                160 if not args.smoke else 20,
                args.context,
                seed=step,
            )
            bar.write(
                f"--- step {step}: validation loss {val:.3f} "
                f"({val / math.log(2):.2f} bits/char)\n{text}\n---"
            )
    train_time = time.perf_counter() - t0

    weights = os.path.join(args.out, "model.safetensors")
    model.save_weights(weights)
    reloaded = make_model()
    reloaded.load_weights(weights)
    val = eval_loss(model, val_data, args.batch_size, args.context)
    val_reloaded = eval_loss(reloaded, val_data, args.batch_size, args.context)
    assert abs(val - val_reloaded) < 1e-6, (val, val_reloaded)
    plot = save_plot(args.out, train_losses, val_points)
    print(
        f"{args.steps} steps in {train_time:.1f} s "
        f"({1000 * train_time / args.steps:.1f} ms/step); validation loss "
        f"{val:.3f} "
        f"nats/char ({val / math.log(2):.2f} bits/char)"
    )
    print(
        f"wrote {weights} (reloaded model: validation loss "
        f"{val_reloaded:.3f}), {plot}"
    )
    print(
        "sample from the reloaded model:\n"
        + sample(
            reloaded,
            vocab,
            "A ",
            200 if not args.smoke else 20,
            args.context,
            seed=7,
        )
    )
    return {
        "val_loss": val,
        "val_loss_reloaded": val_reloaded,
        "seconds": train_time,
        "losses": train_losses,
    }


if __name__ == "__main__":
    main()
