"""nn.fully_shard / nn.FullyShardedModule (MLX 0.32's fully-sharded data
parallelism) over MPI: run on every rank by mpirun (tests/mpi/run.sh, with
2 and 3 processes), like test_collectives.py; and over NCCL on two GPUs
(tests/python/test_nccl.py, FLUXION_TEST_BACKEND=nccl).

The reference is computed on every rank without collectives: each rank can
make every rank's batch, so the unsharded model's gradient of the mean of
the ranks' losses (what FSDP's reduce-scatter divided by N gives) is a
local computation. Sharded results are compared with the rows of it this
rank holds, and, after gathering the shards, with all of it."""

import os

import numpy as np
import pytest

import fluxion.core as mx
import fluxion.nn as nn
import fluxion.optimizers as optim
from fluxion.utils import tree_flatten

# MPI under mpirun; tests/python/test_nccl.py runs this file again over
# NCCL, one process per GPU (FLUXION_TEST_BACKEND=nccl).
world = mx.distributed.init(
    strict=True, backend=os.environ.get("FLUXION_TEST_BACKEND", "mpi"))
R, N = world.rank(), world.size()
D = 4 * N  # every sharded axis: 4 rows per rank


class MLP(nn.Module):
    def __init__(self, dims=D):
        super().__init__()
        self.l1 = nn.Linear(6, dims)
        self.l2 = nn.Linear(dims, dims)
        self.l3 = nn.Linear(dims, 2 * D)

    def __call__(self, x):
        return self.l3(nn.relu(self.l2(nn.relu(self.l1(x)))))


def batch(rank, seed=0, rows=5):
    rng = np.random.default_rng(1000 * seed + rank)
    x = rng.normal(size=(rows, 6)).astype(np.float32)
    y = rng.normal(size=(rows, 2 * D)).astype(np.float32)
    return mx.array(x), mx.array(y)


def loss_fn(model, x, y):
    return ((model(x).astype(mx.float32) - y) ** 2).mean()


def pair(cls=MLP, seed=3):
    """The same initial model twice: one to shard, one reference."""
    mx.random.seed(seed)
    ref = cls()
    model = cls()
    model.update(ref.parameters())
    mx.eval(ref.parameters(), model.parameters())
    return model, ref


def mean_loss_and_grads(ref, seed=0):
    """The unsharded gradient of the ranks' mean loss, computed locally."""

    def total(m):
        return sum(loss_fn(m, *batch(r, seed)) for r in range(N)) / N

    return nn.value_and_grad(ref, lambda m: total(m))(ref)


def rows(a):
    n = a.shape[0] // N
    return np.array(a)[R * n:(R + 1) * n]


def gathered(tree):
    """Every rank's shards concatenated along axis 0 (the full arrays)."""
    return {k: mx.distributed.all_gather(v) for k, v in tree_flatten(tree)}


def test_shards_are_this_ranks_rows():
    model, ref = pair()
    full = dict(tree_flatten(ref.parameters()))
    sharded = nn.fully_shard(model)
    assert isinstance(sharded, nn.FullyShardedModule)
    assert sharded.module is model
    assert repr(sharded).startswith("FullyShardedModule(num_sharded_params=6")
    shards = dict(tree_flatten(sharded.parameters()))
    assert sorted(shards) == sorted("module." + k for k in full)
    for k, w in full.items():
        s = shards["module." + k]
        assert s.shape == (w.shape[0] // N,) + tuple(w.shape[1:]), k
        assert np.array_equal(np.array(s), rows(w)), k
    # Already sharded, or nothing to shard: returned as it is.
    assert nn.fully_shard(sharded) is sharded
    relu = nn.ReLU()
    assert nn.fully_shard(relu) is relu
    # A group of one process: the module itself.
    alone = world.split(R)
    assert alone.size() == 1
    m = nn.Linear(3, 5)
    assert nn.layers.distributed.fully_shard(m, group=alone) is m


def test_forward_and_gradients_match_the_unsharded_model():
    model, ref = pair()
    sharded = nn.fully_shard(model)
    x, y = batch(R)
    out, out_ref = sharded(x), ref(x)
    loss, grads = nn.value_and_grad(sharded, loss_fn)(sharded, x, y)
    loss_ref = loss_fn(ref, x, y)
    _, g_ref = mean_loss_and_grads(ref)
    full = gathered(grads["module"])
    mx.eval(out, out_ref, loss, loss_ref, grads, g_ref, full)
    np.testing.assert_allclose(np.array(out), np.array(out_ref), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(loss.item(), loss_ref.item(), rtol=1e-6)
    g_ref = dict(tree_flatten(g_ref))
    for k, g in tree_flatten(grads["module"]):
        assert g.shape[0] * N == g_ref[k].shape[0], k
        np.testing.assert_allclose(np.array(g), rows(g_ref[k]), rtol=1e-5,
                                   atol=1e-6, err_msg=k)
        np.testing.assert_allclose(np.array(full[k]), np.array(g_ref[k]),
                                   rtol=1e-5, atol=1e-6, err_msg=k)
    # The calls put the shards back.
    full_shapes = {k: v.shape for k, v in tree_flatten(ref.parameters())}
    for k, a in tree_flatten(sharded.module.parameters()):
        assert a.shape[0] * N == full_shapes[k][0], k


def test_adam_steps_match_the_unsharded_steps():
    model, ref = pair(seed=5)
    sharded = nn.fully_shard(model)
    opt, opt_ref = optim.Adam(learning_rate=1e-2), optim.Adam(learning_rate=1e-2)
    losses = []
    for step in range(3):
        loss, grads = nn.value_and_grad(sharded, loss_fn)(sharded, *batch(R, step))
        opt.update(sharded, grads)
        loss_ref, g_ref = mean_loss_and_grads(ref, step)
        opt_ref.update(ref, g_ref)
        loss = mx.distributed.all_sum(loss) / N
        mx.eval(sharded.parameters(), opt.state, ref.parameters(), loss, loss_ref)
        losses.append((loss.item(), loss_ref.item()))
    full = gathered(sharded.parameters()["module"])
    mx.eval(full)
    for a, b in losses:
        assert a == pytest.approx(b, rel=1e-5)
    for k, w in tree_flatten(ref.parameters()):
        np.testing.assert_allclose(np.array(full[k]), np.array(w), rtol=1e-5,
                                   atol=1e-6, err_msg=k)
    # The optimizer state is sharded too.
    m = opt.state["module"]["l2"]["weight"]["m"]
    assert m.shape == (D // N, D)


def test_compute_dtype_gathers_and_computes_in_bfloat16():
    model, ref = pair()
    sharded = nn.fully_shard(model, compute_dtype=mx.bfloat16)
    x, y = batch(R)
    out = sharded(x.astype(mx.bfloat16))
    loss, grads = nn.value_and_grad(sharded, loss_fn)(
        sharded, x.astype(mx.bfloat16), y)
    # Reference: the parameters rounded to bfloat16, the ranks' mean loss.
    ref.set_dtype(mx.bfloat16)
    xs = [batch(r) for r in range(N)]

    def total(m):
        return sum(loss_fn(m, xr.astype(mx.bfloat16), yr) for xr, yr in xs) / N

    _, g_ref = nn.value_and_grad(ref, lambda m: total(m))(ref)
    out_ref = ref(x.astype(mx.bfloat16))
    mx.eval(out, loss, grads, g_ref, out_ref)
    assert out.dtype == mx.bfloat16
    np.testing.assert_array_equal(np.array(out.astype(mx.float32)),
                                  np.array(out_ref.astype(mx.float32)))
    g_ref = dict(tree_flatten(g_ref))
    for k, g in tree_flatten(grads["module"]):
        assert g.dtype == mx.float32, k  # the shards' dtype
        want = rows(g_ref[k].astype(mx.float32))
        np.testing.assert_allclose(np.array(g), want, rtol=2e-2,
                                   atol=2e-2 * np.abs(want).max(), err_msg=k)
    # The stored shards stay float32.
    assert all(v.dtype == mx.float32 for _, v in tree_flatten(sharded.parameters()))


def test_nested_sharding_and_frozen_parameters():
    model, ref = pair()
    model.l1.freeze(keys=["bias"])
    ref.l1.freeze(keys=["bias"])
    model.l2 = nn.fully_shard(model.l2)  # l2 gathers its own shards
    sharded = nn.fully_shard(model)
    assert sharded._paths == ["l1.weight", "l1.bias", "l3.weight", "l3.bias"]
    x, y = batch(R)
    loss, grads = nn.value_and_grad(sharded, loss_fn)(sharded, x, y)
    _, g_ref = mean_loss_and_grads(ref)
    out, out_ref = sharded(x), ref(x)
    mx.eval(loss, grads, g_ref, out, out_ref)
    np.testing.assert_allclose(np.array(out), np.array(out_ref), rtol=1e-6, atol=1e-6)
    flat = dict(tree_flatten(grads))
    assert "module.l1.bias" not in flat  # frozen: no gradient
    assert "module.l2.module.weight" in flat
    assert sharded.module.l1.bias.shape == (D // N,)  # but sharded
    g_ref = dict(tree_flatten(g_ref))
    for k, g in flat.items():
        kr = k[len("module."):].replace(".module.", ".")
        np.testing.assert_allclose(np.array(g), rows(g_ref[kr]), rtol=1e-5,
                                   atol=1e-6, err_msg=k)


class TiedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(D, 5)
        self.norm = nn.BatchNorm(D)

    def __call__(self, tokens):
        h = self.embed(tokens).sum(1)
        return self.norm(self.embed.as_linear(h))


def test_tied_embedding_and_batchnorm_statistics():
    model, ref = pair(TiedLM)
    model.embed = nn.FullyShardedModule(model.embed)  # as_linear is forwarded
    sharded = nn.fully_shard(model)
    tokens = [mx.array(np.random.default_rng(r).integers(0, D, (6, 3)))
              for r in range(N)]

    def lm_loss(m, t):
        return (m(t) ** 2).mean()

    loss, grads = nn.value_and_grad(sharded, lm_loss)(sharded, tokens[R])
    stats = dict(sharded.module.norm.items())
    ref_out = ref(tokens[R])  # updates ref's running statistics alike
    ref2 = TiedLM()
    ref2.update(ref.parameters())
    _, g_ref = nn.value_and_grad(
        ref2, lambda m: sum(lm_loss(m, t) for t in tokens) / N)(ref2)
    mx.eval(loss, grads, stats, ref_out, g_ref)
    g_ref = dict(tree_flatten(g_ref))
    g = dict(tree_flatten(grads))
    # The embedding's gradient sums both uses (lookup and output projection).
    np.testing.assert_allclose(np.array(g["module.embed.module.weight"]),
                               rows(g_ref["embed.weight"]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.array(g["module.norm.weight"]),
                               rows(g_ref["norm.weight"]), rtol=1e-5, atol=1e-6)
    # Running statistics reassigned in the call keep this rank's rows.
    for k in ("running_mean", "running_var"):
        assert stats[k].shape == (D // N,)
        np.testing.assert_allclose(np.array(stats[k]), rows(ref.norm[k]),
                                   rtol=1e-5, atol=1e-6, err_msg=k)
    assert not np.allclose(np.array(stats["running_mean"]), 0.0)


def test_a_sub_group_shards_over_its_members():
    # N=2: one group of both; N=3: ranks {0, 1} and {2} (where it is the
    # identity).
    sub = world.split(0 if R < 2 else 1)
    members = [0, 1] if R < 2 else list(range(2, N))
    model, ref = pair()
    sharded = nn.FullyShardedModule(model, group=sub)
    x, y = batch(R)
    loss, grads = nn.value_and_grad(sharded, loss_fn)(sharded, x, y)
    _, g_ref = nn.value_and_grad(
        ref, lambda m: sum(loss_fn(m, *batch(r)) for r in members) / len(members))(ref)
    mx.eval(loss, grads, g_ref)
    g_ref = dict(tree_flatten(g_ref))
    n = sub.size()
    for k, g in tree_flatten(grads["module"]):
        w = np.array(g_ref[k])
        part = w[sub.rank() * (w.shape[0] // n):(sub.rank() + 1) * (w.shape[0] // n)]
        np.testing.assert_allclose(np.array(g), part, rtol=1e-5, atol=1e-6, err_msg=k)


def test_compiled_training_step():
    model, ref = pair(seed=7)
    sharded = nn.fully_shard(model)
    opt, opt_ref = optim.SGD(learning_rate=0.1), optim.SGD(learning_rate=0.1)
    state = [sharded.state, opt.state]

    def step(x, y):
        loss, grads = nn.value_and_grad(sharded, loss_fn)(sharded, x, y)
        opt.update(sharded, grads)
        return loss

    step = mx.compile(step, inputs=state, outputs=state)
    for s in range(2):
        step(*batch(R, s))
        _, g_ref = mean_loss_and_grads(ref, s)
        opt_ref.update(ref, g_ref)
        mx.eval(state, ref.parameters())
    full = gathered(sharded.parameters()["module"])
    mx.eval(full)
    for k, w in tree_flatten(ref.parameters()):
        np.testing.assert_allclose(np.array(full[k]), np.array(w), rtol=1e-5,
                                   atol=1e-6, err_msg=k)


def test_wrong_inputs_raise_naming_the_parameter_and_sizes():
    # The same on every rank, before any collective.
    odd = nn.Linear(4, 3 * N + 1)
    with pytest.raises(ValueError, match=(
            r"\[FullyShardedModule\] Cannot shard parameter 'weight' with shape "
            rf"\({3 * N + 1}, 4\) across {N} processes: axis 0 must be "
            rf"divisible by {N}\.")):
        nn.fully_shard(odd)
    assert odd.weight.shape == (3 * N + 1, 4)  # left unsharded

    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, D)
            self.scale = mx.array(2.0)

    with pytest.raises(ValueError, match=r"parameter 'scale' because it is a scalar"):
        nn.fully_shard(Scaled())
    with pytest.raises(ValueError, match=r"compute_dtype must be a floating dtype, "
                       r"got .*int32"):
        nn.fully_shard(nn.Linear(2, D), compute_dtype=mx.int32)
    with pytest.raises(TypeError, match=r"\[FullyShardedModule\] Expected a Module "
                       r"to wrap, got list"):
        nn.FullyShardedModule([nn.Linear(2, D)])
    # Full weights loaded into a sharded model: named before any collective.
    sharded = nn.fully_shard(nn.Linear(2, D))
    sharded.module.weight = mx.zeros((D, 2))
    with pytest.raises(ValueError, match=(
            r"Parameter 'weight' has shape \(" + str(D) + r", 2\), expected its "
            r"shard's shape \(4, 2\) \(full shape \(" + str(D) + r", 2\)\)")):
        sharded(mx.ones((1, 2)))
    # The group works on.
    total = mx.distributed.all_sum(mx.ones(2))
    mx.eval(total)
    assert total.tolist() == [float(N)] * 2


def test_mixed_dtypes_and_a_quantized_layer():
    # One gather per dtype keeps each parameter's dtype; compute_dtype
    # casts the floating ones only (the packed uint32 weight stays).
    H = 96  # divisible by 2, 3 and the group size 32
    mx.random.seed(9)
    ref = nn.Sequential(nn.Linear(6, H), nn.QuantizedLinear(H, D, bias=True,
                                                            group_size=32, bits=4))
    ref.layers[0].set_dtype(mx.float16)
    model = nn.Sequential(nn.Linear(6, H), nn.QuantizedLinear(H, D, bias=True,
                                                              group_size=32, bits=4))
    model.update(ref.parameters())
    half = nn.Sequential(nn.Linear(6, H), nn.QuantizedLinear(H, D, bias=True,
                                                             group_size=32, bits=4))
    half.update(ref.parameters())
    sharded = nn.fully_shard(model)
    sharded_half = nn.fully_shard(half, compute_dtype=mx.bfloat16)
    assert sharded.module.layers[1].weight.dtype == mx.uint32
    assert sharded.module.layers[1].weight.shape[0] == D // N
    x, y = batch(R)
    x16 = x.astype(mx.float16)
    y = y[:, :D]
    qloss = lambda m, x, y: ((m(x).astype(mx.float32) - y) ** 2).mean()
    out, out_ref = sharded(x16), ref(x16)
    loss, grads = nn.value_and_grad(sharded, qloss)(sharded, x16, y)
    _, g_ref = nn.value_and_grad(
        ref, lambda m: sum(qloss(m, batch(r)[0].astype(mx.float16),
                                 batch(r)[1][:, :D]) for r in range(N)) / N)(ref)
    out_half = sharded_half(x.astype(mx.bfloat16))
    ref.set_dtype(mx.bfloat16)  # floating arrays only: the weight is uint32
    out_half_ref = ref(x.astype(mx.bfloat16))
    mx.eval(out, out_ref, grads, g_ref, out_half, out_half_ref)
    assert out.dtype == out_ref.dtype
    np.testing.assert_array_equal(np.array(out), np.array(out_ref))
    assert out_half.dtype == mx.bfloat16
    np.testing.assert_array_equal(np.array(out_half.astype(mx.float32)),
                                  np.array(out_half_ref.astype(mx.float32)))
    g_ref = dict(tree_flatten(g_ref))
    flat = dict(tree_flatten(grads["module"]))
    assert sorted(flat) == sorted(g_ref)  # the frozen quantized arrays: none
    for k, g in flat.items():
        assert g.dtype == g_ref[k].dtype, k
        np.testing.assert_allclose(np.array(g.astype(mx.float32)),
                                   rows(g_ref[k].astype(mx.float32)),
                                   rtol=1e-2, atol=1e-3, err_msg=k)
