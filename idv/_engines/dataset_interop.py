"""A dataset's rows in the Python data stack: an Arrow table, a record batch stream (and
the Arrow C stream polars and DuckDB read), a pandas frame, each over every file in turn with
one unit for each time column (idv._reader.time_units). Dataset inherits these methods; they read
through its own (the files it holds open, its memory check, its whole reads of many files).
"""
from __future__ import annotations

from idv import _docs
from idv._store import many_files as batch
from idv._resources import budget
from idv._reader.dataset_files import BATCH_FILES
from idv.errors import require

# decoded bytes of the small files the stream reads together, in one batched read, at most (a
# larger file is streamed by itself, a window of blocks at a time)
GROUP_BYTES = 16 << 20


class DatasetInterop:
    """The Arrow and pandas methods of idv.Dataset."""

    @budget.reads
    @_docs.fill
    def to_pandas(self, columns=None, *, vectors="expand", datetime="auto", safe=True):
        """A pandas.DataFrame of every file's rows (idv.to_pandas per file, joined with a
        RangeIndex).

        Parameters
        ----------
        {columns}
        {vectors}
        {datetime}
            Default ``'auto'``; one unit for the whole dataset.
        {safe}
        """
        from idv._interop.pandas import frame, text_as_arrow, to_pandas
        pd = require("pandas", "converting to pandas", "idv[pandas]")
        names = self.resolve_columns(columns)
        self._check_memory(names, [(i, None) for i in range(len(self.files))], joined=True)
        unit, safe = self.time_unit(names, datetime, safe)
        if names and len(self.files) > 1 and all(self._whole(n) or self._text(n)
                                                 for n in names):
            got = self._whole_values(names, 0, len(self.files), text_as_arrow())
            with self.using(0) as first:
                return frame(first, names, vectors=vectors, datetime=unit, safe=safe,
                             warn_wide=True, values={id(first[n]): got[n] for n in names})
        frames = []
        for i in range(len(self.files)):
            with self.using(i) as f:
                frames.append(to_pandas(f, names, vectors=vectors, datetime=unit, safe=safe))
        return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]

    @budget.reads
    @_docs.fill
    def to_arrow(self, columns=None, *, datetime="auto", safe=True,
                 filter=None):  # noqa: A002 - pyarrow's and pandas' name
        """A pyarrow.Table of every file's rows (idv.to_arrow per file, the first file's
        schema).

        Parameters
        ----------
        {columns}
        {datetime}
            Default ``'auto'``; one unit for the whole dataset.
        {safe}
        {filter}
        """
        from idv._interop.arrow import to_arrow
        from idv._values.arrow_types import import_pyarrow
        pa = import_pyarrow()
        names = self.resolve_columns(columns)
        self._check_memory(names, [(i, None) for i in range(len(self.files))], joined=False)
        unit, safe = self.time_unit(names, datetime, safe)
        # numbers read as one array each (the batched whole read), text as each file's
        # blocks; keys whose key values differ (each file's name its keys) file by file
        whole = [] if filter is not None else [n for n in names if self._in_step(n)]
        rest = [n for n in names if n not in whole]
        got = {}
        if whole:
            values = self._whole_values(whole, 0, len(self.files))
            got = dict(zip(whole, self._arrow_columns(whole, values, unit, safe)))
        if rest:
            tables = []
            for i in range(len(self.files)):
                with self.using(i) as f:
                    tables.append(to_arrow(f, rest, datetime=unit, safe=safe, filter=filter))
            schema = tables[0].schema
            table = pa.concat_tables([t if t.schema.equals(schema, check_metadata=True)
                                      else pa.Table.from_arrays(t.columns, schema=schema)
                                      for t in tables])
            if not whole:
                return table
            got.update((n, (schema.field(n), table.column(n))) for n in rest)
        return pa.Table.from_arrays([got[n][1] for n in names],
                                    schema=pa.schema([got[n][0] for n in names]))

    @_docs.fill
    def record_batch_reader(self, columns=None, *, datetime="auto", safe=True,
                            batch_size=None, filter=None):  # noqa: A002 - pyarrow's name
        """A pyarrow.RecordBatchReader over every file in turn, as idv.record_batch_reader
        gives each file's; a batch never spans two files. A large file is decoded a window at
        a time; small files of numbers, text and keys of the same key values in every file (no
        times) are read together, up to GROUP_BYTES decoded at a time (_whole_values).

        Parameters
        ----------
        columns, datetime, safe, filter
            As to_arrow.
        {batch_size}
        """
        from idv._interop.arrow import arrow_schema, record_batch_reader, whole_batches
        from idv._values.arrow_types import import_pyarrow
        pa = import_pyarrow()
        names = self.resolve_columns(columns)
        unit, safe = self.time_unit(names, datetime, safe)
        with self.using(0) as first:
            schema = arrow_schema(first, names, datetime=unit)
        together = filter is None and bool(names) and all(self._in_step(n) for n in names)

        def one(i):           # a file by itself, a window of its blocks at a time
            with self.using(i) as f:
                for b in record_batch_reader(f, names, datetime=unit, safe=safe,
                                             batch_size=batch_size, filter=filter):
                    yield b if b.schema.equals(schema, check_metadata=True) else \
                        pa.RecordBatch.from_arrays(b.columns, schema=schema)

        def group(i0, i1):    # small files read together, their batches cut from the whole
            base = self.files[i0].start
            got = self._whole_values(names, i0, i1)
            arrays = [a for _, a in self._arrow_columns(names, got, unit, safe)]
            cuts = []
            for e in self.files[i0:i1]:
                step = batch_size or e.rows_per_block[names[0]] or e.num_rows
                cuts += [(e.start - base + a, min(step, e.num_rows - a))
                         for a in range(0, e.num_rows, step)]
            return whole_batches(arrays, schema, cuts)

        @budget.reads
        def batches(ds):
            for i0, i1 in (self._groups(names) if together else
                           ((i, None) for i in range(len(self.files)))):
                yield from one(i0) if i1 is None else group(i0, i1)
        return pa.RecordBatchReader.from_batches(schema, batches(self))

    def _arrow_columns(self, names, values, unit, safe):
        """[(field, ChunkedArray)] of columns `names` holding `values` (_whole_values), typed
        and annotated as the first file's."""
        from idv._interop.arrow import whole_columns
        with self.using(0) as first:
            return whole_columns([first[n] for n in names], [values[n] for n in names],
                                 datetime=unit, safe=safe)

    def _groups(self, names):
        """(first, stop) of each run of files the stream reads together (decoding at most
        GROUP_BYTES of columns `names` and BATCH_FILES files), (i, None) for a file streamed
        by itself."""
        i0, total = 0, 0
        for i, e in enumerate(self.files):
            size = sum(self._decoded_bytes(i, n, slice(0, e.num_rows)) for n in names)
            if i > i0 and (total + size > GROUP_BYTES or i - i0 == BATCH_FILES):
                yield i0, i
                i0, total = i, 0
            if size > GROUP_BYTES:
                yield i, None
                i0 = i + 1
                continue
            total += size
        if i0 < len(self.files):
            yield i0, len(self.files)

    @_docs.fill
    def iter_batches(self, columns=None, *, batch_size=None, **kwargs):
        """pyarrow.RecordBatches of every file in turn.

        Parameters
        ----------
        {columns}
        {batch_size}
        **kwargs
            The options of record_batch_reader.
        """
        return iter(self.record_batch_reader(columns, batch_size=batch_size, **kwargs))

    def __arrow_c_stream__(self, requested_schema=None):
        """The Arrow PyCapsule stream of the dataset, file by file and block by block:
        ``pa.table(ds)``, ``pl.DataFrame(ds)`` and DuckDB read it directly."""
        return self.record_batch_reader().__arrow_c_stream__(requested_schema)


def text_of_files(batches):
    """The rows of Text columns of many files end to end, as one ChunkedArray on their
    blocks' UTF-8. `batches` yields lists of (store, column), one a file, their files open
    until the next list is asked for: the blocks of a list's files in memory are inflated
    together (idv._store.many_files.text_blocks), the others' each in turn (text_array)."""
    from idv._interop.arrow import text_array, text_reader
    from idv._values.arrow_types import import_pyarrow
    pa = import_pyarrow()
    chunks, conv = [], None
    for pieces in batches:
        if conv is None:
            conv = text_reader(pieces[0][1])
        together = [batch.text_batchable(*p) for p in pieces]
        spans = iter(batch.text_blocks([p for p, ok in zip(pieces, together) if ok],
                                       pieces[0][0].threads) if any(together) else ())
        for (_, col), ok in zip(pieces, together):
            chunks.extend(map(conv.text_block_array, next(spans)) if ok
                          else text_array(col).chunks)
    return pa.chunked_array(chunks, conv.arrow_type)
