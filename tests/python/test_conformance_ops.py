"""Op behaviours found by MLX's conformance suite (issue 11's last
failures), checked against NumPy or hand-built references: computed
dimensions past int32, kron of empty arrays, numpy.pad's reflect/symmetric
rounds, the Hadamard sizes m * 2^k, arccosh's derivative, conv1d over more
spatial axes, and float32 solve accuracy."""

import numpy as np
import pytest

import fluxion.core as mx


# --- computed dimensions that do not fit in int32 ---


@pytest.mark.parametrize("parts", [3, 4])
def test_concatenate_overflow_names_the_size(parts):
    big = mx.zeros(2**30)  # lazy: nothing this size is allocated
    with pytest.raises(OverflowError, match=str(2**30 * parts)):
        mx.concatenate([big] * parts)


def test_repeat_tile_kron_overflow_name_the_size():
    big = mx.zeros(2**30)
    with pytest.raises(OverflowError, match=r"\[repeat\].*" + str(2**31)):
        mx.repeat(big, 2)
    with pytest.raises(OverflowError, match=r"\[tile\].*" + str(3 * 2**30)):
        mx.tile(big, 3)
    with pytest.raises(OverflowError, match=r"\[kron\].*" + str(2**32)):
        mx.kron(big, mx.zeros(4))
    # Sizes that fit are unchanged.
    assert mx.repeat(mx.zeros(2**29), 3).shape == (3 * 2**29,)


def test_kron_of_an_empty_array_raises():
    with pytest.raises(ValueError, match=r"\[kron\] Input arrays cannot be "
                                         r"empty; got shapes \(0\) and \(2\)"):
        mx.kron(mx.array([]), mx.array([1, 2]))
    np.testing.assert_array_equal(
        np.array(mx.kron(mx.array([[1, 2]]), mx.array([[0, 1], [2, 3]]))),
        np.kron([[1, 2]], [[0, 1], [2, 3]]))


# --- pad: numpy.pad's reflect / symmetric, pads wider than the axis ---

# numpy.pad fills a pad wider than the axis in rounds. For reflect pads wide
# on both sides NumPy 2 gives other values than NumPy 1 in some cases (it
# moved toward the periodic extension); Fluxion keeps NumPy 1's rounds,
# which MLX's suite checks. These are NumPy 1.24's source indices, so the
# tests do not depend on the NumPy installed.
NUMPY1_REFLECT = {
    ((3,), ((9, 1),)): [1, 2, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1],
    ((3,), ((1, 9),)): [1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 0, 1],
}


def pad_reference(a, width, mode):
    key = (a.shape, tuple(map(tuple, width)))
    if mode == "reflect" and key in NUMPY1_REFLECT:
        return a[np.array(NUMPY1_REFLECT[key])]
    return np.pad(a, width, mode=mode)


@pytest.mark.parametrize("mode", ["reflect", "symmetric"])
@pytest.mark.parametrize("shape,width", [
    ((3,), [(9, 1)]),
    ((3,), [(1, 9)]),
    ((2,), [(7, 5)]),
    ((5,), [(12, 13)]),
    ((1,), [(2, 4)]),
    ((4, 3), [(6, 1), (0, 8)]),
    ((2, 3, 4), [(3, 3), (5, 0), (9, 9)]),
])
def test_pad_reflect_symmetric_match_numpy(mode, shape, width):
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) * 1.5 - 2
    got = mx.pad(mx.array(a), width, mode=mode)
    want = pad_reference(a, width, mode)
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.array(got), want)


def test_pad_reflect_gradient_counts_each_source():
    # Each output position reads one input element: the gradient of a sum
    # counts how often numpy.pad reads each one.
    a = np.arange(3, dtype=np.float32)
    g = mx.grad(lambda x: mx.pad(x, [(9, 1)], mode="reflect").sum())(
        mx.array(a))
    idx = np.array(NUMPY1_REFLECT[((3,), ((9, 1),))])
    np.testing.assert_array_equal(np.array(g), np.bincount(idx, minlength=3))


# --- hadamard_transform: n = m * 2^k, m in (1, 12, 20, 28) ---


def sylvester(n):
    h = np.ones((1, 1), np.int64)
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


def circulant_pm(p, offsets):
    """Symmetric circulant of order p: +1 on the diagonals 0, +-offsets."""
    row = -np.ones(p, np.int64)
    row[0] = 1
    for o in offsets:
        row[o % p] = row[-o % p] = 1
    return np.array([np.roll(row, i) for i in range(p)])


def williamson(a, b, c, d):
    return np.block([[a, b, c, d], [-b, a, -d, c], [-c, d, a, -b],
                     [-d, -c, b, a]])


def paley2_q5():
    q = 5
    chi = lambda x: 0 if x % q == 0 else (1 if x % q in (1, 4) else -1)
    conf = np.zeros((q + 1, q + 1), np.int64)
    conf[0, 1:] = conf[1:, 0] = 1
    for i in range(q):
        for j in range(q):
            conf[1 + i, 1 + j] = chi(j - i)
    zero = np.array([[1, -1], [-1, -1]])
    one = np.array([[1, 1], [1, -1]])
    return np.block([[zero if e == 0 else e * one for e in row]
                     for row in conf])


H_M = {
    12: paley2_q5(),
    20: williamson(*(circulant_pm(5, o) for o in ([], [], [1], [2]))),
    28: williamson(*(circulant_pm(7, o) for o in ([], [1], [2], [3]))),
}


@pytest.mark.parametrize("m", [12, 20, 28])
def test_hadamard_matrices_are_hadamard(m):
    # transform(e_j) is column j of H.
    h = np.array(mx.hadamard_transform(mx.eye(m), scale=1.0)).T
    np.testing.assert_array_equal(h, H_M[m])
    np.testing.assert_array_equal(h @ h.T, m * np.eye(m))


@pytest.mark.parametrize("m,k", [(1, 5), (12, 0), (12, 3), (20, 2), (28, 1),
                                 (28, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_hadamard_m_times_power_of_two(m, k, dtype):
    n = m * 2**k
    rng = np.random.default_rng(m + k)
    x = rng.normal(size=(6, n)).astype(dtype) if dtype != np.int32 else \
        rng.integers(-5, 5, size=(6, n)).astype(dtype)
    xs = mx.array(x)[::2]  # a strided input
    y = mx.hadamard_transform(xs, scale=0.34)
    h = np.kron(H_M[m], sylvester(2**k)) if m > 1 else sylvester(2**k)
    want = np.einsum("ij,bj->bi", h, x[::2].astype(np.float64)) * 0.34
    tol = 2e-4 if dtype != np.float16 else 5e-2 * max(k, 1)
    np.testing.assert_allclose(np.array(y).astype(np.float64), want,
                               atol=tol * np.sqrt(n))
    # Default scale: orthonormal.
    y1 = np.array(mx.hadamard_transform(mx.array(x.astype(np.float32))))
    np.testing.assert_allclose(np.linalg.norm(y1, axis=-1),
                               np.linalg.norm(x.astype(np.float32), axis=-1),
                               rtol=1e-4)


@pytest.mark.parametrize("m", [20, 28])
def test_hadamard_vjp_is_the_transpose(m):
    # H_20 and H_28 are not symmetric: the vjp applies H^T.
    n = m * 4
    h = np.kron(H_M[m], sylvester(4)) / np.sqrt(n)
    rng = np.random.default_rng(0)
    x = mx.array(rng.normal(size=n).astype(np.float32))
    c = rng.normal(size=n).astype(np.float32)
    _, (g,) = mx.vjp(mx.hadamard_transform, [x], [mx.array(c)])
    np.testing.assert_allclose(np.array(g), h.T @ c, atol=1e-5)
    _, (t,) = mx.jvp(mx.hadamard_transform, [x], [mx.array(c)])
    np.testing.assert_allclose(np.array(t), h @ c, atol=1e-5)
    # Gradient of the gradient, and vmap over rows.
    xb = mx.array(rng.normal(size=(3, n)).astype(np.float32))
    np.testing.assert_allclose(
        np.array(mx.vmap(mx.hadamard_transform)(xb)),
        np.array(xb) @ h.T, atol=1e-5)


@pytest.mark.parametrize("n", [0, 3, 24 * 3, 36, 12 * 2**27])
def test_hadamard_unsupported_sizes_raise(n):
    with pytest.raises(ValueError, match=r"\[hadamard_transform\] The last "
                                         r"axis has size " + str(n)):
        mx.hadamard_transform(mx.zeros((1, n)) if n < 2**20 else
                              mx.zeros(n))


# --- arccosh's derivative: MLX's 1 / sqrt(x^2 - 1) ---


def test_arccosh_grad_matches_the_float32_formula():
    x = np.cosh(np.random.default_rng(3).random(500)).astype(np.float32)
    x[np.isclose(x, 1.0)] += 1e-3
    c = np.random.default_rng(4).random(500).astype(np.float32)
    _, (g,) = mx.vjp(mx.arccosh, [mx.array(x)], [mx.array(c)])
    np.testing.assert_allclose(np.array(g), c / np.sqrt(x**2 - 1),
                               rtol=1e-5, atol=1e-5)


# --- conv1d over inputs with more spatial axes (MLX's conv_general) ---


def test_conv1d_of_a_2d_input_is_conv2d_with_the_same_values():
    rng = np.random.default_rng(5)
    x = mx.array(rng.normal(size=(2, 7, 6, 4)).astype(np.float32))
    w = mx.array(rng.normal(size=(6, 3, 3, 2)).astype(np.float32))
    got = mx.conv1d(x, w, stride=2, padding=1, dilation=1, groups=2)
    want = mx.conv2d(x, w, stride=(2, 2), padding=(1, 1), groups=2)
    assert got.shape == want.shape == (2, 4, 3, 6)
    np.testing.assert_allclose(np.array(got), np.array(want), atol=1e-5)
    # The gradients follow.
    gx = mx.grad(lambda a: mx.conv1d(a, w, groups=2).sum())(x)
    gx2 = mx.grad(lambda a: mx.conv2d(a, w, groups=2).sum())(x)
    np.testing.assert_allclose(np.array(gx), np.array(gx2), atol=1e-5)
    with pytest.raises(ValueError, match=r"\[conv1d\]"):
        mx.conv1d(mx.zeros((5, 2)), mx.zeros((1, 1, 2)))


# --- solve: float32 systems solved to float32 precision ---


def test_float32_solve_is_accurate_on_an_ill_conditioned_matrix():
    rng = np.random.default_rng(6)
    n = 300
    a = rng.random((n, n)).astype(np.float32)
    b = rng.random((n, 2)).astype(np.float32)
    x64 = np.linalg.solve(a.astype(np.float64), b.astype(np.float64))
    got = np.array(mx.linalg.solve(mx.array(a), mx.array(b), stream=mx.cpu))
    assert got.dtype == np.float32
    # Rounding the float64 solution to float32 is all the error left.
    np.testing.assert_allclose(got, x64, rtol=1e-5,
                               atol=1e-6 * np.abs(x64).max())
