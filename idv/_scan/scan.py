"""The one scan: several columns of a file or a dataset read in step, a window of blocks at a
time, for every reader that streams (Arrow batches, pandas, the converters, the command line,
Dask's partitions).

All the columns of a file share one block grid (ML.NET writes one ``rows_per_block`` for all,
and idv.open refuses files that do not), so a scan walks the grid: the blocks that hold the rows
asked for, gathered into windows of about ``window_bytes`` of decompressed blocks over the
columns read. A window's blocks are cut into pieces of about ``piece_bytes`` per column, and all
its pieces are decoded in parallel threads, each piece in one thread, into one buffer for the
window where the column's form allows. Two windows are queued ahead of the one handed out, so
the threads never wait for the consumer and about three windows are held at once.

What a column becomes is its reader's business (``NumpyColumn`` here: read()'s forms;
idv._interop.arrow has one for Arrow arrays): a reader says how much room its blocks take in the
window's buffer, decodes a piece in the calling thread, joins a window's pieces and cuts rows
out of them. A reader may also opt in (``inflatable``) for pieces of fixed-width scalars: the
pieces of a task are then inflated, checked and fixed up by one call of the block store
(``BlockStore.inflate_fixed``), which costs no Python per piece. A reader whose pieces are views
made in microseconds under the GIL (``light``: Arrow chunks on a memory map) has them made in
the calling thread, where threads would only contend for the GIL, their blocks' CRC-32s checked
for the whole window in one call over the threads (``mapped_run``, then ``from_map``). Where a
block filter leaves short runs of blocks between gaps (``take``), runs are decoded together, up
to a window's bytes (``window_groups``), each still handed out as its own window. """
from __future__ import annotations

import math
import os
from typing import NamedTuple

import numpy as np

from idv._resources import budget
from idv._values import vectors
from idv._values.text_bytes import TextRows
from idv._values.arguments import ensure_count
from idv._store.block_runs import fixed_width, out_shape
from idv.errors import IdvFormatError
from idv._storage.paths import worker_path
from idv._scan.scan_windows import (Windows, block_bytes, first_block_alone, local_rows,
                                    needed_blocks, window_groups, window_spans)

# decompressed bytes of a window, over all the columns read (at least one block)
WINDOW_BYTES = 8 << 20
# decompressed bytes of a piece: the blocks one thread decodes at a time (a larger block is a
# piece by itself)
PIECE_BYTES = 2 << 20
AHEAD = 2       # windows queued ahead of the one handed out
EARLY = 2       # a remote file's windows whose blocks are requested beyond those queued
# decoded values of a partition, when the caller does not say how many blocks
PARTITION_BYTES = 64 << 20


def fixed_room(col, b0, b1):
    """(shape, dtype) of the array that blocks [b0, b1) of a column of fixed-width items
    (scalars, dense fixed-size vectors) decode into (a part of the window's buffer); None for
    other columns (their decoders allocate)."""
    if not col.readable:           # its decoder raises, saying why
        return None
    codec = col.codec
    if not getattr(codec, "item", codec).itemsize:     # stored in other forms than its values
        return None
    shape = out_shape(codec, col.block_rows(b1 - 1)[1] - col.block_rows(b0)[0])
    return None if shape is None else (shape, codec.dtype)


def fixed_blocks(col, out):
    """The ColumnBlocks of `col` when its blocks can be inflated straight into `out` (a room
    of the window's buffer: fixed-width scalars, BlockStore.inflate_fixed), else None."""
    if out is None or not col.readable or not fixed_width(col.codec):
        return None
    return col.blocks


def end_to_end(arrays):
    """One array over numpy `arrays` (of one dtype and item shape, C-contiguous) that lie end
    to end in the same buffer, as the pieces of a column decoded into a scan window's buffer
    do; None for any others. No copy."""
    first = arrays[0]
    if not isinstance(first, np.ndarray):
        return None
    root = _root(first)
    if root.dtype != np.uint8 or root.ndim != 1 or not root.flags.c_contiguous:
        return None
    at = first.ctypes.data
    for a in arrays:
        if not (isinstance(a, np.ndarray) and a.dtype == first.dtype and a.flags.c_contiguous
                and a.shape[1:] == first.shape[1:] and a.ctypes.data == at
                and _root(a) is root):
            return None
        at += a.nbytes
    start = first.ctypes.data - root.ctypes.data
    rows = sum(len(a) for a in arrays)
    return root[start:at - root.ctypes.data].view(first.dtype).reshape((rows,) + first.shape[1:])


def _root(a):
    """The array whose memory numpy array `a` views (`a` itself when it owns its own)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


class NumpyColumn:
    """A column read into read()'s forms: numpy arrays, Ragged, CSR (``sparse``)."""

    def __init__(self, col, sparse=False):
        self.col = col
        self.sparse = sparse

    def room(self, b0, b1):
        """(shape, dtype) of blocks [b0, b1) in the window's buffer, or None (a new array)."""
        return None if self.sparse else fixed_room(self.col, b0, b1)

    def decode(self, b0, b1, out):
        """Blocks [b0, b1), decoded in the calling thread: a list of values (chunks)."""
        return [self.col.read_blocks(b0, b1, self.sparse, parallel=False, out=out)]

    def inflatable(self, b0, b1, out):
        """The column's ColumnBlocks when blocks [b0, b1) are inflated into `out` by the
        scan, together with other pieces of the window (then ``inflated`` gives the
        chunks); None: the scan calls ``decode``. Optional for a reader."""
        return fixed_blocks(self.col, out)

    def inflated(self, b0, b1, out):
        """The chunks of blocks [b0, b1), once inflated and fixed up in `out`."""
        return [out]

    def join(self, chunks):
        """A window's chunks, in row order, as one value: one array over them where they lie
        end to end in the window's buffer (its pieces of fixed-width items), else joined."""
        if len(chunks) == 1:
            return chunks[0]
        whole = end_to_end(chunks)
        return vectors.concat_reads(chunks) if whole is None else whole

    def cut(self, value, a, b, step=1):
        """Rows [a, b) (every `step`-th) of a joined value."""
        if step == 1 and a == 0 and b == vectors.num_rows_of(value):
            return value
        return value[a:b:step]


class TextColumn(NumpyColumn):
    """A Text column read as its blocks' UTF-8 bytes (TextRows), no str per value: what a
    filtered read tests, and makes str objects of for the rows that match alone."""

    def room(self, b0, b1):
        return ((self.col.text_room(b0, b1),), np.dtype(np.uint8)) if self.col.readable \
            else None

    def decode(self, b0, b1, out):
        return [TextRows.of_blocks(self.col.read_text_blocks(b0, b1, parallel=False,
                                                             out=out))]

    def inflatable(self, b0, b1, out):
        return None

    def join(self, chunks):
        return chunks[0] if len(chunks) == 1 else TextRows.joined(chunks)

    def cut(self, value, a, b, step=1):
        return value if step == 1 and a == 0 and b == len(value) else value.rows(a, b, step)


class WholeColumn(NumpyColumn):
    """A column read whole, in read()'s form: scalars and dense fixed-size vectors decoded
    straight into the one array of all their rows (``value``: no copy, nothing shared with
    another column), other forms kept window by window and joined once at the end."""

    def __init__(self, store, col, sparse=False):
        super().__init__(col, sparse)
        self.parts = []
        self.value = None
        shape = None if sparse or not col.readable else out_shape(col.codec, col.num_rows)
        if shape is not None:
            dtype = col.codec.dtype
            nbytes = math.prod(shape) * dtype.itemsize
            if dtype.hasobject:     # Text: its str objects too
                stored = int(col.lookup["raw"].sum(dtype=np.int64))
                store.need(budget.items_bytes(dtype, math.prod(shape), stored),
                           lambda: f"column {col.name!r}")
                self.value = np.empty(shape, dtype)
            else:
                self.value = store.buffer(nbytes, f"column {col.name!r}").view(dtype)
                self.value = self.value.reshape(shape)

    def room(self, b0, b1):
        """The rows of blocks [b0, b1) in the column's array, or None (a new array)."""
        if self.value is None:
            return None
        return self.value[self.col.block_rows(b0)[0]:self.col.block_rows(b1 - 1)[1]]

    def join(self, chunks):
        if self.value is None:
            self.parts += chunks

    def cut(self, value, a, b, step=1):
        return None

    def result(self):
        """The column's rows, once the scan is over."""
        if self.value is not None:
            return self.value
        if not self.parts:
            return self.col.read_blocks(0, 0, self.sparse)
        return super().join(self.parts)


class Chunks:
    """Another reader's chunks of a whole column kept, window after window (``result``: the
    list of them): Arrow arrays, say, which need no joining."""

    def __init__(self, reader):
        self.reader = reader
        self.col = reader.col
        self.chunks = []

    def room(self, b0, b1):
        return self.reader.room(b0, b1)

    def decode(self, b0, b1, out):
        return self.reader.decode(b0, b1, out)

    def inflatable(self, b0, b1, out):
        inflatable = getattr(self.reader, "inflatable", None)
        return None if inflatable is None else inflatable(b0, b1, out)

    def inflated(self, b0, b1, out):
        return self.reader.inflated(b0, b1, out)

    def join(self, chunks):
        self.chunks += chunks

    def cut(self, value, a, b, step=1):
        return None

    def result(self):
        return self.chunks


def read_whole(f, readers):
    """Every block of the columns of `readers` (WholeColumn, Chunks: readers that keep what
    they decode, made for columns of file `f`) decoded by one scan, in windows whose blocks
    of every column are decoded in parallel (the many small columns of a wide file share the
    threads): each reader's ``result()``, in a list."""
    # one window: each column's blocks in pieces of about PIECE_BYTES, all in the threads at
    # once (the readers allocate their columns whole, as a read of one column does)
    for _ in scan(f, readers, batch_rows=None, window_bytes=1 << 62):
        pass
    return [r.result() for r in readers]


class Rows(NamedTuple):
    """Aligned rows of the columns read: ``values`` (one per column, in its reader's form) of
    the rows ``range(start, stop, step)`` of the source's file number ``part``; ``row0``: the
    first of them among the source's rows (a dataset's files end to end)."""
    part: int
    start: int
    stop: int
    step: int
    row0: int
    values: list


class Partition(NamedTuple):
    """Whole blocks [b0, b1) of one file of a source, rows [start, stop) of it; ``row0``: its
    first row among the source's rows; ``nbytes``: about the bytes its columns decode to.
    Picklable: what a worker needs to read it again."""
    part: int
    path: object
    b0: int
    b1: int
    start: int
    stop: int
    row0: int
    nbytes: int = 0


# ---------------------------------------------------------------------------------------------
# what a source is: one file, or a dataset's files end to end
# ---------------------------------------------------------------------------------------------

class _Segment(NamedTuple):
    part: int
    path: object
    row0: int
    num_rows: int
    open: object        # () -> a context holding the IdvFile open (the source keeps it)


def _segments(source):
    """The files of a source (idv._reader.read_source: an IdvFile, an idv.Dataset) in row order,
    each opened when reached and kept open while its blocks are read."""
    fs = source.filesystem
    return [_Segment(i, worker_path(f.path, fs) if isinstance(f.path, (str, os.PathLike))
                     else f.path, f.start, f.num_rows, lambda i=i: source.using(i))
            for i, f in enumerate(source.files)]


def _file_columns(f, columns):
    """The Columns of file `f` for `columns`: Column objects (of `f`), names or indices."""
    return [c if hasattr(c, "read_blocks") else f[c] for c in columns]


def _readers(f, columns, reader):
    """A reader for each of `columns`: made by `reader` from the column, or given as is (an
    object with ``decode``, already made for a column of `f`)."""
    return [c if hasattr(c, "decode") else reader(c if hasattr(c, "read_blocks") else f[c])
            for c in columns]


def partitions(source, columns, blocks_per_partition=None, partition_bytes=PARTITION_BYTES,
               block_filter=None, at_least_one=False):
    """The source cut into Partitions of whole blocks, in row order: every
    ``blocks_per_partition`` blocks of each file, or by default about ``partition_bytes`` of
    decoded values of `columns` each, at most half the source's memory limit (so that no block
    is decoded by two partitions, and each one's read fits).
    ``block_filter(part, file)``: as the scan's (a bool per block of the file, False for
    blocks ruled out); a partition whose blocks are all ruled out is left out, the others
    keep the bounds they have without it (the engines' divisions). ``at_least_one``: when
    the filter rules out every partition, the first is kept all the same (an engine that
    needs a task, which then finds no rows)."""
    blocks_per_partition = ensure_count(blocks_per_partition, "blocks_per_partition", "blocks",
                                        none=True)
    partition_bytes = budget.halved(partition_bytes, getattr(source, "memory_limit", None))
    out, first = [], None
    for seg in _segments(source):
        if not seg.num_rows:
            continue
        with seg.open() as f:
            cols = _file_columns(f, columns)
            step = cols[0].rows_per_block if cols else seg.num_rows
            row_bytes = sum(c.nbytes for c in cols) / seg.num_rows if cols else 0
            keep = None if block_filter is None else \
                np.asarray(block_filter(seg.part, f), bool)
        nb = (seg.num_rows - 1) // step + 1
        if blocks_per_partition is None:
            per = max(1, int(partition_bytes // max(row_bytes * step, 1)))
        else:
            per = int(blocks_per_partition)
        for b0 in range(0, nb, per):
            b1 = min(b0 + per, nb)
            a, b = b0 * step, min(b1 * step, seg.num_rows)
            p = Partition(seg.part, seg.path, b0, b1, a, b, seg.row0 + a,
                          int(row_bytes * (b - a)))
            first = first or p
            if keep is None or keep[b0:b1].any():
                out.append(p)
    return [first] if not out and at_least_one and first else out


# ---------------------------------------------------------------------------------------------
# the scan
# ---------------------------------------------------------------------------------------------

def scan(source, columns, reader=NumpyColumn, *, rows=None, batch_rows=1, block_filter=None,
         window_bytes=None, piece_bytes=None, ahead=AHEAD, quick_first=False, wrap=None,
         whole_windows=False):
    """Yield Rows (aligned rows) of `columns` of `source` (an IdvFile, or an idv.Dataset: its
    files end to end, each opened when reached), in row order.

    ``columns``: Column objects of a file, or names or indices (looked up in each file), or
    readers already made for a file's columns. ``reader(col)`` makes each column's reader
    (NumpyColumn: read()'s forms). ``rows``: a range with a positive step over the source's rows
    (default: all); only the blocks that hold them are decoded. ``batch_rows``: each batch holds
    the selected rows of a group of whole blocks of about that many rows (at least one block,
    groups aligned on multiples of it: 1, the default, gives a batch per block); None gives a
    batch per window; ``whole_windows``: a batch per window, the windows cut where groups of
    ``batch_rows`` begin (for a consumer that cuts them). ``block_filter(part, file)``: a
    boolean mask over the file's blocks, False for blocks to skip (their rows are left out).

    ``window_bytes``, ``piece_bytes`` (default: WINDOW_BYTES, PIECE_BYTES) and ``ahead``
    (windows decoded ahead of the one handed out) trade memory and latency for speed: a consumer
    that may stop early (the command line into ``head``) takes small windows and none ahead
    (each decoded when reached); ``quick_first``: each file's first block a window of its own,
    the windows after it queued when the consumer asks for more (one that stops after its first
    batch, an engine's LIMIT, waits for that block's decode alone). ``wrap(file, readers)``: the
    readers a file's scan uses instead of those made for it (a filter's test of each piece in
    the threads: idv._scan.tested). An IdvFormatError from a dataset's file names the file."""
    batch_rows = ensure_count(batch_rows, "batch_rows", none=True)
    ahead = ensure_count(ahead, "ahead", "windows", least=0)
    window_bytes = WINDOW_BYTES if window_bytes is None else window_bytes
    piece_bytes = PIECE_BYTES if piece_bytes is None else piece_bytes
    for seg in _segments(source):
        local = None if rows is None else local_rows(rows, seg)
        if not (seg.num_rows if local is None else len(local)):
            continue
        try:
            yield from _scan_file(seg, columns, (reader, wrap), local, batch_rows,
                                  block_filter, (window_bytes, piece_bytes, ahead, quick_first,
                                                 whole_windows))
        except IdvFormatError as e:
            if seg.path is not None:
                e.locate(path=seg.path)
            raise


def _scan_file(seg, columns, reader, rows, batch_rows, block_filter, windowing):
    with seg.open() as f:
        yield from _scan_open(f, seg, columns, reader, rows, batch_rows, block_filter,
                              windowing)


def _scan_open(f, seg, columns, reader, rows, batch_rows, block_filter, windowing):
    """scan's Rows of file `f` (segment `seg`); `reader`: (reader, wrap) and `windowing`:
    (window_bytes, piece_bytes, ahead, quick_first, whole_windows) as scan takes them."""
    window_bytes, piece_bytes, ahead, quick_first, whole_windows = windowing
    readers = _readers(f, columns, reader[0])       # reader: (reader, wrap)
    if reader[1] is not None and readers:
        readers = reader[1](f, readers)
    if not readers:
        return
    cols = [r.col for r in readers]
    rpb = cols[0].rows_per_block
    keep = None if block_filter is None else block_filter(seg.part, f)
    blocks = needed_blocks(seg.num_rows, rpb, rows, keep)
    group = None if batch_rows is None else max(1, int(batch_rows) // rpb)
    sizes = block_bytes(cols)
    limit = getattr(f, "memory_limit", None)
    if limit and len(sizes):    # the windows in hand at once within the file's memory limit
        room = max(1, limit // (ahead + 2))             # (batches of fewer blocks, if need be)
        window_bytes = min(window_bytes, room)
        if group and group * int(sizes.max()) > room:
            group = max(1, room // max(int(sizes.max()), 1))
    # windows of consecutive blocks, the short ones between gaps in groups decoded together
    grouped = window_groups(window_spans(blocks, sizes, window_bytes, group or 1), sizes,
                            window_bytes)
    if quick_first:         # the first block alone, and the windows queued behind it as deep
        grouped = first_block_alone(grouped)
        ahead += 1
    # a remote file's windows queued hold their blocks beside them, as do the EARLY after
    windows = Windows(f, readers, not limit or window_bytes * (2 * ahead + 2 + EARLY) <= limit)
    try:
        queued = 0

        def queue(upto):        # groups [queued, upto) submitted, the EARLY after requested
            nonlocal queued
            for spans in grouped[queued:upto]:
                windows.submit(spans, piece_bytes, lone=len(grouped) == 1,
                               last=spans is grouped[-1])
            queued = max(queued, min(upto, len(grouped)))
            for spans in grouped[queued:queued + (EARLY if ahead else 0)]:    # none: may stop
                windows.fetch_early(spans)
        for i in range(len(grouped)):
            alone = quick_first and i == 0      # the rest queued once the consumer asks
            queue(1 if alone else max(i + 1, ahead))    # the first `ahead` groups, or this one
            done = windows.collect()
            if not alone:
                queue(i + 1 + ahead)       # `ahead` groups behind the one handed out
            yield from _batches(seg, windows.readers, done, rows, None if whole_windows else group,
                                f.store.check_intact)
            done = None
    finally:
        windows.close()


def _batches(seg, readers, windows, rows, group, intact):
    """The Rows of decoded windows ([(b0, b1, one value per reader)]) of segment `seg`:
    one per window, or per `group` blocks of it; `intact()` before each is handed out (a
    mapped file changed since raises, rather than hand out views of it)."""
    rpb = readers[0].col.rows_per_block
    step = 1 if rows is None else rows.step
    lo, hi = (0, seg.num_rows) if rows is None else (rows.start, rows.stop)
    for b0, b1, values in windows:
        w0 = b0 * rpb
        cuts = [(b0, b1)] if group is None else [
            (g, min(g - g % group + group, b1)) for g in range(b0, b1)
            if g == b0 or g % group == 0]
        for c0, c1 in cuts:
            # the selected rows of blocks [c0, c1): from the first at or after max(lo, start)
            # that the step reaches, to min(hi, stop)
            a, b = max(lo, c0 * rpb), min(hi, c1 * rpb, seg.num_rows)
            a += (lo - a) % step
            if a >= b:
                continue
            intact()
            yield Rows(seg.part, a, b, step, seg.row0 + a,
                        [r.cut(v, a - w0, b - w0, step) for r, v in zip(readers, values)])


def rebatched(chunks, size, cut, join, drop_last=False):
    """`chunks` ((piece, rows) pairs: a stream's consecutive rows, a scan's batches say) cut
    and joined into pieces of exactly `size` rows, the last holding the rest unless
    `drop_last`; what the readers of fixed batch sizes share (idv._interop.arrow, idv.torch).
    ``cut(piece, a, b)``: its rows [a, b); ``join(pieces)``: one piece of their rows in turn
    (given two or more). A chunk that is exactly a batch goes out as it came, uncopied. The
    callers check `size` (a positive int) where it is given."""
    pending, n = [], 0
    for piece, rows in chunks:
        at = 0
        while rows - at >= size - n:
            take = size - n
            part = piece if at == 0 and take == rows else cut(piece, at, at + take)
            yield join(pending + [part]) if pending else part
            pending, n, at = [], 0, at + take
        if at < rows:
            pending.append(piece if at == 0 else cut(piece, at, rows))
            n += rows - at
    if n and not drop_last:
        yield join(pending) if len(pending) > 1 else pending[0]
