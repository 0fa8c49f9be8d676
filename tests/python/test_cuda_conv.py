"""Convolutions on the GPU (backend/cuda/conv.cu, conv_cudnn.cpp; skipped,
with the reason, where no GPU is visible) against the CPU: the ops of every
form (1-D to 3-D, strides, asymmetric padding, dilations, groups,
depthwise, flip, transposed), forward and gradients, float32 / float16 /
bfloat16 / float64, with cuDNN on and off (FLUXION_CUDNN_CONV=0 runs the
general path), vmap and compile, and a training step of the Fashion-MNIST
CNN of examples/ (loss, gradients and the parameters after SGD steps).
The C++ suite (test_cuda_conv.cpp) covers strided and misaligned operands,
empty shapes and the chunked general path."""
import importlib.util
import os

import numpy as np
import pytest

import fluxion.core as mx
import fluxion.nn as nn
import fluxion.optimizers as optim
from fluxion.utils import tree_flatten

from helpers import host, requires_gpu

pytestmark = requires_gpu

G = mx.gpu
C = mx.cpu
TOL = {mx.float32: 1e-4, mx.float64: 1e-10, mx.float16: 4e-3,
       mx.bfloat16: 3e-2}
RNG = np.random.default_rng(31)


@pytest.fixture(params=["1", "0"], ids=["cudnn", "general"])
def path(request, monkeypatch):
    """FLUXION_CUDNN_CONV for the test (read at every convolution)."""
    monkeypatch.setenv("FLUXION_CUDNN_CONV", request.param)
    return request.param


def close(got, want, tol):
    got, want = host(got), host(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * scale)


def rand(shape, dtype):
    return mx.array(RNG.uniform(-1, 1, shape).astype(np.float32)).astype(
        dtype)


FORMS = {
    "conv1d": (lambda x, w, s: mx.conv1d(x, w, stride=2, padding=1,
                                         dilation=2, stream=s),
               (2, 12, 8), (8, 3, 8)),
    "conv1d_groups": (lambda x, w, s: mx.conv1d(x, w, padding=1, groups=2,
                                                stream=s),
                      (2, 7, 4), (6, 3, 2)),
    "conv2d": (lambda x, w, s: mx.conv2d(x, w, padding=1, stream=s),
               (2, 9, 8, 16), (16, 3, 3, 16)),
    "conv2d_stride_uneven": (lambda x, w, s: mx.conv2d(
        x, w, stride=(2, 3), padding=(1, 0), stream=s),
        (2, 8, 9, 8), (8, 2, 3, 8)),
    "conv2d_dilation_groups": (lambda x, w, s: mx.conv2d(
        x, w, padding=(1, 2), dilation=(2, 1), groups=3, stream=s),
        (1, 7, 6, 6), (6, 2, 2, 2)),
    "depthwise": (lambda x, w, s: mx.conv2d(x, w, padding=1, groups=16,
                                            stream=s),
                  (2, 9, 9, 16), (16, 3, 3, 1)),
    "depthwise_multiplier_stride": (lambda x, w, s: mx.conv2d(
        x, w, stride=2, padding=1, groups=3, stream=s),
        (1, 7, 6, 3), (6, 3, 3, 1)),
    "conv3d": (lambda x, w, s: mx.conv3d(x, w, padding=1, stream=s),
               (1, 4, 5, 4, 8), (8, 2, 3, 2, 8)),
    "conv_general_flip_asymmetric": (lambda x, w, s: mx.conv_general(
        x, w, stride=(1, 2), padding=([1, 2], [2, 0]),
        kernel_dilation=(1, 2), input_dilation=(2, 1), flip=True, stream=s),
        (1, 4, 5, 8), (8, 2, 2, 8)),
    "conv_transpose1d": (lambda x, w, s: mx.conv_transpose1d(
        x, w, stride=2, padding=1, output_padding=1, stream=s),
        (1, 5, 8), (8, 3, 8)),
    "conv_transpose2d_groups": (lambda x, w, s: mx.conv_transpose2d(
        x, w, stride=(2, 1), padding=(0, 1), dilation=(1, 2),
        output_padding=(1, 0), groups=2, stream=s),
        (1, 3, 4, 4), (4, 2, 3, 2)),
    "conv_transpose3d": (lambda x, w, s: mx.conv_transpose3d(
        x, w, stride=2, padding=1, stream=s),
        (1, 2, 3, 2, 8), (8, 2, 2, 3, 8)),
}

# Grouped forms, whose weight gradients are ConvolutionWeightGrad nodes:
# (f, x shape, w shape, whether cuDNN's backward filter takes the node;
# a stride with input dilation has no cuDNN operation: the composite runs).
GROUPED = {
    "conv1d_depthwise_stride": (lambda x, w, s: mx.conv1d(
        x, w, stride=2, padding=1, groups=8, stream=s),
        (2, 12, 8), (8, 3, 1), True),
    "conv1d_multiplier_dilation": (lambda x, w, s: mx.conv1d(
        x, w, padding=2, dilation=2, groups=4, stream=s),
        (2, 12, 4), (8, 3, 1), True),
    "conv2d_groups_dilation": (lambda x, w, s: mx.conv2d(
        x, w, padding=(1, 2), dilation=(2, 1), groups=2, stream=s),
        (2, 9, 8, 8), (8, 3, 3, 4), True),
    "conv2d_depthwise_multiplier_stride": (lambda x, w, s: mx.conv2d(
        x, w, stride=2, padding=1, groups=8, stream=s),
        (2, 9, 8, 8), (16, 3, 3, 1), True),
    "conv3d_groups": (lambda x, w, s: mx.conv3d(
        x, w, padding=1, groups=4, stream=s),
        (1, 4, 5, 4, 8), (8, 2, 3, 2, 2), True),
    "conv3d_depthwise_stride": (lambda x, w, s: mx.conv3d(
        x, w, stride=2, padding=1, groups=8, stream=s),
        (1, 5, 6, 5, 8), (8, 3, 3, 3, 1), True),
    "conv_general_flip_asymmetric": (lambda x, w, s: mx.conv_general(
        x, w, stride=(1, 2), padding=([2, 0], [0, 1]),
        kernel_dilation=(2, 1), groups=2, flip=True, stream=s),
        (2, 6, 7, 8), (8, 2, 3, 4), True),
    "conv_general_input_dilation": (lambda x, w, s: mx.conv_general(
        x, w, stride=1, padding=([2, 1], [1, 3]), kernel_dilation=(1, 2),
        input_dilation=(2, 3), groups=2, stream=s),
        (2, 3, 4, 8), (8, 3, 2, 4), True),
    "conv_transpose2d_depthwise": (lambda x, w, s: mx.conv_transpose2d(
        x, w, stride=2, padding=1, output_padding=1, groups=8, stream=s),
        (2, 5, 4, 8), (8, 3, 3, 1), True),
    "conv_transpose1d_groups": (lambda x, w, s: mx.conv_transpose1d(
        x, w, stride=2, padding=1, groups=2, stream=s),
        (1, 5, 8), (8, 3, 4), True),
    "conv_general_stride_and_input_dilation": (lambda x, w, s: mx.conv_general(
        x, w, stride=2, padding=1, input_dilation=2, groups=2, stream=s),
        (2, 6, 8), (4, 2, 4), False),
}


def forward_and_grads(f, x, w, ct, stream):
    outs, grads = mx.vjp(lambda a, b: f(a, b, stream), [x, w], [ct])
    mx.eval(outs, grads)
    return [outs[0]] + list(grads)


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16,
                                   mx.float64], ids=str)
@pytest.mark.parametrize("form", sorted(FORMS))
def test_forms(form, dtype, path):
    f, xs, ws = FORMS[form]
    x, w = rand(xs, dtype), rand(ws, dtype)
    ct = rand(f(x, w, C).shape, dtype)
    gpu = forward_and_grads(f, x, w, ct, G)
    cpu = forward_and_grads(f, x, w, ct, C)
    tol = TOL[dtype]
    close(gpu[0], cpu[0], tol)
    close(gpu[1], cpu[1], 2 * tol)
    close(gpu[2], cpu[2], 2 * tol)


def test_general_path_is_used_when_cudnn_is_off(monkeypatch):
    monkeypatch.setenv("FLUXION_CUDNN_CONV", "0")
    before = mx._gpu_conv_stats()
    x, w = rand((2, 8, 8, 16), mx.float32), rand((16, 3, 3, 16), mx.float32)
    mx.eval(mx.conv2d(x, w, padding=1, stream=G))
    after = mx._gpu_conv_stats()
    cudnn = ("cudnn_forward", "cudnn_backward_data", "cudnn_backward_filter")
    assert all(after[k] == before[k] for k in cudnn)
    assert after["im2col"] == before["im2col"] + 1


def test_cudnn_runs_the_training_convolutions(monkeypatch):
    monkeypatch.delenv("FLUXION_CUDNN_CONV", raising=False)
    before = mx._gpu_conv_stats()
    if not before["cudnn_loaded"]:
        pytest.skip("cuDNN does not load: " + before["cudnn_error"])
    x, w = rand((4, 14, 14, 64), mx.bfloat16), rand((64, 3, 3, 64),
                                                    mx.bfloat16)
    ct = rand((4, 14, 14, 64), mx.bfloat16)
    forward_and_grads(FORMS["conv2d"][0], x, w, ct, G)
    after = mx._gpu_conv_stats()
    for k in ("cudnn_forward", "cudnn_backward_data",
              "cudnn_backward_filter"):
        assert after[k] == before[k] + 1, (k, before, after)


@pytest.mark.parametrize("dtype", [mx.float32, mx.bfloat16], ids=str)
def test_cudnn_takes_the_grouped_weight_gradients(monkeypatch, dtype):
    """A depthwise and a grouped convolution train on cuDNN's three
    operations (the weight gradient, a ConvolutionWeightGrad node, as
    backward filter on the forward's input and the cotangent as they are:
    no composite, so no copy of the input) and match the CPU."""
    monkeypatch.delenv("FLUXION_CUDNN_CONV", raising=False)
    if not mx._gpu_conv_stats()["cudnn_loaded"]:
        pytest.skip("cuDNN does not load")
    for cin, cout, groups in [(32, 32, 32), (32, 64, 32), (16, 8, 4)]:
        x = rand((3, 20, 20, cin), dtype)
        w = rand((cout, 3, 3, cin // groups), dtype)
        ct = rand((3, 20, 20, cout), dtype)

        def f(a, b, s):
            return mx.conv2d(a, b, padding=1, groups=groups, stream=s)

        before = mx._gpu_conv_stats()
        gpu = forward_and_grads(f, x, w, ct, G)
        after = mx._gpu_conv_stats()
        assert (after["cudnn_backward_filter"] ==
                before["cudnn_backward_filter"] + 1), (groups, after)
        assert (after["weight_grad_composite"] ==
                before["weight_grad_composite"]), (groups, after)
        cpu = forward_and_grads(f, x, w, ct, C)
        for a, b in zip(gpu, cpu):
            close(a, b, 4 * TOL[dtype])


@pytest.mark.parametrize("dtype", [mx.float32, mx.bfloat16, mx.float64],
                         ids=str)
@pytest.mark.parametrize("form", sorted(GROUPED))
def test_grouped_weight_gradients(form, dtype, path, monkeypatch):
    """Every grouped form's gradients on the GPU against the CPU; with
    cuDNN (not float64) the weight gradient runs as backward filter without
    the composite's copies where the form has a mapping."""
    f, xs, ws, mapped = GROUPED[form]
    x, w = rand(xs, dtype), rand(ws, dtype)
    ct = rand(f(x, w, C).shape, dtype)
    before = mx._gpu_conv_stats()
    gpu = forward_and_grads(f, x, w, ct, G)
    after = mx._gpu_conv_stats()
    cpu = forward_and_grads(f, x, w, ct, C)
    tol = TOL[dtype]
    close(gpu[0], cpu[0], tol)
    close(gpu[1], cpu[1], 2 * tol)
    close(gpu[2], cpu[2], 4 * tol)
    composite = after["weight_grad_composite"] - before["weight_grad_composite"]
    if path == "1" and dtype != mx.float64 and after["cudnn_loaded"]:
        if mapped and after["cudnn_failed_plans"] == before["cudnn_failed_plans"]:
            assert composite == 0, (form, before, after)
            assert (after["cudnn_backward_filter"] >
                    before["cudnn_backward_filter"]), (form, before, after)
        elif not mapped:
            assert composite == 1, (form, before, after)
    else:
        assert composite == 1, (form, before, after)


def test_grouped_weight_gradient_second_order_and_vmap():
    """The node's own rules on the GPU: the gradient of a depthwise weight
    gradient, and per-example weight gradients by vmap, against the CPU."""
    f, xs, ws, _ = GROUPED["conv2d_depthwise_multiplier_stride"]
    x, w = rand(xs, mx.float32), rand(ws, mx.float32)
    ct = rand(f(x, w, C).shape, mx.float32)
    r = rand(ws, mx.float32)

    def h(a, c, s):
        gw = mx.grad(lambda v: mx.sum(f(a, v, s) * c))(w)
        return mx.sum(gw * r)

    for argnums in (0, 1):
        got = mx.grad(lambda a, c: h(a, c, G), argnums=argnums)(x, ct)
        want = mx.grad(lambda a, c: h(a, c, C), argnums=argnums)(x, ct)
        close(got, want, 4 * TOL[mx.float32])
    xb = rand((3,) + xs, mx.float32)
    cb = rand((3,) + tuple(ct.shape), mx.float32)

    def g(a, c, s):
        return mx.grad(lambda v: mx.sum(f(a, v, s) * c))(w)

    got = mx.vmap(lambda a, c: g(a, c, G))(xb, cb)
    want = mx.vmap(lambda a, c: g(a, c, C))(xb, cb)
    close(got, want, 4 * TOL[mx.float32])


def test_vmap_and_compile(path):
    ws = rand((3, 8, 3, 3, 4), mx.float32)
    x = rand((2, 6, 6, 4), mx.float32)

    def conv(w, s):
        return mx.conv2d(x, w, padding=1, stream=s)

    got = mx.vmap(lambda w: conv(w, G))(ws)
    want = mx.vmap(lambda w: conv(w, C))(ws)
    close(got, want, TOL[mx.float32])
    compiled = mx.compile(lambda a, b: mx.conv2d(a, b, stride=2, stream=G))
    close(compiled(x, ws[0]), mx.conv2d(x, ws[0], stride=2, stream=C),
          TOL[mx.float32])


EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


def cnn_example():
    """examples/fashion_mnist_cnn.py as a module (its CNN and loss)."""
    spec = importlib.util.spec_from_file_location(
        "fashion_mnist_cnn", os.path.join(EXAMPLES, "fashion_mnist_cnn.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fashion_batch(n=64):
    """A batch of Fashion-MNIST training images when Debian's package is
    installed, else random images with random labels."""
    d = "/usr/share/datasets/fashion-mnist"
    try:
        import gzip
        with gzip.open(os.path.join(d, "train-images-idx3-ubyte.gz")) as f:
            img = np.frombuffer(f.read(), np.uint8, offset=16)
        with gzip.open(os.path.join(d, "train-labels-idx1-ubyte.gz")) as f:
            lab = np.frombuffer(f.read(), np.uint8, offset=8)
        x = img[: n * 784].reshape(n, 28, 28, 1).astype(np.float32) / 255
        return x, lab[:n].astype(np.int32)
    except OSError:
        return (RNG.uniform(0, 1, (n, 28, 28, 1)).astype(np.float32),
                RNG.integers(0, 10, n).astype(np.int32))


def test_fashion_mnist_cnn_training_step(path):
    # The example's model and loss, without dropout (its random masks are
    # not the point here).
    ex = cnn_example()
    xb, yb = fashion_batch()
    mx.random.seed(3)
    base = ex.CNN(dropout=0.0)
    mx.eval(base.parameters())
    params = base.parameters()
    loss_fn = ex.loss_fn

    results = {}
    for dev in (G, C):
        with mx.stream(dev):
            model = ex.CNN(dropout=0.0)
            model.update(params)
            # SGD: Adam's normalization would turn rounding-level
            # differences of near-zero gradients into whole steps.
            opt = optim.SGD(learning_rate=0.1, momentum=0.9)
            step = nn.value_and_grad(model, loss_fn)
            x, y = mx.array(xb), mx.array(yb)
            loss, grads = step(model, x, y)
            mx.eval(loss, grads)
            first = (loss, grads)
            for _ in range(2):
                loss, g = step(model, x, y)
                opt.update(model, g)
                mx.eval(model.parameters(), opt.state)
            results[dev] = (first, model.parameters())
    (loss_g, grads_g), params_g = results[G]
    (loss_c, grads_c), params_c = results[C]
    close(loss_g, loss_c, 1e-5)
    for (k, a), (_, b) in zip(tree_flatten(grads_g), tree_flatten(grads_c)):
        close(a, b, 1e-4)
    for (k, a), (_, b) in zip(tree_flatten(params_g), tree_flatten(params_c)):
        close(a, b, 1e-4)
