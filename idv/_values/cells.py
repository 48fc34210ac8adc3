"""One value as text, exactly: the JSON form (dates and times in .NET's ISO forms, to the
tick; RowId as one integer; NaN and infinities by name) and the CSV cell. The command line's
output and the CSV writer (idv._interop.delimited) share them. json_column gives a whole
column's JSON texts at once, without a Python call per number: the text json.dumps gives the
values of cell_json.
"""
from __future__ import annotations

import json
import math
from itertools import compress, count, islice, repeat
from json.encoder import encode_basestring, encode_basestring_ascii

import numpy as np

from idv import types as T
from idv._values.vectors import Ragged
from idv._values.tick_text import format_datetime, format_datetimeoffset, format_timespan


def rowid_int(v):
    return (int(v["high"]) << 64) | int(v["low"])


def float_json(f):
    """A Python float for JSON: NaN and the infinities by name (JSON has no number for them)."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    return f


def shortest_float(x):
    """A float as the shortest Python float that reads back to it at its own precision: a
    float32 0.1 is 0.1, not 0.10000000149011612 (its exact value)."""
    return float(str(x)) if isinstance(x, np.floating) else float(x)


def item_json(x, item):
    """One item in JSON form."""
    if item is T.DateTime:
        return format_datetime(x)
    if item is T.TimeSpan:
        return format_timespan(x)
    if item is T.DateTimeOffset:
        return format_datetimeoffset(x)
    if item is T.RowId:
        return rowid_int(x)
    if item is T.Text:
        return str(x)
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (np.integer, int)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        return float_json(shortest_float(x))
    return str(x)


def cell_json(value, type_):
    """A cell (scalar or vector row) in JSON form; vectors become (nested) lists."""
    if isinstance(type_, T.Vector):
        arr = np.asarray(value)
        if arr.ndim == 0:
            return item_json(arr[()], type_.item)
        return [cell_json(a, type_) if arr.ndim > 1 else item_json(a, type_.item) for a in arr]
    return item_json(value, type_)


def csv_item(x, item):
    """One item for a CSV cell: as in JSON, Booleans as true / false."""
    v = item_json(x, item)
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def csv_cell(value, type_):
    """A cell for CSV/TSV: scalars as in JSON (dates ISO 8601, NaN, true/false), vectors as a
    JSON array of all their items."""
    if isinstance(type_, T.Vector):
        return json.dumps(cell_json(value, type_), ensure_ascii=False, separators=(",", ":"))
    return csv_item(value, type_)


def float_texts(arr):
    """numpy's shortest text of each float of a 1-d array at its own precision (a float64's is
    Python's repr; a float32 0.1 is 0.1), ``nan``, ``inf`` and ``-inf`` for the others."""
    if arr.dtype.itemsize == 8:
        return list(map(float.__repr__, arr.tolist()))
    return arr.astype(str).tolist()


def label_texts(values):
    """The text of each KeyValue of a key (a 1-d array), as `idv schema`, `head` and `cat`
    show it: a float at its own precision (a Single 0.1 is ``0.1``), any other its str."""
    arr = np.asarray(values)
    return float_texts(arr) if arr.dtype.kind == "f" else [str(v) for v in arr.tolist()]


def name_specials(arr, texts, names):
    """`texts` (of the floats `arr`) with each NaN's and infinity's replaced by its name in
    `names` (keyed by ``nan``, ``inf``, ``-inf``)."""
    for i in np.flatnonzero(~np.isfinite(arr)).tolist():
        texts[i] = names[texts[i]]
    return texts


_JSON_SPECIALS = {t: json.dumps(float_json(float(t))) for t in ("nan", "inf", "-inf")}


def json_items(arr, item, ensure_ascii=False):
    """The JSON text of each item of a 1-d array, as json.dumps(item_json(x, item))."""
    kind = arr.dtype.kind
    if item is T.Text:
        encode = encode_basestring_ascii if ensure_ascii else encode_basestring
        return list(map(encode, map(str, arr.tolist())))
    if item in (T.DateTime, T.TimeSpan, T.DateTimeOffset, T.RowId) or kind not in "biuf":
        return [json.dumps(item_json(x, item), ensure_ascii=ensure_ascii) for x in arr]
    if kind == "b":
        return np.where(arr, "true", "false").tolist()
    if kind in "iu":
        return list(map(str, arr.tolist()))
    texts = float_texts(arr)
    if arr.dtype.itemsize != 8:         # shortest_float: Python's form of a float32's text,
        # which numpy's positional text already is, and its exponent form (1e-04) is not
        for i in list(compress(count(), map(str.__contains__, texts, repeat("e")))):
            texts[i] = repr(float(texts[i]))
    return name_specials(arr, texts, _JSON_SPECIALS)


def json_column(values, type_, ensure_ascii=False, sep=", "):
    """The JSON text of each cell of a column in read()'s form, as json.dumps(cell_json(v,
    type_)) with item separator `sep`: vectors as (nested) arrays."""
    if not isinstance(type_, T.Vector):
        return json_items(np.asarray(values), type_, ensure_ascii)
    if isinstance(values, Ragged):      # each row flat, whatever the dims
        items = iter(json_items(values.values, type_.item, ensure_ascii))
        return [f"[{sep.join(islice(items, n))}]" for n in values.lengths.tolist()]
    arr = np.asarray(values)
    if arr.ndim < 2:
        return [json.dumps(cell_json(v, type_), ensure_ascii=ensure_ascii,
                           separators=(sep, ": ")) for v in values]
    cells = json_items(arr.reshape(-1), type_.item, ensure_ascii)
    for axis in range(arr.ndim - 1, 0, -1):         # the innermost arrays first
        size = arr.shape[axis]
        if size == 0:
            cells = ["[]"] * math.prod(arr.shape[:axis])
        else:
            cells = list(map("[{}]".format, map(sep.join, zip(*[iter(cells)] * size))))
    return cells
