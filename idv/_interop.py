"""Reading a file's columns in step, for the pandas, Arrow and conversion layers (idv.pandas,
idv.arrow, idv.formats): an IdvFile for what the caller gave, the columns a read covers, and
the rows of blocks that several columns are walked through together.
"""
from __future__ import annotations

import contextlib

import numpy as np

from idv import _threads


@contextlib.contextmanager
def opened(file, **kwargs):
    """An open IdvFile for `file` (a path or URL, bytes, file object or an IdvFile); files opened
    here are closed on exit, an IdvFile passed in is left open."""
    from idv.reader import IdvFile, open as idv_open
    if isinstance(file, IdvFile):
        yield file
        return
    f = idv_open(file, **kwargs)
    try:
        yield f
    finally:
        f.close()


def select_columns(f, columns):
    """Columns as IdvFile.read() picks them: every readable visible column (the last of each
    name) when `columns` is None, else the named or indexed ones in the given order."""
    if columns is None:
        return [c for c in f.columns if c.readable and f[c.name] is c]
    if isinstance(columns, (str, int, np.integer)):
        columns = [columns]
    out = []
    for c in columns:
        col = f[int(c)] if isinstance(c, (int, np.integer)) else f[c]
        col.check_readable()
        out.append(col)
    return out


def block_bounds(cols, num_rows):
    """Row boundaries of the batches that read every column one block at a time: the union of
    the columns' block starts (one batch per block when all columns share rows_per_block)."""
    if num_rows == 0 or not cols:
        return []
    starts = set()
    for c in cols:
        starts.update(range(0, num_rows, c.rows_per_block))
    bounds = sorted(starts) + [num_rows]
    return list(zip(bounds[:-1], bounds[1:]))


def row_windows(cols, num_rows, limit):
    """block_bounds(cols, num_rows) gathered into windows of rows that hold about `limit`
    decompressed bytes of the columns' blocks (at least one block's rows): (start, stop,
    [the bounds in it]). A reader decodes a window's blocks together, then cuts them."""
    bounds = block_bounds(cols, num_rows)
    if not bounds:
        return []
    per_row = sum(int(c.lookup["raw"].sum(dtype=np.int64)) for c in cols) / num_rows
    out, group, size = [], [], 0.0
    for a, b in bounds:
        group.append((a, b))
        size += (b - a) * per_row
        if size >= limit:
            out.append((group[0][0], b, group))
            group, size = [], 0.0
    if group:
        out.append((group[0][0], group[-1][1], group))
    return out


class _Cursor:
    """A column read forward block by block; take(a, b) gives rows [a, b) of the current block
    (decoding the next one when needed). Only one block per column is held at a time."""

    def __init__(self, col):
        self.blocks = col.iter_blocks()
        self.start = self.stop = 0
        self.data = None

    def take(self, a, b):
        while b > self.stop:
            self.data = next(self.blocks)
            self.start, self.stop = self.stop, self.stop + len(self.data)
        if a == self.start and b == self.stop:
            return self.data
        return self.data[a - self.start:b - self.start]


def iter_row_blocks(f, cols):
    """Yield (start, stop, [values of each column for rows start:stop]) block by block, the
    columns of a block decoded in parallel threads (a pool of its own, not the reader's)."""
    cursors = [_Cursor(c) for c in cols]
    threads = min(f.threads, len(cols))
    pool = _threads.pool("convert", threads) if threads > 1 else None
    for a, b in block_bounds(cols, f.num_rows):
        if pool is not None:
            parts = list(pool.map(lambda cur: cur.take(a, b), cursors))
        else:
            parts = [cur.take(a, b) for cur in cursors]
        yield a, b, parts
