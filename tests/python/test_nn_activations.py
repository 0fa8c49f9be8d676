"""Every activation, function and Module form, against its NumPy formula,
with gradients checked by finite differences."""

import math

import numpy as np
import pytest
from scipy.special import erf

import fluxion.core as mx
import fluxion.nn as nn
from nn_check import check_grads

X = np.concatenate([np.linspace(-4, 4, 33), [-0.37, 0.71, 2.9]]).astype(
    np.float32
)


def sig(x):
    return 1 / (1 + np.exp(-x))


def softplus(x):
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


SELU_A, SELU_L = 1.6732632423543772, 1.0507009873554805

# name -> (function, Module factory or None, NumPy reference)
CASES = {
    "sigmoid": (nn.sigmoid, nn.Sigmoid, sig),
    "tanh": (nn.tanh, nn.Tanh, np.tanh),
    "relu": (nn.relu, nn.ReLU, lambda x: np.maximum(x, 0)),
    "relu2": (nn.relu2, nn.ReLU2, lambda x: np.maximum(x, 0) ** 2),
    "relu6": (nn.relu6, nn.ReLU6, lambda x: np.clip(x, 0, 6)),
    "leaky_relu": (
        nn.leaky_relu,
        nn.LeakyReLU,
        lambda x: np.where(x > 0, x, 0.01 * x),
    ),
    "elu": (nn.elu, nn.ELU, lambda x: np.where(x > 0, x, np.expm1(x))),
    "celu": (
        nn.celu,
        nn.CELU,
        lambda x: np.maximum(x, 0) + np.minimum(0, np.expm1(x)),
    ),
    "selu": (
        nn.selu,
        nn.SELU,
        lambda x: SELU_L * np.where(x > 0, x, SELU_A * np.expm1(x)),
    ),
    "softplus": (nn.softplus, nn.Softplus, softplus),
    "softsign": (nn.softsign, nn.Softsign, lambda x: x / (1 + np.abs(x))),
    "softshrink": (
        nn.softshrink,
        nn.Softshrink,
        lambda x: np.where(np.abs(x) > 0.5, x - np.sign(x) * 0.5, 0),
    ),
    "hard_shrink": (
        nn.hard_shrink,
        nn.HardShrink,
        lambda x: np.where(np.abs(x) > 0.5, x, 0),
    ),
    "hard_tanh": (nn.hard_tanh, nn.HardTanh, lambda x: np.clip(x, -1, 1)),
    "hardswish": (
        nn.hardswish,
        nn.Hardswish,
        lambda x: x * np.clip(x + 3, 0, 6) / 6,
    ),
    "silu": (nn.silu, nn.SiLU, lambda x: x * sig(x)),
    "log_sigmoid": (nn.log_sigmoid, nn.LogSigmoid, lambda x: -softplus(-x)),
    "gelu": (
        nn.gelu,
        nn.GELU,
        lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2))),
    ),
    "gelu_approx": (
        nn.gelu_approx,
        lambda: nn.GELU("precise"),
        lambda x: 0.5
        * x
        * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    ),
    "gelu_fast_approx": (
        nn.gelu_fast_approx,
        lambda: nn.GELU("fast"),
        lambda x: x * sig(1.702 * x),
    ),
    "mish": (nn.mish, nn.Mish, lambda x: x * np.tanh(softplus(x))),
    "step": (nn.step, nn.Step, lambda x: (x >= 0).astype(np.float32)),
    "softmax": (nn.softmax, nn.Softmax, softmax),
    "softmin": (nn.softmin, nn.Softmin, lambda x: softmax(-x)),
    "log_softmax": (
        nn.log_softmax,
        nn.LogSoftmax,
        lambda x: np.log(softmax(x)),
    ),
}

# Points where the function has a kink are avoided by the FD check.
KINKS = {
    "relu": [0],
    "relu2": [0],
    "relu6": [0, 6],
    "leaky_relu": [0],
    "elu": [0],
    "celu": [0],
    "selu": [0],
    "softshrink": [-0.5, 0.5],
    "hard_shrink": [-0.5, 0.5],
    "hard_tanh": [-1, 1],
    "hardswish": [-3, 3],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_activation_matches_numpy(name):
    fn, module, ref = CASES[name]
    x = X.reshape(4, 9)
    expected = ref(x.astype(np.float64))
    got = np.array(fn(mx.array(x)))
    np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(
        np.array(module()(mx.array(x))), expected, rtol=2e-5, atol=2e-6
    )
    assert fn(mx.array(x)).shape == x.shape


@pytest.mark.parametrize("name", sorted(set(CASES) - {"step"}))
def test_activation_gradients(name):
    fn = CASES[name][0]
    x = X.astype(np.float64)
    for k in KINKS.get(name, []):
        x = x[np.abs(x - k) > 1e-3]
    weights = mx.array(np.random.default_rng(0).normal(size=x.shape))
    check_grads(
        lambda v: mx.sum(fn(v) * weights),
        [mx.array(x)],
        samples=12,
        rtol=1e-5,
        atol=1e-8,
    )


def test_parameterized_activations():
    x = mx.array(X)
    np.testing.assert_allclose(
        np.array(nn.leaky_relu(x, 0.2)), np.where(X > 0, X, 0.2 * X), rtol=1e-6
    )
    np.testing.assert_allclose(
        np.array(nn.LeakyReLU(0.1)(x)), np.where(X > 0, X, 0.1 * X), rtol=1e-6
    )
    np.testing.assert_allclose(
        np.array(nn.ELU(1.1)(x)),
        np.where(X > 0, X, 1.1 * np.expm1(X)),
        rtol=1e-5,
        atol=1e-7,
    )
    np.testing.assert_allclose(
        np.array(nn.CELU(1.1)(x)),
        np.maximum(X, 0) + 1.1 * np.minimum(0, np.expm1(X / 1.1)),
        rtol=1e-5,
        atol=1e-7,
    )
    np.testing.assert_allclose(
        np.array(nn.hard_tanh(x, -2, 0.5)), np.clip(X, -2, 0.5)
    )
    np.testing.assert_allclose(
        np.array(nn.Softshrink(1.0)(x)),
        np.where(np.abs(X) > 1, X - np.sign(X), 0),
        atol=1e-7,
    )
    np.testing.assert_array_equal(
        np.array(nn.Step(1.0)(x)), (X >= 1).astype(np.int32)
    )
    # step includes its threshold.
    np.testing.assert_array_equal(
        np.array(nn.step(mx.array([-1.0, 0.0, 1.0]))), [0, 1, 1]
    )


def test_glu_and_prelu():
    x = np.random.default_rng(1).normal(size=(2, 6)).astype(np.float32)
    np.testing.assert_allclose(
        np.array(nn.glu(mx.array(x))), x[:, :3] * sig(x[:, 3:]), rtol=1e-6
    )
    np.testing.assert_allclose(
        np.array(nn.GLU(axis=0)(mx.array(x))), x[:1] * sig(x[1:]), rtol=1e-6
    )
    p = nn.PReLU(num_parameters=6, init=0.1)
    assert p.weight.shape == (6,)
    p.weight = mx.array(np.linspace(0, 1, 6, dtype=np.float32))
    np.testing.assert_allclose(
        np.array(p(mx.array(x))),
        np.where(x > 0, x, np.linspace(0, 1, 6) * x),
        rtol=1e-6,
    )
    check_grads(
        lambda a, v: mx.sum(nn.prelu(v, a) ** 2),
        [mx.array([0.3]), mx.array(x[0])],
        samples=4,
    )


def test_log_softmax_is_stable_for_large_logits():
    for v in (1.0, 1e4, 1e20, 1e36):
        y = np.array(nn.log_softmax(mx.array([[v, v]])))
        np.testing.assert_allclose(y, np.log(0.5), rtol=1e-6)
    y = np.array(nn.log_softmax(mx.array([[0.0, -np.inf]])))
    assert y[0, 0] == 0 and y[0, 1] == -np.inf


def test_gelu_module_rejects_unknown_approximation():
    with pytest.raises(ValueError, match="approximation"):
        nn.GELU(approx="exact")
    np.testing.assert_allclose(
        np.array(nn.GELU("tanh")(mx.array(X))),
        np.array(nn.gelu_approx(mx.array(X))),
    )


def test_half_precision_dtypes_are_kept():
    for name, (fn, _, _) in CASES.items():
        if name == "step":
            continue
        y = fn(mx.array(X).astype(mx.float16))
        assert y.dtype == mx.float16, name
