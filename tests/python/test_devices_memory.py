"""Devices, streams, the stream context, memory API, eval/async_eval and
graph export."""

import io

import numpy as np
import pytest

import fluxion.core as mx


def test_devices():
    d = mx.default_device()
    assert d == mx.cpu
    assert d == mx.Device(mx.cpu)
    assert d == mx.Device(mx.DeviceType.cpu, 0)
    assert d != mx.Device(mx.cpu, 1)
    assert d.type == mx.DeviceType.cpu and d.index == 0
    assert repr(d) == "Device(cpu, 0)"
    assert mx.is_available(mx.cpu)
    assert mx.is_available(mx.Device(mx.cpu))
    assert not mx.is_available(mx.gpu)
    assert len({mx.Device(mx.cpu), mx.Device(mx.cpu)}) == 1
    with pytest.raises(ValueError, match=r"\[set_default_device\]"):
        mx.set_default_device(mx.gpu)
    mx.set_default_device(mx.cpu)
    assert mx.default_device() == mx.cpu


def test_streams():
    s0 = mx.default_stream(mx.cpu)
    assert s0.device == mx.cpu
    s = mx.new_stream(mx.cpu)
    assert s != s0 and s.device == mx.cpu
    assert repr(s) == f"Stream(Device(cpu, 0), {s.index})"
    x = mx.add(mx.array([1.0]), 2.0, stream=s)
    y = mx.multiply(x, 3.0, stream=s0)  # crosses streams
    assert y.item() == 9.0
    assert mx.sum(mx.ones((3,)), stream=mx.cpu).item() == 3.0
    mx.synchronize(s)
    mx.synchronize()
    # Without a GPU backend there is no gpu stream to get (MLX).
    with pytest.raises(ValueError, match=r"\[default_stream\]"):
        mx.default_stream(mx.gpu)


def test_stream_context():
    s0 = mx.default_stream(mx.default_device())
    s = mx.new_stream(mx.cpu)
    with mx.stream(s):
        assert mx.default_stream(mx.cpu) == s
        z = mx.arange(4) * 2
        assert z.tolist() == [0, 2, 4, 6]
        with mx.stream(mx.cpu):
            assert mx.default_device() == mx.cpu
    assert mx.default_stream(mx.cpu) == s0
    with pytest.raises(ValueError, match=r"\[stream\]"):
        mx.stream(None)


def test_memory_api():
    mx.clear_cache()
    assert mx.get_cache_memory() == 0
    base = mx.get_active_memory()
    x = mx.zeros((1 << 20,))
    mx.eval(x + 1)
    y = x + 1
    mx.eval(y)
    assert mx.get_active_memory() >= base + 4 * (1 << 20)
    assert mx.get_peak_memory() >= mx.get_active_memory()
    del y
    assert mx.get_cache_memory() > 0 or mx.get_active_memory() >= base
    mx.reset_peak_memory()
    assert mx.get_peak_memory() == 0  # MLX: restarts from zero
    mx.eval(mx.zeros((1 << 10,)))
    assert mx.get_peak_memory() >= 4 * (1 << 10)
    mx.clear_cache()
    assert mx.get_cache_memory() == 0
    old = mx.set_cache_limit(1 << 30)
    assert mx.set_cache_limit(old) == 1 << 30
    old = mx.set_memory_limit(1 << 40)
    assert mx.get_memory_limit() == 1 << 40
    assert mx.set_memory_limit(old) == 1 << 40


def test_eval_pytrees_and_async():
    a = mx.array([1.0]) + 1
    b = mx.array([2.0]) * 2
    tree = {"x": [a, (b, 3, "leaf")], "y": None}
    mx.eval(tree)
    mx.eval(a, [b], {"k": a})
    mx.eval()
    c = mx.exp(mx.zeros((4,)))
    mx.async_eval(c, {"c": c})
    assert c.tolist() == [1.0] * 4
    assert np.asarray(c).tolist() == [1.0] * 4


def test_export_to_dot_and_print_graph(tmp_path, capsys):
    # Above the small-op fast path's size: ops on small computed arrays run
    # at once and leave no graph to print (docs/architecture.md).
    x = mx.array(np.arange(5000, dtype=np.float32))
    y = mx.exp(x) + x
    path = tmp_path / "g.dot"
    mx.export_to_dot(str(path), y)
    text = path.read_text()
    assert text.startswith("digraph") and "Exp" in text and "Add" in text
    buf = io.StringIO()
    mx.export_to_dot(buf, {"out": y})
    assert buf.getvalue() == text
    mx.export_to_dot(path, y)  # os.PathLike
    mx.print_graph(y)
    out = capsys.readouterr().out
    assert "Exp" in out and "Add" in out and "in0" in out
