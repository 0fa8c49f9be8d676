"""Property-based fuzzing of the ops against NumPy (issue 17): random shapes
(0-size, 0-d, up to 6-D, broadcastable and not), every dtype, axes and
indices in and out of range, NaN/inf/-0, and inputs that are transposed,
strided, reversed, broadcast or offset views. Each case either equals
NumPy's result computed in Fluxion's result dtype (MLX's promotion rules
differ from NumPy's, e.g. sum(int8) is int32 and int / int is float32), or
raises a documented exception whose message names the op. Budgets and
reproduction: fuzz_support.py."""

import math

import numpy as np
import pytest
import scipy.special
from hypothesis import assume
from hypothesis import strategies as st

import fluxion.core as mx
from fuzz_support import (ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, NP,
                          REAL_DTYPES, arrays, assert_matches,
                          broadcastable_pair, check_error, fuzz, is_float,
                          is_int, np_of, np_values, shapes, with_layout)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

FLOATS = set(FLOAT_DTYPES) | {mx.complex64}


def ref_dtype(t):
    """The NumPy dtype a reference is computed in for Fluxion dtype t
    (half types in float32, floats in float64 for accuracy)."""
    if t == mx.complex64:
        return np.complex128
    if is_float(t):
        return np.float64
    return NP[t]


def expect(fn, *args, **kwargs):
    """Call fn; return (result, None) or (None, exception) after checking
    that an exception is of a documented type and names the op."""
    try:
        out = fn(*args, **kwargs)
        mx.eval(out)
        return out, None
    except Exception as e:  # noqa: BLE001 - checked below
        check_error(e, getattr(fn, "__name__", fn))
        return None, e


def round_to(e, t):
    """A float64/complex128 reference rounded to Fluxion dtype t, so that
    overflow to inf (exp(100) in float32, sinh(-13) in float16) matches."""
    e = np.asarray(e)
    with np.errstate(all="ignore"):
        if t == mx.bfloat16:
            return np_of(mx.array(e.astype(np.float32)).astype(mx.bfloat16))
        if t in FLOATS:
            return e.astype(NP[t])
    return e


def float_tol(t, scale=1.0):
    r = {mx.float16: 2e-3, mx.bfloat16: 1.6e-2, mx.float32: 2e-5,
         mx.float64: 1e-11, mx.complex64: 5e-5}.get(t, 0)
    return r, r * scale


# --- unary elementwise ----------------------------------------------------

def _erfinv(x):
    return scipy.special.erfinv(x)


UNARY = {
    # name: (NumPy reference on values in the result dtype, domain of the
    # inputs that must succeed: "num" = every non-bool numeric dtype,
    # "float", "int" (with bool), "any")
    "abs": (np.abs, "num"),
    "negative": (np.negative, "num"),
    "positive": (lambda x: x, "any"),
    "sign": (np.sign, "num"),
    "square": (np.square, "num"),
    "sqrt": (np.sqrt, "float"),
    "rsqrt": (lambda x: 1 / np.sqrt(x), "float"),
    "reciprocal": (lambda x: 1 / x, "float"),
    "exp": (np.exp, "float"),
    "expm1": (np.expm1, "float"),
    "log": (np.log, "float"),
    "log2": (np.log2, "float"),
    "log10": (np.log10, "float"),
    "log1p": (np.log1p, "float"),
    "sin": (np.sin, "float"),
    "cos": (np.cos, "float"),
    "tan": (np.tan, "float"),
    "arcsin": (np.arcsin, "float"),
    "arccos": (np.arccos, "float"),
    "arctan": (np.arctan, "float"),
    "sinh": (np.sinh, "float"),
    "cosh": (np.cosh, "float"),
    "tanh": (np.tanh, "float"),
    "arcsinh": (np.arcsinh, "float"),
    "arccosh": (np.arccosh, "float"),
    "arctanh": (np.arctanh, "float"),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), "float"),
    "erf": (scipy.special.erf, "float"),
    "erfinv": (_erfinv, "float"),
    "floor": (np.floor, "real"),
    "ceil": (np.ceil, "real"),
    "round": (np.round, "real"),
    "trunc": (np.trunc, "real"),
    "degrees": (np.degrees, "float"),
    "radians": (np.radians, "float"),
    "isnan": (np.isnan, "any"),
    "isinf": (np.isinf, "any"),
    "isfinite": (np.isfinite, "any"),
    "isposinf": (np.isposinf, "real"),
    "isneginf": (np.isneginf, "real"),
    "logical_not": (np.logical_not, "any"),
    "bitwise_invert": (np.invert, "int"),
    "conjugate": (np.conjugate, "any"),
    "real": (np.real, "any"),
    "imag": (np.imag, "any"),
    "stop_gradient": (lambda x: x, "any"),
    "copy": (lambda x: x, "any"),
    "nan_to_num": (None, "any"),
}

# Functions whose complex results follow different branch and overflow
# conventions from NumPy's at large or special arguments: compared on
# moderate finite values only.
COMPLEX_MODERATE = {"exp", "expm1", "sinh", "cosh", "tanh", "tan", "sin",
                    "cos", "sigmoid"}
# Not defined for complex inputs (MLX raises).
NO_COMPLEX = {"erf", "erfinv", "floor", "ceil", "trunc", "isposinf",
              "isneginf", "degrees", "radians", "bitwise_invert",
              "arcsinh", "arccosh", "arctanh", "arcsin", "arccos", "arctan",
              "log1p", "expm1", "log2", "log10", "round", "sign", "rsqrt"}


def must_succeed(domain, t):
    if domain == "any":
        return True
    if domain == "num":
        return t != mx.bool_
    if domain == "real":
        return t != mx.complex64
    if domain == "float":
        return is_float(t)
    if domain == "int":
        return is_int(t) or t == mx.bool_
    return False


@fuzz(2500, st.sampled_from(sorted(UNARY)), arrays())
def test_unary_ops_match_numpy(name, arr):
    x, v, t = arr
    ref, domain = UNARY[name]
    if t == mx.complex64 and name in COMPLEX_MODERATE | NO_COMPLEX:
        v = np.clip(np.nan_to_num(v.real), -5, 5) + 1j * np.clip(
            np.nan_to_num(v.imag), -5, 5)
        x = mx.array(v.astype(np.complex64))
    out, err = expect(getattr(mx, name), x)
    if err is not None:
        assert not must_succeed(domain, t) or (
            t == mx.complex64 and name in NO_COMPLEX), (name, t, err)
        return
    assert out.shape == x.shape
    ot = out.dtype
    if name == "nan_to_num":
        if not is_float(ot):
            assert_matches(out, v)
            return
        info = np.finfo(NP[ot] if ot != mx.bfloat16 else np.float32)
        big = float(mx.finfo(ot).max)
        e = np.nan_to_num(v.astype(np.float64), nan=0.0, posinf=big,
                          neginf=-big)
        assert_matches(out, e, ot)
        del info
        return
    # The reference: NumPy on the input values converted to the result
    # dtype (MLX promotes ints and bools to float32 for float functions).
    if name in ("isnan", "isinf", "isfinite", "isposinf", "isneginf",
                "logical_not", "real", "imag") or t == mx.complex64 or (
                    ot not in FLOATS):
        src = v.astype(np.float32) if t == mx.bfloat16 else v
    else:
        src = v.astype(NP[ot]) if ot != mx.bfloat16 else v.astype(np.float32)
        if ot == mx.bfloat16 or ot == mx.float16:
            src = src.astype(np.float32)
    with np.errstate(all="ignore"):
        if t == mx.complex64:
            wide = src.astype(np.complex128)
        else:
            wide = src.astype(ref_dtype(ot)) if ot in FLOATS else src
        if ot not in FLOATS and name in ("floor", "ceil", "round", "trunc"):
            e = wide  # NumPy answers in float64; integers are unchanged
        else:
            try:
                e = np.asarray(ref(wide))
            except TypeError:
                return  # NumPy has no such loop (sign of bool)
    if ot in FLOATS:
        r, a = float_tol(ot)
        if name in ("tan", "erfinv", "arctanh", "arccosh", "log1p",
                    "reciprocal", "rsqrt", "sigmoid"):
            r *= 4  # steep functions: the input's own rounding shows
        if t == mx.complex64:
            a = r * max(1.0, float(np.nanmax(np.abs(e), initial=0)))
        assert_matches(out, round_to(e, ot), ot, rtol=r, atol=a,
                       what=f"{name}({t})")
    else:
        assert_matches(out, e.astype(np_of(out).dtype), what=f"{name}({t})")


# --- binary elementwise ---------------------------------------------------

def np_floor_divide(a, b):
    # Fluxion follows NumPy's divmod-based floor division for floats
    # (1.0 // 0.1 == 9), not floor(a / b).
    return np.floor_divide(a, b)


def np_shift(op):
    def f(a, b):
        bits = a.dtype.itemsize * 8
        b64 = b.astype(np.int64)
        ok = (b64 >= 0) & (b64 < bits)
        shifted = op(a, np.where(ok, b, 0).astype(a.dtype))
        if op is np.right_shift and np.issubdtype(a.dtype, np.signedinteger):
            fill = np.where(a < 0, -1, 0).astype(a.dtype)
        else:
            fill = np.zeros_like(a)
        return np.where(ok, shifted, fill)

    return f


BINARY = {
    # name: (reference, dtype kinds that must succeed: "num", "float", "int",
    # "any", "real")
    "add": (np.add, "any"),
    "subtract": (np.subtract, "num"),
    "multiply": (np.multiply, "any"),
    "divide": (np.divide, "any"),
    "floor_divide": (np_floor_divide, "numreal"),
    "remainder": (np.remainder, "numreal"),
    "power": (np.power, "num"),
    "maximum": (np.maximum, "real"),
    "minimum": (np.minimum, "real"),
    "arctan2": (np.arctan2, "realfloat"),
    "logaddexp": (np.logaddexp, "realfloat"),
    "equal": (np.equal, "any"),
    "not_equal": (np.not_equal, "any"),
    "less": (np.less, "real"),
    "less_equal": (np.less_equal, "real"),
    "greater": (np.greater, "real"),
    "greater_equal": (np.greater_equal, "real"),
    "logical_and": (np.logical_and, "any"),
    "logical_or": (np.logical_or, "any"),
    "logical_xor": (np.logical_xor, "any"),
    "bitwise_and": (np.bitwise_and, "int"),
    "bitwise_or": (np.bitwise_or, "int"),
    "bitwise_xor": (np.bitwise_xor, "int"),
    "left_shift": (np_shift(np.left_shift), "int"),
    "right_shift": (np_shift(np.right_shift), "int"),
}
BOOL_RESULT = {"equal", "not_equal", "less", "less_equal", "greater",
               "greater_equal", "logical_and", "logical_or", "logical_xor"}


def binary_must_succeed(kind, ta, tb, tr):
    if kind == "any":
        return True
    if kind in ("num", "numreal"):
        if kind == "numreal" and tr == mx.complex64:
            return False
        return not (ta == mx.bool_ and tb == mx.bool_) or kind == "num" and False
    if kind == "real":
        return tr != mx.complex64
    if kind == "realfloat":
        return tr != mx.complex64
    if kind == "int":
        return is_int(tr) or tr == mx.bool_
    return False


@st.composite
def binary_case(draw):
    sa, sb = draw(broadcastable_pair())
    a = draw(arrays(shape=sa))
    b = draw(arrays(shape=sb))
    scalar = draw(st.integers(0, 9))
    return a, b, scalar


@fuzz(3000, st.sampled_from(sorted(BINARY)), binary_case())
def test_binary_ops_match_numpy(name, case):
    (x, v, ta), (y, w, tb), scalar = case
    ref, kind = BINARY[name]
    if scalar == 0 and w.size:
        # A weak Python scalar operand takes the array's dtype (MLX).
        py = w.reshape(-1)[0].item()
        if isinstance(py, float) and not math.isfinite(py):
            py = 2.5
        y, w, tb = py, None, None
    try:
        tr = mx.result_type(x, y)
    except Exception as e:  # noqa: BLE001
        check_error(e, "result_type")
        return
    out, err = expect(getattr(mx, name), x, y)
    if err is not None:
        if w is not None:
            try:
                np.broadcast_shapes(v.shape, w.shape)
            except ValueError:
                assert isinstance(err, ValueError), err
                return
        assert not binary_must_succeed(kind, ta, tb or tr, tr) or (
            name in ("power", "subtract") and tr == mx.bool_), (
                name, ta, tb, err)
        return
    if w is None:
        w = np.array(y)
    assert out.shape == np.broadcast_shapes(v.shape, w.shape)
    ot = out.dtype
    ct = tr if (name in BOOL_RESULT or ot == mx.bool_) else ot
    npt = np.float32 if ct in (mx.bfloat16, mx.float16) else NP[ct]
    av, bv = v.astype(npt), w.astype(npt)
    if ct == mx.bfloat16 or ct == mx.float16:
        # The operands as the half type holds them.
        av = np_of(to_half(av, ct))
        bv = np_of(to_half(bv, ct))
    if name == "power" and is_int(ct) and (bv < 0).any():
        return  # NumPy refuses negative integer powers; MLX gives 0
    if name == "power" and ct == mx.complex64 and (av == 0).any():
        return  # 0 ** z: NumPy gives nan, Python and Fluxion 0 (Re z > 0)
    if name in ("left_shift", "right_shift") and ct == mx.bool_:
        return
    with np.errstate(all="ignore"):
        try:
            if ct in FLOATS:
                e = ref(av.astype(ref_dtype(ct)), bv.astype(ref_dtype(ct)))
            else:
                e = ref(av, bv)
        except TypeError:
            return  # NumPy has no such loop (bool - bool)
    e = np.asarray(e)
    if ot in FLOATS:
        r, a = float_tol(ot)
        if name in ("power", "divide", "floor_divide", "remainder"):
            # Results that amplify the operands' rounding or compute in
            # float: compare relative to the operands' magnitude too.
            r *= 4
            a = r * max(1.0, float(np.nanmax(np.abs(np.where(
                np.isfinite(e), e, 0)), initial=0)))
            if name in ("floor_divide", "remainder"):
                # A quotient within rounding of an integer floors either
                # way: accept the neighbouring result.
                g = np_of(out).astype(np.float64)
                if name == "floor_divide":
                    near = np.isclose(g, e, rtol=r, atol=1.0 + a)
                else:
                    near = np.isclose(g, e, rtol=r, atol=a) | np.isclose(
                        np.abs(g - e), np.abs(bv.astype(np.float64)),
                        rtol=1e-3)
                near |= np.isnan(g) & np.isnan(e)
                assert near.all(), (name, av, bv, g, e)
                return
        if t_complex(ot):
            a = r * max(1.0, float(np.nanmax(np.abs(e), initial=0)))
        assert_matches(out, round_to(e, ot), ot, rtol=r, atol=a,
                       what=f"{name}({ta},{tb})")
    else:
        assert_matches(out, e.astype(np_of(out).dtype), what=name)


def t_complex(t):
    return t == mx.complex64


def to_half(vals, t):
    return mx.array(vals.astype(np.float32)).astype(t)


# --- reductions -----------------------------------------------------------

def axis_arg(draw, ndim):
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return None
    if kind <= 2:
        return draw(st.integers(-ndim - 2, ndim + 1))
    n = draw(st.integers(0, ndim + 1))
    return draw(st.lists(st.integers(-ndim - 1, ndim), min_size=n,
                         max_size=n))


def valid_axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axes = [axis] if isinstance(axis, int) else list(axis)
    norm = []
    for a in axes:
        if a < -ndim or a >= ndim:
            return None
        norm.append(a % ndim)
    if len(set(norm)) != len(norm):
        return None
    return tuple(norm)


def np_argreduce(fn):
    def f(x, axis, keepdims):
        # NumPy's argmax/argmin stop at the first NaN; so does Fluxion.
        return fn(x, axis=axis, keepdims=keepdims)
    return f


REDUCE = {
    "sum": lambda x, ax, kd, t: np.sum(x, axis=ax, keepdims=kd, dtype=t),
    "prod": lambda x, ax, kd, t: np.prod(x, axis=ax, keepdims=kd, dtype=t),
    "max": lambda x, ax, kd, t: np.max(x, axis=ax, keepdims=kd),
    "min": lambda x, ax, kd, t: np.min(x, axis=ax, keepdims=kd),
    "mean": lambda x, ax, kd, t: np.mean(x, axis=ax, keepdims=kd, dtype=t),
    "all": lambda x, ax, kd, t: np.all(x, axis=ax, keepdims=kd),
    "any": lambda x, ax, kd, t: np.any(x, axis=ax, keepdims=kd),
    "logsumexp": lambda x, ax, kd, t: scipy.special.logsumexp(
        x, axis=ax, keepdims=kd),
    "var": lambda x, ax, kd, t: np.var(x, axis=ax, keepdims=kd, dtype=t),
    "std": lambda x, ax, kd, t: np.std(x, axis=ax, keepdims=kd, dtype=t),
}


@st.composite
def reduce_case(draw):
    arr = draw(arrays(dtypes=REAL_DTYPES + [mx.complex64]))
    axis = axis_arg(draw, arr[0].ndim)
    keepdims = draw(st.booleans())
    return arr, axis, keepdims


@fuzz(2500, st.sampled_from(sorted(REDUCE)), reduce_case())
def test_reductions_match_numpy(name, case):
    (x, v, t), axis, keepdims = case
    if name == "prod" and t == mx.complex64 and not np.isfinite(v).all():
        # Complex products of infinities: C++ (Annex G) recovers an
        # infinity where NumPy's naive formula gives nan; both are right.
        return
    out, err = expect(getattr(mx, name), x, axis=axis, keepdims=keepdims)
    axes = valid_axes(axis, x.ndim)
    if err is not None:
        empty_extremum = name in ("max", "min") and any(
            v.shape[a] == 0 for a in (axes or ()))
        complex_order = t == mx.complex64 and name in ("max", "min", "var",
                                                      "std", "logsumexp")
        assert axes is None or empty_extremum or complex_order or (
            name == "logsumexp" and not is_float(t)), (name, t, axis, err)
        if axes is None:
            assert isinstance(err, (ValueError, IndexError)), err
        return
    assert axes is not None, f"{name} accepted invalid axis {axis} for {x.shape}"
    ot = out.dtype
    if ot in FLOATS:
        wide = v.astype(np.complex128 if t == mx.complex64 else np.float64)
        if is_float(t) and ot in FLOAT_DTYPES:
            wide = np_of(x.astype(ot)).astype(wide.dtype)
        n = math.prod(v.shape[a] for a in axes)
        with np.errstate(all="ignore"):
            if name == "logsumexp" and n == 0:
                e = np.full(np.sum(wide, axis=axes, keepdims=keepdims).shape,
                            -np.inf)
            else:
                e = REDUCE[name](wide, axes, keepdims, wide.dtype)
        n = max(1, n)
        r, _ = float_tol(ot)
        mag = np.nan_to_num(np.abs(wide), posinf=0)
        scale = float(np.max(mag, initial=0))
        if name in ("sum", "mean", "var", "std"):
            scale = scale * (1 if name == "mean" else n) if name != "var" \
                else scale * scale
        if name == "prod":
            r = r * n  # the rounding of each product accumulates
            scale = 0.0
        a = r * max(1.0, scale) * (4 if name in ("var", "std") else 1)
        assert_matches(out, round_to(e, ot), ot, rtol=r * 4, atol=a,
                       what=f"{name}({t}, {axis})")
    else:
        npt = NP[ot]
        with np.errstate(all="ignore"):
            e = REDUCE[name](v.astype(npt) if name not in ("all", "any")
                             else v, axes, keepdims, npt)
        assert_matches(out, np.asarray(e).astype(npt), what=name)


@fuzz(800, st.sampled_from(["argmax", "argmin"]),
      arrays(dtypes=REAL_DTYPES), st.data())
def test_argreductions_match_numpy(name, arr, data):
    x, v, t = arr
    axis = data.draw(st.one_of(st.none(), st.integers(-x.ndim - 1, x.ndim)))
    kd = data.draw(st.booleans())
    out, err = expect(getattr(mx, name), x, axis=axis, keepdims=kd)
    ok_axis = axis is None or -x.ndim <= axis < x.ndim
    empty = v.size == 0 if axis is None else (ok_axis and x.ndim and
                                              v.shape[axis] == 0)
    if err is not None:
        assert not ok_axis or empty or (x.ndim == 0 and axis is not None), err
        return
    assert ok_axis and not empty, (name, axis, x.shape)
    fn = getattr(np, name)
    vv = v.astype(np.float32) if t == mx.bfloat16 else v
    if axis is None:
        e = fn(vv.reshape(-1))
        e = np.reshape(e, (1,) * x.ndim) if kd else e
    else:
        e = fn(vv, axis=axis, keepdims=kd)
    assert_matches(out, np.asarray(e).astype(np.uint32), what=name)


# --- scans ----------------------------------------------------------------

SCANS = {
    "cumsum": lambda x, ax: np.cumsum(x, axis=ax, dtype=x.dtype),
    "cumprod": lambda x, ax: np.cumprod(x, axis=ax, dtype=x.dtype),
    "cummax": lambda x, ax: np.maximum.accumulate(x, axis=ax),
    "cummin": lambda x, ax: np.minimum.accumulate(x, axis=ax),
    "logcumsumexp": lambda x, ax: np.logaddexp.accumulate(x, axis=ax),
}


@fuzz(1200, st.sampled_from(sorted(SCANS)), arrays(dtypes=REAL_DTYPES,
                                                   max_dims=4), st.data())
def test_scans_match_numpy(name, arr, data):
    x, v, t = arr
    axis = data.draw(st.one_of(st.none(), st.integers(-x.ndim - 1, x.ndim)))
    reverse = data.draw(st.booleans())
    inclusive = data.draw(st.booleans())
    out, err = expect(getattr(mx, name), x, axis=axis, reverse=reverse,
                      inclusive=inclusive)
    ok_axis = axis is None or -x.ndim <= axis < x.ndim
    if err is not None:
        assert not ok_axis or (name == "logcumsumexp" and not is_float(t)) or (
            x.ndim == 0 and axis is not None), (name, t, axis, err)
        return
    assert ok_axis, (name, axis, x.shape)
    ot = out.dtype
    src = v.reshape(-1) if axis is None else v
    ax = 0 if axis is None else axis % max(x.ndim, 1)
    npt = np.float64 if ot in FLOATS else NP[ot]
    s = src.astype(npt) if ot not in (mx.bfloat16, mx.float16) else \
        np_of(x.astype(ot)).reshape(src.shape).astype(np.float64)
    if src.ndim == 0:
        s = s.reshape(1)
    if reverse:
        s = np.flip(s, ax)
    with np.errstate(all="ignore"):
        e = SCANS[name](s, ax)
    if not inclusive:
        ident = {"cumsum": 0, "cumprod": 1, "cummax": None, "cummin": None,
                 "logcumsumexp": -np.inf}[name]
        if ident is None:
            return  # exclusive max/min: the first element is undefined
        e = np.concatenate([np.full_like(np.take(e, [0], ax), ident),
                            np.delete(e, -1, ax) if e.shape[ax] else e],
                           axis=ax) if e.shape[ax] else e
    if reverse:
        e = np.flip(e, ax)
    if ot in FLOATS:
        n = max(1, s.shape[ax] if s.ndim else 1)
        r, _ = float_tol(ot)
        scale = float(np.max(np.nan_to_num(np.abs(s), posinf=0), initial=0))
        a = r * max(1.0, scale) * n
        if name == "cumprod":
            r, a = r * n, r * n
        assert_matches(out, e.reshape(out.shape), ot, rtol=r * 4, atol=a,
                       what=name)
    else:
        assert_matches(out, e.astype(NP[ot]).reshape(out.shape), what=name)


# --- shape ops ------------------------------------------------------------

@st.composite
def perm_or_bad(draw, ndim):
    p = draw(st.permutations(range(ndim)))
    k = draw(st.integers(0, 7))
    if k == 0 and ndim:
        p = list(p)
        p[0] = draw(st.sampled_from([ndim, -ndim - 1, p[-1]]))
    elif k == 1:
        p = list(p)[:-1] if ndim else [0]
    return list(p)


SHAPE_OPS = ["reshape", "transpose", "swapaxes", "moveaxis", "expand_dims",
             "squeeze", "flatten", "broadcast_to", "flip", "roll", "tile",
             "repeat", "diagonal", "tril", "triu", "pad", "split",
             "concatenate", "stack", "take", "take_along_axis", "sort",
             "argsort", "topk", "partition", "clip", "where", "trace",
             "unflatten", "atleast_3d", "diag", "put_along_axis", "kron",
             "outer", "inner", "matmul", "tensordot", "searchsorted"]


def shape_case(name, data, x, v, t):
    """(fluxion call, NumPy reference or None when the call must raise)."""
    nd = x.ndim
    ax = lambda: data.draw(st.integers(-nd - 1, nd))  # noqa: E731
    in_range = lambda a: -nd <= a < nd  # noqa: E731
    d = data.draw
    if name == "reshape":
        shp = list(d(shapes(0, 4, max_side=6)))
        if shp and d(st.booleans()):
            shp[d(st.integers(0, len(shp) - 1))] = -1
        try:
            e = v.reshape(shp)
        except ValueError:
            e = None
        if shp.count(-1) == 1 and 0 in shp:
            e = None if e is None else e  # NumPy decides -1 next to 0
        return lambda: mx.reshape(x, shp), e
    if name == "transpose":
        p = d(perm_or_bad(nd))
        ok = sorted(a % nd for a in p if in_range(a)) == list(range(nd)) and \
            all(in_range(a) for a in p) and len(p) == nd
        return lambda: mx.transpose(x, p), v.transpose(p) if ok else None
    if name == "swapaxes":
        a, b = ax(), ax()
        ok = in_range(a) and in_range(b)
        return lambda: mx.swapaxes(x, a, b), np.swapaxes(v, a, b) if ok else None
    if name == "moveaxis":
        a, b = ax(), ax()
        ok = in_range(a) and in_range(b)
        return lambda: mx.moveaxis(x, a, b), np.moveaxis(v, a, b) if ok else None
    if name == "expand_dims":
        a = d(st.integers(-nd - 2, nd + 1))
        ok = -nd - 1 <= a <= nd
        return lambda: mx.expand_dims(x, a), np.expand_dims(v, a) if ok else None
    if name == "squeeze":
        a = d(st.one_of(st.none(), st.integers(-nd - 1, nd)))
        if a is None:
            return lambda: mx.squeeze(x), np.squeeze(v)
        ok = in_range(a) and v.shape[a] == 1
        return lambda: mx.squeeze(x, a), np.squeeze(v, a) if ok else None
    if name == "flatten":
        a, b = ax(), ax()
        na, nb = (a % nd if nd else 0), (b % nd if nd else 0)
        ok = (nd == 0 and a in (0, -1) and b in (0, -1)) or (
            in_range(a) and in_range(b) and na <= nb)
        if not ok:
            return lambda: mx.flatten(x, a, b), None
        if nd == 0:
            return lambda: mx.flatten(x, a, b), v.reshape(1)
        shp = v.shape[:na] + (math.prod(v.shape[na:nb + 1]),) + v.shape[nb + 1:]
        return lambda: mx.flatten(x, a, b), v.reshape(shp)
    if name == "broadcast_to":
        shp = d(shapes(0, 5, max_side=4))
        try:
            e = np.broadcast_to(v, shp)
        except ValueError:
            e = None
        return lambda: mx.broadcast_to(x, shp), e
    if name == "flip":
        a = d(st.one_of(st.none(), st.integers(-nd - 1, nd)))
        if a is None:
            return lambda: mx.flip(x), np.flip(v)
        return lambda: mx.flip(x, a), np.flip(v, a) if in_range(a) else None
    if name == "roll":
        sh = d(st.integers(-7, 7))
        a = d(st.one_of(st.none(), st.integers(-nd - 1, nd)))
        if a is None:
            return lambda: mx.roll(x, sh), np.roll(v, sh)
        return lambda: mx.roll(x, sh, a), np.roll(v, sh, a) if in_range(a) \
            else None
    if name == "tile":
        reps = d(st.lists(st.integers(0, 3), min_size=0, max_size=4))
        e = np.tile(v, reps)
        if e is not None and e.size > 5000:
            return lambda: mx.tile(x, reps), "skip"
        return lambda: mx.tile(x, reps), e
    if name == "repeat":
        r = d(st.integers(-1, 3))
        a = d(st.one_of(st.none(), st.integers(-nd - 1, nd)))
        ok = r >= 0 and (a is None or in_range(a))
        return lambda: mx.repeat(x, r, a), np.repeat(v, r, a) if ok else None
    if name == "diagonal":
        off = d(st.integers(-4, 4))
        a, b = ax(), ax()
        ok = nd >= 2 and in_range(a) and in_range(b) and a % nd != b % nd
        return lambda: mx.diagonal(x, off, a, b), \
            np.diagonal(v, off, a, b) if ok else None
    if name in ("tril", "triu"):
        k = d(st.integers(-4, 4))
        return lambda: getattr(mx, name)(x, k), \
            getattr(np, name)(v, k) if nd >= 2 else None
    if name == "pad":
        w = d(st.integers(0, 2))
        mode = d(st.sampled_from(["constant", "edge"]))
        ok = not (mode == "edge" and w and 0 in v.shape)
        return lambda: mx.pad(x, w, mode=mode), \
            np.pad(v, w, mode=mode) if ok else None
    if name == "split":
        k = d(st.integers(0, 4))
        a = d(st.integers(-nd - 1, nd)) if nd else 0
        if not in_range(a) or k <= 0 or v.shape[a] % k:
            return lambda: mx.split(x, k, a), None
        return lambda: mx.split(x, k, a), np.split(v, k, a)
    if name in ("concatenate", "stack"):
        a = d(st.integers(-nd - 2, nd + 1))
        other = v[::-1].copy() if nd else v
        y = mx.array(other, dtype=t) if t != mx.bfloat16 else \
            mx.array(other).astype(t)
        fn = getattr(np, name)
        try:
            e = fn([v, other], axis=a)
        except (ValueError, np.exceptions.AxisError if hasattr(
                np, "exceptions") else ValueError):
            e = None
        except Exception:  # noqa: BLE001 - NumPy's AxisError on 1.24
            e = None
        return lambda: getattr(mx, name)([x, y], axis=a), e
    if name in ("take", "take_along_axis"):
        a = d(st.one_of(st.none(), st.integers(-nd - 1, nd)))
        size = v.size if a is None else (v.shape[a] if in_range(a) else 0)
        idx_shape = d(shapes(0, 3, max_side=3)) if name == "take" else (
            tuple(s if i != (a % nd if nd and in_range(a) else -1) else
                  d(st.integers(0, 3)) for i, s in enumerate(v.shape))
            if a is not None else (d(st.integers(0, 3)),))
        hi = max(size, 1)
        idx = np.random.default_rng(d(st.integers(0, 99))).integers(
            -hi - 2, hi + 2, size=idx_shape)
        in_bounds = size > 0 and ((idx >= -size) & (idx < size)).all() or \
            idx.size == 0
        ok = (a is None or in_range(a)) and in_bounds
        i = mx.array(idx.astype(np.int32))
        if name == "take":
            e = np.take(v, idx, axis=a) if ok else None
            return lambda: mx.take(x, i, axis=a), e
        if a is None:
            e = np.take_along_axis(v.reshape(-1), idx, 0) if ok else None
            return lambda: mx.take_along_axis(x, i, axis=None), e
        try:
            e = np.take_along_axis(v, idx, a) if ok else None
        except (ValueError, IndexError):
            e = None
        return lambda: mx.take_along_axis(x, i, axis=a), e
    if name in ("sort", "argsort"):
        a = d(st.one_of(st.none(), st.integers(-nd - 1, nd)))
        ok = a is None or in_range(a)
        if t == mx.complex64:
            return lambda: getattr(mx, name)(x, axis=a), "skip"
        vv = v.astype(np.float32) if t == mx.bfloat16 else v
        if name == "sort":
            e = np.sort(vv, axis=a, kind="stable") if ok else None
        else:
            e = np.argsort(vv, axis=a, kind="stable").astype(np.uint32) \
                if ok else None
        return lambda: getattr(mx, name)(x, axis=a), e
    if name in ("topk", "partition"):
        a = d(st.integers(-nd - 1, nd)) if nd else -1
        n = v.shape[a] if nd and in_range(a) else 0
        k = d(st.integers(-1, n + 1))
        return lambda: (mx.topk(x, k, axis=a) if name == "topk" else
                        mx.partition(x, k, axis=a)), ("check", a, k, n)
    if name == "clip":
        lo = d(st.one_of(st.none(), st.floats(-3, 3)))
        hi = d(st.one_of(st.none(), st.floats(-3, 3)))
        return lambda: mx.clip(x, lo, hi), ("clip", lo, hi)
    if name == "where":
        cond = np.random.default_rng(d(st.integers(0, 99))).random(
            v.shape) < 0.5
        other = d(st.sampled_from([0, 1.5, -2]))
        return lambda: mx.where(mx.array(cond), x, other), ("where", cond,
                                                            other)
    if name == "trace":
        off = d(st.integers(-3, 3))
        ok = nd >= 2
        return lambda: mx.trace(x, off), ("trace", off) if ok else None
    if name == "unflatten":
        a = ax()
        if not in_range(a):
            return lambda: mx.unflatten(x, a, [1]), None
        size = v.shape[a]
        parts = [size, 1] if d(st.booleans()) else [-1, 1]
        shp = v.shape[:a % nd] + (size, 1) + v.shape[a % nd + 1:]
        return lambda: mx.unflatten(x, a, parts), v.reshape(shp)
    if name == "atleast_3d":
        return lambda: mx.atleast_3d(x), ("atleast_3d",)
    if name == "diag":
        k = d(st.integers(-3, 3))
        return lambda: mx.diag(x, k), np.diag(v, k) if nd in (1, 2) else None
    if name == "put_along_axis":
        if nd == 0:
            return lambda: mx.put_along_axis(x, mx.array([0]), x, 0), None
        a = d(st.integers(0, nd - 1))
        n = v.shape[a]
        ishape = tuple(1 if i == a else s for i, s in enumerate(v.shape))
        idx = np.random.default_rng(d(st.integers(0, 9))).integers(
            0, max(n, 1), size=ishape)
        if n == 0:
            return lambda: mx.put_along_axis(
                x, mx.array(idx.astype(np.int32)), x[tuple(
                    slice(0, 1) if i == a else slice(None)
                    for i in range(nd))], a), "skip"
        vals = np.take_along_axis(v, idx, a)
        e = v.copy()
        # Put each row's own value back: the result is the input.
        return lambda: mx.put_along_axis(x, mx.array(idx.astype(np.int32)),
                                         mx.take_along_axis(
                                             x, mx.array(idx.astype(
                                                 np.int32)), a), a), \
            e if vals.size else e
    if name in ("kron", "outer", "inner", "matmul", "tensordot"):
        other = np_values(v.shape[::-1], t, 1)
        y = mx.array(other, dtype=t) if t != mx.bfloat16 else \
            mx.array(other.astype(np.float32)).astype(t)
        return lambda: getattr(mx, name)(x, y), ("linear", other)
    if name == "searchsorted":
        if nd != 1 or t == mx.complex64:
            return lambda: mx.searchsorted(x, x), "skip"
        side = d(st.sampled_from(["left", "right"]))
        sv = np.sort(v.astype(np.float32) if t == mx.bfloat16 else v)
        xs = mx.sort(x)
        q = np.random.default_rng(d(st.integers(0, 9))).choice(
            np.concatenate([sv, [0]]).astype(sv.dtype), size=4)
        qa = mx.array(q, dtype=t) if t != mx.bfloat16 else \
            mx.array(q.astype(np.float32)).astype(t)
        if np.isnan(sv.astype(np.float64)).any() if sv.dtype.kind == "f" \
                else False:
            return lambda: mx.searchsorted(xs, qa, side=side), "skip"
        return lambda: mx.searchsorted(xs, qa, side=side), \
            np.searchsorted(sv, q, side=side).astype(np.uint32)
    raise AssertionError(name)


@fuzz(3500, st.sampled_from(SHAPE_OPS), arrays(max_side=4), st.data())
def test_shape_and_indexing_ops_match_numpy(name, arr, data):
    x, v, t = arr
    call, e = shape_case(name, data, x, v, t)
    out, err = expect(call)
    if isinstance(e, str) and e == "skip":
        return
    if err is not None:
        weak_int = (name == "where" and isinstance(err, ValueError) and
                    "does not fit in" in str(err))
        assert e is None or weak_int or (isinstance(e, tuple) and e[0] in (
            "check", "linear", "clip")), (name, x.shape, t, err)
        return
    if isinstance(e, tuple):
        check_special(name, e, x, v, t, out)
        return
    assert e is not None, f"{name} accepted an invalid call on {x.shape}"
    if isinstance(e, list):
        assert len(out) == len(e)
        for o, r in zip(out, e):
            assert_matches(o, r if t != mx.bfloat16 else r.astype(np.float32),
                           t, rtol=0, atol=0, what=name)
        return
    e = np.asarray(e)
    if name == "argsort":
        assert_matches(out, e, what=name)
        return
    assert_matches(out, e, out.dtype if out.dtype != t else t, rtol=0, atol=0,
                   what=f"{name}({t}, {x.shape})")


def check_special(name, e, x, v, t, out):
    kind = e[0]
    vv = v.astype(np.float32) if t == mx.bfloat16 else v
    if kind == "check":
        _, a, k, n = e
        if name == "partition":
            # NumPy's kth: negative counts from the end.
            assert -n <= k < n, (name, k, n)
            k %= n
        else:
            assert 0 <= k <= n, (name, k, n)
        g = np_of(out)
        if name == "partition":
            if t == mx.complex64:
                return
            # Everything before position k is <= the k-th, after is >=.
            kth = np.take(g, [k], a)
            ref = np.take(np.sort(vv, axis=a), [k], a)
            np.testing.assert_array_equal(
                np.nan_to_num(kth.astype(np.float64), nan=1e300),
                np.nan_to_num(ref.astype(np.float64), nan=1e300))
        else:
            if t == mx.complex64:
                return
            ref = np.take(np.sort(vv, axis=a), range(n - k, n), a)
            got = np.sort(g, axis=a)
            np.testing.assert_array_equal(got, ref)
        return
    if kind == "clip":
        _, lo, hi = e
        if lo is None and hi is None:
            return  # MLX raises; accepted above
        if t == mx.complex64:
            return
        ref = vv.astype(np.float64)
        if lo is not None:
            ref = np.where(ref < lo, lo, ref)
        if hi is not None:
            ref = np.where(ref > hi, hi, ref)
        ot = out.dtype
        rt = ref.astype(NP[ot]) if ot not in (mx.bfloat16,) else \
            np_of(mx.array(ref.astype(np.float32)).astype(ot))
        assert_matches(out, rt, ot, what="clip")
        return
    if kind == "where":
        _, cond, other = e
        ot = out.dtype
        ref = np.where(cond, vv.astype(np.float64) if ot in FLOATS else vv,
                       other)
        if ot in FLOATS:
            assert_matches(out, ref, ot, rtol=0, atol=0, what="where")
        else:
            assert_matches(out, ref.astype(NP[ot]), what="where")
        return
    if kind == "trace":
        off = e[1]
        ot = out.dtype
        ref = np.trace(vv.astype(np.float64 if ot in FLOATS else NP[ot]),
                       off, dtype=np.float64 if ot in FLOATS else NP[ot])
        r, _ = float_tol(ot)
        assert_matches(out, np.asarray(ref), ot, rtol=r * 4,
                       atol=r * max(1, float(np.nanmax(np.abs(np.nan_to_num(
                           vv.astype(np.float64))), initial=0))) * 8)
        return
    if kind == "atleast_3d":
        assert out.ndim == max(3, x.ndim)
        assert_matches(out.reshape(-1) if True else out, vv.reshape(-1), t,
                       rtol=0, atol=0)
        return
    if kind == "linear":
        other = e[1]
        ot = out.dtype
        w = other.astype(np.float32) if t == mx.bfloat16 else other
        fn = {"kron": np.kron, "outer": np.outer, "inner": np.inner,
              "matmul": np.matmul, "tensordot": np.tensordot}[name]
        wide = np.complex128 if ot == mx.complex64 else (
            np.float64 if ot in FLOATS else NP[ot])
        try:
            with np.errstate(all="ignore"):
                ref = fn(vv.astype(wide), w.astype(wide))
        except ValueError:
            raise AssertionError(f"{name} accepted {x.shape} and {w.shape}")
        if ot in FLOATS:
            k = max(1, x.shape[-1] if x.ndim else 1)
            r, _ = float_tol(ot)
            mag = float(np.max(np.nan_to_num(np.abs(vv.astype(np.complex128)),
                                             posinf=0), initial=0))
            mag2 = float(np.max(np.nan_to_num(np.abs(w.astype(
                np.complex128)), posinf=0), initial=0))
            scale = max(1.0, mag * mag2 * k * (9 if name == "tensordot" else 1))
            assert_matches(out, np.asarray(ref), ot, rtol=r * 8,
                           atol=r * scale * 8, what=name)
        else:
            assert_matches(out, np.asarray(ref).astype(NP[ot]), what=name)
        return
    raise AssertionError(kind)


# --- basic and advanced indexing -----------------------------------------

@st.composite
def index_expr(draw, shape):
    """A NumPy-style index: ints (in and out of range), slices with any
    step, None, Ellipsis, integer arrays and a bool scalar."""
    items = []
    dims = len(shape)
    used = 0
    ell = False
    n = draw(st.integers(0, dims + 1))
    for _ in range(n):
        k = draw(st.integers(0, 9))
        side = shape[used] if used < dims else 1
        if k <= 2:
            items.append(draw(st.integers(-side - 2, side + 1)))
            used += 1
        elif k <= 5:
            start = draw(st.one_of(st.none(), st.integers(-side - 2,
                                                          side + 2)))
            stop = draw(st.one_of(st.none(), st.integers(-side - 2,
                                                         side + 2)))
            step = draw(st.one_of(st.none(), st.sampled_from(
                [1, 2, 3, -1, -2, 0])))
            items.append(slice(start, stop, step))
            used += 1
        elif k == 6:
            items.append(None)
        elif k == 7 and not ell:
            items.append(Ellipsis)
            ell = True
        else:
            m = draw(st.integers(0, 3))
            hi = max(side, 1)
            items.append(np.array(draw(st.lists(st.integers(-hi - 1, hi),
                                                 min_size=m, max_size=m)),
                                  dtype=np.int32))
            used += 1
    return tuple(items)


def to_mx_index(idx):
    return tuple(mx.array(i) if isinstance(i, np.ndarray) else i for i in idx)


@fuzz(2500, arrays(max_side=4, max_dims=4), st.data())
def test_getitem_matches_numpy(arr, data):
    x, v, t = arr
    idx = data.draw(index_expr(v.shape))
    try:
        e = v[idx]
    except (IndexError, ValueError):
        e = None
    except TypeError:
        return
    if any(isinstance(i, slice) and i.step == 0 for i in idx):
        e = None
    if e is not None and isinstance(e, np.ndarray) and e.size > 4000:
        return
    try:
        out = x[to_mx_index(idx)]
        mx.eval(out)
    except Exception as err:  # noqa: BLE001
        check_error(err, "__getitem__")
        # NumPy skips the bounds check of an advanced index when the result
        # is empty; Fluxion checks it.
        empty_quirk = isinstance(err, (IndexError, ValueError)) and \
            isinstance(e, np.ndarray) and e.size == 0
        assert e is None or empty_quirk, (idx, v.shape, err)
        return
    assert e is not None, f"x[{idx}] accepted for shape {v.shape}"
    assert_matches(out, np.asarray(e) if t != mx.bfloat16 else
                   np.asarray(e, np.float32), t, rtol=0, atol=0,
                   what=f"x{idx}")


@fuzz(1500, arrays(max_side=4, max_dims=4, dtypes=REAL_DTYPES), st.data())
def test_setitem_matches_numpy(arr, data):
    x, v, t = arr
    idx = data.draw(index_expr(v.shape))
    if any(isinstance(i, np.ndarray) for i in idx):
        # Duplicate indices: NumPy's last write is not guaranteed.
        arrs = [i for i in idx if isinstance(i, np.ndarray)]
        if any(len(set((a % 7).tolist())) != a.size for a in arrs):
            return
    e = v.copy()
    target = None
    try:
        target = e[idx]
        val = np.asarray(np.ones_like(target) * 3).astype(e.dtype)
        e[idx] = val
        ok = True
    except (IndexError, ValueError, TypeError):
        ok = False
    if any(isinstance(i, slice) and i.step == 0 for i in idx):
        ok = False
    y = x
    try:
        y[to_mx_index(idx)] = 3
        mx.eval(y)
    except Exception as err:  # noqa: BLE001
        check_error(err, "__setitem__")
        empty_quirk = isinstance(err, (IndexError, ValueError)) and \
            target is not None and np.asarray(target).size == 0
        assert not ok or empty_quirk, (idx, v.shape, err)
        return
    assert ok, f"x[{idx}] = 3 accepted for shape {v.shape}"
    assert_matches(y, e if t != mx.bfloat16 else e.astype(np.float32), t,
                   rtol=0, atol=0, what=f"x{idx} = 3")


# --- casts ----------------------------------------------------------------

@fuzz(1500, arrays(), st.sampled_from(ALL_DTYPES))
def test_astype_matches_numpy(arr, to):
    x, v, t = arr
    out, err = expect(mx.astype, x, to)
    assert err is None, err
    src = v.astype(np.float32) if t == mx.bfloat16 else v
    if to == mx.bfloat16:
        return  # no NumPy bfloat16
    dst = NP[to]
    if np.issubdtype(dst, np.integer) and src.dtype.kind in "fc":
        real = np.real(src).astype(np.float64)
        info = np.iinfo(dst)
        ok = np.isfinite(real) & (real > info.min - 1) & (real < info.max + 1)
        # Out-of-range float to int is undefined in C++ and NumPy alike:
        # only the representable values are compared.
        got = np_of(out)[ok]
        with np.errstate(all="ignore"):
            ref = real[ok].astype(dst)
        np.testing.assert_array_equal(got, ref)
        return
    with np.errstate(all="ignore"):
        if src.dtype.kind == "c" and dst != np.complex64:
            ref = np.real(src).astype(dst) if dst != np.bool_ else src != 0
        else:
            ref = src.astype(dst)
    if to in FLOATS and t in FLOATS and to != mx.float64 and t != mx.float64:
        assert_matches(out, ref, to, rtol=0, atol=0)
    else:
        assert_matches(out, ref, to, what=f"{t}->{to}")
