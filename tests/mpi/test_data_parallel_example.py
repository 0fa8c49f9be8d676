"""examples/fashion_mnist_data_parallel.py under `mpirun -np 2` gives the
loss curve of one process training on the whole (doubled) batch: 12 steps
in float64, where the processes' partial sums agree with the single sum to
~1e-12 (float32 drifts by ~1e-3 over such a run: summation order, not the
method). Started by tests/mpi/run.sh (the loopback MPI settings come from
its environment)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EXAMPLE = os.path.join(ROOT, "examples", "fashion_mnist_data_parallel.py")

pytestmark = pytest.mark.skipif(
    not os.path.isdir("/usr/share/datasets/fashion-mnist"),
    reason="needs Debian's dataset-fashion-mnist")

ARGS = ["--float64", "--steps", "12", "--batch-size", "64", "--images", "2048"]


def run(prefix, out):
    p = subprocess.run(prefix + [sys.executable, EXAMPLE, *ARGS, "--losses", str(out)],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.load(open(out))


def test_two_processes_match_one_with_the_doubled_batch(tmp_path):
    one = run([], tmp_path / "one.json")
    two = run(["mpirun", "-np", "2"], tmp_path / "two.json")
    assert (one["processes"], two["processes"]) == (1, 2)
    a, b = np.array(one["losses"]), np.array(two["losses"])
    assert len(a) == len(b) == 12 and np.all(np.isfinite(a))
    np.testing.assert_allclose(b, a, rtol=1e-9)
    assert a[-4:].mean() < a[:4].mean()  # it trains
