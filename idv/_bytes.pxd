# cython: language_level=3
"""Bytes objects built in place by the Cython modules: allocated at the most a payload can
need, filled with the GIL released, then cut to what was used."""
from cpython.bytes cimport _PyBytes_Resize
from cpython.ref cimport PyObject, Py_DECREF


cdef inline object shrunk(PyObject *owned, Py_ssize_t size):
    """The bytes object `owned` cut to its first `size` bytes without a copy (the allocator may
    move it). It takes `owned`'s reference over, which must be the object's only one: the
    caller takes a reference of its own and drops its variable first. If the resize fails,
    `owned` is freed and the error raised."""
    _PyBytes_Resize(&owned, size)
    result = <object>owned
    Py_DECREF(result)              # the reference taken over; `result` holds its own
    return result
