"""Every public function called with arguments drawn from its signature, in
a child process (fuzz_api.py says what is checked)."""

from fuzz_support import budget, run_isolated


def test_every_public_function_survives_random_arguments():
    r = run_isolated("fuzz_api", "run", {"cases": 4000},
                     timeout=120 + budget(4000) // 20)
    assert r["functions"] > 250
    assert not r["failures"], "\n\n".join(r["failures"])
