"""The examples run end to end on a tiny budget (--smoke), so they cannot
rot: data loading, compiled training, evaluation, plots, and the weights
round trip."""

import importlib.util
import os

import numpy as np
import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


def load_example(name):
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(ROOT, name + ".py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(
    not os.path.isdir("/usr/share/datasets/fashion-mnist"),
    reason="needs Debian's dataset-fashion-mnist",
)
def test_fashion_mnist_cnn_smoke(tmp_path):
    pytest.importorskip("matplotlib")
    pytest.importorskip("tqdm")
    ex = load_example("fashion_mnist_cnn")
    out = ex.main(["--smoke", "--out", str(tmp_path), "--no-progress"])
    assert out["steps"] == 32
    # 32 compiled steps on 2048 images already beat chance (10%) by far.
    assert out["accuracy"] > 0.5
    losses = out["losses"]
    assert np.all(np.isfinite(losses)) and np.mean(losses[-8:]) < np.mean(
        losses[:8]
    )
    for name in ("loss_curve.png", "misclassified.png", "model.safetensors"):
        assert os.path.getsize(tmp_path / name) > 0


@pytest.mark.skipif(
    not os.path.isdir("/usr/share/games/fortunes"),
    reason="needs Debian's fortunes",
)
def test_char_lm_transformer_smoke(tmp_path):
    pytest.importorskip("matplotlib")
    pytest.importorskip("tqdm")
    ex = load_example("char_lm_transformer")
    out = ex.main(["--smoke", "--out", str(tmp_path), "--no-progress"])
    losses = out["losses"]
    assert len(losses) == 20 and np.all(np.isfinite(losses))
    assert np.mean(losses[-5:]) < np.mean(losses[:5])
    assert out["val_loss"] == pytest.approx(out["val_loss_reloaded"], abs=1e-6)
    for name in ("loss_curve.png", "model.safetensors"):
        assert os.path.getsize(tmp_path / name) > 0


@pytest.mark.skipif(
    not os.path.isdir("/usr/share/games/fortunes"),
    reason="needs Debian's fortunes",
)
@pytest.mark.parametrize("quantize", [False, True])
def test_llama_inference_smoke(tmp_path, quantize):
    ex = load_example("llama_inference")
    weights = str(tmp_path / "llama.safetensors")
    args = ["--smoke", "--out", str(tmp_path), "--weights", weights]
    out = ex.main(args + (["--quantize"] if quantize else []))
    assert len(out["tokens"]) == 24
    assert out["prompt_tps"] > 0 and out["generation_tps"] > 0
    if not quantize:
        assert len(out["losses"]) == 10
        assert np.all(np.isfinite(out["losses"]))
    # The saved weights load back (no training the second time) and, at
    # temperature 0, generate the same tokens.
    greedy = args + ["--temperature", "0"]
    first = ex.main(greedy)
    assert first["losses"] == []
    assert ex.main(greedy)["tokens"] == first["tokens"]
