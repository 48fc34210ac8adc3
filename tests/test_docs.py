"""The documentation builds without a warning, and documents every public name.

The build is Sphinx with warnings as errors (``sphinx-build -W``), as CI's ``pytest`` runs it;
it is skipped, with the reason, when Sphinx or myst-parser is not installed (the ``docs``
extra, which the ``test`` extra includes).
"""
from __future__ import annotations

import html
import importlib.util
import inspect
import re
import subprocess
import sys

import numpy as np
import pytest

from reference import REPO_DIR

DOCS = REPO_DIR / "docs"

if str(REPO_DIR) not in sys.path:
    sys.path.insert(0, str(REPO_DIR))


@pytest.fixture(scope="module")
def built_docs(tmp_path_factory):
    reason = _missing_sphinx()
    if reason:
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("html")
    p = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q",
                        "-b", "html", "-d", str(out / ".doctrees"), str(DOCS), str(out)],
                       capture_output=True, text=True, cwd=REPO_DIR, timeout=600)
    assert p.returncode == 0, f"sphinx-build -W failed:\n{p.stdout}\n{p.stderr}"
    return out


def test_docs_build_without_warnings(built_docs):
    pages = {p.stem for p in DOCS.glob("*.md")} | {p.stem for p in DOCS.glob("*.rst")}
    for page in pages:
        assert (built_docs / f"{page}.html").exists(), page
    index = _text(built_docs / "index.html")
    for title in ("Getting started", "Reading", "Writing", "Block-level seeking", "Metadata",
                  "Streaming writes", "The command line", "Errors", "Performance",
                  "API reference"):
        assert title in index, title


def test_api_reference_covers_the_public_names(built_docs):
    import idv
    api = _text(built_docs / "api.html")
    types = {name for name in idv.__all__ if isinstance(getattr(idv, name), idv.PrimitiveType)}
    for name in idv.__all__:
        if name == "__version__":
            continue
        if name in types:       # the item type singletons are listed by name
            assert f"idv.{name}" in api, name
            continue
        assert re.search(rf"\bidv\.{re.escape(name)}\b", api), name
    for cls, members in ((idv.IdvFile, ["read", "schema", "close", "num_rows"]),
                         (idv.Column, ["read", "iter_blocks", "lookup", "metadata"]),
                         (idv.Writer, ["write_batch", "close", "abort"])):
        for m in members:
            assert f"{m}" in api and getattr(cls, m).__doc__, (cls, m)
    # the Cython modules: signatures embedded at compile time appear in the reference
    assert "parse_header(" in api and "parse_lookup(" in api


def test_every_public_name_has_a_docstring():
    import idv
    missing = []
    for name in idv.__all__:
        obj = getattr(idv, name)
        if name == "__version__" or isinstance(obj, idv.PrimitiveType):
            continue
        if not (inspect.getdoc(obj) or "").strip():
            missing.append(name)
        if inspect.isclass(obj):
            for attr, value in vars(obj).items():
                if attr.startswith("_") or inspect.ismemberdescriptor(value):
                    continue   # slots are described in the class docstring
                fn = value.fget if isinstance(value, property) else \
                    getattr(value, "__func__", value)
                if callable(fn) and not (fn.__doc__ or "").strip():
                    missing.append(f"{name}.{attr}")
    assert missing == []


def test_cli_page_covers_every_command():
    from idv.cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    for command in sub.choices:
        assert f"idv {command}" in text, command
        assert re.search(rf"^## .*\b{command}\b", text, re.M) or command in ("info", "schema",
                                                                          "head", "slice"), \
            command


def test_development_page_maps_every_module():
    """docs/development.md's table names every module of idv/ (``cli/app``, ``writer/arrow``;
    a row may name several: ``pandas``, ``arrow``), and no module that is gone."""
    text = (DOCS / "development.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    named = {m for row in rows for m in re.findall(r"`([\w/]+)`", row.split("|")[1])}
    package = REPO_DIR / "idv"
    modules = {p.relative_to(package).with_suffix("").as_posix() for p in package.rglob("*")
               if (p.suffix in (".py", ".pyx") or p.suffix == ".pxd"
                   and not p.with_suffix(".pyx").exists()) and "__pycache__" not in p.parts}
    modules = {m[:-len("/__init__")] if m.endswith("/__init__") else m for m in modules}
    modules -= {"__init__", "__main__", "_version", "cli", "writer"}
    assert modules - named == set(), "modules the table does not name"
    assert named - modules == set(), "the table names modules that do not exist"


def test_interop_page_names_every_format_of_convert():
    """docs/interop.md lists convert's formats: every name and extension of the registry."""
    from idv.formats import FORMATS
    text = (DOCS / "interop.md").read_text(encoding="utf-8")
    for f in FORMATS.values():
        for word in (f.name, *f.extensions):
            assert f"`{word}`" in text, word


def test_docs_pages_are_in_a_toctree():
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^([a-z][\w-]*)$", index, re.M))
    pages = {p.stem for p in DOCS.glob("*.md")} | {p.stem for p in DOCS.glob("*.rst")}
    assert pages - {"index"} <= listed, pages - listed
    assert listed <= pages, listed - pages


# ---------------------------------------------------------------- type stubs

CYTHON_MODULES = ["_cursor", "_header", "_toc", "_lookup", "_compression", "_codecs", "_encode"]
if (REPO_DIR / "idv" / "_strings.pyx").exists() and int(np.__version__.split(".")[0]) >= 2:
    CYTHON_MODULES.append("_strings")      # built only against numpy 2 (setup.py's test)


def test_stubs_match_the_compiled_modules():
    """idv/_*.pyi against the compiled modules: the same public names, classes with the same
    methods and attributes, functions with the same parameters (stubtest checks more; see
    docs/development.md)."""
    import ast
    import importlib
    import types
    assert (REPO_DIR / "idv" / "py.typed").exists()
    problems, compared = [], 0
    for name in CYTHON_MODULES:
        mod = importlib.import_module(f"idv.{name}")
        stub = _stub_members(ast.parse((REPO_DIR / "idv" / f"{name}.pyi").read_text()).body)
        runtime = {k: v for k, v in vars(mod).items()
                   if not k.startswith("_") and not isinstance(v, types.ModuleType)
                   and not (callable(v) and getattr(v, "__module__", None) != mod.__name__)}
        problems += [f"idv.{name}.{k}: missing from the stub" for k in runtime.keys() - stub.keys()]
        problems += [f"idv.{name}.{k}: in the stub only" for k in stub.keys() - vars(mod).keys()]
        for k, node in stub.items():
            obj = getattr(mod, k, None)
            if obj is None:
                continue
            if isinstance(node, ast.FunctionDef):
                got = _runtime_params(obj)
                if got is not None:
                    compared += 1
                    if got != _stub_params(node):
                        problems.append(f"idv.{name}.{k}{tuple(_stub_params(node))} in the stub, "
                                        f"{tuple(got)} compiled")
            elif isinstance(node, ast.ClassDef):
                members = dict(_stub_members(node.body))
                for base in node.bases:     # members a stub class inherits from a stub base
                    if isinstance(base, ast.Name) and isinstance(stub.get(base.id), ast.ClassDef):
                        members = {**_stub_members(stub[base.id].body), **members}
                for attr in vars(obj):
                    if not attr.startswith("_") and attr not in members:
                        problems.append(f"idv.{name}.{k}.{attr}: missing from the stub")
                for attr, item in _stub_members(node.body).items():
                    if not hasattr(obj, attr):
                        problems.append(f"idv.{name}.{k}.{attr}: in the stub only")
                    elif isinstance(item, ast.FunctionDef) and not attr.startswith("__"):
                        got = _runtime_params(getattr(obj, attr))
                        if got is not None:
                            compared += 1
                            if got != _stub_params(item):
                                problems.append(f"idv.{name}.{k}.{attr}{tuple(_stub_params(item))}"
                                                f" in the stub, {tuple(got)} compiled")
    assert problems == []
    assert compared >= 40      # the signatures were really compared (embedsignature, binding)


# ---------------------------------------------------------------- helpers

def _missing_sphinx():
    for module in ("sphinx", "myst_parser"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install -e '.[docs]')"
    return None


def _text(path):
    return html.unescape(re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8")))


def _stub_members(body):
    """name -> node for the defs, classes and annotated names of a stub body."""
    import ast
    out = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
        elif isinstance(node, ast.Assign):
            out.update((t.id, node) for t in node.targets if isinstance(t, ast.Name))
    return out


def _stub_params(fn):
    a = fn.args
    return [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs] + \
        ([a.vararg.arg] if a.vararg else []) + ([a.kwarg.arg] if a.kwarg else [])


def _runtime_params(obj):
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    names = [p.name for p in sig.parameters.values()
             if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    names += [p.name for p in sig.parameters.values() if p.kind == p.VAR_POSITIONAL]
    names += [p.name for p in sig.parameters.values() if p.kind == p.VAR_KEYWORD]
    return names
