"""export_function / import_function / exporter (issue 11): traced functions
written to a file and read back, with MLX's semantics (several signatures,
shapeless traces, keyword arguments, constants stored once, a callback in
place of a file, metadata)."""

import gc
import json
import os

import numpy as np
import pytest

import fluxion.core as mx


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "fn.fxfn")


def test_round_trip_and_calling_conventions(path):
    def fun(x, y):
        return mx.sin(x) * y + 1

    x = mx.array([1.0, 2.0, 3.0])
    y = mx.array([2.0, 0.5, -1.0])
    mx.export_function(path, fun, x, y)
    f = mx.import_function(path)
    (out,) = f(x, y)
    assert mx.allclose(out, fun(x, y))
    assert mx.allclose(f([x, y])[0], fun(x, y))
    assert mx.allclose(f((x, y))[0], fun(x, y))
    # Wrong arity, non-array or differently shaped inputs match no trace.
    with pytest.raises(ValueError, match=r"\[import_function\] No function "
                       r"exported"):
        f(x)
    with pytest.raises(ValueError, match=r"\[import_function\] Inputs must "
                       r"be arrays; got float"):
        f(x, 1.0)
    with pytest.raises(ValueError, match=r"\[import_function\] No function"):
        f(mx.ones(4), mx.ones(4))
    with pytest.raises(ValueError, match=r"\[import_function\] No function"):
        f(x.astype(mx.float16), y)


def test_no_inputs_and_outputs_in_a_list(path):
    mx.export_function(path, lambda: [mx.zeros((2, 2)), mx.ones(3)])
    a, b = mx.import_function(path)()
    assert a.tolist() == [[0, 0], [0, 0]] and b.tolist() == [1, 1, 1]


def test_invalid_inputs_and_outputs(path):
    with pytest.raises(ValueError, match=r"\[export_function\] Inputs must be "
                       r"arrays; got str"):
        mx.export_function(path, lambda x: x, "hi")
    with pytest.raises(ValueError, match=r"Inputs must be arrays; got list"):
        mx.export_function(path, lambda x: x[0][0], [[mx.array(1.0)]])
    with pytest.raises(ValueError, match=r"\[export_function\] The function "
                       r"must return"):
        mx.export_function(path, lambda: (mx.zeros(3), 1))
    with pytest.raises(ValueError, match=r"flat list or tuple"):
        mx.export_function(path, lambda: (mx.zeros(3), [mx.zeros(3)]))
    with pytest.raises(TypeError, match=r"\[export_function\] file must be"):
        mx.export_function(3, lambda: mx.zeros(3))


def test_keyword_arguments(path):
    def fun(x, z=None):
        return x if z is None else x + z

    x, z = mx.array([1, 2, 3]), mx.array([2, 2, 2])
    mx.export_function(path, fun, (x,), {"z": z})
    f = mx.import_function(path)
    assert f(x, z=z)[0].tolist() == [3, 4, 5]
    assert f((x,), {"z": z})[0].tolist() == [3, 4, 5]
    for bad in [lambda: f(x, z), lambda: f(x, y=z), lambda: f((x,), {"y": z})]:
        with pytest.raises(ValueError):
            bad()
    mx.export_function(path, lambda x, y: x - y, x=mx.array(1.0),
                       y=mx.array(1.0))
    f = mx.import_function(path)
    assert f(x=mx.array(2.0), y=mx.array(3.0))[0].item() == -1.0
    assert f(y=mx.array(2.0), x=mx.array(3.0))[0].item() == 1.0
    assert f({"x": mx.array(5.0), "y": mx.array(1.0)})[0].item() == 4.0


def test_several_signatures_and_closed_exporter(path):
    def fun(x, y, z=None):
        out = x + y
        return out if z is None else out + z

    with mx.exporter(path, fun) as exporter:
        exporter(mx.array([1, 2, 3]), mx.array([1, 1, 1]))
        exporter(mx.array([1, 2, 3]), mx.array([1, 1, 1]), z=mx.array([2]))
    with pytest.raises(RuntimeError, match=r"\[exporter\] The exporter is "
                       r"closed"):
        exporter(mx.array([1]), mx.array([1]))
    f = mx.import_function(path)
    assert f(mx.array([1, 2, 3]), mx.array([1, 1, 1]))[0].tolist() == [2, 3, 4]
    assert f(mx.array([1, 2, 3]), mx.array([1, 1, 1]),
             z=mx.array([2]))[0].tolist() == [4, 5, 6]
    with pytest.raises(ValueError):
        f(mx.array([1, 2, 3, 4]), mx.array([1, 1, 1, 1]))


def test_constants_are_stored_once(path):
    constant = mx.zeros((16, 2048))
    mx.eval(constant)

    def fun(*args):
        return constant + sum(args)

    with mx.exporter(path, fun) as exporter:
        for i in range(5):
            exporter(*[mx.array(1.0)] * i)
    assert os.path.getsize(path) < constant.nbytes + 8192
    f = mx.import_function(path)
    assert f(mx.array(1.0), mx.array(2.0))[0][0, 0].item() == 3.0


def test_shapeless(path):
    def fun(x):
        return mx.exp(x) * 2 + x.sum()

    mx.export_function(path, fun, mx.ones((2, 3)), shapeless=True)
    f = mx.import_function(path)
    for shape in [(2, 3), (4, 5), (1, 7)]:
        x = mx.array(np.random.rand(*shape).astype(np.float32))
        assert mx.allclose(f(x)[0], fun(x))
    with pytest.raises(ValueError, match=r"No function exported"):
        f(mx.ones(3))  # ndim differs

    with mx.exporter(path, lambda *a: sum(a), shapeless=True) as e:
        e(mx.array(1))
        e(mx.array(1), mx.array(2))
    f = mx.import_function(path)
    assert f(mx.array(5))[0].item() == 5
    assert f(mx.array(5), mx.array(6))[0].item() == 11


def test_shapeless_mean_and_reshape_rules_survive_export(path):
    # mean divides by a count read from the input's shape, and flatten /
    # reshape(-1) re-infer their shape: both must follow new shapes after a
    # round trip through the file.
    def fun(x):
        return x - x.mean(axis=1, keepdims=True), x.flatten(), x.reshape(-1, 1)

    mx.export_function(path, fun, mx.ones((2, 3)), shapeless=True)
    f = mx.import_function(path)
    for shape in [(2, 3), (4, 5), (3, 1)]:
        x = mx.array(np.random.rand(*shape).astype(np.float32))
        for got, ref in zip(f(x), fun(x)):
            assert got.shape == ref.shape
            np.testing.assert_allclose(np.array(got), np.array(ref),
                                       rtol=1e-6, atol=1e-6)


def test_closure_over_a_lazy_array_is_a_constant(path):
    c = mx.arange(3) * 2  # not evaluated
    mx.export_function(path, lambda x: x + c, mx.zeros(3, mx.int32))
    f = mx.import_function(path)
    assert f(mx.array([1, 1, 1]))[0].tolist() == [1, 3, 5]


def test_matmul_and_conv_shapeless(path):
    w = mx.array(np.random.rand(8, 5).astype(np.float32))
    fn = lambda x: mx.matmul(x, w)
    mx.export_function(path, fn, mx.zeros((1, 4, 8)), shapeless=True)
    f = mx.import_function(path)
    for n in (4, 9, 30):
        x = mx.array(np.random.rand(2, n, 8).astype(np.float32))
        (y,) = f(x)
        assert y.shape == (2, n, 5) and mx.allclose(y, fn(x))
    k = mx.array(np.random.rand(6, 3, 3, 4).astype(np.float32))
    conv = lambda x: mx.conv2d(x, k, stride=2, padding=1)
    mx.export_function(path, conv, mx.zeros((1, 16, 16, 4)), shapeless=True)
    f = mx.import_function(path)
    x = mx.array(np.random.rand(2, 9, 12, 4).astype(np.float32))
    assert mx.allclose(f(x)[0], conv(x), atol=1e-5)


def test_many_primitives_round_trip(path):
    key = mx.random.key(3)
    idx = mx.array([[0, 1, 2, 3], [1, 2, 0, 3]])

    def fun(a, b):
        c = mx.take_along_axis(a, idx, axis=0)
        d = mx.put_along_axis(a, idx, b, axis=0)
        e = mx.sort(a, axis=1) + mx.argsort(a, axis=0).astype(mx.float32)
        g = mx.cumsum(a, axis=1, reverse=True) + mx.logsumexp(a, axis=0)
        h = mx.fft.rfft(a, axis=1)
        q = mx.pad(a, [(1, 1), (0, 2)]) [1:3, ::2]
        r = mx.random.uniform(shape=(4, 4), key=key)
        s = mx.searchsorted(mx.sort(a.flatten()), b.flatten(), side="right")
        t = mx.linalg.inv(a @ a.T + 4 * mx.eye(4))
        u = a.at[mx.array([0, 0, 1])].add(1.0)
        v = mx.where(a > 0.5, a, -a) + mx.maximum(a, 0.3)
        return [c, d, e, g, mx.abs(h), q, r, s, t, u, v,
                mx.fast.layer_norm(a, None, None, 1e-5),
                mx.log2(a + 1) + mx.log10(a + 1) + mx.log(a + 1)]

    a = mx.array(np.random.rand(4, 4).astype(np.float32))
    b = mx.array(np.random.rand(2, 4).astype(np.float32))
    mx.export_function(path, fun, a, b)
    got = mx.import_function(path)(a, b)
    for g, e in zip(got, fun(a, b)):
        assert g.shape == e.shape and g.dtype == e.dtype
        assert mx.allclose(g, e, atol=1e-5)


def test_random_state_is_captured(path):
    mx.random.seed(5)
    mx.export_function(path, lambda: mx.random.uniform(shape=(3,)))
    (out,) = mx.import_function(path)()
    mx.random.seed(5)
    assert mx.array_equal(out, mx.random.uniform(shape=(3,)))


def test_compiled_functions_are_inlined(path):
    cf = mx.compile(lambda x: mx.tanh(x) * 2 + 1)
    mx.export_function(path, lambda x: cf(x) - 1, mx.ones(5))
    x = mx.array([0.1, 0.2, 0.3, 0.4, 0.5])
    assert mx.allclose(mx.import_function(path)(x)[0], cf(x) - 1)


def test_custom_function_cannot_be_exported(path):
    @mx.custom_function
    def f(x):
        return x * 2

    @f.vjp
    def f_vjp(primals, cotangents, outputs):
        return cotangents

    with pytest.raises(ValueError, match=r"\[export_function\] Cannot export "
                       r"the primitive CustomTransforms"):
        mx.export_function(path, f, mx.ones(3))


def test_imported_function_is_differentiable(path):
    mx.export_function(path, lambda x: (x * x).sum(), mx.ones(3))
    f = mx.import_function(path)
    g = mx.grad(lambda x: f(x)[0])(mx.array([1.0, 2.0, 3.0]))
    assert g.tolist() == [2.0, 4.0, 6.0]


def test_callback(path):
    events = []
    fn = lambda x, y: mx.log(mx.abs(x - y)).astype(mx.int32)
    mx.export_function(events.append, fn, mx.array(1.0), y=mx.array(1.0))
    by_type = {}
    for e in events:
        by_type.setdefault(e["type"], []).append(e)
    assert len(by_type["inputs"][0]["inputs"]) == 2
    assert by_type["keyword_inputs"][0]["keywords"][0][0] == "y"
    assert len(by_type["constants"][0]["constants"]) == 0
    assert len(by_type["outputs"][0]["outputs"]) == 1
    prims = by_type["primitive"]
    assert [p["name"] for p in prims] == ["Subtract", "Abs", "Log", "AsType"]
    assert [p["arguments"] for p in prims] == [[], [], [2], [mx.int32]]
    with pytest.raises(ValueError, match=r"metadata cannot be given with a "
                       r"callback"):
        mx.export_function(lambda e: None, fn, mx.array(1.0), mx.array(1.0),
                           metadata="{}")


def test_metadata(path):
    meta = json.dumps({"name": "model", "params": 7})
    mx.export_function(path, mx.abs, mx.array([1.0, -2.0]), metadata=meta)
    f, m = mx.import_function(path, return_metadata=True)
    assert m == meta and f(mx.array([-3.0, 4.0]))[0].tolist() == [3.0, 4.0]
    mx.export_function(path, mx.abs, mx.array([1.0]))
    assert mx.import_function(path, return_metadata=True)[1] == ""
    with mx.exporter(path, mx.abs, metadata=meta) as e:
        e(mx.array([1.0]))
        e(mx.array([1.0, 2.0]))
    assert mx.import_function(path, return_metadata=True)[1] == meta
    with pytest.raises(TypeError, match=r"\[export_function\] metadata must "
                       r"be a str"):
        mx.export_function(path, mx.abs, mx.array(1.0), metadata={"a": 1})


def test_exporter_is_collected_with_its_closure(path):
    def outer():
        d = {}
        d["f"] = mx.exporter(path, lambda x: d["x"])
        d["x"] = mx.array([0] * 1000)

    gc.collect()
    before = len(gc.get_objects())
    for _ in range(5):
        outer()
        gc.collect()
    assert len(gc.get_objects()) - before < 50


def test_corrupt_files(path):
    with open(path, "wb") as f:
        f.write(b"NOPE")
    with pytest.raises(ValueError, match=r"\[import_function\] Not an "
                       r"exported function"):
        mx.import_function(path)
    mx.export_function(path, mx.abs, mx.array([1.0]))
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[:-5])
    with pytest.raises(ValueError, match=r"\[import_function\] Truncated"):
        mx.import_function(path)
    with pytest.raises(ValueError, match=r"\[import_function\] Cannot open"):
        mx.import_function(path + ".missing")
