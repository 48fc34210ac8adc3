"""numpy's read and take of a source of rows (idv._reader.read_source), written once: IdvFile.read
/ take and Dataset.read / take are these (dict name -> array, read()'s forms).

Every row: the one planner of whole reads (idv._reader.whole_read). Some rows (``rows=``, take):
each file's share read by its columns (Column's row access, idv._reader.take), joined and put in
the order asked. A filter: each file's matching rows (idv._scan.filters). Times are then put in the
unit ``datetime`` asks for, one unit for a column of every file (idv._reader.time_units). """
from __future__ import annotations

import contextlib
import functools
import inspect

import numpy as np

from idv import _docs, types as T
from idv._resources import gc as _gc, budget
from idv._resources.closing import ClosedOnExit
from idv._scan import filters
from idv._reader import read_source, selection, whole_read, take as _take
from idv._values import ticks, vectors
from idv._reader.column import Column
from idv._reader.read_source import READ_TIME_MODES

# read(text=...): Text values as Python str objects, or numpy 2's StringDType
TEXT_FORMS = ("object", "StringDType")


def _check(sparse, rows, text, filter_):
    """ValueError for options read() does not take (together)."""
    if text not in TEXT_FORMS:
        raise ValueError(f"text must be one of {', '.join(map(repr, TEXT_FORMS))}, not "
                         f"{text!r}")
    if text == "StringDType" and not hasattr(getattr(np, "dtypes", None), "StringDType"):
        raise ValueError(f"text='StringDType' needs numpy >= 2 (numpy {np.__version__} is "
                         f"installed)")
    if (filter_ is not None or rows is not None) and sparse:
        raise ValueError(f"read({'filter' if filter_ is not None else 'rows'}=...) does not "
                         f"take sparse=True: read the column's matrix and index it, "
                         f"f[name].read(sparse=True)[rows] (its rows stay sparse)")


def read(source, columns=None, sparse=False, rows=None, datetime="100ns", text="object",
         filter=None, copy=True):  # noqa: A002 - pyarrow's and pandas' name
    """IdvFile.read and Dataset.read (their docstrings hold the options)."""
    _check(sparse, rows, text, filter)
    ticks.check_time_mode(datetime, READ_TIME_MODES)
    one = selection.is_index(rows)      # rows=i: that row's values, as col[i] gives them
    rows = [rows] if one else rows
    asked = source.resolve_columns(columns)
    keys, fixed = read_source.split(source, asked)
    with source.using(0) as first:         # their names and types, after it is closed too
        cols = selection.one_per_name([first[k] for k in keys])
    names = [c.name for c in cols]
    strings = text == "StringDType"
    whole = None
    if filter is not None:
        values = _matching(source, keys, fixed, filter,
                           read_source.table_rows(source, rows, filter))
    elif rows is not None:
        if not isinstance(rows, slice):       # row numbers: the result first, as take's
            _take.check_result(rows, source.num_rows, [c.type for c in cols] + [
                read_source.constant_types(source)[k] for k in fixed], source.need)
        values = _rows(source, keys, rows, lambda f, local: _read_rows(f, keys, local,
                                                                      strings), fixed)
        strings = False
    else:
        values = whole_read.read(source, keys, 0, len(source.files), whole_read.Form(
            mapped=None if copy else Column.read_mapped, sparse=bool(sparse),
            strings=strings)) if keys or not fixed else []
        whole, strings = dict(zip(names, values)), False
        values += read_source.joined_constants(source, fixed, [
            (i, e.num_rows) for i, e in enumerate(source.files)])
    unit, _ = source.time_unit(names, datetime, True, whole, READ_TIME_MODES)
    out = {c.name: _retimed(c, v, unit, strings) for c, v in zip(cols, values)}
    out.update((k, np.asarray(v, dtype=np.dtypes.StringDType()) if text == "StringDType"
                and v.dtype == object else v) for k, v in zip(fixed, values[len(cols):]))
    out = out if not fixed else {k: out[k] for k in asked}
    return {k: v[0] for k, v in out.items()} if one else out


def _matching(source, keys, fixed, filter_, rows=None):
    """Values of columns `keys` (resolve_columns': an index picks that column, whatever its
    name), then of the constant columns `fixed`, of the rows of every file matching `filter_`
    (of a slice `rows` of them: None, all): a file the filter's decision on its constants
    rules out is not opened, one it keeps whole is read whole."""
    node = read_source.filter_of(filter_)
    got, counts = [], []
    for i, local in read_source.row_parts(source, rows)[0]:
        mine = read_source.decided(source, i, node)
        if mine is False:
            continue
        if mine is True:
            with source.using(i) as f:
                vals = [] if not keys else whole_read.read(source, keys, i, i + 1) \
                    if local is None else _read_rows(f, keys, local, False)
                got.append(dict(zip(keys, vals)))
                counts.append((i, selection.count(local or slice(None), f.num_rows)))
            continue
        with source.using(i) as f:      # bound (checked) even where the file has no rows
            at, vals = filters.matching(f, keys, filters.prepare(mine, f), local and range(
                *local.indices(f.num_rows)), positions=bool(fixed))
        got.append(vals)
        counts.append((i, 0 if at is None else len(at)))
    if not got:
        with source.using(0) as f:
            got = [{n: f[n][0:0] for n in keys}]
    values = [vectors.concat_reads([g[n] for g in got]) for n in keys]
    return values + read_source.joined_constants(source, fixed, counts)


# at most this many rows of a slice are given to a remote file's prefetch as row numbers (8
# bytes each, counted by its memory check); the columns of a longer slice fetch their blocks
# each in one concurrent round
PREFETCH_ROWS = 1 << 16


def _read_rows(f, keys, local, strings):
    """Rows `local` of columns `keys` of file `f` (read()'s forms; Text as StringDType where
    `strings`), the blocks of every column fetched together first (IdvFile.prefetch: a remote
    file's in one round of coalesced requests, not a round per column); rows by number as
    take() takes them (its memory check, its Text decoded as UTF-8 and made str by row)."""
    cols = [f[k] for k in keys]
    if not isinstance(local, slice) and not strings:     # rows by number: as take() takes them
        return _take.taken(f, selection.row_numbers(local, f.num_rows, "file"), cols)
    try:
        hit = None if isinstance(local, slice) and selection.count(
            local, f.num_rows) > PREFETCH_ROWS else selection.row_numbers(local, f.num_rows)
    except (TypeError, IndexError):     # the columns' reads say what is wrong with them
        hit = None
    with f.prefetch(cols, rows=hit) if hit is not None and len(hit) and cols \
            else contextlib.nullcontext():
        return [c.read_strings(local) if strings and T.item_type(c.type) is T.Text
                else c[local] for c in cols]


def _rows(source, keys, rows, read_rows, fixed=()):
    """Rows `rows` of columns `keys` (a value each), each file's share read by
    ``read_rows(file, its rows)`` (a value per key), joined in the order asked: a slice
    checked as a whole first (whole_read.check_memory), row numbers as take() checks them
    (their result first, then each file's blocks hit as they are decoded, on a file and on a
    dataset alike); then those of the constant columns `fixed`."""
    files = source.files
    parts, restore = read_source.row_parts(source, rows)
    if isinstance(rows, slice):
        whole_read.check_memory(source, keys, parts)
    if not parts:          # no rows: the empty forms, from the first file
        parts = [(0, slice(0, 0))]
    got = []
    for i, local in parts:
        n = selection.count(local, files[i].num_rows)
        if keys:
            with source.using(i) as f:
                got.append(read_rows(f, local) + read_source.constants(source, fixed, i, n))
        else:
            got.append(read_source.constants(source, fixed, i, n))
    out = []
    for j in range(len(keys) + len(fixed)):
        v = got[0][j] if len(got) == 1 else vectors.concat_reads([g[j] for g in got])
        out.append(v if restore is None else v[restore])
    return out


def take(source, indices, columns=None, datetime="100ns") -> dict:
    """IdvFile.take and Dataset.take: rows by number over the source's files end to end."""
    ticks.check_time_mode(datetime, READ_TIME_MODES)
    asked = source.resolve_columns(columns)
    keys, fixed = read_source.split(source, asked)
    with source.using(0) as first:
        cols = selection.one_per_name([first[k] for k in keys], "take()")
    # the result, before any array of its row numbers
    _take.check_result(indices, source.num_rows, [c.type for c in cols] +
                       [read_source.constant_types(source)[k] for k in fixed], source.need)
    values = _rows(source, keys, selection.take_numbers(indices),
                   lambda f, local: _take.taken(f, local, [f[k] for k in keys]), fixed)
    unit, _ = source.time_unit([c.name for c in cols], datetime, True, modes=READ_TIME_MODES)
    out = {c.name: _retimed(c, v, unit, False) for c, v in zip(cols, values)}
    out.update(zip(fixed, values[len(cols):]))
    return out if not fixed else {k: out[k] for k in asked}


def _retimed(c, values, datetime, strings):
    """read()'s value of column `c` with its times in the unit `datetime` gives it, and Text
    as StringDType (`strings`)."""
    mode, safe = ticks.unit_of(datetime, c.name)
    if mode != "100ns" and T.item_type(c.type) in ticks.TIME_ITEMS:
        values = ticks.retimed(values, T.item_type(c.type), mode, f"column {c.name!r}", safe,
                               takes_safe=False)
    if strings and T.item_type(c.type) is T.Text:
        values = np.asarray(values, dtype=np.dtypes.StringDType())
    return values


def _named(method):
    """`method` of IdvFile and Dataset, its TypeError for arguments it does not take naming
    it as called (``IdvFile.read()``), not as written here (``SourceReads.read()``)."""
    signature = inspect.signature(method)

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except TypeError:
            try:        # checked once it failed: the arguments, or what the read raised
                signature.bind(self, *args, **kwargs)
            except TypeError as e:
                raise TypeError(f"{type(self).__name__}.{method.__name__}() {e}") from None
            raise
    return call


class SourceReads(ClosedOnExit):
    """The reads of IdvFile and Dataset, written once over a source of rows
    (idv._reader.read_source): numpy's here, Arrow's and pandas' in idv._interop.arrow and
    idv._interop.pandas, imported when called."""

    @_named
    @_gc.paused_for(lambda self, *_, **__: len(self.files))
    @budget.reads
    @_docs.fill
    def read(self, columns=None, sparse=False, rows=None, datetime="100ns", text="object",
             filter=None, copy=True):  # noqa: A002 - pyarrow's and pandas' name
        """dict name -> array of these columns, in numpy (docs/reading.md has each type's form);
        of a dataset, every file's rows end to end, one unit for a time column of every file.

        Parameters
        ----------
        {columns}
        {sparse}
        rows : int, slice, sequence of int or boolean mask, optional
            The rows, as ``col[rows]`` selects them (a dataset's: over its files end to end):
            only the files and blocks that hold them are decoded; an int gives that row's
            value of each column, as ``col[i]``. Not with ``sparse``; with ``filter``, a
            slice with a positive step: the rows of it that match.
        datetime : {'100ns', 'auto', 'exact', 'auto-us', 'us', 'ns', 'ticks'}, default '100ns'
            ``'100ns'``: ``datetime64[100ns]`` / ``timedelta64[100ns]``, .NET's own ticks,
            exact and with no pass over the data (numpy alone holds that unit). The others
            give the unit of the one rule of every entry point (see idv.to_arrow's
            ``datetime``), chosen from the values: not the type a column was written from
            (its ``idv.SourceType``), which only the Arrow and pandas readers restore.
        text : {'object', 'StringDType'}, default 'object'
            Text values as arrays of Python ``str``, or numpy >= 2's variable-width string
            dtype, built straight from the file's UTF-8 with no ``str`` objects for whole
            Text columns (vectors of Text and row selections are converted from ``str``).
        {filter}
        copy : bool, default True
            False: a whole column of numbers or keys that one uncompressed block holds, in a
            file opened from a path, is a read-only view of the file's bytes (its memory map,
            or the whole of a small file: valid after close, checked against its CRC-32).
            Every other column is copied as always: numpy needs one buffer, and a column of
            several blocks lies in pieces, as do the files of a dataset (docs/performance.md;
            to_arrow and record_batch_reader give a chunk per block without copying).

        Raises
        ------
        ValueError
            An unknown ``datetime`` or ``text``, ``rows`` with ``sparse``, or row numbers
            with ``filter``.
        TypeError, IndexError
            ``rows`` of another kind, or a row out of range.
        """
        return read(self, columns, sparse, rows, datetime, text, filter, copy)

    @_named
    @_gc.paused_for(lambda self, *_, **__: len(self.files))
    @budget.reads
    @_docs.fill
    def take(self, indices, columns=None, datetime="100ns") -> dict:
        """dict name -> values (read()'s forms) of rows by number, in the order given,
        repeats included (a dataset's: over its files end to end): each block that holds them
        is decoded once, in parallel. IndexError names a row number out of range and the row
        count.

        Parameters
        ----------
        indices : sequence of int
            Row numbers, negative from the end.
        {columns}
        datetime : str, default '100ns'
            As in read().
        """
        return take(self, indices, columns, datetime)

    # ---- the Python data stack (idv._interop.pandas, idv._interop.arrow; pandas / pyarrow
    # imported on use)
    @_docs.fill
    def to_pandas(self, columns=None, **kwargs):
        """A pandas.DataFrame of these columns (a dataset's: every file's rows).

        Parameters
        ----------
        {columns}
        **kwargs
            The options of idv.to_pandas.
        """
        from idv._interop.pandas import to_pandas
        return to_pandas(self, columns, **kwargs)

    @_docs.fill
    def to_arrow(self, columns=None, **kwargs):
        """A pyarrow.Table of these columns (a dataset's: every file's rows).

        Parameters
        ----------
        {columns}
        **kwargs
            The options of idv.to_arrow.
        """
        from idv._interop.arrow import to_arrow
        return to_arrow(self, columns, **kwargs)

    def __arrow_c_stream__(self, requested_schema=None):
        """The Arrow PyCapsule stream of every readable column, file by file and block by
        block, so that ``pa.table(f)``, ``pl.DataFrame(f)`` and DuckDB read a file or a
        dataset directly (times as ``datetime="auto"``; a requested schema is honoured as far
        as pyarrow casts)."""
        from idv._interop.arrow import record_batch_reader
        return record_batch_reader(self).__arrow_c_stream__(requested_schema)

    @_docs.fill
    def record_batch_reader(self, columns=None, **kwargs):
        """A pyarrow.RecordBatchReader over the file, or every file of a dataset in turn
        (small files read together, a batch never across two), as idv.record_batch_reader.

        Parameters
        ----------
        {columns}
        **kwargs
            The options of idv.record_batch_reader.
        """
        from idv._interop.arrow import record_batch_reader
        return record_batch_reader(self, columns, **kwargs)

    @_docs.fill
    def iter_batches(self, columns=None, *, batch_size=None, **kwargs):
        """pyarrow.RecordBatches, as pyarrow's ``ParquetFile.iter_batches``.

        Parameters
        ----------
        {columns}
        {batch_size}
        **kwargs
            The options of idv.record_batch_reader.
        """
        from idv._interop.arrow import record_batch_reader
        return iter(record_batch_reader(self, columns, batch_size=batch_size, **kwargs))
