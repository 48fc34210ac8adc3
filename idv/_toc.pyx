# cython: language_level=3
"""The column table of contents and the per-column metadata TOCs (reference sections 3 and 6.3).

Parsing here stops at bytes: a codec is kept as its (load name, parameter bytes) pair and
resolved by idv._codecs, so an unknown codec can leave its column listed but unreadable.
"""
cimport cython
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t

from idv._cursor cimport Cursor
from idv._cursor import encode_leb128, encode_string
from idv.errors import IdvFormatError

HEADER_SIZE = 256
MAX_ENTRIES = 2**31 - 1


@cython.no_gc        # ints, str and bytes alone: it can be in no reference cycle
cdef class TocEntry:
    """One column's entry: name, codec triple, compression, rows per block, two offsets; and
    where the entry itself lies, [toc_offset, toc_end)."""

    cdef public object index, name, codec_name, codec_params, compression, rows_per_block
    cdef public object lookup_offset, metadata_offset, toc_offset, toc_end

    def __init__(self, index, name, codec_name, codec_params, compression, rows_per_block,
                 lookup_offset, metadata_offset, toc_offset=0, toc_end=0):
        self.index = index
        self.name = name
        self.codec_name = codec_name
        self.codec_params = codec_params
        self.compression = compression
        self.rows_per_block = rows_per_block
        self.lookup_offset = lookup_offset
        self.metadata_offset = metadata_offset
        self.toc_offset = toc_offset
        self.toc_end = toc_end

    def __reduce__(self):
        return TocEntry, (self.index, self.name, self.codec_name, self.codec_params,
                          self.compression, self.rows_per_block, self.lookup_offset,
                          self.metadata_offset, self.toc_offset, self.toc_end)

    def pack(self):
        return (encode_string(self.name) + pack_codec(self.codec_name, self.codec_params)
                + bytes([self.compression]) + encode_leb128(self.rows_per_block)
                + self.lookup_offset.to_bytes(8, "little", signed=True)
                + self.metadata_offset.to_bytes(8, "little", signed=True))

    def __repr__(self):
        return (f"TocEntry({self.index}, {self.name!r}, codec={self.codec_name!r}, "
                f"compression={self.compression}, rows_per_block={self.rows_per_block})")


class MetadataEntry:
    """One annotation of a column: kind, codec triple, compression, where its block lies; and
    where the entry itself lies in the metadata TOC, [toc_offset, toc_end)."""

    __slots__ = ("kind", "codec_name", "codec_params", "compression", "offset", "size",
                 "toc_offset", "toc_end")

    def __init__(self, kind, codec_name, codec_params, compression, offset, size, toc_offset=0,
                 toc_end=0):
        self.kind = kind
        self.codec_name = codec_name
        self.codec_params = codec_params
        self.compression = compression
        self.offset = offset
        self.size = size
        self.toc_offset = toc_offset
        self.toc_end = toc_end

    def pack(self):
        return (encode_string(self.kind) + pack_codec(self.codec_name, self.codec_params)
                + bytes([self.compression]) + self.offset.to_bytes(8, "little", signed=True)
                + encode_leb128(self.size))


def block_count(row_count, rows_per_block):
    """How many blocks the rows are stored in (the last one may hold fewer)."""
    return 0 if row_count == 0 else (row_count - 1) // rows_per_block + 1


def pack_codec(str name, bytes params):
    """The codec triple: load name, LEB128 parameter length, parameter bytes."""
    return encode_string(name) + encode_leb128(len(params)) + params


def read_codec_head(Cursor c):
    """Read a codec triple up to its parameters, which the cursor is left at; returns (load
    name, parameter length), the length checked against the bytes left."""
    return _codec_head(c)


cdef tuple _codec_head(Cursor c):
    cdef Py_ssize_t start = c.base + c.pos
    name = _short_string(c, "codec name")
    if not name:
        c.fail("empty codec name", start)
    start = c.base + c.pos
    n = c.leb128("codec parameter length")
    if n > c.end - c.pos:
        c.fail(f"codec {name!r} declares {n} parameter bytes, only {c.end - c.pos} left", start)
    return name, n


cpdef tuple read_codec(Cursor c):
    """Read a codec triple; returns (load name, parameter bytes)."""
    name, n = _codec_head(c)
    return name, (b"" if n == 0 else c.take(n, "codec parameters"))


cdef str _short_string(Cursor c, str what):
    """c.string(what), without its Python calls for a string under 128 bytes of valid UTF-8
    (a column's name, a codec's): the cursor's own method otherwise, and for its errors."""
    cdef Py_ssize_t p = c.pos, n
    if p < c.end and c.buf[p] < 0x80:
        n = c.buf[p]
        if n == 0:
            c.pos = p + 1
            return ""
        if n <= c.end - p - 1:
            try:
                s = PyUnicode_DecodeUTF8(<const char *>&c.buf[p + 1], n, NULL)
            except UnicodeDecodeError:
                return c.string(what)
            c.pos = p + 1 + n
            return s
    return c.string(what)


def parse_toc(const unsigned char[:] buf, Py_ssize_t toc_offset, header):
    """Parse header.column_count entries from buf (the bytes [toc_offset, tail_offset)).
    Errors carry the column (index, and name once read) and the byte offset."""
    cdef Cursor c = Cursor(buf, 0, toc_offset)
    cdef Py_ssize_t i, start, count = header.column_count
    cdef int64_t lookup, meta, row_count = header.row_count, tail = header.tail_offset
    cdef int64_t num_blocks
    cdef int compression
    cdef TocEntry e
    entries = []
    rows_per_block = None
    for i in range(count):
        start = c.base + c.pos
        name = None
        try:
            name = _short_string(c, "column name")
            if not name:   # ML.NET's schema builder refuses it, so the load fails
                name = None
                c.fail("empty column name", start)
            codec_name, params = read_codec(c)
            compression = c.u8("compression")
            rpb = c.leb128("rows per block")
            lookup = c.i64("lookup table offset")
            meta = c.i64("metadata offset")
            if rpb > 2**31 - 1 or (rpb == 0 and row_count > 0):
                c.fail(f"invalid rows per block {rpb}", start)
            if rows_per_block is None:
                rows_per_block = rpb
            elif rpb != rows_per_block:   # ML.NET refuses this even without rows
                c.fail(f"rows per block {rpb} differs from the first column's "
                       f"{rows_per_block}; ML.NET requires one value for all columns", start)
            if row_count > 0:
                num_blocks = (row_count - 1) // <int64_t>rpb + 1
                if not (HEADER_SIZE <= lookup <= tail and num_blocks <= (tail - lookup) // 16):
                    c.fail(f"lookup table of {num_blocks} blocks at offset {lookup} lies "
                           f"outside [{HEADER_SIZE}, {tail}]", start)
            if meta != 0 and not (HEADER_SIZE <= meta <= tail):
                c.fail(f"metadata offset {meta} lies outside [{HEADER_SIZE}, {tail}]", start)
        except IdvFormatError as e:
            e.locate(column_index=i, column=name)
            raise
        e = TocEntry.__new__(TocEntry)
        e.index, e.name, e.codec_name, e.codec_params = i, name, codec_name, params
        e.compression, e.rows_per_block, e.lookup_offset = compression, rpb, lookup
        e.metadata_offset, e.toc_offset, e.toc_end = meta, start, c.base + c.pos
        entries.append(e)
    return entries


def parse_metadata_toc(const unsigned char[:] buf, Py_ssize_t offset, Py_ssize_t tail):
    """Parse a metadata TOC; buf holds the stream's bytes [offset, tail). Errors carry the
    byte offset, and the annotation's kind once read."""
    cdef Cursor c = Cursor(buf, 0, offset)
    count = c.leb128("metadata entry count")
    if not (0 < count < MAX_ENTRIES):
        c.fail(f"invalid metadata entry count {count}", offset)
    entries = []
    seen = set()
    for _ in range(count):
        start = c.offset
        kind = c.string("metadata kind")
        if not kind:
            c.fail("empty metadata kind", start)
        if kind in seen:
            c.fail(f"duplicate metadata kind {kind!r}", start)
        seen.add(kind)
        try:
            codec_name, params = read_codec(c)
            compression = c.u8("compression")
            block = c.i64("block offset")
            size = c.leb128("block size")
            if not (HEADER_SIZE <= block <= tail) or not (0 < size <= tail - block):
                c.fail(f"block at offset {block} of {size} bytes lies outside "
                       f"[{HEADER_SIZE}, {tail}]", start)
        except IdvFormatError as e:
            e.locate(metadata_kind=kind)
            raise
        entries.append(MetadataEntry(kind, codec_name, params, compression, block, size, start,
                                     c.offset))
    return entries


def pack_metadata_toc(entries):
    return encode_leb128(len(entries)) + b"".join(e.pack() for e in entries)
