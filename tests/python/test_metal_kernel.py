"""mx.fast.metal_kernel on a build without Metal, with MLX's semantics
there: the kernel object is made; calling it raises RuntimeError ("No Metal
back-end"), compiled or not; inside export_function the call is recorded
on the GPU (another device raises ValueError) and the file is written; the
imported function raises the same RuntimeError when evaluated. Nothing runs
the source."""

import os

import pytest

import fluxion.core as mx

SOURCE = """
    uint elem = thread_position_in_grid.x;
    out[elem] = a[elem];
"""


def kernel(**kw):
    return mx.fast.metal_kernel(name="copy", input_names=["a"],
                                output_names=["out"], source=SOURCE, **kw)


def call_on(k, stream):
    def call(a):
        return k(inputs=[a], grid=(a.size, 1, 1),
                 threadgroup=(min(a.size, 256), 1, 1),
                 output_shapes=[a.shape], output_dtypes=[a.dtype],
                 stream=stream)[0]
    return call


def test_metal_is_unavailable():
    assert not mx.metal.is_available()


def test_calls_raise_no_metal_backend():
    call = call_on(kernel(), mx.gpu)
    a = mx.zeros((2, 2))
    with pytest.raises(RuntimeError, match=r"\[metal_kernel\] No Metal "
                                           r"back-end\."):
        call(a)
    with pytest.raises(RuntimeError, match="No Metal back-end"):
        mx.eval(mx.compile(call)(a))


def test_export_records_the_kernel(tmp_path):
    k = kernel(compile_options={"math_mode": "safe"})
    a = mx.zeros((2, 3))
    for shapeless in (False, True):
        path = os.path.join(tmp_path, f"k_{shapeless}.mlxfn")
        mx.export_function(path, call_on(k, mx.gpu), a, shapeless=shapeless)
        assert os.path.getsize(path) > 0
    # The imported function holds the kernel; evaluating it needs Metal.
    f = mx.import_function(os.path.join(tmp_path, "k_False.mlxfn"))
    out = f(a)[0]
    assert out.shape == (2, 3) and out.dtype == mx.float32
    with pytest.raises(RuntimeError, match="No Metal back-end"):
        mx.eval(out)
    # A shapeless import cannot infer the kernel's output shapes.
    g = mx.import_function(os.path.join(tmp_path, "k_True.mlxfn"))
    with pytest.raises(ValueError, match="cannot be replayed shapeless"):
        g(mx.zeros((4, 5)))
    # The default stream (no stream given) is the GPU's.
    mx.export_function(os.path.join(tmp_path, "k_default.mlxfn"),
                       call_on(k, None), a)


def test_export_on_the_cpu_raises(tmp_path):
    with pytest.raises(ValueError, match=r"\[metal_kernel\] Only supports "
                                         r"the GPU"):
        mx.export_function(os.path.join(tmp_path, "cpu.mlxfn"),
                           call_on(kernel(), mx.cpu), mx.zeros(3))


def test_argument_checks():
    with pytest.raises(ValueError, match="math_mode must be 'safe' or "
                                         "'fast'; got 'precise'"):
        kernel(compile_options={"math_mode": "precise"})
    with pytest.raises(ValueError, match="Unknown compile option 'unknown'"):
        kernel(compile_options={"unknown": "value"})
    k = kernel()
    with pytest.raises(ValueError, match=r"Expected 1 inputs \(2 given\)"):
        k(inputs=[mx.zeros(1), mx.zeros(1)], grid=(1, 1, 1),
          threadgroup=(1, 1, 1), output_shapes=[(1,)],
          output_dtypes=[mx.float32])
    with pytest.raises(ValueError, match="grid must have 3 entries"):
        k(inputs=[mx.zeros(1)], grid=(1, 1), threadgroup=(1, 1, 1),
          output_shapes=[(1,)], output_dtypes=[mx.float32])
