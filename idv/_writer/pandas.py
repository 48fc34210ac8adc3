"""pandas -> idv: ``from_pandas``, a DataFrame as idv.write's columns, types and metadata.

pandas is imported only when it is called (``pip install idv[pandas]``). A Categorical is a
key with its categories as KeyValues, zone-aware datetimes are DateTimeOffset, object columns
of lists are vectors; Arrow-backed columns go through idv._writer.arrow, the rest is typed by
idv._values.infer as numpy data is (docs/interop.md has the table).
"""
from __future__ import annotations

import datetime as _dt

import numpy as np

from idv._values import ticks
from idv import types as T
from idv._values.metadata import SCHEMA_ATTR, frame_schema_columns
from idv._values.time_zones import SOURCE_TYPE, source_type
from idv.errors import Where, require
from idv._values.infer import arrow_of, infer_column, not_a_vector
from idv._values.vectors import Ragged
from idv._writer.arrow import arrow_column_values, from_arrow
from idv._writer.missing import ensure_missing_text, missing_value
from idv._writer.values import first

__all__ = ["from_pandas"]


def _categorical(pd, s, name, override):
    cats = s.cat.categories
    if override is not None and not isinstance(T.as_type(override, f"column {name!r}"), T.Key):
        return s.to_numpy(dtype=object), None
    n = len(cats)
    if n == 0:
        raise ValueError(f"column {name!r}: a Categorical with no categories cannot be a key "
                         f"(ML.NET key counts are > 0)")
    codes = np.asarray(s.cat.codes.to_numpy(), dtype=np.int64)
    raw_type = T.UInt32 if n <= 2**32 - 1 else T.UInt64
    raw = (codes + 1).astype(raw_type.dtype)
    kv = cats.to_numpy()
    if kv.dtype == object or kv.dtype.kind == "U":
        kv = np.asarray(kv, dtype=object)
    return raw, (T.Key(raw_type, count=n), {"KeyValues": kv})


def _object_values(pd, s, name):
    arr = s.to_numpy(dtype=object)
    first = next((x for x in arr if x is not None and not (isinstance(x, float) and x != x)),
                 None)
    if isinstance(first, (list, tuple, np.ndarray)):
        for i, x in enumerate(arr):     # rows of any lengths: inferred as a list's are
            if not isinstance(x, (list, tuple, np.ndarray)):
                not_a_vector(f"column {name!r} row {i}", x)
        return list(arr), None
    dto = ticks.aware_objects(arr, Where(f"column {name!r}"))
    if dto is not None:
        return dto, T.DateTimeOffset
    missing = np.asarray(pd.isna(arr), dtype=bool).reshape(-1) if len(arr) else None
    present = arr if missing is None or not missing.any() else arr[~missing]
    if not len(present):
        return arr, None
    if isinstance(present[0], str) and missing is not None and missing.any() \
            and all(isinstance(x, str) for x in present):
        row = int(np.flatnonzero(missing)[0])
        missing_value(f"column {name!r} row {row}", T.Text, repr(arr[row]),
                      f"fill it first, e.g. df[{name!r}].fillna(\"\")")
    if type(present[0]) is _dt.date and all(type(x) is _dt.date for x in present):
        return np.array(arr, dtype="datetime64[D]"), T.DateTime    # dates: midnight
    return arr, None


def _filled_text(pd, df, missing_text):
    """The frame with missing values (None, NaN, <NA>) in its text columns (string dtype, or
    objects that are all str otherwise) replaced by `missing_text`."""
    ensure_missing_text(missing_text)
    out = None
    for i in range(df.shape[1]):
        s = df.iloc[:, i]
        text = pd.api.types.is_string_dtype(s.dtype) and not isinstance(
            s.dtype, pd.CategoricalDtype)
        if not text or not s.isna().any():
            continue
        if s.dtype == object and not all(isinstance(x, str) for x in s[s.notna()]):
            continue
        out = df.copy() if out is None else out
        out.isetitem(i, s.fillna(missing_text))
    return df if out is None else out


def _series_values(pd, s, name, override):
    """(values, type or None, metadata or None) of one Series."""
    dtype = s.dtype
    api = pd.api.types
    if isinstance(dtype, pd.CategoricalDtype):
        values, key = _categorical(pd, s, name, override)
        if key is None:
            return values, None, None
        return values, key[0], key[1]
    if isinstance(dtype, pd.DatetimeTZDtype):
        return ticks.zoned_values(s, Where(f"column {name!r}")), T.DateTimeOffset, None
    if isinstance(dtype, pd.SparseDtype):
        return _series_values(pd, s.sparse.to_dense(), name, override)
    arrow_dtype = getattr(pd, "ArrowDtype", None)
    if arrow_dtype is not None and isinstance(dtype, arrow_dtype):
        import pyarrow as pa
        table = pa.table({name: pa.array(s.array)})
        cols, col_types, meta = from_arrow(table, types={name: override} if override else None)
        return cols[0][1], col_types[name], meta.get(name)
    if isinstance(dtype, pd.StringDtype) or (api.is_string_dtype(dtype) and dtype != object):
        arrow = arrow_of(s)      # string[pyarrow], pandas 3's str: written from Arrow's buffers
        if arrow is None or arrow.null_count:
            na = s.isna().to_numpy()
            if na.any():
                missing_value(f"column {name!r} row {first(na)}", T.Text,
                              repr(s.iloc[first(na)]),
                              f"fill it first, e.g. df[{name!r}].fillna(\"\")")
        if arrow is not None:
            return arrow_column_values(arrow, T.Text, name), T.Text, None
        return s.to_numpy(dtype=object), None, None
    if api.is_extension_array_dtype(dtype):
        kind = getattr(getattr(dtype, "numpy_dtype", None), "kind", None)
        if kind is None:
            raise TypeError(f"column {name!r}: pandas dtype {dtype} has no ML.NET type")
        na = s.isna().to_numpy()
        if na.any():
            if kind == "f":
                return s.to_numpy(dtype=dtype.numpy_dtype, na_value=np.nan), None, None
            item = None if override is None else T.item_type(T.as_type(override))
            if isinstance(item, T.Key):
                return s.to_numpy(dtype=dtype.numpy_dtype, na_value=0), None, None  # missing
            if item in (T.Single, T.Double):    # NaN; each int converted (checked) exactly
                return s.to_numpy(dtype=object, na_value=np.nan), None, None
            missing_value(f"column {name!r} row {first(na)}",
                          T.item_from_dtype(dtype.numpy_dtype, f"column {name!r}"), "<NA>",
                          f"fill it first (df[{name!r}].fillna(...))")
        return s.to_numpy(dtype=dtype.numpy_dtype), None, None
    if dtype == object:
        values, t = _object_values(pd, s, name)
        return values, t, None
    return s.to_numpy(), None, None


def _fits(target, inferred, meta, spec):
    """Whether a frame column typed `inferred` by itself (with `meta` from a Categorical)
    still holds the values of the ML.NET type `target` that the frame's schema names."""
    if isinstance(target, T.Vector):
        if not isinstance(inferred, T.Vector):
            return False
        if target.is_fixed and (not inferred.is_fixed or inferred.size != target.size):
            return False
        return _fits(target.item, inferred.item, meta, spec)
    if isinstance(target, T.Key):
        if isinstance(inferred, T.Key):      # a Categorical: the same categories
            kv = spec.get("KeyValues")
            got = (meta or {}).get("KeyValues")
            return (inferred.count == target.count and kv is not None and got is not None
                    and np.asarray(kv[1]).tolist() == np.asarray(got).tolist())
        return inferred == target.raw        # raw key numbers
    return inferred == target


def _typed_values(pd, s, name):
    """(values, type, metadata) of one Series as from_pandas types it by itself; type None
    when it cannot."""
    values, t, meta = _series_values(pd, s, name, None)
    if t is None:
        try:
            t, values = infer_column(values, f"column {name!r}")
        except (TypeError, ValueError):
            return values, None, None
    return values, t, meta


def _from_ticks(target, values, t):
    """(values, type): int64 .NET ticks (idv.to_pandas's datetime="ticks") as the DateTime /
    TimeSpan values (or vectors of them) that `target` holds; other values as they are."""
    item = target.item if isinstance(target, T.Vector) else target
    if item not in (T.DateTime, T.TimeSpan) or (t.item if isinstance(t, T.Vector) else t) \
            is not T.Int64:
        return values, t

    def convert(v):
        v = np.asarray(v, dtype=np.int64)
        return ticks.from_net_ticks(v) if item is T.DateTime else v.view(T.TIMESPAN_DTYPE)
    if isinstance(values, Ragged):
        values = Ragged(convert(values.values), values.offsets)
    elif isinstance(values, list):
        values = [convert(v) for v in values]
    else:
        values = convert(values)
    if isinstance(t, T.Vector):
        return values, T.Vector(item, *t.dims)
    return values, item


def _schema_values(pd, df, target, spec, names, expanded, as_ticks=False):
    """The values of frame columns `names` as one column of the ML.NET type `target` (a
    vector regrouped from its slot columns when `expanded`, a key from a Categorical or raw
    numbers), or None when the frame no longer holds that type (then its columns are written
    as they are)."""
    item = target.item if isinstance(target, T.Vector) else target
    if isinstance(item, T.Key) and item.min:
        raise ValueError(f"column {names[0]!r}: {target} is a legacy ML.NET 0.x key (with a "
                         f"min), which ML.NET 1.x cannot load; convert its file first with "
                         f"idv.convert(src, dst, legacy_keys='shift') (idv convert: "
                         f"--legacy-keys shift), or give the column another type in types=")
    if not len(df):
        return _no_rows(target)
    parts = []
    item = target.item if expanded else target
    for nm in names:
        s = df[nm]
        if item is T.RowId and s.dtype == object:
            parts.append(s.to_numpy(dtype=object))
            continue
        if item is T.Text and expanded:
            if s.isna().any() or not pd.api.types.is_string_dtype(s.dtype):
                return None
            parts.append(s.to_numpy(dtype=object))
            continue
        values, t, meta = _typed_values(pd, s, nm)
        if as_ticks and t is not None:
            values, t = _from_ticks(item, values, t)
        if t is None or not _fits(item, t, meta, spec):
            return None
        if isinstance(item, T.Key) and isinstance(values, np.ndarray):
            values = values.astype(item.dtype)
        parts.append(values)
    if not expanded:
        return parts[0]
    return np.stack(parts, axis=1).reshape((len(df),) + tuple(target.dims))


def _no_rows(t):
    """A column of type t with no rows (a frame without rows types its columns as nothing)."""
    item = t.item if isinstance(t, T.Vector) else t
    dtype = object if item is T.Text else item.dtype
    if not isinstance(t, T.Vector):
        return np.empty(0, dtype)
    if t.is_fixed:
        return np.empty((0,) + tuple(t.dims), dtype)
    return Ragged.from_list([], dtype=dtype)


def _columns_by_schema(pd, df, names, schema, overrides):
    """[(name, frame column names, (type, metadata spec) or None)] in the frame's order: the
    columns the schema `schema` (a SCHEMA_ATTR text) still describes regrouped (a vector's
    slot columns into one), the others one by one."""
    position = {n: i for i, n in enumerate(names)}
    groups = {}
    if schema is not None:
        for name, t, spec, cols, as_ticks in frame_schema_columns(schema):
            at = [position.get(c) for c in cols]
            if None in at or any(i in groups for i in at) \
                    or (cols != [name] and any(c in overrides for c in cols)):
                continue
            if cols != [name] and name in position:
                continue      # the vector's name is also a frame column's
            for i in at:
                groups[i] = None
            groups[min(at)] = (name, cols, (t, spec, as_ticks))
    out = []
    for i, n in enumerate(names):
        if i not in groups:
            out.append((n, [n], None))
        elif groups[i] is not None:
            out.append(groups[i])
    return out


def from_pandas(df, *, types=None, schema=None, missing_text=None):
    """A DataFrame (or Series) -> (columns, types, metadata) for idv.write.

    A Categorical becomes Key<UInt32, len(categories)> (raw = code + 1, NaN ->
    0, the missing key) with the categories as KeyValues; zone-aware datetimes become
    DateTimeOffset (each value's UTC offset, whole minutes); object columns of lists or arrays
    become vectors (fixed size when all rows have the same length, else variable size); the rest
    is typed as idv.write types numpy data. Nullable integer or Boolean columns holding <NA>,
    and string columns holding missing values, raise (ML.NET has no missing value for them);
    nullable floats give NaN. The index is not written (``df.reset_index()`` keeps it).
    ``datetime.date`` objects are DateTime (midnight).

    A frame from idv.to_pandas carries its ML.NET schema in ``df.attrs["idv.schema"]``
    (``schema`` gives one instead): the columns it still describes are written with their
    ML.NET types and metadata, a vector's slot columns (``Features.0`` ...) regrouped into one
    ``Vector`` column, keys with their exact raw type and KeyValues. A column whose values no
    longer fit its type there (changed dtype, other categories), or whose slot columns are not
    all in the frame, is written as it is, as is every column of a frame without the schema.

    Parameters
    ----------
    df : pandas.DataFrame or pandas.Series
    types : dict, optional
        name -> idv type, overriding the type of some columns.
    schema : optional
        An ML.NET schema instead of the frame's ``df.attrs["idv.schema"]``.
    missing_text : str, optional
        What None / NaN / <NA> in a text column (string dtype, or objects that are otherwise
        all str) become, e.g. ``""`` (ML.NET reads missing text as empty); by default they
        raise, naming the column and row.

    Returns
    -------
    tuple
        (columns, types, metadata): a list of (name, values), name -> idv type, and name ->
        {kind: value}.
    """
    pd = require("pandas", "converting to or from pandas", "idv[pandas]")
    if isinstance(df, pd.Series):
        df = df.to_frame()
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"from_pandas takes a pandas DataFrame, not {type(df).__name__}")
    names = [str(c) for c in df.columns]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"duplicate column names {dup}: an .idv written from Python needs "
                         f"distinct names")
    if schema is None:
        schema = df.attrs.get(SCHEMA_ATTR)
    if missing_text is not None:
        df = _filled_text(pd, df, missing_text)
    overrides = dict(types or {})
    frame = df.set_axis(names, axis=1) if list(df.columns) != names else df
    groups = _columns_by_schema(pd, frame, names, schema, overrides)
    known = set(names) | {g[0] for g in groups}
    unknown = [k for k in overrides if k not in known]
    if unknown:
        raise KeyError(f"types for unknown columns {unknown}; columns: {names}")
    columns, out_types, metadata = [], {}, {}
    for name, cols, described in groups:
        override = overrides.get(name)
        values = None
        expanded = cols != [name]
        if described is not None:
            target, spec, as_ticks = described
            values = _schema_values(pd, frame, override or target, spec, cols, expanded,
                                    as_ticks)
        if values is None and expanded:      # the slot columns as they are
            for nm in cols:
                _add_column(pd, frame, nm, overrides.get(nm), columns, out_types, metadata)
            continue
        if values is None:
            _add_column(pd, frame, name, override, columns, out_types, metadata)
            continue
        columns.append((name, values))
        out_types[name] = override or target
        meta = {k: v for k, v in spec.items()}
        if meta:
            metadata[name] = meta
    return columns, out_types, metadata


def _add_column(pd, df, name, override, columns, out_types, metadata):
    """One frame column as from_pandas types it by itself (or as `override` says)."""
    values, t, meta = _series_values(pd, df[name], name, override)
    if override is not None:
        t = override
    elif t is None:
        t, values = infer_column(values, f"column {name!r}")
    columns.append((name, values))
    out_types[name] = t
    written_from = source_type(dtype=df[name].dtype)
    if written_from is not None and t in ticks.TIME_ITEMS:
        meta = dict(meta or {})
        meta.setdefault(SOURCE_TYPE, (T.Text, written_from))
    if meta:
        metadata[name] = meta
