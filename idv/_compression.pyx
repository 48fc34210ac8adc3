# cython: language_level=3
"""Block (de)compression mechanics: kind 0 none, 1 raw DEFLATE (what ML.NET writes), 2
zlib-wrapped.

zlib's C API inflates straight into the caller's array with the GIL released; a build without
zlib's headers (setup.py) has Python's zlib module do the same work block by block (ZLIB_C
says which). The `deflate` wheel bundles libdeflate and exports its C API, so when its symbols
are found libdeflate also inflates straight into the array with the GIL released, and
`Deflater` compresses with it (its Python functions hold the GIL and return a new buffer per
block). `inflate_blocks_with` runs any other decompressor (a Python-level function) per block
and copies its result into place. Which library is used is decided in idv.compression.

Both loops can check each block's CRC-32 (idv._storage.checksums) on its stored bytes just before
decompressing it, in the same GIL-free pass, with the fastest CRC-32 kernel found:
libdeflate's or ISA-L's (carry-less multiplication, tens of GB/s), else zlib's own (Python's
zlib.crc32 in a build without zlib's headers). All give zlib's CRC-32.
"""
cimport cython
from libc.string cimport memcpy, memset
from libc.stdint cimport uint8_t, uint32_t, int32_t, int64_t, uint64_t
from libc.limits cimport UINT_MAX
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from cpython.ref cimport PyObject, Py_INCREF
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
cimport numpy as cnp
from idv._bytes cimport shrunk

import struct as _struct
import zlib as _pyzlib

import numpy as np

from idv.errors import IdvFormatError

# zlib's C API, or -- in a build without zlib's headers (setup.py found none, or IDV_NO_ZLIB=1
# was set: IDV_HAVE_ZLIB 0) -- stand-ins that are never called: every use below first asks
# IDV_HAVE_ZLIB and otherwise goes to Python's own zlib module (the _py_ functions), which
# CPython always ships (Windows included), gives the same bytes, and releases the GIL while it
# inflates or deflates.
cdef extern from *:
    """
    #ifndef IDV_HAVE_ZLIB
    #define IDV_HAVE_ZLIB 1
    #endif
    #if IDV_HAVE_ZLIB
    #include <zlib.h>
    #else
    typedef struct {
        const unsigned char *next_in; unsigned int avail_in;
        unsigned char *next_out; unsigned int avail_out; const char *msg;
    } z_stream;
    #define Z_OK 0
    #define Z_STREAM_END 1
    #define Z_NEED_DICT 2
    #define Z_STREAM_ERROR (-2)
    #define Z_DATA_ERROR (-3)
    #define Z_MEM_ERROR (-4)
    #define Z_BUF_ERROR (-5)
    #define Z_FINISH 4
    #define Z_DEFLATED 8
    #define Z_DEFAULT_STRATEGY 0
    #define inflateInit2(s, w) Z_STREAM_ERROR
    #define inflateReset2(s, w) Z_STREAM_ERROR
    #define inflate(s, f) Z_STREAM_ERROR
    #define inflateEnd(s) Z_STREAM_ERROR
    #define deflateInit2(s, l, m, w, ml, st) Z_STREAM_ERROR
    #define deflate(s, f) Z_STREAM_ERROR
    #define deflateEnd(s) Z_STREAM_ERROR
    #define deflateBound(s, n) ((unsigned long)0)
    #define crc32_z(c, b, n) ((unsigned long)0)
    #endif
    """
    bint IDV_HAVE_ZLIB

cdef extern from * nogil:
    ctypedef struct z_stream:
        const unsigned char *next_in
        unsigned int avail_in
        unsigned char *next_out
        unsigned int avail_out
        const char *msg
    int inflateInit2(z_stream *strm, int windowBits)
    int inflateReset2(z_stream *strm, int windowBits)
    int inflate(z_stream *strm, int flush)
    int inflateEnd(z_stream *strm)
    int deflateInit2(z_stream *strm, int level, int method, int windowBits, int memLevel,
                     int strategy)
    int deflate(z_stream *strm, int flush)
    int deflateEnd(z_stream *strm)
    unsigned long deflateBound(z_stream *strm, unsigned long sourceLen)
    unsigned long crc32_z(unsigned long crc, const unsigned char *buf, size_t len)
    int Z_OK, Z_STREAM_END, Z_BUF_ERROR, Z_DATA_ERROR, Z_NEED_DICT, Z_MEM_ERROR, Z_FINISH
    int Z_DEFLATED, Z_DEFAULT_STRATEGY

NONE = 0
DEFLATE = 1
ZLIB = 2
NAMES = {NONE: "None", DEFLATE: "Deflate", ZLIB: "Zlib"}
# DEFLATE cannot expand more than 1032:1; a larger claimed length is corrupt, not a big block.
MAX_RATIO = 1032

cdef enum Status:
    OK = 0
    CORRUPT = 1
    SHORT = 2
    LONG = 3
    NOMEM = 4
    RANGE = 5
    CHECKSUM = 6

_MESSAGES = {
    CORRUPT: "corrupt compressed data",
    SHORT: "decompresses to fewer bytes than the lookup table says (truncated or corrupt)",
    LONG: "decompresses to more bytes than the lookup table says",
    NOMEM: "out of memory while decompressing",
    RANGE: "block lies outside the file or the output",
    CHECKSUM: "checksum mismatch",
}
# inflate_blocks' `crcs`, besides a CRC: none recorded for this block / recorded, but for a
# different length (the block cannot match)
cdef enum:
    _NO_CRC = -1
    _BAD_CRC = -2
NO_CRC = _NO_CRC
BAD_CRC = _BAD_CRC


cdef int _inflate(z_stream *s, bint *ready, const uint8_t *src, size_t n, uint8_t *dst,
                  size_t m, int wbits, bint whole=True) noexcept nogil:
    """Inflate exactly m bytes; anything else is a status other than OK. Not `whole`: the
    first m bytes of a longer stream (what follows is not read)."""
    cdef int ret
    cdef uint8_t probe
    if n > UINT_MAX or m > UINT_MAX:
        return RANGE
    if not IDV_HAVE_ZLIB:
        with gil:
            return _py_inflate(_view(src, n), dst, m, wbits)
    if not ready[0]:
        memset(s, 0, sizeof(z_stream))
        if inflateInit2(s, wbits) != Z_OK:
            return NOMEM
        ready[0] = True
    elif inflateReset2(s, wbits) != Z_OK:
        return NOMEM
    s.next_in = src
    s.avail_in = <unsigned int>n
    s.next_out = dst
    s.avail_out = <unsigned int>m
    ret = inflate(s, Z_FINISH)
    if ret == Z_STREAM_END:
        return OK if s.avail_out == 0 else SHORT
    if ret == Z_DATA_ERROR or ret == Z_NEED_DICT:
        return CORRUPT
    if ret == Z_MEM_ERROR:
        return NOMEM
    if s.avail_out != 0:
        return SHORT      # input ran out before the stream ended
    if not whole:
        return OK
    # The output is full; the stream must end here without producing another byte.
    s.next_out = &probe
    s.avail_out = 1
    ret = inflate(s, Z_FINISH)
    if ret == Z_STREAM_END and s.avail_out == 1:
        return OK
    if ret == Z_DATA_ERROR or ret == Z_NEED_DICT:
        return CORRUPT
    return LONG if s.avail_out == 0 else SHORT


cdef int _wbits(int kind):
    return -15 if kind == 1 else 15


# ---- Python's zlib module, in a build without zlib's headers (see the extern above)
ZLIB_C = bool(IDV_HAVE_ZLIB)     # whether zlib's C API was built in

cdef extern from "Python.h":
    object PyMemoryView_FromMemory(char *mem, Py_ssize_t size, int flags)
    int PyBUF_READ


cdef object _view(const uint8_t *p, size_t n):
    """n bytes at p as a read-only memoryview (no copy)."""
    return PyMemoryView_FromMemory(<char *>p, <Py_ssize_t>n, PyBUF_READ) if n else b""


cdef int _py_inflate(data, uint8_t *dst, size_t m, int wbits) noexcept:
    """_inflate's rule, by Python's zlib: exactly m bytes into dst, else the status (any
    error is one: its caller runs without the GIL and cannot raise)."""
    try:
        d = _pyzlib.decompressobj(wbits)
        out = d.decompress(data, m) if m else b""
        if len(out):
            memcpy(dst, PyBytes_AS_STRING(out), len(out))
        if <size_t>len(out) < m:
            return SHORT      # the stream ended early, or the input ran out
        if d.eof:
            return OK
        # the output is full; the stream must end here without producing another byte
        more = d.decompress(d.unconsumed_tail if m else data, 1)
    except MemoryError:
        return NOMEM
    except Exception:           # zlib.error: the data
        return CORRUPT
    if more:
        return LONG
    return OK if d.eof else SHORT


def _py_deflate(data, int level):
    """Raw DEFLATE by Python's zlib with deflate_raw's parameters: the bytes zlib's C API
    gives here. At levels 1-9 zlib's output does not depend on how the input is fed; level 0
    (stored blocks) does, so it is framed here as one deflate(Z_FINISH) call with room for all
    gives it (zlib 1.2.12 and later): blocks of 65,535 bytes, the last one final."""
    if level == 0:
        return _stored(data)
    c = _pyzlib.compressobj(level, _pyzlib.DEFLATED, -15, 8, _pyzlib.Z_DEFAULT_STRATEGY)
    return c.compress(data) + c.flush()


def _stored(data):
    mv = memoryview(data).cast("B")
    cdef Py_ssize_t n = len(mv), start
    parts = []
    for start in range(0, max(n, 1), 65535):
        chunk = mv[start:start + 65535]
        parts += [_STORED_HEADER.pack(start + 65535 >= n, len(chunk), len(chunk) ^ 0xFFFF),
                  chunk]
    return b"".join(parts)


_STORED_HEADER = _struct.Struct("<BHH")     # BFINAL and BTYPE 00 in a byte, LEN, NLEN


cdef uint32_t _py_crc32(const uint8_t *p, size_t n) noexcept nogil:
    with gil:
        return _pyzlib.crc32(_view(p, n)) if n else 0


# ---- libdeflate's C API, found in the `deflate` extension module (see the module docstring)
ctypedef void *(*_ld_alloc_t)() noexcept nogil
ctypedef void (*_ld_free_t)(void *) noexcept nogil
ctypedef int (*_ld_inflate_t)(void *, const void *, size_t, void *, size_t,
                              size_t *) noexcept nogil
cdef _ld_alloc_t _ld_alloc = NULL
cdef _ld_free_t _ld_free = NULL
cdef _ld_inflate_t _ld_inflate = NULL
ctypedef uint32_t (*_ld_crc32_t)(uint32_t, const void *, size_t) noexcept nogil
cdef _ld_crc32_t _ld_crc32 = NULL
ctypedef uint32_t (*_isal_crc32_t)(uint32_t, const unsigned char *, uint64_t) noexcept nogil
cdef _isal_crc32_t _isal_crc32 = NULL
ctypedef void *(*_ldc_alloc_t)(int) noexcept nogil
ctypedef size_t (*_ldc_compress_t)(void *, const void *, size_t, void *, size_t) noexcept nogil
ctypedef size_t (*_ldc_bound_t)(void *, size_t) noexcept nogil
ctypedef void (*_ldc_free_t)(void *) noexcept nogil
cdef _ldc_alloc_t _ldc_alloc = NULL
cdef _ldc_compress_t _ldc_compress = NULL
cdef _ldc_bound_t _ldc_bound = NULL
cdef _ldc_free_t _ldc_free = NULL
# enum libdeflate_result
cdef enum:
    LD_SUCCESS = 0
    LD_BAD_DATA = 1
    LD_SHORT_OUTPUT = 2
    LD_INSUFFICIENT_SPACE = 3

# C-level decompressors for inflate_blocks
cdef enum:
    LIB_ZLIB = 0
    LIB_LIBDEFLATE = 1


cdef extern from *:
    """
    #if defined(_WIN32)
    static void *idv_dlopen(const char *path) { (void)path; return NULL; }
    static void *idv_dlsym(void *h, const char *name) { (void)h; (void)name; return NULL; }
    #else
    #include <dlfcn.h>
    static void *idv_dlopen(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }
    static void *idv_dlsym(void *h, const char *name) { return dlsym(h, name); }
    #endif
    """
    void *idv_dlopen(const char *path)
    void *idv_dlsym(void *h, const char *name)


LIBDEFLATE_COMPRESS = False   # libdeflate's compressor bound (Deflater usable)


cdef bint _bind_libdeflate(path):
    """Look up libdeflate's decompression functions in an already loaded shared object (the
    handle is kept: the module stays loaded anyway)."""
    global _ld_alloc, _ld_free, _ld_inflate
    cdef bytes p = path.encode() if isinstance(path, str) else bytes(path)
    cdef void *h = idv_dlopen(p)
    if h == NULL:
        return False
    a = idv_dlsym(h, b"libdeflate_alloc_decompressor")
    f = idv_dlsym(h, b"libdeflate_free_decompressor")
    d = idv_dlsym(h, b"libdeflate_deflate_decompress")
    if a == NULL or f == NULL or d == NULL:
        return False
    _ld_alloc = <_ld_alloc_t>a
    _ld_free = <_ld_free_t>f
    _ld_inflate = <_ld_inflate_t>d
    _bind_libdeflate_compress(h)
    _bind_libdeflate_crc32(h)
    return True


# ---- CRC-32 kernels: zlib's CRC-32 (the one idv._storage.checksums records), by whichever library
# computes it fastest: libdeflate's (the `deflate` package) or ISA-L's (`isal`), both using
# carry-less multiplication, else zlib's own (a few GB/s)
cdef enum:
    CRC_ZLIB = 0
    CRC_LIBDEFLATE = 1
    CRC_ISAL = 2
_CRC_LIBS = {"zlib": CRC_ZLIB, "libdeflate": CRC_LIBDEFLATE, "isal": CRC_ISAL}
cdef int _crc_lib = CRC_ZLIB


cdef bint _bind_libdeflate_crc32(void *h):
    """libdeflate's CRC-32, the first choice."""
    global _ld_crc32, _crc_lib
    c = idv_dlsym(h, b"libdeflate_crc32")
    if c == NULL:
        return False
    _ld_crc32 = <_ld_crc32_t>c
    _crc_lib = CRC_LIBDEFLATE
    return True


cdef bint _bind_isal_crc32(path):
    """ISA-L's gzip CRC-32 (zlib's), in the isal package's extension module; chosen when
    libdeflate's is not found."""
    global _isal_crc32, _crc_lib
    cdef bytes p = path.encode() if isinstance(path, str) else bytes(path)
    cdef void *h = idv_dlopen(p)
    if h == NULL:
        return False
    c = idv_dlsym(h, b"crc32_gzip_refl")
    if c == NULL:
        return False
    _isal_crc32 = <_isal_crc32_t>c
    if _crc_lib == CRC_ZLIB:
        _crc_lib = CRC_ISAL
    return True


cdef inline uint32_t _crc32_by(int lib, const uint8_t *p, size_t n) noexcept nogil:
    if lib == CRC_LIBDEFLATE:
        return _ld_crc32(0, p, n)
    if lib == CRC_ISAL:
        return _isal_crc32(0, p, n)
    if not IDV_HAVE_ZLIB:
        return _py_crc32(p, n)
    return <uint32_t>crc32_z(0, p, n)


cdef inline uint32_t _crc32(const uint8_t *p, size_t n) noexcept nogil:
    """zlib's CRC-32 of n bytes, by the fastest kernel bound."""
    return _crc32_by(_crc_lib, p, n)


cdef uint32_t crc32_bytes(const uint8_t *p, size_t n) noexcept nogil:
    """_crc32 for other modules (idv._parts, through _compression.pxd)."""
    return _crc32(p, n)


cdef inline bint _crc_bad(const int64_t *crcs, Py_ssize_t i, const uint8_t *p,
                          size_t n) noexcept nogil:
    """Whether block i's bytes fail its recorded CRC (see inflate_blocks' `crcs`)."""
    if crcs == NULL or crcs[i] == _NO_CRC:
        return False
    return crcs[i] < 0 or _crc32(p, n) != <uint32_t>crcs[i]


def crc32_libraries():
    """The CRC-32 kernels bound, the one the checks use first."""
    bound = [name for name, lib in _CRC_LIBS.items()
             if lib == CRC_ZLIB or (lib == CRC_LIBDEFLATE and _ld_crc32 != NULL)
             or (lib == CRC_ISAL and _isal_crc32 != NULL)]
    first = [name for name, lib in _CRC_LIBS.items() if lib == _crc_lib]
    return first + [name for name in bound if name not in first]


def crc32_of(data, library=None):
    """zlib's CRC-32 of any contiguous bytes-like object (an int in [0, 2**32)), the GIL
    released; by `library` (one of crc32_libraries()), else the fastest."""
    cdef Py_buffer view
    cdef uint32_t r
    cdef int lib = _crc_lib
    if library is not None:
        if library not in crc32_libraries():
            raise ValueError(f"CRC-32 library {library!r} is not available; these are: "
                             f"{crc32_libraries()}")
        lib = _CRC_LIBS[library]
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        with nogil:
            r = _crc32_by(lib, <const uint8_t *>view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return r


def use_crc32_library(name):
    """Make `name` (one of crc32_libraries()) the CRC-32 kernel of every check in this process
    and return the one used before: how a benchmark times the checks without carry-less
    multiplication (``"zlib"``, whose kernel has none) on a CPU that has it. Call it before
    reading or writing, not while a read runs in another thread."""
    global _crc_lib, CRC32_LIBRARY
    if name not in crc32_libraries():
        raise ValueError(f"CRC-32 library {name!r} is not available; these are: "
                         f"{crc32_libraries()}")
    before = CRC32_LIBRARY
    _crc_lib = _CRC_LIBS[name]
    CRC32_LIBRARY = name
    return before


def crc32_ranges(const uint8_t[::1] data, const int64_t[::1] offsets,
                 const int64_t[::1] lengths):
    """The CRC-32 of each range [offsets[k], offsets[k] + lengths[k]) of `data` (int64), in
    one call: the thousands of lookup tables of a wide file checked without a Python call
    each. ValueError when a range is not within `data`."""
    cdef Py_ssize_t k, n = offsets.shape[0], size = data.shape[0]
    if lengths.shape[0] != n:
        raise ValueError(f"{n} offsets, {lengths.shape[0]} lengths")
    for k in range(n):
        if offsets[k] < 0 or lengths[k] < 0 or offsets[k] > size - lengths[k]:
            raise ValueError(f"range {offsets[k]}+{lengths[k]} is not within {size} bytes")
    out = np.empty(n, np.int64)
    cdef int64_t[::1] o = out
    cdef const uint8_t *p = &data[0] if size else NULL
    with nogil:
        for k in range(n):
            o[k] = _crc32(p + offsets[k], <size_t>lengths[k]) if lengths[k] else 0
    return out


cdef bint _bind_libdeflate_compress(void *h):
    """The compression side of the same library (Deflater); False leaves Deflater unavailable."""
    global _ldc_alloc, _ldc_compress, _ldc_bound, _ldc_free, LIBDEFLATE_COMPRESS
    a = idv_dlsym(h, b"libdeflate_alloc_compressor")
    c = idv_dlsym(h, b"libdeflate_deflate_compress")
    b = idv_dlsym(h, b"libdeflate_deflate_compress_bound")
    f = idv_dlsym(h, b"libdeflate_free_compressor")
    if a == NULL or c == NULL or b == NULL or f == NULL:
        return False
    _ldc_alloc = <_ldc_alloc_t>a
    _ldc_compress = <_ldc_compress_t>c
    _ldc_bound = <_ldc_bound_t>b
    _ldc_free = <_ldc_free_t>f
    LIBDEFLATE_COMPRESS = True
    return True


cdef int _ld_block(void *dec, const uint8_t *src, size_t n, uint8_t *dst,
                   size_t m) noexcept nogil:
    """libdeflate: inflate exactly m bytes (the stream must end there)."""
    cdef size_t got = 0
    cdef int ret = _ld_inflate(dec, src, n, dst, m, &got)
    if ret == LD_SUCCESS:
        return OK if got == m else SHORT
    if ret == LD_INSUFFICIENT_SPACE:
        return LONG
    return CORRUPT


cdef extern from *:
    """
    #if defined(__unix__) || defined(__APPLE__)
    #include <sys/mman.h>
    #include <unistd.h>
    /* Ask the kernel to read a block's pages of a memory-mapped file now: the block is then in
       the page cache when it is touched, so the page fault does not also read around it (blocks
       of the other columns lie next to it). On memory that is not a file mapping it is a no-op. */
    static void idv_willneed(const unsigned char *p, size_t n) {
        static size_t page = 0;
        size_t a;
        if (n == 0) return;
        if (page == 0) {
            long ps = sysconf(_SC_PAGESIZE);
            page = ps > 0 ? (size_t)ps : 4096;
        }
        a = (size_t)p & ~(page - 1);
        (void)posix_madvise((void *)a, (size_t)p + n - a, POSIX_MADV_WILLNEED);
    }
    #else
    static void idv_willneed(const unsigned char *p, size_t n) { (void)p; (void)n; }
    #endif
    """
    void idv_willneed(const uint8_t *p, size_t n) noexcept nogil


cdef bint _PREFETCH = True


def set_prefetch(bint on):
    """Turn the per-block WILLNEED advice on or off (for benchmarks); returns the old state."""
    global _PREFETCH
    old = _PREFETCH
    _PREFETCH = on
    return old


cdef void _prefetch(const uint8_t *src, Py_ssize_t src_len, const int64_t *offsets,
                    const int32_t *disk, Py_ssize_t nb) noexcept nogil:
    """idv_willneed for every block that lies inside src (the others fail later)."""
    cdef Py_ssize_t i
    if not _PREFETCH:
        return
    for i in range(nb):
        if 0 <= offsets[i] and 0 <= disk[i] and offsets[i] <= src_len - disk[i]:
            idv_willneed(src + offsets[i], disk[i])


cdef const int64_t *_per_block(const int64_t[::1] values, Py_ssize_t nb) except? NULL:
    """The start of inflate_blocks' `crcs` or `need` (NULL: none given)."""
    if values is None:
        return NULL
    if values.shape[0] < nb:
        raise ValueError("lookup arrays differ in length")
    return &values[0] if nb else NULL


cdef int _inflate_run(int kind, int wbits, void *dec, const uint8_t **srcs,
                      const Py_ssize_t *src_lens, const int32_t *src_of,
                      const int64_t *offsets, const int32_t *disk, const int32_t *raw,
                      uint8_t **dsts, const Py_ssize_t *dst_lens, const int32_t *dst_of,
                      const int64_t *dst_offsets, const int64_t *expect, Py_ssize_t nb,
                      const int64_t *need, Py_ssize_t *failed) noexcept nogil:
    """inflate_blocks' loop: block i from source srcs[src_of[i]] (srcs[0] when `src_of` is
    NULL) of src_lens[...] bytes into destination dsts[dst_of[i]] (dsts[0] when `dst_of` is
    NULL) of dst_lens[...] bytes, by libdeflate's decompressor `dec` (NULL: zlib, `wbits`);
    only its first need[i] bytes where _prefix says so (`need` NULL: every byte).
    Returns OK, or the status of the block at *failed."""
    cdef Py_ssize_t i, k, src_len, dst_len
    cdef const uint8_t *src
    cdef uint8_t *dst
    cdef int status = OK
    cdef z_stream s
    cdef bint ready = False
    for i in range(nb):
        k = 0 if src_of == NULL else src_of[i]
        src, src_len = srcs[k], src_lens[k]
        if 0 <= offsets[i] and 0 <= disk[i] and offsets[i] <= src_len - disk[i] and _PREFETCH:
            idv_willneed(src + offsets[i], disk[i])
    for i in range(nb):
        k = 0 if src_of == NULL else src_of[i]
        src, src_len = srcs[k], src_lens[k]
        k = 0 if dst_of == NULL else dst_of[i]
        dst, dst_len = dsts[k], dst_lens[k]
        if (offsets[i] < 0 or disk[i] < 0 or raw[i] < 0 or offsets[i] > src_len - disk[i]
                or dst_offsets[i] < 0 or dst_offsets[i] > dst_len - raw[i]):
            status = RANGE
        elif _crc_bad(expect, i, src + offsets[i], disk[i]):
            status = CHECKSUM
        elif kind == 0:
            if disk[i] != raw[i]:
                status = SHORT if disk[i] < raw[i] else LONG
            else:
                memcpy(dst + dst_offsets[i], src + offsets[i], raw[i])
        elif _prefix(need, expect, i, raw[i], dec != NULL):
            status = _inflate(&s, &ready, src + offsets[i], disk[i], dst + dst_offsets[i],
                              need[i], wbits, False)
            if status == OK:        # the rest zeroed: a codec's fix-up sees valid values
                memset(dst + dst_offsets[i] + need[i], 0, raw[i] - need[i])
        elif dec != NULL:
            status = _ld_block(dec, src + offsets[i], disk[i], dst + dst_offsets[i], raw[i])
        else:
            status = _inflate(&s, &ready, src + offsets[i], disk[i], dst + dst_offsets[i],
                              raw[i], wbits)
        if status != OK:
            failed[0] = i
            break
    if ready:
        inflateEnd(&s)
    return status


cdef void *_decompressor(int lib, int kind, Py_ssize_t nb) except? NULL:
    """libdeflate's decompressor for inflate_blocks' `lib` and `kind` (free it with _ld_free);
    NULL where zlib inflates."""
    cdef void *dec
    if not (lib == LIB_LIBDEFLATE and kind == DEFLATE and nb):
        return NULL
    if _ld_alloc == NULL:
        raise ValueError("libdeflate's C API is not available")
    dec = _ld_alloc()
    if dec == NULL:
        raise MemoryError("libdeflate_alloc_decompressor failed")
    return dec


@cython.boundscheck(False)
@cython.wraparound(False)
def inflate_blocks(int kind, const uint8_t[::1] src, const int64_t[::1] offsets,
                   const int32_t[::1] disk, const int32_t[::1] raw, uint8_t[::1] dst,
                   const int64_t[::1] dst_offsets, int lib=LIB_ZLIB,
                   const int64_t[::1] crcs=None, const int64_t[::1] need=None):
    """Decompress blocks src[offsets[i]:+disk[i]] into dst[dst_offsets[i]:+raw[i]] with zlib
    (lib 0) or, for raw DEFLATE, libdeflate's C API (lib 1, when bound), GIL released.

    With `crcs` (per block: the CRC-32 its stored bytes must have, NO_CRC or BAD_CRC), each
    block is checked just before it is decompressed, while its bytes are in cache.

    With `need` (per block: the bytes wanted from its start), a block whose CRC-32 is
    recorded may be inflated only that far (streaming zlib), the rest of its room zeroed.

    Returns (-1, None) on success, else (index of the failing block, status message; a failed
    CRC is "checksum mismatch"). Each range is checked here before it is touched, so bad input
    cannot read or write out of bounds.
    """
    cdef Py_ssize_t nb = offsets.shape[0], failed = -1
    cdef Py_ssize_t src_len = src.shape[0], dst_len = dst.shape[0]
    cdef const uint8_t *p = &src[0] if src_len else NULL
    cdef int status
    cdef const int64_t *expect
    if disk.shape[0] < nb or raw.shape[0] < nb or dst_offsets.shape[0] < nb:
        raise ValueError("lookup arrays differ in length")
    expect = _per_block(crcs, nb)
    cdef const int64_t *wanted = _per_block(need, nb)
    if nb == 0:
        return -1, None
    cdef int wbits = _wbits(kind)
    cdef uint8_t *q = &dst[0] if dst_len else NULL
    cdef void *dec = _decompressor(lib, kind, nb)
    with nogil:
        status = _inflate_run(kind, wbits, dec, &p, &src_len, NULL, &offsets[0], &disk[0],
                              &raw[0], &q, &dst_len, NULL, &dst_offsets[0], expect, nb,
                              wanted, &failed)
        if dec != NULL:
            _ld_free(dec)
    return _outcome(status, failed)


cdef class _Held:
    """The buffers of a list of objects, held (`ptrs`, `lens`) until this is freed: the
    several sources or destinations of one inflate call."""
    cdef Py_buffer *views
    cdef uint8_t **ptrs
    cdef Py_ssize_t *lens
    cdef Py_ssize_t got

    def __cinit__(self, list objects, int flags):
        cdef Py_ssize_t n = len(objects), k
        self.views = <Py_buffer *>PyMem_Malloc(max(n, 1) * sizeof(Py_buffer))
        self.ptrs = <uint8_t **>PyMem_Malloc(max(n, 1) * sizeof(uint8_t *))
        self.lens = <Py_ssize_t *>PyMem_Malloc(max(n, 1) * sizeof(Py_ssize_t))
        if self.views == NULL or self.ptrs == NULL or self.lens == NULL:
            raise MemoryError()
        for k in range(n):
            PyObject_GetBuffer(objects[k], &self.views[k], flags)
            self.got += 1
            self.ptrs[k], self.lens[k] = <uint8_t *>self.views[k].buf, self.views[k].len

    def __dealloc__(self):
        cdef Py_ssize_t k
        for k in range(self.got):
            PyBuffer_Release(&self.views[k])
        PyMem_Free(self.views)
        PyMem_Free(self.ptrs)
        PyMem_Free(self.lens)


cdef const int32_t *_numbers(const int32_t[::1] which, Py_ssize_t nb, Py_ssize_t n,
                             str what) except? NULL:
    """`which` (or NULL for None: buffer 0 for all), once every one of its `nb` entries is
    seen to name one of `n` buffers (ValueError otherwise)."""
    cdef Py_ssize_t k
    if which is None:
        if n < 1:
            raise ValueError(f"no {what} buffer")
        return NULL
    if which.shape[0] < nb:
        raise ValueError("lookup arrays differ in length")
    for k in range(nb):
        if which[k] < 0 or which[k] >= n:
            raise ValueError(f"block {k} names {what} {which[k]} of {n}")
    return &which[0] if nb else NULL


@cython.boundscheck(False)
@cython.wraparound(False)
def inflate_blocks_across(int kind, list sources, const int32_t[::1] source_of,
                          const int64_t[::1] offsets, const int32_t[::1] disk,
                          const int32_t[::1] raw, list dsts, const int32_t[::1] dst_of,
                          const int64_t[::1] dst_offsets, int lib=LIB_ZLIB,
                          const int64_t[::1] crcs=None, const int64_t[::1] need=None):
    """inflate_blocks across several buffers: block i from sources[source_of[i]] into
    dsts[dst_of[i]] (writable) at dst_offsets[i] (`source_of` or `dst_of` None: the first
    buffer for all): the blocks of many small files, or into many columns' own arrays, in
    one call. Each block's ranges are checked against its own buffers."""
    cdef Py_ssize_t nb = offsets.shape[0], failed = -1
    cdef int status
    if disk.shape[0] < nb or raw.shape[0] < nb or dst_offsets.shape[0] < nb:
        raise ValueError("lookup arrays differ in length")
    cdef const int32_t *src_of = _numbers(source_of, nb, len(sources), "source")
    cdef const int32_t *to = _numbers(dst_of, nb, len(dsts), "destination")
    cdef const int64_t *expect = _per_block(crcs, nb)
    cdef const int64_t *wanted = _per_block(need, nb)
    if nb == 0:
        return -1, None
    cdef int wbits = _wbits(kind)
    cdef _Held held_src = _Held(sources, PyBUF_SIMPLE)
    cdef _Held held_dst = _Held(dsts, PyBUF_WRITABLE)
    cdef void *dec = _decompressor(lib, kind, nb)
    with nogil:
        status = _inflate_run(kind, wbits, dec, <const uint8_t **>held_src.ptrs, held_src.lens,
                              src_of, &offsets[0], &disk[0], &raw[0], held_dst.ptrs,
                              held_dst.lens, to, &dst_offsets[0], expect, nb, wanted,
                              &failed)
        if dec != NULL:
            _ld_free(dec)
    return _outcome(status, failed)


cdef inline bint _prefix(const int64_t *need, const int64_t *expect, Py_ssize_t i,
                         int32_t raw, bint fast) noexcept nogil:
    """Whether block i is inflated only up to need[i] bytes (zlib, streaming, stopping there):
    when fewer are needed, its bytes were checked against a recorded CRC-32 (so the part
    left unread hides no damage a whole inflate would find), and zlib on that part costs
    less than libdeflate (`fast`: bound) on the whole block. libdeflate inflates random
    numbers about 1.35x faster a byte, so the part must be under three quarters of the
    block: up to two thirds."""
    if need == NULL or expect == NULL or not IDV_HAVE_ZLIB or expect[i] < 0:
        return False
    if need[i] <= 0 or need[i] >= raw:
        return False
    return not fast or 3 * need[i] <= 2 * <int64_t>raw


cdef _outcome(int status, Py_ssize_t failed):
    if status != OK:
        return failed, _MESSAGES[status]
    return -1, None


@cython.boundscheck(False)
@cython.wraparound(False)
def inflate_blocks_with(fn, int kind, const uint8_t[::1] src, const int64_t[::1] offsets,
                        const int32_t[::1] disk, const int32_t[::1] raw, uint8_t[::1] dst,
                        const int64_t[::1] dst_offsets, const int64_t[::1] crcs=None):
    """As inflate_blocks, with a Python decompressor fn(data, raw_len) -> bytes (libdeflate, ISA-L)."""
    cdef Py_ssize_t i, nb = offsets.shape[0]
    cdef Py_ssize_t src_len = src.shape[0], dst_len = dst.shape[0]
    cdef Py_ssize_t o, n
    cdef const uint8_t[::1] out
    cdef const int64_t *expect
    cdef bint bad
    if disk.shape[0] < nb or raw.shape[0] < nb or dst_offsets.shape[0] < nb:
        raise ValueError("lookup arrays differ in length")
    expect = _per_block(crcs, nb)
    if kind != 1:
        return inflate_blocks(kind, src, offsets, disk, raw, dst, dst_offsets, crcs=crcs)
    if nb and src_len:
        with nogil:
            _prefetch(&src[0], src_len, &offsets[0], &disk[0], nb)
    view = memoryview(src)          # slicing it is cheaper than slicing the typed view
    for i in range(nb):
        if (offsets[i] < 0 or disk[i] < 0 or raw[i] < 0 or offsets[i] > src_len - disk[i]
                or dst_offsets[i] < 0 or dst_offsets[i] > dst_len - raw[i]):
            return i, _MESSAGES[RANGE]
        o = offsets[i]
        n = raw[i]
        if expect != NULL:
            with nogil:
                bad = _crc_bad(expect, i, &src[0] + o, disk[i])
            if bad:
                return i, _MESSAGES[CHECKSUM]
        try:
            out = fn(view[o:o + disk[i]], n)
        except Exception:
            return i, _MESSAGES[CORRUPT]
        if out.shape[0] != n:
            return i, _MESSAGES[SHORT if out.shape[0] < n else LONG]
        if n:
            with nogil:
                memcpy(&dst[0] + dst_offsets[i], &out[0], n)
    return -1, None


def deflate_raw(const uint8_t[::1] data, int level=6):
    """Raw DEFLATE with zlib (memLevel 8, default strategy): what .NET's DeflateStream emits."""
    cdef z_stream s
    cdef int ret
    cdef unsigned long bound
    if not IDV_HAVE_ZLIB:
        return _py_deflate(data, level)
    memset(&s, 0, sizeof(z_stream))
    if deflateInit2(&s, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK:
        raise MemoryError("zlib deflateInit2 failed")
    try:
        bound = deflateBound(&s, data.shape[0])
        out = bytearray(bound)
        _deflate_into(&s, data, out, &ret)
        if ret != Z_STREAM_END:
            raise RuntimeError(f"zlib deflate failed ({ret})")
        del out[bound - s.avail_out:]
        return bytes(out)
    finally:
        deflateEnd(&s)


cdef void _deflate_into(z_stream *s, const uint8_t[::1] data, uint8_t[::1] out, int *ret):
    with nogil:
        s.next_in = &data[0] if data.shape[0] else NULL
        s.avail_in = <unsigned int>data.shape[0]
        s.next_out = &out[0]
        s.avail_out = <unsigned int>out.shape[0]
        ret[0] = deflate(s, Z_FINISH)


cdef _as_bytes_view(x):
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x).reshape(-1).view(np.uint8)
    return x


cdef size_t _zlib_raw(const uint8_t *src, size_t n, uint8_t *dst, size_t cap,
                      int level) noexcept nogil:
    """Raw DEFLATE of src into dst with zlib; 0 if it did not fit (or zlib failed)."""
    cdef z_stream s
    cdef int ret
    cdef size_t got
    cdef size_t uint_max = <size_t>(<unsigned int>-1)
    if n > uint_max:
        return 0
    if cap > uint_max:
        cap = uint_max
    if not IDV_HAVE_ZLIB:
        with gil:
            out = _py_deflate(_view(src, n), level)
            got = len(out)
            if got > cap:
                return 0
            memcpy(dst, PyBytes_AS_STRING(out), got)
            return got
    memset(&s, 0, sizeof(z_stream))
    if deflateInit2(&s, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK:
        return 0
    s.next_in = src
    s.avail_in = <unsigned int>n
    s.next_out = dst
    s.avail_out = <unsigned int>cap
    ret = deflate(&s, Z_FINISH)
    got = cap - s.avail_out
    deflateEnd(&s)
    return got if ret == Z_STREAM_END else 0


cdef inline size_t _zlib_bound(Py_ssize_t n) noexcept nogil:
    """zlib's bound on the raw DEFLATE stream of n bytes (deflateBound's, with margin)."""
    return <size_t>(n + (n >> 8) + (n >> 12) + 64)


# The adaptive rule (see Deflater). libdeflate's levels 1-9 leave out 3-byte matches on data
# whose bytes take few distinct values, and on some such blocks (float columns of evenly spaced
# values, for one) zlib -- and so ML.NET -- is 2x smaller. A block whose first 4 KiB hold fewer
# than 128 distinct byte values has an 8 KiB sample compressed by both libdeflate and zlib's
# fastest level; when zlib wins even so, the whole block is compressed by zlib.
cdef enum:
    _PROBE = 4096            # bytes whose distinct values are counted
    _FEW = 128               # fewer distinct byte values than this: the block is tried
    _SAMPLE = 8192           # bytes compressed both ways to decide
    _MIN_TRIAL = 1024        # smaller blocks are never tried
    _ZLIB_LEVEL = 1          # zlib's level for the blocks it wins
    _NOISE_SCALE = 65536     # the noise rule's limits are in 1 / _NOISE_SCALE of a block


@cython.boundscheck(False)
@cython.wraparound(False)
def distinct_bytes(const uint8_t[::1] data, Py_ssize_t limit=_PROBE):
    """How many distinct byte values the first `limit` bytes hold."""
    cdef Py_ssize_t n = min(data.shape[0], limit)
    with nogil:
        r = _distinct(&data[0] if n else NULL, n, 256)
    return r


cdef int _distinct(const uint8_t *p, Py_ssize_t n, int enough) noexcept nogil:
    """How many distinct byte values p[:n] holds, counted up to `enough` (then it stops: a
    block of many values, most of them, is known in its first few hundred bytes)."""
    cdef uint8_t seen[256]
    cdef Py_ssize_t i
    cdef int k = 0
    memset(seen, 0, 256)
    for i in range(n):
        if not seen[p[i]]:
            seen[p[i]] = 1
            k += 1
            if k >= enough:
                break
    return k


cdef class Deflater:
    """Raw DEFLATE with libdeflate at `level`, the GIL released; not thread-safe (one per
    thread). With `adaptive`, a block whose first 4 KiB hold fewer than 128 distinct byte
    values is tried first: its first 8 KiB are compressed by libdeflate and by zlib level 1,
    and if zlib's is smaller the whole block is compressed by zlib level 1 (libdeflate skips
    3-byte matches on such data, zlib does not); ``compress(data, trial=False)`` leaves the
    trial out, for a column whose verdict is known (``trial``). Blocks of noise (measurements,
    hashes: no repeats for a higher level to find) go at level 1, as small and at about 60 % of
    the work: ``noise`` tells it from a column's first block, and ``compress(data, limit=...)``
    takes its verdict. The output depends only on the block and those arguments, so it is the
    same whatever the threads. `blocks`, `tried`, `zlib_blocks` and `quick_blocks` count what
    was done."""
    cdef void *ld
    cdef void *ld1             # level 1, for noise (NULL at level 1 and below, or not adaptive)
    cdef readonly int level
    cdef readonly bint adaptive
    cdef readonly Py_ssize_t blocks, tried, zlib_blocks, quick_blocks

    def __cinit__(self, int level=6, bint adaptive=True):
        if not LIBDEFLATE_COMPRESS:
            raise ImportError("libdeflate's C API was not found (pip install deflate)")
        if not 0 <= level <= 12:
            raise ValueError(f"libdeflate levels are 0-12, not {level}")
        self.level = level
        self.adaptive = adaptive and 0 < level < 10
        self.ld = _ldc_alloc(level)
        if self.ld == NULL:
            raise MemoryError("libdeflate_alloc_compressor failed")
        if self.adaptive and level > 1:
            self.ld1 = _ldc_alloc(1)
            if self.ld1 == NULL:
                raise MemoryError("libdeflate_alloc_compressor failed")

    def __dealloc__(self):
        if self.ld != NULL:
            _ldc_free(self.ld)
        if self.ld1 != NULL:
            _ldc_free(self.ld1)

    cdef int _verdict(self, const uint8_t *p, Py_ssize_t n, uint8_t *out,
                      size_t bound) noexcept nogil:
        """The adaptive rule on one block: -1 not tried (a small block, many distinct byte
        values), else 1 when zlib's sample is the smaller, 0 when libdeflate's is. `out`
        (`bound` bytes, at least zlib's bound of the sample) is scratch."""
        cdef Py_ssize_t sample
        cdef size_t a, b
        if n < _MIN_TRIAL or _distinct(p, min(n, <Py_ssize_t>_PROBE), _FEW) >= _FEW:
            return -1
        sample = min(n, <Py_ssize_t>_SAMPLE)
        a = _ldc_compress(self.ld, p, sample, out, bound)
        b = _zlib_raw(p, sample, out, bound, _ZLIB_LEVEL)
        return 1 if a != 0 and b != 0 and b < a else 0

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def trial(self, data):
        """The adaptive rule's verdict on one block: None when it is not tried (adaptive off,
        a small block, many distinct byte values), else whether zlib wins its sample."""
        cdef const uint8_t[::1] src = _as_bytes_view(data)
        cdef Py_ssize_t n = src.shape[0]
        cdef size_t bound = _zlib_bound(min(n, <Py_ssize_t>_SAMPLE))
        cdef int v = -1
        cdef uint8_t *out
        if not self.adaptive or n == 0:
            return None
        bound = max(bound, _ldc_bound(self.ld, min(n, <Py_ssize_t>_SAMPLE)))
        scratch = PyBytes_FromStringAndSize(NULL, bound)
        out = <uint8_t *>PyBytes_AS_STRING(scratch)
        with nogil:
            v = self._verdict(&src[0], n, out, bound)
        return None if v < 0 else v == 1

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def noise(self, data):
        """The noise rule on a column's first block: (limit, its stream). `limit` is 0 when
        `level` compresses the block smaller than level 1 does (or the block is not tried: a
        small one, level 1, adaptive off), and the stream is `level`'s; else the stream is
        level 1's and `limit` the ``compress`` argument for the column's other blocks: each
        goes at level 1 unless level 1 shrinks it a tenth more than it did this one (the data
        changed), and then at `level`."""
        cdef const uint8_t[::1] src = _as_bytes_view(data)
        cdef Py_ssize_t n = src.shape[0]
        cdef size_t a = 0, b = 0, bound
        cdef uint8_t *pa
        cdef uint8_t *pb
        if self.ld1 == NULL or n < _MIN_TRIAL:
            return 0, self.compress(data, False)
        bound = _ldc_bound(self.ld, n)
        quick = PyBytes_FromStringAndSize(NULL, bound)
        full = PyBytes_FromStringAndSize(NULL, bound)
        pa, pb = <uint8_t *>PyBytes_AS_STRING(quick), <uint8_t *>PyBytes_AS_STRING(full)
        with nogil:
            a = _ldc_compress(self.ld1, &src[0], n, pa, bound)
            b = _ldc_compress(self.ld, &src[0], n, pb, bound)
        if a == 0 or b == 0:
            raise RuntimeError("libdeflate could not compress a block")
        self.blocks += 1
        if b < a:
            return 0, full[:b]
        self.quick_blocks += 1
        return max(1, (a * _NOISE_SCALE * 9) // (10 * <size_t>n)), quick[:a]

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def compress(self, data, bint trial=True, Py_ssize_t limit=0):
        """The raw DEFLATE stream of one block (bytes); `trial` False: libdeflate's, without
        the adaptive trial; `limit` (from ``noise``, on the column's first block) > 0: level 1
        first, kept unless it shrinks the block below limit / 2**16 of its size."""
        cdef const uint8_t[::1] src = _as_bytes_view(data)
        cdef Py_ssize_t n = src.shape[0]
        cdef const uint8_t *p = &src[0] if n else <const uint8_t *>""
        cdef size_t bound, got = 0
        cdef int verdict = -1
        cdef bint quick = limit > 0 and self.ld1 != NULL
        cdef uint8_t *out
        cdef PyObject *res
        bound = _ldc_bound(self.ld, n)
        if self.adaptive:
            bound = max(bound, _zlib_bound(n))
        result = PyBytes_FromStringAndSize(NULL, bound)
        out = <uint8_t *>PyBytes_AS_STRING(result)
        with nogil:
            if quick:
                got = _ldc_compress(self.ld1, p, n, out, bound)
                if got * <size_t>_NOISE_SCALE < <size_t>limit * <size_t>n:
                    got = 0                 # it repeats, unlike the column's first block
                quick = got != 0
            if got == 0 and self.adaptive and trial:
                verdict = self._verdict(p, n, out, bound)
            if verdict == 1:
                got = _zlib_raw(p, n, out, bound, _ZLIB_LEVEL)
            if got == 0:
                verdict = min(verdict, 0)
                got = _ldc_compress(self.ld, p, n, out, bound)
        self.blocks += 1
        self.tried += verdict >= 0
        self.zlib_blocks += verdict == 1
        self.quick_blocks += quick
        if got == 0:
            raise RuntimeError("libdeflate could not compress a block")
        if got != bound:
            Py_INCREF(result)          # shrunk() takes this reference over ...
            res = <PyObject *>result
            result = None              # ... as the only one
            result = shrunk(res, got)
        return result


def decompress_metadata(int kind, data, Py_ssize_t limit):
    """A metadata block has no stored raw length: inflate it whole, at most `limit` bytes."""
    if kind == 0:
        return bytes(data)
    d = _pyzlib.decompressobj(_wbits(kind))
    try:
        out = d.decompress(data, limit)
    except _pyzlib.error as e:
        raise IdvFormatError(f"corrupt compressed data ({e})") from None
    if not d.eof:
        raise IdvFormatError("compressed data is truncated or expands beyond any plausible size")
    return out


# ---- libdeflate's C API, bound when the `deflate` package is installed
# (idv.compression holds the table of backends and the choice between them)
NATIVE_ZLIB = LIB_ZLIB               # inflate_blocks' `lib`: zlib's C API
NATIVE_LIBDEFLATE = LIB_LIBDEFLATE   # ... libdeflate's, when LIBDEFLATE_INFLATE
LIBDEFLATE_INFLATE = False           # libdeflate's decompressor bound
try:
    from deflate import _deflate as _ld_module
    LIBDEFLATE_INFLATE = _bind_libdeflate(_ld_module.__file__)
except (ImportError, AttributeError, TypeError):
    pass
try:
    from isal import isal_zlib as _isal_module
    _bind_isal_crc32(_isal_module.__file__)
except (ImportError, AttributeError, TypeError):
    pass
CRC32_LIBRARY = crc32_libraries()[0]      # the CRC-32 kernel checksums use


# ---- output arrays on transparent huge pages (Linux)
#
# A fresh column array is first touched by the copy or the decompressor, page by page. glibc
# serves arrays of a few MB from its heap or from mmaps that are not aligned to 2 MiB, so only
# part of them can be backed by transparent huge pages and the rest costs one page fault per
# 4 KiB; on a VM such faults cost more than the copy itself. Arrays of HUGE_MIN bytes or more
# whose size is within 1/8 of a multiple of 2 MiB therefore get their own 2 MiB-aligned private
# mapping, advised MADV_HUGEPAGE, through a numpy memory handler (NEP 49): the array owns its
# data as usual and numpy frees it through the same handler. Elsewhere np.empty is used.
# Freed mappings are kept a while for the next arrays of their size (keep_freed, below).
cdef extern from *:
    """
    #if defined(__linux__) && defined(NPY_FEATURE_VERSION) && NPY_FEATURE_VERSION >= NPY_1_22_API_VERSION
    #include <sys/mman.h>
    #include <string.h>
    #define IDV_HUGE_OK 1
    #define IDV_HUGE_PAGE ((size_t)2 << 20)
    /* The mapping length is kept in a 4 KiB page of its own just before the data, so that
       allocating touches only that small page and the data starts on a 2 MiB boundary. */
    #define IDV_HDR ((size_t)4096)

    static void *idv_map(size_t size) {
        size_t len, total, head, tail;
        char *p, *a;
        if (size > ((size_t)-1 >> 2)) return NULL;
        if (size + IDV_HDR < ((size_t)4 << 20)) {   /* small (a shrinking resize): plain pages */
            total = (size + IDV_HDR + 4095) & ~(size_t)4095;
            p = (char *)mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                             -1, 0);
            if (p == (char *)MAP_FAILED) return NULL;
            *(size_t *)p = total;
            return p + IDV_HDR;
        }
        len = (size + IDV_HUGE_PAGE - 1) & ~(IDV_HUGE_PAGE - 1);
        /* over-map, then trim both ends: [a - IDV_HDR, a + len) with a 2 MiB-aligned */
        total = len + IDV_HUGE_PAGE + IDV_HDR;
        p = (char *)mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                         -1, 0);
        if (p == (char *)MAP_FAILED) return NULL;
        a = (char *)(((size_t)p + IDV_HDR + IDV_HUGE_PAGE - 1) & ~(IDV_HUGE_PAGE - 1));
        head = (size_t)(a - IDV_HDR - p);
        tail = total - head - IDV_HDR - len;
        if (head) munmap(p, head);
        if (tail) munmap(a + len, tail);
        madvise(a, len, MADV_HUGEPAGE);        /* advice only: failure is harmless */
        *(size_t *)(a - IDV_HDR) = IDV_HDR + len;
        return a;
    }
    static void idv_unmap(void *ptr) {
        char *base;
        if (ptr == NULL) return;
        base = (char *)ptr - IDV_HDR;
        munmap(base, *(size_t *)base);
    }

    /* Huge mappings freed by numpy are kept for the next array of their size, up to
       idv_keep_max bytes in all (keep_freed) and for at most idv_keep_ns (expired when the
       handler next allocates or frees): a fresh mapping costs the kernel a zeroing of each
       page at its first touch, a tenth of the CPU of reading columns one after another.
       They are kept as they are: advising MADV_FREE, so that the kernel could take them back,
       walks their pages at each free, and made converting a file 15 % slower where few
       freed arrays are reused. */
    #include <pthread.h>
    #include <sys/resource.h>
    #include <time.h>
    #define IDV_KEEP_SLOTS 64
    static size_t idv_keep_max = (size_t)128 << 20;
    static long long idv_keep_ns = 2000000000LL;
    static pthread_mutex_t idv_keep_lock = PTHREAD_MUTEX_INITIALIZER;
    static struct { char *data; size_t len; long long at; } idv_kept[IDV_KEEP_SLOTS];
    static size_t idv_kept_bytes = 0;
    static long long idv_now(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
        return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
    }
    /* under the lock: unmap kept mappings older than IDV_KEEP_NS, or all when `all` */
    static void idv_keep_expire(long long now, int all) {
        int i;
        for (i = 0; i < IDV_KEEP_SLOTS; i++) {
            if (idv_kept[i].data && (all || now - idv_kept[i].at > idv_keep_ns)) {
                idv_unmap(idv_kept[i].data);
                idv_kept_bytes -= idv_kept[i].len;
                idv_kept[i].data = NULL;
            }
        }
    }
    /* a kept mapping of exactly `len` data bytes, or NULL */
    static char *idv_keep_take(size_t len) {
        int i;
        char *p = NULL;
        long long now = idv_now();
        pthread_mutex_lock(&idv_keep_lock);
        idv_keep_expire(now, 0);
        for (i = 0; i < IDV_KEEP_SLOTS; i++) {
            if (idv_kept[i].data && idv_kept[i].len == len) {
                p = idv_kept[i].data;
                idv_kept[i].data = NULL;
                idv_kept_bytes -= len;
                break;
            }
        }
        pthread_mutex_unlock(&idv_keep_lock);
        return p;
    }
    /* whether the process's address space is limited (RLIMIT_AS): what is kept would then
       hold room that other allocations may need, so nothing is */
    static int idv_space_limited(void) {
        struct rlimit r;
        return getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY;
    }
    /* keep a freed huge mapping if there is room; else unmap it */
    static void idv_keep_put(char *ptr) {
        int i, slot = -1;
        size_t len = *(size_t *)(ptr - IDV_HDR) - IDV_HDR;
        long long now = idv_now();
        int limited = idv_space_limited();
        pthread_mutex_lock(&idv_keep_lock);
        idv_keep_expire(now, limited);
        if (!limited && idv_kept_bytes <= idv_keep_max &&
                len <= idv_keep_max - idv_kept_bytes) {
            for (i = 0; i < IDV_KEEP_SLOTS; i++) if (!idv_kept[i].data) { slot = i; break; }
        }
        if (slot >= 0) {
            idv_kept[slot].data = ptr;
            idv_kept[slot].len = len;
            idv_kept[slot].at = now;
            idv_kept_bytes += len;
            ptr = NULL;
        }
        pthread_mutex_unlock(&idv_keep_lock);
        if (ptr) idv_unmap(ptr);
    }
    /* a forked child unmaps what its parent kept (touching it would copy it) and starts
       with a fresh lock */
    static void idv_keep_forked(void) {
        pthread_mutex_init(&idv_keep_lock, NULL);
        idv_keep_expire(0, 1);
    }
    static int idv_keep_init(void) { return pthread_atfork(NULL, NULL, idv_keep_forked); }
    static size_t idv_keep_limit(size_t max_bytes, int drop) {
        size_t old;
        pthread_mutex_lock(&idv_keep_lock);
        old = idv_keep_max;
        idv_keep_max = max_bytes;
        idv_keep_expire(0, drop);
        pthread_mutex_unlock(&idv_keep_lock);
        return old;
    }
    static size_t idv_keep_bytes(void) {
        size_t n;
        pthread_mutex_lock(&idv_keep_lock);
        n = idv_kept_bytes;
        pthread_mutex_unlock(&idv_keep_lock);
        return n;
    }
    static int idv_is_huge(void *ptr) {
        /* huge mappings hold IDV_HDR + a multiple of 2 MiB >= 4 MiB; the others <= 4 MiB */
        return *(size_t *)((char *)ptr - IDV_HDR) > ((size_t)4 << 20);
    }
    static void *idv_h_malloc(void *ctx, size_t size) {
        char *p = NULL;
        if (size + IDV_HDR >= ((size_t)4 << 20) && size <= ((size_t)-1 >> 2))
            p = idv_keep_take((size + IDV_HUGE_PAGE - 1) & ~(IDV_HUGE_PAGE - 1));
        if (p == NULL && (p = idv_map(size)) == NULL && idv_keep_bytes() > 0) {
            idv_keep_limit(idv_keep_limit(0, 1), 0);   /* drop what is kept, then retry */
            p = idv_map(size);
        }
        return p;
    }
    static void *idv_h_calloc(void *ctx, size_t n, size_t el) {
        if (el && n > (size_t)-1 / el) return NULL;
        return idv_map(n * el);                /* fresh anonymous memory is zero */
    }
    static void idv_release(void *ptr) {
        if (ptr == NULL) return;
        if (idv_is_huge(ptr)) idv_keep_put((char *)ptr); else idv_unmap(ptr);
    }
    static void *idv_h_realloc(void *ctx, void *ptr, size_t size) {
        char *q;
        size_t old;
        if (ptr == NULL) return idv_h_malloc(ctx, size);
        q = (char *)idv_h_malloc(ctx, size);
        if (q == NULL) return NULL;
        old = *(size_t *)((char *)ptr - IDV_HDR) - IDV_HDR;   /* >= the old size */
        memcpy(q, ptr, old < size ? old : size);
        idv_release(ptr);
        return q;
    }
    static void idv_h_free(void *ctx, void *ptr, size_t size) { idv_release(ptr); }

    static PyDataMem_Handler idv_huge_handler = {
        "idv_huge_pages", 1,
        {NULL, idv_h_malloc, idv_h_calloc, idv_h_realloc, idv_h_free}
    };
    static PyObject *idv_huge_capsule(void) {
        return PyCapsule_New(&idv_huge_handler, "mem_handler", NULL);
    }
    static PyObject *idv_set_handler(PyObject *h) { return PyDataMem_SetHandler(h); }
    #else
    #define IDV_HUGE_OK 0
    static PyObject *idv_huge_capsule(void) { Py_RETURN_NONE; }
    static size_t idv_keep_limit(size_t max_bytes, int drop) { return 0; }
    static int idv_keep_init(void) { return 0; }
    static size_t idv_keep_bytes(void) { return 0; }
    static PyObject *idv_set_handler(PyObject *h) {
        PyErr_SetString(PyExc_RuntimeError, "no numpy memory handlers"); return NULL; }
    #endif
    """
    bint IDV_HUGE_OK
    object idv_huge_capsule()
    object idv_set_handler(object handler)
    size_t idv_keep_limit(size_t max_bytes, int drop) nogil
    size_t idv_keep_bytes() nogil
    int idv_keep_init()

cnp.import_array()

HUGE_MIN = 4 << 20
_HUGE_PAGE = 2 << 20
_HUGE_HANDLER = idv_huge_capsule() if IDV_HUGE_OK else None
idv_keep_init()


def keep_freed(Py_ssize_t max_bytes, bint drop=False):
    """Keep up to `max_bytes` of freed output arrays for reuse (0: none); `drop` unmaps what
    is kept now. Returns the old limit."""
    if max_bytes < 0:
        raise ValueError("max_bytes must be >= 0")
    return idv_keep_limit(<size_t>max_bytes, drop)


def kept_bytes():
    """The bytes of freed output arrays kept for reuse now."""
    return idv_keep_bytes()


def empty(Py_ssize_t n, dtype):
    """np.empty(n, dtype); large arrays on 2 MiB-aligned huge-page mappings (see above)."""
    dtype = np.dtype(dtype)
    cdef Py_ssize_t nbytes = n * dtype.itemsize
    cdef Py_ssize_t waste
    if _HUGE_HANDLER is None or nbytes < HUGE_MIN:
        return np.empty(n, dtype)
    waste = -nbytes % _HUGE_PAGE
    if waste * 8 > nbytes:
        return np.empty(n, dtype)
    old = idv_set_handler(_HUGE_HANDLER)
    try:
        return np.empty(n, dtype)
    finally:
        idv_set_handler(old)
