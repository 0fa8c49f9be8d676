"""One rank of tests/python/test_nccl.py's multi-process cases, started
with torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).

  init:        init(strict=True, backend="nccl"); exit 3 with the message
               when it raises.
  collectives: every collective across the ranks against NumPy, the
               cross-rank check (FLUXION_DIST_CHECK=1) of mismatched shapes.
  timeout:     rank 1 comes 6 s late to an all_sum; with
               FLUXION_DIST_TIMEOUT=2 both raise (rank 0: the timeout).
  fsdp:        tests/mpi/test_fsdp.py (nn.fully_shard) over this NCCL
               group; exits with pytest's status.
"""
import os
import sys
import time

import numpy as np

import fluxion.core as mx

mode = sys.argv[1]
try:
    g = mx.distributed.init(strict=True, backend="nccl")
except RuntimeError as e:
    print(e, flush=True)
    sys.exit(3)
R, N = g.rank(), g.size()
if mode == "init":
    print(f"rank {R} of {N}: ok", flush=True)
    sys.exit(0)

if mode == "collectives":
    x = mx.array(np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * R)
    xs = [np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * r for r in range(N)]
    got = {"sum": mx.distributed.all_sum(x), "max": mx.distributed.all_max(x),
           "min": mx.distributed.all_min(x), "gather": mx.distributed.all_gather(x),
           "scatter": mx.distributed.sum_scatter(mx.ones((2 * N, 3)) * (R + 1)),
           "i16": mx.distributed.all_sum(x.astype(mx.int16)),
           "bool": mx.distributed.all_max(mx.array([R == 0, False]))}
    mx.eval(got)
    np.testing.assert_array_equal(np.array(got["sum"]), sum(xs))
    np.testing.assert_array_equal(np.array(got["max"]), np.max(xs, 0))
    np.testing.assert_array_equal(np.array(got["min"]), np.min(xs, 0))
    np.testing.assert_array_equal(np.array(got["gather"]), np.concatenate(xs))
    np.testing.assert_array_equal(np.array(got["scatter"]),
                                  np.full((2, 3), sum(range(1, N + 1))))
    np.testing.assert_array_equal(np.array(got["i16"]), sum(xs).astype(np.int16))
    assert got["bool"].tolist() == [True, False]
    # A ring: rank r sends to r + 1. A NCCL send waits on the GPU for its
    # receive, and one stream runs them in order, so even ranks send first
    # and odd ranks receive first (else every rank's send would wait for a
    # receive queued behind it).
    sent = mx.distributed.send(x, (R + 1) % N)
    recvd = mx.distributed.recv_like(x, (R - 1) % N)
    for y in ([sent, recvd] if R % 2 == 0 else [recvd, sent]):
        mx.eval(y)
    np.testing.assert_array_equal(np.array(recvd), xs[(R - 1) % N])
    try:
        mx.eval(mx.distributed.all_sum(mx.ones(4 if R == 0 else 5)))
        print("no mismatch error", flush=True)
        sys.exit(1)
    except ValueError as e:
        assert "[all_sum] Mismatched arguments across the ranks" in str(e), e
    assert mx.distributed.all_sum(mx.ones(2)).tolist() == [float(N)] * 2
    print(f"rank {R}: collectives ok", flush=True)
elif mode == "fsdp":
    import pytest

    os.environ["FLUXION_TEST_BACKEND"] = "nccl"
    here = os.path.dirname(os.path.abspath(__file__))
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider",
                          os.path.join(here, "..", "mpi", "test_fsdp.py")]))
elif mode == "timeout":
    os.environ["FLUXION_DIST_TIMEOUT"] = "2"
    if R == 1:
        time.sleep(6)
    try:
        mx.eval(mx.distributed.all_sum(mx.ones(4)))
        print(f"rank {R}: no timeout", flush=True)
        sys.exit(1)
    except RuntimeError as e:
        print(f"rank {R} raised: {e}", flush=True)
