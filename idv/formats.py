"""Convert between .idv and Parquet, CSV / TSV and Feather / Arrow IPC, streaming.

``convert(src, dst)`` never holds a whole file: an .idv is read one block of rows at a time
(idv.arrow.record_batch_reader) and handed to pyarrow's writers (ParquetWriter, the IPC file
writer, CSVWriter); the other way, pyarrow's readers give record batches (Parquet row groups,
IPC batches, CSV blocks) that go to idv.Writer.write_batch, which writes full blocks as they
fill. Memory stays around a block (or batch) per column. An .idv to .idv conversion (to select
columns, re-block or change compression) streams numpy blocks and keeps every type and
annotation exactly.

The output appears only when complete: it is written to a temporary file beside ``dst`` and
renamed over it at the end (idv.sink); on any error the temporary file is removed.
"""
from __future__ import annotations

import contextlib
import os

import numpy as np

from idv import _threads
from idv import types as T
from idv._interop import iter_row_blocks, opened, select_columns
from idv.annotations import metadata_spec, slot_labels
from idv.ticks import TIME_MODES as TIME_UNITS, check_time_mode
from idv.types import parse_type
from idv.compression import DEFLATE, NONE, fast_deflate
from idv.compression import kind as compression_kind
from idv.sink import AtomicPath

__all__ = ["convert", "FORMATS"]

# extension -> format
FORMATS = {".idv": "idv", ".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "tsv",
           ".tab": "tsv", ".feather": "feather", ".arrow": "arrow", ".ipc": "arrow"}
_NAMES = {"idv", "parquet", "csv", "tsv", "feather", "arrow"}

# Parquet row groups: batches are gathered up to this many rows or bytes before one is written
# (in a thread, while the next is gathered). 8 MiB: the first is written early, so reading and
# writing overlap more (the text benchmark file's first group is a third of it, not all);
# smaller ones grow the file (bench_read's numeric file: 49.3 MB in 64 MiB groups, 49.9 in 16,
# 50.5 in 8, 51.6 in 4) and, below 8 MiB, slow the writing.
_ROW_GROUP_ROWS = 1 << 20
_ROW_GROUP_BYTES = 8 << 20
# CSV is read in blocks of this many bytes (pyarrow infers the column types from the first)
_CSV_BLOCK = 16 << 20
# Parquet / IPC sources are read in batches of at most this many rows
_BATCH_ROWS = 65536
# batches read ahead of the one being written, in a thread of their own
_READ_AHEAD = 1


def _format_of(path, given, what):
    if _is_dataset(path):
        if given is not None and str(given).lower().lstrip(".") != "idv":
            raise ValueError(f"an idv.Dataset is read as .idv, not as {given!r}")
        return "idv"
    if given is not None:
        fmt = str(given).lower().lstrip(".")
        if fmt == "ipc":
            fmt = "arrow"
        if fmt not in _NAMES:
            raise ValueError(f"unknown {what} format {given!r}; one of {sorted(_NAMES)}")
        return fmt
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext not in FORMATS:
        raise ValueError(f"cannot tell the {what} format from {os.fspath(path)!r}: use one of the "
                         f"extensions {sorted(FORMATS)} or give it (to='parquet', ...)")
    return FORMATS[ext]


def _pa():
    from idv.arrow_types import import_pyarrow
    return import_pyarrow()


# ---------------------------------------------------------------------------------------------
# sources: (schema, batches, total rows) + dictionary pre-scan
# ---------------------------------------------------------------------------------------------

class _Source:
    schema = None
    total = None

    def batches(self):
        raise NotImplementedError

    def column_batches(self, name):
        """Batches of one column only (to collect a dictionary's values before writing)."""
        for b in self.batches():
            yield b.column(b.schema.get_field_index(name))

    def close(self):
        pass


def _names(schema, columns):
    if columns is None:
        return None
    if isinstance(columns, (str, int, np.integer)):
        columns = [columns]
    names = list(schema.names)
    out = []
    for c in columns:
        if isinstance(c, (int, np.integer)):
            out.append(names[int(c)])
        elif c not in names:
            raise KeyError(f"no column {c!r}; columns: {names}")
        else:
            out.append(c)
    return out


class _IdvSource(_Source):
    def __init__(self, path, columns, datetime, safe):
        from idv.arrow import record_batch_reader
        from idv.reader import open as idv_open
        if _is_dataset(path):        # the caller's dataset: its files in turn, left open
            self.f = None
            names = _dataset_columns(path, columns)
            self.reader = path.record_batch_reader(names, datetime=datetime, safe=safe)
            self.schema, self.total = self.reader.schema, path.num_rows
            return
        self.f = idv_open(path)
        try:
            self.reader = record_batch_reader(self.f, columns, datetime=datetime, safe=safe)
            self.schema = self.reader.schema
            self.total = self.f.num_rows
        except BaseException:
            self.f.close()
            raise

    def batches(self):
        return iter(self.reader)

    def close(self):
        if self.f is not None:
            self.f.close()


class _ParquetSource(_Source):
    def __init__(self, path, columns, batch_rows):
        import pyarrow.parquet as pq
        # pre_buffer would read ahead the column chunks of every row group: one at a time
        self.pf = pq.ParquetFile(path, pre_buffer=False)
        full = self.pf.schema_arrow
        self.columns = _names(full, columns)
        self.schema = full if self.columns is None else _pa().schema(
            [full.field(n) for n in self.columns], metadata=full.metadata)
        self.total = self.pf.metadata.num_rows
        self.batch_rows = batch_rows

    def batches(self):
        return self.pf.iter_batches(batch_size=self.batch_rows, columns=self.columns)

    def column_batches(self, name):
        for b in self.pf.iter_batches(batch_size=self.batch_rows, columns=[name]):
            yield b.column(0)

    def close(self):
        if hasattr(self.pf, "close"):
            self.pf.close()


class _IpcSource(_Source):
    def __init__(self, path, columns):
        pa = _pa()
        self.source = pa.memory_map(os.fspath(path), "r")
        try:
            self.reader = pa.ipc.open_file(self.source)
            self.stream = False
        except pa.ArrowInvalid:
            self.source.seek(0)
            self.reader = None
            self.stream = True
        schema = (self.reader.schema if self.reader is not None
                  else pa.ipc.open_stream(self.source).schema)
        self.columns = _names(schema, columns)
        self.schema = schema if self.columns is None else pa.schema(
            [schema.field(n) for n in self.columns], metadata=schema.metadata)
        if self.reader is not None:
            self.total = sum(self.reader.get_batch(i).num_rows
                             for i in range(self.reader.num_record_batches))

    def _all(self):
        pa = _pa()
        if self.reader is not None:
            for i in range(self.reader.num_record_batches):
                yield self.reader.get_batch(i)
        else:
            self.source.seek(0)
            yield from pa.ipc.open_stream(self.source)

    def batches(self):
        for b in self._all():
            yield b if self.columns is None else b.select(self.columns)

    def close(self):
        self.source.close()


class _CsvSource(_Source):
    def __init__(self, path, columns, delimiter, types, datetime):
        import pyarrow.csv as pcsv
        pa = _pa()
        column_types = {}
        for name, t in (types or {}).items():
            at = _csv_arrow_type(pa, t, datetime)
            if at is not None:
                column_types[name] = at
        if columns is not None and isinstance(columns, (str, int, np.integer)):
            columns = [columns]
        if columns is not None and any(isinstance(c, (int, np.integer)) for c in columns):
            raise TypeError("CSV columns are chosen by name")
        self.args = (path, pcsv.ReadOptions(block_size=_CSV_BLOCK),
                     pcsv.ParseOptions(delimiter=delimiter),
                     pcsv.ConvertOptions(column_types=column_types,
                                         include_columns=list(columns) if columns else None))
        self.reader = pcsv.open_csv(*self.args[:1], read_options=self.args[1],
                                    parse_options=self.args[2], convert_options=self.args[3])
        self.schema = self.reader.schema

    def batches(self):
        reader, self.reader = self.reader, None
        if reader is None:
            import pyarrow.csv as pcsv
            reader = pcsv.open_csv(self.args[0], read_options=self.args[1],
                                   parse_options=self.args[2], convert_options=self.args[3])
        return iter(reader)


def _csv_arrow_type(pa, t, datetime):
    """The Arrow type pyarrow's CSV reader should parse a column as, for a given idv type
    (None for the types CSV spreads over several columns)."""
    from idv.arrow_types import item_arrow_type
    t = T.as_type(t)
    if isinstance(t, T.Vector) or t in (T.DateTimeOffset, T.RowId):
        return None
    return item_arrow_type(pa, t, datetime if datetime in ("ns", "ticks") else "us")


def _read_ahead(batches, prepare, depth=_READ_AHEAD):
    """(rows, prepare(batch, row0)) of each batch of an iterator, read and prepared in a thread
    up to `depth` batches ahead, so that reading (pyarrow's readers and idv's decoders release
    the GIL) overlaps with writing. An error there comes out here, where its batch would have;
    closing the generator stops the thread. `depth` 0: read and prepared here, in turn."""
    if depth == 0:
        row0 = 0
        for b in batches:
            yield b.num_rows, prepare(b, row0)
            row0 += b.num_rows
        return
    import queue
    import threading
    q = queue.Queue(depth)
    stop = threading.Event()
    end = object()

    def put(item):
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                pass
        return False

    def run():
        try:
            row0 = 0
            for b in batches:
                if not put(((b.num_rows, prepare(b, row0)), None)):
                    return
                row0 += b.num_rows
            put((end, None))
        except BaseException as e:      # handed to the consumer, raised there
            put((end, e))

    thread = threading.Thread(target=run, name="idv-convert-read", daemon=True)
    thread.start()
    try:
        while True:
            b, error = q.get()
            if b is end:
                if error is not None:
                    raise error
                return
            yield b
    finally:
        stop.set()
        thread.join()


def _open_source(path, fmt, columns, datetime, safe, types, batch_rows):
    if fmt == "idv":
        return _IdvSource(path, columns, datetime, safe)
    if fmt == "parquet":
        return _ParquetSource(path, columns, batch_rows)
    if fmt in ("feather", "arrow"):
        return _IpcSource(path, columns)
    return _CsvSource(path, columns, "\t" if fmt == "tsv" else ",", types, datetime)


# ---------------------------------------------------------------------------------------------
# sinks
# ---------------------------------------------------------------------------------------------

class _IdvSink:
    def __init__(self, dest, source, types, compression, rows_per_block, deflate):
        from idv.writer.arrow import ArrowToIdv
        from idv.writer import Writer
        plan = ArrowToIdv(source.schema, types)
        for i in plan.pending:        # key values of dictionary columns: one pass over them
            name = plan.fields[i].name
            for col in source.column_batches(name):
                plan.add_dictionaries(i, col)
        plan.finish_dictionaries()
        self.plan = plan
        self.writer = Writer(dest, plan.schema_pairs, metadata=plan.metadata,
                             compression=compression, rows_per_block=rows_per_block,
                             **deflate)

    def prepare(self, batch, row0):
        """A batch's columns as the writer takes them (strings checked as UTF-8, numbers as
        views): run in the reading thread, ahead of write."""
        return dict(self.plan.convert(batch, row0))

    def write(self, columns):
        self.writer.write_batch(columns)

    def close(self):
        self.writer.close()

    def abort(self):
        self.writer.abort()


class _FileSink:
    """A pyarrow writer on a temporary file that close() renames into place and abort()
    removes; `_handles()` are what must be closed first, in order."""

    writer = None

    def prepare(self, batch, row0):
        return batch

    def _create(self, dest, open_writer):
        """The temporary file beside `dest`, and `open_writer(its path)`; if that fails, the
        temporary file is removed."""
        self.out = AtomicPath(dest)
        try:
            open_writer(self.out.tmp)
        except BaseException:
            self.abort()
            raise

    def _handles(self):
        return [self.writer]

    def close(self):
        for h in self._handles():
            h.close()
        self.out.commit()

    def abort(self):
        for h in self._handles():
            try:
                if h is not None:
                    h.close()
            except Exception:
                pass
        self.out.abort()


# the codecs each format's writer takes besides 'deflate' (its default) and 'none'
_CODECS = {"idv": (), "parquet": ("snappy", "gzip", "brotli", "zstd", "lz4"),
           "feather": ("lz4", "zstd"), "arrow": ("lz4", "zstd"), "csv": (), "tsv": ()}


def check_compression(fmt, compression):
    """The codec name for `fmt`'s output ('deflate' for the format's default, 'none', or one
    of its own codecs that this pyarrow has); ValueError naming the choices before any file is
    made."""
    kind = compression_kind(compression, strict=False)
    text = fmt in ("csv", "tsv")
    if kind is not None and (not text or kind == NONE or compression == "deflate"):
        return compression
    codecs = _CODECS.get(fmt, ())
    if codecs:
        pa = _pa()
        codecs = tuple(c for c in codecs if pa.Codec.is_available(c))
    name = str(compression).lower()
    if name in codecs:
        return name
    if text:
        raise ValueError(f"{fmt.upper()} output is not compressed; leave compression at its "
                         f"default, not {compression!r}")
    raise ValueError(f"compression {compression!r} for {fmt} output: one of "
                     f"{', '.join(('deflate', 'none') + codecs)}")


# Parquet output writes a plain column without a dictionary when its values barely repeat: more
# than 90 % of its first _DICTIONARY_SAMPLE values distinct (ids, timestamps, continuous
# features). pyarrow tries a dictionary on every column and falls back to plain encoding once
# the dictionary passes 1 MiB, which for such columns costs time and size: on bench_read's
# numeric file 0.36 s against 0.27 s to write, and 53.2 MB against 49.3 MB.
_DICTIONARY_SAMPLE = 16384


def _leaf_counts(pa, at):
    """How many Parquet leaf columns an Arrow type becomes."""
    if pa.types.is_struct(at):
        return sum(_leaf_counts(pa, at.field(i).type) for i in range(at.num_fields))
    if pa.types.is_map(at):
        return _leaf_counts(pa, at.key_type) + _leaf_counts(pa, at.item_type)
    if pa.types.is_list(at) or pa.types.is_large_list(at) or pa.types.is_fixed_size_list(at):
        return _leaf_counts(pa, at.value_type)
    return 1


def _dictionary_columns(pa, pq, table, kwargs):
    """The Parquet leaf column paths to dictionary-encode for a file whose first row group is
    `table`: every leaf of nested and dictionary columns and of plain columns whose first
    values repeat (_DICTIONARY_SAMPLE): all but the nearly unique ones. A plain column's path
    is its name; with nested columns the paths come from an empty file written in memory."""
    import pyarrow.compute as pc
    parquet_schema = None
    if any(pa.types.is_nested(t) for t in table.schema.types):
        buf = pa.BufferOutputStream()
        pq.ParquetWriter(buf, table.schema, **kwargs).close()
        parquet_schema = pq.ParquetFile(pa.BufferReader(buf.getvalue())).schema
    paths, leaf = [], 0
    for field, column in zip(table.schema, table.columns):
        n = _leaf_counts(pa, field.type)
        use = True
        if not pa.types.is_nested(field.type) and not pa.types.is_dictionary(field.type):
            sample = column.slice(0, _DICTIONARY_SAMPLE)
            try:
                use = pc.count_distinct(sample).as_py() * 10 <= len(sample) * 9
            except pa.ArrowNotImplementedError:     # a type without the kernel: as pyarrow
                pass
        if use:
            paths += [field.name] if parquet_schema is None else \
                [parquet_schema.column(leaf + i).path for i in range(n)]
        leaf += n
    return paths


class _ParquetSink(_FileSink):
    """Batches gathered into row groups, each written in a thread of its own while the next
    one is read (pyarrow's writer releases the GIL): up to two row groups held at a time. The
    writer opens with the first row group, which tells which columns to dictionary-encode."""

    def __init__(self, dest, schema, compression):
        compression = check_compression("parquet", compression)
        kind = compression_kind(compression, strict=False)
        # idv's 'deflate' (the default) is the format's usual codec; other names are pyarrow's
        self.kwargs = {} if kind == DEFLATE else {"compression": "none" if kind == NONE
                                                  else compression}
        self.schema = schema
        self.buffer, self.rows, self.bytes = [], 0, 0
        self.pending = None
        self._create(dest, lambda tmp: None)

    def _open_writer(self, first):
        import pyarrow.parquet as pq
        pa = _pa()
        dictionary = _dictionary_columns(pa, pq, first, self.kwargs)
        self.writer = pq.ParquetWriter(self.out.tmp, self.schema, use_dictionary=dictionary,
                                       **self.kwargs)

    def _flush(self):
        if self.buffer:
            table = _pa().Table.from_batches(self.buffer)
            self.buffer, self.rows, self.bytes = [], 0, 0
            self._written()
            if self.writer is None:
                self._open_writer(table)
            self.pending = _threads.pool("parquet-write", 1).submit(self._write_group, table)

    def _write_group(self, table):
        self.writer.write_table(table, row_group_size=max(1, table.num_rows))
        self.out.start_writeback()

    def _written(self):
        """Wait for the row group being written (its error raised here)."""
        pending, self.pending = self.pending, None
        if pending is not None:
            pending.result()

    def write(self, batch):
        self.buffer.append(batch)
        self.rows += batch.num_rows
        self.bytes += batch.nbytes
        if self.rows >= _ROW_GROUP_ROWS or self.bytes >= _ROW_GROUP_BYTES:
            self._flush()

    def close(self):
        self._flush()
        self._written()
        if self.writer is None:         # no rows: an empty file of the schema
            self._open_writer(self.schema.empty_table())
        super().close()

    def abort(self):
        try:
            self._written()
        except Exception:
            pass
        super().abort()


class _IpcSink(_FileSink):
    def __init__(self, dest, schema, compression):
        pa = _pa()
        compression = check_compression("feather", compression)
        kind = compression_kind(compression, strict=False)
        if kind == DEFLATE:
            compression = "lz4" if pa.Codec.is_available("lz4") else None
        elif kind == NONE:
            compression = None
        self.sink = None

        def open_writer(tmp):
            self.sink = pa.OSFile(tmp, "wb")
            self.writer = pa.ipc.new_file(self.sink, schema, options=pa.ipc.IpcWriteOptions(
                compression=compression))
        self._create(dest, open_writer)

    def write(self, batch):
        self.writer.write_batch(batch)

    def _handles(self):
        return [self.writer, self.sink]


class _CsvSink(_FileSink):
    """CSV holds flat columns: fixed-size vectors become one column per slot (named as
    to_pandas names them), struct fields ``name.field`` columns, dictionaries their values;
    variable-size vectors are refused (before anything is written)."""

    def __init__(self, dest, schema, delimiter, compression):
        import pyarrow.csv as pcsv
        check_compression("csv", compression)
        pa = _pa()
        self.getters = []        # (name, fn(batch) -> array)
        for i, field in enumerate(schema):
            self._plan(pa, field.name, field.type, field.metadata or {},
                       lambda b, i=i: b.column(i))
        self.schema = pa.schema([(n, t) for n, t, _ in self.getters])

        def open_writer(tmp):
            self.writer = pcsv.CSVWriter(tmp, self.schema,
                                         write_options=pcsv.WriteOptions(delimiter=delimiter))
        self._create(dest, open_writer)

    def _plan(self, pa, name, at, meta, get):
        import pyarrow.compute as pc

        from idv.arrow_types import METADATA_KEY, TYPE_KEY
        if isinstance(at, pa.BaseExtensionType):
            self._plan(pa, name, at.storage_type, meta, lambda b: _storage_of(get(b)))
            return
        if pa.types.is_fixed_size_list(at):
            dims, inner = [at.list_size], at.value_type
            while pa.types.is_fixed_size_list(inner):
                dims.append(inner.list_size)
                inner = inner.value_type
            size = int(np.prod(dims))
            slot_names = None
            if TYPE_KEY in meta:
                try:
                    t = parse_type(meta[TYPE_KEY].decode())
                    if isinstance(t, T.Vector) and t.size == size:
                        dims = list(t.dims)
                except ValueError:
                    pass
            if METADATA_KEY in meta:
                from idv.annotations import metadata_from_json
                try:
                    spec = metadata_from_json(meta[METADATA_KEY].decode())
                    if "SlotNames" in spec:
                        slot_names = spec["SlotNames"][1]
                except (ValueError, KeyError):
                    pass
            labels = slot_labels(name, T.Vector(T.Single, *dims), slot_names)

            def flat(b, get=get):
                arr = get(b)
                if isinstance(arr, pa.ChunkedArray):
                    arr = arr.combine_chunks()
                while pa.types.is_fixed_size_list(arr.type):
                    arr = arr.flatten()
                return arr
            for j, label in enumerate(labels):
                self._plan(pa, label, inner, {},
                           lambda b, j=j, flat=flat: pc.take(
                               flat(b), pa.array(np.arange(len(b)) * size + j)
                               if len(b) else pa.array([], pa.int64())))
            return
        if pa.types.is_list(at) or pa.types.is_large_list(at) \
                or getattr(pa.types, "is_list_view", lambda _: False)(at):
            raise ValueError(f"column {name!r} ({at}): CSV cannot hold variable-size vectors; "
                             f"convert to Parquet or Feather, or leave the column out "
                             f"(columns=...)")
        if pa.types.is_struct(at):
            for k in range(at.num_fields):
                child = at.field(k)
                self._plan(pa, f"{name}.{child.name}", child.type, {},
                           lambda b, k=k: _struct_child(get(b), k))
            return
        if pa.types.is_dictionary(at):
            self._plan(pa, name, at.value_type, {},
                       lambda b: _decoded(get(b)))
            return
        self.getters.append((name, at, get))

    def write(self, batch):
        pa = _pa()
        arrays = [get(batch) for _, _, get in self.getters]
        arrays = [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays]
        self.writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=self.schema))


def _storage_of(arr):
    pa = _pa()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr.storage


def _struct_child(arr, k):
    pa = _pa()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr.flatten()[k]


def _decoded(arr):
    pa = _pa()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr.dictionary_decode()


def _open_sink(dest, fmt, source, types, compression, rows_per_block, deflate):
    if fmt == "idv":
        return _IdvSink(dest, source, types, compression, rows_per_block, deflate)
    if fmt == "parquet":
        return _ParquetSink(dest, source.schema, compression)
    if fmt in ("feather", "arrow"):
        return _IpcSink(dest, source.schema, compression)
    return _CsvSink(dest, source.schema, "\t" if fmt == "tsv" else ",", compression)


# ---------------------------------------------------------------------------------------------
# idv -> idv
# ---------------------------------------------------------------------------------------------

def _is_dataset(src):
    from idv.dataset import Dataset
    return isinstance(src, Dataset)


def _dataset_columns(ds, columns):
    """The names of a dataset's columns to convert: `columns` (names, or indices among the
    dataset's columns), default the readable ones; the files' annotations of them must agree
    (one output holds one set: KeyValues, SlotNames...), else ValueError naming the file."""
    first = ds.open_file(0)
    known = ds.column_names
    if columns is None:
        names = [n for n in known if first[n].readable]
    else:
        names = []
        for c in [columns] if isinstance(columns, (str, int, np.integer)) else columns:
            if isinstance(c, (int, np.integer)) and -len(known) <= int(c) < len(known):
                c = known[int(c)]
            if c not in known:
                raise KeyError(f"no column {c!r}; columns: {known}")
            names.append(c)
    ref = {n: metadata_spec(first[n]) for n in names}
    for i in range(1, len(ds.files)):
        f = ds.open_file(i)
        for n in names:
            kind = _differing_annotation(ref[n], metadata_spec(f[n]))
            if kind is not None:
                raise ValueError(f"{ds.files[i].path}: column {n!r} has another {kind} than "
                                 f"{ds.files[0].path}; one output holds one set of "
                                 f"annotations: convert such files one by one, or leave the "
                                 f"column out")
    return names


def _differing_annotation(a, b):
    """The first annotation kind whose type or value differs between two metadata specs."""
    for kind in list(a) + [k for k in b if k not in a]:
        if kind not in a or kind not in b or a[kind][0] != b[kind][0]:
            return kind
        x, y = np.asarray(a[kind][1]), np.asarray(b[kind][1])
        same = x.shape == y.shape and x.dtype == y.dtype and (
            x.tolist() == y.tolist() if x.dtype.kind == "O" else x.tobytes() == y.tobytes())
        if not same:
            return kind
    return None


@contextlib.contextmanager
def _idv_parts(src, columns):
    """An .idv source as (its columns, rows, an iterator of (file, its columns) in row order):
    one file (opened here, closed on exit), or an idv.Dataset's files (matched by name)."""
    if not _is_dataset(src):
        with opened(src) as f:
            cols = select_columns(f, columns)
            yield cols, f.num_rows, iter([(f, cols)])
        return
    names = _dataset_columns(src, columns)
    files = (src.open_file(i) for i in range(len(src.files)))
    yield ([src.open_file(0)[n] for n in names], src.num_rows,
           ((f, [f[n] for n in names]) for f in files))


def _idv_to_idv(src, dst, columns, compression, rows_per_block, progress, deflate):
    from idv.writer import Writer
    with _idv_parts(src, columns) as (cols, total, parts_of_files):
        schema = [(c.name, c.type) for c in cols]
        metadata = {c.name: metadata_spec(c) for c in cols}
        if progress is not None:
            progress(0, total)
        with Writer(dst, schema, metadata=metadata, compression=compression,
                    rows_per_block=rows_per_block, **deflate) as w:
            done = 0
            for f, fcols in parts_of_files:
                for a, b, parts in iter_row_blocks(f, fcols):
                    w.write_batch({c.name: p for c, p in zip(cols, parts)})
                    if progress is not None:
                        progress(done + b, total)
                done += f.num_rows
        return total


def _idv_to_text(src, dst, columns, delimiter, compression, progress):
    """.idv -> CSV / TSV through idv.delimited, the writer of ``idv cat --format csv`` too."""
    import io

    from idv.delimited import DelimitedWriter
    check_compression("csv" if delimiter == "," else "tsv", compression)
    with _idv_parts(src, columns) as (cols, total, parts_of_files):
        if progress is not None:
            progress(0, total)
        out = AtomicPath(dst)
        try:
            with out.open() as raw:
                text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
                w = DelimitedWriter(text, cols, delimiter)
                done = 0
                for f, fcols in parts_of_files:
                    for a, b, parts in iter_row_blocks(f, fcols):
                        w.write(parts)
                        if progress is not None:
                            progress(done + b, total)
                    done += f.num_rows
                text.flush()
                text.detach()
            out.commit()
        except BaseException:
            out.abort()
            raise
        return total


# ---------------------------------------------------------------------------------------------
# convert
# ---------------------------------------------------------------------------------------------

def _local_paths(src):
    """The local files `src` reads: its path, or a local dataset's files."""
    if _is_dataset(src):
        return [] if src.filesystem is not None else [os.fspath(f.path) for f in src.files]
    return [os.fspath(src)] if isinstance(src, (str, os.PathLike)) else []


def convert(src, dst, *, to=None, columns=None, compression="deflate", rows_per_block=None,
            progress=None, datetime="auto", safe=True, types=None, source_format=None,
            level=None, backend=None):
    """Convert ``src`` into ``dst``, streaming: .idv <-> Parquet, CSV / TSV, Feather / Arrow.

    Formats come from the extensions (``.idv``, ``.parquet`` / ``.pq``, ``.csv``, ``.tsv`` /
    ``.tab``, ``.feather``, ``.arrow`` / ``.ipc``) or from ``to=`` (and ``source_format=``).
    Returns the number of rows written. ``src`` may also be an ``idv.dataset(...)``: its files'
    rows end to end into one output (e.g. one .idv that ML.NET loads), streamed file by file;
    the files' annotations of the columns converted must agree.

    * ``columns``: the columns to convert (names; for .idv sources also indices); default all
      (for .idv: the readable visible ones, as IdvFile.read()).
    * ``compression``: for .idv output ``"deflate"`` (default) or ``"none"``; for Parquet and
      Feather it is handed to pyarrow (``"zstd"``, ``"snappy"``, ``"lz4"``, ``"none"`` ...),
      the default meaning the format's usual one (Parquet: snappy, Feather: lz4). CSV is not
      compressed. Parquet output uses no dictionary for columns of nearly unique values
      (over 90 % of the first 16,384 distinct), as pyarrow would after trying one.
    * ``rows_per_block``: rows per block of an .idv output (default: ML.NET's rule, 8192).
    * ``level`` / ``backend``: the DEFLATE level and library of an .idv output. The default
      puts speed first: ISA-L at level 1 where installed (``pip install idv[fast]``), else
      libdeflate's or zlib's level 1; files are 10-15 % larger than at ML.NET's level 6 and
      still smaller than snappy Parquet. ``level=6`` gives idv.write's default (smaller
      files, several times slower); ``backend="zlib", level=6`` gives ML.NET's own bytes.
      A backend without a level: its fast level.
    * ``progress``: called as ``progress(rows_done, rows_total)`` at the start and after each
      block or batch; ``rows_total`` is None when unknown (CSV input).
    * ``datetime`` / ``safe``: time units of the Arrow side, as in idv.to_arrow: ``"auto"``
      (default: per column the finest exact unit, else microseconds floored with an
      IdvWarning counting the values changed), ``"exact"`` (refuses instead), ``"us"``,
      ``"ns"`` or ``"ticks"`` (with ``"us"``, sub-microsecond ticks raise unless
      ``safe=False``).
    * ``types``: idv types for some columns of a non-.idv source (overriding the types
      inferred from Arrow; for CSV they also tell pyarrow how to parse the column).

    The .idv side keeps ML.NET's types and metadata in the Arrow field metadata, so .idv ->
    Parquet / Feather -> .idv gives back the same types, annotations and values. CSV keeps
    values only, written from an .idv as ``idv cat --format csv`` writes them (idv.delimited:
    one column per slot of a fixed-size vector, a JSON array per variable-size one, keys as
    their KeyValues, times in .NET's ISO forms exact to the tick; no pyarrow needed); types
    are inferred again by pyarrow's CSV reader when read back.
    """
    src_fmt = _format_of(src, source_format, "source")
    dst_fmt = _format_of(dst, to, "destination")
    if dst_fmt != "idv" and (level is not None or backend is not None):
        raise ValueError(f"level= and backend= are for .idv output, not {dst_fmt}")
    backend, level = fast_deflate(level, backend) if dst_fmt == "idv" else (None, None)
    deflate = {"level": level, "backend": backend}
    check_time_mode(datetime, TIME_UNITS)
    for path in _local_paths(src):
        if os.path.exists(os.fspath(dst)) and os.path.exists(path) \
                and os.path.samefile(path, os.fspath(dst)):
            raise ValueError(f"source and destination are the same file: {path!r}")
    if src_fmt == "idv" and dst_fmt == "idv":
        if types:
            raise ValueError("types= is for non-.idv sources (an .idv keeps its types)")
        return _idv_to_idv(src, dst, columns, compression, rows_per_block, progress, deflate)
    if types and src_fmt == "idv":
        raise ValueError("types= is for non-.idv sources (an .idv keeps its types)")
    if src_fmt == "idv" and dst_fmt in ("csv", "tsv"):
        return _idv_to_text(src, dst, columns, "," if dst_fmt == "csv" else "\t", compression,
                            progress)
    _pa()
    source = _open_source(src, src_fmt, columns, datetime, safe, types,
                          rows_per_block or _BATCH_ROWS)
    try:
        sink = _open_sink(dst, dst_fmt, source, types, compression, rows_per_block, deflate)
        try:
            total = source.total
            done = 0
            if progress is not None:
                progress(0, total)
            # an .idv source decodes in threads of its own, into a sink that gathers row
            # groups: reading ahead would only hold more
            batches = _read_ahead(source.batches(), sink.prepare,
                                  0 if src_fmt == "idv" else _READ_AHEAD)
            try:
                for rows, batch in batches:
                    sink.write(batch)
                    done += rows
                    if progress is not None:
                        progress(done, total)
            finally:
                batches.close()     # the reading thread stops before the source closes
            sink.close()
        except BaseException:
            sink.abort()
            raise
    finally:
        source.close()
    return done
