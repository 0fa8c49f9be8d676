# Sphinx configuration of Fluxion's API reference (`make docs`).
#
# The reference is generated from the docstrings of the built package: the
# Makefile puts $(BUILD)/python first on sys.path (FLUXION_PYTHONPATH), so
# autodoc documents the extension that was just built, not an installed one.
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.abspath(os.path.join(here, "..", ".."))
build_python = os.environ.get(
    "FLUXION_PYTHONPATH", os.path.join(root, "build", "python")
)
sys.path.insert(0, build_python)

import fluxion  # noqa: E402
import fluxion.core  # noqa: E402,F401

project = "Fluxion"
author = "The Fluxion authors"
copyright = "Fluxion authors"
version = release = fluxion.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]
# docs/architecture.md is included through MyST where Debian's
# python3-myst-parser is installed, else shown as its Markdown source.
try:
    import myst_parser  # noqa: F401

    extensions.append("myst_parser")
    has_myst = True
except ImportError:
    has_myst = False
tags_has_myst = has_myst

master_doc = "index"
exclude_patterns = ["_build"]
templates_path = []
html_theme = "alabaster"
html_static_path = []
html_theme_options = {"nosidebar": False}
html_show_sourcelink = False

# Google-style docstrings (Args:, Returns:, Example:), as MLX writes them.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# pybind11 writes the signature as the docstring's first line.
autodoc_docstring_signature = True
autodoc_member_order = "bysource"
autodoc_default_options = {"undoc-members": False}
add_module_names = False
# Headings of the included architecture page start at "#"; links from it to
# files outside the reference (shared/design.md, sources) are plain text.
suppress_warnings = ["myst.xref_missing", "myst.header"]
myst_heading_anchors = 3


def setup(app):
    app.connect("autodoc-process-docstring", _pybind11_overloads)
    app.add_config_value("has_myst", has_myst, "env")
    if has_myst:
        app.tags.add("myst")


def _pybind11_overloads(app, what, name, obj, options, lines):
    """pybind11 lists each overload as "N. name(args) -> ret": literal text."""
    import re

    for i, line in enumerate(lines):
        m = re.match(r"^(\d+)\. (\w+\(.*)$", line)
        if m:
            lines[i] = f"{m.group(1)}. ``{m.group(2)}``"
