"""Apache Arrow from .idv files: ``to_arrow``, ``record_batch_reader`` and ``arrow_schema``.

pyarrow is imported only when these are called (``pip install idv[arrow]``).

Every ML.NET type has an Arrow form (docs/interop.md has the table; idv._values.arrow_types holds
it), and each field keeps the ML.NET type string (``idv.type``) and the column's metadata
(``idv.metadata``, JSON with each value's type) in its Arrow field metadata, so that
``idv.from_arrow`` (idv._writer.arrow) gives back the exact types and annotations: a Parquet or
Feather file written from ``to_arrow`` converts back to the same .idv. """
from __future__ import annotations

import contextlib

import numpy as np

from idv import _docs
from idv._resources import budget, gc as _gc
from idv._scan import filters
from idv._values import ticks
from idv._values.arguments import ensure_count
from idv._reader import read_source, selection, take as _take, whole_read
from idv._reader.reader import opened
from idv._reader.read_source import file_rows
from idv._interop.arrow_columns import chunked, converters, fields, is_text
from idv._interop.arrow_stream import (WINDOW, Stream, arrow_form, constant_arrays,
                                       file_batches, group_batches, joined)
from idv._values.arrow_types import TYPE_KEY, column_arrow_type, empty_table, import_pyarrow

__all__ = ["to_arrow", "record_batch_reader", "arrow_schema"]

@_docs.fill
def arrow_schema(file, columns=None, *, datetime="auto", **kwargs):
    """The pyarrow.Schema that to_arrow and record_batch_reader give for these columns, each
    field with its ML.NET type and metadata (``idv.type``, ``idv.metadata``).

    Parameters
    ----------
    {source:file}
    {columns}
    {datetime}
        Default ``'auto'``; with ``'auto'`` or ``'exact'``, a file without statistics has
        its time columns read to choose their units.
    **kwargs
        The options of idv.open, for a file opened here (``memory_limit=``...), as to_arrow
        takes them.
    """
    pa = import_pyarrow()
    with opened(file, **kwargs) as src:
        asked = src.resolve_columns(columns)
        keys, fixed = read_source.split(src, asked)
        unit, _ = _unit(src, keys, datetime, True)
        with src.using(0) as first:
            found = fields(pa, first, keys, unit, True)
        found = dict(zip(keys + fixed, found + _constant_fields(pa, src, fixed)))
        return pa.schema([found[k] for k in asked])


def _unit(src, keys, datetime, safe, values=None):
    """(datetime, safe) of a read of columns `keys` of source `src` (its time_unit)."""
    ticks.check_time_mode(datetime)
    return src.time_unit(read_source.key_names(src, keys), datetime, safe, values)


@budget.reads
@_docs.fill
def to_arrow(file, columns=None, *, datetime="auto", safe=True, rows=None,
             filter=None, **kwargs):  # noqa: A002 - pyarrow's and pandas' name
    """Read an .idv into a pyarrow.Table, a chunk per block (with a filter, per window of
    blocks), with no copy where the file's bytes are Arrow's already.

    Parameters
    ----------
    {source:file}
    {columns}
    {datetime}
        Default ``'auto'``. ``timestamp[ns]`` holds 1677-2262; ``'us'`` all of .NET's range;
        ``'ticks'`` columns are restored to their ML.NET type by from_arrow. ValueError for
        a value the unit cannot hold.
    {safe}
    {table_rows}
    {filter}
    **kwargs
        The options of idv.open, for a file opened here (``memory_limit=``...).

    Returns
    -------
    pyarrow.Table
        Each field carries the ML.NET type and metadata, for idv.from_arrow.

    Examples
    --------
    >>> import idv
    >>> t = idv.to_arrow(idv.sample_path(), ["Id", "Price"], filter="Price > 800000")
    >>> t.column_names, t.num_rows > 0
    (['Id', 'Price'], True)
    """
    pa = import_pyarrow()
    ticks.check_time_mode(datetime)
    with opened(file, **kwargs) as src:
        asked = src.resolve_columns(columns)
        rows = read_source.table_rows(src, rows, filter, asked)
        if not selection.in_order(rows):        # rows by number, or backwards
            unit, safe = _unit(src, read_source.split(src, asked)[0], datetime, safe)
            return taken(src, asked, rows, unit, safe, arrow_schema(src, asked, datetime=unit))
        if filter is not None or rows is not None:   # through the scan: the blocks they need
            reader = window_reader(src, asked, datetime=datetime, safe=safe, filter=filter,
                                   rows=rows)
            # the table holds every batch: the whole of them within the memory limit
            what = "the rows read" if filter is None else "the rows matching the filter"
            return pa.Table.from_batches(list(budget.kept(
                reader, src.memory_limit, lambda: f"{budget.name_of(src)}: {what}")),
                reader.schema)
        keys, fixed = read_source.split(src, asked)
        table = _whole(pa, src, keys, datetime, safe)
        if not fixed:
            return table
        fields = _constant_fields(pa, src, fixed)
        types = [f.type for f in fields]
        chunks = [constant_arrays(pa, src, fixed, types, i, e.num_rows)
                  for i, e in enumerate(src.files)]
        for j, field in enumerate(fields):
            table = table.append_column(field, pa.chunked_array([c[j] for c in chunks],
                                                                field.type))
        return table.select(asked)


@_gc.paused_for(lambda pa, src, *_: len(src.files))
def _whole(pa, src, keys, datetime, safe):
    """to_arrow's Table of every row of the files' columns `keys`."""
    if not keys:    # no columns, but maybe rows (ML.NET's internal saver writes such files)
        return pa.Table.from_batches([pa.RecordBatch.from_struct_array(
            pa.array([{}] * src.num_rows, pa.struct([])))])
    if len(src.files) == 1:
        return _table(pa, src, keys, 0, datetime, safe)
    whole_read.check_memory(src, keys, [(i, None) for i in range(len(src.files))],
                            once=keys, arrow=keys)
    unit, safe = _unit(src, keys, datetime, safe)
    # numbers and keys of the same key values read as one array each (the batched whole
    # read), Text as each file's blocks; the others file by file, as each file's table
    step = [k for k in keys if whole_read.joinable(src, k, arrow=True)]
    rest = [k for k in keys if k not in step]
    got = dict(zip(step, joined(pa, src, step, 0, len(src.files), unit, safe)))
    if rest:
        tables = [_table(pa, src, rest, i, unit, safe) for i in range(len(src.files))]
        schema = tables[0].schema
        table = pa.concat_tables([t if t.schema.equals(schema, check_metadata=True)
                                  else pa.Table.from_arrays(t.columns, schema=schema)
                                  for t in tables])
        got.update((k, (schema.field(j), table.column(j))) for j, k in enumerate(rest))
    return pa.Table.from_arrays([got[k][1] for k in keys],
                                schema=pa.schema([got[k][0] for k in keys]))


def _constant_fields(pa, src, fixed):
    """The Arrow fields of the source's constant columns `fixed` (read_source.constants),
    with their ML.NET type as every field's."""
    types = read_source.constant_types(src)
    return [pa.field(k, column_arrow_type(pa, types[k], None, None),
                     metadata={TYPE_KEY: str(types[k]).encode()}) for k in fixed]


def _mapped(col):
    """Form.mapped of Arrow: a column on the file's memory map is made into Arrow by
    _ColumnToArrow.mapped_arrays, not decoded."""
    return col if not is_text(col) and col.mappable else None


def _table(pa, src, keys, i, datetime, safe):
    """The Table of columns `keys` of file i of `src`: a chunk per block, Text on its blocks'
    UTF-8, uncompressed numbers of a mapped file as views of the map, each time column in the
    unit `datetime` gives it (settled over this file alone when not yet a ticks.Units)."""
    values = whole_read.read(src, keys, i, i + 1,
                             whole_read.Form(arrow=arrow_form, mapped=_mapped))
    with src.using(i) as f:
        cols = [f[k] for k in keys]
        decoded = {c.name: v for c, v in zip(cols, values)
                   if v is not c and not isinstance(v, list)}
        unit, safe = src.time_unit([c.name for c in cols], datetime, safe, decoded) \
            if len(src.files) == 1 else (datetime, safe)
        convs = converters(pa, cols, unit, safe)
        # the mapped columns' checksums checked together, over the read threads
        mapped = [c for c, v in zip(cols, values) if v is c]
        spans = iter(f.mapped_spans([(c, 0, c.num_blocks) for c in mapped]) if mapped else ())
        arrays = [conv.mapped_arrays(0, c.num_blocks, next(spans)) if v is c
                  else chunked(pa, conv, v) for c, conv, v in zip(cols, convs, values)]
        return pa.Table.from_arrays(arrays, schema=pa.schema([c.field for c in convs]))


@_docs.fill
def record_batch_reader(file, columns=None, *, datetime="auto", safe=True, batch_size=None,
                        rows=None, filter=None, **kwargs):  # noqa: A002 - pyarrow's name
    """A pyarrow.RecordBatchReader over an .idv, streaming files larger than memory.

    The blocks are decoded a window of rows at a time (about 8 MiB of decompressed blocks over
    the columns read, at least a block of each; the blocks of a window in parallel threads,
    text straight into Arrow), two windows ahead of the one whose batches are handed out, so
    at most about three windows are held. The batches of a window share its memory. A file
    opened here is closed when the batches run out; an IdvFile passed in stays open.

    Parameters
    ----------
    {source:file}
    {columns}
    {datetime}
        Default ``'auto'``, as to_arrow; with ``'auto'`` or ``'exact'``, a file without
        statistics has its time columns read once first, block by block.
    {safe}
    {batch_size}
    {rows}
    {filter}
    **kwargs
        The options of idv.open, for a file opened here (``memory_limit=``...).

    Examples
    --------
    >>> import idv
    >>> reader = idv.record_batch_reader(idv.sample_path(), ["Price"], batch_size=100)
    >>> [b.num_rows for b in reader]
    [100, 100, 40]
    """
    return _reader(file, columns, datetime, safe, batch_size, rows, filter, open_kwargs=kwargs)


def window_reader(file, columns=None, *, datetime="auto", safe=True, filter=None,  # noqa: A002
                  batch_rows=None, text_views=False, rows=None, quick_first=False):
    """record_batch_reader's stream in batches of whole blocks of about `batch_rows` rows (at
    least a block; None: a window of blocks, about 8 MiB decompressed) rather than a block
    each: what an engine takes as its batches, with a few Python calls a batch instead of a
    few a block, the filter's rows tested a batch at a time. As each batch is handed out, the
    file is checked to be the one opened (a mapped file's views outlive no check).
    `text_views`: Text as Arrow string views (pa.string_view) made as its blocks are decoded,
    where idv tests no rows (else strings: a test's matches are copied out of them). `rows`:
    a slice of the rows (an engine's row limit: only the blocks that hold them are read).
    `quick_first`: each file's first block a batch of its own (scan.scan's)."""
    return _reader(file, columns, datetime, safe, None, rows=rows, filter=filter,
                   per=batch_rows or WINDOW, text_views=text_views, quick_first=quick_first)


def taken(src, asked, rows, unit, safe, schema):
    """Rows `rows` (row numbers in range: read_source.table_rows') of columns `asked` of
    source `src` as a pyarrow.Table of `schema`, in the order given, repeats included: each
    file's share taken as numpy's take takes it (each block hit decoded once), in Arrow's
    forms (times in the chosen unit `unit`). to_arrow's and idv.arrow_dataset's take."""
    pa = import_pyarrow()
    if len(rows) == 0:
        return empty_table(pa, schema)
    keys, fixed = read_source.split(src, asked)
    types = [f.type for f in _constant_fields(pa, src, fixed)]
    order = [(keys + fixed).index(k) for k in asked]
    parts, restore = read_source.row_parts(src, rows)
    tables = []
    for i, local in parts:
        local = np.asarray(local, np.int64)
        with src.using(i) as f:
            cols = [f[k] for k in keys]
            arrays = [c.array(v) for c, v in zip(converters(pa, cols, unit, safe),
                                                   _take.taken(f, local, cols))]
        arrays += constant_arrays(pa, src, fixed, types, i, len(local))
        tables.append(pa.Table.from_arrays([arrays[j] for j in order], schema=schema))
    out = pa.concat_tables(tables)
    return out if restore is None else out.take(pa.array(restore))


def _reader(file, columns, datetime, safe, batch_size, rows, filter,  # noqa: A002
            per=1, text_views=False, quick_first=False, open_kwargs=None):
    ensure_count(batch_size, "batch_size", none=True)
    pa = import_pyarrow()
    stack = contextlib.ExitStack()      # a file opened here, closed when the batches run out
    try:
        src = stack.enter_context(opened(file, **(open_kwargs or {})))
        asked = src.resolve_columns(columns)
        keys, fixed = read_source.split(src, asked)
        if batch_size is not None:
            whole_read.check_batch(src, keys, batch_size, arrow=True)
        unit, safe = _unit(src, keys, datetime, safe)
        node = read_source.filter_of(filter)
        with src.using(0) as first:
            # views where no row is tested: the matches of a test are copied out of the
            # strings (taken), and only they become views then (as_views)
            tests = node is not None and not isinstance(node, filters.BlocksOnly)
            views = frozenset(first[k].name for k in keys) if text_views and not tests else ()
            convs = converters(pa, [first[k] for k in keys], unit, safe, views)
            late = frozenset(j for j, c in enumerate(convs) if c.viewable and text_views
                             and tests)
            consts = _constant_fields(pa, src, fixed)
            schema = pa.schema([c.field.with_type(pa.string_view()) if j in late else c.field
                                for j, c in enumerate(convs)] + consts)
            bound = None if node is None or read_source.constant_types(src) else \
                filters.PerFile(node)
            if bound is not None:
                bound(first)        # its columns checked now (bound once per file)
        if rows is not None:
            rows = selection.stream_rows(rows, src.num_rows)
        # small files of numbers, Text and keys of the same key values read together
        together = (node is None and rows is None and len(src.files) > 1 and bool(keys)
                    and all(whole_read.joinable(src, k, arrow=True) for k in keys))
    except BaseException:
        stack.close()
        raise
    order = [(keys + fixed).index(k) for k in asked]
    how = Stream(pa, src, keys, unit, safe, schema, bound, batch_size, (first, convs),
                 fixed, order, per, pa.schema([schema.field(j) for j in order]), views,
                 late, quick_first)

    @budget.reads
    def batches(_src):
        with stack:
            for i0, i1 in (whole_read.groups(src, keys, quick_first) if together else
                           ((i, None) for i in range(len(src.files)))):
                if i1 is not None:
                    yield from group_batches(how, i0, i1)
                    continue
                mine = read_source.decided(src, i0, node)
                local = None if rows is None else file_rows(rows, src.files[i0])
                if mine is not False and (local is None or len(local)):
                    yield from file_batches(how, i0, local, None if mine is True else
                                             how.bound if mine is node and how.bound
                                             else filters.PerFile(mine))
    return pa.RecordBatchReader.from_batches(how.schema_asked, batches(src))


