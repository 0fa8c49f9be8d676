"""C++ exceptions crossing into Python, many times, from the main thread,
from Python threads and from the stream workers that run kernels.

A regression here used to be a segmentation fault rather than a failure:
when another extension had loaded the system libstdc++ before fluxion.core
(NumPy 2, torch, jax...), the module's own copies of libstdc++ template
data (the locale facet ids used to format numbers into error messages) no
longer matched the library's. The subprocess tests recreate that order
deterministically by loading libstdc++ through ctypes first."""

import os
import subprocess
import sys
import threading

import pytest

import fluxion.core as mx

X = mx.ones((2, 3))

# (call, exception type, text the message must contain)
RAISING = [
    (lambda: mx.reshape(X, (5,)), ValueError,
     "[reshape] Cannot reshape array of shape (2,3)"),
    (lambda: mx.sum(X, axis=7), ValueError, "[sum] Invalid axis 7"),
    (lambda: mx.matmul(X, X), ValueError, "[matmul]"),
    (lambda: mx.add(X, mx.ones((4,))), ValueError, "(2,3) and (4)"),
    # Raised by a kernel on a stream's worker thread, carried to eval.
    (lambda: mx.eval(mx.take(X, mx.array([123456789]), axis=0)), IndexError,
     "Index 123456789 is out of bounds"),
]


# Calls that succeed after pybind11 tried (and discarded, by catching a C++
# exception) another overload or conversion first.
RECOVERING = [
    lambda: mx.Device(mx.cpu, 1),
    lambda: mx.add(X, [1.0, 2.0, 3.0]),
]


def raise_all(rounds):
    for _ in range(rounds):
        for call, kind, text in RAISING:
            with pytest.raises(kind) as info:
                call()
            assert text in str(info.value)
        for call in RECOVERING:
            call()


def test_main_thread_many_times():
    raise_all(300)
    # The process still computes afterwards.
    assert mx.sum(X).item() == 6.0


def test_python_threads_many_times():
    errors = []

    def work():
        try:
            raise_all(100)
        except BaseException as e:  # reported below, not lost in the thread
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_kernel_errors_on_several_streams():
    streams = [mx.new_stream(mx.cpu) for _ in range(3)]
    for i in range(200):
        s = streams[i % 3]
        bad = mx.take(X, mx.array([10 + i]), axis=1, stream=s)
        with pytest.raises(IndexError, match=rf"Index {10 + i} is out"):
            mx.eval(bad)
        good = mx.add(X, float(i), stream=s)
        assert mx.sum(good).item() == pytest.approx(6 * (1 + i))


CHILD = r"""
import ctypes, sys
# Load the C++ runtime into the process before fluxion, as NumPy 2, torch
# or jax do when imported first.
ctypes.CDLL("libstdc++.so.6")
for name in sys.argv[1:]:
    try:
        __import__(name)
    except ImportError:
        pass
import fluxion.core as mx
for _ in range(200):
    mx.Device(mx.cpu, 1)
    for call in (lambda: mx.reshape(mx.ones((2, 3)), (5,)),
                 lambda: mx.eval(mx.take(mx.ones((2,)), mx.array([9])))):
        try:
            call()
        except (ValueError, IndexError) as e:
            assert str(e), "empty message"
        else:
            raise SystemExit("no exception")
print("ok", mx.sum(mx.ones((3,))).item())
"""


@pytest.mark.parametrize("first", [[], ["numpy"], ["numpy", "torch"]])
def test_cxx_runtime_loaded_before_fluxion(first):
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-c", CHILD, *first], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr[-2000:])
    assert r.stdout.strip() == "ok 3.0"


def test_module_exports_only_its_entry_point():
    # Exported copies of what the module links statically (Fluxion's own
    # symbols, and a static libstdc++ on toolchains that link it so) are
    # what the dynamic linker mixed with the shared libstdc++.
    import shutil
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) is not installed")
    r = subprocess.run(["nm", "-D", "--defined-only", mx.__file__],
                       capture_output=True, text=True, check=True)
    names = {line.split()[-1] for line in r.stdout.splitlines() if line}
    assert names == {"PyInit_core"}, sorted(names)[:20]
