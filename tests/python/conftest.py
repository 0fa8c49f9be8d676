"""Session-wide pieces of the Python suite: the fuzz case count (see
fuzz_support.py) printed at the end, so that the CI log shows the budget
that ran."""

import sys


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
