"""Random compositions of grad / value_and_grad / vjp / jvp / vmap / compile /
checkpoint / custom_function over random small programs (issue 17), checked
against central finite differences (float64) and against the untransformed
program. Budgets and reproduction: fuzz_support.py."""

import numpy as np
from hypothesis import strategies as st

import fluxion.core as mx
from fuzz_support import fuzz

SHAPE = (3, 4)


def sin_with_rule():
    """sin as a custom_function with its own (correct) vjp and jvp rules."""
    @mx.custom_function
    def f(h):
        return mx.sin(h)

    # One positional argument: the rules get it (and its tangent) as is,
    # not in a tuple (MLX).
    @f.vjp
    def f_vjp(h, cotangent, output):
        return cotangent * mx.cos(h)

    @f.jvp
    def f_jvp(h, tangent):
        return tangent * mx.cos(h)

    return f


def shared_value(h, x, k):
    """A fused value also read after its group: one more output of it."""
    a = mx.sin(h) * x
    return (a + 1.0) @ k["w"] * 0.5 + a


# Each step maps h (3, 4) to a new (3, 4) value, smoothly; x is the
# program's input (reused, so gradients accumulate over several paths) and
# k the step's constants (evaluated arrays: closures over them compile).
STEPS = {
    "sin": lambda h, x, k: mx.sin(h),
    "tanh": lambda h, x, k: mx.tanh(h),
    "exp": lambda h, x, k: mx.exp(0.3 * mx.tanh(h)),
    "square": lambda h, x, k: 0.5 * h * h,
    "sigmoid": lambda h, x, k: mx.sigmoid(h),
    "softplus": lambda h, x, k: mx.logaddexp(h, mx.zeros_like(h)),
    "mul_x": lambda h, x, k: h * x,
    "add_x": lambda h, x, k: h + 0.5 * x,
    "div": lambda h, x, k: h / (1.0 + x * x),
    "power": lambda h, x, k: mx.power(h * h + 1.0, 0.7),
    "sqrt": lambda h, x, k: mx.sqrt(h * h + 1.0),
    "matmul": lambda h, x, k: h @ k["w"],
    "softmax": lambda h, x, k: mx.softmax(h, axis=-1),
    "logsumexp": lambda h, x, k: h - mx.logsumexp(h, axis=0, keepdims=True),
    "cumsum": lambda h, x, k: mx.cumsum(h, axis=1) * 0.5,
    "roll": lambda h, x, k: mx.concatenate([h[:, 1:], h[:, :1]], axis=1),
    "where": lambda h, x, k: mx.where(x > 0, h, 2.0 * h),
    "center": lambda h, x, k: h - mx.mean(h, axis=1, keepdims=True),
    "take": lambda h, x, k: mx.take(h, k["perm"], axis=1),
    "reshape": lambda h, x, k: mx.reshape(mx.reshape(h, (2, 6)).T,
                                          (6, 2)).T.reshape(SHAPE),
    "transpose": lambda h, x, k: (k["w"] @ h.T).T,
    "layer_norm": lambda h, x, k: mx.fast.layer_norm(h, k["g"], k["b"], 1e-5),
    "rms_norm": lambda h, x, k: mx.fast.rms_norm(h, k["g"], 1e-5),
    "custom_sin": lambda h, x, k: k["custom"](h),
    "stop_gradient_mix": lambda h, x, k: h + mx.stop_gradient(h) * 0.0,
    "broadcast": lambda h, x, k: h + mx.sum(h, axis=0),
    "var": lambda h, x, k: h * mx.var(h, axis=1, keepdims=True),
    # Column reductions (compile fuses them with their neighbours).
    "batch_center": lambda h, x, k: h - mx.mean(h * x, axis=0, keepdims=True),
    "col_norm": lambda h, x, k: h * mx.rsqrt(mx.mean(h * h, axis=0) + 1.0),
    # Fused groups with several outputs, and a pick along the row (a
    # cross-entropy's) inside a row reduction.
    "shared": shared_value,
    "pick": lambda h, x, k: h + mx.logsumexp(h, axis=1, keepdims=True) -
    mx.take_along_axis(h, k["pick"], axis=1),
}


def constants(seed):
    rng = np.random.default_rng(seed)
    k = {
        "w": mx.array(rng.standard_normal((4, 4)) * 0.5, mx.float64),
        "perm": mx.array(rng.permutation(4).astype(np.int32)),
        "pick": mx.array(rng.integers(-4, 4, (3, 1)).astype(np.int32)),
        "g": mx.array(rng.standard_normal(4) + 1, mx.float64),
        "b": mx.array(rng.standard_normal(4), mx.float64),
        "c": mx.array(rng.standard_normal(SHAPE), mx.float64),
        "custom": sin_with_rule(),
    }
    mx.eval([v for v in k.values() if isinstance(v, mx.array)])
    return k


def program(steps, k):
    def f(x):
        h = x
        for s in steps:
            h = STEPS[s](h, x, k)
        return mx.sum(h * k["c"])
    return f


def finite_diff_grad(f, x, eps=1e-6):
    x0 = np.array(x)
    g = np.zeros_like(x0)
    for i in np.ndindex(x0.shape):
        xp, xm = x0.copy(), x0.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(mx.array(xp, mx.float64)).item() -
                f(mx.array(xm, mx.float64)).item()) / (2 * eps)
    return g


def wrap(f, wrappers):
    for w in wrappers:
        if w == "compile":
            f = mx.compile(f)
        elif w == "checkpoint":
            f = mx.checkpoint(f)
        elif w == "shapeless":
            f = mx.compile(f, shapeless=True)
    return f


def close(a, b, what, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.array(a), np.asarray(b), rtol=rtol,
                               atol=atol, err_msg=what)


@fuzz(700,
      st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=5),
      st.lists(st.sampled_from(["compile", "checkpoint", "shapeless"]),
               max_size=2),
      st.sampled_from(["grad", "value_and_grad", "vjp", "jvp", "hvp"]),
      st.lists(st.sampled_from(["compile", "vmap"]), max_size=2),
      st.integers(0, 2**31))
def test_transformed_programs_match_finite_differences(steps, wrappers,
                                                       derivative, outer,
                                                       seed):
    k = constants(seed)
    f = program(steps, k)
    rng = np.random.default_rng(seed + 1)
    x = mx.array(rng.standard_normal(SHAPE), mx.float64)
    u = mx.array(rng.standard_normal(SHAPE), mx.float64)
    value = f(x).item()
    g_ref = finite_diff_grad(f, x)
    fw = wrap(f, wrappers)
    what = f"{steps} {wrappers} {derivative} {outer}"
    # The wrapped program computes the same value (or refuses shapeless
    # compilation of a shape-fixing op, as documented).
    try:
        got = fw(x)
    except ValueError as e:
        assert "shapeless" in wrappers and str(e).startswith(
            "[compile] Cannot compile with shapeless=True"), e
        return
    close(got, value, what + " value", rtol=1e-10, atol=1e-10)

    # The derivative as a function of x alone, and its reference.
    if derivative == "grad":
        d = mx.grad(fw)
        ref = lambda xi: g_ref_of(xi)  # noqa: E731
    elif derivative == "value_and_grad":
        d = lambda xi: mx.value_and_grad(fw)(xi)[1]  # noqa: E731
        ref = lambda xi: g_ref_of(xi)  # noqa: E731
    elif derivative == "vjp":
        d = lambda xi: mx.vjp(fw, [xi], [mx.array(1.0, mx.float64)])[1][0]  # noqa: E731,E501
        ref = lambda xi: g_ref_of(xi)  # noqa: E731
    elif derivative == "jvp":
        d = lambda xi: mx.jvp(fw, [xi], [u])[1][0]  # noqa: E731
        ref = lambda xi: np.sum(g_ref_of(xi) * np.array(u))  # noqa: E731
    else:  # a Hessian-vector product: jvp of grad
        d = lambda xi: mx.jvp(mx.grad(fw), [xi], [u])[1][0]  # noqa: E731
        ref = None

    cache = {}

    def g_ref_of(xi):
        key = np.array(xi).tobytes()
        if key not in cache:
            cache[key] = g_ref if key == np.array(x).tobytes() else \
                finite_diff_grad(f, xi)
        return cache[key]

    if ref is None:
        # hvp: central differences of the (already checked) gradient.
        eps = 1e-5
        gp = np.array(mx.grad(f)(x + eps * u))
        gm = np.array(mx.grad(f)(x - eps * u))
        expected = (gp - gm) / (2 * eps)
        close(d(x), expected, what, rtol=1e-4, atol=1e-5)
        return

    close(mx.grad(f)(x), g_ref, what + " (plain grad)", rtol=1e-5, atol=1e-6)
    # Outer transformations of the derivative, in the drawn order (one
    # vmap at most: a batch of three inputs).
    dd, batched = d, False
    for o in outer:
        if o == "vmap" and not batched:
            dd, batched = mx.vmap(dd), True
        elif o == "compile":
            dd = mx.compile(dd)
    if batched:
        xs = mx.stack([x, x * 0.5 + 0.1, -x])
        got = dd(xs)
        for i in range(3):
            close(got[i], ref(xs[i]), what + f" [batch {i}]", rtol=1e-5,
                  atol=1e-6)
    else:
        close(dd(x), ref(x), what, rtol=1e-5, atol=1e-6)


@fuzz(400,
      st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=4),
      st.integers(0, 2**31))
def test_vjp_and_jvp_are_adjoint_and_vmap_matches_a_loop(steps, seed):
    # For the program's (3, 4) -> (3, 4) map before the final sum:
    # <v, J u> == <J^T v, u>, and vmap over a batch equals a loop.
    k = constants(seed)
    rng = np.random.default_rng(seed)

    def g(x):
        h = x
        for s in steps:
            h = STEPS[s](h, x, k)
        return h

    x = mx.array(rng.standard_normal(SHAPE), mx.float64)
    u = mx.array(rng.standard_normal(SHAPE), mx.float64)
    v = mx.array(rng.standard_normal(SHAPE), mx.float64)
    _, (ju,) = mx.jvp(g, [x], [u])
    _, (jtv,) = mx.vjp(g, [x], [v])
    lhs = float(mx.sum(v * ju).item())
    rhs = float(mx.sum(jtv * u).item())
    assert abs(lhs - rhs) <= 1e-8 * max(1.0, abs(lhs)), (steps, lhs, rhs)
    xs = mx.array(rng.standard_normal((3,) + SHAPE), mx.float64)
    batched = mx.vmap(g)(xs)
    for i in range(3):
        close(batched[i], g(xs[i]), f"{steps} vmap[{i}]", rtol=1e-12,
              atol=1e-12)
    # vmap over the second axis too (in_axes=1, out_axes=1).
    ys = mx.moveaxis(xs, 0, 1)
    batched1 = mx.vmap(g, in_axes=1, out_axes=1)(ys)
    close(batched1, batched.swapaxes(0, 1), f"{steps} vmap axis 1",
          rtol=1e-12, atol=1e-12)
    # Compiled, the map gives the same result.
    close(mx.compile(g)(x), g(x), f"{steps} compile", rtol=1e-12, atol=1e-12)
