"""Pytrees through the transformations: arguments that the function mutates,
tuple subclasses keeping their type, prefix trees for vmap's axes."""

import collections
from typing import NamedTuple

import numpy as np
import pytest

import fluxion.core as mx
from fluxion.utils import tree_map, tree_map_with_path

Pair = collections.namedtuple("Pair", ["a", "b"])


class Params(NamedTuple):
    w: mx.array
    b: mx.array


class OtherParams(NamedTuple):
    w: mx.array
    b: mx.array


class MyTuple(tuple):
    pass


def test_grad_of_function_adding_a_key_to_its_dict():
    def loss(d):
        d["doubled"] = d["x"] * 2  # the function stores something new
        return (d["x"] ** 3).sum()

    x = mx.array([1.0, 2.0, -1.5])
    d = {"x": x}
    value, g = mx.value_and_grad(loss)(d)
    # The gradient has the argument's structure as it was passed.
    assert list(g.keys()) == ["x"]
    np.testing.assert_allclose(np.array(g["x"]), 3 * np.array(x) ** 2, rtol=1e-6)
    np.testing.assert_allclose(value.item(), float((np.array(x) ** 3).sum()), rtol=1e-6)
    # The addition stays, the original array is back in place.
    assert set(d.keys()) == {"x", "doubled"}
    assert d["x"] is x
    np.testing.assert_allclose(np.array(d["doubled"]), 2 * np.array(x))


def test_grad_of_function_appending_to_its_list():
    def loss(params, extra):
        params.append(params[0] * 3)
        params.insert(0, mx.array(7.0))  # shifts the traced entries
        return (params[1] * params[2]).sum() + extra.sum()

    a, b = mx.array([1.0, 2.0]), mx.array([3.0, -1.0])
    params = [a, b]
    g = mx.grad(loss)(params, mx.ones(2))
    assert isinstance(g, list) and len(g) == 2
    np.testing.assert_allclose(np.array(g[0]), np.array(b))
    np.testing.assert_allclose(np.array(g[1]), np.array(a))
    assert len(params) == 4
    assert params[1] is a and params[2] is b
    np.testing.assert_allclose(np.array(params[3]), 3 * np.array(a))
    assert params[0].item() == 7.0


def test_grad_with_argnames_and_mutated_kwarg_dict():
    def loss(x, *, state):
        state["seen"] = x
        return (x * state["w"]).sum()

    state = {"w": mx.array([2.0, 5.0])}
    (gx, gk) = mx.grad(loss, argnums=0, argnames="state")(
        mx.array([1.0, 1.0]), state=state
    )
    np.testing.assert_allclose(np.array(gx), [2.0, 5.0])
    assert list(gk["state"].keys()) == ["w"]
    np.testing.assert_allclose(np.array(gk["state"]["w"]), [1.0, 1.0])
    assert "seen" in state


def test_namedtuples_keep_their_type_through_grad():
    p = Params(mx.array([1.0, 2.0]), mx.array(0.5))
    g = mx.grad(lambda p: ((p.w * 3 + p.b) ** 2).sum())(p)
    assert type(g) is Params
    w = np.array(p.w)
    np.testing.assert_allclose(np.array(g.w), 6 * (3 * w + 0.5), rtol=1e-6)
    np.testing.assert_allclose(g.b.item(), float((2 * (3 * w + 0.5)).sum()), rtol=1e-6)
    # Tuple subclasses that are not NamedTuples keep their type as well.
    g2 = mx.grad(lambda t: (t[0] * t[1]).sum())(MyTuple((mx.array(2.0), mx.array(3.0))))
    assert type(g2) is MyTuple
    assert g2[0].item() == 3.0 and g2[1].item() == 2.0


def test_function_receives_its_namedtuple():
    seen = []

    def f(p):
        seen.append(type(p))
        return p.a.sum()

    mx.grad(f)(Pair(mx.ones(2), mx.ones(2)))
    mx.vmap(f)(Pair(mx.ones((3, 2)), mx.ones((3, 2))))
    mx.compile(f)(Pair(mx.ones(2), mx.ones(2)))
    assert seen == [Pair, Pair, Pair]


def test_namedtuples_keep_their_type_through_vmap():
    x = mx.arange(6.0).reshape(3, 2)
    out = mx.vmap(lambda p: Pair(p.a * 2, p.a + p.b))(Pair(x, x))
    assert type(out) is Pair
    np.testing.assert_allclose(np.array(out.a), 2 * np.array(x))
    np.testing.assert_allclose(np.array(out.b), 2 * np.array(x))
    # As an axes prefix too.
    out = mx.vmap(lambda p: p.a + p.b, in_axes=Pair(0, None))(
        Pair(x, mx.array([10.0, 20.0]))
    )
    np.testing.assert_allclose(np.array(out), np.array(x) + [10.0, 20.0])


def test_namedtuples_keep_their_type_through_compile():
    calls = []

    def f(p, scale):
        calls.append(1)
        return Params(p.w * scale, p.b + 1), MyTuple((p.w,))

    cf = mx.compile(f)
    p = Params(mx.array([1.0, 2.0]), mx.array(3.0))
    for _ in range(2):
        out, t = cf(p, 2.0)
        assert type(out) is Params and type(t) is MyTuple
        np.testing.assert_allclose(np.array(out.w), [2.0, 4.0])
        assert out.b.item() == 4.0
    assert len(calls) == 1
    # A different tuple type with the same contents is a new signature.
    out = cf(OtherParams(p.w, p.b), 2.0)
    assert type(out[0]) is Params
    assert len(calls) == 2


def test_utils_tree_map_keeps_namedtuples():
    p = Pair(1, [2, Pair(3, 4)])
    out = tree_map(lambda x: x * 10, p)
    assert type(out) is Pair and type(out.b[1]) is Pair
    assert out == Pair(10, [20, Pair(30, 40)])
    paths = tree_map_with_path(lambda path, x: path, p)
    assert paths == Pair("0", ["1.0", Pair("1.1.0", "1.1.1")])


def test_vmap_out_axes_dict_prefix():
    x = mx.arange(6.0).reshape(3, 2)

    def f(x):
        return {"a": x, "b": {"c": x * 2, "d": x.sum()}}

    out = mx.vmap(f, out_axes={"a": 1, "b": 0})(x)
    assert out["a"].shape == (2, 3)
    np.testing.assert_allclose(np.array(out["a"]), np.array(x).T)
    assert out["b"]["c"].shape == (3, 2)
    np.testing.assert_allclose(np.array(out["b"]["d"]), np.array(x).sum(1))
    out = mx.vmap(f, out_axes={"a": 0, "b": {"c": 1, "d": 0}})(x)
    assert out["b"]["c"].shape == (2, 3)
    # Outputs in a tuple, the dict prefix inside.
    out = mx.vmap(lambda x: (x, {"y": x + 1}), out_axes=(0, {"y": 1}))(x)
    assert out[1]["y"].shape == (2, 3)
    # A dict prefix with a missing key is a ValueError, not a KeyError.
    with pytest.raises(ValueError):
        mx.vmap(f, out_axes={"a": 0})(x)
