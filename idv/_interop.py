"""Shared pieces of the pandas, Arrow and conversion layers (idv.pandas, idv.arrow, idv.formats).

Nothing here imports pandas or pyarrow: column selection, reading a file block by block in
step across columns, names for the slots of an expanded vector, type strings, and a JSON form
of column metadata that keeps each value's exact ML.NET type. Time units are in idv.ticks.
"""
from __future__ import annotations

import contextlib
import json
import math
import re

import numpy as np

from idv import _threads, ticks
from idv import types as T

# time modes shared by to_pandas / to_arrow / convert
TIME_UNITS = ("auto", "exact", "us", "ns", "ticks")


# ---------------------------------------------------------------------------------------------
# files and columns
# ---------------------------------------------------------------------------------------------

@contextlib.contextmanager
def opened(file, **kwargs):
    """An open IdvFile for `file` (a path or URL, bytes, file object or an IdvFile); files opened
    here are closed on exit, an IdvFile passed in is left open."""
    from idv.reader import IdvFile, open as idv_open
    if isinstance(file, IdvFile):
        yield file
        return
    f = idv_open(file, **kwargs)
    try:
        yield f
    finally:
        f.close()


def select_columns(f, columns):
    """Columns as IdvFile.read() picks them: every readable visible column (the last of each
    name) when `columns` is None, else the named or indexed ones in the given order."""
    if columns is None:
        return [c for c in f.columns if c.readable and f[c.name] is c]
    if isinstance(columns, (str, int, np.integer)):
        columns = [columns]
    out = []
    for c in columns:
        col = f[int(c)] if isinstance(c, (int, np.integer)) else f[c]
        col.check_readable()
        out.append(col)
    return out


def block_bounds(cols, num_rows):
    """Row boundaries of the batches that read every column one block at a time: the union of
    the columns' block starts (one batch per block when all columns share rows_per_block)."""
    if num_rows == 0 or not cols:
        return []
    starts = set()
    for c in cols:
        starts.update(range(0, num_rows, c.rows_per_block))
    bounds = sorted(starts) + [num_rows]
    return list(zip(bounds[:-1], bounds[1:]))


def row_windows(cols, num_rows, limit):
    """block_bounds(cols, num_rows) gathered into windows of rows that hold about `limit`
    decompressed bytes of the columns' blocks (at least one block's rows): (start, stop,
    [the bounds in it]). A reader decodes a window's blocks together, then cuts them."""
    bounds = block_bounds(cols, num_rows)
    if not bounds:
        return []
    per_row = sum(int(c.lookup["raw"].sum(dtype=np.int64)) for c in cols) / num_rows
    out, group, size = [], [], 0.0
    for a, b in bounds:
        group.append((a, b))
        size += (b - a) * per_row
        if size >= limit:
            out.append((group[0][0], b, group))
            group, size = [], 0.0
    if group:
        out.append((group[0][0], group[-1][1], group))
    return out


class _Cursor:
    """A column read forward block by block; take(a, b) gives rows [a, b) of the current block
    (decoding the next one when needed). Only one block per column is held at a time."""

    def __init__(self, col):
        self.blocks = col.iter_blocks()
        self.start = self.stop = 0
        self.data = None

    def take(self, a, b):
        while b > self.stop:
            self.data = next(self.blocks)
            self.start, self.stop = self.stop, self.stop + len(self.data)
        if a == self.start and b == self.stop:
            return self.data
        return self.data[a - self.start:b - self.start]


def iter_row_blocks(f, cols):
    """Yield (start, stop, [values of each column for rows start:stop]) block by block, the
    columns of a block decoded in parallel threads (a pool of its own, not the reader's)."""
    cursors = [_Cursor(c) for c in cols]
    threads = min(f.threads, len(cols))
    pool = _threads.pool("convert", threads) if threads > 1 else None
    for a, b in block_bounds(cols, f.num_rows):
        if pool is not None:
            parts = list(pool.map(lambda cur: cur.take(a, b), cursors))
        else:
            parts = [cur.take(a, b) for cur in cursors]
        yield a, b, parts


# ---------------------------------------------------------------------------------------------
# options
# ---------------------------------------------------------------------------------------------

def check_time_mode(value, allowed, name="datetime"):
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, not {value!r}")


# ---------------------------------------------------------------------------------------------
# type strings
# ---------------------------------------------------------------------------------------------

_KEY_RE = re.compile(r"^Key<\s*(\w+)\s*,\s*(\d+)\s*(?:,\s*min=(\d+)\s*)?>$")


def _split_top(s):
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur).strip())
    return parts


def parse_type(s):
    """str(type) back into the type: 'Single', 'Key<UInt32, 5>' (legacy: 'Key<UInt32, 5, min=3>'),
    'Vector<Single, 2, 3>',
    'Vector<Int32, *, 4>', 'Vector<Key<Byte, 9>, 3>', 'Vector<Text>'."""
    s = s.strip()
    m = _KEY_RE.match(s)
    if m:
        if m.group(1) not in T.PRIMITIVES:
            raise ValueError(f"unknown key raw type in {s!r}")
        return T.Key(T.PRIMITIVES[m.group(1)], count=int(m.group(2)), min=int(m.group(3) or 0))
    if s.startswith("Vector<") and s.endswith(">"):
        parts = _split_top(s[len("Vector<"):-1])
        dims = [0 if p == "*" else int(p) for p in parts[1:]]
        return T.Vector(parse_type(parts[0]), *dims)
    if s in T.PRIMITIVES:
        return T.PRIMITIVES[s]
    raise ValueError(f"not an idv type string: {s!r}")


# ---------------------------------------------------------------------------------------------
# metadata
# ---------------------------------------------------------------------------------------------

def metadata_spec(col):
    """{kind: (type, value)} of a column's metadata, as the writer takes it (exact types)."""
    types = col.metadata_types
    values = col.metadata
    return {k: (types[k], v) for k, v in values.items() if types.get(k) is not None}


def _float_json(x):
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def _text_array(cells):
    out = np.empty(len(cells), object)
    for i, c in enumerate(cells):
        out[i] = str(c)
    return out


def _rowid_ints(arr):
    return [(int(h) << 64) | int(lo) for lo, h in zip(arr["low"], arr["high"])]


def _rowids(cells):
    out = np.zeros(len(cells), T.ROWID_DTYPE)
    out["low"] = [int(c) & 0xFFFFFFFFFFFFFFFF for c in cells]
    out["high"] = [int(c) >> 64 for c in cells]
    return out


def _int64(cells):
    return np.array([int(c) for c in cells], dtype=np.int64).reshape(len(cells))


def _dtos(cells):
    out = np.zeros(len(cells), T.DATETIMEOFFSET_DTYPE)
    out["utc"] = ticks.from_net_ticks(_int64([c[0] for c in cells]))
    out["offset_minutes"] = [int(c[1]) for c in cells]
    return out


# item type -> (items -> JSON values, JSON values -> items) where the JSON form is not a plain
# number: DateTime and DateTimeOffset as .NET ticks, TimeSpan as ticks, RowId as one integer
_JSON = {
    T.Text: (lambda arr: [str(x) for x in arr], _text_array),
    T.Boolean: (lambda arr: [bool(x) for x in arr],
                lambda cells: np.array([bool(c) for c in cells], np.bool_).reshape(len(cells))),
    T.DateTime: (lambda arr: [int(x) for x in ticks.net_ticks(arr)],
                 lambda cells: ticks.from_net_ticks(_int64(cells))),
    T.TimeSpan: (lambda arr: [int(x) for x in arr.view(np.int64)],
                 lambda cells: _int64(cells).view(T.TIMESPAN_DTYPE)),
    T.DateTimeOffset: (lambda arr: [[int(u), int(o)] for u, o in
                                    zip(ticks.net_ticks(arr["utc"]), arr["offset_minutes"])],
                       _dtos),
    T.RowId: (_rowid_ints, _rowids),
}


def _items_json(item, arr):
    if item in _JSON:
        return _JSON[item][0](arr)
    if isinstance(item, T.Key) or item.dtype.kind in "iu":
        return [int(x) for x in arr]
    return [_float_json(x) for x in arr]


def _items_from_json(item, cells):
    if item in _JSON:
        return _JSON[item][1](cells)
    n = len(cells)
    dtype = item.dtype
    if dtype.kind == "f":
        return np.array([float(c) for c in cells], dtype=np.float64).reshape(n).astype(dtype)
    return np.array([int(c) for c in cells], dtype=dtype).reshape(n)


def metadata_to_json(spec):
    """{kind: (type, value)} -> JSON text (a list keeps the kinds' order)."""
    out = []
    for kind, (t, value) in spec.items():
        if isinstance(t, T.Vector):
            arr = np.asarray(value).reshape(-1)
            if arr.dtype != t.item.dtype and t.item is not T.Text:
                arr = arr.astype(t.item.dtype)
            v = _items_json(t.item, arr)
        else:
            arr = np.asarray(value, dtype=object if t is T.Text else t.dtype).reshape(1)
            v = _items_json(t, arr)[0]
        out.append({"kind": kind, "type": str(t), "value": v})
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


def metadata_from_json(text):
    """metadata_to_json's text -> {kind: (type, value)} in the reader's forms."""
    out = {}
    for entry in json.loads(text):
        t = parse_type(entry["type"])
        v = entry["value"]
        if isinstance(t, T.Vector):
            arr = _items_from_json(t.item, list(v))
            value = arr.reshape(t.dims) if t.is_fixed else arr
        else:
            arr = _items_from_json(t, [v])
            value = arr[0]
            if t is T.Boolean:
                value = bool(value)
            elif t is T.Text:
                value = str(value)
        out[entry["kind"]] = (t, value)
    return out


# ---------------------------------------------------------------------------------------------
# vectors and keys
# ---------------------------------------------------------------------------------------------

def slot_labels(name, vtype, slot_names=None):
    """Column names for the slots of a fixed-size vector: ``name.<slot name>`` from the
    SlotNames (a slot with an empty name gets its index), else ``name.0``, ``name.1``...
    (``name.i.j`` for several dimensions, row-major). When slot names would repeat (or
    collide with an index), every slot is named by its index."""
    size = vtype.size
    if len(vtype.dims) == 1:
        index = [f"{name}.{j}" for j in range(size)]
    else:
        index = [name + "".join(f".{i}" for i in idx) for idx in np.ndindex(*vtype.dims)]
    if slot_names is None:
        return index
    names = np.asarray(slot_names, dtype=object).reshape(-1)
    if len(names) != size:
        return index
    labels = [f"{name}.{s}" if isinstance(s, str) and s else index[j]
              for j, s in enumerate(names)]
    return labels if len(set(labels)) == size else index


def usable_key_values(col_type, metadata):
    """The KeyValues of a scalar key column when they can label its values one to one (a 1-d
    vector of exactly `count` distinct, non-NaN values), else None."""
    if not isinstance(col_type, T.Key):
        return None
    kv = metadata.get("KeyValues")
    if kv is None:
        return None
    kv = np.asarray(kv)
    if kv.ndim != 1 or len(kv) != col_type.count:
        return None
    if kv.dtype.kind == "f" and np.isnan(kv).any():
        return None
    if kv.dtype.names:      # DateTimeOffset / RowId values: no plain categories
        return None
    try:
        if len(set(kv.tolist())) != len(kv):
            return None
    except TypeError:
        return None
    return kv


def flat_row(i, size):
    return i // size if size else i


def item_locator(where, row0=0, size=None, offsets=None):
    """describe(i) -> "<where> row R[ item K]" for the i-th flat item of rows row0..: for error
    messages that name the row (and the vector item) a bad value came from."""
    def describe(i):
        if size:
            return f"{where} row {row0 + i // size} item {i % size}"
        if offsets is not None:
            r = int(np.searchsorted(offsets, i, side="right")) - 1
            return f"{where} row {row0 + r} item {i - int(offsets[r])}"
        return f"{where} row {row0 + i}"
    return describe
