"""mx.distributed over NCCL on a visible GPU (skipped, with the reason,
elsewhere; run by `make test-gpu`).

One GPU gives a NCCL communicator of this process alone
(init(backend="nccl") without a launcher): its collectives still run
through NCCL on the GPU stream, so each is checked against NumPy, with
gradients, vmap and compile. Processes started with torchrun-style
variables check the rendezvous and its failures (two ranks on one GPU
raise, never hang); the collectives across two processes need two GPUs
(skipped otherwise).
"""
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import fluxion.core as mx

HERE = os.path.dirname(os.path.abspath(__file__))

if not mx.is_available(mx.gpu):
    pytestmark = pytest.mark.skip(
        reason="no GPU is visible" if mx._gpu_backend_built()
        else "Fluxion was built without a GPU backend")
elif not mx.distributed.is_available("nccl"):
    pytestmark = pytest.mark.skip(reason="libnccl.so.2 cannot be loaded")

DTYPES = [mx.bool_, mx.int8, mx.uint8, mx.int16, mx.uint16, mx.int32,
          mx.uint32, mx.int64, mx.uint64, mx.float16, mx.bfloat16,
          mx.float32, mx.float64, mx.complex64]


def host(x):
    if x.dtype == mx.bfloat16:
        x = x.astype(mx.float32, stream=mx.cpu)
    return np.array(x)


def data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    v = rng.integers(-3, 4, size=shape)
    if dtype == mx.bool_:
        v = v > 0
    elif dtype in (mx.uint8, mx.uint16, mx.uint32, mx.uint64):
        v = np.abs(v)
    elif dtype == mx.complex64:
        v = v + 1j * rng.integers(-3, 4, size=shape)
    return mx.array(v).astype(dtype)


@pytest.fixture(scope="module")
def world():
    g = mx.distributed.init(backend="nccl")
    assert (g.rank(), g.size()) == (0, 1)
    return g


def test_init_gives_a_nccl_group_of_one(world):
    assert mx.distributed.init(backend="nccl").size() == 1
    with pytest.raises(RuntimeError, match=r"\[distributed.init\] No multi-process"):
        mx.distributed.init(strict=True, backend="nccl")
    # Without a launcher, "any" stays the group of size 1 (no communicator).
    assert mx.distributed.init().size() == 1


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_collectives_against_numpy(world, dtype):
    x = data((3, 5), dtype)
    ys = {"sum": mx.distributed.all_sum(x, group=world),
          "gather": mx.distributed.all_gather(x, group=world),
          "scatter": mx.distributed.sum_scatter(x, group=world)}
    if dtype != mx.complex64:
        ys["max"] = mx.distributed.all_max(x, group=world)
        ys["min"] = mx.distributed.all_min(x, group=world)
    mx.eval(ys)
    ref = host(x)
    for k, y in ys.items():
        assert y.dtype == dtype and y.shape == (3, 5), k
        np.testing.assert_array_equal(host(y), ref, err_msg=k)


def test_non_contiguous_zero_d_and_large(world):
    x = mx.arange(12).reshape(3, 4).astype(mx.float32).T
    y = mx.distributed.all_sum(x, group=world)
    g = mx.distributed.all_gather(mx.array(2.5), group=world)
    big = mx.arange(1 << 20).astype(mx.float32)
    b = mx.distributed.all_sum(big * 2, group=world)
    mx.eval(y, g, b)
    np.testing.assert_array_equal(np.array(y), np.arange(12).reshape(3, 4).T)
    assert g.shape == (1,) and g.item() == 2.5
    np.testing.assert_array_equal(np.array(b), 2 * np.arange(1 << 20))
    # Empty arrays move nothing.
    e = mx.distributed.all_sum(mx.zeros((0, 3)), group=world)
    eg = mx.distributed.all_gather(mx.zeros((0,), mx.int32), group=world)
    mx.eval(e, eg)
    assert e.shape == (0, 3) and eg.shape == (0,)


def test_errors_name_the_op(world):
    z = mx.ones(3, dtype=mx.complex64)
    with pytest.raises(ValueError, match=r"\[all_max\] complex64 cannot be reduced"):
        mx.eval(mx.distributed.all_max(z, group=world))
    with pytest.raises(ValueError, match=r"\[all_sum\] The NCCL backend communicates "
                       r"from the memory of gpu 0"):
        mx.distributed.all_sum(mx.ones(2), group=world, stream=mx.cpu)
    with pytest.raises(ValueError, match=r"\[send\] Cannot send to rank 0: the group "
                       r"is this process alone"):
        mx.distributed.send(mx.ones(2), 0, group=world)
    with pytest.raises(ValueError, match=r"\[recv\] Invalid rank 1"):
        mx.distributed.recv((2,), mx.float32, 1, group=world)
    # The communicator works on.
    assert mx.distributed.all_sum(mx.ones(2), group=world).tolist() == [1.0, 1.0]


def test_gradients_vmap_compile_and_split(world):
    x = mx.array([1.0, 2.0, 3.0])
    g = mx.grad(lambda v: (mx.distributed.all_sum(v, group=world) ** 2).sum())(x)
    gg = mx.grad(lambda v: (mx.distributed.all_gather(v, group=world) * v).sum())(x)
    _, t = mx.jvp(lambda v: mx.distributed.all_sum(v, group=world), [x], [mx.ones(3)])
    vs = mx.vmap(lambda v: mx.distributed.all_sum(v, group=world))(
        mx.arange(6).reshape(2, 3).astype(mx.float32))
    f = mx.compile(lambda v: mx.distributed.all_sum(v * 2, group=world) + 1)
    sub = world.split(0)
    s = mx.distributed.all_sum(x, group=sub)
    mx.eval(g, gg, t, vs, f(x), s)
    np.testing.assert_allclose(np.array(g), 2 * np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(np.array(gg), 2 * np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(np.array(t[0]), np.ones(3))
    np.testing.assert_array_equal(np.array(vs), np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(np.array(f(x)), 2 * np.array([1.0, 2.0, 3.0]) + 1)
    assert sub.size() == 1 and s.tolist() == [1.0, 2.0, 3.0]


def test_data_parallel_steps_on_the_gpu(world):
    # Gradients summed through NCCL (average_gradients skips a group of
    # one), the loss too: three SGD steps as without them.
    import fluxion.nn as nn
    import fluxion.optimizers as optim
    from fluxion.utils import tree_map

    def train(reduce):
        mx.random.seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        opt = optim.SGD(learning_rate=0.1)
        x, y = mx.random.normal((16, 4)), mx.random.normal((16, 2))
        loss_fn = lambda m, x, y: ((m(x) - y) ** 2).mean()
        losses = []
        for _ in range(3):
            loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)
            if reduce:
                grads = tree_map(lambda g: mx.distributed.all_sum(g, group=world), grads)
                loss = mx.distributed.all_sum(loss, group=world)
            opt.update(model, grads)
            mx.eval(model.parameters(), loss)
            losses.append(loss.item())
        return losses

    with_nccl, without = train(True), train(False)
    assert with_nccl[2] < with_nccl[0]
    np.testing.assert_allclose(with_nccl, without, rtol=1e-6)


# --- several processes (torchrun-style variables) ---

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(n, mode, extra_env=None, devices=None, limit=120):
    port = free_port()
    procs = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   PYTHONPATH=os.pathsep.join(sys.path))
        env.pop("OMPI_COMM_WORLD_SIZE", None)
        env.pop("PMIX_RANK", None)
        if devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = devices[r]
        env.update((extra_env or {}).get(r, {}))
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, "nccl_worker.py"), mode],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    start = time.monotonic()
    outs = [p.communicate(timeout=limit)[0] for p in procs]
    return [p.returncode for p in procs], outs, time.monotonic() - start


def test_rendezvous_times_out_naming_the_missing_rank():
    # Rank 0 of 2 alone: the rendezvous waits FLUXION_DIST_TIMEOUT seconds.
    port = free_port()
    env = dict(os.environ, RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port), FLUXION_DIST_TIMEOUT="2",
               PYTHONPATH=os.pathsep.join(sys.path))
    start = time.monotonic()
    p = subprocess.run([sys.executable, os.path.join(HERE, "nccl_worker.py"), "init"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert time.monotonic() - start < 30
    assert p.returncode == 3, p.stdout + p.stderr
    assert (f"[distributed.init] Timed out after 2.000000 s (FLUXION_DIST_TIMEOUT) "
            f"in the rendezvous at 127.0.0.1:{port} (rank 0 of 2): rank(s) 1 did "
            "not connect.") in p.stdout


def test_two_ranks_on_one_gpu_raise_instead_of_hanging():
    if mx.device_count(mx.gpu) >= 2:
        pytest.skip("two GPUs: the ranks get one each (see the next test)")
    # Both ranks see the one GPU: the rendezvous succeeds, then NCCL refuses
    # the communicator; each rank raises (bounded by the timeout).
    codes, outs, elapsed = launch(2, "init", {0: {"FLUXION_DIST_TIMEOUT": "30"},
                                              1: {"FLUXION_DIST_TIMEOUT": "30"}})
    assert elapsed < 100, outs
    for r in range(2):
        # NCCL refuses (ncclInvalidUsage: duplicate GPU); a NCCL that
        # allowed it would give a working group: either way no hang.
        assert codes[r] in (0, 3), outs[r]
        assert ("[distributed.init]" in outs[r]) == (codes[r] == 3), outs[r]


def test_two_ranks_on_two_gpus():
    if mx.device_count(mx.gpu) < 2:
        pytest.skip("needs 2 GPUs (NCCL refuses two ranks on one GPU)")
    codes, outs, _ = launch(2, "collectives", devices=["0", "1"],
                            extra_env={0: {"FLUXION_DIST_CHECK": "1"},
                                       1: {"FLUXION_DIST_CHECK": "1"}})
    assert codes == [0, 0], outs
    codes, outs, elapsed = launch(2, "timeout", devices=["0", "1"])
    assert codes == [0, 0], outs
    assert "rank 0 raised: [all_sum] Timed out after 2.000000 s" in outs[0], outs


def test_fully_sharded_training_on_two_gpus():
    """nn.fully_shard's tests (tests/mpi/test_fsdp.py: shards, forward and
    gradients against the unsharded model, Adam steps, bfloat16 compute,
    nested and frozen parameters) with NCCL's all_gather and sum_scatter,
    one process per GPU."""
    if mx.device_count(mx.gpu) < 2:
        pytest.skip("needs 2 GPUs (NCCL refuses two ranks on one GPU)")
    codes, outs, _ = launch(2, "fsdp", devices=["0", "1"], limit=300)
    assert codes == [0, 0], outs

