"""What ML.NET read, in the numpy forms idv promises, built from the oracle's JSON only.

The oracle's sidecars and dumps (see shared/oracle/README.md) encode every cell as JSON: floats
as repr strings ("NaN", "-0.0", "Infinity"), integers and keys as raw ints, DateTime/TimeSpan as
.NET ticks, DateTimeOffset as {ticks (clock time), offset_minutes}, RowId as High << 64 | Low,
vectors as lists or {length, indices, values}. This module turns them into the arrays idv should
return, without using idv's own decoding code, and compares arrays bit for bit.
"""
from __future__ import annotations

import re

import numpy as np

import idv

# .NET ticks (100 ns since 0001-01-01) of 1970-01-01, numpy's datetime64 origin
EPOCH_TICKS = 621355968000000000
TICKS_PER_MINUTE = 600000000

DATETIME = np.dtype("datetime64[100ns]")
TIMESPAN = np.dtype("timedelta64[100ns]")
DATETIMEOFFSET = np.dtype([("utc", DATETIME), ("offset_minutes", "<i2")])
ROWID = np.dtype([("low", "<u8"), ("high", "<u8")])

# the numpy dtype each ML.NET item type reads into (README "How ML.NET types map to numpy")
DTYPES = {
    "Single": np.dtype(np.float32), "Double": np.dtype(np.float64),
    "SByte": np.dtype(np.int8), "Byte": np.dtype(np.uint8),
    "Int16": np.dtype(np.int16), "UInt16": np.dtype(np.uint16),
    "Int32": np.dtype(np.int32), "UInt32": np.dtype(np.uint32),
    "Int64": np.dtype(np.int64), "UInt64": np.dtype(np.uint64),
    "Boolean": np.dtype(np.bool_), "Text": np.dtype(object),
    "DateTime": DATETIME, "TimeSpan": TIMESPAN, "DateTimeOffset": DATETIMEOFFSET, "RowId": ROWID,
}

PRIMITIVES = {name: getattr(idv, name) for name in DTYPES}
# ML.NET's DataViewType.ToString() names that differ from ours
MLNET_NAMES = {"String": "Text", "DataViewRowId": "RowId"}
# legacy (1.1.1.5) codec load names: ML.NET reports the codec it reads them with by the
# current name
LEGACY_CODECS = {"DvBool": "Boolean", "DvDateTime": "DateTime", "DvDateTimeZone": "DateTimeOffset",
                 "DvTimeSpan": "TimeSpan"}


# ---------------------------------------------------------------------------------------------
# types
# ---------------------------------------------------------------------------------------------

def _split_top(s):
    """Split on commas that are not inside <...>."""
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return parts


_KEY = re.compile(r"^Key<(\w+), 0-(\d+)>$")


def parse_type_string(s):
    """ML.NET 1.5's DataViewType.ToString() -> idv type.

    ``Single``, ``String`` (Text), ``DataViewRowId`` (RowId), ``Key<UInt32, 0-4>`` (count 5),
    ``Vector<Single, 3>``, ``Vector<Int32, *, 4>`` (a variable dimension), ``Vector<Single>``,
    ``Vector<Key<Byte, 0-2>, 4>``.
    """
    s = s.strip()
    m = _KEY.match(s)
    if m:
        return idv.Key(PRIMITIVES[m.group(1)], count=int(m.group(2)) + 1)
    if s.startswith("Vector<") and s.endswith(">"):
        parts = _split_top(s[len("Vector<"):-1])
        dims = [0 if p == "*" else int(p) for p in parts[1:]]
        return idv.Vector(parse_type_string(parts[0]), *dims)
    name = MLNET_NAMES.get(s, s)
    if name not in PRIMITIVES:
        raise ValueError(f"unknown ML.NET type string {s!r}")
    return PRIMITIVES[name]


def our_type_string(s):
    """ML.NET's type string rewritten by hand into idv's str(type) spelling."""
    s = re.sub(r"Key<(\w+), 0-(\d+)>", lambda m: f"Key<{m.group(1)}, {int(m.group(2)) + 1}>", s)
    s = re.sub(r"\bString\b", "Text", s).replace("DataViewRowId", "RowId")
    return s


def type_from_description(d):
    """idv type from the dump's structured fields (item_type, key_*, is_vector, dims)."""
    name = d["item_type"]
    if name == "Key":
        item = idv.Key(PRIMITIVES[d["key_raw_type"]], count=int(d["key_count"]))
    else:
        item = PRIMITIVES[MLNET_NAMES.get(name, name)]
    if d.get("is_vector"):
        return idv.Vector(item, *d["dims"])
    return item


def item_name(t):
    """'Single', 'Text', ..., 'Key' for an idv item type."""
    return "Key" if isinstance(t, idv.Key) else t.name


# ---------------------------------------------------------------------------------------------
# the oracle's documents: a sidecar and a dump have the same columns / rows layout
# ---------------------------------------------------------------------------------------------

def expected_type(dcol, where=None):
    """A column's (or annotation's) type from ML.NET's type string, cross-checked with the
    structured fields."""
    t = parse_type_string(dcol["type_string"])
    t2 = type_from_description(dcol)
    assert t == t2, f"{where or dcol.get('name')}: the document is inconsistent: " \
                    f"{dcol['type_string']!r} vs fields -> {t2}"
    return t


def visible_columns(doc):
    """The columns ML.NET shows by name (not hidden by a later column of the same name)."""
    return [c for c in doc["columns"] if not c["hidden"]]


def column_index(doc, name):
    """The index of the visible (last) column called `name`."""
    return max(c["index"] for c in doc["columns"] if c["name"] == name)


def annotations_by_kind(dcol):
    return {a["kind"]: a for a in dcol["annotations"]}


def column_cells(doc, index):
    return [row[index] for row in doc["rows"]]


def expected_column(doc, index):
    """What idv should read from column `index` (see column_expected)."""
    dcol = doc["columns"][index]
    return column_expected(expected_type(dcol, dcol["name"]), column_cells(doc, index))


def has_sub_microsecond(doc):
    """Whether any DateTime / TimeSpan / DateTimeOffset cell has ticks % 10 != 0."""
    for dcol in doc["columns"]:
        if dcol["item_type"] not in ("DateTime", "TimeSpan", "DateTimeOffset"):
            continue
        for row in doc["rows"]:
            cell = row[dcol["index"]]
            cells = cell if isinstance(cell, list) else \
                cell["values"] if isinstance(cell, dict) and "values" in cell else [cell]
            for c in cells:
                t = c["ticks"] if isinstance(c, dict) else c
                if int(t) % 10:
                    return True
    return False


# ---------------------------------------------------------------------------------------------
# cells -> numpy
# ---------------------------------------------------------------------------------------------

def zero_cell(item):
    """ML.NET's default(T) in the JSON encoding: what an absent sparse slot stands for."""
    name = item_name(item)
    if name in ("Single", "Double"):
        return "0.0"
    if name == "Boolean":
        return False
    if name == "Text":
        return ""
    if name == "DateTimeOffset":
        return {"ticks": 0, "offset_minutes": 0}
    return 0


def item_values(item, cells):
    """A 1-d array of the given JSON item cells, in idv's dtype for `item`."""
    name = item_name(item)
    cells = list(cells)
    n = len(cells)
    if name == "Key":
        return np.array([int(c) for c in cells], dtype=item.raw.dtype).reshape(n)
    dtype = DTYPES[name]
    if name == "Single":
        # the JSON is the float32 value widened to double: exact in both directions
        return np.array([float(c) for c in cells], dtype=np.float64).astype(np.float32)
    if name == "Double":
        return np.array([float(c) for c in cells], dtype=np.float64).reshape(n)
    if name == "Boolean":
        if not all(isinstance(c, bool) for c in cells):
            raise ValueError(f"non-boolean cells {cells[:5]}")
        return np.array(cells, dtype=bool).reshape(n)
    if name == "Text":
        out = np.empty(n, dtype=object)
        for i, c in enumerate(cells):
            if not isinstance(c, str):
                raise ValueError(f"non-string text cell {c!r}")
            out[i] = c
        return out
    if name == "DateTime":
        return np.array([int(c) - EPOCH_TICKS for c in cells], dtype=np.int64).view(DATETIME)
    if name == "TimeSpan":
        return np.array([int(c) for c in cells], dtype=np.int64).view(TIMESPAN)
    if name == "DateTimeOffset":
        out = np.zeros(n, DATETIMEOFFSET)
        off = np.array([int(c["offset_minutes"]) for c in cells], dtype=np.int64)
        ticks = np.array([int(c["ticks"]) for c in cells], dtype=np.int64)
        out["utc"] = (ticks - off * TICKS_PER_MINUTE - EPOCH_TICKS).view(DATETIME)
        out["offset_minutes"] = off.astype(np.int16)
        return out
    if name == "RowId":
        out = np.zeros(n, ROWID)
        out["low"] = np.array([int(c) & 0xFFFFFFFFFFFFFFFF for c in cells], dtype=np.uint64)
        out["high"] = np.array([int(c) >> 64 for c in cells], dtype=np.uint64)
        return out
    return np.array([int(c) for c in cells], dtype=dtype).reshape(n)


def dense_cell(cell, item):
    """A vector cell (list, or sparse {length, indices, values}) as a dense list."""
    if isinstance(cell, dict):
        dense = [zero_cell(item)] * int(cell["length"])
        if len(cell["indices"]) != len(cell["values"]):
            raise ValueError(f"sparse cell with mismatched indices/values: {cell}")
        for i, v in zip(cell["indices"], cell["values"]):
            dense[int(i)] = v
        return dense
    return list(cell)


class ExpectedRagged:
    """Variable-size vectors as flat values plus offsets (the layout of idv.Ragged)."""

    def __init__(self, values, offsets):
        self.values = values
        self.offsets = np.asarray(offsets, dtype=np.int64)

    @classmethod
    def from_rows(cls, rows, item):
        lengths = [len(r) for r in rows]
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return cls(item_values(item, [v for r in rows for v in r]), offsets)

    def __len__(self):
        return len(self.offsets) - 1

    def row(self, i):
        return self.values[self.offsets[i]:self.offsets[i + 1]]

    def to_list(self):
        """One array per row."""
        return [self.row(i) for i in range(len(self))]

    def take(self, rows):
        rows = [int(r) for r in rows]
        pieces = [self.row(r) for r in rows]
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum([len(p) for p in pieces], out=offsets[1:])
        values = np.concatenate(pieces) if pieces else self.values[:0]
        return ExpectedRagged(values, offsets)


def column_expected(t, cells):
    """The array idv should return for a column of type `t` holding these JSON cells:
    a 1-d array for scalars, (N, *dims) for fixed vectors, ExpectedRagged for variable ones."""
    if not isinstance(t, idv.Vector):
        return item_values(t, cells)
    rows = [dense_cell(c, t.item) for c in cells]
    if t.is_fixed:
        bad = [i for i, r in enumerate(rows) if len(r) != t.size]
        if bad:
            raise ValueError(f"rows {bad[:5]} are not of the fixed size {t.size}")
        flat = item_values(t.item, [v for r in rows for v in r])
        return flat.reshape((len(rows),) + t.dims)
    return ExpectedRagged.from_rows(rows, t.item)


def annotation_expected(ann):
    """An annotation's value in idv's metadata form: vectors as arrays (shaped by their dims
    when fixed, sparse ones densified), text as str, Boolean as bool, numbers and keys as
    numpy scalars."""
    t = type_from_description(ann)
    value = ann["value"]
    if isinstance(t, idv.Vector):
        flat = item_values(t.item, dense_cell(value, t.item))
        return flat.reshape(t.dims) if t.is_fixed else flat
    if t is idv.Text:
        return value
    if t is idv.Boolean:
        return bool(value)
    return item_values(t, [value])[0]


def take(expected, rows):
    """Rows `rows` (a list of indices) of an expected column."""
    if isinstance(expected, ExpectedRagged):
        return expected.take(rows)
    return expected[np.asarray(rows, dtype=np.int64)]


# ---------------------------------------------------------------------------------------------
# comparison
# ---------------------------------------------------------------------------------------------

def _show(a, i):
    try:
        return repr(a[i])
    except Exception:   # pragma: no cover - only for messages
        return "?"


def _mismatch(where, actual, expected, bad):
    idx = np.flatnonzero(np.asarray(bad).reshape(-1))
    flat_a, flat_e = np.asarray(actual).reshape(-1), np.asarray(expected).reshape(-1)
    first = idx[:5]
    pairs = ", ".join(f"[{int(i)}] got {_show(flat_a, i)} expected {_show(flat_e, i)}"
                      for i in first)
    raise AssertionError(f"{where}: {len(idx)} of {flat_e.size} values differ: {pairs}")


def assert_arrays_equal(actual, expected, where):
    """Same shape, same dtype, same values: floats bit for bit (NaN matches NaN, -0.0 only
    -0.0), text as exact str, structured dtypes field by field."""
    assert isinstance(actual, np.ndarray), \
        f"{where}: expected a numpy array, got {type(actual).__name__}"
    assert actual.shape == expected.shape, \
        f"{where}: shape {actual.shape}, expected {expected.shape}"
    assert actual.dtype == expected.dtype, \
        f"{where}: dtype {actual.dtype}, expected {expected.dtype}"
    dt = expected.dtype
    if dt.names:
        for field in dt.names:
            assert_arrays_equal(actual[field], expected[field], f"{where} field {field!r}")
        return
    if dt.kind == "f":
        width = {4: np.uint32, 8: np.uint64, 2: np.uint16}[dt.itemsize]
        nan_a, nan_e = np.isnan(actual), np.isnan(expected)
        bits_differ = actual.view(width) != expected.view(width)
        bad = (nan_a != nan_e) | (~nan_e & bits_differ)
    elif dt.kind in "Mm":
        bad = actual.view(np.int64) != expected.view(np.int64)
    elif dt.kind == "O":
        wrong_type = np.array([not isinstance(v, str) for v in actual.reshape(-1)], dtype=bool)
        if wrong_type.any():
            i = int(np.flatnonzero(wrong_type)[0])
            raise AssertionError(f"{where}: item {i} is {type(actual.reshape(-1)[i]).__name__}, "
                                 f"not str")
        bad = np.array([a != e for a, e in zip(actual.reshape(-1), expected.reshape(-1))],
                       dtype=bool).reshape(expected.shape)
    else:
        bad = actual != expected
    if np.any(bad):
        _mismatch(where, actual, expected, bad)


def assert_column_equal(actual, expected, where):
    """A column read by idv against column_expected(): arrays, or idv.Ragged."""
    if isinstance(expected, ExpectedRagged):
        assert isinstance(actual, idv.Ragged), \
            f"{where}: expected an idv.Ragged, got {type(actual).__name__}"
        assert len(actual) == len(expected), \
            f"{where}: {len(actual)} rows, expected {len(expected)}"
        lengths_a, lengths_e = np.diff(actual.offsets), np.diff(expected.offsets)
        if not np.array_equal(lengths_a, lengths_e):
            _mismatch(f"{where} (vector lengths)", lengths_a, lengths_e, lengths_a != lengths_e)
        assert_arrays_equal(actual.values, expected.values, f"{where} (values)")
        return
    assert_arrays_equal(actual, expected, where)


def assert_value_equal(actual, expected, where):
    """One metadata value (or one cell): str, bool, numpy scalar or array."""
    if isinstance(expected, np.ndarray):
        assert_arrays_equal(actual, expected, where)
    elif isinstance(expected, str):
        assert isinstance(actual, str) and actual == expected, \
            f"{where}: got {actual!r}, expected {expected!r}"
    elif isinstance(expected, bool):
        assert isinstance(actual, bool) and actual == expected, \
            f"{where}: got {actual!r}, expected {expected!r}"
    else:
        assert isinstance(actual, np.generic), \
            f"{where}: expected a numpy scalar of {expected.dtype}, got {type(actual).__name__}"
        assert_arrays_equal(np.asarray(actual).reshape(1), np.asarray(expected).reshape(1), where)


def assert_equal_reads(a, b):
    """Two reads of the same column in read()'s form are identical."""
    assert type(a) is type(b)
    if isinstance(a, idv.Ragged):
        assert a == b
        assert a.values.dtype == b.values.dtype
    elif hasattr(a, "tocsr"):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(a.indptr, b.indptr)
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.data, b.data)
    else:
        assert a.dtype == b.dtype and a.shape == b.shape
        if a.dtype.kind == "f":
            # bit-exact, NaN payloads included
            np.testing.assert_array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"))
        elif a.dtype.kind == "O":
            assert a.tolist() == b.tolist()
        else:
            np.testing.assert_array_equal(a, b)


def assert_same_annotations(got, want, where):
    """Two columns' annotations: the same kinds, types and values (sparse or dense)."""
    g, w = annotations_by_kind(got), annotations_by_kind(want)
    assert list(g) == list(w), where
    for kind in w:
        assert g[kind]["type_string"] == w[kind]["type_string"], f"{where} {kind}"
        assert_value_equal(annotation_expected(g[kind]), annotation_expected(w[kind]),
                           f"{where} {kind}")


def assert_same_schema_and_values(got, want, names, where):
    """ML.NET's reading `got` of the written file against its reading `want` of the source:
    each column of `names` with the same type string, annotations and values."""
    for name in names:
        g = got["columns"][column_index(got, name)]
        w = want["columns"][column_index(want, name)]
        assert g["type_string"] == w["type_string"], f"{where} {name}"
        assert_same_annotations(g, w, f"{where} {name}")
        ours = expected_column(got, g["index"])
        if isinstance(ours, ExpectedRagged):      # ML.NET's reading, in idv's form
            ours = idv.Ragged(ours.values, ours.offsets)
        assert_column_equal(ours, expected_column(want, w["index"]), f"{where} {name}")
