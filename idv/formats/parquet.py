"""Parquet in idv.convert: the source (row groups read as record batches) and the sink
(batches gathered into row groups, each written in a thread while the next is read, plain
encoding for nearly unique columns).
"""
from __future__ import annotations

from idv._resources import threads as _threads
from idv.compression import DEFLATE, NONE, kind as compression_kind
from idv._values.arrow_types import empty_table
from idv.formats._base import (FileSink, Source, check_codecs, column_names, import_pa,
                               refuse_rows_without_columns, selected_schema)

# the codecs pyarrow's Parquet writer takes besides 'deflate' (the format's usual one, snappy,
# first) and 'none'
CODECS = ("snappy", "gzip", "brotli", "zstd", "lz4")

# Parquet row groups: batches are gathered up to this many rows or bytes before one is written
# (in a thread, while the next is gathered). 8 MiB: the first is written early, so reading and
# writing overlap more (the text benchmark file's first group is a third of it, not all);
# smaller ones grow the file (bench_read's numeric file: 49.3 MB in 64 MiB groups, 49.9 in 16,
# 50.5 in 8, 51.6 in 4) and, below 8 MiB, slow the writing.
_ROW_GROUP_ROWS = 1 << 20
_ROW_GROUP_BYTES = 8 << 20


# a batch read from a Parquet file grows, in whole multiples of the options' batch_rows, up to
# a row group while its share of the row group's bytes (as the file's metadata gives them,
# encoded: Arrow's may be a few times more for dictionary-encoded text) stays within this:
# pyarrow's reader and the writer's pipeline pay a little per batch
_BATCH_BYTES = 16 << 20
# ... and while the file still makes this many batches: the first is read with nothing to
# compress yet, the last compressed with nothing left to read (bench_read's files, 64Ki /
# 128Ki / 256Ki / 512Ki rows a batch: numeric, 2M rows, 533 / 507 / 460 / 419 ms; text, 1M
# short strings, 178 / 139 / 136 / 152, and 198 in 720,896-row batches)
_BATCHES = 4


# a column chunk is read _READ_BUFFER bytes at a time as pyarrow's threads decode it, rather than
# whole before (a row group's chunks then take one thread ~20 ms of copying before any decode
# starts, on the scale check's data): Parquet -> .idv 3-5 % faster in the median of 12-24
# alternated runs on that data and bench_read's (best-of-run figures within the noise)
_READ_BUFFER = 1 << 20


class ParquetSource(Source):
    """A Parquet file's row groups as record batches of `batch_rows` rows (rows_per_block's,
    where given; else a multiple of 65,536: _batch_rows), one row group's column chunks read
    at a time."""

    def __init__(self, path, options):
        import pyarrow.parquet as pq
        # pre_buffer would read ahead the column chunks of every row group: one at a time
        self.pf = pq.ParquetFile(path, pre_buffer=False, buffer_size=_READ_BUFFER)
        full = self.pf.schema_arrow
        self.columns = column_names(full, options.columns)
        self.schema = selected_schema(import_pa(), full, self.columns)
        self.total = self.pf.metadata.num_rows
        # rows_per_block given: batches of that many rows, as for every source
        self.batch_rows = options.batch_rows if options.rows_per_block else \
            _batch_rows(self.pf.metadata, options.batch_rows)

    def batches(self):
        return self.pf.iter_batches(batch_size=self.batch_rows, columns=self.columns)

    def column_batches(self, name):
        for b in self.pf.iter_batches(batch_size=self.batch_rows, columns=[name]):
            yield b.column(0)

    def close(self):
        if hasattr(self.pf, "close"):
            self.pf.close()


def _batch_rows(meta, rows):
    """Rows per batch of a Parquet file (`meta`: its metadata): `rows` times the most that keeps
    a batch within the largest row group, within _BATCH_BYTES of its bytes a row and within a
    _BATCHES-th of its rows; never fewer than `rows`."""
    groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
    most = min(max((g.num_rows for g in groups), default=0), meta.num_rows // _BATCHES)
    per_row = max((g.total_byte_size / g.num_rows for g in groups if g.num_rows), default=0)
    times = most // rows
    if per_row:
        times = min(times, int(_BATCH_BYTES // (per_row * rows)))
    return rows * max(1, times)


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
        # the types alone: field metadata (a wide vector's SlotNames: megabytes) would only
        # make the file's footer too large for its reader to parse back
        bare = pa.schema([pa.field(f.name, f.type, f.nullable) for f in table.schema])
        buf = pa.BufferOutputStream()
        pq.ParquetWriter(buf, bare, **kwargs).close()
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


class ParquetSink(FileSink):
    """Batches gathered into row groups, each written in a thread of its own while the next
    one is read (pyarrow's writer releases the GIL): up to two row groups held at a time. The
    writer opens with the first row group, which tells which columns to dictionary-encode."""

    def __init__(self, dest, source, options):
        compression = check_codecs(options.format, CODECS, options.compression)
        kind = compression_kind(compression, strict=False)
        # idv's 'deflate' (the default) is the format's usual codec; other names are pyarrow's
        self.kwargs = {} if kind == DEFLATE else {"compression": "none" if kind == NONE
                                                  else compression}
        self.schema = source.schema
        self.buffer, self.rows, self.bytes = [], 0, 0
        self.pending = None
        self._create(dest, lambda tmp: None)

    def _open_writer(self, first):
        import pyarrow.parquet as pq
        pa = import_pa()
        dictionary = _dictionary_columns(pa, pq, first, self.kwargs)
        self.writer = pq.ParquetWriter(self.out.tmp, self.schema, use_dictionary=dictionary,
                                       **self.kwargs)

    def _flush(self):
        if self.buffer:
            table = import_pa().Table.from_batches(self.buffer)
            self.buffer, self.rows, self.bytes = [], 0, 0
            self._written()
            if self.writer is None:
                self._open_writer(table)
            self.pending = _threads.pool("parquet-write", 1).submit(self._write_group, table)

    def _write_group(self, table):
        self.writer.write_table(table, row_group_size=max(1, table.num_rows))
        self.out.start_writeback()

    def _written(self):
        """Wait for the row group being written (its error raised here). Interrupted (Ctrl-C),
        it is still pending, so that abort() waits for it before the writer closes: the
        thread writing with a closed writer crashed the process."""
        pending = self.pending
        if pending is not None:
            try:
                pending.result()
            finally:
                if pending.done():
                    self.pending = None

    def write(self, batch):
        if not batch.num_columns:       # pyarrow would write no row
            refuse_rows_without_columns("parquet", batch.num_rows)
        self.buffer.append(batch)
        self.rows += batch.num_rows
        self.bytes += batch.nbytes
        if self.rows >= _ROW_GROUP_ROWS or self.bytes >= _ROW_GROUP_BYTES:
            self._flush()

    def close(self):
        self._flush()
        self._written()
        if self.writer is None:         # no rows: an empty file of the schema
            self._open_writer(empty_table(import_pa(), self.schema))
        super().close()

    def abort(self):
        try:
            self._written()
        except Exception:
            pass
        super().abort()
