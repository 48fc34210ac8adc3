# cython: language_level=3
"""The layout's checks of a whole file in one pass of C: every part's bytes (header, tables,
blocks, metadata) apart from every other's, each part's checksum recorded, each column's block
sizes possible. A file of a few columns opens in microseconds, not in the dozens of Python and
numpy calls a part per kind costs (a dataset of a thousand small files pays it a thousand
times).

These kernels only answer "all is well" or "not": idv._storage.layout falls back to its own checks,
part by part, whenever they say "not", and those name what is wrong and where.
"""
cimport cython
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy

from idv._compression cimport crc32_bytes

import numpy as np

from idv._compression import BAD_CRC, NO_CRC
from idv._header import check_tail, parse_header
from idv._lookup import ENTRY
from idv._toc import block_count, parse_metadata_toc, parse_toc
from idv.errors import IdvFormatError

cdef int64_t _HEADER_SIZE = 256
cdef int64_t _MAX_RATIO = 1032        # idv._compression.MAX_RATIO (tests compare the two)


ctypedef packed struct LookupEntry:
    int64_t offset
    int32_t disk
    int32_t raw


ctypedef packed struct SumEntry:       # idv._storage.checksums.ENTRY
    int64_t offset
    int64_t length
    uint32_t crc
    uint32_t kind


# idv's checksum table (idv._storage.checksums): its entries, the kind of the parts checked when the
# file opens (TABLE_KIND; blocks are checked when read), and where the header points to it
# (SUMS_AT: the magic SUMS_MAGIC, the table's offset and length, its CRC-32 and the header's)
SUM_ENTRY = np.dtype([("offset", "<i8"), ("length", "<i8"), ("crc", "<u4"), ("kind", "<u4")])
TABLE_KIND = 1
SUMS_AT = 52
SUMS_MAGIC = b"idvCRC32"
cdef uint32_t _TABLE = TABLE_KIND
cdef int64_t _NO_CRC = NO_CRC, _BAD_CRC = BAD_CRC
cdef Py_ssize_t _SUMS_AT = SUMS_AT
cdef bytes _SUMS_MAGIC = SUMS_MAGIC
_NO_QUERIES = np.zeros(0, np.int64)
_NO_QUERIES.flags.writeable = False


cdef struct Part:
    int64_t start
    int64_t stop


cdef Py_ssize_t _run_end(const Part *a, Py_ssize_t i, Py_ssize_t m) noexcept nogil:
    """The end of the run of parts in order by start that begins at a[i]."""
    i += 1
    while i < m and a[i].start >= a[i - 1].start:
        i += 1
    return i


cdef int _sort_parts(Part *a, Py_ssize_t m) noexcept nogil:
    """Sort a[:m] by start: merges of the runs already in order, pass after pass. The parts
    come in a few such runs (the frame, the lookup tables, the blocks row of blocks by row of
    blocks, the metadata), so a file of thousands of columns is sorted in a pass or two where
    a general sort would compare each part log(m) times. -1: out of memory."""
    cdef Py_ssize_t i, j, k, o, p, q
    cdef Part *src = a
    cdef Part *dst
    cdef Part *tmp
    if m < 2 or _run_end(a, 0, m) == m:
        return 0
    tmp = <Part *>malloc(m * sizeof(Part))
    if tmp == NULL:
        return -1
    dst = tmp
    while True:
        i = o = 0
        while i < m:
            j = _run_end(src, i, m)
            k = _run_end(src, j, m) if j < m else m
            p, q = i, j
            while p < j and q < k:
                if src[q].start < src[p].start:
                    dst[o] = src[q]
                    q += 1
                else:
                    dst[o] = src[p]
                    p += 1
                o += 1
            while p < j:
                dst[o] = src[p]
                p += 1
                o += 1
            while q < k:
                dst[o] = src[q]
                q += 1
                o += 1
            i = k
        src, dst = dst, src
        if _run_end(src, 0, m) == m:
            break
    if src != a:
        memcpy(a, src, m * sizeof(Part))
    free(tmp)
    return 0


cdef int64_t _i64(const uint8_t *p) noexcept nogil:
    cdef int64_t v
    memcpy(&v, p, 8)            # little-endian, as every machine idv builds for
    return v


cdef uint32_t _u32(const uint8_t *p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return v


cdef uint32_t _crc(const uint8_t[::1] data, int64_t offset, int64_t length) noexcept nogil:
    return crc32_bytes(&data[0] + offset, <size_t>length)


def open_frame(data, bint check_sums):
    """(header, checksums, table of contents) of the file held whole in `data`, read and
    checked as idv._reader.opening's checks part by part would: the header and tail, idv's checksum
    table ((entries, offset, length) for idv._storage.checksums.Checksums; None without, or unless
    `check_sums`) with the header's CRC-32 and its own, and the table of contents (a list of
    TocEntry) with its CRC-32. None at the first fault."""
    cdef const uint8_t[::1] d = data
    cdef int64_t size = d.shape[0], off, length, toc, toc_end, tail
    cdef Py_ssize_t k, n, found
    cdef const SumEntry *e
    if size < 256:
        return None
    try:
        header = parse_header(data[:256], size)
        tail = header.tail_offset
        check_tail(data[tail:tail + 8], tail)
    except IdvFormatError:
        return None
    toc = header.toc_offset
    sums = None
    cdef const SumEntry[::1] table
    if check_sums and memcmp(&d[_SUMS_AT], <const char *>_SUMS_MAGIC, 8) == 0:
        off, length = _i64(&d[_SUMS_AT + 8]), _i64(&d[_SUMS_AT + 16])
        if _crc(d, 0, _SUMS_AT) != _u32(&d[_SUMS_AT + 28]):
            return None
        if length < 0 or length % sizeof(SumEntry) or off < 256 or length > 0x7FFFFFFF \
                or off > toc - length or off > size - length:
            return None
        if _crc(d, off, length) != _u32(&d[_SUMS_AT + 24]):
            return None
        entries = np.frombuffer(data[off:off + length], SUM_ENTRY).copy()
        table = entries
        for k in range(table.shape[0]):
            e = &table[k]
            if e.offset < 0 or e.length < 0 or e.offset > size - e.length:
                return None
        sums = (entries, off, length)
    if header.column_count:
        try:
            columns = parse_toc(data[toc:tail], toc, header)
        except IdvFormatError:
            return None
        toc_end = columns[-1].toc_end
    else:
        columns = []
        toc_end = tail
    if toc_end - toc > 0x7FFFFFFF:
        return None
    if sums is not None:        # the entry at the table's offset (of two, the later one)
        found = -1
        for k in range(table.shape[0]):
            if table[k].offset == toc:
                found = k
        if found >= 0 and (table[found].length != toc_end - toc
                           or _crc(d, toc, toc_end - toc) != table[found].crc):
            return None
    return header, sums, columns


def read_tables(data, header, list entries, list extra, const SumEntry[::1] sums,
                int64_t sums_offset, stats_offset, list itemsizes, list stored):
    """(every column's lookup table as the rows of one array, each column's metadata
    entries, each block's expected CRC-32 or None, each column's possible_sizes) of the file
    held whole in `data` (its header, its table of contents `entries`), read and checked:
    the parts (`extra`: (start, size) of those the header locates beyond ML.NET's) apart,
    each metadata table parsed only up to the next part; with `sums` (idv's checksum table,
    at `sums_offset`) every part's checksum recorded and each table's matching but the
    table of contents' and the block statistics' (at `stats_offset`, or None), checked on
    their own. `itemsizes` and `stored`: per column, its codec's fixed item size (0: none)
    and whether its blocks are stored as they are. None when a check fails, or for a file of
    no rows (the checks part by part then say what is wrong)."""
    cdef int64_t tail = header.tail_offset, toc = header.toc_offset, nb, size
    if not entries or not header.row_count:
        return None
    nb = block_count(header.row_count, entries[0].rows_per_block)
    size = 16 * nb
    frame = [(0, 256)] + extra + [(toc, entries[-1].toc_end - toc), (tail, 8)]
    offsets = np.array([e.lookup_offset for e in entries], np.int64)
    metadata = [[] for _ in entries]
    meta_starts = meta_stops = _NO_QUERIES
    crcs = None
    try:
        # the parts the table of contents locates (before reading any table: tables that
        # share bytes would multiply what is read), each metadata table to be parsed up to
        # the next of them, which it may not enter
        with_meta = [e for e in entries if e.metadata_offset]
        firsts = np.array([e.metadata_offset for e in with_meta], np.int64) if with_meta \
            else _NO_QUERIES
        ends = check_parts(frame, offsets, size, None, firsts, firsts + 1, tail, firsts)
        if ends is None or (with_meta and (ends < 0).any()):
            return None
        joined = gather_lookups(data, offsets, nb)
        if joined is None:
            return None
        if with_meta:
            view = memoryview(data)
            starts, stops = [], []
            for e, end in zip(with_meta, ends.tolist()):
                off = e.metadata_offset
                found = metadata[e.index] = parse_metadata_toc(view[off:end], off, tail)
                starts += [off] + [m.offset for m in found]
                stops += [found[-1].toc_end] + [m.offset + m.size for m in found]
            meta_starts, meta_stops = np.array(starts, np.int64), np.array(stops, np.int64)
        if sums is None:
            sound = check_parts(frame, offsets, size, joined, meta_starts, meta_stops, tail,
                                _NO_QUERIES)
        else:
            crcs = np.empty(joined.shape, np.int64)
            sound = check_parts(frame, offsets, size, joined, meta_starts, meta_stops, tail,
                                _NO_QUERIES, sums, (0, tail, sums_offset), data,
                                (toc,) if stats_offset is None else (toc, stats_offset), crcs)
    except (IdvFormatError, OverflowError):
        return None
    if sound is None:
        return None
    return joined, metadata, crcs, possible_sizes(joined, itemsizes, stored,
                                                  entries[0].rows_per_block, header.row_count)


def gather_lookups(const uint8_t[::1] data, const int64_t[::1] offsets, int64_t num_blocks):
    """Every column's lookup table of `num_blocks` entries (at `offsets` in `data`) as the
    rows of one array of idv._lookup.ENTRY; None when one does not lie within `data`."""
    cdef Py_ssize_t n = offsets.shape[0], k
    cdef int64_t size = data.shape[0]
    if num_blocks < 0 or num_blocks > size // 16:
        return None
    cdef int64_t row = 16 * num_blocks
    for k in range(n):
        if offsets[k] < 0 or offsets[k] > size - row:
            return None
    out = np.empty((n, num_blocks), ENTRY)
    if n == 0 or row == 0:
        return out
    cdef uint8_t[:, ::1] dst = out.view(np.uint8).reshape(n, row)
    with nogil:
        for k in range(n):
            memcpy(&dst[k, 0], &data[0] + offsets[k], <size_t>row)
    return out


cdef Py_ssize_t _add_frame(Part *parts, Py_ssize_t m, list frame) except -1:
    cdef int64_t start, size
    for start, size in frame:
        if size > 0 and start > (<int64_t>0x7FFFFFFFFFFFFFFF) - size:
            raise OverflowError("part beyond int64")
        parts[m].start = start
        parts[m].stop = start + size
        m += 1
    return m


def check_parts(list frame, const int64_t[::1] lookup_offsets, int64_t lookup_size,
                const LookupEntry[:, ::1] blocks, const int64_t[::1] meta_starts,
                const int64_t[::1] meta_stops, int64_t tail, const int64_t[::1] queries,
                const SumEntry[::1] sums=None, tuple skip=(), const uint8_t[::1] data=None,
                tuple checked=(), int64_t[:, ::1] crcs=None):
    """Whether a file's parts are sound, and where the part after each query point starts.

    The parts: `frame` ((start, size) pairs), a lookup table of `lookup_size` bytes at each of
    `lookup_offsets`, every block of `blocks` (lookup entries, None for none), and
    [meta_starts[k], meta_stops[k]). Empty parts take no bytes. Sound: no two parts share a
    byte and every block lies within [256, `tail`] with lengths not negative; with `sums`
    (the checksum table's entries, idv._storage.checksums.ENTRY, whose offsets must be strictly
    increasing), every part not starting at one of `skip` has its checksum recorded at its
    first byte, and every part recorded as a table but those at `checked` (checked on their
    own) has its CRC-32 in `data`, the whole file. `crcs` (of the shape of `blocks`) is then
    filled with the CRC-32 each block must have, as idv._storage.checksums.Checksums.expected gives it.

    Returns None when not sound; else, for each of `queries`, the first byte of the first
    part that starts after it (-1 where none does)."""
    cdef Py_ssize_t nf = len(frame), nl = lookup_offsets.shape[0]
    cdef Py_ssize_t nm = meta_starts.shape[0], nq = queries.shape[0]
    cdef Py_ssize_t nb = 0, cols = 0, per = 0
    cdef Py_ssize_t i, j, k, m = 0, total, lo, hi, mid, c = 0
    cdef Py_ssize_t ns = 0 if sums is None else sums.shape[0]
    cdef int64_t reach = 0, s, o, d
    cdef const LookupEntry *e
    if blocks is not None:
        cols, per = blocks.shape[0], blocks.shape[1]
        nb = cols * per
    if meta_stops.shape[0] != nm:
        raise ValueError(f"{nm} metadata starts, {meta_stops.shape[0]} stops")
    if sums is not None:
        if data is None:
            raise ValueError("checksums need the file's bytes")
        if not _tables_match(sums, data, checked):
            return None
    cdef int64_t skipped[8]
    cdef Py_ssize_t nskip = len(skip)
    if nskip > 8:
        raise ValueError("at most 8 skipped offsets")
    for k in range(nskip):
        skipped[k] = skip[k]
    total = nf + nl + nb + nm
    cdef Part *parts = <Part *>malloc(max(total, 1) * sizeof(Part))
    if parts == NULL:
        raise MemoryError()
    try:
        m = _add_frame(parts, 0, frame)
        for k in range(nl):
            if lookup_size > 0 and lookup_offsets[k] > (<int64_t>0x7FFFFFFFFFFFFFFF) - lookup_size:
                return None
            parts[m].start = lookup_offsets[k]
            parts[m].stop = lookup_offsets[k] + lookup_size
            m += 1
        for j in range(per):            # row of blocks by row, as ML.NET lays them out
            for i in range(cols):
                e = &blocks[i, j]
                o, d = e.offset, e.disk
                if d < 0 or e.raw < 0 or o < _HEADER_SIZE or o > tail - d:
                    return None
                parts[m].start = o
                parts[m].stop = o + d
                m += 1
        for k in range(nm):
            parts[m].start = meta_starts[k]
            parts[m].stop = meta_stops[k]
            m += 1
        # empty parts take no bytes: dropped, then the rest by their first byte
        j = 0
        for k in range(m):
            if parts[k].stop > parts[k].start:
                parts[j] = parts[k]
                j += 1
        m = j
        if _sort_parts(parts, m) < 0:
            raise MemoryError()
        c = 0
        for k in range(m):
            s = parts[k].start
            if k and s < reach:
                return None
            if k == 0 or parts[k].stop > reach:
                reach = parts[k].stop
            if sums is None:
                continue
            for i in range(nskip):
                if s == skipped[i]:
                    break
            else:
                # parts and sums both by offset, strictly increasing: one walk of each
                while c < ns and sums[c].offset < s:
                    c += 1
                if c == ns or sums[c].offset != s:
                    return None
        if crcs is not None:
            if sums is None or blocks is None or crcs.shape[0] != cols or crcs.shape[1] != per:
                raise ValueError("crcs= needs checksums, and the blocks' shape")
            _expected(sums, blocks, crcs)
        if nq == 0:
            return _NO_QUERIES
        after = np.full(nq, -1, np.int64)
        for k in range(nq):
            lo, hi = 0, m
            while lo < hi:
                mid = (lo + hi) // 2
                if parts[mid].start <= queries[k]:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < m:
                after[k] = parts[lo].start
        return after
    finally:
        free(parts)


@cython.boundscheck(False)
@cython.wraparound(False)
cdef Py_ssize_t _at(const SumEntry[::1] sums, int64_t offset, Py_ssize_t hint) noexcept:
    """The entry of `sums` (by offset, each once) recorded at `offset`, -1 where none is;
    `hint`, the entry looked at first (blocks in a row follow each other)."""
    cdef Py_ssize_t lo = 0, hi = sums.shape[0], mid
    if 0 <= hint < hi and sums[hint].offset == offset:
        return hint
    while lo < hi:
        mid = (lo + hi) // 2
        if sums[mid].offset < offset:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < sums.shape[0] and sums[lo].offset == offset else -1


@cython.boundscheck(False)
@cython.wraparound(False)
cdef void _expected(const SumEntry[::1] sums, const LookupEntry[:, ::1] blocks,
                    int64_t[:, ::1] crcs) noexcept:
    """Per block, the CRC-32 recorded at its offset, BAD_CRC where that entry's length is not
    the block's, NO_CRC where none is (`sums` by offset, each once)."""
    cdef Py_ssize_t i, j, k = -1
    for j in range(blocks.shape[1]):
        for i in range(blocks.shape[0]):
            k = _at(sums, blocks[i, j].offset, k + 1)
            if k < 0:
                crcs[i, j] = _NO_CRC
            elif sums[k].length != blocks[i, j].disk:
                crcs[i, j] = _BAD_CRC
            else:
                crcs[i, j] = sums[k].crc


cdef bint _tables_match(const SumEntry[::1] sums, const uint8_t[::1] data, tuple checked):
    """Whether the entries' offsets are strictly increasing, and every table's bytes in `data`
    (but those at the offsets `checked`) have the CRC-32 recorded."""
    cdef Py_ssize_t k, n = sums.shape[0], size = data.shape[0]
    cdef int64_t skip0 = checked[0] if len(checked) > 0 else -1
    cdef int64_t skip1 = checked[1] if len(checked) > 1 else -1
    cdef const SumEntry *t
    if len(checked) > 2:
        raise ValueError("at most 2 offsets checked elsewhere")
    for k in range(n):
        t = &sums[k]
        if k and t.offset <= sums[k - 1].offset:
            return False
        if t.kind != _TABLE or t.offset == skip0 or t.offset == skip1:
            continue
        if t.offset < 0 or t.length < 0 or t.length > 0x7FFFFFFF or t.offset > size - t.length:
            return False
        if crc32_bytes(&data[0] + t.offset, <size_t>t.length) != t.crc:
            return False
    return True


def possible_sizes(const LookupEntry[:, ::1] blocks, list itemsizes, list stored,
                   int64_t rows_per_block, int64_t num_rows):
    """Per column (a row of `blocks`), whether its blocks hold exactly the rows' fixed-width
    values (`itemsizes`, 0 for a column of other values: never) and their stored sizes are
    possible: equal to the raw size when `stored` (no compression), else at most the most
    DEFLATE can expand (idv._compression.MAX_RATIO, and 64 bytes of framing)."""
    cdef Py_ssize_t cols = blocks.shape[0], per = blocks.shape[1], i, j
    if len(itemsizes) != cols or len(stored) != cols:
        raise ValueError(f"{cols} columns, {len(itemsizes)} item sizes, "
                         f"{len(stored)} compression kinds")
    out = np.zeros(cols, np.bool_)
    cdef uint8_t[::1] ok = out.view(np.uint8)
    cdef int64_t rows, raw, disk, item
    cdef bint good, kept
    for i in range(cols):
        item = itemsizes[i]
        kept = stored[i]
        good = item > 0
        j = 0
        while good and j < per:
            rows = rows_per_block if j < per - 1 else num_rows - (per - 1) * rows_per_block
            raw, disk = blocks[i, j].raw, blocks[i, j].disk
            good = raw == item * rows and (raw == disk if kept else
                                           raw <= disk * _MAX_RATIO + 64)
            j += 1
        ok[i] = good
    return out
