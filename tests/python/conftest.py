"""Session-wide pieces of the Python suite: the fuzz case count (see
fuzz_support.py) printed at the end, so that the CI log shows the budget
that ran; FLUXION_TEST_SHARD=i/n keeps every n-th collected test from the
i-th on (tools/test_gpu.sh runs the GPU files in shards at once)."""

import os
import sys


def pytest_collection_modifyitems(config, items):
    shard = os.environ.get("FLUXION_TEST_SHARD")
    if not shard:
        return
    i, n = (int(v) for v in shard.split("/"))
    if not 0 <= i < n:
        raise ValueError(f"FLUXION_TEST_SHARD={shard}: want i/n, 0 <= i < n")
    keep = items[i::n]
    config.hook.pytest_deselected(
        items=[t for k, t in enumerate(items) if k % n != i])
    items[:] = keep


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    fs = sys.modules.get("fuzz_support")
    if fs is None or not fs.CASES:
        return
    total = sum(fs.CASES.values())
    seed = ("derandomized" if fs.PROFILE == "ci" else
            "seed printed by Hypothesis on failure; --hypothesis-seed=N replays")
    terminalreporter.write_line(
        f"fuzz: {total} generated cases in {len(fs.CASES)} properties "
        f"(FLUXION_FUZZ={fs.PROFILE}, scale {fs.SCALE:g}, {seed})")
    if config.getoption("verbose") > 0:
        for name, n in sorted(fs.CASES.items()):
            terminalreporter.write_line(f"  {n:7d}  {name}")
