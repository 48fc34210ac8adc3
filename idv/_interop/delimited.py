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
import io
from itertools import repeat
from json.encoder import encode_basestring, encode_basestring_ascii

import numpy as np

from idv import types as T
from idv._reader import selection
from idv._values.metadata import expands, slot_labels, usable_key_values, warn_kept_wide
from idv._values.cells import csv_item, float_texts, json_column, name_specials

_SPECIALS = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
# the characters of the cells of numbers, Booleans, times and RowIds (none needs quotes in CSV)
_PLAIN = frozenset("0123456789+-.:eTNaInfityruls")
_CHUNK_ROWS = 256


def _floats(arr):
    return name_specials(arr, float_texts(arr), _SPECIALS)


def _items(item, arr):
    """The cells of a 1-d array of items."""
    if arr.dtype.kind in "iu" or item is T.Text:      # integers, keys and text
        return list(map(str, arr.tolist()))
    if item is T.Boolean:
        return np.where(arr, "true", "false").tolist()
    if item in (T.Single, T.Double):
        return _floats(arr)
    return [csv_item(x, item) for x in arr]


def _row_chunks(values):
    """The columns' `values` (read()'s forms) _CHUNK_ROWS rows at a time: what a write holds
    is the text of that many rows, whatever the batch's."""
    rows = len(values[0]) if len(values) else 0
    for a in range(0, rows, _CHUNK_ROWS):
        yield [v[a:a + _CHUNK_ROWS] for v in values]


def _lines(cells, parts):
    """One line a row, each ending in a line feed: the rows' `cells` (a list per column)
    between the `parts` (the text before the first cell, between each two, after the last)."""
    first, *between, last = parts
    if first or last or len(set(between)) > 1:      # JSON Lines: each name before its value
        pieces = [repeat(first)]
        for cs, part in zip(cells, parts[1:]):
            pieces += [cs, repeat(part)]
        return "\n".join(map("".join, zip(*pieces))) + "\n"
    return "\n".join(map("".join(between[:1]).join, zip(*cells))) + "\n"


class _Quoting:
    """Cells quoted as csv.writer(delimiter=, lineterminator="\\n") quotes them: those holding
    the delimiter, '"', a line feed or (from Python 3.12 on) a carriage return, in quotes with
    '"' doubled; the one cell of a record of one empty cell as ``""``."""

    def __init__(self, delimiter):
        probe = io.StringIO()
        csv.writer(probe, delimiter=delimiter, lineterminator="\n").writerows([["\r"], [""]])
        cr, self.lone_empty = probe.getvalue().split("\n")[:2]
        self._chars = [delimiter, '"', "\n"] + (["\r"] if cr != "\r" else [])

    def __call__(self, cells, plain=False):
        """`cells` (a column's), quoted where they need it (`plain`: those of numbers, Booleans,
        times or RowIds, which need quotes only where the delimiter is one of their characters).
        """
        chars = self._chars
        if plain and chars[0] not in _PLAIN:
            return cells
        joined = "".join(cells)
        if not any(c in joined for c in chars):
            return cells
        return ['"' + x.replace('"', '""') + '"' if any(c in x for c in chars) else x
                for x in cells]


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
        self.plain = self.key_values is None and T.item_type(t) is not T.Text \
            and (self.expanded or not isinstance(t, T.Vector))

    def cells(self, values):
        t = self.type
        if self.key_values is not None:         # a key, or each slot of a key vector
            raw = np.asarray(values).reshape(len(values), len(self.names))
            return [self.key_values[raw[:, j]].tolist() for j in range(len(self.names))]
        if isinstance(t, T.Vector):
            if self.expanded:
                size = len(self.names)
                items = _items(t.item, np.asarray(values).reshape(len(values) * size))
                return [items[j::size] for j in range(size)]
            return [json_column(values, t, sep=",")]
        return [_items(t, np.asarray(values))]


class DelimitedWriter:
    """Rows of .idv columns as CSV (``delimiter=","``) or TSV (``"\\t"``) on a text stream:
    ``write(values)`` takes the same rows of each column in read()'s form."""

    # a row of no column has no record (idv cat writes none; idv.convert refuses them)
    keeps_rows_without_columns = False

    def __init__(self, out, columns, delimiter=",", header=True):
        columns = list(columns)
        warn_kept_wide(columns, "one cell of a JSON array")
        self._columns = [_Column(c) for c in columns]
        self._out, self._delimiter = out, delimiter
        self._quoted = _Quoting(delimiter)
        if header:
            csv.writer(out, delimiter=delimiter, lineterminator="\n").writerow(self.names)

    @property
    def names(self):
        """The output's column names."""
        return [n for c in self._columns for n in c.names]

    def write(self, values):
        for chunk in _row_chunks(values):
            cells = [self._quoted(cs, c.plain) for c, v in zip(self._columns, chunk)
                     for cs in c.cells(v)]
            if len(cells) == 1:
                cells = [[x or self._quoted.lone_empty for x in cells[0]]]
            if cells:
                self._out.write(_lines(cells, ["", *[self._delimiter] * (len(cells) - 1), ""]))

    def write_rows_without_columns(self, rows):
        """Rows of a selection without columns: CSV has no record for them (nothing)."""


class JsonLinesWriter:
    """Rows of .idv columns as JSON Lines on a text stream: ``write(values)`` takes the same
    rows of each column in read()'s form. `ensure_ascii` escapes non-ASCII text (for a stream
    that is not UTF-8)."""

    keeps_rows_without_columns = True      # an empty object each

    def __init__(self, out, columns, ensure_ascii=False):
        self._out = out
        self._columns = selection.one_per_name(
            list(columns), "JSON Lines", "choose one of them, or write CSV, TSV or JSON "
            "(idv cat --format), which keep both")
        self._ascii = ensure_ascii
        at = {}                 # a column picked twice: its first place
        for i, c in enumerate(self._columns):
            at.setdefault(c.name, i)
        self._at = list(at.values())
        key = encode_basestring_ascii if ensure_ascii else encode_basestring
        self._parts = [f"{', ' if i else '{'}{key(name)}: " for i, name in enumerate(at)] \
            + ["}"]

    def write(self, values):
        for chunk in _row_chunks([values[i] for i in self._at]):
            cells = [json_column(v, self._columns[i].type, self._ascii)
                     for i, v in zip(self._at, chunk)]
            self._out.write(_lines(cells, self._parts))

    def write_rows_without_columns(self, rows):
        """Rows of a selection without columns: an empty object each."""
        self._out.write("{}\n" * rows)
