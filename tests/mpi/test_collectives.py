"""mx.distributed over MPI: run on every rank by mpirun (tests/mpi/run.sh,
with 2 and 3 processes). Each test issues the same collectives in the same
order on every rank, and checks its values only after them, so that one
rank's failure cannot leave the others waiting (FLUXION_DIST_TIMEOUT bounds
the rest). Values are checked against NumPy on data every rank can make."""

import numpy as np
import pytest

import fluxion.core as mx
import fluxion.nn as nn

world = mx.distributed.init(strict=True, backend="mpi")
R, N = world.rank(), world.size()

DTYPES = [mx.bool_, mx.int8, mx.uint8, mx.int16, mx.uint16, mx.int32,
          mx.uint32, mx.int64, mx.uint64, mx.float16, mx.bfloat16,
          mx.float32, mx.float64, mx.complex64]


def np_of(x):
    if x.dtype == mx.bfloat16:
        x = x.astype(mx.float32)
    return np.array(x)


def data(rank, shape, dtype, seed=0):
    """Rank `rank`'s input: small integers (exact in every dtype)."""
    rng = np.random.default_rng(seed * 100 + rank)
    v = rng.integers(-3, 4, size=shape)
    if dtype == mx.bool_:
        v = v > 0
    elif dtype in (mx.uint8, mx.uint16, mx.uint32, mx.uint64):
        v = np.abs(v)
    elif dtype == mx.complex64:
        v = v + 1j * rng.integers(-3, 4, size=shape)
    return mx.array(v).astype(dtype)


def test_init_and_groups():
    assert mx.distributed.is_available() and mx.distributed.is_available("mpi")
    again = mx.distributed.init()
    assert (again.rank(), again.size()) == (R, N)
    parity = world.split(R % 2)
    assert parity.size() == len(range(R % 2, N, 2))
    assert parity.rank() == R // 2
    # key reverses the order.
    rev = world.split(0, N - 1 - R)
    assert rev.rank() == N - 1 - R
    with pytest.raises(ValueError, match=r"\[Group.split\]"):
        world.split(-1)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(7,), (3, 5), (1024,)])
def test_reductions_against_numpy(dtype, shape):
    xs = [data(r, shape, dtype) for r in range(N)]
    ys = {"sum": mx.distributed.all_sum(xs[R]),
          "max": mx.distributed.all_max(xs[R], group=world),
          "min": mx.distributed.all_min(xs[R], stream=mx.cpu)}
    if dtype == mx.complex64:
        del ys["max"], ys["min"]  # evaluated below (lexicographic order)
    mx.eval(ys)
    stack = np.stack([np_of(x) for x in xs])
    ref = {"sum": stack.sum(0) if dtype != mx.bool_ else stack.any(0),
           "max": stack.max(0), "min": stack.min(0)}
    for k, y in ys.items():
        assert y.dtype == dtype and y.shape == shape
        np.testing.assert_array_equal(np_of(y), ref[k].astype(np_of(y).dtype),
                                      err_msg=k)


def test_complex_max_min_and_nan():
    z = data(R, (6,), mx.complex64, seed=3)
    f = mx.array([float("nan") if R == 0 else 1.0, 2.0 + R])
    got = [mx.distributed.all_max(z), mx.distributed.all_min(z),
           mx.distributed.all_max(f), mx.distributed.all_min(f)]
    mx.eval(got)
    zs = mx.stack([data(r, (6,), mx.complex64, seed=3) for r in range(N)])
    assert mx.array_equal(got[0], zs.max(0)) and mx.array_equal(got[1], zs.min(0))
    # NaN propagates, as in max / min reductions.
    assert np.isnan(np.array(got[2])[0]) and np.isnan(np.array(got[3])[0])
    assert np.array(got[2])[1] == 2.0 + N - 1


def test_half_sums_rounded_per_step():
    x = mx.full((5,), 0.1 * (R + 1), mx.float16)
    b = mx.full((5,), 0.1 * (R + 1), mx.bfloat16)
    y, yb = mx.distributed.all_sum(x), mx.distributed.all_sum(b)
    mx.eval(y, yb)
    ref = sum(0.1 * (r + 1) for r in range(N))
    assert np.allclose(np_of(y), ref, rtol=5e-3)
    assert np.allclose(np_of(yb), ref, rtol=3e-2)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_gather_and_sum_scatter(dtype):
    xs = [data(r, (2, 3), dtype, seed=1) for r in range(N)]
    g = mx.distributed.all_gather(xs[R])
    s0 = mx.distributed.all_gather(mx.array(R).astype(dtype))
    big = [data(r, (2 * N, 3), dtype, seed=2) for r in range(N)]
    sc = (mx.distributed.sum_scatter(big[R]) if dtype != mx.bool_ else None)
    mx.eval(g, s0, sc)
    assert g.shape == (2 * N, 3) and g.dtype == dtype
    np.testing.assert_array_equal(np_of(g), np.concatenate([np_of(x) for x in xs]))
    assert s0.shape == (N,)
    if sc is not None:
        total = sum(np_of(b).astype(np.complex128 if dtype == mx.complex64 else np.float64)
                    for b in big)
        np.testing.assert_allclose(np_of(sc), total[2 * R:2 * R + 2])


def test_non_contiguous_inputs():
    x = mx.arange(12).reshape(3, 4).astype(mx.float32).T * (R + 1)
    y, g = mx.distributed.all_sum(x), mx.distributed.all_gather(x[::2])
    mx.eval(y, g)
    base = np.arange(12).reshape(3, 4).T.astype(np.float32)
    np.testing.assert_array_equal(np.array(y), base * sum(range(1, N + 1)))
    np.testing.assert_array_equal(
        np.array(g), np.concatenate([base[::2] * (r + 1) for r in range(N)]))


def test_split_groups_mixed():
    # Pairs (0,1), (2,...) and parities; then gather the pair sums.
    pairs = world.split(R // 2)
    parity = world.split(R % 2)
    x = mx.ones((1, 2)) * R
    y = mx.distributed.all_sum(x, group=pairs)
    z = mx.distributed.all_gather(y, group=parity)
    mx.eval(z)
    pair_sum = lambda r: sum(q for q in range(N) if q // 2 == r // 2)
    ref = np.array([[pair_sum(q)] * 2 for q in range(R % 2, N, 2)], np.float32)
    np.testing.assert_array_equal(np.array(z), ref)


def test_send_recv_ring_and_pairs():
    # A ring: each rank sends to the next and receives from the previous.
    x = mx.arange(4).astype(mx.float32) + 10 * R
    sent = mx.distributed.send(x, (R + 1) % N)
    got = mx.distributed.recv_like(x, (R - 1) % N)
    other = mx.distributed.recv((2, 2), mx.int32, (R - 1) % N)
    sent2 = mx.distributed.send(mx.full((2, 2), R, mx.int32), (R + 1) % N)
    # Sends first: small messages leave at once (MPI's eager protocol), so
    # the receives that follow find them on every rank.
    mx.eval(sent, sent2)
    mx.eval(got, other)
    np.testing.assert_array_equal(np.array(sent), np.array(x))
    np.testing.assert_array_equal(np.array(got), np.arange(4) + 10 * ((R - 1) % N))
    np.testing.assert_array_equal(np.array(other), np.full((2, 2), (R - 1) % N))
    with pytest.raises(ValueError, match=r"\[send\] Invalid rank"):
        mx.distributed.send(x, N)
    with pytest.raises(ValueError, match=r"\[recv\] Cannot receive from this"):
        mx.distributed.recv_like(x, R)


def test_ping_pong_in_pairs():
    if N < 2:
        pytest.skip("needs 2 processes")
    pairs = world.split(R // 2)
    if pairs.size() < 2:
        return  # the odd rank out of 3
    peer = 1 - pairs.rank()
    x = mx.ones(10)
    sender = pairs.rank() == 0
    for _ in range(6):
        if sender:
            mx.eval(mx.distributed.send(2 * x, peer, group=pairs))
        else:
            x = mx.distributed.recv_like(x, peer, group=pairs)
            mx.eval(x)
        sender = not sender
    assert np.all(np.array(x) == (64 if pairs.rank() == 0 else 32))


def test_gradients_through_collectives():
    x = mx.array([1.0, 2.0, 3.0]) * (R + 1)

    # d/dx_r of sum_q sum(all_sum(x)**2) = N * 2 * all_sum(x).
    g_sum = mx.grad(lambda v: (mx.distributed.all_sum(v) ** 2).sum())(x)
    # all_gather: this rank's slice of the cotangent.
    w = mx.arange(3 * N).astype(mx.float32)
    g_gather = mx.grad(lambda v: (mx.distributed.all_gather(v) * w).sum())(x)
    # sum_scatter: the cotangent gathered.
    big = mx.ones((2 * N,)) * (R + 1)
    g_scatter = mx.grad(lambda v: (mx.distributed.sum_scatter(v) * (R + 1)).sum())(big)
    # all_max: the sum of cotangents to the rank holding the max.
    g_max = mx.grad(lambda v: mx.distributed.all_max(v).sum())(x)
    # jvp of all_sum is all_sum of the tangents.
    _, t = mx.jvp(lambda v: mx.distributed.all_sum(v), [x], [mx.ones(3)])
    mx.eval(g_sum, g_gather, g_scatter, g_max, t)

    total = np.array([1.0, 2.0, 3.0]) * sum(range(1, N + 1))
    np.testing.assert_allclose(np.array(g_sum), N * 2 * total)
    np.testing.assert_allclose(np.array(g_gather), np.arange(3 * R, 3 * R + 3))
    np.testing.assert_allclose(
        np.array(g_scatter), np.repeat(np.arange(1, N + 1), 2).astype(np.float32))
    np.testing.assert_allclose(np.array(g_max), np.full(3, N if R == N - 1 else 0.0))
    np.testing.assert_allclose(np.array(t[0]), np.full(3, N))


def test_vmap_and_compile():
    xb = mx.arange(6).reshape(2, 3).astype(mx.float32) + R
    vs = mx.vmap(mx.distributed.all_sum)(xb)
    vg = mx.vmap(mx.distributed.all_gather, in_axes=1)(xb)  # per column (2,)
    f = mx.compile(lambda v: mx.distributed.all_sum(v * 2) + 1)
    c1, c2 = f(xb), f(xb + 1)
    mx.eval(vs, vg, c1, c2)
    base = np.arange(6).reshape(2, 3).astype(np.float32)
    tot = N * base + sum(range(N))
    np.testing.assert_array_equal(np.array(vs), tot)
    np.testing.assert_array_equal(
        np.array(vg), np.stack([np.concatenate([base[:, j] + r for r in range(N)])
                                for j in range(3)]))
    np.testing.assert_array_equal(np.array(c1), 2 * tot + 1)
    np.testing.assert_array_equal(np.array(c2), 2 * (tot + N) + 1)


def test_shape_errors_name_the_collective():
    with pytest.raises(ValueError, match=r"\[sum_scatter\] The first axis"):
        mx.distributed.sum_scatter(mx.ones((N + 1,)) if N > 1 else mx.ones((1,)))
    with pytest.raises(ValueError, match=r"\[sum_scatter\] .*0-d"):
        mx.distributed.sum_scatter(mx.array(1.0))


def test_average_gradients_buckets():
    calls = []
    original = mx.distributed.all_sum

    def counting(x, **kw):
        calls.append(x.dtype)
        return original(x, **kw)

    mx.distributed.all_sum = counting
    try:
        grads = [mx.ones(10) * (R + 1) for _ in range(10)]
        results = {}
        for size in (32 * 1024**2, 4 * 50, 0):
            calls.clear()
            out = nn.average_gradients(grads, all_reduce_size=size)
            mx.eval(out)
            results[size] = (len(calls), out)
        calls.clear()
        tree = {"a": mx.ones((2, 3)) * R, "b": [mx.ones(4) * R]}
        half = nn.average_gradients(tree, communication_type=mx.bfloat16)
        mx.eval(half)
    finally:
        mx.distributed.all_sum = original
    mean = sum(range(1, N + 1)) / N
    assert {k: v[0] for k, v in results.items()} == {32 * 1024**2: 1, 200: 2, 0: 10}
    for _, out in results.values():
        assert len(out) == 10 and all(np.allclose(np.array(g), mean) for g in out)
    assert calls == [mx.bfloat16]
    assert half["a"].dtype == mx.float32 and half["a"].shape == (2, 3)
    assert np.allclose(np.array(half["b"][0]), sum(range(N)) / N)


def test_sharded_linears_match_the_full_model():
    mx.random.seed(0)  # the same full model on every rank
    full = nn.Sequential(nn.Linear(12, 6 * N), nn.Linear(6 * N, 5))
    sharded = nn.Sequential(
        nn.layers.distributed.shard_linear(full.layers[0], "all-to-sharded"),
        nn.layers.distributed.shard_linear(full.layers[1], "sharded-to-all"))
    x = mx.random.normal((4, 12))
    t = mx.random.normal((4, 5))
    loss = lambda m, x, t: ((m(x) - t) ** 2).sum()
    l1, g1 = nn.value_and_grad(full, loss)(full, x, t)
    l2, g2 = nn.value_and_grad(sharded, loss)(sharded, x, t)
    mx.eval(l1, g1, l2, g2)
    part = slice(R * 6, (R + 1) * 6)
    assert np.allclose(np.array(l1), np.array(l2), rtol=1e-5)
    w0, w1 = g1["layers"][0]["weight"], g1["layers"][1]["weight"]
    assert np.allclose(np.array(w0[part]), np.array(g2["layers"][0]["weight"]), atol=1e-5)
    assert np.allclose(np.array(w1[:, part]), np.array(g2["layers"][1]["weight"]), atol=1e-5)
    assert np.allclose(np.array(g1["layers"][1]["bias"]),
                       np.array(g2["layers"][1]["bias"]), atol=1e-5)


def test_clip_grad_norm_sharded_and_sum_gradients():
    # Issue 33 items 9/10: each rank holds a shard; the norm is global.
    from fluxion.nn.utils import clip_grad_norm_sharded
    from fluxion.nn.layers.distributed import sum_gradients

    shard = {"a": mx.ones((4, 3)) * (R + 1), "b": mx.ones((5,)) * (R + 1)}
    total = sum(17 * (r + 1) ** 2 for r in range(N))
    clipped, norm = clip_grad_norm_sharded(shard, max_norm=1e9, group=world)
    clipped1, norm1 = clip_grad_norm_sharded(shard, max_norm=1.0)
    f = sum_gradients(world)
    x = mx.array([1.0, 2.0]) * (R + 1)
    y, g = mx.value_and_grad(lambda a: (f(a) * 3.0).sum())(x)
    mx.eval(clipped, norm, clipped1, norm1, y, g)
    assert np.allclose(np.array(norm), np.sqrt(total), rtol=1e-5)
    assert np.allclose(np.array(clipped["a"]), R + 1)
    scale = 1.0 / (np.sqrt(total) + 1e-6)
    assert np.allclose(np.array(clipped1["b"]), (R + 1) * scale, rtol=1e-5)
    assert np.allclose(np.array(y), 9.0 * (R + 1))
    # Identity forward; the cotangent (3 on each rank) summed over ranks.
    assert np.allclose(np.array(g), 3.0 * N)


def test_shard_inplace_with_an_axis_predicate():
    mx.random.seed(1)
    m = nn.Linear(4, 3 * N)
    w = np.array(m.weight)
    nn.layers.distributed.shard_inplace(
        m, lambda path, p: 0 if path.endswith("weight") else None)
    mx.eval(m.parameters())
    assert np.array_equal(np.array(m.weight), w[R * 3:(R + 1) * 3])


def test_data_parallel_training_matches_one_process_with_the_whole_batch():
    import fluxion.optimizers as optim

    def train(batches, distributed):
        mx.random.seed(1)  # the same initial model everywhere
        model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
        opt = optim.SGD(learning_rate=0.1)
        loss_fn = lambda m, x, y: nn.losses.cross_entropy(m(x), y, reduction="mean")
        losses = []
        for x, y in batches:
            loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)
            if distributed:
                grads = nn.average_gradients(grads)
                loss = mx.distributed.all_sum(loss) / N
            opt.update(model, grads)
            mx.eval(model.parameters(), loss)
            losses.append(loss.item())
        return losses, model

    rng = np.random.default_rng(7)
    full = [(mx.array(rng.normal(size=(4 * N, 6)).astype(np.float32)),
             mx.array(rng.integers(0, 3, size=4 * N))) for _ in range(3)]
    mine = [(x[4 * R:4 * R + 4], y[4 * R:4 * R + 4]) for x, y in full]
    dist_losses, dist_model = train(mine, True)
    ref_losses, ref_model = train(full, False)
    assert np.allclose(dist_losses, ref_losses, rtol=1e-5)
    w1 = dist_model.layers[0].weight
    w2 = ref_model.layers[0].weight
    assert np.allclose(np.array(w1), np.array(w2), atol=1e-6)


def test_mismatched_arguments_across_ranks_raise_on_every_rank():
    # Rank 0 passes 4 floats, the others 5: every rank raises, naming the
    # collective and each rank's arguments (the cross-rank check).
    x = mx.ones(4 if R == 0 else 5)
    with pytest.raises(ValueError, match=r"\[all_sum\] Mismatched arguments "
                       rf"across the ranks of a group of {N} \(seen on rank {R}\): "
                       r"rank 0 called all_sum with float32 of shape \(4,\); "
                       r"rank 1 called all_sum with float32 of shape \(5,\)"):
        mx.eval(mx.distributed.all_sum(x))
    # A dtype mismatch, and different collectives.
    y = mx.ones((2, 3), dtype=mx.float32 if R == 0 else mx.int32)
    with pytest.raises(ValueError, match=r"\[all_gather\] .*rank 1 called "
                       r"all_gather with int32 of shape \(2, 3\)"):
        mx.eval(mx.distributed.all_gather(y))
    z = mx.ones((2 * N,))
    op = mx.distributed.all_sum if R == 0 else mx.distributed.sum_scatter
    with pytest.raises(ValueError, match=r"rank 0 called all_sum .* rank 1 "
                       r"called sum_scatter"):
        mx.eval(op(z))
    # A transfer whose receiver expects another shape: the receiver raises
    # (after taking the message, so the sender is not left waiting).
    sent = mx.distributed.send(mx.ones((2, 3)), (R + 1) % N)
    got = mx.distributed.recv((3,), mx.float32, (R - 1) % N)
    mx.eval(sent)
    with pytest.raises(ValueError, match=rf"\[recv\] Mismatched transfer: rank {R} "
                       r"expected float32 of shape \(3,\) from rank "
                       rf"{(R - 1) % N}, which sent float32 of shape \(2, 3\)"):
        mx.eval(got)
    # The group works on.
    total = mx.distributed.all_sum(mx.ones(3))
    mx.eval(total)
    assert total.tolist() == [float(N)] * 3
