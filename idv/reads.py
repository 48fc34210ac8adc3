"""numpy's read and take of a source of rows (idv.read_source), written once: IdvFile.read /
take and Dataset.read / take are these (dict name -> array, read()'s forms).

Every row: the one planner of whole reads (idv.whole_read). Some rows (``rows=``, take): each
file's share read by its columns (Column's row access, idv.take), joined and put in the order
asked. A filter: each file's matching rows (idv.filters). Times are then put in the unit
``datetime`` asks for, one unit for a column of every file (idv.time_units).
"""
from __future__ import annotations

import numpy as np

from idv import filters, selection, ticks, vectors, whole_read
from idv import take as _take
from idv import types as T
from idv.column import Column
from idv.read_source import READ_TIME_MODES

# read(text=...): Text values as Python str objects, or numpy 2's StringDType
TEXT_FORMS = ("object", "StringDType")


def _check(sparse, rows, text, filter_):
    """ValueError for options read() does not take (together)."""
    if text not in TEXT_FORMS:
        raise ValueError(f"text must be one of {', '.join(map(repr, TEXT_FORMS))}, not "
                         f"{text!r}")
    if text == "StringDType" and not hasattr(getattr(np, "dtypes", None), "StringDType"):
        raise ValueError(f"text='StringDType' needs numpy >= 2 (numpy {np.__version__} is "
                         f"installed)")
    if filter_ is not None and (rows is not None or sparse):
        raise ValueError("read(filter=...) takes neither rows= nor sparse=True")
    if rows is not None and sparse:
        raise ValueError("read(rows=...) with sparse=True is not supported: read the rows "
                         "of one column with col[rows]")


def read(source, columns=None, sparse=False, rows=None, datetime="100ns", text="object",
         filter=None, copy=True):  # noqa: A002 - pyarrow's and pandas' name
    """IdvFile.read and Dataset.read (their docstrings hold the options)."""
    _check(sparse, rows, text, filter)
    ticks.check_time_mode(datetime, READ_TIME_MODES)
    keys = source.resolve_columns(columns)
    with source.using(0) as first:
        cols = [first[k] for k in keys]       # their names and types, after it is closed too
    names = [c.name for c in cols]
    strings = text == "StringDType"
    whole = None
    if filter is not None:
        got = []
        for i in range(len(source.files)):
            with source.using(i) as f:
                got.append(filters.read(f, names, filter))
        values = [vectors.concat_reads([g[n] for g in got]) for n in names]
    elif rows is not None:
        values = _rows(source, keys, rows, lambda f, local: [
            f[k].read_strings(local) if strings and T.item_type(f[k].type) is T.Text
            else f[k][local] for k in keys])
        strings = False
    else:
        values = whole_read.read(source, keys, 0, len(source.files), whole_read.Form(
            mapped=None if copy else Column.read_mapped, sparse=bool(sparse),
            strings=strings))
        whole, strings = dict(zip(names, values)), False
    unit, _ = source.time_unit(names, datetime, True, whole)
    return {c.name: _retimed(c, v, unit, strings) for c, v in zip(cols, values)}


def _rows(source, keys, rows, read_rows):
    """Rows `rows` of columns `keys` (a value each), each file's share read by
    ``read_rows(file, its rows)`` (a value per key), joined in the order asked, checked as a
    whole first where the source is (a file reads them as asked)."""
    files = source.files
    if not source.checked_whole:        # a file: its columns take the rows as asked
        parts, restore = [(0, rows)], None
    else:
        parts, restore = selection.split_rows(rows, np.array([f.start for f in files],
                                                              np.int64), source.num_rows)
        whole_read.check_memory(source, keys, parts)
    if not parts:          # no rows: the empty forms, from the first file
        parts = [(0, slice(0, 0))]
    got = []
    for i, local in parts:
        with source.using(i) as f:
            got.append(read_rows(f, local))
    out = []
    for j in range(len(keys)):
        v = got[0][j] if len(got) == 1 else vectors.concat_reads([g[j] for g in got])
        out.append(v if restore is None else v[restore])
    return out


def take(source, indices, columns=None, datetime="100ns") -> dict:
    """IdvFile.take and Dataset.take: rows by number over the source's files end to end."""
    ticks.check_time_mode(datetime, READ_TIME_MODES)
    keys = source.resolve_columns(columns)
    with source.using(0) as first:
        cols = [first[k] for k in keys]
    # the result, before any array of its row numbers
    _take.check_result(indices, source.num_rows, [c.type for c in cols], source.need)
    values = _rows(source, keys, selection.take_numbers(indices),
                   lambda f, local: _take.taken(f, local, [f[k] for k in keys]))
    unit, _ = source.time_unit([c.name for c in cols], datetime, True)
    return {c.name: _retimed(c, v, unit, False) for c, v in zip(cols, values)}


def _retimed(c, values, datetime, strings):
    """read()'s value of column `c` with its times in the unit `datetime` gives it, and Text
    as StringDType (`strings`)."""
    mode, safe = ticks.unit_of(datetime, c.name)
    if mode != "100ns" and T.item_type(c.type) in ticks.TIME_ITEMS:
        values = ticks.retimed(values, T.item_type(c.type), mode, f"column {c.name!r}", safe)
    if strings and T.item_type(c.type) is T.Text:
        values = np.asarray(values, dtype=np.dtypes.StringDType())
    return values
