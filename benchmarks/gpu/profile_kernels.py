"""The GPU workloads whose benchmark rows miss their targets (issue 29), run
a few times each so that Nsight Compute can read their kernels' counters:
the kernel's own duration and DRAM throughput, against the end-to-end time
bench_gpu.py prints, tell a slow kernel from host time between kernels.

    PYTHONPATH=build-gpu/python ncu --clock-control none \
        -k regex:'qmv_kernel|sdpa_decode|lookback_scan|rope_kernel' \
        --launch-skip 2 --launch-count 1 --section SpeedOfLight ... \
        python3 benchmarks/gpu/profile_kernels.py qmv4

(tools/device_call.sh's `profile` part runs each workload so.) Workloads:
qmv4 (1 x 4096 @ 4096 x 14336, affine 4 bits, group 64), decode
(attention, 1 query, 32 heads on 8 KV heads, 32k keys, D 128, bfloat16),
cumsum (256M float32), rope (bfloat16 4 x 32 x 4096 x 128), depthwise
(3x3, 256 channels, N 64, 56 x 56, float32, forward and both gradients).
The last run of each is bracketed by cudaProfilerStart/Stop (through
torch, where it is installed), so `ncu --profile-from-start off` sees
exactly one run's kernels."""
import sys

import fluxion.core as mx

REPS = 4


def qmv4():
    x = mx.random.normal((1, 4096)).astype(mx.bfloat16)
    w = mx.random.normal((14336, 4096)).astype(mx.bfloat16)
    q = mx.quantize(w, group_size=64, bits=4)
    mx.eval(x, *q)
    return lambda: mx.quantized_matmul(x, *q, transpose=True, group_size=64,
                                       bits=4)


def decode():
    q = mx.random.normal((1, 32, 1, 128)).astype(mx.bfloat16)
    k = mx.random.normal((1, 8, 32768, 128)).astype(mx.bfloat16)
    v = mx.random.normal((1, 8, 32768, 128)).astype(mx.bfloat16)
    mx.eval(q, k, v)
    return lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=0.088)


def cumsum():
    x = mx.random.normal((256 << 20,))
    mx.eval(x)
    return lambda: mx.cumsum(x)


def rope():
    x = mx.random.normal((4, 32, 4096, 128)).astype(mx.bfloat16)
    mx.eval(x)
    return lambda: mx.fast.rope(x, 128, traditional=False, base=10000.0,
                                scale=1.0, offset=0)


def depthwise():
    x = mx.random.normal((64, 56, 56, 256))
    w = mx.random.normal((256, 3, 3, 1))
    ct = mx.random.normal((64, 56, 56, 256))
    mx.eval(x, w, ct)

    def run():
        outs, grads = mx.vjp(
            lambda a, b: mx.conv2d(a, b, padding=1, groups=256), [x, w], [ct])
        return outs + grads
    return run


def main():
    try:
        import torch.cuda.profiler as profiler
    except ImportError:
        profiler = None
    for name in sys.argv[1:] or ["qmv4", "decode", "cumsum", "rope",
                                 "depthwise"]:
        fn = globals()[name]()
        for i in range(REPS):
            last = i == REPS - 1
            if last and profiler is not None:
                mx.synchronize()
                profiler.start()
            mx.eval(fn())
            if last and profiler is not None:
                mx.synchronize()
                profiler.stop()
        mx.synchronize()
        print(name, "ran", REPS, "times")


if __name__ == "__main__":
    main()
