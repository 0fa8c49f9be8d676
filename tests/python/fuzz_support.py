"""Shared machinery of the property-based fuzzers (test_fuzz_*.py, issue 17).

Budgets. Every property runs a fixed number of generated cases, scaled by
the profile: FLUXION_FUZZ=ci (the default: `make test` and CI) derandomizes
Hypothesis, so each run generates the same cases and a failure reproduces by
running the test again; FLUXION_FUZZ=long (`make fuzz`) runs 20x the cases
from a random seed, which Hypothesis prints with any failure (`pytest
--hypothesis-seed=N` replays that run). FLUXION_FUZZ_SCALE overrides the
multiplier. Each executed case is counted (`CASES`), and the session prints
the total ("fuzz: N generated cases ...", tests/python/conftest.py).

Arrays are drawn as (shape, dtype, seed, specials, layout): the values come
from NumPy's generator seeded by the drawn seed, which is much cheaper than
drawing every element through Hypothesis and still shrinks well (to smaller
shapes, simpler dtypes and layouts, fewer special values).
"""

import collections
import functools
import json
import math
import os
import resource
import subprocess
import sys
import tempfile

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fluxion.core as mx

PROFILE = os.environ.get("FLUXION_FUZZ", "ci")
if PROFILE not in ("ci", "long"):
    raise ValueError(f"FLUXION_FUZZ must be ci or long; got {PROFILE!r}")
SCALE = float(os.environ.get("FLUXION_FUZZ_SCALE",
                             "1" if PROFILE == "ci" else "20"))

# Executed cases per property (test name -> count); the conftest prints
# the total at the end of the session.
CASES = collections.Counter()


def budget(n):
    return max(1, int(n * SCALE))


def fuzz(n, *given_args, **given_kwargs):
    """@given with this suite's settings and a budget of n cases (scaled by
    the profile), counting the cases that run."""

    def decorate(f):
        @functools.wraps(f)
        def counted(*args, **kwargs):
            CASES[f.__module__.rsplit(".", 1)[-1] + "::" + f.__name__] += 1
            return f(*args, **kwargs)

        return settings(
            max_examples=budget(n),
            derandomize=PROFILE == "ci",
            deadline=None,
            database=None,
            print_blob=True,
            suppress_health_check=list(HealthCheck),
        )(given(*given_args, **given_kwargs)(counted))

    return decorate


# --- dtypes ---------------------------------------------------------------

ALL_DTYPES = [mx.bool_, mx.uint8, mx.uint16, mx.uint32, mx.uint64, mx.int8,
              mx.int16, mx.int32, mx.int64, mx.float16, mx.bfloat16,
              mx.float32, mx.float64, mx.complex64]
INT_DTYPES = [mx.uint8, mx.uint16, mx.uint32, mx.uint64, mx.int8, mx.int16,
              mx.int32, mx.int64]
FLOAT_DTYPES = [mx.float16, mx.bfloat16, mx.float32, mx.float64]
REAL_DTYPES = [mx.bool_] + INT_DTYPES + FLOAT_DTYPES

NP = {
    mx.bool_: np.bool_, mx.uint8: np.uint8, mx.uint16: np.uint16,
    mx.uint32: np.uint32, mx.uint64: np.uint64, mx.int8: np.int8,
    mx.int16: np.int16, mx.int32: np.int32, mx.int64: np.int64,
    mx.float16: np.float16, mx.bfloat16: np.float32, mx.float32: np.float32,
    mx.float64: np.float64, mx.complex64: np.complex64,
}


def is_float(t):
    return t in FLOAT_DTYPES


def is_int(t):
    return t in INT_DTYPES


# --- shapes ---------------------------------------------------------------

def shapes(min_dims=0, max_dims=6, min_side=0, max_side=5, max_size=720):
    """Shapes of 0-D to 6-D with sides 0..5 (0-size arrays included),
    at most max_size elements."""
    return st.lists(st.integers(min_side, max_side), min_size=min_dims,
                    max_size=max_dims).map(tuple).filter(
                        lambda s: math.prod(s) <= max_size)


@st.composite
def broadcastable_pair(draw, max_dims=5):
    """Two shapes that broadcast together (sides of one may be 1 or
    missing), or, one time in eight, two that may not."""
    out = draw(shapes(0, max_dims, max_side=4))
    if draw(st.integers(0, 7)) == 0:
        return out, draw(shapes(0, max_dims, max_side=4))
    a, b = list(out), list(out)
    for s in (a, b):
        for i in range(len(s)):
            if draw(st.booleans()) and draw(st.booleans()):
                s[i] = 1
    cut = draw(st.integers(0, len(b)))
    return tuple(a), tuple(b[cut:])


# --- values ---------------------------------------------------------------

SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0]


def np_values(shape, dtype, seed, specials=0, scale=None, low=None, high=None):
    """Values for a Fluxion dtype, in the NumPy dtype that holds them
    exactly (bfloat16 as float32 rounded to bfloat16)."""
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    if dtype == mx.bool_:
        v = rng.random(shape) < 0.5
    elif is_int(dtype):
        info = np.iinfo(NP[dtype])
        lo = info.min if low is None else max(int(low), info.min)
        hi = info.max if high is None else min(int(high), info.max)
        if low is None and high is None and rng.random() < 0.7:
            lo, hi = max(lo, -20), min(hi, 20)  # small values most of the time
        v = rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64
                         if hi <= 2**63 - 1 else np.uint64).astype(NP[dtype])
    else:
        if low is not None:
            v = rng.uniform(low, high, size=shape)
        else:
            s = scale if scale is not None else rng.choice(
                [1.0, 3.0, 100.0, 1e5])
            v = rng.standard_normal(shape) * s
        if dtype == mx.complex64:
            v = v + 1j * rng.standard_normal(shape)
        v = v.astype(NP[dtype])
        if specials and n:
            flat = v.reshape(-1)
            for _ in range(specials):
                flat[rng.integers(n)] = SPECIALS[rng.integers(len(SPECIALS))]
        if dtype == mx.bfloat16:
            v = np.array(mx.array(v).astype(mx.bfloat16).astype(mx.float32))
        if dtype == mx.float16:
            v = v.astype(np.float16)
    return np.asarray(v).reshape(shape)


def to_mx(v, dtype):
    if dtype == mx.bfloat16:
        return mx.array(v.astype(np.float32)).astype(mx.bfloat16)
    return mx.array(v, dtype=dtype)


LAYOUTS = ["contiguous", "transposed", "strided", "reversed", "broadcast",
           "sliced"]


def with_layout(v, dtype, layout):
    """An mx array with values v (NumPy) laid out as a view of another
    array: transposed, strided (every other element), reversed, broadcast
    (a stride-0 axis) or an offset slice. The NumPy view returned holds
    the same values."""
    if layout == "transposed" and v.ndim >= 2:
        base = np.ascontiguousarray(np.swapaxes(v, -1, -2))
        return mx.swapaxes(to_mx(base, dtype), -1, -2), v
    if layout == "strided" and v.ndim >= 1:
        base = np.repeat(v, 2, axis=-1)
        return to_mx(base, dtype)[..., ::2], v
    if layout == "reversed" and v.ndim >= 1:
        base = np.ascontiguousarray(np.flip(v, 0))
        return to_mx(base, dtype)[::-1], v
    if layout == "broadcast" and v.ndim >= 1 and v.shape[0] > 0:
        row = v[:1]
        if (v == row).all() or v.shape[0] == 1:
            return mx.broadcast_to(to_mx(row, dtype), v.shape), v
        v = np.broadcast_to(row, v.shape).copy()
        return mx.broadcast_to(to_mx(row, dtype), v.shape), v
    if layout == "sliced" and v.ndim >= 1:
        pad = np.concatenate([v[:1], v, v[-1:]], axis=0) if v.shape[0] else v
        if v.shape[0] == 0:
            return to_mx(v, dtype), v
        return to_mx(pad, dtype)[1:-1], v
    return to_mx(v, dtype), v


@st.composite
def arrays(draw, dtypes=ALL_DTYPES, shape=None, specials=True, layouts=True,
           **shape_kwargs):
    """(mx array, NumPy values, dtype): values of any dtype and shape with
    NaN/inf/-0 among floats, laid out as contiguous arrays or views."""
    dtype = draw(st.sampled_from(dtypes))
    shp = draw(shapes(**shape_kwargs)) if shape is None else shape
    seed = draw(st.integers(0, 2**32 - 1))
    nspec = draw(st.integers(0, 3)) if specials and draw(st.booleans()) else 0
    layout = draw(st.sampled_from(LAYOUTS)) if layouts else "contiguous"
    v = np_values(shp, dtype, seed, nspec)
    x, v = with_layout(v, dtype, layout)
    return x, v, dtype


def np_of(x):
    """NumPy values of an mx array (bfloat16 as float32)."""
    if x.dtype == mx.bfloat16:
        x = x.astype(mx.float32)
    return np.array(x)


# --- comparison -----------------------------------------------------------

TOL = {mx.float16: 4e-3, mx.bfloat16: 3e-2, mx.float32: 2e-5,
       mx.float64: 1e-12, mx.complex64: 2e-5}


def assert_matches(got, expected, dtype=None, rtol=None, atol=None,
                   what=""):
    """got (an mx array) equals expected (NumPy): same shape, same NaN
    positions, exact for integers and bools, within the dtype's tolerance
    for floats."""
    g = np_of(got) if isinstance(got, mx.array) else np.asarray(got)
    e = np.asarray(expected)
    assert g.shape == e.shape, f"{what}: shape {g.shape} != {e.shape}"
    t = dtype if dtype is not None else (
        got.dtype if isinstance(got, mx.array) else None)
    if e.dtype == np.bool_ or np.issubdtype(e.dtype, np.integer) or \
            t is not None and not is_float(t) and t != mx.complex64:
        np.testing.assert_array_equal(g, e.astype(g.dtype), err_msg=what)
        return
    r = TOL.get(t, 2e-5) if rtol is None else rtol
    a = r if atol is None else atol
    np.testing.assert_allclose(g.astype(e.dtype) if g.dtype != e.dtype else g,
                               e, rtol=r, atol=a, equal_nan=True, err_msg=what)


# --- errors ---------------------------------------------------------------

# The exception types the API may raise for bad input, as MLX's bindings do:
# ValueError (invalid_argument), IndexError (out_of_range), TypeError and
# OverflowError (argument conversion), RuntimeError (failures at eval),
# MemoryError (an allocation that cannot be satisfied).
DOCUMENTED_ERRORS = (ValueError, IndexError, TypeError, OverflowError,
                     RuntimeError, MemoryError)


def check_error(e, op=None):
    """An exception raised for bad input is a documented type, and a
    ValueError/IndexError/RuntimeError/MemoryError message starts with the
    "[op]" tag (of the op or of the op it is built from) unless it comes
    from Python itself."""
    assert isinstance(e, DOCUMENTED_ERRORS), f"{op}: {type(e).__name__}: {e}"
    if isinstance(e, (TypeError, OverflowError)):
        return
    msg = str(e)
    assert msg.startswith("["), f"{op}: message names no op: {msg!r}"


# --- isolated runs --------------------------------------------------------

HERE = os.path.dirname(os.path.abspath(__file__))


def limit_address_space(nbytes):
    """Bound what a fuzz child can allocate, so that a shape that asks for
    terabytes fails as an allocation (a MemoryError naming the op) instead
    of exhausting the machine. Under AddressSanitizer (make test-asan) an
    address-space limit leaves no room for the runtime's shadow memory, so
    the runtime's own bound applies instead: make test-asan sets
    max_allocation_size_mb and allocator_may_return_null."""
    if "ASAN_OPTIONS" in os.environ:
        return
    resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))


def run_isolated(module, func, args, timeout, count_cases=True):
    """Run fuzz_<module>.<func>(**args) in a child Python, so that a crash
    or a hang is a failure of the calling test rather than the end of the
    session. The child logs each case before running it; on a crash or a
    timeout the last logged case is reported. Returns the child's JSON
    result (which includes its executed case count)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "cases.log")
        out = os.path.join(tmp, "result.json")
        env = dict(os.environ)
        pkg = os.path.dirname(os.path.dirname(os.path.abspath(mx.__file__)))
        env["PYTHONPATH"] = os.pathsep.join(
            [HERE, pkg] + [os.path.abspath(p) for p in env.get(
                "PYTHONPATH", "").split(os.pathsep) if p])
        code = (f"import json, {module} as m; "
                f"r = m.{func}(log={log!r}, workdir={tmp!r}, **{args!r}); "
                f"json.dump(r, open({out!r}, 'w'))")
        try:
            proc = subprocess.run([sys.executable, "-c", code], env=env,
                                  cwd=tmp, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(
                f"{module}.{func} hung (no result after {timeout} s); last "
                f"case:\n{last_case(log)}\nstderr:\n{tail(e.stderr)}")
        if proc.returncode != 0:
            how = (f"crashed (signal {-proc.returncode})"
                   if proc.returncode < 0 else f"failed (rc {proc.returncode})")
            raise AssertionError(
                f"{module}.{func} {how}; last case:\n{last_case(log)}\n"
                f"stdout:\n{tail(proc.stdout)}\nstderr:\n{tail(proc.stderr)}")
        with open(out) as f:
            result = json.load(f)
    if count_cases:
        CASES[f"{module}::{func}"] += result.get("cases", 0)
    return result


def tail(text, n=6000):
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return (text or "")[-n:]


def last_case(log):
    try:
        with open(log) as f:
            lines = f.read().splitlines()
        return "\n".join(lines[-3:])
    except OSError:
        return "(none logged)"


class CaseLog:
    """The child's log of cases: each line is written and flushed before the
    case runs, so the last line names the case that crashed or hung."""

    def __init__(self, path):
        self.f = open(path, "w") if path else None
        self.count = 0

    def __call__(self, text):
        self.count += 1
        if self.f:
            self.f.write(f"{self.count}: {text}\n")
            self.f.flush()
