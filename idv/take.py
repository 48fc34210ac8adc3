"""Rows by number, in the order asked (``IdvFile.take``): what a shuffled training epoch or a
sample asks of a file.

The plan is made once per call, in numpy: the row numbers sorted, the blocks that hold them
marked in a mask, and the scan (idv.scan) decodes only those blocks, of only the columns asked
for, in its parallel windows. Each batch gives up its rows with one fancy index per column
(the sorted row numbers that fall in the batch's range, found by ``np.searchsorted``); the
pieces are joined and put back in the order asked with one more. No Python runs per row, and
each block hit is inflated and decoded once, however many rows it gives.
"""
from __future__ import annotations

import numpy as np

from idv import selection, vectors
from idv.scan import AHEAD, WINDOW_BYTES, scan

# windows decoded ahead of the one gathered from: the blocks a take hits are rarely adjacent,
# so its windows are small, and more of them in flight keep the threads busy; each window is
# smaller by as much, so that no more bytes are held than in a scan
TAKE_AHEAD = 8
TAKE_WINDOW_BYTES = WINDOW_BYTES * (AHEAD + 1) // (TAKE_AHEAD + 1)


def take(f, indices, columns=None) -> dict:
    """dict name -> values (read()'s forms) of rows `indices` of the open file `f`, in the
    order given (repeats repeat; negative from the end, as numpy). IndexError names a row
    number out of range and the file's row count."""
    rows = selection.row_numbers(indices, f.num_rows, "file")
    cols = selection.file_columns(f, columns)
    if not len(rows) or not cols:
        return {c.name: c.read_blocks(0, 0) for c in cols}
    order = np.argsort(rows, kind="stable")
    ordered = rows[order]
    rpb = cols[0].rows_per_block
    keep = np.zeros((f.num_rows - 1) // rpb + 1, bool)
    keep[ordered // rpb] = True
    pieces = [[] for _ in cols]
    for batch in scan(f, cols, block_filter=lambda _part, _file: keep, batch_rows=None,
                      window_bytes=TAKE_WINDOW_BYTES, ahead=TAKE_AHEAD):
        lo, hi = np.searchsorted(ordered, [batch.start, batch.stop])
        local = ordered[lo:hi] - batch.start
        for k, value in enumerate(batch.values):
            pieces[k].append(value[local])
    restore = None if np.array_equal(order, np.arange(len(order))) else np.argsort(order)
    out = {}
    for c, parts in zip(cols, pieces):
        joined = parts[0] if len(parts) == 1 else vectors.concat_reads(parts)
        out[c.name] = joined if restore is None else joined[restore]
    return out
