"""The op specs (fluxion/ops/elementwise_spec.h) and the primitive registry
(fluxion/primitive_list.h), and what follows from them: the bindings the
preprocessor expands from the specs, and the stubs, reference lines and
kernel-coverage table tools/gen_op_spec.py writes from them."""

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


def test_generated_blocks_follow_the_spec_and_the_registry():
    g = gen()
    for path, text in g.generated().items():
        assert path.read_text() == text, (
            f"{path.relative_to(ROOT)} is out of date with "
            "fluxion/ops/elementwise_spec.h or fluxion/primitive_list.h: "
            "run tools/gen_op_spec.py")


def test_every_spec_op_is_bound_with_its_docstring():
    g = gen()
    names = g.spec_ops() + g.binary_spec_ops()
    assert "erfc" in names and "exp" in names
    assert "add" in names and "right_shift" in names
    for name in names:
        fn = getattr(mx, name)
        doc = fn.__doc__ or ""
        assert "Args:" in doc and "Returns:" in doc, name


def test_binary_docstrings_are_the_specs():
    for e in gen().spec_entries("binary"):
        doc = getattr(mx, e["name"]).__doc__
        # pybind11 puts the signature first, then the summary line.
        assert "\n" + e["summary"] + "\n" in doc, e["name"]
        assert e["result"] in doc, e["name"]


def test_registry_read_from_the_source_is_the_built_one():
    # The coverage table is written from primitive_list.h as the generator
    # reads it; that reading must be the registry fluxion.core was built
    # with (names, classes, families and both kernel columns, in order).
    built = [{k: p[k] for k in ("name", "class", "family", "cpu", "gpu")}
             for p in mx._primitive_registry()]
    assert gen().registry() == built


def test_coverage_table_marks_a_missing_kernel():
    g = gen()
    names = ["A", "B", "C"]
    assert g.coverage_cell(names, [True, True, True]) == "all"
    assert g.coverage_cell(names, [False, False, False]) == "none"
    assert g.coverage_cell(names, [True, False, True]) == "all but `B`"
    rows = g.coverage_table()
    assert any(r.startswith("| io | Load |") and r.endswith("| none |")
               for r in rows)
