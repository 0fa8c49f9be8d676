"""grad, value_and_grad, vjp, jvp and vmap over pytrees, with argnums,
argnames, auxiliary outputs and the documented error messages."""

import math

import numpy as np
import pytest

import fluxion.core as mx


def close(a, b, tol=1e-5):
    return np.allclose(np.array(a), np.array(b), rtol=tol, atol=tol)


def test_grad_scalar_function():
    g = mx.grad(lambda x: (x * x * x).sum())
    x = mx.array([1.0, -2.0, 3.0])
    assert close(g(x), [3.0, 12.0, 27.0])
    # Second derivative of sin is -sin.
    d2 = mx.grad(mx.grad(mx.sin))(mx.array(0.7))
    assert abs(d2.item() + math.sin(0.7)) < 1e-6


def test_grad_over_nested_pytree_keeps_structure():
    def loss(params, x):
        h = params["w"][0] * x + params["w"][1]
        return (h * params["b"]["c"]).sum()

    params = {"w": [mx.array([1.0, 2.0]), mx.array([0.5, 0.5])],
              "b": {"c": mx.array(3.0)}}
    x = mx.array([2.0, -1.0])
    g = mx.grad(loss)(params, x)
    assert set(g) == {"w", "b"}
    assert isinstance(g["w"], list) and len(g["w"]) == 2
    assert close(g["w"][0], [6.0, -3.0])
    assert close(g["w"][1], [3.0, 3.0])
    # h = [2.5, -1.5]: d/dc = sum(h)
    assert close(g["b"]["c"], 1.0)
    # The caller's containers still hold the original arrays.
    assert params["w"][0].tolist() == [1.0, 2.0]
    tup = (mx.array(1.0), mx.array(2.0))
    gt = mx.grad(lambda t: t[0] * t[1])(tup)
    assert isinstance(gt, tuple) and close(gt[0], 2.0) and close(gt[1], 1.0)


def test_argnums_combinations():
    f = lambda a, b, c: (a * b * c).sum()
    a, b, c = mx.array(2.0), mx.array(3.0), mx.array(5.0)
    assert close(mx.grad(f)(a, b, c), 15.0)
    assert close(mx.grad(f, argnums=2)(a, b, c), 6.0)
    ga, gc = mx.grad(f, argnums=[2, 0])(a, b, c)  # sorted: (a, c)
    assert close(ga, 15.0) and close(gc, 6.0)
    g = mx.grad(f, argnums=(0, 1, 2))(a, b, c)
    assert [round(v.item()) for v in g] == [15, 10, 6]


def test_argnames_and_argnums():
    def f(x, *, y, z):
        return (x * y + z * z).sum()

    x, y, z = mx.array(2.0), mx.array(3.0), mx.array(4.0)
    pos, kw = mx.grad(f, argnames="y")(x, y=y, z=z)
    assert pos is None and list(kw) == ["y"] and close(kw["y"], 2.0)
    pos, kw = mx.grad(f, argnums=0, argnames=["z", "y"])(x, y=y, z=z)
    assert close(pos, 3.0)
    assert close(kw["y"], 2.0) and close(kw["z"], 8.0)
    # Keyword trees.
    pos, kw = mx.grad(lambda *, p: p["a"] * p["b"], argnames="p")(
        p={"a": mx.array(2.0), "b": mx.array(7.0)})
    assert close(kw["p"]["a"], 7.0) and close(kw["p"]["b"], 2.0)


def test_value_and_grad_with_aux():
    def f(w, x):
        y = w * x
        return y.sum(), (y, "tag", 3)

    w, x = mx.array([1.0, 2.0]), mx.array([3.0, 4.0])
    (loss, (y, tag, n)), g = mx.value_and_grad(f)(w, x)
    assert loss.item() == 11.0 and y.tolist() == [3.0, 8.0]
    assert tag == "tag" and n == 3
    assert close(g, [3.0, 4.0])
    v, g = mx.value_and_grad(lambda a: (a * a).sum())(mx.array([3.0]))
    assert v.item() == 9.0 and close(g, [6.0])


def test_grad_errors():
    f = lambda a, b: (a * b).sum()
    a = mx.array(1.0)
    with pytest.raises(ValueError, match=r"\[grad\] Gradient wrt no argument"):
        mx.grad(f, argnums=[])
    with pytest.raises(ValueError, match=r"negative argument index -1"):
        mx.grad(f, argnums=-1)
    with pytest.raises(ValueError, match=r"Duplicate argument index 1 is not"):
        mx.grad(f, argnums=[1, 1])
    with pytest.raises(ValueError, match=r"\[grad\] Can't compute the gradient "
                       r"of argument index 2 because the function is called "
                       r"with only 2 positional arguments."):
        mx.grad(f, argnums=2)(a, a)
    with pytest.raises(ValueError, match=r"keyword argument 'q' because the "
                       r"function is called with the following keyword "
                       r"arguments \{p,\}"):
        mx.grad(lambda p=None, q=None: p, argnames="q")(p=a)
    with pytest.raises(ValueError, match=r"\[tree_flatten\] The argument "
                       r"should contain only arrays"):
        mx.grad(lambda t: t[0])([a, "x"])
    with pytest.raises(ValueError, match=r"\[grad\] The return value of the "
                       r"function whose gradient we want to compute should be "
                       r"a scalar array; but tuple was returned."):
        mx.grad(lambda x: (x, x))(a)
    vg = "value_and_grad"
    with pytest.raises(ValueError, match=rf"\[{vg}\] .* but list was returned"):
        mx.value_and_grad(lambda x: [x])(a)
    with pytest.raises(ValueError, match=r"we got an empty tuple"):
        mx.value_and_grad(lambda x: ())(a)
    with pytest.raises(ValueError, match=r"first value being of type str \."):
        mx.value_and_grad(lambda x: ("a", x))(a)
    with pytest.raises(ValueError, match=r"\[vjp\] Output shape \(2\) does "
                       r"not match cotangent shape \(\)"):
        mx.grad(lambda x: x * 2)(mx.array([1.0, 2.0]))
    # Exceptions raised by the function come through unchanged, and the
    # arguments are restored.
    lst = [mx.array(1.0)]
    orig = lst[0]

    def boom(t):
        raise KeyError("inside")

    with pytest.raises(KeyError, match="inside"):
        mx.grad(boom)(lst)
    assert lst[0] is orig


def test_vjp_jvp():
    outs, vjps = mx.vjp(lambda x, y: x * y, [mx.array(2.0), mx.array(3.0)],
                        [mx.array(1.0)])
    assert outs[0].item() == 6.0
    assert [v.item() for v in vjps] == [3.0, 2.0]
    outs, vjps = mx.vjp(lambda x: [x * 2, x * x], [mx.array(3.0)],
                        [mx.array(1.0), mx.array(1.0)])
    assert vjps[0].item() == 8.0
    outs, jvps = mx.jvp(mx.sin, [mx.array(1.0)], [mx.array(2.0)])
    assert abs(jvps[0].item() - 2 * math.cos(1.0)) < 1e-6
    assert abs(outs[0].item() - math.sin(1.0)) < 1e-6


def test_vmap_basic_and_axes():
    x = mx.array(np.arange(12, dtype=np.float32).reshape(3, 4))
    y = mx.array(np.arange(4, dtype=np.float32))
    out = mx.vmap(lambda a, b: a * b, in_axes=(0, None))(x, y)
    assert close(out, np.array(x) * np.array(y))
    out = mx.vmap(lambda a: a.sum(), in_axes=1)(x)
    assert close(out, np.array(x).sum(0))
    out = mx.vmap(lambda a: a * 2, in_axes=0, out_axes=1)(x)
    assert out.shape == (4, 3) and close(out, 2 * np.array(x).T)


def test_vmap_prefix_trees():
    x = mx.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    tree = {"a": x, "b": [x, mx.array([1.0, 2.0, 3.0])]}

    def f(t):
        return {"s": t["a"] + t["b"][0] * t["b"][1], "p": (t["a"],)}

    # With one argument the axes are a prefix of that argument itself.
    out = mx.vmap(f, in_axes={"a": 0, "b": [0, None]},
                  out_axes={"s": 0, "p": 1})(tree)
    ref = np.array(x) + np.array(x) * np.array([1.0, 2.0, 3.0])
    assert close(out["s"], ref)
    assert out["p"][0].shape == (3, 2)
    # A prefix that maps a whole subtree.
    out = mx.vmap(lambda a, t: a + t[0] + t[1], in_axes=(1, 0))(
        x.T, [x, x])
    assert close(out, 3 * np.array(x))


def test_vmap_errors():
    x = mx.array([[1.0, 2.0]])
    with pytest.raises(ValueError, match=r"\[vmap\] Invalid vectorization "
                       r"axis 2 for array with shape \(1,2\)|"
                       r"\[vmap\] Invalid vectorization axis 2"):
        mx.vmap(lambda a: a, in_axes=2)(x)
    with pytest.raises(ValueError, match=r"\[vmap\] Invalid output "
                       r"vectorization axis"):
        mx.vmap(lambda a: a, out_axes=3)(x)
    with pytest.raises(ValueError, match=r"\[vmap\] axis must be int or None."):
        mx.vmap(lambda a: a, in_axes="x")(x)
    with pytest.raises(ValueError, match=r"\[vmap\] axis must be int or None."):
        mx.vmap(lambda t: t, in_axes=({"a": 0},))({"a": x})
    with pytest.raises(ValueError, match=r"\[vmap\] The arguments should "
                       r"contain only arrays|\[tree_flatten\]"):
        mx.vmap(lambda a, b: a, in_axes=(0, None))(x, "s")


def test_vmap_of_grad_per_example():
    w = mx.array([1.0, -1.0, 2.0])
    xs = mx.array(np.random.default_rng(0).normal(size=(5, 3)).astype(
        np.float32))
    loss = lambda w, x: (w * x).sum() ** 2
    pe = mx.vmap(mx.grad(loss), in_axes=(None, 0))(w, xs)
    ref = np.stack([2 * (np.array(w) * r).sum() * r for r in np.array(xs)])
    assert close(pe, ref, 1e-4)


def test_random_state_list():
    assert isinstance(mx.random.state, list) and len(mx.random.state) == 1
    mx.random.seed(7)
    k0 = mx.random.state[0]
    assert k0.tolist() == mx.random.key(7).tolist()
    a = mx.random.uniform(shape=(3,))
    k1 = mx.random.state[0]
    assert k1.tolist() != k0.tolist()  # consumed and updated
    # Restoring the state replays the draw.
    mx.random.state[0] = k0
    b = mx.random.uniform(shape=(3,))
    assert a.tolist() == b.tolist()
    assert mx.random.state[0].tolist() == k1.tolist()
    # An explicit key leaves the state alone.
    mx.random.normal(shape=(2,), key=mx.random.key(1))
    assert mx.random.state[0].tolist() == k1.tolist()


def test_arguments_restored_unless_overwritten():
    w0, w1 = mx.array(2.0), mx.array(3.0)
    params = {"a": [w0], "b": w1}
    new = mx.array(9.0)

    def f(p):
        p["b"] = new  # written during the call: kept
        return p["a"][0] * 5

    g = mx.grad(f)(params)
    assert params["a"][0] is w0 and params["b"] is new
    assert g["a"][0].item() == 5.0 and g["b"].item() == 0.0


def test_value_and_grad_argnums_argnames_aux():
    def f(a, b, *, c):
        return (a * b * c).sum(), {"prod": a * b}

    a, b, c = mx.array(2.0), mx.array(3.0), mx.array([1.0, 2.0])
    (v, aux), ((ga, gb), kw) = mx.value_and_grad(
        f, argnums=(0, 1), argnames=("c",))(a, b, c=c)
    assert v.item() == 18.0 and aux["prod"].item() == 6.0
    assert ga.item() == 9.0 and gb.item() == 6.0
    assert kw["c"].tolist() == [6.0, 6.0]
    # Auxiliary outputs carry no gradient into the loss.
    (v, aux), g = mx.value_and_grad(lambda x: ((x * x).sum(), x * 100))(
        mx.array([1.0, 2.0]))
    assert g.tolist() == [2.0, 4.0] and aux.tolist() == [100.0, 200.0]


def test_vmap_out_axes_none_and_multiple_outputs():
    x = mx.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    c = mx.array([7.0, 8.0])
    s, k = mx.vmap(lambda a, b: (a.sum(), b * 2), in_axes=(0, None),
                   out_axes=(0, None))(x, c)
    assert s.tolist() == [3.0, 7.0, 11.0] and k.tolist() == [14.0, 16.0]
    # Nested vmap: an outer product.
    op = mx.vmap(mx.vmap(lambda u, v: u * v, in_axes=(None, 0)),
                 in_axes=(0, None))(mx.array([1.0, 2.0]),
                                    mx.array([3.0, 4.0, 5.0]))
    assert op.tolist() == [[3.0, 4.0, 5.0], [6.0, 8.0, 10.0]]
