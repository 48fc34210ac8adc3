# cython: language_level=3
"""Per-column block lookup tables: 16 bytes per block, (offset int64, disk int32, raw int32)."""
import numpy as np

from idv.errors import IdvFormatError

HEADER_SIZE = 256
ENTRY = np.dtype([("offset", "<i8"), ("disk", "<i4"), ("raw", "<i4")])


def parse_lookup(const unsigned char[:] buf, Py_ssize_t num_blocks, Py_ssize_t table_offset,
                 Py_ssize_t tail):
    """Decode and check a lookup table: every block must lie in [256, tail). The error for
    the first bad entry carries its block and the entry's byte offset."""
    if buf.shape[0] < 16 * num_blocks:
        raise IdvFormatError("truncated lookup table", offset=table_offset)
    table = np.frombuffer(buf, ENTRY, num_blocks).copy()
    bad = bad_entries(table, tail)
    if len(bad):
        raise entry_error(table, bad[0], table_offset, tail)
    return table


def bad_entries(table, Py_ssize_t tail):
    """The indices of the entries whose block lies outside [256, tail) or has a negative
    length."""
    offsets = table["offset"].astype(np.int64)
    disk = table["disk"].astype(np.int64)
    raw = table["raw"].astype(np.int64)
    return np.flatnonzero((disk < 0) | (raw < 0) | (offsets < HEADER_SIZE)
                          | (offsets > tail - disk))


def entry_error(table, Py_ssize_t b, Py_ssize_t table_offset, Py_ssize_t tail):
    """The IdvFormatError for bad entry `b` (located at the entry's bytes)."""
    e = table[b]
    return IdvFormatError(
        f"block at offset {int(e['offset'])} with {int(e['disk'])} bytes on disk and "
        f"{int(e['raw'])} decompressed lies outside [{HEADER_SIZE}, {tail}] or has a negative "
        f"length", block=int(b), offset=table_offset + 16 * int(b))


def pack_lookup(offsets, disk, raw):
    table = np.empty(len(offsets), ENTRY)
    table["offset"] = offsets
    table["disk"] = disk
    table["raw"] = raw
    return table.tobytes()
