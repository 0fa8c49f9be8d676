"""Run by test_cuda.py twice, with FLUXION_GPU_BATCH=1 and =0: small
elementwise chains on the GPU (batched launches, fluxion/backend/cuda/
batch.h) mixed with kernels that end a batch. Checks the GPU's results
against the CPU's (to rounding: the CPU's transcendental functions are
vectorized ones) and saves them to argv[1], for the test to compare the
two runs bit for bit. Prints "ok" when every check passed."""
import sys

import numpy as np

import fluxion.core as mx

G, C = mx.gpu, mx.cpu


def program(s):
    rng = np.random.default_rng(5)
    x = mx.array(rng.uniform(0.5, 2.0, (33,)).astype(np.float32))
    w = mx.array(rng.uniform(-1, 1, (33, 33)).astype(np.float32))
    outs = []
    with mx.stream(s):
        y = x
        for i in range(300):  # a chain longer than one small launch
            y = mx.tanh(y * 1.5 + 0.25) + mx.sqrt(mx.abs(y)) - y / 3.0
        outs.append(y)
        z = mx.maximum(y, x) ** 2.0  # scalar and flat operands
        z = mx.sigmoid(z) - mx.exp(-z) + mx.log(x) + mx.sin(z) * mx.cos(x)
        m = w @ z  # a kernel that ends the batch, then more small ops
        outs.append(mx.negative(m) + mx.rsqrt(mx.square(m) + 1.0))
        outs.append(mx.sum(z * 2.0))  # a reduction reading a batched output
        big = mx.ones((5000,)) * 3.0 + 1.0  # over the size limit: own kernels
        outs.append(big[:7])
        outs.append(mx.minimum(x[::2], 1.0))  # strided: not batched
        g = mx.grad(lambda v: mx.sum(mx.tanh(v) * v + v * v))(x)
        outs.append(g)
    mx.eval(outs)
    return [np.array(o) for o in outs]


def main():
    gpu = program(G)
    cpu = program(C)
    for k, (a, b) in enumerate(zip(gpu, cpu)):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5,
                                   err_msg=f"output {k}")
    np.savez(sys.argv[1], *gpu)
    # A batched output read while its chain is still queued: the read's
    # event launches the queue first.
    with mx.stream(G):
        v = mx.zeros((16,))
        for _ in range(50):
            v = v + 1.0
        assert v.tolist() == [50.0] * 16
        u = v * 2.0
        mx.eval(u)
        assert np.array(u).tolist() == [100.0] * 16
    print("ok")


if __name__ == "__main__":
    main()
