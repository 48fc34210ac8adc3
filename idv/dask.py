"""Dask for .idv files: ``read_idv`` (a dask DataFrame), ``read_idv_array`` (a dask Array) and
``to_idv`` (one ML.NET-loadable file, or one file per partition).

Imported on use (``import idv.dask``); it needs ``pip install 'idv[dask]'`` (dask[dataframe]
and distributed). Partitions are groups of blocks, not files: one large file gives many
partitions, each a range of rows that starts on a block boundary, and every partition's rows
are known before anything is read, so divisions (a global integer index) are known too. The
DataFrame is built with ``dask.dataframe.from_map``, whose optimizer passes the columns a
computation uses down to the reader: only those columns are decoded.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from idv import _docs, types as T
from idv._scan import filters, scan
from idv._engines.reopen import listed, open_listed
from idv._reader.dataset import as_selected
from idv._engines import dask_writer
from idv._writer.tables import check_write_options
from idv.errors import require

if TYPE_CHECKING:
    import dask.array as da
    import dask.dataframe as dd

__all__ = ["read_idv", "read_idv_array", "to_idv", "partitions"]

# decoded bytes a partition aims at when blocks_per_partition is not given
PARTITION_BYTES = scan.PARTITION_BYTES


def _dask_dataframe():
    require("distributed", "idv.dask", "idv[dask]")
    return require("dask.dataframe", "idv.dask", "idv[dask]")


def _as_dataset(urlpath, storage_options, columns, open_kwargs):
    ds, owned, names = as_selected(urlpath, {**open_kwargs, "storage_options": storage_options},
                                   columns)
    return ds.files_only("idv.dask"), owned, names


@_docs.fill
def partitions(ds, columns=None, blocks_per_partition=None):
    """[(file index, first row, stop row)] of a Dataset's partitions, in order: each file's
    whole blocks, ``blocks_per_partition`` at a time, so that no block is decoded by two
    partitions (the scan's, which PyTorch, Ray and Spark readers share).

    Parameters
    ----------
    ds : idv.Dataset
    columns : sequence of str, optional
        The columns read, whose decoded size sets the default (default: all).
    blocks_per_partition : int, optional
        Default: about PARTITION_BYTES (64 MiB) of decoded values per partition.
    """
    names = ds.column_names if columns is None else list(columns)
    return [(p.part, p.start, p.stop)
            for p in scan.partitions(ds, names, blocks_per_partition, PARTITION_BYTES)]


class _ReadPartition:
    """Reads one partition (rows [start, stop) of one file, the file as listed when the
    DataFrame was made: idv._engines.reopen.open_listed) into pandas, on a worker: only the
    columns asked for (dask's projection passes them as ``columns``)."""

    def __init__(self, fs, open_kwargs, idv_columns, frame_columns, vectors, datetime, safe,
                 filter_=None, zones=None, dtypes=None):
        self.filter = filter_
        self.dtypes = dtypes or {}                # frame column -> the meta's dtype
        self.zones = zones or {}                  # DateTimeOffset column -> its zone
        self.fs = fs
        self.open_kwargs = open_kwargs
        self.idv_columns = idv_columns            # the dataset's columns
        self.frame_columns = frame_columns        # pandas column name -> idv column name
        self.vectors = vectors
        self.datetime = datetime
        self.safe = safe

    def __call__(self, part, columns=None):
        import pandas as pd
        from idv._interop.pandas import frame
        entry, start, stop, first = part
        if columns is None:
            wanted = self.idv_columns
        else:
            needed = {self.frame_columns[c] for c in columns}
            wanted = [n for n in self.idv_columns if n in needed]
        f = open_listed(entry, self.fs, self.open_kwargs)
        try:
            df = frame(f, wanted, vectors=self.vectors, datetime=self.datetime,
                       safe=self.safe, rows=slice(start, stop), filter=self.filter,
                       row_index=True, zones=self.zones)
        finally:
            f.close()
        if self.filter is None:
            df.index = pd.RangeIndex(first, first + stop - start)
        else:                   # the global row numbers of the rows that match
            df.index = df.index + (first - start)
        _as_meta(df, self.dtypes)
        if columns is None or list(df.columns) == list(columns):
            return df
        return df[list(columns)]


def _as_meta(df, dtypes):
    """The Categoricals of the partition `df` with the categories of the meta's `dtypes`
    (frame column -> dtype; _unified_categories), their values unchanged, as dask expects
    every partition's dtypes to be the meta's."""
    import pandas as pd
    for j, name in enumerate(df.columns):
        want, s = dtypes.get(name), df.iloc[:, j]
        if isinstance(want, pd.CategoricalDtype) and isinstance(s.dtype, pd.CategoricalDtype) \
                and not s.cat.categories.equals(want.categories):
            df.isetitem(j, s.cat.set_categories(want.categories))


@_docs.fill
def read_idv(urlpath, columns=None, blocks_per_partition=None, storage_options=None, *,
             vectors="expand", datetime="auto", safe=True, filter=None,  # noqa: A002
             **dataset_kwargs) -> dd.DataFrame:
    """A dask.dataframe.DataFrame of .idv files, its columns in idv.to_pandas' forms.

    Partitions are ranges of rows of whole blocks, so one large file gives many; the index is
    the global row number and the divisions are known, and so is ``len`` (without a
    ``filter``): it reads nothing. Only the columns a computation uses are decoded.

    Parameters
    ----------
    {dataset_source:urlpath}
    {columns}
    blocks_per_partition : int, optional
        Default: about 64 MiB of decoded values per partition.
    {storage_options}
    {vectors}
    {datetime}
        Default ``'auto'``: one unit is chosen for the whole dataset first, which reads its
        time columns once where the files have no statistics (``'ns'`` or ``'us'`` skip
        that).
    {safe}
    {filter}
        The rows kept keep their global row numbers as the index. Partitions whose blocks
        the statistics rule out are left out of the graph (the divisions are those of the
        partitions kept).
    **dataset_kwargs
        Passed to idv.dataset (``schema``, ``on_bad_file``, ``filesystem``, ``threads``...).

    Returns
    -------
    dask.dataframe.DataFrame
    """
    dd = _dask_dataframe()
    if "filters" in dataset_kwargs:     # dd.read_parquet's and pyarrow's spelling
        raise TypeError("read_idv() got an unexpected keyword argument 'filters': its row "
                        "filter is filter= (DNF tuples, a string or a pyarrow.compute "
                        "expression)")
    ds, owned, names = _as_dataset(urlpath, storage_options, columns, dataset_kwargs)
    try:
        unit, safe = ds.time_unit(names, datetime, safe)
        parts = scan.partitions(ds, names, blocks_per_partition, PARTITION_BYTES,
                                block_filter=filters.blocks_of(filter))
        from idv._interop.pandas_times import dataset_zones
        # a DateTimeOffset column's zone is that of all its rows, the partitions' as well
        zones = dataset_zones(ds, names, unit)
        meta, frame_columns = _meta(ds, names, vectors, unit, safe, zones)
        files, entries = ds.files, listed(ds, names)
        tasks = [(entries[p.part], p.start, p.stop, files[p.part].start + p.start)
                 for p in parts]
        if not tasks:
            tasks = [(entries[0], 0, 0, 0)]
            divisions = None
        else:
            divisions = tuple(t[3] for t in tasks) + (tasks[-1][3] + tasks[-1][2]
                                                       - tasks[-1][1] - 1,)
        reader = _ReadPartition(ds.filesystem, dict(ds.open_kwargs), names, frame_columns,
                                vectors, unit, safe, filter, zones, dict(meta.dtypes))
        return _frame(dd, reader, tasks, meta, divisions)
    finally:
        if owned:
            ds.close()


def _meta(ds, names, vectors, unit, safe, zones):
    """(read_idv's meta: the empty frame of columns `names` of the first file, its keys'
    categories _unified_categories; {pandas column: idv column} (a vector's slots are
    columns), as the meta's schema lists each column's frame columns)."""
    from idv._values.metadata import (SCHEMA_ATTR, expands, frame_schema_columns,
                                      warn_kept_wide)
    from idv._reader.whole_read import check_slot_names
    from idv._interop.pandas import frame
    if vectors == "expand":      # once, here; the meta and the partitions say nothing
        warn_kept_wide([ds.schema[n] for n in names], "one column of arrays")
    # the meta's slot columns are every partition's: the files' SlotNames must agree
    check_slot_names(ds, [n for n in names if expands(ds.schema[n].type, vectors)])

    def empty(f, columns):
        return frame(f, columns, vectors=vectors, datetime=unit, safe=safe, rows=slice(0, 0),
                     zones=zones)
    with ds.using(0) as first:
        meta = empty(first, names)
    frame_columns = {c: entry[0] for entry in frame_schema_columns(meta.attrs[SCHEMA_ATTR])
                     for c in entry[3]}
    _unified_categories(ds, meta, frame_columns, empty)
    return meta, frame_columns


def _unified_categories(ds, meta, frame_columns, empty):
    """The Categoricals of `meta` (the first file's empty frame; `empty(file, columns)` gives
    a file's) of keys whose files' KeyValues differ, made those of the union of the files'
    categories, in file order, as dask's concat of known Categoricals gives: one code, one
    label in every partition (_as_meta). The dataset's files agree on the form of a key's
    KeyValues (labels of one type, or none), so each file's keys are Categoricals too."""
    import pandas as pd
    from pandas.api.types import union_categoricals
    from idv._reader.whole_read import same_key_values
    differ = [j for j, (c, t) in enumerate(meta.dtypes.items())
              if isinstance(t, pd.CategoricalDtype)
              and isinstance(T.item_type(ds.schema[frame_columns[c]].type), T.Key)
              and not same_key_values(ds, frame_columns[c])]
    if not differ:
        return
    keys = list(dict.fromkeys(frame_columns[meta.columns[j]] for j in differ))
    files = []
    for i in range(len(ds.files)):
        with ds.using(i) as f:
            files.append(empty(f, keys))
    for j in differ:
        union = union_categoricals([df[meta.columns[j]] for df in files]).categories
        meta.isetitem(j, meta.iloc[:, j].cat.set_categories(union))


def _frame(dd, reader, tasks, meta, divisions):
    """The DataFrame of the partitions `tasks` (file, start, stop, first row), their lengths
    known to dask without reading where no filter drops rows."""
    import dask
    from idv._engines.dask_lengths import with_lengths
    # the columns keep idv.to_pandas's dtypes: dask's string conversion would turn the
    # object columns of vectors (arrays) into their text
    with dask.config.set({"dataframe.convert-string": False}):
        ddf = dd.from_map(reader, tasks, meta=meta, divisions=divisions,
                          label="read-idv", enforce_metadata=False)
    lengths = None if reader.filter is not None else [t[2] - t[1] for t in tasks]
    return with_lengths(ddf, lengths)


def _read_rows(fs, open_kwargs, entry, column, start, stop):
    f = open_listed(entry, fs, open_kwargs)
    try:
        return np.asarray(f[column][start:stop])
    finally:
        f.close()


@_docs.fill
def read_idv_array(urlpath, column, blocks_per_chunk=None, storage_options=None,
                   **dataset_kwargs) -> da.Array:
    """A dask.array.Array of one numeric, Boolean or key column (scalar or fixed-size vector:
    shape ``(rows, *dims)``), every file's rows end to end. Variable-size vectors have no
    array form: read them with read_idv or idv.dataset.

    Parameters
    ----------
    urlpath
        As read_idv.
    column : str
    blocks_per_chunk : int, optional
        The chunks along the rows, in blocks (default: about 64 MiB each).
    {storage_options}
    **dataset_kwargs
        Passed to idv.dataset.
    """
    require("distributed", "idv.dask", "idv[dask]")
    da = require("dask.array", "idv.dask", "idv[dask]")
    import dask
    ds, owned, (column,) = _as_dataset(urlpath, storage_options, [column], dataset_kwargs)
    try:
        t = ds.schema[column].type
        item = T.item_type(t)
        if isinstance(t, T.Vector) and not t.is_fixed:
            raise TypeError(f"column {column!r} holds variable-size vectors ({t}): they have "
                            f"no dask.array form; use idv.dask.read_idv or idv.dataset")
        if not isinstance(item, T.Key) and item.dtype.kind not in "biuf":
            raise TypeError(f"column {column!r} is {t}: read_idv_array takes numeric, Boolean "
                            f"and key columns; use idv.dask.read_idv")
        with ds.using(0) as first:
            dtype = first[column].dtype
        dims = tuple(t.dims) if isinstance(t, T.Vector) else ()
        chunks = []
        read = dask.delayed(_read_rows, pure=True)
        entries = listed(ds, [column])
        for i, a, b in partitions(ds, [column], blocks_per_chunk):
            value = read(ds.filesystem, dict(ds.open_kwargs), entries[i], column, a, b)
            chunks.append(da.from_delayed(value, (b - a,) + dims, dtype=dtype))
        if not chunks:
            return da.zeros((0,) + dims, dtype=dtype)
        return da.concatenate(chunks, axis=0)
    finally:
        if owned:
            ds.close()


@_docs.fill
def to_idv(ddf, path, name_function=None, *, lookahead=None, compute=True, partition_by=None,
           **writer_kwargs):
    """Write a dask DataFrame as .idv: one file, or one file per partition.

    One file (``path`` a file name): the partitions stream in order through one idv.Writer
    into a single ML.NET-loadable file, at most ``lookahead`` partitions (default: twice the
    workers, or 4) computed ahead of the one being written; types and metadata from the first
    partition as idv.from_pandas gives them (Categorical -> key with KeyValues...). Returns
    the path.

    One file per partition (``path`` an existing directory, a name ending in ``/``, or any
    ``name_function``): partition i is written to ``path/name_function(i)`` (default
    ``part.{i}.idv``) by the worker that computes it, in parallel. Returns the paths (or,
    with ``compute=False``, the dask.delayed that writes them). The names must be relative
    paths inside ``path``. The parts are written into a hidden staging directory in ``path``
    and moved into place only when every partition succeeded: a failed job leaves no data
    set behind (idv.dataset skips hidden directories).

    The index is not written (reset_index() first to keep it).

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
    path : str or os.PathLike
        A file name, or a directory (existing, or a name ending in ``/``).
    name_function : callable, optional
        Partition number -> file name inside ``path`` (default ``part.{i}.idv``).
    lookahead : int, optional
        Into one file: the partitions computed ahead of the one being written.
    compute : bool, default True
        One file per partition: False gives the dask.delayed that writes them, which makes
        its hidden staging directory when it runs; a job whose own computation then fails
        leaves that directory (never a part among the data set's files: remove it), which
        True removes as it fails.
    partition_by : str or list of str, optional
        Key columns: each partition is written as one file per combination of their values,
        ``path/key=value/part.{i}.idv`` (hive-style, as idv.write's ``partition_by``; read
        back with ``idv.dataset(path, partitioning="hive")``), without the key columns.
    **writer_kwargs
        The options of idv.write (``types``, ``metadata``, ``missing_text``, as idv.write
        takes them for a DataFrame) and of idv.Writer (``compression``, ``rows_per_block``,
        ``backend``...).

    Returns
    -------
    str, list of str or dask.delayed.Delayed
    """
    _dask_dataframe()
    check_write_options(writer_kwargs, "to_idv")
    text = os.fspath(path)
    per_partition = (name_function is not None or text.endswith(("/", os.sep))
                     or os.path.isdir(text) or partition_by is not None)
    if per_partition:
        return dask_writer.to_directory(ddf, text, name_function, partition_by, compute,
                                        writer_kwargs)
    if not compute:
        raise ValueError("compute=False is for one file per partition; a single file is "
                         "written by streaming the partitions in order")
    return dask_writer.to_file(ddf, text, lookahead, writer_kwargs)
