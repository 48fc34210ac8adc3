"""Filters: which blocks may hold matching rows (from the block statistics) and which rows
match (exactly, on the decoded values).

A filter is given as pyarrow.parquet's DNF tuples (``[("ts", ">=", t)]`` and'ed, a list of
such lists or'ed), a string of Python's expression syntax (``"Age > 30 and City ==
'Paris'"``, the command line's ``--where``), or a pyarrow compute expression
(``pc.field("ts") >= t``, read with its literals' types by idv._values.arrow_expressions). Each
becomes one tree of ``Cmp`` / ``IsNull`` / ``And`` / ``Or`` / ``Not`` (idv._scan.filter_tree),
bound to a file's columns here (`Prepared`), whose comparisons mean what idv._values.comparison
says, for blocks and rows alike: over each block's statistics (blocks ruled out are never fetched
nor decoded; without statistics every block is kept), then over the rows of the blocks kept. So
results never depend on whether a file has statistics, nor on the path a read takes. """
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from idv._resources import budget
from idv._values import comparison, vectors
from idv._values.metadata import usable_key_values
from idv import types as T
from idv.errors import IdvFormatError, no_column, warn
from idv._scan.checked_keys import CheckedVectorKeys, labelled, numbers_reader
from idv._scan.filter_tree import And, BlocksOnly, IsNull, Not, Or, columns_of, parse
from idv._scan.scan import TextColumn, scan
from idv._scan.tested import Tested, untested, with_tests
from idv._scan.vector_rows import VectorColumn
from idv._values.text_bytes import TextRows


# ---------------------------------------------------------------------------------------------
# a filter bound to a file: one meaning for its blocks and its rows
# ---------------------------------------------------------------------------------------------

class _Bound(NamedTuple):
    """A comparison bound to its column (idv._values.comparison.Test)."""
    column: str
    test: comparison.Test


class Prepared:
    """A filter over one open file: each comparison bound to the file's column
    (idv._values.comparison.bind: TypeError / ValueError for a literal the column cannot be
    compared with, KeyError for a column the file lacks) and the file's statistics as zones. The
    same bound tree decides the blocks that may match (`blocks`), those that surely match whole
    (`whole_blocks`) and the rows that match (`rows`)."""

    def __init__(self, node, f):
        self.node = node
        self.file = f
        self._keep = None
        self.columns = {}
        self._division = None
        names = columns_of(node)
        for name in names:
            if name not in f:
                raise no_column(name, f.column_names, by="filter: ")
            col = f[name]
            kv = col.metadata.get("KeyValues") if "KeyValues" in col.metadata_kinds else None
            self.columns[name] = comparison.Column(name, col.type,
                                                   None if kv is None else list(kv))
        self.tree = _bind(node, self.columns)
        self.num_blocks = f[0].num_blocks if f.num_columns else 0    # no other Column built
        self.zones = {}
        self._judges = []           # the columns whose statistics decide
        for name in names:
            cs = usable_statistics(f, f[name].index)
            self.zones[name] = None if cs is None else \
                comparison.Zones(self.columns[name].type, cs)
            if cs is not None:
                self._judges.append((f[name], cs.crcs))

    def blocks(self):
        """A bool per block: False where the statistics rule out every row (those blocks
        checked: unread). Found once."""
        if self._keep is None:
            keep = _may(self.tree, self.zones, self.num_blocks)
            self._unread(~keep)
            self._keep = keep
        return self._keep

    def whole_blocks(self):
        """A bool per block: True where the statistics show that every row matches (a count
        needs no decoding; those blocks checked: unread); False where they cannot tell."""
        whole = _all(self.tree, self.zones, self.num_blocks)
        self._unread(whole)
        return whole

    def _unread(self, taken):
        """Check the blocks `taken` (a bool per block), answered from the statistics alone,
        against their CRC-32s where that needs no fetch (Column.check_unread): a block
        changed since its statistics is an IdvFormatError, as its read would be, never rows
        silently left out or counted."""
        which = np.flatnonzero(taken)
        if len(which):
            for col, recorded in self._judges:
                col.check_unread(which, recorded)

    def hits(self, values):
        """The positions (int64, ascending) of the rows of a batch that match (as rows()
        says; a single comparison's found without a mask)."""
        if isinstance(self.tree, _Bound):
            name = self.tree.column
            return comparison.column_hits(self.columns[name].type, self.tree.test,
                                          values[name])
        return np.flatnonzero(self.rows(values))

    def division(self):
        """The row test divided among the columns it names (Division), made once."""
        if self._division is None:
            self._division = Division(self)
        return self._division

    def rows(self, values):
        """A bool per row of a batch (`values`: name -> read()'s form of the filter's
        columns)."""
        seen = {}

        def x(name):
            if name not in seen:
                seen[name] = comparison.comparable(self.columns[name].type, values[name])
            return seen[name]
        n = vectors.num_rows_of(next(iter(values.values()))) if values else 0
        return _rows(self.tree, self.columns, x, n)


def usable_statistics(f, index):
    """The statistics of column number `index` of open file `f` that filters may use (its
    alone: a filter on a few columns of a wide file reads theirs): None without, and None
    with an IdvWarning when they are malformed or no longer match the file's blocks (the
    blocks are then all read: a filter never returns fewer rows for bad statistics)."""
    try:
        return f.column_statistics(index)
    except IdvFormatError as e:
        warn(f"{e}; the filter reads every block instead")
        return None


def _bind(node, columns):
    if isinstance(node, And):
        return And(tuple(_bind(p, columns) for p in node.parts))
    if isinstance(node, Or):
        return Or(tuple(_bind(p, columns) for p in node.parts))
    if isinstance(node, Not):
        return Not(_bind(node.part, columns))
    if isinstance(node, BlocksOnly):
        return BlocksOnly(_bind(node.part, columns))
    if isinstance(node, IsNull):
        c = columns[node.column]
        if isinstance(c.type, T.Vector):
            raise ValueError(f"column {c.name!r} is a vector: filters compare scalar columns")
        if node.nan_is_null is not None and not _arrow_nulls(c, node.nan_is_null):
            # Arrow's null test of a column Arrow holds no null of: no row, or every row
            return _Bound(node.column, comparison.bind(c, "not in" if node.negate else "in", []))
        return IsNull(node.column, node.negate)
    return _Bound(node.column, comparison.bind(columns[node.column], node.op, node.value))


def _arrow_nulls(col, nan_is_null):
    """Whether column `col` (comparison.Column) holds Arrow nulls where idv's isnull holds:
    a float's NaN counted as null (`nan_is_null`), a key labelled by its KeyValues (Arrow's
    dictionary, whose missing entry is null)."""
    item = T.item_type(col.type)
    if item in (T.Single, T.Double):
        return nan_is_null
    if isinstance(item, T.Key):
        return col.key_values is not None and \
            usable_key_values(col.type, {"KeyValues": col.key_values}) is not None
    return True       # no missing value in idv's terms either


def _may(n, zones, nb):
    if isinstance(n, (And, Or)):
        got = [_may(p, zones, nb) for p in n.parts]
        return np.logical_and.reduce(got) if isinstance(n, And) else np.logical_or.reduce(got)
    if isinstance(n, Not):          # a block may hold a row failing part unless all pass it
        return ~_all(n.part, zones, nb)
    if isinstance(n, BlocksOnly):
        return _may(n.part, zones, nb)
    z = zones[n.column]
    if z is None:
        return np.ones(nb, bool)
    if isinstance(n, IsNull):
        return z.null_may(n.negate)
    return z.may_match(n.test)


def _all(n, zones, nb):
    if isinstance(n, (And, Or)):
        got = [_all(p, zones, nb) for p in n.parts]
        return np.logical_and.reduce(got) if isinstance(n, And) else np.logical_or.reduce(got)
    if isinstance(n, Not):          # every row fails part where no row can pass it
        return ~_may(n.part, zones, nb)
    z = None if isinstance(n, BlocksOnly) else zones[n.column]
    if z is None:
        return np.zeros(nb, bool)
    if isinstance(n, IsNull):
        return z.null_all(n.negate)
    return z.all_match(n.test)


class Division:
    """A Prepared filter's row test divided among the columns it names, so that a scan's
    threads test each piece of a column as they decode it (idv._scan.tested): where every
    comparison is on one column (``single``), a piece's matching rows themselves; else, for
    each part of the tree on one column alone, a mask per row of a piece, which `hits` then
    combines as the tree does. Each piece tested as Prepared.rows would test it."""

    def __init__(self, prepared):
        self.prepared = prepared
        names = list(prepared.columns)
        self.single = names[0] if len(names) == 1 else None
        self.parts = {}         # column -> its parts of the tree (those on it alone)
        self.top = None if self.single else _divide(prepared.tree, self.parts)

    def piece(self, name, values):
        """What a piece of column `name` finds (`values`: read()'s form, or Text as Arrow
        strings or TextRows): the positions (int64, ascending) of its matching rows where the
        filter is on this column alone, else a bool mask per part of it (parts x rows)."""
        p = self.prepared
        if self.single is not None:
            return p.hits({name: values})
        x = comparison.comparable(p.columns[name].type, values)
        n = vectors.num_rows_of(values)
        return np.stack([_rows(t, p.columns, lambda _: x, n) for t in self.parts[name]]) \
            if n else np.zeros((len(self.parts[name]), 0), bool)

    def hits(self, found, count):
        """The positions of a batch's `count` rows that match, from what its pieces found
        (`found`: column -> piece()'s, joined over the batch's rows: idv._scan.tested's)."""
        if self.single is not None:
            return found[self.single].array()
        return np.flatnonzero(_rows(self.top, None, lambda part: found[part.column][part.index],
                                    count))


class _Part(NamedTuple):
    """Where a part of a tree on one column alone was (Division): its mask's index among the
    column's."""
    column: str
    index: int


def _divide(n, parts):
    """Tree `n` (bound) with each largest part on one column alone replaced by a _Part, that
    part appended to `parts[column]`."""
    names = _names(n)
    if len(names) == 1:
        mine = parts.setdefault(names[0], [])
        mine.append(n)
        return _Part(names[0], len(mine) - 1)
    if isinstance(n, (And, Or)):
        return type(n)(tuple(_divide(p, parts) for p in n.parts))
    if isinstance(n, Not):
        return Not(_divide(n.part, parts))
    return n                # BlocksOnly: every row kept, nothing to test


def _names(n):
    """The columns a bound tree names."""
    if isinstance(n, (And, Or)):
        return list(dict.fromkeys(c for p in n.parts for c in _names(p)))
    if isinstance(n, (Not, BlocksOnly)):
        return _names(n.part)
    return [n.column]


def _rows(n, columns, x, count):
    """A bool per row of tree `n`: ``x(name)`` the column's comparable values (``x(part)``
    a _Part's mask)."""
    if isinstance(n, _Part):
        return x(n)
    if isinstance(n, (And, Or)):
        out = _rows(n.parts[0], columns, x, count)
        for p in n.parts[1:]:
            out = (out & _rows(p, columns, x, count)) if isinstance(n, And) else \
                (out | _rows(p, columns, x, count))
        return out
    if isinstance(n, Not):
        return ~_rows(n.part, columns, x, count)
    if isinstance(n, BlocksOnly):
        return np.ones(count, bool)
    if isinstance(n, IsNull):
        gone = comparison.missing(columns[n.column].type, x(n.column))
        return ~gone if n.negate else gone
    return comparison.rows(n.test, x(n.column))


def prepare(node, f) -> Prepared:
    """The filter tree `node` bound to open file `f` (Prepared)."""
    return Prepared(node, f)


class PerFile:
    """The Prepared filter of the file a scan is in (bound once per file, for its blocks and
    then its rows; the last file's kept, with the file itself so that its id is not reused)."""

    def __init__(self, node, prepared=None):
        self.node = node
        self._last = (None, None) if prepared is None else (prepared.file, prepared)

    def __call__(self, f) -> Prepared:
        if self._last[0] is not f:
            self._last = (f, prepare(self.node, f))
        return self._last[1]

    def block_filter(self, _part, f):
        """The scan's block_filter(part, file)."""
        return self(f).blocks()


def block_filter(node):
    """A scan's block_filter(part, file) for the filter `node` (statistics where the file
    has them)."""
    return PerFile(node).block_filter


def take(value, rows):
    """Rows `rows` (int64 positions, ascending) of a value in read()'s form, or of Text read
    as its bytes (made into str objects for those rows alone)."""
    if isinstance(value, np.ndarray):
        return value[rows]
    if isinstance(value, TextRows):
        return value.strings(rows)
    if hasattr(value, "take"):
        return value.take(rows)
    return value[rows]


def bytes_reader(col, labels=False):
    """A scan's reader of `col` for rows picked from its blocks (a filter's matches, a take's
    rows): Text as its blocks' UTF-8 bytes, tested and taken on them (take(): str made for the
    rows kept alone), vectors as their blocks store them (take(): only the rows kept made
    dense), other columns in read()'s forms. Where `labels` (the read gives keys' labels:
    True, or pandas' vectors mode, whose "expand" labels a vector's slots too), a key column
    with KeyValues has every key decoded checked to have a label (checked_keys)."""
    if col.type is T.Text:
        return TextColumn(col)
    if isinstance(col.type, T.Vector):
        return CheckedVectorKeys(col) if labels and labelled(col, labels) else VectorColumn(col)
    return numbers_reader(col, labels)


def filtered(source, columns, filter_, batch_rows=None, rows=None, blocks=None, labels=False,
             **how):
    """(batch, positions, values) of the rows of `source` (an IdvFile or a Dataset) that
    match `filter_`, in row order: `positions` (int64) of the matching rows among the scan
    batch's, `values` one per column of `columns` in read()'s form. `rows`, `batch_rows` and
    `how` (window_bytes, ahead): as the scan's; `blocks`: a block_filter(part, file) of the
    caller's, whose blocks are read where the filter's statistics allow. `filter_` may be
    one already prepared on the file `source` (its statistics checked once). `labels`
    (bytes_reader's): the caller gives keys' labels (Arrow, pandas), so a key column with
    KeyValues, returned or tested, refuses a key above its count in any row decoded, whatever
    the filter keeps (checked_keys); idv.read's raw keys are not checked."""
    prepared = filter_ if isinstance(filter_, Prepared) else None
    node = prepared.node if prepared is not None else parse(filter_)
    wanted = _by_name(source, columns)
    extra = [c for c in columns_of(node) if c not in wanted]
    names = wanted + extra
    bound = PerFile(node, prepared)
    if not hasattr(source, "open_file"):
        bound(source)       # a column the filter names that the file lacks, said so first

    def keep(part, f):
        mask = bound.block_filter(part, f)
        return mask if blocks is None else mask & np.asarray(blocks(part, f), bool)
    # numbers taken where they are tested (a step cuts the rows after): without the GIL
    stepless = rows is None or rows.step == 1

    def wrap(f, readers):    # each piece of a column tested in the scan's threads
        division = bound(f).division()
        where = {n: names.index(n) for n in division.prepared.columns}
        return with_tests(readers, where, division, takes={
            k: _take_numbers for n, k in where.items()
            if stepless and n in wanted and division.single and f[n].type is not T.Text})
    reader = (lambda col: bytes_reader(col, labels)) if labels else bytes_reader
    for batch in scan(source, names, reader, block_filter=keep, batch_rows=batch_rows,
                      rows=rows, wrap=wrap, **how):
        division = bound(batch_file(source, batch)).division()
        values = dict(zip(names, batch.values))
        hits = division.hits({n: values[n].found for n in division.prepared.columns},
                             len(range(batch.start, batch.stop, batch.step)))
        yield batch, hits, [_joined(values[n].value) if isinstance(values[n], Tested) and
                            values[n].taken else take(untested(values[n]), hits)
                            for n in wanted]


def _by_name(source, keys):
    """`keys` (names, or a file's column indices) with an index given as its column's name
    where that name picks it (the last column of the name): a column the filter tests as well
    is then decoded once; an index of a hidden column stays one."""
    names = source.column_names
    last = {n: i for i, n in enumerate(names)}
    return [names[k] if isinstance(k, (int, np.integer)) and -len(names) <= k < len(names)
            and last[names[k]] == k % len(names) else k for k in keys]


def _take_numbers(_chunks, hits, seen):
    return seen[hits]


def _joined(pieces):
    return pieces[0] if len(pieces) == 1 else vectors.concat_reads(pieces)


def batch_file(source, batch):
    """The open file a batch of `source` came from."""
    return source.open_file(batch.part) if hasattr(source, "open_file") else source


def read(f, columns, filter_, rows=None):
    """dict name -> read()'s form of the rows of file `f` matching `filter_` (`columns`:
    the names to return; `rows`: a slice of the file's rows to look in)."""
    return matching(f, columns, filter_, rows, positions=False)[1]


def matching(f, columns, filter_, rows=None, positions=True, labels=False):
    """(positions, values): the file's row numbers (int64; None unless `positions`) of the
    rows of file `f` matching `filter_` and, as read() does, dict name -> their values
    (`rows`: a slice to look in; `labels`: filtered's). What they hold, and the copy that
    joins them, is charged to the file's memory limit as the rows are found
    (MemoryLimitError past it)."""
    parts, at, held = [], [], 0
    for b, hits, vals in filtered(f, columns, filter_, rows=rows, labels=labels):
        parts.append(vals)
        if positions:
            at.append(b.start + hits * b.step)
        held += 2 * (sum(vectors.held_bytes(v) for v in vals) + 8 * len(hits) * positions)
        budget.check(held, f.memory_limit,
                     lambda: f"{f.path or 'the file'}: the rows matching the filter so far")
    out = {}
    for k, name in enumerate(columns):
        chunks = [p[k] for p in parts if vectors.num_rows_of(p[k])]
        out[name] = vectors.concat_reads(chunks) if chunks else f[name][0:0]
    if not positions:
        return None, out
    return (np.concatenate(at) if at else np.zeros(0, np.int64)).astype(np.int64), out


def blocks_of(filter_):
    """The scan's block_filter(part, file) for a filter in any of its forms (None: None,
    every block read); what idv._scan.scan.partitions takes to leave out the partitions ruled
    out."""
    return None if filter_ is None else block_filter(parse(filter_))


def decided(node, known):
    """The filter `node` where the columns of `known` (name -> (type, value): a column whose
    every row holds one value, as a hive partition key's) are decided: True when every row
    passes, False when none does, else the tree of what is left to test on the other columns.
    Each decided comparison means what it means on rows (idv._values.comparison), on the
    value as a one-row column."""
    if isinstance(node, (And, Or)):
        parts, stop = [], isinstance(node, Or)        # Or: one True decides; And: one False
        for p in node.parts:
            d = decided(p, known)
            if d is stop:
                return stop
            if d is not (not stop):
                parts.append(d)
        if not parts:
            return not stop
        return parts[0] if len(parts) == 1 else type(node)(tuple(parts))
    if isinstance(node, Not):
        d = decided(node.part, known)
        return (not d) if isinstance(d, bool) else Not(d)
    if isinstance(node, BlocksOnly):
        d = decided(node.part, known)          # blocks ruled out: here, the whole file
        return d if isinstance(d, bool) else BlocksOnly(d)
    if node.column not in known:
        return node
    t, v = known[node.column]
    columns = {node.column: comparison.Column(node.column, t, None)}
    one = np.empty(1, object) if t is T.Text else np.array([v])
    one[0] = v
    x = comparison.comparable(t, one)
    return bool(_rows(_bind(node, columns), columns, lambda _: x, 1)[0])
