"""Train a small convolutional network on Fashion-MNIST with fluxion.nn and
fluxion.optimizers, written exactly as an MLX program would be.

Data: Debian's ``dataset-fashion-mnist`` package (60,000 training and
10,000 test images of 28x28 pixels, read from
/usr/share/datasets/fashion-mnist; no network access).

The whole training step (forward, backward, AdamW update) runs under
``mx.compile`` with the model, the optimizer state and the random state
captured, so each step is one compiled graph. Writes to ``--out``: the
loss curve (loss_curve.png), a grid of misclassified test images
(misclassified.png) and the trained weights (model.safetensors), which are
reloaded into a fresh model and checked.

Run:  PYTHONPATH=build/python /usr/bin/python3 examples/fashion_mnist_cnn.py
      (--epochs N, --device gpu, --smoke for a few-second check)
"""

import argparse
import gzip
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

DATA_DIR = "/usr/share/datasets/fashion-mnist"
CLASSES = [
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
]


def read_idx(path):
    """Read an IDX file (the MNIST format): a big-endian header with the
    dimensions, then unsigned bytes."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = np.frombuffer(data, dtype=">u4", count=ndim, offset=4)
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(
        dims
    )


def load_fashion_mnist(data_dir=DATA_DIR):
    """(train_x, train_y, test_x, test_y): images as float32 NHWC in [0, 1],
    labels as int32."""

    def images(name):
        x = read_idx(os.path.join(data_dir, name)).astype(np.float32) / 255.0
        return x[..., None]

    def labels(name):
        return read_idx(os.path.join(data_dir, name)).astype(np.int32)

    return (
        images("train-images-idx3-ubyte.gz"),
        labels("train-labels-idx1-ubyte.gz"),
        images("t10k-images-idx3-ubyte.gz"),
        labels("t10k-labels-idx1-ubyte.gz"),
    )


class CNN(nn.Module):
    """conv(16)-pool-conv(32)-pool-dense(128)-dense(10), with BatchNorm
    after each convolution and dropout before the classifier."""

    def __init__(
        self, channels=(16, 32), hidden=128, num_classes=10, dropout=0.25
    ):
        super().__init__()
        c1, c2 = channels
        self.conv1 = nn.Conv2d(1, c1, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm(c1)
        self.conv2 = nn.Conv2d(c1, c2, kernel_size=3, padding=1)
        self.bn2 = nn.BatchNorm(c2)
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.fc1 = nn.Linear(7 * 7 * c2, hidden)
        self.drop = nn.Dropout(dropout)
        self.fc2 = nn.Linear(hidden, num_classes)

    def __call__(self, x):
        x = self.pool(nn.relu(self.bn1(self.conv1(x))))
        x = self.pool(nn.relu(self.bn2(self.conv2(x))))
        x = x.reshape(x.shape[0], -1)
        x = self.drop(nn.relu(self.fc1(x)))
        return self.fc2(x)


def loss_fn(model, x, y):
    return nn.losses.cross_entropy(model(x), y, reduction="mean")


def batches(x, y, batch_size, rng=None):
    """Mini-batches as Fluxion arrays, shuffled when ``rng`` is given."""
    order = rng.permutation(len(x)) if rng is not None else np.arange(len(x))
    for start in range(0, len(x), batch_size):
        idx = order[start : start + batch_size]
        yield mx.array(x[idx]), mx.array(y[idx])


def evaluate(model, x, y, batch_size=1000):
    """Accuracy and predictions on (x, y), in eval mode."""
    model.eval()
    preds = []
    for xb, _ in batches(x, y, batch_size):
        preds.append(np.array(mx.argmax(model(xb), axis=-1)))
    model.train()
    preds = np.concatenate(preds)
    return float(np.mean(preds == y)), preds


def save_plots(out_dir, losses, steps_per_epoch, test_x, test_y, preds):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    steps = np.arange(1, len(losses) + 1)
    ax.plot(steps, losses, lw=0.5, alpha=0.4, label="batch loss")
    window = max(1, min(50, len(losses) // 10))
    if len(losses) >= window:
        smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
        ax.plot(steps[window - 1 :], smooth, lw=1.5, label=f"mean of {window}")
    for e in range(steps_per_epoch, len(losses) + 1, steps_per_epoch):
        ax.axvline(e, color="gray", lw=0.5, ls=":")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy")
    ax.set_yscale("log")
    ax.set_title("Fashion-MNIST CNN training loss (Fluxion)")
    ax.legend()
    fig.tight_layout()
    loss_path = os.path.join(out_dir, "loss_curve.png")
    fig.savefig(loss_path, dpi=120)
    plt.close(fig)

    wrong = np.nonzero(preds != test_y)[0][:36]
    fig, axes = plt.subplots(6, 6, figsize=(9, 10))
    for ax in axes.flat:
        ax.axis("off")
    for ax, i in zip(axes.flat, wrong):
        ax.imshow(test_x[i, :, :, 0], cmap="gray_r")
        ax.set_title(
            f"{CLASSES[preds[i]]}\n(true: {CLASSES[test_y[i]]})", fontsize=7
        )
    fig.suptitle("Misclassified test images: predicted (true)")
    fig.tight_layout()
    grid_path = os.path.join(out_dir, "misclassified.png")
    fig.savefig(grid_path, dpi=110)
    plt.close(fig)
    return loss_path, grid_path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument(
        "--steps",
        type=int,
        default=0,
        help="stop after this many training steps (0: all epochs)",
    )
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny run for CI: one pass over 2048 training images, "
        "512 test images",
    )
    add_run_arguments(ap, DATA_DIR, "out/fashion_mnist")
    args = ap.parse_args(argv)

    from tqdm import tqdm

    rng = start_run(args)

    train_x, train_y, test_x, test_y = load_fashion_mnist(args.data_dir)
    if args.smoke:
        train_x, train_y = train_x[:2048], train_y[:2048]
        test_x, test_y = test_x[:512], test_y[:512]
        args.epochs, args.batch_size = 1, 64
    print(
        f"Fashion-MNIST: {len(train_x)} training, {len(test_x)} test images; "
        f"device {mx.default_device()}"
    )

    model = CNN()
    mx.eval(model.parameters())
    n_params = sum(
        v.size for _, v in tree_flatten(model.trainable_parameters())
    )
    print(f"model: {n_params:,} trainable parameters")
    steps_per_epoch = (len(train_x) + args.batch_size - 1) // args.batch_size
    total_steps = steps_per_epoch * args.epochs
    if args.steps:
        total_steps = min(total_steps, args.steps)
    warmup = min(200, max(1, total_steps // 10))
    schedule = optim.join_schedules(
        [
            optim.linear_schedule(1e-5, args.lr, warmup),
            optim.cosine_decay(
                args.lr, max(1, total_steps - warmup), args.lr * 0.01
            ),
        ],
        [warmup],
    )
    optimizer = optim.AdamW(learning_rate=schedule, weight_decay=1e-4)

    # Everything the step reads and writes: parameters and BatchNorm
    # statistics, optimizer moments and step, and the dropout RNG key.
    state = [model.state, optimizer.state, mx.random.state]

    def train_step(x, y):
        loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)
        optimizer.update(model, grads)
        return loss

    step_fn = (
        train_step
        if args.no_compile
        else partial(mx.compile, inputs=state, outputs=state)(train_step)
    )

    losses, step, t0 = [], 0, time.perf_counter()
    for epoch in range(args.epochs):
        bar = tqdm(
            batches(train_x, train_y, args.batch_size, rng),
            total=steps_per_epoch,
            desc=f"epoch {epoch + 1}/{args.epochs}",
            disable=args.no_progress,
            leave=False,
        )
        for xb, yb in bar:
            loss = step_fn(xb, yb)
            mx.eval(state, loss)
            losses.append(loss.item())
            step += 1
            if step % 20 == 0:
                bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}")
            if step >= total_steps:
                break
        acc, _ = evaluate(model, test_x, test_y)
        print(
            f"epoch {epoch + 1}: train loss "
            f"{np.mean(losses[-steps_per_epoch:]):.4f}, "
            f"test accuracy {acc:.4f} ({time.perf_counter() - t0:.1f} s)"
        )
        if step >= total_steps:
            break
    train_time = time.perf_counter() - t0

    acc, preds = evaluate(model, test_x, test_y)
    weights = os.path.join(args.out, "model.safetensors")
    model.save_weights(weights)
    reloaded = CNN()
    reloaded.load_weights(weights)
    acc_reloaded, _ = evaluate(reloaded, test_x, test_y)
    assert acc_reloaded == acc, (acc_reloaded, acc)

    loss_png, grid_png = save_plots(
        args.out, losses, steps_per_epoch, test_x, test_y, preds
    )
    print(
        f"test accuracy {acc:.4f} after {step} steps in {train_time:.1f} s "
        f"({1000 * train_time / max(step, 1):.1f} ms/step)"
    )
    print(
        f"wrote {weights} (reloaded: accuracy {acc_reloaded:.4f}), "
        f"{loss_png}, {grid_png}"
    )
    return {
        "accuracy": acc,
        "steps": step,
        "seconds": train_time,
        "losses": losses,
    }


if __name__ == "__main__":
    main()
