"""How many of a time column's values in each block are no whole microsecond, and the first of
them: kept with the block statistics, so that a read in microseconds (idv._reader.time_units,
the Arrow dataset's default) says what it floors without decoding the column.

They follow the statistics section's columns (idv._storage.statistics), 8-aligned, where a
reader that does not know them stops (the columns' parts say where they end):

    8 bytes  b"idvTICKS"        uint32  columns         4 bytes zero
    per column: uint32 its index, 4 bytes zero, then one int64 per block: the count; then one
    int64 per block: the first such value, in the statistics' numbers (.NET ticks, a
    DateTimeOffset's UTC ticks, TimeSpan ticks), 0 where the count is 0
"""
from __future__ import annotations

import struct

import numpy as np

from idv import _encode

MAGIC = b"idvTICKS"
_HEAD = struct.Struct("<8sI4x")
_COLUMN = struct.Struct("<I4x")


def of_runs(ticks, rows):
    """(count, first) of each run of `rows` of the 100-ns counts `ticks` (the statistics'
    numbers), in one pass of C."""
    counts, firsts = _encode.sub_microsecond_blocks(
        np.ascontiguousarray(ticks, np.int64).reshape(-1), max(int(rows), 1))
    return list(zip(counts.tolist(), firsts.tolist()))


def pack(columns) -> bytes:
    """The part for the ColumnStats `columns` that have counts (b"": none has)."""
    kept = [c for c in columns if c.sub_us is not None]
    if not kept:
        return b""
    return _HEAD.pack(MAGIC, len(kept)) + b"".join(
        _COLUMN.pack(c.index) + c.sub_us.astype("<i8").tobytes() +
        c.first_sub_us.astype("<i8").tobytes() for c in kept)


def parse(data, at, num_blocks) -> dict:
    """{column index: (counts, firsts)} of the part at byte `at` of section `data` (columns of
    `num_blocks` blocks), {} where there is none; ValueError where it is malformed."""
    at += -at % 8
    if len(data) - at < _HEAD.size or data[at:at + 8] != MAGIC:
        return {}
    _, ncols = _HEAD.unpack_from(data, at)
    at += _HEAD.size
    size = _COLUMN.size + 16 * num_blocks
    if ncols * size > len(data) - at:
        raise ValueError(f"sub-microsecond counts of {ncols} columns, truncated")
    found = {}
    for _ in range(ncols):
        (index,) = _COLUMN.unpack_from(data, at)
        if index in found:
            raise ValueError(f"column {index}'s sub-microsecond counts appear twice")
        counts = np.frombuffer(data, "<i8", num_blocks, at + _COLUMN.size)
        firsts = np.frombuffer(data, "<i8", num_blocks, at + _COLUMN.size + 8 * num_blocks)
        found[index] = (counts, firsts)
        at += size
    return found


def check(cs):
    """ValueError naming the column and block of counts no block could have: a count below
    zero or above the values present, a first value that is a whole microsecond or outside
    the block's bounds, or one where the count is 0."""
    if cs.sub_us is None:
        return
    counts, firsts = cs.sub_us, cs.first_sub_us
    some = counts > 0
    with np.errstate(invalid="ignore"):
        bad = (counts < 0) | (counts > cs.present) | ~some & (firsts != 0) | some & (
            (firsts % 10 == 0) | (firsts < cs.low) | (firsts > cs.high))
    if bad.any():
        raise ValueError(f"column {cs.index}, block {int(np.flatnonzero(bad)[0])}: a count of "
                         f"values with 100-ns ticks no block could have")
