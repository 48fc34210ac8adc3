"""One value as text, exactly: the JSON form (dates and times in .NET's ISO forms, to the
tick; RowId as one integer; NaN and infinities by name) and the CSV cell. The command line's
output and the CSV writer (idv._interop.delimited) share them.
"""
from __future__ import annotations

import json
import math

import numpy as np

from idv import types as T
from idv._values.ticks import format_datetime, format_datetimeoffset, format_timespan


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
