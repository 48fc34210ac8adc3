"""Statistics per block and column (a zone map), kept where ML.NET never looks.

Engines skip data by statistics: Parquet's row-group statistics, Lance's and Vortex's zone
maps. Files that idv writes carry, per column and block: the count of values present, the
count missing (NaN for Single and Double, 0 for keys; the other types have none), the
smallest and largest present value, and for Text the shortest bounds of at most 64 bytes and
whether every byte is ASCII. A filter then leaves out the blocks whose bounds exclude it
(idv._scan.filters), without fetching them.

Values are compared as numbers of one of three domains: int64 (signed integers, Boolean,
DateTime and TimeSpan as ticks, DateTimeOffset as its UTC ticks), uint64 (unsigned integers
and keys' stored values) and float64 (Single, Double); Text by its UTF-8 bytes (the order of
code points). Vectors get bounds over all their items, implicit zeros of sparse rows
included. RowId and vectors of Text have none.

The section lies after the data, before the table of contents (ML.NET's loader reads neither
it nor the header bytes that point to it). Header bytes 84-115, beside the checksums'
pointer (idv._storage.checksums, bytes 52-83), which ML.NET's saver leaves zero:

    84  8 bytes  b"idvSTATS"
    92  int64    the section's offset        100  int64   its length
   108  uint32   the section's CRC-32         112  uint32  the CRC-32 of header bytes 0-51

The section (little-endian, written once: docs/filters.md, "The section's format") holds a
head (version 2, 1 read too; columns; blocks per column; the blocks' fingerprint), then per
column its index and domain, present and missing counts, each block's CRC-32 (version 2), and
the bounds: min and max in the domain's type, or Text's flags, lengths and bytes; after the
columns, time columns' counts of values that are no whole microsecond
(idv._storage.sub_microseconds), which a reader that does not know them never reaches.

The fingerprint ties the statistics to the blocks they describe: a file whose blocks moved
or changed length since is refused (IdvFormatError). The blocks' CRC-32s tie them to their
bytes: they must be those of idv's checksums where the file has them (compared when the
statistics are first used, without reading a block), and a block that a filter skips is
checked against them where its bytes are at hand (idv._scan.filters).
"""
from __future__ import annotations

import array
import dataclasses
import struct
from typing import NamedTuple

import numpy as np

from idv import types as T
from idv._storage import sub_microseconds
from idv._storage.checksums import crc
from idv._values.ticks import TIME_ITEMS
from idv.errors import IdvFormatError

MAGIC = b"idvSTATS"
POINTER_AT = 84
_POINTER = struct.Struct("<8sqqII")
POINTER_SIZE = _POINTER.size
_HEAD = struct.Struct("<IIqII")
_COLUMN = struct.Struct("<IB3x")
VERSION = 2
VERSIONS = (1, 2)                # read
PREFIX = 64                      # bytes of a Text bound at most
INT, UINT, FLOAT, TEXT = 1, 2, 3, 4
DOMAIN_NAMES = {INT: "int64", UINT: "uint64", FLOAT: "float64", TEXT: "text"}
DTYPES = {INT: np.dtype("<i8"), UINT: np.dtype("<u8"), FLOAT: np.dtype("<f8")}
ASCII, LOW_EXACT, HIGH_EXACT, NO_HIGH = 1, 2, 4, 8

_UNSIGNED = {T.Byte, T.UInt16, T.UInt32, T.UInt64}
_FLOATS = {T.Single, T.Double}


def domain_of(type_) -> int | None:
    """The domain a column's values compare in (None: a type without statistics)."""
    item = T.item_type(type_)
    if item is T.RowId or (item is T.Text and isinstance(type_, T.Vector)):
        return None
    if item is T.Text:
        return TEXT
    if item in _FLOATS:
        return FLOAT
    if isinstance(item, T.Key) or item in _UNSIGNED:
        return UINT
    return INT


class Block(NamedTuple):
    """One block's statistics: numbers (low, high in the domain's type) or text (bytes)."""
    present: int
    missing: int
    low: object = None
    high: object = None
    flags: int = 0
    # a time column's: (how many values are no whole microsecond, the first of them)
    sub_us: tuple | None = None


# ---------------------------------------------------------------------------------------------
# a column's blocks, the section
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass(eq=False)
class ColumnStats:
    """One column's statistics, an array per kind over its blocks.

    ``present``, ``missing``: int64 counts; numbers: ``low``, ``high`` (the domain's dtype;
    meaningless where ``present`` is 0); text: ``low``, ``high`` (lists of bytes) and
    ``flags`` (uint8: ASCII, LOW_EXACT, HIGH_EXACT, NO_HIGH)."""

    index: int
    domain: str
    present: np.ndarray
    missing: np.ndarray
    low: object
    high: object
    flags: np.ndarray | None = None
    crcs: np.ndarray | None = None      # uint32 per block: its stored bytes' CRC-32 (None: v1)
    # a time column's, per block (None: not kept): int64 counts of values that are no whole
    # microsecond, and the first of them (idv._storage.sub_microseconds)
    sub_us: np.ndarray | None = None
    first_sub_us: np.ndarray | None = None

    @property
    def num_blocks(self):
        return len(self.present)

    def block(self, b) -> Block:
        """Block `b`'s statistics (numbers as Python numbers)."""
        if self.domain == TEXT:
            return Block(int(self.present[b]), int(self.missing[b]), self.low[b], self.high[b],
                         int(self.flags[b]))
        sub_us = None if self.sub_us is None else (int(self.sub_us[b]),
                                                   int(self.first_sub_us[b]))
        return Block(int(self.present[b]), int(self.missing[b]), self.low[b].item(),
                     self.high[b].item(), sub_us=sub_us)

    def pack(self) -> bytes:
        crcs = np.zeros(len(self.present), "<u4") if self.crcs is None else self.crcs
        parts = [_COLUMN.pack(self.index, self.domain), self.present.astype("<i8").tobytes(),
                 self.missing.astype("<i8").tobytes(), crcs.astype("<u4").tobytes(),
                 bytes(4 * (len(crcs) % 2))]
        if self.domain != TEXT:
            dtype = DTYPES[self.domain]
            parts += [self.low.astype(dtype).tobytes(), self.high.astype(dtype).tobytes()]
        else:
            parts += [self.flags.tobytes(), bytes(map(len, self.low)),
                      bytes(map(len, self.high)), b"".join(self.low), b"".join(self.high)]
        out = b"".join(parts)
        return out + bytes(-len(out) % 8)


class Builder:
    """One column's Blocks gathered as they come, 8 bytes per figure (a writer keeps them
    until the file is closed: compact, whatever the number of blocks)."""

    def __init__(self, index, domain):
        self.index = index
        self.domain = domain
        code = {INT: "q", UINT: "Q", FLOAT: "d"}.get(domain, "q")
        self._present, self._missing = array.array("q"), array.array("q")
        self._low, self._high = (([], []) if domain == TEXT else
                                 (array.array(code), array.array(code)))
        self._flags = array.array("B")
        self._crcs = array.array("I")
        self._sub_us = array.array("q")     # count, first of each block, while all have them

    def add(self, block: Block, checksum: int):
        """Add the next block's statistics; `checksum`: the CRC-32 of its stored bytes."""
        self._crcs.append(checksum)
        self._present.append(block.present)
        self._missing.append(block.missing)
        self._low.append(0 if block.low is None else block.low)
        self._high.append(0 if block.high is None else block.high)
        self._flags.append(block.flags)
        if block.sub_us is None:
            self._sub_us = None
        elif self._sub_us is not None:
            self._sub_us.extend(block.sub_us)

    def build(self) -> ColumnStats:
        present = np.array(self._present, np.int64)
        missing = np.array(self._missing, np.int64)
        crcs = np.array(self._crcs, np.uint32)
        if self.domain == TEXT:
            return ColumnStats(self.index, self.domain, present, missing, self._low,
                               self._high, np.array(self._flags, np.uint8), crcs)
        dtype = DTYPES[self.domain]
        sub = np.array(self._sub_us, np.int64).reshape(-1, 2) if self._sub_us else None
        return ColumnStats(self.index, self.domain, present, missing,
                           np.array(self._low, dtype), np.array(self._high, dtype),
                           crcs=crcs, sub_us=None if sub is None else sub[:, 0].copy(),
                           first_sub_us=None if sub is None else sub[:, 1].copy())


def fingerprint(offsets, lengths) -> int:
    """The CRC-32 of every column's block offsets then lengths (int64 each, columns in
    order): the blocks the statistics were computed for."""
    return crc(np.asarray(offsets, "<i8").tobytes() + np.asarray(lengths, "<i8").tobytes())


def pack(columns, num_blocks, blocks_fingerprint) -> bytes:
    """The section of `columns` (ColumnStats, each over `num_blocks` blocks)."""
    return _HEAD.pack(VERSION, len(columns), num_blocks, blocks_fingerprint, 0) + \
        b"".join(c.pack() for c in columns) + sub_microseconds.pack(columns)


def pointer(header52, offset, section) -> bytes:
    """Header bytes 84-115 for `section` written at `offset`."""
    return _POINTER.pack(MAGIC, offset, len(section), crc(section), crc(header52))


@dataclasses.dataclass(eq=False)
class Statistics:
    """A file's statistics: ``columns`` (column index -> ColumnStats), ``num_blocks``,
    ``fingerprint``, and where the section lies (``offset``, ``length``)."""

    columns: dict
    num_blocks: int
    fingerprint: int
    offset: int | None
    length: int | None

    def check_columns(self, columns, num_rows):
        """IdvFormatError when the statistics do not describe the file's `columns` (its
        Column objects, `num_rows` rows): check_column of each column's."""
        for index, cs in self.columns.items():
            check_column(cs, columns[index] if 0 <= index < len(columns) else None, num_rows,
                         self.num_blocks, self.offset)

    def check_checksums(self, columns, expected):
        """IdvFormatError when a block's CRC-32 in the statistics is not the one idv's
        checksums record for it: check_crcs of each column's (`expected(column)`:
        idv._store.blocks.BlockStore.expected_crcs of a Column's blocks)."""
        for index, cs in self.columns.items():
            if cs.crcs is not None:
                check_crcs(cs, columns[index], expected(columns[index]), self.offset)

    def check(self, got, path=None):
        """IdvFormatError when the blocks' fingerprint `got` is not the one recorded."""
        check_fingerprint(self.fingerprint, got, self.offset, path)


def check_column(cs, col, num_rows, num_blocks, offset):
    """IdvFormatError when one column's statistics `cs` (of a section of `num_blocks` blocks
    a column, at `offset`) do not describe its column `col` (a Column of a file of
    `num_rows` rows; None: the file has no such column): another number of blocks, another
    domain, counts that are not the block's rows."""
    def bad(why):
        return IdvFormatError(f"the block statistics are malformed: {why}", offset=offset)
    if col is None:
        raise bad(f"column {cs.index}, which the file does not have")
    nb = col.num_blocks
    if num_blocks != nb:
        raise bad(f"{num_blocks} blocks per column, column {col.name!r} has {nb}")
    if cs.domain != domain_of(col.type):
        raise bad(f"column {col.name!r} ({col.type}) has statistics of domain "
                  f"{DOMAIN_NAMES.get(cs.domain, cs.domain)}")
    if cs.sub_us is not None and T.item_type(col.type) not in TIME_ITEMS:
        raise bad(f"column {col.name!r} ({col.type}) has counts of 100-ns ticks")
    if isinstance(col.type, T.Vector) or not nb:
        return
    rpb = col.rows_per_block
    rows = np.minimum(rpb, num_rows - np.arange(nb, dtype=np.int64) * rpb)
    off = np.flatnonzero(cs.present + cs.missing != rows)
    if len(off):
        b = int(off[0])
        raise bad(f"column {col.name!r}, block {b}: {int(cs.present[b])} present "
                  f"and {int(cs.missing[b])} missing values in {int(rows[b])} rows")


def check_crcs(cs, col, want, offset):
    """IdvFormatError when a block's CRC-32 in column `col`'s statistics `cs` is not the one
    idv's checksums record for it (`want`, -1 where unknown): the block was rewritten after
    the statistics were computed."""
    off = np.flatnonzero((want >= 0) & (want != cs.crcs.astype(np.int64)))
    if len(off):
        b = int(off[0])
        raise IdvFormatError(
            f"the block statistics of column {col.name!r} block {b} were computed from other "
            f"bytes than the block holds (CRC-32 {int(cs.crcs[b]):#010x}, the checksums "
            f"record {int(want[b]):#010x}): the block changed since; add the statistics "
            f"again (idv stats --add)", offset=offset, block=b)


def check_fingerprint(recorded, got, offset, path=None):
    """IdvFormatError when the blocks' fingerprint `got` is not the one `recorded`."""
    if got != recorded:
        raise IdvFormatError(
            f"the block statistics do not match the file's blocks (fingerprint "
            f"{got:#010x}, recorded {recorded:#010x}): its blocks changed since "
            f"the statistics were computed; add them again (idv stats --add)",
            offset=offset, path=path)


def section_of(head):
    """(offset, length) of the statistics section the 256-byte header `head` points to, or
    None: one of the file's parts, which the layout's checks cover like the others."""
    head = bytes(head[:POINTER_AT + _POINTER.size])
    if head[POINTER_AT:POINTER_AT + 8] != MAGIC:
        return None
    _, off, length, _, _ = _POINTER.unpack_from(head, POINTER_AT)
    return off, length


def check_header(head):
    """IdvFormatError when the 256-byte header `head` points to block statistics that
    recorded other header bytes 0-51 (its row count, its table of contents' place): checked
    at every open, for a file without checksums too, where a smaller row count would read
    fewer rows without a word."""
    head = bytes(head[:POINTER_AT + _POINTER.size])
    if head[POINTER_AT:POINTER_AT + 8] != MAGIC:
        return
    if crc(head[:52]) != _POINTER.unpack_from(head, POINTER_AT)[4]:
        raise IdvFormatError("checksum mismatch in the header (bytes 0-51) recorded with the "
                             "block statistics: the file changed since they were added",
                             offset=0)


def read_section(head, view, toc_offset) -> Section | None:
    """The statistics section a file carries (None without), its CRC-32 and the form of its
    columns checked, each column's statistics parsed when first asked for (Section.whole:
    all of them). `head`: the file's 256-byte header; `view(offset, size)` reads the file.
    The section must lie between the header and the table of contents; the header bytes it
    recorded were checked when the file was opened (check_header)."""
    head = bytes(head)
    if head[POINTER_AT:POINTER_AT + 8] != MAGIC:
        return None
    _, off, length, section_crc, _ = _POINTER.unpack_from(head, POINTER_AT)
    if length < _HEAD.size or off < 256 or off + length > toc_offset:
        raise IdvFormatError(f"the block statistics at byte {off} ({length} bytes) are not "
                             f"within the file before its table of contents", offset=92)
    data = bytes(view(off, length))
    if crc(data) != section_crc:
        raise IdvFormatError("checksum mismatch in the block statistics: the file changed "
                             "since they were written", offset=off)
    return _parsed(off, Section, data, off)


def _parsed(off, parse, *args):
    """parse(*args), what it finds malformed an IdvFormatError at the section's offset."""
    try:
        return parse(*args)
    except (ValueError, IndexError, struct.error) as e:
        raise IdvFormatError(f"the block statistics are malformed ({e})", offset=off) from None


class Section:
    """A statistics section: the head (``num_blocks``, ``fingerprint``, ``offset``,
    ``length``) and where each column's statistics lie (by arithmetic where every column's
    are numbers, else by one walk over their sizes); a column's parsed (and its bounds
    checked) when first asked for (``column``): a filter on two columns of a file of
    thousands parses those two. ValueError (IdvFormatError from
    ``column``) for what no writer makes."""

    def __init__(self, data, off):
        version, ncols, nb, fp, _ = _HEAD.unpack_from(data, 0)
        if version not in VERSIONS:
            raise ValueError(f"version {version}, this idv reads versions "
                             f"{', '.join(map(str, VERSIONS))}")
        if nb < 0 or nb * 16 > len(data):
            raise ValueError(f"{nb} blocks in {len(data)} bytes")
        self.version, self.num_blocks, self.fingerprint = version, nb, fp
        self.offset, self.length = off, len(data)
        self._data = data
        self._parsed = {}
        counts = 16 * nb + (4 * nb + 4 * (nb % 2) if version >= 2 else 0)
        # column index -> (domain, where its counts begin); where the columns end
        found = _numbers_only(data, ncols, _COLUMN.size + counts + 16 * nb)
        self._where, end = found if found is not None else _walk(data, ncols, nb, counts)
        self._sub_us = sub_microseconds.parse(data, end, nb)
        if any(self._where.get(i, (None,))[0] != INT for i in self._sub_us):
            raise ValueError("sub-microsecond counts of a column without int64 statistics")

    def column(self, index) -> ColumnStats | None:
        """Column `index`'s statistics (None: it has none), parsed and bounds-checked once;
        IdvFormatError for statistics no block could have."""
        found = self._parsed.get(index)
        if found is None and index in self._where:
            found = self._parsed[index] = _parsed(self.offset, self._column, index)
        return found

    def whole(self) -> Statistics:
        """Every column's statistics (Statistics)."""
        return Statistics({i: self.column(i) for i in self._where}, self.num_blocks,
                          self.fingerprint, self.offset, self.length)

    def _column(self, index):
        domain, at = self._where[index]
        data, nb = self._data, self.num_blocks

        def take(n, dtype="u1"):
            nonlocal at
            size = n * np.dtype(dtype).itemsize
            if at + size > len(data):
                raise ValueError("truncated")
            out = np.frombuffer(data, dtype, n, at)
            at += size
            return out
        present, missing = take(nb, "<i8"), take(nb, "<i8")
        crcs = None
        if self.version >= 2:
            crcs = take(nb, "<u4")
            take(4 * (nb % 2))
        if domain in DTYPES:
            sub, first = self._sub_us.get(index, (None, None))
            cs = ColumnStats(index, domain, present, missing, take(nb, DTYPES[domain]),
                             take(nb, DTYPES[domain]), crcs=crcs, sub_us=sub,
                             first_sub_us=first)
        else:
            flags, lows, highs = take(nb), take(nb), take(nb)
            low_bytes = take(int(lows.sum())).tobytes()
            high_bytes = take(int(highs.sum())).tobytes()
            cs = ColumnStats(index, domain, present, missing, _split(low_bytes, lows),
                             _split(high_bytes, highs), flags, crcs)
        _check_bounds(cs)
        sub_microseconds.check(cs)
        return cs


def _numbers_only(data, ncols, size):
    """Where each column's statistics begin ({index: (domain, offset of its counts)}) in a
    section of `ncols` columns of numbers alone, `size` bytes each (8-aligned: no padding),
    found without a walk, and where they end; None where the section holds anything else
    (_walk then)."""
    end = _HEAD.size + ncols * size
    if end > len(data):
        return None
    heads = np.frombuffer(data, np.uint8, end - _HEAD.size, _HEAD.size).reshape(ncols, size)
    index = np.ascontiguousarray(heads[:, :4]).view("<u4").ravel()
    domain = heads[:, 4]
    if not np.isin(domain, list(DTYPES)).all() or len(np.unique(index)) != ncols:
        return None
    at = _HEAD.size + _COLUMN.size + size * np.arange(ncols)
    return dict(zip(index.tolist(), zip(domain.tolist(), at.tolist()))), end


def _walk(data, ncols, nb, counts):
    """_numbers_only's answer for any section, column after column (Text's bounds vary in
    length); ValueError for one truncated, a column twice or an unknown domain."""
    where = {}
    at = _HEAD.size
    for _ in range(ncols):
        if at + _COLUMN.size > len(data):
            raise ValueError("truncated")
        index, domain = _COLUMN.unpack_from(data, at)
        if index in where:
            raise ValueError(f"column {index} appears twice")
        at += _COLUMN.size
        where[index] = (domain, at)
        at += counts
        if domain in DTYPES:
            at += 2 * nb * DTYPES[domain].itemsize
        elif domain == TEXT:
            if at + 3 * nb > len(data):
                raise ValueError("truncated")
            lengths = np.frombuffer(data, np.uint8, 2 * nb, at + nb)
            at += 3 * nb + int(lengths.sum(dtype=np.int64))
        else:
            raise ValueError(f"column {index}: unknown domain {domain}")
        if at > len(data):
            raise ValueError("truncated")
        at += -at % 8
    return where, at


def _check_bounds(cs):
    """ValueError naming the column and block of statistics no block could have: negative
    counts, a NaN bound, a low bound above the high one, Text bounds longer than PREFIX."""
    bad = np.flatnonzero((cs.present < 0) | (cs.missing < 0))
    what = "a negative count"
    if not len(bad):
        some = cs.present > 0
        if cs.domain == TEXT:
            long_ = np.fromiter((len(lo) > PREFIX or len(hi) > PREFIX
                                 for lo, hi in zip(cs.low, cs.high)), bool, len(cs.low))
            flags = cs.flags
            order = np.fromiter((not f & NO_HIGH and lo > hi
                                 for lo, hi, f in zip(cs.low, cs.high, flags.tolist())), bool,
                                len(cs.low))
            bad = np.flatnonzero(some & (long_ | order | (flags > 15)))
            what = "Text bounds out of order, too long or with unknown flags"
        else:
            with np.errstate(invalid="ignore"):
                nan = np.isnan(cs.low) | np.isnan(cs.high) if cs.domain == FLOAT else False
                bad = np.flatnonzero(some & (nan | (cs.low > cs.high)))
            what = "a low bound above the high one, or a NaN bound"
    if len(bad):
        raise ValueError(f"column {cs.index}, block {int(bad[0])}: {what}")


def _split(data, lengths):
    ends = np.cumsum(lengths, dtype=np.int64)
    starts = ends - lengths
    return [data[a:b] for a, b in zip(starts.tolist(), ends.tolist())]
