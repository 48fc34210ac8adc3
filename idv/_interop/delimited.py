"""Rows of .idv columns as text, one line (or CSV record) per row: CSV and TSV, and JSON Lines
(newline-delimited JSON). These are the one writers of ``idv cat --format csv / tsv / jsonl``
and of ``idv.convert(x.idv, x.csv / x.tsv / x.jsonl)``, so both give the same text.

CSV / TSV: a fixed-size vector is one column per slot (``Features.Size``, from its SlotNames,
else ``Features.0``...) up to idv._interop.pandas' MAX_EXPAND_SLOTS slots, as pandas expands it; a
wider vector (with one IdvWarning) and a variable-size vector are one cell holding a JSON
array; a key with
KeyValues is its value's text (missing: empty; a value above the key count its raw number),
each slot of such a key vector too, other keys their raw number; DateTime,
TimeSpan and DateTimeOffset in .NET's ISO forms, exact to the tick; RowId one integer;
Booleans ``true`` / ``false``; floats their shortest form, ``NaN`` and ``Infinity`` by name.

JSON Lines: one object per row, column name -> the value in idv._values.cells' JSON form (vectors
as arrays, keys their raw number, times in .NET's ISO forms, NaN and infinities as the strings
``"NaN"``, ``"Infinity"``, which JSON has no number for). """
from __future__ import annotations

import csv
import json

import numpy as np

from idv import types as T
from idv._values.metadata import expands, slot_labels, usable_key_values, warn_kept_wide
from idv._values.cells import cell_json, csv_cell, csv_item


def _floats(arr):
    text = [str(x) for x in arr]              # numpy's shortest form at the array's precision
    special = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
    return [special.get(t, t) for t in text]


def _items(item, arr):
    """The cells of a 1-d array of items."""
    if arr.dtype.kind in "iu":                 # integers and keys
        return arr.astype(str).tolist()
    if item is T.Boolean:
        return np.where(arr, "true", "false").tolist()
    if item in (T.Single, T.Double):
        return _floats(arr)
    if item is T.Text:
        return [str(x) for x in arr]
    return [csv_item(x, item) for x in arr]


class KeyLabels:
    """The text of a key's raw values, ``labels[raw]`` (an array): "" for 0, the missing key,
    the text of KeyValue k for 1..count, and the raw integer of a stored value above the count
    (ML.NET writes and reads one as it is; no KeyValue labels it)."""

    def __init__(self, texts):
        self._texts = np.array([""] + texts, object)

    def __getitem__(self, raw):
        raw = np.asarray(raw).astype(np.uint64)     # keys are unsigned (int64 views of UInt64)
        labelled = raw < len(self._texts)
        out = self._texts[np.where(labelled, raw, 0)]
        if not labelled.all():
            out[~labelled] = raw[~labelled].astype(str)
        return out


def key_labels(col, slots=False):
    """The KeyLabels of a key column whose KeyValues label it (`slots`: of the items of a key
    vector, each slot column's), else None: the one rule of every text output (CSV, TSV,
    ``idv head``, the table of ``idv cat``), as Arrow's dictionaries, pandas' Categoricals,
    polars and DuckDB show such keys."""
    kv = usable_key_values(T.item_type(col.type) if slots else col.type, col)
    if kv is None:
        return None
    kv_type = T.item_type(col.metadata_types["KeyValues"])
    return KeyLabels(_items(kv_type, np.asarray(kv)))


class _Column:
    """One .idv column's header names, and its rows as cells (one list per output column)."""

    def __init__(self, col):
        self.type = t = col.type
        self.names = [col.name]
        self.expanded = expands(t)
        if self.expanded:
            self.names = slot_labels(col.name, t, col.annotation("SlotNames"))
        self.key_values = key_labels(col, slots=self.expanded)

    def cells(self, values):
        t = self.type
        if self.key_values is not None:         # a key, or each slot of a key vector
            raw = np.asarray(values).reshape(len(values), len(self.names))
            return [self.key_values[raw[:, j]].tolist() for j in range(len(self.names))]
        if isinstance(t, T.Vector):
            if self.expanded:
                flat = np.asarray(values).reshape(len(values), -1)
                return [_items(t.item, flat[:, j]) for j in range(flat.shape[1])]
            return [[csv_cell(v, t) for v in values]]
        return [_items(t, np.asarray(values))]


class DelimitedWriter:
    """Rows of .idv columns as CSV (``delimiter=","``) or TSV (``"\\t"``) on a text stream:
    ``write(values)`` takes the same rows of each column in read()'s form."""

    def __init__(self, out, columns, delimiter=",", header=True):
        columns = list(columns)
        warn_kept_wide(columns, "one cell of a JSON array")
        self._columns = [_Column(c) for c in columns]
        self._writer = csv.writer(out, delimiter=delimiter, lineterminator="\n")
        if header:
            self._writer.writerow([n for c in self._columns for n in c.names])

    @property
    def names(self):
        """The output's column names."""
        return [n for c in self._columns for n in c.names]

    def write(self, values):
        cells = [cs for c, v in zip(self._columns, values) for cs in c.cells(v)]
        if cells:
            self._writer.writerows(zip(*cells))

    def write_rows_without_columns(self, rows):
        """Rows of a selection without columns: CSV has no record for them (nothing)."""


class JsonLinesWriter:
    """Rows of .idv columns as JSON Lines on a text stream: ``write(values)`` takes the same
    rows of each column in read()'s form. `ensure_ascii` escapes non-ASCII text (for a stream
    that is not UTF-8)."""

    def __init__(self, out, columns, ensure_ascii=False):
        self._out = out
        self._columns = list(columns)
        self._names = [c.name for c in self._columns]
        self._ascii = ensure_ascii

    def write(self, values):
        cells = [[cell_json(v, c.type) for v in d] for c, d in zip(self._columns, values)]
        self._out.write("".join(json.dumps(dict(zip(self._names, row)),
                                           ensure_ascii=self._ascii) + "\n"
                                for row in zip(*cells)))

    def write_rows_without_columns(self, rows):
        """Rows of a selection without columns: an empty object each."""
        self._out.write("{}\n" * rows)
