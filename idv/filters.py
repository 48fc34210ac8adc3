"""Filters: which blocks may hold matching rows (from the block statistics) and which rows
match (exactly, on the decoded values).

A filter is given as pyarrow.parquet's DNF tuples (``[("ts", ">=", t)]`` and'ed, a list of
such lists or'ed), a string of Python's expression syntax (``"Age > 30 and City ==
'Paris'"``, the command line's ``--where``), or a pyarrow compute expression
(``pc.field("ts") >= t``, read with its literals' types by idv.arrow_expressions). Each becomes one tree of ``Cmp`` / ``IsNull`` / ``And`` / ``Or`` /
``Not``, evaluated twice: over each block's statistics (a block mask: blocks ruled out are
never fetched nor decoded; without statistics every block is kept), then over the rows of
the blocks kept, with numpy. So results never depend on whether a file has statistics.

Rows compare as numpy compares read()'s values: NaN matches ``!=`` only, a key's missing
value (stored 0) matches ``!=`` and ``is null``; DateTime, TimeSpan and DateTimeOffset (by
its UTC instant) compare with datetime / timedelta / numpy / pandas values or ISO strings;
keys with a str compare by KeyValues text (``==``, ``!=``, ``in``, ``not in``).
"""
from __future__ import annotations

import ast
import datetime as dt
from typing import NamedTuple

import numpy as np

from idv import statistics as S
from idv import ticks, vectors
from idv import types as T
from idv.scan import NumpyColumn, scan

OPS = ("==", "!=", "<", "<=", ">", ">=", "in", "not in")
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


class Cmp(NamedTuple):
    """``column op value`` (op one of OPS; a list of values for in / not in)."""
    column: str
    op: str
    value: object


class IsNull(NamedTuple):
    """The column's value is missing (NaN, a key's 0), or with ``negate`` present."""
    column: str
    negate: bool = False


class And(NamedTuple):
    parts: tuple


class Or(NamedTuple):
    parts: tuple


class Not(NamedTuple):
    part: object


class BlocksOnly(NamedTuple):
    """Skip the blocks `part` rules out, keep every row of the others (an engine that tests
    the rows itself, as polars does with its own predicate)."""
    part: object


# ---------------------------------------------------------------------------------------------
# the forms a filter is given in
# ---------------------------------------------------------------------------------------------

def parse(filter_):
    """The tree of a filter (DNF tuples, an expression string, a pyarrow Expression, or a tree
    already); ValueError saying what is not understood."""
    if isinstance(filter_, (Cmp, IsNull, And, Or, Not, BlocksOnly)):
        return filter_
    if isinstance(filter_, str):
        return _from_python(filter_, filter_)
    if isinstance(filter_, (list, tuple)):
        return _from_dnf(filter_)
    if type(filter_).__name__ == "Expression" and type(filter_).__module__.startswith("pyarrow"):
        from idv import arrow_expressions
        try:
            return _from_arrow(arrow_expressions.tree(filter_))
        except ValueError as e:
            raise ValueError(f"cannot understand the filter {str(filter_)!r}: {e}") from None
    raise TypeError(f"a filter is a list of (column, op, value) tuples, an expression string or "
                    f"a pyarrow compute Expression, not {type(filter_).__name__}")


def _from_dnf(terms):
    if not terms:
        raise ValueError("an empty filter: give at least one (column, op, value) tuple")
    if all(isinstance(t, (list, tuple)) and t and isinstance(t[0], (list, tuple))
           for t in terms):
        return Or(tuple(_from_dnf(t) for t in terms))
    parts = []
    for t in terms:
        if not (isinstance(t, (list, tuple)) and len(t) == 3 and isinstance(t[0], str)):
            raise ValueError(f"a filter term is a (column, op, value) tuple, not {t!r}")
        column, op, value = t
        op = "==" if op == "=" else op
        if op not in OPS:
            raise ValueError(f"unknown filter operator {op!r} (one of {', '.join(OPS)})")
        parts.append(Cmp(column, op, list(value) if op in ("in", "not in") else value))
    return parts[0] if len(parts) == 1 else And(tuple(parts))


_AST_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
            ast.GtE: ">=", ast.In: "in", ast.NotIn: "not in"}


def _from_python(text, shown):
    try:
        tree = ast.parse(text.strip(), mode="eval").body
        return _node(tree)
    except (SyntaxError, ValueError) as e:
        raise ValueError(f"cannot understand the filter {shown!r}: {e}") from None


def _name(n):
    """A column named by a bare name or col("any name")."""
    if isinstance(n, ast.Name):
        return n.id
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("col",
                                                                                  "field") \
            and len(n.args) == 1 and isinstance(n.args[0], ast.Constant):
        return n.args[0].value
    return None


def _value(n):
    if isinstance(n, ast.Name) and n.id in ("nan", "NaN"):
        return float("nan")
    return ast.literal_eval(n)


def _node(n):
    if isinstance(n, ast.BoolOp):
        parts = tuple(_node(v) for v in n.values)
        return And(parts) if isinstance(n.op, ast.And) else Or(parts)
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
        return Not(_node(n.operand))
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and \
            n.func.id in ("isnull", "notnull") and len(n.args) == 1 and _name(n.args[0]):
        return IsNull(_name(n.args[0]), n.func.id == "notnull")
    if isinstance(n, ast.Compare):
        left, parts = n.left, []
        for op, right in zip(n.ops, n.comparators):
            sym = _AST_OPS.get(type(op))
            if sym is None:
                raise ValueError(f"unsupported operator {type(op).__name__}")
            if _name(left) is not None:
                column, value = _name(left), _value(right)
            elif _name(right) is not None and sym in _FLIP:
                column, value, sym = _name(right), _value(left), _FLIP[sym]
            else:
                raise ValueError("a comparison needs a column on one side and a value on the "
                                 "other")
            if sym in ("in", "not in"):
                value = list(value)
            parts.append(Cmp(column, sym, value))
            left = right
        return parts[0] if len(parts) == 1 else And(tuple(parts))
    raise ValueError(f"unsupported expression {ast.dump(n)[:80]}")


_ARROW_CMP = {"equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<=",
              "greater": ">", "greater_equal": ">="}


def _from_arrow(node):
    """The filter tree of a pyarrow Expression's tree (idv.arrow_expressions.tree)."""
    if node[0] != "call":
        raise ValueError("a filter is a condition, not a column or a value alone")
    _, name, args, options = node
    fields = [a[1] for a in args if a[0] == "field"]
    if name in ("and_kleene", "and", "or_kleene", "or"):
        parts = tuple(_from_arrow(a) for a in args)
        return And(parts) if name.startswith("and") else Or(parts)
    if name == "invert" and len(args) == 1:
        return Not(_from_arrow(args[0]))
    if name in ("is_null", "is_valid") and len(args) == 1 and fields:
        return IsNull(fields[0], name == "is_valid")
    if name == "is_in" and len(args) == 1 and fields:
        values = (options or {}).get("value_set", [])
        return Cmp(fields[0], "in", [_arrow_literal(v) for v in values])
    if name == "if_else" and len(args) == 3 and args[2] == ("literal", None):
        # DuckDB's x IN (...): if_else(is_valid(x), is_in(x, ...), null): rows where both hold
        return And((_from_arrow(args[0]), _from_arrow(args[1])))
    if name in _ARROW_CMP and len(args) == 2:
        op = _ARROW_CMP[name]
        if args[0][0] == "field" and args[1][0] == "literal":
            return Cmp(args[0][1], op, _arrow_literal(args[1][1]))
        if args[0][0] == "literal" and args[1][0] == "field":
            return Cmp(args[1][1], _FLIP[op], _arrow_literal(args[0][1]))
        raise ValueError("a comparison needs a column on one side and a value on the other")
    raise ValueError(f"idv's filters do not take {name}() here")


def _arrow_literal(value):
    """A pyarrow literal as filters compare it; ValueError for the ones they cannot."""
    if value is None:
        raise ValueError("it compares with null: test for it with is_null() / is_valid()")
    if isinstance(value, (bytes, bytearray)):
        raise ValueError("it compares with a bytes literal: give text columns a str "
                         "(pc.field(c) == \"abc\")")
    if not isinstance(value, (str, bool, int, float, np.datetime64, np.timedelta64)):
        raise ValueError(f"it compares with {value!r}, a literal idv's filters do not take")
    return value


def columns_of(node) -> list:
    """The columns a filter names, in first-use order."""
    out = []

    def walk(n):
        if isinstance(n, (Cmp, IsNull)):
            if n.column not in out:
                out.append(n.column)
        elif isinstance(n, (Not, BlocksOnly)):
            walk(n.part)
        else:
            for p in n.parts:
                walk(p)
    walk(node)
    return out


# ---------------------------------------------------------------------------------------------
# values: the literal in a column's terms
# ---------------------------------------------------------------------------------------------

def _ticks_of(value, item):
    """A literal for a DateTime / DateTimeOffset / TimeSpan column, in .NET ticks (ints are
    taken as ticks already; aware datetimes by their UTC instant, naive ones as they are)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.timedelta64)):
        return int(value)
    if item is T.TimeSpan:
        if hasattr(value, "to_timedelta64"):
            value = value.to_timedelta64()
        return int(np.asarray([np.timedelta64(value)]).astype("timedelta64[100ns]")
                   .view(np.int64)[0])
    if getattr(value, "tzinfo", None) is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if hasattr(value, "to_datetime64"):
        value = value.to_datetime64()
    return int(np.asarray([np.datetime64(value)]).astype("datetime64[100ns]")
               .view(np.int64)[0]) + T.EPOCH_TICKS


class _Column(NamedTuple):
    """What a filter needs of a column: its type, KeyValues and statistics."""
    name: str
    type: object
    key_values: list | None
    stats: object


def _literal(c, value):
    """`value` in column `c`'s comparable terms (None: a key text it does not have)."""
    item = T.item_type(c.type)
    if isinstance(c.type, T.Vector):
        raise ValueError(f"column {c.name!r} is a vector: filters compare scalar columns")
    if item in ticks.TIME_ITEMS:
        return _ticks_of(value, item)
    if isinstance(item, T.Key) and isinstance(value, str):
        kv = c.key_values
        if kv is None:
            raise ValueError(f"column {c.name!r} is a key without KeyValues: compare it with "
                             f"its stored numbers, not {value!r}")
        found = [i for i, v in enumerate(kv) if v == value]
        return found[0] + 1 if found else None
    if item is T.Text and not isinstance(value, str):
        raise ValueError(f"column {c.name!r} is Text: compare it with str, not {value!r}")
    if item is T.Boolean:
        return int(bool(value))
    return value


# ---------------------------------------------------------------------------------------------
# blocks: what statistics rule out
# ---------------------------------------------------------------------------------------------

def block_mask(node, columns, num_blocks):
    """A bool per block, False where the statistics rule out every row (`columns`: name ->
    _Column)."""
    if isinstance(node, And):
        out = np.ones(num_blocks, bool)
        for p in node.parts:
            out &= block_mask(p, columns, num_blocks)
        return out
    if isinstance(node, Or):
        out = np.zeros(num_blocks, bool)
        for p in node.parts:
            out |= block_mask(p, columns, num_blocks)
        return out
    if isinstance(node, Not):       # statistics bound values, not their negation: keep all
        return np.ones(num_blocks, bool)
    if isinstance(node, BlocksOnly):
        return block_mask(node.part, columns, num_blocks)
    c = columns[node.column]
    cs = c.stats
    if cs is None:
        return np.ones(num_blocks, bool)
    if isinstance(node, IsNull):
        return cs.present > 0 if node.negate else cs.missing > 0
    if isinstance(T.item_type(c.type), T.Key) and isinstance(node.value, str) or \
            node.op in ("in", "not in") and any(isinstance(v, str) for v in node.value) and \
            isinstance(T.item_type(c.type), T.Key):
        return np.ones(num_blocks, bool)            # text of keys: checked on the rows
    if node.op in ("in", "not in"):
        parts = tuple(Cmp(node.column, "==" if node.op == "in" else "!=", v)
                      for v in node.value)
        if not parts:
            return np.full(num_blocks, node.op == "not in")
        return block_mask(Or(parts) if node.op == "in" else And(parts), columns, num_blocks)
    v = _literal(c, node.value)
    if cs.domain == S.TEXT:
        return _text_blocks(cs, node.op, v.encode("utf-8"))
    if isinstance(v, float) and np.isnan(v):
        return np.full(num_blocks, node.op == "!=")
    present, lo, hi = cs.present > 0, cs.low, cs.high
    if isinstance(T.item_type(c.type), T.Key):      # a missing key is its stored 0 to numpy
        hi = np.where(present, hi, 0).astype(hi.dtype)
        lo = np.where(cs.missing > 0, 0, lo).astype(lo.dtype)
        present = present | (cs.missing > 0)
    with np.errstate(invalid="ignore"):
        if node.op == "==":
            return present & (lo <= v) & (v <= hi)
        if node.op == "!=":
            return ~(present & (cs.missing == 0) & (lo == v) & (hi == v))
        return present & {"<": lo < v, "<=": lo <= v, ">": hi > v, ">=": hi >= v}[node.op]


def all_match(node, columns, num_blocks):
    """A bool per block, True where the statistics show that every row matches (so a count
    needs no decoding); False where they cannot tell. Numbers, Booleans and times only."""
    if isinstance(node, (And, Or)):
        got = [all_match(p, columns, num_blocks) for p in node.parts]
        return np.logical_and.reduce(got) if isinstance(node, And) else \
            np.logical_or.reduce(got)
    none = np.zeros(num_blocks, bool)
    if isinstance(node, (Not, BlocksOnly)):
        return none
    c = columns[node.column]
    cs = c.stats
    if cs is None or cs.domain == S.TEXT or isinstance(T.item_type(c.type), T.Key):
        return none
    if isinstance(node, IsNull):
        return (cs.missing == 0) if node.negate else (cs.present == 0) & (cs.missing > 0)
    if node.op in ("in", "not in"):
        if node.op == "in" or not node.value:
            return none if node.op == "in" else np.ones(num_blocks, bool)
        return all_match(And(tuple(Cmp(node.column, "!=", v) for v in node.value)), columns,
                         num_blocks)
    v = _literal(c, node.value)
    if isinstance(v, float) and np.isnan(v):
        return none
    full, lo, hi = (cs.present > 0) & (cs.missing == 0), cs.low, cs.high
    with np.errstate(invalid="ignore"):
        sure = {"==": (lo == v) & (hi == v), "!=": (v < lo) | (v > hi), "<": hi < v,
                "<=": hi <= v, ">": lo > v, ">=": lo >= v}[node.op]
    return full & np.asarray(sure, bool)


def _text_blocks(cs, op, v):
    """The Text blocks whose bounds may hold a value `op` v (v: UTF-8 bytes)."""
    out = np.empty(len(cs.present), bool)
    for b, (lo, hi, flags, n) in enumerate(zip(cs.low, cs.high, cs.flags.tolist(),
                                               cs.present.tolist())):
        no_high = bool(flags & S.NO_HIGH)
        if op == "==":
            keep = lo <= v and (no_high or v <= hi)
        elif op == "!=":
            keep = not (flags & S.LOW_EXACT and flags & S.HIGH_EXACT and lo == hi == v)
        elif op in ("<", "<="):
            keep = lo < v or (op == "<=" and lo == v) or not flags & S.LOW_EXACT and lo == v
        else:
            keep = no_high or hi > v or (op == ">=" and hi == v)
        out[b] = keep and n > 0
    return out


# ---------------------------------------------------------------------------------------------
# rows: the exact test
# ---------------------------------------------------------------------------------------------

def row_mask(node, columns, values):
    """A bool per row of a batch (`values`: name -> read()'s form of the filter's columns)."""
    if isinstance(node, And):
        out = row_mask(node.parts[0], columns, values)
        for p in node.parts[1:]:
            out &= row_mask(p, columns, values)
        return out
    if isinstance(node, Or):
        out = row_mask(node.parts[0], columns, values)
        for p in node.parts[1:]:
            out |= row_mask(p, columns, values)
        return out
    if isinstance(node, Not):
        return ~row_mask(node.part, columns, values)
    if isinstance(node, BlocksOnly):
        return np.ones(vectors.num_rows_of(next(iter(values.values()))), bool)
    c = columns[node.column]
    x = S.comparable(c.type, values[node.column])
    if isinstance(node, IsNull):
        if x.dtype.kind == "f":
            missing = np.isnan(x)
        elif isinstance(T.item_type(c.type), T.Key):
            missing = x == 0
        else:
            missing = np.zeros(len(x), bool)
        return ~missing if node.negate else missing
    if node.op in ("in", "not in"):
        lits = [_literal(c, v) for v in node.value]
        lits = [v for v in lits if v is not None]
        hit = np.isin(x, np.asarray(lits, dtype=x.dtype if x.dtype != object else object)) \
            if lits else np.zeros(len(x), bool)
        return hit if node.op == "in" else ~hit
    v = _literal(c, node.value)
    if v is None:                   # a key text it does not have
        return np.full(len(x), node.op == "!=")
    if isinstance(T.item_type(c.type), T.Key) and isinstance(node.value, str) and \
            node.op not in ("==", "!="):
        raise ValueError(f"column {c.name!r}: a key compares with text by == and != (in, not "
                         f"in), not {node.op}")
    if x.dtype.kind == "u" and isinstance(v, (int, np.integer)) and v < 0:
        x, v = x.astype(np.int64), int(v)           # negative literals against unsigned
    with np.errstate(invalid="ignore"):
        out = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
               ">": np.greater, ">=": np.greater_equal}[node.op](x, v)
    return np.asarray(out, bool)


# ---------------------------------------------------------------------------------------------
# a file read through a filter
# ---------------------------------------------------------------------------------------------

def file_columns(f, node):
    """name -> _Column for the columns the filter names (KeyError naming one not in `f`)."""
    out = {}
    stats = f.statistics
    for name in columns_of(node):
        if name not in f:
            raise KeyError(f"the filter names column {name!r}, which the file does not have "
                           f"(columns: {', '.join(f.column_names)})")
        col = f[name]
        kv = col.metadata.get("KeyValues") if "KeyValues" in col.metadata_kinds else None
        cs = None if stats is None else stats.columns.get(col.index)
        out[name] = _Column(name, col.type, None if kv is None else list(kv), cs)
    return out


def block_filter(node):
    """A scan's block_filter(part, file) for the filter `node` (statistics where the file
    has them)."""
    def keep(_part, f):
        cols = file_columns(f, node)
        nb = f.columns[0].num_blocks if f.columns else 0
        return block_mask(node, cols, nb)
    return keep


def take(value, rows):
    """Rows `rows` (int64 positions) of a value in read()'s form."""
    if isinstance(value, np.ndarray):
        return value[rows]
    if hasattr(value, "take"):
        return value.take(rows)
    return value[rows]


def filtered(source, columns, filter_, batch_rows=None, rows=None, blocks=None, **how):
    """(batch, positions, values) of the rows of `source` (an IdvFile or a Dataset) that
    match `filter_`, in row order: `positions` (int64) of the matching rows among the scan
    batch's, `values` one per column of `columns` in read()'s form. `rows`, `batch_rows` and
    `how` (window_bytes, ahead): as the scan's; `blocks`: a block_filter(part, file) of the
    caller's, whose blocks are read where the filter's statistics allow."""
    node = parse(filter_)
    wanted = list(columns)
    extra = [c for c in columns_of(node) if c not in wanted]
    names = wanted + extra
    keep = block_filter(node)
    if blocks is not None:
        by_statistics = keep

        def keep(part, f):
            return by_statistics(part, f) & np.asarray(blocks(part, f), bool)
    cache = {}

    def cols_of(f):
        if id(f) not in cache:
            cache.clear()
            cache[id(f)] = file_columns(f, node)
        return cache[id(f)]
    for batch in scan(source, names, NumpyColumn, block_filter=keep, batch_rows=batch_rows,
                      rows=rows, **how):
        # the file of the batch: through the block filter's file (the scan opened it)
        values = dict(zip(names, batch.values))
        f = batch_file(source, batch)
        mask = row_mask(node, cols_of(f), values)
        hits = np.flatnonzero(mask)
        yield batch, hits, [take(values[n], hits) for n in wanted]


def batch_file(source, batch):
    """The open file a batch of `source` came from."""
    return source.open_file(batch.part) if hasattr(source, "open_file") else source


def read(f, columns, filter_, rows=None):
    """dict name -> read()'s form of the rows of file `f` matching `filter_` (`columns`:
    the names to return; `rows`: a slice of the file's rows to look in)."""
    return matching(f, columns, filter_, rows)[1]


def matching(f, columns, filter_, rows=None):
    """(positions, values): the file's row numbers (int64) of the rows of file `f` matching
    `filter_` and, as read() does, dict name -> their values (`rows`: a slice to look in)."""
    parts, at = [], []
    for b, hits, vals in filtered(f, columns, filter_, rows=rows):
        parts.append(vals)
        at.append(b.start + hits * b.step)
    out = {}
    for k, name in enumerate(columns):
        chunks = [p[k] for p in parts if vectors.num_rows_of(p[k])]
        out[name] = vectors.concat_reads(chunks) if chunks else f[name][0:0]
    return (np.concatenate(at) if at else np.zeros(0, np.int64)).astype(np.int64), out


def kept_partitions(source, parts, filter_):
    """The partitions (idv.scan.Partition) of `source` (an IdvFile or a Dataset) that may
    hold rows matching `filter_`: those with a block that the statistics do not rule out."""
    keep = block_filter(parse(filter_))
    masks = {}
    for p in parts:
        if p.part not in masks:
            masks[p.part] = keep(p.part, batch_file(source, p))
    return [p for p in parts if masks[p.part][p.b0:p.b1].any()]
