# cython: language_level=3
"""The column table of contents and the per-column metadata TOCs (reference sections 3 and 6.3).

Parsing here stops at bytes: a codec is kept as its (load name, parameter bytes) pair and
resolved by idv._codecs, so an unknown codec can leave its column listed but unreadable.
"""
from idv._cursor cimport Cursor
from idv._cursor import encode_leb128, encode_string
from idv.errors import IdvFormatError

HEADER_SIZE = 256
MAX_ENTRIES = 2**31 - 1


class TocEntry:
    """One column's entry: name, codec triple, compression, rows per block, two offsets; and
    where the entry itself lies, [toc_offset, toc_end)."""

    __slots__ = ("index", "name", "codec_name", "codec_params", "compression", "rows_per_block",
                 "lookup_offset", "metadata_offset", "toc_offset", "toc_end")

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


def read_codec_head(Cursor c, str what):
    """Read a codec triple up to its parameters, which the cursor is left at; returns (load
    name, parameter length), the length checked against the bytes left."""
    name = c.string(what + " codec name")
    if not name:
        c.fail(f"empty codec name in {what} at byte {c.offset}")
    start = c.offset
    n = c.leb128(what + " codec parameter length")
    if n > c.remaining:
        c.fail(f"{what} codec {name!r} declares {n} parameter bytes at byte {start}, "
               f"only {c.remaining} left")
    return name, n


def read_codec(Cursor c, str what):
    """Read a codec triple; returns (load name, parameter bytes)."""
    name, n = read_codec_head(c, what)
    return name, c.take(n, what + " codec parameters")


def parse_toc(const unsigned char[:] buf, Py_ssize_t toc_offset, header):
    """Parse header.column_count entries from buf (the bytes [toc_offset, tail_offset))."""
    cdef Cursor c = Cursor(buf, 0, toc_offset, "table of contents")
    entries = []
    row_count = header.row_count
    tail = header.tail_offset
    rows_per_block = None
    for i in range(header.column_count):
        start = c.offset
        name = c.string(f"column {i} name")
        if not name:   # ML.NET's schema builder refuses it, so the load fails
            c.fail(f"column {i} has an empty name (TOC entry at byte {start})")
        where = f"column {i} {name!r}"
        codec_name, params = read_codec(c, where)
        compression = c.u8(where + " compression")
        rpb = c.leb128(where + " rows per block")
        lookup = c.i64(where + " lookup table offset")
        meta = c.i64(where + " metadata offset")
        if rpb > 2**31 - 1 or (rpb == 0 and row_count > 0):
            raise IdvFormatError(f"{where}: invalid rows per block {rpb} (TOC entry at byte {start})")
        if rows_per_block is None:
            rows_per_block = rpb
        elif rpb != rows_per_block:   # ML.NET refuses this even without rows
            raise IdvFormatError(f"{where}: rows per block {rpb} differs from the first column's "
                                 f"{rows_per_block}; ML.NET requires one value for all columns")
        if row_count > 0:
            num_blocks = block_count(row_count, rpb)
            if not (HEADER_SIZE <= lookup <= tail - 16 * num_blocks):
                raise IdvFormatError(f"{where}: lookup table of {num_blocks} blocks at offset "
                                     f"{lookup} lies outside [{HEADER_SIZE}, {tail}] "
                                     f"(TOC entry at byte {start})")
        if meta != 0 and not (HEADER_SIZE <= meta <= tail):
            raise IdvFormatError(f"{where}: metadata offset {meta} lies outside "
                                 f"[{HEADER_SIZE}, {tail}] (TOC entry at byte {start})")
        entries.append(TocEntry(i, name, codec_name, params, compression, rpb, lookup, meta, start,
                                c.offset))
    return entries


def parse_metadata_toc(const unsigned char[:] buf, Py_ssize_t offset, Py_ssize_t tail, str where):
    """Parse a metadata TOC; buf holds the stream's bytes [offset, tail)."""
    cdef Cursor c = Cursor(buf, 0, offset, where + " metadata")
    count = c.leb128("metadata entry count")
    if not (0 < count < MAX_ENTRIES):
        c.fail(f"invalid metadata entry count {count} at byte {offset}")
    entries = []
    seen = set()
    for _ in range(count):
        start = c.offset
        kind = c.string("metadata kind")
        if not kind:
            c.fail(f"empty metadata kind at byte {start}")
        if kind in seen:
            c.fail(f"duplicate metadata kind {kind!r} at byte {start}")
        seen.add(kind)
        codec_name, params = read_codec(c, f"metadata {kind!r}")
        compression = c.u8("metadata compression")
        block = c.i64("metadata block offset")
        size = c.leb128("metadata block size")
        if not (HEADER_SIZE <= block <= tail) or not (0 < size <= tail - block):
            c.fail(f"metadata {kind!r} block at offset {block} of {size} bytes lies outside "
                   f"[{HEADER_SIZE}, {tail}] (entry at byte {start})")
        entries.append(MetadataEntry(kind, codec_name, params, compression, block, size, start,
                                     c.offset))
    return entries


def pack_metadata_toc(entries):
    return encode_leb128(len(entries)) + b"".join(e.pack() for e in entries)
