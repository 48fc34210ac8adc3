"""The ML.NET type of Python values: numpy arrays, lists, idv.Ragged / idv.Sparse, scipy.sparse
matrices, pandas Series (their numpy values) and metadata values.

idv.write, idv.from_pandas and the metadata encoder ask here when no type is given.
`infer_column` also hands back the values in the form the writer converts them from, so that a
list of rows is flattened once, here, and not again by the writer.
"""
from __future__ import annotations

import datetime as _dt
import numbers

import numpy as np

from idv import _encode, types as T
from idv._values import ticks
from idv._values.vectors import Ragged, Sparse, object_array
from idv.errors import Where

_INFER_SAMPLE = 4096      # rows of an object column looked at to infer its type
_ROWLIKE_SAMPLE = 1000    # rows looked at to tell a column of vectors


def is_scipy_sparse(value):
    """Whether `value` is a scipy.sparse matrix (told by its attributes: scipy is optional)."""
    return hasattr(value, "tocsr") and hasattr(value, "nnz") and hasattr(value, "shape")


_ROWS = (list, tuple, np.ndarray, Ragged, Sparse)     # what a cell holding a vector is


def is_rowlike(x):
    """Whether a cell holds a vector (a sequence of items) rather than one item."""
    return isinstance(x, _ROWS) or is_scipy_sparse(x)


def first_rowlike(values):
    """The position of the first cell of `values` (a 1-d object array) that holds a vector,
    or None; the kinds of cells looked at first (one pass over their types), each cell only
    where some kind may be one (is_scipy_sparse tells a class as it tells a matrix)."""
    if not any(issubclass(k, _ROWS) or is_scipy_sparse(k) for k in set(map(type, values))):
        return None
    return next((i for i, x in enumerate(values) if is_rowlike(x)), None)


def values_of(value, where="value"):
    """pandas Series / Index and similar: their numpy values (zone-aware datetimes as
    DateTimeOffset's structured values, each with its offset); anything else as it is.
    `where`: the column, or an idv.errors.Where naming its rows."""
    if ticks.is_zoned(value):
        return ticks.zoned_values(value, where if callable(where) else Where(where))
    if hasattr(value, "to_numpy") and not isinstance(value, (np.ndarray, Ragged)) \
            and not is_scipy_sparse(value):
        return value.to_numpy()
    return value


def arrow_of(value):
    """The Arrow data behind a column's values, or None: a pyarrow Array or ChunkedArray as it
    is, and the Arrow arrays of pandas' Arrow-backed Series and arrays (``string[pyarrow]``,
    pandas 3's ``str``, ``ArrowDtype``), without a copy. Told by attributes: neither pyarrow
    nor pandas is imported here."""
    top = type(value).__module__.split(".")[0]
    if top == "pyarrow" and hasattr(value, "null_count") and hasattr(value, "type"):
        return value
    if top == "pandas":
        dtype = getattr(value, "dtype", None)
        if getattr(dtype, "storage", None) in ("pyarrow", "pyarrow_numpy") \
                or hasattr(dtype, "pyarrow_dtype"):
            array = getattr(value, "array", value)      # a Series' ExtensionArray
            if hasattr(array, "__arrow_array__"):
                return array.__arrow_array__()
    return None


def row_length(x, where, i):
    """The number of items of row `i` of a column of vectors."""
    if isinstance(x, np.ndarray):
        return x.size
    if isinstance(x, (list, tuple)):
        return len(x)
    not_a_vector(f"{where} row {i}", x)


def not_a_vector(place, x):
    """The error for `x` at `place`, a row of a column of vectors, whatever the data came in:
    a missing value (None, NaN, pandas' NA, an Arrow null) a ValueError, else a TypeError."""
    if is_missing(x):
        raise ValueError(f"{place}: a missing vector ({x!r}); ML.NET's vectors have no missing "
                         f"value: use an empty list for no items (a variable-size vector)")
    raise TypeError(f"{place}: expected a sequence of items (a vector), got {type(x).__name__}")


def flatten_rows(rows, where, row0=0):
    """All items of a sequence of rows (lists, tuples, arrays) as one 1-d array (`row0`: the
    first row's number, for the messages)."""
    if all(isinstance(r, np.ndarray) for r in rows):
        if not len(rows):
            return np.zeros(0)
        return np.concatenate([r.reshape(-1) for r in rows])
    flat = []
    for i, r in enumerate(rows):
        if isinstance(r, np.ndarray):
            flat.extend(r.reshape(-1).tolist() if r.dtype != object else list(r.reshape(-1)))
        elif isinstance(r, (list, tuple)):
            flat.extend(r)
        else:
            not_a_vector(f"{where} row {row0 + i}", r)
    if flat and all(type(x) is str for x in flat):
        return object_array(flat)
    try:
        out = number_array(flat)
    except (ValueError, TypeError, OverflowError):
        out = object_array(flat)
    if out.ndim != 1:   # items that are themselves sequences
        out = object_array(flat)
    if out.dtype.kind == "U" and not all(type(x) is str for x in flat):
        out = object_array(flat)
    return out


_SINGLE_EXACT = 2**24      # every integer up to this size has a float32 of its own


def is_missing(value):
    """Whether a Python value among others is a missing one: None, NaN, pandas' NA or NaT,
    numpy's NaT (as pandas says; told by the type, pandas not imported)."""
    return value is None or (isinstance(value, float) and value != value) or (
        type(value).__name__ in ("NAType", "NaTType")
        and type(value).__module__.startswith("pandas")) or (
        isinstance(value, (np.datetime64, np.timedelta64)) and np.isnat(value))


def missing_positions(values):
    """The positions of the missing values (is_missing) in the list `values`; the kinds of
    values present looked at first, so that a column holding no kind that can be missing
    costs no test of each value."""
    kinds = set(map(type, values))
    if not any(k is type(None) or issubclass(k, (float, np.floating, np.datetime64,
                                                   np.timedelta64))
               or k.__name__ in ("NAType", "NaTType") for k in kinds):
        return []
    if all(issubclass(k, (float, np.floating, int, np.integer)) for k in kinds):
        try:                            # numbers alone: their NaN found in one pass
            return np.flatnonzero(np.isnan(np.asarray(values, dtype=np.float64))).tolist()
        except OverflowError:           # an int beyond float64: one by one
            pass
    return [i for i, x in enumerate(values) if is_missing(x)]


def number_array(values):
    """np.array of a list of items, but an object array where numpy would take ints through
    a float and a float type could round them (``np.array([2**63 + 1, 1])`` is float64; 2**24
    + 1 beside a float, given Single), so that they convert exactly or are refused."""
    out = np.array(values)
    if out.dtype.kind != "f" or out.ndim != 1:
        return out
    # the values that may have been such ints: integral, beyond Single's exact range
    maybe = np.flatnonzero((np.abs(out) > _SINGLE_EXACT) & (out == np.trunc(out)))
    if len(maybe) and any(not isinstance(values[i], float) and
                          isinstance(values[i], numbers.Integral) for i in maybe.tolist()):
        return object_array(values)
    return out


def _int_type(arr, at):
    """Int64 for Python ints that all fit it, else UInt64 for ones that all fit that (as
    pandas infers them); else ValueError naming the value that no 64-bit type holds (`at(i)`
    names position i)."""
    values = [int(x) for x in arr]
    lo, hi = min(values), max(values)
    if lo >= ticks.INT64_MIN and hi <= ticks.INT64_MAX:
        return T.Int64
    if lo >= 0 and hi <= 2**64 - 1:
        return T.UInt64
    if lo < ticks.INT64_MIN or hi > 2**64 - 1:
        i = next(i for i, x in enumerate(values) if not ticks.INT64_MIN <= x <= 2**64 - 1)
        raise ValueError(f"{at(i)}: {values[i]} is outside every 64-bit integer type (Int64, "
                         f"UInt64)")
    raise ValueError(f"{at(values.index(hi))}: {hi} needs UInt64, but {at(values.index(lo))} "
                     f"holds the negative {lo}: no 64-bit integer type holds both")


def _item_of(values, where):
    """The item type of a 1-d array of items: from its dtype, else from the objects."""
    item = T.item_from_dtype(values.dtype, where)
    if item is None:
        item, _ = _infer_objects(values, where, allow_rows=False)
    return item


def infer_column(value, where="value"):
    """(type, values): the ML.NET column type for a column's data (see idv.write), and the
    values to convert: a pandas Series' numpy values, a list of equal-length rows as the 2-d
    array of its items; anything else as given."""
    value = values_of(value, where)
    if isinstance(value, Ragged):
        return T.Vector(_item_of(value.values, where)), value
    if is_scipy_sparse(value):
        if len(value.shape) != 2:
            raise ValueError(f"{where}: a sparse matrix must be 2-d, not {value.shape}")
        return T.Vector(T.item_from_dtype(value.dtype, where), value.shape[1]), value
    if isinstance(value, Sparse):
        item = _item_of(value.values, where)
        if isinstance(value.length, int):
            return T.Vector(item, value.length), value
        return T.Vector(item), value
    if isinstance(value, np.ndarray):
        arr = value
    elif isinstance(value, (list, tuple)):
        arr = object_array(value)
    else:
        raise TypeError(f"{where}: expected a numpy array, list, idv.Ragged or scipy.sparse "
                        f"matrix, not {type(value).__name__}")
    if arr.ndim == 0:
        raise ValueError(f"{where}: a column needs one value per row, got a scalar")
    item = T.item_from_dtype(arr.dtype, where)
    if item is None:
        if arr.ndim > 1:
            flat = arr.reshape(-1)
            return T.Vector(_item_of(flat, where), *arr.shape[1:]), value
        t, rows = _infer_objects(arr, where, allow_rows=True)
        return t, (value if rows is None else rows)
    if arr.ndim > 1:
        return T.Vector(item, *arr.shape[1:]), value
    return item, value


def infer_type(value, where="value"):
    """The ML.NET column type for a column's data (see idv.write)."""
    return infer_column(value, where)[0]


def _infer_objects(arr, where, allow_rows):
    """(item or fixed vector type, rows) of a 1-d object array, from its values; `rows` is the
    2-d array of the items when the cells are vectors, else None."""
    # str throughout the first rows: Text (an empty object column too, as read() gives).
    # Converting the column checks every value again, naming the row of any that is not.
    if _encode.first_non_str(np.ascontiguousarray(arr[:_INFER_SAMPLE])) < 0:
        return T.Text, None
    # str with None or NaN: Text with missing values, which its writing refuses (or fills,
    # given missing_text)
    if any(isinstance(x, str) for x in arr) and all(
            isinstance(x, str) or is_missing(x) for x in arr):
        return T.Text, None
    if allow_rows and any(is_rowlike(arr[i]) for i in range(min(len(arr), _ROWLIKE_SAMPLE))):
        lengths = [row_length(x, where, i) for i, x in enumerate(arr)]
        flat = flatten_rows(arr, where)
        # arrays of one shape of 2 dimensions or more keep it, as a numpy array of them does;
        # of several shapes, one of them 2-d or more, no shape is the column's
        shapes = {x.shape if isinstance(x, np.ndarray) else None for x in arr}
        if len(shapes) > 1 and any(s is not None and len(s) > 1 for s in shapes):
            a, b = sorted(shapes, key=str)[:2]
            raise ValueError(f"{where}: rows of different shapes ({a} and {b}); give them one "
                             f"shape, or flatten them")
        if len(set(lengths)) > 1:   # a variable-size vector, as pandas, Arrow, polars make them
            return T.Vector(_item_of(flat, where)), None
        dims = shapes.pop() if len(shapes) == 1 else None
        dims = dims if dims is not None and len(dims) > 1 else (lengths[0],)
        return T.Vector(_item_of(flat, where), *dims), flat.reshape(len(arr), *dims)
    try:
        conv = number_array(arr.tolist())
    except (ValueError, TypeError, OverflowError):
        conv = None
    if conv is not None and conv.dtype != object and conv.dtype.kind not in "USV" \
            and conv.ndim == 1:
        return T.item_from_dtype(conv.dtype, where), None
    at = Where(str(where)) if allow_rows else (lambda i: f"{where} item {i}")
    if len(arr) and all(isinstance(x, numbers.Integral) for x in arr):
        return _int_type(arr, at), None
    missing = missing_positions(arr.tolist())
    if missing and len(missing) < len(arr):
        return _type_beside_missing(np.delete(arr, missing), where), None
    if len(arr) and len(missing) == len(arr):
        only_missing(where)
    if conv is not None and conv.dtype == object and all(
            isinstance(x, (numbers.Integral, float, np.floating)) for x in arr):
        return T.Double, None      # big ints among floats: refused unless Double holds them
    kinds = {}
    for i, x in enumerate(arr):
        kinds.setdefault(type(x).__name__, i)
        if len(kinds) > 1:
            break
    if all(isinstance(x, _dt.datetime) for x in arr):
        aware = ticks.all_aware(arr, at)
        return (T.DateTimeOffset if aware else T.DateTime), None
    if all(isinstance(x, _dt.timedelta) for x in arr):
        return T.TimeSpan, None
    if all(type(x) is _dt.date for x in arr):      # midnight, as pandas' dates are written
        return T.DateTime, None
    i = None if allow_rows else first_rowlike(arr)
    if i is not None:
        raise TypeError(f"{where}: lists inside a vector (a {type(arr[i]).__name__} at item "
                        f"{i}): ML.NET's vectors hold items, not lists; flatten the rows, or "
                        f"give them one shape as numpy arrays (a multi-dimensional vector)")
    desc = ", ".join(f"{k} at {'row' if allow_rows else 'item'} {i}" for k, i in kinds.items())
    raise TypeError(f"{where}: mixed or unsupported objects ({desc}) have no ML.NET type")


def only_missing(where):
    """TypeError: a column of only missing values, from which no type can be told."""
    raise TypeError(f"{where}: a column of only missing values (None, NaN or nulls) has no "
                    f"ML.NET type; give it one (types=...)")


def _type_beside_missing(present, where):
    """The type of a column of objects whose missing values (None, NaN, pandas' NA) are
    set aside: numbers beside them are Double, as numpy and pandas make ``[1, nan]``, their
    missing values its NaN; any other type is that of the values present, and its conversion
    refuses a missing value, naming its row (only Single, Double, keys and Text hold one)."""
    t, _ = _infer_objects(present, where, allow_rows=False)
    if t is not T.Boolean and np.dtype(getattr(t, "dtype", object)).kind in "iuf":
        return T.Double
    return t


def infer_metadata_type(value, where):
    """The ML.NET type of one metadata value: a str, bool, number, date, duration, or a
    sequence / array / sparse row of them (a vector)."""
    if isinstance(value, str):
        return T.Text
    if isinstance(value, (bool, np.bool_)):
        return T.Boolean
    if is_scipy_sparse(value):
        if value.shape[0] != 1:
            raise ValueError(f"{where}: a sparse metadata vector must have one row, not "
                             f"{value.shape}")
        return T.Vector(T.item_from_dtype(value.dtype, where), value.shape[1])
    if isinstance(value, Sparse):
        if len(value) != 1:
            raise ValueError(f"{where}: a sparse metadata vector must have one row, not "
                             f"{len(value)}")
        return infer_type(value, where)
    if isinstance(value, (list, tuple, np.ndarray)):
        arr = value if isinstance(value, np.ndarray) else object_array(value)
        if arr.ndim == 0:
            return infer_metadata_type(arr[()], where)
        if arr.size == 0:
            raise TypeError(f"{where}: cannot infer the type of an empty vector; give it as "
                            f"(type, value)")
        return T.Vector(_item_of(arr.reshape(-1), where), *arr.shape)
    if isinstance(value, (int, float, np.generic)):
        item = T.item_from_dtype(np.asarray(value).dtype, where)
        if item is None:
            raise TypeError(f"{where}: {value!r} has no ML.NET type")
        return item
    if isinstance(value, _dt.datetime):
        return T.DateTime
    if isinstance(value, _dt.timedelta):
        return T.TimeSpan
    raise TypeError(f"{where}: cannot infer an ML.NET type for {type(value).__name__}; give it "
                    f"as (type, value)")
