"""Apache Spark for .idv files: a Python data source named ``idv`` (``register(spark)``), for
``spark.read.format("idv").load(path)`` and ``df.write.format("idv").save(directory)``.

Imported on use (``import idv.spark``); it needs ``pip install 'idv[spark]'`` (pyspark 4, and Java
17 or newer). Partitions are the scan's (idv._scan.scan.partitions): groups of whole blocks of a
file, those of small files packed into one task (_packed), read by Spark's Python workers into
Arrow record batches that go to the JVM as they are (no Python object per row). Spark's types have
no unsigned integers, no fixed-size arrays and no dictionaries, so each ML.NET type is given its
nearest Spark type (``spark_arrow_type``; docs/spark.md has the table) and the exact ML.NET type
and annotations ride in each field's metadata (``idv.type``, ``idv.metadata``), from which the
writer restores them. """
from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys

from idv._engines import engine_filters
from idv._resources import threads
from idv._resources.budget import MemoryLimitError, halved
from idv._engines.reopen import listed, open_listed
from idv._scan import filters, scan
from idv._interop.arrow import arrow_schema, record_batch_reader
from idv import types as T
from idv._values.arrow_types import (METADATA_KEY, TYPE_KEY, column_arrow_type,
                                    import_pyarrow)
from idv._reader.dataset import dataset
from idv._values.arguments import ensure_bytes
from idv.errors import IdvFormatError, require
from idv._storage.staging import DEFAULT_NAME, Staging

sources = require("pyspark.sql.datasource", "idv.spark", "idv[spark]")

# the Arrow field metadata that carries a column's ML.NET type and annotations, as text
_IDV_KEYS = (TYPE_KEY.decode(), METADATA_KEY.decode())

__all__ = ["register", "IdvDataSource", "FilteringIdvDataSource", "spark_arrow_type"]

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark, *, pushdown: bool = False) -> None:
    """Register the data source ``idv`` with a SparkSession: then
    ``spark.read.format("idv").load(path)`` reads a file, a directory (its ``*.idv``, sorted)
    or a glob, and ``df.write.format("idv").mode("append" | "overwrite").save(directory)``
    writes one .idv per task.

    ``pushdown=True``, with the session's ``spark.sql.python.filterPushdown.enabled`` set to
    true, makes the source take the simple filters of a query (``Id >= 10``, ``Name in
    (...)``): partitions whose blocks the statistics rule out are not read and only matching
    rows leave the workers. Off by default: Spark (4.0 to 4.3 at least) keeps the reader a
    query's filters were pushed into and reads through it again for a later query on the
    same DataFrame that pushes none, so ``df.where(F.col("Id") > 5).count()`` then
    ``df.count()`` counts the filtered rows only. With it on, query each DataFrame once (load
    it anew per query). Spark refuses a reader that takes filters while the session's
    setting is false, so the setting is read here, once.

    Parameters
    ----------
    spark : pyspark.sql.SparkSession
    pushdown : bool, default False
        Take the simple filters of a query, as above.
    """
    check_workers(spark)
    enabled = pushdown and str(spark.conf.get(PUSHDOWN_CONF, "false")).lower() == "true"
    spark.dataSource.register(FilteringIdvDataSource if enabled else IdvDataSource)


def check_workers(spark) -> None:
    """ImportError, saying how to fix it, when the Python that a local session's workers run
    cannot import idv and pyarrow (a data source's batches are Arrow's): Spark starts
    ``python3`` from PATH unless told otherwise, so a script run as ``venv/bin/python
    job.py`` (an IDE, cron) without the venv activated reads no .idv. A cluster's workers
    run elsewhere, and are not checked here."""
    sc = spark.sparkContext
    if not str(sc.master).startswith("local"):
        return
    exe = getattr(sc, "pythonExec", None) or os.environ.get("PYSPARK_PYTHON") or "python3"
    if not _imports_idv(exe):
        raise ImportError(
            f"Spark's Python workers run {exe!r}, which cannot import idv and pyarrow (this "
            f"process runs {sys.executable!r}): start the session with the same interpreter, "
            f"e.g. SparkSession.builder.config('spark.pyspark.python', sys.executable), or set "
            f"PYSPARK_PYTHON={sys.executable} before Spark starts, or install idv[spark] "
            f"there")


@functools.lru_cache(maxsize=None)
def _imports_idv(exe):
    try:
        done = subprocess.run([exe, "-c", "import idv, pyarrow"], capture_output=True,
                              timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


# ---- types ---------------------------------------------------------------------------------

def spark_arrow_type(pa, at):
    """The Arrow type Spark takes for idv's Arrow type `at`: unsigned integers widened to the
    next signed type (UInt64 to decimal(20, 0)), dictionaries (keys with KeyValues) to the
    key's integers (1-based, 0 missing, as ML.NET stores them), fixed-size lists to lists;
    timestamps, durations, structs (DateTimeOffset, RowId), strings and the rest as they are.

    Parameters
    ----------
    pa : module
        pyarrow.
    at : pyarrow.DataType
    """
    t = pa.types
    if t.is_dictionary(at):
        return pa.int64()
    if t.is_fixed_size_list(at) or t.is_list(at):
        return pa.list_(spark_arrow_type(pa, at.value_type))
    if t.is_struct(at):
        return pa.struct([pa.field(f.name, spark_arrow_type(pa, f.type))
                          for f in (at.field(i) for i in range(at.num_fields))])
    if t.is_unsigned_integer(at):
        return {8: pa.int16(), 16: pa.int32(), 32: pa.int64()}.get(at.bit_width,
                                                                    pa.decimal128(20, 0))
    return at


def _to_spark(pa, arr):
    """An Arrow array of idv's form in the form spark_arrow_type gives."""
    t = pa.types
    at = arr.type
    if t.is_dictionary(at):
        import pyarrow.compute as pc
        return pc.fill_null(pc.add(arr.indices.cast(pa.int64()), 1), 0)
    if t.is_fixed_size_list(at):
        import numpy as np
        offsets = pa.array(np.arange(0, (len(arr) + 1) * at.list_size, at.list_size,
                                     dtype=np.int32))
        return pa.ListArray.from_arrays(offsets, _to_spark(pa, arr.flatten()))
    if t.is_list(at):
        return pa.ListArray.from_arrays(arr.offsets, _to_spark(pa, arr.values))
    if t.is_struct(at):
        return pa.StructArray.from_arrays([_to_spark(pa, arr.field(i))
                                           for i in range(at.num_fields)],
                                          [at.field(i).name for i in range(at.num_fields)])
    target = spark_arrow_type(pa, at)
    return arr if target == at else arr.cast(target)


def _idv_meta(field):
    """The ML.NET type and annotations in an Arrow field's metadata, as a dict of text."""
    meta = {k.decode(): v.decode() for k, v in (field.metadata or {}).items()}
    return {k: v for k, v in meta.items() if k in _IDV_KEYS}


def _spark_schema(arrow):
    """The Spark StructType of idv's Arrow schema, each field's metadata the ML.NET type
    (``idv.type``) and annotations (``idv.metadata``)."""
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType
    pa = import_pyarrow()
    fields = []
    for f in arrow:
        fields.append(StructField(f.name, from_arrow_type(spark_arrow_type(pa, f.type)),
                                  nullable=True, metadata=_idv_meta(f)))
    return StructType(fields)


READ_OPTIONS = ("path", "columns", "blocksPerPartition", "safe", "checksums", "schema",
                "onBadFile", "memoryLimit")
# idv.dataset's options as messages name them -> as Spark's reader takes them
_SPARK_WORDS = (("schema='common'", '.option("schema", "common")'),
                ("on_bad_file='skip'", '.option("onBadFile", "skip")'),
                ("idv.open(path, memory_limit=N) or idv.set_memory_limit(N)",
                 '.option("memoryLimit", N)'))
WRITE_OPTIONS = ("path", "name", "like", "compression", "rowsPerBlock")


def _known_options(options, known, what):
    """ValueError for an option of `options` that is none of `known` (Spark's options are
    any case): taken and ignored, it would leave a read or write other than asked."""
    names = {k.lower() for k in known}
    unknown = [k for k in options if k.lower() not in names]
    if unknown:
        hint = ": filter rows with .where() or .filter(), which register(spark, pushdown=True) " \
            "passes to the read" if unknown[0].lower() in ("filter", "where") else ""
        raise ValueError(f"option {unknown[0]!r} is not one of idv's {what} options "
                         f"({', '.join(known)}){hint}")


def _option_bytes(text):
    """A number of bytes given as a Spark option (text: ``"50000000"``, ``"8GB"``)."""
    return ensure_bytes(text, '.option("memoryLimit", ...)')


def _option_bool(options, key, default):
    value = options.get(key)
    if value is None:
        return default
    if str(value).lower() not in ("true", "false"):
        raise ValueError(f"option {key!r} is true or false, not {value!r}")
    return str(value).lower() == "true"


# ---- reading -------------------------------------------------------------------------------

class _Partition(sources.InputPartition):
    """Scan partitions read one after the other by one Spark task, each with its file as listed
    when it was planned (idv._engines.reopen.Listed; picklable, sent to a Python worker)."""


def _partitions(ds, names, per, block_filter=None, workers=None):
    """The _Partitions of Dataset `ds`: its scan partitions (each with its file's listing),
    those of small files packed together (_packed, for `workers` cores)."""
    entries = listed(ds, names)
    parts = scan.partitions(ds, names, per, scan.PARTITION_BYTES, block_filter=block_filter,
                            at_least_one=block_filter is not None)
    return [_Partition(tuple((p, entries[p.part]) for p in run))
            for run in _packed(ds, parts, per, workers)]


def _packed(ds, parts, per, workers=None):
    """Runs of consecutive scan partitions `parts` of Dataset `ds`, each run one Spark task: a
    task has a fixed cost on a Python worker that dwarfs a small file, so a run holds what one
    scan partition may hold (``per`` blocks, else scan.PARTITION_BYTES of decoded values, as
    scan.partitions sizes them), within one of `workers` equal shares of `parts`, so that every
    core still has a task (default: the CPUs the planning process may run on,
    threads.default_threads: the cores of local[*]; Spark tells a data source none)."""
    workers = workers or threads.default_threads()
    room = per if per is not None else halved(scan.PARTITION_BYTES, ds.memory_limit)
    runs, held, last = [], 0, None
    for i, p in enumerate(parts):
        share = i * workers // len(parts)
        size = p.b1 - p.b0 if per is not None else p.nbytes     # as scan.partitions sized it
        if share == last and held + size <= room:
            runs[-1].append(p)
            held += size
        else:
            runs.append([p])
            held, last = size, share
    return runs


class _Plan:
    """The read planned on the driver: the dataset's partitions and schemas."""

    def __init__(self, options):
        path = options.get("path")
        if not path:
            raise ValueError('spark.read.format("idv") needs a path: .load(path), a file, a '
                             'directory or a glob')
        _known_options(options, READ_OPTIONS, "reading")
        columns = options.get("columns")
        columns = None if columns is None else [c.strip() for c in columns.split(",")]
        per = options.get("blocksPerPartition")
        self.per = None if per is None else int(per)
        self.safe = _option_bool(options, "safe", True)
        checksums = _option_bool(options, "checksums", True)
        # Spark plans and reads in Python processes of its own, where idv.set_memory_limit
        # of the session's process does not hold: the limit is an option (memory_limit=)
        limit = options.get("memoryLimit")
        with _in_spark_words(), \
                dataset(path, columns, checksums=checksums, schema=options.get("schema", "exact"),
                        on_bad_file=options.get("onBadFile", "raise"),
                        memory_limit=None if limit is None else _option_bytes(limit)) as ds:
            self.names = ds.column_names            # those of `columns`, in their order
            self.parts = _partitions(ds, self.names, self.per)
            # Spark's timestamps are microseconds: finer ticks raise unless safe=false
            self.arrow = arrow_schema(ds, self.names, datetime="us")
            self.filesystem = ds.filesystem
            self.open_kwargs = dict(ds.open_kwargs)
            with ds.using(0) as first:
                self.types = {n: first[n].type for n in self.names}
        self.path = path
        self.schema = _spark_schema(self.arrow)


@contextlib.contextmanager
def _in_spark_words():
    """idv.dataset's errors naming its options as Spark's reader takes them."""
    try:
        yield
    except (ValueError, MemoryLimitError) as e:
        text = e.reason if isinstance(e, IdvFormatError) else str(e)
        for python, spark in _SPARK_WORDS:
            text = text.replace(python, spark)
        if isinstance(e, IdvFormatError):
            e.reason = text
            raise
        raise type(e)(text) from None


class _Reader(sources.DataSourceReader):
    filter = None       # idv's filter (DNF tuples) of the filters Spark pushed, or None

    def __init__(self, plan):
        self.plan = plan
        self.parts = plan.parts

    def partitions(self):
        return self.parts

    def read(self, partition):
        from pyspark.sql.pandas.types import to_arrow_schema
        pa = import_pyarrow()
        plan = self.plan
        schema = to_arrow_schema(plan.schema, timezone="UTC")
        # a dataset of no rows has no partition: Spark then reads one that holds None
        for part, entry in getattr(partition, "value", None) or ():
            # the file as planned: an IdvFormatError naming it when another is in its place
            with _in_spark_words(), open_listed(entry, plan.filesystem, plan.open_kwargs) as f:
                for batch in record_batch_reader(f, plan.names, datetime="us", safe=plan.safe,
                                                 rows=range(part.start, part.stop),
                                                 filter=self.filter):
                    yield pa.RecordBatch.from_arrays(
                        [_to_spark(pa, c) for c in batch.columns], schema=schema)


class _FilteringReader(_Reader):
    """A reader that takes Spark's pushed filters (the session's filter pushdown on)."""

    def pushFilters(self, filters_):
        """Take the filters idv tests exactly as Spark does (idv._engines.engine_filters); give
        back the others, which Spark applies after the read. Partitions whose blocks the statistics
        rule out are dropped here; read() keeps only the matching rows."""
        terms, left = [], []
        for f in filters_:
            term = engine_filters.from_spark(f, self.plan.types, self.plan.safe)
            if term is None:
                left.append(f)
            elif term is not True:
                terms.append(term)
        # each query pushes its own filters: none of an earlier query's may stay
        self.filter, self.parts = None, self.plan.parts
        if terms:
            self.filter = terms
            with dataset(self.plan.path, self.plan.names) as ds:
                # the statistics rule out every partition: the first, which finds no rows
                self.parts = _partitions(ds, self.plan.names, self.plan.per,
                                         filters.blocks_of(terms))
        return left


# ---- writing -------------------------------------------------------------------------------

class _Written(sources.WriterCommitMessage):
    def __init__(self, name):
        self.name = name


def _idv_fields(schema, like):
    """name -> the Arrow field metadata (``idv.type``, ``idv.metadata``) that gives each
    column its ML.NET type and annotations: from the Spark schema's field metadata where
    Spark kept it, else from the .idv file ``like`` (a file with those columns)."""
    found = {}
    if like:
        with dataset(like) as ds:
            for f in arrow_schema(ds, ds.column_names, datetime="us"):
                found[f.name] = _idv_meta(f)
    for sf in schema.fields:
        meta = {k: v for k, v in (sf.metadata or {}).items() if k in _IDV_KEYS}
        if meta:
            found[sf.name] = meta
    return found


def _restore_types(pa, table, idv_fields):
    """Spark's Arrow table with each field's ML.NET type and annotations back in its field
    metadata, so that idv.from_arrow gives the exact types: a column in the type Spark makes
    of idv's Arrow type for it (spark_arrow_type: unsigned integers widened, a fixed-size
    vector's lists, a key's integers) cast back to that type."""
    fields, columns = [], []
    for f, column in zip(table.schema, table.columns):
        meta = idv_fields.get(f.name)
        if meta:
            idv_type = column_arrow_type(pa, T.parse_type(meta[_IDV_KEYS[0]]), "us")
            if column.type != idv_type and column.type == spark_arrow_type(pa, idv_type):
                column = column.cast(idv_type)          # checked: a value out of range raises
            f = pa.field(f.name, column.type, metadata=meta)
        fields.append(f)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


class _Writer(sources.DataSourceArrowWriter):
    """One .idv per task, staged in a hidden folder of the output directory and moved in by
    commit (idv._storage.staging); abort removes the folder."""

    def __init__(self, options, schema, overwrite):
        path = options.get("path")
        if not path:
            raise ValueError('df.write.format("idv") needs a directory: .save(directory)')
        _known_options(options, WRITE_OPTIONS, "writing")
        self.writer_kwargs = {}
        if options.get("compression") is not None:
            self.writer_kwargs["compression"] = options["compression"]
        if options.get("rowsPerBlock") is not None:
            self.writer_kwargs["rows_per_block"] = int(options["rowsPerBlock"])
        self.idv_fields = _idv_fields(schema, options.get("like"))
        self.schema = schema
        # overwrite: the directory's files are this job's once its manifest names them, and
        # the old ones removed only then (idv._storage.staging): readers see one set or the other
        self.staging = Staging(path, options.get("name", DEFAULT_NAME), replace=overwrite)
        self.staging.start()

    def write(self, iterator):
        from pyspark import TaskContext
        batches = [b for b in iterator if b.num_rows]
        return _Written(self.staging.write(TaskContext.get().partitionId(),
                                           lambda path: self._write_file(path, batches),
                                           rows=sum(b.num_rows for b in batches)))

    def _write_file(self, path, batches):
        """The file of Spark's Arrow `batches` (none: the DataFrame's columns, no rows)."""
        from pyspark.sql.pandas.types import to_arrow_schema
        from idv._writer import write
        pa = import_pyarrow()
        table = pa.Table.from_batches(batches) if batches else \
            to_arrow_schema(self.schema, timezone="UTC").empty_table()
        write(path, _restore_types(pa, table, self.idv_fields), **self.writer_kwargs)

    def commit(self, messages):
        no_rows = (self.staging.name(0), lambda path: self._write_file(path, []))
        self.staging.commit([getattr(m, "name", None) for m in messages], empty=no_rows)

    def abort(self, messages):
        self.staging.abort()


class IdvDataSource(sources.DataSource):
    """The data source ``idv``. Reading options: ``path`` (``load(path)``: a file, a directory
    or a glob), ``columns`` (comma-separated: only those are decoded; Spark's Python data
    sources are not told which columns a query uses), ``blocksPerPartition`` (default: about
    64 MiB of decoded values per partition), ``safe`` (``false`` floors sub-microsecond times
    to Spark's microseconds instead of raising), ``checksums`` (``false``: not checked),
    ``schema`` and ``onBadFile`` (idv.dataset's ``schema`` and ``on_bad_file``),
    ``memoryLimit`` (bytes: ``memory_limit=``; set_memory_limit does not reach Spark's
    processes). Any
    other option is a ValueError, naming those it takes (Spark would pass it unread). Writing
    options: ``name`` (a pattern of
    ``{task}`` and ``{job}``, default ``part-{task:05d}-{job}.idv``), ``like`` (an .idv file
    or dataset whose columns' ML.NET types and annotations the written columns of the same
    names take: Spark does not keep a data source's field metadata), ``compression``,
    ``rowsPerBlock``. It takes no filters of Spark's: FilteringIdvDataSource does."""

    @classmethod
    def name(cls):
        """``idv``: the name of ``format("idv")``."""
        return "idv"

    def _plan(self):
        if getattr(self, "_planned", None) is None:
            self._planned = _Plan(self.options)
        return self._planned

    def schema(self):
        """The Spark schema of the files' columns (the first file's), planned once."""
        return self._plan().schema

    def reader(self, schema):
        """The reader of the planned partitions."""
        return _Reader(self._plan())

    def writer(self, schema, overwrite):
        """A writer of one file per task into the directory ``path``; its staging folder is
        made here, on the driver."""
        return _Writer(self.options, schema, overwrite)


class FilteringIdvDataSource(IdvDataSource):
    """The data source ``idv`` that takes Spark's pushed filters (what register() gives a
    session whose ``spark.sql.python.filterPushdown.enabled`` is true)."""

    def reader(self, schema):
        """The reader of the planned partitions, which takes Spark's pushed filters."""
        return _FilteringReader(self._plan())
