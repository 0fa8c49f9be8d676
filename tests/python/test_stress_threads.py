"""Concurrency stress, in a child process so that a deadlock is a timeout
(stress_threads.py says what runs)."""

import os

from fuzz_support import run_isolated

SCALE = float(os.environ.get("FLUXION_SOAK_SCALE", "1"))


def test_threads_streams_compile_and_failing_kernels():
    reps = int(150 * SCALE)
    r = run_isolated("stress_threads", "run",
                     {"threads": 8, "reps": reps, "seed": 17},
                     timeout=240 + reps, count_cases=False)
    assert r["cases"] == 8 * reps
    assert not r["failures"], "\n".join(r["failures"])
