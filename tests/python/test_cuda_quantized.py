"""quantized_matmul on the GPU (skipped, with the reason, where no GPU is
visible): the decoding kernel (few rows of x) and the dequantize-and-gemm
path against the CPU, for every affine width, group size and floating
mode, batched and broadcast weights, and the composites built on it
(gather_qmm, nn.QuantizedLinear).
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import fluxion.core as mx
import fluxion.nn as nn

from helpers import host, requires_gpu

pytestmark = requires_gpu

G = mx.gpu
C = mx.cpu


def draw(shape, seed, dt=mx.float32):
    return mx.array(np.random.default_rng(seed).standard_normal(shape)
                    .astype(np.float32)).astype(dt)


def qmm_both(x, wq, *rest, **kw):
    g = mx.quantized_matmul(x, wq, *rest, stream=G, **kw)
    c = mx.quantized_matmul(x, wq, *rest, stream=C, **kw)
    return host(g), host(c)


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 8])
@pytest.mark.parametrize("gs", [32, 64, 128])
@pytest.mark.parametrize("rows", [1, 3, 8, 9, 40])
def test_affine_every_width(bits, gs, rows):
    w = draw((96, 256), 1)
    wq, s, b = mx.quantize(w, group_size=gs, bits=bits, stream=C)
    x = draw((rows, 256), 2)
    g, c = qmm_both(x, wq, s, b, transpose=True, group_size=gs, bits=bits)
    np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-4)
    x2 = draw((rows, 96), 3)
    g, c = qmm_both(x2, wq, s, b, transpose=False, group_size=gs, bits=bits)
    np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["mxfp4", "mxfp8", "nvfp4"])
@pytest.mark.parametrize("rows", [1, 5, 33])
def test_floating_modes(mode, rows):
    w = draw((64, 128), 4)
    q = mx.quantize(w, mode=mode, stream=C)
    wq, s = q[0], q[1]
    x = draw((rows, 128), 5)
    g, c = qmm_both(x, wq, s, None, transpose=True, mode=mode)
    np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dt,tol", [(mx.bfloat16, 3e-2), (mx.float16, 3e-3),
                                    (mx.float64, 1e-10)])
@pytest.mark.parametrize("rows", [1, 64])
def test_dtypes(dt, tol, rows):
    w = draw((128, 512), 6, dt)
    wq, s, b = mx.quantize(w, group_size=64, bits=4, stream=C)
    x = draw((rows, 512), 7, dt)
    g, c = qmm_both(x, wq, s, b, transpose=True, group_size=64, bits=4)
    np.testing.assert_allclose(g, c, rtol=tol, atol=tol * 4)


def test_batched_and_broadcast_weights():
    w = draw((3, 1, 32, 128), 8)
    wq, s, b = mx.quantize(w, group_size=64, bits=4, stream=C)
    x = draw((2, 5, 128), 9)  # broadcasts against (3, 1) to (3, 2)
    g, c = qmm_both(x, wq, s, b, transpose=True, group_size=64, bits=4)
    assert g.shape == (3, 2, 5, 32)
    np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-4)


def test_decode_long_rows_and_vector_input():
    w = draw((4096, 1024), 10)
    wq, s, b = mx.quantize(w, group_size=64, bits=4, stream=C)
    x = draw((1024,), 11)
    g, c = qmm_both(x, wq, s, b, transpose=True, group_size=64, bits=4)
    assert g.shape == (4096,)
    np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-3)


def test_gather_qmm_and_quantized_linear():
    w = draw((4, 32, 64), 12)
    wq, s, b = mx.quantize(w, group_size=32, bits=4, stream=C)
    x = draw((6, 1, 64), 13)
    idx = mx.array([0, 3, 1, 1, 2, 0])
    out = {}
    for dev in (G, C):
        out[dev] = host(mx.gather_qmm(x, wq, s, b, rhs_indices=idx,
                                      transpose=True, group_size=32, bits=4,
                                      stream=dev))
    np.testing.assert_allclose(out[G], out[C], rtol=1e-4, atol=1e-4)
    layer = nn.QuantizedLinear(64, 48, bias=True, group_size=32, bits=4)
    xs = draw((3, 7, 64), 14)
    with mx.stream(G):
        yg = host(layer(xs))
    with mx.stream(C):
        yc = host(layer(xs))
    np.testing.assert_allclose(yg, yc, rtol=1e-4, atol=1e-4)


def test_gradient_with_respect_to_x():
    w = draw((32, 64), 15)
    wq, s, b = mx.quantize(w, group_size=32, bits=4, stream=C)
    x = draw((5, 64), 16)

    def f(x):
        return mx.sum(mx.quantized_matmul(x, wq, s, b, group_size=32, bits=4)
                      ** 2)

    grads = {}
    for dev in (G, C):
        with mx.stream(dev):
            grads[dev] = host(mx.grad(f)(x))
    np.testing.assert_allclose(grads[G], grads[C], rtol=1e-4, atol=1e-4)


# The decoding kernel's fast path (quantized_qmv.cu): word-aligned layouts
# (affine 2/4/8 bits, mxfp4, nvfp4, mxfp8) whose rows of w are whole
# 16-byte units, 1 to 8 rows of x. Tolerances relative to the output's
# largest magnitude: the sums run in another order than the CPU's.
FAST_TOL = {mx.float32: 2e-5, mx.float16: 2e-3, mx.bfloat16: 1e-2}


def close_to_cpu(g, c, dt):
    tol = FAST_TOL[dt]
    np.testing.assert_allclose(g, c, rtol=tol,
                               atol=tol * max(1.0, float(np.abs(c).max())))


@pytest.mark.parametrize("dt", [mx.bfloat16, mx.float16, mx.float32])
@pytest.mark.parametrize("bits,gs", [(2, 32), (2, 128), (4, 32), (4, 64),
                                     (4, 128), (8, 32), (8, 64)])
def test_fast_affine_widths_and_groups(dt, bits, gs):
    # N = 77: not a multiple of the 8 columns of a block.
    w = draw((77, 1024), 30, dt)
    wq, s, b = mx.quantize(w, group_size=gs, bits=bits, stream=C)
    x = draw((1, 1024), 31, dt)
    g, c = qmm_both(x, wq, s, b, transpose=True, group_size=gs, bits=bits)
    close_to_cpu(g, c, dt)


@pytest.mark.parametrize("dt", [mx.bfloat16, mx.float32])
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 6, 7, 8])
def test_fast_rows_of_x(dt, rows):
    w = draw((45, 4096), 32, dt)
    wq, s, b = mx.quantize(w, group_size=64, bits=4, stream=C)
    x = draw((rows, 4096), 33, dt)
    g, c = qmm_both(x, wq, s, b, transpose=True, group_size=64, bits=4)
    close_to_cpu(g, c, dt)


@pytest.mark.parametrize("dt", [mx.bfloat16, mx.float16, mx.float32])
@pytest.mark.parametrize("mode", ["mxfp4", "nvfp4", "mxfp8"])
@pytest.mark.parametrize("rows", [1, 3, 8])
def test_fast_floating_modes(dt, mode, rows):
    w = draw((131, 2048), 34, dt)
    q = mx.quantize(w, mode=mode, stream=C)
    x = draw((rows, 2048), 35, dt)
    g, c = qmm_both(x, q[0], q[1], None, transpose=True, mode=mode)
    close_to_cpu(g, c, dt)


@pytest.mark.parametrize("dt", [mx.bfloat16, mx.float32])
def test_fast_nvfp4_with_global_scale(dt):
    w = draw((50, 512), 36, dt)
    gscale = mx.max(mx.abs(w.astype(mx.float32)), stream=C)
    wq, s = mx.quantize(w, mode="nvfp4", global_scale=gscale, stream=C)
    x = draw((2, 512), 37, dt)
    g = host(mx.quantized_matmul(x, wq, s, None, transpose=True,
                                 mode="nvfp4", global_scale=gscale,
                                 stream=G))
    c = host(mx.quantized_matmul(x, wq, s, None, transpose=True,
                                 mode="nvfp4", global_scale=gscale,
                                 stream=C))
    close_to_cpu(g, c, dt)


@pytest.mark.parametrize("rows,K", [(8, 8192), (1, 32768), (3, 12288)])
def test_fast_x_staged_in_tiles(rows, K):
    # rows x K past the kernel's shared-memory budget: x staged in tiles.
    w = draw((40, K), 38, mx.bfloat16)
    wq, s, b = mx.quantize(w, group_size=128, bits=4, stream=C)
    x = draw((rows, K), 39, mx.bfloat16)
    g, c = qmm_both(x, wq, s, b, transpose=True, group_size=128, bits=4)
    close_to_cpu(g, c, mx.bfloat16)


@pytest.mark.parametrize("bits,gs,mode,K", [
    (4, 32, "affine", 32),    # one 16-byte unit per row, 32 columns a warp
    (4, 32, "affine", 96),    # odd number of groups and units
    (8, 32, "affine", 160),   # 5 groups
    (2, 32, "affine", 96),    # 24-byte rows: the generic kernel
    (3, 32, "affine", 128),   # straddling codes: the generic kernel
    (4, 16, "nvfp4", 48),     # 24-byte rows: the generic kernel
    (8, 32, "mxfp8", 96),
])
def test_fast_and_fallback_row_lengths(bits, gs, mode, K):
    w = draw((37, K), 40)
    if mode == "affine":
        wq, s, b = mx.quantize(w, group_size=gs, bits=bits, stream=C)
        kw = dict(group_size=gs, bits=bits)
    else:
        wq, s = mx.quantize(w, mode=mode, stream=C)
        b = None
        kw = dict(mode=mode)
    for rows in (1, 6):
        x = draw((rows, K), 41 + rows)
        g, c = qmm_both(x, wq, s, b, transpose=True, **kw)
        close_to_cpu(g, c, mx.float32)


def test_fast_path_unaligned_weight_falls_back():
    # A row-contiguous view of w starting one word into its buffer: the
    # 16-byte loads do not apply, the generic kernel runs.
    w = draw((33, 256), 42)
    wq, s, b = mx.quantize(w, group_size=64, bits=4, stream=C)
    flat = mx.concatenate([mx.zeros((1,), dtype=mx.uint32),
                           mx.reshape(wq, (-1,))], stream=C)
    shifted = mx.reshape(flat[1:], wq.shape)
    x = draw((2, 256), 43)
    g, c = qmm_both(x, shifted, s, b, transpose=True, group_size=64, bits=4)
    close_to_cpu(g, c, mx.float32)
    g0, _ = qmm_both(x, wq, s, b, transpose=True, group_size=64, bits=4)
    close_to_cpu(g, g0, mx.float32)


def nan_column_like_cpu(g, c, col):
    # Column `col` is NaN on both devices, no other column is, and the rest
    # matches the CPU.
    assert np.isnan(g[0, col]) and np.isnan(c[0, col])
    np.testing.assert_array_equal(np.isnan(g), np.isnan(c))
    close_to_cpu(np.nan_to_num(g), np.nan_to_num(c), mx.float32)


def test_fast_path_nan_and_inf_propagate():
    # An mxfp8 NaN code poisons its output column (as the CPU's value
    # table does); an infinite x makes every column non-finite (the CPU's
    # adds 0 * sum(x) for the floating modes' zero bias, so its columns are
    # nan where the GPU's may be +-inf).
    w = draw((16, 64), 44)
    wq, s = mx.quantize(w, mode="mxfp8", stream=C)
    raw = np.array(wq)
    raw[3, 0] = (raw[3, 0] & ~np.uint32(0xFF)) | np.uint32(0x7F)
    wq_nan = mx.array(raw)
    x = draw((1, 64), 45)
    g, c = qmm_both(x, wq_nan, s, None, transpose=True, mode="mxfp8")
    nan_column_like_cpu(g, c, 3)
    xi = np.array(x)
    xi[0, 5] = np.inf
    g, c = qmm_both(mx.array(xi), wq, s, None, transpose=True, mode="mxfp8")
    assert not np.isfinite(g).any() and not np.isfinite(c).any()


# One row of x with x in each lane's registers (qmv_lanes.cu): rows of w
# of 32 to 256 chunks per lane-chunk, spread over 1 to 8 warps, one or
# two chunks a lane, columns past a block's sets, several partial-sum
# windows, x not 16-byte aligned.
@pytest.mark.parametrize("dt", [mx.bfloat16, mx.float16, mx.float32])
@pytest.mark.parametrize("bits,gs,K,N", [
    (4, 64, 1024, 77),     # 32 chunks: one warp a column, 8 columns at once
    (4, 32, 3072, 301),    # 96 chunks: 3 warps' worth, 4 warps a column
    (4, 128, 8192, 40),    # 256 chunks: 8 warps a column
    (8, 64, 8192, 33),     # 512 chunks: two a lane
    (8, 32, 2048, 12000),  # 128 chunks: three windows of partial sums
])
def test_lanes_kernel_shapes(dt, bits, gs, K, N):
    w = draw((N, K), 50, dt)
    wq, s, b = mx.quantize(w, group_size=gs, bits=bits, stream=C)
    x = draw((1, K), 51, dt)
    g, c = qmm_both(x, wq, s, b, transpose=True, group_size=gs, bits=bits)
    close_to_cpu(g, c, dt)


@pytest.mark.parametrize("mode", ["mxfp4", "nvfp4", "mxfp8"])
def test_lanes_kernel_floating_modes_and_unaligned_x(mode):
    w = draw((90, 4096), 52, mx.bfloat16)
    q = mx.quantize(w, mode=mode, stream=C)
    # x one element into a buffer: not readable 16 bytes at a time.
    x = draw((4097,), 53, mx.bfloat16)[1:].reshape(1, 4096)
    g, c = qmm_both(x, q[0], q[1], None, transpose=True, mode=mode)
    close_to_cpu(g, c, mx.bfloat16)


def test_lanes_kernel_nan_code_poisons_its_column():
    w = draw((20, 1024), 54)
    wq, s = mx.quantize(w, mode="mxfp8", stream=C)
    raw = np.array(wq)
    raw[7, 100] = (raw[7, 100] & ~np.uint32(0xFF00)) | np.uint32(0xFF00)
    x = draw((1, 1024), 55)
    g, c = qmm_both(x, mx.array(raw), s, None, transpose=True, mode="mxfp8")
    nan_column_like_cpu(g, c, 7)


def test_lanes_and_staged_kernels_agree(tmp_path):
    # The staged kernel for the same row: FLUXION_QMV_STAGED is read once
    # per process, so each kernel runs in a child process.
    code = (
        "import sys, numpy as np, fluxion.core as mx\n"
        "rng = np.random.default_rng(56)\n"
        "w = mx.array(rng.standard_normal((300, 4096)).astype(np.float32))\n"
        "wq, s, b = mx.quantize(w, group_size=64, bits=4, stream=mx.cpu)\n"
        "x = mx.array(rng.standard_normal((1, 4096)).astype(np.float32))\n"
        "y = mx.quantized_matmul(x, wq, s, b, group_size=64, bits=4,"
        " stream=mx.gpu)\n"
        "np.save(sys.argv[1], np.array(y))\n")
    outs = []
    for staged in ("0", "1"):
        path = str(tmp_path / f"y{staged}.npy")
        env = dict(os.environ, FLUXION_QMV_STAGED=staged)
        subprocess.run([sys.executable, "-c", code, path], env=env,
                       check=True)
        outs.append(np.load(path))
    np.testing.assert_allclose(outs[0], outs[1], rtol=2e-5, atol=2e-4)
