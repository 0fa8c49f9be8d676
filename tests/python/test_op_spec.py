"""The unary op spec (fluxion/ops/elementwise_spec.h) and what follows from
it: the bindings the preprocessor expands from it, and the stubs and
reference lines tools/gen_op_spec.py writes from it."""

import importlib.util
import pathlib

import fluxion.core as mx

ROOT = pathlib.Path(__file__).resolve().parents[2]


def gen():
    spec = importlib.util.spec_from_file_location(
        "gen_op_spec", ROOT / "tools" / "gen_op_spec.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_stubs_and_reference_page_follow_the_spec():
    g = gen()
    for path, text in g.generated().items():
        assert path.read_text() == text, (
            f"{path.relative_to(ROOT)} is out of date with "
            "fluxion/ops/elementwise_spec.h: run tools/gen_op_spec.py")


def test_every_spec_op_is_bound_with_its_docstring():
    names = gen().spec_ops()
    assert "erfc" in names and "exp" in names
    for name in names:
        fn = getattr(mx, name)
        doc = fn.__doc__ or ""
        assert "Args:" in doc and "Returns:" in doc, name
