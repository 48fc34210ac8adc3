"""Apache Arrow for .idv files: ``to_arrow``, ``record_batch_reader`` and ``from_arrow``.

pyarrow is imported only when these are called (``pip install idv[arrow]``).

Every ML.NET type has an Arrow form (docs/interop.md has the table), and each field keeps the
ML.NET type string (``idv.type``) and the column's metadata (``idv.metadata``, JSON with each
value's type) in its Arrow field metadata, so ``from_arrow`` gives back the exact types and
annotations: a Parquet or Feather file written from ``to_arrow`` converts back to the same
.idv. Tables from elsewhere (no ``idv.type``) get their types from the Arrow types.
"""
from __future__ import annotations

import numpy as np

from idv import _threads, ticks
from idv.blocks import block_groups
from idv.errors import require
from idv import types as T
from idv._interop import (TIME_UNITS, block_bounds, check_time_mode, item_locator,
                          metadata_from_json, metadata_spec, metadata_to_json,
                          opened, parse_type, row_windows, select_columns,
                          usable_key_values)
from idv.vectors import Ragged

TYPE_KEY = b"idv.type"
METADATA_KEY = b"idv.metadata"
# on a key column whose Arrow values are the KeyValues (a dictionary, or decoded back to the
# values, as Parquet does for non-string dictionaries) rather than the raw key integers
KEY_VALUES_KEY = b"idv.key"

__all__ = ["to_arrow", "record_batch_reader", "from_arrow", "arrow_schema"]


def import_pyarrow():
    """pyarrow, or an ImportError that says how to install it."""
    return require("pyarrow", "reading or writing Arrow, Parquet or Feather", "idv[arrow]")


# ---------------------------------------------------------------------------------------------
# idv -> Arrow
# ---------------------------------------------------------------------------------------------

# item type -> fn(pa, unit) -> its Arrow type, for the items that are not numbers; times are
# int64 .NET ticks with unit "ticks"
_ARROW_TYPE = {
    T.Text: lambda pa, unit: pa.string(),
    T.Boolean: lambda pa, unit: pa.bool_(),
    T.DateTime: lambda pa, unit: pa.int64() if unit == "ticks" else pa.timestamp(unit),
    T.TimeSpan: lambda pa, unit: pa.int64() if unit == "ticks" else pa.duration(unit),
    T.DateTimeOffset: lambda pa, unit: pa.struct([
        ("utc", pa.int64() if unit == "ticks" else pa.timestamp(unit, tz="UTC")),
        ("offset_minutes", pa.int16())]),
    T.RowId: lambda pa, unit: pa.struct([("low", pa.uint64()), ("high", pa.uint64())]),
}


def item_arrow_type(pa, item, unit):
    """The Arrow type of an item type's values (times in `unit`: 'us', 'ns' or 'ticks')."""
    if isinstance(item, T.Key):
        return pa.from_numpy_dtype(item.raw.dtype)
    make = _ARROW_TYPE.get(item)
    return make(pa, unit) if make is not None else pa.from_numpy_dtype(item.dtype)


def _arrow_type(pa, t, unit, dictionary=None):
    if isinstance(t, T.Vector):
        inner = item_arrow_type(pa, t.item, unit)
        return pa.list_(inner, t.size) if t.is_fixed else pa.list_(inner)
    if dictionary is not None:
        index = pa.int32() if t.count <= 2**31 - 1 else pa.int64()
        return pa.dictionary(index, dictionary.type)
    return item_arrow_type(pa, t, unit)


def _int64_array(pa, values, type_):
    return pa.array(np.ascontiguousarray(values, dtype=np.int64), type=pa.int64()).view(type_)


def _datetimes_to_arrow(pa, flat, unit, safe, describe, what="DateTime", tz=None):
    if unit == "ticks":
        return pa.array(ticks.net_ticks(flat), type=pa.int64())
    counts = ticks.ticks_to_unit(flat.view(np.int64), unit, safe, describe, what)
    return _int64_array(pa, counts, pa.timestamp(unit, tz=tz))


def _timespans_to_arrow(pa, flat, unit, safe, describe):
    v = flat.view(np.int64)
    if unit == "ticks":
        return pa.array(v, type=pa.int64())
    return _int64_array(pa, ticks.ticks_to_unit(v, unit, safe, describe, "TimeSpan"),
                        pa.duration(unit))


def _dtos_to_arrow(pa, flat, unit, safe, describe):
    utc = _datetimes_to_arrow(pa, np.ascontiguousarray(flat["utc"]), unit, safe, describe,
                              "DateTimeOffset", "UTC")
    off = pa.array(np.ascontiguousarray(flat["offset_minutes"], dtype=np.int16))
    return pa.StructArray.from_arrays([utc, off], names=["utc", "offset_minutes"])


def _rowids_to_arrow(pa, flat, unit, safe, describe):
    return pa.StructArray.from_arrays(
        [pa.array(np.ascontiguousarray(flat["low"])),
         pa.array(np.ascontiguousarray(flat["high"]))], names=["low", "high"])


# item type -> fn(pa, flat items, unit, safe, describe) -> Arrow array, where numpy's own
# conversion does not do
_TO_ARROW = {
    T.Text: lambda pa, flat, unit, safe, describe: pa.array(flat, type=pa.string()),
    T.DateTime: _datetimes_to_arrow,
    T.TimeSpan: _timespans_to_arrow,
    T.DateTimeOffset: _dtos_to_arrow,
    T.RowId: _rowids_to_arrow,
}


def _items_to_arrow(pa, item, flat, unit, safe, describe):
    """A flat numpy array of items (read()'s forms) -> an Arrow array."""
    convert = _TO_ARROW.get(item)
    if convert is not None:
        return convert(pa, flat, unit, safe, describe)
    return pa.array(np.ascontiguousarray(flat))


# What record_batch_reader decodes at a time: a window of rows whose blocks, over all the
# columns read, hold about this many decompressed bytes (at least a block of each). A window's
# blocks are decoded together, in parallel, and then cut into one batch per block.
_WINDOW_BYTES = 8 << 20
# the blocks of a window are decoded in pieces of about this many decompressed bytes (a larger
# block is a piece by itself), one thread each
_PIECE_BYTES = 2 << 20


class _ColumnToArrow:
    """How one idv column becomes Arrow: its field (type + metadata) and each part's array."""

    def __init__(self, pa, col, unit, safe):
        self.pa = pa
        self.name = col.name
        self.type = t = col.type
        self.unit = unit
        self.safe = safe
        spec = metadata_spec(col)
        self.dictionary = None
        kv = usable_key_values(t, col.metadata)
        if kv is not None:
            kv_item = spec["KeyValues"][0].item
            self.dictionary = _items_to_arrow(pa, kv_item, kv, unit, safe,
                                              lambda i: f"column {col.name!r} KeyValues item {i}")
        self.arrow_type = _arrow_type(pa, t, unit, self.dictionary)
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
                arrays.append(self._text_block_array(block))
        return arrays

    def _text_block_array(self, block):
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

    def blocks(self, b0, b1, parallel=True, out=None):
        """Blocks [b0, b1) as Arrow arrays: text one per block (text_arrays), the rest one for
        them all (read_blocks); into `out` if given (see _Windows._outputs)."""
        if self.text:
            return self.text_arrays(b0, b1, parallel, out)
        col = self.col
        values = col.read_blocks(b0, b1, parallel=parallel, out=out)
        return [self.array(values, col.block_rows(b0)[0])]

    def _describe(self, row0, size=None, offsets=None):
        return item_locator(f"column {self.name!r}", row0, size, offsets)

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
                items = _items_to_arrow(pa, t.item, flat, self.unit, self.safe,
                                        self._describe(row0, size=t.size))
                if items.type != inner_type:
                    items = items.cast(inner_type)
                return pa.FixedSizeListArray.from_arrays(items, t.size)
            offsets = values.offsets
            if offsets[-1] > 2**31 - 1:
                raise ValueError(f"column {self.name!r}: {offsets[-1]} items in rows from "
                                 f"{row0} exceed Arrow list offsets (int32)")
            items = _items_to_arrow(pa, t.item, values.values, self.unit, self.safe,
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
        return _items_to_arrow(pa, t, np.asarray(values), self.unit, self.safe,
                               self._describe(row0))


def _ticks100(values):
    """The 100-ns counts in read()'s form of a time column's rows (DateTimeOffset: UTC)."""
    if isinstance(values, Ragged):
        values = values.values
    if values.dtype.names:
        values = values["utc"]
    return values


def _column_unit(col, datetime, safe, values=None):
    """(unit, safe) for a column: modes 'auto' and 'exact' look at all its time values (the
    ones given, or its blocks one at a time) to choose (ticks.UnitChoice)."""
    item = T.item_type(col.type)
    if datetime not in ticks.CHOSEN_MODES:
        return datetime, safe
    if item not in ticks.TIME_ITEMS:
        return "us", safe
    choice = ticks.UnitChoice()
    for part in ([values] if values is not None else col.iter_blocks()):
        choice.add(_ticks100(part))
    return choice.settle(datetime, f"column {col.name!r}", item.name)


def _converters(pa, cols, datetime, safe, values=None):
    check_time_mode(datetime, TIME_UNITS)
    units = [_column_unit(c, datetime, bool(safe), None if values is None else values[i])
             for i, c in enumerate(cols)]
    return [_ColumnToArrow(pa, c, unit, s) for c, (unit, s) in zip(cols, units)]


def arrow_schema(file, columns=None, *, datetime="auto"):
    """The pyarrow.Schema that to_arrow / record_batch_reader give for these columns (with
    datetime 'auto' or 'exact', the time columns are read to choose their units)."""
    pa = import_pyarrow()
    with opened(file) as f:
        convs = _converters(pa, select_columns(f, columns), datetime, True)
        return pa.schema([c.field for c in convs])


def _is_text(col):
    """Whether a column's values are Text (scalars or vectors): those go straight to Arrow."""
    return T.item_type(col.type) is T.Text


def text_array(col, rows=None):
    """A Text column's rows (all, or a slice of step 1) as an Arrow ChunkedArray built on its
    blocks' own UTF-8 bytes (no str objects), decoding only the blocks that hold those rows."""
    pa = import_pyarrow()
    conv = _ColumnToArrow(pa, col, None, True)
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


def to_arrow(file, columns=None, *, datetime="auto", safe=True):
    """Read an .idv (a path or URL, bytes, file object or open IdvFile) into a pyarrow.Table.

    ``columns``: names or indices (default: every readable column, the last of each name, as
    IdvFile.read()). ``datetime``: how DateTime, TimeSpan and DateTimeOffset become Arrow
    values: ``'auto'`` (default: per column the finest unit that holds every value exactly,
    ``timestamp[ns]`` / ``duration[ns]`` when all fit 1677-2262, else ``[us]``; where neither
    does, as with ML.NET's ``default(DateTime)`` beside 100-ns ``DateTime.Now`` values, the
    values are floored to microseconds with an ``idv.IdvWarning`` counting them), ``'exact'``
    (the same, refusing instead of flooring), ``'us'`` (all of .NET's range; sub-microsecond
    ticks raise unless ``safe=False``, which floors them), ``'ns'`` (1677-2262; other values
    raise) or ``'ticks'`` (int64 .NET ticks, exact, restored to the ML.NET type by
    from_arrow).
    """
    pa = import_pyarrow()
    with opened(file) as f:
        cols = select_columns(f, columns)
        n = f.num_rows
        if not cols:    # no columns, but maybe rows (ML.NET's internal saver writes such files)
            return pa.Table.from_batches(
                [pa.RecordBatch.from_struct_array(pa.array([{}] * n, pa.struct([])))])
        with f.prefetch(cols):      # a remote file: all the blocks in a few large requests
            # text columns straight into Arrow (text_arrays), the others through read()
            values = [None if _is_text(col) else col.read() for col in cols]
            convs = _converters(pa, cols, datetime, safe, values)
            arrays = [pa.chunked_array(conv.text_arrays(0, conv.col.num_blocks),
                                       conv.arrow_type)
                      if conv.text else _chunked(pa, conv, v, n)
                      for v, conv in zip(values, convs)]
        return pa.Table.from_arrays(arrays, schema=pa.schema([c.field for c in convs]))


class _Windows:
    """Columns read forward a window of rows at a time, each as an Arrow ChunkedArray.

    The blocks holding a window's rows are cut into pieces of about _PIECE_BYTES, and the
    pieces of all the columns are decoded in parallel threads, each piece in one thread (fewer,
    larger tasks than a parallel read per column). submit() queues a window's pieces and
    collect() assembles them, so a reader can queue the next window before it hands out this
    one (the threads never wait for the consumer). The rows of a column's last block past a
    window are kept for the next (columns may have different block sizes).
    """

    def __init__(self, pa, f, convs):
        self.pa = pa
        self.convs = convs
        self.file = f
        self.next_block = [0] * len(convs)
        self.kept = [(0, None)] * len(convs)     # (first row, ChunkedArray) per column
        self.raw = [c.col.lookup["raw"].astype(np.int64) for c in convs]
        self.pending = []

    def _decode(self, piece):
        k, p0, p1, out = piece
        return self.convs[k].blocks(p0, p1, parallel=False, out=out)

    def _outputs(self, pieces):
        """pieces with their part of one new buffer for the window (one allocation, on huge
        pages, rather than one per piece: fresh arrays of a few MB cost a page fault per 4 KiB):
        for fixed-width scalar columns their values, for text the blocks (Column.text_room);
        None for the rest."""
        parts = []          # (bytes, dtype) or None
        for k, p0, p1 in pieces:
            conv = self.convs[k]
            col = conv.col
            if conv.text:
                parts.append(None if isinstance(col.type, T.Vector)
                             else (col.text_room(p0, p1), np.dtype(np.uint8)))
            elif col.codec.itemsize and not isinstance(col.type, T.Vector):
                rows = col.block_rows(p1 - 1)[1] - col.block_rows(p0)[0]
                parts.append((rows * col.codec.itemsize, col.codec.dtype))
            else:
                parts.append(None)
        room = [0 if p is None else (p[0] + 63) // 64 * 64 for p in parts]
        if not any(room):
            return [p + (None,) for p in pieces]
        buf = self.file.store.buffer(sum(room), "a window of record_batch_reader's blocks")
        out, at = [], 0
        for piece, part, r in zip(pieces, parts, room):
            out.append(piece + (None if part is None else buf[at:at + part[0]].view(part[1]),))
            at += r
        return out

    def submit(self, a, b):
        """Queue the decoding of the blocks rows [a, b) need beyond those already queued."""
        pieces = []
        for k, conv in enumerate(self.convs):
            stop = -(-b // conv.col.rows_per_block)
            first = self.next_block[k]
            pieces += [(k, p0, p1) for p0, p1 in block_groups(self.raw[k][first:stop],
                                                              _PIECE_BYTES, first)]
            self.next_block[k] = max(first, stop)
        pieces = self._outputs(pieces)
        if self.file.threads > 1 and len(pieces) > 1:
            pool = _threads.pool("arrow", self.file.threads)
            work = [pool.submit(self._decode, piece) for piece in pieces]
        else:
            work = [_finished(self._decode(piece)) for piece in pieces]
        self.pending.append((a, b, pieces, work))

    def collect(self):
        """Rows [a, b) of every column, of the window submitted first and not yet collected."""
        a, b, pieces, work = self.pending.pop(0)
        new = [[] for _ in self.convs]
        for (k, _p0, _p1, _out), done in zip(pieces, work):
            new[k] += done.result()
        out = []
        for k, conv in enumerate(self.convs):
            start, data = self.kept[k]
            chunks = data.slice(a - start).chunks if data is not None and \
                a < start + len(data) else []
            data = self.pa.chunked_array(chunks + new[k], conv.arrow_type)
            self.kept[k] = (b, data.slice(b - a))      # only the chunks past the window
            out.append(data.slice(0, b - a))
        return out

    def close(self):
        """Wait for the pieces still being decoded (the file may be closed next)."""
        for _a, _b, _pieces, work in self.pending:
            for done in work:
                if not done.cancel():
                    try:
                        done.result()
                    except BaseException:
                        pass
        self.pending = []


def _finished(value):
    """A Future that already holds `value` (a piece decoded in the calling thread)."""
    from concurrent.futures import Future
    done = Future()
    done.set_result(value)
    return done


def _one_array(pa, part):
    """A ChunkedArray's values as one Array (without copying when it has one chunk)."""
    if part.num_chunks == 1:
        return part.chunk(0)
    return pa.concat_arrays(part.chunks) if part.num_chunks else pa.array([], part.type)


def record_batch_reader(file, columns=None, *, datetime="auto", safe=True, batch_size=None):
    """A pyarrow.RecordBatchReader over an .idv, one record batch per block of rows, or with
    ``batch_size``, batches of exactly that many rows (the last: what is left), whatever the
    file's blocks.

    The blocks are decoded a window of rows at a time (about 8 MiB of decompressed blocks over
    the columns read, at least a block of each; the blocks of a window in parallel threads,
    text straight into Arrow), two windows ahead of the one whose batches are handed out, so
    at most about three windows are held and files larger than memory stream through. The
    batches of a window share its memory. Columns and time options as to_arrow (with 'auto'
    or 'exact', the time columns are read once more, block by block, to choose their units
    first). A file
    opened here (from a path, URL, bytes or file object) is closed when the batches run out; an
    IdvFile passed in stays open.
    """
    if batch_size is not None and (isinstance(batch_size, bool) or
                                   not isinstance(batch_size, (int, np.integer)) or
                                   batch_size <= 0):
        raise ValueError(f"batch_size must be a positive number of rows, not {batch_size!r}")
    pa = import_pyarrow()
    from idv.reader import IdvFile, open as idv_open
    owned = not isinstance(file, IdvFile)
    f = idv_open(file) if owned else file
    try:
        cols = select_columns(f, columns)
        convs = _converters(pa, cols, datetime, safe)
        schema = pa.schema([c.field for c in convs])
    except BaseException:
        if owned:
            f.close()
        raise

    def blocks():
        windows = None
        try:
            windows = _Windows(pa, f, convs)
            spans = row_windows(cols, f.num_rows, _WINDOW_BYTES)
            # two windows queued ahead: the threads go on to the next while this one's last
            # pieces finish and while its batches are used
            for a, b, _bounds in spans[:2]:
                windows.submit(a, b)
            for i, (a, _b, bounds) in enumerate(spans):
                window = windows.collect()
                if i + 2 < len(spans):
                    windows.submit(*spans[i + 2][:2])
                for x, y in bounds:
                    yield pa.RecordBatch.from_arrays(
                        [_one_array(pa, part.slice(x - a, y - x)) for part in window],
                        schema=schema)
                window = None       # not held while the next one is collected
        finally:
            if windows is not None:
                windows.close()
            if owned:
                f.close()
    batches = blocks() if batch_size is None else _rebatched(pa, schema, blocks(),
                                                             int(batch_size))
    return pa.RecordBatchReader.from_batches(schema, batches)


def _rebatched(pa, schema, batches, size):
    """`batches` cut and joined into batches of `size` rows (the last: the rest)."""
    pending, rows = [], 0
    for b in batches:
        pending.append(b)
        rows += b.num_rows
        while rows >= size:
            table = pa.Table.from_batches(pending, schema)
            yield _one_batch(pa, table.slice(0, size), schema)
            rest = table.slice(size)
            pending, rows = rest.to_batches(), rest.num_rows
    if rows:
        yield _one_batch(pa, pa.Table.from_batches(pending, schema), schema)


def _one_batch(pa, table, schema):
    batches = table.combine_chunks().to_batches()
    return batches[0] if len(batches) == 1 else pa.RecordBatch.from_pylist([], schema)


def num_batches(f, columns=None):
    """How many batches record_batch_reader gives for an open IdvFile."""
    return len(block_bounds(select_columns(f, columns), f.num_rows))


# ---------------------------------------------------------------------------------------------
# Arrow -> idv
# ---------------------------------------------------------------------------------------------

def _storage(at):
    pa = import_pyarrow()
    if isinstance(at, pa.BaseExtensionType):
        return at.storage_type
    return at


def _is_string(pa, at):
    return (pa.types.is_string(at) or pa.types.is_large_string(at)
            or getattr(pa.types, "is_string_view", lambda _: False)(at))


def _is_list(pa, at):
    return (pa.types.is_list(at) or pa.types.is_large_list(at)
            or getattr(pa.types, "is_list_view", lambda _: False)(at)
            or getattr(pa.types, "is_large_list_view", lambda _: False)(at))


def _struct_names(pa, at):
    return {at.field(i).name for i in range(at.num_fields)} if pa.types.is_struct(at) else set()


def _infer_item(pa, at, where):
    """The ML.NET item type for an Arrow type (no idv.type metadata)."""
    if pa.types.is_dictionary(at):
        return _infer_item(pa, at.value_type, where)
    if pa.types.is_boolean(at):
        return T.Boolean
    if pa.types.is_float16(at):
        return T.Single
    if pa.types.is_integer(at) or pa.types.is_floating(at):
        return T.item_from_dtype(at.to_pandas_dtype(), where)
    if _is_string(pa, at):
        return T.Text
    if pa.types.is_timestamp(at):
        return T.DateTime if at.tz is None else T.DateTimeOffset
    if pa.types.is_date(at):
        return T.DateTime
    if pa.types.is_duration(at) or pa.types.is_time(at):
        return T.TimeSpan
    names = _struct_names(pa, at)
    if names:
        if {"utc", "offset_minutes"} <= names:
            return T.DateTimeOffset
        if {"low", "high"} <= names:
            return T.RowId
        raise TypeError(f"{where}: struct {at} has no ML.NET type (DateTimeOffset needs fields "
                        f"utc, offset_minutes; RowId needs low, high)")
    if pa.types.is_decimal(at):
        raise TypeError(f"{where}: {at} has no ML.NET type; cast it to float64 (Double) first")
    if pa.types.is_null(at):
        raise TypeError(f"{where}: a column of only nulls (an empty CSV column?) has no ML.NET "
                        f"type; give it one (types=...)")
    raise TypeError(f"{where}: Arrow type {at} has no ML.NET type")


def _infer(pa, at, where):
    """The ML.NET column type for an Arrow type; dictionaries are keys (decided by the caller)."""
    if isinstance(at, pa.BaseExtensionType):
        shape = getattr(at, "shape", None)
        if shape is not None and pa.types.is_fixed_size_list(at.storage_type):
            perm = getattr(at, "permutation", None)
            if perm is not None and list(perm) != list(range(len(shape))):
                raise TypeError(f"{where}: a permuted tensor {at} has no ML.NET type")
            return T.Vector(_infer_item(pa, at.storage_type.value_type, where), *shape)
        return _infer(pa, at.storage_type, where)
    if pa.types.is_fixed_size_list(at):
        dims = []
        while pa.types.is_fixed_size_list(at):
            dims.append(at.list_size)
            at = at.value_type
        if _is_list(pa, at):
            raise TypeError(f"{where}: lists inside fixed-size lists have no ML.NET type")
        return T.Vector(_infer_item(pa, at, where), *dims)
    if _is_list(pa, at):
        inner = at.value_type
        if _is_list(pa, inner) or pa.types.is_fixed_size_list(inner):
            raise TypeError(f"{where}: nested lists ({at}) have no ML.NET type")
        return T.Vector(_infer_item(pa, inner, where))
    return _infer_item(pa, at, where)


def _dto_compatible(pa, at):
    if not {"utc", "offset_minutes"} <= _struct_names(pa, at):
        return False
    utc = at.field("utc").type
    return pa.types.is_timestamp(utc) or pa.types.is_int64(utc)


# item type -> fn(pa, Arrow type) -> whether the Arrow type can hold the items as they are
# written (numbers: the same numpy dtype)
_COMPATIBLE = {
    T.Text: lambda pa, at: _is_string(pa, at),
    T.Boolean: lambda pa, at: pa.types.is_boolean(at),
    T.DateTime: lambda pa, at: ((pa.types.is_timestamp(at) and at.tz is None)
                                or pa.types.is_int64(at) or pa.types.is_date(at)),
    T.TimeSpan: lambda pa, at: pa.types.is_duration(at) or pa.types.is_int64(at),
    T.DateTimeOffset: _dto_compatible,
    T.RowId: lambda pa, at: {"low", "high"} <= _struct_names(pa, at),
}


def _item_compatible(pa, item, at):
    if isinstance(item, T.Key):
        return pa.types.is_integer(at) or pa.types.is_dictionary(at)
    check = _COMPATIBLE.get(item)
    if check is not None:
        return check(pa, at)
    if pa.types.is_integer(at) or pa.types.is_floating(at):
        return np.dtype(at.to_pandas_dtype()) == item.dtype
    return False


def _compatible(pa, t, at, meta, key_values=False):
    """Whether Arrow type `at` can hold the column type `t` from idv.type metadata (so the
    metadata still describes the column: nobody cast it since). `key_values`: the column
    holds a key's values (its KeyValues), as a dictionary or decoded."""
    at = _storage(at)
    if isinstance(t, T.Vector):
        if t.is_fixed:
            if not pa.types.is_fixed_size_list(at):
                return False
            size, inner = at.list_size, at.value_type
            while pa.types.is_fixed_size_list(inner):
                size *= inner.list_size
                inner = inner.value_type
            return size == t.size and _item_compatible(pa, t.item, inner)
        return _is_list(pa, at) and _item_compatible(pa, t.item, at.value_type)
    if isinstance(t, T.Key):
        kv = meta.get("KeyValues")
        labelled = kv is not None and np.asarray(kv[1]).size == t.count
        if pa.types.is_dictionary(at):
            return labelled
        if key_values:
            return labelled and _item_compatible(pa, kv[0].item, at)
        return pa.types.is_integer(at)
    return _item_compatible(pa, t, at)


def _first_null(arr):
    mask = arr.is_null()
    if hasattr(mask, "combine_chunks"):
        mask = mask.combine_chunks()
    return int(np.flatnonzero(mask.to_numpy(zero_copy_only=False))[0])


def _no_nulls(arr, describe, t):
    if arr.null_count:
        i = _first_null(arr)
        raise ValueError(f"{describe(i)}: null, but {t} has no missing value in ML.NET (only "
                         f"floats (NaN) and keys (0) do); fill or drop the nulls first")


def _np(arr):
    return arr.to_numpy(zero_copy_only=False)


def _int64s(pa, arr):
    return _np(arr.cast(pa.int64())).astype(np.int64)


def _utc_datetime64(pa, arr):
    """Timestamps (any unit and zone) as UTC datetime64; int64 as .NET ticks."""
    if pa.types.is_timestamp(arr.type):
        counts = _np(arr.view(pa.int64()) if arr.offset == 0 else arr.cast(pa.int64()))
        return ticks.counts_as(counts.astype(np.int64), "M", arr.type.unit)
    return ticks.from_net_ticks(_int64s(pa, arr))


def _offsets_of_zone(pa, arr, describe):
    """Per-value UTC offsets (minutes) of a zoned timestamp array."""
    import pyarrow.compute as pc
    tz = arr.type.tz
    if tz in ("UTC", "utc", "Z", "+00:00", "Etc/UTC"):
        return np.zeros(len(arr), np.int16)
    unit = arr.type.unit
    local = _np(pc.local_timestamp(arr).cast(pa.int64())).astype(np.int64)
    utc = _np(arr.cast(pa.int64())).astype(np.int64)
    per_minute = {"s": 60, "ms": 60_000, "us": 60_000_000, "ns": 60_000_000_000}[unit]
    diff = local - utc
    bad = diff % per_minute != 0
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{describe(i)}: the UTC offset of zone {tz!r} here is not a whole "
                         f"number of minutes, which .NET's DateTimeOffset needs")
    return (diff // per_minute).astype(np.int16)


def _struct_fields(arr):
    return {arr.type.field(i).name: child for i, child in enumerate(arr.flatten())}


def _keys_from_arrow(pa, item, arr, describe, remap):
    at = arr.type
    if remap is not None:       # the column holds the key's values: map them
        return remap(arr, describe)
    if pa.types.is_dictionary(at):
        raise TypeError(f"{describe(0)}: a dictionary inside a vector cannot be a key "
                        f"vector; decode it first")
    if pa.types.is_integer(at) or pa.types.is_floating(at):
        return _np(arr.fill_null(0)) if arr.null_count else _np(arr)
    _no_nulls(arr, describe, item)
    return _np(arr)


def _floats_from_arrow(pa, item, arr, describe):
    at = arr.type
    if pa.types.is_null(at):
        return np.full(len(arr), np.nan, item.dtype)
    if pa.types.is_floating(at) and arr.null_count:
        arr = arr.fill_null(float("nan"))
    elif arr.null_count:
        _no_nulls(arr, describe, item)
    return _np(arr)


def _utf8_from_arrow(pa, arr, describe):
    """A Text column's Arrow strings (no nulls) as the writer's Utf8Text: the offsets and the
    UTF-8 bytes of Arrow's buffers, checked, the bytes not copied. string_view (and numbers
    given types=Text) are cast to large_string first."""
    from idv.writer.values import Utf8Text
    at = arr.type
    if not (pa.types.is_string(at) or pa.types.is_large_string(at)):
        arr = arr.cast(pa.large_string())
        at = arr.type
    n = len(arr)
    _, offsets, data = arr.buffers()
    wide = pa.types.is_large_string(at)
    if offsets is None:             # an empty array may come without buffers
        return Utf8Text(np.zeros(n + 1, np.int64), np.zeros(0, np.uint8))
    offsets = np.frombuffer(offsets, np.int64 if wide else np.int32, n + 1,
                            arr.offset * (8 if wide else 4))
    data = np.zeros(0, np.uint8) if data is None else np.frombuffer(data, np.uint8)
    return Utf8Text.checked(offsets, data, describe)


def _texts_from_arrow(pa, arr, describe):
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = arr.cast(pa.string())      # string_view, or numbers given types=Text
    return _np(arr).astype(object, copy=False)


def _datetimes_from_arrow(pa, arr, describe):
    if pa.types.is_timestamp(arr.type) or pa.types.is_integer(arr.type):
        return _utc_datetime64(pa, arr)
    return _np(arr)


def _timespans_from_arrow(pa, arr, describe):
    at = arr.type
    if pa.types.is_duration(at) or pa.types.is_time(at):
        return ticks.counts_as(_int64s(pa, arr), "m", at.unit)
    if pa.types.is_integer(at):
        return _int64s(pa, arr).view(T.TIMESPAN_DTYPE)
    return _np(arr)


def _dtos_from_arrow(pa, arr, describe):
    at = arr.type
    if pa.types.is_struct(at):
        fields = _struct_fields(arr)
        utc = _utc_datetime64(pa, fields["utc"])
        off = _np(fields["offset_minutes"])
    elif pa.types.is_timestamp(at):
        utc = _utc_datetime64(pa, arr)
        off = (_offsets_of_zone(pa, arr, describe) if at.tz is not None
               else np.zeros(len(arr), np.int16))
    else:
        return _np(arr)
    out = np.empty(len(arr), [("utc", utc.dtype), ("offset_minutes", np.int64)])
    out["utc"] = utc
    out["offset_minutes"] = off
    return out


def _rowids_from_arrow(pa, arr, describe):
    if not pa.types.is_struct(arr.type):
        return _np(arr)
    fields = _struct_fields(arr)
    out = np.empty(len(arr), T.ROWID_DTYPE)
    out["low"] = _np(fields["low"])
    out["high"] = _np(fields["high"])
    return out


# item type -> fn(pa, Arrow array without nulls, describe) -> the values the writer takes,
# where numpy's own conversion does not do
_FROM_ARROW = {
    T.Text: _texts_from_arrow,
    T.DateTime: _datetimes_from_arrow,
    T.TimeSpan: _timespans_from_arrow,
    T.DateTimeOffset: _dtos_from_arrow,
    T.RowId: _rowids_from_arrow,
}


def _items_from_arrow(pa, item, arr, describe, remap=None):
    """A flat Arrow array -> numpy values the writer takes for `item`."""
    if isinstance(arr.type, pa.BaseExtensionType):
        arr = arr.storage
    if isinstance(item, T.Key):
        return _keys_from_arrow(pa, item, arr, describe, remap)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if item in (T.Single, T.Double):      # nulls are NaN
        return _floats_from_arrow(pa, item, arr, describe)
    _no_nulls(arr, describe, item)
    convert = _FROM_ARROW.get(item)
    return convert(pa, arr, describe) if convert is not None else _np(arr)


class _FieldToIdv:
    """How one Arrow field becomes an idv column: its type, metadata, and each chunk's values.

    With ``idv.type`` metadata that still fits the Arrow type, the type and metadata come back
    exactly; otherwise they are inferred from the Arrow type. A dictionary column is a key
    whose KeyValues are its dictionary's values (all chunks' dictionaries merged, in order of
    first appearance: ``set_dictionary``); chunks are mapped onto them by value.
    """

    def __init__(self, pa, field, type_override=None):
        self.pa = pa
        self.name = field.name
        self.where = f"column {field.name!r}"
        at = field.type
        meta = field.metadata or {}
        self.type = None
        self.metadata = {}
        self.key_values = None       # Arrow array the dictionary chunks map onto
        self.needs_dictionary = False
        if TYPE_KEY in meta:
            try:
                t = parse_type(meta[TYPE_KEY].decode())
                spec = (metadata_from_json(meta[METADATA_KEY].decode())
                        if METADATA_KEY in meta else {})
            except (ValueError, KeyError, TypeError, UnicodeDecodeError):
                t, spec = None, {}
            by_value = meta.get(KEY_VALUES_KEY) == b"values"
            if t is not None and _compatible(pa, t, at, spec, by_value):
                self.type, self.metadata = t, spec
                if isinstance(t, T.Key) and by_value and not pa.types.is_dictionary(at):
                    kv_type, kv_value = spec["KeyValues"]
                    self.key_values = _items_to_arrow(pa, kv_type.item, np.asarray(kv_value)
                                                      .reshape(-1), "us", False, lambda i: "")
        if type_override is not None:
            t = T.as_type(type_override, self.where)
            if t != self.type:
                self.type = t
                if not isinstance(t, T.Key):
                    self.metadata.pop("KeyValues", None)
        if self.type is None:
            if pa.types.is_dictionary(_storage(at)):
                self.needs_dictionary = True
            else:
                self.type = _infer(pa, at, self.where)
        if isinstance(self.type, T.Key) and pa.types.is_dictionary(_storage(at)) \
                and not self.needs_dictionary:
            kv = self.metadata.get("KeyValues")
            if kv is None:
                self.needs_dictionary = True
            else:
                kv_type, kv_value = kv
                self.key_values = _items_to_arrow(pa, kv_type.item, np.asarray(kv_value)
                                                  .reshape(-1), "us", False, lambda i: "")
        self._dictionary_type = at.value_type if pa.types.is_dictionary(at) else None

    def set_dictionary(self, values):
        """The merged dictionary of every chunk (no nulls): the key values."""
        pa = self.pa
        n = len(values)
        if n == 0:
            raise ValueError(f"{self.where}: an empty dictionary cannot be a key (ML.NET key "
                             f"counts are > 0); decode it first (pyarrow.compute."
                             f"dictionary_decode) or give the column a type")
        item = _infer_item(pa, values.type, self.where)
        if self.type is None:
            self.type = T.Key(T.UInt32 if n <= 2**32 - 1 else T.UInt64, count=n)
        kv = _items_from_arrow(pa, item, values, lambda i: f"{self.where} dictionary item {i}")
        self.metadata["KeyValues"] = (T.Vector(item, n), kv)
        self.key_values = values
        self.needs_dictionary = False

    def remap(self, arr, describe):
        """Raw key values of a dictionary array (or of an array of the key values): the
        values' positions in key_values + 1; null (or a null dictionary value) -> 0, the
        missing key."""
        import pyarrow.compute as pc
        kv = self.key_values
        if not self.pa.types.is_dictionary(arr.type):
            if arr.type != kv.type:
                arr = arr.cast(kv.type)
            pos = pc.index_in(arr, value_set=kv)
            missing = pos.is_null()
            if missing.null_count or pos.null_count:
                nulls = _np(arr.is_null()).astype(bool)
                absent = _np(missing).astype(bool) & ~nulls
                if absent.any():
                    i = int(np.flatnonzero(absent)[0])
                    raise ValueError(f"{describe(i)}: {arr[i].as_py()!r} is not one of the "
                                     f"column's key values ({len(kv)} values)")
            raw = _np(pos.fill_null(-1)).astype(np.int64) + 1
            return raw.astype(self.type.raw.dtype)
        d = arr.dictionary
        if d.type != kv.type:
            d = d.cast(kv.type)
        idx = arr.indices
        idx = _np(idx.fill_null(-1) if idx.null_count else idx).astype(np.int64)
        if d.equals(kv):
            pos = np.arange(len(d), dtype=np.int64)
        else:
            pos = _np(pc.index_in(d, value_set=kv).fill_null(-1)).astype(np.int64)
        dnull = _np(d.is_null()).astype(bool) if d.null_count else np.zeros(len(d), bool)
        missing = (pos < 0) & ~dnull
        used = idx >= 0
        if missing.any():
            bad = used & missing[np.where(used, idx, 0)]
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise ValueError(f"{describe(i)}: {d[int(idx[i])].as_py()!r} is not one of the "
                                 f"column's key values ({len(kv)} values)")
        dtype = self.type.raw.dtype if isinstance(self.type, T.Key) else np.uint32
        safe_idx = np.where(used, idx, 0)
        raw = np.where(used & ~dnull[safe_idx], pos[safe_idx] + 1, 0) if len(d) \
            else np.zeros(len(idx), np.int64)
        return raw.astype(dtype)

    def _text(self, arr, describe):
        """A Text column's values as the writer's Utf8Text, from Arrow's buffers."""
        pa = self.pa
        if isinstance(arr.type, pa.BaseExtensionType):
            arr = arr.storage
        if pa.types.is_dictionary(arr.type):
            arr = arr.dictionary_decode()
        _no_nulls(arr, describe, T.Text)
        return _utf8_from_arrow(pa, arr, describe)

    def _describe(self, row0, size=None, offsets=None):
        return item_locator(self.where, row0, size, offsets)

    def convert(self, arr, row0=0):
        """An Arrow Array or ChunkedArray of this field -> values for idv.write / write_batch."""
        from idv.writer.values import Utf8Text, Utf8Vectors
        pa = self.pa
        if isinstance(arr, pa.ChunkedArray):
            parts, start = [], row0
            for chunk in arr.chunks:
                parts.append(self.convert(chunk, start))
                start += len(chunk)
            if not parts:
                return self.convert(pa.array([], type=arr.type), row0)
            if len(parts) == 1:
                return parts[0]
            if isinstance(parts[0], Ragged):
                return Ragged.concat(parts)
            if isinstance(parts[0], (Utf8Text, Utf8Vectors)):
                return type(parts[0]).concat(parts)
            return np.concatenate(parts)
        t = self.type
        remap = self.remap if self.key_values is not None else None
        if not isinstance(t, T.Vector):
            if t is T.Text:
                return self._text(arr, self._describe(row0))
            return _items_from_arrow(pa, t, arr, self._describe(row0), remap)
        if isinstance(arr.type, pa.BaseExtensionType):
            arr = arr.storage
        at = arr.type
        if arr.null_count:
            i = _first_null(arr)
            raise ValueError(f"{self.where} row {row0 + i}: a null vector (ML.NET vectors "
                             f"have no missing value; use an empty list for a variable size)")
        n = len(arr)
        text = t.item is T.Text and remap is None   # items from Arrow's buffers (Utf8Vectors)
        if pa.types.is_fixed_size_list(at):
            flat, size = arr, 1
            while pa.types.is_fixed_size_list(flat.type):
                size *= flat.type.list_size
                flat = flat.flatten()
            if text:
                return Utf8Vectors(self._text(flat, self._describe(row0, size=size)),
                                   np.arange(n + 1, dtype=np.int64) * size)
            items = _items_from_arrow(pa, t.item, flat, self._describe(row0, size=size), remap)
            return items.reshape(n, size)
        if _is_list(pa, at):
            if not (pa.types.is_list(at) or pa.types.is_large_list(at)):
                arr = arr.cast(pa.large_list(at.value_type))
            offsets = _np(arr.offsets).astype(np.int64)
            offsets = offsets - offsets[0]
            if text:
                return Utf8Vectors(self._text(arr.flatten(),
                                              self._describe(row0, offsets=offsets)), offsets)
            items = _items_from_arrow(pa, t.item, arr.flatten(),
                                      self._describe(row0, offsets=offsets), remap)
            return Ragged(items, offsets)
        raise TypeError(f"{self.where}: Arrow {at} values cannot make a {t} column")


def _unique_values(pa, dictionaries):
    """The distinct non-null values of several dictionaries, in order of first appearance."""
    import pyarrow.compute as pc
    dictionaries = list(dictionaries)
    if not dictionaries:
        return None
    base = dictionaries[0].type
    merged = pa.concat_arrays([d if d.type == base else d.cast(base) for d in dictionaries])
    return pc.unique(merged).drop_null()


class ArrowToIdv:
    """Arrow schema -> idv columns, for tables and for streams of record batches.

    ``fields`` hold each column's idv type and metadata; ``pending`` lists the dictionary
    columns whose key values must be collected first (``add_dictionaries``); ``convert(batch,
    row0)`` gives a dict name -> values for idv.Writer.write_batch.
    """

    def __init__(self, schema, types=None):
        pa = self.pa = import_pyarrow()
        types = dict(types or {})
        names = list(schema.names)
        unknown = [k for k in types if k not in names]
        if unknown:
            raise KeyError(f"types for unknown columns {unknown}; columns: {names}")
        self.fields = [_FieldToIdv(pa, schema.field(i), types.get(schema.field(i).name))
                       for i in range(len(schema))]
        self._seen = {i: [] for i, f in enumerate(self.fields) if f.needs_dictionary}

    @property
    def pending(self):
        return [i for i, f in enumerate(self.fields) if f.needs_dictionary]

    def add_dictionaries(self, i, column):
        """Collect the dictionaries of column i (an Array or ChunkedArray of a batch)."""
        pa = self.pa
        chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
        for c in chunks:
            if isinstance(c.type, pa.BaseExtensionType):
                c = c.storage
            self._seen[i] = [_unique_values(pa, self._seen[i] + [c.dictionary])]

    def finish_dictionaries(self):
        pa = self.pa
        for i in self.pending:
            f = self.fields[i]
            seen = self._seen.get(i) or []
            values = seen[0] if seen else pa.array([], type=f._dictionary_type)
            f.set_dictionary(values)

    @property
    def schema_pairs(self):
        return [(f.name, f.type) for f in self.fields]

    @property
    def types(self):
        return {f.name: f.type for f in self.fields}

    @property
    def metadata(self):
        return {f.name: dict(f.metadata) for f in self.fields if f.metadata}

    def convert(self, batch, row0=0):
        """A RecordBatch or Table with this schema -> [(name, values)] in schema order."""
        return [(f.name, f.convert(batch.column(i), row0)) for i, f in enumerate(self.fields)]


def from_arrow(table, *, types=None):
    """A pyarrow Table or RecordBatch (or RecordBatchReader, read whole) -> (columns, types,
    metadata) for idv.write: ``columns`` a list of (name, values), ``types`` name -> idv type,
    ``metadata`` name -> {kind: (type, value)}.

    Fields written by to_arrow carry ``idv.type`` and ``idv.metadata``: the exact ML.NET type
    and annotations come back. Others are typed from Arrow: integers, floats (float16 ->
    Single), bool, strings (Text), timestamps (DateTime; with a time zone, DateTimeOffset with
    each value's UTC offset), dates (DateTime), durations and times of day (TimeSpan),
    fixed-size lists and fixed_shape_tensor (fixed vectors), lists (variable vectors),
    dictionaries (Key<UInt32, n> with the dictionary as KeyValues; nulls -> 0, the missing
    key). Nulls are NaN in float columns, missing in keys, and an error elsewhere (ML.NET has
    no missing value for them). ``types`` overrides the type of some columns.

    Values are kept in Arrow's buffers where they can be: numbers without nulls as numpy views,
    Text as a ``Utf8Text`` (the UTF-8 bytes and offsets, checked; ``np.asarray`` or
    ``tolist()`` give str objects), lists of strings as ``Utf8Vectors`` (a Utf8Text of the
    items and the row offsets), so that idv.write makes no Python object per value.
    """
    pa = import_pyarrow()
    if isinstance(table, pa.RecordBatchReader):
        table = table.read_all()
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if not isinstance(table, pa.Table):
        raise TypeError(f"from_arrow takes a pyarrow Table, RecordBatch or RecordBatchReader, "
                        f"not {type(table).__name__}")
    plan = ArrowToIdv(table.schema, types)
    for i in plan.pending:
        plan.add_dictionaries(i, table.column(i))
    plan.finish_dictionaries()
    return plan.convert(table), plan.types, plan.metadata


def arrow_column_values(arr, t, name, row0=0):
    """An Arrow Array or ChunkedArray given to idv.Writer.write_batch for the column `name` of
    type `t` -> the values the writer takes (Text as Utf8Text, numbers from the buffers).
    `row0`: the file's row of the first value, for the messages."""
    pa = import_pyarrow()
    field = _FieldToIdv(pa, pa.field(name, arr.type), t)
    if field.needs_dictionary or field.key_values is not None:
        raise TypeError(f"column {name!r}: a dictionary array for a {t} column; give the key "
                        f"values (1-based integers, 0 missing) or decode the dictionary first")
    return field.convert(arr, row0)
