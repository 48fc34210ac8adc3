# cython: language_level=3
"""numpy 2's StringDType arrays built straight from text in Arrow's layout (TextSpans: UTF-8
bytes and int32 byte offsets), with no Python str, through numpy's NpyString C API.

Compiled against numpy 2 only (setup.py skips it otherwise); idv._reader.column imports it when
``read(text="StringDType")`` asks for it.
"""
cimport numpy as cnp
from libc.stdint cimport int32_t

import numpy as np

cnp.import_array()

cdef extern from "numpy/ndarraytypes.h":
    ctypedef struct npy_packed_static_string:
        pass
    ctypedef struct npy_string_allocator:
        pass
    ctypedef struct PyArray_StringDTypeObject:
        pass

cdef extern from "numpy/arrayobject.h":
    int NpyString_pack(npy_string_allocator *allocator, npy_packed_static_string *packed,
                       const char *buf, size_t size) nogil
    npy_string_allocator *NpyString_acquire_allocator(
        const PyArray_StringDTypeObject *descr) nogil
    void NpyString_release_allocator(npy_string_allocator *allocator) nogil


def string_array(blocks, Py_ssize_t n):
    """A StringDType array of the n strings of `blocks` (TextSpans, in order; their offsets
    already checked against their data by the decoder)."""
    out = np.empty(n, np.dtypes.StringDType())
    cdef cnp.ndarray arr = out
    cdef char *dst = <char *>cnp.PyArray_DATA(arr)
    cdef Py_ssize_t itemsize = arr.itemsize
    cdef Py_ssize_t i, m, k = 0
    cdef const int32_t *off
    cdef const char *data
    cdef int failed = 0
    cdef cnp.ndarray offsets, text
    cdef npy_string_allocator *allocator = NpyString_acquire_allocator(
        <PyArray_StringDTypeObject *>cnp.PyArray_DESCR(arr))
    try:
        for spans in blocks:
            offsets = np.ascontiguousarray(spans.offsets, np.int32)
            text = np.ascontiguousarray(spans.data, np.uint8)
            m = offsets.shape[0] - 1
            if m < 0 or k + m > n:
                raise ValueError(f"text blocks hold more than {n} strings")
            off = <const int32_t *>cnp.PyArray_DATA(offsets)
            data = <const char *>cnp.PyArray_DATA(text)
            with nogil:
                for i in range(m):
                    if NpyString_pack(allocator, <npy_packed_static_string *>(dst + (k + i) *
                                                                              itemsize),
                                      data + off[i], off[i + 1] - off[i]) < 0:
                        failed = 1
                        break
            if failed:
                raise MemoryError("numpy could not allocate a StringDType string")
            k += m
        if k != n:
            raise ValueError(f"text blocks hold {k} strings, not {n}")
    finally:
        NpyString_release_allocator(allocator)
    return out
