# cython: language_level=3
"""Per-column block lookup tables: 16 bytes per block, (offset int64, disk int32, raw int32)."""
import numpy as np

from idv.errors import IdvFormatError

HEADER_SIZE = 256
ENTRY = np.dtype([("offset", "<i8"), ("disk", "<i4"), ("raw", "<i4")])


def parse_lookup(const unsigned char[:] buf, Py_ssize_t num_blocks, Py_ssize_t table_offset,
                 Py_ssize_t tail, str where):
    """Decode and check a lookup table: every block must lie in [256, tail)."""
    if buf.shape[0] < 16 * num_blocks:
        raise IdvFormatError(f"{where}: truncated lookup table at byte {table_offset}")
    table = np.frombuffer(buf, ENTRY, num_blocks).copy()
    offsets = table["offset"]
    disk = table["disk"]
    raw = table["raw"]
    bad = (disk < 0) | (raw < 0) | (offsets < HEADER_SIZE) | (offsets > tail - disk)
    if bad.any():
        b = int(np.flatnonzero(bad)[0])
        raise IdvFormatError(
            f"{where}: block {b} at offset {int(offsets[b])} with {int(disk[b])} bytes on disk and "
            f"{int(raw[b])} decompressed lies outside [{HEADER_SIZE}, {tail}] or has a negative "
            f"length (lookup entry at byte {table_offset + 16 * b})")
    return table


def pack_lookup(offsets, disk, raw):
    table = np.empty(len(offsets), ENTRY)
    table["offset"] = offsets
    table["disk"] = disk
    table["raw"] = raw
    return table.tobytes()
