"""The core/backend seam seen from Python: the primitive registry helper,
the memory API's MLX signatures, and clear errors (never a crash) for GPU
work in a build without GPU backend."""

import os
import subprocess
import sys

import pytest

import fluxion.core as mx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
NO_GPU = not mx.is_available(mx.gpu)


def test_registry_lists_every_primitive_once():
    reg = mx._primitive_registry()
    names = [p["name"] for p in reg]
    assert len(names) == len(set(names)) > 100
    by_name = {p["name"]: p for p in reg}
    assert by_name["Add"]["family"] == "binary"
    assert by_name["Reshape"]["family"] == "view"
    assert by_name["Inverse"]["class"] == "linalg::Inverse"
    assert all(p["cpu"] for p in reg)
    assert mx._kernels_missing(mx.cpu) == []
    if NO_GPU:
        assert sorted(mx._kernels_missing(mx.gpu)) == sorted(names)


def test_kernel_coverage_tool():
    env = dict(os.environ)
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "kernel_coverage.py")],
        env=env, capture_output=True, text=True, check=True).stdout
    n = len(mx._primitive_registry())
    assert f"cpu: {n} of {n} primitives have a kernel" in out
    if NO_GPU:
        assert (f"gpu: 0 of {n} primitives have a kernel (built without a "
                "GPU backend)") in out
        assert "Matmul" in out and "Reshape" in out


def test_memory_api_keeps_mlx_signatures():
    for name in ["get_active_memory", "get_peak_memory", "reset_peak_memory",
                 "get_cache_memory", "get_memory_limit", "clear_cache"]:
        getattr(mx, name)()
        with pytest.raises(TypeError):
            getattr(mx, name)(mx.cpu)
    old = mx.set_memory_limit(1 << 40)
    assert mx.set_memory_limit(limit=old) == 1 << 40
    old = mx.set_cache_limit(1 << 40)
    assert mx.set_cache_limit(old) == 1 << 40
    x = mx.ones((1 << 18,))
    mx.eval(x)
    assert mx.get_active_memory() >= 4 << 18
    mx.reset_peak_memory()
    assert mx.get_peak_memory() == 0
    del x
    mx.clear_cache()
    assert mx.get_cache_memory() == 0


GPU_OPS = [
    lambda a, kw: mx.add(a, a, **kw),
    lambda a, kw: mx.exp(a, **kw),
    lambda a, kw: mx.matmul(a, a, **kw),
    lambda a, kw: mx.sum(a, **kw),
    lambda a, kw: mx.reshape(a, (4,), **kw),
    lambda a, kw: mx.transpose(a, **kw),
    lambda a, kw: mx.sort(a, **kw),
    lambda a, kw: mx.conv1d(a.reshape(1, 4, 1), mx.ones((1, 1, 1)), **kw),
    lambda a, kw: mx.fft.fft(a, **kw),
    lambda a, kw: mx.linalg.inv(a, **kw),
    lambda a, kw: mx.random.uniform(shape=(2,), **kw),
    lambda a, kw: mx.fast.rms_norm(a, None, 1e-5, **kw),
]


@pytest.mark.skipif(not NO_GPU, reason="a GPU backend is built")
@pytest.mark.parametrize("op", range(len(GPU_OPS)))
@pytest.mark.parametrize("where", ["stream", "device"])
def test_gpu_ops_raise_clear_errors(op, where):
    a = mx.array([[1.0, 2.0], [3.0, 4.0]])
    kw = {"stream": mx.gpu} if where == "stream" else {
        "stream": mx.Device(mx.gpu)}
    with pytest.raises(ValueError, match=r"^\[default_stream\] Cannot get "
                       r"the gpu stream: Fluxion was built without a GPU "
                       r"backend\."):
        GPU_OPS[op](a, kw)
    # The CPU is unaffected.
    assert (a + a).tolist() == [[2.0, 4.0], [6.0, 8.0]]


@pytest.mark.skipif(not NO_GPU, reason="a GPU backend is built")
def test_gpu_contexts_raise_clear_errors():
    with pytest.raises(ValueError, match=r"^\[stream\] Cannot use the gpu"):
        with mx.stream(mx.gpu):
            pass
    with pytest.raises(ValueError, match=r"^\[new_stream\] Cannot use the "
                       r"gpu"):
        mx.new_stream(mx.gpu)
    mx.synchronize()  # skips the gpu, which never ran anything
    assert mx.add(1, 2).item() == 3
