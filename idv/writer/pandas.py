"""pandas -> idv: ``from_pandas``, a DataFrame as idv.write's columns, types and metadata.

pandas is imported only when it is called (``pip install idv[pandas]``). A Categorical is a
key with its categories as KeyValues, zone-aware datetimes are DateTimeOffset, object columns
of lists are vectors; Arrow-backed columns go through idv.writer.arrow, the rest is typed by
idv.infer as numpy data is (docs/interop.md has the table).
"""
from __future__ import annotations

import datetime as _dt

import numpy as np

from idv import types as T
from idv.errors import require
from idv.infer import arrow_of, infer_column
from idv.vectors import Ragged
from idv.writer.arrow import arrow_column_values, from_arrow
from idv.writer.values import first

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


def _offsets_minutes(local, utc, name):
    diff = (local - utc).astype("timedelta64[s]").astype(np.int64)
    exact = (local - utc) == diff.astype("timedelta64[s]")
    bad = (diff % 60 != 0) | ~exact
    if bad.any():
        raise ValueError(f"column {name!r} row {first(bad)}: the UTC offset is not a whole "
                         f"number of minutes, which .NET's DateTimeOffset needs")
    return diff // 60


def _tz_aware(pd, s, name):
    nat = s.isna().to_numpy()
    if nat.any():
        raise ValueError(f"column {name!r} row {first(nat)}: NaT (DateTimeOffset has no "
                         f"missing value in ML.NET)")
    utc = s.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy()
    local = s.dt.tz_localize(None).to_numpy()
    out = np.empty(len(s), [("utc", utc.dtype), ("offset_minutes", np.int64)])
    out["utc"] = utc
    out["offset_minutes"] = _offsets_minutes(local, utc, name)
    return out


def _aware_objects(pd, arr, name):
    """Objects that are all zone-aware datetimes -> DateTimeOffset values, else None."""
    if not len(arr) or not all(isinstance(x, _dt.datetime) and x.tzinfo is not None
                               and x.utcoffset() is not None for x in arr):
        return None
    utc = pd.to_datetime(pd.Series(arr, dtype=object), utc=True).dt.tz_localize(None).to_numpy()
    offsets = [x.utcoffset() for x in arr]
    secs = np.array([o.days * 86400 + o.seconds for o in offsets], dtype=np.int64)
    micro = np.array([o.microseconds for o in offsets], dtype=np.int64)
    bad = (secs % 60 != 0) | (micro != 0)
    if bad.any():
        raise ValueError(f"column {name!r} row {first(bad)}: the UTC offset is not a whole "
                         f"number of minutes, which .NET's DateTimeOffset needs")
    out = np.empty(len(arr), [("utc", utc.dtype), ("offset_minutes", np.int64)])
    out["utc"] = utc
    out["offset_minutes"] = secs // 60
    return out


def _object_values(pd, s, name):
    arr = s.to_numpy(dtype=object)
    first = next((x for x in arr if x is not None and not (isinstance(x, float) and x != x)),
                 None)
    if isinstance(first, (list, tuple, np.ndarray)):
        bad = [i for i, x in enumerate(arr) if not isinstance(x, (list, tuple, np.ndarray))]
        if bad:
            raise TypeError(f"column {name!r} row {bad[0]}: {arr[bad[0]]!r} in a column of "
                            f"vectors (ML.NET vectors have no missing value)")
        lengths = {np.size(x) for x in arr}
        if len(lengths) > 1:
            # the item dtype from the non-empty rows (an empty list alone would say float64)
            kinds = [np.asarray(x).dtype for x in arr if np.size(x)]
            dtype = np.result_type(*kinds) if kinds and object not in kinds else None
            return Ragged.from_list(list(arr), dtype=dtype), None
        return list(arr), None
    dto = _aware_objects(pd, arr, name)
    if dto is not None:
        return dto, T.DateTimeOffset
    return arr, None


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
        return _tz_aware(pd, s, name), T.DateTimeOffset, None
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
                raise ValueError(f"column {name!r} row {first(na)}: missing value in a string "
                                 f"column; ML.NET's Text has none (it reads null as \"\"): "
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
            raise ValueError(f"column {name!r} row {first(na)}: missing value (<NA>) in a "
                             f"nullable {dtype} column; ML.NET's {dtype.numpy_dtype} type has "
                             f"no missing value: fill it (fillna) or cast to float (NaN)")
        return s.to_numpy(dtype=dtype.numpy_dtype), None, None
    if dtype == object:
        values, t = _object_values(pd, s, name)
        return values, t, None
    return s.to_numpy(), None, None


def from_pandas(df, *, types=None):
    """A DataFrame (or Series) -> (columns, types, metadata) for idv.write.

    ``columns``: a list of (name, values); ``types``: name -> idv type; ``metadata``: name ->
    {kind: value}. A Categorical becomes Key<UInt32, len(categories)> (raw = code + 1, NaN ->
    0, the missing key) with the categories as KeyValues; zone-aware datetimes become
    DateTimeOffset (each value's UTC offset, whole minutes); object columns of lists or arrays
    become vectors (fixed size when all rows have the same length, else variable size); the rest
    is typed as idv.write types numpy data. Nullable integer or Boolean columns holding <NA>,
    and string columns holding missing values, raise (ML.NET has no missing value for them);
    nullable floats give NaN. The index is not written (``df.reset_index()`` keeps it).
    ``types`` overrides the type of some columns.
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
    overrides = dict(types or {})
    unknown = [k for k in overrides if k not in names]
    if unknown:
        raise KeyError(f"types for unknown columns {unknown}; columns: {names}")
    columns, out_types, metadata = [], {}, {}
    for i, name in enumerate(names):
        s = df.iloc[:, i]
        override = overrides.get(name)
        values, t, meta = _series_values(pd, s, name, override)
        if override is not None:
            t = override
        elif t is None:
            t, values = infer_column(values, f"column {name!r}")
        columns.append((name, values))
        out_types[name] = t
        if meta:
            metadata[name] = meta
    return columns, out_types, metadata
