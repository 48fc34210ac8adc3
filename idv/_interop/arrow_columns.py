"""How one idv column becomes Arrow: its field (its Arrow type, the ML.NET type and metadata
for idv.from_arrow) and its blocks' arrays, as a reader of the scan (idv._scan.scan); Text straight
from the blocks' UTF-8, uncompressed numbers of a mapped file as views of the map.
idv._interop.arrow reads files and datasets through these. """
from __future__ import annotations

import numpy as np

from idv import _arrow_c, _codecs, types as T
from idv._scan import scan
from idv._store.block_runs import bit_rooms
from idv._store.stored_blocks import block_views
from idv._values import text_bytes, ticks
from idv._values.metadata import metadata_spec, metadata_to_json, usable_key_values
from idv._values.arrow_types import (KEY_VALUES_KEY, METADATA_KEY, TYPE_KEY, c_format,
                                     check_key_labels, column_arrow_type, import_pyarrow,
                                     imports_c_streams, items_to_arrow, key_values_mode,
                                     key_values_to_arrow, numbers_to_arrow, times_to_arrow)
from idv._values.time_zones import as_written, restore, restored_type, written_from
from idv.errors import Where, column_place
from idv._values.arguments import ensure_flag


class _ColumnToArrow:
    """How one idv column becomes Arrow: its field (type + metadata) and each part's array."""

    def __init__(self, pa, col, unit, safe, as_written=None, views=False):
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
            self.dictionary = key_values_to_arrow(
                pa, kv_item, kv, unit, safe, lambda i: f"column {col.name!r} KeyValues item {i}",
                f"column {col.name!r} KeyValues")
        # the type the column was written from (time_zones.SOURCE_TYPE), within the finest
        # unit `as_written` (None: the unit given)
        self.restored = restored_type(pa, col, as_written) if as_written else None
        # its unit ('D': date32), into which the ticks convert straight (restored_array)
        self.written_unit = written_from(col, as_written)[1] if self.restored else None
        self.arrow_type = self.restored or column_arrow_type(pa, t, unit, self.dictionary)
        # Text scalars as string views (`views`: what polars takes as they are), made block
        # by block in the thread that decodes it
        self.viewable = t is T.Text and self.arrow_type == pa.string()
        self.views = bool(views) and self.viewable
        if self.views:
            self.arrow_type = pa.string_view()
        meta = {TYPE_KEY: str(t).encode()}
        if spec:
            meta[METADATA_KEY] = metadata_to_json(spec).encode()
        if self.dictionary is not None:
            meta[KEY_VALUES_KEY] = b"values"
        self.field = pa.field(col.name, self.arrow_type, metadata=meta)
        self.chunk_rows = col.rows_per_block
        self.col = col
        # Text and vectors of Text: decoded straight into Arrow's layout (no str objects)
        self.text = is_text(col)
        # Boolean scalars straight from their blocks' bits, Arrow's layout (no bool per row)
        self.bits = t is T.Boolean and isinstance(col.codec, _codecs.BooleanCodec) and \
            self.arrow_type == pa.bool_()
        self._mapped = None if self.restored is None else False

    def text_arrays(self, b0, b1, parallel=True, out=None):
        """Blocks [b0, b1) of a text column as Arrow arrays, one per block, built on the
        blocks' own UTF-8 bytes and offsets (Column.read_text_blocks, into `out` if given),
        no copies."""
        col = self.col
        arrays = []
        blocks = col.read_text_blocks(b0, b1, parallel=parallel, out=out)
        if self.views:
            return [self.views_array(b0, b1, blocks)]
        for b, block in zip(range(b0, b1), blocks):
            row0 = col.block_rows(b)[0]
            if block is None:        # a vector block with sparse rows: through read()'s form
                arrays.append(self.array(col.read_blocks(b, b + 1, parallel=parallel), row0))
            else:
                arrays.append(self.text_block_array(block))
        return arrays

    def views_array(self, b0, b1, blocks):
        """Text blocks [b0, b1) (TextSpans) as one string_view array (string_views), its
        views charged to the file's memory limit."""
        col = self.col
        n = col.block_rows(b1 - 1)[1] - col.block_rows(b0)[0]
        col.need(16 * n, lambda: f"the string views of column {col.name!r}")
        return string_views(self.pa, [(block.offsets, block.data) for block in blocks])

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
        return pa.ListArray.from_arrays(numbers_to_arrow(pa, offsets), items)

    def bit_arrays(self, b0, b1, parallel=True, out=None):
        """Blocks [b0, b1) of a column of Boolean scalars as Arrow arrays on their blocks' own
        bits (Column.read_bit_blocks, into `out` if given): one for them all where each block
        fills whole bytes, else one per block."""
        pa, col = self.pa, self.col
        bits = pa.py_buffer(col.read_bit_blocks(b0, b1, parallel=parallel, out=out))
        (r0, _), (_, r1) = col.block_rows(b0), col.block_rows(b1 - 1)
        if col.rows_per_block % 8 == 0:
            return [pa.Array.from_buffers(pa.bool_(), r1 - r0, [None, bits])]
        room = bit_rooms(col.rows_per_block, col.num_rows, b0, b1).tolist()
        starts = np.cumsum([0] + room).tolist()
        return [pa.Array.from_buffers(pa.bool_(), min(col.rows_per_block, r1 - a),
                                      [None, bits.slice(at, n)])
                for a, at, n in zip(range(r0, r1, col.rows_per_block), starts, room)]

    @property
    def mapped(self):
        """Whether the column's blocks become arrays on the file's memory map (uncompressed
        numbers of a mapped file: mapped_arrays), found when first read."""
        if self._mapped is None:
            self._mapped = not self.text and self.col.mappable
        return self._mapped

    def mapped_arrays(self, b0, b1, spans=None):
        """Blocks [b0, b1) of a mappable column as one ChunkedArray, a chunk per block on the
        file's memory map (numbers: views made by pyarrow's importer in one call,
        idv._arrow_c, or by from_buffers; keys labelled by KeyValues: their dictionary
        indices computed); `spans`: the blocks' Column.mapped_blocks(spans=True), if found
        (and checked) already."""
        col, pa, at = self.col, self.pa, self.arrow_type
        if spans is None:
            spans = col.mapped_blocks(b0, b1, spans=True)
        if self.dictionary is not None:
            return pa.chunked_array([self.array(v, col.block_rows(b)[0]) for b, v in
                                     zip(range(b0, b1), block_views(col.codec, spans))], at)
        buf, offsets, nbytes = spans
        size, fmt = col.codec.itemsize, c_format(col.codec.dtype)
        if fmt is not None and imports_c_streams(pa):
            return pa.chunked_array(_arrow_c.Spans(buf, offsets, nbytes // size, size, fmt), at)
        whole = pa.py_buffer(buf)
        return pa.chunked_array([pa.Array.from_buffers(at, n // size, [None, whole.slice(o, n)])
                                 for o, n in zip(offsets.tolist(), nbytes.tolist())], at)

    def mapped_run(self, b0, b1):
        """The column, when its blocks are views of the file's memory map (mapped_arrays):
        a scan has them checked with its window's other such pieces (from_map)."""
        return self.col if self.mapped else None

    def from_map(self, b0, b1, spans):
        """Blocks [b0, b1) as mapped_arrays makes them, of their `spans` (checked already)."""
        return [self.mapped_arrays(b0, b1, spans)]

    def blocks(self, b0, b1, parallel=True, out=None):
        """Blocks [b0, b1) as Arrow arrays: text one per block (text_arrays), mapped blocks
        one per block (mapped_arrays), the rest one for them all (read_blocks); into `out` if
        given (see _Windows._outputs)."""
        if self.text:
            return self.text_arrays(b0, b1, parallel, out)
        if self.bits:
            return self.bit_arrays(b0, b1, parallel, out)
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
        if self.bits:
            return (int(bit_rooms(col.rows_per_block, col.num_rows, b0, b1).sum()),), \
                np.dtype(np.uint8)
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
            return value.take(numbers_to_arrow(self.pa, np.arange(a, b, step)))
        rpb = self.chunk_rows
        if self.mapped and a % rpb == 0 and a // rpb < value.num_chunks:
            chunk = value.chunk(a // rpb)        # a window of mapped blocks: one each
            if len(chunk) == b - a:
                return chunk
        return value.slice(a, b - a)

    def _describe(self, row0, n, size=None, offsets=None):
        # rows row0.. of `n`: this file's, or a dataset's files joined (arrow._joined)
        joined = row0 + n > self.col.num_rows
        return Where(column_place(self.name, self.col.path, joined), offsets, width=size,
                     base=row0)

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
                                       self._describe(row0, len(values), size=t.size))
                if items.type != inner_type:
                    items = items.cast(inner_type)
                return pa.FixedSizeListArray.from_arrays(items, t.size)
            offsets = values.offsets
            if offsets[-1] > 2**31 - 1:
                raise ValueError(f"column {self.name!r}: {offsets[-1]} items in rows from "
                                 f"{row0} exceed Arrow list offsets (int32)")
            items = items_to_arrow(pa, t.item, values.values, self.unit, self.safe,
                                   self._describe(row0, len(offsets) - 1, offsets=offsets))
            return pa.ListArray.from_arrays(numbers_to_arrow(pa, offsets.astype(np.int32)),
                                            items)
        if self.dictionary is not None:
            raw = np.asarray(values)
            check_key_labels(raw, t.count, self._describe(row0, len(raw)))
            index_type = self.arrow_type.index_type
            idx = raw.astype(index_type.to_pandas_dtype()) - 1
            indices = numbers_to_arrow(pa, idx, index_type, mask=raw == 0)
            return pa.DictionaryArray.from_arrays(indices, self.dictionary)
        if self.restored is not None:
            return self.restored_array(np.asarray(values), row0)
        out = items_to_arrow(pa, t, np.asarray(values), self.unit, self.safe,
                             self._describe(row0, len(values)))
        return as_views(pa, out) if self.views else out

    def restored_array(self, values, row0):
        """Time `values` (read()'s form of rows row0..) as the type the column was written
        from, its counts straight from the ticks (ticks.ticks_to_unit's `target`); where that
        type cannot hold one of them, pyarrow's cast of them in the unit chosen says why."""
        pa, t, describe = self.pa, self.type, self._describe(row0, len(values))
        ticks100 = (values["utc"] if t is T.DateTimeOffset else values).view(np.int64)
        out = times_to_arrow(pa, ticks100, self.restored, self.unit, self.safe, describe,
                             t.name, self.written_unit)
        if out is not None:
            return out
        try:
            return restore(pa, items_to_arrow(pa, t, values, self.unit, self.safe, describe),
                           self.restored)
        except (ValueError, pa.ArrowInvalid) as e:
            raise ValueError(f"column {self.name!r} rows from {row0}: as {self.restored}, the "
                             f"type it was written from: {e}; read it with datetime='us' or "
                             f"'ns' instead") from None


def converters(pa, cols, datetime, safe, views=()):
    """The converters of columns `cols`, each time column in the unit `datetime` gives it (a
    source's time_unit: a ticks.Units, or a fixed mode), Text scalars named in `views` as
    string views."""
    ticks.check_time_mode(datetime)
    # the chosen modes give a column the type it was written from (its SOURCE_TYPE), within
    # their finest unit
    finest = as_written(datetime)
    safe = ensure_flag(safe, "safe")
    return [_ColumnToArrow(pa, c, *_unit(datetime, c, safe), finest, c.name in views)
            for c in cols]


def fields(pa, f, keys, datetime, safe, views=()):
    """The Arrow field of each of columns `keys` of open file `f`, as its converter gives it
    (converters), one converter made for each kind of column: a column without annotations
    takes the field of the first of its type, unit and layout, renamed, and its Column is
    never built (a file of thousands of columns)."""
    ticks.check_time_mode(datetime)
    safe = ensure_flag(safe, "safe")
    schema, made, out = f.schema, {}, []
    for k in keys:
        if (fl := schema[k]).type is None:      # an unknown codec: UnsupportedCodecError
            f[k].check_readable()
        kind = None if fl.metadata_types or fl.type is None else \
            (fl.type, _unit_of(datetime, fl.type, fl.name, safe), fl.name in views)
        first = made.get(kind)
        if first is None:
            first = converters(pa, [f[k]], datetime, safe, views)[0].field
            if kind is not None:
                made[kind] = first
            out.append(first)
        else:
            out.append(first.with_name(fl.name))
    return out


def _unit(datetime, col, safe):
    """(unit, safe) of column `col` in a read of mode `datetime` (_unit_of)."""
    return _unit_of(datetime, col.type, col.name, safe)


def _unit_of(datetime, type_, name, safe):
    """(unit, safe) of column `name` of type `type_` in a read of mode `datetime`: a time
    column's, that of ticks.unit_of; a key's, for its KeyValues, the read's mode
    (key_values_mode)."""
    if isinstance(type_, T.Key):
        return key_values_mode(datetime), safe
    return ticks.unit_of(datetime, name, safe)


def string_views(pa, parts):
    """One string_view array of the strings of `parts` ([(int32 offsets, uint8 data)], each
    Arrow's string layout), in order: their views (_codecs.string_views) in one buffer of
    Arrow's memory pool (its pages reused: fresh ones would cost more than the views), the
    data of each part that holds a string longer than a view a buffer of the array (no view
    points into the others')."""
    n = sum(len(offsets) - 1 for offsets, _ in parts)
    room = pa.allocate_buffer(16 * n)
    views = np.frombuffer(room, np.uint8)
    held, at = [], 0
    for offsets, data in parts:
        end = at + 16 * (len(offsets) - 1)
        if _codecs.string_views(offsets, data, views[at:end], len(held)):
            held.append(pa.py_buffer(data))
        at = end
    return pa.Array.from_buffers(pa.string_view(), n, [None, room] + held)


def as_views(pa, strings):
    """An Arrow string array as string views over its own bytes (string_views); one with
    nulls, or of another type, by pyarrow's cast."""
    if strings.null_count or not pa.types.is_string(strings.type):
        return strings.cast(pa.string_view())
    n = len(strings)
    _, offsets, data = strings.buffers()
    return string_views(pa, [(np.frombuffer(offsets, np.int32, n + 1, strings.offset * 4),
                              np.zeros(0, np.uint8) if data is None
                              else np.frombuffer(data, np.uint8))])


def is_text(col):
    """Whether a column's values are Text (scalars or vectors): those go straight to Arrow."""
    return T.item_type(col.type) is T.Text


def text_reader(col):
    """A scan reader of a Text column into Arrow arrays built on its blocks' own UTF-8 bytes
    (no str objects); ``arrow_type``: their type."""
    return _ColumnToArrow(import_pyarrow(), col, None, True)


def bits_reader(col):
    """A scan reader of a column of Boolean scalars into Arrow arrays on its blocks' own bits
    (where they hold them so), else None."""
    if col.type is not T.Boolean:
        return None
    conv = _ColumnToArrow(import_pyarrow(), col, None, True)
    return conv if conv.bits else None


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


def chunked(pa, conv, values):
    """A whole column's values (idv._reader.whole_read's: read()'s form, or a list of Arrow chunks
    of Text) as a ChunkedArray: one array per block of rows (text and vectors stay within Arrow's
    32-bit offsets) or, for fixed-width scalars, one array."""
    if isinstance(values, list):
        if conv.views:      # strings a reader of its own made (idv._reader.whole_read)
            values = [as_views(pa, v) if pa.types.is_string(v.type) else v for v in values]
        return pa.chunked_array(values, conv.arrow_type)
    t, n = conv.type, len(values)
    if not isinstance(t, T.Vector) and t is not T.Text:
        return pa.chunked_array([conv.array(values, 0)], type=conv.arrow_type)
    step = conv.chunk_rows
    chunks = [conv.array(values[a:min(a + step, n)], a) for a in range(0, n, step)]
    return pa.chunked_array(chunks, type=conv.arrow_type)


def one_array(pa, part):
    """A ChunkedArray's values as one Array, copied only where they must be: its one chunk;
    chunks that are consecutive slices of the same buffers (the blocks of a column of numbers
    on a memory map), or whose fixed-width values lie end to end in memory (the pieces of a
    scan window's buffer), seen as one array over them; else their concatenation."""
    if isinstance(part, pa.Array):
        return part
    chunks, t = part.chunks, part.type
    if len(chunks) == 1:
        return chunks[0]
    if not chunks:
        return pa.nulls(0, t)
    if t.num_fields == 0 and not pa.types.is_dictionary(t):
        joined = _same_buffers(pa, chunks, t) or _end_to_end(pa, chunks, t)
        if joined is not None:
            return joined
    return pa.concat_arrays(chunks)


def rows_only(pa, n):
    """A RecordBatch of no column and `n` rows (RecordBatch.from_arrays gives one of none)."""
    return pa.RecordBatch.from_struct_array(pa.nulls(n, pa.struct([])))


def view_runs(pa, values, n):
    """Row ranges [(a, b)] covering the `n` rows of `values` (Arrays or ChunkedArrays of the
    same rows) within which every ChunkedArray of string views lies in one chunk: the batches
    a scan's window is cut into, whose views are then never joined (a copy of every view)."""
    cuts = {0, n}
    for v in values:
        if isinstance(v, pa.ChunkedArray) and v.num_chunks > 1 and \
                pa.types.is_string_view(v.type):
            cuts.update(np.cumsum([len(c) for c in v.chunks]).tolist())
    cuts = sorted(c for c in cuts if c <= n)
    return list(zip(cuts[:-1], cuts[1:]))


def taken(pa, part, rows, spans=None, views=False):
    """Rows `rows` (int64, strictly ascending) of a batch's values (an Array or ChunkedArray) as one
    Array: strings copied from their chunks in one pass (not joined first, then taken; `spans`:
    their text_bytes.of_arrow, if found already), as string views with `views`, the others by
    Arrow's take (faster than its filter by a mask)."""
    if spans is None and pa.types.is_string(part.type):
        spans = text_bytes.of_arrow(pa, part)
    if spans is None:
        got = one_array(pa, part).take(numbers_to_arrow(pa, rows))
        return as_views(pa, got) if views else got
    return text_bytes.arrow_rows(pa, spans, rows, views)


def _same_buffers(pa, chunks, t):
    first = chunks[0]
    if len(first.buffers()) != t.num_buffers:
        return None

    def spans(a):
        return [None if b is None else (b.address, b.size) for b in a.buffers()]
    bufs, at = spans(first), first.offset
    for c in chunks:
        if c.offset != at or spans(c) != bufs:
            return None
        at += len(c)
    return pa.Array.from_buffers(t, at - first.offset, first.buffers(), offset=first.offset)


def _end_to_end(pa, chunks, t):
    if t.num_buffers != 2 or not pa.types.is_primitive(t) or pa.types.is_boolean(t):
        return None
    width = t.bit_width // 8
    start = end = None
    for c in chunks:
        if not len(c):
            continue
        validity, data = c.buffers()
        if validity is not None or data is None:
            return None
        a = data.address + c.offset * width
        if start is not None and a != end:
            return None
        start = a if start is None else start
        end = a + len(c) * width
    if start is None:
        return None
    # the memory stays the chunks' own: the buffer holds them
    return pa.Array.from_buffers(t, (end - start) // width,
                                 [None, pa.foreign_buffer(start, end - start, base=chunks)])
