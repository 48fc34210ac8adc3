# cython: language_level=3
"""Value codecs, one per ML.NET load name (reference section 4), and their registry.

`CODECS` maps a load name to a parser of its parameter bytes (the item codecs' entries are built
from idv.types.ITEM_TYPES); `resolve(name, params)` gives a Codec that decodes one block payload
of n items into numpy, and `codec_of(type)` is the (name, params) a type is written with.
Fixed-width codecs (`itemsize` > 0) store n * itemsize raw little-endian bytes, so the reader
can decompress straight into the output array and then call `fix()` for the few types whose
stored form differs from numpy's.
"""
cimport cython
cimport numpy as cnp
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from libc.stdint cimport uint8_t, int16_t, int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy

import struct

import numpy as np

from idv._ascii cimport idv_ctz64, next_non_ascii
from idv._views cimport idv_view
from idv._cursor cimport Cursor
from idv._toc import pack_codec, read_codec_head
from idv.errors import IdvFormatError, UnsupportedCodecError
from idv import types as T

cnp.import_array()

cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void *PyUnicode_DATA(object o)
    object PyUnicode_DecodeUTF8(const char *s, Py_ssize_t size, const char *errors)

cdef int64_t INT64_MIN = -9223372036854775807 - 1
cdef int64_t EPOCH = T.EPOCH_TICKS
cdef int64_t MAX_TICKS = T.MAX_DATETIME_TICKS
cdef int64_t TICKS_PER_MINUTE = T.TICKS_PER_MINUTE


cdef class Codec:
    """Decodes block payloads of one ML.NET type."""
    cdef readonly str load_name
    cdef readonly object type
    cdef readonly object dtype
    cdef readonly Py_ssize_t itemsize
    cdef readonly bytes params

    def __init__(self, str load_name, type_, dtype, Py_ssize_t itemsize=0, bytes params=b""):
        self.load_name = load_name
        self.type = type_
        self.dtype = np.dtype(dtype)
        self.itemsize = itemsize
        self.params = params

    def min_size(self, Py_ssize_t n):
        """The fewest payload bytes n items can take (checked before allocating anything)."""
        return n * self.itemsize

    def fix(self, out, bint in_vector=False):
        """Turn raw stored items (already in `out`) into their numpy form, in place."""
        return None

    cpdef Py_ssize_t decode_into(self, const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t n,
                                 object out, bint in_vector=False) except -1:
        """Decode n items from buf[pos:] into out; returns the position after them."""
        cdef Py_ssize_t size = n * self.itemsize
        if size > buf.shape[0] - pos:
            _short(self.load_name, n, size, buf.shape[0] - pos)
        dst = out.view(np.uint8).reshape(-1)
        if size:
            dst[:size] = buf[pos:pos + size]
        self.fix(out, in_vector)
        return pos + size

    def decode(self, const uint8_t[::1] buf, Py_ssize_t n, bint in_vector=False):
        """Decode a whole payload of n items; it must be consumed exactly."""
        out = np.empty(n, self.dtype)
        end = self.decode_into(buf, 0, n, out, in_vector)
        _exact(self.load_name, end, buf.shape[0])
        return out

    def __repr__(self):
        return f"<codec {self.load_name} -> {self.type}>"


def _short(name, n, need, have):
    raise IdvFormatError(f"{name} block too short: {n} items need {need} bytes, {have} left")


def _exact(name, end, size):
    if end != size:
        raise IdvFormatError(f"{name} block has {size - end} bytes more than its items need "
                             f"(used {end} of {size})")


cdef class DateTimeCodec(Codec):
    """int64 ticks since 0001-01-01 -> datetime64[100ns]; long.MinValue (legacy NA) -> 0."""

    def fix(self, out, bint in_vector=False):
        t = out.view(np.int64)
        t[t == INT64_MIN] = 0
        bad = (t < 0) | (t > MAX_TICKS)
        if bad.any():
            v = int(t[np.flatnonzero(bad)[0]])
            raise IdvFormatError(f"DateTime ticks {v} outside .NET's range [0, {MAX_TICKS}]")
        t -= EPOCH


cdef class TimeSpanCodec(Codec):
    """int64 ticks -> timedelta64[100ns]. ML.NET maps long.MinValue to 0 for scalar columns only;
    its bulk read of vector items keeps it (reference section 4.2)."""

    def fix(self, out, bint in_vector=False):
        if not in_vector:
            t = out.view(np.int64)
            t[t == INT64_MIN] = 0


# byte b's eight bits as eight bytes of 0 or 1, the least significant bit first
cdef uint64_t _BYTES_OF_BITS[256]


cdef void _fill_bytes_of_bits() noexcept:
    cdef int b, i
    for b in range(256):
        _BYTES_OF_BITS[b] = 0
        for i in range(8):
            _BYTES_OF_BITS[b] |= (<uint64_t>((b >> i) & 1)) << (8 * i)


_fill_bytes_of_bits()


cdef void _unpack(const uint8_t *bits, Py_ssize_t n, uint8_t *out) noexcept nogil:
    """out[i] = bit i of `bits` (least significant first), for i < n."""
    cdef Py_ssize_t k, i
    cdef uint64_t word
    for k in range(n // 8):
        word = _BYTES_OF_BITS[bits[k]]
        memcpy(out + 8 * k, &word, 8)
    for i in range(n - n % 8, n):
        out[i] = (bits[i >> 3] >> (i & 7)) & 1


def unpack_bits(const uint8_t[::1] bits, uint8_t[::1] out):
    """out[i] = bit i of `bits` (Boolean blocks' form, least significant bit first) for every
    i < len(out); ValueError when `bits` holds fewer."""
    cdef Py_ssize_t n = out.shape[0]
    if bits.shape[0] < (n + 7) // 8:
        raise ValueError(f"{bits.shape[0]} bytes hold fewer than {n} bits")
    if n:
        with nogil:
            _unpack(&bits[0], n, &out[0])


cdef class BooleanCodec(Codec):
    """1 bit per value, least significant bit first."""

    def min_size(self, Py_ssize_t n):
        return (n + 7) // 8

    cpdef Py_ssize_t decode_into(self, const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t n,
                                 object out, bint in_vector=False) except -1:
        cdef Py_ssize_t size = (n + 7) // 8
        if size > buf.shape[0] - pos:
            _short(self.load_name, n, size, buf.shape[0] - pos)
        unpack_bits(buf[pos:pos + size], out.view(np.uint8))
        return pos + size


cdef class DvBoolCodec(Codec):
    """Legacy 2 bits per value in little-endian int32 words: 00 false, 01 true, 10 NA (false)."""

    def min_size(self, Py_ssize_t n):
        return 4 * ((n + 15) // 16)

    cpdef Py_ssize_t decode_into(self, const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t n,
                                 object out, bint in_vector=False) except -1:
        # one pass over the bytes, no temporaries: value i is bits 2i, 2i+1 of its
        # little-endian word, byte i // 4 of the run
        cdef Py_ssize_t size = 4 * ((n + 15) // 16)
        cdef Py_ssize_t i, bad = -1
        cdef uint8_t v
        cdef const uint8_t *src
        cdef uint8_t[::1] dst
        if size > buf.shape[0] - pos:
            _short(self.load_name, n, size, buf.shape[0] - pos)
        if n == 0:
            return pos + size
        dst = out.view(np.uint8)
        if dst.shape[0] < n:
            raise ValueError("DvBool output too short")
        src = &buf[0] + pos
        with nogil:
            for i in range(n):
                v = (src[i >> 2] >> (2 * (i & 3))) & 3
                if v == 3:
                    bad = i
                    break
                dst[i] = v == 1
        if bad >= 0:
            raise IdvFormatError(f"DvBool value {bad} has the invalid bit pattern 11")
        return pos + size


cdef class DateTimeOffsetCodec(Codec):
    """n int16 offset minutes, then n int64 local clock ticks -> (utc, offset_minutes)."""

    def min_size(self, Py_ssize_t n):
        return 10 * n

    cpdef Py_ssize_t decode_into(self, const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t n,
                                 object out, bint in_vector=False) except -1:
        cdef Py_ssize_t size = 10 * n
        cdef int bad
        cdef uint8_t[::1] dst
        if size > buf.shape[0] - pos:
            _short(self.load_name, n, size, buf.shape[0] - pos)
        if n == 0:
            return pos + size
        # one pass over the bytes, no temporaries; a layout other than the packed one
        # (utc, offset_minutes) gets the values through one of it
        whole = out if out.dtype == T.DATETIMEOFFSET_DTYPE and out.flags.c_contiguous \
            else np.empty(n, T.DATETIMEOFFSET_DTYPE)
        dst = whole.view(np.uint8)
        if dst.shape[0] < 10 * n:
            raise ValueError("DateTimeOffset output too short")
        with nogil:
            bad = _dto_decode(&buf[0] + pos, n, &dst[0])
        if bad == 1:
            raise IdvFormatError("DateTimeOffset offset beyond +-14 hours")
        if bad == 2:
            raise IdvFormatError("DateTimeOffset ticks outside .NET's DateTime range")
        if whole is not out:
            out[...] = whole
        return pos + size


cdef int _dto_decode(const uint8_t *src, Py_ssize_t n, uint8_t *dst) noexcept nogil:
    """n int16 offset minutes then n int64 local ticks at `src` -> n packed (utc - EPOCH,
    offset_minutes) of 10 bytes at `dst`, legacy NAs (the least int16, int64) as 0. Returns
    0, or 1 where an offset lies beyond +-14 hours (before any other fault, as a check of
    every offset first would find it), else 2 where local or UTC ticks lie outside .NET's
    DateTime range."""
    cdef Py_ssize_t i
    cdef int16_t m
    cdef int64_t t, u
    cdef int offsets_bad = 0, ticks_bad = 0
    cdef const uint8_t *tp = src + 2 * n
    for i in range(n):
        memcpy(&m, src + 2 * i, 2)
        memcpy(&t, tp + 8 * i, 8)
        t = 0 if t == INT64_MIN else t
        m = 0 if m == -32768 else m
        offsets_bad |= (m < -840) | (m > 840)
        # unsigned: a wrap where numpy's would, never C's undefined overflow
        u = <int64_t>(<uint64_t>t - <uint64_t>(<int64_t>m * TICKS_PER_MINUTE))
        ticks_bad |= (t < 0) | (t > MAX_TICKS) | (u < 0) | (u > MAX_TICKS)
        u = <int64_t>(<uint64_t>u - <uint64_t>EPOCH)
        memcpy(dst + 10 * i, &u, 8)
        memcpy(dst + 10 * i + 8, &m, 2)
    return 1 if offsets_bad else 2 if ticks_bad else 0


cdef inline int32_t _i32(const uint8_t *p) noexcept nogil:
    cdef int32_t v
    memcpy(&v, p, 4)
    return v


cdef inline void _put_i32(uint8_t *p, int32_t v) noexcept nogil:
    memcpy(p, &v, 4)


# why _text_ends stopped (0: every boundary mapped)
cdef enum:
    TEXT_OK = 0
    TEXT_BACKWARDS = 1
    TEXT_BEYOND = 2
    TEXT_BAD_UTF8 = 3
    TEXT_SPLIT_PAIR = 4
    TEXT_EXTRA = 5


# UTF-8 a word (8 bytes) at a time, byte k of a word in its bits 8k..8k+7 (little-endian, as
# next_non_ascii reads them)
cdef extern from *:
    """
    #define IDV_HIGH 0x8080808080808080ULL
    #define IDV_ONES 0x0101010101010101ULL
    """
    const uint64_t HIGH "IDV_HIGH"     # the high bit of every lane
    const uint64_t ONES "IDV_ONES"     # 1 in every lane


cdef inline uint64_t _word(const uint8_t *p, Py_ssize_t r) noexcept nogil:
    """The word p[0:min(r, 8)], zero in the lanes past r."""
    cdef uint64_t w = 0
    if r >= 8:
        memcpy(&w, p, 8)
    else:
        memcpy(&w, p, r)
    return w


cdef inline uint64_t _zero_lanes(uint64_t x) noexcept nogil:
    """The high bit of each lane of x that is 0."""
    return ~(((x & 0x7F7F7F7F7F7F7F7FULL) + 0x7F7F7F7F7F7F7F7FULL) | x) & HIGH


cdef inline int _char_len(const uint8_t *p, Py_ssize_t pos, Py_ssize_t n) noexcept nogil:
    """The length of the UTF-8 character at p[pos] (pos < n), or 0 when it is not one: a bad
    lead, a missing continuation byte, an overlong form, a UTF-16 surrogate, or beyond
    U+10FFFF."""
    cdef int lead = p[pos], clen, k, second
    if lead < 0x80:
        return 1
    if 0xC2 <= lead < 0xE0:
        clen = 2
    elif 0xE0 <= lead < 0xF0:
        clen = 3
    elif 0xF0 <= lead < 0xF5:
        clen = 4
    else:
        return 0
    if clen > n - pos:
        return 0
    for k in range(1, clen):
        if (p[pos + k] & 0xC0) != 0x80:
            return 0
    second = p[pos + 1]
    if (lead == 0xE0 and second < 0xA0) or (lead == 0xED and second >= 0xA0) \
            or (lead == 0xF0 and second < 0x90) or (lead == 0xF4 and second >= 0x90):
        return 0
    return clen


cdef inline bint _word_valid(const uint8_t *p, Py_ssize_t pos, Py_ssize_t n, uint64_t w,
                             uint64_t *carry) noexcept nogil:
    """Whether the word w = p[pos:pos + 8] (zero-padded past n) holds valid UTF-8, given the
    continuation bytes `carry` that the leads of the word before require of it (updated to what
    this word's leads require of the next): the continuation bytes 10xxxxxx are exactly the
    bytes the leads 11xxxxxx require (one more for 111xxxxx, two more for 1111xxxx), no lead is
    C0, C1 or above F4, and the second bytes of E0, ED, F0 and F4 are in their narrower ranges
    (the rules of _char_len)."""
    cdef uint64_t l2 = w & (w << 1) & HIGH, l3, l4, nxt, b5, b45
    l3 = l2 & (w << 2)
    l4 = l3 & (w << 3)
    if (carry[0] | (l2 << 8) | (l3 << 16) | (l4 << 24)) != (w & ~(w << 1) & HIGH):
        return False
    carry[0] = (l2 >> 56) | (l3 >> 48) | (l4 >> 40)
    if _zero_lanes((w & 0xFEFEFEFEFEFEFEFEULL) ^ 0xC0C0C0C0C0C0C0C0ULL):      # C0 or C1
        return False
    # the leads with narrower second bytes: F0 and up, and E0 or ED (low nibble 0000 or 1101)
    if not l3 or not (l4 | (l3 & (~((w << 4) | (w << 5) | (w << 6) | (w << 7))
                                  | ((w << 4) & (w << 5) & ~(w << 6) & (w << 7))))):
        return True
    nxt = w >> 8                        # each lane's next byte
    if pos + 8 < n:
        nxt |= (<uint64_t>p[pos + 8]) << 56
    b5 = (nxt << 2) & HIGH              # a continuation byte >= A0
    b45 = b5 | ((nxt << 3) & HIGH)      # a continuation byte >= 90
    return not ((_zero_lanes(w ^ 0xE0E0E0E0E0E0E0E0ULL) & ~b5)
                | (_zero_lanes(w ^ 0xEDEDEDEDEDEDEDEDULL) & b5)
                | (_zero_lanes(w ^ 0xF0F0F0F0F0F0F0F0ULL) & ~b45)
                | (_zero_lanes(w ^ 0xF4F4F4F4F4F4F4F4ULL) & b45)
                | (l4 & ((w << 4) | ((w << 5) & ((w << 6) | (w << 7))))))     # F5 and up


cdef Py_ssize_t _utf8_valid_to(const uint8_t *p, Py_ssize_t pos, Py_ssize_t n) noexcept nogil:
    """The end of the valid UTF-8 in p[pos:n] (pos at a character's start): n, or where the
    first character that is not valid UTF-8 starts. Checked a word at a time (_word_valid);
    past a word that fails, from the last character start before it, one character at a
    time."""
    cdef uint64_t w, carry = 0
    cdef Py_ssize_t start = pos
    cdef int clen
    while pos < n:
        w = _word(p + pos, n - pos)
        start = pos if carry == 0 else start
        if not ((w & HIGH) | carry):
            pos = next_non_ascii(p, pos, n)
            continue
        if not _word_valid(p, pos, n, w, &carry):
            break
        pos += 8
    if pos >= n and carry == 0:
        return n
    while start < n:
        clen = _char_len(p, start, n)
        if clen == 0:
            break
        start += clen
    return start


cdef inline uint64_t _unit_lanes(uint64_t w) noexcept nogil:
    """Per byte (lane) of the valid UTF-8 in w, the UTF-16 units its character adds, counted at
    its first byte: 0 for a continuation byte 10xxxxxx, 2 for a 4-byte lead 11110xxx, else 1."""
    return ((((~w) | (w << 1)) & HIGH) >> 7) + ((w & (w << 1) & (w << 2) & (w << 3) & HIGH) >> 7)


cdef inline uint64_t _running_units(const uint8_t *p, Py_ssize_t r) noexcept nogil:
    """Lane k: the UTF-16 units of the valid UTF-8 p[0:k + 1], counted at each character's
    first byte (r > 0 bytes valid; the lanes past r add none)."""
    cdef uint64_t v = _unit_lanes(_word(p, r))
    if r < 8:
        v &= (<uint64_t>1 << (8 * r)) - 1
    return v * ONES


cdef inline int _to_word(const uint8_t *data, Py_ssize_t valid_to, Py_ssize_t nbytes,
                         int64_t target, Py_ssize_t *wpos, int64_t *wunits,
                         uint64_t *sums) noexcept nogil:
    """Move the word cursor (its position, the UTF-16 units before it, the running sums of its
    lanes' units) to the word where the running count of units reaches `target`: past the
    words before, 32 bytes at a time while it is far. TEXT_OK, or why it cannot: the valid
    UTF-8 ends first (TEXT_BEYOND at the end of the text, else TEXT_BAD_UTF8)."""
    cdef Py_ssize_t pos = wpos[0], r
    cdef int64_t units = wunits[0]
    cdef uint64_t v = sums[0], s, w0, w1, w2, w3
    while <int64_t>(v >> 56) < target - units:
        r = valid_to - pos
        units += v >> 56
        pos += 8 if r > 8 else r
        while valid_to - pos >= 32 and target - units > 32:
            w0 = _word(data + pos, 8)
            w1 = _word(data + pos + 8, 8)
            w2 = _word(data + pos + 16, 8)
            w3 = _word(data + pos + 24, 8)
            s = 32                  # ASCII: a unit a byte
            if (w0 | w1 | w2 | w3) & HIGH:
                s = ((_unit_lanes(w0) + _unit_lanes(w1) + _unit_lanes(w2) + _unit_lanes(w3))
                     * ONES) >> 56
                if <int64_t>s >= target - units:
                    break
            units += s
            pos += 32
        if pos >= valid_to:
            return TEXT_BEYOND if valid_to == nbytes else TEXT_BAD_UTF8
        v = _running_units(data + pos, valid_to - pos)
    wpos[0] = pos
    wunits[0] = units
    sums[0] = v
    return TEXT_OK


# the first bytes of a block sampled for how often its text leaves ASCII, and the share of
# bytes >= 0x80 below which it is walked from one such character to the next (about 10 ns a
# character) rather than counted a word at a time (about 0.5 ns a byte)
cdef enum:
    TEXT_SAMPLE = 4096
    SPARSE_NON_ASCII = 16       # fewer than 1 byte in 16


cdef inline int _end_at(const uint8_t *bounds, Py_ssize_t i, int32_t prev,
                        int32_t *end) noexcept nogil:
    """Entry i's UTF-16 end boundary into *end (the legacy NA bit cleared: reference section
    4.3); TEXT_BACKWARDS where it goes below `prev`, the entry before's, or an NA entry's is
    not that one."""
    cdef int32_t b = _i32(bounds + 4 * i)
    end[0] = b & 0x7FFFFFFF
    if (b >= 0 and end[0] < prev) or (b < 0 and end[0] != prev):
        return TEXT_BACKWARDS
    return TEXT_OK


cdef int _text_ends(const uint8_t *bounds, Py_ssize_t n, const uint8_t *data, Py_ssize_t nbytes,
                    uint8_t *out, Py_ssize_t *where) noexcept nogil:
    """Map the n UTF-16 end boundaries at `bounds` to byte ends in the UTF-8 `data` (as
    _text_ends_words says): text whose first TEXT_SAMPLE bytes are rarely beyond ASCII (under
    1 in SPARSE_NON_ASCII, none included: all-ASCII text takes the walk's fast path) walked
    from one such character to the next (_text_ends_walk), other text a word at a time
    (_text_ends_words). Both give the same ends and errors."""
    cdef Py_ssize_t pos = 0, m = nbytes if nbytes < TEXT_SAMPLE else TEXT_SAMPLE
    cdef Py_ssize_t high = 0
    cdef uint64_t w
    while pos < m:
        w = (_word(data + pos, m - pos) >> 7) & ONES
        high += <Py_ssize_t>((w * ONES) >> 56)
        pos += 8
    if high == 0 or high * SPARSE_NON_ASCII < m:
        return _text_ends_walk(bounds, n, data, nbytes, out, where)
    return _text_ends_words(bounds, n, data, nbytes, out, where)


cdef int _text_ends_walk(const uint8_t *bounds, Py_ssize_t n, const uint8_t *data,
                         Py_ssize_t nbytes, uint8_t *out, Py_ssize_t *where) noexcept nogil:
    """_text_ends from one non-ASCII character to the next (ASCII runs skipped a word at a
    time; each character validated as it is met): for text where they are rare.

    Map the n UTF-16 end boundaries at `bounds` to byte ends in the UTF-8 `data`, written as
    int32 at out + 4 * i (out may be bounds itself: each boundary is read before its slot is
    written), validating the UTF-8 (shortest forms, no surrogates, at most U+10FFFF) and the
    rules of reference section 4.3 as it goes. Returns TEXT_OK or why it stopped; `where` gets
    the entry (for TEXT_EXTRA: the bytes beyond the last boundary)."""
    cdef Py_ssize_t i, bpos = 0, k, ascii_to, take
    cdef int32_t bm, prev = 0
    cdef int64_t units = 0
    cdef int lead, clen, cunits, second
    ascii_to = next_non_ascii(data, 0, nbytes)      # data[bpos:ascii_to] is ASCII
    if ascii_to == nbytes:
        # every byte one UTF-16 unit: the boundaries are the byte ends
        for i in range(n):
            if _end_at(bounds, i, prev, &bm) != TEXT_OK:
                where[0] = i
                return TEXT_BACKWARDS
            if bm > nbytes:
                where[0] = i
                return TEXT_BEYOND
            prev = bm
            _put_i32(out + 4 * i, bm)
        if prev != nbytes:
            where[0] = nbytes - prev
            return TEXT_EXTRA
        return TEXT_OK
    for i in range(n):
        where[0] = i
        if _end_at(bounds, i, prev, &bm) != TEXT_OK:
            return TEXT_BACKWARDS
        prev = bm
        while units < bm:
            if bpos < ascii_to:         # ASCII: one unit a byte, as many as the entry takes
                take = min(bm - units, ascii_to - bpos)
                bpos += take
                units += take
                continue
            if bpos >= nbytes:
                return TEXT_BEYOND
            lead = data[bpos]           # >= 0x80: a multi-byte sequence
            if 0xC2 <= lead < 0xE0:
                clen = 2
                cunits = 1
            elif 0xE0 <= lead < 0xF0:
                clen = 3
                cunits = 1
            elif 0xF0 <= lead < 0xF5:
                clen = 4
                cunits = 2
            else:
                return TEXT_BAD_UTF8
            if clen > nbytes - bpos:
                return TEXT_BAD_UTF8
            for k in range(1, clen):
                if (data[bpos + k] & 0xC0) != 0x80:
                    return TEXT_BAD_UTF8
            second = data[bpos + 1]
            # overlong forms, UTF-16 surrogates, beyond U+10FFFF
            if (lead == 0xE0 and second < 0xA0) or (lead == 0xED and second >= 0xA0) \
                    or (lead == 0xF0 and second < 0x90) or (lead == 0xF4 and second >= 0x90):
                return TEXT_BAD_UTF8
            bpos += clen
            units += cunits
            ascii_to = next_non_ascii(data, bpos, nbytes)
        if units != bm:
            return TEXT_SPLIT_PAIR
        _put_i32(out + 4 * i, <int32_t>bpos)
    if bpos != nbytes:
        where[0] = nbytes - bpos
        return TEXT_EXTRA
    return TEXT_OK


cdef int _text_ends_words(const uint8_t *bounds, Py_ssize_t n, const uint8_t *data,
                          Py_ssize_t nbytes, uint8_t *out, Py_ssize_t *where) noexcept nogil:
    """Map the n UTF-16 end boundaries at `bounds` to byte ends in the UTF-8 `data`, written as
    int32 at out + 4 * i (out may be bounds itself: each boundary is read before its slot is
    written), validating the UTF-8 (shortest forms, no surrogates, at most U+10FFFF) and the
    rules of reference section 4.3. Returns TEXT_OK or why it stopped; `where` gets the entry
    (for TEXT_EXTRA: the bytes beyond the last boundary). Invalid UTF-8 is reported for the
    entry that reaches it: bytes past the last boundary are only extra.

    The text (not all ASCII: _text_ends sends that to the walk) is read a word at a time:
    each byte's count of UTF-16 units (_unit_lanes) summed across the word's lanes; a boundary
    ends with the character whose lead is the first lane where the sum reaches it."""
    cdef Py_ssize_t i, k, end = 0, wpos = 0, valid_to
    cdef int32_t bm, prev = 0
    cdef int64_t wunits = 0, need
    cdef uint64_t sums = 0, hit
    cdef uint8_t lead
    cdef int status
    valid_to = _utf8_valid_to(data, next_non_ascii(data, 0, nbytes), nbytes)
    sums = _running_units(data, valid_to)
    for i in range(n):
        where[0] = i
        if _end_at(bounds, i, prev, &bm) != TEXT_OK:
            return TEXT_BACKWARDS
        if bm != prev:
            need = bm - wunits
            if need > <int64_t>(sums >> 56):
                status = _to_word(data, valid_to, nbytes, bm, &wpos, &wunits, &sums)
                if status != TEXT_OK:
                    return status
                need = bm - wunits
            # 1 <= need <= 16: the first lane whose running sum reaches it
            hit = ((sums | HIGH) - <uint64_t>need * ONES) & HIGH
            k = idv_ctz64(hit) >> 3
            if <int64_t>((sums >> (8 * k)) & 0xFF) != need:      # 1 over: a 4-byte lead
                return TEXT_SPLIT_PAIR
            lead = data[wpos + k]           # valid UTF-8: its length by its lead alone
            end = wpos + k + 1 + (lead >= 0xC0) + (lead >= 0xE0) + (lead >= 0xF0)
        prev = bm
        _put_i32(out + 4 * i, <int32_t>end)
    if end != nbytes:
        where[0] = nbytes - end
        return TEXT_EXTRA
    return TEXT_OK


def _text_error(int status, Py_ssize_t where):
    if status == TEXT_BACKWARDS:
        raise IdvFormatError(f"TextSpan boundary {where} goes backwards")
    if status == TEXT_BEYOND:
        raise IdvFormatError(f"TextSpan boundary {where} lies beyond the text")
    if status == TEXT_BAD_UTF8:
        raise IdvFormatError(f"invalid UTF-8 in TextSpan entry {where}")
    if status == TEXT_SPLIT_PAIR:
        raise IdvFormatError(f"TextSpan boundary {where} splits a surrogate pair")
    raise IdvFormatError(f"TextSpan text has {where} bytes beyond the last boundary")


cdef Py_ssize_t _text_head(str name, const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t n,
                           Py_ssize_t *nbytes) except -1:
    """Check a TextSpan payload's entry count and read its UTF-8 byte count: the position of
    the UTF-8 bytes (the boundaries are at pos + 4), their count in `nbytes`."""
    cdef Py_ssize_t size = buf.shape[0], p
    cdef uint64_t length = 0
    cdef int shift = 0, lead
    if n < 0 or 4 + 4 * n > size - pos:
        _short(name, n, 4 + 4 * n, size - pos)
    if _i32(&buf[0] + pos) != n:
        raise IdvFormatError(f"TextSpan block holds {_i32(&buf[0] + pos)} entries, "
                             f"expected {n}")
    p = pos + 4 + 4 * n
    # the string's UTF-8 byte count: a 7-bit varint of at most 5 bytes
    while True:
        if p >= size:
            _short(name, n, p + 1 - pos, size - pos)
        lead = buf[p]
        p += 1
        length |= (<uint64_t>(lead & 0x7F)) << shift
        if not (lead & 0x80):
            break
        shift += 7
        if shift > 28:
            raise IdvFormatError("TextSpan string length is not a valid 7-bit integer")
    if length > <uint64_t>(size - p):
        _short(name, n, p - pos + <Py_ssize_t>length, size - pos)
    if length > 0x7FFFFFFF:
        raise IdvFormatError(f"TextSpan text of {length} bytes is beyond 2^31 - 1")
    nbytes[0] = <Py_ssize_t>length
    return p


cdef class TextCodec(Codec):
    """int32 count, count end boundaries in UTF-16 units, then one .NET string of UTF-8.

    A boundary with the high bit set is the 1.1.1.5 NA marker and reads as "", as ML.NET does.
    """

    def min_size(self, Py_ssize_t n):
        return 5 + 4 * n

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cpdef Py_ssize_t decode_into(self, const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t n,
                                 object out, bint in_vector=False) except -1:
        cdef Py_ssize_t p, nbytes = 0, i, start, where = 0
        cdef int status
        cdef int32_t prev, bm, stop
        cdef Py_ssize_t k
        cdef const uint8_t *data
        cdef const uint8_t *bounds
        cdef uint8_t *ends
        cdef PyObject **slots
        p = _text_head(self.load_name, buf, pos, n, &nbytes)
        if not (isinstance(out, np.ndarray) and out.dtype == object and out.ndim == 1
                and out.shape[0] >= n and out.flags.c_contiguous):
            raise TypeError("text output must be a contiguous object array")
        bounds = &buf[0] + pos + 4
        data = &buf[0] + p
        ends = <uint8_t *>malloc(4 * n + 4)
        if ends == NULL:
            raise MemoryError()
        try:
            with nogil:
                status = _text_ends(bounds, n, data, nbytes, ends, &where)
            if status != TEXT_OK:
                _text_error(status, where)
            slots = <PyObject **>cnp.PyArray_DATA(out)
            start = 0
            prev = 0
            try:
                for i in range(n):
                    bm = _i32(bounds + 4 * i) & 0x7FFFFFFF
                    stop = _i32(ends + 4 * i)
                    k = stop - start
                    if k == bm - prev:      # as many bytes as UTF-16 units: all ASCII
                        s = PyUnicode_New(k, 127)
                        memcpy(PyUnicode_DATA(s), data + start, k)
                    else:
                        s = PyUnicode_DecodeUTF8(<const char *>data + start, k, "strict")
                    prev = bm
                    start = stop
                    Py_XDECREF(slots[i])
                    Py_INCREF(s)
                    slots[i] = <PyObject *>s
            except UnicodeDecodeError as e:
                raise IdvFormatError(f"invalid UTF-8 in TextSpan text: {e.reason}") from None
        finally:
            free(ends)
        return p + nbytes

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def arrow_at(self, uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t n):
        """Turn the n-entry payload at buf[pos:] into Arrow's string layout in place, without
        Python strings: its entry count and UTF-16 boundaries become n + 1 int32 byte offsets
        at buf[pos:pos + 4 * (n + 1)] into the UTF-8 bytes, which stay where they are (and are
        validated). Returns (offsets, data, end): numpy views of buf, and the position after
        the payload. The GIL is released while the boundaries are mapped."""
        cdef Py_ssize_t p, nbytes = 0, where = 0
        cdef int status
        cdef uint8_t *base
        p = _text_head(self.load_name, buf, pos, n, &nbytes)
        base = &buf[0]
        with nogil:
            status = _text_ends(base + pos + 4, n, base + p, nbytes, base + pos + 4, &where)
        if status != TEXT_OK:
            _text_error(status, where)
        _put_i32(base + pos, 0)
        offsets = np.frombuffer(buf, np.int32, n + 1, pos)
        data = np.frombuffer(buf, np.uint8, nbytes, p)
        return offsets, data, p + nbytes


cdef class KeyCodec(Codec):
    """Key2 (and legacy Key): the inner unsigned codec's payload; 0 = missing."""
    cdef readonly Codec inner

    def __init__(self, str load_name, Codec inner, count, bytes params, kmin=0):
        Codec.__init__(self, load_name, T.Key(inner.type, count, min=kmin), inner.dtype,
                       inner.itemsize, params)
        self.inner = inner


class VectorBlock:
    """A decoded VBuffer block: per row a length and a count (-1 dense), sparse indices, and
    the concatenated stored items (dense rows: length items; sparse rows: count items)."""

    __slots__ = ("lengths", "counts", "indices", "values")

    def __init__(self, lengths, counts, indices, values):
        self.lengths = lengths
        self.counts = counts
        self.indices = indices
        self.values = values

    def __len__(self):
        return len(self.lengths)

    @property
    def all_dense(self):
        return bool((self.counts < 0).all())


cdef class VBufferCodec(Codec):
    """Vectors: counts, optional lengths, sparse indices, then one item-codec block."""
    cdef readonly Codec item

    def __init__(self, Codec item, dims, bytes params):
        Codec.__init__(self, "VBuffer", T.Vector(item.type, *dims), item.dtype, 0, params)
        self.item = item

    def min_size(self, Py_ssize_t n):
        return 12 + 4 * n

    def decode(self, const uint8_t[::1] buf, Py_ssize_t n, bint in_vector=False,
               reserve=None):
        """The n vectors of a payload (a VectorBlock). `reserve`: called with the number of
        items before they are allocated (a reader counts them against its memory limit)."""
        block, end = self.decode_at(buf, 0, n, reserve)
        _exact("VBuffer", end, buf.shape[0])
        return block

    def decode_at(self, const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t n, reserve=None):
        lengths, counts, indices, p, total = self.layout_at(buf, pos, n)
        if reserve is not None:
            reserve(total)
        values = np.empty(total, self.item.dtype)
        end = self.item.decode_into(buf, p, total, values, True)
        return VectorBlock(lengths, counts.astype(np.int32), indices, values), end

    def layout_at(self, const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t n):
        """The n vectors' layout at buf[pos:], checked: (lengths, counts, indices, position of
        the item block, its item count)."""
        cdef Cursor c = Cursor(buf, pos, None, "VBuffer block")
        cdef Py_ssize_t typesize = self.type.size
        nvec = c.i32("vector count")
        if nvec != n:
            c.fail(f"VBuffer block holds {nvec} vectors, expected {n}")
        size = c.i32("vector size")
        if typesize and size != typesize:
            c.fail(f"VBuffer block size {size} differs from the type's {typesize}")
        if size < 0:
            c.fail(f"negative vector size {size}")
        if size == 0:
            c.need(4 * n, "vector lengths")
            lengths = np.frombuffer(buf, "<i4", n, c.pos).astype(np.int64)
            c.pos += 4 * n
            if (lengths < 0).any():
                c.fail("negative vector length")
        else:
            lengths = np.full(n, size, np.int64)
        c.need(4 * n, "vector counts")
        counts = np.frombuffer(buf, "<i4", n, c.pos).astype(np.int64)
        c.pos += 4 * n
        dense = counts < 0
        if (counts < -1).any() or (counts[~dense] >= lengths[~dense]).any():
            c.fail("invalid sparse count (must be -1 or in [0, length))")
        nsparse = int(counts[~dense].sum())
        nidx = c.i32("index count")
        if nidx != nsparse:
            c.fail(f"index count {nidx} differs from the sum of sparse counts {nsparse}")
        c.need(4 * nidx, "sparse indices")
        indices = np.frombuffer(buf, "<i4", nidx, c.pos).copy()
        c.pos += 4 * nidx
        if nidx:
            per_row = np.where(dense, 0, counts)
            row = np.repeat(np.arange(n), per_row)
            if ((indices < 0) | (indices >= lengths[row])).any():
                c.fail("sparse index out of range")
            firsts = np.zeros(nidx, np.bool_)
            firsts[np.cumsum(per_row)[per_row > 0] - per_row[per_row > 0]] = True
            if ((np.diff(indices, prepend=-1) <= 0) & ~firsts).any():
                c.fail("unsorted sparse indices (must be strictly increasing)")
        total = int(lengths[dense].sum()) + nsparse
        c.need(self.item.min_size(total), "vector values")
        return lengths, counts, indices, c.pos, total


class TextSpans:
    """Text in Arrow's string layout: ``offsets`` (n + 1 int32 byte offsets) into ``data``
    (the UTF-8 bytes), as TextCodec.arrow_at leaves a block's payload."""

    __slots__ = ("offsets", "data")

    def __init__(self, offsets, data):
        self.offsets = offsets
        self.data = data

    def __len__(self):
        return len(self.offsets) - 1


@cython.boundscheck(False)      # i + 1 < offsets.shape[0], each span checked within `data`
@cython.wraparound(False)
def string_views(const int32_t[::1] offsets, const uint8_t[::1] data, uint8_t[::1] out,
                 uint32_t buffer=0):
    """Arrow's string views (16 bytes a string, written to `out`: pa.string_view's buffer 1)
    of the strings ``data[offsets[i]:offsets[i + 1]]``, Arrow's string layout (a TextSpans):
    the strings of 12 bytes or fewer held in their views, the longer ones pointing into
    `data`, which becomes the array's data buffer number `buffer` as it is (nothing copied).
    What polars takes as it is; made in the thread that decoded the block, rather than by a
    cast of every string afterwards. Returns how many point into `data` (0: the array needs
    no data buffer for them). ValueError where offsets decrease or point outside `data`, or
    `out` is short."""
    cdef Py_ssize_t n = max(offsets.shape[0] - 1, 0), i = 0, longer = 0
    cdef long long nd = data.shape[0]
    cdef int32_t a, b
    cdef int bad = 0
    cdef const uint8_t *d = &data[0] if nd else <const uint8_t *>""
    if out.shape[0] < 16 * n:
        raise ValueError(f"room for {out.shape[0] // 16} string views, not {n}")
    if n == 0:
        return 0
    with nogil:
        for i in range(n):
            a, b = offsets[i], offsets[i + 1]
            if a < 0 or b < a or b > nd:
                bad = 1
                break
            idv_view(&out[16 * i], d, nd, a, b - a, buffer)
            longer += b - a > 12
    if bad:
        raise ValueError(f"string offsets decrease or point outside the {nd} bytes of text "
                         f"(string {i})")
    return longer


def check_end(str name, Py_ssize_t end, Py_ssize_t size, Py_ssize_t n):
    """A block payload of n items must be used exactly (`end`: where its items stop)."""
    if end != size:
        raise IdvFormatError(f"{name} block has {size - end} bytes more than its {n} items "
                             f"need")


def arrow_text_block(Codec codec, uint8_t[::1] buf, Py_ssize_t n):
    """A whole block payload of n rows of a Text column (a TextSpans) or of a vector-of-Text
    column (a VectorBlock whose values are a TextSpans), converted in place in `buf` into
    Arrow's layout, without Python strings. None for a vector block with rows stored sparse
    (its implicit "" items are not in the payload): read it with the reader's read_blocks."""
    if isinstance(codec, VBufferCodec):
        item = (<VBufferCodec>codec).item
        lengths, counts, indices, p, total = codec.layout_at(buf, 0, n)
        if (counts >= 0).any():
            return None
        offsets, data, end = item.arrow_at(buf, p, total)
        _exact("VBuffer", end, buf.shape[0])
        return VectorBlock(lengths, counts.astype(np.int32), indices, TextSpans(offsets, data))
    offsets, data, end = codec.arrow_at(buf, 0, n)
    check_end(codec.load_name, end, buf.shape[0], n)
    return TextSpans(offsets, data)


# ---------------------------------------------------------------- registry
# Parameters nest only as ML.NET writes them: a vector of a key of a raw type (VBuffer ->
# Key2 -> UInt32) is as deep as it gets. Each nested codec's name is checked before its
# parameters are parsed, and the depth besides, so a crafted chain of Key2<Key2<...>> or
# VBuffer<VBuffer<...>> costs one level, not a recursion as deep as the file is long.
MAX_NESTING = 2
# the largest vector ML.NET can hold: its size is an int32 product of the dimensions
MAX_VECTOR_SIZE = 2**31 - 1

# The decoder class of each item type whose stored form is not its numpy form as is; a legacy
# load name with a layout of its own has its own class.
_DECODER = {T.Boolean: BooleanCodec, T.Text: TextCodec, T.DateTime: DateTimeCodec,
            T.TimeSpan: TimeSpanCodec, T.DateTimeOffset: DateTimeOffsetCodec}
_LEGACY_DECODER = {"DvBool": DvBoolCodec}


def _item_parser(str name, info):
    """The parameter parser of an item type's load name (item codecs take no parameters)."""
    cls = _LEGACY_DECODER.get(name) or _DECODER.get(info.type, Codec)
    itemsize = info.itemsize if info.kind == T.FIXED else 0

    def parse(Cursor params, int depth):
        return cls(name, info.type, info.dtype, itemsize)
    return parse


def _params(Cursor c, Py_ssize_t start):
    """The codec's own parameter bytes (the cursor's window from `start`)."""
    return bytes(c.buf[start:c.end])


def _parse_key2(Cursor c, int depth):
    start = c.pos
    inner = _nested(c, "Key2", depth, _not_key_raw)
    count = c.u64("key count")
    _check_key(c, inner, count)
    return KeyCodec("Key2", inner, count, _params(c, start))


def _parse_key_legacy(Cursor c, int depth):
    start = c.pos
    inner = _nested(c, "Key", depth, _not_key_raw)
    contiguous = c.u8("key contiguous flag")
    if contiguous != 1:
        c.fail(f"legacy Key codec with contiguous flag {contiguous} (only 1 is readable)")
    kmin = c.u64("key min")     # nonzero only from ML.NET 0.x: kept on the type
    count = c.i32("key count")
    if count < 0:
        c.fail(f"negative key count {count}")
    if count == 0:   # old "unknown cardinality": the raw type's whole range
        count = int(np.iinfo(inner.dtype).max)
    _check_key(c, inner, count)
    return KeyCodec("Key", inner, count, _params(c, start), kmin)


def _not_key_raw(str name):
    """Why the codec `name` cannot hold a key's values, or None if it can."""
    if name in _ITEM_NAMES and _ITEM_NAMES[name].type in T.KEY_RAW_TYPES:
        return None
    what = _ITEM_NAMES[name].type if name in _ITEM_NAMES else name
    return f"key over {what}: the raw type must be Byte, UInt16, UInt32 or UInt64"


def _not_vector_item(str name):
    """Why the codec `name` cannot hold a vector's items, or None if it can."""
    return "VBuffer of VBuffer: vector items must be primitive" if name == "VBuffer" else None


def _check_key(Cursor c, Codec inner, count):
    if not (0 < count <= np.iinfo(inner.dtype).max):
        c.fail(f"key count {count} out of range for {inner.type}")


def _parse_vbuffer(Cursor c, int depth):
    start = c.pos
    item = _nested(c, "VBuffer", depth, _not_vector_item)
    ndims = c.i32("vector dimension count")
    if ndims < 0 or 4 * ndims > c.remaining:
        c.fail(f"invalid vector dimension count {ndims}")
    dims = [c.i32("vector dimension") for _ in range(ndims)]
    if any(d < 0 for d in dims):
        c.fail(f"negative vector dimension in {dims}")
    size = 1
    for i, d in enumerate(dims):     # in order, as ML.NET's checked product overflows
        size *= d
        if size > MAX_VECTOR_SIZE:
            c.fail(f"vector dimensions overflow at dimension {i} ({d}): the size (their "
                   f"product) is beyond {MAX_VECTOR_SIZE}, the largest vector ML.NET can hold")
    return VBufferCodec(item, dims or [0], _params(c, start))


def _nested(Cursor c, str outer, int depth, refusal):
    """Parse the codec triple nested in `outer`'s parameters at the cursor, in place (no
    copy), once `refusal(name)` has found nothing against its name."""
    if depth >= MAX_NESTING:
        c.fail(f"codec nested in {outer} deeper than {MAX_NESTING} levels (ML.NET writes at "
               f"most a vector of keys)")
    name, n = read_codec_head(c)
    if name not in CODECS:
        # ML.NET: an unknown codec nested in VBuffer/Key is a decode error, not a dead column.
        c.fail(f"unknown codec {name!r} nested in {outer}")
    why = refusal(name)
    if why is not None:
        c.fail(why)
    # errors in the inner parameters name the outer codec and its column too
    cdef Cursor inner = Cursor(c.buf, c.pos, c.base if c.in_file else None,
                               f"codec {name!r} parameters in {c.where}", c.pos + n)
    c.pos += n
    return _parse(name, inner, depth + 1)


# load name -> parser of its parameter bytes: every name of idv.types.ITEM_TYPES (legacy ones
# too), then the codecs built on them
_ITEM_NAMES = {name: info for info in T.ITEM_TYPES for name in (info.load_name,) + info.legacy_names}
CODECS = {name: _item_parser(name, info) for name, info in _ITEM_NAMES.items()}
CODECS.update({"VBuffer": _parse_vbuffer, "Key2": _parse_key2, "Key": _parse_key_legacy})


cdef Codec _parse(str name, Cursor c, int depth):
    """The codec `name` from its parameters, the cursor's window, which must be used exactly."""
    codec = CODECS[name](c, depth)
    if c.remaining:
        c.fail(f"codec {name!r} has {c.remaining} unused parameter bytes")
    return codec


def resolve(str name, bytes params):
    """The codec for a (load name, parameter bytes) pair; the parameters must be used exactly.
    Errors name the codec, not its column: the caller adds that (IdvFormatError.locate)."""
    if name not in CODECS:
        raise UnsupportedCodecError(f"unknown codec {name!r}")
    return _parse(name, Cursor(params, 0, None, f"codec {name!r} parameters"), 0)


def codec_of(t):
    """(load name, parameter bytes) of the codec ML.NET writes a column type with: the inverse
    of resolve()."""
    if isinstance(t, T.Key):
        if t.min:
            raise ValueError(f"{t} is a legacy ML.NET 0.x key: ML.NET 1.x keys have no min, so it "
                             f"cannot be written; write its values as a key without min (the "
                             f"raw values stay as they are) or as numbers")
        return "Key2", pack_codec(*codec_of(t.raw)) + struct.pack("<Q", t.count)
    if isinstance(t, T.Vector):
        dims = t.dims
        return "VBuffer", (pack_codec(*codec_of(t.item)) + struct.pack("<i", len(dims))
                           + struct.pack(f"<{len(dims)}i", *dims))
    return T.item_info(t).load_name, b""
