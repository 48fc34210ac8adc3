"""Sphinx configuration: Markdown pages through myst-parser, the API reference through autodoc
(its docstrings' numpydoc sections rendered by napoleon, which ships with Sphinx).

Build with ``sphinx-build -W -b html docs docs/_build/html`` (warnings are errors; the tests do
this too, tests/test_docs.py). autodoc imports idv from this checkout, so build the Cython
modules first (``pip install -e .`` or ``python3 setup.py build_ext --inplace``); they are
compiled with ``embedsignature`` so that their functions show their signatures.
"""
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

# the version, from its one place (idv/_version.py), without importing the package
_version = {}
with open(os.path.join(ROOT, "idv", "_version.py"), encoding="utf-8") as fh:
    exec(fh.read(), _version)

project = "idv"
author = "the idv authors"
copyright = "the idv authors"
version = release = _version["__version__"]

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# Markdown: anchors for headings (links such as reading.md#types), roles like {class}`idv.X`
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

# the API reference: members in source order, signatures without the defaults' noise
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "show-inheritance": True}
autoclass_content = "both"   # the class docstring, then __init__'s when it has one

# docstrings: numpydoc sections only (a "Note:" line of prose is not a Google section); a
# class's attributes as fields, not entries that would repeat its properties'
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_ivar = True

html_theme = "alabaster"
html_title = f"idv {release}"
html_static_path = []


def _internal_as_literal(app, what, name, obj, options, lines):
    """The Cython format layer's docstrings are plain text, not reStructuredText: show them
    as written (their signatures, embedded by Cython, are taken off first by autodoc)."""
    parts = name.split(".")
    if len(parts) > 1 and parts[0] == "idv" and parts[1].startswith("_") and lines:
        text = [ln.rstrip() for ln in lines]
        while text and not text[-1]:
            text.pop()
        lines[:] = ["::", ""] + ["    " + ln if ln else "" for ln in text] + [""]


def setup(app):
    app.connect("autodoc-process-docstring", _internal_as_literal)
