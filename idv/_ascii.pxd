# cython: language_level=3
"""ASCII runs in UTF-8 bytes, for the modules that read and write Text (idv._codecs maps a
block's UTF-16 boundaries to byte ends across them, idv._encode skips checking text that is
all ASCII): a word at a time, no branch on the bytes while they stay ASCII."""
from libc.stdint cimport uint8_t, uint64_t
from libc.string cimport memcpy


cdef extern from *:
    """
    #if defined(_MSC_VER)
    #include <intrin.h>
    static inline int idv_ctz64(unsigned long long v) {
        unsigned long i; _BitScanForward64(&i, v); return (int)i;
    }
    #else
    static inline int idv_ctz64(unsigned long long v) { return __builtin_ctzll(v); }
    #endif
    """
    int idv_ctz64(uint64_t v) nogil     # v != 0: the number of its trailing zero bits


cdef inline Py_ssize_t next_non_ascii(const uint8_t *p, Py_ssize_t pos,
                                      Py_ssize_t n) noexcept nogil:
    """The position of the first byte >= 0x80 in p[pos:n], or n; 32 bytes at a time, then
    8, then 1."""
    cdef uint64_t w, w1, w2, w3
    while pos + 32 <= n:
        memcpy(&w, p + pos, 8)
        memcpy(&w1, p + pos + 8, 8)
        memcpy(&w2, p + pos + 16, 8)
        memcpy(&w3, p + pos + 24, 8)
        if (w | w1 | w2 | w3) & 0x8080808080808080ULL:
            break
        pos += 32
    while pos + 8 <= n:
        memcpy(&w, p + pos, 8)
        w &= 0x8080808080808080ULL
        if w:       # the first of its bytes with the high bit (the least significant first)
            return pos + (idv_ctz64(w) >> 3)
        pos += 8
    while pos < n and p[pos] < 0x80:
        pos += 1
    return pos
