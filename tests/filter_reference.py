"""What a filter keeps, stated independently of idv: a pure-Python evaluator of the filter rule
(docs/filters.md) and hypothesis strategies for typed data and predicates.

The evaluator never looks at idv's filter code: values and literals become exact numbers
(``fractions.Fraction``, .NET ticks), so it answers "what should match" by arithmetic, not by
the casts a column's dtype would do. Predicates are small trees (``cmp``, ``isnull``,
``notnull``, ``and``, ``or``, ``not``) rendered into each form a user writes: DNF tuples, a
Python-syntax string, a pyarrow expression, and the engines' own languages (polars, SQL).
"""
from __future__ import annotations

import datetime as dt
import keyword
import math
import re
import warnings
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from hypothesis import strategies as st

# ---- the types -----------------------------------------------------------------------------

INT_RANGES = {"I1": (-2**7, 2**7 - 1), "U1": (0, 2**8 - 1), "I2": (-2**15, 2**15 - 1),
              "U2": (0, 2**16 - 1), "I4": (-2**31, 2**31 - 1), "U4": (0, 2**32 - 1),
              "I8": (-2**63, 2**63 - 1), "U8": (0, 2**64 - 1)}
INT_DTYPES = {"I1": np.int8, "U1": np.uint8, "I2": np.int16, "U2": np.uint16, "I4": np.int32,
              "U4": np.uint32, "I8": np.int64, "U8": np.uint64}
FLOATS = ("R4", "R8")
NUMBERS = tuple(INT_RANGES) + FLOATS
TIMES = ("DT", "TS", "DZ")
KINDS = NUMBERS + ("BL", "TX", "KEY") + TIMES

TICKS_PER_SECOND = 10**7
TICKS_PER_MINUTE = 60 * TICKS_PER_SECOND
EPOCH_TICKS = 621355968000000000            # 1970-01-01 in ticks from 0001-01-01
MAX_TICKS = 3155378975999999999             # 9999-12-31T23:59:59.9999999
TS_MIN, TS_MAX = -(2**63) + 1, 2**63 - 1    # TimeSpan.MinValue is NaT in numpy: left out
DZ_CLOCK = (840 * TICKS_PER_MINUTE, MAX_TICKS - 840 * TICKS_PER_MINUTE)
UNIT_TICKS = {"W": Fraction(7 * 86400 * TICKS_PER_SECOND), "D": Fraction(86400 * TICKS_PER_SECOND),
              "h": Fraction(3600 * TICKS_PER_SECOND), "m": Fraction(TICKS_PER_MINUTE),
              "s": Fraction(TICKS_PER_SECOND), "ms": Fraction(10**4), "us": Fraction(10),
              "ns": Fraction(1, 100)}
_DAY0 = dt.datetime(1, 1, 1)
_NS_RANGE = (-(2**63) + 1, 2**63 - 1)       # what a datetime64[ns] / pandas value can hold


@dataclass
class Col:
    """One column: its kind (I1..U8, R4, R8, BL, TX, KEY, DT, TS, DZ) and its values in exact
    Python form: int for integers, keys (raw, 0 = missing), DateTime and TimeSpan (ticks);
    float for Single and Double (a Single's value widened exactly); bool; str; for
    DateTimeOffset (utc ticks, offset minutes)."""
    kind: str
    values: list
    key_values: list = field(default_factory=list)   # KEY: the labels, key k is [k - 1]
    key_raw: str = "U4"                               # KEY: the stored type (U1, U2, U4, U8)


@dataclass
class Table:
    n: int
    columns: dict   # name -> Col, in file order


# ---- exact values --------------------------------------------------------------------------

class Refused(Exception):
    """The filter must be refused (TypeError or ValueError naming column, operator, literal)."""


NEG_INF, POS_INF = (-1, Fraction(0)), (1, Fraction(0))


def _num(x) -> tuple:
    """An ordered exact number: (-1, 0) is -inf, (1, 0) +inf, (0, Fraction) a finite value."""
    if isinstance(x, (int, Fraction)):
        return (0, Fraction(x))
    x = float(x)
    if math.isinf(x):
        return POS_INF if x > 0 else NEG_INF
    return (0, Fraction(x))


def _unit_ticks(dtype) -> Fraction:
    unit, count = np.datetime_data(dtype)
    if unit not in UNIT_TICKS:
        raise AssertionError(f"unit {unit} is not generated")
    return UNIT_TICKS[unit] * count


def literal_value(lit) -> tuple[str, object]:
    """(category, exact value) of one literal, judged from the literal alone:
    bool (0 / 1), num (an ordered exact number), nan, str, datetime (naive: ticks from
    0001-01-01, a Fraction when finer than a tick), aware (a zone-aware instant: UTC ticks),
    timedelta (ticks), other (anything else: lists, dicts, bytes, None)."""
    if isinstance(lit, np.datetime64):
        return "datetime", EPOCH_TICKS + int(lit.astype(np.int64)) * _unit_ticks(lit.dtype)
    if isinstance(lit, np.timedelta64):      # before the integers: numpy makes it one
        return "timedelta", int(lit.astype(np.int64)) * _unit_ticks(lit.dtype)
    if isinstance(lit, (bool, np.bool_)):
        return "bool", (0, Fraction(int(bool(lit))))
    if isinstance(lit, (int, np.integer)):
        return "num", (0, Fraction(int(lit)))
    if isinstance(lit, (float, np.floating)):
        return ("nan", None) if math.isnan(float(lit)) else ("num", _num(lit))
    if isinstance(lit, str):
        return "str", lit
    try:
        import pandas as pd
    except ImportError:     # pragma: no cover
        pd = None
    if pd is not None and isinstance(lit, pd.Timestamp):
        ticks = EPOCH_TICKS + Fraction(int(lit.value), 100)   # .value: UTC nanoseconds
        return ("datetime" if lit.tzinfo is None else "aware"), ticks
    if pd is not None and isinstance(lit, pd.Timedelta):
        return "timedelta", Fraction(int(lit.value), 100)
    if isinstance(lit, dt.datetime):
        if lit.tzinfo is None:
            return "datetime", Fraction(_delta_ticks(lit - _DAY0))
        local = _delta_ticks(lit.replace(tzinfo=None) - _DAY0)
        return "aware", Fraction(local - _delta_ticks(lit.utcoffset()))
    if isinstance(lit, dt.timedelta):
        return "timedelta", Fraction(_delta_ticks(lit))
    return "other", None


_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)(?:[T ](\d\d):(\d\d)(?::(\d\d)(?:\.(\d{1,9}))?)?)?")


def iso_ticks(text: str):
    """Ticks from 0001-01-01 of an ISO 8601 date and time without a zone (exact: a Fraction
    when finer than a tick), or None."""
    m = _ISO.fullmatch(text)
    if m is None:
        return None
    y, mo, d, h, mi, sec, frac = m.groups()
    try:
        day = dt.datetime(int(y), int(mo), int(d))
    except ValueError:
        return None
    seconds = int(h or 0) * 3600 + int(mi or 0) * 60 + int(sec or 0)
    fraction = Fraction(int(frac), 10 ** len(frac)) if frac else Fraction(0)
    return _delta_ticks(day - _DAY0) + (seconds + fraction) * TICKS_PER_SECOND


def _delta_ticks(d: dt.timedelta) -> int:
    return ((d.days * 86400 + d.seconds) * 10**6 + d.microseconds) * 10


def span_text_ticks(text: str):
    """Ticks of .NET's constant text of a TimeSpan, ``[-][d.]hh:mm:ss[.fffffff]``, or None."""
    m = re.fullmatch(r"(-?)(?:(\d+)\.)?(\d\d):(\d\d):(\d\d)(?:\.(\d{1,7}))?", text)
    if m is None or int(m.group(3)) > 23 or int(m.group(4)) > 59 or int(m.group(5)) > 59:
        return None
    sign, days, h, mi, sec, frac = m.groups()
    span = dt.timedelta(days=int(days or 0), hours=int(h), minutes=int(mi), seconds=int(sec))
    ticks = _delta_ticks(span) + (int(frac.ljust(7, "0")) if frac else 0)
    return Fraction(-ticks if sign else ticks)


def span_text(ticks: int) -> str:
    """.NET's constant text of a TimeSpan of `ticks` (what TimeSpan.ToString() gives)."""
    days, rest = divmod(abs(ticks), 864_000_000_000)
    seconds, frac = divmod(rest, TICKS_PER_SECOND)
    text = f"{days}." if days else ""
    text += f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return ("-" if ticks < 0 else "") + text + (f".{frac:07d}" if frac else "")


# what each column kind compares with; anything else is refused
_ACCEPTS = {**{k: {"num", "nan", "bool"} for k in NUMBERS}, "BL": {"num", "nan", "bool"},
            "TX": {"str"}, "KEY": {"num", "nan", "str"}, "DT": {"datetime"},
            "TS": {"timedelta"}, "DZ": {"aware"}}
OPS = ("==", "!=", "<", "<=", ">", ">=", "in", "not in")
KEY_TEXT_OPS = ("==", "!=", "in", "not in")


def _cell(col: Col, v):
    """A stored value in the form it compares in: ('nan', None) or (kind, exact value)."""
    k = col.kind
    if k in FLOATS:
        return ("nan", None) if math.isnan(v) else ("num", _num(v))
    if k in INT_RANGES or k == "BL" or k == "KEY":
        return "num", (0, Fraction(int(v)))
    if k == "TX":
        return "str", v
    if k == "DZ":
        return "instant", Fraction(v[0])
    return "instant", Fraction(v)


def _compare(a, op, b) -> bool:
    return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b,
            ">=": a >= b}[op]


def _literal_for(col: Col, name: str, op: str, lit):
    """The literal as it compares with this column: ('nan', None), ('num', x), ('str', s),
    ('label', s) for a key compared by its text, ('instant', ticks); Refused otherwise."""
    cat, value = literal_value(lit)
    if cat == "str" and col.kind == "DT":       # an ISO 8601 date and time, without a zone
        cat, value = "datetime", iso_ticks(lit)
        if value is None:
            raise Refused(f"column {name!r} {op} {lit!r}: not an ISO date")
    if cat == "str" and col.kind == "TS":       # .NET's text of a TimeSpan
        cat, value = "timedelta", span_text_ticks(lit)
        if value is None:
            raise Refused(f"column {name!r} {op} {lit!r}: not a TimeSpan's text")
    if cat not in _ACCEPTS[col.kind]:
        raise Refused(f"column {name!r} {op} {lit!r}: {cat} literal")
    if cat == "bool":
        cat = "num"
    if col.kind == "KEY" and cat == "str":
        if op not in KEY_TEXT_OPS:
            raise Refused(f"column {name!r} {op} {lit!r}: keys compare text by ==, !=, in")
        return "label", value
    if cat in ("datetime", "aware", "timedelta"):
        return "instant", value
    return cat, value


def _atom(col: Col, name: str, op: str, lit):
    """The per-row truth of one comparison, as a function of the row's stored value."""
    if op not in OPS:
        raise Refused(f"unknown operator {op!r}")
    if op in ("in", "not in"):
        if isinstance(lit, (str, bytes, dict)) or not isinstance(lit, (list, tuple, set)):
            raise Refused(f"column {name!r} {op} {lit!r}: not a list of values")
        members = [_literal_for(col, name, op, x) for x in lit]
        inside = lambda v: any(_equal(col, v, m) for m in members)  # noqa: E731
        return inside if op == "in" else (lambda v: not inside(v))
    if isinstance(lit, (list, tuple, set, dict, bytes)):
        raise Refused(f"column {name!r} {op} {lit!r}: not a single value")
    m = _literal_for(col, name, op, lit)

    def test(v):
        if m[0] == "label":
            return _equal(col, v, m) if op == "==" else not _equal(col, v, m)
        cat, x = _cell(col, v)
        if cat == "nan" or m[0] == "nan":
            return op == "!="
        return _compare(x, op, m[1])
    return test


def _equal(col: Col, v, m) -> bool:
    if m[0] == "label":
        return v != 0 and col.key_values[v - 1] == m[1]
    cat, x = _cell(col, v)
    return cat != "nan" and m[0] != "nan" and x == m[1]


def _is_null(col: Col, v) -> bool:
    if col.kind in FLOATS:
        return math.isnan(v)
    if col.kind == "KEY":
        return v == 0
    return False


def compile_predicate(columns: dict, pred):
    """The predicate as a function of the row index; raises Refused for a filter the rule
    refuses (checked whole, before any row, so an invalid filter is refused on an empty file
    too). Nodes are tuples: ('cmp', col, op, lit), ('isnull', col), ('notnull', col),
    ('and', parts), ('or', parts), ('not', part); a chain of ``not`` is folded, so its depth
    costs nothing."""
    def column(name):
        if name not in columns:
            raise Refused(f"no column {name!r}")
        return columns[name]

    def go(p):
        flips = 0
        while p[0] == "not":
            p, flips = p[1], flips + 1
        kind = p[0]
        if kind == "cmp":
            c = column(p[1])
            test = _atom(c, p[1], p[2], p[3])
            f = lambda i: test(c.values[i])  # noqa: E731
        elif kind in ("isnull", "notnull"):
            c = column(p[1])
            want = kind == "isnull"
            f = lambda i: _is_null(c, c.values[i]) == want  # noqa: E731
        elif kind in ("and", "or"):
            fs = [go(q) for q in p[1]]
            agg = all if kind == "and" else any
            f = lambda i: agg(g(i) for g in fs)  # noqa: E731
        else:
            raise AssertionError(p)
        return (lambda i: not f(i)) if flips % 2 else f
    return go(pred)


def expected_rows(columns: dict, predicate, n: int | None = None) -> list[int]:
    """The row numbers the predicate keeps, by the rule; raises Refused when it must be
    refused. ``columns``: name -> Col (all of n rows)."""
    if n is None:
        n = len(next(iter(columns.values())).values) if columns else 0
    f = compile_predicate(columns, predicate)
    return [i for i in range(n) if f(i)]


# ---- predicate shapes and forms -------------------------------------------------------------

def cmp(col, op, lit):
    return ("cmp", col, op, lit)


def columns_of(pred) -> set:
    out, stack = set(), [pred]
    while stack:
        p = stack.pop()
        if p[0] in ("cmp", "isnull", "notnull"):
            out.add(p[1])
        elif p[0] == "not":
            stack.append(p[1])
        else:
            stack.extend(p[1])
    return out


def literals_of(pred) -> list:
    out, stack = [], [pred]
    while stack:
        p = stack.pop()
        if p[0] == "cmp":
            out.extend(p[3] if p[2] in ("in", "not in") else [p[3]])
        elif p[0] == "not":
            stack.append(p[1])
        elif p[0] in ("and", "or"):
            stack.extend(p[1])
    return out


def to_dnf(pred):
    """DNF tuples (pyarrow.parquet's form) when the tree is one: a comparison, an ``and`` of
    comparisons, or an ``or`` of those; else None. In-lists are passed as lists."""
    def conj(p):
        parts = p[1] if p[0] == "and" else [p]
        if not all(q[0] == "cmp" for q in parts):
            return None
        return [(q[1], q[2], list(q[3]) if q[2] in ("in", "not in") else q[3]) for q in parts]
    if pred[0] == "or":
        out = [conj(p) for p in pred[1]]
        return None if any(c is None for c in out) else out
    return conj(pred)


def _string_name(name, force_col):
    if not force_col and name.isidentifier() and not keyword.iskeyword(name) and \
            name not in ("col", "isnull", "notnull", "True", "False", "None"):
        return name
    return f"col({name!r})"


def _string_literal(lit, kind):
    if isinstance(lit, (np.datetime64, np.timedelta64)):
        return None
    if isinstance(lit, (bool, np.bool_)):
        return repr(bool(lit))
    if isinstance(lit, (int, np.integer)):
        return repr(int(lit))
    if isinstance(lit, (float, np.floating)):
        x = float(lit)     # exact: a float32 widens to the same value
        return repr(x) if math.isfinite(x) else None
    if isinstance(lit, str):
        return repr(lit)
    if kind == "DT" and type(lit) is dt.datetime and lit.tzinfo is None:
        return repr(lit.isoformat())       # an ISO string, exact to the microsecond
    if isinstance(lit, (list, tuple)):
        items = [_string_literal(x, kind) for x in lit]
        if any(x is None for x in items):
            return None
        body = ", ".join(items)
        if isinstance(lit, tuple):
            return "(" + body + ("," if len(items) == 1 else "") + ")"
        return "[" + body + "]"
    return None


def to_string(pred, kinds: dict, force_col: bool = False):
    """The Python-syntax string of the predicate, or None when a literal has no such form
    (NaN, infinities, numpy or pandas times). ``kinds``: column name -> kind."""
    def go(p):
        k = p[0]
        if k == "cmp":
            lit = _string_literal(p[3], kinds[p[1]])
            return None if lit is None else f"{_string_name(p[1], force_col)} {p[2]} {lit}"
        if k in ("isnull", "notnull"):
            return f"{k}({_string_name(p[1], force_col)})"
        if k == "not":
            inner = go(p[1])
            return None if inner is None else f"not ({inner})"
        parts = [go(q) for q in p[1]]
        if any(q is None for q in parts):
            return None
        return f" {k} ".join(f"({q})" for q in parts)
    return go(pred)


def _arrow_scalar(lit):
    """lit as a pyarrow scalar holding exactly its value, or None."""
    import pyarrow as pa
    cat, value = literal_value(lit)
    if cat == "other":
        return None
    try:
        import pandas as pd
        if isinstance(lit, pd.Timestamp):
            s = pa.scalar(lit, pa.timestamp("ns", tz=None if lit.tzinfo is None else "UTC"))
        elif isinstance(lit, pd.Timedelta):
            s = pa.scalar(lit, pa.duration("ns"))
        elif type(lit) is int and lit > 2**63 - 1:
            s = pa.scalar(lit, pa.uint64())
        else:
            s = pa.scalar(lit)
    except (OverflowError, ValueError, TypeError, pa.ArrowException):
        return None
    t = s.type
    if pa.types.is_timestamp(t) or pa.types.is_duration(t):
        ticks = s.value * UNIT_TICKS[t.unit]
        back = ticks + EPOCH_TICKS if pa.types.is_timestamp(t) else ticks
        if cat not in ("datetime", "aware", "timedelta") or back != value:
            return None
        return s
    if pa.types.is_date(t):
        return None
    if cat == "nan":
        return s if pa.types.is_floating(t) else None
    got = s.as_py()
    if cat in ("num", "bool"):
        if isinstance(got, float) and not math.isfinite(got):
            return s if _num(got) == value else None
        return s if got is not None and (0, Fraction(got)) == value else None
    return s if got == value else None


def _fold(pred, leaf, negate=lambda e: ~e, join=None):
    """An engine's expression of a predicate: `leaf(p)` for each comparison and null test
    (None: not expressible, nor then the whole), not / and / or by `negate` and `join(kind,
    parts)` (default: ``&`` and ``|``)."""
    def default_join(kind, parts):
        out = parts[0]
        for q in parts[1:]:
            out = (out & q) if kind == "and" else (out | q)
        return out
    join = join or default_join

    def go(p):
        if p[0] == "not":
            inner = go(p[1])
            return None if inner is None else negate(inner)
        if p[0] in ("and", "or"):
            parts = [go(q) for q in p[1]]
            return None if any(q is None for q in parts) else join(p[0], parts)
        return leaf(p)
    return go(pred)


def to_expression(pred, kinds: dict):
    """The pyarrow compute expression of the predicate, or None when a literal has no exact
    Arrow scalar (ints beyond 64 bits, ...) or a null test has no Arrow form (a key's 0 is
    null to Arrow only where KeyValues label the key; a float's NaN is null with
    nan_is_null=True)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def go(p):
        k = p[0]
        if k == "cmp":
            f = pc.field(p[1])
            if p[2] in ("in", "not in"):
                if kinds[p[1]] in TIMES and any(isinstance(x, str) for x in p[3]):
                    return None
                scalars = [_arrow_scalar(x) for x in p[3]]
                if any(s is None for s in scalars) or len({s.type for s in scalars}) > 1:
                    return None
                if not scalars:
                    return None
                e = f.isin(pa.array(scalars))
                return e if p[2] == "in" else ~e
            if isinstance(p[3], str) and kinds[p[1]] in TIMES:
                return None             # an ISO string: a string to Arrow, not a time
            s = _arrow_scalar(p[3])
            if s is None:
                return None
            return {"==": f == s, "!=": f != s, "<": f < s, "<=": f <= s, ">": f > s,
                    ">=": f >= s}[p[2]]
        if kinds[p[1]] == "KEY":
            return None
        if kinds[p[1]] in FLOATS:
            nan = pc.field(p[1]).is_null(nan_is_null=True)
            return nan if k == "isnull" else ~nan
        return pc.field(p[1]).is_null() if k == "isnull" else pc.field(p[1]).is_valid()
    return _fold(pred, go)


def _plain(lit):
    """A literal as a plain Python value (what the engines' own APIs take), or None."""
    if isinstance(lit, (np.datetime64, np.timedelta64)):
        return None
    if isinstance(lit, (bool, np.bool_)):
        return bool(lit)
    if isinstance(lit, (int, np.integer)):
        return int(lit)
    if isinstance(lit, (float, np.floating)):
        return float(lit)
    if isinstance(lit, str):
        return lit
    if type(lit) in (dt.datetime, dt.timedelta) and getattr(lit, "tzinfo", None) is None:
        return lit
    return None


def to_polars(pred, kinds: dict):
    """The predicate as a polars expression with plain Python literals (polars' rules apply:
    it is compared with polars over the same data, not with the reference), or None."""
    import polars as pl

    def go(p):
        k = p[0]
        if k == "cmp":
            if kinds[p[1]] == "DZ":
                return None
            c = pl.col(p[1])
            if p[2] in ("in", "not in"):
                items = [_plain(x) for x in p[3]]
                if any(x is None for x in items):
                    return None
                e = c.is_in(items)
                return e if p[2] == "in" else ~e
            v = _plain(p[3])
            if v is None or (isinstance(v, int) and not -(2**63) <= v < 2**64):
                return None
            return {"==": c == v, "!=": c != v, "<": c < v, "<=": c <= v, ">": c > v,
                    ">=": c >= v}[p[2]]
        return pl.col(p[1]).is_null() if k == "isnull" else pl.col(p[1]).is_not_null()
    try:
        return _fold(pred, go)
    except (OverflowError, TypeError, ValueError):
        return None


def _sql_literal(lit):
    v = _plain(lit)
    if v is None:
        return None
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "'nan'::DOUBLE"
        if math.isinf(v):
            return "'inf'::DOUBLE" if v > 0 else "'-inf'::DOUBLE"
        return repr(v)
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, dt.datetime):
        return f"TIMESTAMP '{v.isoformat(sep=' ')}'"
    return None


def to_sql(pred, kinds: dict):
    """The predicate as a SQL WHERE clause (DuckDB's rules apply), or None."""
    def go(p):
        k = p[0]
        q = '"' + p[1].replace('"', '""') + '"' if k in ("cmp", "isnull", "notnull") else None
        if k == "cmp":
            if kinds[p[1]] in ("DZ", "TS"):
                return None
            if p[2] in ("in", "not in"):
                items = [_sql_literal(x) for x in p[3]]
                if not items or any(x is None for x in items):
                    return None
                return f"{q} {p[2].upper()} ({', '.join(items)})"
            lit = _sql_literal(p[3])
            if lit is None:
                return None
            return f"{q} {'=' if p[2] == '==' else '<>' if p[2] == '!=' else p[2]} {lit}"
        return f"{q} IS {'NOT ' if k == 'notnull' else ''}NULL"
    return _fold(pred, go, negate=lambda e: f"NOT ({e})",
                 join=lambda kind, parts: f" {kind.upper()} ".join(f"({x})" for x in parts))


# ---- writing a Table ------------------------------------------------------------------------

def numpy_column(col: Col):
    """(numpy values, idv type or None, metadata or None) for idv.write."""
    import idv
    k = col.kind
    if k in INT_DTYPES:
        return np.array(col.values, dtype=INT_DTYPES[k]), None, None
    if k in FLOATS:
        return np.array(col.values, dtype=np.float32 if k == "R4" else np.float64), None, None
    if k == "BL":
        return np.array(col.values, dtype=bool), None, None
    if k == "TX":
        out = np.empty(len(col.values), dtype=object)
        out[:] = list(col.values)
        return out, idv.Text, None
    if k == "KEY":
        raw = {"U1": idv.Byte, "U2": idv.UInt16, "U4": idv.UInt32, "U8": idv.UInt64}[col.key_raw]
        return (np.array(col.values, dtype=INT_DTYPES[col.key_raw]),
                idv.Key(raw, count=len(col.key_values)), {"KeyValues": list(col.key_values)})
    if k == "DT":
        ticks = np.array(col.values, dtype=np.int64) - EPOCH_TICKS
        return ticks.view("datetime64[100ns]"), idv.DateTime, None
    if k == "TS":
        return np.array(col.values, dtype=np.int64).view("timedelta64[100ns]"), idv.TimeSpan, None
    if k == "DZ":
        out = np.zeros(len(col.values), idv.types.DATETIMEOFFSET_DTYPE)
        utc = np.array([v[0] for v in col.values], dtype=np.int64) - EPOCH_TICKS
        out["utc"] = utc.view("datetime64[100ns]")
        out["offset_minutes"] = [v[1] for v in col.values]
        return out, idv.DateTimeOffset, None
    raise AssertionError(k)


ROW = "rid"   # every written file's first column: the row number, what the tests read back


def write_table(path, table: Table, *, statistics: bool, rows_per_block: int, offset: int = 0):
    """Write the table (after a ``rid`` Int64 column of row numbers + offset) with blocks of
    exactly rows_per_block rows."""
    import idv
    data = {ROW: np.arange(offset, offset + table.n, dtype=np.int64)}
    types, metadata = {}, {}
    for name, col in table.columns.items():
        values, t, meta = numpy_column(col)
        data[name] = values
        if t is not None:
            types[name] = t
        if meta is not None:
            metadata[name] = meta
    idv.write(str(path), data, types=types, metadata=metadata, rows_per_block=rows_per_block,
              max_bytes_per_block=None, statistics=statistics)


# ---- hypothesis: data -----------------------------------------------------------------------

F32_MAX = float(np.finfo(np.float32).max)
FLOAT_EDGES = {
    "R4": [0.0, -0.0, math.nan, math.inf, -math.inf, float(np.float32(0.1)), 16777216.0,
           16777218.0, F32_MAX, -F32_MAX, float(np.float32(1e-45)), 0.5, 1.0, 1.5, -1.0, 2.0],
    "R8": [0.0, -0.0, math.nan, math.inf, -math.inf, 0.1, 2.0**53, 2.0**53 + 2, 2.0**63, 2.0**64,
           1.7976931348623157e308, -1.7976931348623157e308, 5e-324, 0.5, 1.0, 1.5, -1.0],
}
TEXT_EDGES = ["", "a", "ab", "ab\x00", "\x00", "b", "é", "😀", "日本", "a\x00b", "\uffff",
              "\ue000", "\U0010ffff", "ab\x00\x00"]
TEXT_ALPHABET = "ab\x00é\uffff😀"
LABELS = ["cat", "dog", "", "é", "cat\x00"]
DATE_EDGES = [0, 1, MAX_TICKS, MAX_TICKS - 1, EPOCH_TICKS, EPOCH_TICKS - 1, EPOCH_TICKS + 1,
              630822816000000000, 630822816000000005]
SPAN_EDGES = [TS_MIN, TS_MAX, 0, 1, -1, 10, TICKS_PER_SECOND, -TICKS_PER_SECOND, 864000000000]


def _int_elements(kind):
    lo, hi = INT_RANGES[kind]
    edges = [lo, hi, 0, 1, lo + 1, hi - 1] + ([-1] if lo < 0 else []) + \
        ([2**63, 2**63 + 5, 2**63 - 1] if kind == "U8" else [])
    return st.one_of(st.sampled_from(edges), st.integers(max(lo, -3), min(hi, 12)),
                     st.integers(lo, hi))


def _f32(x):
    with np.errstate(all="ignore"):
        return float(np.float32(x))


def _element(kind, key_count=0):
    if kind in INT_RANGES:
        return _int_elements(kind)
    if kind in FLOATS:
        width = 32 if kind == "R4" else 64
        s = st.one_of(st.sampled_from(FLOAT_EDGES[kind]), st.integers(-3, 12).map(float),
                      st.floats(width=width))
        return s.map(_f32) if kind == "R4" else s
    if kind == "BL":
        return st.booleans()
    if kind == "TX":
        return st.one_of(st.sampled_from(TEXT_EDGES), st.text(TEXT_ALPHABET, max_size=3))
    if kind == "KEY":
        return st.integers(0, key_count)
    if kind == "DT":
        return st.one_of(st.sampled_from(DATE_EDGES), st.integers(0, MAX_TICKS),
                         st.integers(EPOCH_TICKS - 10**12, EPOCH_TICKS + 10**12))
    if kind == "TS":
        return st.one_of(st.sampled_from(SPAN_EDGES), st.integers(TS_MIN, TS_MAX),
                         st.integers(-10**9, 10**9))
    if kind == "DZ":
        clock = st.one_of(st.sampled_from(list(DZ_CLOCK) + [EPOCH_TICKS]),
                          st.integers(*DZ_CLOCK))
        return st.tuples(clock, st.integers(-840, 840)).map(
            lambda cm: (cm[0] - cm[1] * TICKS_PER_MINUTE, cm[1]))
    raise AssertionError(kind)


def _sort_key(kind):
    if kind in FLOATS:
        return lambda v: (math.isnan(v), 0.0 if math.isnan(v) else v)
    if kind == "DZ":
        return lambda v: v[0]
    return lambda v: v


@st.composite
def columns(draw, kind, n):
    """One column of n rows of a kind; sometimes sorted, so that block statistics rule blocks
    out; keys get KeyValues drawn from a few labels (duplicates included)."""
    key_values, key_raw = [], "U4"
    if kind == "KEY":
        key_values = draw(st.lists(st.sampled_from(LABELS), min_size=1, max_size=5))
        key_raw = draw(st.sampled_from(["U1", "U2", "U4", "U8"]))
    values = draw(st.lists(_element(kind, len(key_values)), min_size=n, max_size=n))
    if draw(st.booleans()):
        values.sort(key=_sort_key(kind))
    return Col(kind, values, key_values, key_raw)


@st.composite
def tables(draw, kinds=KINDS, min_rows=0, max_rows=20, max_columns=3):
    """A Table of up to max_columns columns of the given kinds; some names need col()."""
    n = draw(st.integers(min_rows, max_rows))
    chosen = draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=max_columns))
    cols = {}
    for i, kind in enumerate(chosen):
        spaced = draw(st.booleans())
        name = f"c{i} {kind.lower()}" if spaced else f"c{i}_{kind.lower()}"
        cols[name] = draw(columns(kind, n))
    return Table(n, cols)


# ---- hypothesis: literals and predicates ----------------------------------------------------

BIG = [2**63, 2**64, 2**64 - 1, -(2**63) - 1, 2**70, -(2**70), 300, -129, 256, -1, 0.1, 1.5,
       -0.0, math.nan, math.inf, -math.inf, 16777217, 2.0**63, 1e300, 2**1024, -(2**1024)]
NUMPY_INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


def _wrap_number(x, how):
    """x (int or float) in one of the Python / numpy number types, as far as it fits."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        if how == "float":
            try:
                return float(x)
            except OverflowError:
                return x
        if how in ("np.float32", "np.float64", "np.float16"):
            try:
                return getattr(np, how[3:])(float(x) if not isinstance(x, float) else x)
            except OverflowError:
                return x
        if how.startswith("np.") and isinstance(x, int):
            dtype = getattr(np, how[3:])
            info = np.iinfo(dtype)
            return dtype(x) if info.min <= x <= info.max else x
        if how == "py" and isinstance(x, float) and x.is_integer() and abs(x) < 2**80:
            return int(x)
    return x


def _column_numbers(col: Col):
    if col.kind == "DZ":
        return []
    return [(1 if v else 0) if col.kind == "BL" else v for v in col.values
            if not (isinstance(v, float) and math.isnan(v))]


@st.composite
def number_literals(draw, col: Col):
    """A number near the column's values or its type's edges, in a random number type."""
    edges = list(BIG)
    if col.kind in INT_RANGES:
        lo, hi = INT_RANGES[col.kind]
        edges += [lo, hi, lo - 1, hi + 1]
    elif col.kind in FLOATS:
        edges += FLOAT_EDGES[col.kind]
    elif col.kind == "KEY":
        edges += [0, 1, len(col.key_values), len(col.key_values) + 1]
    else:
        edges += [0, 1, 0.5, 2, True, False]
    values = _column_numbers(col)
    base = draw(st.one_of(st.sampled_from(edges), st.sampled_from(values)) if values
                else st.sampled_from(edges))
    if isinstance(base, (bool, np.bool_)):
        return base if col.kind == "BL" else int(base)
    if isinstance(base, float) and not math.isfinite(base):
        return _wrap_number(base, draw(st.sampled_from(["py", "np.float32", "np.float64"])))
    delta = draw(st.sampled_from([0, 0, 0, 1, -1, 0.5, -0.5]))
    try:
        x = base + delta
    except OverflowError:       # beyond the finite floats: the integer as it is
        x = base
    how = draw(st.sampled_from(["py", "py", "float", "np.float32", "np.float64"] +
                               [f"np.{t.__name__}" for t in NUMPY_INTS]))
    out = _wrap_number(x, how)
    if col.kind == "BL" and draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from([True, False, np.True_, np.False_]))
    return out


@st.composite
def text_literals(draw, col: Col):
    values = [v for v in col.values if isinstance(v, str)]
    base = draw(st.one_of(st.sampled_from(TEXT_EDGES), st.sampled_from(values)) if values
                else st.sampled_from(TEXT_EDGES))
    edit = draw(st.sampled_from(["", "", "nul", "cut", "a"]))
    return {"": base, "nul": base + "\x00", "cut": base[:-1], "a": base + "a"}[edit]


def _ticks_to_datetime(ticks):
    if 0 <= ticks <= MAX_TICKS:
        return _DAY0 + dt.timedelta(microseconds=ticks // 10)
    return None


@st.composite
def time_literals(draw, col: Col):
    """A DateTime / TimeSpan / DateTimeOffset literal near the column's values: Python,
    numpy (units from days to ns, so finer than a tick too) and pandas values."""
    import pandas as pd
    k = col.kind
    values = [v[0] if k == "DZ" else v for v in col.values]
    edges = DATE_EDGES if k != "TS" else SPAN_EDGES
    base = draw(st.one_of(st.sampled_from(edges), st.sampled_from(values)) if values
                else st.sampled_from(edges))
    base += draw(st.sampled_from([0, 0, 1, -1, 10, -10, 10**7]))
    form = draw(st.sampled_from(["py", "numpy", "ns", "pandas"]))
    rel = base - EPOCH_TICKS if k != "TS" else base       # ticks from 1970 (DT, DZ) or 0 (TS)
    ns = rel * 100 + draw(st.sampled_from([0, 0, 1, -1, 50, 99]))
    if form in ("ns", "pandas") and _NS_RANGE[0] <= ns <= _NS_RANGE[1]:
        if form == "ns":
            return (np.datetime64 if k == "DT" else np.timedelta64)(ns, "ns") \
                if k != "DZ" else pd.Timestamp(ns, unit="ns", tz="UTC")
        if k == "DT":
            return pd.Timestamp(ns, unit="ns")
        if k == "TS":
            return pd.Timedelta(ns, unit="ns")
        return pd.Timestamp(ns, unit="ns", tz="UTC").tz_convert(
            dt.timezone(dt.timedelta(minutes=draw(st.sampled_from([0, 90, -300])))))
    if form == "numpy" and k != "DZ":
        unit = draw(st.sampled_from(["s", "ms", "us", "D"]))
        per = int(UNIT_TICKS[unit])
        count = rel // per
        return (np.datetime64 if k == "DT" else np.timedelta64)(count, unit)
    if k == "TS":
        return span_text(base) if draw(st.integers(0, 3)) == 0 else \
            dt.timedelta(microseconds=base // 10)
    if k == "DT":
        d = _ticks_to_datetime(base) or _ticks_to_datetime(min(max(base, 0), MAX_TICKS))
        return d.isoformat() if draw(st.integers(0, 3)) == 0 else d
    minutes = draw(st.sampled_from([0, 60, -90, 840]))
    local = base + minutes * TICKS_PER_MINUTE
    d = _ticks_to_datetime(local) or _ticks_to_datetime(min(max(local, 0), MAX_TICKS))
    return d.replace(tzinfo=dt.timezone(dt.timedelta(minutes=minutes)))


@st.composite
def literals(draw, col: Col, op: str):
    """A literal the column can be compared with (never a refused one)."""
    k = col.kind
    if k == "TX":
        return draw(text_literals(col))
    if k in TIMES:
        return draw(time_literals(col))
    if k == "KEY" and op in KEY_TEXT_OPS and draw(st.booleans()):
        return draw(st.sampled_from(LABELS + ["bird"] + col.key_values))
    return draw(number_literals(col))


@st.composite
def atoms(draw, table: Table):
    name = draw(st.sampled_from(list(table.columns)))
    col = table.columns[name]
    if draw(st.integers(0, 9)) == 0:
        return (draw(st.sampled_from(["isnull", "notnull"])), name)
    op = draw(st.sampled_from(OPS))
    if op in ("in", "not in"):
        size = draw(st.integers(0, 3))
        items = [draw(literals(col, "==")) for _ in range(size)]
        if col.kind == "KEY":           # a key list compares all by text or all by number
            texts = [x for x in items if isinstance(x, str)]
            items = texts if texts and len(texts) * 2 >= len(items) else \
                [x for x in items if not isinstance(x, str)]
        return cmp(name, op, items)
    lit = draw(literals(col, op))
    if col.kind == "KEY" and isinstance(lit, str) and op not in KEY_TEXT_OPS:
        op = "=="
    return cmp(name, op, lit)


@st.composite
def predicates(draw, table: Table, max_depth: int = 3):
    """A predicate over the table: half of them DNF-shaped (so the tuple form exists too),
    the others any tree of and / or / not over comparisons and null tests."""
    if draw(st.booleans()):
        def conj():
            parts = draw(st.lists(atoms(table).filter(lambda a: a[0] == "cmp"), min_size=1,
                                  max_size=3))
            return parts[0] if len(parts) == 1 else ("and", tuple(parts))
        ors = [conj() for _ in range(draw(st.integers(1, 3)))]
        return ors[0] if len(ors) == 1 else ("or", tuple(ors))

    def tree(depth):
        choice = draw(st.integers(0, 5)) if depth > 0 else 0
        if choice <= 2:
            return draw(atoms(table))
        if choice == 3:
            return ("not", tree(depth - 1))
        parts = tuple(tree(depth - 1) for _ in range(draw(st.integers(2, 3))))
        return ("and" if choice == 4 else "or", parts)
    return tree(max_depth)
