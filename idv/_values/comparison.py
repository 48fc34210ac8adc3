"""What a filter's comparison means: a column's stored value and a literal compared exactly,
as values, by every row test and every block test alike (docs/filters.md, "What a comparison
means").

A comparison ``column op literal`` is first bound to its column (`bind`): the literal is read
as the exact value it denotes (idv._values.literals: an integer, a fraction, a float's exact binary
value, text, .NET ticks, possibly between two ticks), never cast or rounded to the column's
type, and the comparison is rewritten as a `Test` that the column's own numbers decide
exactly:

- every row passes, or none does (``ALL``, ``NONE``): ``UInt64 > -1``, ``Int64 == 1.5``;
- ``op v`` with ``v`` a value of the column's type: ``Int64 < 1.5`` is ``< 2``, ``Single
  == 16777217`` is ``NONE``, ``Single < 0.1`` is ``<= 0.1f`` (the float below 0.1);
- membership in a set of such values (``IN``, ``NOT_IN``): ``in`` lists, and a key compared
  with a label (every key whose KeyValue is that label, duplicates included).

The same Test then decides the rows of a block (`rows`, on the values in their comparable
form: .NET ticks for times, a DateTimeOffset's UTC instant, Booleans as 0 and 1) and, from
the block statistics, which blocks may hold a match (`Zones.may_match`: never drops a block
that holds one) and which surely match whole (`Zones.all_match`).
"""
from __future__ import annotations

import bisect
import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from idv._values import literals, text_bytes, ticks
from idv._storage import bounds, statistics as S
from idv import _compare, _compression, types as T
from idv.types import EPOCH_TICKS

OPS = ("==", "!=", "<", "<=", ">", ">=", "in", "not in")
ALL, NONE, CMP, IN, NOT_IN = "all", "none", "cmp", "in", "not in"
_UFUNCS = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
           ">": np.greater, ">=": np.greater_equal}
_INT64 = (-2**63, 2**63 - 1)


class Test(NamedTuple):
    """A comparison bound to a column: `kind` (ALL, NONE, CMP, IN, NOT_IN); for CMP `op` and
    `value` (a scalar of the column's comparable dtype; text: str); for IN / NOT_IN `value`
    is a sorted array of such values (text: a sorted object array of str, and `members`:
    their text_bytes.Members, prepared once for every batch's rows, else made by each)."""
    kind: str
    op: str | None = None
    value: object = None
    members: object = None


_ALL, _NONE = Test(ALL), Test(NONE)


class Column(NamedTuple):
    """What binding needs of a column: its name, type and KeyValues (a list, or None)."""
    name: str
    type: object
    key_values: list | None = None


def _fail(col, op, literal, why, error=TypeError):
    shown = repr(literal)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return error(f"column {col.name!r} ({col.type}) {op} {shown}: {why}")


# ---------------------------------------------------------------------------------------------
# binding: a comparison in the column's own terms
# ---------------------------------------------------------------------------------------------

def domain_range(type_):
    """(least, greatest) value a column's comparable numbers can hold."""
    item = T.item_type(type_)
    if item is T.Boolean:
        return 0, 1
    if item in ticks.TIME_ITEMS:
        return _INT64
    info = np.iinfo(item.dtype if not isinstance(item, T.Key) else item.raw.dtype)
    return int(info.min), int(info.max)


def _kind(col):
    """'int' (integers, Boolean, times as ticks, keys' numbers), 'float' or 'text'."""
    item = T.item_type(col.type)
    if item is T.Text:
        return "text"
    if item in (T.Single, T.Double):
        return "float"
    return "int"


def bind(col: Column, op: str, literal) -> Test:
    """The Test of ``col op literal`` (op one of OPS; for in / not in a collection of
    literals). TypeError / ValueError, naming the column, the operator and the literal, for a
    literal that cannot be compared with the column."""
    item = T.item_type(col.type)
    if isinstance(col.type, T.Vector):
        raise _fail(col, op, literal, "filters compare scalar columns, not vectors",
                    ValueError)
    if item is T.RowId:
        raise _fail(col, op, literal, "RowId columns cannot be filtered on", ValueError)
    if op in ("in", "not in"):
        if not literals.is_collection(literal):
            raise _fail(col, op, literal, f"{op} takes a list of values", ValueError)
        return _bind_members(col, op, list(literal))
    if literal is None:
        raise _fail(col, op, literal, "a comparison with None matches nothing: test for "
                                      "missing values with isnull()", ValueError)
    if isinstance(item, T.Key) and isinstance(literal, str):
        found = _labelled(col, op, literal)
        if op not in ("==", "!="):
            raise _fail(col, op, literal, "a key compares with a label by ==, !=, in and "
                                          "not in", ValueError)
        return _members(found, col, IN if op == "==" else NOT_IN)
    kind = _kind(col)
    if kind == "text":
        if not isinstance(literal, str):
            raise _fail(col, op, literal, f"Text columns compare with str, not "
                                          f"{type(literal).__name__}")
        return Test(CMP, op, str(literal))
    q = literals.time_ticks(literal, item) if item in ticks.TIME_ITEMS else \
        _number(col, op, literal)
    if q is None:
        want = "a time span (timedelta, numpy timedelta64, .NET's text: '1.02:03:04.5') or " \
            "ticks" if item is T.TimeSpan \
            else "a date and time (datetime, numpy datetime64, ISO string) or ticks"
        raise _fail(col, op, literal, f"{item} columns compare with {want}, not "
                                      f"{type(literal).__name__}")
    if kind == "float":
        return _bind_float(op, q)
    return _bind_integer(op, q, *domain_range(col.type))


def _number(col, op, literal):
    q = literals.exact_number(literal)
    if q is None:
        raise _fail(col, op, literal, f"{T.item_type(col.type)} columns compare with "
                                      f"numbers, not {type(literal).__name__}")
    return q


def _labelled(col, op, label):
    """The stored numbers of the keys whose KeyValue is `label`."""
    if col.key_values is None:
        raise _fail(col, op, label, "a key without KeyValues compares with its stored "
                                    "numbers, not text", ValueError)
    return [i + 1 for i, v in enumerate(col.key_values) if isinstance(v, str) and v == label]


def _bind_members(col, op, literals):
    item = T.item_type(col.type)
    text = _kind(col) == "text"
    kept = []
    for v in literals:
        if text and type(v) is str:     # bind()'s == of Text: the str as it is
            kept.append(v)
            continue
        if isinstance(item, T.Key) and isinstance(v, str):
            kept.extend(_labelled(col, op, v))
            continue
        if v is None:
            continue            # matches nothing, as == None would not
        t = bind(col, "==", v)
        if t.kind == CMP:
            kept.append(t.value)
        elif t.kind == IN:
            kept.extend(t.value.tolist())
    return _members(kept, col, IN if op == "in" else NOT_IN)


def _members(values, col, kind):
    """IN / NOT_IN over `values` (already the column's values), as a sorted array."""
    members = None
    if _kind(col) == "text":
        arr = np.empty(len(set(values)), object)
        arr[:] = sorted(set(values))
        members = text_bytes.Members(arr.tolist())
    else:
        dtype = np.float64 if _kind(col) == "float" else _int_dtype(col)
        arr = np.unique(np.array(values, dtype=dtype)) if values else np.zeros(0, dtype)
    if not len(arr):
        return _NONE if kind == IN else _ALL
    return Test(kind, None, arr, members)


def _int_dtype(col):
    lo, _ = domain_range(col.type)
    return np.int64 if lo < 0 or T.item_type(col.type) is T.Boolean else np.uint64


def _bind_integer(op, q, lo, hi):
    """``x op q`` over integers x in [lo, hi], q exact (int, Fraction, NaN or +-inf)."""
    if isinstance(q, float):
        if q != q:
            return _ALL if op == "!=" else _NONE
        below = op in ("<", "<=", "!=") if q > 0 else op in (">", ">=", "!=")
        return _ALL if below else _NONE
    if op in ("==", "!="):
        there = isinstance(q, int) and lo <= q <= hi
        if not there:
            return _NONE if op == "==" else _ALL
        return Test(CMP, op, q)
    whole = isinstance(q, int)
    if op in ("<", "<="):             # x < m, m an integer
        m = q if op == "<" and whole else math.floor(q) + 1
        return _NONE if m <= lo else _ALL if m > hi else Test(CMP, "<", m)
    m = q if op == ">" and whole else math.ceil(q) - 1          # x > m
    return _NONE if m >= hi else _ALL if m < lo else Test(CMP, ">", m)


def _bind_float(op, q):
    """``x op q`` over float64 values x (Single read exactly as float64), q exact."""
    if isinstance(q, float):
        if q != q:
            return _ALL if op == "!=" else _NONE
        return Test(CMP, op, q)
    try:
        f = float(q)                    # correctly rounded
    except OverflowError:
        f = math.inf if q > 0 else -math.inf
    if math.isfinite(f) and Fraction(f) == q:
        return Test(CMP, op, f)
    # q lies strictly between two neighbouring float64s (past the finite ones: an infinity)
    above = math.nextafter(f, math.inf) if f == -math.inf or (
        f != math.inf and Fraction(f) < q) else f
    below = math.nextafter(above, -math.inf)
    if op in ("==", "!="):
        return _NONE if op == "==" else _ALL
    return Test(CMP, "<=", below) if op in ("<", "<=") else Test(CMP, ">=", above)


# ---------------------------------------------------------------------------------------------
# rows
# ---------------------------------------------------------------------------------------------

def comparable(type_, values):
    """A column's values (read()'s form) as the numbers a Test compares: ticks for times, a
    DateTimeOffset's UTC instant, Booleans as 0 and 1; Text as it is."""
    if isinstance(values, text_bytes.TextRows):
        return values
    x = bounds.comparable(type_, values)
    if getattr(x, "dtype", None) is not None and x.dtype == np.bool_:
        x = x.view(np.uint8)
    return x


def rows(test: Test, x):
    """A bool per value of `x` (comparable()'s form; Text also as TextRows or Arrow strings,
    tested on their UTF-8 bytes) that passes `test`."""
    if test.kind in (ALL, NONE):
        return np.full(len(x), test.kind == ALL)
    if isinstance(x, text_bytes.TextRows) or bounds.is_arrow(x):
        return _text_rows(test, x)
    if test.kind == CMP:
        v = test.value
        if isinstance(v, str):
            lit = np.empty((), object)      # numpy's own str would drop trailing NULs
            lit[()] = v
            v = lit
        elif x.dtype.kind == "f" or isinstance(v, float):
            v = np.float64(v)
        else:
            v = x.dtype.type(v)
        with np.errstate(invalid="ignore"):
            return np.asarray(_UFUNCS[test.op](x, v), bool)
    if x.dtype == object:
        found = set(test.value.tolist())
        hit = np.fromiter((v in found for v in x), bool, len(x))
    else:
        hit = np.isin(x, test.value)
    return hit if test.kind == IN else ~hit


def hits(test: Test, x):
    """The positions (int64, ascending) of the values of `x` that pass `test`: rows()'s,
    found without a mask where Text or numbers are compared with a literal (in C)."""
    if test.kind == CMP and (isinstance(x, text_bytes.TextRows) or bounds.is_arrow(x)):
        found = _utf8_rows(x)
        try:
            literal = test.value.encode("utf-8")
        except UnicodeEncodeError:      # rows() tests it on str
            found = None
        if found is not None:
            return text_bytes.compare_hits(found, test.op, literal)
    literal = _native(x, test)
    if literal is not None:
        out = _compression.empty(len(x), np.int64)     # only the pages written are touched
        return out[:_compare.number_hits(np.ascontiguousarray(x), test.op, literal, out)]
    return np.flatnonzero(rows(test, x))


def column_hits(type_, test: Test, values):
    """hits(test, comparable(type_, values)) of a column's values in read()'s form: a
    DateTime's compared as read (100-ns counts from 1970) with the literal moved there,
    rather than each value moved to .NET's ticks."""
    if test.kind == CMP and getattr(values, "dtype", None) is not None and \
            values.dtype.kind == "M":
        moved = int(test.value) - EPOCH_TICKS         # a Python int: never wraps
        if _INT64[0] <= moved <= _INT64[1]:
            return hits(test._replace(value=moved), values.view(np.int64))
    return hits(test, comparable(type_, values))


def _native(x, test):
    """A CMP `test`'s literal as a one-value array of numeric array `x`'s dtype where C
    compares them as rows() does (exactly a value of that type; an integer with integers);
    else None."""
    v = test.value
    if test.kind != CMP or not isinstance(x, np.ndarray) or x.ndim != 1 or \
            x.dtype.kind not in "iuf" or not x.dtype.isnative or isinstance(v, (bool, str)):
        return None
    if x.dtype.kind == "f" and isinstance(v, (int, float, np.number)):
        with np.errstate(over="ignore"):
            lit = np.array([np.float64(v)]).astype(x.dtype)   # float64: as rows() takes it
        return lit if lit[0] == np.float64(v) or np.isnan(lit[0]) else None
    info = np.iinfo(x.dtype) if x.dtype.kind != "f" else None
    return np.array([v], x.dtype) if isinstance(v, (int, np.integer)) and info and \
        info.min <= int(v) <= info.max else None


def _utf8_rows(x):
    """Text rows as TextRows: `x` itself, or Arrow strings' buffers (None for other layouts:
    string views, nulls)."""
    if isinstance(x, text_bytes.TextRows):
        return x
    import pyarrow as pa
    return text_bytes.of_arrow(pa, x)


_ARROW_CMP = {"==": "equal", "!=": "not_equal", "<": "less", "<=": "less_equal",
              ">": "greater", ">=": "greater_equal"}


def _text_rows(test, x):
    """rows() of Text held as TextRows or Arrow strings, tested on their UTF-8 bytes
    (idv._values.text_bytes); Arrow strings of other layouts (views, nulls) by pyarrow on
    the same bytes. A literal UTF-8 cannot hold (a lone surrogate) is tested on str."""
    found = _utf8_rows(x)
    if found is None:
        import pyarrow as pa
        return _arrow_text_rows(pa, test, x)
    x = found
    try:
        if test.kind == CMP:
            return text_bytes.compare(x, test.op, test.value.encode("utf-8"))
    except UnicodeEncodeError:
        return rows(test, x.to_str())
    members = test.members or text_bytes.Members(test.value.tolist())
    if members.utf8 is None:
        return rows(test, x.to_str())
    hit = text_bytes.member(x, members)
    return ~hit if test.kind == NOT_IN else hit


def _arrow_text_rows(pa, test, x):
    import pyarrow.compute as pc
    try:
        if test.kind == CMP:
            hit = getattr(pc, _ARROW_CMP[test.op])(x, pa.scalar(test.value, x.type))
        else:
            hit = pc.is_in(x, value_set=pa.array(test.value.tolist(), x.type))
    except (UnicodeEncodeError, pa.ArrowInvalid):
        return rows(test, np.array(x.to_pylist(), object))
    hit = np.asarray(hit.to_numpy(zero_copy_only=False), bool)
    return ~hit if test.kind == NOT_IN else hit


def missing(type_, x):
    """Which values of `x` (comparable()'s form) are missing: NaN, a key's 0."""
    if getattr(x, "dtype", None) is not None and x.dtype.kind == "f":
        return np.isnan(x)
    if isinstance(T.item_type(type_), T.Key):
        return x == 0
    return np.zeros(len(x), bool)


# ---------------------------------------------------------------------------------------------
# blocks: what the statistics allow
# ---------------------------------------------------------------------------------------------

class Zones:
    """A column's block statistics as bounds per block: `some` (a value other than NaN is
    present: a key's missing 0 counts as the value 0), `low` / `high` of those values, `nan`
    (a NaN is present); Text: its byte bounds and flags."""

    def __init__(self, type_, cs):
        self.cs = cs
        self.text = cs.domain == S.TEXT
        self.nan = cs.missing > 0 if cs.domain == S.FLOAT else np.zeros(len(cs.present), bool)
        self.some = cs.present > 0
        self.low, self.high = cs.low, cs.high
        if isinstance(T.item_type(type_), T.Key):       # missing keys are the number 0
            zero = cs.missing > 0
            self.high = np.where(self.some, cs.high, 0).astype(cs.high.dtype)
            self.low = np.where(zero, 0, cs.low).astype(cs.low.dtype)
            self.some = self.some | zero

    def _typed(self, v):
        return self.low.dtype.type(v)

    def may_match(self, test: Test):
        """A bool per block: False only where no row of the block can pass `test`."""
        n = len(self.some)
        if test.kind in (ALL, NONE):
            return np.full(n, test.kind == ALL)
        if self.text:
            return self._text_may(test)
        lo, hi, some = self.low, self.high, self.some
        with np.errstate(invalid="ignore"):
            if test.kind == CMP:
                v, op = self._typed(test.value), test.op
                if op == "==":
                    return some & (lo <= v) & (v <= hi)
                if op == "!=":
                    return self.nan | some & ~((lo == v) & (hi == v))
                return some & {"<": lo < v, "<=": lo <= v, ">": hi > v, ">=": hi >= v}[op]
            vals = test.value.astype(lo.dtype)
            inside = np.searchsorted(vals, hi, "right") > np.searchsorted(vals, lo, "left")
            if test.kind == IN:
                return some & inside
            return self.nan | some & ~((lo == hi) & np.isin(lo, vals))

    def all_match(self, test: Test):
        """A bool per block: True only where every row of the block passes `test`."""
        n = len(self.some)
        if test.kind in (ALL, NONE):
            return np.full(n, test.kind == ALL)
        if self.text:
            return np.zeros(n, bool)
        lo, hi, some, clean = self.low, self.high, self.some, ~self.nan
        with np.errstate(invalid="ignore"):
            if test.kind == CMP:
                v, op = self._typed(test.value), test.op
                if op == "!=":
                    return ~some | (v < lo) | (v > hi)
                sure = {"==": (lo == v) & (hi == v), "<": hi < v, "<=": hi <= v, ">": lo > v,
                        ">=": lo >= v}[op]
                return clean & (~some | sure)
            vals = test.value.astype(lo.dtype)
            inside = np.searchsorted(vals, hi, "right") > np.searchsorted(vals, lo, "left")
            if test.kind == NOT_IN:
                return ~some | ~inside
            return clean & (~some | (lo == hi) & np.isin(lo, vals))

    def null_may(self, negate):
        """Blocks that may hold a missing value (a present one when `negate`)."""
        cs = self.cs
        return cs.present > 0 if negate else cs.missing > 0

    def null_all(self, negate):
        """Blocks whose every row is missing (present when `negate`)."""
        cs = self.cs
        return (cs.missing == 0) if negate else (cs.present == 0)

    def _text_may(self, test):
        cs = self.cs
        if test.kind == CMP:
            return _text_blocks(cs, test.op, test.value.encode("utf-8", "surrogatepass"))
        out = _text_holding(cs, sorted(v.encode("utf-8", "surrogatepass")
                                       for v in test.value.tolist()))
        if test.kind == IN:
            return out
        alone = np.array([bool(f & S.LOW_EXACT and f & S.HIGH_EXACT) and lo == hi
                          for lo, hi, f in zip(cs.low, cs.high, cs.flags.tolist())], bool)
        return (cs.present > 0) & ~(alone & out)


def _text_holding(cs, terms):
    """The Text blocks whose bounds may hold one of `terms` (UTF-8 bytes, sorted as bytes:
    the order of code points): the least term from a block's low bound up is the one to
    test, one search a block however many terms."""
    out = np.zeros(len(cs.present), bool)
    for b, (lo, hi, flags, n) in enumerate(zip(cs.low, cs.high, cs.flags.tolist(),
                                               cs.present.tolist())):
        i = bisect.bisect_left(terms, lo)
        out[b] = n > 0 and i < len(terms) and (bool(flags & S.NO_HIGH) or terms[i] <= hi)
    return out


def _text_blocks(cs, op, v):
    """The Text blocks whose bounds may hold a value `op` v (v: UTF-8 bytes, compared as
    bytes: the order of code points)."""
    if op == "==":
        return _text_holding(cs, [v])
    out = np.empty(len(cs.present), bool)
    for b, (lo, hi, flags, n) in enumerate(zip(cs.low, cs.high, cs.flags.tolist(),
                                               cs.present.tolist())):
        no_high = bool(flags & S.NO_HIGH)
        low_exact, high_exact = bool(flags & S.LOW_EXACT), bool(flags & S.HIGH_EXACT)
        if op == "!=":
            keep = not (low_exact and high_exact and lo == hi == v)
        elif op in ("<", "<="):
            keep = lo < v or (op == "<=" or not low_exact) and lo == v
        else:
            keep = no_high or hi > v or (op == ">=" or not high_exact) and hi == v
        out[b] = keep and n > 0
    return out
