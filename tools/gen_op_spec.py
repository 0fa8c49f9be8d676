#!/usr/bin/env python3
"""What the unary op spec (fluxion/ops/elementwise_spec.h) implies outside
C++: each op's stub in python/fluxion/core.pyi and its line in
docs/api/ops.rst, kept between BEGIN and END marker lines of those files.

    tools/gen_op_spec.py          rewrite both blocks from the spec
    tools/gen_op_spec.py --check  exit 1, with a diff, if either differs

tests/python/test_op_spec.py runs the check, so the stubs and the reference
page cannot drift from the spec. The C++ side (declarations, classes,
registry, kernels, bindings and their docstrings) is expanded from the
same list by the preprocessor. Entries whose POLICY is `custom` are
declared, bound and documented by hand, so they are left out here.
"""

import difflib
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
SPEC = ROOT / "fluxion" / "ops" / "elementwise_spec.h"
STUBS = ROOT / "python" / "fluxion" / "core.pyi"
PAGE = ROOT / "docs" / "api" / "ops.rst"

BEGIN = "BEGIN unary op spec"
END = "END unary op spec"
NOTE = ("(tools/gen_op_spec.py writes this block from "
        "fluxion/ops/elementwise_spec.h)")


def spec_ops():
    """The names of the spec's ops that have a generated binding."""
    text = SPEC.read_text()
    start = text.index("#define FLUXION_UNARY_SPEC(U, A)")
    lines = []
    for line in text[start:].splitlines():
        lines.append(line)
        if not line.rstrip().endswith("\\"):
            break
    body = "\n".join(lines)
    names = []
    for m in re.finditer(r"\bU\(A,\s*(\w+),\s*(\w+),\s*(\w+),", body):
        _cls, name, policy = m.groups()
        if policy != "custom":
            names.append(name)
    if not names:
        sys.exit(f"{SPEC}: no entries found")
    return sorted(names)


def stub_line(name):
    return (f"def {name}(a: ArrayLike, /, *, stream: StreamOrDevice = None)"
            " -> array: ...")


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


def generated():
    names = spec_ops()
    stubs = [stub_line(n) for n in names]
    begin, end = f"# {BEGIN} {NOTE}", f"# {END}"
    pyi = with_block(STUBS.read_text(), begin, end, [begin] + stubs + [end],
                     set(stubs))
    entries = [page_line(n) for n in names]
    begin, end = f".. {BEGIN} {NOTE}", f".. {END}"
    rst = with_block(PAGE.read_text(), begin, end,
                     [begin, ""] + entries + ["", end], set(entries))
    # A blank line after the block, whatever follows it.
    rst = re.sub(re.escape(end) + r"\n(?=\S)", end + "\n\n", rst)
    return {STUBS: pyi, PAGE: rst}


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
        print("\nout of date with fluxion/ops/elementwise_spec.h: run "
              "tools/gen_op_spec.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
