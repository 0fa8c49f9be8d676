"""The minimal examples of the failures the fuzzers and sanitizers found
(issue 17), one test each, so that none comes back. The fuzzers themselves
are test_fuzz_*.py."""

import math
import os

import numpy as np
import pytest

import fluxion.core as mx


# --- LAPACK kernels and non-finite input ---

@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_linalg_of_a_non_finite_matrix_is_nan(value):
    # Was: NaN -> RuntimeError "[linalg::svd] LAPACK rejected argument 5."
    # (LAPACKE's NaN check); inf -> pinv hung in gesdd.
    a = np.ones((3, 3), np.float32) + np.eye(3, dtype=np.float32)
    a[0, 1] = value
    x = mx.array(a)
    outs = [
        mx.linalg.inv(x), mx.linalg.solve(x, mx.ones((3, 2))),
        mx.linalg.solve_triangular(x, mx.ones((3,)), upper=True),
        mx.linalg.cholesky(x), *mx.linalg.qr(x), *mx.linalg.svd(x),
        mx.linalg.svd(x, compute_uv=False), mx.linalg.pinv(x),
        *mx.linalg.eigh(x), mx.linalg.eigvalsh(x), *mx.linalg.eig(x),
        mx.linalg.eigvals(x), mx.linalg.lu_factor(x)[0],
        mx.linalg.det(x), mx.linalg.tri_inv(x),
    ]
    mx.eval(outs)
    for o in outs:
        assert np.isnan(np.array(o)).all(), o
    # Pivots of a non-finite LU are the identity permutation.
    assert mx.linalg.lu_factor(x)[1].tolist() == [0, 1, 2]
    # Other matrices of the same batch are unaffected.
    b = mx.stack([x, mx.eye(3) * 2])
    inv = np.array(mx.linalg.inv(b))
    assert np.isnan(inv[0]).all()
    np.testing.assert_allclose(inv[1], np.eye(3) / 2)


def test_linalg_of_a_complex_non_finite_matrix_is_nan():
    a = mx.array([[1 + 1j, complex(math.inf, 0)], [0j, 1j]])
    s = mx.linalg.svd(a, compute_uv=False)
    w = mx.linalg.eigvals(a)
    assert np.isnan(np.array(s)).all() and np.isnan(np.array(w)).all()


# --- bindings: hand-converted arguments ---

def test_pad_and_tensordot_reject_bad_argument_types_with_type_error():
    # Was: RuntimeError "Unable to cast Python instance to C++ type".
    x = mx.ones((2, 2))
    with pytest.raises(TypeError, match=r"\[pad\] pad_width must be"):
        mx.pad(x, "abc")
    with pytest.raises(TypeError, match=r"\[pad\] pad_width must be"):
        mx.pad(x, [(1, 1), "ab"])
    with pytest.raises(OverflowError):
        mx.pad(x, 2**40)
    with pytest.raises(TypeError, match=r"\[tensordot\] axes must be"):
        mx.tensordot(x, x, axes=1.5)
    with pytest.raises(TypeError, match=r"\[tensordot\] axes must be"):
        mx.tensordot(x, x, axes=[0, "a"])
    with pytest.raises(OverflowError):
        mx.tensordot(x, x, axes=2**33)


def test_dlpack_rejects_bad_argument_types_with_type_error():
    # Was: RuntimeError "Unable to cast Python instance to C++ type" for
    # from_dlpack(x, device=True) (found by test_fuzz_api after the merge
    # of the MLX-compat DLPack work).
    x = mx.ones((2,))
    with pytest.raises(TypeError, match=r"\[from_dlpack\] device must be"):
        mx.from_dlpack(np.zeros(2), device=True)
    with pytest.raises(TypeError, match=r"\[__dlpack__\] dl_device must be"):
        x.__dlpack__(dl_device="cpu")
    with pytest.raises(TypeError, match=r"\[__dlpack__\] copy must be"):
        x.__dlpack__(copy="yes")
    with pytest.raises(TypeError, match=r"\[__dlpack__\] max_version must be"):
        x.__dlpack__(max_version=1)
    assert mx.from_dlpack(x, device=mx.cpu).tolist() == [1.0, 1.0]


# --- window functions and fftfreq: lazy, no host-side allocation ---

@pytest.mark.parametrize("fn", [mx.bartlett, mx.blackman, mx.hamming,
                                mx.hanning])
def test_windows_are_lazy_and_match_numpy(fn):
    # Was: a host std::vector of m floats built at call time, so a huge m
    # raised a bare MemoryError "std::bad_alloc" (or took gigabytes at
    # once) and the stream argument was ignored.
    big = fn(2**31 - 1)
    assert big.shape == (2**31 - 1,) and big.dtype == mx.float32
    del big
    ref = getattr(np, fn.__name__)
    for m in (0, 1, 2, 5, 12):
        np.testing.assert_allclose(np.array(fn(m)), ref(m).astype(np.float32),
                                   rtol=1e-6, atol=1e-7)
    s = mx.new_stream(mx.cpu)
    np.testing.assert_allclose(np.array(fn(7, stream=s)),
                               ref(7).astype(np.float32), atol=1e-7)


def test_fftfreq_is_lazy_and_matches_numpy():
    assert mx.fft.fftfreq(2**31 - 1).shape == (2**31 - 1,)
    assert mx.fft.rfftfreq(2**31 - 1).shape == (2**30,)
    for n in (1, 2, 5, 8):
        for d in (1.0, 0.3):
            np.testing.assert_allclose(np.array(mx.fft.fftfreq(n, d)),
                                       np.fft.fftfreq(n, d).astype(np.float32))
            np.testing.assert_allclose(np.array(mx.fft.rfftfreq(n, d)),
                                       np.fft.rfftfreq(n, d).astype(np.float32))


# --- sizes that overflow ---

def test_shape_whose_bytes_overflow_int64_raises():
    # Was: size * itemsize wrapped to 0, a 0-byte buffer was allocated and
    # the kernel wrote 2^65 bytes into it (segfault).
    # (OverflowError since std::overflow_error maps to it, as in MLX.)
    with pytest.raises(OverflowError, match=r"\[array\] .* overflow int64 bytes"):
        mx.ones((2**30, 2**30, 4), mx.int64)
    with pytest.raises(OverflowError, match=r"\[array\] .*\(the output of"):
        mx.broadcast_to(mx.array(1.0, mx.float64), (2**31 - 1, 2**31 - 1, 2))
    assert (mx.ones((2, 2), mx.int64) + 1).tolist() == [[2, 2], [2, 2]]


# --- hostile files ---

def npy(header, body=b"", version=1):
    import struct
    d = header.encode() + b"\n"
    if version == 1:
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d + body
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<I", len(d)) + \
        d + body


def test_npy_header_length_beyond_the_file_raises_before_allocating():
    # Was: a v2 header declaring 4 GiB allocated a 4 GiB string first.
    import io
    import struct
    data = b"\x93NUMPY\x02\x00" + struct.pack("<I", 2**32 - 1) + b"{"
    mx.reset_peak_memory()
    with pytest.raises(ValueError, match=r"\[load\] Invalid .npy header length"):
        mx.load(io.BytesIO(data), format="npy")
    assert mx.get_peak_memory() < 1 << 20


def test_npy_shape_beyond_the_file_raises_at_eval_without_allocating():
    # Was: the Load kernel allocated the whole shape (here 8 GiB) before
    # finding that the file holds 12 bytes.
    import io
    data = npy("{'descr': '<f4', 'fortran_order': False, 'shape': "
               "(2147483647,), }", b"\0" * 12)
    x = mx.load(io.BytesIO(data), format="npy")
    mx.reset_peak_memory()
    with pytest.raises(RuntimeError, match=r"\[load\] .* is truncated"):
        mx.eval(x)
    assert mx.get_peak_memory() < 1 << 20
    # Shapes whose product overflows are a [load] error, not "[array]".
    data = npy("{'descr': '<f8', 'fortran_order': False, 'shape': "
               "(2147483647, 2147483647, 2147483647), }")
    with pytest.raises(ValueError, match=r"\[load\] The shape of .* too large"):
        mx.load(io.BytesIO(data), format="npy")


def test_safetensors_header_that_is_not_utf8_keeps_its_message():
    # Was: ValueError with an empty message (the message quoted the invalid
    # byte and Python could not decode it).
    import io
    import struct
    text = b'\x80{"a": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}}'
    data = struct.pack("<Q", len(text)) + text + b"\0" * 4
    with pytest.raises(ValueError, match=r"\[load\] Invalid JSON header") as e:
        mx.load(io.BytesIO(data), format="safetensors")
    assert "\\x80" in str(e.value)


def test_npz_member_declaring_more_than_deflate_can_produce_raises():
    import io
    import zipfile
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("a.npy", npy("{'descr': '<f4', 'fortran_order': False, "
                                "'shape': (4,), }", b"\0" * 16))
    data = bytearray(buf.getvalue())
    # Central directory entry: uncompressed size at +24.
    cd = data.find(b"PK\x01\x02")
    data[cd + 24:cd + 28] = (2**31).to_bytes(4, "little")
    with pytest.raises(ValueError, match=r"\[load\] Corrupt zip archive: "
                       r"member 'a.npy' declares"):
        mx.load(io.BytesIO(bytes(data)), format="npz")


def gguf_with_tensor(dims, ggml_type, offset, payload=b"\0" * 64):
    import struct
    name = b"w"
    out = b"GGUF" + struct.pack("<IQQ", 3, 1, 0)
    out += struct.pack("<Q", len(name)) + name + struct.pack("<I", len(dims))
    for d in dims:
        out += struct.pack("<Q", d)
    out += struct.pack("<IQ", ggml_type, offset)
    out += b"\0" * ((32 - len(out) % 32) % 32)
    return out + payload


def test_gguf_offsets_that_wrap_around_raise(tmp_path):
    # Was: data_start + offset wrapped past 2^64 and passed the bounds check,
    # so the tensor read bytes from the wrong place.
    p = tmp_path / "w.gguf"
    p.write_bytes(gguf_with_tensor([4], 0, 2**64 - 16))
    with pytest.raises(ValueError, match=r"\[load\] Data of tensor 'w' lies "
                       r"outside the file"):
        mx.load(str(p))
    p.write_bytes(gguf_with_tensor([2**31 - 1] * 3, 0, 0))
    with pytest.raises(ValueError, match=r"\[load\] The shape of tensor 'w' "
                       r"is too large"):
        mx.load(str(p))


def test_gguf_quantized_tensor_with_an_empty_last_dimension_raises(tmp_path):
    # Was: a Q4_0 tensor of shape (0, 4) divided by its 0 columns (SIGFPE).
    p = tmp_path / "q.gguf"
    p.write_bytes(gguf_with_tensor([0, 4], 2, 0))
    with pytest.raises(ValueError, match=r"\[load\] Quantized tensor 'w' needs "
                       r"a positive last dimension"):
        mx.load(str(p))


# --- compile ---

def test_shapeless_compile_of_a_compiled_function_with_a_reshape():
    # Was: ValueError "[Compiled] Shapes (2,6) and (3,4) cannot be
    # broadcast": the inner compile fused a group reading x through a
    # reshape next to x itself, and the outer shapeless trace broadcast the
    # group's inputs to find its output shape.
    def f(x):
        return mx.reshape(x, (2, 6)).reshape((3, 4)) + 0.5 * x

    g = mx.compile(mx.compile(f), shapeless=True)
    x = mx.arange(12, dtype=mx.float32).reshape(3, 4)
    np.testing.assert_allclose(np.array(g(x)), np.array(f(x)))
    y = mx.arange(24, dtype=mx.float32).reshape(6, 4)
    with pytest.raises(ValueError, match=r"\[reshape\]"):
        g(y)  # the traced (2, 6) cannot hold 24 elements (MLX's rule)


def test_compile_with_an_int_constant_beyond_int64():
    # Was: RuntimeError "Unable to cast Python instance to C++ type" while
    # hashing the constant for the cache key.
    f = mx.compile(lambda x, n: x * (n % 7))
    x = mx.array([1.0, 2.0])
    assert f(x, 2**70).tolist() == [2**70 % 7, 2 * (2**70 % 7)]
    assert f(x, 2**64 + 3).tolist() == [(2**64 + 3) % 7, 2 * ((2**64 + 3) % 7)]


# --- elementwise math ---

def test_maximum_and_minimum_of_complex_propagate_nan():
    # Was: maximum(nan+0j, 0j) gave 0j (the comparison of a NaN is false).
    nan = float("nan")
    a = mx.array([complex(nan, 0), 1 + 1j, 2 + 0j])
    b = mx.array([0j, complex(0, nan), 1 + 0j])
    for f, g in ((mx.maximum, np.maximum), (mx.minimum, np.minimum)):
        got, want = np.array(f(a, b)), g(np.array(a), np.array(b))
        assert (np.isnan(got) == np.isnan(want)).all(), (got, want)
        assert got[2] == want[2]


def test_sinh_and_cosh_near_the_overflow_threshold():
    # Was: inf for 88.5 < |x| < 89.4 in float32 (SLEEF's vector sinh/cosh
    # are only valid up to 88.5; the results stay finite up to 89.4) and
    # for 709 < |x| < 710.5 in float64.
    x32 = np.array([88.6, -89.0, 89.3, 89.5, -100.0, 10.0] * 2, np.float32)
    x64 = np.array([709.5, -710.0, 710.4, 711.0, 1.0] * 2, np.float64)
    for x in (x32, x64):
        t = mx.float32 if x.dtype == np.float32 else mx.float64
        for f, g in ((mx.sinh, np.sinh), (mx.cosh, np.cosh)):
            with np.errstate(over="ignore"):
                want = g(x)
            np.testing.assert_allclose(np.array(f(mx.array(x, t))), want,
                                       rtol=4e-7 if t == mx.float32 else 1e-15)


def test_npz_member_name_that_is_not_utf8_loads():
    # Was: UnicodeDecodeError (a ValueError naming no op) building the dict.
    import io
    import zipfile
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("Za.npy", npy("{'descr': '<f4', 'fortran_order': False, "
                                 "'shape': (1,), }", b"\0\0\x80?"))
    data = buf.getvalue().replace(b"Za.npy", b"\x80a.npy")
    out = mx.load(io.BytesIO(data), format="npz")
    assert list(out) == ["\\x80a"] and out["\\x80a"].tolist() == [1.0]


def test_imported_function_with_corrupt_shapes_or_axes_raises(tmp_path):
    # Was: a segfault (or heap corruption found later by the garbage
    # collector) calling an exported function whose file had a traced shape
    # or a reduction axis overwritten (minimal cases: a u64 2**31 at byte 81
    # of the 250-byte file of this function on a 0-d input; a u64 685 over
    # the Sum's axes of its file on a 3-D input): run_ir built the node with
    # the file's shape and the kernel wrote past its buffers. Imported tapes
    # are now checked against each primitive's output_shapes, and Reduce's
    # checks its axes.
    import struct
    path = str(tmp_path / "f.mlxfn")
    bad_path = str(tmp_path / "bad.mlxfn")
    for x in (mx.array(1.5), mx.ones((2, 1, 3))):
        mx.export_function(path, lambda a: (mx.exp(a) * 2 + a.sum(),), x)
        with open(path, "rb") as f:
            base = f.read()
        for value in (2**31, 7, 685):
            for at in range(0, len(base) - 7):
                bad = base[:at] + struct.pack("<Q", value) + base[at + 8:]
                with open(bad_path, "wb") as f:
                    f.write(bad)
                try:
                    out = mx.import_function(bad_path)(x)
                    mx.eval(out)
                    [o.tolist() for o in out if o.size < 4096]
                except (TypeError, OverflowError):
                    pass
                except (ValueError, IndexError, RuntimeError) as e:
                    assert str(e).startswith("["), (at, value, e)
        # The undamaged file still works.
        out = mx.import_function(path)(x)
        want = mx.exp(x) * 2 + x.sum()
        assert mx.allclose(out[0], want).item()


def test_tolist_of_a_huge_empty_array_raises_memory_error():
    # Was: RuntimeError "Could not allocate list object!" (pybind11), naming
    # no op, for a 0-size array whose list would be 2**31 - 1 lists (found
    # by the loader fuzzer: a GGUF tensor of shape (2**31 - 1, 0)).
    import subprocess
    import sys
    code = ("from fuzz_support import limit_address_space; "
            "limit_address_space(4 << 30); import fluxion.core as mx\n"
            "try:\n    mx.zeros((2**31 - 1, 0)).tolist()\n"
            "except MemoryError as e:\n    print('MemoryError', e)\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.abspath(__file__)), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert "MemoryError [tolist] Out of memory" in r.stdout, r.stdout


def test_imported_function_with_a_corrupt_dtype_raises(tmp_path):
    # Was: UBSan "load of value 255, which is not a valid value for type
    # 'bool'" (and a segfault for a node whose input count was zeroed):
    # run_ir built each node with the dtype (and the inputs) the file gave
    # it, so a float32 value retyped as bool had Exp write floats into a
    # bool buffer. An imported tape's elementwise and AsType nodes are now
    # checked for their inputs' number and dtypes and their output dtype.
    import struct
    path = str(tmp_path / "f.mlxfn")
    bad_path = str(tmp_path / "bad.mlxfn")
    x = mx.array(1.5)
    mx.export_function(path, lambda a: (mx.exp(a) * 2 + a.sum(),), x)
    with open(path, "rb") as f:
        base = f.read()
    # A 0-d float32 value: dtype 10, no dimensions, no constant.
    value = bytes([10]) + struct.pack("<I", 0) + struct.pack("<q", -1)
    ats = [i for i in range(len(base)) if base.startswith(value, i)]
    assert len(ats) >= 4
    for at in ats:
        for dtype in (0, 1, 8, 11):  # bool, uint8, int64, float64
            with open(bad_path, "wb") as f:
                f.write(base[:at] + bytes([dtype]) + base[at + 1:])
            with pytest.raises(ValueError, match=r"^\[import_function\] "):
                mx.eval(mx.import_function(bad_path)(x))
    # The Add node's input count zeroed (was a segfault).
    add = base.index(b"Add") + 3 + 4
    assert struct.unpack("<I", base[add:add + 4]) == (2,)
    with open(bad_path, "wb") as f:
        f.write(base[:add] + struct.pack("<I", 0) + base[add + 4:])
    with pytest.raises(ValueError,
                       match=r"^\[import_function\] Corrupt trace: Add has 0"):
        mx.import_function(bad_path)(x)
    # The shapeless flag (after the magic, the version and the empty
    # metadata) is a bool: 2 is not one.
    assert base[16] == 0
    with open(bad_path, "wb") as f:
        f.write(base[:16] + b"\x02" + base[17:])
    with pytest.raises(ValueError, match=r"Corrupt shapeless flag 2"):
        mx.import_function(bad_path)
    # An unknown dtype byte names its value.
    with open(bad_path, "wb") as f:
        f.write(base[:ats[0]] + b"\xff" + base[ats[0] + 1:])
    with pytest.raises(ValueError, match=r"Corrupt dtype 255"):
        mx.import_function(bad_path)


def test_loaded_bool_bytes_other_than_0_and_1_are_true(tmp_path):
    # A .npy of dtype |b1 holding the bytes 255 and 2: the kernels read them
    # as bool, where only 0 and 1 are defined; Load now makes every nonzero
    # byte 1, as NumPy reads it.
    np_ = pytest.importorskip("numpy")
    path = str(tmp_path / "b.npy")
    np_.save(path, np_.array([True, False, True]))
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[-3] = 255
    data[-1] = 2
    with open(path, "wb") as f:
        f.write(bytes(data))
    a = mx.load(path)
    assert a.tolist() == [True, False, True]
    assert mx.sum(a).item() == 2
    assert (a == mx.array([True, False, True])).all().item()
