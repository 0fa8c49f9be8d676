"""GPU benchmarks of issue 13, with PyTorch measured in the same process on
the same GPU (CUDA-event timing, medians of repeated runs). Prints each
workload's figures and the ratio against its reference.

Run on a machine with an NVIDIA GPU, after `make test-gpu`:
    PYTHONPATH=build-gpu/python python3 benchmarks/gpu/bench_gpu.py
(FLUXION_GPU_BATCH=0 turns off batched small kernels, for comparison).
Targets (issue 13): chain <= 5 us/op; add >= 90% and sums >= 85% of the
copy bandwidth; matmul >= 97% of torch; the MLP step faster than torch.
Sort, argsort and cumsum are printed against torch (and cumsum against the
copy's bandwidth) without a target yet.
The fused norms (layer_norm, rms_norm of 32768 x 4096): forward as a
fraction of the copy's bandwidth and against torch's; forward + backward
against torch's (mx.vjp, and value_and_grad of a loss as a training step
runs it; the backward is one fused NormVJP kernel plus a small reduction of
the weight and bias gradients), with the bandwidth it reaches.
Linear algebra (cuSOLVER / cuBLAS on both sides): batched cholesky + solve
of 4096 matrices of 64 x 64 (target <= torch.linalg), svd of 2048^2 and
eigh of 4096^2 float32 (target <= 1.2x torch.linalg); `bench_gpu.py linalg`
runs these rows alone.
FFT (cuFFT on both sides): 1-D complex, batched rows, a 2-D real transform
and a prime length against torch.fft on the same data, no target yet.
Convolutions (issue 31): conv2d 3x3, N=64, 56x56, 64 -> 64 forward and
forward + backward in float32 and bfloat16 (target <= 1.1x torch), the
depthwise 3x3 of 256 channels (target <= 1.2x torch), channels-last on
both sides, TF32 off on both unless FLUXION_ENABLE_TF32=1, and which path
ran (cuDNN's operations or the general path, mx._gpu_conv_stats);
`bench_gpu.py conv` runs these rows alone (FLUXION_CUDNN_CONV=0 times the
general path).
The decode kernels (quantized matrix-vector product, attention decode):
bytes read per second against the copy's bandwidth and against torch's
nearest kernel; `bench_gpu.py decode` runs these rows alone, `bench_gpu.py
scan` the sort and scan rows (FLUXION_SCAN_CUB=1: CUB's scan for cumsum).
Compile (issue 30): GELU (tanh form) on 64M float32 compiled, in bytes read
and written per second, against eager, torch.compile and jax.jit (target
>= 3500 GB/s); and the first call of a compiled function in a fresh
process with a cold and a warm kernel cache (NVRTC, $FLUXION_CACHE_DIR).
Alone: python3 -c "import bench_gpu as b; b.compiled_gelu(); b.first_call()"
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

# JAX must not take most of the GPU's memory at import.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np

import fluxion.core as mx

try:
    import torch
except ImportError:  # the references need torch on the GPU
    torch = None

REPS = 10


def cuda_time(fn, reps=REPS):
    """Median seconds of fn() bracketed by CUDA events recorded on torch's
    stream, after a warm-up. fn must finish its GPU work before returning
    (mx.eval waits for Fluxion's own stream), so the figure includes the
    launch and the host wait."""
    fn()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def wall_time(fn, reps=REPS):
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def report(name, ours, ref, unit, ref_name, higher_is_better):
    ratio = ours / ref if higher_is_better else ref / ours
    print(f"{name:<34} fluxion {ours:10.2f} {unit}   {ref_name} "
          f"{ref:10.2f} {unit}   ratio {ratio:5.2f}")


def main():
    assert mx.is_available(mx.gpu), "no GPU is visible"
    assert torch is not None and torch.cuda.is_available()
    g = mx.gpu
    dev = torch.device("cuda")
    if sys.argv[1:] == ["conv"]:
        conv_bench(g, dev)
        return
    if sys.argv[1:] in (["decode"], ["scan"]):
        # decode: the quantized and attention decode rows; scan: sort and
        # scans (FLUXION_SCAN_CUB=1 puts CUB's scan in the packed one's place).
        mx.set_default_device(g)
        a = torch.ones(256 << 20, device=dev)
        b = torch.empty_like(a)
        copy_bw = 2 * a.nbytes / cuda_time(lambda: b.copy_(a)) / 1e12
        print(f"d2d copy {copy_bw:.2f} TB/s (read + write)")
        del a, b
        (decode if sys.argv[1] == "decode" else sort_and_scan)(g, dev, copy_bw)
        return
    if sys.argv[1:] == ["linalg"]:
        linalg_bench(g, dev)
        return
    # Batched launches of small elementwise kernels (batch.h) are on unless
    # FLUXION_GPU_BATCH=0: run once each way to compare.
    print(f"FLUXION_GPU_BATCH={os.environ.get('FLUXION_GPU_BATCH', '1')}")

    # Chain of 1000 adds on 16 elements, built and evaluated eagerly.
    # As torch's: the operator on the default device (the GPU).
    mx.set_default_device(g)

    def chain_fx():
        x = mx.zeros((16,))
        for _ in range(1000):
            x = x + 1.0
        mx.eval(x)
    xt = torch.zeros(16, device=dev)

    def chain_torch():
        x = xt
        for _ in range(1000):
            x = x + 1.0
        torch.cuda.synchronize()
    report("chain of 1000 adds (us/op)", wall_time(chain_fx) * 1e3,
           wall_time(chain_torch) * 1e3, "us", "torch", False)
    try:
        import jax
        import jax.numpy as jnp
        xj = jax.device_put(jnp.zeros(16), jax.devices("gpu")[0])

        def chain_jax():
            x = xj
            for _ in range(1000):
                x = x + 1.0
            x.block_until_ready()
        report("chain of 1000 adds (us/op)", wall_time(chain_fx) * 1e3,
               wall_time(chain_jax, 3) * 1e3, "us", "jax", False)
    except Exception as e:  # JAX without a GPU, or absent
        print(f"chain vs jax: skipped ({type(e).__name__}: {e})")

    chain_parts(g, dev)

    # Add of two 256M float32 arrays against the device copy bandwidth.
    n = 256 << 20
    a = mx.ones((n,), stream=g)
    b = mx.ones((n,), stream=g)
    mx.eval(a, b)
    at = torch.ones(n, device=dev)
    bt = torch.empty_like(at)

    def add_fx():
        mx.eval(mx.add(a, b, stream=g))
    copy_s = cuda_time(lambda: bt.copy_(at))
    copy_bw = 2 * 4 * n / copy_s / 1e12
    add_bw = 3 * 4 * n / cuda_time(add_fx) / 1e12
    report("add 256M f32 (TB/s)", add_bw, copy_bw, "TB/s", "d2d copy", True)
    # What the figure is made of: four adds per eval (the host's wait on
    # the stream shared), and torch's add in the same run.
    add4_bw = 4 * 3 * 4 * n / cuda_time(
        lambda: mx.eval(*[mx.add(a, b, stream=g) for _ in range(4)])) / 1e12
    ct = torch.ones_like(at)
    torch_add_bw = 3 * 4 * n / cuda_time(lambda: torch.add(at, ct)) / 1e12
    print(f"  add: 4 per eval {add4_bw:.2f} TB/s, torch add "
          f"{torch_add_bw:.2f} TB/s")

    # Sum of 256M float32.
    sum_bw = 4 * n / cuda_time(lambda: mx.eval(mx.sum(a, stream=g))) / 1e12
    report("sum 256M f32 (TB/s)", sum_bw, copy_bw / 2, "TB/s",
           "copy read bw", True)

    # Row and column sums of a 16k x 16k float32 matrix.
    k = 16384
    mtx = mx.ones((k, k), stream=g)
    mx.eval(mtx)
    for axis, what in [(1, "row"), (0, "column")]:
        bw = 4 * k * k / cuda_time(
            lambda: mx.eval(mx.sum(mtx, axis=axis, stream=g))) / 1e12
        report(f"{what} sums 16k x 16k f32 (TB/s)", bw, copy_bw / 2, "TB/s",
               "copy read bw", True)
    del mtx, a, b

    compiled_gelu()
    first_call()
    sort_and_scan(g, dev, copy_bw)
    mlp_step(g, dev)
    host_copies(g, dev)
    norms(g, dev)
    fft_bench(g, dev)
    conv_bench(g, dev)
    linalg_bench(g, dev)
    decode(g, dev, copy_bw)

    # Matmul 8192^3, bfloat16 and float32 (TF32 off on both sides).
    torch.backends.cuda.matmul.allow_tf32 = False
    m = 8192
    for dt, tdt in [(mx.bfloat16, torch.bfloat16), (mx.float32, torch.float32)]:
        x = mx.astype(mx.random.normal((m, m), stream=g), dt, stream=g)
        y = mx.astype(mx.random.normal((m, m), stream=g), dt, stream=g)
        mx.eval(x, y)
        xt2 = torch.randn(m, m, device=dev, dtype=tdt)
        # Both sides launch `k` products and wait for them on the host, so
        # the launch and the wake-up after the wait (tens of us on a 1.4 ms
        # product) count alike and are spread over the k products.
        k = 4
        flops = k * 2 * m ** 3

        def ours_k():
            mx.eval([mx.matmul(x, y, stream=g) for _ in range(k)])

        def torch_k():
            for _ in range(k):
                torch.mm(xt2, xt2)
            torch.cuda.current_stream().synchronize()

        ours = flops / cuda_time(ours_k, 5) / 1e12
        ref = flops / cuda_time(torch_k, 5) / 1e12
        report(f"matmul 8192^3 {dt} (TFLOP/s)", ours, ref, "TF/s", "torch",
               True)


def per_op_time(fn, ops):
    """Seconds per op of fn(), which runs `ops` ops and waits for them."""
    return cuda_time(fn, 5) / ops


def decode(g, dev, copy_bw):
    """The memory-bound decoding kernels, as bytes read per second against
    the copy's bandwidth (read + write: a kernel that only reads can pass
    half of it) and against torch's nearest kernel in the same run:
    - quantized matmul 1 x 4096 @ 4096 x 14336 (decoding through a 14336 x
      4096 layer): packed weights, scales and biases per second, for
      affine 4 bits (group 64, bfloat16 scales and biases; the target is
      >= 0.75 of the copy) and 8 bits, mxfp4, nvfp4, mxfp8; torch: the
      bfloat16 matrix-vector product with the dense weight (four times the
      bytes of 4 bits), as bytes per second and as time;
    - attention decode (1 query, 32 query heads on 8 KV heads, 32k keys,
      D = 128, bfloat16): K and V per second (target >= 0.85 of the
      read bandwidth); torch's scaled_dot_product_attention (enable_gqa).
    Operands rotate over copies that together exceed the L2 (the H200's
    50 MB would hold one 4-bit weight), and each timed call evaluates all
    copies with one host wait, as torch's side runs them and synchronizes
    once, so launch and wake-up costs are spread alike.
    The targets are fractions of the bandwidth of reading memory, measured
    here as torch.sum over 1 GB ("read"): a kernel that only reads moves
    more than half of the copy's read + write figure."""
    big = torch.ones(256 << 20, device=dev)
    read_bw = big.nbytes / cuda_time(lambda: torch.sum(big)) / 1e12
    print(f"read (torch.sum of 1 GB) {read_bw:.2f} TB/s")
    del big
    K, N, copies = 4096, 14336, 8
    x1 = mx.random.normal((1, K)).astype(mx.bfloat16)
    ws = [mx.random.normal((N, K)).astype(mx.bfloat16) for _ in range(copies)]
    mx.eval(x1, *ws)
    xt = torch.randn(1, K, device=dev, dtype=torch.bfloat16)
    wts = [torch.randn(N, K, device=dev, dtype=torch.bfloat16)
           for _ in range(copies)]

    def torch_gemv():
        for w in wts:
            xt @ w.t()
        torch.cuda.current_stream().synchronize()

    t_torch = per_op_time(torch_gemv, copies)
    torch_bw = N * K * 2 / t_torch / 1e12
    del wts
    for mode, bits, gs in [("affine", 4, 64), ("affine", 8, 64),
                           ("mxfp4", 4, 32), ("nvfp4", 4, 16),
                           ("mxfp8", 8, 32)]:
        qs = []
        for w in ws:
            if mode == "affine":
                qs.append(list(mx.quantize(w, group_size=gs, bits=bits)))
            else:
                qs.append(list(mx.quantize(w, mode=mode)) + [None])
        mx.eval(*[a for q in qs for a in q if a is not None])
        packed = sum(a.nbytes for a in qs[0] if a is not None)

        def ours():
            mx.eval([mx.quantized_matmul(x1, q[0], q[1], q[2],
                                         transpose=True, group_size=gs,
                                         bits=bits, mode=mode) for q in qs])

        t = per_op_time(ours, copies)
        bw = packed / t / 1e12
        name = f"qmm decode {mode} {bits}-bit (TB/s)"
        report(name, bw, copy_bw, "TB/s", "d2d copy", True)
        report(name, bw, read_bw, "TB/s", "read", True)
        report(name, bw, torch_bw, "TB/s", "torch bf16 gemv", True)
        print(f"  {mode} {bits}-bit: {t * 1e6:.1f} us a product, torch "
              f"bf16 gemv {t_torch * 1e6:.1f} us")
        del qs
    del ws

    Hq, Hkv, Lk, D, copies = 32, 8, 32768, 128, 4
    q = mx.random.normal((1, Hq, 1, D)).astype(mx.bfloat16)
    kvs = [(mx.random.normal((1, Hkv, Lk, D)).astype(mx.bfloat16),
            mx.random.normal((1, Hkv, Lk, D)).astype(mx.bfloat16))
           for _ in range(copies)]
    mx.eval(q, *[a for kv in kvs for a in kv])

    def ours_sdpa():
        mx.eval([mx.fast.scaled_dot_product_attention(q, k, v, scale=0.088)
                 for k, v in kvs])

    t = per_op_time(ours_sdpa, copies)
    nbytes = 2 * Hkv * Lk * D * 2
    tq = torch.randn(1, Hq, 1, D, device=dev, dtype=torch.bfloat16)
    tkvs = [(torch.randn(1, Hkv, Lk, D, device=dev, dtype=torch.bfloat16),
             torch.randn(1, Hkv, Lk, D, device=dev, dtype=torch.bfloat16))
            for _ in range(copies)]
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def torch_sdpa():
        for k, v in tkvs:
            sdpa(tq, k, v, enable_gqa=True)
        torch.cuda.current_stream().synchronize()

    tt = per_op_time(torch_sdpa, copies)
    name = "attention decode 32k keys (TB/s)"
    report(name, nbytes / t / 1e12, read_bw, "TB/s", "read", True)
    report(name, nbytes / t / 1e12, nbytes / tt / 1e12, "TB/s", "torch",
           True)
    print(f"  attention decode: {t * 1e6:.1f} us, torch sdpa "
          f"{tt * 1e6:.1f} us")


def gelu(x, tanh):
    return 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def compiled_gelu(n=64 << 20):
    """GELU (tanh form) over n float32: 8 bytes read and written per
    element, per second; compiled (one NVRTC kernel) against eager and the
    compilers of torch and JAX in the same process."""
    g, dev = mx.gpu, torch.device("cuda")
    x = mx.random.normal((n,), stream=g)
    mx.eval(x)
    f = mx.compile(lambda v: gelu(v, mx.tanh))
    mx.eval(f(x))
    before = mx._gpu_fused_kernel_stats()
    gbs = lambda fn: 8 * n / cuda_time(fn) / 1e9
    ours = gbs(lambda: mx.eval(f(x)))
    after = mx._gpu_fused_kernel_stats()
    eager = gbs(lambda: mx.eval(gelu(x, mx.tanh)))
    xt = torch.randn(n, device=dev)
    tc = torch.compile(lambda v: gelu(v, torch.tanh))
    tc(xt)
    torch_c = gbs(lambda: tc(xt))
    torch_e = gbs(lambda: gelu(xt, torch.tanh))
    name = "GELU tanh 64M f32 compiled (GB/s)"
    report(name, ours, torch_c, "GB/s", "torch.compile", True)
    print(f"  fluxion eager {eager:.0f} GB/s, torch eager {torch_e:.0f} GB/s;"
          f" generated-kernel launches {after['launches'] - before['launches']}"
          f", fallbacks {after['fallbacks'] - before['fallbacks']}")
    try:
        import jax
        import jax.numpy as jnp
        xj = jax.device_put(jnp.asarray(np.asarray(x)), jax.devices("gpu")[0])
        jf = jax.jit(lambda v: gelu(v, jnp.tanh))
        jf(xj).block_until_ready()
        report(name, ours, gbs(lambda: jf(xj).block_until_ready()), "GB/s",
               "jax.jit", True)
    except Exception as e:  # JAX without a GPU, or absent
        print(f"GELU vs jax: skipped ({type(e).__name__}: {e})")


FIRST_CALL = """
import time
import fluxion.core as mx
x = mx.random.normal((1 << 20,), stream=mx.gpu)
mx.eval(x)
f = mx.compile(lambda x: 0.5 * x * (1 + mx.tanh(
    0.7978845608 * (x + 0.044715 * x * x * x))))
t = time.perf_counter(); mx.eval(f(x)); first = time.perf_counter() - t
t = time.perf_counter(); mx.eval(f(x)); later = time.perf_counter() - t
s = mx._gpu_fused_kernel_stats()
print(first, later, s["compiles"], s["disk_hits"])
"""


def first_call():
    """First call of a compiled GELU in a fresh process (the trace, the
    NVRTC compile or the disk cache's read, the module's load, the run):
    with an empty kernel cache, then with the cache that run left."""
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, FLUXION_CACHE_DIR=d)
        runs = []
        for _ in range(2):
            r = subprocess.run([sys.executable, "-c", FIRST_CALL], env=env,
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stderr
            runs.append(r.stdout.split())
    (cold, later, c0, _), (warm, _, c1, hits) = runs
    print(f"compiled GELU first call: cold cache {float(cold) * 1e3:.1f} ms "
          f"({c0} NVRTC compile), warm cache {float(warm) * 1e3:.1f} ms "
          f"({c1} compiles, {hits} disk hits); a later call "
          f"{float(later) * 1e3:.2f} ms")


def sort_and_scan(g, dev, copy_bw):
    """Sorts and scans against torch on the same data: sort of 16M float32
    (CUB's device radix sort; torch.sort also returns the indices, which
    mx.sort does not compute), argsort of 4096 rows of 4096 (one block per
    row), and cumsum of 256M float32 as a fraction of the device copy's
    bandwidth (a scan reads and writes each element once)."""
    rng = np.random.default_rng(0)
    n = 16 << 20
    x_np = rng.standard_normal(n).astype(np.float32)
    x = mx.array(x_np)
    xt = torch.from_numpy(x_np).to(dev)
    ours = cuda_time(lambda: mx.eval(mx.sort(x, stream=g)))
    ref = cuda_time(lambda: torch.sort(xt))
    report("sort 16M f32 (ms)", ours * 1e3, ref * 1e3, "ms", "torch", False)
    del x, xt

    rows = 4096
    m_np = rng.standard_normal((rows, rows)).astype(np.float32)
    m = mx.array(m_np)
    mt = torch.from_numpy(m_np).to(dev)
    ours = cuda_time(lambda: mx.eval(mx.argsort(m, axis=-1, stream=g)))
    ref = cuda_time(lambda: torch.argsort(mt, dim=-1, stable=True))
    report("argsort 4096 x 4096 f32 (ms)", ours * 1e3, ref * 1e3, "ms",
           "torch", False)
    del m, mt

    n = 256 << 20
    c = mx.ones((n,), stream=g)
    mx.eval(c)
    ct = torch.ones(n, device=dev)
    scan_s = cuda_time(lambda: mx.eval(mx.cumsum(c, stream=g)))
    scan_bw = 2 * 4 * n / scan_s / 1e12
    report("cumsum 256M f32 (TB/s)", scan_bw, copy_bw, "TB/s", "d2d copy",
           True)
    torch_bw = 2 * 4 * n / cuda_time(lambda: torch.cumsum(ct, 0)) / 1e12
    report("cumsum 256M f32 (TB/s)", scan_bw, torch_bw, "TB/s", "torch",
           True)
    del c, ct
def norms(g, dev):
    """mx.fast.layer_norm and rms_norm of 32768 x 4096 (bfloat16, float32)
    with weight (and bias): the forward pass against torch's copy of the
    same array (a norm reads and writes each element once, as a copy does)
    and against torch.nn.functional.layer_norm / rms_norm; forward +
    backward (mx.vjp with a cotangent against torch's backward). Each
    timed call runs K ops and one host wait on our side, K ops and a
    synchronize on torch's, so launch and wake-up costs are spread alike."""
    import torch.nn.functional as F
    rows, d, eps, K = 32768, 4096, 1e-5, 8
    for dt, tdt in [(mx.bfloat16, torch.bfloat16),
                    (mx.float32, torch.float32)]:
        x = mx.astype(mx.random.normal((rows, d), stream=g), dt, stream=g)
        w = mx.astype(mx.random.normal((d,), stream=g), dt, stream=g)
        b = mx.astype(mx.random.normal((d,), stream=g), dt, stream=g)
        c = mx.astype(mx.random.normal((rows, d), stream=g), dt, stream=g)
        mx.eval(x, w, b, c)
        xt = torch.randn(rows, d, device=dev, dtype=tdt)
        wt = torch.randn(d, device=dev, dtype=tdt)
        bt = torch.randn(d, device=dev, dtype=tdt)
        ct = torch.randn(rows, d, device=dev, dtype=tdt)
        yt = torch.empty_like(xt)
        nbytes = 2 * x.nbytes  # read once, written once

        def torch_k(f):
            def run():
                for _ in range(K):
                    f()
                torch.cuda.current_stream().synchronize()
            return run

        copy_bw = K * nbytes / cuda_time(torch_k(lambda: yt.copy_(xt))) / 1e12
        fx_ops = {
            "layer_norm": lambda a, ww, bb: mx.fast.layer_norm(
                a, ww, bb, eps, stream=g),
            "rms_norm": lambda a, ww, bb: mx.fast.rms_norm(
                a, ww, eps, stream=g),
        }
        th_ops = {
            "layer_norm": lambda a, ww, bb: F.layer_norm(
                a, (d,), ww, bb, eps),
            "rms_norm": (lambda a, ww, bb: F.rms_norm(a, (d,), ww, eps))
            if hasattr(F, "rms_norm") else None,
        }
        for name in ["layer_norm", "rms_norm"]:
            fop, top = fx_ops[name], th_ops[name]
            ours = K * nbytes / cuda_time(
                lambda: mx.eval([fop(x, w, b) for _ in range(K)])) / 1e12
            report(f"{name} 32768x4096 {dt} (TB/s)", ours, copy_bw, "TB/s",
                   "d2d copy", True)
            if top is not None:
                theirs = K * nbytes / cuda_time(
                    torch_k(lambda: top(xt, wt, bt))) / 1e12
                report(f"{name} 32768x4096 {dt} (TB/s)", ours, theirs, "TB/s",
                       "torch", True)

            # Forward + backward: the gradients of x, w (and b).
            nprim = 3 if name == "layer_norm" else 2

            def fwd_bwd_fx():
                outs = []
                for _ in range(2):
                    _, grads = mx.vjp(
                        lambda *p: fop(*p, *([None] * (3 - nprim))),
                        [x, w, b][:nprim], [c])
                    outs += grads
                mx.eval(outs)

            xg = xt.detach().requires_grad_(True)
            wg = wt.detach().requires_grad_(True)
            bg = bt.detach().requires_grad_(True)

            def fwd_bwd_torch():
                for _ in range(2):
                    xg.grad = wg.grad = bg.grad = None
                    y = (top(xg, wg, bg) if top is not None else
                         F.layer_norm(xg, (d,), wg, bg, eps))
                    y.backward(ct)
                torch.cuda.current_stream().synchronize()
            ref_name = "torch" if top is not None else "torch layer_norm"
            report(f"{name} fwd+bwd 32768x4096 {dt} (ms)",
                   cuda_time(fwd_bwd_fx, 5) / 2 * 1e3,
                   cuda_time(fwd_bwd_torch, 5) / 2 * 1e3, "ms", ref_name,
                   False)

            # A training step's form: value_and_grad of a loss through the
            # norm with weight (and bias). The bandwidth counts what a fused
            # forward and backward must move: x read and y written, then x
            # and the cotangent read and dx written (5 passes over x; the
            # loss's own product and sum come on top).
            def loss_fx(xx, ww, bb):
                return mx.sum(fop(xx, ww, bb) * c)

            vg = mx.value_and_grad(loss_fx, argnums=tuple(range(nprim)))

            def step_fx():
                outs = []
                for _ in range(2):
                    v, grads = vg(x, w, b)
                    outs += [v, *grads]
                mx.eval(outs)

            def step_torch():
                for _ in range(2):
                    xg.grad = wg.grad = bg.grad = None
                    y = (top(xg, wg, bg) if top is not None else
                         F.layer_norm(xg, (d,), wg, bg, eps))
                    (y * ct).sum().backward()
                torch.cuda.current_stream().synchronize()
            ours_s = cuda_time(step_fx, 5) / 2
            theirs_s = cuda_time(step_torch, 5) / 2
            report(f"{name} value_and_grad {dt} (ms)", ours_s * 1e3,
                   theirs_s * 1e3, "ms", ref_name, False)
            report(f"{name} value_and_grad {dt} (TB/s)",
                   5 * x.nbytes / ours_s / 1e12,
                   5 * x.nbytes / theirs_s / 1e12, "TB/s", ref_name, True)
        del x, c, xt, ct, yt
    rope_hadamard(g, dev)


def rope_hadamard(g, dev):
    """mx.fast.rope (bfloat16 [8, 32, 2048, 128], all features rotated) and
    hadamard_transform (float32 16384 rows of 4096) as fractions of the
    copy's bandwidth (each reads and writes every element once); no torch
    reference (torch has neither as one op)."""
    K = 8
    x = mx.astype(mx.random.normal((8, 32, 2048, 128), stream=g),
                  mx.bfloat16, stream=g)
    h = mx.random.normal((16384, 4096), stream=g)
    mx.eval(x, h)
    for name, a, f in [
            ("rope 8x32x2048x128 bf16 (TB/s)", x,
             lambda: mx.fast.rope(x, 128, traditional=False, base=10000.0,
                                  scale=1.0, offset=5, stream=g)),
            ("hadamard 16384x4096 f32 (TB/s)", h,
             lambda: mx.hadamard_transform(h, stream=g))]:
        t = torch.empty(a.size, device="cuda",
                        dtype=torch.bfloat16 if a.dtype == mx.bfloat16
                        else torch.float32)
        u = torch.empty_like(t)

        def copies():
            for _ in range(K):
                u.copy_(t)
            torch.cuda.current_stream().synchronize()
        nbytes = 2 * a.nbytes
        copy_bw = K * nbytes / cuda_time(copies) / 1e12
        ours = K * nbytes / cuda_time(
            lambda: mx.eval([f() for _ in range(K)])) / 1e12
        report(name, ours, copy_bw, "TB/s", "d2d copy", True)


def fft_bench(g, dev):
    """mx.fft against torch.fft (both through cuFFT) on the same data:
    complex64 fft of 2^24 points, 16384 rows of 1024 (batched), ifft of the
    rows (plus our 1 / n pass), rfft2 and irfft2 of 4096 x 4096 float32, a
    prime length (Bluestein), and a middle axis (our looped batches). Our
    first call of a shape makes its plans (the warm-up run absorbs it)."""
    rng = np.random.default_rng(0)

    def cplx(*shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
                ).astype(np.complex64)

    big = cplx(1 << 24)
    rows = cplx(16384, 1024)
    img = rng.standard_normal((4096, 4096)).astype(np.float32)
    prime = cplx(8, 1000003)
    mid = cplx(64, 1024, 64)
    spec = np.fft.rfft2(img).astype(np.complex64)
    cases = [
        ("fft 2^24 c64", big, lambda a: mx.fft.fft(a, stream=g),
         torch.fft.fft),
        ("fft 16384 x 1024 rows", rows, lambda a: mx.fft.fft(a, stream=g),
         torch.fft.fft),
        ("ifft 16384 x 1024 rows", rows, lambda a: mx.fft.ifft(a, stream=g),
         torch.fft.ifft),
        ("rfft2 4096^2 f32", img, lambda a: mx.fft.rfft2(a, stream=g),
         torch.fft.rfft2),
        ("irfft2 4096^2 f32", spec, lambda a: mx.fft.irfft2(a, stream=g),
         torch.fft.irfft2),
        ("fft 8 x 1000003 (prime)", prime,
         lambda a: mx.fft.fft(a, stream=g), torch.fft.fft),
        ("fft 64x1024x64 axis 1", mid,
         lambda a: mx.fft.fft(a, axis=1, stream=g),
         lambda t: torch.fft.fft(t, dim=1)),
    ]
    for name, data, ours_fn, torch_fn in cases:
        a = mx.array(data)
        mx.eval(a)
        t = torch.from_numpy(data).to(dev)
        ours = cuda_time(lambda: mx.eval(ours_fn(a)))

        def ref_fn():
            torch_fn(t)
            torch.cuda.current_stream().synchronize()
        ref = cuda_time(ref_fn)
        report(f"{name} (ms)", ours * 1e3, ref * 1e3, "ms", "torch", False)
        del a, t


def conv_bench(g, dev):
    """Convolutions against torch (cuDNN on both sides by default) on the
    same data, channels-last (MLX's layout; torch's channels_last memory
    format): forward, and forward + both gradients (mx.vjp against
    torch.autograd.grad with the same cotangent). JAX (lax.conv, highest
    precision) in the same run when it has a GPU."""
    tf32 = os.environ.get("FLUXION_ENABLE_TF32") == "1"
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = False
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    cases = [
        ("conv2d 3x3 64->64 N64 56^2", (64, 56, 56, 64), (64, 3, 3, 64), 1),
        ("depthwise 3x3 256ch N64 56^2", (64, 56, 56, 256),
         (256, 3, 3, 1), 256),
    ]
    for name, xs, ws, groups in cases:
        for dt, tdt in [(mx.float32, torch.float32),
                        (mx.bfloat16, torch.bfloat16)]:
            xn = rng.standard_normal(xs).astype(np.float32)
            wn = (rng.standard_normal(ws) * 0.1).astype(np.float32)
            cn = rng.standard_normal(xs[:3] + (ws[0],)).astype(np.float32)
            x = mx.array(xn).astype(dt)
            w = mx.array(wn).astype(dt)
            ct = mx.array(cn).astype(dt)
            mx.eval(x, w, ct)

            def f(a, b):
                return mx.conv2d(a, b, padding=1, groups=groups, stream=g)

            def fwd():
                mx.eval(f(x, w))

            def fwd_bwd():
                outs, grads = mx.vjp(f, [x, w], [ct])
                mx.eval(outs, grads)

            # NHWC data as torch's NCHW in channels_last memory.
            xt = torch.from_numpy(xn).to(dev, tdt).permute(0, 3, 1, 2)
            wt = torch.from_numpy(wn).to(dev, tdt).permute(0, 3, 1, 2)
            ctt = torch.from_numpy(cn).to(dev, tdt).permute(0, 3, 1, 2)
            xt.requires_grad_(True)
            wt.requires_grad_(True)

            def t_fwd():
                with torch.no_grad():
                    F.conv2d(xt, wt, padding=1, groups=groups)
                torch.cuda.current_stream().synchronize()

            def t_fwd_bwd():
                y = F.conv2d(xt, wt, padding=1, groups=groups)
                torch.autograd.grad(y, [xt, wt], ctt)
                torch.cuda.current_stream().synchronize()

            before = mx._gpu_conv_stats()
            ours_f = cuda_time(fwd)
            ours_fb = cuda_time(fwd_bwd)
            after = mx._gpu_conv_stats()
            paths = ", ".join(
                f"{k} {after[k] - before[k]}" for k in
                ("cudnn_forward", "cudnn_backward_data",
                 "cudnn_backward_filter", "direct", "reduce", "im2col")
                if after[k] != before[k])
            report(f"{name} {dt} fwd (ms)", ours_f * 1e3,
                   cuda_time(t_fwd) * 1e3, "ms", "torch", False)
            report(f"{name} {dt} fwd+bwd (ms)", ours_fb * 1e3,
                   cuda_time(t_fwd_bwd) * 1e3, "ms", "torch", False)
            print(f"  paths: {paths or 'none'}"
                  f"{'' if after['cudnn_loaded'] else ' (cuDNN: ' + after['cudnn_error'] + ')'}")
            try:
                import jax
                import jax.numpy as jnp
                jd = jax.devices("gpu")[0]
                jdt = jnp.float32 if dt == mx.float32 else jnp.bfloat16
                xj = jax.device_put(jnp.asarray(xn, jdt), jd)
                wj = jax.device_put(
                    jnp.asarray(wn.transpose(1, 2, 3, 0), jdt), jd)
                cj = jax.device_put(jnp.asarray(cn, jdt), jd)

                def jconv(a, b):
                    return jax.lax.conv_general_dilated(
                        a, b, (1, 1), ((1, 1), (1, 1)),
                        dimension_numbers=("NHWC", "HWIO", "NHWC"),
                        feature_group_count=groups,
                        precision=jax.lax.Precision.HIGHEST)

                jfb = jax.jit(lambda a, b, c: jax.vjp(jconv, a, b)[1](c))

                def j_fwd_bwd():
                    jax.block_until_ready(jfb(xj, wj, cj))
                report(f"{name} {dt} fwd+bwd (ms)", ours_fb * 1e3,
                       cuda_time(j_fwd_bwd) * 1e3, "ms", "jax", False)
            except Exception as e:  # JAX without a GPU, or absent
                print(f"  vs jax: skipped ({type(e).__name__}: {e})")
            del x, w, ct, xt, wt, ctt
def linalg_bench(g, dev):
    """mx.linalg against torch.linalg (both through cuSOLVER / cuBLAS) on the
    same data (issue 31's targets): a batched Cholesky factorization and
    solve of 4096 SPD matrices of 64 x 64 float32 (cholesky, then the two
    triangular solves; torch: cholesky + cholesky_solve), the same batch
    through the general solve (ours factors float32 in float64, as the
    CPU), svd of 2048 x 2048 float32 (both gesvdj) and eigh of 4096 x 4096
    float32 (both syevd). Both sides include their info checks: torch
    synchronizes to read them, ours folds them into the stream's next
    host mark. `bench_gpu.py linalg` runs these rows alone."""
    rng = np.random.default_rng(0)
    la = mx.linalg
    m = rng.standard_normal((4096, 64, 64)).astype(np.float32)
    spd = (m @ np.swapaxes(m, -1, -2) / 64 + np.eye(64)).astype(np.float32)
    rhs = rng.standard_normal((4096, 64, 1)).astype(np.float32)
    big = rng.standard_normal((2048, 2048)).astype(np.float32)
    sym = rng.standard_normal((4096, 4096)).astype(np.float32)
    sym = (sym + sym.T) / 2

    def chol_solve(a, b):
        lo = la.cholesky(a, stream=g)
        y = la.solve_triangular(lo, b, upper=False, stream=g)
        return la.solve_triangular(mx.swapaxes(lo, -1, -2), y, upper=True,
                                   stream=g)

    def torch_chol_solve(a, b):
        lo = torch.linalg.cholesky(a)
        return torch.cholesky_solve(b, lo)

    cases = [
        ("cholesky+solve 4096x64^2 f32", (spd, rhs), chol_solve,
         torch_chol_solve),
        ("cholesky 4096x64^2 f32", (spd,),
         lambda a: la.cholesky(a, stream=g), torch.linalg.cholesky),
        ("solve 4096x64^2 f32", (spd, rhs),
         lambda a, b: la.solve(a, b, stream=g), torch.linalg.solve),
        ("svd 2048^2 f32", (big,), lambda a: la.svd(a, stream=g),
         lambda t: torch.linalg.svd(t)),
        ("eigh 4096^2 f32", (sym,), lambda a: la.eigh(a, stream=g),
         torch.linalg.eigh),
    ]
    for name, data, ours_fn, torch_fn in cases:
        args = [mx.array(d) for d in data]
        mx.eval(*args)
        targs = [torch.from_numpy(d).to(dev) for d in data]
        reps = 3 if data[0].shape[-1] >= 2048 else REPS
        ours = cuda_time(lambda: mx.eval(ours_fn(*args)), reps)

        def ref_fn():
            torch_fn(*targs)
            torch.cuda.current_stream().synchronize()
        ref = cuda_time(ref_fn, reps)
        report(f"{name} (ms)", ours * 1e3, ref * 1e3, "ms", "torch", False)
        del args, targs


def chain_parts(g, dev):
    """Where the chain's time goes: building the graph, evaluating it (the
    launches), freeing it, and torch adding in place (no allocation or
    graph), each per op."""
    n = 1000
    x0 = mx.zeros((16,), stream=g)
    one = mx.array(1.0)
    mx.eval(x0)
    builds, evals, frees = [], [], []
    for _ in range(REPS):
        t0 = time.perf_counter()
        x = x0
        for _ in range(n):
            x = x + one
        t1 = time.perf_counter()
        mx.eval(x)
        t2 = time.perf_counter()
        del x
        t3 = time.perf_counter()
        builds.append(t1 - t0)
        evals.append(t2 - t1)
        frees.append(t3 - t2)
    xt = torch.zeros(16, device=dev)

    def inplace():
        for _ in range(n):
            xt.add_(1.0)
        torch.cuda.synchronize()
    floor = wall_time(inplace)
    med = statistics.median
    print(f"chain parts (us/op): build {med(builds) / n * 1e6:.2f}  "
          f"eval {med(evals) / n * 1e6:.2f}  free {med(frees) / n * 1e6:.2f}"
          f"  torch add_ in place {floor / n * 1e6:.2f}")


def host_copies(g, dev):
    """A fresh GPU result of 256 MiB read by NumPy (its host copy: a pinned
    block, cached) against torch's .cpu() of one (pageable memory, torch's
    default) and torch copying into a pinned tensor it holds (the bus's
    bandwidth). The first conversion pins a new block; later ones reuse
    it."""
    n = 64 << 20
    x = mx.zeros((n,), stream=g)
    t = torch.zeros(n, device=dev)
    pinned = torch.empty(n, pin_memory=True)
    mx.eval(x)

    def ours():
        y = mx.add(x, 1, stream=g)
        mx.eval(y)
        start = time.perf_counter()
        h = np.asarray(y)
        took = time.perf_counter() - start
        assert h[-1] == 1.0
        return took

    def theirs(into_pinned):
        u = t + 1
        torch.cuda.synchronize()
        start = time.perf_counter()
        if into_pinned:
            pinned.copy_(u)
        else:
            u.cpu()
        return time.perf_counter() - start

    gbs = lambda sec: 4 * n / sec / 1e9
    first = ours()
    later = statistics.median(ours() for _ in range(REPS))
    report("to host 256 MiB f32 (GB/s)", gbs(later),
           gbs(statistics.median(theirs(False) for _ in range(REPS))),
           "GB/s", "torch .cpu()", True)
    print(f"  first conversion {gbs(first):.1f} GB/s (pins a new block); "
          f"torch into pinned "
          f"{gbs(statistics.median(theirs(True) for _ in range(REPS))):.1f}"
          " GB/s")


def train_step(model, opt, xb, yb):
    """One eager training step of `model` (mean cross-entropy on (xb, yb),
    forward, backward, optimizer update, evaluated), as a callable."""
    import fluxion.nn as nn

    def loss_fn(m, x, y):
        return mx.mean(nn.losses.cross_entropy(m(x), y))

    step = nn.value_and_grad(model, loss_fn)

    def fx():
        loss, grads = step(model, xb, yb)
        opt.update(model, grads)
        mx.eval(loss, model.parameters())

    return fx


def mlp_step(g, dev):
    """One training step (forward, backward, SGD update) of a 784-512-512-10
    MLP on a batch of 256, float32, eager on both sides."""
    import fluxion.nn as nn
    import fluxion.optimizers as optim

    mx.set_default_device(g)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(),
                          nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = optim.SGD(learning_rate=0.01)
    xb = mx.random.normal((256, 784))
    yb = mx.random.randint(0, 10, (256,))

    fx = train_step(model, opt, xb, yb)

    tm = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                             torch.nn.Linear(512, 512), torch.nn.ReLU(),
                             torch.nn.Linear(512, 10)).to(dev)
    topt = torch.optim.SGD(tm.parameters(), lr=0.01)
    xt = torch.randn(256, 784, device=dev)
    yt = torch.randint(0, 10, (256,), device=dev)

    def th():
        topt.zero_grad()
        loss = torch.nn.functional.cross_entropy(tm(xt), yt)
        loss.backward()
        topt.step()
        loss.item()

    report("MLP train step b256 f32 (us)", wall_time(fx, 50) * 1e6,
           wall_time(th, 50) * 1e6, "us", "torch", False)


if __name__ == "__main__":
    main()
