"""Signature-driven fuzzing of every public function (issue 17), run in a
child process by test_fuzz_api.py so that a crash or a hang is reported as
a failure with the case that caused it.

Every builtin of fluxion.core, mx.linalg, mx.fft, mx.fast and mx.random is
called with arguments drawn from its own signature (pybind11 docstrings
give each parameter's type): arrays of any dtype, shape and layout, ints in
and out of int32, axes in and out of range, shapes with -1, 0 and huge
sides, floats with NaN/inf, strings, None. The call (and the evaluation of
everything it returns) must either succeed or raise a documented exception
type whose message names the op; and when it succeeds on view inputs, the
same call on contiguous copies of those inputs must give the same result
(a wrong answer from a strided or broadcast kernel path shows up here).

The child limits its address space (RLIMIT_AS, 8 GiB), so a shape that
would need more memory than that fails the allocation instead of using the
machine's memory: that is the out-of-memory path of the op, which must be
an exception too.
"""

import math
import os
import re

import numpy as np
from hypothesis import strategies as st

import fluxion.core as mx
from fuzz_support import (ALL_DTYPES, CaseLog, DOCUMENTED_ERRORS, fuzz,
                          limit_address_space,
                          np_of, np_values, with_layout, LAYOUTS)

# Functions that change process-wide state or only report it: fuzzing them
# with random values would change how the rest of the run behaves (memory
# and cache limits, default device/stream, print options, compile switch)
# or write files in random places.
SKIP = {
    "set_memory_limit", "set_cache_limit", "set_default_device",
    "set_default_stream", "clear_streams", "seed", "set_printoptions",
    "disable_compile", "enable_compile", "set_wired_limit", "new_stream",
    "new_thread_local_stream", "new_thread_unsafe_stream", "synchronize",
    "export_to_dot", "print_graph", "printoptions", "clear_cache",
    "reset_peak_memory", "get_active_memory", "get_peak_memory",
    "get_cache_memory", "get_memory_limit", "save", "savez",
    "savez_compressed", "save_safetensors", "save_gguf", "export_function",
    "exporter", "load", "import_function", "device_info", "eval",
    "async_eval", "default_device", "default_stream", "device_count",
    "is_available", "get_printoptions",
}
# Random samplers advance the global key: no copy comparison for them.
RANDOM = re.compile(r"^random\.")


def split_top(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def signatures(f):
    res = []
    for line in (f.__doc__ or "").split("\n"):
        m = re.match(r"^(?:\d+\. )?\w+\((.*)\) -> ", line)
        if m:
            res.append(m.group(1))
    return res


def parse(sig):
    params, kwonly = [], False
    for p in split_top(sig):
        if p == "/":
            continue
        if p == "*":
            kwonly = True
            continue
        if p.startswith("*"):
            continue
        name, _, rest = p.partition(": ")
        typ, _, default = rest.partition(" = ")
        params.append((name, typ, bool(default), kwonly))
    return params


def public_functions():
    out = []
    for mod, prefix in ((mx, ""), (mx.linalg, "linalg."), (mx.fft, "fft."),
                        (mx.fast, "fast."), (mx.random, "random.")):
        for n in sorted(dir(mod)):
            f = getattr(mod, n)
            if n.startswith("_") or n in SKIP:
                continue
            if type(f).__name__ != "builtin_function_or_method":
                continue
            sigs = signatures(f)
            if sigs:
                out.append((prefix + n, f, [parse(s) for s in sigs]))
    return out


FUNCTIONS = public_functions()

INTS = [0, 1, -1, 2, 3, -2, 4, 5, 7, -7, 16]
HUGE_INTS = [2**31 - 1, -2**31, 2**31, 2**40, 2**63 - 1, -2**63, 2**64]


@st.composite
def small_array(draw):
    dtype = draw(st.sampled_from(ALL_DTYPES))
    nd = draw(st.sampled_from([0, 0, 1, 1, 2, 2, 3, 4, 6]))
    shape = tuple(draw(st.sampled_from([0, 1, 1, 2, 3, 4, 5]))
                  for _ in range(nd))
    seed = draw(st.integers(0, 2**31))
    specials = draw(st.sampled_from([0, 0, 1, 2]))
    layout = draw(st.sampled_from(LAYOUTS))
    v = np_values(shape, dtype, seed, specials)
    return with_layout(v, dtype, layout)[0]


def value_for(draw, typ):
    t = typ
    if "Stream" in t and "Device" in t:
        return None
    if "Dtype" in t and draw(st.integers(0, 4)):
        return draw(st.sampled_from(ALL_DTYPES))
    if "function" in t or "Callable" in t:
        return draw(st.sampled_from([lambda *a: a[0] if a else mx.array(1.0),
                                     lambda x, *a: mx.sum(x), None]))
    if "List[fluxion.core.array]" in t:
        return draw(st.lists(small_array(), max_size=3))
    if "array" in t or t in ("handle", "object"):
        k = draw(st.integers(0, 19))
        if k < 15:
            return draw(small_array())
        if k < 17:
            return draw(st.sampled_from([1, 2.5, -1, True, 1j, math.nan,
                                         math.inf, 2**40]))
        return draw(st.sampled_from([[1, 2, 3], [[1], [2]], None, "abc",
                                     (), [[1, 2], [3]]]))
    if "List[int]" in t or "Tuple[int" in t:
        k = draw(st.integers(0, 9))
        if k < 2 and "int" in t:
            return draw(st.sampled_from(INTS))
        if k < 8:
            return draw(st.lists(st.sampled_from([0, 1, 2, 3, 4, -1]),
                                 max_size=5))
        return draw(st.lists(st.sampled_from(INTS + HUGE_INTS), max_size=4))
    if "int" in t:
        if draw(st.integers(0, 4)):
            return draw(st.sampled_from(INTS))
        return draw(st.sampled_from(HUGE_INTS))
    if "bool" in t:
        return draw(st.booleans())
    if "float" in t:
        return draw(st.sampled_from([0.0, 1.0, -1.0, 0.5, 1e-5, math.nan,
                                     math.inf, -math.inf, 1e30, 3]))
    if "str" in t:
        return draw(st.sampled_from(["", "abc", "ij,jk->ik", "i,i", "max",
                                     "fro", "nuc", "L", "U", "constant",
                                     "edge", "ortho", "forward", "affine",
                                     "mxfp4", "left", "right", "float32"]))
    if "Device" in t:
        return draw(st.sampled_from([mx.cpu, mx.gpu]))
    if "dict" in t:
        return {}
    return None


def describe(x):
    if isinstance(x, mx.array):
        return f"array(shape={x.shape}, dtype={x.dtype})"
    if isinstance(x, (list, tuple)):
        inner = ", ".join(describe(y) for y in x)
        return f"[{inner}]" if isinstance(x, list) else f"({inner})"
    if callable(x):
        return "<function>"
    return repr(x)


def evaluate(x):
    """Evaluate and read everything a call returned."""
    if isinstance(x, mx.array):
        mx.eval(x)
        if x.size <= 1 << 16:
            np_of(x)
    elif isinstance(x, (list, tuple)):
        for y in x:
            evaluate(y)
    elif isinstance(x, dict):
        for y in x.values():
            evaluate(y)


def contiguous_copy(x):
    if isinstance(x, mx.array):
        if x.size > 1 << 16:
            return x
        # Built in its dtype: a float64 NumPy array converts to float32 by
        # default (MLX), which would round the copy's values.
        return mx.array(np_of(x), dtype=x.dtype)
    if isinstance(x, list):
        return [contiguous_copy(y) for y in x]
    return x


def same(a, b):
    if isinstance(a, mx.array):
        if not isinstance(b, mx.array) or a.shape != b.shape or \
                a.dtype != b.dtype:
            return False
        if a.size > 1 << 16:
            return True
        x, y = np_of(a), np_of(b)
        if x.dtype.kind in "fc":
            return np.allclose(x, y, rtol=2e-2 if a.dtype in (
                mx.float16, mx.bfloat16) else 1e-4, atol=1e-4,
                equal_nan=True) or np.allclose(
                    x, y, rtol=1e-3, atol=1e-3 * max(1.0, float(np.nanmax(
                        np.abs(np.where(np.isfinite(y), y, 0)), initial=0))),
                    equal_nan=True)
        return np.array_equal(x, y)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(
            same(x, y) for x, y in zip(a, b))
    return True


def run(log, workdir, cases):
    limit_address_space(8 << 30)
    os.chdir(workdir)
    caselog = CaseLog(log)
    failures = []

    @fuzz(cases, st.sampled_from(range(len(FUNCTIONS))), st.data())
    def property_(index, data):
        name, f, overloads = FUNCTIONS[index]
        params = data.draw(st.sampled_from(overloads))
        args, kwargs = [], {}
        for pname, typ, has_default, kwonly in params:
            if has_default and data.draw(st.booleans()):
                continue
            v = value_for(data.draw, typ)
            if kwonly or kwargs or (has_default and data.draw(st.booleans())):
                kwargs[pname] = v
            else:
                args.append(v)
        caselog(f"{name}(*{describe(args)}, **{ {k: describe(v) for k, v in kwargs.items()} })")
        try:
            out = f(*args, **kwargs)
            evaluate(out)
        except DOCUMENTED_ERRORS as e:
            msg = str(e)
            if not isinstance(e, (TypeError, OverflowError)) and \
                    not re.match(r"^\[[\w.:]+\]", msg):
                raise AssertionError(
                    f"{name}: {type(e).__name__} names no op: {msg!r}")
            return
        if RANDOM.match(name) or name in ("compile", "checkpoint",
                                          "custom_function", "vmap", "grad",
                                          "value_and_grad", "jvp", "vjp"):
            return
        if not any(isinstance(a, (mx.array, list)) for a in
                   list(args) + list(kwargs.values())):
            return
        # The same call on contiguous copies of the inputs.
        args2 = [contiguous_copy(a) for a in args]
        kwargs2 = {k: contiguous_copy(v) for k, v in kwargs.items()}
        out2 = f(*args2, **kwargs2)
        evaluate(out2)
        if not same(out, out2):
            raise AssertionError(f"{name}: views and contiguous copies give "
                                 f"different results:\n{out}\n{out2}")

    try:
        property_()
    except Exception as e:  # noqa: BLE001 - reported by the parent
        notes = "\n".join(getattr(e, "__notes__", []))
        failures.append(f"{type(e).__name__}: {str(e)[-3000:]}\n{notes}")
    return {"cases": caselog.count, "failures": failures,
            "functions": len(FUNCTIONS)}
