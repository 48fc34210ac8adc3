"""Apache Arrow from .idv files: ``to_arrow``, ``record_batch_reader`` and ``arrow_schema``.

pyarrow is imported only when these are called (``pip install idv[arrow]``).

Every ML.NET type has an Arrow form (docs/interop.md has the table; idv._values.arrow_types holds it),
and each field keeps the ML.NET type string (``idv.type``) and the column's metadata
(``idv.metadata``, JSON with each value's type) in its Arrow field metadata, so that
``idv.from_arrow`` (idv._writer.arrow) gives back the exact types and annotations: a Parquet or
Feather file written from ``to_arrow`` converts back to the same .idv.
"""
from __future__ import annotations

import numpy as np

from idv import _docs, _arrow_c, types as T
from idv._resources import budget
from idv._scan import filters, scan
from idv._values import ticks
from idv._reader import time_units
from idv._reader.reader import opened
from idv._reader.selection import file_columns
from idv._values.metadata import metadata_spec, metadata_to_json, usable_key_values
from idv._values.arrow_types import (KEY_VALUES_KEY, METADATA_KEY, TYPE_KEY, c_format,
                             column_arrow_type, import_pyarrow, imports_c_streams,
                             items_to_arrow, restore, restored_type)
from idv.errors import Where

__all__ = ["to_arrow", "record_batch_reader", "arrow_schema", "read_partition",
           "whole_columns", "whole_batches"]


class _ColumnToArrow:
    """How one idv column becomes Arrow: its field (type + metadata) and each part's array."""

    def __init__(self, pa, col, unit, safe, as_written=None):
        self.pa = pa
        self.name = col.name
        self.type = t = col.type
        self.unit = unit
        self.safe = safe
        spec = metadata_spec(col)
        self.dictionary = None
        kv = usable_key_values(t, col)
        if kv is not None:
            kv_item = spec["KeyValues"][0].item
            self.dictionary = items_to_arrow(pa, kv_item, kv, unit, safe,
                                             lambda i: f"column {col.name!r} KeyValues item {i}")
        # the type the column was written from (arrow_types.SOURCE_TYPE), within the finest
        # unit `as_written` (None: the unit given)
        self.restored = restored_type(pa, col, as_written) if as_written else None
        self.arrow_type = self.restored or column_arrow_type(pa, t, unit, self.dictionary)
        meta = {TYPE_KEY: str(t).encode()}
        if spec:
            meta[METADATA_KEY] = metadata_to_json(spec).encode()
        if self.dictionary is not None:
            meta[KEY_VALUES_KEY] = b"values"
        self.field = pa.field(col.name, self.arrow_type, metadata=meta)
        self.chunk_rows = col.rows_per_block
        self.col = col
        # Text and vectors of Text: decoded straight into Arrow's layout (no str objects)
        self.text = _is_text(col)
        self._mapped = None if self.restored is None else False

    def text_arrays(self, b0, b1, parallel=True, out=None):
        """Blocks [b0, b1) of a text column as Arrow arrays, one per block, built on the
        blocks' own UTF-8 bytes and offsets (Column.read_text_blocks, into `out` if given),
        no copies."""
        col = self.col
        arrays = []
        blocks = col.read_text_blocks(b0, b1, parallel=parallel, out=out)
        for b, block in zip(range(b0, b1), blocks):
            row0 = col.block_rows(b)[0]
            if block is None:        # a vector block with sparse rows: through read()'s form
                arrays.append(self.array(col.read_blocks(b, b + 1, parallel=parallel), row0))
            else:
                arrays.append(self.text_block_array(block))
        return arrays

    def text_block_array(self, block):
        pa, t = self.pa, self.type
        spans = block if not isinstance(t, T.Vector) else block.values
        items = pa.StringArray.from_buffers(len(spans), pa.py_buffer(spans.offsets),
                                            pa.py_buffer(spans.data))
        if not isinstance(t, T.Vector):
            return items
        if t.is_fixed:
            return pa.FixedSizeListArray.from_arrays(items, t.size)
        offsets = np.zeros(len(block.lengths) + 1, np.int32)
        np.cumsum(block.lengths, out=offsets[1:])
        return pa.ListArray.from_arrays(pa.array(offsets), items)

    @property
    def mapped(self):
        """Whether the column's blocks become arrays on the file's memory map (uncompressed
        numbers of a mapped file: mapped_arrays), found when first read."""
        if self._mapped is None:
            self._mapped = not self.text and self.col.mappable
        return self._mapped

    def mapped_arrays(self, b0, b1):
        """Blocks [b0, b1) of a mappable column as one ChunkedArray, a chunk per block on the
        file's memory map (numbers: views made by pyarrow's importer in one call,
        idv._arrow_c, or by from_buffers; keys labelled by KeyValues: their dictionary
        indices computed)."""
        col, pa, at = self.col, self.pa, self.arrow_type
        if self.dictionary is not None:
            return pa.chunked_array([self.array(v, col.block_rows(b)[0]) for b, v in
                                     zip(range(b0, b1), col.mapped_blocks(b0, b1))], at)
        buf, offsets, nbytes = col.mapped_blocks(b0, b1, spans=True)
        size, fmt = col.codec.itemsize, c_format(col.codec.dtype)
        if fmt is not None and imports_c_streams(pa):
            return pa.chunked_array(_arrow_c.Spans(buf, offsets, nbytes // size, size, fmt), at)
        whole = pa.py_buffer(buf)
        return pa.chunked_array([pa.Array.from_buffers(at, n // size, [None, whole.slice(o, n)])
                                 for o, n in zip(offsets.tolist(), nbytes.tolist())], at)

    def blocks(self, b0, b1, parallel=True, out=None):
        """Blocks [b0, b1) as Arrow arrays: text one per block (text_arrays), mapped blocks
        one per block (mapped_arrays), the rest one for them all (read_blocks); into `out` if
        given (see _Windows._outputs)."""
        if self.text:
            return self.text_arrays(b0, b1, parallel, out)
        if self.mapped:
            return [self.mapped_arrays(b0, b1)]     # one ChunkedArray (join keeps its chunks)
        col = self.col
        values = col.read_blocks(b0, b1, parallel=parallel, out=out)
        return [self.array(values, col.block_rows(b0)[0])]

    # ---- as a reader of idv._scan.scan: a window's pieces decoded, joined and cut into batches
    def room(self, b0, b1):
        """(shape, dtype) of blocks [b0, b1) in the scan window's buffer, or None."""
        col = self.col
        if self.mapped:
            return None
        if not self.text:
            return scan.fixed_room(col, b0, b1)
        return None if isinstance(col.type, T.Vector) else ((col.text_room(b0, b1),),
                                                            np.dtype(np.uint8))

    def decode(self, b0, b1, out):
        return self.blocks(b0, b1, parallel=False, out=out)

    def inflatable(self, b0, b1, out):
        return None if self.text or self.mapped else scan.fixed_blocks(self.col, out)

    def inflated(self, b0, b1, out):
        return [self.array(out, self.col.block_rows(b0)[0])]

    @property
    def light(self):
        """Whether the scan makes this column's pieces in the calling thread: views of the
        memory map are made in microseconds holding the GIL (their checksums checked
        too), which threads would only contend for."""
        return self.mapped

    def join(self, chunks):
        pa = self.pa
        if len(chunks) == 1 and isinstance(chunks[0], pa.ChunkedArray):
            return chunks[0]
        arrays = []
        for c in chunks:
            arrays.extend(c.chunks if isinstance(c, pa.ChunkedArray) else [c])
        return pa.chunked_array(arrays, self.arrow_type)

    def cut(self, value, a, b, step=1):
        if step != 1:
            return value.take(self.pa.array(np.arange(a, b, step)))
        rpb = self.chunk_rows
        if self.mapped and a % rpb == 0 and a // rpb < value.num_chunks:
            chunk = value.chunk(a // rpb)        # a window of mapped blocks: one each
            if len(chunk) == b - a:
                return chunk
        return value.slice(a, b - a)

    def _describe(self, row0, size=None, offsets=None):
        return Where(f"column {self.name!r}", offsets, width=size, base=row0)

    def array(self, values, row0=0):
        """values: read()'s form of rows row0.. of this column (or already an Arrow array)
        -> an Arrow array."""
        pa, t = self.pa, self.type
        if isinstance(values, pa.Array):
            return values
        if isinstance(t, T.Vector):
            inner_type = self.arrow_type.value_type
            if t.is_fixed:
                flat = values.reshape(-1)
                items = items_to_arrow(pa, t.item, flat, self.unit, self.safe,
                                       self._describe(row0, size=t.size))
                if items.type != inner_type:
                    items = items.cast(inner_type)
                return pa.FixedSizeListArray.from_arrays(items, t.size)
            offsets = values.offsets
            if offsets[-1] > 2**31 - 1:
                raise ValueError(f"column {self.name!r}: {offsets[-1]} items in rows from "
                                 f"{row0} exceed Arrow list offsets (int32)")
            items = items_to_arrow(pa, t.item, values.values, self.unit, self.safe,
                                   self._describe(row0, offsets=offsets))
            return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), items)
        if self.dictionary is not None:
            raw = np.asarray(values)
            bad = raw > t.count
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise ValueError(f"column {self.name!r} row {row0 + i}: key value {raw[i]} is "
                                 f"above the key count {t.count}")
            index_type = self.arrow_type.index_type
            idx = raw.astype(index_type.to_pandas_dtype()) - 1
            indices = pa.array(idx, type=index_type, mask=raw == 0)
            return pa.DictionaryArray.from_arrays(indices, self.dictionary)
        out = items_to_arrow(pa, t, np.asarray(values), self.unit, self.safe,
                             self._describe(row0))
        if self.restored is not None:
            try:
                out = restore(pa, out, self.restored)
            except (ValueError, pa.ArrowInvalid) as e:
                raise ValueError(f"column {self.name!r} rows from {row0}: as "
                                 f"{self.restored}, the type it was written from: {e}; read "
                                 f"it with datetime='us' or 'ns' instead") from None
        return out


def _converters(pa, cols, datetime, safe, values=None, file=None):
    """The converters of columns `cols` of open `file`, each time column in the unit
    `datetime` gives it (idv._reader.time_units: chosen modes are settled over `file`, sparing the
    decode of `values`, the whole columns already read; a ticks.Units as it is)."""
    ticks.check_time_mode(datetime)
    if file is not None and not isinstance(datetime, ticks.Units):
        datetime = time_units.for_file(file, [c.name for c in cols], datetime, None if
                                       values is None else dict(zip((c.name for c in cols),
                                                                    values)))
    # the chosen modes give a column the type it was written from (its SOURCE_TYPE), within
    # their finest unit
    as_written = {"auto": "ns", "auto-us": "us"}.get(getattr(datetime, "mode", datetime))
    return [_ColumnToArrow(pa, c, *ticks.unit_of(datetime, c.name, bool(safe)), as_written)
            for c in cols]


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
    with opened(file) as f:
        convs = _converters(pa, file_columns(f, columns), datetime, True, file=f)
        return pa.schema([c.field for c in convs])


def _is_text(col):
    """Whether a column's values are Text (scalars or vectors): those go straight to Arrow."""
    return T.item_type(col.type) is T.Text


def text_reader(col):
    """A scan reader of a Text column into Arrow arrays built on its blocks' own UTF-8 bytes
    (no str objects); ``arrow_type``: their type."""
    return _ColumnToArrow(import_pyarrow(), col, None, True)


def text_array(col, rows=None):
    """A Text column's rows (all, or a slice of step 1) as an Arrow ChunkedArray built on its
    blocks' own UTF-8 bytes (no str objects), decoding only the blocks that hold those rows."""
    pa = import_pyarrow()
    conv = text_reader(col)
    start, stop = 0, col.num_rows
    if rows is not None:
        start, stop, _ = rows.indices(col.num_rows)
        stop = max(start, stop)
    step = col.rows_per_block or 1
    b0, b1 = start // step, -(-stop // step)
    whole = pa.chunked_array(conv.text_arrays(b0, b1), conv.arrow_type)
    return whole.slice(start - b0 * step, stop - start)


def _chunked(pa, conv, values, n):
    """A whole column's values as one Arrow array per block of rows (text and vectors stay
    within Arrow's 32-bit offsets) or, for fixed-width scalars, one array."""
    t = conv.type
    if not isinstance(t, T.Vector) and t is not T.Text:
        return pa.chunked_array([conv.array(values, 0)], type=conv.arrow_type)
    step = conv.chunk_rows
    chunks = [conv.array(values[a:min(a + step, n)], a) for a in range(0, n, step)]
    return pa.chunked_array(chunks, type=conv.arrow_type)


def whole_columns(cols, values, *, datetime="us", safe=True):
    """[(field, chunked array)] of columns `cols` of one file holding `values` (read()'s form
    of each, or an Arrow ChunkedArray already, any number of rows): the columns of many files
    read whole (a dataset's), typed and annotated as that file's columns are."""
    pa = import_pyarrow()
    convs = _converters(pa, cols, datetime, safe, values)
    return [(conv.field, v if isinstance(v, pa.ChunkedArray) else _chunked(pa, conv, v, len(v)))
            for conv, v in zip(convs, values)]


def whole_batches(arrays, schema, cuts):
    """RecordBatches of `schema` cut from whole columns (`arrays`: ChunkedArrays of the same
    rows), one for each (first row, rows) of `cuts`; each column one array, copied only where
    a cut spans two chunks."""
    pa = import_pyarrow()
    for a, n in cuts:
        yield pa.RecordBatch.from_arrays([_one_array(pa, c.slice(a, n)) for c in arrays],
                                         schema=schema)


@budget.reads
@_docs.fill
def to_arrow(file, columns=None, *, datetime="auto", safe=True,
             filter=None):  # noqa: A002 - pyarrow's and pandas' name
    """Read an .idv into a pyarrow.Table, a chunk per block, with no copy where the file's
    bytes are Arrow's already.

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
    if filter is not None:          # through the scan, the blocks statistics rule out skipped
        return record_batch_reader(file, columns, datetime=datetime, safe=safe,
                                   filter=filter).read_all()
    with opened(file) as f:
        cols = file_columns(f, columns)
        n = f.num_rows
        if not cols:    # no columns, but maybe rows (ML.NET's internal saver writes such files)
            return pa.Table.from_batches(
                [pa.RecordBatch.from_struct_array(pa.array([{}] * n, pa.struct([])))])
        # text columns straight into Arrow (their blocks' UTF-8), uncompressed numbers of a
        # mapped file as views of the map (a list of blocks), the others in read()'s form
        texts = [c for c in cols if _is_text(c)]
        mapped = [c for c in cols if not _is_text(c) and c.mappable]
        others = [c for c in cols if not _is_text(c) and c not in mapped]
        text_convs = _converters(pa, texts, datetime, safe, file=f)
        with f.prefetch(others + texts):    # a remote file: the blocks in a few large requests
            got = scan.read_whole(f, [scan.WholeColumn(f.store, c) for c in others]
                                  + [scan.Chunks(conv) for conv in text_convs])
        values = got[:len(others)]
        convs = dict(zip(map(id, others), zip(_converters(pa, others, datetime, safe, values,
                                                          f), values)))
        convs.update(zip(map(id, texts), zip(text_convs, got[len(others):])))
        for conv in _converters(pa, mapped, datetime, safe, file=f):
            convs[id(conv.col)] = (conv, conv.mapped_arrays(0, conv.col.num_blocks))
        arrays, fields = [], []
        for col in cols:
            conv, v = convs[id(col)]
            arrays.append(v if conv.mapped else pa.chunked_array(v, conv.arrow_type)
                          if conv.text else _chunked(pa, conv, v, n))
            fields.append(conv.field)
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _one_array(pa, part):
    """A ChunkedArray's values as one Array (without copying when it has one chunk)."""
    if isinstance(part, pa.Array):
        return part
    if part.num_chunks == 1:
        return part.chunk(0)
    return pa.concat_arrays(part.chunks) if part.num_chunks else pa.array([], part.type)


@_docs.fill
def record_batch_reader(file, columns=None, *, datetime="auto", safe=True, batch_size=None,
                        rows=None, filter=None):  # noqa: A002 - pyarrow's and pandas' name
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

    Examples
    --------
    >>> import idv
    >>> reader = idv.record_batch_reader(idv.sample_path(), ["Price"], batch_size=100)
    >>> [b.num_rows for b in reader]
    [100, 100, 40]
    """
    if batch_size is not None and (isinstance(batch_size, bool) or
                                   not isinstance(batch_size, (int, np.integer)) or
                                   batch_size <= 0):
        raise ValueError(f"batch_size must be a positive number of rows, not {batch_size!r}")
    pa = import_pyarrow()
    from idv._reader.reader import IdvFile, open as idv_open
    owned = not isinstance(file, IdvFile)
    f = idv_open(file) if owned else file
    try:
        cols = file_columns(f, columns)
        convs = _converters(pa, cols, datetime, safe, file=f)
        schema = pa.schema([c.field for c in convs])
        if rows is not None:
            rows = range(*slice(rows.start, rows.stop, rows.step).indices(f.num_rows))
            if rows.step < 1:
                raise ValueError(f"rows must be a slice with a positive step, not {rows.step}")
        node = None if filter is None else filters.parse(filter)
        bound = None if node is None else filters.prepare(node, f)
        tested = [] if node is None or isinstance(node, filters.BlocksOnly) else \
            list(bound.columns)                 # BlocksOnly: no row to test
    except BaseException:
        if owned:
            f.close()
        raise

    @budget.reads
    def blocks(f):
        # the filter's columns also in read()'s form for the rows' test, Text as Arrow
        # strings (comparison.rows tests them on their UTF-8 bytes: no str per value)
        text = {name for name in tested if f[name].type is T.Text}
        readers = convs + [text_reader(f[name]) if name in text else scan.NumpyColumn(f[name])
                           for name in tested]
        keep = None if node is None else (lambda _part, _f: bound.blocks())
        try:
            for batch in scan.scan(f, readers, rows=rows, block_filter=keep):
                out = pa.RecordBatch.from_arrays(
                    [_one_array(pa, v) for v in batch.values[:len(convs)]], schema=schema)
                if tested:
                    mask = bound.rows({name: _one_array(pa, v) if name in text else v
                                       for name, v in zip(tested, batch.values[len(convs):])})
                    out = out.filter(pa.array(mask))
                yield out
        finally:
            if owned:
                f.close()
    batches = blocks(f) if batch_size is None else _rebatched(pa, schema, blocks(f), batch_size)
    return pa.RecordBatchReader.from_batches(schema, batches)


def read_partition(part, columns, *, filesystem=None, open_kwargs=None, datetime="us",
                   safe=True, filter=None):  # noqa: A002 - pyarrow's and pandas' name
    """A pyarrow.Table of one scan.Partition (rows [start, stop) of one file, whole blocks):
    what an engine's worker reads (Ray's read tasks, Spark's partitions). The file is opened
    from ``part.path`` (in ``filesystem``, with ``open_kwargs``) and closed again. Give every
    partition of a dataset the same ``datetime`` unit (Dataset.time_unit), so that their
    schemas agree. ``filter``: only its rows that match (as record_batch_reader)."""
    pa = import_pyarrow()
    from idv._reader.reader import open as idv_open
    with idv_open(part.path, filesystem=filesystem, **(open_kwargs or {})) as f:
        reader = record_batch_reader(f, columns, datetime=datetime, safe=safe,
                                     rows=range(part.start, part.stop), filter=filter)
        return pa.Table.from_batches(list(reader), reader.schema)


def _rebatched(pa, schema, batches, size):
    """`batches` cut and joined into batches of `size` rows (the last: the rest)."""
    def join(pieces):
        return pa.Table.from_batches(pieces, schema).combine_chunks().to_batches()[0]
    return scan.rebatched(((b, b.num_rows) for b in batches), int(size),
                          lambda b, start, stop: b.slice(start, stop - start), join)
