"""Failures across processes never hang: each case starts mpirun (with
the loopback settings of tests/mpi/run.sh, from the environment) and
bounds it in time."""

import os
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def mpirun(n, mode, timeout_env, limit=60):
    env = dict(os.environ, FLUXION_DIST_TIMEOUT=timeout_env)
    start = time.monotonic()
    p = subprocess.run(
        ["mpirun", "-np", str(n), sys.executable,
         os.path.join(HERE, "peer_failures.py"), mode],
        env=env, capture_output=True, text=True, timeout=limit)
    return p, time.monotonic() - start


@pytest.mark.parametrize("n", [2, 3])
def test_timeout_names_the_collective_and_ranks(n):
    p, elapsed = mpirun(n, "timeout", "1")
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert ("rank 0 raised: [all_sum] Timed out after 1.000000 s "
            f"(FLUXION_DIST_TIMEOUT) on rank 0 of a group of {n}") in out
    # The late peers completed it; the group then works on.
    total = float(sum(range(1, n + 1)))
    for r in range(n):
        assert f"rank {r}: after {[total] * 4}" in out, out


@pytest.mark.parametrize("timeout_env", ["", "2"])
def test_a_rank_that_raises_does_not_hang_the_others(timeout_env):
    p, elapsed = mpirun(3, "raises", timeout_env)
    out = p.stdout + p.stderr
    # mpirun ends the job when a rank exits with an error; with a timeout
    # the waiting ranks would raise by themselves.
    assert p.returncode != 0, out
    assert "rank 1 fails before the collective" in out
    assert "all_sum returned" not in out
    assert elapsed < 30, out
