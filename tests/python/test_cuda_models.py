"""Whole models on the GPU against the CPU (skipped, with the reason, where
no GPU is visible): a small Llama-style decoder (RMSNorm, RoPE, GQA
attention with a key/value cache, SwiGLU, 4-bit quantized linears; the one
of examples/llama_inference.py) generates the CPU's tokens, and a
Transformer encoder's training step gives the CPU's loss and gradients.
"""
import importlib.util
import os

import numpy as np
import pytest

import fluxion.core as mx
import fluxion.nn as nn
from fluxion.utils import tree_flatten

from helpers import requires_gpu

pytestmark = requires_gpu

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


def llama_module():
    spec = importlib.util.spec_from_file_location(
        "llama_inference", os.path.join(EXAMPLES, "llama_inference.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("quantize", [False, True])
def test_llama_decoder_generates_the_cpus_tokens(quantize):
    ex = llama_module()
    mx.random.seed(3)
    model = ex.Llama(vocab=97, dims=128, layers=2, heads=8, kv_heads=2,
                     hidden=256)
    if quantize:
        nn.quantize(model, group_size=64, bits=4)
    mx.eval(model.parameters())
    prompt = [5, 17, 42, 8, 63, 11, 2, 90, 33]
    tokens = {}
    for dev in (mx.gpu, mx.cpu):
        with mx.stream(dev):
            # Greedy decoding: no sampling noise between the devices.
            tokens[dev] = ex.generate(model, prompt, 32, temperature=0)[0]
    assert tokens[mx.gpu] == tokens[mx.cpu]
    with mx.stream(mx.gpu):
        sampled = ex.generate(model, prompt, 16, temperature=0.8, top_p=0.9)
    assert len(sampled[0]) == 16 and all(0 <= t < 97 for t in sampled[0])


def test_transformer_encoder_training_step_matches_cpu():
    mx.random.seed(4)
    enc = nn.TransformerEncoder(2, 64, 4, norm_first=True)
    head = nn.Linear(64, 10)
    x = mx.random.normal((3, 20, 64))
    y = mx.random.randint(0, 10, (3, 20))
    mask = nn.MultiHeadAttention.create_additive_causal_mask(20)
    model = nn.Sequential(enc, head)
    mx.eval(model.parameters())

    def loss_fn(m, x, y):
        h = m.layers[1](m.layers[0](x, mask))
        return nn.losses.cross_entropy(h, y, reduction="mean")

    step = nn.value_and_grad(model, loss_fn)
    out = {}
    for dev in (mx.gpu, mx.cpu):
        with mx.stream(dev):
            loss, grads = step(model, x, y)
            out[dev] = (loss.item(),
                        {k: np.array(v) for k, v in tree_flatten(grads)})
    assert out[mx.gpu][0] == pytest.approx(out[mx.cpu][0], rel=1e-5)
    for k, g in out[mx.gpu][1].items():
        np.testing.assert_allclose(g, out[mx.cpu][1][k], rtol=1e-3,
                                   atol=1e-5, err_msg=k)
