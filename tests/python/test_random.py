"""mx.random: keys, seeding, and the samplers' ranges and statistics."""

import numpy as np
import pytest

import fluxion.core as mx


def test_keys_and_split():
    k = mx.random.key(42)
    assert k.shape == (2,) and k.dtype == mx.uint32
    assert mx.random.key(42).tolist() == k.tolist()
    ks = mx.random.split(k)
    assert ks.shape == (2, 2)
    assert mx.random.split(k, num=5).shape == (5, 2)
    a, b = mx.random.split(k)
    assert a.tolist() != b.tolist()
    assert mx.random.split(k, 3).tolist() == mx.random.split(k, 3).tolist()


def test_determinism_with_keys_and_seed():
    k = mx.random.key(0)
    u1 = mx.random.uniform(shape=(8,), key=k)
    u2 = mx.random.uniform(shape=(8,), key=k)
    assert u1.tolist() == u2.tolist()
    mx.random.seed(3)
    a = mx.random.normal((5,))
    mx.random.seed(3)
    b = mx.random.normal((5,))
    assert a.tolist() == b.tolist()
    c = mx.random.normal((5,))
    assert c.tolist() != b.tolist()


def test_uniform():
    k = mx.random.key(1)
    u = mx.random.uniform(-2, 3, (20000,), key=k)
    v = np.array(u)
    assert u.dtype == mx.float32
    assert v.min() >= -2 and v.max() < 3
    assert abs(v.mean() - 0.5) < 0.05
    assert mx.random.uniform(shape=(3,), dtype=mx.float16).dtype == mx.float16
    lo = mx.array([0.0, 10.0])
    w = np.array(mx.random.uniform(lo, lo + 1, (1000, 2), key=k))
    assert (w[:, 1] >= 10).all() and (w[:, 0] < 1).all()
    assert mx.random.uniform().shape == ()


def test_normal():
    k = mx.random.key(2)
    z = np.array(mx.random.normal((20000,), key=k))
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.03
    s = np.array(mx.random.normal((20000,), loc=3.0, scale=0.5, key=k))
    assert abs(s.mean() - 3) < 0.02 and abs(s.std() - 0.5) < 0.02
    np.testing.assert_allclose(s, 3 + 0.5 * z, rtol=1e-5)
    la = mx.random.normal((2,), loc=mx.array([0.0, 100.0]), key=k)
    assert abs(la[1].item() - 100) < 10
    assert mx.random.normal(dtype=mx.float64).dtype == mx.float64


def test_randint_bits_bernoulli():
    k = mx.random.key(3)
    r = mx.random.randint(-3, 4, (5000,), key=k)
    assert r.dtype == mx.int32
    v = np.array(r)
    assert v.min() == -3 and v.max() == 3
    assert mx.random.randint(0, 5, (3,), dtype=mx.uint8).dtype == mx.uint8
    bits = mx.random.bits((4, 4), key=k)
    assert bits.dtype == mx.uint32 and bits.shape == (4, 4)
    assert mx.random.bits((4,), width=1).dtype == mx.uint8
    assert mx.random.bits((4,), 2).dtype == mx.uint16
    b = mx.random.bernoulli(0.25, (20000,), key=k)
    assert b.dtype == mx.bool_
    assert abs(np.array(b).mean() - 0.25) < 0.02
    p = mx.array([0.0, 1.0])
    assert mx.random.bernoulli(p, key=k).tolist() == [False, True]
    assert mx.random.bernoulli().shape == ()
    with pytest.raises(ValueError,
                       match=r"\[random.bits\] The width must be 1, 2 or 4"):
        mx.random.bits((2,), width=3)
