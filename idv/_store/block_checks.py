"""The checks of a file's stored blocks: each block against its CRC-32 (the checksums' table,
or the statistics' own), and the errors of the block store's entry points located in the
column and the file.

BlockChecks is a part of idv._store.blocks.BlockStore, which holds the state it reads: the source,
``sums`` and ``checking``, the CRC-32s found at open (``_opened_crcs``) or per column
(``_crcs``), the read threads.
"""
from __future__ import annotations

import functools

import numpy as np

from idv import _compression
from idv._resources import work as _work
from idv._store.block_runs import chunks
from idv.errors import IdvFormatError

_CRC_SPAN_BYTES = 4 << 20    # CRC-32 alone runs at ~15 GB/s: a span must outweigh a hand-off


def entry_point(method):
    """A decoding entry point of BlockStore: it checks that the file is open, and its
    IdvFormatErrors name the column and the file besides the block."""
    @functools.wraps(method)
    def run(self, blocks, *args, **kwargs):
        self.check_open()
        try:
            return method(self, blocks, *args, **kwargs)
        except IdvFormatError as e:
            raise e.locate(column=blocks.name, column_index=blocks.index, path=self.path)
    return run


class BlockChecks:
    """The CRC-32 checks of idv._store.blocks.BlockStore."""

    def expected_crcs(self, blocks):
        """The CRC-32 each block of `blocks` (a ColumnBlocks) must have
        (idv._storage.checksums.Checksums.expected), found once per column; None without
        checksums."""
        if self.sums is None:
            return None
        if self._opened_crcs is not None:
            return self._opened_crcs[blocks.index]
        crcs = self._crcs.get(blocks.index)
        if crcs is None:
            lookup = blocks.lookup
            crcs = self._crcs[blocks.index] = self.sums.expected(lookup["offset"],
                                                                 lookup["disk"])
        return crcs

    def check_block(self, offset, length, block):
        """IdvFormatError naming `block` when its stored bytes fail their recorded CRC-32."""
        if offset < 0 or length < 0 or offset > self._source.size - length:
            return
        try:
            self.sums.check(offset, self._source.view(offset, length), "the block")
        except IdvFormatError as e:
            raise e.locate(block=block) from None

    def check_unread(self, blocks, which, recorded=None):
        """IdvFormatError naming the first of blocks `which` (block numbers of a
        ColumnBlocks) whose stored bytes fail their recorded CRC-32 (the checksums', else
        `recorded`: the statistics' own, uint32 per block): the blocks a filter's statistics
        skip, so that bounds are never trusted over a block that changed since they were
        computed. Only where the bytes are at hand without a fetch (a file in memory, a
        memory map), and not when the file was opened with checksums=False."""
        which = np.asarray(which, np.int64)
        if not self.checking or not self.in_memory or not len(which):
            return
        if self.sums is not None:
            crcs = self.expected_crcs(blocks)[which]
        elif recorded is not None:
            crcs = np.asarray(recorded, np.int64)[which]
        else:
            return
        lookup = blocks.lookup[which]
        offsets = np.ascontiguousarray(lookup["offset"], np.int64)
        disk = np.ascontiguousarray(lookup["disk"], np.int64)
        buf, at = self.block_bytes(offsets, disk)
        got = self._crcs_of(buf, at, disk)
        bad = np.flatnonzero((crcs != _compression.NO_CRC) & ((crcs < 0) | (got != crcs)))
        if len(bad):
            i = int(bad[0])
            if self.sums is not None:
                self.check_block(int(offsets[i]), int(disk[i]), int(which[i]))
            raise IdvFormatError(
                f"checksum mismatch in the block: its {int(disk[i])} bytes are not those its "
                f"statistics were computed from (CRC-32 {int(got[i]):#010x}, recorded "
                f"{int(crcs[i]):#010x}): the file changed since", block=int(which[i]),
                offset=int(offsets[i]))

    def _crcs_of(self, buf, offsets, disk):
        """The CRC-32 of each part [offsets[k], +disk[k]) of `buf`, in one call per span of
        parts without the GIL, in the read threads when there is much to check. The parts go
        in the order of their offsets, so that a thread's span is one stretch of the buffer
        (of a memory map: its pages faulted in order, not a column's blocks across the file)."""
        order = np.argsort(offsets, kind="stable")
        offsets, disk = offsets[order], disk[order]

        def run(span):
            return _compression.crc32_ranges(buf, offsets[span[0]:span[1]],
                                             disk[span[0]:span[1]])
        # a span a thread from twice a span's bytes (a column of 2M 32-bit numbers in two)
        parts = min(self.threads * 4, -(-int(disk.sum()) // _CRC_SPAN_BYTES))
        spans = chunks(len(offsets), parts)
        if len(spans) > 1 and self.threads > 1:
            got = _work.map_all("read", self.threads, run, spans)
        else:
            got = [run(s) for s in spans]
        out = np.zeros(len(order), np.int64)
        if got:
            out[order] = np.concatenate(got)
        return out

    def _check_crcs(self, buf, offsets, disk, crcs, b0, at=None):
        """IdvFormatError naming the first block (numbered from b0) whose bytes fail their
        CRC-32 (`crcs`: idv._storage.checksums.Checksums.expected's), computed by _crcs_of. `at`:
        the blocks' offsets in the file, where `offsets` are those in a buffer of their bytes."""
        self._verify(self._crcs_of(buf, offsets, disk), offsets, disk, crcs, b0, at)

    def _verify(self, got, offsets, disk, crcs, b0, at=None):
        """_check_crcs of the CRC-32s `got` of the blocks found already."""
        bad = np.flatnonzero((crcs != _compression.NO_CRC) & ((crcs < 0) | (got != crcs)))
        if len(bad):
            i = int(bad[0])
            at = offsets if at is None else at
            self.check_block(int(at[i]), int(disk[i]), b0 + i)
            raise IdvFormatError("checksum mismatch", block=b0 + i, offset=int(at[i]))
