"""Checksums that ML.NET ignores: a CRC-32 (zlib's) of every part of a file that idv writes.

The .idv format has none, so damage inside a DEFLATE block often decodes to other values
without any error. Files that idv writes carry a table of (offset, length, CRC-32, kind) for
every block, lookup table, metadata block and table and the table of contents, placed just
before the table of contents where nothing in the file points to it. The header's bytes 52-83,
which ML.NET's saver leaves zero and its loader never reads, point to it:

    52  8 bytes  b"idvCRC32"
    60  int64    the table's offset        68  int64   its length
    76  uint32   the table's own CRC-32    80  uint32  the CRC-32 of header bytes 0-51

The reader checks the header and the tables when the file opens and each block when it is
read, inside the decompression loop (idv._compression, with libdeflate's or ISA-L's CRC-32
kernel where installed: a few percent of a read, docs/benchmarks.md);
``idv.open(..., checksums=False)`` skips them. ``idv verify`` always checks them and reports
a mismatch with its column and block. ML.NET loads such files and reads the same values
(tests/test_checksums.py asks the real ML.NET).
"""
from __future__ import annotations

import struct

import numpy as np

from idv import _compression, _parts
from idv.errors import IdvFormatError

MAGIC = _parts.SUMS_MAGIC
POINTER_AT = _parts.SUMS_AT
_POINTER = struct.Struct("<8sqqII")
POINTER_SIZE = _POINTER.size
ENTRY = _parts.SUM_ENTRY
BLOCK, TABLE = 0, _parts.TABLE_KIND     # kinds: checked when read / checked when the file opens
_FEW = 256


def crc(data) -> int:
    """zlib's CRC-32 of a bytes-like object (by the fastest kernel installed, the GIL
    released: idv._compression.crc32_of)."""
    return _compression.crc32_of(data)


class Recorder:
    """What the writer wrote, part by part."""

    def __init__(self):
        self._entries = []

    def add(self, offset, data, kind=TABLE, checksum=None):
        """Record `data`, written at `offset`; `checksum`: its crc(), if already computed (the
        writer computes blocks' in its compression threads)."""
        n = memoryview(data).nbytes
        self.add_part(offset, n, crc(data) if checksum is None and n else checksum, kind)

    def add_part(self, offset, n, checksum, kind=TABLE):
        """Record `n` bytes written at `offset` whose crc() is `checksum`."""
        if n:                  # an empty part (a lookup table of no blocks) has nothing to check
            self._entries.append((offset, n, checksum, kind))

    def table_size(self, extra=0) -> int:
        """The bytes of the table with `extra` more entries."""
        return (len(self._entries) + extra) * ENTRY.itemsize

    def table(self) -> bytes:
        """The table of every part added, by offset."""
        return np.array(sorted(self._entries), ENTRY).tobytes()

    @staticmethod
    def pointer(header52, table_offset, table) -> bytes:
        """Header bytes 52-83 for `table` written at `table_offset`."""
        return _POINTER.pack(MAGIC, table_offset, len(table), crc(table), crc(header52))


class Checksums:
    """A file's recorded checksums, checked part by part."""

    def __init__(self, entries, table_offset, table_length):
        self.entries = entries
        self.table_offset = table_offset
        self.table_length = table_length
        # a small file's few entries: looked up in a dict, below numpy's fixed cost (of two
        # at one offset, the later one counts)
        self._few = dict(zip(entries["offset"].tolist(), range(len(entries)))) \
            if len(entries) <= _FEW else None
        if self._few is None:       # else entries by offset (stable: the same rule)
            self._order = np.argsort(entries["offset"], kind="stable")
            self._offsets = entries["offset"][self._order]

    def _find(self, offsets):
        """The entry index recorded for each offset, -1 where none is."""
        if self._few is not None:
            offsets = np.asarray(offsets, np.int64)
            return np.fromiter((self._few.get(o, -1) for o in offsets.tolist()), np.int64,
                               len(offsets))
        offsets = np.asarray(offsets, np.int64)
        if not len(self._offsets):
            return np.full(offsets.shape, -1, np.int64)
        pos = np.maximum(np.searchsorted(self._offsets, offsets, side="right") - 1, 0)
        return np.where(self._offsets[pos] == offsets, self._order[pos], -1)

    def expected(self, offsets, lengths):
        """Per block (its offset and stored length): the CRC-32 recorded for it, NO_CRC where
        none is, BAD_CRC where one is recorded over another length (int64, for the checking
        decompression loops of idv._compression)."""
        i = self._find(offsets)
        found = i >= 0
        e = self.entries[i[found]]
        out = np.full(len(i), _compression.NO_CRC, np.int64)
        out[found] = np.where(e["length"] == np.asarray(lengths, np.int64)[found], e["crc"],
                              _compression.BAD_CRC)
        return out

    def uncovered(self, starts, stops):
        """Positions of the parts [starts[k], stops[k]) (not empty) that have no entry at
        their offset: idv records every part it writes, so a table that misses one was cut (a
        block rewritten and its entry dropped would read unchecked). An entry over another
        length is a mismatch when the part is checked."""
        starts, stops = np.asarray(starts, np.int64), np.asarray(stops, np.int64)
        return np.flatnonzero((stops > starts) & (self._find(starts) < 0))

    @property
    def tables(self):
        """The entries checked when the file opens (everything but data blocks)."""
        return self.entries[self.entries["kind"] == TABLE]

    def check(self, offset, data, what):
        """IdvFormatError when the bytes at `offset` are not the ones recorded for it."""
        i = int(self._find([offset])[0])
        if i < 0:
            return
        e = self.entries[i]
        n = memoryview(data).nbytes
        got = crc(data)
        if n != int(e["length"]) or got != int(e["crc"]):
            raise IdvFormatError(
                f"checksum mismatch in {what}: its {n} bytes do not match the CRC-32 idv "
                f"recorded when it wrote the file ({got:#010x}, recorded {int(e['crc']):#010x} "
                f"over {int(e['length'])} bytes): the file changed since", offset=int(offset))

    def check_all(self, offsets, parts, what):
        """check() of many parts at once (one lookup of their entries): `parts` the bytes at
        `offsets`, `what(k)` what part k is, for the error of the first that does not match."""
        lengths = np.fromiter((memoryview(p).nbytes for p in parts), np.int64, len(parts))
        got = np.fromiter((crc(p) for p in parts), np.int64, len(parts))
        self._compare(offsets, lengths, got, lambda k: parts[k], what)

    def check_within(self, buffer, offsets, lengths, what):
        """check_all() of the parts at `offsets` of `lengths` bytes in `buffer` (the whole
        stream in memory): their CRC-32s computed in one call."""
        offsets = np.ascontiguousarray(offsets, np.int64)
        lengths = np.ascontiguousarray(lengths, np.int64)
        got = _compression.crc32_ranges(buffer, offsets, lengths)
        self._compare(offsets, lengths, got,
                      lambda k: buffer[int(offsets[k]):int(offsets[k] + lengths[k])], what)

    def _compare(self, offsets, lengths, got, part, what):
        """check() of the first part whose length or CRC-32 (`got`) is not the one recorded at
        its offset; `part(k)` gives part k's bytes."""
        offsets = np.asarray(offsets, np.int64)
        i = self._find(offsets)
        e = self.entries[np.maximum(i, 0)] if len(self.entries) else None
        bad = np.flatnonzero((i >= 0) & ((lengths != e["length"]) | (got != e["crc"]))) \
            if e is not None else ()
        if len(bad):
            k = int(bad[0])
            self.check(int(offsets[k]), part(k), what(k))


def read(head, view, stream_size, toc_offset):
    """The file's Checksums (None when it carries none). `head` is the 256-byte header,
    `view(offset, size)` reads the file; the table must lie between the header and the table
    of contents."""
    if head[POINTER_AT:POINTER_AT + 8] != MAGIC:
        return None
    _, off, length, table_crc, head_crc = _POINTER.unpack_from(head, POINTER_AT)
    if crc(head[:POINTER_AT]) != head_crc:
        raise IdvFormatError("checksum mismatch in the header (bytes 0-51): it changed since "
                             "idv wrote the file", offset=0)
    if length < 0 or length % ENTRY.itemsize or off < 256 or off + length > toc_offset \
            or off + length > stream_size:
        raise IdvFormatError(f"the checksum table at byte {off} ({length} bytes) is not "
                             f"within the file before its table of contents", offset=60)
    table = view(off, length)
    if crc(table) != table_crc:
        raise IdvFormatError("checksum mismatch in the checksum table itself: the file changed "
                             "since idv wrote it", offset=off)
    entries = np.frombuffer(bytes(table), ENTRY)
    bad = (entries["offset"] < 0) | (entries["length"] < 0) | \
          (entries["offset"] + entries["length"] > stream_size)
    if bad.any():
        raise IdvFormatError("the checksum table names bytes outside the file", offset=off)
    return Checksums(entries, off, length)
