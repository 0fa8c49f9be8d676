"""Keywords and ops of issue 11, section 1: fft norm= / fftfreq, linalg.det
and slogdet, pad modes and shorthands, linspace(endpoint=), arange widening,
topk/partition with kth=0, roll with several shifts, safetensors F8_E4M3,
to_fp8 / from_fp8 and save_gguf / GGUF loading. Compared with NumPy."""

import os
import struct
import tempfile

import numpy as np
import pytest

import fluxion.core as mx

RNG = np.random.RandomState(0)


# --- fft ---

@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_fft_norm(norm):
    r = RNG.randn(8, 6).astype(np.float32)
    c = (r + 1j * RNG.randn(8, 6)).astype(np.complex64)
    cases = [
        (mx.fft.fft, np.fft.fft, c, dict(axis=1)),
        (mx.fft.ifft, np.fft.ifft, c, dict(axis=1)),
        (mx.fft.fft, np.fft.fft, c, dict(n=10, axis=0)),
        (mx.fft.rfft, np.fft.rfft, r, dict(axis=1)),
        (mx.fft.rfft, np.fft.rfft, r, dict(n=4)),
        (mx.fft.irfft, np.fft.irfft, np.fft.rfft(r, axis=1), dict(axis=1)),
        (mx.fft.irfft, np.fft.irfft, np.fft.rfft(r), dict(n=7)),
        (mx.fft.fft2, np.fft.fft2, c, dict(axes=(0, 1))),
        (mx.fft.ifftn, np.fft.ifftn, c, dict(axes=(0, 1))),
        (mx.fft.rfft2, np.fft.rfft2, r, dict(s=(4, 4))),
        (mx.fft.rfftn, np.fft.rfftn, r, {}),
        (mx.fft.irfft2, np.fft.irfft2, np.fft.rfft2(r), {}),
        (mx.fft.irfftn, np.fft.irfftn, np.fft.rfftn(r), dict(s=(8, 6))),
    ]
    for mxf, npf, x, kw in cases:
        got = mxf(mx.array(x.astype(np.complex64) if np.iscomplexobj(x)
                           else x), norm=norm, **kw)
        exp = npf(x, norm=norm, **kw)
        np.testing.assert_allclose(np.array(got), exp, rtol=1e-4, atol=1e-4)


def test_fft_norm_invalid():
    with pytest.raises(ValueError, match=r"\[fft\] Invalid norm 'invalid'"):
        mx.fft.fft(mx.array([1.0]), norm="invalid")
    with pytest.raises(ValueError, match=r"\[rfftn\] Invalid norm"):
        mx.fft.rfftn(mx.array([1.0]), norm="")


def test_fftfreq():
    for n, d in [(1, 1.0), (4, 0.5), (5, 0.25), (8, -0.5), (6, 1.0), (7, 3.0)]:
        out = mx.fft.fftfreq(n, d=d)
        assert out.dtype == mx.float32
        np.testing.assert_array_equal(np.array(out),
                                      np.fft.fftfreq(n, d=d).astype(np.float32))
        out = mx.fft.rfftfreq(n, d)
        np.testing.assert_array_equal(
            np.array(out), np.fft.rfftfreq(n, d=d).astype(np.float32))
    for bad in (0, -1):
        with pytest.raises(ValueError, match=r"\[fftfreq\] n must be "
                           r"positive; got " + str(bad)):
            mx.fft.fftfreq(bad)
        with pytest.raises(ValueError, match=r"\[rfftfreq\] n must be"):
            mx.fft.rfftfreq(bad)
    with pytest.raises(ValueError, match=r"\[fftfreq\] The sample spacing"):
        mx.fft.fftfreq(4, d=0.0)


def test_fftshift_axes_int():
    r = RNG.rand(4, 6).astype(np.float32)
    for axes in (0, 1, -1, [0], [0, 1], None):
        np.testing.assert_array_equal(
            np.array(mx.fft.fftshift(mx.array(r), axes=axes)),
            np.fft.fftshift(r, axes=axes))
        np.testing.assert_array_equal(
            np.array(mx.fft.ifftshift(mx.array(r), axes=axes)),
            np.fft.ifftshift(r, axes=axes))
    with pytest.raises(ValueError, match=r"\[fftshift\] Invalid axis 2"):
        mx.fft.fftshift(mx.array(r), axes=2)


# --- linalg ---

def test_det_and_slogdet():
    for shape in [(1, 1), (2, 2), (3, 3), (5, 5), (3, 4, 4), (2, 3, 3, 3)]:
        a = RNG.randn(*shape).astype(np.float32)
        np.testing.assert_allclose(np.array(mx.linalg.det(mx.array(a))),
                                   np.linalg.det(a), rtol=1e-4, atol=1e-5)
        s, l = mx.linalg.slogdet(mx.array(a))
        es, el = np.linalg.slogdet(a)
        np.testing.assert_allclose(np.array(s), es)
        np.testing.assert_allclose(np.array(l), el, rtol=1e-4, atol=1e-5)
    a64 = RNG.randn(4, 4)
    np.testing.assert_allclose(np.array(mx.linalg.det(mx.array(a64, mx.float64))),
                               np.linalg.det(a64), rtol=1e-12)
    assert mx.linalg.det(mx.array([[1, 2], [3, 4]])).dtype == mx.float32
    assert abs(mx.linalg.det(mx.array([[1, 2], [3, 4]])).item() + 2) < 1e-5


def test_det_singular_empty_and_large():
    singular = mx.array(np.ones((5, 5), np.float32))
    assert mx.linalg.det(singular).item() == 0
    s, l = mx.linalg.slogdet(singular)
    assert s.item() == 0 and l.item() == float("-inf")
    assert mx.linalg.det(mx.zeros((0, 0))).item() == 1.0
    s, l = mx.linalg.slogdet(mx.zeros((3, 0, 0)))
    assert s.tolist() == [1, 1, 1] and l.tolist() == [0, 0, 0]
    s, l = mx.linalg.slogdet(mx.array(0.1) * mx.eye(100))
    assert s.item() == 1 and abs(l.item() - 100 * np.log(0.1)) < 1e-3


def test_det_gradient():
    a = RNG.randn(3, 3).astype(np.float32)
    g = mx.grad(mx.linalg.det)(mx.array(a))
    # d det(A) / dA = det(A) A^-T
    np.testing.assert_allclose(np.array(g),
                               np.linalg.det(a) * np.linalg.inv(a).T,
                               rtol=1e-3, atol=1e-4)


def test_det_errors():
    with pytest.raises(ValueError, match=r"\[linalg::det\] .*square"):
        mx.linalg.det(mx.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"\[linalg::slogdet\] .*two dim"):
        mx.linalg.slogdet(mx.zeros((3,)))
    with pytest.raises(ValueError, match=r"\[linalg::det\] complex64"):
        mx.linalg.det(mx.eye(2).astype(mx.complex64))


# --- pad ---

@pytest.mark.parametrize("mode", ["reflect", "symmetric", "edge"])
def test_pad_modes(mode):
    cases = [((8,), [(2, 3)]), ((4,), [(10, 7)]), ((1,), [(3, 2)]),
             ((2,), [(5, 6)]), ((5, 6), [(2, 3), (1, 2)]),
             ((5, 6), [(9, 9), (11, 0)]), ((3, 4, 5), [(4, 4), (0, 0), (7, 3)])]
    for shape, pw in cases:
        a = RNG.randn(*shape).astype(np.float32)
        if mode == "reflect" and 1 in shape:
            exp = np.pad(a, pw, mode=mode)
        else:
            exp = np.pad(a, pw, mode=mode)
        got = mx.pad(mx.array(a), pw, mode=mode)
        np.testing.assert_array_equal(np.array(got), exp)


def test_pad_reflect_gradient_and_errors():
    f = lambda x: (mx.pad(x, [(2, 1)], mode="reflect") *
                   mx.arange(7.0)).sum()
    g = mx.grad(f)(mx.array([1.0, 2.0, 3.0, 4.0]))
    # out = [x2, x1, x0, x1, x2, x3, x2] with weights 0..6
    assert g.tolist() == [2.0, 1 + 3.0, 0 + 4 + 6.0, 5.0]
    for mode in ("reflect", "symmetric"):
        with pytest.raises(ValueError, match=r"\[pad\] Cannot pad the empty "
                           r"axis 0 in '" + mode + "' mode"):
            mx.pad(mx.array([]), 2, mode=mode)
        assert mx.pad(mx.zeros((0, 3)), [(0, 0), (2, 1)],
                      mode=mode).shape == (0, 6)
    with pytest.raises(ValueError, match=r"\[pad\] Invalid padding mode "
                       r"\(wrap\)"):
        mx.pad(mx.zeros(3), 1, mode="wrap")


def test_pad_width_shorthands():
    a = mx.zeros((1, 1, 1))
    assert mx.pad(a, 1).shape == (3, 3, 3)
    assert mx.pad(a, (1,)).shape == (3, 3, 3)
    assert mx.pad(a, [1]).shape == (3, 3, 3)
    assert mx.pad(a, (1, 2)).shape == (4, 4, 4)
    assert mx.pad(a, [(1, 2)]).shape == (4, 4, 4)
    assert mx.pad(a, ((1, 2),)).shape == (4, 4, 4)
    assert mx.pad(a, ((1, 2), (2, 1), (2, 2))).shape == (4, 4, 5)


# --- creation ---

def test_linspace_endpoint():
    for num in [0, 1, 2, 5, 50]:
        np.testing.assert_allclose(
            np.array(mx.linspace(0, 10, num, endpoint=False)),
            np.linspace(0, 10, num, endpoint=False), rtol=1e-6)
    np.testing.assert_allclose(np.array(mx.linspace(-2.7, -0.7, 7, False)),
                               np.linspace(-2.7, -0.7, 7, endpoint=False),
                               rtol=1e-6)
    d = mx.linspace(0, 10, 5, False, mx.int64)
    assert d.dtype == mx.int64 and d.tolist() == [0, 2, 4, 6, 8]
    assert mx.linspace(0, 1, 5, endpoint=True).tolist() == \
        mx.linspace(0, 1, 5).tolist()


def test_arange_start_none_and_widening():
    assert mx.arange(-3, None, -1).tolist() == [0, -1, -2]
    assert mx.arange(5, None).tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(TypeError):
        mx.arange(start=1, step=2)
    a = mx.arange(2**40, 2**40 + 3)
    assert a.dtype == mx.int64 and a.tolist() == [2**40, 2**40 + 1, 2**40 + 2]
    assert mx.arange(2**31 - 3, 2**31 - 1).dtype == mx.int32
    assert mx.arange(-(2**31) - 1, -(2**31) + 1).dtype == mx.int64
    assert mx.arange(stop=2, step=2**40).tolist() == [0]
    assert mx.arange(stop=2**40, step=-1).shape == (0,)
    assert mx.arange(0.5, 2**40, 2**39).dtype == mx.float32
    with pytest.raises(ValueError, match=r"\[arange\] .*more than"):
        mx.arange(0, 2**40)


def test_arange_integer_dtype_truncates_the_step():
    assert mx.arange(0, 3, 0.2, dtype=mx.int32).tolist() == [0] * 15
    assert mx.arange(-1, -4, -0.9, dtype=mx.int32).tolist() == [-1] * 4
    assert mx.arange(-1, -20, -1.2, dtype=mx.int32).tolist() == \
        list(range(-1, -17, -1))
    assert mx.arange(0.0, 5.0, 1.5, dtype=mx.float32).tolist() == \
        [0.0, 1.5, 3.0, 4.5]


# --- sort family and roll ---

def test_topk_partition_kth_zero():
    a = mx.array(RNG.rand(3, 4, 5).astype(np.float32))
    for axis in (0, 1, 2, -1):
        out = mx.topk(a, 0, axis=axis)
        expected = list(a.shape)
        expected[axis] = 0
        assert out.shape == tuple(expected)
    assert mx.topk(a, 0).shape == (3, 4, 0)
    for kth in (0, -2, 2):
        np.testing.assert_array_equal(
            np.take(np.array(mx.partition(a, kth, axis=1)), [kth], axis=1),
            np.take(np.partition(np.array(a), kth, axis=1), [kth], axis=1))
    with pytest.raises(ValueError, match=r"\[topk\] Received k = -1 .*\[0, 5\]"):
        mx.topk(a, -1)


def test_roll_several_shifts_one_axis():
    x = np.arange(10).reshape(2, 5)
    for s in [(1, 1), (-1, 2), (33, 33), (3,)]:
        for ax in [0, 1, (1, 0), (0, 1), (0, 0), (1, 1)]:
            try:
                exp = np.roll(x, s, ax)
            except ValueError:
                with pytest.raises(ValueError, match=r"\[roll\]"):
                    mx.roll(mx.array(x), s, ax)
                continue
            assert mx.roll(mx.array(x), s, ax).tolist() == exp.tolist()
    assert mx.roll(mx.array(x), (2, 2, 2)).tolist() == \
        np.roll(x, (2, 2, 2)).tolist()
    assert mx.roll(mx.array([]), [0], [0]).shape == (0,)
    with pytest.raises(ValueError, match=r"\[roll\] shift and axis"):
        mx.roll(mx.array(x), (1, 2, 3), (0, 1))


# --- fp8 and files ---

def test_to_from_fp8():
    vals = mx.array([448, 256, 192, 128, 96, 64, 48, 32, 24, 16, 12, 8, 6, 4,
                     3, 2, 0.015625, 2.0**-9, 0.0])
    codes = mx.to_fp8(vals)
    assert codes.dtype == mx.uint8
    assert mx.array_equal(mx.from_fp8(codes, mx.float32), vals)
    assert mx.array_equal(mx.from_fp8(mx.to_fp8(-vals), mx.float32), -vals)
    assert mx.from_fp8(codes).dtype == mx.bfloat16
    # Saturation, rounding to nearest even, NaN.
    assert mx.from_fp8(mx.to_fp8(mx.array([1000.0, -1e9])),
                       mx.float32).tolist() == [448.0, -448.0]
    assert mx.from_fp8(mx.to_fp8(mx.array([1.0625, 1.1875])),
                       mx.float32).tolist() == [1.0, 1.25]
    assert mx.to_fp8(mx.array([float("nan")])).item() == 0x7F
    # Every code decodes as the E4M3 table says and encodes back.
    all_codes = mx.arange(256).astype(mx.uint8)
    dec = mx.from_fp8(all_codes, mx.float32)
    finite = mx.logical_not(mx.isnan(dec))
    back = mx.to_fp8(dec)
    same = mx.logical_or(mx.equal(back, all_codes),
                         mx.logical_and(mx.equal(dec, 0), mx.equal(back, 0)))
    assert mx.all(mx.logical_or(same, mx.logical_not(finite))).item()
    with pytest.raises(ValueError, match=r"\[from_fp8\] Expected uint8"):
        mx.from_fp8(mx.array([1.0]))
    with pytest.raises(ValueError, match=r"\[from_fp8\] The output dtype"):
        mx.from_fp8(codes, mx.int32)


def test_safetensors_f8_e4m3():
    header = b'{"t":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}}'
    header += b" " * (-len(header) % 8)
    data = struct.pack("<Q", len(header)) + header + bytes([0, 0x7E, 0xFE,
                                                            0x38])
    with tempfile.NamedTemporaryFile(suffix=".safetensors") as f:
        f.write(data)
        f.flush()
        t = mx.load(f.name)["t"]
        assert t.dtype == mx.uint8
        assert mx.from_fp8(t, mx.float32).tolist() == [0.0, 448.0, -448.0,
                                                       1.0]


def test_save_load_gguf(tmp_path):
    arrays = {
        "f32": mx.array(RNG.randn(4, 6, 3).astype(np.float32)),
        "f16": mx.array(RNG.randn(23).astype(np.float16)),
        "bf16": mx.array([1.5, -2.0], mx.bfloat16),
        "i8": mx.ones((3, 2), mx.int8), "i16": mx.arange(5).astype(mx.int16),
        "i32": mx.arange(7), "i64": mx.array([2**40], mx.int64),
        "scalar": mx.array(3.0),
        "strided": mx.arange(12.0).reshape(3, 4).T,
    }
    path = str(tmp_path / "w")
    mx.save_gguf(path, arrays)
    out = mx.load(path + ".gguf")
    for k, v in arrays.items():
        expected = v.reshape(1) if v.ndim == 0 else v
        assert out[k].dtype == v.dtype and mx.array_equal(out[k], expected), k
    with pytest.raises(ValueError, match=r"\[save_gguf\] Array 'b' has dtype "
                       r"bool"):
        mx.save_gguf(path, {"b": mx.array([True])})
    assert not os.path.exists(str(tmp_path / "bad.gguf"))


def test_gguf_metadata(tmp_path):
    path = str(tmp_path / "m.gguf")
    arrays = {"w": mx.ones((2, 2))}
    meta = {"name": "model", "tags": ["a", "bc"], "n": mx.array(7, mx.uint32),
            "v": mx.array([1.5, 2.5]), "flag": mx.array(True),
            "big": mx.array([2**40], mx.int64)}
    mx.save_gguf(path, arrays, meta)
    out, m = mx.load(path, return_metadata=True)
    assert mx.array_equal(out["w"], arrays["w"])
    assert m["name"] == "model" and m["tags"] == ["a", "bc"]
    for k in ("n", "v", "flag", "big"):
        assert m[k].dtype == meta[k].dtype and mx.array_equal(m[k], meta[k])
    mx.save_gguf(path, arrays, {})
    assert mx.load(path, return_metadata=True)[1] == {}
    for t in (mx.float16, mx.bfloat16, mx.complex64):
        with pytest.raises(ValueError, match=r"\[save_gguf\] Metadata 'x'"):
            mx.save_gguf(path, arrays, {"x": mx.array(1, t)})
    with pytest.raises(ValueError, match=r"\[save_gguf\] Array metadata must"):
        mx.save_gguf(path, arrays, {"x": mx.ones((2, 2))})


def write_gguf(path, name, type_id, rows, cols, blocks, kv=b"", n_kv=0):
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 1, n_kv) + kv)
        f.write(struct.pack("<Q", len(name)) + name)
        f.write(struct.pack("<IQQIQ", 2, cols, rows, type_id, 0))
        f.write(b"\x00" * (-f.tell() % 32))
        f.write(blocks.tobytes())


@pytest.mark.parametrize("qtype", ["Q4_0", "Q4_1", "Q8_0"])
def test_gguf_quantized_tensors(tmp_path, qtype):
    rows, cols = 3, 64
    nb = rows * cols // 32
    d = RNG.uniform(0.1, 1, (nb, 1)).astype(np.float16)
    m = RNG.uniform(-1, 1, (nb, 1)).astype(np.float16)
    q4 = RNG.randint(0, 16, (nb, 32)).astype(np.uint8)
    q8 = RNG.randint(-128, 128, (nb, 32)).astype(np.int8)
    nib = (q4[:, :16] | (q4[:, 16:] << 4)).astype(np.uint8)
    d32, m32 = d.astype(np.float32), m.astype(np.float32)
    type_id, bits, blocks, expected = {
        "Q4_0": (2, 4, np.concatenate([d.view(np.uint8), nib], 1),
                 d32 * (q4.astype(np.float32) - 8)),
        "Q4_1": (3, 4, np.concatenate([d.view(np.uint8), m.view(np.uint8),
                                       nib], 1),
                 d32 * q4.astype(np.float32) + m32),
        "Q8_0": (8, 8, np.concatenate([d.view(np.uint8), q8.view(np.uint8)],
                                      1), d32 * q8.astype(np.float32)),
    }[qtype]
    path = str(tmp_path / "q.gguf")
    write_gguf(path, b"blk.weight", type_id, rows, cols, blocks)
    out = mx.load(path)
    assert set(out) == {"blk.weight", "blk.scales", "blk.biases"}
    assert out["blk.weight"].dtype == mx.uint32
    assert out["blk.scales"].shape == (rows, cols // 32)
    w = mx.dequantize(out["blk.weight"], out["blk.scales"], out["blk.biases"],
                      group_size=32, bits=bits)
    np.testing.assert_allclose(np.array(w.astype(mx.float32)),
                               expected.reshape(rows, cols), rtol=2e-3,
                               atol=2e-3)


def test_gguf_load_errors(tmp_path):
    path = str(tmp_path / "bad.gguf")
    with open(path, "wb") as f:
        f.write(b"NOPE" + b"\x00" * 20)
    with pytest.raises(ValueError, match=r"\[load\] Not a GGUF file"):
        mx.load(path)
    write_gguf(path, b"t", 12, 1, 256, np.zeros(144, np.uint8))
    with pytest.raises(ValueError, match=r"\[load\] .*GGML type Q4_K"):
        mx.load(path)
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 1, 0))
    with pytest.raises(ValueError, match=r"\[load\] Truncated"):
        mx.load(path)
