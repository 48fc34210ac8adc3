"""A scan of an idv.arrow_dataset (``IdvScanner``, what DuckDB reads through ``to_reader``): its
columns and filter read through idv's scan, blocks the statistics rule out skipped, rows
tested by idv where it takes the whole filter (its comparisons mean what they mean to Arrow),
else by pyarrow; ``count_rows`` from the statistics where they decide, ``take`` decoding only
the blocks that hold the rows.
"""
from __future__ import annotations

import numpy as np

from idv._interop import arrow
from idv._interop.arrow_columns import one_array, rows_only
from idv._resources import budget
from idv._engines import engine_filters
from idv._scan import filter_tree, filters, scan
from idv._scan.checked_keys import labelled
from idv._reader import read_source, selection, whole_read
from idv._values.arguments import ensure_count
from idv._values.arrow_types import import_pyarrow

# rows of a batch when the caller gives no batch size: pyarrow's scanners' default, or more
# while the batch holds at most BATCH_BYTES (rows_within): an engine's call per batch, and
# idv's Python per batch, are paid a few times a file, not a few times a megabyte
BATCH_ROWS = 1 << 17
BATCH_BYTES = 16 << 20
# what a stream of batches holds at once, in batches: the scan's windows of a batch each (the
# one handed on and scan.AHEAD queued), the pieces of the batch being gathered and the
# batch; twice that, for what is held beside (the consumer's batch, Arrow's pool)
HELD_BATCHES = 2 * (scan.AHEAD + 3)


def rows_within(ds, columns, least=BATCH_ROWS, nbytes=BATCH_BYTES):
    """At least `least` rows, or more while `columns` decoded into Arrow take at most
    `nbytes` (as the first file of dataset `ds` says: Column.decoded_bytes; hive keys, a value
    a file, left out)."""
    with ds.using(0) as f:
        size = sum(f[c].decoded_bytes(arrow=True) for c in columns
                   if c not in ds.constant_types)
        if f.num_rows and size:
            return max(least, nbytes * f.num_rows // size)
    return least


class IdvScanner:
    """A scan of an idv.arrow_dataset: its columns, filter and batch size (what DuckDB
    reads through ``to_reader``). Not a pyarrow Scanner, whose methods would run Arrow's
    C++ scanner: ``write_dataset`` takes ``to_reader()``."""

    def __init__(self, owner, columns, filter_, batch_size):
        self._pa = import_pyarrow()
        if isinstance(columns, dict):
            raise TypeError("idv.arrow_dataset scanners take column names, not a dict of "
                            "expressions")
        if filter_ is not None and not isinstance(filter_, self._pa.compute.Expression):
            raise TypeError(f"filter must be a pyarrow compute Expression, not "
                            f"{type(filter_).__name__}")
        self._owner = owner
        ds = owner.idv_dataset
        self._names = ds.resolve_columns(columns)
        self._filter = filter_
        self._batch_size = ensure_count(batch_size, "batch_size", none=True)
        self._rows = {}             # columns read -> rows of a batch (batch_rows), found once
        # a time column read floored is compared on its floored values, as pyarrow would; a
        # key read as its labels with a label
        self._tree, self._exact, need = (None, False, []) if filter_ is None else \
            engine_filters.from_arrow(filter_, owner._types, engine_filters.floored(
                owner._types, owner._unit, owner._safe), engine_filters.label_columns(
                owner.schema))
        self._need = ds.column_names if need is None else need    # the filter's columns
        if filter_ is not None and not self._exact:
            # bound to the schema once, as over a table in memory: a comparison Arrow has no
            # kernel for raises whatever the rows (none, or all ruled out by the statistics)
            owner.schema.empty_table().filter(filter_)

    @property
    def dataset_schema(self):
        """The schema of the dataset scanned."""
        return self._owner.schema

    @property
    def projected_schema(self):
        """The schema of the batches this scan gives."""
        schema = self._owner.schema
        return self._pa.schema([schema.field(n) for n in self._names])

    def _filtered(self, names, rows=None, group=True, quick_first=False):
        """The rows of `names` (and then the filter's other columns, where pyarrow tests the
        rows or `names` is empty: those alone), through the dataset's stream (which reads
        small files of numbers together, and gives a hive-partitioned dataset's keys), as
        Tables of whole blocks of at most the batch size (the stream's batches of about that
        many rows grouped or cut: one pyarrow call per group, not per block); the rows tested
        by idv where the filter is taken whole (engine_filters.from_arrow's `exact`), else by
        pyarrow; blocks the statistics rule out skipped; `rows`: a slice of the rows (of the
        dataset, None: all) read, before the filter; `group` False: a Table per window of the
        scan; `quick_first`: each file's first block a Table of its own."""
        owner = self._owner
        exact = self._exact
        read = names + ([] if exact and names else [c for c in self._need if c not in names])
        skip = None if self._tree is None else \
            self._tree if exact else filter_tree.BlocksOnly(self._tree)
        batch = self._batch_rows(read)
        blocks = arrow.window_reader(owner.idv_dataset, read, datetime=owner._unit,
                                     safe=owner._safe, filter=skip, batch_rows=batch,
                                     rows=rows, quick_first=quick_first)
        for part in grouped(blocks, batch, first_alone=quick_first) if group else \
                ([b] for b in blocks):
            table = self._pa.Table.from_batches(part, blocks.schema)
            if self._filter is not None and not exact:  # one batch: faster than chunks
                table = self._pa.Table.from_batches(
                    [one_batch(self._pa, table.columns, table.schema).filter(self._filter)])
            if table.num_rows or self._filter is None:
                yield table

    def _batch_rows(self, read):
        """The rows of a batch of columns `read`: the batch size given, or rows_within the
        dataset's first file, found once a scan, not once each file it reads; at most the
        rows of a batch that fits the memory limit with all a stream holds beside it, which
        is about HELD_BATCHES of them (pyarrow's batch size is a most, which the scan cuts to
        fit)."""
        key = tuple(read)
        if key not in self._rows:
            ds = self._owner.idv_dataset
            self._rows[key] = min(self._batch_size or rows_within(ds, read), rows_within(
                ds, read, least=1, nbytes=ds.memory_limit // HELD_BATCHES))
        return self._rows[key]

    def _batches(self, rows=None, group=True, quick_first=False):
        """The scan's batches: its columns, the rows that match, a batch per group of blocks
        (one_batch: no copy where the blocks' arrays lie end to end); `rows`: a slice of the
        dataset's rows (without a filter: only the blocks that hold them); `group` False:
        each window's rows as they come, not gathered into batches of the batch size first
        (a consumer that stops early); `quick_first`: each file's first block a batch of its
        own (scan.scan's)."""
        schema, n = self.projected_schema, len(self._names)
        for t in self._filtered(self._names, rows, group, quick_first):
            yield one_batch(self._pa, t.columns[:n], schema) if n else \
                rows_only(self._pa, t.num_rows)       # no column: the rows alone

    def to_reader(self):
        """A pyarrow.RecordBatchReader of the scan (what DuckDB reads): each file's first
        block's rows a batch of their own, so that a query that stops early (``LIMIT 5``:
        DuckDB reads one batch) decodes a block of each column, not a batch's worth."""
        return self._pa.RecordBatchReader.from_batches(self.projected_schema,
                                                       self._batches(quick_first=True))

    def to_batches(self):
        """An iterator of the scan's RecordBatches."""
        return iter(self.to_reader())

    def to_table(self):
        """The scan as a pyarrow.Table (its batches charged to the dataset's memory limit, all
        of them being kept)."""
        ds = self._owner.idv_dataset
        if self._filter is None:        # the table's size is known: refused before reading
            whole_read.check_table(ds, self._names)
        batches = budget.kept(self._batches(), ds.memory_limit,
                              lambda: f"the dataset ({ds.files[0].path}...): the scan's table")
        return self._pa.Table.from_batches(list(batches), self.projected_schema)

    def head(self, num_rows):
        """The scan's first `num_rows` rows, reading no further."""
        out, left = [], int(num_rows)
        if left > 0:
            # without a filter, only the blocks that hold the first rows are read; with one,
            # the scan's windows until enough rows match
            filtered = self._filter is not None
            for b in self._batches(group=False, rows=None if filtered else slice(0, left)):
                out.append(b.slice(0, left))
                left -= out[-1].num_rows
                if left <= 0:
                    break
        return self._pa.Table.from_batches(out, self.projected_schema)

    def take(self, indices):
        """Rows `indices` of the scan, in the order given."""
        if self._filter is not None:       # rows of the matches, as numbered without one
            table = self.to_table()
            return table.take(selection.row_numbers(selection.take_numbers(indices),
                                                    table.num_rows, "scan"))
        return _take(self._owner, self._names, self.projected_schema, indices)

    def count_rows(self):
        """The number of rows the scan gives; blocks that the statistics decide are
        counted without decoding, unless the filter tests a key with KeyValues: its rows are
        decoded and checked to have labels, as to_table's (checked_keys)."""
        ds = self._owner.idv_dataset
        if self._filter is None:
            return ds.num_rows
        if not self._exact:
            return sum(t.num_rows for t in self._filtered([]))
        node = read_source.filter_of(self._tree)        # as the dataset's stream decides it
        return sum(self._count(i, read_source.decided(ds, i, node))
                   for i in range(len(ds.files)))

    def _count(self, i, node):
        """The rows of file i matching `node` (read_source.decided's for it: on the file's
        own columns, or True / False)."""
        if node is True or node is False:
            return self._owner.idv_dataset.files[i].num_rows if node else 0
        with self._owner.idv_dataset.using(i) as f:
            if not f.num_rows:
                return 0
            bound = filters.prepare(node, f)
            layouts = {tuple(block_counts(f, n)) for n in bound.columns}
            labels = any(labelled(f[n]) for n in bound.columns)
            if len(layouts) == 1 and not labels and \
                    all(z is not None for z in bound.zones.values()):
                return _count_by_statistics(f, bound, np.array(layouts.pop()))
            return sum(len(hits) for _b, hits, _ in filters.filtered(f, [], bound,
                                                                     labels=labels))


def block_counts(f, name):
    """Rows per block of column `name` of open file `f` (its lookup table's layout)."""
    col = f[name]
    rpb, nb = col.rows_per_block, col.num_blocks
    return np.minimum(rpb, f.num_rows - np.arange(nb, dtype=np.int64) * rpb)


def _count_by_statistics(f, bound, rows):
    """Rows of open file `f` matching a filter (exact by Arrow's rules; `bound`: it
    filters.prepare'd on `f`, with statistics; `rows` per block): blocks that the statistics
    decide are counted from the lookup tables, only the others decoded."""
    keep = bound.blocks()
    whole = keep & bound.whole_blocks()
    undecided = keep & ~whole
    total = int(rows[whole].sum())
    if undecided.any():
        for _batch, hits, _ in filters.filtered(f, [], bound,
                                                blocks=lambda _p, _f: undecided):
            total += len(hits)
    return total


def _take(owner, names, schema, indices):
    """Rows `indices` of the dataset (over its files end to end) as a Table, in the order
    given: each block that holds one is read once (idv's to_arrow take)."""
    ds = owner.idv_dataset
    idx = selection.take_numbers(indices)
    if isinstance(idx, slice):
        idx = np.arange(*idx.indices(ds.num_rows), dtype=np.int64)
    return arrow.taken(ds, names, read_source.table_rows(ds, idx, keys=names), owner._unit,
                       owner._safe, schema)


def grouped(batches, size, nbytes=0, first_alone=False):
    """Consecutive RecordBatches (a scan's, a batch per block) in lists of at most `size` rows
    together, or of more while they hold at most `nbytes` bytes, a longer batch cut into
    slices of `size` rows: what one call of the engine takes (a filter, a frame) rather than
    one call a block. Nothing is copied. `first_alone`: the first batch a list of its own
    (a scan's quick_first block, for a consumer that may stop there)."""
    batches = iter(batches)
    if first_alone:
        first = next(batches, None)
        if first is None:
            return
        yield [first]
    group, n, held = [], 0, 0
    for b in batches:
        pieces = [b] if b.num_rows <= size or b.nbytes <= nbytes else \
            [b.slice(a, size) for a in range(0, b.num_rows, size)]
        for piece in pieces:
            if group and n + piece.num_rows > size and held + piece.nbytes > nbytes:
                yield group
                group, n, held = [], 0, 0
            group.append(piece)
            n += piece.num_rows
            held += piece.nbytes
    if group:
        yield group


def one_batch(pa, columns, schema):
    """A RecordBatch of `schema` from ChunkedArrays of the same rows (one_array each)."""
    return pa.RecordBatch.from_arrays([one_array(pa, c) for c in columns], schema=schema)
