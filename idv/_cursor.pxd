from libc.stdint cimport uint8_t, int16_t, int32_t, int64_t, uint64_t

cdef class Cursor:
    cdef const uint8_t[:] buf
    cdef readonly Py_ssize_t pos
    cdef readonly Py_ssize_t end
    cdef readonly Py_ssize_t base
    cdef readonly bint in_file
    cdef readonly str where
    cdef int need(self, Py_ssize_t n, str what) except -1
    cdef const uint8_t *_next(self, Py_ssize_t n, str what) except NULL
    cpdef int u8(self, str what=*) except -1
    cpdef int16_t i16(self, str what=*) except? -1
    cpdef int32_t i32(self, str what=*) except? -1
    cpdef int64_t i64(self, str what=*) except? -1
    cpdef uint64_t u64(self, str what=*) except? 0
    cpdef object leb128(self, str what=*)
    cpdef str string(self, str what=*)
    cpdef bytes take(self, Py_ssize_t n, str what=*)
