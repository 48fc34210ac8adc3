"""Where decoded blocks go: the array a run of blocks decodes into (its shape, each text or
Boolean block's room), how runs are split (into groups within a memory bound, into chunks for
the threads), what decoding them allocates, the bound on densifying sparse vectors, the sizes
a column's blocks can have for their rows, and which block a fix-up failed in. Shared by the
block store, the scan, the batch of many files and the columns.
"""
from __future__ import annotations

import numpy as np

from idv import _codecs, _compression, types as T
from idv._resources import budget
from idv.errors import IdvFormatError

# Densified sparse rows up to this many bytes are always allowed (see check_dense).
_DENSE_FLOOR = 1 << 28


def fixed_width(codec):
    """True for a codec whose blocks hold their values as they are in memory (fixed-width
    scalars): inflated straight into the output and fixed up in place (codec.fix)."""
    return bool(codec.itemsize) and not isinstance(codec, _codecs.VBufferCodec)


def root_bytes(out):
    """(the contiguous uint8 array at the root of `out`'s views, `out`'s byte offset in it):
    the pieces of one buffer share one destination."""
    root = out
    while isinstance(root.base, np.ndarray):
        root = root.base
    if not root.flags.c_contiguous or not root.flags.writeable:
        root = out
    dst = root.reshape(-1).view(np.uint8)
    return dst, out.__array_interface__["data"][0] - dst.__array_interface__["data"][0]


def chunks(n, parts):
    """Split range(n) into at most `parts` contiguous (start, stop) pairs."""
    parts = max(1, min(parts, n))
    if parts == 1:      # the common case of a piece decoded in a scan's thread: no linspace
        return [(0, n)] if n else []
    bounds = np.linspace(0, n, parts + 1).astype(int)
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def out_shape(codec, rows, sparse=False):
    """The shape of an array that `rows` rows of a column with this codec decode into (decode's
    ``out=``): (rows,) for scalars, (rows, *dims) for dense fixed-size vectors; None for the
    other forms (their decoders allocate)."""
    if not isinstance(codec, _codecs.VBufferCodec):
        return (rows,)
    vtype = codec.type
    if sparse or not vtype.is_fixed:
        return None
    return (rows,) + tuple(vtype.dims)


def block_groups(raw, limit, base=0):
    """Split blocks with decompressed sizes `raw` into contiguous runs of at most `limit`
    bytes (a larger block is a run by itself): (start, stop) pairs offset by `base`."""
    out = []
    start, size = 0, 0
    for i, n in enumerate(raw.tolist()):
        if i > start and size + n > limit:
            out.append((base + start, base + i))
            start, size = i, 0
        size += n
    if len(raw):
        out.append((base + start, base + len(raw)))
    return out


def text_rooms(table):
    """Each block's room in decode_text's buffer (lookup rows `table`): its decompressed size,
    rounded up so that the next starts at a 64-byte boundary (Arrow's alignment); all held by
    the result."""
    return (table["raw"].astype(np.int64) + 63) // 64 * 64


def decoded_size(codec, raw, count, arrow=False):
    """About what decoding `count` rows whose blocks inflate to `raw` bytes allocates, by
    `codec` (None: unknown): Text items as str objects (idv._resources.budget.items_bytes),
    Booleans eight times over; with `arrow`, as Arrow holds them: Text on its blocks' bytes,
    Boolean scalars on their bits (what the blocks inflate to). Column.decoded_bytes, and a
    dataset for the files it only lists."""
    if arrow and codec is not None and (codec.dtype == object or codec.load_name == "Boolean"):
        return raw
    if codec is not None and codec.dtype == object:
        stored = count if not isinstance(codec.type, T.Vector) else raw // 4
        return raw + budget.items_bytes(codec.dtype, stored, raw)
    if codec is not None and codec.load_name == "Boolean":
        return raw * 8
    return raw


def bit_rooms(rows_per_block, num_rows, b0, b1):
    """Each block's bytes of blocks [b0, b1) of a column of Boolean scalars: a bit a row,
    the last byte filled up (BlockStore.decode_bits puts them end to end)."""
    first = np.arange(b0, b1, dtype=np.int64) * rows_per_block
    return (np.minimum(rows_per_block, num_rows - first) + 7) // 8


def unpack_bits(bits, room, rows_per_block, out):
    """`out` (bools) filled with the rows of blocks whose bits are `bits` (decode_bits', each
    block's `room` bytes end to end), and returned."""
    if rows_per_block % 8 == 0:         # the blocks' bits end to end are the rows'
        _codecs.unpack_bits(bits, out.view(np.uint8))
        return out
    for i, end in enumerate(np.cumsum(room).tolist()):     # each fills up its last byte
        a = i * rows_per_block
        _codecs.unpack_bits(bits[end - int(room[i]):end],
                            out[a:a + min(rows_per_block, len(out) - a)].view(np.uint8))
    return out


def check_dense(blocks, vtype, disk, which="", hint="", **where):
    """Sparse rows of variable-size vectors densify to the lengths their blocks give, which the
    file does not bound: refuse a dense form of implicit zeros no file of `disk` bytes can mean
    (a corrupt length) instead of allocating gigabytes. A fixed-size type sets the lengths (the
    codec refuses others): their dense size (rows x size x item size) is a question for the
    memory limit alone, asked when they are assembled (vectors.assembled_bytes).
    read(sparse=True) has no such limit. `blocks`: decoded vector blocks."""
    if vtype.is_fixed:
        return
    implicit = sum(int(b.lengths.sum()) - len(b.values) for b in blocks)
    nbytes = implicit * vtype.item.dtype.itemsize
    if nbytes > max(_DENSE_FLOOR, _compression.MAX_RATIO * disk):
        raise IdvFormatError(f"the sparse vectors{which} would densify to {implicit} implicit "
                             f"zeros ({nbytes} bytes) from {disk} bytes in the file; a vector "
                             f"length is corrupt{hint}", **where)


def check_block_sizes(table, codec, kind, rows_per_block, num_rows, lookup_offset):
    """IdvFormatError for the first impossible block size of a column's lookup `table`
    (blocks of `codec`, compression `kind`; its entries at `lookup_offset`), refused before
    any output is allocated (idv._storage.layout.Tables.check_sizes marks the columns whose sizes
    were checked at open)."""
    rows = np.full(len(table), rows_per_block, np.int64)
    rows[-1] = num_rows - (len(table) - 1) * rows_per_block
    raw = table["raw"].astype(np.int64)
    disk = table["disk"].astype(np.int64)
    if codec.itemsize:
        bad = raw != rows * codec.itemsize
        why = "is not rows x item size"
    else:
        bad = raw < np.array([codec.min_size(int(r)) for r in rows[:1]] * (len(rows) - 1)
                             + [codec.min_size(int(rows[-1]))])
        why = "is too small for the block's rows"
    if kind == _compression.NONE:
        bad2 = raw != disk
        why2 = "differs from the stored length (compression None)"
    else:
        bad2 = raw > disk * _compression.MAX_RATIO + 64
        why2 = "is beyond what DEFLATE can expand to"
    for mask, reason in ((bad, why), (bad2, why2)):
        if mask.any():
            b = int(np.flatnonzero(mask)[0])
            raise IdvFormatError(f"decompressed length {int(raw[b])} {reason}", block=b,
                                 offset=lookup_offset + 16 * b)


def fix_error(blocks, error, hit, out):
    """Locate a codec.fix() failure in `out`, the rows of blocks `hit` end to end: the first
    block whose rows fail alone (checked on a copy)."""
    s = 0
    for b in hit.tolist():
        r0, r1 = blocks.rows(b, b + 1)
        try:
            blocks.codec.fix(out[s:s + r1 - r0].copy())
        except IdvFormatError as found:
            return found.locate(block=b, offset=int(blocks.lookup["offset"][b]))
        s += r1 - r0
    return error
