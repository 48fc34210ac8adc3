# cython: language_level=3
"""Arrow's string view (16 bytes a string), written by the readers that make string_view
arrays: a block's strings as decoded (idv._codecs) and a filter's matches as taken
(idv._compare)."""
from libc.stdint cimport uint8_t


cdef extern from *:
    """
    #include <string.h>
    static inline void idv_view(unsigned char *v, const unsigned char *d, long long nd,
                                int start, int len, unsigned int buffer) {
        /* one Arrow string view (16 bytes): the length, then the string itself up to 12
           bytes (zero padded), else its first 4 bytes, its data buffer and its offset there */
        unsigned long long w0 = 0, w1 = 0, lo, hi;
        unsigned int head = 0;
        if (len > 12) {
            memcpy(&head, d + start, 4);
            lo = (unsigned int)len | ((unsigned long long)head << 32);
            hi = buffer | ((unsigned long long)(unsigned int)start << 32);
        } else {
            if (start + 16 <= nd) {      /* 16 bytes at once, the unused ones cleared */
                memcpy(&w0, d + start, 8);
                memcpy(&w1, d + start + 8, 8);
            } else {
                unsigned char t[16] = {0};
                memcpy(t, d + start, len);
                memcpy(&w0, t, 8);
                memcpy(&w1, t + 8, 8);
            }
            w0 &= len >= 8 ? ~0ULL : (1ULL << (8 * len)) - 1;
            w1 &= len > 8 ? (1ULL << (8 * (len - 8))) - 1 : 0ULL;
            lo = (unsigned int)len | (w0 << 32);
            hi = (w0 >> 32) | (w1 << 32);
        }
        memcpy(v, &lo, 8);
        memcpy(v + 8, &hi, 8);
    }
    """
    void idv_view(uint8_t *v, const uint8_t *d, long long nd, int start, int len,
                  unsigned int buffer) noexcept nogil
