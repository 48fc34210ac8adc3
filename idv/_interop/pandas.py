"""pandas DataFrames from .idv files: ``to_pandas`` and ``read_pandas`` (the other way,
``idv.from_pandas``, is idv._writer.pandas).

pandas is imported only when these are called (``pip install idv[pandas]``). The mapping
(docs/interop.md has the full table):

* numbers and Boolean keep their dtypes; Text is pandas' string dtype (``str`` in pandas 3);
* a key with usable KeyValues is a ``pandas.Categorical`` (raw 0, the missing key, is NaN;
  code = raw - 1; categories = KeyValues); other keys stay their raw unsigned integers;
* DateTime / TimeSpan are ``datetime64[ns]`` / ``timedelta64[ns]`` when every value fits
  nanoseconds, else ``[us]`` (``datetime=`` chooses; nothing ever wraps);
* DateTimeOffset is tz-aware: in the one UTC offset of all the column's (a slot's) rows, else UTC;
* RowId is an object column of Python ints (128-bit);
* fixed vectors expand into one column per slot (``vectors="expand"``; beyond
  ``MAX_EXPAND_SLOTS`` slots one object column, with an ``idv.IdvWarning``) or stay one object
  column of arrays (``vectors="object"``); variable vectors are object columns of arrays.

The frame's ``attrs["idv.schema"]`` keeps the ML.NET schema, so that writing it gives back the
same types (idv._writer.pandas).
"""
from __future__ import annotations

import numpy as np

from idv import _docs, types as T
from idv._resources import budget, gc as _gc
from idv._scan import filters
from idv._values import ticks
from idv._reader import read_source, selection, take as _take, time_units, whole_read
from idv._interop import pandas_times
from idv._interop.arrow_columns import text_array, text_reader
from idv._values.arrow_types import check_key_labels, key_value_times
from idv._values.time_zones import as_written, restore, written_from
from idv._reader.reader import opened
from idv._values.metadata import (MAX_EXPAND_SLOTS, SCHEMA_ATTR, expands, frame_schema,
                                  slot_labels, usable_key_values, warn_kept_wide)
from idv.errors import Where, column_place, require
from idv._values.vectors import Ragged, object_array
from idv._values.arguments import ensure_flag

__all__ = ["to_pandas", "read_pandas", "MAX_EXPAND_SLOTS", "SCHEMA_ATTR"]

VECTOR_MODES = ("expand", "object")


def _pd():
    return require("pandas", "converting to or from pandas", "idv[pandas]")


class _Ctx:
    def __init__(self, pd, name, mode, safe, source=None, zone=None, place=None):
        self.pd, self.name, self.mode, self.safe = pd, name, mode, safe
        self.place = place or column_place(name)    # how messages name it: column_place
        self.source = source     # (kind, unit, zone) the column was written from, or None
        self.zone = zone         # of every row (a vector's: one a slot); None: the values'

    def describe(self, size=None, offsets=None):
        return Where(self.place, offsets, width=size)

    def slot(self, j):
        """The context of a vector's slot `j`: its own zone where each slot has one."""
        return self if not isinstance(self.zone, tuple) else _Ctx(
            self.pd, self.name, self.mode, self.safe, self.source, self.zone[j], self.place)


def _scalar_series(ctx, t, values, kv=None, describe=None):
    """One output column from 1-d values of item type t."""
    pd = ctx.pd
    describe = describe or ctx.describe()
    if kv is not None:
        raw = np.asarray(values)
        check_key_labels(raw, len(kv), describe)
        codes = raw.astype(np.int64) - 1
        kv = key_value_times(kv, ctx.mode, ctx.safe, f"column {ctx.name!r} KeyValues")
        return pd.Series(pd.Categorical.from_codes(codes, categories=pd.Index(kv)))
    series = _SERIES.get(t)
    if series is not None:
        return series(ctx, t, values, describe)
    return pd.Series(values)


def _rowid_series(ctx, t, values, describe):
    out = np.empty(len(values), object)
    for i, (lo, hi) in enumerate(zip(values["low"].tolist(), values["high"].tolist())):
        out[i] = (hi << 64) | lo
    return ctx.pd.Series(out, dtype=object)


# item type -> fn(ctx, type, 1-d values, describe) -> its Series, where pandas' own conversion
# of read()'s values does not do
_SERIES = {
    T.Text: lambda ctx, t, values, describe: ctx.pd.Series(values, dtype="str"),
    T.DateTime: pandas_times.time_series, T.TimeSpan: pandas_times.time_series,
    T.DateTimeOffset: pandas_times.dto_series,
    T.RowId: _rowid_series,
}


def _vector_cells(ctx, t, values):
    """Vector rows as an object array of numpy arrays (views of the values read); DateTime /
    TimeSpan items in the unit the datetime mode picks, other items in read()'s forms. The
    cells are made and stored in C (no Python call a row): a Ragged's by slicing its items."""
    if not isinstance(values, (np.ndarray, Ragged)):      # lists of Text read into Arrow
        return values.to_numpy()
    n = len(values)
    time = t.item in pandas_times.TIME_KINDS
    if isinstance(values, Ragged):
        flat = values.values
        if time:
            flat = pandas_times.times(ctx, t.item, flat, ctx.describe(offsets=values.offsets))
        bounds = values.offsets.tolist()
        rows = map(flat.__getitem__, map(slice, bounds[:-1], bounds[1:]))
        return np.fromiter(rows, dtype=object, count=n)
    if time:
        values = pandas_times.times(ctx, t.item, values, ctx.describe(size=t.size))
    return object_array(values)


def _column_pieces(ctx, col, values, vectors):
    """[(names, block)]: a Series (one name) or a DataFrame (expanded slots)."""
    pd = ctx.pd
    t = col.type
    if not isinstance(t, T.Vector):
        kv = usable_key_values(t, col)
        return [([col.name], _scalar_series(ctx, t, values, kv))]
    if not expands(t, vectors):
        return [([col.name], pd.Series(_vector_cells(ctx, t, values), dtype=object,
                                          copy=False))]
    names = slot_labels(col.name, t, col.annotation("SlotNames"))
    n = len(values)
    flat = values.reshape(n, t.size)
    item = t.item
    kv = usable_key_values(item, col)
    if (isinstance(item, T.Key) and kv is None) or item is T.Boolean \
            or (not isinstance(item, T.Key) and item.is_numeric):
        return [(names, pd.DataFrame(flat, columns=names, copy=False))]
    if item in pandas_times.TIME_KINDS:
        flat = pandas_times.times(ctx, item, flat, ctx.describe(size=t.size))
        return [(names, pd.DataFrame(flat, columns=names, copy=False))]
    return [([nm], _scalar_series(ctx.slot(j), item, flat[:, j], kv,
                                  lambda i, j=j: f"{ctx.describe()(i)} item {j}"))
            for j, nm in enumerate(names)]



DTYPE_BACKENDS = (None, "pyarrow")


def _arrow_strings(pd, dtype_backend):
    """The pandas dtype to read Text columns into straight from Arrow (no str objects), or
    None to keep object arrays: ``ArrowDtype(string)`` for dtype_backend="pyarrow", else
    pandas' default ``str`` dtype when pyarrow backs it (pandas 3 with pyarrow installed, or
    pandas 2.x with ``future.infer_string``)."""
    if dtype_backend == "pyarrow":
        pa = require("pyarrow", "dtype_backend='pyarrow'", "idv[arrow]")
        return pd.ArrowDtype(pa.string())
    default = pd.Series([""]).dtype
    if isinstance(default, pd.StringDtype) and default.storage == "pyarrow":
        return default
    return None


def _arrow_backed(pd, piece, date=False):
    """A Series or DataFrame with numpy numbers, Booleans and times as ArrowDtype columns
    (dtype_backend="pyarrow", as pandas.read_parquet gives them); other columns as they are.
    `date`: a time column written from date32, whose midnights are dates again."""
    import pyarrow as pa

    def one(s):
        if isinstance(s.dtype, pd.DatetimeTZDtype):          # a zone: timestamp[unit, tz]
            return pd.Series(pd.arrays.ArrowExtensionArray(pa.array(s.array)), index=s.index,
                             name=s.name)
        if isinstance(s.dtype, np.dtype) and s.dtype.kind in "biufmM":
            array = pa.array(s.to_numpy())
            if date and s.dtype.kind == "M":
                array = restore(pa, array, pa.date32())
            return pd.Series(pd.arrays.ArrowExtensionArray(array), index=s.index, name=s.name)
        return s
    if isinstance(piece, pd.DataFrame):
        return pd.concat([one(piece.iloc[:, j]) for j in range(piece.shape[1])], axis=1,
                         ignore_index=True).set_axis(piece.columns, axis=1)
    return one(piece)


def text_as_arrow(dtype_backend=None):
    """Whether to_pandas reads Text straight into Arrow (pandas' str dtype backed by pyarrow,
    or dtype_backend="pyarrow"): frame()'s `values` then give Text as Arrow ChunkedArrays."""
    return _arrow_strings(_pd(), dtype_backend) is not None


def _read_whole(f, cols, arrow_text):
    """id(column) -> every row of it (idv._reader.whole_read): read()'s form, or for Text with
    `arrow_text` an Arrow ChunkedArray on the blocks' UTF-8."""
    got = whole_read.read(f, [c.index for c in cols], 0, 1, whole_read.Form(
        arrow=_arrow_text if arrow_text else None))
    return dict(zip(map(id, cols), map(_text_chunked, got)))


@budget.reads
@_docs.fill
def to_pandas(file, columns=None, *, vectors="expand", datetime="auto", safe=True,
              dtype_backend=None, rows=None, filter=None,  # noqa: A002 - pandas' name
              **kwargs):
    """Read an .idv into a pandas.DataFrame that carries the columns' ML.NET schema.

    The frame's ``df.attrs["idv.schema"]`` (idv.SCHEMA_ATTR) holds the types and metadata,
    which idv.write / idv.from_pandas use to write the same types back: slot columns
    regrouped into their vector, keys with their KeyValues, exact key and KeyValues types.

    Parameters
    ----------
    {source:file}
    {columns}
    {vectors}
    {datetime}
        Default ``'auto'``.
    {safe}
    {dtype_backend}
    {table_rows}
        The index starts at 0. idv.dask reads a partition so.
    {filter}
        The rows that match are indexed from 0.
    **kwargs
        The options of idv.open, for a file opened here (``memory_limit=``...).

    Returns
    -------
    pandas.DataFrame

    Examples
    --------
    >>> import idv
    >>> df = idv.to_pandas(idv.sample_path(), ["City", "Features"])
    >>> df.shape, str(df["City"].dtype), df.columns[1]
    ((240, 5), 'category', 'Features.Bedrooms')
    """
    with opened(file, **kwargs) as src:
        return frame(src, columns, vectors=vectors, datetime=datetime, safe=safe,
                     dtype_backend=dtype_backend, rows=rows, warn_wide=True, filter=filter)


def frame(file, columns=None, *, vectors="expand", datetime="auto", safe=True,
          dtype_backend=None, rows=None, warn_wide=False, filter=None,  # noqa: A002
          row_index=False, values=None, zones=None):
    """to_pandas, warning of vectors too wide to expand only with `warn_wide` (idv.dask
    reads its meta and partitions through this and warns once for the whole frame); with
    `filter` and `row_index`, indexed by the file's row numbers of the rows that match; with
    `values` (id(column) -> read()'s form of its rows, any number: a dataset's columns read
    whole; Text as an Arrow ChunkedArray where text_as_arrow()), those values in the forms of
    `file`'s columns; `zones`: pandas_times.dataset_zones, where known. Package-internal."""
    pd = _pd()
    ticks.check_time_mode(vectors, VECTOR_MODES, "vectors")
    ticks.check_time_mode(datetime)
    if dtype_backend not in DTYPE_BACKENDS:
        raise ValueError(f"dtype_backend must be one of {', '.join(map(repr, DTYPE_BACKENDS))}"
                         f", not {dtype_backend!r}")
    how = dict(vectors=vectors, datetime=datetime, safe=safe, dtype_backend=dtype_backend,
               warn_wide=warn_wide, filter=filter, zones=zones or {})
    with opened(file) as src:
        keys = src.resolve_columns(columns)     # a dataset's: by its rules, not its first file's
        rows = read_source.table_rows(src, rows, filter, keys)
        if zones is None and (rows is not None or filter is not None):     # of every row
            how["zones"] = pandas_times.dataset_zones(src, columns, datetime)
        # the rows read, checked as a whole first (rows by number: as take() checks them)
        if filter is None and values is None and selection.in_order(rows):
            whole_read.check_rows(src, keys, rows)
        if read_source.constant_types(src) or len(src.files) > 1:
            parts, restore = read_source.row_parts(src, rows)
            df = (_frame_of_parts if read_source.constant_types(src) else _frame_of_files)(
                pd, src, columns, parts, how)
            return df if restore is None else df.take(restore).reset_index(drop=True)
        with src.using(0) as f:
            return _frame(pd, f, keys, rows, how, row_index, values)


def _frame(pd, f, columns, rows, how, row_index, values):
    """frame() of the open file `f`."""
    vectors, datetime, dtype_backend = how["vectors"], how["datetime"], how["dtype_backend"]
    strings = _arrow_strings(pd, dtype_backend)
    # Text straight from Arrow (idv._interop.arrow.text_array): all rows, or a slice of step 1
    arrow_text = strings is not None and selection.contiguous(rows, f.num_rows) is not None
    cols = selection.file_columns(f, columns)
    if how["warn_wide"] and vectors == "expand":
        warn_kept_wide(cols)
    n = f.num_rows if rows is None else selection.count(rows, f.num_rows)
    if values is None and not selection.in_order(rows):    # rows by number, as take() takes
        values = dict(zip(map(id, cols), _take.taken(f, rows, cols)))
    if values is not None:
        n = len(next(iter(values.values()))) if values else n
    pieces, whole, index = [], {}, None
    expanded = set()     # indices of the columns whose slots became columns of their own
    read_whole = how["filter"] is None and rows is None and values is None
    if how["filter"] is not None:      # the rows that match, of the blocks statistics keep
        index, whole = _read_matching(f, cols, how["filter"], rows, vectors)
        n = len(index)
    elif values is not None:
        whole = values
    elif rows is None:    # every row: the columns decoded by one scan
        whole = _read_whole(f, cols, arrow_text)
    datetime = time_units.for_file(f, [c.name for c in cols], datetime,
                                   {c.name: whole[id(c)] for c in cols} if read_whole else None)
    # the chosen modes give a column the type it was written from (SOURCE_TYPE)
    finest = as_written(datetime)
    for col in cols:
        if strings is not None and col.type is T.Text:
            # Arrow's strings: read into them, or made of the rows' str where taken by number
            text = whole[id(col)] if whole else text_array(col, rows) if arrow_text \
                else col[rows]
            pieces.append(([col.name], pd.Series(pd.array(text, dtype=strings))))
            continue
        ctx = _Ctx(pd, col.name, datetime, ensure_flag(how["safe"], "safe"),
                   written_from(col, finest) if finest else None,
                   how["zones"].get(col.name),
                   column_place(col.name, getattr(f, "path", None), how.get("joined", False)))
        got = _column_pieces(ctx, col, whole[id(col)] if whole else col[rows], vectors)
        if dtype_backend == "pyarrow":
            date = ctx.source is not None and ctx.source[0] == "date"   # written from date32
            got = [(names, _arrow_backed(pd, piece, date)) for names, piece in got]
        if [nm for names, _ in got for nm in names] != [col.name]:
            expanded.add(col.index)
        pieces.extend(got)
    schema = frame_schema(cols, lambda c: c.index in expanded, datetime == "ticks")
    df = _joined(pd, pieces, [c.name for c in cols], n)
    if row_index and index is not None:
        df.index = pd.Index(index)
    df.attrs[SCHEMA_ATTR] = schema
    return df


@_gc.paused_for(lambda pd, src, *_: len(src.files))
def _frame_of_files(pd, src, columns, parts, how):
    """frame() of a source of many files (`parts`: read_source.row_parts', in file order):
    one frame of the columns of all of them read as one (whole_read) where every column joins
    (no keys whose KeyValues differ, no rows= or filter=), else each file's frame, joined; one
    unit for a time column of every file."""
    keys = src.resolve_columns(columns)
    whole_read.check_slot_names(src, [k for k in keys
                                      if expands(src.schema[k].type, how["vectors"])])
    how = _one_unit(src, keys, how)
    files = range(len(src.files))
    every_row = bool(parts) and all(local is None for _, local in parts)
    if every_row and how["filter"] is None and keys and \
            all(whole_read.joinable(src, k, arrow=False) for k in keys):
        arrow_text = _arrow_strings(pd, how["dtype_backend"]) is not None
        got = whole_read.read(src, keys, 0, len(files), whole_read.Form(
            arrow=_arrow_text if arrow_text else None))
        with src.using(0) as first:
            values = {id(first[k]): _text_chunked(v) for k, v in zip(keys, got)}
            return _frame(pd, first, keys, None, dict(how, joined=True), False, values)
    frames = []
    for i, local in parts or [(0, slice(0, 0))]:     # no rows: the empty frame of the first
        with src.using(i) as f:
            frames.append(_frame(pd, f, keys, local,
                                 dict(how, warn_wide=how["warn_wide"] and not frames),
                                 False, None))
    return pandas_times.concat(pd, frames)


def _one_unit(src, keys, how):
    """`how` with one unit for a time column of every file of `src` (of columns `keys`)."""
    names = read_source.key_names(src, keys)
    return dict(how, **dict(zip(("datetime", "safe"),
                                src.time_unit(names, how["datetime"], how["safe"]))))


def _frame_of_parts(pd, src, columns, parts, how):
    """frame() of a source with constant columns (a hive-partitioned dataset's keys; `parts`:
    read_source.row_parts'): that of the files' columns (a filter's: of the files their
    constants do not rule out), and those."""
    keys, fixed = read_source.split(src, asked := src.resolve_columns(columns))
    node = read_source.filter_of(how["filter"])
    each, counts, frames = None if node is None else _one_unit(src, keys, how), [], []
    for i, local in parts:
        mine = read_source.decided(src, i, node)
        if mine is False:
            continue
        if each is not None:
            with src.using(i) as f:
                frames.append(_frame(pd, f, keys, local, dict(
                    each, filter=None if mine is True else mine,
                    warn_wide=each["warn_wide"] and not frames), False, None))
        n = src.files[i].num_rows if local is None else selection.count(
            local, src.files[i].num_rows)
        counts.append((i, len(frames[-1]) if frames else n))
    df = pandas_times.concat(pd, frames) if frames else _frame_of_files(
        pd, src, keys, [(0, slice(0, 0))] if node is not None else parts, dict(how, filter=None))
    values, at = read_source.joined_constants(src, fixed, counts), 0
    for k in asked:         # past a file column's own columns (its slots too)
        while k not in fixed and at < df.shape[1] and (
                df.columns[at] == k or str(df.columns[at]).startswith(f"{k}.")):
            at += 1
        if k in fixed:
            value = values[fixed.index(k)]
            if read_source.constant_types(src)[k] is T.Text:     # no rows: pandas' text too
                value = pd.array(value, dtype=_arrow_strings(pd, how["dtype_backend"]) or
                                 pd.Series([""]).dtype)
            df.insert(at, k, value)
            at += 1
    return df


def _arrow_text(col):
    """Form.arrow of pandas: scalar Text and variable-size vectors of Text straight from the
    blocks' UTF-8 into Arrow (whose to_numpy makes the vectors' cells and strings in C)."""
    t = col.type
    lists = isinstance(t, T.Vector) and t.item is T.Text and not t.is_fixed
    return text_reader(col) if t is T.Text or lists else None


def _text_chunked(value):
    """A whole read's value, its Text chunks (a list of Arrow arrays: strings, or lists of
    them) as one Arrow ChunkedArray (no chunks: of no rows, either way)."""
    if not isinstance(value, list):
        return value
    pa = require("pyarrow", "Arrow-backed text", "idv[arrow]")
    return pa.chunked_array(value, value[0].type if value else pa.string())


def _joined(pd, pieces, own, n):
    """The frame of `pieces` ((names, Series or frame) of each column, in order; `own`: the
    columns' names), `n` rows when there are none."""
    names = [nm for names, _ in pieces for nm in names]
    counts = {}
    for nm in names:
        counts[nm] = counts.get(nm, 0) + 1
    for nm in names:     # a slot name equal to another column's (file duplicates are kept)
        if counts[nm] > 1 and counts[nm] != own.count(nm):
            raise ValueError(f"expanding vectors gives the column name {nm!r} twice (it clashes "
                             f"with another column); use vectors='object'")
    if not pieces:
        return pd.DataFrame(index=pd.RangeIndex(n))
    df = pd.concat([b.reset_index(drop=True) for _, b in pieces], axis=1, ignore_index=True)
    df.columns = names
    return df


def _read_matching(f, cols, filter_, rows, vectors):
    """(file row numbers, id(column) -> read()'s values) of the rows matching (rows: a slice);
    a key with KeyValues, returned or tested (and a vector's slots of them that `vectors`
    expands), checked in every row decoded: a Categorical holds labels only, whatever the
    filter keeps."""
    keys = list(dict.fromkeys(c.index for c in cols))     # an index: that column, whatever
    within = None if rows is None else range(*rows.indices(f.num_rows))
    bound = filters.prepare(read_source.filter_of(filter_), f)    # checked, rows or none
    index, values = filters.matching(f, keys, bound, within, labels=vectors)
    return index, {id(c): values[c.index] for c in cols}


@_docs.fill
def read_pandas(source, columns=None, *, vectors="expand", datetime="auto", safe=True,
                threads=None, backend=None, dtype_backend=None, rows=None,
                filter=None, **kwargs):  # noqa: A002 - pandas' name
    """``idv.open(source)`` then to_pandas, the file closed after.

    Parameters
    ----------
    source, columns, vectors, datetime, safe, dtype_backend, rows, filter
        As to_pandas.
    {threads}
    {backend}
    **kwargs
        The other options of idv.open (``memory_limit=``...).

    Returns
    -------
    pandas.DataFrame
    """
    with opened(source, threads=threads, backend=backend, **kwargs) as f:
        return to_pandas(f, columns, vectors=vectors, datetime=datetime, safe=safe,
                         dtype_backend=dtype_backend, rows=rows, filter=filter)
