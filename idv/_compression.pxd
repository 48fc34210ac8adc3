from libc.stdint cimport uint8_t, uint32_t

# zlib's CRC-32 by the fastest kernel bound (libdeflate's, ISA-L's, zlib's), without the GIL
cdef uint32_t crc32_bytes(const uint8_t *p, size_t n) noexcept nogil
