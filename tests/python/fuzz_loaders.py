"""Hostile files for every loader (issue 17), run in a child process by
test_fuzz_loaders.py: .npy, .npz (stored and deflated), .safetensors, .gguf
and exported functions (mx.import_function).

Each case starts from a valid file written by Fluxion itself (random arrays
of every dtype) and damages it: truncation at any byte, bytes overwritten,
inserted or removed, and structured edits of each format's header (header
lengths far beyond the file, wrong or unknown dtypes, shapes whose product
overflows, offsets past the end or overlapping, zip sizes and offsets that
lie, GGUF counts and dimensions out of range). Loading, then evaluating and
reading every array returned, must succeed or raise a documented exception
whose message carries the loader's tag ([load], [import_function], or the
imported function's own op when calling it); never crash, hang, or allocate
memory the file cannot account for: the peak of the allocator after a case
must stay below 64 MiB (a hostile header must not size a buffer), and the
child runs under an 8 GiB address-space limit.
"""

import io
import json
import math
import os
import re
import struct

import numpy as np
from hypothesis import strategies as st

import fluxion.core as mx
from fuzz_support import (ALL_DTYPES, CaseLog, DOCUMENTED_ERRORS, fuzz,
                          limit_address_space,
                          np_values, to_mx)

TAG = re.compile(r"^\[(load|import_function|[A-Za-z_]+)\]")
PEAK_LIMIT = 64 << 20


@st.composite
def array_dict(draw):
    n = draw(st.integers(1, 3))
    out = {}
    for i in range(n):
        dtype = draw(st.sampled_from(ALL_DTYPES))
        shape = tuple(draw(st.lists(st.integers(0, 4), max_size=3)))
        v = np_values(shape, dtype, draw(st.integers(0, 1000)))
        out[f"a{i}"] = to_mx(v, dtype)
    return out


def valid_file(kind, arrays, tmp):
    """The bytes of a valid file of `kind` holding `arrays`."""
    buf = io.BytesIO()
    if kind == "npy":
        mx.save(buf, next(iter(arrays.values())))
    elif kind == "npz":
        mx.savez(buf, **arrays)
    elif kind == "npz_deflate":
        mx.savez_compressed(buf, **arrays)
    elif kind == "safetensors":
        mx.save_safetensors(buf, {k: v for k, v in arrays.items()},
                            metadata={"m": "x"})
    elif kind == "gguf":
        path = os.path.join(tmp, "base.gguf")
        ok = {k: v for k, v in arrays.items() if v.dtype in (
            mx.float32, mx.float16, mx.bfloat16, mx.int8, mx.int16,
            mx.int32, mx.int64, mx.float64) and v.ndim >= 1}
        if not ok:
            ok = {"w": mx.ones((2, 3))}
        mx.save_gguf(path, ok, {"k": "v", "n": mx.array([1, 2], mx.int32)})
        with open(path, "rb") as f:
            return f.read()
    elif kind == "exported":
        path = os.path.join(tmp, "base.mlxfn")
        x = next(iter(arrays.values()))
        x = x.astype(mx.float32) if x.dtype != mx.float32 else x
        mx.export_function(path, lambda a: (mx.exp(a) * 2 + a.sum(),), x)
        with open(path, "rb") as f:
            return f.read()
    return buf.getvalue()


def le(fmt, *v):
    return struct.pack("<" + fmt, *v)


@st.composite
def damage(draw, data, kind):
    """A damaged copy of `data` (bytes) and a description."""
    n = len(data)
    k = draw(st.integers(0, 11))
    big = draw(st.sampled_from([2**31 - 1, 2**31, 2**32 - 1, 2**40,
                                2**63 - 1, 2**64 - 1, n + 1, n * 2, 0]))
    if k <= 1:
        cut = draw(st.integers(0, max(n - 1, 0)))
        return data[:cut], f"truncated at {cut}"
    if k <= 3:
        pos = draw(st.integers(0, max(n - 1, 0)))
        width = draw(st.sampled_from([1, 1, 2, 4, 8]))
        val = draw(st.binary(min_size=width, max_size=width))
        return data[:pos] + val + data[pos + width:], f"{width} bytes at {pos}"
    if k == 4:
        pos = draw(st.integers(0, n))
        ins = draw(st.binary(min_size=1, max_size=16))
        return data[:pos] + ins + data[pos:], f"inserted {len(ins)} at {pos}"
    if k == 5:
        pos = draw(st.integers(0, max(n - 1, 0)))
        m = draw(st.integers(1, 32))
        return data[:pos] + data[pos + m:], f"removed {m} at {pos}"
    # Structured edits per format.
    if kind == "npy":
        return npy_edit(draw, data, big)
    if kind in ("npz", "npz_deflate"):
        return zip_edit(draw, data, big)
    if kind == "safetensors":
        return safetensors_edit(draw, data, big)
    if kind == "gguf":
        return gguf_edit(draw, data, big)
    pos = draw(st.integers(0, max(n - 8, 0)))
    return data[:pos] + le("Q", big) + data[pos + 8:], f"u64 {big} at {pos}"


def npy_header(descr, fortran, shape, version=1, pad=0):
    d = (f"{{'descr': {descr!r}, 'fortran_order': {fortran}, "
         f"'shape': {tuple(shape)!r}, }}").encode() + b" " * pad + b"\n"
    if version == 1:
        return b"\x93NUMPY\x01\x00" + le("H", len(d) % 65536) + d
    return b"\x93NUMPY" + bytes([version, 0]) + le("I", len(d)) + d


def npy_edit(draw, data, big):
    k = draw(st.integers(0, 5))
    body = data[data.index(b"\n") + 1:] if b"\n" in data else b""
    if k == 0:  # header length beyond the file, in every version
        ver = draw(st.sampled_from([1, 2, 3]))
        ln = le("H", big % 65536) if ver == 1 else le("I", big % 2**32)
        return b"\x93NUMPY" + bytes([ver, 0]) + ln + data[10:], \
            f"v{ver} header length {big}"
    descr = draw(st.sampled_from(["<f4", ">f8", "<V2", "|b1", "<c16", "<U3",
                                  "O", "<f4x", "<i16", "", "<u8", ">c8"]))
    shape = draw(st.lists(st.sampled_from([0, 1, 3, 2**31 - 1, 2**20,
                                           2**31, 2**40]), max_size=9))
    fortran = draw(st.sampled_from(["True", "False", "None", "1"]))
    if k == 1:
        return npy_header(descr, fortran, shape) + body, \
            f"descr {descr} shape {shape} fortran {fortran}"
    if k == 2:
        garbage = draw(st.sampled_from([
            "{", "{'descr': '<f4'}", "{'descr': '<f4', 'fortran_order': "
            "False, 'shape': (3,", "{'shape': (-1,), 'descr': '<f4', "
            "'fortran_order': False}", "{'descr': '<f4', 'fortran_order': "
            "False, 'shape': (1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,"
            "18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35), }",
            "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': ()}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3), }",
            "\x00" * 40, "{'descr': '<f4', 'fortran_order': False, "
            "'shape': (99999999999999999999999,), }"]))
        d = garbage.encode() + b"\n"
        return b"\x93NUMPY\x01\x00" + le("H", len(d)) + d + body, garbage
    if k == 3:
        return npy_header("<f4", "False", [big % 2**31]) + body, \
            f"shape ({big % 2**31},) with {len(body)} bytes"
    if k == 4:
        return b"\x93NUMPY\x02\x00" + le("I", 2**32 - 1) + b"{", "v2 4 GiB"
    return npy_header(descr, "False", shape, version=3,
                      pad=draw(st.integers(0, 100))) + body, "v3 header"


def zip_records(data):
    """Offsets of the zip signatures in data."""
    out = []
    for sig in (b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06"):
        i = data.find(sig)
        while i >= 0:
            out.append((i, sig))
            i = data.find(sig, i + 1)
    return sorted(out)


def zip_edit(draw, data, big):
    recs = zip_records(data)
    if not recs:
        return data, "unchanged"
    pos, sig = draw(st.sampled_from(recs))
    # Field offsets (within the record) of sizes, offsets, counts, CRCs.
    fields = {b"PK\x03\x04": [(14, 4), (18, 4), (22, 4), (26, 2), (28, 2),
                              (8, 2)],
              b"PK\x01\x02": [(16, 4), (20, 4), (24, 4), (28, 2), (30, 2),
                              (32, 2), (42, 4), (10, 2), (8, 2)],
              b"PK\x05\x06": [(8, 2), (10, 2), (12, 4), (16, 4), (20, 2),
                              (4, 2)]}[sig]
    off, width = draw(st.sampled_from(fields))
    val = draw(st.sampled_from([0, 1, 8, 0xffff, 0xffffffff, big, len(data),
                                len(data) // 2, 99, 12]))
    val %= 2 ** (8 * width)
    at = pos + off
    if at + width > len(data):
        return data, "unchanged"
    new = data[:at] + val.to_bytes(width, "little") + data[at + width:]
    return new, f"{sig!r} record at {pos}: field +{off} = {val}"


def safetensors_edit(draw, data, big):
    hlen = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + hlen])
    body = data[8 + hlen:]
    k = draw(st.integers(0, 6))
    if k == 0:
        return le("Q", big) + data[8:], f"header size {big}"
    names = [n for n in header if n != "__metadata__"]
    if not names:
        return data, "unchanged"
    name = draw(st.sampled_from(names))
    e = header[name]
    if k == 1:
        e["dtype"] = draw(st.sampled_from(["F8_E5M2", "U128", "", 3, None,
                                           "F16", "BF16", "I64", "BOOL",
                                           "C64"]))
    elif k == 2:
        e["shape"] = draw(st.lists(st.sampled_from(
            [0, 1, 2**31 - 1, 2**31, 2**32 + 1, 2**62, -1, 2**64 - 1, 1.5,
             "3"]), max_size=8))
    elif k == 3:
        b = draw(st.sampled_from([0, 4, len(body), len(body) + 8, big, -1]))
        c = draw(st.sampled_from([0, 4, len(body), len(body) + 8, big, 2**64,
                                  b]))
        e["data_offsets"] = [b, c]
    elif k == 4:
        # Two entries over the same bytes.
        other = draw(st.sampled_from(names))
        e["data_offsets"] = header[other]["data_offsets"]
        e["shape"] = header[other]["shape"]
        e["dtype"] = header[other]["dtype"]
    elif k == 5:
        header["__metadata__"] = draw(st.sampled_from(
            [3, [], {"a": 1}, {"a": None}, "x", {"a": "b" * 1000}]))
    else:
        header = draw(st.sampled_from([[], 3, "x", None, {"a": 3},
                                       {"a": {"dtype": "F32"}}]))
    text = json.dumps(header).encode()
    if k == 6 and draw(st.booleans()):
        text = b"[" * 100000 + b"]" * 100000  # deep nesting
    return le("Q", len(text)) + text + body, f"header {text[:200]!r}"


def gguf_edit(draw, data, big):
    # Header: magic, version u32, n_tensors u64, n_kv u64, then the kvs.
    k = draw(st.integers(0, 5))
    if k == 0:
        return data[:4] + le("I", draw(st.sampled_from([0, 1, 4, 2**32 - 1]))) \
            + data[8:], "version"
    if k == 1:
        return data[:8] + le("Q", big) + data[16:], f"tensor count {big}"
    if k == 2:
        return data[:16] + le("Q", big) + data[24:], f"kv count {big}"
    # Find the tensor infos: each name is preceded by its u64 length.
    names = [m.start() for m in re.finditer(rb"a\d|w", data[:4096])]
    if not names:
        return data, "unchanged"
    at = draw(st.sampled_from(names))
    if at < 8 or struct.unpack("<Q", data[at - 8:at])[0] > 8:
        return data, "unchanged"
    ln = struct.unpack("<Q", data[at - 8:at])[0]
    p = at + ln  # n_dims u32, dims u64 * n, type u32, offset u64
    if p + 4 > len(data):
        return data, "unchanged"
    nd = struct.unpack("<I", data[p:p + 4])[0]
    if k == 3:
        v = draw(st.sampled_from([0, 9, 2**32 - 1, nd]))
        return data[:p] + le("I", v) + data[p + 4:], f"n_dims {v}"
    if nd > 8 or p + 4 + 8 * nd + 12 > len(data):
        return data, "unchanged"
    if k == 4 and nd:
        i = draw(st.integers(0, nd - 1))
        q = p + 4 + 8 * i
        v = draw(st.sampled_from([0, 2**31 - 1, 2**31, big, 2**64 - 1]))
        return data[:q] + le("Q", v % 2**64) + data[q + 8:], f"dim {i} = {v}"
    q = p + 4 + 8 * nd
    if draw(st.booleans()):
        t = draw(st.sampled_from([2, 3, 8, 12, 30, 99, 2**32 - 1]))
        return data[:q] + le("I", t) + data[q + 4:], f"type {t}"
    v = draw(st.sampled_from([big % 2**64, 2**64 - 1, 2**64 - 32, 1, 3]))
    return data[:q + 4] + le("Q", v) + data[q + 12:], f"offset {v}"


def check_error(e, stage):
    if not isinstance(e, DOCUMENTED_ERRORS):
        raise AssertionError(f"{stage}: undocumented {type(e).__name__}: {e}")
    if isinstance(e, (TypeError, OverflowError)):
        return
    if isinstance(e, MemoryError) or not TAG.match(str(e)) or \
            str(e).startswith(("[malloc]", "[array]")):
        raise AssertionError(f"{stage}: {type(e).__name__} {str(e)[:300]!r}")


def read_all(x):
    if isinstance(x, mx.array):
        mx.eval(x)
        # Not when the list itself would be huge: a 0-size array of shape
        # (2**31 - 1, 0) is 2**31 Python lists (as in NumPy).
        small = x.size < 4096 and math.prod(x.shape[:-1]) < 4096
        x.tolist() if small else None
    elif isinstance(x, (list, tuple)):
        for y in x:
            read_all(y)
    elif isinstance(x, dict):
        for y in x.values():
            read_all(y)


KINDS = ["npy", "npz", "npz_deflate", "safetensors", "gguf", "exported"]
EXT = {"npy": ".npy", "npz": ".npz", "npz_deflate": ".npz",
       "safetensors": ".safetensors", "gguf": ".gguf",
       "exported": ".mlxfn"}


def run(log, workdir, cases):
    limit_address_space(8 << 30)
    caselog = CaseLog(log)
    failures = []

    @fuzz(cases, st.sampled_from(KINDS), array_dict(), st.data())
    def property_(kind, arrays, data):
        base = valid_file(kind, arrays, workdir)
        bad, what = data.draw(damage(base, kind))
        via_file = kind in ("gguf", "exported") or data.draw(st.booleans())
        caselog(f"{kind} ({len(base)} bytes): {what}; as "
                f"{'file' if via_file else 'BytesIO'}")
        path = os.path.join(workdir, "case" + EXT[kind])
        if via_file:
            with open(path, "wb") as f:
                f.write(bad)
        mx.clear_cache()
        mx.reset_peak_memory()
        try:
            if kind == "exported":
                fn = mx.import_function(path)
                x = next(iter(arrays.values()))
                x = x.astype(mx.float32) if x.dtype != mx.float32 else x
                read_all(fn(x))
            else:
                src = path if via_file else io.BytesIO(bad)
                fmt = None if via_file else EXT[kind][1:]
                read_all(mx.load(src, format=fmt))
        except Exception as e:  # noqa: BLE001 - checked
            check_error(e, f"{kind}: {what}")
        peak = mx.get_peak_memory()
        if peak > PEAK_LIMIT:
            raise AssertionError(f"{kind}: {what}: the allocator's peak was "
                                 f"{peak} bytes for a {len(bad)}-byte file")

    try:
        property_()
    except Exception as e:  # noqa: BLE001 - reported by the parent
        notes = "\n".join(getattr(e, "__notes__", []))
        failures.append(f"{type(e).__name__}: {str(e)[-3000:]}\n{notes}")
    return {"cases": caselog.count, "failures": failures}
