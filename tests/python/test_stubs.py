"""The type stubs (python/fluxion/core.pyi) list exactly what is bound, with
the bound parameter names."""

import ast
import pathlib
import re

import fluxion.core as mx

STUB = pathlib.Path(__file__).resolve().parents[2] / "python" / "fluxion" \
    / "core.pyi"


def stub_tree():
    return ast.parse(STUB.read_text())


def stub_names(body):
    names = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.AnnAssign):
            names.setdefault(node.target.id, []).append(node)
    return names


def split_top_level(text):
    """Split at commas outside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "[("
        depth -= ch in "])"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return parts + [cur]


def bound_params(fn):
    """Parameter names of each overload, from pybind11's signatures."""
    out = []
    for line in (fn.__doc__ or "").splitlines():
        m = re.match(r"^(?:\d+\. )?\w+\((.*)\) ->", line.strip())
        if m:
            params = []
            for p in split_top_level(m.group(1)):
                p = p.strip()
                if p in ("", "/", "*"):
                    continue
                params.append(p.split(":")[0].lstrip("*"))
            out.append([p for p in params if p != "self"])
    return out


def stub_params(node):
    a = node.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    if a.vararg:
        names.insert(len(a.posonlyargs + a.args), a.vararg.arg)
    if a.kwarg:
        names.append(a.kwarg.arg)
    return [n for n in names if n != "self"]


def public(obj):
    return {n for n in dir(obj) if not n.startswith("_")}


# Submodules and the stub classes that describe them.
SUBMODULES = {"random": "_Random", "linalg": "_Linalg", "fast": "_Fast",
              "fft": "_FFT", "metal": "_Metal", "cuda": "_Cuda",
              "distributed": "_Distributed"}


def test_module_names_match():
    names = stub_names(stub_tree().body)
    module = public(mx) - set(SUBMODULES)
    assert module - set(names) == set(), "bound but not in the stub"
    extra = set(names) - module - {"Scalar", "ArrayLike", "StreamOrDevice",
                                   "__version__"} - set(SUBMODULES) \
        - set(SUBMODULES.values())
    assert extra == set(), "in the stub but not bound"


def check_functions(obj, nodes):
    for name in public(obj):
        fn = getattr(obj, name)
        if type(fn).__name__ != "builtin_function_or_method":
            continue
        bound = bound_params(fn)
        stubbed = [stub_params(n) for n in nodes[name]]
        if name in ("eval", "async_eval", "print_graph", "export_to_dot",
                    "atleast_1d", "atleast_2d", "atleast_3d",
                    "broadcast_arrays", "meshgrid", "einsum",
                    "einsum_path", "savez", "savez_compressed"):
            continue  # *args: named differently by pybind11
        assert bound == stubbed, name


def test_function_parameters_match():
    check_functions(mx, stub_names(stub_tree().body))
    for module, cls_name in SUBMODULES.items():
        cls = stub_names(stub_tree().body)[cls_name][0]
        check_functions(getattr(mx, module), stub_names(cls.body))


def test_array_methods_match():
    cls = stub_names(stub_tree().body)["array"][0]
    nodes = stub_names(cls.body)
    assert public(mx.array) - set(nodes) == set()
    for name in public(mx.array):
        attr = getattr(mx.array, name)
        if isinstance(attr, property):
            continue
        if name in ("reshape", "transpose"):
            continue  # *shape / *axes
        assert bound_params(attr) == [stub_params(n) for n in nodes[name]], \
            name
