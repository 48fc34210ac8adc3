"""What a notebook shows of a file, a schema, a column or a dataset (``_repr_html_``): the
columns as a table (name, ML.NET type, Arrow type, annotations, and the statistics' least and
greatest values where the file has them), the rows, blocks and size, and the first rows.

Only what is cheap is read: the header and tables an open file holds already, the statistics
section, and the blocks of the first rows. Every value is escaped.
"""
from __future__ import annotations

import html

from idv._reader import block_stats
from idv._values import cells
from idv import types as T
from idv.errors import IdvFormatError

HEAD_ROWS = 5          # the first rows shown
_CELL_CHARS = 40       # a longer cell is cut, as `idv head` cuts it


def _e(value):
    return html.escape(str(value))


def _cut(text):
    return text if len(text) <= _CELL_CHARS else text[:_CELL_CHARS - 1] + "…"


def _arrow_type(t, key_values):
    """The Arrow type a column reads as (times in microseconds), or "" without pyarrow."""
    try:
        import pyarrow as pa
    except ImportError:
        return ""
    from idv._values import arrow_types
    try:
        labels = pa.array([], pa.string()) if key_values else None
        return str(arrow_types.column_arrow_type(pa, t, "us", labels))
    except (TypeError, ValueError, pa.ArrowException):
        return ""


def _table(header, rows):
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _bounds(f):
    """name -> (least, greatest) as text, from the file's statistics section (none without:
    nothing is decoded to find them)."""
    try:
        if f.statistics is None:
            return {}
        rows, _ = block_stats.summary(f)
    except IdvFormatError:
        return {}
    return {name: (block_stats.bound_text(lo, t), block_stats.bound_text(hi, t))
            for name, t, _, _, lo, hi, _ in rows}


def schema_rows(fields, columns=None, bounds=None):
    """One row per field of a Schema: #, name, ML.NET type, Arrow type, annotations, and
    min / max where `bounds` has them. `columns`: name -> Column, for KeyValues."""
    bounds = bounds or {}
    rows = []
    for f in fields:
        kinds = ", ".join(f"{k}: {v}" for k, v in (f.metadata_types or {}).items())
        t = f.type
        keyed = t is not None and isinstance(T.item_type(t), T.Key) and \
            "KeyValues" in (f.metadata_types or {})
        lo, hi = bounds.get(f.name, ("", ""))
        rows.append([f.index, f.name + (" (hidden)" if f.hidden else ""),
                     t if t is not None else f"unreadable: codec {f.codec}",
                     "" if t is None else _arrow_type(t, keyed), kinds, lo, hi])
    return rows


def _schema_table(fields, bounds=None):
    return _table(["#", "name", "ML.NET type", "Arrow type", "annotations", "min", "max"],
                  schema_rows(fields, bounds=bounds))


def _first_rows(read, names, types):
    """The first rows as a table (`read()`: dict name -> values of them), or the reason they
    cannot be shown."""
    try:
        got = read()
    except (IdvFormatError, MemoryError, ValueError, OSError) as e:
        return f"<p>first rows not shown: {_e(e)}</p>"
    n = min((len(v) if not hasattr(v, "shape") else v.shape[0]) for v in got.values()) \
        if got else 0
    rows = [[i] + [_cut(cells.csv_cell(got[name][i], t)) for name, t in zip(names, types)]
            for i in range(n)]
    return _table(["row"] + names, rows)


def _readable(fields):
    return [f for f in fields if f.type is not None and not f.hidden]


def file_html(f):
    """An open IdvFile (the caller's ``_repr_html_``)."""
    if f.closed:
        return f"<p>idv file {_e(f.path or '')} (closed)</p>"
    blocks = f.columns[0].num_blocks if f.columns else 0
    bounds = _bounds(f)
    head = (f"<p><b>idv file</b> {_e(f.path or '(in memory)')}: {f.num_rows:,} rows, "
            f"{f.num_columns} columns, {blocks:,} blocks a column, "
            f"{f.header.tail_offset + 8:,} bytes{'' if bounds else ', no block statistics'}"
            f"</p>")
    fields = f.schema.fields
    shown = _readable(fields)
    rows = min(HEAD_ROWS, f.num_rows)
    first = _first_rows(lambda: f.read([x.index for x in shown], rows=slice(0, rows)),
                        [x.name for x in shown], [x.type for x in shown])
    return head + _schema_table(fields, bounds) + first


def schema_html(schema):
    """A Schema."""
    return (f"<p><b>idv schema</b>: {len(schema)} columns, {schema.num_rows:,} rows</p>"
            + _schema_table(schema.fields))


def column_html(col):
    """A Column of an open file."""
    return (f"<p><b>idv column</b> {_e(col.name)}: {_e(col.type)}, {col.num_rows:,} rows, "
            f"{col.num_blocks:,} blocks, {col.nbytes_disk:,} bytes stored</p>")


def dataset_html(ds):
    """A Dataset: its files, rows and schema, and its first rows."""
    head = (f"<p><b>idv dataset</b>: {len(ds.files):,} files, {ds.num_rows:,} rows, "
            f"{len(ds.column_names)} columns</p>")
    names = set(ds.column_names)
    fields = [x for x in ds.schema.fields if x.name in names]
    shown = _readable(fields)
    rows = min(HEAD_ROWS, ds.num_rows)
    first = _first_rows(lambda: ds.read([x.name for x in shown], rows=slice(0, rows)),
                        [x.name for x in shown], [x.type for x in shown])
    return head + _schema_table(fields) + first
