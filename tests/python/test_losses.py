"""nn.losses against NumPy formulas, with every reduction, edge cases and
errors."""

import math

import numpy as np
import pytest

import fluxion.core as mx
import fluxion.nn as nn
from nn_check import check_grads

L = nn.losses
RNG = np.random.default_rng(2)


def npa(x):
    return np.array(x)


def rand(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def np_lse(x, axis=-1):
    m = x.max(axis, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(axis, keepdims=True))).squeeze(axis)


def reduce(x, reduction):
    return {"none": x, "mean": np.mean(x), "sum": np.sum(x)}[reduction]


REDUCTIONS = ["none", "mean", "sum"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_indices_probs_weights_smoothing(reduction):
    logits = rand(5, 4)
    targets = np.array([0, 3, 1, 1, 2], dtype=np.int32)
    onehot = np.eye(4, dtype=np.float32)[targets]
    weights = RNG.random(5).astype(np.float32)
    base = np_lse(logits) - logits[np.arange(5), targets]
    got = L.cross_entropy(
        mx.array(logits), mx.array(targets), reduction=reduction
    )
    np.testing.assert_allclose(npa(got), reduce(base, reduction), rtol=1e-5)
    got = L.cross_entropy(
        mx.array(logits),
        mx.array(onehot),
        weights=mx.array(weights),
        reduction=reduction,
    )
    np.testing.assert_allclose(
        npa(got), reduce(base * weights, reduction), rtol=1e-5
    )
    ls = 0.2
    smooth = (1 - ls) * onehot + ls / 4
    ref = -(smooth * (logits - np_lse(logits)[:, None])).sum(-1)
    for t in (targets, onehot):
        got = L.cross_entropy(
            mx.array(logits),
            mx.array(t),
            label_smoothing=ls,
            reduction=reduction,
        )
        np.testing.assert_allclose(npa(got), reduce(ref, reduction), rtol=1e-5)


def test_cross_entropy_soft_targets_axis_and_stability():
    logits = rand(3, 6)
    probs = RNG.dirichlet(np.ones(6), size=3).astype(np.float32)
    ref = -(probs * (logits - np_lse(logits)[:, None])).sum(-1)
    np.testing.assert_allclose(
        npa(L.cross_entropy(mx.array(logits), mx.array(probs))), ref, rtol=1e-5
    )
    # Targets that do not sum to one keep MLX's formula, logsumexp(x) -
    # sum(x t), despite the internal shift by the maximum.
    shifted = logits.astype(np.float64) + 50
    ref2 = np_lse(shifted) - (2 * probs * shifted).sum(-1)
    np.testing.assert_allclose(
        npa(L.cross_entropy(mx.array(logits + 50), mx.array(2 * probs))),
        ref2,
        rtol=1e-4,
    )
    t = np.array([1, 0, 5], dtype=np.int32)
    np.testing.assert_allclose(
        npa(L.cross_entropy(mx.array(logits.T), mx.array(t), axis=0)),
        npa(L.cross_entropy(mx.array(logits), mx.array(t))),
        rtol=1e-6,
    )
    # A shared offset changes nothing, equal logits give log(n), -inf logits
    # of other classes give exactly 0.
    for offset in (1e4, 1e6):
        big = (logits + np.float32(offset)).astype(np.float32)  # as stored
        ref = big.astype(np.float64)
        np.testing.assert_allclose(
            npa(L.cross_entropy(mx.array(big), mx.array(t))),
            np_lse(ref) - ref[np.arange(3), t],
            rtol=1e-5,
            atol=1e-5,
        )
    np.testing.assert_allclose(
        npa(L.cross_entropy(mx.array([[1e20, 1e20]]), mx.array([0]))),
        [math.log(2)],
        rtol=1e-6,
    )
    inf_logits = mx.array([[0.0, -np.inf], [-np.inf, 0.0]])
    np.testing.assert_array_equal(
        npa(L.cross_entropy(inf_logits, mx.array([0, 1]))), [0, 0]
    )
    # As PyTorch: probabilities against -inf logits are NaN (0 * -inf).
    assert np.isnan(
        npa(L.cross_entropy(inf_logits, mx.array([[1.0, 0.0], [0.0, 1.0]])))
    ).all()
    check_grads(
        lambda z: L.cross_entropy(
            z, mx.array(t), label_smoothing=0.1, reduction="mean"
        ),
        [mx.array(logits)],
        samples=8,
    )


def test_cross_entropy_errors():
    with pytest.raises(ValueError, match="Label smoothing"):
        L.cross_entropy(
            mx.zeros((2, 3)), mx.array([0, 1]), label_smoothing=1.0
        )
    with pytest.raises(ValueError, match="does not match"):
        L.cross_entropy(mx.zeros((2, 3)), mx.array([0, 1, 2]))
    with pytest.raises(ValueError, match="Weights"):
        L.cross_entropy(
            mx.zeros((2, 3)), mx.array([0, 1]), weights=mx.ones((3,))
        )
    with pytest.raises(ValueError, match="Invalid reduction"):
        L.cross_entropy(mx.zeros((2, 3)), mx.array([0, 1]), reduction="avg")


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(reduction):
    logits = rand(7)
    y = (RNG.random(7) > 0.5).astype(np.float32)
    w = RNG.random(7).astype(np.float32)
    p = 1 / (1 + np.exp(-logits.astype(np.float64)))
    ref = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    np.testing.assert_allclose(
        npa(
            L.binary_cross_entropy(
                mx.array(logits), mx.array(y), reduction=reduction
            )
        ),
        reduce(ref, reduction),
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        npa(
            L.binary_cross_entropy(
                mx.array(p.astype(np.float32)),
                mx.array(y),
                weights=mx.array(w),
                with_logits=False,
                reduction=reduction,
            )
        ),
        reduce(ref * w, reduction),
        rtol=1e-4,
    )


def test_binary_cross_entropy_edges():
    # Probabilities of exactly 0 and 1: logs clipped at -100, never inf/nan.
    got = npa(
        L.binary_cross_entropy(
            mx.array([0.0, 1.0, 0.0, 1.0]),
            mx.array([0, 1, 1, 0]),
            with_logits=False,
            reduction="none",
        )
    )
    np.testing.assert_allclose(got, [0, 0, 100, 100])
    # Huge logits stay finite.
    got = npa(
        L.binary_cross_entropy(
            mx.array([100.0, -100.0]), mx.array([0.0, 1.0]), reduction="none"
        )
    )
    np.testing.assert_allclose(got, [100, 100], rtol=1e-6)
    check_grads(
        lambda z: L.binary_cross_entropy(z, mx.array([0.0, 1.0, 1.0])),
        [mx.array([0.3, -1.2, 2.0])],
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_regression_losses(reduction):
    p, t = rand(4, 3), rand(4, 3)
    d = p - t
    cases = [
        (L.l1_loss, {}, np.abs(d)),
        (L.mse_loss, {}, d**2),
        (
            L.smooth_l1_loss,
            {"beta": 0.7},
            np.where(np.abs(d) < 0.7, 0.5 * d**2 / 0.7, np.abs(d) - 0.35),
        ),
        (
            L.huber_loss,
            {"delta": 0.8},
            np.where(np.abs(d) <= 0.8, 0.5 * d**2, 0.8 * (np.abs(d) - 0.4)),
        ),
        (L.log_cosh_loss, {}, np.log(np.cosh(d))),
        (L.hinge_loss, {}, np.maximum(1 - p * np.sign(t), 0)),
    ]
    for fn, kw, ref in cases:
        tt = np.sign(t) if fn is L.hinge_loss else t
        got = fn(mx.array(p), mx.array(tt), reduction=reduction, **kw)
        np.testing.assert_allclose(
            npa(got),
            reduce(ref, reduction),
            rtol=1e-5,
            atol=1e-6,
            err_msg=fn.__name__,
        )


def test_regression_defaults_shapes_and_stability():
    assert L.mse_loss(mx.zeros((2, 3)), mx.ones((2, 3))).ndim == 0
    assert L.l1_loss(mx.zeros((2, 3)), mx.ones((2, 3))).ndim == 0
    assert L.huber_loss(mx.zeros((2, 3)), mx.ones((2, 3))).shape == (2, 3)
    with pytest.raises(ValueError, match="shape"):
        L.mse_loss(mx.zeros((2, 3)), mx.zeros((3, 2)))
    with pytest.raises(ValueError, match="shape"):
        L.l1_loss(mx.zeros((2,)), mx.zeros((3,)))
    # log cosh of a huge error is |d| - log 2, not inf.
    np.testing.assert_allclose(
        npa(L.log_cosh_loss(mx.array([1000.0]), mx.array([0.0]))),
        [1000 - math.log(2)],
        rtol=1e-6,
    )
    check_grads(
        lambda a: L.smooth_l1_loss(a, mx.array([0.0, 0.0, 0.0])),
        [mx.array([0.3, -2.0, 1.4])],
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_gaussian_nll_kl_div(reduction):
    logp = np.log(RNG.dirichlet(np.ones(5), size=3)).astype(np.float32)
    t = np.array([4, 0, 2], dtype=np.int32)
    np.testing.assert_allclose(
        npa(L.nll_loss(mx.array(logp), mx.array(t), reduction=reduction)),
        reduce(-logp[np.arange(3), t], reduction),
        rtol=1e-6,
    )
    # Classes along a middle axis.
    lp3 = (
        np.log(RNG.dirichlet(np.ones(4), size=(2, 3)))
        .transpose(0, 2, 1)
        .astype(np.float32)
    )
    t3 = RNG.integers(0, 4, size=(2, 3)).astype(np.int32)
    ref3 = -np.take_along_axis(lp3, t3[:, None], 1)[:, 0]
    np.testing.assert_allclose(
        npa(L.nll_loss(mx.array(lp3), mx.array(t3), axis=1)), ref3, rtol=1e-6
    )

    mu, y, var = (
        rand(3, 2),
        rand(3, 2),
        RNG.random((3, 2)).astype(np.float32) + 0.1,
    )
    ref = 0.5 * (np.log(var) + (y - mu) ** 2 / var)
    np.testing.assert_allclose(
        npa(
            L.gaussian_nll_loss(
                mx.array(mu), mx.array(y), mx.array(var), reduction=reduction
            )
        ),
        reduce(ref, reduction),
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        npa(
            L.gaussian_nll_loss(
                mx.array(mu),
                mx.array(y),
                mx.array(var),
                full=True,
                reduction=reduction,
            )
        ),
        reduce(ref + 0.5 * math.log(2 * math.pi), reduction),
        rtol=1e-5,
    )

    q = np.log(RNG.dirichlet(np.ones(5), size=3)).astype(np.float32)
    ref = (np.exp(q) * (q - logp)).sum(-1)
    np.testing.assert_allclose(
        npa(L.kl_div_loss(mx.array(logp), mx.array(q), reduction=reduction)),
        reduce(ref, reduction),
        rtol=1e-5,
        atol=1e-6,
    )


def test_gaussian_nll_clips_variance_and_defaults_to_mean():
    got = L.gaussian_nll_loss(
        mx.array([0.0]), mx.array([0.0]), mx.array([0.0]), eps=1e-3
    )
    assert got.ndim == 0
    np.testing.assert_allclose(got.item(), 0.5 * math.log(1e-3), rtol=1e-5)
    with pytest.raises(ValueError):
        L.gaussian_nll_loss(mx.zeros((2,)), mx.zeros((2,)), mx.ones((3,)))


@pytest.mark.parametrize("p", [1, 2, 3])
def test_triplet_loss_p_norms(p):
    a, pos, neg = rand(4, 3), rand(4, 3), rand(4, 3)

    def dist(x, y):
        return ((np.abs(x - y) ** p).sum(-1) + 1e-6) ** (1 / p)

    ref = np.maximum(dist(a, pos) - dist(a, neg) + 0.5, 0)
    for reduction in REDUCTIONS:
        got = L.triplet_loss(
            mx.array(a),
            mx.array(pos),
            mx.array(neg),
            p=p,
            margin=0.5,
            reduction=reduction,
        )
        np.testing.assert_allclose(
            npa(got), reduce(ref, reduction), rtol=1e-5, atol=1e-6
        )


def test_cosine_similarity_and_margin_ranking():
    x1, x2 = rand(3, 4), rand(3, 4)
    cos = (x1 * x2).sum(1) / (
        np.linalg.norm(x1, axis=1) * np.linalg.norm(x2, axis=1)
    )
    for reduction in REDUCTIONS:
        np.testing.assert_allclose(
            npa(
                L.cosine_similarity_loss(
                    mx.array(x1), mx.array(x2), reduction=reduction
                )
            ),
            reduce(cos, reduction),
            rtol=1e-5,
        )
    # Zero vectors: the denominator is clipped at eps, so the result is 0.
    np.testing.assert_array_equal(
        npa(L.cosine_similarity_loss(mx.zeros((2, 3)), mx.ones((2, 3)))),
        [0, 0],
    )
    a, b = rand(5), rand(5)
    y = np.sign(rand(5)).astype(np.float32)
    for margin in (0.0, 0.3):
        ref = np.maximum(-y * (a - b) + margin, 0)
        np.testing.assert_allclose(
            npa(
                L.margin_ranking_loss(
                    mx.array(a), mx.array(b), mx.array(y), margin=margin
                )
            ),
            ref,
            rtol=1e-6,
        )
    with pytest.raises(ValueError):
        L.margin_ranking_loss(mx.zeros((2,)), mx.zeros((3,)), mx.zeros((2,)))
