"""mx.random extras: truncated_normal, gumbel, laplace, categorical,
permutation and multivariate_normal (statistics, keys, shapes, errors)."""

import math

import numpy as np
import pytest

import fluxion.core as mx


def npa(x):
    return np.array(x.astype(mx.float32) if x.dtype == mx.bfloat16 else x)


def phi(x):
    return math.exp(-x * x / 2) / math.sqrt(2 * math.pi)


def cdf(x):
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def test_truncated_normal_statistics():
    lo, hi = -1.0, 2.0
    x = npa(mx.random.truncated_normal(lo, hi, (100000,),
                                       key=mx.random.key(1)))
    assert x.dtype == np.float32 and x.shape == (100000,)
    assert x.min() >= lo and x.max() <= hi
    z = cdf(hi) - cdf(lo)
    mean = (phi(lo) - phi(hi)) / z
    var = 1 + (lo * phi(lo) - hi * phi(hi)) / z - mean**2
    assert abs(x.mean() - mean) < 0.01
    assert abs(x.var() - var) < 0.01


def test_truncated_normal_shapes_and_bounds():
    lower = mx.array([[-3.0], [0.0], [1.0]])
    upper = mx.array([1.5, 1.25, 3.0, 10.0])
    x = mx.random.truncated_normal(lower, upper, key=mx.random.key(2))
    assert x.shape == (3, 4)
    v = npa(x)
    lo, hi = np.broadcast_arrays(npa(lower), npa(upper))
    assert np.all(v >= lo) and np.all(v <= hi)
    big = mx.random.truncated_normal(lower, upper, (5, 3, 4),
                                     key=mx.random.key(2))
    assert big.shape == (5, 3, 4)
    for t in (mx.float16, mx.bfloat16, mx.float64):
        y = mx.random.truncated_normal(0.0, 1.0, (50,), dtype=t,
                                       key=mx.random.key(3))
        assert y.dtype == t
        assert npa(y).min() >= 0 and npa(y).max() <= 1


def test_truncated_normal_errors():
    with pytest.raises(ValueError, match=r"\[random.truncated_normal\]"):
        mx.random.truncated_normal(mx.zeros((3,)), 1.0, (2,))
    with pytest.raises(ValueError, match=r"\[random.truncated_normal\] Only"):
        mx.random.truncated_normal(0, 1, dtype=mx.int32)
    with pytest.raises(ValueError, match="cannot be broadcast together"):
        mx.random.truncated_normal(mx.zeros((3,)), mx.ones((2,)))


def test_gumbel_statistics():
    x = npa(mx.random.gumbel((200000,), key=mx.random.key(4)))
    assert np.all(np.isfinite(x))
    assert abs(x.mean() - 0.5772157) < 0.01
    assert abs(x.var() - math.pi**2 / 6) < 0.03
    assert mx.random.gumbel((2, 3), mx.float16).dtype == mx.float16
    assert mx.random.gumbel().shape == ()
    with pytest.raises(ValueError, match=r"\[random.gumbel\]"):
        mx.random.gumbel((2,), mx.int32)
    with pytest.raises(ValueError, match=r"\[random.gumbel\] Negative"):
        mx.random.gumbel((-1,))


def test_laplace_statistics():
    x = npa(mx.random.laplace((200000,), loc=1.0, scale=2.0,
                              key=mx.random.key(5)))
    assert np.all(np.isfinite(x))
    assert abs(np.median(x) - 1.0) < 0.03
    assert abs(x.mean() - 1.0) < 0.03
    assert abs(x.var() - 8.0) < 0.2
    # P(|x - loc| > scale) = 1 / e
    assert abs(np.mean(np.abs(x - 1.0) > 2.0) - math.exp(-1)) < 0.01
    assert mx.random.laplace((3,), mx.float64).dtype == mx.float64
    with pytest.raises(ValueError, match=r"\[random.laplace\]"):
        mx.random.laplace((2,), mx.uint8)


def test_keyed_draws_are_deterministic():
    k = mx.random.key(11)
    draws = [
        lambda key: mx.random.truncated_normal(-1, 1, (6,), key=key),
        lambda key: mx.random.gumbel((6,), key=key),
        lambda key: mx.random.laplace((6,), key=key),
        lambda key: mx.random.categorical(mx.zeros((6, 9)), key=key),
        lambda key: mx.random.permutation(9, key=key),
        lambda key: mx.random.multivariate_normal(
            mx.zeros((2,)), mx.eye(2), (3,), key=key),
    ]
    for draw in draws:
        assert draw(k).tolist() == draw(k).tolist()
        assert draw(k).tolist() != draw(mx.random.key(12)).tolist()
    mx.random.seed(7)
    a = mx.random.gumbel((4,))
    mx.random.seed(7)
    assert mx.random.gumbel((4,)).tolist() == a.tolist()


def test_categorical_frequencies():
    p = np.array([0.1, 0.2, 0.7])
    logits = mx.array(np.log(p).astype(np.float32))
    s = npa(mx.random.categorical(logits, num_samples=50000,
                                  key=mx.random.key(6)))
    assert s.shape == (50000,) and s.dtype == np.uint32
    freq = np.bincount(s, minlength=3) / s.size
    assert np.allclose(freq, p, atol=0.01)
    # Unnormalized logits, categories along axis 0, batch of 2.
    lg = np.stack([np.log(p) + 3.0, np.log(p[::-1])], axis=1)
    s = npa(mx.random.categorical(mx.array(lg.astype(np.float32)), axis=0,
                                  shape=(20000, 2), key=mx.random.key(7)))
    assert s.shape == (20000, 2)
    assert np.allclose(np.bincount(s[:, 0], minlength=3) / 20000, p,
                       atol=0.015)
    assert np.allclose(np.bincount(s[:, 1], minlength=3) / 20000, p[::-1],
                       atol=0.015)


def test_categorical_shapes():
    logits = mx.zeros((4, 5))
    assert mx.random.categorical(logits).shape == (4,)
    assert mx.random.categorical(logits, axis=0).shape == (5,)
    assert mx.random.categorical(logits, num_samples=3).shape == (4, 3)
    assert mx.random.categorical(logits, shape=(2, 4)).shape == (2, 4)
    # -inf logits are never drawn.
    lg = mx.array([[0.0, -np.inf, 0.0]] * 3)
    s = npa(mx.random.categorical(lg, num_samples=200, key=mx.random.key(8)))
    assert not np.any(s == 1)


def test_categorical_errors():
    with pytest.raises(ValueError, match="At most one of shape or num_samp"):
        mx.random.categorical(mx.zeros((3,)), shape=(2,), num_samples=2)
    with pytest.raises(ValueError, match="does not broadcast"):
        mx.random.categorical(mx.zeros((4, 5)), shape=(3,))
    with pytest.raises(ValueError, match="at least one dimension"):
        mx.random.categorical(mx.array(1.0))
    with pytest.raises(ValueError, match=r"\[random.categorical\] Invalid"):
        mx.random.categorical(mx.zeros((4, 5)), axis=2)
    with pytest.raises(ValueError, match="non-negative"):
        mx.random.categorical(mx.zeros((3,)), num_samples=-1)


def test_permutation():
    p = mx.random.permutation(50, key=mx.random.key(9))
    assert sorted(p.tolist()) == list(range(50))
    assert p.tolist() != list(range(50))
    x = np.arange(24).reshape(4, 6)
    q = npa(mx.random.permutation(mx.array(x), axis=1, key=mx.random.key(9)))
    assert q.shape == (4, 6)
    # The same column permutation for every row.
    perm = q[0]
    assert sorted(perm.tolist()) == list(range(6))
    assert np.array_equal(q, x[:, perm])
    r = npa(mx.random.permutation(mx.array(x), key=mx.random.key(9)))
    assert np.array_equal(r, x[r[:, 0] // 6])
    # Each position is uniformly distributed.
    firsts = [mx.random.permutation(4, key=k)[0].item()
              for k in mx.random.split(mx.random.key(10), 400)]
    assert np.all(np.abs(np.bincount(firsts, minlength=4) / 400 - 0.25)
                  < 0.08)
    with pytest.raises(ValueError, match="non-negative"):
        mx.random.permutation(-3)
    with pytest.raises(ValueError, match="at least one dimension"):
        mx.random.permutation(mx.array(2.0))


def test_multivariate_normal_statistics():
    mean = np.array([1.0, -2.0, 0.5])
    cov = np.array([[2.0, 0.6, 0.2], [0.6, 1.0, -0.3], [0.2, -0.3, 0.5]])
    x = npa(mx.random.multivariate_normal(mx.array(mean), mx.array(cov),
                                          (100000,), key=mx.random.key(13)))
    assert x.shape == (100000, 3) and x.dtype == np.float32
    assert np.allclose(x.mean(0), mean, atol=0.02)
    assert np.allclose(np.cov(x.T), cov, atol=0.03)
    y = mx.random.multivariate_normal(mx.array(mean), mx.array(cov),
                                      dtype=mx.float64, key=mx.random.key(1))
    assert y.shape == (3,) and y.dtype == mx.float64


def test_multivariate_normal_batches():
    means = mx.array([[0.0, 0.0], [10.0, -10.0]])
    covs = mx.array([[[1.0, 0.0], [0.0, 1.0]], [[0.01, 0.0], [0.0, 4.0]]])
    x = npa(mx.random.multivariate_normal(means, covs, (20000, 2),
                                          key=mx.random.key(14)))
    assert x.shape == (20000, 2, 2)
    assert np.allclose(x.mean(0), npa(means), atol=0.05)
    assert np.allclose(x[:, 1].std(0), [0.1, 2.0], atol=0.05)


def test_multivariate_normal_errors():
    with pytest.raises(ValueError, match=r"cov must have shape \(\.\.\., 2"):
        mx.random.multivariate_normal(mx.zeros((2,)), mx.eye(3))
    with pytest.raises(ValueError, match="mean must have at least one"):
        mx.random.multivariate_normal(mx.array(0.0), mx.eye(1))
    with pytest.raises(ValueError, match="dtype must be float32 or float64"):
        mx.random.multivariate_normal(mx.zeros((2,)), mx.eye(2),
                                      dtype=mx.float16)
    with pytest.raises(ValueError, match="does not broadcast"):
        mx.random.multivariate_normal(mx.zeros((3, 2)), mx.eye(2), (4,))
