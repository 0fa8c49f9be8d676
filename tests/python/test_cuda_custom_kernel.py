"""mx.fast.cuda_kernel and mx.fast.precompiled_cuda_kernel (MLX's API):
user CUDA source compiled by NVRTC on first use, cached in memory and under
$FLUXION_CACHE_DIR, launched with MLX's geometry (the grid in threads).
The host-side checks run everywhere; the kernels themselves need a GPU
(skipped without one). The generated source and its NVRTC compiles are
also tested without a GPU in tests/cpp/test_cuda_kernel_source.cpp.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fluxion.core as mx

HAS_GPU = mx.is_available(mx.gpu)
gpu_only = pytest.mark.skipif(
    not HAS_GPU,
    reason="no GPU is visible" if mx._gpu_backend_built()
    else "Fluxion was built without a GPU backend")

ELEM = "auto elem = cooperative_groups::this_grid().thread_rank();\n"


def copy_kernel(name="copy", source=ELEM + "out[elem] = a[elem];", **kw):
    return mx.fast.cuda_kernel(name=name, input_names=["a"],
                               output_names=["out"], source=source, **kw)


def run(kernel, a, **kw):
    args = dict(inputs=[a], grid=(a.size, 1, 1),
                threadgroup=(min(a.size, 256), 1, 1),
                output_shapes=[a.shape], output_dtypes=[a.dtype],
                stream=mx.gpu)
    args.update(kw)
    return kernel(**args)


def stats():
    return mx._gpu_fused_kernel_stats()


# ---- host side: no GPU needed ---------------------------------------------

def test_kernel_objects_are_made_anywhere():
    k = copy_kernel()
    assert callable(k)
    k2 = mx.fast.cuda_kernel("k", ["a"], ["out"], "out[0] = a[0];", "",
                             False, 1024, atomic_outputs=True)
    assert callable(k2)


@pytest.mark.parametrize("kw, message", [
    (dict(name="my-kernel"), "must be a C identifier"),
    (dict(output_names=[]), "at least one output"),
    (dict(input_names=["out"]), "'out' is used twice"),
    (dict(input_names=["2a"]), "'2a' is not a C identifier"),
    (dict(shared_memory=-1), "shared_memory must be >= 0"),
])
def test_bad_specs_raise(kw, message):
    args = dict(name="k", input_names=["a"], output_names=["out"],
                source="out[0] = a[0];")
    args.update(kw)
    with pytest.raises(ValueError, match=message):
        mx.fast.cuda_kernel(**args)


def test_bad_calls_name_the_kernel_and_the_argument():
    k = copy_kernel(name="mine")
    a = mx.zeros((4,))
    cases = [
        (dict(inputs=[a, a]), r"Kernel 'mine': Expected 1 inputs \(2 given\)"),
        (dict(output_shapes=[(4,), (4,)]), "Expected 1 output shapes"),
        (dict(grid=(4, 1)), "grid must have 3 entries"),
        (dict(threadgroup=(0, 1, 1)), "threadgroup entries must be >= 1"),
        (dict(threadgroup=(64, 32, 1)), "2048 threads"),
        (dict(grid=(-1, 1, 1)), "grid entries must be >= 0"),
        (dict(template=[("T", 1.5)]), "'T' must be a bool, an int or a Dtype"),
        (dict(template=[("N", 1 << 40)]), "does not fit a C\\+\\+ int"),
        (dict(template=[("a b", 1)]), "'a b' is not a C identifier"),
    ]
    for kw, message in cases:
        with pytest.raises(ValueError, match=message):
            run(k, a, **kw)


def test_cpu_stream_raises_as_mlx():
    with pytest.raises(ValueError, match=r"\[cuda_kernel\] Only supports "
                                         r"the GPU"):
        run(copy_kernel(), mx.zeros((4,)), stream=mx.cpu)
    with pytest.raises(ValueError, match="Only supports the GPU"):
        mx.fast.precompiled_cuda_kernel(
            name="k", compiled_source=b"x", inputs=[mx.zeros(4)],
            output_shapes=[(4,)], output_dtypes=[mx.float32], scalars=[],
            grid=(4, 1, 1), threadgroup=(4, 1, 1), stream=mx.cpu)


@pytest.mark.skipif(HAS_GPU, reason="checks the machine without a GPU")
def test_without_a_gpu_the_gpu_stream_raises():
    with pytest.raises(ValueError, match="no GPU|without a GPU"):
        run(copy_kernel(), mx.zeros((4,)))


def test_precompiled_scalars_are_checked():
    with pytest.raises(ValueError, match="Received str but must be one of "
                                         "bool, int or float"):
        mx.fast.precompiled_cuda_kernel(
            name="k", compiled_source=b"x", inputs=[], output_shapes=[(1,)],
            output_dtypes=[mx.float32], scalars=["x"], grid=(1, 1, 1),
            threadgroup=(1, 1, 1), stream=mx.gpu)


def test_metal_kernel_still_raises_no_metal():
    k = mx.fast.metal_kernel(name="m", input_names=["a"],
                             output_names=["out"], source="out[0] = a[0];")
    with pytest.raises(RuntimeError, match="No Metal back-end"):
        run(k, mx.zeros((4,)))


# ---- on the GPU -----------------------------------------------------------

@gpu_only
def test_basic_copy():
    a = mx.random.normal(shape=(2, 2))
    out = run(copy_kernel(), a, grid=(4, 1, 1), threadgroup=(2, 1, 1))
    assert mx.allclose(out[0], a)


@gpu_only
def test_documented_exp_example_with_verbose(capfd):
    kernel = mx.fast.cuda_kernel(
        name="myexp", input_names=["inp"], output_names=["out"],
        source=ELEM + "T tmp = inp[elem];\nout[elem] = exp(tmp);")
    a = mx.random.normal(shape=(16, 16)).astype(mx.float16)
    out = kernel(inputs=[a], template=[("T", mx.float16)],
                 grid=(a.size, 1, 1), threadgroup=(256, 1, 1),
                 output_shapes=[a.shape], output_dtypes=[a.dtype],
                 verbose=True, stream=mx.gpu)[0]
    assert mx.allclose(out, mx.exp(a))
    printed = capfd.readouterr().out
    assert "Generated source code for `custom_kernel_myexp_float16`" in printed
    assert "const __half* inp," in printed
    assert "__half* out) {" in printed
    assert "using T = __half;" in printed


@gpu_only
def test_template_arguments_and_mixed_dtypes():
    source = ELEM + """
        T tmp = a[0];
        if (e) {
            out1[elem] = a[1] + b[2] + static_cast<float>(c[3]) + d[0] + f;
        } else {
            out1[elem] = 1;
        }
        out2[elem] = a[1] + b[2] + static_cast<float>(c[1]) - d[0];
    """
    kernel = mx.fast.cuda_kernel(name="arg_test",
                                 input_names=["a", "b", "c", "d"],
                                 output_names=["out1", "out2"], source=source)
    mx.random.seed(7)
    a = mx.random.normal(shape=(3, 6))
    c = mx.random.normal(shape=(2, 2)).astype(mx.bfloat16)
    d = 7.3
    out = kernel(inputs=[a, mx.array([3, 4, 5]), c, d],
                 template=[("e", True), ("f", 3), ("T", mx.float16)],
                 grid=(6, 1, 1), threadgroup=(2, 1, 1),
                 output_shapes=[(3, 2), (3, 2)],
                 output_dtypes=[mx.float32, mx.int32], stream=mx.gpu)
    cf = c.astype(mx.float32)
    want1 = a[0, 1] + 5 + cf[1, 1] + np.float32(d) + 3
    want2 = (a[0, 1] + 5 + cf[0, 1] - np.float32(d)).astype(mx.int32)
    assert mx.allclose(out[0], mx.full((3, 2), want1))
    assert mx.array_equal(out[1], mx.full((3, 2), want2))


@gpu_only
@pytest.mark.parametrize("contiguous", [True, False])
def test_strided_inputs(contiguous):
    if contiguous:
        source = ELEM + "T tmp = inp[elem];\nout[elem] = exp(tmp) * WARP_SIZE;"
    else:
        source = ELEM + """
            auto loc = elem_to_loc(elem, inp_shape.data(), inp_strides.data(),
                                   inp_ndim);
            T tmp = inp[loc];
            out[elem] = exp(tmp) * WARP_SIZE;
        """
    a = mx.random.normal(shape=(3, 6))
    a = mx.tile(a[::2], [4, 1])  # not row-contiguous
    kernel = mx.fast.cuda_kernel(name="myexp" + str(contiguous),
                                 input_names=["inp"], output_names=["out"],
                                 source=source,
                                 ensure_row_contiguous=contiguous)
    # One block of a.size threads: on CUDA a grid that is not a multiple of
    # the block runs the last block whole, and this body has no bounds check.
    out = run(kernel, a, template=[("T", mx.float32)])[0]
    assert mx.allclose(mx.exp(a) * 32, out)
    # A transposed view read through its strides.
    t = mx.random.normal(shape=(5, 7)).T
    out = run(kernel, t, template=[("T", mx.float32)])[0]
    assert mx.allclose(mx.exp(t) * 32, out)


@gpu_only
def test_header_helper():
    kernel = mx.fast.cuda_kernel(
        name="helper", input_names=["a"], output_names=["out1"],
        header="template <typename T>\n__device__ T do_exp(T x) "
               "{ return exp(x); }\n",
        source=ELEM + "out1[elem] = do_exp(a[elem]);")
    a = mx.random.normal(shape=(2, 2))
    out = run(kernel, a, grid=(4, 1, 1), threadgroup=(2, 1, 1))[0]
    assert mx.allclose(out, mx.exp(a))


@gpu_only
def test_grid_is_in_threads():
    kernel = mx.fast.cuda_kernel(
        name="geometry", input_names=["a"], output_names=["out"],
        source="if (threadIdx.x == 0 && blockIdx.x == 0) {\n"
               "  out[0] = blockDim.x; out[1] = gridDim.x;\n}")
    a = mx.zeros((1,))
    out = run(kernel, a, grid=(10, 1, 1), threadgroup=(4, 1, 1),
              output_shapes=[(2,)], output_dtypes=[mx.uint32])[0]
    assert out.tolist() == [4, 3]  # ceil(10 / 4) blocks of 4


@gpu_only
def test_atomic_outputs_with_init_value():
    kernel = mx.fast.cuda_kernel(
        name="atomic_sum", input_names=["inp"], output_names=["out"],
        source=ELEM + "if (elem < inp_size) atomicAdd(&out[0], inp[elem]);",
        atomic_outputs=True)
    a = mx.arange(100, dtype=mx.float32)
    out = run(kernel, a, template=[("inp_size", a.size)],
              grid=(128, 1, 1), threadgroup=(32, 1, 1),
              output_shapes=[(1,)], init_value=10.0)[0]
    assert out.item() == 10 + 99 * 100 / 2
    # init_value fills what the kernel leaves alone, in the output's dtype.
    k2 = mx.fast.cuda_kernel(name="first_only", input_names=["a"],
                             output_names=["out"], source="out[0] = a[0];")
    out = run(k2, mx.array([7], dtype=mx.int32), grid=(1, 1, 1),
              threadgroup=(1, 1, 1), output_shapes=[(4,)],
              output_dtypes=[mx.int32], init_value=-2)[0]
    assert out.tolist() == [7, -2, -2, -2]


@gpu_only
def test_dynamic_shared_memory():
    kernel = mx.fast.cuda_kernel(
        name="reverse_block", input_names=["a"], output_names=["out"],
        source="extern __shared__ float buf[];\n"
               "int t = threadIdx.x, base = blockIdx.x * blockDim.x;\n"
               "buf[t] = a[base + t];\n__syncthreads();\n"
               "out[base + t] = buf[blockDim.x - 1 - t];",
        shared_memory=64 * 4)
    a = mx.arange(128, dtype=mx.float32)
    out = run(kernel, a, threadgroup=(64, 1, 1))[0]
    want = np.arange(128, dtype=np.float32).reshape(2, 64)[:, ::-1].ravel()
    assert np.array_equal(np.array(out), want)


@gpu_only
def test_syntax_error_raises_with_nvrtc_log():
    kernel = copy_kernel(name="broken", source="out[0] = a[0] +;")
    out = run(kernel, mx.zeros((4,)))[0]
    with pytest.raises(ValueError) as e:
        mx.eval(out)
    msg = str(e.value)
    assert "[cuda_kernel] Kernel 'broken'" in msg
    assert "custom_kernel_broken.cu(" in msg  # NVRTC's log: file(line)
    assert "expected an expression" in msg


@gpu_only
def test_no_gradients():
    k = copy_kernel()

    def f(a):
        return run(k, a)[0].sum()

    with pytest.raises(ValueError, match="has no vjp"):
        mx.grad(f)(mx.ones((4,)))


@gpu_only
def test_memory_cache_and_same_name_different_source():
    tag = os.urandom(8).hex()  # a source no earlier run has cached on disk
    a = mx.arange(32, dtype=mx.float32)

    def call(body):
        k = copy_kernel(name="dup_name",
                        source=f"// {tag}\n" + ELEM + body)
        return run(k, a)[0]

    def built(s0):
        s1 = stats()
        return (s1["compiles"] + s1["disk_hits"]) - (s0["compiles"] +
                                                    s0["disk_hits"])

    s0 = stats()
    out_a = call("out[elem] = a[elem] * 2.0f;")
    out_b = call("out[elem] = a[elem] + 100.0f;")
    mx.eval(out_a, out_b)  # one batch: each runs its own code
    assert mx.array_equal(out_a, a * 2.0)
    assert mx.array_equal(out_b, a + 100.0)
    assert built(s0) == 2
    s0 = stats()
    again = call("out[elem] = a[elem] * 2.0f;")
    assert mx.array_equal(again, a * 2.0)
    assert built(s0) == 0  # the module in memory


WORKER = textwrap.dedent("""
    import json
    import fluxion.core as mx
    k = mx.fast.cuda_kernel(name="disk", input_names=["a"],
                            output_names=["out"],
                            source="auto e = cooperative_groups::this_grid()"
                                   ".thread_rank(); out[e] = a[e] + 1;")
    a = mx.arange(8, dtype=mx.float32)
    out = k(inputs=[a], grid=(8, 1, 1), threadgroup=(8, 1, 1),
            output_shapes=[(8,)], output_dtypes=[mx.float32],
            stream=mx.gpu)[0]
    print(json.dumps({"out": out.tolist(),
                      "stats": mx._gpu_fused_kernel_stats()}))
""")


@gpu_only
def test_disk_cache_reused_by_a_second_process(tmp_path):
    env = dict(os.environ, FLUXION_CACHE_DIR=str(tmp_path / "cache"))

    def worker():
        r = subprocess.run([sys.executable, "-c", WORKER], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout.splitlines()[-1])

    first, second = worker(), worker()
    assert first["out"] == second["out"] == [float(i + 1) for i in range(8)]
    assert first["stats"]["compiles"] == 1, first
    assert first["stats"]["disk_writes"] == 1, first
    assert second["stats"]["compiles"] == 0, second
    assert second["stats"]["disk_hits"] == 1, second


@gpu_only
def test_export_import_round_trip(tmp_path):
    kernel = copy_kernel(name="basic")

    def call(a):
        return run(kernel, a, grid=(4, 1, 1), threadgroup=(2, 1, 1),
                   output_shapes=[(2, 2)], output_dtypes=[mx.float32])[0]

    a = mx.random.normal(shape=(2, 2))
    path = os.path.join(tmp_path, "fn.mlxfn")
    expected = call(a)
    mx.export_function(path, call, a)
    # An imported function runs on the default stream of its import.
    with mx.stream(mx.gpu):
        imported = mx.import_function(path)
        out = imported(a)[0]
    assert mx.allclose(expected, out)
    # Shapeless: the kernel's output shapes cannot be inferred.
    path = os.path.join(tmp_path, "shapeless.mlxfn")
    mx.export_function(path, call, a, shapeless=True)
    with pytest.raises(ValueError, match="cannot be replayed shapeless"):
        mx.import_function(path)(mx.zeros((3, 3)))


# add_scalar(const float* in, float* out, float s): out[i] = in[i] + s,
# i = blockIdx.x * blockDim.x + threadIdx.x (PTX ISA 7.0, sm_80; checked
# with ptxas for sm_90).
ADD_SCALAR_PTX = b"""
.version 7.0
.target sm_80
.address_size 64

.visible .entry add_scalar(
\t.param .u64 add_scalar_in,
\t.param .u64 add_scalar_out,
\t.param .f32 add_scalar_s
)
{
\t.reg .b32 %r<5>;
\t.reg .f32 %f<4>;
\t.reg .b64 %rd<8>;

\tld.param.u64 %rd1, [add_scalar_in];
\tld.param.u64 %rd2, [add_scalar_out];
\tld.param.f32 %f1, [add_scalar_s];
\tcvta.to.global.u64 %rd3, %rd1;
\tcvta.to.global.u64 %rd4, %rd2;
\tmov.u32 %r1, %ctaid.x;
\tmov.u32 %r2, %ntid.x;
\tmov.u32 %r3, %tid.x;
\tmad.lo.s32 %r4, %r1, %r2, %r3;
\tmul.wide.s32 %rd5, %r4, 4;
\tadd.s64 %rd6, %rd3, %rd5;
\tld.global.f32 %f2, [%rd6];
\tadd.f32 %f3, %f2, %f1;
\tadd.s64 %rd7, %rd4, %rd5;
\tst.global.f32 [%rd7], %f3;
\tret;
}
"""


@gpu_only
def test_precompiled_ptx_with_a_scalar():
    a = mx.arange(64, dtype=mx.float32)
    out = mx.fast.precompiled_cuda_kernel(
        name="add_scalar", compiled_source=ADD_SCALAR_PTX, inputs=[a],
        output_shapes=[a.shape], output_dtypes=[a.dtype], scalars=[2.5],
        grid=(64, 1, 1), threadgroup=(32, 1, 1), stream=mx.gpu)[0]
    assert mx.array_equal(out, a + 2.5)
    with pytest.raises(RuntimeError, match="cannot load the compiled "
                                           "source"):
        mx.eval(mx.fast.precompiled_cuda_kernel(
            name="no_such_kernel", compiled_source=ADD_SCALAR_PTX,
            inputs=[a], output_shapes=[a.shape], output_dtypes=[a.dtype],
            scalars=[2.5], grid=(64, 1, 1), threadgroup=(32, 1, 1),
            stream=mx.gpu)[0])
