"""The static import graph of a package: which of its modules import which, its cycles, and
the imports that go up a declared order of layers.

Read from the source, nothing is imported. Python modules (``*.py``) are parsed with ``ast``;
Cython modules (``*.pyx``, and a ``*.pxd`` with no ``.pyx`` of its own: inline helpers that
others cimport) are scanned line by line for ``from P import ...``, ``from P cimport ...`` and
``import P``. Every import of a module of the package counts, at module level and inside
functions alike (a function-level import still runs, only later), with three rules:

* ``from pkg.a import name`` is an edge to ``pkg.a.name`` when that is a module, else to
  ``pkg.a`` (a package means its ``__init__``). The parent packages a dotted import runs first
  are not edges: every submodule would otherwise form a cycle with the root ``__init__`` that
  re-exports it.
* A submodule importing only ``__version__`` from the root package is not an edge: the root
  defines it before importing any submodule. Any other import of the root from a submodule is
  an edge (an upward dependency).
* Imports inside the methods listed in ``EXCEPTIONS`` (class name, method names) are left out:
  ``to_pandas / to_arrow / record_batch_reader / iter_batches / __arrow_c_stream__`` of
  IdvFile and Dataset (written once, in idv._reader.reads.SourceReads) and the notebook views
  (``_repr_html_`` of IdvFile, Dataset, Schema and Column) are conveniences on the reader's objects
  that import the interop layers above it when called. They are the one documented exception, found
  by class and method name wherever the reader's module lives.

Imports under ``if TYPE_CHECKING:`` are left out too (they never run); dynamic imports
(``importlib.import_module``) are not seen.

Layers are listed bottom to top, each a list of ``fnmatch`` patterns of module names inside the
package (``writer.*``; the root itself is ``__init__``). A module may import its own layer and
those below; ``upward_imports`` finds the others.
"""
from __future__ import annotations

import ast
import re
from fnmatch import fnmatchcase
from pathlib import Path

EXCEPTIONS = {("SourceReads", "to_pandas"), ("SourceReads", "to_arrow"),
              ("SourceReads", "record_batch_reader"), ("SourceReads", "iter_batches"),
              ("SourceReads", "__arrow_c_stream__"), ("IdvFile", "_repr_html_"),
              ("Dataset", "_repr_html_"), ("Schema", "_repr_html_"), ("Column", "_repr_html_")}

_PYX_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+c?import\s+(.+)|c?import\s+([\w., ]+))")


def package_modules(package_dir) -> dict:
    """{dotted module name: source path} of every .py and .pyx file of the package, and of
    every .pxd without a .pyx (a .pyx's .pxd declares that module)."""
    package_dir = Path(package_dir)
    root = package_dir.name
    out = {}
    for path in sorted(package_dir.rglob("*")):
        if path.suffix not in (".py", ".pyx", ".pxd") or "__pycache__" in path.parts \
                or (path.suffix == ".pxd" and path.with_suffix(".pyx").exists()):
            continue
        parts = list(path.relative_to(package_dir).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([root, *parts])] = path
    return out


def import_graph(package_dir) -> dict:
    """{module: {imported module: first import site "path:line"}} over the package's modules
    (paths relative to the package's parent folder)."""
    modules = package_modules(package_dir)
    base = Path(package_dir).parent
    graph = {}
    for name, path in modules.items():
        edges = {}
        is_package = path.stem == "__init__"
        for line, target, names in _imports(path, name, is_package):
            for dest in _resolve(target, names, modules, name):
                if dest != name:
                    edges.setdefault(dest, f"{path.relative_to(base)}:{line}")
        graph[name] = edges
    return graph


def find_cycles(graph) -> list:
    """The strongly connected components with more than one module (each a sorted list)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):      # Tarjan's algorithm (the graph of a package is small: recursion is fine)
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def describe_cycle(graph, component) -> str:
    """One loop through the component, then every import between its modules with its line."""
    members = set(component)
    start = component[0]
    paths = {start: [start]}            # breadth-first from start back to start
    queue = [start]
    loop = None
    while queue and loop is None:
        v = queue.pop(0)
        for w in sorted(graph[v]):
            if w == start:
                loop = paths[v] + [start]
                break
            if w in members and w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    lines = [" -> ".join(loop)] if loop else []
    lines += [f"{a} -> {b} at {graph[a][b]}" for a in component for b in sorted(graph[a])
              if b in members]
    return "\n".join(lines)


def layer_of(module, layers):
    """The index (0: the bottom) of the one layer whose patterns match `module`, None if none
    does; ValueError if several do."""
    parts = module.split(".")[1:]
    name = ".".join(parts) if parts else "__init__"
    found = [i for i, patterns in enumerate(layers)
             if any(fnmatchcase(name, p) for p in patterns)]
    if len(found) > 1:
        raise ValueError(f"{module} is in layers {found}: place it in one")
    return found[0] if found else None


def upward_imports(graph, layers) -> dict:
    """{(importer, imported): import site} for every import of a module of a higher layer
    (modules in no layer are left out: see layer_of)."""
    level = {m: layer_of(m, layers) for m in graph}
    return {(a, b): site for a, edges in graph.items() for b, site in edges.items()
            if level[a] is not None and level.get(b) is not None and level[b] > level[a]}


# ---- reading the imports of one file ---------------------------------------------------------

def _imports(path, module, is_package):
    """(line, absolute target module, imported names or None) of every import in a file."""
    package = module if is_package else module.rpartition(".")[0]
    if path.suffix in (".pyx", ".pxd"):
        yield from _pyx_imports(path, package)
        return
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    yield from _walk(tree, package, scope=())


def _walk(node, package, scope):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for sub in child.orelse:       # only the else branch runs
                yield from _walk(ast.Module(body=[sub], type_ignores=[]), package, scope)
            continue
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            inner = scope + (child.name,)
            if len(inner) >= 2 and (inner[-2], inner[-1]) in EXCEPTIONS:
                continue
            yield from _walk(child, package, inner)
            continue
        if isinstance(child, ast.Import):
            for alias in child.names:
                yield child.lineno, alias.name, None
        elif isinstance(child, ast.ImportFrom):
            target = _absolute(child.module or "", child.level, package)
            yield child.lineno, target, [a.name for a in child.names]
        else:
            yield from _walk(child, package, scope)


def _is_type_checking(test):
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _pyx_imports(path, package):
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = _PYX_IMPORT.match(line.split("#", 1)[0])
        if not m:
            continue
        if m.group(1):
            level = len(m.group(1)) - len(m.group(1).lstrip("."))
            target = _absolute(m.group(1).lstrip("."), level, package)
            names = [n.split(" as ")[0].strip(" ()") for n in m.group(2).split(",")]
            yield number, target, [n for n in names if n]
        else:
            for name in m.group(3).split(","):
                yield number, name.split(" as ")[0].strip(), None


def _absolute(module, level, package):
    if not level:
        return module
    base = package.split(".")
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _resolve(target, names, modules, importer):
    """The modules of the package an import statement depends on."""
    root = importer.split(".")[0]
    if target != root and not target.startswith(root + "."):
        return []
    if names is None:                     # import a.b.c: the module a.b.c
        return [target] if target in modules else []
    if target == root and importer != root and set(names) == {"__version__"}:
        return []
    out = []
    for n in names:
        sub = f"{target}.{n}"
        if sub in modules:
            out.append(sub)
        elif target in modules:
            out.append(target)
    return out
