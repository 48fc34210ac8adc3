"""Ray Data for .idv files: ``read_idv`` (a ray.data.Dataset), ``IdvDatasource`` and
``IdvDatasink`` (for ``ds.write_datasink``).

Imported on use (``import idv.ray``); it needs ``pip install 'idv[ray]'``. Read tasks are the
scan's partitions (idv._scan.scan.partitions): groups of whole blocks, so one large file gives many
tasks and no block is decoded twice. Each task's in-memory size is known before anything is
read: the decompressed sizes of its blocks, from the files' lookup tables (Ray sizes its
parallelism and memory from these; a file's size on disk underestimates DEFLATE data several
times). Blocks are Arrow tables whose fields keep the exact ML.NET types (idv.to_arrow's field
metadata), so a dataset written back gives the same types and annotations.
"""
from __future__ import annotations

from typing import Iterable

from idv import _docs
from idv._scan import filters, scan
from idv._values.arguments import ensure_count
from idv._engines.reopen import listed, open_listed
from idv._interop.arrow import arrow_schema, import_pyarrow, record_batch_reader
from idv._reader.dataset import as_selected
from idv.errors import require
from idv._storage.staging import DEFAULT_NAME, Staging
from idv._writer.tables import check_write_options

ray_data = require("ray.data", "idv.ray", "idv[ray]")

__all__ = ["read_idv", "IdvDatasource", "IdvDatasink"]


def _part_bytes(ds, part, names):
    """{name: the decompressed bytes of partition `part`'s blocks of each column `names`}."""
    with ds.using(part.part) as f:
        return {n: int(f[n].lookup["raw"][part.b0:part.b1].sum()) for n in names}


def _read_task(part, entry, names, filesystem, open_kwargs, datetime, safe, size, filter_,
               schema):
    """A ReadTask giving partition `part` as one Arrow table (run by a Ray worker): the rows
    that match `filter_` (None: all), of its file as listed when the read was planned
    (`entry`: idv._engines.reopen.open_listed), of Arrow `schema` (what Ray reports before
    any task runs, and of a read that finds no row)."""
    def read():
        with open_listed(entry, filesystem, open_kwargs) as f:
            return [record_batch_reader(f, names, datetime=datetime, safe=safe,
                                        rows=range(part.start, part.stop),
                                        filter=filter_).read_all()]
    rows = part.stop - part.start if filter_ is None else None
    meta = ray_data.block.BlockMetadata(num_rows=rows, size_bytes=size,
                                        input_files=[str(part.path)], exec_stats=None)
    return ray_data.datasource.ReadTask(read, meta, schema=schema)


def _no_rows_task(schema):
    """The one ReadTask of a source of no rows: an empty table of its `schema`."""
    meta = ray_data.block.BlockMetadata(num_rows=0, size_bytes=0, input_files=None,
                                        exec_stats=None)
    return ray_data.datasource.ReadTask(lambda: [schema.empty_table()], meta, schema=schema)


class IdvDatasource(ray_data.Datasource):
    """.idv files as a Ray Data source (``ray.data.read_datasource(IdvDatasource(...))``;
    read_idv is the short form). The files are opened once here, on the driver, to plan the
    read: their partitions, each partition's decoded bytes per column (lookup tables) and the
    time unit; workers open each file again for their partitions, an idv.IdvFormatError
    naming it when another file is in its place (idv._engines.reopen.open_listed).

    Parameters
    ----------
    paths, columns, blocks_per_task, datetime, safe, filter, **dataset_kwargs
        As read_idv.
    """

    def __init__(self, paths, columns=None, blocks_per_task=None, *, datetime="auto",
                 safe=True, filter=None, **dataset_kwargs):  # noqa: A002
        super().__init__()
        blocks_per_task = ensure_count(blocks_per_task, "blocks_per_task", "blocks", none=True)
        ds, owned, self.names = as_selected(paths, dataset_kwargs, columns)
        try:
            ds = ds.files_only("idv.ray")
            self.datetime, self.safe = ds.time_unit(self.names, datetime, safe)
            # partitions whose blocks statistics rule out: none (all of them: one task, which
            # finds no rows)
            self.parts = scan.partitions(ds, self.names, blocks_per_task, scan.PARTITION_BYTES,
                                         block_filter=filters.blocks_of(filter),
                                         at_least_one=True)
            self.filter = filter
            self.part_bytes = [_part_bytes(ds, p, self.names) for p in self.parts]
            self.listed = listed(ds, self.names)
            self.schema = arrow_schema(ds, self.names, datetime=self.datetime)
            self.filesystem = ds.filesystem
            self.open_kwargs = dict(ds.open_kwargs)
        finally:
            if owned:
                ds.close()
        self._projection_map = None

    def get_name(self):
        """The name of the read tasks in Ray's progress and stats."""
        return "ReadIdv"

    def supports_projection_pushdown(self):
        """True: Ray passes the columns a dataset keeps (``select_columns``) to the read."""
        return True

    def columns(self):
        """The columns a read decodes: all of read_idv's, less those a projection drops."""
        wanted = self._get_data_columns()
        return self.names if wanted is None else [n for n in self.names if n in set(wanted)]

    def estimate_inmemory_data_size(self):
        """The decoded bytes of the columns read: the sum of their blocks' decompressed sizes
        (the lookup tables)."""
        cols = self.columns()
        return sum(b[n] for b in self.part_bytes for n in cols)

    def get_read_tasks(self, parallelism, per_task_row_limit=None, data_context=None):
        """One ReadTask per partition, whatever `parallelism` asks (the partitions are already
        sized by ``blocks_per_task``), each with its rows and decoded bytes."""
        cols = self.columns()
        schema = import_pyarrow().schema([self.schema.field(self.names.index(n))
                                          for n in cols])
        if not self.parts:
            return [_no_rows_task(schema)]
        return [_read_task(p, self.listed[p.part], cols, self.filesystem, self.open_kwargs,
                           self.datetime, self.safe, sum(b[n] for n in cols), self.filter,
                           schema)
                for p, b in zip(self.parts, self.part_bytes)]


@_docs.fill
def read_idv(paths, columns=None, blocks_per_task=None, *, datetime="auto", safe=True,
             filter=None, **dataset_kwargs) -> ray_data.Dataset:  # noqa: A002
    """A ray.data.Dataset of .idv files, in Arrow blocks: one read task per group of whole
    blocks of a file, Ray knowing every task's rows and decoded bytes before reading.

    Parameters
    ----------
    {dataset_source:paths}
    {columns}
        ``select_columns`` after the read prunes them too.
    blocks_per_task : int, optional
        Default: about 64 MiB of decoded values per read task.
    {datetime}
        Default ``'auto'``; one unit for the whole dataset.
    {safe}
    {filter}
        The read tasks of partitions whose blocks the statistics rule out are not made.
    **dataset_kwargs
        Passed to idv.dataset (``schema``, ``on_bad_file``, ``storage_options``,
        ``threads``...).

    Returns
    -------
    ray.data.Dataset
    """
    return ray_data.read_datasource(IdvDatasource(paths, columns, blocks_per_task,
                                                  datetime=datetime, safe=safe, filter=filter,
                                                  **dataset_kwargs))


class _NoRows:
    """A write task's result when its blocks held no rows: their columns (a pyarrow schema),
    for the file a dataset without rows commits."""

    def __init__(self, schema):
        self.schema = schema


class IdvDatasink(ray_data.Datasink):
    """One .idv per write task into the directory ``path`` (created if missing), for
    ``ds.write_datasink(IdvDatasink(path))``.

    Every file is staged in a hidden folder of ``path`` and moved in once all tasks have
    succeeded; a failed job removes its folder, and what a killed one leaves
    there is neither a ``*.idv`` nor seen by idv.dataset. A task without rows writes no file;
    a dataset without rows writes one, of its columns (as Spark's writer), where Ray's blocks
    give them (after a filter they may hold none: then no file, an empty list).
    Types and annotations as idv.from_arrow gives them (a dataset read by read_idv keeps its
    ML.NET types). ``paths``: the files written, once the write is done.

    Parameters
    ----------
    path : str or os.PathLike
        The directory.
    name : str, default 'part-{task:05d}-{job}.idv'
        Each file's name, a pattern of ``task`` (the write task's number) and ``job`` (this
        write's id).
    rows_per_file : int or None, default 1,000,000
        Ray gathers at least that many rows into each write task (its
        ``min_rows_per_write``), so a data set becomes a few large files, as ML.NET reads
        them best, not one per block Ray happens to hold; None: Ray's own split.
    **writer_kwargs
        The options of idv.write (``compression``, ``rows_per_block``...).
    """

    def __init__(self, path, name=DEFAULT_NAME, *, rows_per_file=1_000_000, **writer_kwargs):
        self.rows_per_file = ensure_count(rows_per_file, "rows_per_file", none=True)
        check_write_options(writer_kwargs, "IdvDatasink")
        self.staging = Staging(path, name)
        self.writer_kwargs = writer_kwargs
        self.paths = []

    @property
    def min_rows_per_write(self):
        """Ray's: the rows it gathers into one write task (one file)."""
        return self.rows_per_file

    def get_name(self):
        """The name of the write tasks in Ray's progress and stats."""
        return "WriteIdv"

    def on_write_start(self, schema=None):
        """Create the directory and this job's staging folder (on the driver)."""
        self.staging.start()

    def write(self, blocks: Iterable, ctx) -> str | _NoRows | None:
        """Write one task's blocks as one file (staged); returns its name, or when they hold
        no rows their columns (_NoRows; None: Ray's blocks do not give them)."""
        import pyarrow as pa
        from ray.data.block import BlockAccessor
        from idv._writer import write
        tables = [BlockAccessor.for_block(b).to_arrow() for b in blocks]
        rows = [t for t in tables if t.num_rows]
        name = self.staging.write(
            ctx.task_idx, lambda path: write(path, pa.concat_tables(rows), **self.writer_kwargs),
            rows=sum(t.num_rows for t in rows))
        columns = tables[0].schema if tables else None
        # Ray's empty blocks may have lost their columns (after a filter) or their types
        known = columns and not any(pa.types.is_null(f.type) for f in columns)
        return _NoRows(columns) if name is None and known else name

    def on_write_complete(self, write_result):
        """Every task succeeded: move their files in (on the driver). A dataset without rows
        commits one file of its columns (idv._storage.staging) when Ray's blocks give them:
        without (no block, or blocks without columns or types), it publishes an empty list."""
        from idv._writer import write
        if not self.staging.started:
            self.staging.start()
        results = write_result.write_returns
        empty = next((r.schema for r in results if isinstance(r, _NoRows)), None)
        self.paths = self.staging.commit(
            [None if isinstance(r, _NoRows) else r for r in results],
            empty=None if empty is None else (self.staging.name(0), lambda path: write(
                path, empty.empty_table(), **self.writer_kwargs)))

    def on_write_failed(self, error):
        """A task failed: remove the staging folder and what it holds (on the driver)."""
        self.staging.abort()
