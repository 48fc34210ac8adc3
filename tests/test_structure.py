"""The import graph of the idv package has no cycle: data flows down through the layers.

Every import inside idv/ counts, at module level and inside functions (and the Cython modules'
import / cimport lines). The one exception is the lazy conveniences of the reader,
``IdvFile.to_pandas / to_arrow / iter_batches``, which call up into idv.pandas and idv.arrow.
A package's implicit import of its parent package is not an edge (``idv/__init__.py`` imports
every public module to re-export it).
"""
from __future__ import annotations

import ast
import pathlib
import re

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "idv"

# (importing module, imported module, function the import is in)
ALLOWED = {("idv.reader", "idv.pandas", "to_pandas"), ("idv.reader", "idv.arrow", "to_arrow"),
           ("idv.reader", "idv.arrow", "iter_batches")}

_PYX_IMPORT = re.compile(r"^\s*(?:from\s+(idv[\w.]*)\s+c?import\s+([\w, ]+)"
                         r"|c?import\s+(idv[\w.]*))", re.M)


def _module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules():
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*"))
            if p.suffix in (".py", ".pyx") and "_build" not in p.parts}


def _targets(base, names, modules):
    """`from base import names`: the submodules named, else base itself."""
    subs = [f"{base}.{n}" for n in names if f"{base}.{n}" in modules]
    return subs if subs else [base]


def _edges(modules):
    """(source, target, enclosing function or None) for every import of an idv module."""
    edges = set()
    for name, path in modules.items():
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".pyx":
            for m in _PYX_IMPORT.finditer(text):
                if m.group(1):
                    names = [n.strip().split(" as ")[0] for n in m.group(2).split(",")]
                    for t in _targets(m.group(1), names, modules):
                        edges.add((name, t, None))
                else:
                    edges.add((name, m.group(3), None))
            continue
        tree = ast.parse(text)
        for node, func in _walk(tree, None):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                    and node.module.split(".")[0] == "idv":
                for t in _targets(node.module, [a.name for a in node.names], modules):
                    edges.add((name, t, func))
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "idv":
                        edges.add((name, a.name, func))
    return {e for e in edges if e[0] != e[1] and e[1] in modules}


def _walk(node, func):
    for child in ast.iter_child_nodes(node):
        inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            else func
        yield child, func
        yield from _walk(child, inner)


def _cycle(graph):
    """One cycle of a {module: {imported modules}} graph as a list of modules, or None."""
    state = {}

    def visit(n, path):
        state[n] = "open"
        for m in sorted(graph.get(n, ())):
            if state.get(m) == "open":
                return path[path.index(m):] + [m]
            if m not in state:
                found = visit(m, path + [m])
                if found:
                    return found
        state[n] = "done"
        return None
    for n in sorted(graph):
        if n not in state:
            found = visit(n, [n])
            if found:
                return found
    return None


def _graph():
    modules = _modules()
    graph = {}
    for src, dst, func in _edges(modules):
        if src == "idv" or (src, dst, func) in ALLOWED:
            continue    # the package's re-exports; the reader's documented conveniences
        graph.setdefault(src, set()).add(dst)
    return graph


def test_the_scan_sees_the_layers():
    graph = _graph()
    assert "idv.types" in graph["idv.writer.columns"]
    assert "idv.writer.pipeline" in graph["idv.writer"]
    assert "idv.types" in graph["idv._codecs"]                    # a Cython module's import
    assert "idv.pandas" in graph["idv.writer.inputs"]             # a function-level import
    edges = _edges(_modules())
    assert ALLOWED <= edges, "the documented exceptions are no longer there: update ALLOWED"


def test_no_import_cycle():
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_frame_adapters_never_import_the_writer():
    graph = _graph()
    for module in ("idv.pandas", "idv.arrow", "idv._interop", "idv.infer", "idv.types"):
        assert not {m for m in graph.get(module, ()) if m.startswith("idv.writer")}, module
