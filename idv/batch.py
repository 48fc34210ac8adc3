"""Whole columns of many files inflated straight into one array, in one call: a dataset of a
thousand small files reads one column of each as one run of blocks, not a thousand decodes.

The pieces are fixed-width scalar columns (numbers, keys: idv.blocks.fixed_width) read whole,
each into its rows of one array. Their blocks, checked against their CRC-32s, are inflated
by one call of the C loop per compression kind (idv._compression.inflate_blocks_from, the GIL
released, in parallel chunks); then each piece is fixed up (codec.fix) and counted. A piece
whose block fails is decoded again by its own file's store, whose error names the file, the
column and the block.
"""
from __future__ import annotations

import numpy as np

from idv import _compression, _threads
from idv.blocks import SPAN_BYTES, BlockStore, ColumnBlocks, chunks, fixed_width, root_bytes
from idv.errors import IdvFormatError


def batchable(store: BlockStore, blocks: ColumnBlocks, out) -> bool:
    """Whether `blocks` (all of a column's) can be inflated by inflate_files into `out`: a
    fixed-width scalar column of a known compression, through a native DEFLATE library, `out`
    a contiguous array of its rows and its codec's dtype."""
    return (fixed_width(blocks.codec) and blocks.compression in _compression.NAMES
            and store.backend.native is not None and out.dtype == blocks.codec.dtype
            and out.shape == (blocks.num_rows,) and out.flags.c_contiguous)


def inflate_files(pieces, threads):
    """Inflate every piece's blocks into its `out`: `pieces` are (store, blocks, out), each
    batchable (the `out` of a column's pieces views of one array); `threads` decode in
    parallel chunks."""
    groups = {}
    for piece in pieces:
        store, blocks, out = piece
        store.check_open()
        root, _ = root_bytes(out)
        key = (blocks.compression, store.backend.native, root.__array_interface__["data"][0])
        groups.setdefault(key, []).append(piece)
    for (kind, lib, _), members in groups.items():
        _inflate_group(kind, lib, members, threads)
    for store, blocks, out in pieces:
        blocks.counted(len(blocks.lookup))
        try:
            blocks.codec.fix(out)
        except IdvFormatError:
            store.decode(blocks, 0, len(blocks.lookup), out=out)    # raises, locating it
            raise


def _inflate_group(kind, lib, members, threads):
    """The blocks of `members` (pieces of one compression kind and library, into one array),
    one call per chunk."""
    root, _ = root_bytes(members[0][2])
    start = root.__array_interface__["data"][0]
    sources, which, tables, dst, crcs = [], [], [], [], []
    for k, (store, blocks, out) in enumerate(members):
        table = blocks.lookup
        buf, offsets = store.block_bytes(table["offset"], table["disk"])
        base, at = root_bytes(out)
        if base.__array_interface__["data"][0] != start:
            raise ValueError("inflate_files: every piece's out must view one array")
        sources.append(buf)
        tables.append((offsets, table["disk"], table["raw"]))
        step = blocks.rows_per_block * blocks.codec.itemsize
        dst.append(at + np.arange(len(table), dtype=np.int64) * step)
        which.append(np.full(len(table), k, np.int32))
        expected = store.expected_crcs(blocks)
        crcs.append(np.full(len(table), _compression.NO_CRC, np.int64) if expected is None
                    else expected)
    offsets = np.concatenate([t[0] for t in tables]).astype(np.int64, copy=False)
    disk = np.concatenate([t[1] for t in tables]).astype(np.int32, copy=False)
    raw = np.concatenate([t[2] for t in tables]).astype(np.int32, copy=False)
    dst, which, crcs = np.concatenate(dst), np.concatenate(which), np.concatenate(crcs)

    def run(span):
        a, b = span
        return a, _compression.inflate_blocks_from(kind, sources, which[a:b], offsets[a:b],
                                                   disk[a:b], raw[a:b], root, dst[a:b], lib,
                                                   crcs[a:b])
    total = int(raw.sum(dtype=np.int64))
    spans = chunks(len(raw), min(threads * 4, total // SPAN_BYTES))
    if len(spans) > 1 and threads > 1:
        results = list(_threads.pool("read", threads).map(run, spans))
    else:
        results = [run(s) for s in spans]
    for a, (i, message) in results:
        if i >= 0:
            store, blocks, out = members[int(which[a + i])]
            store.decode(blocks, 0, len(blocks.lookup), out=out)      # raises, locating it
            raise IdvFormatError(message, path=store.path, column=blocks.name)
