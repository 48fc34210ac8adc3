# cython: language_level=3
"""The layout's checks of a whole file in one pass of C: every part's bytes (header, tables,
blocks, metadata) apart from every other's, each part's checksum recorded, each column's block
sizes possible. A file of a few columns opens in microseconds, not in the dozens of Python and
numpy calls a part per kind costs (a dataset of a thousand small files pays it a thousand
times).

These kernels only answer "all is well" or "not": idv.layout falls back to its own checks,
part by part, whenever they say "not", and those name what is wrong and where.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport free, malloc, qsort
from libc.string cimport memcpy

import numpy as np

from idv._lookup import ENTRY

cdef int64_t _HEADER_SIZE = 256
cdef int64_t _MAX_RATIO = 1032        # idv._compression.MAX_RATIO (tests compare the two)


ctypedef packed struct LookupEntry:
    int64_t offset
    int32_t disk
    int32_t raw


cdef struct Part:
    int64_t start
    int64_t stop


cdef int _by_start(const void *a, const void *b) noexcept nogil:
    cdef int64_t x = (<const Part *>a).start
    cdef int64_t y = (<const Part *>b).start
    return (x > y) - (x < y)


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
                const int64_t[::1] meta_stops, int64_t tail, const int64_t[::1] sums_offsets,
                tuple skip, const int64_t[::1] queries):
    """Whether a file's parts are sound, and where the part after each query point starts.

    The parts: `frame` ((start, size) pairs), a lookup table of `lookup_size` bytes at each of
    `lookup_offsets`, every block of `blocks` (lookup entries, None for none), and
    [meta_starts[k], meta_stops[k]). Empty parts take no bytes. Sound: no two parts share a
    byte, every block lies within [256, `tail`] with lengths not negative, and, with
    `sums_offsets` (the checksum table's offsets, which must be strictly increasing), every
    part not starting at one of `skip` has its checksum recorded at its first byte.

    Returns None when not sound; else, for each of `queries`, the first byte of the first
    part that starts after it (-1 where none does)."""
    cdef Py_ssize_t nf = len(frame), nl = lookup_offsets.shape[0]
    cdef Py_ssize_t nm = meta_starts.shape[0], ns = 0, nq = queries.shape[0]
    cdef Py_ssize_t nb = 0, cols = 0, per = 0
    cdef Py_ssize_t i, j, k, m = 0, total, lo, hi, mid
    cdef int64_t reach = 0, s, o, d
    cdef const LookupEntry *e
    if blocks is not None:
        cols, per = blocks.shape[0], blocks.shape[1]
        nb = cols * per
    if meta_stops.shape[0] != nm:
        raise ValueError(f"{nm} metadata starts, {meta_stops.shape[0]} stops")
    if sums_offsets is not None:
        ns = sums_offsets.shape[0]
        for k in range(1, ns):
            if sums_offsets[k] <= sums_offsets[k - 1]:
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
        for i in range(cols):
            for j in range(per):
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
        qsort(parts, m, sizeof(Part), _by_start)
        for k in range(m):
            s = parts[k].start
            if k and s < reach:
                return None
            if k == 0 or parts[k].stop > reach:
                reach = parts[k].stop
            if sums_offsets is None:
                continue
            for i in range(nskip):
                if s == skipped[i]:
                    break
            else:
                lo, hi = 0, ns
                while lo < hi:
                    mid = (lo + hi) // 2
                    if sums_offsets[mid] < s:
                        lo = mid + 1
                    else:
                        hi = mid
                if lo == ns or sums_offsets[lo] != s:
                    return None
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


def possible_sizes(const LookupEntry[:, ::1] blocks, const int64_t[::1] itemsizes,
                   const uint8_t[::1] stored, int64_t rows_per_block, int64_t num_rows):
    """Per column (a row of `blocks`), whether its blocks hold exactly the rows' fixed-width
    values (`itemsizes`, 0 for a column of other values: never) and their stored sizes are
    possible: equal to the raw size when `stored` (no compression), else at most the most
    DEFLATE can expand (idv._compression.MAX_RATIO, and 64 bytes of framing)."""
    cdef Py_ssize_t cols = blocks.shape[0], per = blocks.shape[1], i, j
    if itemsizes.shape[0] != cols or stored.shape[0] != cols:
        raise ValueError(f"{cols} columns, {itemsizes.shape[0]} item sizes, "
                         f"{stored.shape[0]} compression kinds")
    out = np.zeros(cols, np.bool_)
    cdef uint8_t[::1] ok = out.view(np.uint8)
    cdef int64_t rows, raw, disk
    cdef bint good
    for i in range(cols):
        good = itemsizes[i] > 0
        j = 0
        while good and j < per:
            rows = rows_per_block if j < per - 1 else num_rows - (per - 1) * rows_per_block
            raw, disk = blocks[i, j].raw, blocks[i, j].disk
            good = raw == itemsizes[i] * rows and (
                raw == disk if stored[i] else raw <= disk * _MAX_RATIO + 64)
            j += 1
        ok[i] = good
    return out
