"""Hostile .npy/.npz/.safetensors/.gguf files and exported functions, in a
child process (fuzz_loaders.py says what is checked)."""

from fuzz_support import budget, run_isolated


def test_loaders_survive_hostile_files():
    r = run_isolated("fuzz_loaders", "run", {"cases": 2500},
                     timeout=120 + budget(2500) // 20)
    assert not r["failures"], "\n\n".join(r["failures"])
