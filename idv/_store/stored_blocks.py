"""Blocks handed out as the file stores them, neither inflated nor decoded: the values of
uncompressed blocks as views of a memory-mapped file (zero copy), and the stored bytes of any
blocks for a writer that copies them.

StoredBlocks is a part of idv._store.blocks.BlockStore (its source, its checks, ``_mappable``).
"""
from __future__ import annotations

import numpy as np

from idv import _codecs, _compression
from idv._store.block_checks import entry_point
from idv._store.block_runs import fixed_width
from idv.errors import IdvFormatError


class StoredBlocks:
    """The zero-copy and stored-bytes entry points of idv._store.blocks.BlockStore."""

    def mappable(self, blocks):
        """Whether the values of `blocks` (a ColumnBlocks) can be handed out as views of the
        file's memory map (mapped_blocks): a file opened from a path (mapped), blocks stored
        without compression, fixed-width items stored as they are in memory (no fix-up:
        numbers and keys), every block the size of its rows and aligned for its items."""
        found = self._mappable.get(blocks.index)
        if found is None:
            found = self._mappable[blocks.index] = self._is_mappable(blocks)
        return found

    def _is_mappable(self, blocks):
        codec, buf = blocks.codec, self._source.buffer
        if (blocks.compression != _compression.NONE or not fixed_width(codec)
                or type(codec).fix is not _codecs.Codec.fix or buf is None
                or not getattr(self._source, "shareable", False) or not blocks.num_rows):
            return False
        lookup, size = blocks.lookup, codec.itemsize
        rows = np.full(len(lookup), blocks.rows_per_block, np.int64)
        rows[-1] = blocks.num_rows - (len(lookup) - 1) * blocks.rows_per_block
        offsets, disk = lookup["offset"], lookup["disk"].astype(np.int64)
        base = np.frombuffer(buf, np.uint8).__array_interface__["data"][0]
        return bool(((disk == rows * size) & (lookup["raw"] == disk) & (offsets >= 0)
                     & (offsets <= len(buf) - disk) & ((base + offsets) % size == 0)).all())

    @entry_point
    def mapped_blocks(self, blocks, b0, b1):
        """Blocks [b0, b1) of a mappable column: per block a read-only array that is a view
        of the file's memory map (which stays open while any such array lives, the file
        closed or not). Each block is checked as mapped_spans checks it."""
        return block_views(blocks.codec, self.mapped_spans(blocks, b0, b1))

    @entry_point
    def mapped_spans(self, blocks, b0, b1):
        """(the file's memory map as a read-only memoryview, each block's offset in it, its
        bytes: int64 arrays) for blocks [b0, b1) of a mappable column, for views made elsewhere
        (Arrow buffers). Each block is checked against its CRC-32 first, and the file against
        truncation; nothing is allocated for the values."""
        return self.mapped_spans_of([(blocks, b0, b1)])[0]

    def mapped_spans_of(self, runs):
        """mapped_spans of the blocks of several mappable columns ([(blocks, b0, b1)]), in
        that order, their CRC-32s found in one call over the read threads: a column of a few
        megabytes alone is checked in the calling thread."""
        self.check_open()
        buf = self._source.buffer
        self._source.check_intact()       # a memory map past a file's end: SIGBUS
        spans, checked = [], []
        for blocks, b0, b1 in runs:
            table = blocks.lookup[b0:b1]
            offsets, disk = table["offset"].astype(np.int64), table["disk"].astype(np.int64)
            spans.append((buf, offsets, disk))
            crcs = self.expected_crcs(blocks)
            if crcs is not None:
                checked.append((blocks, b0, offsets, disk, crcs[b0:b1]))
        if checked:
            got = self._crcs_of(buf, np.concatenate([c[2] for c in checked]),
                                np.concatenate([c[3] for c in checked]))
            at = 0
            for blocks, b0, offsets, disk, crcs in checked:
                try:
                    self._verify(got[at:at + len(offsets)], offsets, disk, crcs, b0)
                except IdvFormatError as e:
                    raise e.locate(column=blocks.name, column_index=blocks.index,
                                   path=self.path)
                at += len(offsets)
        for blocks, b0, b1 in runs:
            blocks.counted(b1 - b0)
        return spans

    @entry_point
    def stored(self, blocks, b0, b1):
        """Blocks [b0, b1) of a column as the file stores them, neither inflated nor decoded
        (views of a file in memory, else read in one batch), each checked against its CRC-32
        where the file has checksums: for a writer that copies blocks it need not encode
        again (idv.Writer.copy_blocks)."""
        table = blocks.lookup[b0:b1]
        at, disk = table["offset"].astype(np.int64), table["disk"].astype(np.int64)
        buf, offsets = self.block_bytes(at, disk)
        offsets = np.asarray(offsets, np.int64)
        crcs = self.expected_crcs(blocks)
        if crcs is not None:
            self._check_crcs(buf, offsets, disk, crcs[b0:b1], b0, at)
        view = memoryview(buf).cast("B")
        return [view[o:o + n] for o, n in zip(offsets.tolist(), disk.tolist())]


def block_views(codec, spans):
    """Each block of mapped_spans' `spans` (buffer, offsets, bytes) as a read-only array of
    `codec`'s items viewing the buffer."""
    buf, offsets, nbytes = spans
    dtype, size = codec.dtype, codec.itemsize
    return [np.frombuffer(buf, dtype, n // size, o)
            for o, n in zip(offsets.tolist(), nbytes.tolist())]
