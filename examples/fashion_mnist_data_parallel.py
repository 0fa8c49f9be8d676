"""Data-parallel training of the Fashion-MNIST CNN (fashion_mnist_cnn.py)
with mx.distributed: each process takes its share of every global batch,
the gradients are averaged over the processes (nn.average_gradients), and
every process applies the same update, so all keep the same model.

The loss curve is the one of a single process training on the whole
global batch: BatchNorm's statistics are those of the global batch (each
process sums its partial sums with all_sum, a synchronised BatchNorm), and
the gradient of the mean loss flows back through those sums. Dropout draws
each process's masks on its own, so with ``--dropout`` above 0 the curves
agree in distribution only (the default here is 0).

Run on the CPU with MPI (two processes; as root in a container mpirun
needs --allow-run-as-root and, to start more processes than cores,
--oversubscribe):

    mpirun -np 2 env PYTHONPATH=build/python /usr/bin/python3 \\
        examples/fashion_mnist_data_parallel.py --steps 100

or one process alone (the reference: the same global batch):

    PYTHONPATH=build/python /usr/bin/python3 \\
        examples/fashion_mnist_data_parallel.py --steps 100

``--device gpu`` (one GPU per process) puts the model and the sums on the
GPU, NCCL carrying them (backend "any" or ``--backend nccl``; launched by
mpirun or torchrun-style variables, see docs/distributed.md); the CNN's
convolutions run there too (cuDNN, or the CUDA backend's general path).
"""

import argparse
import json
import os
import sys
import time
from functools import partial

import numpy as np

import fluxion.core as mx
import fluxion.nn as nn
import fluxion.optimizers as optim

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fashion_mnist_cnn import CNN, DATA_DIR, load_fashion_mnist, loss_fn  # noqa: E402


class SyncBatchNorm(nn.BatchNorm):
    """BatchNorm whose training statistics are those of the batch of every
    process of ``group`` together: each process's sums, added with
    ``all_sum``. Every process must pass the same number of samples."""

    def __init__(self, num_features, group, **kwargs):
        super().__init__(num_features, **kwargs)
        self.group = group

    def __call__(self, x):
        if not self.training:
            return super().__call__(x)
        axes = tuple(range(x.ndim - 1))
        count = self.group.size() * int(np.prod([x.shape[a] for a in axes]))
        xs = x if x.dtype == mx.float64 else x.astype(mx.float32)
        total = lambda v: mx.distributed.all_sum(v, group=self.group)
        mean = total(mx.sum(xs, axis=axes)) / count
        xc = xs - mean
        var = total(mx.sum(mx.square(xc), axis=axes)) / count
        if self.track_running_stats:
            mu = self.momentum
            self.running_mean = (1 - mu) * self.running_mean + mu * mean
            self.running_var = (1 - mu) * self.running_var + mu * (
                var * (count / (count - 1)))
        scale = mx.rsqrt(var + self.eps) * self.weight
        return (xc * scale + self.bias).astype(x.dtype)


def global_batches(n_images, batch_size, steps, seed):
    """The indices of every global batch, the same on every process (one
    generator, seeded alike): epochs of a shuffled order."""
    rng = np.random.default_rng(seed)
    order, at = rng.permutation(n_images), 0
    for _ in range(steps):
        if at + batch_size > n_images:
            order, at = rng.permutation(n_images), 0
        yield order[at:at + batch_size]
        at += batch_size


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=128,
                    help="the global batch, split evenly over the processes")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--float64", action="store_true",
                    help="train in float64: the processes' partial sums then "
                    "round so little that the curves agree to ~1e-9 (in "
                    "float32 they drift apart by ~1e-3 over tens of steps, "
                    "as any change of summation order does)")
    ap.add_argument("--images", type=int, default=0,
                    help="train on the first N images only (0: all 60,000)")
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--backend", default=None,
                    help="mx.distributed backend (default: mpi on the cpu, "
                    "any on the gpu)")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=DATA_DIR)
    ap.add_argument("--losses", default=None,
                    help="write the loss of every step to this JSON file "
                    "(rank 0)")
    args = ap.parse_args(argv)

    if args.device == "gpu":
        mx.set_default_device(mx.gpu)
    backend = args.backend or ("mpi" if args.device == "cpu" else "any")
    world = mx.distributed.init(backend=backend)
    rank, size = world.rank(), world.size()
    if args.batch_size % size:
        raise SystemExit(f"--batch-size {args.batch_size} must be divisible "
                         f"by the number of processes ({size})")
    local = args.batch_size // size

    train_x, train_y, _, _ = load_fashion_mnist(args.data_dir)
    if args.images:
        train_x, train_y = train_x[:args.images], train_y[:args.images]

    mx.random.seed(args.seed)  # the same initial model on every process
    model = CNN(dropout=args.dropout)
    model.bn1 = SyncBatchNorm(model.bn1.num_features, world)
    model.bn2 = SyncBatchNorm(model.bn2.num_features, world)
    if args.float64:
        model.set_dtype(mx.float64)
        train_x = train_x.astype(np.float64)
    mx.eval(model.parameters())
    optimizer = optim.AdamW(learning_rate=args.lr, weight_decay=1e-4)
    state = [model.state, optimizer.state, mx.random.state]

    def train_step(x, y):
        loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)
        grads = nn.average_gradients(grads, group=world)
        optimizer.update(model, grads)
        # The global batch's mean loss: the mean of the processes' means.
        return mx.distributed.all_sum(loss, group=world) / size

    step_fn = (train_step if args.no_compile
               else partial(mx.compile, inputs=state, outputs=state)(train_step))

    if rank == 0:
        print(f"{size} process(es) on {args.device} ({backend}), global batch "
              f"{args.batch_size} ({local} per process), {len(train_x)} images",
              flush=True)
    losses, t0 = [], time.perf_counter()
    for step, idx in enumerate(global_batches(len(train_x), args.batch_size,
                                              args.steps, args.seed)):
        mine = idx[rank * local:(rank + 1) * local]
        loss = step_fn(mx.array(train_x[mine]), mx.array(train_y[mine]))
        mx.eval(state, loss)
        losses.append(loss.item())
        if rank == 0 and (step + 1) % 20 == 0:
            print(f"step {step + 1}: loss {np.mean(losses[-20:]):.4f}",
                  flush=True)
    seconds = time.perf_counter() - t0
    if rank == 0:
        print(f"{args.steps} steps in {seconds:.1f} s "
              f"({1000 * seconds / max(args.steps, 1):.1f} ms/step)")
        if args.losses:
            with open(args.losses, "w") as f:
                json.dump({"processes": size, "losses": losses}, f)
    return losses


if __name__ == "__main__":
    main()
