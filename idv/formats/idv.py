""".idv in idv.convert: the source (a file or an idv.Dataset, as Arrow record batches), the
sink (Arrow batches into idv.Writer), and the two paths that never leave numpy: .idv -> .idv,
and .idv -> text (CSV, TSV, JSON Lines through idv._interop.delimited, the writers of ``idv cat``).
"""
from __future__ import annotations

import contextlib
import io

import numpy as np

from idv import _codecs, types as T
from idv._scan import scan
from idv._reader import selection
from idv._values.metadata import metadata_spec
from idv.compression import kind as compression_kind
from idv.errors import MissingDependencyError
from idv._reader.reader import opened
from idv._reader.selection import file_columns
from idv.formats._base import Source, check_codecs, is_dataset, refuse_rows_without_columns
from idv._storage.sink import AtomicPath
from idv._values.vectors import Ragged

# an .idv output takes 'deflate' and 'none' only
CODECS = ()


class IdvSource(Source):
    """An .idv file (opened here) or the caller's idv.Dataset (its files in turn, left open),
    through idv._interop.arrow.record_batch_reader."""

    # it decodes in threads of its own, into a sink that gathers row groups: reading ahead
    # would only hold more
    read_ahead = 0

    def __init__(self, path, options):
        from idv._interop.arrow import record_batch_reader
        from idv._reader.reader import open as idv_open
        columns, datetime, safe = options.columns, options.datetime, options.safe
        if is_dataset(path):        # the caller's dataset: its files in turn, left open
            self.f = None
            names = _dataset_columns(path, columns)
            self.reader = path.record_batch_reader(names, datetime=datetime, safe=safe)
            self.schema, self.total = self.reader.schema, path.num_rows
            return
        self.f = idv_open(path, **options.opening)
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


class IdvSink:
    """Arrow batches into idv.Writer, their types and annotations from the Arrow schema (and
    `types=`); the KeyValues of dictionary columns are collected first, in one pass."""

    def __init__(self, dest, source, options):
        from idv._writer.arrow import ArrowToIdv
        from idv._writer import Writer
        types = {**(source.types or {}), **(options.types or {})}
        plan = ArrowToIdv(source.schema, types or None, options.missing_text)
        for i in plan.pending:        # key values of dictionary columns: one pass over them
            name = plan.fields[i].name
            for col in source.column_batches(name):
                plan.add_dictionaries(i, col)
        plan.finish_dictionaries()
        self.plan = plan
        self.writer = Writer(dest, plan.schema_pairs, metadata=plan.metadata,
                             compression=options.compression,
                             rows_per_block=options.rows_per_block, **options.deflate)

    def prepare(self, batch, row0):
        """A batch's columns as the writer takes them (strings checked as UTF-8, numbers as
        views; (name, values) pairs in schema order, names repeated or not): run in the
        reading thread, ahead of write."""
        return self.plan.convert(batch, row0)

    def write(self, columns):
        self.writer.write_batch(columns)

    def close(self):
        self.writer.close()

    def abort(self):
        self.writer.abort()


# ---------------------------------------------------------------------------------------------
# a dataset's columns
# ---------------------------------------------------------------------------------------------

def _dataset_columns(ds, columns):
    """The names of a dataset's columns to convert: `columns` (names, or indices among the
    dataset's columns), default the readable ones; the files' annotations of them must agree
    (one output holds one set: KeyValues, SlotNames...), else ValueError naming the file."""
    first = ds.open_file(0)
    if columns is None:
        names = [n for n in ds.column_names if first[n].readable]
    else:
        names = selection.names_of(ds.column_names, columns, where=" in the dataset")
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


# ---------------------------------------------------------------------------------------------
# .idv -> .idv and .idv -> text, in numpy, on the scan
# ---------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _idv_columns(src, columns, opening):
    """An .idv source as (the Columns that stand for it, the source and columns idv._scan.scan
    takes): one file (opened here with idv.open's options `opening`, closed on exit: its
    Columns), or an idv.Dataset (its first file's Columns, and their names, looked up in each
    file)."""
    if not is_dataset(src):
        with opened(src, **opening) as f:
            cols = file_columns(f, columns)
            yield cols, f, cols
        return
    names = _dataset_columns(src, columns)
    yield [src.open_file(0)[n] for n in names], src, names


def _batches(source, scanned, total, progress, how):
    """The source's Batches (idv._scan.scan: read()'s forms, block by block; `how`: the scan's
    options), `progress` told of each (rows done, rows in all)."""
    if progress is not None:
        progress(0, total)
    for batch in scan.scan(source, scanned, **how):
        yield batch
        if progress is not None:
            progress(batch.row0 + batch.stop - batch.start, total)


@contextlib.contextmanager
def _scanned(src, options, progress, **how):
    """(the Columns, the source's rows, its Batches: _batches) for the time of the block."""
    with _idv_columns(src, options.columns, options.opening) as (cols, source, scanned):
        batches = _batches(source, scanned, source.num_rows, progress, how)
        with contextlib.closing(batches):
            yield cols, source.num_rows, batches


def _kept(source, cols, shifts, options):
    """The columns whose blocks .idv -> .idv copies as they are stored, not compressed again:
    those of a file in memory (not a dataset, whose files' blocks would not line up, nor a
    remote file, whose blocks would be fetched twice) stored as the output stores them (the
    same codec, parameters and compression), when the output keeps the file's blocks (no
    level= or backend=; rows_per_block the file's own)."""
    if not options.keep_blocks or is_dataset(source) or not cols or not source.num_rows \
            or not source.store.in_memory:
        return []
    if options.rows_per_block not in (None, cols[0].rows_per_block):
        return []
    kind = compression_kind(options.compression)
    return [c for c, shift in zip(cols, shifts)
            if shift is None and c.readable and c.blocks.compression == kind
            and (c.codec_name, c.codec_params) == _codecs.codec_of(c.type)]


def _reader(col):
    """How idv_to_idv reads a column: Text into Arrow on its blocks' UTF-8 where pyarrow is
    installed (the writer takes it without str objects), the rest in read()'s forms."""
    if col.type is T.Text:
        from idv._interop.arrow_columns import text_reader
        try:
            return text_reader(col)
        except MissingDependencyError:
            pass
    return scan.NumpyColumn(col)


def idv_to_idv(src, dst, options, progress):
    """.idv -> .idv: the source's blocks, decoded, into idv.Writer (every type and annotation
    kept); a file's blocks stored as the output stores them are copied (Writer.copy_blocks),
    their rows decoded only for their statistics and checks."""
    from idv._writer import Writer
    with _idv_columns(src, options.columns, options.opening) as (cols, source, scanned):
        total = source.num_rows
        shifts = [legacy_key_shift(c.name, c.type, options.legacy_keys) for c in cols]
        schema = [(c.name, c.type if shift is None else shift[0])
                  for c, shift in zip(cols, shifts)]
        metadata = {c.name: metadata_spec(c) for c in cols}
        kept = _kept(source, cols, shifts, options)
        # blocks copied: a batch a block (its own arrays, joined to no other), else a window
        batches = _batches(source, scanned, total, progress,
                           {"reader": _reader, "batch_rows": 1 if kept else None})

        def rows(batch):
            return {c.name: v if shift is None else shift[1](v)
                    for c, v, shift in zip(cols, batch.values, shifts)}
        # a file's own block size unless another is asked for, whether or not its blocks
        # are copied (a random-access layout stays one), one a column or not
        own = None if is_dataset(source) or len({c.rows_per_block for c in cols}) != 1 \
            else cols[0].rows_per_block
        with contextlib.closing(batches), \
                Writer(dst, schema, metadata=metadata, compression=options.compression,
                       rows_per_block=own if kept else options.rows_per_block or own,
                       **options.deflate, **({"max_bytes_per_block": None} if kept else {})) as w:
            if not kept:
                for batch in batches:
                    w.write_batch(rows(batch))
            for group in _block_groups(batches, cols) if kept else ():
                w.copy_blocks(_stored_blocks(group, kept, rows))
            if not cols:
                w.add_empty_rows(total)
        return total


def _block_groups(batches, cols, nbytes=scan.WINDOW_BYTES):
    """The scan's batches of one block each, in groups of consecutive blocks of about
    `nbytes` decompressed over the columns (which share one block grid): what the writer
    takes at once (its threads find the blocks' statistics)."""
    rpb = cols[0].rows_per_block
    sizes = np.sum([c.lookup["raw"] for c in cols], axis=0, dtype=np.int64)
    group, size = [], 0
    for batch in batches:
        group.append(batch)
        size += int(sizes[batch.start // rpb])
        if size >= nbytes:
            yield group
            group, size = [], 0
    if group:
        yield group


def _stored_blocks(group, kept, rows):
    """Writer.copy_blocks' (rows, stored) of each block of a group of batches (`rows`:
    fn(batch) -> its rows as the writer takes them)."""
    rpb = kept[0].rows_per_block
    b0 = group[0].start // rpb
    stored = {c.name: list(zip(c.stored_blocks(b0, b0 + len(group)),
                               c.lookup["raw"][b0:b0 + len(group)].tolist())) for c in kept}
    return [(rows(batch), {name: blocks[i] for name, blocks in stored.items()})
            for i, batch in enumerate(group)]


def legacy_key_shift(name, t, legacy_keys):
    """For a column of ML.NET 0.x keys with a min (or vectors of them): (the key type from min
    0, fn(values) -> its raw values) when `legacy_keys` is "shift", else ValueError naming the
    column and the option; None for any other column. Raw v > 0 is the key min + v - 1, so
    it becomes v + min (0, the missing key, stays 0) under a count of min + count."""
    item = t.item if isinstance(t, T.Vector) else t
    if not isinstance(item, T.Key) or not item.min:
        return None
    if legacy_keys != "shift":
        raise ValueError(f"column {name!r}: {t} is a legacy ML.NET 0.x key (with a min), "
                         f"which ML.NET 1.x does not load; convert it from min 0 with "
                         f"legacy_keys='shift' (idv convert: --legacy-keys shift): "
                         f"Key<{item.raw.name}, {item.min + item.count}>, the same key values")
    count = item.min + item.count
    if count > np.iinfo(item.dtype).max:
        raise ValueError(f"column {name!r}: {t} from min 0 needs a key count of {count}, "
                         f"beyond {item.raw.name}")
    key = T.Key(item.raw, count)
    shifted = T.Vector(key, *t.dims) if isinstance(t, T.Vector) else key

    def shift(values):
        raw = values.values if isinstance(values, Ragged) else values
        out = np.where(raw > 0, raw + np.asarray(item.min, raw.dtype), raw).astype(raw.dtype)
        return Ragged(out, values.offsets) if isinstance(values, Ragged) else out
    return shifted, shift


def idv_to_text(src, dst, options, progress, writer):
    """.idv -> text through `writer(text stream, columns)`, a writer of idv._interop.delimited
    (those of ``idv cat --format csv / tsv / jsonl`` too): the same text, without pyarrow."""
    check_codecs(options.format, None, options.compression)
    # text is made far slower than blocks decode: a block at a time, the next decoded ahead,
    # holds only that block's values and cells
    with _scanned(src, options, progress, window_bytes=1,
                  ahead=1) as (cols, total, scanned):
        if not cols and not getattr(writer, "func", writer).keeps_rows_without_columns:
            refuse_rows_without_columns(options.format, total)
        out = AtomicPath(dst)
        try:
            with out.open() as raw:
                text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
                w = writer(text, cols)
                for batch in scanned:
                    w.write(batch.values)
                if not cols:
                    w.write_rows_without_columns(total)
                text.flush()
                text.detach()
            out.commit()
        except BaseException:
            out.abort()
            raise
        return total
