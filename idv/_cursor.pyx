# cython: language_level=3
"""Bounds-checked little-endian reading: fixed-width integers, LEB128 and .NET strings.

Every read checks the remaining length first, so a malformed offset or count in a file turns
into an IdvFormatError carrying the absolute byte offset (``offset``), never an out-of-bounds
read.
"""
from libc.string cimport memcpy
from libc.stdint cimport uint8_t, int16_t, int32_t, int64_t, uint64_t

from idv.errors import IdvFormatError


cdef class Cursor:
    """Reads `buf` from `pos`. `base` is the file offset of buf[0], so errors carry the file
    offset where reading failed; None for bytes that are not a range of the file (codec
    parameters, a decompressed block), whose errors name `where` instead."""

    def __init__(self, const uint8_t[:] buf, Py_ssize_t pos=0, base=None, str where="",
                 end=None):
        self.buf = buf
        self.pos = pos
        self.in_file = base is not None
        self.base = base if base is not None else 0
        self.where = where
        self.end = buf.shape[0] if end is None else min(<Py_ssize_t>end, buf.shape[0])
        if pos < 0 or pos > self.end:
            self.fail("start position is outside the data")

    def fail(self, str message, at=None):
        """Raise IdvFormatError(message) at file offset `at` (default: the next byte's)."""
        where = f" ({self.where})" if self.where else ""
        offset = None
        if self.in_file:
            offset = self.base + self.pos if at is None else at
        raise IdvFormatError(f"{message}{where}", offset=offset)

    @property
    def offset(self):
        """Absolute offset of the next byte."""
        return self.base + self.pos

    @property
    def remaining(self):
        return self.end - self.pos

    cdef int need(self, Py_ssize_t n, str what) except -1:
        if n < 0 or n > self.end - self.pos:
            self.fail(f"truncated {what}: need {n} bytes, {self.end - self.pos} left")
        return 0

    cdef const uint8_t *_next(self, Py_ssize_t n, str what) except NULL:
        """The next `n` bytes (checked, as need()), which the cursor then moves past."""
        self.need(n, what)
        self.pos += n
        return &self.buf[self.pos - n]

    cpdef int u8(self, str what="byte") except -1:
        self.need(1, what)
        self.pos += 1
        return self.buf[self.pos - 1]

    cpdef int16_t i16(self, str what="int16") except? -1:
        cdef int16_t v
        memcpy(&v, self._next(2, what), 2)
        return v

    cpdef int32_t i32(self, str what="int32") except? -1:
        cdef int32_t v
        memcpy(&v, self._next(4, what), 4)
        return v

    cpdef int64_t i64(self, str what="int64") except? -1:
        cdef int64_t v
        memcpy(&v, self._next(8, what), 8)
        return v

    cpdef uint64_t u64(self, str what="uint64") except? 0:
        cdef uint64_t v
        memcpy(&v, self._next(8, what), 8)
        return v

    cpdef object leb128(self, str what="LEB128 integer"):
        """Unsigned LEB128 as ML.NET reads it: at most 10 bytes, the 10th only 0 or 1."""
        cdef uint64_t value = 0
        cdef int shift = 0
        cdef int b
        cdef Py_ssize_t start = self.pos
        while True:
            b = self.u8(what)
            if shift == 63 and b > 1:
                self.fail(f"{what} overflows 64 bits", self.base + start)
            value |= (<uint64_t>(b & 0x7F)) << shift
            if not (b & 0x80):
                return value
            shift += 7

    cpdef str string(self, str what="string"):
        """A .NET BinaryWriter string: LEB128 byte count, then UTF-8."""
        cdef Py_ssize_t start = self.pos
        n = self.leb128(what + " length")
        if n > self.end - self.pos:
            self.fail(f"truncated {what}: length {n}, {self.end - self.pos} bytes left",
                      self.base + start)
        raw = self.take(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            self.fail(f"invalid UTF-8 in {what}: {e.reason}", self.base + start)

    cpdef bytes take(self, Py_ssize_t n, str what="bytes"):
        self.need(n, what)
        self.pos += n
        return bytes(self.buf[self.pos - n:self.pos])


def encode_leb128(value) -> bytes:
    """Minimal unsigned LEB128, as ML.NET's writer emits it."""
    value = int(value)
    if value < 0:
        raise ValueError("LEB128 values are unsigned")
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode_string(str s) -> bytes:
    """A .NET BinaryWriter string: LEB128 UTF-8 byte count, then the bytes."""
    raw = s.encode("utf-8")
    return encode_leb128(len(raw)) + raw
