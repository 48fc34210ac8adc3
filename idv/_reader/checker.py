"""The file checker behind ``idv.verify`` and ``idv verify``: decode and check every byte.

Reading checks what it reads and stops at the first problem. The checker reads everything and
keeps going, so one pass lists every problem with its place: every block of every column
(hidden ones included) decoded, every entry of every lookup table, every metadata table and
value, and that the header, the blocks, the lookup tables, the metadata values and the table
of contents do not overlap. It uses the columns' package-internal methods (``read_blocks``,
``lookup_errors``, ``metadata_entries``, ``decode_metadata``...), the block store's
``stored_vectors`` (vectors as stored: sparse rows are checked, not densified), and the
locations the errors carry.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from idv import _docs, types as T
from idv._reader import block_stats, reader
from idv._storage import bounds, statistics as S
from idv._store.block_runs import block_groups
from idv._resources.budget import MemoryLimitError
from idv._values.arguments import own_options
from idv._values.metadata import annotation_size_problem, usable_key_values
from idv.errors import IdvFormatError, UnsupportedCodecError
from idv._reader.reader import IdvFile

# decompressed bytes decoded per call; a failing group is decoded again block by block
GROUP_BYTES = 32 << 20


@dataclass
class Finding:
    """One thing ``verify`` found: a problem (the file is not sound) or a warning (a part it
    could not check).

    Attributes: ``what`` (``'file'``, ``'column'``, ``'lookup'``, ``'block'`` or
    ``'metadata'``; parts that overlap are a ``'file'`` problem, found when it opens), ``message``,
    and where, None when it does not apply: ``column`` (the column's name), ``column_index``,
    ``metadata_kind``, ``block``, ``rows`` (the block's first and last row), ``offset`` (byte
    offset in the file) and ``size`` (bytes). ``str(finding)`` is one line, as ``idv verify``
    prints it. """

    what: str
    message: str
    column: Optional[str] = None
    column_index: Optional[int] = None
    metadata_kind: Optional[str] = None
    block: Optional[int] = None
    rows: Optional[Tuple[int, int]] = None
    offset: Optional[int] = None
    size: Optional[int] = None

    def __post_init__(self):
        self.message = " ".join(str(self.message).split())   # one line

    @classmethod
    def about(cls, what, message, col=None, **where):
        """A finding on column `col`.

        Parameters
        ----------
        what : str
            The kind of part checked (``'block'``, ``'lookup'``, ``'metadata'``...).
        message : str
            What is wrong.
        col : Column, optional
            None: the whole file.
        **where
            The location attributes of an IdvFormatError (``block``, ``offset``...).
        """
        if col is not None:
            where.update(column=col.name, column_index=col.index)
        return cls(what, message, **where)

    @classmethod
    def from_error(cls, what, error, col=None, **where):
        """A finding for an IdvFormatError: its reason, and its location where `where` does
        not give one.

        Parameters
        ----------
        what, col, **where
            As about().
        error : IdvFormatError
        """
        for name in ("metadata_kind", "block", "offset"):
            if where.get(name) is None:
                where[name] = getattr(error, name)
        return cls.about(what, error.reason, col, **where)

    @property
    def where(self):
        """The place, as printed: ``column 4 'Txt' block 3 (rows 21-27) at byte 1123 (47
        bytes)``."""
        parts = []
        if self.column_index is not None:
            parts.append(f"column {self.column_index} {self.column!r}")
        if self.what == "lookup":
            parts.append("lookup table" + ("" if self.block is None else f" entry {self.block}"))
        elif self.what == "block":
            parts.append(f"block {self.block} (rows {self.rows[0]}-{self.rows[1]})")
        elif self.what == "metadata":
            parts.append("metadata table" if self.metadata_kind is None
                         else f"metadata {self.metadata_kind!r}")
        elif self.what == "file":
            parts.append(self.what)
        if self.offset is not None:
            parts.append(f"at byte {self.offset}"
                         + ("" if self.size is None else f" ({self.size} bytes)"))
        return " ".join(parts)

    def to_dict(self):
        """The JSON form: ``what``, ``column`` (the index) and ``name``, then ``kind``,
        ``block``, ``rows``, ``offset``, ``size`` where known, and ``message``."""
        d = {"what": self.what}
        if self.column_index is not None:
            d["column"] = self.column_index
            d["name"] = self.column
        for key, value in (("kind", self.metadata_kind), ("block", self.block),
                           ("rows", None if self.rows is None else list(self.rows)),
                           ("offset", self.offset), ("size", self.size)):
            if value is not None:
                d[key] = value
        d["message"] = self.message
        return d

    def __str__(self):
        return f"{self.where}: {self.message}"


class VerifyReport:
    """What ``idv.verify`` found.

    Attributes: ``ok`` (no problems), ``checksums`` (whether the file carries idv's CRC-32s,
    checked), ``problems`` and ``warnings`` (lists of
    :class:`Finding`), ``checked`` (counts: columns, blocks, block_bytes, lookup_tables,
    metadata), ``columns`` (one dict per column: index, name, type, codec, blocks, blocks_ok,
    metadata, checked), ``num_rows`` and ``num_columns`` (None when the file could not be
    opened) and ``path`` (None unless verify was given a path). ``print(report)`` shows it as
    ``idv verify`` does; ``to_dict()`` is its JSON form.
    """

    def __init__(self, path=None):
        self.path = path
        self.problems = []
        self.warnings = []
        self.columns = []
        self.checked = {"columns": 0, "blocks": 0, "block_bytes": 0, "lookup_tables": 0,
                        "metadata": 0}
        self.num_rows = self.num_columns = None
        self.checksums = None       # whether the file carries idv's checksums (None: unopened)

    @classmethod
    def for_unopenable(cls, error, path=None):
        """The report on a file that cannot be opened: `error` (an IdvFormatError) is its one
        problem, of kind ``'file'``."""
        report = cls(path)
        report.problems.append(Finding("file", f"{error.location}: {error.reason}"
                                       if error.location else error.reason))
        return report

    @property
    def ok(self):
        """True when no problem was found (warnings do not count)."""
        return not self.problems

    @property
    def summary(self):
        """``'OK'``, ``'3 problems'``, ``'OK, 1 warning'``..."""
        status = _plural(len(self.problems), "problem") if self.problems else "OK"
        if self.warnings:
            status += ", " + _plural(len(self.warnings), "warning")
        return status

    def to_dict(self):
        """The JSON form: ok, num_rows, num_columns, checked, problems, warnings, columns."""
        return {"ok": self.ok, "num_rows": self.num_rows, "num_columns": self.num_columns,
                "checksums": self.checksums, "checked": dict(self.checked),
                "problems": [p.to_dict() for p in self.problems],
                "warnings": [w.to_dict() for w in self.warnings], "columns": self.columns}

    def to_text(self, name=None):
        """The report as lines of text.

        Parameters
        ----------
        name : str, optional
            The heading (default: the path).
        """
        lines = [f"{name or self.path or '(data)'}: {self.summary}"]
        lines += [f"  {p}" for p in self.problems]
        lines += [f"  warning: {w}" for w in self.warnings]
        if self.num_columns is not None:
            lines.append("checksums: every part checked against the CRC-32 idv recorded"
                         if self.checksums else
                         "no checksums (as ML.NET writes files): damage that still decodes "
                         "cannot be seen")
            c = self.checked
            lines.append(f"checked {c['columns']} of {_plural(self.num_columns, 'column')}, "
                         f"{_plural(c['blocks'], 'block')} "
                         f"({_plural(c['block_bytes'], 'byte')}), "
                         f"{_plural(c['lookup_tables'], 'lookup table')}, "
                         f"{_plural(c['metadata'], 'metadata value')}; "
                         f"{_plural(self.num_rows, 'row')}")

        return "\n".join(lines)

    def __str__(self):
        return self.to_text()

    def __repr__(self):
        return f"<idv.VerifyReport {self.summary}>"


@_docs.fill
def verify(source, *, threads=None, backend=None, memory_limit=None, filesystem=None,
           storage_options=None, timeout=None) -> VerifyReport:
    """Check a whole file: decode every block of every column (hidden ones included) and every
    metadata value, parse every lookup table, and check that no two parts of the file overlap.

    Problems do not raise: they are listed in the report, a file that cannot be opened as
    one problem of kind ``'file'``. Errors that are not about the file's bytes (a missing
    file, an unknown backend, storage that does not answer) raise as in idv.open.

    Parameters
    ----------
    {source}
    {threads}
    {backend}
    {memory_limit}
    {filesystem}
    {storage_options}
    {timeout}

    Returns
    -------
    VerifyReport

    Examples
    --------
    >>> idv.verify(idv.sample_path()).ok
    True
    """
    options = dict(threads=threads, backend=backend, memory_limit=memory_limit,
                   filesystem=filesystem, storage_options=storage_options, timeout=timeout)
    if isinstance(source, IdvFile):
        own_options(source, options)
        report = VerifyReport()
        _check(source, report)
        return report
    path = os.fspath(source) if isinstance(source, (str, os.PathLike)) else None
    try:
        f = reader.open(source, checksums=True, **options)
    except IdvFormatError as e:
        return VerifyReport.for_unopenable(e, path)
    report = VerifyReport(path)
    with f:
        _check(f, report)
    return report


def _check(f, report):
    # parts of the file that share bytes were refused when it opened (idv._storage.layout)
    report.num_rows, report.num_columns = f.num_rows, f.num_columns
    report.checksums = f.has_checksums
    stats = None
    try:        # the block statistics: their own CRC-32, their form, their blocks' fingerprint
        stats = f.statistics
    except IdvFormatError as e:
        report.problems.append(Finding("file", f"{e.location}: {e.reason}"
                                       if e.location else e.reason))
    for col in f.columns:
        _check_column(f.store, col, report, None if stats is None else stats.columns.get(col.index))


def _check_statistics(col, cs, b, values, report):
    """A problem where block `b`'s recorded statistics (`cs`: the column's
    idv._storage.statistics.ColumnStats) are not those of its decoded `values` (vectors: a
    VectorBlock, its stored items and any implicit zero, as the writer counts them)."""
    if isinstance(col.type, T.Vector):
        got = bounds.item_block(col.type, values.values, not values.all_dense)
    else:
        got = bounds.item_block(col.type, block_stats.items_of(values))
    if got is None:
        return
    recorded = cs.block(b)
    # a sparse vector's writer counts its unstored zeros as one value: counts of vectors'
    # values differ by form, their bounds do not
    counted = recorded.present == got.present or isinstance(col.type, T.Vector) and \
        (recorded.present > 0) == (got.present > 0)
    ticked = recorded.sub_us is None or recorded.sub_us == got.sub_us
    if not counted or not ticked or recorded.missing != got.missing or \
            (got.present and not _same_bounds(cs.domain, recorded, got)):
        r0, r1 = col.block_rows(b)
        report.problems.append(Finding.about(
            "block", f"the block statistics disagree with the block's values: recorded "
                     f"{_shown(recorded)}, the values give {_shown(got)}", col, block=b,
            rows=(r0, r1 - 1)))


def _same_bounds(domain, a, b):
    if domain == S.TEXT:
        return (a.low, a.high, a.flags) == (b.low, b.high, b.flags)
    return a.low == b.low and a.high == b.high


def _shown(block):
    out = f"{block.present} present, {block.missing} missing"
    low, high = (v.item() if hasattr(v, "item") else v for v in (block.low, block.high))
    out += f", from {low!r} to {high!r}" if block.present else ""
    if block.sub_us is not None:
        out += f", {block.sub_us[0]} with 100-ns ticks (the first {block.sub_us[1]})"
    return out


def _check_column(store, col, report, cs=None):
    info = {"index": col.index, "name": col.name,
            "type": None if col.type is None else str(col.type), "codec": col.codec_name,
            "blocks": col.num_blocks, "blocks_ok": 0, "metadata": 0, "checked": col.readable}
    report.columns.append(info)
    if col.readable:
        report.checked["columns"] += 1
    else:
        report.warnings.append(Finding.about("column", f"not checked: {col.unreadable_reason}",
                                             col))
    table = _check_lookup(col, report)
    above = []          # the first key stored above the key count: (block, value)
    if table is not None and col.readable:
        info["blocks_ok"] = _check_blocks(store, col, table, report, cs, above)
    decoded = {}
    info["metadata"] = _check_metadata(col, report, decoded)
    if above and usable_key_values(_key_item(col), decoded) is not None:
        (b, value), (r0, r1) = above[0], col.block_rows(above[0][0])
        report.warnings.append(Finding.about(
            "block", f"key value {value} is above the key count {_key_item(col).count}: no "
                     f"KeyValue labels it, so reads that give labels (pandas, Arrow, polars, "
                     f"DuckDB) refuse the file; idv.read() gives the raw keys", col, block=b,
            rows=(r0, r1 - 1)))


def _check_lookup(col, report):
    """The column's lookup table, or None when it has no blocks or the table is invalid (each
    bad entry is a problem: reading stops at the first)."""
    if not col.num_blocks:
        return None
    try:
        table = col.lookup
    except IdvFormatError as e:
        report.problems.append(Finding.from_error("lookup", e, col))
        report.problems += [Finding.from_error("lookup", other, col)
                            for other in col.lookup_errors() if other.block != e.block]
        if col.readable:
            report.warnings.append(Finding.about("column", "blocks not checked: the lookup "
                                                           "table is invalid", col))
        return None
    report.checked["lookup_tables"] += 1
    return table


def _check_blocks(store, col, table, report, cs=None, above=None):
    """Decode every block, a group at a time (within the file's memory limit); a failing
    group again block by block, to find each bad block, and a block whose decoding is over
    the limit a warning (not checked). Returns the number of sound blocks. `cs`: the column's
    statistics, each block's compared with its values; `store`: the file's BlockStore;
    `above`: a list given the first (block, key) stored above a key column's count."""
    sound = 0
    group = max(1, min(GROUP_BYTES, int(store.memory_limit) // 2))
    item = _key_item(col)
    count = item.count if item is not None and above is not None else None
    for g0, g1 in block_groups(table["raw"].astype("int64"), group):
        try:
            values = _decoded(store, col, g0, g1)
            ok = range(g0, g1)
            if cs is not None:
                for b in ok:
                    _check_statistics(col, cs, b, values[b - g0], report)
            if count and not above:
                above += _keys_above(col, count, g0, values)
        except (IdvFormatError, MemoryLimitError):
            ok = [b for b in range(g0, g1) if _check_block(store, col, table, b, report, cs)]
        for b in ok:
            report.checked["blocks"] += 1
            report.checked["block_bytes"] += int(table["disk"][b])
        sound += len(ok)
    return sound


def _check_block(store, col, table, b, report, cs):
    """Whether block `b` decodes (its statistics compared); a problem found, or a warning
    when decoding it alone is over the memory limit."""
    r0, r1 = col.block_rows(b)
    try:
        values, = _decoded(store, col, b, b + 1)
    except MemoryLimitError as e:
        report.warnings.append(Finding.about("block", f"not checked: {e}", col, block=b,
                                             rows=(r0, r1 - 1)))
        return False
    except IdvFormatError as e:
        report.problems.append(Finding.from_error(
            "block", e, col, block=b, rows=(r0, r1 - 1), offset=int(table["offset"][b]),
            size=int(table["disk"][b])))
        return False
    if cs is not None:
        _check_statistics(col, cs, b, values, report)
    return True


def _key_item(col):
    """The key type of a column of keys or of a vector of keys, else None."""
    item = col.type.item if isinstance(col.type, T.Vector) else col.type
    return item if isinstance(item, T.Key) and item.count else None


def _keys_above(col, count, b0, values):
    """[(block, key)] of the first key above `count` in `values` (blocks b0... decoded), or
    []: legal to ML.NET, but no KeyValue labels it."""
    for b, block in enumerate(values, b0):
        items = np.asarray(block.values if isinstance(col.type, T.Vector) else block)
        above = np.flatnonzero(items > count)
        if len(above):
            return [(b, int(items[above[0]]))]
    return []


def _decoded(store, col, b0, b1):
    """Each block of blocks [b0, b1) decoded: vectors as stored (BlockStore.stored_vectors),
    since densifying sparse rows checks nothing more and may take gigabytes where the rows of a
    fixed-size type are wide; other columns in read()'s form."""
    if isinstance(col.type, T.Vector):
        return store.stored_vectors(col.blocks, b0, b1)
    values = col.read_blocks(b0, b1)
    r0 = col.block_rows(b0)[0]
    return [values[a - r0:z - r0] for a, z in map(col.block_rows, range(b0, b1))]


def _check_metadata(col, report, decoded):
    """Decode the metadata table and every value; returns the number of sound values, and
    puts a sound KeyValues into `decoded` (by kind)."""
    try:
        entries = col.metadata_entries()
    except IdvFormatError as e:
        report.problems.append(Finding.from_error("metadata", e, col))
        return 0
    sound = 0
    for m in entries:
        try:
            value = col.decode_metadata(m)
        except UnsupportedCodecError as e:
            report.warnings.append(Finding.about("metadata", f"{m.kind!r} not checked: "
                                                 f"{e.reason}", col, metadata_kind=m.kind,
                                                 offset=m.offset))
            continue
        except MemoryLimitError as e:
            report.warnings.append(Finding.about("metadata", f"{m.kind!r} not checked: {e}",
                                                 col, metadata_kind=m.kind, offset=m.offset))
            continue
        except IdvFormatError as e:
            # damage in the value's bytes has its size; in the codec's parameters, not
            size = m.size if e.offset is not None else None
            report.problems.append(Finding.from_error("metadata", e, col, metadata_kind=m.kind,
                                                      offset=m.offset, size=size))
            continue
        problem = _size_problem(col, m)
        if problem:
            report.problems.append(Finding.about("metadata", problem, col, metadata_kind=m.kind,
                                                 offset=m.offset, size=m.size))
            continue
        sound += 1
        report.checked["metadata"] += 1
        if m.kind == "KeyValues":
            decoded[m.kind] = value
    return sound


def _size_problem(col, m):
    """annotation_size_problem of annotation `m` of `col` (KeyValues, SlotNames), None for
    others and where the types cannot be told (another annotation's damaged codec, reported
    as its own problem)."""
    if col.type is None or m.kind not in ("KeyValues", "SlotNames"):
        return None
    try:
        value_type = col.metadata_types.get(m.kind)
    except IdvFormatError:
        return None
    return annotation_size_problem(col.type, m.kind, value_type)


def _plural(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"
