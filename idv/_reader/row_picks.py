"""Rows picked by number from a Column's blocks (its row access: ``col[rows]``, read(rows=),
a map-style loader's batches): each block hit decoded once, the rows taken from it.

A vector column's rows are picked without densifying the blocks that hold them: each block
hit is decoded as stored
(BlockStore.stored_vectors: a sparse row as its indices and values, checked as a dense read
checks it), the rows asked for are selected from it (vectors.block_rows), and those alone are
made dense or Ragged. A row of a ``Vector<Single, 100000>`` column stored sparse, as ML.NET's
text featurizers write them, then costs its stored items and one dense row, not a block of
8,192 dense rows (3.2 GB). Where the rows asked for are half the rows of the blocks they
fall in or more, densifying the blocks whole costs no more, and the reads do that.
"""
from __future__ import annotations

import numpy as np

from idv import types as T
from idv._resources import budget
from idv._store.block_runs import block_groups, decoded_size
from idv._values import vectors

# A row selection over at most this many blocks goes through the cache of decoded blocks.
CACHED_BLOCKS = 64
# the blocks of a slice whose step skips rows are decoded about this many bytes at a time
STRIDE_BYTES = 32 << 20


def is_strided(col, key, blocks):
    """Whether slice `key` of scalar column `col`, over `blocks` (first, stop), skips rows
    over several blocks: gathered by strided(), never its span decoded at once."""
    return abs(key.step or 1) > 1 and blocks[1] - blocks[0] > 1 and \
        not isinstance(col.type, T.Vector)


def _group_bytes(col):
    """The bytes of blocks strided() decodes at once: STRIDE_BYTES, within half the limit."""
    return max(1, min(STRIDE_BYTES, col.memory_limit // 2))


def strided_bytes(col, raw, count, blocks, arrow):
    """What strided() returns for `count` rows of `blocks` (first, stop) that inflate to
    `raw` bytes: their share of the span's decoded bytes (besides it, a group of blocks at a
    time, each checked as it is decoded, as a slice's one block is)."""
    span = (blocks[1] - blocks[0]) * col.rows_per_block
    return decoded_size(col.codec, raw * count // span, count, arrow)


def strided(col, rows):
    """Rows `rows` (a range whose step skips rows over several blocks) of a column of scalars,
    gathered a group of blocks (about STRIDE_BYTES) at a time, each group let go before the
    next: ``col[::1000]`` of millions of rows allocates its rows and a group, not its span."""
    asc = rows if rows.step > 0 else rows[::-1]
    rpb, step = col.rows_per_block, asc.step
    first_block, stop_block = asc[0] // rpb, asc[-1] // rpb + 1
    pieces = []
    for g0, g1 in block_groups(col.lookup["raw"][first_block:stop_block].astype(np.int64),
                               _group_bytes(col), first_block):
        part = col.read_blocks(g0, g1)
        lo, hi = g0 * rpb, min(g0 * rpb + len(part), asc[-1] + 1)
        first = asc.start + max(0, -(-(lo - asc.start) // step)) * step
        if first < hi:
            pieces.append(part[first - lo:hi - lo:step].copy())
        del part
    out = np.concatenate(pieces) if pieces else col.read_blocks(0, 0)
    return out if rows.step > 0 else out[::-1].copy()


def rows_held(num_rows, rows_per_block, blocks):
    """The rows of `blocks` (ascending block numbers, at least one) end to end: only the
    file's last block may be short."""
    return (len(blocks) - 1) * rows_per_block + \
        min(rows_per_block, num_rows - int(blocks[-1]) * rows_per_block)


def picked(col, rows, cached_block):
    """Rows `rows` (int64 row numbers in range, any order, repeats) of Column `col` in
    read()'s form: a few blocks each decoded through the file's cache (``cached_block(b)``),
    many in runs of consecutive blocks decoded together; what they take is checked against
    the memory limit before any is decoded."""
    if len(rows) == 0:
        return col.read_blocks(0, 0)
    rpb, n = col.rows_per_block, col.num_rows
    blocks = np.unique(rows // rpb)
    cached = len(blocks) <= CACHED_BLOCKS              # a few blocks: each once, cached;
    runs = blocks[:, None] if cached else np.split(    # many: runs of consecutive blocks
        blocks, np.flatnonzero(np.diff(blocks) != 1) + 1)   # decoded together, the rest not
    held = rows_held(n, rpb, blocks)                    # rows decoded
    size = decoded_size(col.codec, int(col.lookup["raw"][blocks].sum(dtype=np.int64)), held)
    col.need(budget.picked_bytes(size, held, len(rows), len(runs) > 1),  # before decoding
             lambda: f"reading {len(rows)} rows of column {col.index} {col.name!r}")
    parts = [cached_block(int(r[0])) if cached else
             col.read_blocks(int(r[0]), int(r[-1]) + 1) for r in runs]
    firsts = np.array([int(r[0]) * rpb for r in runs])
    if len(parts) == 1:
        whole, local = parts[0], rows - firsts[0]
    else:
        whole = vectors.concat_reads(parts)
        starts = np.cumsum([0] + [vectors.num_rows_of(p) for p in parts[:-1]])
        run_of_row = np.searchsorted(firsts, rows, side="right") - 1
        local = rows - firsts[run_of_row] + starts[run_of_row]
    return whole[local]


def picks_few(col, rows):
    """Whether `rows` (int64 row numbers of Column `col`, repeats counted) are rows of a
    vector column fewer than half the rows of the blocks they fall in: picked from the
    blocks as stored, fewer rows are densified than a read of those blocks densifies."""
    if not isinstance(col.type, T.Vector) or not col.readable or not len(rows):
        return False
    return 2 * len(rows) < len(np.unique(rows // col.rows_per_block)) * col.rows_per_block


class Stored:
    """A block of a vector column as stored, as the file's cache keeps it for row access:
    ``block`` (a VectorBlock) and, where every row of a fixed size is stored dense, ``dense``,
    its rows as an array (a view of its values: rows picked from it with one index)."""

    __slots__ = ("block", "dense")

    def __init__(self, block, vtype):
        self.block = block
        self.dense = block.values.reshape((len(block),) + vtype.dims) \
            if vtype.is_fixed and block.all_dense else None

    def rows(self, local):
        """Its rows `local` (int64 positions among its rows) as a VectorBlock, or dense."""
        if self.dense is not None:
            return self.dense[local]
        return vectors.block_rows(self.block, local)


def picked_vectors(col, rows, stored):
    """Rows `rows` (int64 row numbers in range, any order, repeats) of vector Column `col`
    in read()'s form (dense rows of a fixed size, else a Ragged); ``stored(b)``: block b as
    stored (a Stored). What they take is checked against the file's memory limit first:
    the blocks hit as stored, and the rows made dense."""
    rows = np.asarray(rows, np.int64)
    rpb = col.rows_per_block
    order = np.argsort(rows, kind="stable")
    ordered = rows[order]
    hit, first = np.unique(ordered // rpb, return_index=True)
    raw = int(col.lookup["raw"][hit].sum(dtype=np.int64))
    t = col.type
    dense = t.size * t.item.dtype.itemsize if t.is_fixed else raw // max(len(hit) * rpb, 1)
    col.need(raw + len(rows) * dense,
             lambda: f"reading {len(rows)} rows of column {col.index} {col.name!r}")
    ends = np.append(first[1:], len(ordered))
    pieces = [stored(int(b)).rows(ordered[a:z] - int(b) * rpb)
              for b, a, z in zip(hit.tolist(), first, ends)]
    value = pieces[0] if len(pieces) == 1 and isinstance(pieces[0], np.ndarray) else \
        vectors.assemble([p if not isinstance(p, np.ndarray) else _as_block(p)
                          for p in pieces], t)
    if len(rows) < 2 or bool((rows[1:] >= rows[:-1]).all()):
        return value
    restore = np.empty_like(order)
    restore[order] = np.arange(len(order))
    return value[restore]


def _as_block(dense):
    """Dense rows of a fixed size as a VectorBlock of dense rows."""
    from idv._codecs import VectorBlock
    n = len(dense)
    size = dense[0].size if n else 0
    return VectorBlock(np.full(n, size, np.int64), np.full(n, -1, np.int32),
                       np.zeros(0, np.int32), dense.reshape(-1))


def row(col, i, stored):
    """Row `i` of vector Column `col` (read()'s form of one row), a copy of its own, from
    ``stored(b)``, its block as stored (a Stored)."""
    got = stored(i // col.rows_per_block)
    if got.dense is not None:
        return got.dense[i % col.rows_per_block].copy()
    got = got.rows(np.array([i % col.rows_per_block]))
    return vectors.assemble([got], col.type)[0].copy()
