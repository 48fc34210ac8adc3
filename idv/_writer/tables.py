"""Whole tables in one call: ``idv.write`` into one file, or into a hive-partitioned directory
(``partition_by=``): one file per combination of the keys' values in its ``key=value`` folders
(idv._storage.partitioning), without the key columns, all published together as one job
(idv._storage.staging): a reader of the directory sees the old files or the new ones, never a
part."""
from __future__ import annotations

import contextlib
import inspect
import re

import numpy as np

from idv import _docs
from idv._storage import partitioning, sink
from idv._storage.staging import Staging
from idv._values.arrow_types import import_pyarrow
from idv._values.infer import is_scipy_sparse
from idv._values.vectors import Ragged
from idv._writer.arrow import arrow_table
from idv._writer.inputs import (as_pyarrow, check_dest, check_table, data_columns, frame_rows,
                                merged_metadata, schema_of)
from idv._writer.pipeline import DEFAULT_MAX_BYTES_PER_BLOCK, Writer
from idv._writer.relabel import counted, relabelled, relabelling


@_docs.fill
def write(dest, data, *, types=None, metadata=None, compression="deflate", level=None,
          rows_per_block=None, max_bytes_per_block=DEFAULT_MAX_BYTES_PER_BLOCK, threads=None,
          backend=None, checksums=True, statistics=True, missing_text=None, partition_by=None):
    """Write columns, a pandas DataFrame or a pyarrow Table to an .idv file, or to a directory
    of files partitioned by the values of some columns.

    Types come from the data: float32 -> Single, float64 -> Double, int8..uint64 -> SByte..
    UInt64, bool -> Boolean, str -> Text, datetime64 -> DateTime, timedelta64 -> TimeSpan,
    2-d arrays -> fixed-size vectors, idv.Ragged -> variable-size vectors, sparse matrices ->
    sparse vectors. DataFrames go through idv.from_pandas (Categorical -> key with
    KeyValues, zone-aware datetimes -> DateTimeOffset ...) and Arrow tables through
    idv.from_arrow (exact types and metadata back from to_arrow's field metadata).

    Parameters
    ----------
    dest : str, os.PathLike or binary file object
        A path (written atomically, as idv.Writer writes it) or a seekable binary file; with
        ``partition_by``, a directory.
    data : dict, list of (name, values), numpy structured array, DataFrame, Arrow data
        A dict name -> numpy array, list, idv.Ragged, idv.Sparse, scipy.sparse matrix or
        pyarrow Array / ChunkedArray (typed as a Table's columns are); a list of (name,
        values) pairs may repeat a name (ML.NET's hidden columns: the last one is visible).
        Arrow data: a pyarrow Table, RecordBatch, reader or Dataset (idv.arrow_dataset's
        too: a reader or Dataset written a batch at a time), a polars DataFrame or DuckDB
        relation (Arrow's C stream interface), a Hugging Face Dataset; a pandas DataFrame
        goes through idv.from_pandas.
    types : dict, optional
        ``{name or index: type}`` overriding the inferred types (keys, DateTimeOffset, RowId,
        multi-dimensional vectors ...).
    metadata : dict, optional
        ``{name: {kind: value or (type, value)}}``, added to (and per kind replacing) the
        metadata a DataFrame or Table brings.
    {writer_options}
    partition_by : str or list of str, optional
        Key columns: one file per combination of their values, ``dest/key=value/part.0.idv``
        (hive-style, as pyarrow and Spark write it; read back with ``idv.dataset(dest,
        partitioning="hive")``), without the key columns; every file published together
        (a failure leaves ``dest`` as it was, a file of the same name is replaced). Give
        ``types`` and ``metadata`` by column name. Returns the paths written.

    Examples
    --------
    >>> import io, numpy as np
    >>> out = io.BytesIO()
    >>> idv.write(out, {"x": np.arange(3, dtype=np.float32), "name": ["a", "b", "c"]})
    >>> idv.read(out.getvalue())["x"]
    array([0., 1., 2.], dtype=float32)
    """
    check_table(data)
    options = dict(compression=compression, level=level, rows_per_block=rows_per_block,
                   max_bytes_per_block=max_bytes_per_block, threads=threads, backend=backend,
                   checksums=checksums, statistics=statistics, missing_text=missing_text)
    if partition_by is not None:
        whole = _whole_types(data, partition_by, types, missing_text)
        return write_partitioned(dest, data, partition_by, lambda path, rows: write(
            path, rows, types=whole, metadata=metadata, **options))
    stream = _stream_plan(data, types, missing_text)
    if stream is not None:
        return _write_stream(dest, *stream, types, metadata, options)
    columns, inferred_types, inferred_metadata = data_columns(data, types, missing_text)
    names = [n for n, _ in columns]
    maps = relabelling(names, inferred_metadata, metadata)
    schema, columns = schema_of(columns, types, counted(inferred_types, names, maps))
    columns = relabelled(columns, maps)
    metadata = merged_metadata(inferred_metadata, metadata)
    w = Writer(dest, schema, metadata=metadata, **options)
    try:
        if columns:
            w.write_batch(columns)
        else:
            w.add_empty_rows(frame_rows(data))
        w.close()
    except BaseException:
        w.abort()
        raise


def _write_stream(dest, plan, batches, types, metadata, options):
    """Write the Arrow `batches()` a batch at a time, as `plan` (an ArrowToIdv) converts
    them, typed and annotated as a Table of them would be."""
    names = [n for n, _ in plan.schema_pairs]
    maps = relabelling(names, plan.metadata, metadata)
    schema = schema_of([(n, None) for n in names], types, counted(plan.types, names, maps))[0]
    w = Writer(dest, schema, metadata=merged_metadata(plan.metadata, metadata), **options)
    try:
        row0 = 0
        for batch in batches():
            w.write_batch(relabelled(plan.convert(batch, row0), maps, row0))
            row0 += batch.num_rows
        w.close()
    except BaseException:
        w.abort()
        raise


def _stream_plan(data, types, missing_text):
    """(ArrowToIdv plan, a function giving the batches) where `data` is a stream of Arrow
    batches that need not be held whole: a pyarrow RecordBatchReader or Dataset
    (idv.arrow_dataset's too), written a batch at a time as it is read (a dictionary
    column's KeyValues gathered first by a pass over that column: a Dataset's alone, a
    reader, which is read once, is held whole then). None for anything else."""
    arrow = as_pyarrow(data, table=True)
    if arrow is None:
        return None
    dataset = all(hasattr(arrow, a) for a in ("scanner", "to_table"))
    if not (dataset or isinstance(arrow, import_pyarrow().RecordBatchReader)) or \
            not arrow.schema.names:
        return None
    from idv._writer.arrow import ArrowToIdv
    plan = ArrowToIdv(arrow.schema, types, missing_text)
    if plan.pending and not dataset:
        return None
    for i in plan.pending:
        name = plan.fields[i].name
        for batch in arrow.scanner(columns=[name]).to_batches():
            plan.add_dictionaries(i, batch.column(0))
    plan.finish_dictionaries()
    return plan, (arrow.scanner().to_batches if dataset else lambda: arrow)



def _whole_types(data, partition_by, types, missing_text):
    """The types of the columns of `data` (a pandas DataFrame or a dict: typed from their
    values) but the keys, inferred once from all its rows, the
    caller's `types` over them: each part's own values would type them apart ([1, 2] Int64 in
    one file, [3.5] Double in the next, a dataset of files that disagree). Arrow data is
    typed by its schema: `types` as given."""
    if hasattr(data, "iloc"):
        rest = data.drop(columns=check_keys(list(data.columns), partition_by))
    elif isinstance(data, dict) and all(as_pyarrow(v) is None for v in data.values()):
        keys = check_keys(list(data), partition_by)
        rest = {n: v for n, v in data.items() if n not in keys}
    else:
        return types
    columns, inferred, _ = data_columns(rest, types, missing_text)
    return dict(schema_of(columns, types, inferred)[0])


# a group's file inside its folders; the same name again replaces it (as Dask's to_idv)
FILE_NAME = "part.{task}.idv"


def check_keys(names, partition_by):
    """The list of key columns: ValueError unless each is a column of `names`, once, and some
    column is left to write."""
    keys = [partition_by] if isinstance(partition_by, str) else list(partition_by)
    if not keys:
        raise ValueError("partition_by names no column")
    missing = [k for k in keys if k not in names]
    if missing or len(set(keys)) != len(keys):
        raise ValueError(f"partition_by must name distinct columns of the data (columns: "
                         f"{', '.join(map(str, names))}), not {keys!r}")
    if len(keys) == len(names):
        raise ValueError("partition_by names every column: no column is left to write")
    return keys


def split(data, partition_by):
    """(keys, [(folder, rows of `data` without the key columns)]): numbered_split's, without
    the row numbers."""
    keys, parts = numbered_split(data, partition_by)
    return keys, [(folder, rows) for folder, _, rows in parts]


def numbered_split(data, partition_by):
    """(keys, [(folder, the row numbers, those rows of `data` without the key columns)]) of
    a pandas DataFrame, a pyarrow Table or RecordBatch (or another Arrow library's frame, a
    dict holding Arrow columns: as a Table), or a dict of arrays and lists."""
    if hasattr(data, "iloc"):                                    # pandas
        keys = check_keys(list(data.columns), partition_by)
        parts = partitioning.groups([data[k].to_numpy() for k in keys])
        rest = data.drop(columns=keys)
        return keys, [(partitioning.folder(keys, t), rows, rest.iloc[rows])
                      for t, rows in parts]
    data = _as_table(data)
    if hasattr(data, "schema") and hasattr(data, "take"):       # Arrow
        keys = check_keys(list(data.schema.names), partition_by)
        parts = partitioning.groups([data.column(k) for k in keys])
        rest = _takeable(data.select([n for n in data.schema.names if n not in keys]))
        return keys, [(partitioning.folder(keys, t), rows, rest.take(rows))
                      for t, rows in parts]
    if isinstance(data, dict):
        keys = check_keys(list(data), partition_by)
        arrays = {n: _indexable(n, v) for n, v in data.items()}
        parts = partitioning.groups([arrays[k] for k in keys])
        return keys, [(partitioning.folder(keys, t), rows,
                       {n: v[rows] for n, v in arrays.items() if n not in keys})
                      for t, rows in parts]
    raise TypeError(f"partition_by takes a pandas DataFrame, a pyarrow Table (or another Arrow "
                    f"library's frame) or a dict of arrays and lists, not {type(data).__name__}")


def _as_table(data):
    """`data` as a pyarrow Table where it is Arrow data: another library's frame (as_pyarrow),
    or a dict one of whose columns is Arrow's (its other columns 1-d arrays or lists); else
    as it is."""
    arrow = as_pyarrow(data, table=True)
    if arrow is not None:
        return arrow_table(arrow, "partition_by")
    columns = {n: as_pyarrow(v) for n, v in data.items()} if isinstance(data, dict) else {}
    if any(a is not None for a in columns.values()):
        pa = import_pyarrow()
        try:
            return pa.table({n: data[n] if a is None else a for n, a in columns.items()})
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise TypeError(f"with partition_by, a dict holding Arrow columns is made a pyarrow "
                            f"Table, which failed ({e}): give a pyarrow Table") from None
    return data


def _takeable(table):
    """`table` with its string views (polars' strings) as large strings: pyarrow's take has
    no kernel for views."""
    pa = import_pyarrow()
    if all(f.type != pa.string_view() for f in table.schema):
        return table
    return table.cast(pa.schema([f.with_type(pa.large_string())
                                 if f.type == pa.string_view() else f for f in table.schema],
                                table.schema.metadata))


def _indexable(name, values):
    """A dict column as an array rows can be taken from (an idv.Ragged and a scipy.sparse
    matrix take rows as arrays do)."""
    if isinstance(values, (np.ndarray, Ragged)):
        return values
    if is_scipy_sparse(values):
        return values.tocsr()
    if isinstance(values, (list, tuple)):
        out = np.empty(len(values), object)
        out[:] = values
        return out
    raise TypeError(f"column {name!r}: with partition_by, a dict's columns must be numpy "
                    f"arrays, lists, idv.Ragged or scipy.sparse matrices, not "
                    f"{type(values).__name__}")


def write_partitioned(dest, data, partition_by, write_one):
    """Write `data` into directory `dest`, a file per group (``write_one(path, rows)``
    writes one); returns the paths, in the order of each group's first row. A failure leaves
    the directory as it was."""
    check_dest(dest)
    _, parts = numbered_split(data, partition_by)
    names = [f"{folder}/{FILE_NAME.format(task=0)}" for folder, _, _ in parts]
    staging = Staging(dest, name=names.__getitem__)
    staging.fix_names(len(names))
    staging.start()
    try:
        with sink.batch():      # the staging folder fsynced once, before the files move in
            names = [staging.write(i, lambda path, rows=rows, at=at: _write_part(
                write_one, path, rows, at)) for i, (_, at, rows) in enumerate(parts)]
        return staging.commit(names)
    finally:
        staging.abort()


# "row N" in the writer's messages (idv.errors.Where and the frame adapters), outside the
# quoted names and values they hold (a column named 'row 9' is not a row)
_ROW = re.compile(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|\brow (\d+)\b""")


def _write_part(write_one, path, rows, at):
    """``write_one(path, rows)``, its errors naming each row by its number in the data
    (`at`: the data's row of each of `rows`), not in the part."""
    with rows_renamed(lambda n: int(at[n])):
        write_one(path, rows)


@contextlib.contextmanager
def rows_renamed(row, prefix=""):
    """The writer's TypeError and ValueError raised within, each "row N" of their message
    named ``row(N)`` instead (a part's row by its number in the whole data), `prefix` before
    the message."""
    try:
        yield
    except (TypeError, ValueError) as e:
        if type(e) not in (TypeError, ValueError):
            raise
        text = prefix + _ROW.sub(lambda m: m.group(1) or f"row {row(int(m.group(2)))}",
                                 str(e))
        raise type(e)(text).with_traceback(e.__traceback__) from None


def check_write_options(options, who):
    """TypeError, before anything is written, for a keyword of `options` that idv.write does
    not take (an engine's writer hands them to idv.write or its Writer in its tasks, where
    it would fail late, once per task); `who` names the caller."""
    known = [p for p in inspect.signature(write).parameters
             if p not in ("dest", "data", "partition_by")]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise TypeError(f"{who}() got an unexpected keyword argument {unknown[0]!r}; the "
                        f"options of idv.write it takes: {', '.join(known)}")
