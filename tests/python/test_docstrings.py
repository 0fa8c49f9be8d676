"""Every public name of fluxion has a real docstring (issue 18, item 3).

Walks fluxion.core (its functions, its classes' methods and properties, and
its submodules random, linalg, fft, fast, distributed, metal, cuda) and the
pure-Python packages fluxion.nn, fluxion.optimizers and fluxion.utils, and
fails naming every public name whose docstring is missing or is only a
signature.

"Only a signature": pybind11 writes each overload's signature line
``name(arg: type, ...) -> ret`` at the top of ``__doc__`` (and, for an
overloaded function, ``name(*args, **kwargs)``, ``Overloaded function.`` and
numbered signature lines); the text a binding gives follows them. A
docstring counts when, with those lines removed, prose remains.

MLX's style is checked too: a function or method that takes arguments
(besides ``self`` and the keyword ``stream``) has an ``Args:`` section,
and a class whose constructor takes arguments documents them; every public
function and class of fluxion.core is listed on a page of the API
reference (docs/api).
"""

import inspect
import re
import types

import fluxion.core as mx
import fluxion.nn as nn
import fluxion.optimizers as optim
import fluxion.utils as utils

# Names exempt from the check, with the reason. Dunder methods are exempt
# everywhere (Python's protocol names: __add__, __len__, ...).
EXEMPT = {
    # pybind11's enum machinery, generated for every py::enum_.
    "name": "pybind11 enum property, generated",
    "value": "pybind11 enum property, generated",
}

SUBMODULES = ["random", "linalg", "fft", "fast", "distributed", "metal", "cuda"]


def _signature_line(line, name):
    line = line.strip()
    if not line:
        return True
    if line == "Overloaded function.":
        return True
    # "name(...) -> ..." or "1. name(...) -> ..." or "name(*args, **kwargs)".
    m = re.match(r"^(\d+\.\s+)?([A-Za-z_][\w.]*)\(.*\)(\s*->\s*.+)?$", line)
    return bool(m) and m.group(2).split(".")[-1] == name


def real_text(doc, name):
    """The docstring with pybind11's signature lines removed."""
    if not doc:
        return ""
    lines = [l for l in doc.splitlines() if not _signature_line(l, name)]
    return "\n".join(lines).strip()


def _public(name):
    return not name.startswith("_")


def _members(owner):
    """Public attributes defined on owner (a module or class)."""
    for name in sorted(dir(owner)):
        if not _public(name) or name in EXEMPT:
            continue
        try:
            value = inspect.getattr_static(owner, name)
        except AttributeError:
            continue
        yield name, value


def _module_of(value):
    return getattr(value, "__module__", None) or ""


def _walk_class(qual, cls, missing):
    if not real_text(cls.__doc__, cls.__name__):
        missing.append(qual)
    for name, value in _members(cls):
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property) or type(value).__name__ in (
            "instancemethod",
            "builtin_function_or_method",
        ) or inspect.isfunction(value) or inspect.isroutine(value) or isinstance(
            value, property
        ):
            pass
        else:
            # Enum members, class attributes: values, not callables.
            continue
        # Only what the class itself defines (not object's or a base's).
        if name not in cls.__dict__:
            continue
        doc = value.__doc__
        if isinstance(value, property) and value.fget is not None and not doc:
            doc = value.fget.__doc__
        if not real_text(doc, name):
            missing.append(f"{qual}.{name}")


def _walk_module(qual, mod, missing, prefix, seen):
    for name, value in _members(mod):
        if isinstance(value, types.ModuleType):
            continue
        if not (inspect.isclass(value) or callable(value)):
            continue
        # Only what this package defines (not re-exported math, typing, ...).
        if not _module_of(value).startswith(prefix):
            continue
        if id(value) in seen:
            continue
        seen.add(id(value))
        if inspect.isclass(value):
            _walk_class(f"{qual}.{name}", value, missing)
        elif not real_text(getattr(value, "__doc__", None), name):
            missing.append(f"{qual}.{name}")


def _undocumented_core():
    missing = []
    seen = set()
    _walk_module("fluxion.core", mx, missing, "fluxion", seen)
    for sub in SUBMODULES:
        mod = getattr(mx, sub)
        if not real_text(mod.__doc__, sub):
            missing.append(f"fluxion.core.{sub}")
        _walk_module(f"fluxion.core.{sub}", mod, missing, "fluxion", seen)
    return missing


def _python_modules(pkg):
    """pkg and its submodules that are already imported (fluxion.nn.*)."""
    import sys

    out = [pkg]
    for name, mod in sorted(sys.modules.items()):
        if name.startswith(pkg.__name__ + ".") and mod is not None:
            if not any(part.startswith("_") for part in name.split(".")):
                out.append(mod)
    return out


def _inherited_doc(cls, name):
    for base in cls.__mro__[1:]:
        attr = base.__dict__.get(name)
        if isinstance(attr, (staticmethod, classmethod)):
            attr = attr.__func__
        if attr is not None and getattr(attr, "__doc__", None):
            return attr.__doc__
    return None


def _undocumented_python(pkg):
    missing = []
    seen = set()
    for mod in _python_modules(pkg):
        if not real_text(mod.__doc__, mod.__name__):
            missing.append(mod.__name__)
        for name, value in _members(mod):
            if isinstance(value, types.ModuleType):
                continue
            if not (inspect.isclass(value) or inspect.isfunction(value)):
                continue
            if not _module_of(value).startswith(pkg.__name__):
                continue
            if id(value) in seen:
                continue
            seen.add(id(value))
            qual = f"{value.__module__}.{value.__qualname__}"
            if inspect.isclass(value):
                if not real_text(value.__doc__, name):
                    missing.append(qual)
                for mname, mval in sorted(vars(value).items()):
                    if not _public(mname):
                        continue
                    if isinstance(mval, (staticmethod, classmethod)):
                        mval = mval.__func__
                    if isinstance(mval, property):
                        doc = mval.__doc__ or (mval.fget and mval.fget.__doc__)
                    elif inspect.isfunction(mval):
                        doc = mval.__doc__
                    else:
                        continue
                    # An override of a documented base method has its
                    # doc (help() and the reference show the base's).
                    doc = doc or _inherited_doc(value, mname)
                    if not real_text(doc, mname):
                        missing.append(f"{qual}.{mname}")
            elif not real_text(value.__doc__, name):
                missing.append(qual)
    return missing


def test_signature_only_is_not_a_docstring():
    assert real_text("abs(a: array, /, *, stream: None = None) -> array\n", "abs") == ""
    assert (
        real_text(
            "sum(*args, **kwargs)\nOverloaded function.\n\n"
            "1. sum(a: array) -> array\n\n2. sum(a: array, axis: int) -> array\n",
            "sum",
        )
        == ""
    )
    assert real_text("abs(a: array) -> array\n\nAbsolute value.\n", "abs") == (
        "Absolute value."
    )
    assert real_text(None, "x") == ""


def test_core_names_have_docstrings():
    missing = _undocumented_core()
    assert not missing, (
        f"{len(missing)} public names of fluxion.core without a docstring: "
        + ", ".join(missing)
    )


def test_array_methods_have_docstrings():
    missing = []
    _walk_class("fluxion.core.array", mx.array, missing)
    assert not missing, ", ".join(missing)


def test_nn_names_have_docstrings():
    missing = _undocumented_python(nn)
    assert not missing, ", ".join(missing)


def test_optimizers_names_have_docstrings():
    missing = _undocumented_python(optim)
    assert not missing, ", ".join(missing)


def test_utils_names_have_docstrings():
    missing = _undocumented_python(utils)
    assert not missing, ", ".join(missing)


if __name__ == "__main__":
    for part in (
        _undocumented_core(),
        _undocumented_python(nn),
        _undocumented_python(optim),
        _undocumented_python(utils),
    ):
        print(len(part))
        print("\n".join(part))


def _reference_pages():
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    api = os.path.join(here, "..", "..", "docs", "api")
    text = ""
    for name in sorted(os.listdir(api)):
        if name.endswith(".rst"):
            with open(os.path.join(api, name)) as f:
                text += f.read()
    return text


def test_every_core_name_is_on_a_reference_page():
    """The API reference (docs/api) lists each public function and class of
    fluxion.core (submodules are documented whole with automodule)."""
    text = _reference_pages()
    missing = []
    for name in sorted(dir(mx)):
        if not _public(name):
            continue
        value = getattr(mx, name)
        if isinstance(value, types.ModuleType):
            if f"automodule:: fluxion.core.{name}" not in text:
                missing.append(name)
            continue
        if not (inspect.isclass(value) or inspect.isroutine(value)):
            continue  # dtypes, constants: listed in prose on arrays.rst
        if not re.search(
            r"(autofunction|autoclass):: fluxion\.core\." + re.escape(name) + r"\s",
            text,
        ):
            missing.append(name)
    assert not missing, "not on a docs/api page: " + ", ".join(missing)


# --- MLX's style: a callable that takes arguments documents them ---------


def _core_params(fn, name):
    """Argument names of fn's overloads, from pybind11's signature lines
    (without self, the keyword ``stream``, and ``*args``/``**kwargs``)."""
    out = set()
    for line in (fn.__doc__ or "").splitlines():
        m = re.match(r"^(?:\d+\. )?" + re.escape(name) + r"\((.*)\)( ->.*)?$",
                     line.strip())
        if m:
            for p in m.group(1).split(","):
                p = p.strip().split(":")[0].split("=")[0].strip().lstrip("*")
                if p and p not in ("self", "/", "*", "stream", "args", "kwargs"):
                    out.add(p)
    return out


def _core_callables():
    mods = [("fluxion.core", mx)] + [
        (f"fluxion.core.{s}", getattr(mx, s)) for s in SUBMODULES
    ]
    for qual, mod in mods:
        for name in sorted(dir(mod)):
            if not _public(name):
                continue
            value = getattr(mod, name)
            if isinstance(value, types.ModuleType) or not callable(value):
                continue
            if inspect.isclass(value):
                for m, attr in sorted(vars(value).items()):
                    if _public(m) and m not in EXEMPT and callable(attr):
                        yield f"{qual}.{name}.{m}", m, getattr(value, m)
            else:
                yield f"{qual}.{name}", name, value


def test_core_callables_document_their_arguments():
    missing = [
        qual
        for qual, name, fn in _core_callables()
        if _core_params(fn, name) and "Args:" not in (fn.__doc__ or "")
    ]
    assert not missing, "no Args: section: " + ", ".join(missing)


def _python_params(fn):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [p for p in sig.parameters if p not in ("self", "cls")]


def test_python_callables_document_their_arguments():
    missing = []
    for pkg in (nn, optim, utils):
        seen = set()
        for mod in _python_modules(pkg):
            for name, value in sorted(vars(mod).items()):
                if not _public(name) or id(value) in seen:
                    continue
                if not (inspect.isclass(value) or inspect.isfunction(value)):
                    continue
                if not _module_of(value).startswith(pkg.__name__):
                    continue
                seen.add(id(value))
                qual = f"{value.__module__}.{value.__qualname__}"
                # A class documents its constructor's arguments.
                if _python_params(value) and "Args:" not in (
                    inspect.getdoc(value) or ""
                ):
                    missing.append(qual)
                if not inspect.isclass(value):
                    continue
                for m, f in sorted(vars(value).items()):
                    if not _public(m):
                        continue
                    if isinstance(f, (staticmethod, classmethod)):
                        f = f.__func__
                    if not inspect.isfunction(f):
                        continue
                    doc = f.__doc__ or _inherited_doc(value, m) or ""
                    if _python_params(f) and "Args:" not in doc:
                        missing.append(f"{qual}.{m}")
    assert not missing, "no Args: section: " + ", ".join(missing)
