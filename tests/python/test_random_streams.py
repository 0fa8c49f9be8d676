"""The random streams are JAX's / MLX's for the same key: threefry-2x32 in
JAX's bit layout (checked against an independent NumPy implementation and
JAX's published first value), MLX's key splitting and global key sequence,
and MLX's uniform, normal and bernoulli compositions on top of the bits."""

import numpy as np
import pytest
from scipy.special import erfinv

import fluxion.core as mx

M32 = 0xFFFFFFFF


def threefry2x32(key, c0, c1):
    """Threefry-2x32, 20 rounds (Salmon et al., as JAX), on uint32 arrays."""
    k0, k1 = np.uint32(key[0]), np.uint32(key[1])
    ks = [k0, k1, np.uint32(k0 ^ k1 ^ np.uint32(0x1BD11BDA))]
    rot = [[13, 15, 26, 6], [17, 29, 16, 24]]
    x0 = (np.asarray(c0, np.uint64) + int(ks[0])) & M32
    x1 = (np.asarray(c1, np.uint64) + int(ks[1])) & M32
    for i in range(5):
        for r in rot[i % 2]:
            x0 = (x0 + x1) & M32
            x1 = ((x1 << r) | (x1 >> (32 - r))) & M32
            x1 ^= x0
        x0 = (x0 + int(ks[(i + 1) % 3])) & M32
        x1 = (x1 + int(ks[(i + 2) % 3]) + i + 1) & M32
    return x0.astype(np.uint32), x1.astype(np.uint32)


def jax_bits(key, nbytes):
    """JAX's layout: n words in pairs (i, h + o + i), the middle one of an
    odd count from counters (h, 0); little-endian bytes."""
    n = (nbytes + 3) // 4
    h, o = n // 2, n % 2
    words = np.zeros(n, np.uint32)
    i = np.arange(h, dtype=np.uint64)
    a, b = threefry2x32(key, i, i + h + o)
    words[:h], words[h + o:] = a, b
    if o:
        words[h] = threefry2x32(key, [h], [0])[0][0]
    return words.view(np.uint8)[:nbytes]


def key_of(seed):
    return (seed >> 32) & M32, seed & M32


@pytest.mark.parametrize("seed", [0, 1, 7, 2**33 + 5])
@pytest.mark.parametrize("shape,width", [((), 4), ((3, 1), 4), ((5,), 2),
                                         ((7,), 2), ((8,), 2), ((), 1),
                                         ((9,), 1), ((1000,), 4), ((3,), 2)])
def test_bits_are_jax_threefry(seed, shape, width):
    key = mx.random.key(seed)
    got = np.array(mx.random.bits(shape, width, key=key))
    dt = {1: np.uint8, 2: np.uint16, 4: np.uint32}[width]
    n = int(np.prod(shape)) * width
    want = jax_bits(key_of(seed), n).view(dt).reshape(shape)
    np.testing.assert_array_equal(got, want)
    # JAX's documented first word for PRNGKey(0).
    if seed == 0 and shape == () and width == 4:
        assert got.item() == 1797259609


def test_split_and_the_global_sequence():
    key = mx.random.key(0)
    rows = jax_bits(key_of(0), 16).view(np.uint32).reshape(2, 2)
    k1, k2 = mx.random.split(key)
    assert k1.tolist() == rows[0].tolist()
    assert k2.tolist() == rows[1].tolist()
    three = jax_bits(key_of(0), 24).view(np.uint32).reshape(3, 2)
    assert mx.random.split(key, 3).tolist() == three.tolist()
    # The global key: each draw splits it, keeps row 0, uses row 1 (MLX).
    mx.random.seed(42)
    a = mx.random.bits((4,))
    b = mx.random.bits((4,))
    k = key_of(42)
    for got in (a, b):
        r = jax_bits(k, 16).view(np.uint32).reshape(2, 2)
        k = tuple(int(v) for v in r[0])
        want = jax_bits(tuple(int(v) for v in r[1]), 16).view(np.uint32)
        assert got.tolist() == want.tolist()


def test_uniform_normal_bernoulli_follow_mlx_on_the_bits():
    key = mx.random.key(3)
    bits = jax_bits(key_of(3), 4 * 64).view(np.uint32).astype(np.float32)
    u = np.minimum(bits / np.float32(M32), np.nextafter(np.float32(1), 0))
    np.testing.assert_array_equal(np.array(mx.random.uniform(shape=(64,),
                                                             key=key)), u)
    lo, hi = np.float32(-2), np.float32(3)
    np.testing.assert_allclose(
        np.array(mx.random.uniform(-2, 3, (64,), key=key)),
        (hi - lo) * u + lo, rtol=1e-6)
    # normal: sqrt(2) erfinv of a uniform in (nextafter(-1, 0), 1).
    low = np.nextafter(np.float32(-1), np.float32(0))
    un = ((np.float32(1) - low) * u + low).astype(np.float32)
    z = np.float32(np.sqrt(2)) * erfinv(un.astype(np.float64)).astype(
        np.float32)
    np.testing.assert_allclose(np.array(mx.random.normal((64,), key=key)), z,
                               rtol=2e-6, atol=2e-6)
    # bernoulli: a word below p scaled to just above 2^32 - 1.
    p = np.linspace(0, 1, 64).astype(np.float32)
    upper = np.nextafter(np.float32(M32), np.float32(np.inf))
    np.testing.assert_array_equal(
        np.array(mx.random.bernoulli(mx.array(p), key=key)),
        bits < p * upper)
    assert mx.random.bernoulli(mx.array(1.0), (100,), key=key).all().item()
    assert not mx.random.bernoulli(mx.array(0.0), (100,), key=key).any().item()


def test_half_types_keep_their_range():
    key = mx.random.key(11)
    for t in (mx.float16, mx.bfloat16):
        u = mx.random.uniform(shape=(4096,), dtype=t, key=key)
        assert u.dtype == t
        assert (u < 1).all().item() and (u >= 0).all().item()
        n = mx.random.normal((2048,), dtype=t, key=key)
        assert mx.isfinite(n).all().item()
        assert abs(mx.mean(n.astype(mx.float32)).item()) < 0.1
    # float64 keeps 53 random bits (MLX has no float64 uniform).
    d = np.array(mx.random.uniform(shape=(1000,), dtype=mx.float64, key=key))
    assert len(np.unique(d)) == 1000 and d.min() >= 0 and d.max() < 1
