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
    # the public surface only: no format-layer module; every public method rendered, its
    # numpydoc sections by napoleon
    assert "parse_header(" not in api and "idv._header" not in api
    raw = (built_docs / "api.html").read_text(encoding="utf-8")
    names = _public_names()
    classes = {qual: obj for qual, obj in names if inspect.isclass(obj)}
    for qual, obj in names:
        if inspect.isclass(obj) or qual.startswith(("spark.", "ray.")) or "." not in qual:
            continue
        cls = classes.get(qual.rsplit(".", 1)[0])
        if cls is not None and issubclass(cls, BaseException) and obj.__name__ not in vars(cls):
            continue        # an error's inherited methods are its base's
        owner = qual.split(".")[-2]
        prefix = "idv" if qual.count(".") == 1 else f"idv.{qual.split('.')[0]}"
        assert f'id="{prefix}.{owner}.{qual.split(".")[-1]}"' in raw, qual
    assert "Parameters" in api and "Returns" in api


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


# the submodules users import, and their names in docs/api.rst; with idv.__all__, the public
# surface (the other modules named are those whose objects the public functions return or take)
SUBMODULE_NAMES = {
    "idv.dask": ["read_idv", "read_idv_array", "to_idv", "partitions"],
    "idv.polars": ["scan_idv"],
    "idv.torch": ["IdvIterableDataset", "IdvMapDataset"],
    "idv.huggingface": ["load"],
    "idv.ray": ["read_idv", "IdvDatasource", "IdvDatasink"],
    "idv.spark": ["register", "IdvDataSource", "FilteringIdvDataSource", "spark_arrow_type"],
    "idv.compression": ["default_backend", "installed"],
    "idv.formats": ["Format"],
    "idv.cli": ["main"],
}
# public methods that the package's own layers call (their docstrings say so): left out of
# the reference by its :exclude-members:
PACKAGE_INTERNAL = {
    "IdvFile.check_open", "Dataset.resolve_columns", "Dataset.time_unit", "Dataset.files_only",
    "IdvFile.resolve_columns", "IdvFile.time_unit", "IdvFile.need", "IdvFile.decoded_bytes",
    "Dataset.need", "Dataset.decoded_bytes",
    "Column.stored_blocks", "Column.check_unread", "Column.lookup_errors",
    "Column.check_readable", "Column.mapped_blocks", "Column.text_room",
    "Column.read_text_blocks", "Column.read_bit_blocks", "Column.metadata_entries", "Column.annotation_form",
    "Column.decode_metadata", "Column.decoded_bytes", "Column.need", "DatasetFile.closing",
    "VerifyReport.for_unopenable",
}
# methods that Ray and Spark call, with the arguments of their engine's interface (documented
# there); the reference shows these classes without members
ENGINE_CALLED = {
    "IdvDatasource.get_read_tasks", "IdvDatasink.on_write_start", "IdvDatasink.write",
    "IdvDatasink.on_write_complete", "IdvDatasink.on_write_failed", "IdvDataSource.reader",
    "IdvDataSource.writer", "FilteringIdvDataSource.reader", "FilteringIdvDataSource.writer",
}
# classes that idv makes and hands out (and exceptions): their constructors are not for users
RECEIVED = {"Column", "Schema", "Field", "ZipEntry", "VerifyReport", "Finding", "DatasetFile",
            "Format", "IdvDataSource", "FilteringIdvDataSource", "PrimitiveType"}


def _public_names(methods=True):
    """(qualified name, object) of every public function and class: idv.__all__ and
    SUBMODULE_NAMES, and with `methods`, the public methods of their classes (inherited ones
    too)."""
    import importlib
    import idv
    found = [(name, getattr(idv, name)) for name in idv.__all__]
    for module, names in SUBMODULE_NAMES.items():
        try:
            mod = importlib.import_module(module)
        except ImportError:     # an engine not installed (MissingDependencyError): its names
            continue            # are checked where it is
        found += [(f"{module[4:]}.{name}", getattr(mod, name)) for name in names]
    out = []
    for qual, obj in found:
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue                 # __version__, SCHEMA_ATTR, the item type singletons
        out.append((qual, obj))
        if not (methods and inspect.isclass(obj)):
            continue
        cls = qual.rsplit(".", 1)[-1]
        for attr in dir(obj):
            owner = next((k for k in obj.__mro__ if attr in vars(k)), None)
            if attr.startswith("_") or not owner.__module__.startswith("idv"):
                continue
            value = vars(owner)[attr]
            fn = getattr(value, "__func__", value)
            if inspect.isfunction(fn) and f"{cls}.{attr}" not in (PACKAGE_INTERNAL
                                                                   | ENGINE_CALLED):
                out.append((f"{qual}.{attr}", fn))
    return out


def _takes_parameters(qual, obj):
    """Whether users call `obj` with arguments (a class: its constructor, unless RECEIVED)."""
    if inspect.isclass(obj) and (issubclass(obj, BaseException)
                                 or qual.rsplit(".", 1)[-1] in RECEIVED):
        return False
    try:
        params = list(inspect.signature(obj).parameters)
    except (TypeError, ValueError):
        return False
    return bool([p for p in params if p not in ("self", "cls")])


def _documented_parameters(doc):
    """The names a numpydoc Parameters section lists (``a, b : int`` gives a and b), None
    without one."""
    found = re.search(r"^Parameters\n-{10}\n(.*?)(?=^\w[\w ]*\n-{3,}\n|\Z)", doc, re.M | re.S)
    if found is None:
        return None
    entries = [ln.split(" : ")[0] for ln in found.group(1).splitlines()
               if ln.strip() and not ln.startswith(" ")]
    return {name.strip().lstrip("*") for e in entries for name in e.split(",")}


def test_public_names_are_in_the_reference_with_their_parameters():
    """Every public name is in docs/api.rst, and its docstring has a numpydoc Parameters
    section when it takes parameters; no format-layer module is documented there."""
    api = (DOCS / "api.rst").read_text(encoding="utf-8")
    missing = [qual for qual, _ in _public_names(methods=False)
               if not re.search(rf"\bidv\.{re.escape(qual)}\b", api)]
    names = _public_names()
    assert len(names) > 80, len(names)
    bare, wrong = [], []
    for qual, obj in names:
        if not _takes_parameters(qual, obj):
            continue
        listed = _documented_parameters(inspect.getdoc(obj) or "")
        params = set(inspect.signature(obj).parameters) - {"self", "cls"}
        if listed is None:
            bare.append(qual)
        elif listed != params:
            wrong.append((qual, sorted(listed - params), sorted(params - listed)))
    assert missing == [], "public names docs/api.rst does not document"
    assert bare == [], "public names that take parameters and document none"
    assert wrong == [], "(name, documented but not taken, taken but not documented)"
    assert not re.search(r"automodule:: idv\._", api), "a format-layer module in the reference"
    excluded = re.findall(r":exclude-members: (.*\n(?:      .*\n)*)", api)
    excluded = {m.strip() for text in excluded for m in text.split(",")}
    assert {q.split(".")[-1] for q in PACKAGE_INTERNAL} <= excluded


def test_shared_parameter_texts_are_written_once_and_inserted():
    """idv._docs.fill puts each shared text where its placeholder line is, indented as it; no
    public docstring keeps a placeholder, every shared text is used, and none is copied into
    another module of idv/."""
    from idv import _docs

    def f():
        """Summary {not a placeholder}.

        Parameters
        ----------
        {filter:where}
        {columns}
            More.
        """
    filled = _docs.fill(f).__doc__
    lines = _docs.PARAMETERS["columns"].split("\n")
    assert f"        {lines[0]}\n        {lines[1]}\n" in filled
    assert "{not a placeholder}" in filled and "{columns}" not in filled
    assert filled.endswith(f"{lines[-1]}\n            More.\n        ")
    where = _docs.PARAMETERS["filter"].replace("filter :", "where :", 1)
    assert "\n".join("        " + ln for ln in where.split("\n")) in filled

    def unknown():
        """{no_such_parameter}"""
    with pytest.raises(KeyError):
        _docs.fill(unknown)

    def bare():
        pass
    assert _docs.fill(bare).__doc__ is None

    used = set()
    for qual, obj in _public_names():
        doc = obj.__doc__ or ""
        assert not re.search(r"^\s*\{\w+(:\w+)?\}\s*$", doc, re.M), qual
        used |= {k for k, text in _docs.PARAMETERS.items() if text in inspect.cleandoc(doc)}
    assert set(_docs.PARAMETERS) - used == set(), "shared texts no public docstring uses"
    for path in (REPO_DIR / "idv").rglob("*.py"):
        if path.name == "_docs.py":
            continue
        source = path.read_text(encoding="utf-8")
        for name, text in _docs.PARAMETERS.items():
            first = text.split("\n")[1].strip()
            assert first not in source, f"{path.name} copies the text of {name}"


def test_docstring_examples_run(tmp_path, monkeypatch):
    """The Examples of the package's and the public names' docstrings are true (doctest), run
    in an empty folder, as a user meets them."""
    import doctest
    import idv
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    monkeypatch.chdir(tmp_path)
    finder, runner = doctest.DocTestFinder(recurse=False), doctest.DocTestRunner()
    ran = 0
    for qual, obj in [("idv", idv), *_public_names()]:
        for test in finder.find(obj, qual, globs={"idv": idv}):
            if test.examples:
                ran += 1
                runner.run(test)
    assert ran >= 5
    assert runner.summarize(verbose=False).failed == 0


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
    # the internal packages (a layer each: their docstrings, no code) and the command line's
    modules -= {"__init__", "__main__", "_version", "cli"} | {
        p.name for p in package.iterdir() if p.is_dir() and p.name.startswith("_")}
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
