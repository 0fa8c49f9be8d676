"""MLX's quantization formats, for the configurations Fluxion's core
``mx.quantize`` does not implement yet, composed from core ops.

The core implements MLX's affine mode for bits 2, 4, 8 and uses a fused
``quantized_matmul``; these functions delegate to it there. Elsewhere they
compute the same formats in Python:

- ``affine`` with bits 3, 5 or 6 (the core's formula: per group of
  ``group_size`` values a scale and a bias, the edge of larger magnitude
  exact);
- ``mxfp4``: E2M1 values, groups of 32, E8M0 (power-of-two) scales;
- ``mxfp8``: E4M3 values, groups of 32, E8M0 scales;
- ``nvfp4``: E2M1 values, groups of 16, E4M3 scales (without a global
  scale, so groups whose largest magnitude is below about 6e-3 underflow
  to zero).

Scales of the floating-point modes are uint8 and there are no biases. The
packed layout is MLX's: the codes of a row form a little-endian bit stream
stored as uint32 words (for 2, 4 and 8 bits that is the core's layout:
``32 / bits`` codes per word, the first in the lowest bits). The MX scales
are the smallest powers of two that bring each group's largest magnitude
into the element format's range; decoding follows the formats exactly, so
weights quantized by MLX decode identically. The matmul is the core's fused
``mx.quantized_matmul`` in every mode (it reads them all).
"""

import numpy as np

import fluxion.core as mx

__all__ = [
    "quantize",
    "dequantize",
    "quantized_matmul",
    "fake_quantize",
    "resolve",
    "is_core_supported",
]

# mode -> (default group size, allowed group sizes, default bits, allowed bits)
_MODES = {
    "affine": (64, (32, 64, 128), 4, (2, 3, 4, 5, 6, 8)),
    "mxfp4": (32, (32,), 4, (4,)),
    "mxfp8": (32, (32,), 8, (8,)),
    "nvfp4": (16, (16,), 4, (4,)),
}

# E2M1 magnitudes by code (the sign is bit 3).
_E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float32)
_E2M1_TABLE = np.concatenate([_E2M1, -_E2M1]).astype(np.float32)
_E4M3_MAX = 448.0


def resolve(mode, group_size, bits):
    """Fill in MLX's defaults for ``mode`` and validate the parameters.

    Args:
        mode (str, optional): The quantization mode (``"affine"``,
            ``"mxfp4"``, ``"nvfp4"``, ``"mxfp8"``).
        group_size (int, optional): Elements per quantization group; the
            mode's default when omitted.
        bits (int, optional): Bits per element; the mode's default when
            omitted.
    """
    if mode not in _MODES:
        raise ValueError(
            f"[quantize] Unknown quantization mode {mode!r}; expected one of "
            f"{list(_MODES)}"
        )
    g0, groups, b0, allowed = _MODES[mode]
    group_size = g0 if group_size is None else group_size
    bits = b0 if bits is None else bits
    if group_size not in groups:
        raise ValueError(
            f"[quantize] Mode {mode!r} supports group sizes {list(groups)}, "
            f"got {group_size}"
        )
    if bits not in allowed:
        raise ValueError(
            f"[quantize] Mode {mode!r} supports bits {list(allowed)}, got "
            f"{bits}"
        )
    return group_size, bits


def is_core_supported(mode, group_size, bits):
    """Whether ``fluxion.core`` quantizes this format natively.

    Args:
        mode (str): The quantization mode.
        group_size (int): Elements per group.
        bits (int): Bits per element.

    Returns:
        bool: ``True`` for the affine mode with 2, 4 or 8 bits and groups
        of 32, 64 or 128 (other formats are emulated in Python).
    """
    return (
        mode == "affine" and bits in (2, 4, 8) and group_size in (32, 64, 128)
    )


# -- bit streams --------------------------------------------------------------


def _pack(codes, bits):
    """Pack uint32 codes (< 2**bits) along the last axis into a
    little-endian bit stream of uint32 words."""
    K = codes.shape[-1]
    if (K * bits) % 32 != 0:
        raise ValueError(
            f"[quantize] {K} values of {bits} bits do not fill whole 32-bit "
            "words"
        )
    if 32 % bits == 0:
        el = 32 // bits
        c = codes.reshape(*codes.shape[:-1], K // el, el)
        shifts = mx.arange(0, 32, bits, dtype=mx.uint32)
        return mx.sum(mx.left_shift(c, shifts), axis=-1).astype(mx.uint32)
    # Expand to single bits, regroup by 32, and sum the weighted bits.
    bit_pos = mx.arange(bits, dtype=mx.uint32)
    b = mx.bitwise_and(mx.right_shift(codes[..., None], bit_pos), 1)
    b = b.reshape(*codes.shape[:-1], K * bits // 32, 32)
    return mx.sum(
        mx.left_shift(b, mx.arange(32, dtype=mx.uint32)), axis=-1
    ).astype(mx.uint32)


def _unpack(words, bits, K):
    """The K codes of ``bits`` bits stored in the bit stream ``words``."""
    mask = (1 << bits) - 1
    if 32 % bits == 0:
        shifts = mx.arange(0, 32, bits, dtype=mx.uint32)
        c = mx.bitwise_and(mx.right_shift(words[..., None], shifts), mask)
        return c.reshape(*words.shape[:-1], K)
    # A code may straddle two words: read both as one 64-bit value.
    offsets = np.arange(K) * bits
    lo = mx.array((offsets // 32).astype(np.int32))
    shift = mx.array((offsets % 32).astype(np.uint64))
    w = words.astype(mx.uint64)
    w = mx.concatenate([w, mx.zeros((*w.shape[:-1], 1), mx.uint64)], axis=-1)
    pair = mx.bitwise_or(
        mx.take(w, lo, axis=-1), mx.left_shift(mx.take(w, lo + 1, axis=-1), 32)
    )
    return mx.bitwise_and(mx.right_shift(pair, shift), mask).astype(mx.uint32)


# -- element formats ----------------------------------------------------------


def _encode_e2m1(v):
    """Nearest E2M1 code (4 bits) of float32 values, saturating at 6."""
    a = mx.abs(v)
    idx = mx.zeros(v.shape, mx.uint32)
    for mid in (_E2M1[1:] + _E2M1[:-1]) / 2:
        idx = idx + (a > float(mid)).astype(mx.uint32)
    sign = (v < 0).astype(mx.uint32) * 8
    return idx + sign


def _decode_e2m1(codes):
    return mx.take(mx.array(_E2M1_TABLE), codes.astype(mx.int32))


def _encode_e4m3(v):
    """Nearest E4M3 (fn variant: bias 7, max 448, no infinities) code of
    float32 values, saturating."""
    a = mx.minimum(mx.abs(v), _E4M3_MAX)
    e = mx.floor(mx.log2(mx.maximum(a, 2.0**-20)))
    e = mx.clip(e, -6, 8)
    # Subnormals (e == -6 and a < 2^-6) share the step 2^-9 with the
    # lowest binade, so one rounding rule covers both.
    step = mx.power(2.0, e - 3)
    q = mx.round(a / step)  # 8..16 (or 0..8 for subnormals)
    normal = a >= 2.0**-6
    mant = mx.where(normal, q - 8, q)  # q == 16 carries into the exponent
    exp_field = mx.where(normal, e + 7, 0)
    code = exp_field * 8 + mant
    code = mx.minimum(code, 0x7E)  # 0x7F is NaN: saturate at 448
    sign = (v < 0).astype(mx.float32) * 128
    return (code + sign).astype(mx.uint32)


def _decode_e4m3(codes):
    c = codes.astype(mx.int32)
    sign = mx.where(mx.bitwise_and(c, 0x80) != 0, -1.0, 1.0)
    e = mx.bitwise_and(mx.right_shift(c, 3), 0xF)
    m = mx.bitwise_and(c, 7).astype(mx.float32)
    sub = m * 2.0**-9
    norm = (1 + m / 8) * mx.power(2.0, e.astype(mx.float32) - 7)
    return sign * mx.where(e == 0, sub, norm)


# -- quantize / dequantize ----------------------------------------------------


def _groups(w, group_size):
    if w.ndim < 2:
        raise ValueError(
            "[quantize] The matrix to be quantized must have at least 2 "
            "dimensions "
            f"but it has shape {tuple(w.shape)}."
        )
    K = w.shape[-1]
    if K % group_size != 0:
        raise ValueError(
            f"[quantize] The last dimension ({K}) must be divisible by the "
            "group "
            f"size {group_size}."
        )
    return w.reshape(*w.shape[:-1], K // group_size, group_size)


def _affine(w, group_size, bits):
    ct = mx.float64 if w.dtype == mx.float64 else mx.float32
    g = _groups(w.astype(ct), group_size)
    n_bins = float((1 << bits) - 1)
    w_max = mx.max(g, axis=-1, keepdims=True)
    w_min = mx.min(g, axis=-1, keepdims=True)
    mask = mx.abs(w_min) > mx.abs(w_max)
    scale = mx.maximum((w_max - w_min) / n_bins, 1e-7)
    scale = mx.where(mask, scale, -scale)
    edge = mx.where(mask, w_min, w_max)
    q0 = mx.round(edge / scale)
    nonzero = q0 != 0
    scale = mx.where(nonzero, edge / mx.where(nonzero, q0, scale), scale)
    bias = mx.where(nonzero, edge, 0.0)
    q = mx.clip(mx.round((g - bias) / scale), 0, n_bins).astype(mx.uint32)
    q = q.reshape(w.shape)
    return (
        _pack(q, bits),
        mx.squeeze(scale, -1).astype(w.dtype),
        mx.squeeze(bias, -1).astype(w.dtype),
    )


def _fp(w, group_size, mode):
    g = _groups(w.astype(mx.float32), group_size)
    amax = mx.max(mx.abs(g), axis=-1, keepdims=True)
    if mode == "nvfp4":
        # A float8 (E4M3) scale per 16 values: amax maps to E2M1's 6.
        s_code = _encode_e4m3(amax / 6.0)
        scale = _decode_e4m3(s_code)
        codes = _encode_e2m1(g / mx.where(scale > 0, scale, 1.0))
        bits = 4
    else:
        # The smallest power of two that maps amax into the element range
        # (rounding the exponent up rather than the OCP rule's floor, which
        # can saturate the largest values of a group by up to 25%).
        elem_max = 6.0 if mode == "mxfp4" else _E4M3_MAX
        shared = mx.ceil(mx.log2(mx.maximum(amax, 2.0**-120) / elem_max))
        # -126, not E8M0's -127: 2^-127 is a float32 subnormal, which a
        # flush-to-zero kernel would turn into a 0 / 0 below.
        shared = mx.clip(shared, -126, 127)
        s_code = (shared + 127).astype(mx.uint32)
        scale = mx.power(2.0, shared)
        v = g / scale
        if mode == "mxfp4":
            codes, bits = _encode_e2m1(v), 4
        else:
            codes, bits = _encode_e4m3(v), 8
    codes = codes.reshape(w.shape)
    return _pack(codes, bits), mx.squeeze(s_code, -1).astype(mx.uint8)


def quantize(w, group_size=None, bits=None, mode="affine"):
    """MLX's ``mx.quantize``: ``(w_q, scales, biases)`` for the affine mode,
    ``(w_q, scales)`` for the floating-point modes.

    Args:
        w (array): The weight matrix.
        group_size (int, optional): Elements per quantization group; the
            mode's default when omitted. Default ``None``.
        bits (int, optional): Bits per element; the mode's default when
            omitted. Default ``None``.
        mode (str, optional): The quantization mode (``"affine"``,
            ``"mxfp4"``, ``"nvfp4"``, ``"mxfp8"``). Default ``'affine'``.
    """
    group_size, bits = resolve(mode, group_size, bits)
    if is_core_supported(mode, group_size, bits):
        return mx.quantize(w, group_size, bits)
    if not mx.issubdtype(w.dtype, mx.floating):
        raise ValueError(
            "[quantize] Only real floating types can be quantized, got "
            f"{w.dtype}"
        )
    if mode == "affine":
        return _affine(w, group_size, bits)
    return _fp(w, group_size, mode)


def dequantize(
    w,
    scales,
    biases=None,
    group_size=None,
    bits=None,
    mode="affine",
    dtype=None,
):
    """MLX's ``mx.dequantize``: the dense matrix of a quantized one, in
    ``dtype``; by default the scales' dtype (affine) or bfloat16 (the
    floating modes), as MLX.

    Args:
        w (array): The weight matrix.
        scales (array): The group scales.
        biases (array, optional): The group biases (affine mode). Default
            ``None``.
        group_size (int, optional): Elements per quantization group; the
            mode's default when omitted. Default ``None``.
        bits (int, optional): Bits per element; the mode's default when
            omitted. Default ``None``.
        mode (str, optional): The quantization mode (``"affine"``,
            ``"mxfp4"``, ``"nvfp4"``, ``"mxfp8"``). Default ``'affine'``.
        dtype (Dtype, optional): Type of the result. Default ``None``.
    """
    group_size, bits = resolve(mode, group_size, bits)
    if is_core_supported(mode, group_size, bits):
        out = mx.dequantize(w, scales, biases, group_size, bits)
        return out if dtype is None else out.astype(dtype)
    K = w.shape[-1] * 32 // bits
    codes = _unpack(w, bits, K)
    gshape = (*w.shape[:-1], K // group_size, group_size)
    if mode == "affine":
        q = codes.reshape(gshape).astype(mx.float32)
        out = q * scales[..., None].astype(mx.float32) + biases[
            ..., None
        ].astype(mx.float32)
        return out.reshape(*w.shape[:-1], K).astype(dtype or scales.dtype)
    if mode == "nvfp4":
        scale = _decode_e4m3(scales)
    else:
        scale = mx.power(2.0, scales.astype(mx.float32) - 127)
    values = _decode_e2m1(codes) if bits == 4 else _decode_e4m3(codes)
    out = values.reshape(gshape) * scale[..., None]
    return out.reshape(*w.shape[:-1], K).astype(dtype or mx.bfloat16)


def quantized_matmul(
    x,
    w,
    scales,
    biases=None,
    transpose=True,
    group_size=None,
    bits=None,
    mode="affine",
):
    """``x @ dequantize(w).T`` (or ``x @ dequantize(w)``): the core's fused
    kernel where it supports the format, a dense product otherwise.

    Args:
        x (array): The input, channels-last.
        w (array): The weight matrix.
        scales (array): The group scales.
        biases (array, optional): The group biases (affine mode). Default
            ``None``.
        transpose (bool, optional): Multiply by the transposed matrix. Default
            ``True``.
        group_size (int, optional): Elements per quantization group; the
            mode's default when omitted. Default ``None``.
        bits (int, optional): Bits per element; the mode's default when
            omitted. Default ``None``.
        mode (str, optional): The quantization mode (``"affine"``,
            ``"mxfp4"``, ``"nvfp4"``, ``"mxfp8"``). Default ``'affine'``.
    """
    group_size, bits = resolve(mode, group_size, bits)
    # The core's fused kernel reads every mode and width of MLX's layout
    # (ops/quantized.h), and computes each output column alike whatever
    # the matrix's other columns: a row slice of the weight (a sharded
    # layer) gives exactly that slice of the output, which the dense BLAS
    # product of the emulation did not (issue 33 item 10: mxfp8
    # shard_linear).
    return mx.quantized_matmul(
        x,
        w,
        scales,
        biases,
        transpose=transpose,
        group_size=group_size,
        bits=bits,
        mode=mode,
    )


def fake_quantize(x, group_size, bits, mode):
    """``dequantize(quantize(x))`` along the last axis, with the identity as
    its gradient (straight-through), for quantized activations.

    Args:
        x (array): The input, channels-last.
        group_size (int, optional): Elements per quantization group; the
            mode's default when omitted.
        bits (int, optional): Bits per element; the mode's default when
            omitted.
        mode (str, optional): The quantization mode (``"affine"``,
            ``"mxfp4"``, ``"nvfp4"``, ``"mxfp8"``).
    """
    q = quantize(x, group_size, bits, mode)
    biases = q[2] if mode == "affine" else None
    dq = dequantize(q[0], q[1], biases, group_size, bits, mode, x.dtype)
    return x + mx.stop_gradient(dq - x)
