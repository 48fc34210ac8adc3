"""The package's layering: data flows down, so no module of idv/ imports one that imports it,
nor one of a layer above its own.

The graph is read statically from idv/**/*.py, *.pyx and *.pxd (tests/import_graph.py says what
counts as an import, and the one documented exception: the to_pandas / to_arrow /
record_batch_reader / iter_batches / __arrow_c_stream__ conveniences of IdvFile and Dataset
(idv._reader.reads.SourceReads) and the notebook views, _repr_html_).
"""
from __future__ import annotations

import ast
import textwrap

import pytest

from import_graph import (describe_cycle, find_cycles, import_graph, layer_of, package_modules,
                          upward_imports)
from reference import REPO_DIR

PACKAGE_DIR = REPO_DIR / "idv"

# bottom to top: a module imports from its own layer and those below (module names inside idv/,
# fnmatch patterns); every module of idv/ is in exactly one. The internals live in packages of
# one layer each (an underscore: not public); the public modules (the root, the engines' entry
# points, compression, formats, the command line) sit at the top of idv/.
LAYERS = {
    "format layer: the file's parts in Cython, and the errors and types they raise and decode":
        ["_cursor", "_header", "_toc", "_lookup", "_parts", "_codecs", "_encode", "_strings",
         "_compression", "_bytes", "_ascii", "_views", "_arrow_c", "_compare", "errors", "types",
         "_docs"],
    "facts: one concept each, used by readers and writers alike":
        ["_values", "_values.*", "_storage", "_storage.*", "_resources", "_resources.*",
         "compression", "_version"],
    "block store: fetching, checking and decoding runs of blocks": ["_store", "_store.*"],
    "scan: many columns (and files) read in step, and the filters that skip blocks":
        ["_scan", "_scan.*"],
    "reader: open files, columns, which columns and rows a read covers":
        ["_reader", "_reader.*"],
    "interop: numpy blocks to Arrow, pandas, delimited text, a notebook's view":
        ["_interop", "_interop.*"],
    # above interop, yet it imports none of it (test_the_writer_does_not_import_the_reading_side)
    "writer: the block pipeline, and the values it accepts": ["_writer", "_writer.*"],
    "formats: idv.convert and its registry": ["formats", "formats.*"],
    "engines: many files as one table, Dask, Ray, Spark, polars, DuckDB, training loaders":
        ["_engines", "_engines.*", "dask", "ray", "spark", "polars", "torch", "huggingface"],
    "the package root, exporting the public API": ["__init__"],
    "command line: a user of the public API": ["cli", "cli.*", "__main__"],
}

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
# split in a change of their own
BEING_SPLIT: set = set()


def _oversized(root):
    """The modules of `root` (idv/**/*.py) over MAX_MODULE_LINES lines, as "idv/x.py", and
    the functions over MAX_FUNCTION_LINES (end_lineno - lineno + 1, a nested function counted
    within its parent too), as "idv/x.py:outer.inner"."""
    found = {}

    def visit(node, path, prefix):
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}."
                lines = child.end_lineno - child.lineno + 1
                if not isinstance(child, ast.ClassDef) and lines > MAX_FUNCTION_LINES:
                    found[f"{path}:{name[:-1]}"] = lines
            visit(child, path, name)
    for file in sorted(root.rglob("*.py")):
        path = file.relative_to(root.parent).as_posix()
        text = file.read_text(encoding="utf-8")
        if len(text.splitlines()) > MAX_MODULE_LINES:
            found[path] = len(text.splitlines())
        visit(ast.parse(text), path, "")
    return found


def test_modules_and_functions_are_small():
    """No module of idv/ over 500 lines, no function over 80; BEING_SPLIT names exactly those
    still over, so that it can only shrink."""
    found = _oversized(PACKAGE_DIR)
    assert set(found) - BEING_SPLIT == set(), "over the limit: " + ", ".join(
        f"{name} ({found[name]} lines)" for name in sorted(set(found) - BEING_SPLIT))
    assert BEING_SPLIT - set(found) == set(), "within the limits now: take them out of BEING_SPLIT"


def test_size_rules_on_a_made_up_package(tmp_path):
    """A long module, a long method and a long nested function (its parent with it) are found;
    short ones are not."""
    package = tmp_path / "idv"
    package.mkdir()
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    nested = "\n".join(f"        y{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    files = {
        "long.py": "\n".join(f"a{i} = {i}" for i in range(MAX_MODULE_LINES + 1)),
        "ok.py": f"def short():\n    return 1\n\n\nclass C:\n    def m(self):\n{body}\n",
        "nest.py": f"def outer():\n    def inner():\n{nested}\n    return inner\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    assert _oversized(package) == {"idv/long.py": MAX_MODULE_LINES + 1,
                                   "idv/ok.py:C.m": MAX_FUNCTION_LINES + 1,
                                   "idv/nest.py:outer": MAX_FUNCTION_LINES + 3,
                                   "idv/nest.py:outer.inner": MAX_FUNCTION_LINES + 1}


def test_import_graph_has_no_cycles():
    graph = import_graph(PACKAGE_DIR)
    cycles = find_cycles(graph)
    assert not cycles, "modules of idv/ that import each other in a loop:\n" + "\n".join(
        f"{', '.join(c)}:\n  " + describe_cycle(graph, c).replace("\n", "\n  ") for c in cycles)


def test_imports_go_down_the_layers():
    graph = import_graph(PACKAGE_DIR)
    layers = list(LAYERS.values())
    unplaced = sorted(m for m in graph if layer_of(m, layers) is None)
    assert not unplaced, f"modules of idv/ in no layer of LAYERS (place them): {unplaced}"
    found = upward_imports(graph, layers)
    assert not found, "imports of a higher layer:\n" + "\n".join(
        f"{a} -> {b} at {site}" for (a, b), site in sorted(found.items()))


# the reading side's conversions and the engines above the writer (idv._writer imports none)
READING_SIDE = ("idv._interop.arrow", "idv._interop.pandas", "idv._reader.dataset",
                "idv.formats", "idv.dask", "idv.ray", "idv.spark", "idv.torch",
                "idv.huggingface", "idv._engines.reopen")


def _chain(graph, start, targets):
    """The imports by which `start` reaches one of `targets` (directly or through other
    modules), each "a -> b at path:line"; [] when it reaches none."""
    via = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v]):
            if w in via:
                continue
            via[w] = v
            if w in targets:
                steps = []
                while via[w] is not None:
                    steps.append(f"{via[w]} -> {w} at {graph[via[w]][w]}")
                    w = via[w]
                return steps[::-1]
            queue.append(w)
    return []


def test_the_writer_does_not_import_the_reading_side():
    """Nothing under idv/_writer/ imports idv._interop.arrow, idv._interop.pandas, idv.dataset,
    idv.formats or idv.dask, directly or through another module, at module level or in a function:
    Arrow and pandas come in through idv._writer.arrow / idv._writer.pandas and the modules below
    both."""
    graph = import_graph(PACKAGE_DIR)
    writer = [m for m in graph if m == "idv._writer" or m.startswith("idv._writer.")]
    assert {"idv._writer.arrow", "idv._writer.pandas", "idv._writer.pipeline"} <= set(writer)
    found = {m: _chain(graph, m, READING_SIDE) for m in writer}
    found = {m: chain for m, chain in found.items() if chain}
    assert not found, "the writer imports the reading side:\n" + "\n".join(
        f"{m}:\n  " + "\n  ".join(chain) for m, chain in found.items())


def test_import_graph_reads_the_whole_package():
    """Every .py and .pyx module (and .pxd helper) is in the graph, and the graph has edges
    from both kinds (so the tests above cannot pass by reading nothing)."""
    modules = package_modules(PACKAGE_DIR)
    graph = import_graph(PACKAGE_DIR)
    on_disk = {p for p in PACKAGE_DIR.rglob("*") if (p.suffix in (".py", ".pyx") or (
               p.suffix == ".pxd" and not p.with_suffix(".pyx").exists()))
               and "__pycache__" not in p.parts}
    assert set(modules.values()) == on_disk
    assert set(graph) == set(modules)
    assert graph["idv"], "the package root imports nothing?"
    assert any(graph[m] for m, p in modules.items() if p.suffix == ".pyx")
    assert any(graph[m] for m, p in modules.items() if p.suffix == ".py" and m != "idv")


def test_import_graph_rules_on_a_made_up_package(tmp_path):
    """Function-level, relative, package and Cython imports are edges; the root's __version__,
    TYPE_CHECKING imports and the SourceReads conveniences are not; a loop is found and shown."""
    files = {
        "__init__.py": """
            from idv._version import __version__
            from idv.reader import IdvFile
            from idv.writer import Writer
        """,
        "_version.py": "__version__ = '1.0'",
        "errors.py": "class IdvFormatError(ValueError): pass",
        "reader.py": """
            from typing import TYPE_CHECKING
            from idv import __version__
            if TYPE_CHECKING:
                from idv.writer import Writer
            class SourceReads:
                def to_pandas(self):
                    from idv.pandas import to_pandas
                    return to_pandas(self)
        """,
        "pandas.py": "from idv.reader import IdvFile",
        "arrow.py": "from idv.writer import Writer",
        "writer/__init__.py": "from .block import Writer",
        "writer/block.py": """
            class Writer:
                def write(self):
                    from idv import arrow
        """,
        "_cursor.pyx": "cdef class Cursor:\n    pass",
        "_codecs.pyx": """
            from idv._cursor cimport Cursor
            from idv.errors import IdvFormatError  # raised on bad blocks
            import numpy as np
        """,
    }
    package = tmp_path / "idv"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).strip() + "\n")
    graph = import_graph(package)
    assert set(graph["idv"]) == {"idv._version", "idv.reader", "idv.writer"}
    assert graph["idv.reader"] == {}                     # __version__, TYPE_CHECKING, to_pandas
    assert set(graph["idv.pandas"]) == {"idv.reader"}
    assert set(graph["idv.writer"]) == {"idv.writer.block"}
    assert set(graph["idv.writer.block"]) == {"idv.arrow"}
    assert set(graph["idv._codecs"]) == {"idv._cursor", "idv.errors"}
    assert find_cycles(graph) == [["idv.arrow", "idv.writer", "idv.writer.block"]]
    assert describe_cycle(graph, find_cycles(graph)[0]).splitlines() == [
        "idv.arrow -> idv.writer -> idv.writer.block -> idv.arrow",
        "idv.arrow -> idv.writer at idv/arrow.py:1",
        "idv.writer -> idv.writer.block at idv/writer/__init__.py:1",
        "idv.writer.block -> idv.arrow at idv/writer/block.py:3"]


def test_layer_rules_on_a_made_up_package(tmp_path):
    """An import of a higher layer is reported with its line, function-level and cimports of a
    .pxd helper included; the SourceReads conveniences are not; an unplaced module has no layer."""
    files = {
        "__init__.py": "from idv.reader import IdvFile",
        "errors.py": "class IdvFormatError(ValueError): pass",
        "_bytes.pxd": "from idv.errors cimport nothing  # a made-up cimport",
        "_codecs.pyx": "from idv._bytes cimport shrunk",
        "reader.py": """
            from idv import _codecs
            class SourceReads:
                def to_arrow(self):
                    from idv.arrow import to_arrow
                def head(self):
                    from idv.cli import show
        """,
        "arrow.py": "from idv.reader import IdvFile",
        "cli.py": "import idv.arrow",
        "extra.py": "",
    }
    package = tmp_path / "idv"
    package.mkdir()
    for name, text in files.items():
        (package / name).write_text(textwrap.dedent(text).strip() + "\n")
    layers = [["_codecs", "_bytes", "errors"], ["reader"], ["arrow"], ["cli"], ["__init__"]]
    graph = import_graph(package)
    assert set(graph["idv._codecs"]) == {"idv._bytes"} and set(graph["idv._bytes"]) == {
        "idv.errors"}
    assert upward_imports(graph, layers) == {("idv.reader", "idv.cli"): "idv/reader.py:6"}
    assert layer_of("idv.extra", layers) is None and layer_of("idv", layers) == 4
    with pytest.raises(ValueError, match="idv.errors is in layers"):
        layer_of("idv.errors", layers + [["e*"]])


def test_the_quick_runs_marks_name_tests_that_exist():
    """Every test that conftest.py marks slow by name is defined in its module (a renamed
    test would drop its mark silently and slow the quick run down)."""
    import ast
    from conftest import QUIET_PROCESS, SLOW_TESTS, TEST_MARKS
    tests_dir = REPO_DIR / "tests"
    named = [(m, n) for table in (SLOW_TESTS, QUIET_PROCESS) for m, names in table.items()
             for n in names]
    named += [tuple(k.split("[")[0].split("::")) for k in TEST_MARKS]
    defined = {}
    for module in {m for m, _ in named}:
        tree = ast.parse((tests_dir / module).read_text())
        defined[module] = {f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}
    missing = [f"{m}::{n}" for m, n in named if n not in defined[m]]
    assert not missing, f"marked by name in conftest.py but not defined: {missing}"
    from conftest import FORKING_MODULES, MODULE_MARKS, ONE_WORKER_MODULES
    modules = set(MODULE_MARKS) | FORKING_MODULES | ONE_WORKER_MODULES
    assert not [m for m in modules if not (tests_dir / m).is_file()]


def test_the_engine_tests_reach_xdist_as_one_group(request):
    """The tests on engines carry the engines group where pytest-xdist schedules by it (the
    @engines suffix of their ids in a worker). pytest 9.2's structured test ids made xdist's
    loadgroup ignore groups silently (both workers started Spark, Ray and Dask): the test
    extra keeps pytest below 9.2 until xdist sets groups on them."""
    import os
    engine_tests = [i for i in request.session.items if i.get_closest_marker("engine")]
    assert all(i.get_closest_marker("xdist_group").args == ("engines",) for i in engine_tests)
    if os.environ.get("PYTEST_XDIST_WORKER") and request.config.getvalue("loadgroup"):
        assert all(i.nodeid.endswith("@engines") for i in engine_tests)
    assert pytest.version_tuple[:2] < (9, 2)
