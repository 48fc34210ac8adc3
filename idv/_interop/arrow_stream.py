"""The record batches of a stream over .idv files (idv.record_batch_reader, window_reader):
file by file through the scan, a window of blocks at a time, a filter's rows tested in the
scan's threads as they are decoded and their matches taken there; small files of numbers read
together (joined). idv._interop.arrow sets a stream up (Stream) and hands out its batches."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from idv import types as T
from idv._scan import filters, scan
from idv._scan.checked_keys import numbers_reader
from idv._scan.tested import Tested, untested, with_tests
from idv._values import text_bytes
from idv._reader import read_source, whole_read
from idv._interop.arrow_keys import key_numbers
from idv._interop.arrow_columns import (as_views, bits_reader, chunked, converters, is_text,
                                        one_array, rows_only, taken, text_reader,
                                        view_runs)
from idv._values.arrow_types import numpy_view

# window_reader's batches: a window of the scan each
WINDOW = "window"


def _as_read(pa, col, conv):
    """Whether a column's Arrow arrays (by its converter `conv`) are its values as read()
    gives them, viewed uncopied: numbers stored as their own Arrow type."""
    dtype = getattr(col.codec, "dtype", None)
    return dtype is not None and dtype.kind in "iuf" and \
        conv.arrow_type == pa.from_numpy_dtype(dtype)


def constant_arrays(pa, src, fixed, types, i, n):
    """`n` rows of each constant column `fixed` of file i, as Arrow arrays of `types`."""
    return [pa.array(v, t) for v, t in zip(read_source.constants(src, fixed, i, n), types)]


def arrow_form(col):
    """Form.arrow of Arrow: Text (and vectors of Text) straight from the blocks' UTF-8,
    Boolean scalars from their bits."""
    return text_reader(col) if is_text(col) else bits_reader(col)


def joined(pa, src, keys, i0, i1, unit, safe, views=()):
    """[(field, ChunkedArray)] of columns `keys` (each whole_read.joinable) of files [i0, i1)
    read as one, typed and annotated as file i0's columns (Text named in `views` as string
    views)."""
    if not keys:
        return []
    values = whole_read.read(src, keys, i0, i1, whole_read.Form(arrow=arrow_form))
    with src.using(i0) as first:
        convs = converters(pa, [first[k] for k in keys], unit, safe, views)
    return [(conv.field, chunked(pa, conv, v)) for conv, v in zip(convs, values)]


class Stream(NamedTuple):
    """What every file of a record batch stream is read with."""
    pa: object
    src: object
    keys: list
    unit: object
    safe: bool
    schema: object      # the files' columns' fields, then the constant columns'
    bound: object       # filters.PerFile, or None
    batch_size: object
    first: tuple        # (the first file, its converters), reused while it is the one open
    fixed: list         # the source's constant columns read (read_source.constants)
    order: list         # where each column asked is in keys + fixed
    per: object         # rows of the scan's batches: 1 (a block each), more, or WINDOW
    schema_asked: object    # the stream's schema: the columns in the order asked (made once)
    views: object       # the names of the Text columns read as string views
    # those given as string views, read as strings where rows are tested (their bytes are):
    # a single test's matches made views as taken, the others' rows as each batch is made
    late: frozenset     # (their positions in keys)
    quick_first: bool   # each file's first block a batch of its own (scan.scan's)

    def batch(self, i, arrays, n):
        """The record batch of `arrays` (of the files' columns) and `n` rows of the constant
        columns of file i, in the order asked."""
        pa = self.pa
        if not self.order:      # no column: its rows alone
            return rows_only(pa, n)
        if self.late:
            arrays = [as_views(pa, a) if j in self.late and a.type != self.schema.types[j]
                      else a for j, a in enumerate(arrays)]
        if self.fixed:
            arrays = arrays + constant_arrays(pa, self.src, self.fixed,
                                               self.schema.types[len(self.keys):], i, n)
        return pa.RecordBatch.from_arrays([arrays[j] for j in self.order],
                                          schema=self.schema_asked)


def file_batches(how, i, rows, bound):
    """The batches of file i of the stream, a window of blocks at a time, through the scan:
    rows `rows` (a range over the file's; None: all) that match its filter (`bound`: a
    filters.PerFile, None: every row)."""
    pa = how.pa
    with how.src.using(i) as f:
        cols = [f[k] for k in how.keys]
        convs = how.first[1] if f is how.first[0] else converters(pa, cols, how.unit, how.safe,
                                                                  how.views)
        bound = None if bound is None else bound(f)
        tested = [] if bound is None or isinstance(bound.node, filters.BlocksOnly) else \
            list(bound.columns)                 # BlocksOnly: no row to test
        # the filter's columns tested in the scan's threads, a piece at a time as decoded
        # (idv._scan.tested): in read()'s form, Text as its bytes (no str per value); those
        # read for the batches too tested as their Arrow arrays, the strings' bytes; a key
        # labelled by KeyValues as its key numbers, each checked to have a label whether the
        # batches hold it or not (checked_keys), dictionaries made of its matches alone
        text = {name for name in tested if f[name].type is T.Text}
        # where each column is among those read (keys: a file's indices, a dataset's names)
        read_at = {c.index: j for j, c in enumerate(cols)}
        mine = {name: read_at[f[name].index] for name in tested if f[name].index in read_at}
        numbers = {j: key_numbers(convs[j]) for j in mine.values()}
        numbers = {j: k for j, k in numbers.items() if k is not None}
        at = {name: j for name, j in mine.items()
              if name in text or j in numbers or _as_read(pa, f[name], convs[j])}
        extra = [name for name in tested if name not in at]
        readers = [numbers.get(j, c) for j, c in enumerate(convs)] + [
            scan.TextColumn(f[name]) if name in text else numbers_reader(f[name])
            for name in extra]
        keep = None if bound is None else (lambda _part, _f: bound.blocks())
        division = bound.division() if tested else None
        where = {**at, **{name: len(convs) + j for j, name in enumerate(extra)}}
        if tested:
            # a filter on one column takes that column's matches as it tests them (a step
            # cuts the rows after); Text is then read as its blocks' bytes (TextRows), its
            # matches copied into one Arrow array a piece, with no Arrow array a block first
            single = division.single is not None and (rows is None or rows.step == 1)
            as_bytes = {k for name, k in at.items() if single and name in text}
            readers = [scan.TextColumn(cols[k]) if k in as_bytes else r
                       for k, r in enumerate(readers)]
            takes = {k: numbers[k].take if k in numbers else
                     _taker(pa, k in as_bytes, k in how.late)
                     for k in at.values()} if single else {}
            readers = with_tests(readers, where, division, lambda k, chunk: _as_tested(
                pa, chunk, k < len(convs) and k not in numbers and k not in as_bytes), takes)

        def batches():
            n = f.num_rows if rows is None else len(rows)
            if not readers and n:   # the constant columns alone (no rows: no batch, as ever)
                yield how.batch(i, [], n)
            if not readers:
                return
            # a filter's matches are taken a window at a time (a call a column, not a block),
            # then cut into the batches the stream gives (_cuts)
            per = None if how.per is WINDOW else how.per
            for batch in scan.scan(f, readers, rows=rows, block_filter=keep, batch_rows=per,
                                   quick_first=how.quick_first, whole_windows=bool(tested)):
                n = len(range(batch.start, batch.stop, batch.step))
                values = batch.values[:len(convs)]
                if not tested:
                    for a, b in view_runs(pa, values, n):   # no string view copied
                        yield how.batch(i, [one_array(pa, v if b - a == n else v.slice(a, b - a))
                                            for v in values], b - a)
                    continue
                cuts = _cuts(per, readers[0].col.rows_per_block, batch)
                found = {name: batch.values[k].found for name, k in where.items()}
                if any(isinstance(v, Tested) and v.taken for v in values):
                    yield from _piece_batches(how, i, values, found[division.single], cuts)
                    continue
                yield from _window_batches(how, i, [untested(v) for v in values], numbers,
                                           division.hits(found, n), cuts)
        yield from (batches() if how.batch_size is None else
                    rebatched(pa, how.schema_asked, batches(), how.batch_size))


def _as_tested(pa, chunks, arrow):
    """A piece's chunks of a tested column as the filter's test takes them: Arrow strings as
    the TextRows of their bytes (uncopied), Arrow numbers as numpy; the other readers' (one
    chunk in read()'s form) as they are."""
    if not arrow:
        return chunks[0]
    whole = _piece(pa, chunks)
    if pa.types.is_string(whole.type) or pa.types.is_large_string(whole.type):
        spans = text_bytes.of_arrow(pa, whole)
        return whole if spans is None else spans
    return numpy_view(one_array(pa, whole))


def _piece(pa, chunks):
    """A piece's chunks (Arrow arrays, or chunked arrays of a memory map's blocks) as one
    ChunkedArray, uncopied."""
    return pa.chunked_array([a for c in chunks for a in getattr(c, "chunks", [c])],
                            chunks[0].type)


def _taker(pa, text_rows=False, views=False):
    """take(chunks, positions, as tested) of TestedReader: a piece's matching rows (strings
    copied from the bytes the test found; string views with `views`) as one array;
    `text_rows`: the piece is TextRows (scan.TextColumn's), which the test found as they
    are."""
    def take(chunks, hits, seen):
        return taken(pa, None if text_rows else _piece(pa, chunks), hits,
                     seen if isinstance(seen, text_bytes.TextRows) else None, views)
    return take


def _cuts(per, rpb, batch):
    """Where a scan's window of rows (`batch`, a scan.Rows) is cut into the stream's batches:
    positions among its rows, from 0 to their number, where each group of blocks of about
    `per` rows begins (blocks of `rpb` rows; a block each for 1; None: the window whole)."""
    n = len(range(batch.start, batch.stop, batch.step))
    if per is None:
        return [0, n]
    size = max(1, per // rpb) * rpb
    starts = range((batch.start // size + 1) * size, batch.stop, size)
    return sorted({0, n} | {-(-(c - batch.start) // batch.step) for c in starts})


def _window_batches(how, i, values, numbers, hits, cuts):
    """The batches of file i of a window's matching rows `hits` (ascending) of its columns'
    `values` (``numbers``: the key columns read as their key numbers, by position), cut at
    `cuts` (_cuts): each column's matches taken at once, or where every row matches, the
    values cut as they are."""
    pa = how.pa
    if len(hits) == cuts[-1]:
        for a, b in zip(cuts[:-1], cuts[1:]):
            yield how.batch(i, [numbers[j].array(_rows(u, a, b), None) if j in numbers else
                                one_array(pa, _rows(u, a, b)) for j, u in enumerate(values)],
                            b - a)
        return
    arrays = [numbers[j].array(u, hits) if j in numbers else taken(pa, u, hits)
              for j, u in enumerate(values)]
    yield from _cut_batches(how, i, arrays, hits, cuts)


def _cut_batches(how, i, arrays, hits, cuts, at=0):
    """The batches of file i of the matching rows `arrays` (Arrays, or ChunkedArrays of
    every row) of a window's rows `hits` (ascending, counted from the window's row `at`), cut
    at `cuts` (_cuts): one for each part that holds a match, or one of no rows when none
    does."""
    ends = np.searchsorted(hits, np.asarray(cuts) - at).tolist()
    parts = [(a, b) for a, b in zip(ends[:-1], ends[1:]) if b > a] or [(0, 0)]
    for a, b in parts:
        yield how.batch(i, [one_array(how.pa, v.slice(a, b - a)) for v in arrays], b - a)


def _rows(value, a, b):
    """Rows [a, b) of a column's value as read (numpy) or as Arrow arrays."""
    return value[a:b] if isinstance(value, np.ndarray) else value.slice(a, b - a)


def _piece_batches(how, i, values, found, cuts):
    """The batches of file i of a window's `values` whose tested column was taken as tested:
    each piece of it that matched (its matches as taken, uncopied; the other columns' taken
    from the piece's rows) cut at `cuts` (_cuts), or one of no rows when none did."""
    pa, some = how.pa, False
    for j, (s, size, hits) in enumerate(zip(found.starts, found.sizes, found.local)):
        if not len(hits):
            continue
        some = True
        arrays = [one_array(pa, v.value[j]) if isinstance(v, Tested) else
                  v.slice(s, size) if len(hits) == size else
                  taken(pa, v.slice(s, size), hits) for v in values]
        yield from _cut_batches(how, i, arrays, hits, [s] + [c for c in cuts if s < c < s + size]
                                + [s + size], s)
    if not some:
        yield how.batch(i, [v.value[0].slice(0, 0) if isinstance(v, Tested) else
                            one_array(pa, v.slice(0, 0)) for v in values], 0)


def group_batches(how, i0, i1):
    """The batches of files [i0, i1) of the stream, read as one (whole_read), cut as each
    file's stream would give them (a block, whole blocks of about the stream's rows, the file
    for a window, or batch_size rows at a time)."""
    pa, files = how.pa, how.src.files
    arrays = [a for _, a in joined(pa, how.src, how.keys, i0, i1, how.unit, how.safe,
                                    how.views)]
    cuts = []
    for i in range(i0, i1):
        e = files[i]
        with how.src.using(i) as f:
            rpb = f[how.keys[0]].rows_per_block or e.num_rows or 1
            step = how.batch_size or ((e.num_rows or 1) if how.per is WINDOW else
                                      max(1, how.per // rpb) * rpb)
        cuts += [(i, e.start - files[i0].start + a, min(step, e.num_rows - a))
                 for a in range(0, e.num_rows, step)]
    for i, a, n in cuts:
        yield how.batch(i, [one_array(pa, c.slice(a, n)) for c in arrays], n)


def rebatched(pa, schema, batches, size):
    """`batches` cut and joined into batches of `size` rows (the last: the rest)."""
    def join(pieces):
        return pa.Table.from_batches(pieces, schema).combine_chunks().to_batches()[0]
    return scan.rebatched(((b, b.num_rows) for b in batches), int(size),
                          lambda b, start, stop: b.slice(start, stop - start), join)
