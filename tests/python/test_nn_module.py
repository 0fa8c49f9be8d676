"""nn.Module tree semantics: parameters, children, update, freeze, modes,
weights files, and the nn-level transformations."""

import os

import numpy as np
import pytest

import fluxion.core as mx
import fluxion.nn as nn
from fluxion.utils import tree_flatten, tree_map


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 4)
        )
        self.heads = [nn.Linear(4, 2), nn.Linear(4, 1, bias=False)]
        self.table = {"scale": mx.ones((4,)), "shift": mx.zeros((4,))}
        self.act = nn.relu  # a plain callable: no parameters
        self.hidden_size = 4  # a plain attribute
        self._cache = mx.zeros((2,))  # private: not a parameter

    def __call__(self, x):
        h = self.encoder(x) * self.table["scale"] + self.table["shift"]
        return self.heads[0](h), self.heads[1](h)


def names(tree):
    return [k for k, _ in tree_flatten(tree)]


def test_parameters_structure_and_names():
    net = Net()
    assert isinstance(net, dict)
    assert names(net.parameters()) == [
        "encoder.layers.0.weight",
        "encoder.layers.0.bias",
        "encoder.layers.2.weight",
        "encoder.layers.2.bias",
        "heads.0.weight",
        "heads.0.bias",
        "heads.1.weight",
        "table.scale",
        "table.shift",
    ]
    # Parameterless layers keep their list slot as an empty dict.
    assert net.parameters()["encoder"]["layers"][1] == {}
    assert (
        net.encoder.layers[0].weight is net["encoder"]["layers"][0]["weight"]
    )
    assert "_cache" not in net.parameters()


def test_attributes_arrays_live_in_the_dict():
    m = nn.Linear(2, 3)
    assert "weight" in m and m.weight is m["weight"]
    m.extra = mx.ones((1,))
    assert "extra" in m
    m.extra = None  # a non-array replaces the dict entry
    assert "extra" not in m and m.extra is None
    m.extra = mx.array([5])  # and an array replaces the plain attribute
    assert m.extra.item() == 5 and "extra" in m
    del m.extra
    assert not hasattr(m, "extra")
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        m.missing


def test_children_leaf_modules_and_traversal():
    net = Net()
    children = net.children()
    assert children["encoder"] is net.encoder
    assert children["heads"][1] is net.heads[1]
    # Containers without modules keep their shape with empty leaves (MLX).
    assert children["table"] == {"scale": {}, "shift": {}}
    assert len(tree_flatten(children, is_leaf=nn.Module.is_module)) == 3
    leaves = tree_flatten(net.leaf_modules(), is_leaf=nn.Module.is_module)
    assert [k for k, _ in leaves] == [
        "encoder.layers.0",
        "encoder.layers.1",
        "encoder.layers.2",
        "heads.0",
        "heads.1",
    ]
    named = dict(net.named_modules())
    assert named[""] is net and named["heads.1"] is net.heads[1]
    assert len(net.modules()) == 1 + 1 + 3 + 2
    seen = []
    net.apply_to_modules(lambda k, m: seen.append(k))
    assert seen[0] == "" and set(seen) == set(named)


def test_update_replaces_and_validates():
    net = Net()
    new_w = mx.full((2, 4), 7.0)
    net.update({"heads": [{"weight": new_w}]})
    assert net.heads[0].weight is new_w
    with pytest.raises(ValueError, match="heads.0.nope"):
        net.update({"heads": [{"nope": mx.ones((1,))}]})
    with pytest.raises(ValueError, match="invalid type str"):
        net.update({"heads": [{"weight": "x"}]})
    with pytest.raises(ValueError):
        net.update({"heads": [{}, {}, {"weight": new_w}]})  # no third head
    net.update({"heads": [{}, {}, {"weight": new_w}]}, strict=False)
    assert len(net.heads) == 2


def test_update_modules():
    net = Net()
    replacement = nn.Linear(4, 5)
    net.update_modules({"heads": [{}, replacement]})
    assert net.heads[1] is replacement and net.heads[0].weight.shape == (2, 4)
    with pytest.raises(ValueError, match="sub-module named"):
        net.update_modules({"decoder": nn.Linear(1, 1)})
    with pytest.raises(ValueError, match="invalid type int"):
        net.update_modules({"heads": [3]})
    with pytest.raises(ValueError):
        net.update_modules({"heads": [{}, {}, nn.Linear(1, 1)]})
    net.update_modules({"heads": [{}, {}, nn.Linear(1, 1)]}, strict=False)
    assert len(net.heads) == 2
    # Updating with the module's own leaves is always allowed.
    net.update_modules(net.leaf_modules())


def test_freeze_unfreeze_keys_recurse_strict():
    net = Net()
    all_names = names(net.parameters())
    net.freeze()
    assert names(net.trainable_parameters()) == []
    net.unfreeze()
    assert names(net.trainable_parameters()) == all_names

    net.freeze(keys="bias")
    trainable = names(net.trainable_parameters())
    assert not any(k.endswith("bias") for k in trainable)
    assert "heads.0.weight" in trainable
    net.unfreeze(keys=["bias"])
    assert names(net.trainable_parameters()) == all_names

    # Nested dict parameters are named by their dotted path.
    net.freeze(keys="table.scale", recurse=False)
    assert "table.scale" not in names(net.trainable_parameters())
    assert "table.shift" in names(net.trainable_parameters())
    net.unfreeze()

    # Without recurse only the module's own parameters change.
    net.encoder.freeze(recurse=False)
    assert names(net.trainable_parameters()) == all_names
    net.heads[0].freeze(recurse=False)
    assert "heads.0.weight" not in names(net.trainable_parameters())
    net.unfreeze()

    with pytest.raises(KeyError, match="not_there"):
        net.freeze(keys="not_there", strict=True)
    net.freeze(keys="not_there")  # ignored when not strict
    # A key present in only some modules is fine for a strict recursive freeze.
    net.freeze(keys="bias", strict=True)
    assert "heads.1.weight" in names(net.trainable_parameters())


def test_chaining_train_eval_and_apply():
    net = Net()
    assert net.training
    assert net.freeze().unfreeze() is net
    assert net.eval() is net
    assert not net.heads[1].training and not net.encoder.layers[0].training
    net.train()
    assert all(m.training for m in net.modules())
    net.apply(lambda p: p * 0)
    assert all(
        float(mx.abs(v).sum()) == 0 for _, v in tree_flatten(net.parameters())
    )
    # apply with a filter touches only the accepted parameters (the filter
    # sees containers too, as in MLX).
    net.apply(
        lambda p: p + 1,
        filter_fn=lambda m, k, v: isinstance(v, (dict, list)) or k == "bias",
    )
    flat = dict(tree_flatten(net.parameters()))
    assert float(flat["heads.0.bias"].sum()) == 2.0
    assert float(flat["heads.0.weight"].sum()) == 0.0


def test_set_dtype():
    m = nn.Sequential(nn.Linear(2, 2), nn.Embedding(3, 2))
    m.layers[1].ids = mx.array([0, 1])
    m.set_dtype(mx.float16)
    dtypes = {k: v.dtype for k, v in tree_flatten(m.parameters())}
    assert dtypes["layers.0.weight"] == mx.float16
    assert dtypes["layers.1.ids"] == mx.int32  # integers are left alone
    m.set_dtype(mx.int64, predicate=None)
    assert all(v.dtype == mx.int64 for _, v in tree_flatten(m.parameters()))


def test_repr():
    net = nn.Sequential(
        nn.Linear(2, 3), nn.ReLU(), nn.Conv2d(3, 4, 3, bias=False)
    )
    assert repr(net) == (
        "Sequential(\n"
        "  (layers.0): Linear(input_dims=2, output_dims=3, bias=True)\n"
        "  (layers.1): ReLU()\n"
        "  (layers.2): Conv2d(3, 4, kernel_size=(3, 3), stride=(1, 1), "
        "padding=(0, 0), dilation=(1, 1), groups=1, bias=False)\n"
        ")"
    )
    assert repr(nn.LayerNorm(8)) == "LayerNorm(8, eps=1e-05, affine=True)"


@pytest.mark.parametrize("ext", ["npz", "safetensors"])
def test_save_load_round_trip(tmp_path, ext):
    mx.random.seed(1)
    a = Net()
    a.heads[0].bias = mx.array([1.5, -2.5])
    path = os.path.join(tmp_path, f"w.{ext}")
    a.save_weights(path)
    mx.random.seed(2)
    b = Net()
    b.load_weights(path)
    for (ka, va), (kb, vb) in zip(
        tree_flatten(a.parameters()), tree_flatten(b.parameters())
    ):
        assert ka == kb
        np.testing.assert_array_equal(np.array(va), np.array(vb))
    x = mx.random.normal((5, 3))
    np.testing.assert_array_equal(np.array(a(x)[0]), np.array(b(x)[0]))
    # bfloat16 parameters survive too.
    a.set_dtype(mx.bfloat16)
    a.save_weights(path)
    b.set_dtype(mx.bfloat16)
    b.load_weights(path)
    assert b.heads[0].weight.dtype == mx.bfloat16
    assert mx.array_equal(a.heads[0].weight, b.heads[0].weight).item()


def test_save_weights_rejects_unknown_extension(tmp_path):
    with pytest.raises(ValueError, match="Unsupported file extension"):
        nn.Linear(1, 1).save_weights(os.path.join(tmp_path, "w.bin"))


def test_load_weights_strict_errors_name_keys():
    m = nn.Linear(2, 2)
    w, b = mx.ones((2, 2)), mx.ones((2,))
    with pytest.raises(ValueError, match=r"Missing parameters: \['bias'\]"):
        m.load_weights([("weight", w)])
    with pytest.raises(ValueError, match=r"not in model: \['extra'\]"):
        m.load_weights([("weight", w), ("bias", b), ("extra", b)])
    with pytest.raises(ValueError, match=r"shape \(2,\).*\(2, 1\).*'bias'"):
        m.load_weights([("weight", w), ("bias", mx.ones((2, 1)))])
    with pytest.raises(ValueError, match="array for parameter 'bias'"):
        m.load_weights([("weight", w), ("bias", 3)])
    # Non-strict: partial loads, unknown names (even list indices) dropped.
    m.load_weights([("weight", w * 3)], strict=False)
    assert float(m.weight.sum()) == 12.0
    s = nn.Sequential(nn.Linear(2, 2))
    s.load_weights([("layers.0.bias", b), ("layers.3.bias", b)], strict=False)
    assert len(s.layers) == 1 and float(s.layers[0].bias.sum()) == 2.0
    m.load_weights([], strict=False)
    # A dict of weights works like a list of pairs.
    m.load_weights({"weight": w, "bias": b})
    assert float(m.bias.sum()) == 2.0


def test_state_is_the_module():
    m = nn.Linear(2, 2)
    assert m.state is m
    m.state["note"] = "hello"
    assert m["note"] == "hello"


def test_module_grad_through_core_grad():
    m = nn.Linear(3, 2)
    x = mx.array([[1.0, 2.0, 3.0]])
    g = mx.grad(lambda model: model(x).sum())(m)
    np.testing.assert_allclose(
        np.array(g["weight"]), np.array([[1, 2, 3], [1, 2, 3]])
    )
    np.testing.assert_allclose(np.array(g["bias"]), [1, 1])


def test_value_and_grad_matches_manual_and_restores_params():
    mx.random.seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    model.layers[0].freeze(keys="bias")
    x = mx.random.normal((6, 3))
    y = mx.random.normal((6, 1))

    def loss_fn(model, x, y):
        return nn.losses.mse_loss(model(x), y)

    before = tree_flatten(model.parameters())
    loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)
    # Only trainable parameters get gradients.
    assert names(grads) == names(model.trainable_parameters())
    assert "layers.0.bias" not in names(grads)
    # The model holds its original arrays afterwards.
    for (k, v), (_, v2) in zip(before, tree_flatten(model.parameters())):
        assert v is v2, k

    W1, b1 = np.array(model.layers[0].weight), np.array(model.layers[0].bias)
    W2, b2 = np.array(model.layers[2].weight), np.array(model.layers[2].bias)
    xn, yn = np.array(x), np.array(y)
    h = np.tanh(xn @ W1.T + b1)
    r = h @ W2.T + b2 - yn
    np.testing.assert_allclose(loss.item(), np.mean(r**2), rtol=1e-5)
    dW2 = 2 * r.T @ h / r.size
    np.testing.assert_allclose(
        np.array(grads["layers"][2]["weight"]), dW2, rtol=1e-4, atol=1e-6
    )


def test_value_and_grad_keeps_state_written_by_the_function():
    bn = nn.BatchNorm(2)
    x = mx.array([[0.0, 1.0], [2.0, 5.0]])
    nn.value_and_grad(bn, lambda m, x: m(x).sum())(bn, x)
    np.testing.assert_allclose(
        np.array(bn.running_mean), [0.1, 0.3], rtol=1e-6
    )


def test_checkpoint_gives_the_same_gradients():
    mx.random.seed(3)
    layer = nn.TransformerEncoderLayer(8, 2, mlp_dims=16)
    x = mx.random.normal((2, 5, 8))

    def loss(model, x, fn):
        return fn(x, None).sum()

    g_plain = nn.value_and_grad(layer, lambda x: layer(x, None).sum())(x)[1]
    cp = nn.checkpoint(layer)
    g_cp = nn.value_and_grad(layer, lambda x: cp(x, None).sum())(x)[1]
    for (k, a), (_, b) in zip(tree_flatten(g_plain), tree_flatten(g_cp)):
        np.testing.assert_allclose(
            np.array(a), np.array(b), rtol=1e-5, atol=1e-6, err_msg=k
        )


def test_average_gradients_single_process_is_identity():
    g = {"w": mx.ones((2,))}
    assert nn.average_gradients(g) is g


def test_compile_with_module_state():
    mx.random.seed(4)
    model = nn.Linear(3, 1)
    x = mx.random.normal((4, 3))
    expected = np.array(model(x))

    @mx.compile
    def f(x):
        return model(x)

    from functools import partial

    np.testing.assert_allclose(np.array(f(x)), expected, rtol=1e-6)
    # Captured state: an update of the parameters is seen by the next call.
    g = partial(mx.compile, inputs=model.state)(lambda x: model(x))
    np.testing.assert_allclose(np.array(g(x)), expected, rtol=1e-6)
    model.update(tree_map(lambda p: p * 2, model.parameters()))
    np.testing.assert_allclose(np.array(g(x)), 2 * expected, rtol=1e-5)
