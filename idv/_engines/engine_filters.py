"""Engines' predicates as idv filters: polars expressions, pyarrow (and DuckDB's) expressions
and Spark's pushed filters become idv._scan.filter_tree trees here, under one policy of what is
taken.

idv compares exactly (idv._values.comparison); an engine may not: polars casts a float literal to a
Float32 column and holds NaN equal to NaN, Spark orders NaN above every number, Arrow
compares an integer column with a float in float64. So a comparison is taken only where the
engine's meaning and idv's agree on every value the column can hold (`literal`): text with
str, Booleans with bool, integers with integers the column's type holds, DateTime with whole
ticks, and, where the engine compares IEEE floats as idv does, floats with floats. Whatever
is not taken is handed back: the engine tests those rows by its own rules, and no block is
skipped on their account (Arrow's: none for an ``and`` that holds such a part, which Arrow
tests on every row, as over a table in memory, raising where it raises there). A key the
engine sees as its Text labels (a dictionary, a polars Categorical: `label_columns`) is
taken compared with a str by ==, != and in, as idv's filters compare a key with a label,
where the engine's null (the missing key 0) can change nothing:
`!=` also leaves out the key 0, and a ``not``, or Arrow's plain (not Kleene) ``or``, over such
a key is not taken. Other comparisons of keys, DateTimeOffset (a struct), RowId and vectors
are never taken. A time column read floored to microseconds (`floored`) holds other
values for the engine than the ticks stored: a comparison on it is taken as the comparison of
the ticks that holds exactly where the engine's, on the floored values, does (`_on_floored`).
"""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np

from idv._scan import filter_tree
from idv._values import literals, ticks
from idv import types as T
from idv.errors import no_column

ARROW, POLARS, SPARK = "arrow", "polars", "spark"
NO = object()                     # not taken
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_INTEGERS = (T.SByte, T.Byte, T.Int16, T.UInt16, T.Int32, T.UInt32, T.Int64, T.UInt64)


# ---------------------------------------------------------------------------------------------
# the policy: which literals idv takes from which engine
# ---------------------------------------------------------------------------------------------

def literal(engine, type_, op, value, labelled=False):
    """`value` as idv's filters take it in a comparison `op` with a column of idv type
    `type_` (`labelled`: a key the engine sees as its Text labels), where `engine` (ARROW,
    POLARS, SPARK) means the same by it on every row; NO where its meaning could differ (the
    engine then tests those rows itself)."""
    if isinstance(type_, T.Vector):
        return NO
    item = T.item_type(type_)
    if labelled and isinstance(item, T.Key):
        return value if isinstance(value, str) and op in ("==", "!=") else NO
    if isinstance(value, (bool, np.bool_)):
        return bool(value) if item is T.Boolean else NO
    if item is T.Boolean:
        return NO
    if item is T.Text:
        return value if isinstance(value, str) else NO
    if item in _INTEGERS or isinstance(item, T.Key) and engine == SPARK:
        return _integer(item, value, beyond=engine == ARROW)
    if item in (T.Single, T.Double):
        return _float(engine, op, value)
    if item is T.DateTime:
        return _datetime(engine, value)
    if item is T.TimeSpan and engine == POLARS and isinstance(value, np.timedelta64):
        return value
    return NO


def label_columns(schema):
    """The columns of an engine's Arrow `schema` that hold keys as their Text labels (a
    dictionary of strings: a key with usable KeyValues of Text), for from_arrow and
    from_polars: the engine compares those with a str as idv compares a key with a label
    (docs/filters.md); other keys it sees as raw numbers, and refuses a str."""
    from idv._values.arrow_types import import_pyarrow, is_string_type
    pa = import_pyarrow()
    return frozenset(f.name for f in schema if pa.types.is_dictionary(f.type)
                     and is_string_type(pa, f.type.value_type))


def floored(types, unit, safe):
    """The time columns of `types` (name -> idv type) that a read with ``datetime=unit`` and
    `safe` floors to microseconds (ticks.ticks_to_unit), whose floored values an engine
    compares: a frozenset of names, for from_arrow and from_polars."""
    return frozenset(n for n, t in types.items() if T.item_type(t) in ticks.TIME_ITEMS
                     and ticks.unit_of(unit, n, safe) == ("us", False))


def _on_floored(node, item):
    """A comparison (taken: its literal a time) of a column whose values the engine sees
    floored to microseconds, as one of the stored ticks that holds for the same rows. Of the
    literal's ticks q, lo is the least whole microsecond >= q, hi the least > q: floor(v) >= q
    exactly where v >= lo, floor(v) > q where v >= hi, == between them. The read never floors
    below ticks.US_MIN microseconds (TimeSpan.MinValue): a bound at or below it holds every
    value."""
    if node.op in ("in", "not in"):
        one, joined = ("==", filter_tree.Or) if node.op == "in" else ("!=", filter_tree.And)
        return joined(tuple(_on_floored(filter_tree.Cmp(node.column, one, v), item)
                            for v in node.value)) if node.value else node
    shift = 0 if item is T.TimeSpan else T.EPOCH_TICKS       # 100-ns counts from 1970
    q = literals.time_ticks(node.value, item) - shift
    lo, hi = (t if t > ticks.US_MIN * 10 else ticks.INT64_MIN
              for t in (-(-q // 10) * 10, q // 10 * 10 + 10))
    lo, hi = lo + shift, hi + shift                         # Python ints: .NET ticks

    def cmp(op, t):
        return filter_tree.Cmp(node.column, op, t)
    return {">": cmp(">=", hi), ">=": cmp(">=", lo), "<": cmp("<", lo), "<=": cmp("<", hi),
            "==": filter_tree.And((cmp(">=", lo), cmp("<", hi))),
            "!=": filter_tree.Or((cmp("<", lo), cmp(">=", hi)))}[node.op]


def _integer(item, value, beyond=False):
    """An integer literal of an integer column; one beyond the column's range too where
    `beyond` (Arrow: its answer is exact, every row or none, where pyarrow would compare the
    column cast to the literal's type, and refuse a UInt64 above 2^63 against a negative)."""
    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        value = int(value)                  # Spark's decimal(20, 0): UInt64
    if not isinstance(value, (int, np.integer)) or isinstance(value, np.timedelta64):
        return NO
    info = np.iinfo((item.raw if isinstance(item, T.Key) else item).dtype)
    return int(value) if beyond or info.min <= int(value) <= info.max else NO


def _float(engine, op, value):
    if engine == POLARS:                # a float literal cast to Float32, NaN equal to NaN
        return NO
    if isinstance(value, (float, np.floating)):
        if value != value:
            return NO
        if engine == SPARK and op in (">", ">="):       # NaN is Spark's largest value
            return NO
        return float(value)
    return NO           # an integer: Arrow casts it to a Single column's float32, or refuses


def _datetime(engine, value):
    if engine == SPARK:                 # whole microseconds: read so, Spark's values are ours
        return value if isinstance(value, dt.datetime) and value.tzinfo is None else NO
    if not isinstance(value, np.datetime64) or np.isnat(value):
        return NO
    unit = np.datetime_data(value.dtype)[0]
    if unit in ("D", "h", "m", "s", "ms", "us"):
        return value
    return value if unit == "ns" and int(value.astype(np.int64)) % 100 == 0 else NO


# ---------------------------------------------------------------------------------------------
# pyarrow (and DuckDB through it)
# ---------------------------------------------------------------------------------------------

def from_arrow(expression, types, floored=frozenset(), labels=frozenset()):
    """(tree, exact, columns) for a pyarrow compute Expression over columns `types` (name ->
    idv type; `floored`: the time columns read floored to microseconds; `labels`: the keys
    read as their Text labels, label_columns): `tree` skips only blocks in which no row can
    match by Arrow's rules (None: skip none), `exact` says it also tests the rows as Arrow
    does, `columns` are the columns the expression needs (None: unknown, read them all)."""
    try:
        node = filter_tree.parse(expression)
    except (ValueError, TypeError, SyntaxError):
        return None, False, _arrow_columns(expression, types)
    columns = filter_tree.columns_of(node)
    if labels and set(labels) & set(columns) and _plain_or(expression):
        labels = frozenset()
    tree, exact = _arrow_tree(node, types, floored, labels)
    return tree, exact, columns


def _plain_or(expression):
    """Whether `expression` holds Arrow's plain ``or`` (``pc.or_``), null where either side
    is (Kleene's, ``|`` and DuckDB's, is true where either side is): a missing key's
    comparison is null to Arrow, false to idv's filters."""
    from idv._values import arrow_expressions
    todo = [arrow_expressions.tree(expression)]
    while todo:
        node = todo.pop()
        if node[0] == "call":
            if node[1] == "or":
                return True
            todo.extend(node[2])
    return False


def _arrow_columns(expression, types):
    """The columns a pyarrow Expression that idv's filters do not take names (pyarrow tests
    the rows on those alone: is_nan, arithmetic, two columns compared; of one naming none, the
    first column, whose rows pyarrow counts); None where its tree cannot be read."""
    from idv._values import arrow_expressions
    try:
        todo = [arrow_expressions.tree(expression)]
    except ValueError:
        return None
    out = []
    while todo:
        node = todo.pop()
        if node[0] == "field":
            if node[1] not in types:
                raise _unknown(node[1], types)
            out.append(node[1])
        elif node[0] == "call":
            todo.extend(reversed(node[2]))
    return list(dict.fromkeys(out)) or list(types)[:1]


def _unknown(column, types):
    """The KeyError of a filter naming a column the dataset does not have."""
    return no_column(column, list(types), by="filter: ")


def _arrow_tree(node, types, floored, labels):
    if isinstance(node, filter_tree.And):
        # a part not taken is tested by Arrow on every row, the rows the other parts rule
        # out included, as over the table in memory: where it raises on a value (an integer
        # column compared with a float, cast to float32: beyond its exact range), so does
        # the read, whatever the statistics say
        got = [_arrow_tree(p, types, floored, labels) for p in node.parts]
        if any(t is None for t, _ in got):
            return None, False
        return filter_tree.And(tuple(t for t, _ in got)), all(e for _, e in got)
    if isinstance(node, filter_tree.Or):
        got = [_arrow_tree(p, types, floored, labels) for p in node.parts]
        if any(t is None for t, _ in got):
            return None, False
        return filter_tree.Or(tuple(t for t, _ in got)), all(e for _, e in got)
    if isinstance(node, filter_tree.Not):
        if labels & set(filter_tree.columns_of(node.part)):
            return None, False          # not (null) is null to Arrow, not true
        tree, exact = _arrow_tree(node.part, types, floored, labels)
        return (None, False) if tree is None or not exact else (filter_tree.Not(tree), exact)
    if node.column not in types:
        raise _unknown(node.column, types)
    t = types[node.column]
    item = T.item_type(t)
    if isinstance(node, filter_tree.IsNull):
        if node.column in labels:       # Arrow's null: the missing key, idv's isnull
            return node, True
        if isinstance(t, T.Vector) or isinstance(item, T.Key) or \
                item in (T.DateTimeOffset, T.RowId):
            return None, False
        if item in (T.Single, T.Double):        # Arrow: NaN is a value, not a null
            return (None, False) if node.negate else (node, False)
        return node, True
    return _taken(ARROW, node, t, node.column in floored, node.column in labels)


def _taken(engine, node, type_, floored=False, labelled=False):
    """(a tree of Cmp with idv's literals, True) for a comparison `engine` means as idv does
    (on a column read `floored` to microseconds, as it does on the floored values; of a
    `labelled` key, by its labels), else (None, False)."""
    if node.op in ("in", "not in"):
        value = [literal(engine, type_, "==", v, labelled) for v in node.value]
        if any(v is NO for v in value):
            return None, False
        item = T.item_type(type_)
        if engine == ARROW and item is T.Single and \
                any(float(np.float32(v)) != v for v in value):
            return None, False      # Arrow casts the set to float32: a value it rounds matches
        if engine == ARROW and item in (T.Single, T.Double) and any(v == 0 for v in value):
            return None, False      # Arrow's is_in tells -0.0 from 0.0; idv's == does not
    else:
        value = literal(engine, type_, node.op, node.value, labelled)
        if value is NO:
            return None, False
    taken = filter_tree.Cmp(node.column, node.op, value)
    if labelled and node.op in ("!=", "not in"):       # the missing key: null, never true
        return filter_tree.And((taken, filter_tree.Cmp(node.column, "!=", 0))), True
    return (_on_floored(taken, T.item_type(type_)) if floored else taken), True


# ---------------------------------------------------------------------------------------------
# polars
# ---------------------------------------------------------------------------------------------

_POLARS_OPS = {"Eq": "==", "NotEq": "!=", "Lt": "<", "LtEq": "<=", "Gt": ">", "GtEq": ">="}
_UNITS = {"Nanoseconds": "ns", "Microseconds": "us", "Milliseconds": "ms"}


def from_polars(node, types, floored=frozenset(), labels=frozenset()):
    """(tree, exact) for a polars expression's JSON form (its ``meta.serialize``) over columns
    `types` (`floored`: the time columns read floored to microseconds; `labels`: the keys read
    as Categoricals of their Text labels, label_columns): `tree` skips only
    blocks in which no row can match by polars' rules (None where nothing of it is taken),
    `exact` says it also tests the rows as polars does (every part of it taken)."""
    if not isinstance(node, dict) or "BinaryExpr" not in node:
        return None, False
    b = node["BinaryExpr"]
    op = b["op"]
    if op in ("And", "LogicalAnd", "Or", "LogicalOr"):
        got = [from_polars(b["left"], types, floored, labels),
               from_polars(b["right"], types, floored, labels)]
        kept = [t for t, _ in got if t is not None]
        exact = len(kept) == 2 and all(e for _, e in got)
        if op in ("Or", "LogicalOr"):
            return (filter_tree.Or(tuple(kept)), exact) if len(kept) == 2 else (None, False)
        return (None if not kept else kept[0] if len(kept) == 1 else
                filter_tree.And(tuple(kept))), exact
    if op not in _POLARS_OPS:
        return None, False
    sym, left, right = _POLARS_OPS[op], b["left"], b["right"]
    if "Column" in right and "Literal" in left:
        left, right, sym = right, left, _FLIP[sym]
    if "Column" not in left or "Literal" not in right or left["Column"] not in types:
        return None, False
    value = _polars_literal(right["Literal"])
    return (None, False) if value is NO else _taken(
        POLARS, filter_tree.Cmp(left["Column"], sym, value), types[left["Column"]],
        left["Column"] in floored, left["Column"] in labels)


def _polars_literal(lit):
    """A polars literal's value (its JSON form), NO for a kind not read here. An untyped
    float (``Dyn Float``) is cast by polars to the column's type: not taken."""
    if "Dyn" in lit:
        (kind, value), = lit["Dyn"].items()
        return value if kind == "Int" else NO
    (kind, value), = lit.get("Scalar", {"": None}).items()
    if kind == "Datetime" and value[1] in _UNITS and value[2] is None:
        return np.datetime64(value[0], _UNITS[value[1]])
    if kind == "Duration" and value[1] in _UNITS:
        return np.timedelta64(value[0], _UNITS[value[1]])
    if kind in ("String", "Boolean") or kind.startswith(("Int", "UInt")):
        return value
    return NO


# ---------------------------------------------------------------------------------------------
# Spark
# ---------------------------------------------------------------------------------------------

_SPARK_OPS = {"EqualTo": "==", "EqualNullSafe": "==", "GreaterThan": ">",
              "GreaterThanOrEqual": ">=", "LessThan": "<", "LessThanOrEqual": "<=", "In": "in"}


def from_spark(f, types, safe=True):
    """Spark's pushed filter `f` (pyspark.sql.datasource) as an idv filter term ``(column,
    op, value)``; True for one every row passes (``IS NOT NULL``: Spark sees no nulls in an
    idv column); None for one idv does not take, which Spark then applies: filters on
    columns not in `types` (name -> idv type of the columns read) or on nested fields,
    string patterns, ``IS NULL``, and comparisons `literal` does not take (times read with
    ``safe=false`` are floored by the read: none taken)."""
    kind = type(f).__name__
    negate = kind == "Not"
    if negate:
        f = f.child
        kind = type(f).__name__
    path = getattr(f, "attribute", ())
    if len(path) != 1 or path[0] not in types:
        return None
    column, type_ = path[0], types[path[0]]
    if kind == "IsNotNull" and not negate or kind == "IsNull" and negate:
        return True
    op = _SPARK_OPS.get(kind)
    if negate:
        op = {"==": "!=", "in": "not in"}.get(op)
    if op is None or (T.item_type(type_) is T.DateTime and not safe):
        return None
    values = list(f.value) if op in ("in", "not in") else [f.value]
    taken = [literal(SPARK, type_, op, v) for v in values]
    if any(v is NO for v in taken):
        return None
    return column, op, taken if op in ("in", "not in") else taken[0]
