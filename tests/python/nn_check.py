"""Shared helpers for the nn tests: finite-difference gradient checks of
modules and functions (in float64, so central differences are accurate)."""

import numpy as np

import fluxion.core as mx
import fluxion.nn as nn
from fluxion.utils import tree_flatten, tree_unflatten


def to64(x):
    if isinstance(x, mx.array) and mx.issubdtype(x.dtype, mx.floating):
        return x.astype(mx.float64)
    return x


def _numeric(f, value, idx, eps):
    """Central difference of ``f(array)`` at flat index ``idx``."""
    plus = value.copy()
    minus = value.copy()
    plus.flat[idx] += eps
    minus.flat[idx] -= eps
    return (f(plus) - f(minus)) / (2 * eps)


def check_grads(
    fn, args, argnums=None, samples=6, eps=1e-6, rtol=1e-5, atol=1e-7, seed=0
):
    """Compare ``mx.grad`` of the scalar ``fn(*args)`` with central
    differences at ``samples`` random coordinates of each differentiated
    argument (float64 arrays)."""
    args = [to64(a) for a in args]
    if argnums is None:
        argnums = tuple(
            i
            for i, a in enumerate(args)
            if isinstance(a, mx.array) and mx.issubdtype(a.dtype, mx.floating)
        )
    grads = mx.grad(fn, argnums=argnums)(*args)
    if len(argnums) == 1:
        grads = (grads,)
    rng = np.random.default_rng(seed)
    for i, g in zip(argnums, grads):
        value = np.array(args[i])
        g = np.array(g)
        assert g.shape == value.shape

        def f(v, i=i):
            a = list(args)
            a[i] = mx.array(v, dtype=args[i].dtype)  # NumPy float64 -> float32 otherwise
            return fn(*a).item()

        for idx in rng.choice(
            value.size, size=min(samples, value.size), replace=False
        ):
            num = _numeric(f, value, idx, eps)
            np.testing.assert_allclose(
                g.flat[idx],
                num,
                rtol=rtol,
                atol=atol,
                err_msg=f"argument {i}, flat index {idx}",
            )


def check_module_grads(
    module,
    inputs,
    samples=4,
    eps=1e-6,
    rtol=1e-5,
    atol=1e-7,
    seed=0,
    call=None,
):
    """Finite-difference check of a module's gradients with respect to its
    trainable parameters and its floating-point inputs, for the scalar
    ``sum(output * R)`` with a fixed random R (so every output element
    matters). The module is cast to float64 in place."""
    module.set_dtype(mx.float64)
    inputs = [to64(x) for x in inputs]
    call = call or (lambda m, *xs: m(*xs))
    out = call(module, *inputs)
    out = out[0] if isinstance(out, tuple) else out
    rng = np.random.default_rng(seed)
    weight = mx.array(rng.normal(size=out.shape))

    flat = tree_flatten(module.trainable_parameters())
    names = [k for k, _ in flat]
    values = [v for _, v in flat]
    n = len(values)

    def fn(*arrays):
        module.update(tree_unflatten(list(zip(names, arrays[:n]))))
        y = call(module, *arrays[n:])
        y = y[0] if isinstance(y, tuple) else y
        return mx.sum(y * weight)

    argnums = tuple(range(n)) + tuple(
        n + i
        for i, x in enumerate(inputs)
        if isinstance(x, mx.array) and mx.issubdtype(x.dtype, mx.floating)
    )
    try:
        check_grads(
            fn,
            values + inputs,
            argnums=argnums,
            samples=samples,
            eps=eps,
            rtol=rtol,
            atol=atol,
            seed=seed,
        )
    finally:
        module.update(tree_unflatten(list(zip(names, values))))


__all__ = ["check_grads", "check_module_grads", "to64", "nn"]
