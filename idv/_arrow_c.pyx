# cython: language_level=3
"""Spans of one buffer as the chunks of one Arrow array, through the Arrow C stream interface
(the PyCapsule protocol: ``pa.chunked_array(Spans(...))``).

The uncompressed blocks of a number column of a memory-mapped file are its values as Arrow
lays them out; pyarrow's ``Array.from_buffers`` makes an array of each in a few microseconds
of Python, and a file has thousands of blocks. Here pyarrow's importer makes them all in one
call of C++, each chunk a view of its span. Every chunk, and the stream, holds the buffer
(pinned by one buffer export) until the last of them is released, from whichever thread.
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_New
from cpython.ref cimport Py_DECREF, Py_INCREF, PyObject
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

import numpy as np

cdef extern from *:
    """
    static long idv_arrow_refs_add(long *refs, long delta) {
        return __atomic_add_fetch(refs, delta, __ATOMIC_ACQ_REL);
    }
    """
    long idv_arrow_refs_add(long *refs, long delta) nogil

cdef extern from "Python.h":
    int Py_IsInitialized() nogil


# The Arrow C data and stream interfaces' structures (an ABI fixed by the Arrow format).
cdef struct ArrowSchema:
    const char *format
    const char *name
    const char *metadata
    int64_t flags
    int64_t n_children
    ArrowSchema **children
    ArrowSchema *dictionary
    void (*release)(ArrowSchema *) noexcept nogil
    void *private_data

cdef struct ArrowArray:
    int64_t length
    int64_t null_count
    int64_t offset
    int64_t n_buffers
    int64_t n_children
    const void **buffers
    ArrowArray **children
    ArrowArray *dictionary
    void (*release)(ArrowArray *) noexcept nogil
    void *private_data

cdef struct ArrowArrayStream:
    int (*get_schema)(ArrowArrayStream *, ArrowSchema *) noexcept nogil
    int (*get_next)(ArrowArrayStream *, ArrowArray *) noexcept nogil
    const char *(*get_last_error)(ArrowArrayStream *) noexcept nogil
    void (*release)(ArrowArrayStream *) noexcept nogil
    void *private_data

cdef int64_t _NULLABLE = 2        # ARROW_FLAG_NULLABLE
cdef int _ENOMEM = 12


# what a stream's chunks share: the pinned buffer (a reference to its Spans), the spans, and
# a count of the stream and chunks still alive
cdef struct Shared:
    long refs
    PyObject *owner
    const char *base
    int64_t count
    int64_t next
    int64_t *offsets
    int64_t *rows
    char format[2]

cdef struct Chunk:
    const void *buffers[2]
    Shared *shared


cdef void _unref(Shared *s) noexcept nogil:
    if idv_arrow_refs_add(&s.refs, -1) != 0:
        return
    if Py_IsInitialized():         # at exit, the buffer goes with the process
        with gil:
            Py_DECREF(<object>s.owner)
    free(s.offsets)
    free(s)


cdef void _release_schema(ArrowSchema *schema) noexcept nogil:
    free(schema.private_data)
    schema.release = NULL


cdef void _release_chunk(ArrowArray *array) noexcept nogil:
    cdef Chunk *chunk = <Chunk *>array.private_data
    _unref(chunk.shared)
    free(chunk)
    array.release = NULL


cdef int _get_schema(ArrowArrayStream *stream, ArrowSchema *out) noexcept nogil:
    cdef Shared *s = <Shared *>stream.private_data
    cdef char *fmt = <char *>malloc(2)
    if fmt == NULL:
        return _ENOMEM
    memcpy(fmt, s.format, 2)
    out.format = fmt
    out.name = ""
    out.metadata = NULL
    out.flags = _NULLABLE
    out.n_children = 0
    out.children = NULL
    out.dictionary = NULL
    out.release = _release_schema
    out.private_data = fmt
    return 0


cdef int _get_next(ArrowArrayStream *stream, ArrowArray *out) noexcept nogil:
    cdef Shared *s = <Shared *>stream.private_data
    cdef Chunk *chunk
    cdef int64_t k = s.next
    if k >= s.count:               # the end of the stream
        out.release = NULL
        return 0
    chunk = <Chunk *>malloc(sizeof(Chunk))
    if chunk == NULL:
        return _ENOMEM
    s.next = k + 1
    chunk.buffers[0] = NULL        # no validity bitmap: every value valid
    chunk.buffers[1] = s.base + s.offsets[k]
    chunk.shared = s
    idv_arrow_refs_add(&s.refs, 1)
    out.length = s.rows[k]
    out.null_count = 0
    out.offset = 0
    out.n_buffers = 2
    out.n_children = 0
    out.buffers = chunk.buffers
    out.children = NULL
    out.dictionary = NULL
    out.release = _release_chunk
    out.private_data = chunk
    return 0


cdef const char *_get_last_error(ArrowArrayStream *stream) noexcept nogil:
    return NULL


cdef void _release_stream(ArrowArrayStream *stream) noexcept nogil:
    _unref(<Shared *>stream.private_data)
    stream.release = NULL


cdef void _free_capsule(object capsule) noexcept:
    cdef ArrowArrayStream *stream = <ArrowArrayStream *>PyCapsule_GetPointer(
        capsule, "arrow_array_stream")
    if stream == NULL:
        return
    if stream.release != NULL:     # never handed to a consumer
        stream.release(stream)
    free(stream)


cdef class Spans:
    """Spans of `buffer` (any object with the buffer protocol, pinned while a chunk lives) as
    the chunks of one Arrow array of fixed-width values: span k starts at byte offsets[k]
    and holds rows[k] values of `itemsize` bytes, every one valid. `format`: the values'
    Arrow C format string (one character: idv._values.arrow_types.c_format)."""
    cdef Py_buffer view
    cdef bint pinned
    cdef object offsets, rows
    cdef bytes format

    def __cinit__(self, buffer, offsets, rows, int64_t itemsize, str format):
        PyObject_GetBuffer(buffer, &self.view, PyBUF_SIMPLE)
        self.pinned = True
        self.offsets = np.ascontiguousarray(offsets, np.int64)
        self.rows = np.ascontiguousarray(rows, np.int64)
        self.format = format.encode("ascii")
        if len(self.format) != 1 or itemsize < 1:
            raise ValueError(f"format {format!r} of {itemsize}-byte items")
        cdef const int64_t[::1] at = self.offsets
        cdef const int64_t[::1] n = self.rows
        cdef Py_ssize_t k
        cdef int64_t size = self.view.len
        if at.shape[0] != n.shape[0]:
            raise ValueError(f"{at.shape[0]} offsets, {n.shape[0]} rows")
        for k in range(at.shape[0]):
            if at[k] < 0 or at[k] > size or n[k] < 0 or n[k] > (size - at[k]) // itemsize:
                raise ValueError(f"span {k} ({n[k]} items at byte {at[k]}) lies outside "
                                 f"the buffer of {size} bytes")

    def __dealloc__(self):
        if self.pinned:
            PyBuffer_Release(&self.view)

    def __arrow_c_stream__(self, requested_schema=None):
        """A PyCapsule of an ArrowArrayStream of the spans, one array each (the requested
        schema is not applied: the consumer casts, as the protocol allows)."""
        cdef int64_t n = len(self.offsets)
        cdef const int64_t[::1] offsets = self.offsets
        cdef const int64_t[::1] rows = self.rows
        cdef ArrowArrayStream *stream = <ArrowArrayStream *>malloc(sizeof(ArrowArrayStream))
        cdef Shared *s = <Shared *>malloc(sizeof(Shared))
        cdef int64_t *spans = <int64_t *>malloc(max(2 * n, 1) * sizeof(int64_t))
        if stream == NULL or s == NULL or spans == NULL:
            free(stream)
            free(s)
            free(spans)
            raise MemoryError()
        if n:
            memcpy(spans, &offsets[0], n * sizeof(int64_t))
            memcpy(spans + n, &rows[0], n * sizeof(int64_t))
        s.refs = 1
        s.owner = <PyObject *>self
        Py_INCREF(self)
        s.base = <const char *>self.view.buf
        s.count, s.next = n, 0
        s.offsets, s.rows = spans, spans + n
        s.format[0], s.format[1] = self.format[0], 0
        stream.get_schema = _get_schema
        stream.get_next = _get_next
        stream.get_last_error = _get_last_error
        stream.release = _release_stream
        stream.private_data = s
        try:
            return PyCapsule_New(stream, "arrow_array_stream", _free_capsule)
        except BaseException:
            _release_stream(stream)
            free(stream)
            raise
