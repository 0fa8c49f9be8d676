"""Language-model inference with a Llama-style decoder: RMSNorm, rotary
position embeddings, grouped-query attention with a key/value cache,
SwiGLU feed-forward layers and, optionally, 4-bit quantized linear layers
(nn.quantize), written as an MLX program would be.

The model is trained briefly, character by character, on the fortune
cookies of the char-LM example (Debian's ``fortunes``), or its weights are
loaded from ``--weights`` (saved there after training when the file does
not exist yet). It then generates text from a prompt, sampling with a
temperature and nucleus (top-p) filtering, and prints the tokens per second
of the prompt (one batched forward pass) and of the generation (one token
per step, through the cache).

Run:  PYTHONPATH=build/python /usr/bin/python3 examples/llama_inference.py
      (--device gpu, --quantize, --steps N, --smoke for a few-second check)
"""

import argparse
import os
import sys
import time

import numpy as np

import fluxion.core as mx
import fluxion.nn as nn
import fluxion.optimizers as optim

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from char_lm_transformer import (  # noqa: E402
    FORTUNES_DIR,
    Vocabulary,
    load_fortunes,
    random_batch,
)
from example_common import add_run_arguments, start_run  # noqa: E402


class Attention(nn.Module):
    """Grouped-query attention: `kv_heads` key/value heads shared by
    `heads` query heads, RoPE on queries and keys, an optional cache of the
    keys and values seen so far."""

    def __init__(self, dims, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads
        self.head_dim = dims // heads
        self.wq = nn.Linear(dims, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dims, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dims, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, dims, bias=False)
        self.rope = nn.RoPE(self.head_dim)

    def __call__(self, x, cache=None):
        B, L, _ = x.shape

        def split(t, n):  # (B, L, n * hd) -> (B, n, L, hd)
            return t.reshape(B, L, n, -1).transpose(0, 2, 1, 3)

        q = split(self.wq(x), self.heads)
        k = split(self.wk(x), self.kv_heads)
        v = split(self.wv(x), self.kv_heads)
        offset = 0 if cache is None else cache[0].shape[2]
        q = self.rope(q, offset=offset)
        k = self.rope(k, offset=offset)
        if cache is not None:
            k = mx.concatenate([cache[0], k], axis=2)
            v = mx.concatenate([cache[1], v], axis=2)
        o = mx.fast.scaled_dot_product_attention(
            q, k, v, scale=self.head_dim**-0.5,
            mask="causal" if L > 1 else None)
        o = o.transpose(0, 2, 1, 3).reshape(B, L, -1)
        return self.wo(o), (k, v)


class SwiGLU(nn.Module):
    def __init__(self, dims, hidden):
        super().__init__()
        self.w1 = nn.Linear(dims, hidden, bias=False)
        self.w3 = nn.Linear(dims, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dims, bias=False)

    def __call__(self, x):
        return self.w2(nn.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, dims, heads, kv_heads, hidden):
        super().__init__()
        self.attn_norm = nn.RMSNorm(dims)
        self.attn = Attention(dims, heads, kv_heads)
        self.mlp_norm = nn.RMSNorm(dims)
        self.mlp = SwiGLU(dims, hidden)

    def __call__(self, x, cache=None):
        h, cache = self.attn(self.attn_norm(x), cache)
        x = x + h
        return x + self.mlp(self.mlp_norm(x)), cache


class Llama(nn.Module):
    def __init__(self, vocab, dims=128, layers=4, heads=8, kv_heads=2,
                 hidden=256):
        super().__init__()
        self.embed = nn.Embedding(vocab, dims)
        self.layers = [Block(dims, heads, kv_heads, hidden)
                       for _ in range(layers)]
        self.norm = nn.RMSNorm(dims)
        self.head = nn.Linear(dims, vocab, bias=False)

    def __call__(self, tokens, caches=None):
        x = self.embed(tokens)
        caches = caches or [None] * len(self.layers)
        new = []
        for layer, cache in zip(self.layers, caches):
            x, c = layer(x, cache)
            new.append(c)
        return self.head(self.norm(x)), new


def sample(logits, temperature, top_p, key):
    """A token id per row of logits: greedy at temperature 0, else drawn
    from the softmax at `temperature` restricted to the smallest set of
    most likely tokens whose probability reaches `top_p`."""
    if temperature == 0:
        return mx.argmax(logits, axis=-1)
    probs = mx.softmax(logits / temperature, axis=-1)
    order = mx.argsort(-probs, axis=-1)
    sorted_p = mx.take_along_axis(probs, order, axis=-1)
    # Keep a token while the mass before it is under top_p (the first
    # token always stays).
    before = mx.cumsum(sorted_p, axis=-1) - sorted_p
    kept = mx.where(before < top_p, sorted_p, 0.0)
    choice = mx.random.categorical(mx.log(kept), key=key)
    return mx.take_along_axis(order, choice[..., None], axis=-1)[..., 0]


def generate(model, prompt, steps, temperature=0.8, top_p=0.9, seed=0):
    """Token ids after `prompt` (a list of ids), and the tokens per second
    of the prompt's forward pass and of the generation."""
    key = mx.random.key(seed)
    t0 = time.perf_counter()
    logits, caches = model(mx.array(prompt, dtype=mx.int32)[None])
    key, sub = mx.random.split(key)
    y = sample(logits[:, -1], temperature, top_p, sub)
    mx.eval(y, caches)
    t1 = time.perf_counter()
    out = []
    for _ in range(steps):
        out.append(y)
        logits, caches = model(y[:, None], caches)
        key, sub = mx.random.split(key)
        y = sample(logits[:, -1], temperature, top_p, sub)
        mx.async_eval(y)
    tokens = [int(t.item()) for t in out]
    t2 = time.perf_counter()
    return tokens, len(prompt) / (t1 - t0), steps / max(t2 - t1, 1e-9)


def train(model, data, steps, batch, context, lr, rng, log_every=50):
    opt = optim.AdamW(learning_rate=lr)

    def loss_fn(m, x, y):
        return nn.losses.cross_entropy(m(x)[0], y, reduction="mean")

    step = nn.value_and_grad(model, loss_fn)
    losses = []
    for i in range(steps):
        x, y = random_batch(data, batch, context, rng)
        loss, grads = step(model, x, y)
        opt.update(model, grads)
        mx.eval(loss, model.parameters(), opt.state)
        losses.append(loss.item())
        if log_every and (i + 1) % log_every == 0:
            print(f"step {i + 1}: loss {np.mean(losses[-log_every:]):.3f}")
    return losses


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--weights", default=None,
                    help="load the weights from this file if it exists, "
                         "else save them there after training")
    ap.add_argument("--quantize", action="store_true",
                    help="4-bit affine weights (group size 64)")
    ap.add_argument("--prompt", default="The ")
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--top-p", type=float, default=0.9)
    ap.add_argument("--smoke", action="store_true",
                    help="a few training steps and tokens")
    add_run_arguments(ap, FORTUNES_DIR, "llama_out")
    args = ap.parse_args(argv)
    if args.smoke:
        args.steps, args.tokens, args.batch_size = 10, 24, 8
        args.context = 64
    rng = start_run(args)

    text = "".join(load_fortunes(args.data_dir))
    vocab = Vocabulary(text)
    data = vocab.encode(text)
    model = Llama(len(vocab))
    losses = []
    if args.weights and os.path.exists(args.weights):
        model.load_weights(args.weights)
        print(f"loaded {args.weights}")
    else:
        losses = train(model, data, args.steps, args.batch_size, args.context,
                       args.lr, rng, log_every=0 if args.smoke else 50)
        if args.weights:
            model.save_weights(args.weights)
    if args.quantize:
        nn.quantize(model, group_size=64, bits=4)
    mx.eval(model.parameters())
    prompt = list(vocab.encode(args.prompt))
    tokens, prompt_tps, gen_tps = generate(
        model, prompt, args.tokens, args.temperature, args.top_p, args.seed)
    print(args.prompt + vocab.decode(tokens))
    print(f"prompt: {prompt_tps:.1f} tokens/s, generation: {gen_tps:.1f} "
          f"tokens/s ({args.device}{', 4-bit' if args.quantize else ''})")
    return {"losses": losses, "tokens": tokens, "prompt_tps": prompt_tps,
            "generation_tps": gen_tps}


if __name__ == "__main__":
    main()
