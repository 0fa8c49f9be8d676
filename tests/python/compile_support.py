"""Shared pieces of the tests of compile's fused kernels
(test_compile_reduce.py, test_compile_multi.py)."""

import io
import re

import numpy as np
import pytest

import fluxion.core as mx


def kernels_ran_fixture(fallback_by_design):
    """An autouse fixture: every test but those named in
    `fallback_by_design` must run its fused nodes' generated kernels. The
    node-by-node fallback gives the same values, so only this count
    (mx._compiled_fallbacks) tells a kernel that failed to build or load."""

    @pytest.fixture(autouse=True)
    def kernels_ran(request):
        before = mx._compiled_fallbacks()
        yield
        if request.node.originalname not in fallback_by_design:
            assert mx._compiled_fallbacks() == before, "a fused node fell back"

    return kernels_ran


def node_names(*outs):
    """The primitive names in the dot graph behind `outs`."""
    buf = io.StringIO()
    mx.export_to_dot(buf, *outs)
    return re.findall(r'label="([A-Za-z]+)', buf.getvalue())


TOL = {mx.float32: 2e-5, mx.float64: 1e-12, mx.float16: 2e-3,
       mx.bfloat16: 2e-2}


def close(a, b, dtype=mx.float32, scale=1.0):
    assert a.dtype == b.dtype and a.shape == b.shape, (a, b)
    t = TOL[dtype] * scale
    np.testing.assert_allclose(np.array(a.astype(mx.float64)),
                               np.array(b.astype(mx.float64)), rtol=t,
                               atol=t, equal_nan=True)


def arr(shape, dtype=mx.float32, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape)
    return mx.array(x.astype(np.float32)).astype(dtype)
