"""What the training examples share: their common command-line options and
the set-up those options ask for (device, seeds, output folder)."""

import os

import numpy as np

import fluxion.core as mx


def add_run_arguments(ap, data_dir, out_dir):
    """Options every training example takes, after its own."""
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument(
        "--no-compile",
        action="store_true",
        help="run the training step eagerly",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=data_dir)
    ap.add_argument("--out", default=out_dir)
    ap.add_argument("--no-progress", action="store_true")


def start_run(args):
    """Selects the device, seeds Fluxion's and NumPy's generators and makes
    the output folder; returns the NumPy generator."""
    if args.device == "gpu":
        if not mx.is_available(mx.gpu):
            raise SystemExit(
                "--device gpu: no GPU backend in this build of Fluxion"
            )
        mx.set_default_device(mx.gpu)
    mx.random.seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    return np.random.default_rng(args.seed)
