"""Whole columns of many files inflated straight into one array, in one call: a dataset of a
thousand small files reads one column of each as one run of blocks, not a thousand decodes.

The pieces are fixed-width scalar columns (numbers, keys: idv._store.block_runs.fixed_width) of
files in memory, read whole, each into its rows of one array, or Text columns, each block into its
room of one buffer in Arrow's string layout (text_blocks). Their blocks, checked against their
CRC-32s, are inflated by one call of the C loop per compression kind
(idv._compression.inflate_blocks_across, the GIL released, in parallel chunks); then each piece is
fixed up (codec.fix, or converted to Arrow's layout) and counted. A piece whose block fails is
decoded again by its own file's store, whose error names the file, the column and the block. """
from __future__ import annotations

import numpy as np

from idv import _codecs, _compression, types as T
from idv._resources import work as _work
from idv._store.block_runs import chunks, fixed_width, text_rooms
from idv._store.blocks import SPAN_BYTES, BlockStore, ColumnBlocks
from idv.errors import IdvFormatError


def batchable(store: BlockStore, blocks: ColumnBlocks, out, first: int) -> bool:
    """Whether `blocks` (all of a column's) can be inflated by inflate_files into rows
    [first, first + blocks.num_rows) of `out`: a fixed-width scalar column of a known
    compression, of a file in memory (a remote file's blocks would all be fetched at once),
    through a native DEFLATE library, `out` a contiguous array of its codec's dtype."""
    return (_inflatable(store, blocks) and fixed_width(blocks.codec)
            and out.dtype == blocks.codec.dtype
            and out.ndim == 1 and out.flags.c_contiguous and out.flags.writeable
            and 0 <= first <= len(out) - blocks.num_rows)


def _inflatable(store, blocks):
    """Whether the C loop can inflate `blocks` of the file of `store` with others': a file in
    memory, a known compression, a native DEFLATE library."""
    return (store.in_memory and blocks.compression in _compression.NAMES
            and store.backend.native is not None)


def inflate_files(pieces, threads):
    """Inflate every piece's blocks into its rows: `pieces` are (store, blocks, out, first),
    each batchable; `threads` decode in parallel chunks."""
    groups = {}
    for piece in pieces:
        store, blocks, out, _ = piece
        store.check_open()
        groups.setdefault((blocks.compression, store.backend.native, id(out)), []).append(piece)
    for (kind, lib, _), members in groups.items():
        _inflate_group(kind, lib, members, threads)
    for store, blocks, out, first in pieces:
        n = len(blocks.lookup)
        blocks.counted(n)
        rows = out[first:first + blocks.num_rows]
        try:
            blocks.codec.fix(rows)
        except IdvFormatError:
            store.decode(blocks, 0, n, out=rows)    # raises, locating it
            raise


def _inflate_group(kind, lib, members, threads):
    """The blocks of `members` (pieces of one compression kind and library, into one array),
    one call per chunk."""
    out = members[0][2]
    counts = np.array([len(b.lookup) for _, b, _, _ in members], np.int64)
    which = np.repeat(np.arange(len(members), dtype=np.int32), counts)
    # block j of member m lies at row first[m] + j * rows_per_block[m] of `out`
    firsts = np.array([first for _, _, _, first in members], np.int64)
    steps = np.array([b.rows_per_block for _, b, _, _ in members], np.int64)
    within = np.arange(len(which), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts,
                                                               counts)
    dst = (firsts[which] + within * steps[which]) * out.itemsize
    failed = _inflate_at(kind, lib, [(st, b) for st, b, _, _ in members], which,
                         out.view(np.uint8), dst, threads)
    if failed is not None:
        m, message = failed
        store, blocks, out, first = members[m]
        store.decode(blocks, 0, len(blocks.lookup),
                     out=out[first:first + blocks.num_rows])     # raises, locating it
        raise IdvFormatError(message, path=store.path, column=blocks.name)


def _inflate_at(kind, lib, members, which, root, dst, threads):
    """Inflate the blocks of `members` ((store, blocks) of one compression kind and library;
    block k is of member which[k]) into `root` (a uint8 array) at byte offsets `dst`, one
    call per chunk, in parallel: None, or (member, message) of the first that failed."""
    sources, tables, places, crcs = [], [], [], []
    for store, blocks in members:
        table = blocks.lookup
        buf, at = store.block_bytes(table["offset"], table["disk"])    # views: in memory
        sources.append(buf)
        tables.append(table)
        places.append(at)
        expected = store.expected_crcs(blocks)
        crcs.append(np.full(len(table), _compression.NO_CRC, np.int64) if expected is None
                    else expected)
    # field by field: numpy joins structured arrays through Python code, per array
    disk, raw = (np.concatenate([t[name] for t in tables]) for name in ("disk", "raw"))
    offsets = np.concatenate(places).astype(np.int64, copy=False)
    crcs = np.concatenate(crcs)

    def run(span):
        a, b = span
        return a, _compression.inflate_blocks_across(kind, sources, which[a:b], offsets[a:b],
                                                     disk[a:b], raw[a:b], [root], None,
                                                     dst[a:b], lib, crcs[a:b])
    total = int(raw.sum(dtype=np.int64))
    spans = chunks(len(raw), min(threads * 4, total // SPAN_BYTES))
    if len(spans) > 1 and threads > 1:
        results = _work.map_all("read", threads, run, spans)
    else:
        results = [run(s) for s in spans]
    for a, (i, message) in results:
        if i >= 0:
            return int(which[a + i]), message
    return None


def text_batchable(store: BlockStore, col) -> bool:
    """Whether Text column `col` of a file whose blocks `store` holds can be inflated by
    text_blocks: a scalar Text column of rows, of a file in memory, of a known compression,
    through a native DEFLATE library."""
    return col.type is T.Text and col.num_rows > 0 and _inflatable(store, col.blocks)


def text_blocks(pieces, threads):
    """Per piece ((store, column), each text_batchable), the column's blocks in Arrow's string
    layout (TextSpans, as Column.read_text_blocks gives them): every block of every piece
    inflated into its room (block_runs.text_rooms) of one buffer per compression kind, in
    one call of the C loop per chunk, then converted in place."""
    out = [None] * len(pieces)
    groups = {}
    for k, (store, col) in enumerate(pieces):
        store.check_open()
        groups.setdefault((col.blocks.compression, store.backend.native), []).append(k)
    for (kind, lib), members in groups.items():
        tables = [pieces[k][1].blocks.lookup for k in members]
        rooms = np.concatenate([text_rooms(t) for t in tables])
        ends = np.cumsum(rooms)
        starts = ends - rooms
        for k, t, end in zip(members, tables, np.cumsum([len(t) for t in tables])):
            store, col = pieces[k]
            store.need(int(rooms[end - len(t):end].sum()),
                       lambda col=col: col.blocks.reading(0, col.num_blocks, " (text)"))
        root = _compression.empty(int(ends[-1]), np.uint8)
        which = np.repeat(np.arange(len(members), dtype=np.int32), [len(t) for t in tables])
        failed = _inflate_at(kind, lib, [(pieces[k][0], pieces[k][1].blocks) for k in members],
                             which, root, starts, threads)
        if failed is not None:
            _, col = pieces[members[failed[0]]]
            col.read_text_blocks(0, col.num_blocks)        # raises, locating it
            raise IdvFormatError(failed[1], path=pieces[members[failed[0]]][0].path,
                                 column=col.name)
        view, b = memoryview(root), 0
        for k, t in zip(members, tables):
            store, col = pieces[k]
            blocks, spans = col.blocks, []
            try:
                for j, raw in enumerate(t["raw"].tolist()):
                    lo = int(starts[b + j])
                    r0, r1 = blocks.rows(j, j + 1)
                    spans.append(_codecs.arrow_text_block(blocks.codec, view[lo:lo + raw],
                                                          r1 - r0))
            except IdvFormatError:
                col.read_text_blocks(0, col.num_blocks)    # raises, locating it
                raise
            blocks.counted(len(t))
            out[k] = spans
            b += len(t)
    return out
