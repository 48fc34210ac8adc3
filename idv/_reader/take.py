"""Rows by number, in the order asked (``IdvFile.take``): what a shuffled training epoch or a
sample asks of a file.

The plan is made once per call, in numpy: the blocks that hold the rows asked for, and each
row's place among their rows. Columns of fixed-width scalars (numbers, keys, times) have their
blocks hit inflated by one call of the block store (``BlockStore.inflate_listed``: parallel
chunks in the threads, CRC-32s checked, no Python per block; a checksummed block only as far
as its last row asked for, where that saves inflating: inflate_blocks' ``need``) per round of
at most ``TAKE_BYTES`` of blocks, end to end into one buffer, and their rows gathered from it
with one fancy index; a take that hits fewer bytes (nearly all) is one round. Other columns
(text, vectors, Booleans) go through the scan (idv._scan.scan), which decodes only the blocks hit
in its parallel windows (Text into their UTF-8 bytes); each batch gives up its rows with one
fancy index per column (str objects made for those rows of Text alone), and the pieces are
joined and put back in the order asked with one more. No Python runs per row, and each
block hit is inflated and decoded once, however many rows it gives. """
from __future__ import annotations

import numpy as np

from idv._resources import budget
from idv._reader import row_picks, selection
from idv._values import vectors
from idv import types as T
from idv._store.block_runs import fixed_width, out_shape, text_rooms
from idv._values.text_bytes import TextRows
from idv._scan import filters
from idv._scan.scan import AHEAD, WINDOW_BYTES, scan

# windows decoded ahead of the one gathered from: the blocks a take hits are rarely adjacent,
# so its windows are small, and more of them in flight keep the threads busy; each window is
# smaller by as much, so that no more bytes are held than in a scan
TAKE_AHEAD = 8
TAKE_WINDOW_BYTES = WINDOW_BYTES * (AHEAD + 1) // (TAKE_AHEAD + 1)
# decompressed blocks (over the columns) inflated together by a take's round: as many bytes as
# a scan holds, so that a take of many rows of a large file does not hold all its blocks
TAKE_BYTES = 8 * WINDOW_BYTES
# what a row asked for costs beyond its values: its number in the int64 arrays the plan holds
# at once (as given, checked, sorted, the order restored)
ROW_NUMBER_BYTES = 4 * 8


def take(f, indices, columns=None) -> dict:
    """dict name -> values (read()'s forms) of rows `indices` of the open file `f`, in the
    order given (repeats repeat; negative from the end, as numpy). IndexError names a row
    number out of range and the file's row count."""
    cols = selection.file_columns(f, columns)
    return {c.name: v for c, v in zip(cols, taken(f, indices, cols))}


def taken(f, indices, cols) -> list:
    """take() of Columns `cols` of `f`: their values, in a list."""
    check_result(indices, f.num_rows, [c.type for c in cols], f.store.need)
    rows = selection.row_numbers(selection.take_numbers(indices), f.num_rows, "file")
    if not len(rows) or not cols:
        return [c.read_blocks(0, 0) for c in cols]
    others = [c for c in cols if not (c.readable and fixed_width(c.codec))]
    with f.prefetch(cols, rows=rows):       # a remote file: the blocks hit, in few requests
        out = _take_fixed(f, [c for c in cols if c not in others], rows)
        out.update(_take_scanned(f, others, rows) if others else {})
    return [out[c.index] for c in cols]


def check_result(indices, num_rows, types, need):
    """Refuse a take whose result (repeats included) is beyond the limit, before any array of
    its row numbers is made (a take of 100M rows would first hold gigabytes of them):
    ``need(nbytes, what)`` is the limit's check (BlockStore.need, a dataset's); `types`:
    the columns' types. A boolean mask (read(rows=mask)) counts the rows it keeps."""
    if isinstance(indices, slice):
        count = len(range(*indices.indices(num_rows)))
    elif getattr(indices, "dtype", None) == bool:
        count = int(np.count_nonzero(indices))
    else:
        count = getattr(indices, "size", None)
        if count is None:
            count = len(indices) if hasattr(indices, "__len__") else 1
    need(count * (ROW_NUMBER_BYTES + sum(_row_bytes(t) for t in types)),
         lambda: f"taking {count} rows of {len(types)} columns")


def _row_bytes(t):
    """The fewest bytes a row of type `t` takes in read()'s form (a vector of variable size:
    its offset; Text: a pointer and an empty str)."""
    if t is None:
        return 0
    if isinstance(t, T.Vector):
        return 8 + t.size * t.item.dtype.itemsize
    return 8 + budget.STR_BYTES if T.item_type(t) is T.Text else t.dtype.itemsize


def _take_fixed(f, cols, rows):
    """{column index: rows `rows` of it} for columns `cols` (fixed-width scalars): their
    blocks hit inflated into one buffer by one call of the block store per round, then
    gathered."""
    if not cols:
        return {}
    rpb = cols[0].rows_per_block
    block = rows // rpb
    hit = np.unique(block)
    row_bytes = sum(c.codec.itemsize for c in cols)
    per = max(1, TAKE_BYTES // (rpb * row_bytes))          # blocks a round
    if len(hit) <= per:
        return dict(zip((c.index for c in cols), _gathered(f, cols, hit, block, rows)))
    order = np.argsort(block, kind="stable")
    bounds = np.searchsorted(block[order], hit[::per])
    out = {c.index: np.empty(len(rows), c.codec.dtype) for c in cols}
    for k, (a, b) in enumerate(zip(bounds, np.append(bounds[1:], len(rows)))):
        sel = order[a:b]
        got = _gathered(f, cols, hit[k * per:(k + 1) * per], block[sel], rows[sel])
        for c, values in zip(cols, got):
            out[c.index][sel] = values
    return out


def _gathered(f, cols, hit, block, rows):
    """Rows `rows` (in blocks `block`, among the ascending blocks `hit`) of each of `cols`:
    the blocks inflated end to end into one buffer, in one call of the block store."""
    rpb = cols[0].rows_per_block
    n = row_picks.rows_held(f.num_rows, rpb, hit)       # the rows of the blocks hit
    k, within = np.searchsorted(hit, block), rows - block * rpb
    place = k * rpb + within
    sizes = [(n * c.codec.itemsize + 63) // 64 * 64 for c in cols]
    buf = f.store.buffer(sum(sizes), "the blocks a take hits")
    pieces, at = [], 0
    for c, size in zip(cols, sizes):
        dtype = c.codec.dtype
        pieces.append((c.blocks, hit, buf[at:at + n * dtype.itemsize].view(dtype)))
        at += size
    # each block only as far as its last row asked for (the store decides whether to stop
    # there: inflate_blocks' `need`), where rows are few: with two or more a block, the last
    # lies past two thirds of it more often than not, and the block is inflated whole
    wanted = None
    if len(rows) < 2 * len(hit):
        wanted = np.zeros(len(hit), np.int64)
        np.maximum.at(wanted, k, within + 1)
    f.store.inflate_listed(pieces, wanted=wanted)
    return [piece[2][place] for piece in pieces]


def _take_scanned(f, cols, rows):
    """{column index: rows `rows` of it} for columns `cols` (any form), through the scan:
    only the blocks hit decoded; Text as its blocks' bytes, str made for the rows taken
    alone."""
    order = np.argsort(rows, kind="stable")
    ordered = rows[order]
    rpb = cols[0].rows_per_block
    keep = np.zeros((f.num_rows - 1) // rpb + 1, bool)
    keep[ordered // rpb] = True
    pieces = [[] for _ in cols]
    for batch in scan(f, cols, filters.bytes_reader, block_filter=lambda _part, _file: keep,
                      batch_rows=None, window_bytes=TAKE_WINDOW_BYTES, ahead=TAKE_AHEAD):
        lo, hi = np.searchsorted(ordered, [batch.start, batch.stop])
        local = ordered[lo:hi] - batch.start
        for k, value in enumerate(batch.values):
            pieces[k].append(filters.take(value, local))
    restore = None if np.array_equal(order, np.arange(len(order))) else np.argsort(order)
    out = {}
    for c, parts in zip(cols, pieces):
        joined = parts[0] if len(parts) == 1 else vectors.concat_reads(parts)
        out[c.index] = joined if restore is None else joined[restore]
    return out


def take_kept(f, rows, cols) -> list:
    """Rows `rows` (row numbers in range, any order, repeats allowed) of `cols` (Columns of
    the open file `f`), read()'s forms, through the file's cache of decoded blocks: what a
    map-style loader asks batch after batch. Decided column by column: while the whole decoded
    arrays of the columns that have one fit the cache together, each such column is one cached
    array that its blocks decode into when first hit (each block once), and a batch is one
    fancy index of it, however many blocks it hits. A Text column keeps each block hit as its
    UTF-8 bytes and offsets, and a batch's rows are taken from them in one pass (_text_kept).
    Otherwise (variable-size vectors, the arrays beyond the cache or the memory limit) the
    rows of each block hit are taken from it (Column's row access: its block through the
    cache), then put in the order asked."""
    check_result(rows, f.num_rows, [c.type for c in cols], f.store.need)
    whole = [_whole_bytes(c) for c in cols]
    total = sum(n for n in whole if n is not None)
    fits = total <= f.store.cache.max_bytes and budget.allows(total, f.memory_limit)
    return [_kept(f, c, rows, n) if n is not None and fits else
            _text_kept(f, c, rows) if c.type is T.Text and c.readable else
            _by_block(c, rows) for c, n in zip(cols, whole)]


def _whole_bytes(col):
    """The bytes of `col`'s whole decoded array, None for a column whose blocks cannot be
    decoded into one (text, variable-size vectors, an unreadable codec)."""
    shape = out_shape(col.codec, col.num_rows) if col.readable else None
    if shape is None or col.codec.dtype == object:
        return None
    return int(np.prod(shape, dtype=np.int64)) * col.codec.dtype.itemsize


class _Filled:
    """A column's whole decoded array, filled block by block (``have``: the blocks in it)."""

    def __init__(self, array, num_blocks):
        self.array = array
        self.have = np.zeros(num_blocks, bool)


def _kept(f, col, rows, nbytes):
    """Rows `rows` of `col` from its cached whole array, decoding the blocks hit that are not
    in it yet (runs of consecutive ones together)."""
    def fresh():
        buf = f.store.buffer(nbytes, f"column {col.index} {col.name!r} kept for row access")
        shape = out_shape(col.codec, col.num_rows)
        return _Filled(buf.view(col.codec.dtype).reshape(shape), col.num_blocks)
    filled = f.store.cache.get(("whole", col.index), fresh, nbytes)
    rpb = col.rows_per_block
    hit = np.unique(rows // rpb)
    missing = hit[~filled.have[hit]]
    for run in np.split(missing, np.flatnonzero(np.diff(missing) != 1) + 1) if len(missing) \
            else ():
        b0, b1 = int(run[0]), int(run[-1]) + 1
        col.read_blocks(b0, b1, out=filled.array[b0 * rpb:min(b1 * rpb, col.num_rows)])
        filled.have[b0:b1] = True
    return filled.array[rows]


def _text_kept(f, col, rows):
    """Rows `rows` of Text column `col`: each block hit kept in the file's cache as its UTF-8
    bytes and offsets (a TextSpans, decoded once while it stays there), the rows taken from
    those of the batch's blocks in one pass, a str made for each row taken alone. What the
    blocks and the rows take is checked against the memory limit before any is decoded."""
    if not len(rows):
        return col.read_blocks(0, 0)
    rpb = col.rows_per_block
    block = rows // rpb
    hit = np.unique(block)
    rooms = text_rooms(col.lookup[hit])
    held = int(rooms.sum())
    held_rows = row_picks.rows_held(col.num_rows, rpb, hit)
    col.need(budget.picked_bytes(held, held_rows, len(rows))
             + len(rows) * (8 + budget.STR_BYTES),
             lambda: f"reading {len(rows)} rows of column {col.index} {col.name!r}")

    def spans(b, room):
        return f.store.cache.get((col.index, b, "text"),
                                 lambda: col.read_text_blocks(b, b + 1, parallel=False)[0],
                                 room)
    got = TextRows.of_blocks([spans(b, r) for b, r in zip(hit.tolist(), rooms.tolist())])
    # the blocks hit end to end: all but the file's last (only ever last here) hold rpb rows
    return got.taken(np.searchsorted(hit, block) * rpb + (rows - block * rpb))


def _by_block(col, rows):
    """Rows `rows` of `col`, those of each block hit taken from it in turn (Column's row
    access), joined and put back in the order asked. Rows of a vector column fewer than half
    the rows of their blocks: one row access (row_picks.picked_vectors: each block through
    the cache as stored, those rows alone made dense or Ragged)."""
    if row_picks.picks_few(col, rows):
        return col[rows]
    order = np.argsort(rows, kind="stable")
    ordered = rows[order]
    blocks = ordered // col.rows_per_block
    firsts = np.flatnonzero(np.diff(blocks)) + 1
    parts = [col[run] for run in np.split(ordered, firsts)]
    joined = parts[0] if len(parts) == 1 else vectors.concat_reads(parts)
    return joined[np.argsort(order)]
