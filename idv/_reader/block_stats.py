"""A file's block statistics as a whole: computed from its blocks, added to a file written
without them (ML.NET's included), and summed up per column (``idv stats``).

``add_statistics`` copies the file's bytes as they are, inserts the statistics section
(idv._storage.statistics) before the table of contents and points to it from the header; a file
with idv's checksums gets its checksum table again, moved with the table of contents. No block is
decoded twice nor re-encoded: ML.NET reads the same values, and every block keeps its bytes and
offset. The new file replaces the old one atomically (idv._storage.sink). """
from __future__ import annotations

import os
import struct

import numpy as np

from idv import _header, types as T
from idv._storage import bounds, checksums, statistics as S
from idv._values import tick_text, ticks
from idv._values.cells import float_json, float_texts, shortest_float
from idv.errors import IdvFormatError
from idv._reader.reader import opened
from idv._scan.scan import NumpyColumn, scan
from idv._storage.sink import Output

_COPY_CHUNK = 8 << 20


def items_of(value):
    """The items of a column's value in read()'s form (vectors: all their items)."""
    if hasattr(value, "values") and hasattr(value, "offsets"):     # Ragged
        return value.values
    return value.reshape(-1) if value.ndim > 1 else value


def compute(f) -> S.Statistics | None:
    """The statistics of an open file's blocks, decoded once through the scan (None: no
    column has any, or no rows)."""
    cols = [c for c in f.columns if c.readable and S.domain_of(c.type) is not None]
    if not cols or not f.num_rows:
        return None
    builders = [S.Builder(c.index, S.domain_of(c.type)) for c in cols]
    for batch in scan(f, cols, NumpyColumn, batch_rows=1):
        b0 = batch.start // cols[0].rows_per_block
        for b, c, v in zip(builders, cols, batch.values):
            stored, = c.stored_blocks(b0, b0 + 1)
            b.add(bounds.item_block(c.type, items_of(v)), checksums.crc(stored))
    stats = {b.index: b.build() for b in builders}
    return S.Statistics(stats, cols[0].num_blocks, fingerprint(f), None, None)


def fingerprint(f) -> int:
    """The fingerprint of an open file's blocks (idv._storage.statistics.fingerprint)."""
    tables = [c.lookup for c in f.columns]
    if not tables:
        return S.fingerprint([], [])
    return S.fingerprint(np.concatenate([t["offset"] for t in tables]),
                         np.concatenate([t["disk"] for t in tables]))


def add_statistics(path) -> bool:
    """Add block statistics to an .idv file, in place and atomically, so that filters skip
    its blocks.

    Parameters
    ----------
    path : str or os.PathLike
        A local path.

    Returns
    -------
    bool
        False when it already has them (and they match its blocks), True when added; also
        True where an earlier idv's statistics lacked the time columns' counts of values
        that are no whole microsecond: they are computed again, and replace them.

    Raises
    ------
    IdvFormatError
        The file's statistics no longer match its blocks, or its blocks do not match idv's
        checksums.
    """
    path = os.fspath(path)
    with open(path, "rb") as src, opened(path) as f:
        # the bytes copied are those the statistics are computed from: one file, pinned
        read = _identity(os.fstat(src.fileno()))
        if f.identity is not None and read != f.identity:
            raise _changed(path)
        if f.statistics is not None and not _lacking_counts(f):   # checked: or refused
            return False
        stats = compute(f)
        if stats is None:
            return False
        h = f.header
        sums = f.store.sums
        section = S.pack(list(stats.columns.values()), stats.num_blocks, stats.fingerprint)

        def still():        # never replaces a file that another program put there since
            try:
                now = _identity(os.stat(path))
            except FileNotFoundError:
                now = None
            if now != read:
                raise _changed(path)
        _rewrite(path, src, h, sums, section, still)
    return True


def _lacking_counts(f):
    """Whether open file `f`'s statistics lack a time column's sub-microsecond counts."""
    return any(cs.sub_us is None and T.item_type(f[i].type) in ticks.TIME_ITEMS
               for i, cs in f.statistics.columns.items())


def _identity(st):
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _changed(path):
    return IdvFormatError("the file changed while its statistics were computed (another "
                          "program replaced or wrote it): it is left as that program left "
                          "it; add them again", path=path)


def _rewrite(path, src, h, sums, section, still):
    """`path` again from `src` (its bytes, open), the section (and a new checksum table)
    before its table of contents; `still()` raises if `path` changed before the move."""
    at = h.toc_offset
    table = b""
    if sums is not None:
        entries = sums.entries.copy()
        moved = entries["offset"] >= at              # the table of contents
        grow = len(section) + (len(entries) + 1) * checksums.ENTRY.itemsize
        entries["offset"][moved] += grow
        extra = np.array([(at, len(section), checksums.crc(section), checksums.TABLE)],
                         checksums.ENTRY)
        table = np.sort(np.concatenate([entries, extra]), order="offset").tobytes()
    delta = len(section) + len(table)
    out = Output(path)
    try:
        out.open()
        src.seek(0)
        head = bytearray(src.read(_header.HEADER_SIZE))
        struct.pack_into("<qq", head, 24, h.toc_offset + delta, h.tail_offset + delta)
        out.write(bytes(head))
        _copy(src, out, at - _header.HEADER_SIZE)
        out.write(section)
        if table:
            out.write(table)
        _copy(src, out, h.tail_offset + 8 - at)
        rest = src.read()         # bytes after the tail (an archive's): kept as they were
        if rest:
            out.write(rest)
        if table:
            head[checksums.POINTER_AT:checksums.POINTER_AT + checksums.POINTER_SIZE] = \
                checksums.Recorder.pointer(bytes(head[:52]), at + len(section), table)
        head[S.POINTER_AT:S.POINTER_AT + S.POINTER_SIZE] = S.pointer(bytes(head[:52]), at,
                                                                     section)
        out.write_at(0, bytes(head))
        out.commit(still)
    except BaseException:
        out.abort()
        raise


def _copy(src, out, n):
    while n > 0:
        data = src.read(min(n, _COPY_CHUNK))
        if not data:
            raise IdvFormatError("the file ended while it was copied", path=src.name)
        out.write(data)
        n -= len(data)


# ---------------------------------------------------------------------------------------------
# a column's statistics in sum
# ---------------------------------------------------------------------------------------------

def summary(f) -> tuple[list, bool]:
    """Per column with statistics: (name, type, present, missing, low, high, index) over the whole
    file, from its section, or computed from its blocks when it has none; and whether they
    came from the section."""
    stats = f.statistics
    stored = stats is not None
    if not stored:
        stats = compute(f)
    rows = []
    for c in f.columns:
        cs = None if stats is None else stats.columns.get(c.index)
        if cs is None:
            continue
        has = cs.present > 0
        low = high = None
        if has.any():
            if cs.domain == S.TEXT:
                low = min(lo for lo, h in zip(cs.low, has) if h)
                highs = [(hi, fl) for hi, fl, h in zip(cs.high, cs.flags, has) if h]
                high = None if any(fl & S.NO_HIGH for _, fl in highs) else \
                    max(hi for hi, _ in highs)
            else:
                low, high = cs.low[has].min(), cs.high[has].max()
        rows.append((c.name, c.type, int(cs.present.sum()), int(cs.missing.sum()), low, high,
                     c.index))
    return rows, stored


def bound_json(value, type_):
    """A bound in JSON form, as ``idv head --json`` gives a value of the column: numbers and
    Booleans as JSON's (a Single at its own precision), the others as bound_text; None as
    None."""
    if value is None:
        return None
    item = T.item_type(type_)
    if item is T.Boolean:
        return bool(value)
    if item in (T.Single, T.Double):
        return float_json(shortest_float(item.dtype.type(value)))
    if isinstance(value, (int, np.integer)) and \
            item not in (T.DateTime, T.DateTimeOffset, T.TimeSpan):
        return int(value)
    return bound_text(value, type_)


def bound_text(value, type_, exact=True):
    """A bound as text: times as ISO (DateTimeOffset: its UTC instant), Text decoded (``…``
    where cut: `exact` False)."""
    if value is None:
        return "(none)"
    item = T.item_type(type_)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace") + ("" if exact else "…")
    if item in (T.DateTime, T.DateTimeOffset):
        at = tick_text.format_datetime(np.int64(int(value) - T.EPOCH_TICKS))
        return at + ("Z" if item is T.DateTimeOffset else "")
    if item is T.TimeSpan:
        return tick_text.format_timespan(np.int64(value))
    if item is T.Boolean:
        return str(bool(value))
    if item in (T.Single, T.Double):        # at the column's precision, as `cat` prints it
        return float_texts(np.asarray([value], item.dtype))[0]
    return str(value.item() if hasattr(value, "item") else value)
