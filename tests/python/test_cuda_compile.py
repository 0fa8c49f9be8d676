"""mx.compile on the GPU: fused groups run as kernels that NVRTC builds at
run time (backend/cuda/compiled.cpp), cached on disk under
$FLUXION_CACHE_DIR and reused by the next process, with eager's results;
when NVRTC fails the fused nodes run one by one, the reason said once.
Counters: mx._gpu_fused_kernel_stats(). Skipped without a GPU.
"""
import io
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fluxion.core as mx

pytestmark = pytest.mark.skipif(
    not mx.is_available(mx.gpu),
    reason="no GPU is visible" if mx._gpu_backend_built()
    else "Fluxion was built without a GPU backend")

G = mx.gpu


def stats():
    return mx._gpu_fused_kernel_stats()


def moved(before):
    after = stats()
    return {k: after[k] - before[k] for k in after}


def gelu(x):
    return 0.5 * x * (1 + mx.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def host(x):
    if x.dtype == mx.bfloat16:
        x = x.astype(mx.float32)
    return np.array(x)


def same(a, b):
    np.testing.assert_array_equal(host(a), host(b))


@pytest.mark.parametrize("dt", [mx.float32, mx.float16, mx.bfloat16])
def test_gelu_is_one_kernel_with_eager_bits(dt):
    x = mx.array(np.random.default_rng(0).normal(size=(3, 1000)) * 3).astype(dt)
    with mx.stream(G):
        before = stats()
        y = mx.compile(gelu)(x)
        mx.eval(y)
        d = moved(before)
        same(y, gelu(x))
    assert d["launches"] == 1 and d["fallbacks"] == 0, d


def test_export_to_dot_names_on_the_gpu():
    # The fused node carries MLX's name (Compiled, then the fused
    # primitives in tape order), the same on both devices: here both
    # broadcasts (of y and of the constant 1) are fused in.
    f = mx.compile(lambda x, y: x * y + 1)

    def fused_labels(device):
        buf = io.StringIO()
        with mx.stream(device):
            out = f(mx.ones((3, 4)), mx.ones((4,)))
            mx.export_to_dot(buf, out)
            same(out, mx.full((3, 4), 2.0))
        return [line.split('"')[1] for line in buf.getvalue().splitlines()
                if 'label="Compiled' in line]

    assert fused_labels(G) == ["CompiledBroadcastMultiplyBroadcastAdd"]
    assert fused_labels(mx.cpu) == fused_labels(G)


def test_shapeless_one_kernel_for_every_shape():
    # No constants: under a shapeless trace a scalar's broadcast stays
    # outside the group, a stride-0 input for the strided entry point.
    f = mx.compile(lambda x: mx.sigmoid(x) * x - x, shapeless=True)
    with mx.stream(G):
        for i, shape in enumerate([(5,), (1000,), (7, 9), (1,), (0, 3)]):
            x = mx.array(np.linspace(-3, 3, int(np.prod(shape)),
                                     dtype=np.float32).reshape(shape))
            before = stats()
            y = f(x)
            mx.eval(y)
            d = moved(before)
            same(y, mx.sigmoid(x) * x - x)
            assert d["fallbacks"] == 0, d
            if i > 0:
                assert d["compiles"] == 0 and d["loads"] == 0, d


def test_nan_inf_and_non_contiguous_inputs():
    v = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30, 3.5, -2],
                 dtype=np.float32)
    x = mx.array(np.add.outer(v, v[::-1]))
    f = mx.compile(lambda a, b: mx.maximum(mx.exp(a), b) + mx.log(mx.abs(b)))
    with mx.stream(G):
        for a, b in [(x, x), (x.T, x), (x[::2, 1:5], x[1::2, :4]),
                     (x, x[0]), (x[:, :1], x[0])]:
            same(f(a, b), mx.maximum(mx.exp(a), b) + mx.log(mx.abs(b)))


# A worker process: runs a compiled function on the GPU, prints its
# counters and results (the disk cache is per process only through disk).
WORKER = textwrap.dedent("""
    import json, sys
    import numpy as np
    import fluxion.core as mx
    x = mx.array(np.linspace(-4, 4, 4099, dtype=np.float32))
    with mx.stream(mx.gpu):
        y = mx.compile(lambda x: 0.5 * x * (1 + mx.tanh(
            0.7978845608 * (x + 0.044715 * x * x * x))))(x)
        z = mx.compile(lambda a: mx.exp(a) * 2 - a)(x.astype(mx.float16))
        mx.eval(y, z)
    print(json.dumps({"stats": mx._gpu_fused_kernel_stats(),
                      "y": np.array(y).tolist(),
                      "z": np.array(z.astype(mx.float32)).tolist()}))
""")


def run_worker(tmp_path, **env):
    e = dict(os.environ, FLUXION_CACHE_DIR=str(tmp_path / "cache"), **env)
    r = subprocess.run([sys.executable, "-c", WORKER], env=e,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1]), r.stderr


def test_disk_cache_reused_by_a_second_process(tmp_path):
    first, _ = run_worker(tmp_path)
    assert first["stats"]["compiles"] == 2, first["stats"]
    assert first["stats"]["disk_writes"] == 2, first["stats"]
    files = list((tmp_path / "cache" / "cuda-v1").glob("*.bin"))
    assert len(files) == 2, files
    second, _ = run_worker(tmp_path)
    assert second["stats"]["compiles"] == 0, second["stats"]
    assert second["stats"]["disk_hits"] == 2, second["stats"]
    assert second["stats"]["launches"] == 2, second["stats"]
    assert second["y"] == first["y"] and second["z"] == first["z"]
    # Corrupt entries (truncated, garbage, a wrong key) are ignored and
    # rebuilt, with the same results.
    files[0].write_bytes(files[0].read_bytes()[:100])
    files[1].write_bytes(b"FXNVRTC1" + os.urandom(64))
    third, _ = run_worker(tmp_path)
    assert third["stats"]["compiles"] == 2, third["stats"]
    assert third["stats"]["fallbacks"] == 0, third["stats"]
    assert third["y"] == first["y"] and third["z"] == first["z"]
    fourth, _ = run_worker(tmp_path)
    assert fourth["stats"]["compiles"] == 0, fourth["stats"]


@pytest.mark.parametrize("env", [{"FLUXION_NVRTC": "/nonexistent/libnvrtc.so"},
                                 {"FLUXION_NVRTC_OPTIONS": "--no-such-option"}])
def test_nvrtc_failure_falls_back_to_eager_results(tmp_path, env):
    good, _ = run_worker(tmp_path / "good")
    bad, err = run_worker(tmp_path, **env)
    s = bad["stats"]
    assert s["launches"] == 0 and s["fallbacks"] == 2, s
    assert bad["y"] == good["y"] and bad["z"] == good["z"]
    # The reason, once.
    assert err.count("[fluxion] compile: no GPU kernel") == 1, err
    assert ("cannot load NVRTC" in err if "FLUXION_NVRTC" in env
            else "nvrtcCompileProgram" in err), err
