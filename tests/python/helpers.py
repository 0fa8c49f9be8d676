"""Shared test helpers: NumPy references for Fluxion arrays."""

import numpy as np
import pytest

import fluxion.core as mx

# NumPy dtype of each Fluxion dtype (bfloat16 compares through float32).
NP_DTYPES = {
    mx.bool_: np.bool_,
    mx.uint8: np.uint8,
    mx.uint16: np.uint16,
    mx.uint32: np.uint32,
    mx.uint64: np.uint64,
    mx.int8: np.int8,
    mx.int16: np.int16,
    mx.int32: np.int32,
    mx.int64: np.int64,
    mx.float16: np.float16,
    mx.float32: np.float32,
    mx.float64: np.float64,
    mx.bfloat16: np.float32,
    mx.complex64: np.complex64,
}

# Relative tolerance per dtype for math results.
TOL = {
    mx.float16: 2e-3,
    mx.bfloat16: 1.6e-2,
    mx.float32: 2e-6,
    mx.float64: 1e-12,
    mx.complex64: 2e-6,
}


def to_np(x):
    """The values of a Fluxion array as NumPy (bfloat16 as float32)."""
    if x.dtype == mx.bfloat16:
        x = x.astype(mx.float32)
    return np.array(x)


def assert_close(x, expected, dtype=None, rtol=None, atol=None):
    """Compare a Fluxion array with a NumPy reference (shape and values)."""
    got = to_np(x)
    expected = np.asarray(expected)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    t = dtype if dtype is not None else x.dtype
    if rtol is None:
        rtol = TOL.get(t, 0)
    if atol is None:
        atol = rtol
    if got.dtype == np.bool_ or np.issubdtype(got.dtype, np.integer):
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


def rand(shape, dtype, low=-2.0, high=2.0, seed=0):
    """Random NumPy values of a Fluxion dtype's NumPy counterpart."""
    rng = np.random.default_rng(seed)
    npt = NP_DTYPES[dtype]
    if dtype == mx.bool_:
        return rng.random(shape) > 0.5
    if np.issubdtype(npt, np.integer):
        lo = max(int(low), np.iinfo(npt).min)
        hi = min(int(high), np.iinfo(npt).max)
        return rng.integers(lo, hi + 1, size=shape).astype(npt)
    vals = rng.uniform(low, high, size=shape)
    if dtype == mx.complex64:
        vals = vals + 1j * rng.uniform(low, high, size=shape)
    if dtype == mx.bfloat16:
        # Values exactly representable in bfloat16.
        return np.array(mx.array(vals.astype(np.float32)).astype(mx.bfloat16)
                        .astype(mx.float32))
    return vals.astype(npt)


def from_np(vals, dtype):
    # With the dtype given: float64 NumPy data would otherwise become float32
    # first (MLX's conversion) and lose precision.
    vals = np.asarray(vals)
    if vals.dtype == np.float64:
        return mx.array(vals, dtype=mx.float64).astype(dtype)
    return mx.array(vals).astype(dtype)


def keep64(x, dtype=None):
    """mx.array, keeping float64 NumPy arrays in float64 (mx.array alone
    makes them float32, as MLX does)."""
    if dtype is None and isinstance(x, np.ndarray) and x.dtype == np.float64:
        dtype = mx.float64
    return mx.array(x) if dtype is None else mx.array(x, dtype)


# The GPU test files (test_cuda*.py): skipped, with the reason, where no GPU
# is visible.
requires_gpu = pytest.mark.skipif(
    not mx.is_available(mx.gpu),
    reason="no GPU is visible" if mx._gpu_backend_built()
    else "Fluxion was built without a GPU backend")


def host(x):
    """x as a NumPy array (the half types, which NumPy compares badly or
    lacks, as float32)."""
    if x.dtype in (mx.bfloat16, mx.float16):
        x = mx.astype(x, mx.float32, stream=mx.cpu)
    return np.array(x)
