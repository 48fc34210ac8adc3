"""pyarrow.dataset and DuckDB: ``arrow_dataset``, .idv files as a ``pyarrow.dataset.Dataset``.

DuckDB scans any instance of ``pyarrow.dataset.Dataset`` by calling its class's ``scanner``
with the columns a query needs and its filter as a pyarrow expression, then reads the
scanner's ``to_reader()``; pyarrow's own helpers call ``to_table``, ``count_rows``, ``head``
and ``take``. So the object returned here subclasses ``pyarrow.dataset.Dataset`` (as Lance's
dataset does) and answers those calls from idv's scan: only the columns asked for are
decoded, blocks whose statistics rule the filter out are neither fetched nor decoded, and the
rows of the others are filtered by pyarrow itself, so results follow Arrow's rules exactly
whatever the file's statistics. ``count_rows(filter=)`` counts a block whose statistics say
every row matches without decoding it. Methods of pyarrow's Dataset that need Arrow's own
C++ dataset (fragments, joins, sorting) raise NotImplementedError instead.

pyarrow is imported only when ``arrow_dataset`` is called.
"""
from __future__ import annotations

import functools

import numpy as np

from idv import arrow, engine_filters, filters, selection
from idv.arrow_types import import_pyarrow
from idv.dataset import Dataset, dataset

__all__ = ["arrow_dataset"]

# pyarrow's scanner options that change how Arrow's C++ scanner runs, not what it returns
_SCAN_OPTIONS = {"batch_readahead", "fragment_readahead", "fragment_scan_options",
                 "use_threads", "cache_metadata", "memory_pool"}

def arrow_dataset(source, *, datetime: str = "us", safe: bool = True, **dataset_options):
    """.idv files as a ``pyarrow.dataset.Dataset``, for DuckDB (``duckdb.sql("select a from
    ds where ts >= ...")`` pushes the projection and the filter into idv) and pyarrow.

    ``source``: what idv.dataset takes (a path or URL, a directory, a glob, a list of them)
    or an open idv.Dataset; `dataset_options` go to idv.dataset. ``datetime``: the unit of
    DateTime, TimeSpan and DateTimeOffset columns, as in idv.to_arrow (default ``"us"``,
    DuckDB's own unit: it pushes filters into a scan only on microsecond timestamps, and
    holds every date .NET has; ``"auto"``: idv.time_units' rule, one unit for every file).

    The object has ``schema``, ``scanner(columns=, filter=, batch_size=)`` (with
    ``to_reader``, ``to_table``, ``to_batches``, ``count_rows``, ``head``, ``take``,
    ``projected_schema``), ``to_table``, ``to_batches``, ``count_rows(filter=)``,
    ``head(n, columns=, filter=)`` and ``take(indices, columns=)``. Filters are pyarrow
    compute expressions; blocks are skipped where idv.filters understands the expression
    and the statistics allow, and the rows are always tested by pyarrow.
    """
    import_pyarrow()
    owned = not isinstance(source, Dataset)
    ds = dataset(source, **dataset_options) if owned else source
    try:
        unit, safe = ds.time_unit(ds.column_names, datetime, safe)
        return _classes()[0](ds, unit, safe)
    except BaseException:
        if owned:
            ds.close()
        raise


def block_counts(f, name):
    """Rows per block of column `name` of open file `f` (its lookup table's layout)."""
    col = f[name]
    rpb, nb = col.rows_per_block, col.num_blocks
    return np.minimum(rpb, f.num_rows - np.arange(nb, dtype=np.int64) * rpb)


# ---------------------------------------------------------------------------------------------
# the classes, made when pyarrow is first asked for
# ---------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _classes():
    pa = import_pyarrow()
    import pyarrow.dataset as pads
    import pyarrow.fs as pafs

    class _Refusing(pafs.FileSystemHandler):
        """A filesystem whose every call raises: what Arrow's C++ scanner would read."""

        def __eq__(self, other):
            return self is other

        def __ne__(self, other):
            return self is not other

        def __hash__(self):
            return id(self)

        def get_type_name(self):
            return "idv"

        def _refuse(self, *args, **kwargs):
            raise NotImplementedError(
                "Arrow's own scanner cannot read an idv.arrow_dataset (Scanner.from_dataset, "
                "write_dataset): call its scanner(), to_table() or to_batches(), or give "
                "write_dataset ds.scanner().to_reader()")

        get_file_info = get_file_info_selector = create_dir = delete_dir = _refuse
        delete_dir_contents = delete_root_dir_contents = delete_file = move = _refuse
        copy_file = open_input_stream = open_input_file = open_output_stream = _refuse
        open_append_stream = normalize_path = _refuse

    def _unsupported(what):
        def method(self, *args, **kwargs):
            raise NotImplementedError(f"{what} is not supported on an idv.arrow_dataset: "
                                      f"call to_table() first, or use scanner().to_reader()")
        method.__name__ = what
        return method

    def _options(kwargs, where):
        unknown = set(kwargs) - _SCAN_OPTIONS
        if unknown:
            raise TypeError(f"{where}() got unexpected arguments: {', '.join(sorted(unknown))}")

    refusing = pafs.PyFileSystem(_Refusing())

    class IdvArrowDataset(pads.FileSystemDataset):
        """.idv files as a pyarrow Dataset (made by idv.arrow_dataset).

        Beneath it lies a dataset of one file on a filesystem that refuses every call, so
        that what goes to Arrow's C++ scanner directly (``Scanner.from_dataset``,
        ``write_dataset``) raises NotImplementedError instead of reading nothing."""

        def __init__(self, ds, unit, safe):
            schema = arrow.arrow_schema(ds.open_file(0), ds.column_names, datetime=unit)
            fmt = pads.IpcFileFormat()
            pads.FileSystemDataset.__init__(
                self, [fmt.make_fragment("idv.arrow_dataset", filesystem=refusing)], schema,
                fmt, refusing)
            self.idv_dataset = ds
            self._unit, self._safe = unit, safe
            self._schema = schema
            self._types = {fl.name: fl.type for fl in ds.schema.fields}

        @property
        def files(self):
            """The paths of the .idv files."""
            return [f.path for f in self.idv_dataset.files]

        def __repr__(self):
            return (f"<idv.arrow_dataset of {len(self.idv_dataset.files)} file(s), "
                    f"{self.idv_dataset.num_rows} rows: {self._schema.names}>")

        def close(self):
            """Close the files of the idv.Dataset beneath."""
            self.idv_dataset.close()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.close()

        def __reduce__(self):
            raise TypeError("an idv.arrow_dataset is not picklable: pass its paths and call "
                            "idv.arrow_dataset again")

        @property
        def schema(self):
            """The Arrow schema of every column (as idv.to_arrow gives it)."""
            return self._schema

        def scanner(self, columns=None, filter=None, batch_size=None,
                    **options):  # noqa: A002 - pyarrow's name
            """A Scanner of `columns` (names; all by default) and the rows matching
            `filter` (a pyarrow expression), in batches of at most `batch_size` rows."""
            _options(options, "scanner")
            return IdvScanner(self, columns, filter, batch_size)

        def to_table(self, columns=None, filter=None, **options):  # noqa: A002
            """A pyarrow.Table of `columns` and the rows matching `filter`."""
            return self.scanner(columns, filter, **options).to_table()

        def to_batches(self, columns=None, filter=None, batch_size=None,
                       **options):  # noqa: A002
            """An iterator of RecordBatches (see scanner)."""
            return self.scanner(columns, filter, batch_size, **options).to_batches()

        def head(self, num_rows, columns=None, filter=None, **options):  # noqa: A002
            """The first `num_rows` rows (that match `filter`) as a Table, reading no
            further than they need."""
            return self.scanner(columns, filter, **options).head(num_rows)

        def take(self, indices, columns=None, filter=None, **options):  # noqa: A002
            """The rows `indices` (row numbers over the files end to end) as a Table, in
            the order given; only the blocks that hold them are decoded."""
            return self.scanner(columns, filter, **options).take(indices)

        def count_rows(self, filter=None, **options):  # noqa: A002
            """The number of rows matching `filter` (all: from the headers). Blocks whose
            statistics decide the filter are counted without being decoded."""
            return self.scanner(None, filter, **options).count_rows()

        get_fragments = _unsupported("get_fragments")
        filter = _unsupported("filter")  # noqa: A003 - pyarrow's name
        join = _unsupported("join")
        join_asof = _unsupported("join_asof")
        sort_by = _unsupported("sort_by")
        replace_schema = _unsupported("replace_schema")

        @property
        def partition_expression(self):
            """Not supported: .idv files have no partitioning."""
            raise NotImplementedError("an idv.arrow_dataset has no partition expression")

    class IdvScanner:
        """A scan of an idv.arrow_dataset: its columns, filter and batch size (what DuckDB
        reads through ``to_reader``). Not a pyarrow Scanner, whose methods would run Arrow's
        C++ scanner: ``write_dataset`` takes ``to_reader()``."""

        def __init__(self, owner, columns, filter_, batch_size):
            if isinstance(columns, dict):
                raise TypeError("idv.arrow_dataset scanners take column names, not a dict of "
                                "expressions")
            if filter_ is not None and not isinstance(filter_, pa.compute.Expression):
                raise TypeError(f"filter must be a pyarrow compute Expression, not "
                                f"{type(filter_).__name__}")
            self._owner = owner
            ds = owner.idv_dataset
            self._names = ds.resolve_columns(columns)
            self._filter = filter_
            self._batch_size = batch_size
            self._tree, self._exact, need = (None, False, []) if filter_ is None else \
                engine_filters.from_arrow(filter_, owner._types)
            need = ds.column_names if need is None else need
            self._read = self._names + [c for c in need if c not in self._names]

        @property
        def dataset_schema(self):
            """The schema of the dataset scanned."""
            return self._owner.schema

        @property
        def projected_schema(self):
            """The schema of the batches this scan gives."""
            schema = self._owner.schema
            return pa.schema([schema.field(n) for n in self._names])

        def _filtered(self, i, names):
            """File `i`'s batches of `names` and then the filter's other columns, the rows
            tested by pyarrow (blocks the statistics rule out skipped)."""
            owner = self._owner
            read = names + [c for c in self._read if c not in names]
            skip = None if self._tree is None else filters.BlocksOnly(self._tree)
            with owner.idv_dataset.using(i) as f:      # kept open between batches
                for b in arrow.record_batch_reader(f, read, datetime=owner._unit,
                                                   safe=owner._safe,
                                                   batch_size=self._batch_size, filter=skip):
                    if self._filter is not None:
                        b = b.filter(self._filter)
                    if b.num_rows or self._filter is None:
                        yield b

        def _batches(self):
            """The scan's batches: its columns, the rows that match."""
            schema, n = self.projected_schema, len(self._names)
            for i in range(len(self._owner.idv_dataset.files)):
                for b in self._filtered(i, self._names):
                    yield pa.RecordBatch.from_arrays(b.columns[:n], schema=schema)

        def to_reader(self):
            """A pyarrow.RecordBatchReader of the scan (what DuckDB reads)."""
            return pa.RecordBatchReader.from_batches(self.projected_schema, self._batches())

        def to_batches(self):
            """An iterator of the scan's RecordBatches."""
            return iter(self.to_reader())

        def to_table(self):
            """The scan as a pyarrow.Table."""
            return self.to_reader().read_all()

        def head(self, num_rows):
            """The scan's first `num_rows` rows, reading no further."""
            out, left = [], int(num_rows)
            if left > 0:
                for b in self._batches():
                    out.append(b.slice(0, left))
                    left -= out[-1].num_rows
                    if left <= 0:
                        break
            return pa.Table.from_batches(out, self.projected_schema)

        def take(self, indices):
            """Rows `indices` of the scan, in the order given."""
            if self._filter is not None:
                return self.to_table().take(selection.take_numbers(indices))
            return _take(self._owner, self._names, self.projected_schema, indices)

        def count_rows(self):
            """The number of rows the scan gives; blocks that the statistics decide are
            counted without decoding."""
            ds = self._owner.idv_dataset
            if self._filter is None:
                return ds.num_rows
            return sum(self._count(i) for i in range(len(ds.files)))

        def _count(self, i):
            with self._owner.idv_dataset.using(i) as f:
                node = self._tree
                if self._exact and f.num_rows:
                    bound = filters.prepare(node, f)
                    layouts = {tuple(block_counts(f, n)) for n in bound.columns}
                    if len(layouts) == 1 and all(z is not None for z in bound.zones.values()):
                        return _count_by_statistics(f, bound, np.array(layouts.pop()))
            return sum(b.num_rows for b in self._filtered(i, []))

    return IdvArrowDataset, IdvScanner


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
    given: each block that holds one is read once."""
    pa = import_pyarrow()
    ds = owner.idv_dataset
    idx = selection.take_numbers(indices)
    if isinstance(idx, slice):
        idx = np.arange(*idx.indices(ds.num_rows), dtype=np.int64)
    if len(idx) == 0:
        return schema.empty_table()
    parts, restore = selection.split_rows(idx, [f.start for f in ds.files], ds.num_rows)
    tables = []
    for i, local in parts:
        with ds.using(i) as f:
            rows = np.arange(f.num_rows)[local] if isinstance(local, slice) \
                else np.asarray(local)
            rpb = f[names[0]].rows_per_block if names else max(f.num_rows, 1)
            blocks, first = np.unique(rows // rpb, return_inverse=True)
            pieces, at = [], np.zeros(len(blocks), np.int64)
            for k, b in enumerate(blocks):
                at[k] = sum(p.num_rows for p in pieces)
                span = range(int(b) * rpb, min((int(b) + 1) * rpb, f.num_rows))
                pieces.append(arrow.record_batch_reader(f, names, datetime=owner._unit,
                                                        safe=owner._safe, rows=span).read_all())
        got = pa.concat_tables(pieces) if pieces else schema.empty_table()
        tables.append(got.take(pa.array(at[first] + rows % rpb)))
    out = pa.concat_tables([pa.Table.from_arrays(t.columns, schema=schema) for t in tables])
    return out if restore is None else out.take(pa.array(restore))
