# cython: language_level=3
"""Block payload encoders for the writer (reference section 4), the inverse of idv._codecs.

Every function takes values already converted and checked by idv._writer (stored dtypes, little
endian, ticks for dates) and returns one codec payload as bytes or a contiguous byte view. The
text encoder writes UTF-8 in one pass with the GIL released, counting boundaries in UTF-16
units as ML.NET does. The *_estimate functions reproduce ML.NET's GetCommitLengthEstimate, which
its saver uses to choose the rows per block (reference section 5.4), numeric_bounds finds the
counts and bounds of a block of numbers for its statistics (idv._storage.statistics), and
start_writeback lets the kernel write a file out while the rest is still being produced.
Compression is idv._compression's.
"""
cimport cython
cimport numpy as cnp
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from cpython.ref cimport PyObject, Py_INCREF
from libc.stdint cimport uint8_t, uint16_t, uint32_t, int32_t, int64_t, uint64_t
from libc.string cimport memcmp, memcpy, memmove
from idv._ascii cimport next_non_ascii
from idv._bytes cimport shrunk

import numpy as np

cnp.import_array()

# Arrow's text offsets: int32 (string) or int64 (large_string), taken as they come
ctypedef fused offset_t:
    int32_t
    int64_t

cdef extern from *:
    """
    static int idv_unicode_ready(PyObject *o) {
    #if PY_VERSION_HEX < 0x030C0000
        return PyUnicode_READY(o);
    #else
        (void)o;
        return 0;
    #endif
    }
    static int idv_unicode_is_ready(PyObject *o) {
    #if PY_VERSION_HEX < 0x030C0000
        return PyUnicode_IS_READY(o);
    #else
        (void)o;
        return 1;
    #endif
    }
    """
    int idv_unicode_ready(PyObject *o) except -1
    bint idv_unicode_is_ready(PyObject *o) noexcept nogil

cdef extern from "Python.h" nogil:
    Py_ssize_t PyUnicode_GET_LENGTH(PyObject *o)
    int PyUnicode_KIND(PyObject *o)
    void *PyUnicode_DATA(PyObject *o)
    bint PyUnicode_IS_ASCII(PyObject *o)
    bint PyUnicode_Check(PyObject *o)

# One block's text is one .NET string and its boundaries are int32 with the high bit reserved.
cdef enum:
    _MAX_TEXT = 2147483647
MAX_BLOCK_TEXT = _MAX_TEXT


# ---------------------------------------------------------------- text (TextSpan)
cdef inline bint _is_high(uint32_t c) noexcept nogil:
    return 0xD800 <= c < 0xDC00


cdef inline bint _is_low(uint32_t c) noexcept nogil:
    return 0xDC00 <= c < 0xE000


cdef inline uint32_t _char_at(const void *data, int kind, Py_ssize_t i) noexcept nogil:
    if kind == 1:
        return (<const uint8_t *>data)[i]
    if kind == 2:
        return (<const uint16_t *>data)[i]
    return (<const uint32_t *>data)[i]


cdef void _measure(PyObject *s, int64_t *nbytes, int64_t *units) noexcept nogil:
    """UTF-8 bytes and UTF-16 units of one str, as .NET encodes it: a surrogate pair (given as
    two code points) joins into one 4-byte character, a lone surrogate becomes U+FFFD."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(s), i = 0
    cdef int kind
    cdef const void *data
    cdef uint32_t c
    cdef int64_t b = 0, u = 0
    if PyUnicode_IS_ASCII(s):
        nbytes[0] = n
        units[0] = n
        return
    kind = PyUnicode_KIND(s)
    data = PyUnicode_DATA(s)
    while i < n:
        c = _char_at(data, kind, i)
        i += 1
        if c < 0x80:
            b += 1
            u += 1
        elif c < 0x800:
            b += 2
            u += 1
        elif c >= 0x10000:
            b += 4
            u += 2
        elif _is_high(c) and i < n and _is_low(_char_at(data, kind, i)):
            i += 1
            b += 4
            u += 2
        else:          # BMP character, or a lone surrogate written as U+FFFD
            b += 3
            u += 1
    nbytes[0] = b
    units[0] = u


cdef PyObject **_object_items(cnp.ndarray values, bint strings=True) except NULL:
    """The item pointers of a contiguous 1-d object array; with `strings`, every item is
    checked to be a str in its canonical form, so that the GIL-free loops may read it."""
    cdef PyObject **items
    cdef Py_ssize_t i
    if not (values.dtype == object and values.ndim == 1 and values.flags.c_contiguous):
        raise TypeError("text values must be a contiguous 1-d object array")
    if values.shape[0] == 0:
        return <PyObject **>1   # never dereferenced
    items = <PyObject **>cnp.PyArray_DATA(values)
    if strings:
        for i in range(values.shape[0]):
            if items[i] == NULL or not PyUnicode_Check(items[i]):
                raise TypeError(f"text item {i} is not a str")
            idv_unicode_ready(items[i])
    return items


@cython.boundscheck(False)
@cython.wraparound(False)
def first_non_str(cnp.ndarray values):
    """Index of the first item of an object array that is not a str, or -1."""
    cdef PyObject **items = _object_items(values, False)
    cdef Py_ssize_t i, n = values.shape[0], bad = -1
    with nogil:
        for i in range(n):
            if items[i] == NULL or not PyUnicode_Check(items[i]):
                bad = i
                break
    return bad


@cython.boundscheck(False)
@cython.wraparound(False)
def text_units(cnp.ndarray values):
    """UTF-16 units of each str (what ML.NET's boundaries and size estimate count)."""
    cdef PyObject **items = _object_items(values)
    cdef Py_ssize_t i, n = values.shape[0]
    out = np.empty(n, np.int64)
    cdef int64_t[::1] units = out
    cdef int64_t nb
    with nogil:
        for i in range(n):
            _measure(items[i], &nb, &units[i])
    return out


cdef inline int _leb128_size(uint64_t v) noexcept nogil:
    cdef int k = 1
    while v >= 0x80:
        v >>= 7
        k += 1
    return k


cdef inline uint8_t *_put_leb128(uint8_t *p, uint64_t v) noexcept nogil:
    """A .NET 7-bit encoded length at p; returns the byte after it."""
    while v >= 0x80:
        p[0] = <uint8_t>((v & 0x7F) | 0x80)
        v >>= 7
        p += 1
    p[0] = <uint8_t>v
    return p + 1



cdef inline Py_ssize_t _utf8_bound(PyObject *s) noexcept nogil:
    """Most UTF-8 bytes a str can need: 1 per ASCII character, 2 per Latin-1, 3 per UCS-2
    (a surrogate pair given as two code points needs 4 for both), 4 per UCS-4 code point."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(s)
    cdef int kind
    if PyUnicode_IS_ASCII(s):
        return n
    kind = PyUnicode_KIND(s)
    return n * (2 if kind == 1 else (3 if kind == 2 else 4))


cdef uint8_t *_put_counted(PyObject *s, uint8_t *out, int64_t *units) noexcept nogil:
    """_put, also adding the str's UTF-16 units to `units` (one pass over the characters)."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(s), i = 0, nonbmp = 0
    cdef int kind
    cdef const void *data
    cdef const uint8_t *b
    cdef uint32_t c, c2
    if PyUnicode_IS_ASCII(s):
        memcpy(out, PyUnicode_DATA(s), n)
        units[0] += n
        return out + n
    kind = PyUnicode_KIND(s)
    data = PyUnicode_DATA(s)
    if kind == 1:                   # Latin-1: one unit per character, 1 or 2 bytes
        b = <const uint8_t *>data
        for i in range(n):
            c = b[i]
            if c < 0x80:
                out[0] = <uint8_t>c
                out += 1
            else:
                out[0] = <uint8_t>(0xC0 | (c >> 6))
                out[1] = <uint8_t>(0x80 | (c & 0x3F))
                out += 2
        units[0] += n
        return out
    while i < n:
        c = _char_at(data, kind, i)
        i += 1
        if c < 0x80:
            out[0] = <uint8_t>c
            out += 1
            continue
        if c >= 0x10000:
            nonbmp += 1         # one code point, two UTF-16 units
        elif 0xD800 <= c < 0xE000:
            if _is_high(c) and i < n and _is_low(_char_at(data, kind, i)):
                c2 = _char_at(data, kind, i)
                i += 1          # two code points, two units, one 4-byte character
                c = 0x10000 + ((c - 0xD800) << 10) + (c2 - 0xDC00)
            else:
                c = 0xFFFD
        if c < 0x800:
            out[0] = <uint8_t>(0xC0 | (c >> 6))
            out[1] = <uint8_t>(0x80 | (c & 0x3F))
            out += 2
        elif c < 0x10000:
            out[0] = <uint8_t>(0xE0 | (c >> 12))
            out[1] = <uint8_t>(0x80 | ((c >> 6) & 0x3F))
            out[2] = <uint8_t>(0x80 | (c & 0x3F))
            out += 3
        else:
            out[0] = <uint8_t>(0xF0 | (c >> 18))
            out[1] = <uint8_t>(0x80 | ((c >> 12) & 0x3F))
            out[2] = <uint8_t>(0x80 | ((c >> 6) & 0x3F))
            out[3] = <uint8_t>(0x80 | (c & 0x3F))
            out += 4
    # every code point is one unit, a non-BMP one two; a joined pair was two code points
    units[0] += n + nonbmp
    return out


cdef inline int _compare_bytes(const uint8_t *d, int64_t a, int64_t na, int64_t b,
                               int64_t nb) noexcept nogil:
    cdef int64_t n = na if na < nb else nb
    cdef int r = memcmp(d + a, d + b, n) if n else 0
    if r:
        return r
    return (na > nb) - (na < nb)


cdef extern from *:
    """
    #include <stdlib.h>
    #include <string.h>
    /* The first 8 bytes of s[:m], big-endian, zero-padded (a byte swap by each compiler's own
       builtin: GCC's and clang's, MSVC's). */
    static inline unsigned long long idv_key8(const unsigned char *s, long long m) {
        unsigned long long v = 0;
        if (m >= 8)
            memcpy(&v, s, 8);           /* one load: a constant size is inlined */
        else
            memcpy(&v, s, (size_t)m);
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        return v;
    #elif defined(_MSC_VER)
        return _byteswap_uint64(v);
    #else
        return __builtin_bswap64(v);
    #endif
    }
    """
    # keys that differ order their values as their bytes do (equal keys tell nothing)
    uint64_t _key8 "idv_key8"(const uint8_t *s, int64_t m) noexcept nogil


cdef inline int _keyed_compare(const uint8_t *d, uint64_t ka, int64_t a, int64_t na,
                               uint64_t kb, int64_t b, int64_t nb) noexcept nogil:
    """_compare_bytes of d[a:a + na] and d[b:b + nb], given their _key8 keys: most values
    differ from a block's bounds in their first 8 bytes, told by one integer comparison."""
    if ka != kb:
        return -1 if ka < kb else 1
    return _compare_bytes(d, a, na, b, nb)


@cython.boundscheck(False)
@cython.wraparound(False)
def encode_text(cnp.ndarray values, Py_ssize_t bounds=0):
    """The TextSpan payload of a 1-d object array of str: int32 count, int32 end boundaries in
    UTF-16 units, then a .NET string (LEB128 UTF-8 byte count, UTF-8 bytes). With `bounds` > 0
    also the block's statistics, found on the way from the UTF-8 just written (in cache):
    (payload, least, greatest, ascii), the least and greatest value's UTF-8 (byte order, which
    is code point order) cut to `bounds` bytes, and whether every value is ASCII.

    One pass over the characters: the output is sized from the strings' lengths (the most
    UTF-8 they can need), the UTF-8 is written with the boundaries counted on the way, and the
    buffer is shrunk to what was used (in place for an all-ASCII block, which needs no move)."""
    cdef PyObject **items = _object_items(values, False)
    cdef Py_ssize_t i, n = values.shape[0]
    cdef int64_t bound = 0, units = 0, total_bytes
    cdef bint unchecked = False
    cdef int32_t count = <int32_t>n
    cdef int32_t b32
    cdef bint too_long = False
    cdef int guess, lebn
    cdef uint8_t *out
    cdef uint8_t *p
    cdef uint8_t *start
    cdef uint8_t *q
    cdef PyObject *res
    cdef int64_t lo = 0, lo_n = 0, hi = 0, hi_n = 0, at, m
    cdef uint64_t key, lo_key = 0, hi_key = 0
    if n > (MAX_BLOCK_TEXT - 16) // 4:
        raise ValueError("one block's text exceeds 2**31 - 1 UTF-16 units or UTF-8 bytes, the "
                         "most ML.NET can store; write fewer rows per block")
    with nogil:                 # the sizes, checking that every item is a ready str
        for i in range(n):
            if items[i] == NULL or not PyUnicode_Check(items[i]) \
                    or not idv_unicode_is_ready(items[i]):
                unchecked = True
                break
            bound += _utf8_bound(items[i])
    if unchecked:               # a non-str (raises) or a legacy str (made ready): again
        items = _object_items(values)
        bound = 0
        for i in range(n):
            bound += _utf8_bound(items[i])
    guess = _leb128_size(<uint64_t>bound)
    result = PyBytes_FromStringAndSize(NULL, 4 + 4 * n + guess + bound)
    out = <uint8_t *>PyBytes_AS_STRING(result)
    with nogil:
        memcpy(out, &count, 4)
        start = out + 4 + 4 * n + guess
        p = start
        for i in range(n):
            q = p
            p = _put_counted(items[i], p, &units)
            if units > _MAX_TEXT:
                too_long = True
                break
            if bounds > 0:
                at, m = q - start, p - q
                key = _key8(q, m)
                if i == 0:
                    lo, lo_n, hi, hi_n, lo_key, hi_key = at, m, at, m, key, key
                elif _keyed_compare(start, key, at, m, lo_key, lo, lo_n) < 0:
                    lo, lo_n, lo_key = at, m, key
                elif _keyed_compare(start, key, at, m, hi_key, hi, hi_n) > 0:
                    hi, hi_n, hi_key = at, m, key
            b32 = <int32_t>units
            memcpy(out + 4 + 4 * i, &b32, 4)
        total_bytes = p - start
    if too_long or total_bytes > _MAX_TEXT:
        raise ValueError("one block's text exceeds 2**31 - 1 UTF-16 units or UTF-8 bytes, the "
                         "most ML.NET can store; write fewer rows per block")
    lebn = _leb128_size(<uint64_t>total_bytes)
    with nogil:
        if lebn != guess:
            memmove(out + 4 + 4 * n + lebn, start, total_bytes)
        _put_leb128(out + 4 + 4 * n, <uint64_t>total_bytes)
    size = 4 + 4 * n + lebn + total_bytes
    if bounds > 0:
        start = out + 4 + 4 * n + lebn
        least = PyBytes_FromStringAndSize(<char *>start + lo, min(lo_n, bounds))
        greatest = PyBytes_FromStringAndSize(<char *>start + hi, min(hi_n, bounds))
    if size != 4 + 4 * n + guess + bound:
        Py_INCREF(result)          # shrunk() takes this reference over ...
        res = <PyObject *>result
        result = None              # ... as the only one
        result = shrunk(res, size)
    if bounds > 0:
        # every value ASCII: as many UTF-16 units as UTF-8 bytes (any other character has more)
        return result, least, greatest, units == total_bytes
    return result


# ---------------------------------------------------------------- text bounds (statistics)
# A block's least and greatest text, for its statistics (idv._storage.statistics): code point order,
# which is the order of the UTF-8 bytes, found without encoding or a Python comparison.

cdef int _compare_str(PyObject *a, PyObject *b) noexcept nogil:
    """<0, 0, >0 as str a sorts before, with or after str b (by code point)."""
    cdef Py_ssize_t na = PyUnicode_GET_LENGTH(a), nb = PyUnicode_GET_LENGTH(b), i
    cdef Py_ssize_t n = na if na < nb else nb
    cdef int ka = PyUnicode_KIND(a), kb = PyUnicode_KIND(b), r
    cdef const void *da = PyUnicode_DATA(a)
    cdef const void *db = PyUnicode_DATA(b)
    cdef uint32_t x, y
    if ka == 1 and kb == 1:
        r = memcmp(da, db, n) if n else 0
        if r:
            return r
    else:
        for i in range(n):
            x = _char_at(da, ka, i)
            y = _char_at(db, kb, i)
            if x != y:
                return -1 if x < y else 1
    return (na > nb) - (na < nb)


@cython.boundscheck(False)
@cython.wraparound(False)
def text_extremes(cnp.ndarray values):
    """(index of the least, index of the greatest, whether every one is ASCII) of a non-empty
    1-d object array of str, in code point order (the order of their UTF-8 bytes)."""
    cdef PyObject **items = _object_items(values)
    cdef Py_ssize_t i, n = values.shape[0], lo = 0, hi = 0
    cdef bint ascii
    if n == 0:
        raise ValueError("no text to bound")
    with nogil:
        ascii = PyUnicode_IS_ASCII(items[0])
        for i in range(1, n):
            if ascii and not PyUnicode_IS_ASCII(items[i]):
                ascii = False
            if _compare_str(items[i], items[lo]) < 0:
                lo = i
            elif _compare_str(items[i], items[hi]) > 0:
                hi = i
    return lo, hi, bool(ascii)


cdef int _check_ends(int64_t first, int64_t last, int64_t size) except -1:
    """ValueError when Arrow's text offsets start or end outside its `size` bytes."""
    if first < 0 or last > size:
        raise ValueError(f"text offsets [{first}, {last}] outside the {size} bytes of text")
    return 0


cdef void _extremes(const offset_t *o, Py_ssize_t n, const uint8_t *d, int64_t *lo_at,
                    int64_t *hi_at, bint *ascii) noexcept nogil:
    """The index of the least and of the greatest of the n >= 1 values d[o[i]:o[i + 1]] (byte
    order; the first of equals), and whether their bytes are all ASCII; the offsets were
    checked by the caller."""
    cdef Py_ssize_t i, lo = 0, hi = 0
    cdef int64_t a, na
    cdef uint64_t key, lo_key, hi_key
    ascii[0] = next_non_ascii(d, o[0], o[n]) == o[n]
    if o[n] > o[0]:                # else every value is empty: the first is both
        lo_key = hi_key = _key8(d + o[0], o[1] - o[0])
        for i in range(1, n):
            a = o[i]
            na = o[i + 1] - a
            key = _key8(d + a, na)
            if _keyed_compare(d, key, a, na, lo_key, o[lo], o[lo + 1] - o[lo]) < 0:
                lo, lo_key = i, key
            elif _keyed_compare(d, key, a, na, hi_key, o[hi], o[hi + 1] - o[hi]) > 0:
                hi, hi_key = i, key
    lo_at[0] = lo
    hi_at[0] = hi


cdef int _check_offsets(const offset_t[::1] offsets, Py_ssize_t size) except -1:
    """ValueError unless the n + 1 >= 2 `offsets` are non-decreasing within `size` bytes."""
    cdef Py_ssize_t i, n = offsets.shape[0] - 1
    if n < 1:
        raise ValueError("no text to bound")
    _check_ends(offsets[0], offsets[n], size)
    for i in range(n):
        if offsets[i + 1] < offsets[i]:
            raise ValueError(f"text offsets decrease at value {i}")
    return 0


@cython.boundscheck(False)
@cython.wraparound(False)
def utf8_extremes(const offset_t[::1] offsets, const uint8_t[::1] data):
    """(index of the least, index of the greatest, whether every byte is ASCII) of the n >= 1
    values of text in Arrow's layout (`offsets`: n + 1 non-decreasing byte offsets into
    `data`), in byte order."""
    cdef int64_t lo, hi
    cdef bint ascii
    _check_offsets(offsets, data.shape[0])
    with nogil:
        _extremes(&offsets[0], offsets.shape[0] - 1, &data[0] if data.shape[0] else NULL,
                  &lo, &hi, &ascii)
    return lo, hi, ascii


@cython.boundscheck(False)
@cython.wraparound(False)
def utf8_extremes_blocks(const offset_t[::1] offsets, const uint8_t[::1] data,
                         Py_ssize_t rows):
    """utf8_extremes of each run of `rows` values (the last may be shorter) in one pass
    without the GIL: (low, high, ascii), arrays of one entry a run, the indices int64 and
    counted from the first value of all."""
    cdef Py_ssize_t n = offsets.shape[0] - 1, nb, b
    cdef const uint8_t *d = &data[0] if data.shape[0] else NULL
    if rows < 1:
        raise ValueError(f"rows must be >= 1, not {rows}")
    _check_offsets(offsets, data.shape[0])
    nb = (n + rows - 1) // rows
    low = np.empty(nb, np.int64)
    high = np.empty(nb, np.int64)
    ascii = np.empty(nb, np.bool_)
    cdef int64_t[::1] lo_ = low, hi_ = high
    cdef uint8_t[::1] ascii_ = ascii.view(np.uint8)
    cdef bint a
    with nogil:
        for b in range(nb):
            _extremes(&offsets[b * rows], min(rows, n - b * rows), d, &lo_[b], &hi_[b], &a)
            lo_[b] += b * rows
            hi_[b] += b * rows
            ascii_[b] = a
    return low, high, ascii


# ---------------------------------------------------------------- numeric bounds
# One pass of C over a block of fixed-width numbers, the GIL released, for the statistics of
# idv._storage.statistics.item_block (which says what they mean): the count missing (NaN, or 0
# for keys) and the least and greatest of the others. The loops are branch-free so that the
# compiler vectorizes them; a zero bound is +0.0, whichever zero the block holds.
cdef extern from *:
    """
    #include <math.h>
    #define IDV_MIN(a, x) ((x) < (a) ? (x) : (a))
    #define IDV_MAX(b, x) ((x) > (b) ? (x) : (b))
    #define IDV_INT_BOUNDS(NAME, T, R, TMAX, TMIN)                                    \
    static Py_ssize_t NAME(const void *v, Py_ssize_t n, int zero_missing,            \
                           R *lo, R *hi) {                                            \
        const T *p = (const T *)v;                                                    \
        T a = TMAX, b = TMIN;                                                         \
        Py_ssize_t i, zeros = 0;                                                      \
        if (!zero_missing) {                                                          \
            for (i = 0; i < n; i++) { a = IDV_MIN(a, p[i]); b = IDV_MAX(b, p[i]); }    \
        } else {                                                                      \
            for (i = 0; i < n; i++) {                                                 \
                T x = p[i];                                                           \
                zeros += x == 0;                                                      \
                a = IDV_MIN(a, x == 0 ? TMAX : x);                                    \
                b = IDV_MAX(b, x == 0 ? TMIN : x);                                    \
            }                                                                         \
        }                                                                             \
        *lo = (R)a; *hi = (R)b;                                                       \
        return zeros;                                                                 \
    }
    /* floats: NaN is missing; x < a ? x : a leaves a NaN x out. SSE2 (every x86-64) takes
       4 or 2 lanes at once, as MINPS/MAXPS give exactly that rule; elsewhere one at a time. */
    #define IDV_FLOAT_TAIL(T)                                                         \
        for (; i < n; i++) {                                                          \
            T x = p[i];                                                               \
            nans += x != x;                                                           \
            a = IDV_MIN(a, x); b = IDV_MAX(b, x);                                     \
        }                                                                             \
        *lo = (double)a + 0.0; *hi = (double)b + 0.0;                                 \
        return nans;
    #if defined(__SSE2__) || defined(_M_X64)
    #include <emmintrin.h>
    #define IDV_SSE_BOUNDS(NAME, T, V, SFX, CT, CSUB, CADD, LANES)                          \
    static Py_ssize_t NAME(const void *v, Py_ssize_t n, int zero_missing,                   \
                           double *lo, double *hi) {                                        \
        const T *p = (const T *)v;                                                          \
        V a0 = _mm_set1_##SFX(INFINITY), a1 = a0, b0 = _mm_set1_##SFX(-INFINITY), b1 = b0;  \
        __m128i c0 = _mm_setzero_si128(), c1 = c0;                                          \
        T la[LANES], lb[LANES], a, b;                                                       \
        CT lc[LANES];                                                                       \
        Py_ssize_t i, k, nans = 0;                                                          \
        (void)zero_missing;                                                                 \
        for (i = 0; i + 2 * LANES <= n; ) {                                                 \
            Py_ssize_t end = n - i > ((Py_ssize_t)1 << 30) ? i + ((Py_ssize_t)1 << 30) : n; \
            for (; i + 2 * LANES <= end; i += 2 * LANES) {                                  \
                V x = _mm_loadu_##SFX(p + i), y = _mm_loadu_##SFX(p + i + LANES);           \
                c0 = CSUB(c0, _mm_cast##SFX##_si128(_mm_cmpunord_##SFX(x, x)));             \
                c1 = CSUB(c1, _mm_cast##SFX##_si128(_mm_cmpunord_##SFX(y, y)));             \
                a0 = _mm_min_##SFX(x, a0); a1 = _mm_min_##SFX(y, a1);                       \
                b0 = _mm_max_##SFX(x, b0); b1 = _mm_max_##SFX(y, b1);                       \
            }                                                                               \
            /* at most 2**28 NaNs a lane: added up before an int32 lane could wrap */       \
            _mm_storeu_si128((__m128i *)lc, CADD(c0, c1));                                  \
            for (k = 0; k < LANES; k++) nans += (Py_ssize_t)lc[k];                          \
            c0 = c1 = _mm_setzero_si128();                                                  \
        }                                                                                   \
        _mm_storeu_##SFX(la, _mm_min_##SFX(a0, a1));                                        \
        _mm_storeu_##SFX(lb, _mm_max_##SFX(b0, b1));                                        \
        a = la[0]; b = lb[0];                                                               \
        for (k = 1; k < LANES; k++) { a = IDV_MIN(a, la[k]); b = IDV_MAX(b, lb[k]); }       \
        IDV_FLOAT_TAIL(T)                                                                   \
    }
    IDV_SSE_BOUNDS(idv_bounds_f4, float, __m128, ps, int32_t, _mm_sub_epi32, _mm_add_epi32,
                   4)
    IDV_SSE_BOUNDS(idv_bounds_f8, double, __m128d, pd, int64_t, _mm_sub_epi64, _mm_add_epi64,
                   2)
    #else
    #define IDV_FLOAT_BOUNDS(NAME, T)                                                 \
    static Py_ssize_t NAME(const void *v, Py_ssize_t n, int zero_missing,            \
                           double *lo, double *hi) {                                  \
        const T *p = (const T *)v;                                                    \
        T a = (T)INFINITY, b = -(T)INFINITY;                                          \
        Py_ssize_t i = 0, nans = 0;                                                   \
        (void)zero_missing;                                                           \
        IDV_FLOAT_TAIL(T)                                                             \
    }
    IDV_FLOAT_BOUNDS(idv_bounds_f4, float)
    IDV_FLOAT_BOUNDS(idv_bounds_f8, double)
    #endif
    IDV_INT_BOUNDS(idv_bounds_i1, int8_t, int64_t, INT8_MAX, INT8_MIN)
    IDV_INT_BOUNDS(idv_bounds_i2, int16_t, int64_t, INT16_MAX, INT16_MIN)
    IDV_INT_BOUNDS(idv_bounds_i4, int32_t, int64_t, INT32_MAX, INT32_MIN)
    IDV_INT_BOUNDS(idv_bounds_i8, int64_t, int64_t, INT64_MAX, INT64_MIN)
    IDV_INT_BOUNDS(idv_bounds_u1, uint8_t, uint64_t, UINT8_MAX, 0)
    IDV_INT_BOUNDS(idv_bounds_u2, uint16_t, uint64_t, UINT16_MAX, 0)
    IDV_INT_BOUNDS(idv_bounds_u4, uint32_t, uint64_t, UINT32_MAX, 0)
    IDV_INT_BOUNDS(idv_bounds_u8, uint64_t, uint64_t, UINT64_MAX, 0)
    typedef union { int64_t i; uint64_t u; double f; } idv_bound;
    /* kind 0 signed, 1 unsigned, 2 float; size in bytes */
    static Py_ssize_t idv_bounds(int kind, int size, const void *v, Py_ssize_t n,
                                 int zero_missing, idv_bound *lo, idv_bound *hi) {
        if (kind == 2)
            return (size == 4 ? idv_bounds_f4 : idv_bounds_f8)(v, n, 0, &lo->f, &hi->f);
        if (kind == 1)
            return (size == 1 ? idv_bounds_u1 : size == 2 ? idv_bounds_u2 : size == 4 ?
                    idv_bounds_u4 : idv_bounds_u8)(v, n, zero_missing, &lo->u, &hi->u);
        return (size == 1 ? idv_bounds_i1 : size == 2 ? idv_bounds_i2 : size == 4 ?
                idv_bounds_i4 : idv_bounds_i8)(v, n, zero_missing, &lo->i, &hi->i);
    }
    """
    ctypedef union idv_bound:
        int64_t i
        uint64_t u
        double f
    Py_ssize_t idv_bounds(int kind, int size, const void *v, Py_ssize_t n, int zero_missing,
                          idv_bound *lo, idv_bound *hi) nogil

# A block smaller than this is bounded holding the GIL: its pass (about 1 µs per 4 KiB) costs
# less than handing the GIL to the writer's other threads and waiting to get it back.
cdef Py_ssize_t _NOGIL_BYTES = 256 << 10

cdef dict _BOUNDS_KIND = {"b": 0, "h": 0, "i": 0, "l": 0, "q": 0,
                          "B": 1, "H": 1, "I": 1, "L": 1, "Q": 1, "f": 2, "d": 2}


cdef bint _bounds_input(values, bint zero_missing, int *kind, int *size) except -1:
    """Whether numeric_bounds takes `values` (a C-contiguous numpy array of native integers
    or floats; floats never with `zero_missing`), and its kind and item size."""
    cdef cnp.ndarray arr
    if type(values) is not np.ndarray:
        return False
    arr = <cnp.ndarray>values
    if not arr.flags.c_contiguous or not arr.dtype.isnative:
        return False
    kind[0] = _BOUNDS_KIND.get(arr.dtype.char, -1)
    size[0] = arr.dtype.itemsize
    return kind[0] >= 0 and not (kind[0] == 2 and zero_missing)


def numeric_bounds(values, bint zero_missing=False):
    """(present, missing, low, high) of a C-contiguous array of native integers or floats
    (NaN missing; with `zero_missing`, 0 missing), low and high None when none is present;
    None for an array of any other kind (the caller then has numpy do it). The GIL is
    released for arrays of 256 KiB or more."""
    cdef Py_ssize_t n, missing
    cdef idv_bound lo, hi
    cdef const void *p
    cdef int kind, size
    if not _bounds_input(values, zero_missing, &kind, &size):
        return None
    n = (<cnp.ndarray>values).size
    p = cnp.PyArray_DATA(<cnp.ndarray>values)
    if n * size >= _NOGIL_BYTES:
        with nogil:
            missing = idv_bounds(kind, size, p, n, zero_missing, &lo, &hi)
    else:
        missing = idv_bounds(kind, size, p, n, zero_missing, &lo, &hi)
    if missing == n:
        return 0, missing, None, None
    if kind == 0:
        return n - missing, missing, lo.i, hi.i
    if kind == 1:
        return n - missing, missing, lo.u, hi.u
    return n - missing, missing, lo.f, hi.f


_BOUNDS_DTYPE = (np.dtype(np.int64), np.dtype(np.uint64), np.dtype(np.float64))


@cython.boundscheck(False)
@cython.wraparound(False)
def numeric_bounds_blocks(values, Py_ssize_t rows, bint zero_missing=False):
    """numeric_bounds of each run of `rows` items of `values` (the last run may be shorter),
    in one pass without the GIL: (missing, low, high), arrays of one entry a run, `missing`
    int64, the bounds int64, uint64 or float64 as numeric_bounds gives them (meaningless
    where every item of a run is missing); None for an array numeric_bounds does not take."""
    cdef int kind, size
    cdef Py_ssize_t n, nb, b, a
    cdef const uint8_t *p
    cdef idv_bound lo, hi
    if rows < 1:
        raise ValueError(f"rows must be >= 1, not {rows}")
    if not _bounds_input(values, zero_missing, &kind, &size):
        return None
    n = (<cnp.ndarray>values).size
    p = <const uint8_t *>cnp.PyArray_DATA(<cnp.ndarray>values)
    nb = (n + rows - 1) // rows
    missing = np.empty(nb, np.int64)
    low = np.empty(nb, np.uint64)
    high = np.empty(nb, np.uint64)
    cdef int64_t[::1] m_ = missing
    cdef uint64_t[::1] lo_ = low, hi_ = high
    with nogil:
        for b in range(nb):
            a = b * rows
            m_[b] = idv_bounds(kind, size, p + a * size, min(rows, n - a), zero_missing,
                               &lo, &hi)
            lo_[b] = lo.u          # the bits, read back below as the kind's type
            hi_[b] = hi.u
    return missing, low.view(_BOUNDS_DTYPE[kind]), high.view(_BOUNDS_DTYPE[kind])


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
def sub_microsecond_blocks(const int64_t[::1] ticks, Py_ssize_t rows):
    """Of each run of `rows` 100-ns counts (the last run may be shorter), in one pass without
    the GIL: (how many are no whole microsecond, the first such), int64 arrays of one entry a
    run, the first 0 where there is none: what a time column's block statistics keep, so that
    a read in microseconds can say what it floors without decoding the column."""
    cdef Py_ssize_t n = ticks.shape[0], nb, b, i, end
    cdef int64_t count, first
    if rows < 1:
        raise ValueError(f"rows must be >= 1, not {rows}")
    nb = (n + rows - 1) // rows
    counts = np.zeros(nb, np.int64)
    firsts = np.zeros(nb, np.int64)
    cdef int64_t[::1] c_ = counts, f_ = firsts
    with nogil:
        for b in range(nb):
            count = 0
            first = 0
            end = min(n, (b + 1) * rows)
            for i in range(b * rows, end):
                if ticks[i] % 10 != 0:
                    if count == 0:
                        first = ticks[i]
                    count += 1
            c_[b] = count
            f_[b] = first
    return counts, firsts


# ---------------------------------------------------------------- text from UTF-8 (Arrow)
# Arrow's string layout: one buffer of UTF-8 bytes and the byte offset of every value. Its bytes
# are the block's bytes as they are (valid UTF-8 is what a str would encode to); only the ends
# need counting in UTF-16 units, a 4-byte character counting two.

cdef extern from *:
    """
    #include <string.h>
    static inline unsigned long long idv_load64(const unsigned char *p) {
        unsigned long long v;
        memcpy(&v, p, 8);
        return v;
    }
    """
    unsigned long long idv_load64(const uint8_t *p) noexcept nogil


cdef int64_t _utf8_row(const uint8_t *d, int64_t p, int64_t e, bint *ascii) noexcept nogil:
    """UTF-16 units of the UTF-8 bytes d[p:e], or -1 when they are not valid UTF-8 (strict,
    as Python decodes: no overlong forms, no surrogates, nothing above U+10FFFF, no sequence
    cut at the end). Clears `ascii` at the first byte >= 0x80."""
    cdef int64_t units = e - p
    cdef uint8_t c, c1
    while p < e:
        while p + 8 <= e and (idv_load64(d + p) & 0x8080808080808080ULL) == 0:
            p += 8
        if p >= e:
            break
        c = d[p]
        if c < 0x80:
            p += 1
            continue
        ascii[0] = False
        if c < 0xC2:                    # a continuation byte, or an overlong 2-byte lead
            return -1
        if c < 0xE0:
            if p + 1 >= e or (d[p + 1] & 0xC0) != 0x80:
                return -1
            p += 2
            units -= 1                  # 2 bytes, 1 unit
            continue
        if c < 0xF0:
            if p + 2 >= e:
                return -1
            c1 = d[p + 1]
            if (c1 & 0xC0) != 0x80 or (d[p + 2] & 0xC0) != 0x80 \
                    or (c == 0xE0 and c1 < 0xA0) or (c == 0xED and c1 >= 0xA0):
                return -1               # cut, overlong, or a surrogate
            p += 3
            units -= 2                  # 3 bytes, 1 unit
            continue
        if c > 0xF4 or p + 3 >= e:
            return -1
        c1 = d[p + 1]
        if (c1 & 0xC0) != 0x80 or (d[p + 2] & 0xC0) != 0x80 or (d[p + 3] & 0xC0) != 0x80 \
                or (c == 0xF0 and c1 < 0x90) or (c == 0xF4 and c1 >= 0x90):
            return -1                   # cut, overlong, or above U+10FFFF
        p += 4
        units -= 2                      # 4 bytes, 2 units (a surrogate pair)
    return units


@cython.boundscheck(False)
@cython.wraparound(False)
def utf8_units(const offset_t[::1] offsets, const uint8_t[::1] data):
    """Check UTF-8 text in Arrow's layout (`offsets`: n + 1 byte offsets into `data`) and count
    what ML.NET counts: returns (units, bad). `units` is the UTF-16 units before each value and
    after the last (n + 1 int64 from 0), or None when every byte is ASCII (the units are then
    the byte offsets); `bad` is the first value that is not valid UTF-8, or -1. ValueError when
    the offsets are not non-decreasing within `data`. Non-decreasing offsets cover the bytes
    from the first to the last end to end: where those are all ASCII, no value is looked at
    alone (a few nanoseconds a value less)."""
    cdef Py_ssize_t n = offsets.shape[0] - 1, i, bad = -1
    cdef int64_t u, total = 0, size = data.shape[0]
    cdef bint ascii = True, broken = False, ordered = True
    cdef const uint8_t *d
    if n < 0:
        raise ValueError("text offsets need at least one entry")
    _check_ends(offsets[0], offsets[n], size)
    d = &data[0] if size else <const uint8_t *>NULL
    with nogil:
        for i in range(n):
            ordered &= offsets[i + 1] >= offsets[i]
        if ordered:
            ascii = next_non_ascii(d, offsets[0], offsets[n]) == offsets[n]
    if ordered and ascii:
        return None, -1
    ascii = True
    out = np.empty(n + 1, np.int64)
    cdef int64_t[::1] units = out
    with nogil:
        units[0] = 0
        for i in range(n):
            if offsets[i + 1] < offsets[i] or offsets[i + 1] > size:
                broken = True
                bad = i
                break
            u = _utf8_row(d, offsets[i], offsets[i + 1], &ascii)
            if u < 0:
                bad = i
                break
            total += u
            units[i + 1] = total
    if broken:
        raise ValueError(f"text offsets decrease or pass the end of the text at value {bad}")
    return (None if ascii else out), bad


@cython.boundscheck(False)
@cython.wraparound(False)
def encode_text_utf8(const offset_t[::1] offsets, const uint8_t[::1] data, units=None):
    """The TextSpan payload of n values in Arrow's layout, checked by utf8_units (`units` its
    result): int32 count, the int32 end of each value in UTF-16 units, the LEB128 byte count,
    and the bytes data[offsets[0]:offsets[n]] copied as they are."""
    cdef Py_ssize_t n = offsets.shape[0] - 1, i
    cdef const int64_t[::1] u
    cdef bint counted = units is not None       # else the units are the byte offsets
    cdef int64_t nbytes, first, total
    cdef int32_t count = <int32_t>n
    cdef int32_t b32
    cdef int lebn
    cdef uint8_t *p
    if n < 0:
        raise ValueError("text offsets need at least one entry")
    if counted:
        u = units
        if u.shape[0] != n + 1:
            raise ValueError("text offsets and units need n + 1 entries each")
        first, total = u[0], u[n] - u[0]
    else:
        first, total = offsets[0], offsets[n] - offsets[0]
    nbytes = offsets[n] - offsets[0]
    if offsets[0] < 0 or nbytes < 0 or offsets[n] > data.shape[0]:
        raise ValueError("text offsets outside the text")
    if n > (MAX_BLOCK_TEXT - 16) // 4 or nbytes > _MAX_TEXT or total > _MAX_TEXT:
        raise ValueError("one block's text exceeds 2**31 - 1 UTF-16 units or UTF-8 bytes, the "
                         "most ML.NET can store; write fewer rows per block")
    lebn = _leb128_size(<uint64_t>nbytes)
    result = PyBytes_FromStringAndSize(NULL, 4 + 4 * n + lebn + nbytes)
    p = <uint8_t *>PyBytes_AS_STRING(result)
    with nogil:
        memcpy(p, &count, 4)
        p += 4
        for i in range(n):
            b32 = <int32_t>((u[i + 1] if counted else offsets[i + 1]) - first)
            memcpy(p, &b32, 4)
            p += 4
        p = _put_leb128(p, <uint64_t>nbytes)
        if nbytes:
            memcpy(p, &data[offsets[0]], nbytes)
    return result


# ---------------------------------------------------------------- fixed-width, Boolean, dates
def encode_fixed(cnp.ndarray values):
    """Packed little-endian items (numbers, keys, DateTime/TimeSpan ticks, RowId): the array's
    own bytes, without a copy when it is contiguous."""
    if not values.flags.c_contiguous:
        values = np.ascontiguousarray(values)
    return values.reshape(-1).view(np.uint8)


def encode_bool(cnp.ndarray values):
    """1 bit per value, first value in the least significant bit; the last byte zero-padded."""
    return np.packbits(np.ascontiguousarray(values, dtype=np.bool_),
                       bitorder="little").tobytes()


def encode_dto(cnp.ndarray minutes, cnp.ndarray ticks):
    """DateTimeOffset: all int16 offset minutes, then all int64 clock-time ticks."""
    return (np.ascontiguousarray(minutes, dtype="<i2").tobytes()
            + np.ascontiguousarray(ticks, dtype="<i8").tobytes())


# ---------------------------------------------------------------- VBuffer
def encode_vbuffer(Py_ssize_t n, Py_ssize_t size, lengths, counts, indices, values_payload):
    """A VBuffer block: count, size (0: lengths follow), [lengths], counts (-1 dense), index
    count, indices, then the item codec's payload of every stored item. One output buffer,
    each part copied into it once."""
    cdef const uint8_t[::1] len_b = _i32_bytes(lengths) if size == 0 else _EMPTY
    cdef const uint8_t[::1] cnt_b = _i32_bytes(counts)
    cdef const uint8_t[::1] idx_b = _i32_bytes(indices)
    cdef const uint8_t[::1] val_b = _as_bytes_view(values_payload)
    cdef int32_t head[2]
    cdef int32_t nidx = <int32_t>(idx_b.shape[0] // 4)
    cdef Py_ssize_t total = 8 + len_b.shape[0] + cnt_b.shape[0] + 4 + idx_b.shape[0] \
        + val_b.shape[0]
    result = PyBytes_FromStringAndSize(NULL, total)
    cdef uint8_t *p = <uint8_t *>PyBytes_AS_STRING(result)
    head[0] = <int32_t>n
    head[1] = <int32_t>size
    with nogil:
        memcpy(p, head, 8)
        p = _put(p + 8, len_b)
        p = _put(p, cnt_b)
        memcpy(p, &nidx, 4)
        p = _put(p + 4, idx_b)
        _put(p, val_b)
    return result


cdef inline uint8_t *_put(uint8_t *p, const uint8_t[::1] part) noexcept nogil:
    """Copy `part` to `p`; the byte after it."""
    if part.shape[0]:
        memcpy(p, &part[0], part.shape[0])
    return p + part.shape[0]


_EMPTY = np.zeros(0, np.uint8)


cdef _i32_bytes(a):
    """An int array as contiguous little-endian int32 bytes (no copy when it already is)."""
    return np.ascontiguousarray(a, dtype="<i4").reshape(-1).view(np.uint8)


cdef _as_bytes_view(x):
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x).reshape(-1).view(np.uint8)
    return x


@cython.boundscheck(False)
@cython.wraparound(False)
def check_sparse_rows(const int64_t[::1] indptr, const int64_t[::1] indices, widths):
    """First bad row of CSR data, as (row, reason) or (-1, None): every row's indices must be
    strictly increasing (sorted, no duplicates) and in [0, width). `widths` is one vector
    length for all rows, or an int64 array with one per row."""
    cdef Py_ssize_t r, j, nrows = indptr.shape[0] - 1
    cdef int64_t prev, width = 0
    cdef int reason = 0
    cdef const int64_t[::1] per_row
    cdef bint each = not isinstance(widths, (int, np.integer))
    if each:
        per_row = np.ascontiguousarray(widths, dtype=np.int64)
        if per_row.shape[0] != nrows:
            raise ValueError(f"{per_row.shape[0]} vector lengths for {nrows} rows")
    else:
        width = widths
    with nogil:
        for r in range(nrows):
            if each:
                width = per_row[r]
            prev = -1
            for j in range(indptr[r], indptr[r + 1]):
                if indices[j] < 0 or indices[j] >= width:
                    reason = 2
                    break
                if indices[j] <= prev:
                    reason = 1
                    break
                prev = indices[j]
            if reason:
                break
    if reason == 1:
        return r, "indices not strictly increasing (unsorted or duplicated)"
    if reason == 2:
        return r, f"index {indices[j]} outside [0, {width})"
    return -1, None


# ---------------------------------------------------------------- ML.NET's size estimates
def fixed_estimate(items, Py_ssize_t itemsize):
    """Unsafe-type, DateTime, DateTimeOffset codecs: itemsize per item written so far."""
    return np.asarray(items, dtype=np.int64) * itemsize


def bool_estimate(items):
    """Boolean codec: 4 * (((n - 1) >> 4) + 1), i.e. 4 bytes per started group of 16."""
    n = np.asarray(items, dtype=np.int64)
    return 4 * (((n - 1) >> 4) + 1)


def text_estimate(items, units):
    """Text codec: 4 * (1 + entries) + UTF-16 units so far."""
    return 4 * (1 + np.asarray(items, dtype=np.int64)) + np.asarray(units, dtype=np.int64)


def vbuffer_estimate(rows, variable, sparse_indices, inner):
    """VBuffer codec: 4 * (2 + lengths + counts + 1 + indices) + the item codec's estimate;
    all arguments cumulative per row."""
    rows = np.asarray(rows, dtype=np.int64)
    structure = 2 + (rows if variable else 0) + rows + 1 + np.asarray(sparse_indices, np.int64)
    return 4 * structure + inner


# ---------------------------------------------------------------- DEFLATE (libdeflate)
# libdeflate's compressor, found in the `deflate` package's extension module (its wheel bundles
# libdeflate and exports the C API). Called through these pointers it compresses with the GIL
# released, so blocks compress in parallel threads.
# ---------------------------------------------------------------- output
cdef extern from *:
    """
    #if defined(__linux__)
    #include <fcntl.h>
    static int idv_start_writeback(int fd, long long offset, long long nbytes) {
        return sync_file_range(fd, (off64_t)offset, (off64_t)nbytes, SYNC_FILE_RANGE_WRITE);
    }
    #else
    static int idv_start_writeback(int fd, long long offset, long long nbytes) {
        (void)fd; (void)offset; (void)nbytes;
        return -1;
    }
    #endif
    """
    int idv_start_writeback(int fd, long long offset, long long nbytes) nogil


def start_writeback(int fd, long long offset, long long nbytes):
    """Ask the kernel to start writing a written range of a file to disk, without waiting
    (Linux sync_file_range). The final fsync then has little left to wait for. False where
    this is not available; never raises."""
    cdef int r
    with nogil:
        r = idv_start_writeback(fd, offset, nbytes)
    return r == 0
