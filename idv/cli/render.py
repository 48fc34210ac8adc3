"""How the command line shows values: cells as text and JSON, each file's key labels, aligned
tables, JSON documents.

Dates and times are written from their .NET ticks by idv._values.ticks, exact to the tick.
"""
from __future__ import annotations

import json
import sys
import unicodedata
import warnings

import numpy as np

from idv import types as T
from idv._interop.delimited import DelimitedWriter, key_labels
from idv._reader.whole_read import same_annotation
from idv._values.cells import item_json, rowid_int
from idv._values.metadata import expands
from idv.cli.errors import CliError

VECTOR_ITEMS = 5   # vector items shown per table cell before "..."


# ---------------------------------------------------------------- cells

def safe_text(s):
    """Text for the terminal (a cell, a column or entry name): control characters and
    separators other than the space escaped (no escape sequence, line break or bidi override
    of a file's reaches the terminal), the rest as is."""
    s = str(s)
    return s if s.isprintable() else repr(s)[1:-1]


_text_str = safe_text


def stderr_line(line):
    """Print `line` (an error, a warning, convert's summary) on stderr, escaped as a cell is:
    a message that quotes a file's bytes puts no escape sequence on the terminal. Nothing when
    stderr is closed: print(file=None) would write the line into the data on stdout."""
    if sys.stderr is not None:
        print(safe_text(line), file=sys.stderr)


def item_str(x, item, in_vector=False):
    """One item for a table cell."""
    if item is T.Text:
        return repr(str(x)) if in_vector else _text_str(x)
    if item in (T.DateTime, T.TimeSpan, T.DateTimeOffset):
        return item_json(x, item)
    if item is T.RowId:
        return str(rowid_int(x))
    return str(x)


def _vector_str(arr, item, limit):
    if arr.ndim > 1:
        parts = [_vector_str(a, item, limit) for a in arr[:limit]]
    else:
        parts = [item_str(a, item, True) for a in arr[:limit]]
    if len(arr) > limit:
        parts.append("...")
    return "[" + ", ".join(parts) + "]"


def cell_str(value, type_):
    """A table cell; vectors show their first VECTOR_ITEMS items."""
    if isinstance(type_, T.Vector):
        return _vector_str(np.asarray(value), type_.item, VECTOR_ITEMS)
    return item_str(value, type_)


def value_str(value, type_, limit=10):
    """An annotation's value on one line: vectors show `limit` items, then "..." and how many
    there are in all."""
    if isinstance(type_, T.Vector):
        arr = np.asarray(value)
        text = _vector_str(arr, type_.item, limit)
        return text + (f" ({arr.shape[0]} in all)" if arr.shape[0] > limit else "")
    return item_str(value, type_)


def is_numeric(t):
    """Whether a column's cells are right-aligned numbers."""
    return t is not None and not isinstance(t, T.Vector) and (
        isinstance(t, T.Key) or t.dtype.kind in "iuf")


# ---------------------------------------------------------------- each file's labels

class FileColumns:
    """The columns printed (`cols`, select_columns') as each file of `src` has them: a
    dataset's files each name their keys by their own KeyValues. ``parts``: the file of each
    batch, noted by source_batches and filtered_batches as they hand it out."""

    def __init__(self, src, cols):
        self.src, self.cols, self.parts, self._labels = src, cols, [], {}

    def of(self, part):
        """The columns in file `part`."""
        f = self.src.open_file(part) if part else None
        return self.cols if f is None else [f[c.name] for c in self.cols]

    def labels(self, part):
        """key_labels of each column in file `part`."""
        if part not in self._labels:
            self._labels[part] = [key_labels(c) for c in self.of(part)]
        return self._labels[part]

    def writer(self, part, out, sep):
        """A DelimitedWriter (no header) of file `part`'s columns, whose slot columns the
        header names: the same SlotNames as the first file's, else CliError."""
        cols = self.of(part)
        for a, b in zip(self.cols, cols):
            if expands(a.type) and not same_annotation([a, b], "SlotNames"):
                raise CliError(f"{self.src.files[part].path}: column {a.name!r} has other "
                               f"SlotNames than {self.src.files[0].path}, and the header "
                               f"names its slots once: print the files one by one")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # wide vectors: told of for the first file
            return DelimitedWriter(out, cols, sep, header=False)


# ---------------------------------------------------------------- tables and documents

def display_width(s):
    """Terminal columns `s` takes (wide East Asian characters 2, combining marks 0)."""
    return sum(0 if unicodedata.combining(c) else
               2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)


def _clip(s, width):
    if width is None or display_width(s) <= width:
        return s
    out, w = [], 0
    for c in s:
        cw = display_width(c)
        if w + cw > width - 3:
            break
        out.append(c)
        w += cw
    return "".join(out) + "..."


class Table:
    """An aligned text table whose column widths come from the header and the first rows
    given, so that a long table prints as its rows arrive (idv cat): later cells wider than
    their column push the line out rather than re-align what was printed."""

    def __init__(self, header, first_rows=(), right=(), max_width=None, sep="  ",
                 underline=True):
        self.header = [[safe_text(c) for c in h] for h in
                       ([header] if header and isinstance(header[0], str) else header)]
        self.right, self.max_width, self.sep, self.underline = right, max_width, sep, underline
        body = self._clipped(first_rows)
        self.ncol = len(self.header[0]) if self.header else (len(body[0]) if body else 0)
        self.widths = [max([display_width(r[i]) for r in self.header + body] or [0])
                       for i in range(self.ncol)]

    def _clipped(self, rows):
        return [[_clip(safe_text(c), self.max_width) for c in r] for r in rows]

    def _line(self, cells):
        out = []
        for i, c in enumerate(cells):
            pad = " " * (self.widths[i] - display_width(c))
            out.append(pad + c if i in self.right else (c + pad if i < self.ncol - 1 else c))
        return self.sep.join(out).rstrip()

    def head(self):
        """The header lines (and the underline)."""
        lines = [self._line(h) for h in self.header]
        if self.underline and self.header:
            lines.append(self.sep.join("-" * w for w in self.widths))
        return lines

    def lines(self, rows):
        """The lines of `rows`."""
        return [self._line(r) for r in self._clipped(rows)]


def render_table(header, rows, right=(), max_width=None, sep="  ", underline=True):
    """Aligned text table; `right` holds the indices of right-aligned columns."""
    t = Table(header, rows, right, max_width, sep, underline)
    return "\n".join(t.head() + t.lines(rows))


def ascii_only(out):
    """Whether JSON written to `out` must escape non-ASCII (it is not UTF-8)."""
    return (getattr(out, "encoding", None) or "").lower().replace("-", "") != "utf8"


def dump_json(obj, out, rows_key=None):
    """Indented JSON; the list under `rows_key` gets one line per row."""
    ascii_ = ascii_only(out)
    rows = obj.get(rows_key) if rows_key else None
    if rows is None:
        json.dump(obj, out, indent=2, ensure_ascii=ascii_)
    else:
        mark = "\x00rows\x00"
        text = json.dumps({**obj, rows_key: mark}, indent=2, ensure_ascii=ascii_)
        body = ",\n".join("    " + json.dumps(r, ensure_ascii=ascii_) for r in rows)
        out.write(text.replace(json.dumps(mark), f"[\n{body}\n  ]" if rows else "[]"))
    out.write("\n")


def plural(n, word):
    """'1 row', '2 rows'."""
    return f"{n} {word}{'' if n == 1 else 's'}"
