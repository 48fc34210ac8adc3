"""One block's statistics from its values (the Block that idv._storage.statistics stores): the
numbers' least and greatest and the count missing, Text's shortest bounds, one block at a time
or all the blocks of a batch in one pass of C (idv._encode).
"""
from __future__ import annotations

import numpy as np

from idv import _encode, types as T
from idv._storage import sub_microseconds
from idv._storage.statistics import (ASCII, DTYPES, FLOAT, HIGH_EXACT, LOW_EXACT, NO_HIGH,
                                     PREFIX, TEXT, Block, domain_of)
from idv._values.ticks import TIME_ITEMS
from idv.types import EPOCH_TICKS, TICKS_PER_MINUTE


def numbers(domain, values, missing_mask=None, implicit_zero=False) -> Block:
    """The Block of numeric `values` (any shape; a domain's numbers) by numpy; `missing_mask`:
    which are missing; `implicit_zero`: a sparse vector's unstored zeros count as values."""
    values = np.asarray(values).reshape(-1)
    missing = 0 if missing_mask is None else int(np.count_nonzero(missing_mask))
    if missing:
        values = values[~missing_mask.reshape(-1)]
    n = len(values)
    return bounded(domain, n, missing, values.min() if n else None, values.max() if n else None,
                   implicit_zero)


def bounded(domain, present, missing, low, high, implicit_zero=False) -> Block:
    """The Block of `present` values from `low` to `high` and `missing` more; with
    `implicit_zero`, a sparse vector's unstored zeros count as one value more."""
    if implicit_zero:
        low, high = (min(low, 0), max(high, 0)) if present else (0, 0)
        present += 1
    if not present:
        return Block(0, missing)
    dtype = DTYPES[domain]
    return Block(int(present), missing, dtype.type(low), dtype.type(high))


def is_arrow(values):
    """Whether `values` is a pyarrow array (Text read as Arrow strings, tested as they are)."""
    return type(values).__module__.startswith("pyarrow")


def comparable(type_, values):
    """A column's values as read() gives them (or as the writer stores them) in the numbers
    its statistics compare: .NET ticks for DateTime (from datetime64[100ns]), TimeSpan and a
    DateTimeOffset's UTC instant; other numbers and Text as they are."""
    values = values if hasattr(values, "offsets") or is_arrow(values) else np.asarray(values)
    if getattr(values, "dtype", None) is None:
        return values
    if values.dtype.names:          # DateTimeOffset: read()'s (utc, ...), or stored clock ticks
        values = values["utc"] if "utc" in values.dtype.names else \
            values["ticks"] - values["minutes"].astype(np.int64) * TICKS_PER_MINUTE
    if values.dtype.kind == "M":       # read()'s datetime64[100ns]: back to .NET ticks
        return values.view(np.int64) + EPOCH_TICKS
    if values.dtype.kind == "m":
        return values.view(np.int64)
    return values


def item_block(type_, values, implicit_zero=False) -> Block | None:
    """The Block of a column's items as read() gives them (DateTime as datetime64, a
    DateTimeOffset's (utc, offset_minutes), keys' stored values) or as the writer stores
    them; None: a type without statistics."""
    domain = domain_of(type_)
    if domain is None:
        return None
    if domain == TEXT:
        return text_values(values)
    values = comparable(type_, values)
    key = isinstance(T.item_type(type_), T.Key)
    found = _encode.numeric_bounds(values, key)   # contiguous native numbers: one pass of C
    if found is not None:
        block = bounded(domain, *found, implicit_zero)
    else:
        missing = np.isnan(values) if domain == FLOAT else (values == 0) if key else None
        block = numbers(domain, values, missing, implicit_zero)
    if T.item_type(type_) in TIME_ITEMS:      # (a sparse vector's zeros are whole)
        block = block._replace(sub_us=(sub_microseconds.of_runs(values, values.size)
                                       or [(0, 0)])[0])
    return block


def item_blocks(type_, values, rows) -> list[Block] | None:
    """item_block of each run of `rows` values of a scalar column (the last run may be
    shorter), the runs in one pass of C: numbers in a numeric_bounds kind, Text as idv's
    UTF-8 text; None for other values (the caller takes the runs one at a time)."""
    domain = domain_of(type_)
    if domain is None:
        return None
    if domain == TEXT:
        if not (hasattr(values, "offsets") and isinstance(values.data, np.ndarray)) \
                or len(values.offsets) < 2:
            return None
        offsets, data = _offsets(values.offsets), values.data
        lows, highs, ascii = _encode.utf8_extremes_blocks(offsets, data, rows)
        bounds = [data[offsets[i]:offsets[i + 1]][:PREFIX + 1].tobytes() for i in
                  np.concatenate([lows, highs]).tolist()]
        return [text_bounds(n, low, high, a) for n, low, high, a in
                zip(_runs(len(offsets) - 1, rows), bounds[:len(lows)], bounds[len(lows):],
                    ascii.tolist())]
    values = comparable(type_, values)
    found = _encode.numeric_bounds_blocks(values, rows, isinstance(T.item_type(type_), T.Key))
    if found is None:
        return None
    blocks = [bounded(domain, k - m, m, low, high)
              for k, m, low, high in zip(_runs(len(values), rows), found[0].tolist(),
                                         found[1].tolist(), found[2].tolist())]
    if T.item_type(type_) in TIME_ITEMS:
        blocks = [b._replace(sub_us=sub) for b, sub in
                  zip(blocks, sub_microseconds.of_runs(values, rows))]
    return blocks


def _runs(n, rows):
    """The lengths of the runs of `rows` of n values, the last one shorter if need be."""
    return [min(rows, n - a) for a in range(0, n, rows)]


def text_values(values) -> Block:
    """The Block of Text values: an object array of str (compared by code point, the order
    of their UTF-8 bytes, in C without the GIL: no copy of the block), or anything with
    Arrow's `offsets` and `data` (idv's UTF-8 text)."""
    if hasattr(values, "offsets") and hasattr(values, "data"):
        offsets = _offsets(values.offsets)
        data = np.frombuffer(values.data, np.uint8) if not isinstance(values.data, np.ndarray) \
            else values.data
        return text(offsets - offsets[0], data[offsets[0]:offsets[-1]])
    if not len(values):
        return Block(0, 0, b"", b"", 0)
    if isinstance(values, np.ndarray) and values.dtype == object and values.ndim == 1:
        lo, hi, ascii = _encode.text_extremes(np.ascontiguousarray(values))
        low, high = values[lo], values[hi]
    else:
        ascii, low, high = all(map(str.isascii, values)), min(values), max(values)
    return text_bounds(len(values), low.encode("utf-8"), high.encode("utf-8"), ascii)


def text_bounds(n, low, high, ascii) -> Block:
    """The Block of n Text values whose least and greatest are `low` and `high` (their UTF-8,
    cut to PREFIX + 1 bytes or not: one byte past a bound tells a longer value);
    `ascii`: whether every value is ASCII."""
    if not n:
        return Block(0, 0, b"", b"", 0)
    flags = ASCII if ascii else 0
    if len(low) <= PREFIX:
        flags |= LOW_EXACT
    if len(high) <= PREFIX:
        flags |= HIGH_EXACT
    else:
        high = _above(high[:PREFIX])
        if high is None:
            flags |= NO_HIGH
            high = b""
    return Block(n, 0, low[:PREFIX], high, flags)


def _above(prefix: bytes):
    """The shortest bytes greater than every value that starts with `prefix` (None: none)."""
    b = prefix.rstrip(b"\xff")
    if not b:
        return None
    return b[:-1] + bytes([b[-1] + 1])


def _offsets(offsets):
    """Text offsets as the C passes take them: contiguous int32 (kept) or int64."""
    offsets = np.ascontiguousarray(offsets)
    return offsets if offsets.dtype == np.int32 else offsets.astype(np.int64, copy=False)


def text(offsets, data) -> Block:
    """The Block of n Text values in Arrow's layout (n + 1 byte offsets, UTF-8 data)."""
    n = len(offsets) - 1
    if n <= 0:
        return Block(0, 0, b"", b"", 0)
    offsets = _offsets(offsets)
    data = np.ascontiguousarray(data, np.uint8)
    lo, hi, ascii = _encode.utf8_extremes(offsets, data)
    # a bound keeps PREFIX bytes; one more tells whether the value was longer
    return text_bounds(n, data[offsets[lo]:offsets[lo + 1]][:PREFIX + 1].tobytes(),
                       data[offsets[hi]:offsets[hi + 1]][:PREFIX + 1].tobytes(), ascii)
