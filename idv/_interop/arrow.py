"""Apache Arrow from .idv files: ``to_arrow``, ``record_batch_reader`` and ``arrow_schema``.

pyarrow is imported only when these are called (``pip install idv[arrow]``).

Every ML.NET type has an Arrow form (docs/interop.md has the table; idv._values.arrow_types holds
it), and each field keeps the ML.NET type string (``idv.type``) and the column's metadata
(``idv.metadata``, JSON with each value's type) in its Arrow field metadata, so that
``idv.from_arrow`` (idv._writer.arrow) gives back the exact types and annotations: a Parquet or
Feather file written from ``to_arrow`` converts back to the same .idv. """
from __future__ import annotations

import contextlib
from typing import NamedTuple

from idv import _docs, types as T
from idv._resources import budget, gc as _gc
from idv._scan import filters, scan
from idv._scan.checked_keys import numbers_reader
from idv._scan.tested import Tested, untested, with_tests
from idv._values import text_bytes, ticks
from idv._values.arguments import ensure_count
from idv._reader import whole_read
from idv._interop.arrow_keys import key_numbers
from idv._interop.arrow_columns import (bits_reader, chunked, converters, fields, is_text,
                                        one_array, rows_only, taken, text_reader, view_runs)
from idv._values.arrow_types import TYPE_KEY, column_arrow_type, import_pyarrow, numpy_view
from idv._reader import read_source
from idv._reader.reader import opened
from idv._reader.read_source import file_rows

__all__ = ["to_arrow", "record_batch_reader", "arrow_schema"]

# window_reader's batches: a window of the scan each
WINDOW = "window"


def _as_read(pa, col, conv):
    """Whether a column's Arrow arrays (by its converter `conv`) are its values as read()
    gives them, viewed uncopied: numbers stored as their own Arrow type."""
    dtype = getattr(col.codec, "dtype", None)
    return dtype is not None and dtype.kind in "iuf" and \
        conv.arrow_type == pa.from_numpy_dtype(dtype)


@_docs.fill
def arrow_schema(file, columns=None, *, datetime="auto"):
    """The pyarrow.Schema that to_arrow and record_batch_reader give for these columns, each
    field with its ML.NET type and metadata (``idv.type``, ``idv.metadata``).

    Parameters
    ----------
    {source:file}
    {columns}
    {datetime}
        Default ``'auto'``; with ``'auto'`` or ``'exact'``, a file without statistics has
        its time columns read to choose their units.
    """
    pa = import_pyarrow()
    with opened(file) as src:
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
def to_arrow(file, columns=None, *, datetime="auto", safe=True,
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
        if filter is not None:      # through the scan, the blocks statistics rule out skipped
            reader = window_reader(src, columns, datetime=datetime, safe=safe, filter=filter)
            # the table holds every batch: the whole of them within the memory limit
            return pa.Table.from_batches(list(budget.kept(
                reader, src.memory_limit,
                lambda: f"{budget.name_of(src)}: the rows matching the filter")), reader.schema)
        asked = src.resolve_columns(columns)
        keys, fixed = read_source.split(src, asked)
        table = _whole(pa, src, keys, datetime, safe)
        if not fixed:
            return table
        fields = _constant_fields(pa, src, fixed)
        chunks = [_constant_arrays(pa, src, fixed, [f.type for f in fields], i, e.num_rows)
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
    got = dict(zip(step, _joined(pa, src, step, 0, len(src.files), unit, safe)))
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


def _constant_arrays(pa, src, fixed, types, i, n):
    """`n` rows of each constant column `fixed` of file i, as Arrow arrays of `types`."""
    return [pa.array(v, t) for v, t in zip(read_source.constants(src, fixed, i, n), types)]


def _mapped(col):
    """Form.mapped of Arrow: a column on the file's memory map is made into Arrow by
    _ColumnToArrow.mapped_arrays, not decoded."""
    return col if not is_text(col) and col.mappable else None


def _arrow(col):
    """Form.arrow of Arrow: Text (and vectors of Text) straight from the blocks' UTF-8,
    Boolean scalars from their bits."""
    return text_reader(col) if is_text(col) else bits_reader(col)


def _table(pa, src, keys, i, datetime, safe):
    """The Table of columns `keys` of file i of `src`: a chunk per block, Text on its blocks'
    UTF-8, uncompressed numbers of a mapped file as views of the map, each time column in the
    unit `datetime` gives it (settled over this file alone when not yet a ticks.Units)."""
    values = whole_read.read(src, keys, i, i + 1, whole_read.Form(arrow=_arrow, mapped=_mapped))
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


def _joined(pa, src, keys, i0, i1, unit, safe, views=()):
    """[(field, ChunkedArray)] of columns `keys` (each whole_read.joinable) of files [i0, i1)
    read as one, typed and annotated as file i0's columns (Text named in `views` as string
    views)."""
    if not keys:
        return []
    values = whole_read.read(src, keys, i0, i1, whole_read.Form(arrow=_arrow))
    with src.using(i0) as first:
        convs = converters(pa, [first[k] for k in keys], unit, safe, views)
    return [(conv.field, chunked(pa, conv, v)) for conv, v in zip(convs, values)]


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
            consts = _constant_fields(pa, src, fixed)
            schema = pa.schema([c.field for c in convs] + consts)
            bound = None if node is None or read_source.constant_types(src) else \
                filters.PerFile(node)
            if bound is not None:
                bound(first)        # its columns checked now (bound once per file)
        if rows is not None:
            rows = range(*slice(rows.start, rows.stop, rows.step).indices(src.num_rows))
            if rows.step < 1:
                raise ValueError(f"rows must be a slice with a positive step, not {rows.step}")
        # small files of numbers, Text and keys of the same key values read together
        together = (node is None and rows is None and len(src.files) > 1 and bool(keys)
                    and all(whole_read.joinable(src, k, arrow=True) for k in keys))
    except BaseException:
        stack.close()
        raise
    order = [(keys + fixed).index(k) for k in asked]
    how = _Stream(pa, src, keys, unit, safe, schema, bound, batch_size, (first, convs),
                  fixed, order, per, pa.schema([schema.field(j) for j in order]), views,
                  quick_first)

    @budget.reads
    def batches(_src):
        with stack:
            for i0, i1 in (whole_read.groups(src, keys, quick_first) if together else
                           ((i, None) for i in range(len(src.files)))):
                if i1 is not None:
                    yield from _group_batches(how, i0, i1)
                    continue
                mine = read_source.decided(src, i0, node)
                local = None if rows is None else file_rows(rows, src.files[i0])
                if mine is not False and (local is None or len(local)):
                    yield from _file_batches(how, i0, local, None if mine is True else
                                             how.bound if mine is node and how.bound
                                             else filters.PerFile(mine))
    return pa.RecordBatchReader.from_batches(how.schema_asked, batches(src))


class _Stream(NamedTuple):
    """What every file of a record batch stream is read with."""
    pa: object
    src: object
    keys: list
    unit: object
    safe: bool
    schema: object      # the files' columns' fields, then the constant columns'
    bound: object       # filters.PerFile, or None
    batch_size: object
    first: tuple        # (the first file, its converters), reused while it is the one open
    fixed: list         # the source's constant columns read (read_source.constants)
    order: list         # where each column asked is in keys + fixed
    per: object         # rows of the scan's batches: 1 (a block each), more, or WINDOW
    schema_asked: object    # the stream's schema: the columns in the order asked (made once)
    views: object       # the names of the Text columns read as string views
    quick_first: bool   # each file's first block a batch of its own (scan.scan's)

    def batch(self, i, arrays, n):
        """The record batch of `arrays` (of the files' columns) and `n` rows of the constant
        columns of file i, in the order asked."""
        pa = self.pa
        if not self.order:      # no column: its rows alone
            return rows_only(pa, n)
        if self.fixed:
            arrays = arrays + _constant_arrays(pa, self.src, self.fixed,
                                               self.schema.types[len(self.keys):], i, n)
        return pa.RecordBatch.from_arrays([arrays[j] for j in self.order],
                                          schema=self.schema_asked)


def _file_batches(how, i, rows, bound):
    """The batches of file i of the stream, a window of blocks at a time, through the scan:
    rows `rows` (a range over the file's; None: all) that match its filter (`bound`: a
    filters.PerFile, None: every row)."""
    pa = how.pa
    with how.src.using(i) as f:
        cols = [f[k] for k in how.keys]
        convs = how.first[1] if f is how.first[0] else converters(pa, cols, how.unit, how.safe,
                                                                  how.views)
        bound = None if bound is None else bound(f)
        tested = [] if bound is None or isinstance(bound.node, filters.BlocksOnly) else \
            list(bound.columns)                 # BlocksOnly: no row to test
        # the filter's columns tested in the scan's threads, a piece at a time as decoded
        # (idv._scan.tested): in read()'s form, Text as its bytes (no str per value); those
        # read for the batches too tested as their Arrow arrays, the strings' bytes; a key
        # labelled by KeyValues as its key numbers, each checked to have a label whether the
        # batches hold it or not (checked_keys), dictionaries made of its matches alone
        text = {name for name in tested if f[name].type is T.Text}
        # where each column is among those read (keys: a file's indices, a dataset's names)
        read_at = {c.index: j for j, c in enumerate(cols)}
        mine = {name: read_at[f[name].index] for name in tested if f[name].index in read_at}
        numbers = {j: key_numbers(convs[j]) for j in mine.values()}
        numbers = {j: k for j, k in numbers.items() if k is not None}
        at = {name: j for name, j in mine.items()
              if name in text or j in numbers or _as_read(pa, f[name], convs[j])}
        extra = [name for name in tested if name not in at]
        readers = [numbers.get(j, c) for j, c in enumerate(convs)] + [
            scan.TextColumn(f[name]) if name in text else numbers_reader(f[name])
            for name in extra]
        keep = None if bound is None else (lambda _part, _f: bound.blocks())
        division = bound.division() if tested else None
        where = {**at, **{name: len(convs) + j for j, name in enumerate(extra)}}
        if tested:
            # a filter on one column takes that column's matches as it tests them (a step
            # cuts the rows after); Text is then read as its blocks' bytes (TextRows), its
            # matches copied into one Arrow array a piece, with no Arrow array a block first
            single = division.single is not None and (rows is None or rows.step == 1)
            as_bytes = {k for name, k in at.items() if single and name in text}
            readers = [scan.TextColumn(cols[k]) if k in as_bytes else r
                       for k, r in enumerate(readers)]
            takes = {k: numbers[k].take if k in numbers else _taker(pa, k in as_bytes)
                     for k in at.values()} if single else {}
            readers = with_tests(readers, where, division, lambda k, chunk: _as_tested(
                pa, chunk, k < len(convs) and k not in numbers and k not in as_bytes), takes)

        def batches():
            if not readers:         # the constant columns alone
                yield how.batch(i, [], f.num_rows if rows is None else len(rows))
                return
            for batch in scan.scan(f, readers, rows=rows, block_filter=keep,
                                   batch_rows=None if how.per is WINDOW else how.per,
                                   quick_first=how.quick_first):
                n = len(range(batch.start, batch.stop, batch.step))
                values = batch.values[:len(convs)]
                if not tested:
                    for a, b in view_runs(pa, values, n):   # no string view copied
                        yield how.batch(i, [one_array(pa, v if b - a == n else v.slice(a, b - a))
                                            for v in values], b - a)
                    continue
                found = {name: batch.values[k].found for name, k in where.items()}
                if any(isinstance(v, Tested) and v.taken for v in values):
                    yield from _piece_batches(how, i, values, found[division.single])
                    continue
                hits = division.hits(found, n)
                every = len(hits) == n
                arrays = [numbers[j].array(untested(v), None if every else hits)
                          if j in numbers else one_array(pa, untested(v)) if every else
                          taken(pa, untested(v), hits) for j, v in enumerate(values)]
                yield how.batch(i, arrays, len(hits))
        yield from (batches() if how.batch_size is None else
                    _rebatched(pa, how.schema_asked, batches(), how.batch_size))


def _as_tested(pa, chunks, arrow):
    """A piece's chunks of a tested column as the filter's test takes them: Arrow strings as
    the TextRows of their bytes (uncopied), Arrow numbers as numpy; the other readers' (one
    chunk in read()'s form) as they are."""
    if not arrow:
        return chunks[0]
    whole = _piece(pa, chunks)
    if pa.types.is_string(whole.type) or pa.types.is_large_string(whole.type):
        spans = text_bytes.of_arrow(pa, whole)
        return whole if spans is None else spans
    return numpy_view(one_array(pa, whole))


def _piece(pa, chunks):
    """A piece's chunks (Arrow arrays, or chunked arrays of a memory map's blocks) as one
    ChunkedArray, uncopied."""
    return pa.chunked_array([a for c in chunks for a in getattr(c, "chunks", [c])],
                            chunks[0].type)


def _taker(pa, text_rows=False):
    """take(chunks, positions, as tested) of TestedReader: a piece's matching rows (strings
    copied from the bytes the test found) as one array; `text_rows`: the piece is TextRows
    (scan.TextColumn's), which the test found as they are."""
    def take(chunks, hits, seen):
        return taken(pa, None if text_rows else _piece(pa, chunks), hits,
                     seen if isinstance(seen, text_bytes.TextRows) else None)
    return take


def _piece_batches(how, i, values, found):
    """The batches of file i of a batch's `values` whose tested column was taken as tested:
    a batch per piece of it that matched (its matches as taken, uncopied; the other
    columns' taken from the piece's rows), or one of no rows when none did."""
    pa, some = how.pa, False
    for j, (s, size, hits) in enumerate(zip(found.starts, found.sizes, found.local)):
        if not len(hits):
            continue
        some = True
        yield how.batch(i, [one_array(pa, v.value[j]) if isinstance(v, Tested) else
                            one_array(pa, v.slice(s, size)) if len(hits) == size else
                            taken(pa, v.slice(s, size), hits) for v in values], len(hits))
    if not some:
        yield how.batch(i, [v.value[0].slice(0, 0) if isinstance(v, Tested) else
                            one_array(pa, v.slice(0, 0)) for v in values], 0)


def _group_batches(how, i0, i1):
    """The batches of files [i0, i1) of the stream, read as one (whole_read), cut as each
    file's stream would give them (a block, whole blocks of about the stream's rows, the file
    for a window, or batch_size rows at a time)."""
    pa, files = how.pa, how.src.files
    arrays = [a for _, a in _joined(pa, how.src, how.keys, i0, i1, how.unit, how.safe,
                                    how.views)]
    cuts = []
    for i in range(i0, i1):
        e = files[i]
        with how.src.using(i) as f:
            rpb = f[how.keys[0]].rows_per_block or e.num_rows or 1
            step = how.batch_size or ((e.num_rows or 1) if how.per is WINDOW else
                                      max(1, how.per // rpb) * rpb)
        cuts += [(i, e.start - files[i0].start + a, min(step, e.num_rows - a))
                 for a in range(0, e.num_rows, step)]
    for i, a, n in cuts:
        yield how.batch(i, [one_array(pa, c.slice(a, n)) for c in arrays], n)


def _rebatched(pa, schema, batches, size):
    """`batches` cut and joined into batches of `size` rows (the last: the rest)."""
    def join(pieces):
        return pa.Table.from_batches(pieces, schema).combine_chunks().to_batches()[0]
    return scan.rebatched(((b, b.num_rows) for b in batches), int(size),
                          lambda b, start, stop: b.slice(start, stop - start), join)
