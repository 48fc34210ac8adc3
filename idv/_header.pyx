# cython: language_level=3
"""The 256-byte file header and the 8-byte tail signature (reference section 2)."""
import struct

from idv._cursor cimport Cursor
from idv.errors import IdvFormatError

HEADER_SIZE = 256
SIGNATURE = 0x00425644004C4D43
TAIL_SIGNATURE = 0x434D4C0044564200
WRITER_VERSION = 0x0001000100010006   # 1.1.1.6, what ML.NET writes today
READER_FIRST_VERSION = 0x0001000100010002
MIN_COMPATIBLE_VERSION = 0x0001000100010004   # 1.1.1.4: the oldest TOC layout ML.NET reads
MAX_COMPATIBLE_VERSION = 0x0001000100010006
LEGACY_VERSION = 0x0001000100010005   # DvTypes: text NA bits, DvBool...

_PACK = struct.Struct("<QQQqqqi")


def version_string(v):
    """0x0001000100010006 -> '1.1.1.6' (four 16-bit parts, most significant first)."""
    v = int(v)
    return ".".join(str((v >> s) & 0xFFFF) for s in (48, 32, 16, 0))


class Header:
    """The parsed header; offsets are absolute within the IDV stream."""

    __slots__ = ("version", "compatible_version", "toc_offset", "tail_offset",
                 "row_count", "column_count")

    def __init__(self, version, compatible_version, toc_offset, tail_offset, row_count,
                 column_count):
        self.version = version
        self.compatible_version = compatible_version
        self.toc_offset = toc_offset
        self.tail_offset = tail_offset
        self.row_count = row_count
        self.column_count = column_count

    @property
    def version_string(self):
        return version_string(self.version)

    @property
    def compatible_version_string(self):
        return version_string(self.compatible_version)

    @property
    def file_size(self):
        """Length of the IDV stream: everything up to and including the tail signature."""
        return self.tail_offset + 8

    def pack(self):
        """The 256 header bytes, unused bytes zero as ML.NET writes them."""
        head = _PACK.pack(SIGNATURE, self.version, self.compatible_version, self.toc_offset,
                          self.tail_offset, self.row_count, self.column_count)
        return head + bytes(HEADER_SIZE - len(head))

    def __repr__(self):
        return (f"Header(version={self.version_string}, compatible={self.compatible_version_string}, "
                f"rows={self.row_count}, columns={self.column_count}, toc_offset={self.toc_offset}, "
                f"tail_offset={self.tail_offset})")


def _versions(version, compat):
    """How an error names a header's versions (made only for the error: a dataset's files
    are opened by the thousand)."""
    return f"version {version_string(version)} (compatible version {version_string(compat)})"


def parse_header(const unsigned char[:] head, Py_ssize_t stream_size):
    """Check the header as ML.NET's loader does, plus every offset against the stream size."""
    if head.shape[0] < HEADER_SIZE:
        raise IdvFormatError(f"truncated file: {head.shape[0]} bytes, the header alone is "
                             f"{HEADER_SIZE}", offset=head.shape[0])
    cdef Cursor c = Cursor(head, 0, 0)
    sig = c.u64()
    if sig != SIGNATURE:
        raise IdvFormatError(f"not an .idv file: bad signature {sig:#018x} (expected "
                             f"{SIGNATURE:#018x}, 'CML\\0DVB\\0')", offset=0)
    version = c.u64()
    compat = c.u64()
    toc_offset = c.i64()
    tail_offset = c.i64()
    row_count = c.i64()
    column_count = c.i32()
    if compat > version:
        raise IdvFormatError(f"unsupported {_versions(version, compat)}: compatible version "
                             f"is newer than version", offset=16)
    if version < READER_FIRST_VERSION or compat < MIN_COMPATIBLE_VERSION:
        raise IdvFormatError(f"unsupported {_versions(version, compat)}: too old, this reader "
                             f"reads 1.1.1.4 to 1.1.1.6",
                             offset=8 if version < READER_FIRST_VERSION else 16)
    if compat > MAX_COMPATIBLE_VERSION:
        raise IdvFormatError(f"unsupported {_versions(version, compat)}: too new, this reader "
                             f"reads 1.1.1.4 to 1.1.1.6", offset=16)
    if row_count < 0:
        raise IdvFormatError(f"negative row count {row_count} in the header", offset=40)
    if column_count < 0:
        raise IdvFormatError(f"negative column count {column_count} in the header", offset=48)
    if tail_offset < HEADER_SIZE or tail_offset + 8 > stream_size:
        raise IdvFormatError(f"tail offset {tail_offset} in the header is outside the file of "
                             f"{stream_size} bytes: truncated or corrupt", offset=32)
    if column_count and not (HEADER_SIZE <= toc_offset <= tail_offset):
        raise IdvFormatError(f"table of contents offset {toc_offset} in the header is outside "
                             f"[{HEADER_SIZE}, {tail_offset}]", offset=24)
    return Header(version, compat, toc_offset, tail_offset, row_count, column_count)


def check_tail(const unsigned char[:] tail, Py_ssize_t tail_offset):
    cdef Cursor c = Cursor(tail, 0, tail_offset)
    sig = c.u64("tail signature")
    if sig != TAIL_SIGNATURE:
        raise IdvFormatError(f"bad tail signature {sig:#018x} (expected {TAIL_SIGNATURE:#018x}): "
                             f"truncated or corrupt file", offset=tail_offset)


def pack_tail():
    return struct.pack("<Q", TAIL_SIGNATURE)
