"""nn.fully_shard / nn.FullyShardedModule in one process (a group of size
1): fully_shard returns the module itself, and a FullyShardedModule built
directly behaves as the module it wraps (its gather and reduce-scatter are
identities). The cross-process behaviour is tested under mpirun -np 2 and
3 by tests/mpi/test_fsdp.py."""

import numpy as np
import pytest

import fluxion.core as mx
import fluxion.nn as nn
import fluxion.optimizers as optim
from fluxion.utils import tree_flatten


def mlp():
    return nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))


def pair():
    mx.random.seed(11)
    ref, model = mlp(), mlp()
    model.update(ref.parameters())
    return model, ref


def loss_fn(m, x, y):
    return ((m(x).astype(mx.float32) - y) ** 2).mean()


def test_names_resolve_where_mlx_has_them():
    from fluxion.nn.layers import distributed

    assert nn.fully_shard is distributed.fully_shard
    assert nn.FullyShardedModule is distributed.FullyShardedModule
    assert {"fully_shard", "FullyShardedModule"} <= set(distributed.__all__)


def test_fully_shard_returns_the_module_in_a_group_of_one():
    model = mlp()
    assert mx.distributed.init().size() == 1
    assert nn.fully_shard(model) is model
    assert nn.fully_shard(model, compute_dtype=mx.bfloat16) is model


def test_a_group_of_one_is_the_identity():
    model, ref = pair()
    sharded = nn.FullyShardedModule(model)
    assert repr(sharded).startswith("FullyShardedModule(num_sharded_params=4")
    flat = dict(tree_flatten(sharded.parameters()))
    full = dict(tree_flatten(ref.parameters()))
    assert sorted(flat) == sorted("module." + k for k in full)
    for k, w in full.items():
        assert np.array_equal(np.array(flat["module." + k]), np.array(w))
    x = mx.random.normal((4, 3))
    y = mx.random.normal((4, 2))
    opt, opt_ref = optim.Adam(1e-2), optim.Adam(1e-2)
    for _ in range(2):
        loss, g = nn.value_and_grad(sharded, loss_fn)(sharded, x, y)
        loss_ref, g_ref = nn.value_and_grad(ref, loss_fn)(ref, x, y)
        opt.update(sharded, g)
        opt_ref.update(ref, g_ref)
        mx.eval(loss, loss_ref, sharded.parameters(), ref.parameters())
        assert loss.item() == pytest.approx(loss_ref.item(), rel=1e-6)
        g_ref = dict(tree_flatten(g_ref))
        for k, v in tree_flatten(g["module"]):
            np.testing.assert_allclose(np.array(v), np.array(g_ref[k]), rtol=1e-6)
    np.testing.assert_allclose(np.array(sharded(x)), np.array(ref(x)), rtol=1e-6)
    # The shards (here the whole arrays) are back in the module after a call.
    assert all(isinstance(v, mx.array) for _, v in tree_flatten(model.parameters()))


def test_compute_dtype_and_reassigned_state():
    mx.random.seed(2)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm(4))
    ref = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm(4))
    ref.update(model.parameters())
    sharded = nn.FullyShardedModule(model, compute_dtype=mx.bfloat16)
    x = mx.random.normal((5, 3))
    _, g = nn.value_and_grad(sharded, loss_fn)(
        sharded, x.astype(mx.bfloat16), mx.zeros((5, 4)))
    ref.set_dtype(mx.bfloat16)
    out_ref = ref(x.astype(mx.bfloat16))
    mx.eval(g, out_ref)
    # Gradients come back in the shards' dtype, state in the stored dtype.
    assert all(v.dtype == mx.float32 for _, v in tree_flatten(g))
    stats = model.layers[1]
    assert stats.running_mean.dtype == mx.float32
    # The running statistics the call assigned are kept.
    np.testing.assert_allclose(np.array(stats.running_mean),
                               np.array(ref.layers[1].running_mean.astype(mx.float32)),
                               rtol=1e-2, atol=1e-3)
    assert not np.allclose(np.array(stats.running_mean), 0.0)


def test_nested_modules_keep_their_own_shards():
    model, ref = pair()
    model.layers[0] = nn.FullyShardedModule(model.layers[0])
    outer = nn.FullyShardedModule(model)
    assert outer._paths == ["layers.2.weight", "layers.2.bias"]
    x = mx.random.normal((2, 3))
    np.testing.assert_allclose(np.array(outer(x)), np.array(ref(x)), rtol=1e-6)
    # Nothing left to shard: fully_shard gives the module back (any group).
    inner_only = nn.Sequential(nn.FullyShardedModule(nn.Linear(2, 2)))
    assert not nn.FullyShardedModule(inner_only)._paths


def test_wrong_inputs_raise():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = mx.array(2.0)

    with pytest.raises(ValueError, match=r"\[FullyShardedModule\] Cannot shard "
                       r"parameter 'scale' because it is a scalar"):
        nn.FullyShardedModule(Scaled())
    with pytest.raises(ValueError, match=r"compute_dtype must be a floating "
                       r"dtype, got .*int8"):
        nn.FullyShardedModule(mlp(), compute_dtype=mx.int8)
    with pytest.raises(TypeError, match=r"Expected a Module to wrap, got dict"):
        nn.FullyShardedModule({"w": mx.ones(2)})
    sharded = nn.FullyShardedModule(nn.Linear(2, 4))
    sharded.module.bias = mx.zeros((5,))
    with pytest.raises(ValueError, match=r"Parameter 'bias' has shape \(5,\), "
                       r"expected its shard's shape \(4,\)"):
        sharded(mx.ones((1, 2)))
    assert sharded.module.bias.shape == (5,)  # nothing half-done
