# cython: language_level=3
"""Block payload encoders for the writer (reference section 4), the inverse of idv._codecs.

Every function takes values already converted and checked by idv.writer (stored dtypes, little
endian, ticks for dates) and returns one codec payload as bytes or a contiguous byte view. The
text encoder measures and writes UTF-8 with the GIL released, counting boundaries in UTF-16
units as ML.NET does. The *_estimate functions reproduce ML.NET's GetCommitLengthEstimate, which
its saver uses to choose the rows per block (reference section 5.4).
"""
cimport cython
cimport numpy as cnp
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from cpython.ref cimport PyObject
from libc.stdint cimport uint8_t, uint16_t, uint32_t, int32_t, int64_t, uint64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy

import numpy as np

cnp.import_array()

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
    """
    int idv_unicode_ready(PyObject *o) except -1

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


cdef uint8_t *_put(PyObject *s, uint8_t *out) noexcept nogil:
    """Write one str as .NET's UTF-8 encoder does; returns the position after it."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(s), i = 0
    cdef int kind
    cdef const void *data
    cdef uint32_t c, c2
    if PyUnicode_IS_ASCII(s):
        memcpy(out, PyUnicode_DATA(s), n)
        return out + n
    kind = PyUnicode_KIND(s)
    data = PyUnicode_DATA(s)
    while i < n:
        c = _char_at(data, kind, i)
        i += 1
        if 0xD800 <= c < 0xE000:
            if _is_high(c) and i < n and _is_low(_char_at(data, kind, i)):
                c2 = _char_at(data, kind, i)
                i += 1
                c = 0x10000 + ((c - 0xD800) << 10) + (c2 - 0xDC00)
            else:
                c = 0xFFFD
        if c < 0x80:
            out[0] = <uint8_t>c
            out += 1
        elif c < 0x800:
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
    return out


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



@cython.boundscheck(False)
@cython.wraparound(False)
def encode_text(cnp.ndarray values):
    """The TextSpan payload of a 1-d object array of str: int32 count, int32 end boundaries in
    UTF-16 units, then a .NET string (LEB128 UTF-8 byte count, UTF-8 bytes)."""
    cdef PyObject **items = _object_items(values)
    cdef Py_ssize_t i, n = values.shape[0]
    cdef int64_t nb, nu, total_bytes = 0, total_units = 0
    cdef int32_t *bounds = <int32_t *>malloc((n + 1) * sizeof(int32_t))
    cdef int32_t count = <int32_t>n
    cdef bint too_long = False
    cdef int lebn
    cdef uint64_t v
    cdef uint8_t *out
    cdef uint8_t *p
    if bounds == NULL:
        raise MemoryError()
    try:
        with nogil:
            for i in range(n):
                _measure(items[i], &nb, &nu)
                total_bytes += nb
                total_units += nu
                if total_units > _MAX_TEXT or total_bytes > _MAX_TEXT:
                    too_long = True
                    break
                bounds[i] = <int32_t>total_units
        if too_long or n > (MAX_BLOCK_TEXT - 16) // 4:
            raise ValueError("one block's text exceeds 2**31 - 1 UTF-16 units or UTF-8 bytes, "
                             "the most ML.NET can store; write fewer rows per block")
        lebn = _leb128_size(<uint64_t>total_bytes)
        result = PyBytes_FromStringAndSize(NULL, 4 + 4 * n + lebn + total_bytes)
        out = <uint8_t *>PyBytes_AS_STRING(result)
        with nogil:
            memcpy(out, &count, 4)
            if n:
                memcpy(out + 4, bounds, 4 * n)
            p = out + 4 + 4 * n
            v = <uint64_t>total_bytes
            while v >= 0x80:
                p[0] = <uint8_t>((v & 0x7F) | 0x80)
                v >>= 7
                p += 1
            p[0] = <uint8_t>v
            p += 1
            for i in range(n):
                p = _put(items[i], p)
        return result
    finally:
        free(bounds)


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
    count, indices, then the item codec's payload of every stored item."""
    head = np.array([n, size], dtype="<i4").tobytes()
    parts = [head]
    if size == 0:
        parts.append(np.ascontiguousarray(lengths, dtype="<i4").tobytes())
    parts.append(np.ascontiguousarray(counts, dtype="<i4").tobytes())
    parts.append(np.array([len(indices)], dtype="<i4").tobytes())
    parts.append(np.ascontiguousarray(indices, dtype="<i4").tobytes())
    parts.append(bytes(values_payload))
    return b"".join(parts)


@cython.boundscheck(False)
@cython.wraparound(False)
def check_sparse_rows(const int64_t[::1] indptr, const int64_t[::1] indices, int64_t width):
    """First bad row of CSR data, as (row, reason) or (-1, None): every row's indices must be
    strictly increasing (sorted, no duplicates) and in [0, width)."""
    cdef Py_ssize_t r, j, nrows = indptr.shape[0] - 1
    cdef int64_t prev
    cdef int reason = 0
    with nogil:
        for r in range(nrows):
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
