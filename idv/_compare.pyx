# cython: language_level=3
"""Text rows held as spans of UTF-8 bytes (Arrow's string layout, a block's TextSpans), in C:
compared with a literal, a byte per row; and made into str objects, only the rows asked for
(a filter's matches). Numbers compared with a literal of their type, the positions of those
that pass written without a mask.

UTF-8's byte order is the code points' order, the order of Python's str, so comparing bytes
answers as str would (idv._values.comparison's meaning), without a str per value; one call
of a few nanoseconds a row, the GIL released, where pyarrow's kernels take several times as
long on short strings.
"""
cimport cython
cimport numpy as cnp
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from libc.stdint cimport (INT32_MAX, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t,
                         uint32_t, uint64_t)
from libc.string cimport memcmp, memcpy

from idv._views cimport idv_view

import numpy as np

from idv.errors import IdvFormatError

cnp.import_array()

cdef extern from "Python.h":
    object PyUnicode_DecodeUTF8(const char *s, Py_ssize_t size, const char *errors)

cdef extern from *:
    """
    #include <string.h>
    #if defined(_MSC_VER)
    #include <stdlib.h>
    #endif
    static inline unsigned long long idv_swap8(unsigned long long v) {
    #if defined(_MSC_VER)
        return _byteswap_uint64(v);
    #else
        return __builtin_bswap64(v);
    #endif
    }
    /* 8 bytes as a number whose least significant byte is the first, on any host */
    static inline unsigned long long idv_le8(const unsigned char *p) {
        unsigned long long v;
        memcpy(&v, p, 8);               /* one load: a constant size is inlined */
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        v = idv_swap8(v);
    #endif
        return v;
    }
    """
    uint64_t idv_swap8(uint64_t v) nogil
    uint64_t idv_le8(const uint8_t *p) nogil

ctypedef fused offset_t:
    int32_t
    int64_t

# the comparison operators, by their symbol
OPS = {"==": 0, "!=": 1, "<": 2, "<=": 3, ">": 4, ">=": 5}


cdef inline int _order(const uint8_t *a, int64_t na, const uint8_t *b, int64_t nb) noexcept nogil:
    """<0, 0, >0 as bytes a[:na] sort before, with or after b[:nb]."""
    cdef int64_t m = na if na < nb else nb
    cdef int c = memcmp(a, b, <size_t>m) if m > 0 else 0
    if c:
        return c
    return (na > nb) - (na < nb)


cdef inline int _equal(const uint8_t *d, int64_t nd, int64_t a, int64_t b,
                       const uint8_t *lit, int64_t nl, uint64_t want, uint64_t keep,
                       int *bad) noexcept nogil:
    """Whether d[a:b] is the nl bytes `lit` (`want`, `keep`: its first 8 as a word and
    their mask, for nl <= 8), no branch on the data; *bad set, and no byte read, where the
    span lies outside the nd bytes of `d` or is reversed."""
    cdef int ok = 0 <= a <= b <= nd
    cdef int diff
    cdef int64_t m, j
    bad[0] |= not ok
    if ok and nl <= 8 and a + 8 <= nd:
        return ((idv_le8(d + a) & keep) == want) & (b - a == nl)
    m = (b - a if b - a < nl else nl) * ok
    diff = b - a != nl
    for j in range(m):                  # as many rounds for each value at least nl long
        diff |= d[a + j] ^ lit[j]
    return diff == 0


cdef inline int _sign(const uint8_t *d, int64_t nd, int64_t a, int64_t b,
                      const uint8_t *lit, int64_t nl, uint64_t want, int *bad) noexcept nogil:
    """<0, 0, >0 as d[a:b] sorts before, with or after the nl bytes `lit` (`want`: its first
    8 as a word); *bad as _equal's."""
    cdef int ok = 0 <= a <= b <= nd
    cdef int c
    cdef int64_t m
    cdef uint64_t keep, word, mine
    bad[0] |= not ok
    if ok and nl <= 8 and a + 8 <= nd:
        # the first min(length, nl) bytes of each as big-endian numbers
        m = b - a if b - a < nl else nl
        keep = ~(<uint64_t>0) if m == 8 else ((<uint64_t>1) << (8 * m)) - 1
        word = idv_swap8(idv_le8(d + a) & keep)
        mine = idv_swap8(want & keep)
        c = (word > mine) - (word < mine)
        return c + (c == 0) * ((b - a > nl) - (b - a < nl))     # then the shorter first
    return _order(d + a if b > a and ok else NULL, (b - a) * ok, lit, nl)


@cython.boundscheck(False)     # i < n, and len(starts), len(ends) >= n are checked by callers
@cython.wraparound(False)
cdef Py_ssize_t _test(const offset_t[::1] starts, const offset_t[::1] ends,
                      const uint8_t[::1] data, int code, const uint8_t[::1] literal,
                      Py_ssize_t n, uint8_t *out, int64_t *hits, int64_t base,
                      int *bad) noexcept nogil:
    """Strings i < n (``data[starts[i]:ends[i]]``) tested against the UTF-8 bytes `literal`
    by op `code` (OPS): out[i] = 1 where one passes, else 0, where `out` is given; else
    base + i of each that passes written to `hits` in turn, and how many returned; *bad set
    where a span lies outside `data` or is reversed (no byte of it read). A loop for each
    kind of test and output, so that each stays as tight as one written for it alone."""
    cdef Py_ssize_t i, k = 0
    cdef int64_t nl = literal.shape[0], nd = data.shape[0], j
    cdef const uint8_t *d = &data[0] if nd else NULL
    cdef const uint8_t *lit = &literal[0] if nl else NULL
    cdef int c, p, eq = code == 0, below = code <= 3, level = code == 3 or code == 5
    cdef int above = code >= 4, wrong = 0    # a local: no store through `out` can touch it
    cdef uint64_t want = 0, keep = 0
    for j in range(min(nl, 8)):         # its first 8 bytes, the first least significant
        want |= (<uint64_t>lit[j]) << (8 * j)
    if nl <= 8:
        keep = ~(<uint64_t>0) if nl == 8 else ((<uint64_t>1) << (8 * nl)) - 1
    if code <= 1 and out != NULL:       # == / !=
        for i in range(n):
            out[i] = _equal(d, nd, starts[i], ends[i], lit, nl, want, keep, &wrong) == eq
    elif code <= 1:
        for i in range(n):
            p = _equal(d, nd, starts[i], ends[i], lit, nl, want, keep, &wrong) == eq
            hits[k] = base + i          # kept only where it passed: k moves on
            k += p
    elif out != NULL:                   # which orders pass: <, <=, >, >=
        for i in range(n):
            c = _sign(d, nd, starts[i], ends[i], lit, nl, want, &wrong)
            out[i] = ((c < 0) & below) | ((c == 0) & level) | ((c > 0) & above)
    else:
        for i in range(n):
            c = _sign(d, nd, starts[i], ends[i], lit, nl, want, &wrong)
            p = ((c < 0) & below) | ((c == 0) & level) | ((c > 0) & above)
            hits[k] = base + i
            k += p
    bad[0] = wrong
    return k


def text_compare(const offset_t[::1] starts, const offset_t[::1] ends,
                 const uint8_t[::1] data, str op, const uint8_t[::1] literal,
                 uint8_t[::1] out):
    """out[i] = 1 where string i (``data[starts[i]:ends[i]]``) `op` the UTF-8 bytes `literal`
    (op: a key of OPS), else 0, for i < len(out). ValueError where fewer spans are given, or
    where one lies outside `data` or is reversed (no byte outside `data` is read)."""
    cdef Py_ssize_t n = out.shape[0]
    cdef int code = OPS[op], bad = 0
    if starts.shape[0] < n or ends.shape[0] < n:
        raise ValueError(f"{min(starts.shape[0], ends.shape[0])} spans for {n} strings")
    if n == 0:
        return
    with nogil:
        _test(starts, ends, data, code, literal, n, &out[0], NULL, 0, &bad)
    if bad:
        raise ValueError(f"string spans outside the {data.shape[0]} bytes of text, or reversed")


def text_hits(const offset_t[::1] starts, const offset_t[::1] ends,
              const uint8_t[::1] data, str op, const uint8_t[::1] literal, int64_t base,
              int64_t[::1] hits):
    """The strings of text_compare (one per span of `starts`) that pass, as positions:
    base + i of each written to `hits` from its start, in order; returns how many. No mask,
    and no pass over one, where a filter wants the rows that match. ValueError as
    text_compare's, or where `hits` has room for fewer than the spans."""
    cdef Py_ssize_t n = starts.shape[0], k = 0
    cdef int code = OPS[op], bad = 0
    if ends.shape[0] < n:
        raise ValueError(f"{ends.shape[0]} ends for {n} starts")
    if hits.shape[0] < n:
        raise ValueError(f"room for {hits.shape[0]} positions, not {n}")
    if n == 0:
        return 0
    with nogil:
        k = _test(starts, ends, data, code, literal, n, NULL, &hits[0], base, &bad)
    if bad:
        raise ValueError(f"string spans outside the {data.shape[0]} bytes of text, or reversed")
    return k


@cython.boundscheck(False)     # every row and its span are checked first
@cython.wraparound(False)
def text_strings(const offset_t[::1] starts, const offset_t[::1] ends,
                 const uint8_t[::1] data, const int64_t[::1] rows):
    """An object array of the str of each of `rows` (``data[starts[r]:ends[r]]``, UTF-8).
    ValueError for a row without a span or a span outside `data`; IdvFormatError for bytes
    that are not UTF-8."""
    cdef Py_ssize_t n = rows.shape[0], m = min(starts.shape[0], ends.shape[0]), i
    cdef int64_t r, a, b, nd = data.shape[0]
    cdef const char *d = <const char *>&data[0] if nd else NULL
    cdef const char *empty = b""
    for i in range(n):
        r = rows[i]
        if r < 0 or r >= m or not 0 <= starts[r] <= ends[r] <= nd:
            raise ValueError(f"row {r}: no span within the {nd} bytes of text")
    out = np.empty(n, object)
    cdef PyObject **slots = <PyObject **>cnp.PyArray_DATA(out)
    try:
        for i in range(n):
            a, b = starts[rows[i]], ends[rows[i]]
            s = PyUnicode_DecodeUTF8(d + a if b > a else empty, b - a, "strict")
            Py_XDECREF(slots[i])        # the None np.empty put there
            Py_INCREF(s)
            slots[i] = <PyObject *>s
    except UnicodeDecodeError as e:
        raise IdvFormatError(f"invalid UTF-8 in Text: {e.reason}") from None
    return out


@cython.boundscheck(False)     # each part's spans and every row are checked first
@cython.wraparound(False)
def text_take(list parts, const int64_t[::1] rows, uint8_t[::1] views=None):
    """Rows `rows` (strictly ascending positions over `parts` end to end: [(starts, ends,
    data)], the parts of TextRows, int32 spans) in Arrow's string layout: (offsets, int32,
    len(rows) + 1; data, uint8), copied with the GIL released. With `views` (16 bytes a row)
    they are written there as Arrow's string views instead, of which the strings over 12
    bytes point into the data returned (buffer 0), which holds them alone: (None, data).
    ValueError for rows negative, repeated, out of order or beyond the parts, a span outside
    its data, or more than 2 GiB of text."""
    cdef Py_ssize_t n = rows.shape[0], i = 0, k, np_ = len(parts), m, nd
    cdef int64_t r, base = 0, total = 0, a, b, prev = -1
    cdef int fault = 0
    # strings of at most `inline` bytes are held by their views, not copied to the data
    cdef int64_t inline = 12 if views is not None else -1
    cdef const int32_t[::1] starts
    cdef const int32_t[::1] ends
    cdef const uint8_t[::1] data
    if views is not None and views.shape[0] != 16 * n:
        raise ValueError(f"room for {views.shape[0] // 16} string views, not {n}")
    offsets = np.empty(n + 1, np.int32)
    cdef int32_t[::1] off = offsets
    off[0] = 0
    # first pass, the GIL released: every row checked, its part found, the output's offsets
    for k in range(np_):
        starts, ends, data = parts[k]
        m = min(starts.shape[0], ends.shape[0])
        nd = data.shape[0]
        with nogil:
            while i < n and rows[i] < base + m:
                r = rows[i] - base
                if r < 0 or rows[i] <= prev:
                    fault = 1
                    break
                a, b = starts[r], ends[r]
                if not 0 <= a <= b <= nd:
                    fault = 2
                    break
                if b - a > inline:
                    total += b - a
                if total > INT32_MAX:
                    fault = 3
                    break
                prev = rows[i]
                i += 1
                off[i] = <int32_t>total
        if fault == 1:
            raise ValueError(f"rows not strictly ascending from 0 at {i}")
        if fault == 2:
            raise ValueError(f"row {rows[i]}: no span within its part's text")
        if fault == 3:
            raise ValueError("more than 2 GiB of text for 32-bit offsets")
        base += m
    if i < n:
        raise ValueError(f"row {rows[i]} beyond the {base} rows of the parts")
    # 16 bytes of room beyond the text: a short string is copied as two 8-byte words
    out = np.empty(total + 16, np.uint8)
    cdef uint8_t[::1] o = out
    i = 0
    base = 0
    for k in range(np_):
        starts, ends, data = parts[k]
        m = min(starts.shape[0], ends.shape[0])
        nd = data.shape[0]
        with nogil:
            while i < n and rows[i] < base + m:
                r = rows[i] - base
                a, b = starts[r], ends[r]
                if b - a <= inline:
                    idv_view(&views[16 * i], &data[0] if nd else <const uint8_t *>b"", nd,
                             <int>a, <int>(b - a), 0)
                else:
                    if b - a <= 16 and a + 16 <= nd:
                        memcpy(&o[off[i]], &data[a], 16)
                    elif b > a:
                        memcpy(&o[off[i]], &data[a], <size_t>(b - a))
                    if inline >= 0:
                        idv_view(&views[16 * i], &o[0], total, off[i], <int>(b - a), 0)
                i += 1
        base += m
    return (None if views is not None else offsets), out[:total]


# ---------------------------------------------------------------- numbers
ctypedef fused number_t:
    int8_t
    int16_t
    int32_t
    int64_t
    uint8_t
    uint16_t
    uint32_t
    uint64_t
    float
    double


@cython.boundscheck(False)     # i < n = len(values) <= len(hits), checked by the caller
@cython.wraparound(False)
cdef Py_ssize_t _number_hits(const number_t[::1] values, number_t v, int code,
                             int64_t *hits) noexcept nogil:
    """The positions i of values[i] `code` v, written to `hits` in turn; how many. Every
    position is written and the count moves on where it passed: no branch on the data."""
    cdef Py_ssize_t i, k = 0, n = values.shape[0]
    if code == 0:
        for i in range(n):
            hits[k] = i
            k += values[i] == v
    elif code == 1:
        for i in range(n):
            hits[k] = i
            k += values[i] != v
    elif code == 2:
        for i in range(n):
            hits[k] = i
            k += values[i] < v
    elif code == 3:
        for i in range(n):
            hits[k] = i
            k += values[i] <= v
    elif code == 4:
        for i in range(n):
            hits[k] = i
            k += values[i] > v
    else:
        for i in range(n):
            hits[k] = i
            k += values[i] >= v
    return k


def number_hits(const number_t[::1] values, str op, const number_t[::1] literal,
                int64_t[::1] hits):
    """The positions of the `values` (a contiguous array of one numeric type) that `op`
    literal[0] (an array of the same type; op: a key of OPS), written into `hits` from its
    start, in order; returns how many. As numpy compares: a NaN passes `!=` alone.
    ValueError where `hits` has room for fewer than the values, or no literal is given."""
    cdef Py_ssize_t n = values.shape[0], k = 0
    cdef int code = OPS[op]
    if hits.shape[0] < n:
        raise ValueError(f"room for {hits.shape[0]} positions, not {n}")
    if literal.shape[0] != 1:
        raise ValueError(f"one literal, not {literal.shape[0]}")
    if n == 0:
        return 0
    with nogil:
        k = _number_hits(values, literal[0], code, &hits[0])
    return k
