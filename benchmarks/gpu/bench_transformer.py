"""GPU benchmarks of the transformer path (issue 29), with PyTorch measured
in the same process on the same GPU (CUDA-event medians, bench_gpu's
timing). Each row prints Fluxion's figure, the reference's and the ratio
(above 1: Fluxion is better).

    PYTHONPATH=build-gpu/python python3 benchmarks/gpu/bench_transformer.py

Rows: softmax over rows of 8192 x 8192 float32 as a fraction of the copy's
bandwidth and against torch.softmax; attention forward and forward+backward (B=4, H=32, L=4096, D=128,
bfloat16, causal) against torch's scaled_dot_product_attention (through
cuDNN's fused kernels where they load: a line after the rows says which
ran); attention
decoding (1 query, 32k keys, 32 query heads on 8 KV heads) as a fraction of
the bandwidth of reading K and V; 4-bit quantized matmul decode (1 x 4096
@ 4096 x 14336) as a fraction of the packed weights' bandwidth and prefill
(4096 x 4096 @ 4096 x 14336) against a bf16 torch matmul; a transformer LM
training step (d=512, 4 layers, 8 heads, context 256, batch 32, float32,
AdamW) against torch eager.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import fluxion.core as mx  # noqa: E402
from bench_gpu import (cuda_time, report, torch, train_step,  # noqa: E402
                       wall_time)

COPY_TBS = None


def copy_bandwidth(dev):
    """Device-to-device copy bandwidth (TB/s, read + write) via torch."""
    a = torch.empty(1 << 28, dtype=torch.float32, device=dev)
    b = torch.empty_like(a)
    t = cuda_time(lambda: b.copy_(a))
    return 2 * a.numel() * 4 / t / 1e12


def attention(dev):
    B, H, L, D = 4, 32, 4096, 128
    q, k, v = (mx.random.normal((B, H, L, D)).astype(mx.bfloat16)
               for _ in range(3))
    mx.eval(q, k, v)
    scale = D ** -0.5

    def fx():
        mx.eval(mx.fast.scaled_dot_product_attention(q, k, v, scale=scale,
                                                     mask="causal"))

    tq, tk, tv = (torch.randn(B, H, L, D, device=dev, dtype=torch.bfloat16)
                  for _ in range(3))
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def th():
        sdpa(tq, tk, tv, is_causal=True)

    flops = 4 * B * H * L * L * D / 2  # causal: half the scores
    report("attention fwd causal bf16 (TF/s)", flops / cuda_time(fx) / 1e12,
           flops / cuda_time(th) / 1e12, "TF/s", "torch", True)

    def loss(q, k, v):
        return mx.sum(mx.fast.scaled_dot_product_attention(
            q, k, v, scale=scale, mask="causal").astype(mx.float32))

    g = mx.grad(loss, argnums=(0, 1, 2))

    def fx_bwd():
        mx.eval(g(q, k, v))

    tq.requires_grad_(True)
    tk.requires_grad_(True)
    tv.requires_grad_(True)

    def th_bwd():
        o = sdpa(tq, tk, tv, is_causal=True)
        o.float().sum().backward()

    report("attention fwd+bwd causal bf16 (ms)", cuda_time(fx_bwd, 3) * 1e3,
           cuda_time(th_bwd, 3) * 1e3, "ms", "torch", False)
    cudnn_note()


def cudnn_note():
    """Which kernels the attention rows ran: cuDNN's fused ones
    (backend/cuda/sdpa_cudnn.cpp) or Fluxion's own."""
    i = mx._cudnn_sdpa_info()
    where = (f"cuDNN {i['version']} ({i['library']})" if i["loaded"]
             else f"not loaded: {i['error']}")
    print(f"  cuDNN attention: {where}; forward passes {i['forward_calls']}, "
          f"backward passes {i['backward_calls']}, failed plans "
          f"{i['failed_plans']}")


def decode(dev):
    Hq, Hkv, Lk, D = 32, 8, 32768, 128
    q = mx.random.normal((1, Hq, 1, D)).astype(mx.bfloat16)
    k = mx.random.normal((1, Hkv, Lk, D)).astype(mx.bfloat16)
    v = mx.random.normal((1, Hkv, Lk, D)).astype(mx.bfloat16)
    mx.eval(q, k, v)

    def fx():
        mx.eval(mx.fast.scaled_dot_product_attention(q, k, v, scale=0.088))

    t = cuda_time(fx, 20)
    tbs = 2 * Hkv * Lk * D * 2 / t / 1e12
    tq = torch.randn(1, Hq, 1, D, device=dev, dtype=torch.bfloat16)
    tk = torch.randn(1, Hkv, Lk, D, device=dev, dtype=torch.bfloat16)
    tv = torch.randn(1, Hkv, Lk, D, device=dev, dtype=torch.bfloat16)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    tt = cuda_time(lambda: sdpa(tq, tk, tv, enable_gqa=True), 20)
    report("attention decode 32k keys (TB/s)", tbs, COPY_TBS / 2, "TB/s",
           "copy read", True)
    print(f"  decode: fluxion {t * 1e6:.1f} us, torch sdpa {tt * 1e6:.1f} us")


def quantized(dev):
    K, N = 4096, 14336
    w = mx.random.normal((N, K)).astype(mx.bfloat16)
    wq, s, b = mx.quantize(w, group_size=64, bits=4)
    x1 = mx.random.normal((1, K)).astype(mx.bfloat16)
    xm = mx.random.normal((4096, K)).astype(mx.bfloat16)
    mx.eval(wq, s, b, x1, xm)

    def dec():
        mx.eval(mx.quantized_matmul(x1, wq, s, b, group_size=64, bits=4))

    t = cuda_time(dec, 20)
    packed = wq.nbytes + s.nbytes + b.nbytes
    report("qmm 4-bit decode (TB/s)", packed / t / 1e12, COPY_TBS / 2,
           "TB/s", "copy read", True)

    def pre():
        mx.eval(mx.quantized_matmul(xm, wq, s, b, group_size=64, bits=4))

    ta = torch.randn(4096, K, device=dev, dtype=torch.bfloat16)
    tb = torch.randn(K, N, device=dev, dtype=torch.bfloat16)
    flops = 2 * 4096 * K * N
    report("qmm 4-bit prefill (TF/s)", flops / cuda_time(pre) / 1e12,
           flops / cuda_time(lambda: ta @ tb) / 1e12, "TF/s",
           "torch bf16 mm", True)


def softmax_rows(dev):
    n = 8192
    x = mx.random.normal((n, n))
    mx.eval(x)
    t = cuda_time(lambda: mx.eval(mx.softmax(x, axis=-1)))
    xt = torch.randn(n, n, device=dev)
    tt = cuda_time(lambda: torch.softmax(xt, dim=-1))
    nbytes = 2 * n * n * 4  # read once, written once
    report("softmax rows 8192^2 f32 (TB/s)", nbytes / t / 1e12, COPY_TBS,
           "TB/s", "d2d copy", True)
    report("softmax rows 8192^2 f32 (TB/s)", nbytes / t / 1e12,
           nbytes / tt / 1e12, "TB/s", "torch", True)


def lm_step(dev):
    import fluxion.nn as nn
    import fluxion.optimizers as optim

    V, d, layers, heads, ctx, batch = 256, 512, 4, 8, 256, 32

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, d)
            self.enc = nn.TransformerEncoder(layers, d, heads, norm_first=True)
            self.out = nn.Linear(d, V)

        def __call__(self, x):
            mask = nn.MultiHeadAttention.create_additive_causal_mask(ctx)
            return self.out(self.enc(self.emb(x), mask))

    model = LM()
    opt = optim.AdamW(learning_rate=1e-4)
    xb = mx.random.randint(0, V, (batch, ctx))
    yb = mx.random.randint(0, V, (batch, ctx))

    fx = train_step(model, opt, xb, yb)

    class TLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(V, d)
            layer = torch.nn.TransformerEncoderLayer(
                d, heads, 4 * d, dropout=0.0, batch_first=True,
                norm_first=True)
            self.enc = torch.nn.TransformerEncoder(layer, layers)
            self.out = torch.nn.Linear(d, V)

        def forward(self, x):
            mask = torch.nn.Transformer.generate_square_subsequent_mask(
                ctx, device=dev)
            return self.out(self.enc(self.emb(x), mask=mask, is_causal=True))

    tm = TLM().to(dev)
    topt = torch.optim.AdamW(tm.parameters(), lr=1e-4)
    xt = torch.randint(0, V, (batch, ctx), device=dev)
    yt = torch.randint(0, V, (batch, ctx), device=dev)

    def th():
        topt.zero_grad()
        loss = torch.nn.functional.cross_entropy(tm(xt).reshape(-1, V),
                                                 yt.reshape(-1))
        loss.backward()
        topt.step()
        loss.item()

    report("transformer LM step f32 (ms)", wall_time(fx, 10) * 1e3,
           wall_time(th, 10) * 1e3, "ms", "torch", False)


def main():
    global COPY_TBS
    assert mx.is_available(mx.gpu), "no GPU is visible"
    assert torch is not None and torch.cuda.is_available()
    dev = torch.device("cuda")
    mx.set_default_device(mx.gpu)
    COPY_TBS = copy_bandwidth(dev)
    print(f"d2d copy {COPY_TBS:.2f} TB/s (read + write)")
    for part in (softmax_rows, attention, decode, quantized, lm_step):
        try:
            part(dev)
        except Exception as e:  # one failing row must not hide the others
            print(f"{part.__name__}: FAILED ({type(e).__name__}: {e})")


if __name__ == "__main__":
    main()
