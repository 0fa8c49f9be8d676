"""mx.save / mx.load / mx.savez / mx.savez_compressed / mx.save_safetensors:
round trips of every dtype, interop with NumPy's files, metadata, file
objects, corrupt and truncated files, and the laziness of load."""

import io
import os
import pathlib
import struct

import numpy as np
import pytest

import fluxion.core as mx
from helpers import NP_DTYPES, to_np

ALL = list(NP_DTYPES)


def sample(dtype, shape=(2, 3)):
    vals = np.arange(1, int(np.prod(shape)) + 1).reshape(shape)
    if dtype == mx.bool_:
        return mx.array(vals % 2 == 1)
    if dtype == mx.complex64:
        return mx.array(vals * (1 - 2j)).astype(mx.complex64)
    return mx.array(vals).astype(dtype)


def same(a, b):
    assert a.dtype == b.dtype
    assert a.shape == b.shape
    assert mx.array_equal(a, b).item()


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_npy_round_trip(tmp_path, dtype):
    a = sample(dtype, (3, 4))
    mx.save(str(tmp_path / "a.npy"), a)
    same(mx.load(str(tmp_path / "a.npy")), a)
    mx.save(tmp_path / "p", a)  # pathlib.Path, ".npy" appended
    same(mx.load(tmp_path / "p.npy"), a)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_npz_and_safetensors_round_trip(tmp_path, dtype):
    a, b = sample(dtype, (2, 2)), sample(dtype, (5,))
    for save in (mx.savez, mx.savez_compressed):
        save(tmp_path / "z", a, b=b)
        got = mx.load(tmp_path / "z.npz")
        assert set(got) == {"arr_0", "b"}
        same(got["arr_0"], a)
        same(got["b"], b)
    mx.save_safetensors(tmp_path / "s", {"a": a, "b": b})
    got = mx.load(tmp_path / "s.safetensors")
    same(got["a"], a)
    same(got["b"], b)


@pytest.mark.parametrize("dtype", [d for d in ALL if d != mx.bfloat16],
                         ids=str)
def test_numpy_reads_ours(tmp_path, dtype):
    a = sample(dtype, (3, 2))
    mx.save(tmp_path / "a.npy", a)
    ref = np.load(tmp_path / "a.npy")
    assert ref.dtype == NP_DTYPES[dtype]
    np.testing.assert_array_equal(ref, np.array(a))
    for save in (mx.savez, mx.savez_compressed):
        save(tmp_path / "z.npz", x=a, y=a.T)
        with np.load(tmp_path / "z.npz") as z:
            np.testing.assert_array_equal(z["x"], np.array(a))
            np.testing.assert_array_equal(z["y"], np.array(a).T)


def test_bfloat16_npy_is_void2(tmp_path):
    a = mx.array([1.0, -2.5, 3.0]).astype(mx.bfloat16)
    mx.save(tmp_path / "b.npy", a)
    ref = np.load(tmp_path / "b.npy")
    assert ref.dtype == np.dtype("V2")
    # The raw bytes are the upper halves of the float32 values.
    f32 = np.array([1.0, -2.5, 3.0], np.float32).view(np.uint32) >> 16
    assert ref.view(np.uint16).tolist() == f32.tolist()


@pytest.mark.parametrize("np_dtype", [
    np.bool_, np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16,
    np.int32, np.int64, np.float16, np.float32, np.float64, np.complex64])
def test_we_read_numpys(tmp_path, np_dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 5)) * 10).astype(np_dtype)
    np.save(tmp_path / "x.npy", x)
    np.testing.assert_array_equal(np.array(mx.load(tmp_path / "x.npy")), x)
    # Big-endian and Fortran order.
    be = x.astype(x.dtype.newbyteorder(">"))
    np.save(tmp_path / "be.npy", be)
    np.testing.assert_array_equal(np.array(mx.load(tmp_path / "be.npy")), x)
    np.save(tmp_path / "f.npy", np.asfortranarray(x))
    np.testing.assert_array_equal(np.array(mx.load(tmp_path / "f.npy")), x)
    fbe = np.asfortranarray(x.reshape(2, 2, 5)).astype(be.dtype, order="F")
    np.save(tmp_path / "fbe.npy", fbe)
    got = mx.load(tmp_path / "fbe.npy")
    assert got.shape == (2, 2, 5)
    np.testing.assert_array_equal(np.array(got), x.reshape(2, 2, 5))
    np.savez(tmp_path / "s.npz", x, named=x.T, big=be)
    np.savez_compressed(tmp_path / "c.npz", x, named=x.T, big=be)
    for f in ("s.npz", "c.npz"):
        got = mx.load(tmp_path / f)
        assert set(got) == {"arr_0", "named", "big"}
        np.testing.assert_array_equal(np.array(got["arr_0"]), x)
        np.testing.assert_array_equal(np.array(got["named"]), x.T)
        np.testing.assert_array_equal(np.array(got["big"]), x)


def test_safetensors_metadata(tmp_path):
    a = mx.arange(6).reshape(2, 3)
    mx.save_safetensors(str(tmp_path / "m.safetensors"), {"a": a},
                        metadata={"format": "mlx", "k": "v"})
    arrays, meta = mx.load(tmp_path / "m.safetensors", return_metadata=True)
    assert meta == {"format": "mlx", "k": "v"}
    same(arrays["a"], a)
    _, meta = mx.load(tmp_path / "m.safetensors", return_metadata=True)
    mx.save_safetensors(tmp_path / "n.safetensors", {"a": a})
    assert mx.load(tmp_path / "n.safetensors", return_metadata=True)[1] == {}
    # The header is the format's: JSON after a little-endian u64 length.
    raw = (tmp_path / "m.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    import json
    header = json.loads(raw[8:8 + n])
    assert header["a"] == {"dtype": "I32", "shape": [2, 3],
                           "data_offsets": [0, 24]}
    assert header["__metadata__"] == {"format": "mlx", "k": "v"}
    with pytest.raises(ValueError, match=r"\[save_safetensors\]"):
        mx.save_safetensors(tmp_path / "x", {"a": a}, metadata={"k": 1})
    with pytest.raises(ValueError, match="Metadata is not supported"):
        mx.load(tmp_path / "m.safetensors", format="npz",
                return_metadata=True)


def test_format_argument_and_file_objects(tmp_path):
    a = mx.array([[1.5, 2.5]])
    mx.save(tmp_path / "noext.bin.npy", a)
    os.rename(tmp_path / "noext.bin.npy", tmp_path / "noext")
    with pytest.raises(ValueError, match="Could not infer the format"):
        mx.load(tmp_path / "noext")
    same(mx.load(tmp_path / "noext", format="npy"), a)
    with pytest.raises(ValueError, match="Unsupported file format 'txt'"):
        mx.load(tmp_path / "noext", format="txt")
    for save, fmt in ((mx.save, "npy"), (mx.savez, "npz"),
                      (mx.savez_compressed, "npz")):
        buf = io.BytesIO()
        save(buf, a)
        buf.seek(0)
        got = mx.load(buf, format=fmt)
        same(got if fmt == "npy" else got["arr_0"], a)
    buf = io.BytesIO()
    mx.save_safetensors(buf, {"a": a}, {"m": "x"})
    buf.seek(0)
    arrays, meta = mx.load(buf, format="safetensors", return_metadata=True)
    same(arrays["a"], a)
    assert meta == {"m": "x"}
    # A real file object: the format comes from its name.
    with open(tmp_path / "f.npy", "wb") as f:
        mx.save(f, a)
    with open(tmp_path / "f.npy", "rb") as f:
        same(mx.load(f), a)
    # NumPy's archives from memory, and a text-mode file.
    buf = io.BytesIO()
    np.savez_compressed(buf, v=np.arange(4.0))
    buf.seek(0)
    assert mx.load(buf, format="npz")["v"].tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="Could not infer the format"):
        mx.load(io.BytesIO(b"abc"))
    with open(tmp_path / "f.npy", "r", encoding="latin-1") as f:
        with pytest.raises(TypeError, match="binary mode"):
            mx.load(f)
    with pytest.raises(TypeError, match=r"\[save\] file must be"):
        mx.save(3, a)
    with pytest.raises(TypeError, match=r"\[load\] file must be"):
        mx.load(3.0)


def test_savez_names(tmp_path):
    a = mx.array([1])
    with pytest.raises(ValueError, match="arr_0"):
        mx.savez(tmp_path / "x.npz", a, arr_0=a)
    with pytest.raises(TypeError):
        mx.save_safetensors(tmp_path / "x", {1: a})
    mx.savez(str(tmp_path / "plain"), a)
    assert (tmp_path / "plain.npz").exists()


def test_saves_numpy_inputs_and_views(tmp_path):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    mx.save(tmp_path / "n.npy", x)
    np.testing.assert_array_equal(np.array(mx.load(tmp_path / "n.npy")), x)
    t = mx.array(x).transpose(2, 0, 1)[::2]
    mx.save(tmp_path / "t.npy", t)
    np.testing.assert_array_equal(np.load(tmp_path / "t.npy"),
                                  x.transpose(2, 0, 1)[::2])


def test_load_is_lazy(tmp_path):
    a = mx.arange(5).astype(mx.float32)
    p = tmp_path / "l.npy"
    mx.save(p, a)
    b = mx.load(p)
    # Overwrite the data bytes in place: evaluation reads the new ones.
    raw = bytearray(p.read_bytes())
    raw[128:132] = struct.pack("<f", 42.0)
    p.write_bytes(raw)  # same size: truncate + rewrite keeps the inode
    assert b.tolist() == [42.0, 1, 2, 3, 4]
    # Deleting the file after load: the open file still reads correctly.
    c = mx.load(p)
    os.remove(p)
    assert (c * 2).tolist() == [84.0, 2, 4, 6, 8]
    # Truncating it: a clear error at evaluation.
    mx.save(p, a)
    d = mx.load(p)
    with open(p, "r+b") as f:
        f.truncate(130)
    with pytest.raises(RuntimeError, match=r"\[load\].*truncated"):
        mx.eval(d)
    # Compressed members inflate at evaluation too, and gradients treat
    # loaded arrays as constants.
    mx.savez_compressed(tmp_path / "c.npz", w=mx.array([1.0, -2.0]))
    w = mx.load(tmp_path / "c.npz")["w"]
    g = mx.grad(lambda x: (x * w).sum())(mx.zeros(2))
    assert g.tolist() == [1.0, -2.0]
    out = mx.vmap(lambda x: x * w)(mx.ones((3, 2)))
    assert out.tolist() == [[1.0, -2.0]] * 3


def test_corrupt_files(tmp_path):
    def write(name, data):
        (tmp_path / name).write_bytes(data)
        return tmp_path / name

    with pytest.raises(ValueError, match=r"\[load\] Failed to open file"):
        mx.load(tmp_path / "missing.npy")
    with pytest.raises(ValueError, match="Invalid magic string"):
        mx.load(write("m.npy", b"hello world, not numpy"))
    np.save(tmp_path / "g.npy", np.arange(10.0))
    good = (tmp_path / "g.npy").read_bytes()
    with pytest.raises(ValueError, match=r"\[load\] Truncated .npy header"):
        mx.load(write("h.npy", good[:30]))
    # Truncated data: only the header is read at load; the read at eval
    # raises (as MLX).
    short = mx.load(write("d.npy", good[:-3]))
    with pytest.raises(RuntimeError, match=r"\[load\].*d.npy.*truncated"):
        mx.eval(short)
    np.save(tmp_path / "c16.npy", np.ones(2, np.complex128))
    with pytest.raises(ValueError, match="Unsupported dtype descr '<c16'"):
        mx.load(tmp_path / "c16.npy")
    np.save(tmp_path / "u.npy", np.array(["ab"]))
    with pytest.raises(ValueError, match="Unsupported dtype descr"):
        mx.load(tmp_path / "u.npy")
    np.save(tmp_path / "r.npy", np.zeros(2, dtype=[("a", "<i4")]))
    with pytest.raises(ValueError, match="structured"):
        mx.load(tmp_path / "r.npy")
    # Zip archives.
    np.savez(tmp_path / "z.npz", a=np.arange(50.0))
    z = (tmp_path / "z.npz").read_bytes()
    with pytest.raises(ValueError, match=r"\[load\].*zip"):
        mx.load(write("junk.npz", b"PK" + b"\0" * 40))
    with pytest.raises(ValueError, match=r"\[load\]"):
        mx.load(write("cut.npz", z[: len(z) // 2]))
    np.savez_compressed(tmp_path / "zc.npz", a=np.arange(500.0))
    zc = bytearray((tmp_path / "zc.npz").read_bytes())
    cd = zc.rfind(b"PK\x01\x02")
    zc[cd - 12] ^= 0xFF
    a = mx.load(write("bad.npz", bytes(zc)))["a"]
    with pytest.raises(RuntimeError, match="Corrupt compressed member"):
        mx.eval(a)
    # Safetensors.
    hdr = b'{"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}'
    ok = struct.pack("<Q", len(hdr)) + hdr + b"\0" * 16
    assert mx.load(write("ok.safetensors", ok))["a"].tolist() == [0.0] * 4
    with pytest.raises(ValueError, match="outside the file"):
        mx.load(write("short.safetensors", ok[:-1]))
    with pytest.raises(ValueError, match="Invalid JSON header"):
        mx.load(write("j.safetensors", struct.pack("<Q", 5) + b"{bad}"))
    with pytest.raises(ValueError, match="Truncated safetensors header"):
        mx.load(write("t.safetensors", struct.pack("<Q", 1000) + b"{}"))
