#!/usr/bin/env python3
"""What the op specs (fluxion/ops/elementwise_spec.h) and the primitive
registry (fluxion/primitive_list.h) imply outside C++, kept between BEGIN
and END marker lines of the files they go in:

  - each unary and binary op's stub in python/fluxion/core.pyi and its line
    in docs/api/ops.rst;
  - the kernel-coverage table of docs/architecture.md (which primitives
    each backend has a kernel for, by family), from the registry's CPU and
    GPU columns.

    tools/gen_op_spec.py          rewrite every block from the sources
    tools/gen_op_spec.py --check  exit 1, with a diff, if any block differs

tests/python/test_op_spec.py runs the check, so the stubs, the reference
page and the coverage table cannot drift from the spec and the registry
(and compares the registry read here with the one fluxion.core was built
with). The C++ side (declarations, classes, registry, kernels, bindings
and their docstrings) is expanded from the same lists by the preprocessor.
Unary entries whose POLICY is `custom` are declared, bound and documented
by hand, so they are left out here; every binary entry has the same
signature and is bound from the spec.
"""

import difflib
import pathlib
import re
import sys
from collections import OrderedDict

ROOT = pathlib.Path(__file__).resolve().parents[1]
SPEC = ROOT / "fluxion" / "ops" / "elementwise_spec.h"
REGISTRY = ROOT / "fluxion" / "primitive_list.h"
STUBS = ROOT / "python" / "fluxion" / "core.pyi"
PAGE = ROOT / "docs" / "api" / "ops.rst"
ARCH = ROOT / "docs" / "architecture.md"

NOTE = ("(tools/gen_op_spec.py writes this block from "
        "fluxion/ops/elementwise_spec.h)")
COVERAGE_NOTE = ("(tools/gen_op_spec.py writes this table from "
                 "fluxion/primitive_list.h)")

# The fields of an entry of each spec, after the passed-through A.
UNARY_FIELDS = ("cls", "name", "policy", "kernel", "types", "rules", "cpu",
                "gpu", "summary", "result")
BINARY_FIELDS = ("cls", "name", "policy", "form", "types", "rules", "cpu",
                 "gpu", "cu", "summary", "result")


def macro_body(text, head, path):
    """The text of the #define starting with `head`, continuation lines
    joined."""
    try:
        start = text.index(head)
    except ValueError:
        sys.exit(f"{path}: no {head!r}")
    lines = []
    for line in text[start:].splitlines():
        lines.append(line.rstrip().rstrip("\\"))
        if not line.rstrip().endswith("\\"):
            break
    return "\n".join(lines)[len(head):]


def calls(body, callee):
    """The argument lists of each call `callee(...)` in `body`, split at
    top-level commas; adjacent string literals are joined into one string
    (without quotes), other arguments are stripped tokens."""
    out = []
    for m in re.finditer(r"\b" + re.escape(callee) + r"\(", body):
        i = m.end()
        depth, args, cur, strs = 0, [], "", []
        while True:
            c = body[i]
            if c == '"':
                j = i + 1
                while body[j] != '"':
                    j += 2 if body[j] == "\\" else 1
                strs.append(body[i + 1:j])
                i = j + 1
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                if depth == 0 and c == ")":
                    args.append("".join(strs) if strs else cur.strip())
                    break
                depth -= 1
            if c == "," and depth == 0:
                args.append("".join(strs) if strs else cur.strip())
                cur, strs = "", []
            else:
                cur += c
            i += 1
        out.append(args)
    return out


def spec_entries(kind):
    """The entries of FLUXION_UNARY_SPEC ("unary") or FLUXION_BINARY_SPEC
    ("binary"), as dicts of their fields, in the spec's order."""
    text = SPEC.read_text()
    if kind == "unary":
        head, callee, fields = ("#define FLUXION_UNARY_SPEC(U, A)", "U",
                                UNARY_FIELDS)
    else:
        head, callee, fields = ("#define FLUXION_BINARY_SPEC(B, A)", "B",
                                BINARY_FIELDS)
    entries = []
    for args in calls(macro_body(text, head, SPEC), callee):
        if len(args) != len(fields) + 1:
            sys.exit(f"{SPEC}: {kind} entry {args[:3]} has {len(args)} "
                     f"fields, expected {len(fields) + 1}")
        entries.append(dict(zip(fields, args[1:])))
    if not entries:
        sys.exit(f"{SPEC}: no {kind} entries found")
    return entries


def spec_ops():
    """The names of the unary spec's ops that have a generated binding."""
    return sorted(e["name"] for e in spec_entries("unary")
                  if e["policy"] != "custom")


def binary_spec_ops():
    """The names of the binary spec's ops (all bound from the spec)."""
    return sorted(e["name"] for e in spec_entries("binary"))


def registry():
    """The primitive registry as primitive_list.h lists it, the specs'
    entries expanded in place: dicts of name, class, family, cpu, gpu."""
    body = macro_body(REGISTRY.read_text(), "#define FLUXION_PRIMITIVES(X)",
                      REGISTRY)
    out = []
    pattern = (r"FLUXION_(UNARY|BINARY)_SPEC\(\w+, X\)"
               r"|\bX\(([\w:]+),\s*(\w+),\s*([01]),\s*([01])\)")
    for m in re.finditer(pattern, body):
        if m.group(1):
            kind = m.group(1).lower()
            for e in spec_entries(kind):
                out.append((e["cls"], kind, e["cpu"], e["gpu"]))
        else:
            out.append(m.group(2, 3, 4, 5))
    return [{"name": cls.split("::")[-1], "class": cls, "family": family,
             "cpu": cpu == "1", "gpu": gpu == "1"}
            for cls, family, cpu, gpu in out]


def unary_stub(name):
    return (f"def {name}(a: ArrayLike, /, *, stream: StreamOrDevice = None)"
            " -> array: ...")


def binary_stub(name):
    return (f"def {name}(a: ArrayLike, b: ArrayLike, /, *, "
            "stream: StreamOrDevice = None) -> array: ...")


def page_line(name):
    return f".. autofunction:: fluxion.core.{name}"


def with_block(text, begin, end, block, loose):
    """`text` with its block between the lines `begin` and `end` replaced by
    `block`; where there is none yet, the lines of `loose` found in the text
    are taken out and the block goes where the first of them was."""
    lines = text.splitlines()
    if begin in lines:
        i = lines.index(begin)
        j = lines.index(end, i)
        return "\n".join(lines[:i] + block + lines[j + 1:]) + "\n"
    at = None
    kept = []
    for line in lines:
        if line in loose:
            if at is None:
                at = len(kept)
            continue
        kept.append(line)
    if at is None:
        sys.exit(f"no place for the block {begin!r}")
    return "\n".join(kept[:at] + block + kept[at:]) + "\n"


def coverage_cell(names, have):
    """One backend's column for a family: all, none, or the exceptions."""
    missing = [n for n, h in zip(names, have) if not h]
    if not missing:
        return "all"
    if len(missing) == len(names):
        return "none"
    return "all but " + ", ".join(f"`{n}`" for n in missing)


def coverage_table():
    """The kernel-coverage table: one row per family, in registry order."""
    families = OrderedDict()
    for p in registry():
        families.setdefault(p["family"], []).append(p)
    total = sum(len(ps) for ps in families.values())
    cpu = sum(p["cpu"] for ps in families.values() for p in ps)
    gpu = sum(p["gpu"] for ps in families.values() for p in ps)
    rows = [f"{total} primitives; a CPU kernel for {cpu}, a GPU kernel for "
            f"{gpu}.",
            "",
            "| Family | Primitives | CPU kernel | GPU kernel |",
            "|---|---|---|---|"]
    for family, ps in families.items():
        names = [p["name"] for p in ps]
        rows.append(
            f"| {family} | {', '.join(names)} | "
            f"{coverage_cell(names, [p['cpu'] for p in ps])} | "
            f"{coverage_cell(names, [p['gpu'] for p in ps])} |")
    return rows


def generated():
    pyi = STUBS.read_text()
    rst = PAGE.read_text()
    for kind, names, stub in (("unary", spec_ops(), unary_stub),
                              ("binary", binary_spec_ops(), binary_stub)):
        stubs = [stub(n) for n in names]
        begin = f"# BEGIN {kind} op spec {NOTE}"
        end = f"# END {kind} op spec"
        pyi = with_block(pyi, begin, end, [begin] + stubs + [end], set(stubs))
        entries = [page_line(n) for n in names]
        begin = f".. BEGIN {kind} op spec {NOTE}"
        end = f".. END {kind} op spec"
        rst = with_block(rst, begin, end, [begin, ""] + entries + ["", end],
                         set(entries))
        # A blank line after the block, whatever follows it.
        rst = re.sub(re.escape(end) + r"\n(?=\S)", end + "\n\n", rst)
    begin = f"<!-- BEGIN kernel coverage {COVERAGE_NOTE} -->"
    end = "<!-- END kernel coverage -->"
    arch = ARCH.read_text()
    if begin not in arch.splitlines():
        sys.exit(f"{ARCH}: no line {begin!r}")
    arch = with_block(arch, begin, end,
                      [begin, ""] + coverage_table() + ["", end], set())
    return {STUBS: pyi, PAGE: rst, ARCH: arch}


def main(argv):
    check = "--check" in argv
    stale = []
    for path, text in generated().items():
        old = path.read_text()
        if old == text:
            continue
        if check:
            stale.append(path)
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), text.splitlines(True),
                str(path.relative_to(ROOT)), "generated"))
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print("\nout of date with fluxion/ops/elementwise_spec.h or "
              "fluxion/primitive_list.h: run tools/gen_op_spec.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
