"""The writing API: ``idv.write(dest, data)`` and the streaming ``idv.Writer``.

Files come out laid out exactly as ML.NET's BinarySaver writes them with
``DeterministicBlockOrder``: a 256-byte header, the data blocks block-major and
column-interleaved (block 0 of every column, then block 1 ...), the lookup tables, each
column's metadata blocks followed by its metadata TOC, the column TOC, the tail signature. With
zlib DEFLATE (the default backend) the bytes equal ML.NET's own output for the same data.

Input is converted and checked column by column before anything is written: a bad value raises
TypeError or ValueError naming the column and the row. Output goes to a temporary file beside
the destination that is renamed over it only when ``close()`` succeeds.
"""
from __future__ import annotations

import collections
import math
import os
import struct
import tempfile
import threading
import warnings

import numpy as np

from idv import _compression, _encode, _header, _lookup, _threads, _toc
from idv import types as T
from idv.vectors import Ragged

DEFAULT_MAX_ROWS_PER_BLOCK = 8192          # ML.NET's BinarySaver MaxRowsPerBlock
DEFAULT_MAX_BYTES_PER_BLOCK = 80 << 20     # ... and MaxBytesPerBlock (estimated, all columns)
MAX_INT32 = 2**31 - 1
INT64_MIN = -2**63

# codec load names of the item types (reference section 4.1)
LOAD_NAMES = {"SByte": "SByte", "Byte": "Byte", "Int16": "Int16", "UInt16": "UInt16",
              "Int32": "Int32", "UInt32": "UInt32", "Int64": "Int64", "UInt64": "UInt64",
              "Single": "Single", "Double": "Double", "Boolean": "Boolean", "Text": "TextSpan",
              "DateTime": "DateTime", "DateTimeOffset": "DateTimeOffset",
              "TimeSpan": "TimeSpan", "RowId": "DataViewRowId"}

# how an item type's values are held before encoding
_FIXED, _BOOL, _TEXT, _DTO = "fixed", "bool", "text", "dto"
DTO_STORE = np.dtype([("minutes", "<i2"), ("ticks", "<i8")])   # clock-time ticks, as stored
TICKS_DTYPE = np.dtype("<i8")

_TICKS_PER_UNIT = {"W": 7 * 864000000000, "D": 864000000000, "h": 36000000000,
                   "m": 600000000, "s": 10000000, "ms": 10000, "us": 10}
_UNITS_PER_TICK = {"ns": 100, "ps": 100000, "fs": 10**8, "as": 10**11}


# ---------------------------------------------------------------------------------------------
# types
# ---------------------------------------------------------------------------------------------

def codec_of(t):
    """(load name, parameter bytes) of the codec ML.NET writes a type with."""
    if isinstance(t, T.Key):
        inner = codec_of(t.raw)
        return "Key2", _toc.pack_codec(*inner) + struct.pack("<Q", t.count)
    if isinstance(t, T.Vector):
        inner = codec_of(t.item)
        dims = t.dims
        return "VBuffer", (_toc.pack_codec(*inner) + struct.pack("<i", len(dims))
                           + struct.pack(f"<{len(dims)}i", *dims))
    return LOAD_NAMES[t.name], b""


def _item_kind(item):
    if item is T.Boolean:
        return _BOOL
    if item is T.Text:
        return _TEXT
    if item is T.DateTimeOffset:
        return _DTO
    return _FIXED


def _store_dtype(item):
    """The little-endian numpy dtype a fixed-width item is encoded from."""
    if isinstance(item, T.Key):
        return item.raw.dtype.newbyteorder("<")
    if item in (T.DateTime, T.TimeSpan):
        return TICKS_DTYPE
    if item is T.RowId:
        return T.ROWID_DTYPE
    return item.dtype.newbyteorder("<")


_BY_DTYPE = {np.dtype(t.dtype): t for t in (T.SByte, T.Byte, T.Int16, T.UInt16, T.Int32,
                                             T.UInt32, T.Int64, T.UInt64, T.Single, T.Double,
                                             T.Boolean)}


def _item_from_dtype(dt, where):
    """The ML.NET item type for a numpy dtype, or None for object (decided by the values)."""
    dt = np.dtype(dt)
    if dt.names:
        names = set(dt.names)
        if {"utc", "offset_minutes"} <= names:
            return T.DateTimeOffset
        if {"low", "high"} <= names:
            return T.RowId
        raise TypeError(f"{where}: structured dtype {dt} has no ML.NET type (DateTimeOffset needs "
                        f"fields utc, offset_minutes; RowId needs low, high)")
    k = dt.kind
    if k == "O":
        return None
    if k == "f" and dt.itemsize == 2:
        return T.Single
    base = _BY_DTYPE.get(dt.newbyteorder("=")) if k in "iufb" else None
    if base is not None:
        return base
    if k == "U":
        return T.Text
    if k == "M":
        return T.DateTime
    if k == "m":
        return T.TimeSpan
    if k == "c":
        raise TypeError(f"{where}: complex numbers ({dt}) have no ML.NET type")
    if k == "S":
        raise TypeError(f"{where}: bytes ({dt}) have no ML.NET type; decode them to str for Text")
    raise TypeError(f"{where}: numpy dtype {dt} has no ML.NET type")


def as_type(t, where="type"):
    """A DataViewType from a type object or a numpy dtype-like (np.float32 -> Single)."""
    if isinstance(t, T.DataViewType):
        return t
    try:
        dt = np.dtype(t)
    except TypeError:
        raise TypeError(f"{where}: {t!r} is not an idv type (idv.Single, idv.Key(...), "
                        f"idv.Vector(...)) or a numpy dtype") from None
    item = _item_from_dtype(dt, where)
    if item is None:
        raise TypeError(f"{where}: dtype object does not name an ML.NET type; use idv.Text etc.")
    return item


def _check_type(t, where):
    if isinstance(t, T.Vector):
        if any(d > MAX_INT32 for d in t.dims) or t.size > MAX_INT32:
            raise ValueError(f"{where}: vector dimensions {t.dims} exceed int32")
    return t


def _is_sparse(value):
    return hasattr(value, "tocsr") and hasattr(value, "nnz") and hasattr(value, "shape")


class Sparse:
    """Sparse vectors of any item type, in CSR form: row ``i`` stores ``values[offsets[i]:
    offsets[i + 1]]`` at the slots ``indices[offsets[i]:offsets[i + 1]]`` (strictly
    increasing) of a vector of ``length`` items; every other slot holds the item type's
    default ("" for Text, 0 ticks for DateTime / TimeSpan, missing (0) for keys, False, 0).

    ``values`` is any 1-d array or list of items (str, datetime64, key integers, structured
    DateTimeOffset / RowId ...). ``length`` is one int for every row (a Vector<T, length>
    column), or one length per row (a variable-size Vector<T> column). scipy.sparse matrices
    cover numbers and booleans; this form covers every item type, as ML.NET's VBuffer does.

    >>> idv.Sparse(["a", "b", "c"], indices=[0, 7, 2], offsets=[0, 2, 2, 3], length=10)
    """

    __slots__ = ("values", "indices", "offsets", "length")

    def __init__(self, values, indices, offsets, length):
        if isinstance(values, (list, tuple)):
            values = _fromiter_objects(values) if values and all(
                isinstance(x, str) for x in values) else np.asarray(values)
        self.values = np.asarray(values)
        self.indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        self.offsets = np.asarray(offsets, dtype=np.int64).reshape(-1)
        if self.values.ndim != 1:
            raise ValueError(f"Sparse values must be 1-d, not shape {self.values.shape}")
        o = self.offsets
        if len(o) == 0 or o[0] != 0 or o[-1] != len(self.values) \
                or len(self.indices) != len(self.values) or (np.diff(o) < 0).any():
            raise ValueError("Sparse offsets must start at 0, not decrease and end at "
                             "len(values), and there must be one index per value")
        if isinstance(length, (int, np.integer)) and not isinstance(length, bool):
            self.length = int(length)
            if self.length < 0:
                raise ValueError(f"Sparse vector length must be >= 0, not {length}")
        else:
            self.length = np.asarray(length, dtype=np.int64).reshape(-1)
            if len(self.length) != len(o) - 1:
                raise ValueError(f"{len(self.length)} vector lengths for {len(o) - 1} rows")
            if (self.length < 0).any():
                raise ValueError("Sparse vector lengths must be >= 0")

    @classmethod
    def from_rows(cls, rows, length, dtype=None):
        """From one {slot: value} dict per row (slots in any order)."""
        indices, values, offsets = [], [], [0]
        for r in rows:
            items = sorted(r.items())
            indices.extend(k for k, _ in items)
            values.extend(v for _, v in items)
            offsets.append(len(values))
        if dtype is not None:
            vals = np.asarray(values, dtype=dtype)
        elif values and all(isinstance(x, str) for x in values):
            vals = _fromiter_objects(values)
        else:
            vals = np.asarray(values) if values else np.zeros(0)
        return cls(vals, indices, offsets, length)

    @classmethod
    def from_scipy(cls, m):
        """From a 2-d scipy.sparse matrix (rows become vectors of its column count)."""
        m = m.tocsr()
        return cls(np.asarray(m.data), m.indices, m.indptr, int(m.shape[1]))

    @property
    def lengths(self):
        """The vector length of every row."""
        if isinstance(self.length, int):
            return np.full(len(self), self.length, np.int64)
        return self.length

    def __len__(self):
        return len(self.offsets) - 1

    def __getitem__(self, key):
        """Rows ``start:stop`` (step 1) as a Sparse sharing this one's arrays."""
        if not (isinstance(key, slice) and key.step in (None, 1)):
            raise TypeError("idv.Sparse takes row slices with step 1 (e.g. s[10:20])")
        start, stop, _ = key.indices(len(self))
        stop = max(start, stop)
        offs = self.offsets[start:stop + 1]
        a, b = int(offs[0]), int(offs[-1])
        length = self.length if isinstance(self.length, int) else self.length[start:stop]
        return Sparse(self.values[a:b], self.indices[a:b], offs - a, length)

    def __repr__(self):
        size = self.length if isinstance(self.length, int) else "variable"
        return (f"<idv.Sparse {len(self)} vectors of size {size}, {len(self.values)} stored "
                f"{self.values.dtype} items>")


def _fromiter_objects(values):
    return np.fromiter(values, dtype=object, count=len(values))


def _is_rowlike(x):
    return isinstance(x, (list, tuple, np.ndarray, Ragged, Sparse)) or _is_sparse(x)


def _values_of(value):
    """pandas Series / Index and similar: their numpy values."""
    if hasattr(value, "to_numpy") and not isinstance(value, (np.ndarray, Ragged)) \
            and not _is_sparse(value):
        return value.to_numpy()
    return value


def infer_type(value, where="value"):
    """The ML.NET column type for a column's data (see idv.write)."""
    value = _values_of(value)
    if isinstance(value, Ragged):
        item = _item_from_dtype(value.values.dtype, where)
        if item is None:
            item = _infer_objects(value.values, where, allow_rows=False)
        return T.Vector(item)
    if _is_sparse(value):
        if len(value.shape) != 2:
            raise ValueError(f"{where}: a sparse matrix must be 2-d, not {value.shape}")
        item = _item_from_dtype(value.dtype, where)
        return T.Vector(item, value.shape[1])
    if isinstance(value, Sparse):
        item = _item_from_dtype(value.values.dtype, where)
        if item is None:
            item = _infer_objects(value.values, where, allow_rows=False)
        return T.Vector(item, value.length) if isinstance(value.length, int) else T.Vector(item)
    if isinstance(value, np.ndarray):
        arr = value
    elif isinstance(value, (list, tuple)):
        arr = np.fromiter(value, dtype=object, count=len(value))
    else:
        raise TypeError(f"{where}: expected a numpy array, list, idv.Ragged or scipy.sparse "
                        f"matrix, not {type(value).__name__}")
    if arr.ndim == 0:
        raise ValueError(f"{where}: a column needs one value per row, got a scalar")
    item = _item_from_dtype(arr.dtype, where)
    if item is None:
        if arr.ndim > 1:
            flat = arr.reshape(-1)
            return T.Vector(_infer_objects(flat, where, allow_rows=False), *arr.shape[1:])
        return _infer_objects(arr, where, allow_rows=True)
    if arr.ndim > 1:
        return T.Vector(item, *arr.shape[1:])
    return item


_INFER_SAMPLE = 4096      # rows of an object column looked at to infer its type


def _infer_objects(arr, where, allow_rows):
    """Item (or fixed vector) type of a 1-d object array, from its values."""
    # str throughout the first rows: Text (an empty object column too, as read() gives).
    # Converting the column checks every value again, naming the row of any that is not.
    if _encode.first_non_str(np.ascontiguousarray(arr[:_INFER_SAMPLE])) < 0:
        return T.Text
    rowlike = [i for i in range(min(len(arr), 1000)) if _is_rowlike(arr[i])]
    if allow_rows and rowlike:
        lengths = [_row_len(x, where, i) for i, x in enumerate(arr)]
        if len(set(lengths)) > 1:
            a = lengths[0]
            b = next(i for i, n in enumerate(lengths) if n != a)
            raise ValueError(f"{where}: ragged rows (row 0 has {a} items, row {b} has "
                             f"{lengths[b]}); pass an idv.Ragged or types=idv.Vector(item) for "
                             f"variable-size vectors")
        flat = _flatten_rows(arr, where)
        item = _item_from_dtype(flat.dtype, where)
        if item is None:
            item = _infer_objects(flat, where, allow_rows=False)
        return T.Vector(item, lengths[0])
    try:
        conv = np.array(arr.tolist())
    except (ValueError, TypeError):
        conv = None
    if conv is not None and conv.dtype != object and conv.dtype.kind not in "USV" \
            and conv.ndim == 1:
        return _item_from_dtype(conv.dtype, where)
    kinds = {}
    for i, x in enumerate(arr):
        kinds.setdefault(type(x).__name__, i)
        if len(kinds) > 1:
            break
    import datetime as _dt
    if all(isinstance(x, _dt.datetime) for x in arr):
        return T.DateTime
    if all(isinstance(x, _dt.timedelta) for x in arr):
        return T.TimeSpan
    desc = ", ".join(f"{k} at row {i}" for k, i in kinds.items())
    raise TypeError(f"{where}: mixed or unsupported objects ({desc}) have no ML.NET type")


def _row_len(x, where, i):
    if isinstance(x, np.ndarray):
        return x.size
    if isinstance(x, (list, tuple)):
        return len(x)
    raise TypeError(f"{where} row {i}: expected a sequence of items (a vector), got "
                    f"{type(x).__name__}")


def _flatten_rows(rows, where):
    """All items of a sequence of rows (lists, tuples, arrays) as one 1-d array."""
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
            raise TypeError(f"{where} row {i}: expected a sequence of items (a vector), got "
                            f"{type(r).__name__}")
    if flat and all(type(x) is str for x in flat):
        return np.fromiter(flat, dtype=object, count=len(flat))
    try:
        out = np.array(flat)
    except (ValueError, TypeError):
        out = np.fromiter(flat, dtype=object, count=len(flat))
    if out.ndim != 1:   # items that are themselves sequences
        out = np.fromiter(flat, dtype=object, count=len(flat))
    if out.dtype.kind == "U" and not all(type(x) is str for x in flat):
        out = np.fromiter(flat, dtype=object, count=len(flat))
    return out


# ---------------------------------------------------------------------------------------------
# converting and checking values
# ---------------------------------------------------------------------------------------------

class _Where:
    """Names a column and turns a flat item position into 'row r' / 'row r item j'."""

    def __init__(self, column, offsets=None, slots=None, width=None):
        self.column = column
        self.offsets = offsets
        self.slots = slots
        self.width = width          # rows of one length: no offsets needed

    def __call__(self, pos):
        pos = int(pos)
        if self.width:
            return f"{self.column} row {pos // self.width} item {pos % self.width}"
        if self.offsets is None:
            return f"{self.column} row {pos}"
        row = int(np.searchsorted(self.offsets, pos, side="right")) - 1
        item = pos - int(self.offsets[row]) if self.slots is None else int(self.slots[pos])
        return f"{self.column} row {row} item {item}"

    def __str__(self):
        return self.column


def _first(mask):
    return int(np.flatnonzero(mask)[0])


def _object_numbers(arr, where, dtype):
    """Numbers held in an object array, as a numpy array (ints stay exact)."""
    import numbers
    bad = [i for i, x in enumerate(arr) if not isinstance(x, (numbers.Number, np.bool_))
           or isinstance(x, complex)]
    if bad:
        x = arr[bad[0]]
        raise TypeError(f"{where(bad[0])}: {x!r} ({type(x).__name__}) is not a number")
    try:
        out = np.array(arr.tolist())
    except (ValueError, OverflowError):
        out = None
    if out is None or out.dtype == object:
        # Python ints beyond int64/uint64, or mixed: range-check one by one
        info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
        for i, x in enumerate(arr):
            if info is not None and isinstance(x, int) and not info.min <= x <= info.max:
                raise ValueError(f"{where(i)}: {x} is outside the range of "
                                 f"{np.dtype(dtype)} [{info.min}, {info.max}]")
        out = np.array([float(x) if not isinstance(x, int) else x for x in arr.tolist()],
                       dtype=dtype)
    return out


def _to_int(arr, dtype, where, type_name):
    dtype = np.dtype(dtype)
    info = np.iinfo(dtype)
    k = arr.dtype.kind
    if k == "O":
        arr = _object_numbers(arr, where, dtype)
        k = arr.dtype.kind
    if k == "b":
        return arr.astype(dtype, copy=False)
    if k in "iu":
        if not np.can_cast(arr.dtype, dtype):
            bad = (arr < info.min) | (arr > info.max)
            if bad.any():
                i = _first(bad)
                raise ValueError(f"{where(i)}: {arr[i]} is outside the range of {type_name} "
                                 f"[{info.min}, {info.max}]")
        return arr.astype(dtype, copy=False)
    if k == "f":
        nan = np.isnan(arr)
        if nan.any():
            raise ValueError(f"{where(_first(nan))}: NaN in an integer column ({type_name} has "
                             f"no missing value)")
        bad = ~np.isfinite(arr) | (arr != np.floor(arr))
        if bad.any():
            i = _first(bad)
            raise ValueError(f"{where(i)}: {arr[i]} is not an integer ({type_name})")
        bad = (arr < float(info.min)) | (arr >= float(info.max + 1))
        if bad.any():
            i = _first(bad)
            raise ValueError(f"{where(i)}: {arr[i]} is outside the range of {type_name} "
                             f"[{info.min}, {info.max}]")
        return arr.astype(dtype)
    raise TypeError(f"{where}: cannot store {arr.dtype} values as {type_name}")


def _to_float(arr, dtype, where, type_name):
    k = arr.dtype.kind
    if k == "O":
        arr = _object_numbers(arr, where, np.float64)
        k = arr.dtype.kind
    if k in "fiub":
        if k == "f" and arr.dtype.itemsize > 8:
            raise TypeError(f"{where}: {arr.dtype} has no ML.NET type (Double is 64-bit)")
        return arr.astype(dtype, copy=False)
    raise TypeError(f"{where}: cannot store {arr.dtype} values as {type_name}")


def _to_bool(arr, where):
    if arr.dtype.kind == "b":
        return arr.astype(np.bool_, copy=False)
    if arr.dtype == object:
        bad = [i for i, x in enumerate(arr) if not isinstance(x, (bool, np.bool_))]
        if bad:
            x = arr[bad[0]]
            raise TypeError(f"{where(bad[0])}: {x!r} ({type(x).__name__}) is not a bool")
        return arr.astype(np.bool_)
    raise TypeError(f"{where}: cannot store {arr.dtype} values as Boolean (expected bool)")


def _to_text(arr, where):
    if arr.dtype.kind == "U":
        return arr.astype(object)
    if arr.dtype == object:
        arr = np.ascontiguousarray(arr)
        bad = _encode.first_non_str(arr)
        if bad >= 0:
            x = arr[bad]
            raise TypeError(f"{where(bad)}: {x!r} ({type(x).__name__}) is not a str (Text "
                            f"values must be str)")
        return arr
    raise TypeError(f"{where}: cannot store {arr.dtype} values as Text (values must be str)")


def _as_time(arr, kind, where):
    """datetime64 ('M') or timedelta64 ('m') values, converting Python objects."""
    if arr.dtype.kind == kind:
        return arr
    if arr.dtype == object:
        try:
            return np.array(arr.tolist(), dtype="datetime64[us]" if kind == "M"
                            else "timedelta64[us]")
        except (ValueError, TypeError) as e:
            raise TypeError(f"{where}: cannot convert objects to "
                            f"{'datetime64' if kind == 'M' else 'timedelta64'}: {e}") from None
    what = "datetime64 (DateTime)" if kind == "M" else "timedelta64 (TimeSpan)"
    raise TypeError(f"{where}: expected {what} values, got {arr.dtype}")


def _ticks(arr, where, what):
    """datetime64/timedelta64 -> int64 100-ns ticks (since 1970 / duration); NaT is refused,
    units finer than 100 ns are floored."""
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    unit, count = np.datetime_data(arr.dtype)
    if unit == "generic":
        raise TypeError(f"{where}: {arr.dtype} has no unit")
    if unit in ("Y", "M"):
        if arr.dtype.kind == "m":
            raise TypeError(f"{where}: timedelta64 in years or months has no fixed length")
        arr = arr.astype("datetime64[D]")
        unit, count = "D", 1
    v = arr.view(np.int64).reshape(-1)
    nat = v == INT64_MIN
    if nat.any():
        raise ValueError(f"{where(_first(nat))}: NaT ({what} has no missing value in ML.NET)")
    if unit in _TICKS_PER_UNIT:
        f = _TICKS_PER_UNIT[unit] * count
        lim = (2**63 - 1) // f
        bad = (v > lim) | (v < -lim)
        if bad.any():
            raise ValueError(f"{where(_first(bad))}: {arr[_first(bad)]} is outside .NET's "
                             f"{what} range")
        return v * np.int64(f)
    d = _UNITS_PER_TICK[unit]
    if count % d == 0:
        f = count // d
        lim = (2**63 - 1) // f
        bad = (v > lim) | (v < -lim)
        if bad.any():
            raise ValueError(f"{where(_first(bad))}: {arr[_first(bad)]} is outside .NET's "
                             f"{what} range")
        return v * np.int64(f)
    if count == 1:
        return np.floor_divide(v, d)
    return np.array([(int(x) * count) // d for x in v], dtype=np.int64)


def _datetime_ticks(arr, where, what="DateTime"):
    """.NET DateTime ticks (since 0001-01-01), range-checked."""
    t = _ticks(_as_time(arr, "M", where), where, what)
    bad = (t < -T.EPOCH_TICKS) | (t > T.MAX_DATETIME_TICKS - T.EPOCH_TICKS)
    if bad.any():
        i = _first(bad)
        raise ValueError(f"{where(i)}: {arr[i]} is outside .NET's {what} range "
                         f"(0001-01-01 to 9999-12-31)")
    return t + np.int64(T.EPOCH_TICKS)


def _to_dto(arr, where):
    if arr.dtype.names:
        if not {"utc", "offset_minutes"} <= set(arr.dtype.names):
            raise TypeError(f"{where}: DateTimeOffset values need fields utc and "
                            f"offset_minutes, not {arr.dtype}")
        utc, off = arr["utc"], arr["offset_minutes"]
    else:
        utc, off = arr, np.zeros(len(arr), np.int16)
    utc = _datetime_ticks(np.asarray(utc), where, "DateTimeOffset")
    off = _to_int(np.asarray(off), np.int64, where, "offset_minutes")
    bad = (off < -840) | (off > 840)
    if bad.any():
        i = _first(bad)
        raise ValueError(f"{where(i)}: offset {off[i]} minutes is beyond +-14 hours")
    clock = utc + off * T.TICKS_PER_MINUTE
    bad = (clock < 0) | (clock > T.MAX_DATETIME_TICKS)
    if bad.any():
        raise ValueError(f"{where(_first(bad))}: local time outside .NET's DateTime range")
    out = np.empty(len(arr), DTO_STORE)
    out["minutes"] = off
    out["ticks"] = clock
    return out


def _to_rowid(arr, where):
    if arr.dtype.names:
        if not {"low", "high"} <= set(arr.dtype.names):
            raise TypeError(f"{where}: RowId values need fields low and high, not {arr.dtype}")
        out = np.empty(len(arr), T.ROWID_DTYPE)
        out["low"] = _to_int(np.asarray(arr["low"]), np.uint64, where, "RowId low")
        out["high"] = _to_int(np.asarray(arr["high"]), np.uint64, where, "RowId high")
        return out
    out = np.zeros(len(arr), T.ROWID_DTYPE)
    if arr.dtype == object:
        for i, x in enumerate(arr):
            if not isinstance(x, (int, np.integer)) or isinstance(x, bool) \
                    or not 0 <= int(x) < 2**128:
                raise ValueError(f"{where(i)}: {x!r} is not an integer in [0, 2**128)")
            out["low"][i] = int(x) & 0xFFFFFFFFFFFFFFFF
            out["high"][i] = int(x) >> 64
        return out
    out["low"] = _to_int(arr, np.uint64, where, "RowId")
    return out


def convert_items(item, arr, where):
    """Values of one item type in their stored form (see _item_kind), checked."""
    arr = np.asarray(arr)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    if isinstance(item, T.Key):
        out = _to_int(arr, _store_dtype(item), where, str(item))
        bad = out > item.count
        if bad.any():
            i = _first(bad)
            raise ValueError(f"{where(i)}: key value {out[i]} is above the key count "
                             f"{item.count} of {item} (0 = missing, 1..{item.count} valid)")
        return out
    if item is T.Boolean:
        return _to_bool(arr, where)
    if item is T.Text:
        return _to_text(arr, where)
    if item is T.DateTime:
        return _datetime_ticks(arr, where)
    if item is T.TimeSpan:
        return _ticks(_as_time(arr, "m", where), where, "TimeSpan")
    if item is T.DateTimeOffset:
        return _to_dto(arr, where)
    if item is T.RowId:
        return _to_rowid(arr, where)
    if item.dtype.kind == "f":
        return _to_float(arr, _store_dtype(item), where, item.name)
    return _to_int(arr, _store_dtype(item), where, item.name)


class _Vec:
    """Vectors ready to encode: per row a length and a count (-1 dense; counts None = all
    dense), the stored items in row order (`vptr` row starts), sparse indices (`iptr`).
    Dense rows that all have one length (`width`) keep only their values: the per-row arrays
    are made when asked for."""

    __slots__ = ("_lengths", "counts", "values", "_vptr", "indices", "iptr", "width", "n")

    def __init__(self, lengths, counts, values, vptr, indices, iptr, width=None, n=None):
        self._lengths = lengths
        self.counts = counts
        self.values = values
        self._vptr = vptr
        self.indices = indices
        self.iptr = iptr
        self.width = width
        self.n = len(lengths) if lengths is not None else n

    @classmethod
    def uniform(cls, values, width, n):
        return cls(None, None, values, None, _EMPTY_I32, None, width, n)

    @property
    def lengths(self):
        if self._lengths is None:
            self._lengths = np.full(self.n, self.width, np.int64)
        return self._lengths

    @property
    def vptr(self):
        if self._vptr is None:
            self._vptr = np.arange(self.n + 1, dtype=np.int64) * self.width
        return self._vptr

    def __len__(self):
        return self.n

    def rows(self, a, b):
        if self.width is not None:
            w = self.width
            return _Vec.uniform(self.values[a * w:b * w], w, b - a)
        vp = self.vptr[a:b + 1]
        values = self.values[vp[0]:vp[-1]]
        if self.counts is None:
            return _Vec(self.lengths[a:b], None, values, vp - vp[0], self.indices[:0], None)
        ip = self.iptr[a:b + 1]
        return _Vec(self.lengths[a:b], self.counts[a:b], values, vp - vp[0],
                    self.indices[ip[0]:ip[-1]], ip - ip[0])

    def copy(self):
        if self.width is not None:
            return _Vec.uniform(self.values.copy(), self.width, self.n)
        return _Vec(self.lengths.copy(), None if self.counts is None else self.counts.copy(),
                    self.values.copy(), self.vptr.copy(), self.indices.copy(),
                    None if self.iptr is None else self.iptr.copy())

    @staticmethod
    def concat(parts):
        if len(parts) == 1:
            return parts[0]
        w = parts[0].width
        if w is not None and all(p.width == w for p in parts):
            return _Vec.uniform(np.concatenate([p.values for p in parts]), w,
                                sum(p.n for p in parts))
        lengths = np.concatenate([p.lengths for p in parts])
        values = np.concatenate([p.values for p in parts])
        vptr = _offsets(np.concatenate([np.diff(p.vptr) for p in parts]))
        if all(p.counts is None for p in parts):
            return _Vec(lengths, None, values, vptr, parts[0].indices[:0], None)
        counts = np.concatenate([np.full(len(p), -1, np.int32) if p.counts is None
                                 else p.counts for p in parts])
        indices = np.concatenate([p.indices for p in parts])
        iptr = _offsets(np.maximum(counts, 0))
        return _Vec(lengths, counts, values, vptr, indices, iptr)


def _offsets(lengths):
    out = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


_EMPTY_I32 = np.zeros(0, np.int32)


def _dense_vec(lengths, values):
    lengths = np.asarray(lengths, np.int64)
    return _Vec(lengths, None, values, _offsets(lengths), _EMPTY_I32, None)


# ---------------------------------------------------------------------------------------------
# columns
# ---------------------------------------------------------------------------------------------

class _Column:
    """One column's type, codec, and how its values are checked, estimated and encoded."""

    def __init__(self, index, name, type_):
        where = f"column {name!r}"
        if not isinstance(name, str) or not name:
            raise ValueError(f"column names must be non-empty str (ML.NET cannot load an empty "
                             f"name), got {name!r}")
        self.index = index
        self.name = name
        self.type = _check_type(as_type(type_, where), where)
        self.is_vector = isinstance(self.type, T.Vector)
        self.item = T.item_type(self.type)
        self.kind = _item_kind(self.item)
        self.codec_name, self.codec_params = codec_of(self.type)
        self.where = where
        if self.kind == _FIXED:
            self.itemsize = _store_dtype(self.item).itemsize
        else:
            self.itemsize = 10 if self.kind == _DTO else 0
        # a block's payload is its values' own bytes: nothing to encode
        self.trivial = self.kind == _FIXED and not self.is_vector

    # ---- converting input
    def prepare(self, value):
        """Check and convert a batch of this column's values; returns (chunk, rows)."""
        value = _values_of(value)
        if not self.is_vector:
            return self._prepare_scalar(value)
        return self._prepare_vector(value)

    def _prepare_scalar(self, value):
        where = _Where(self.where)
        if isinstance(value, (Ragged, Sparse)) or _is_sparse(value):
            raise TypeError(f"{self.where}: {type(value).__name__} given for a scalar column of "
                            f"type {self.type}")
        if isinstance(value, np.ndarray):
            arr = value
        elif isinstance(value, (list, tuple)):
            if self.item is T.Text or self.item is T.RowId:
                arr = np.fromiter(value, dtype=object, count=len(value))
            else:
                try:
                    arr = np.asarray(value)
                except ValueError:
                    arr = np.fromiter(value, dtype=object, count=len(value))
        else:
            raise TypeError(f"{self.where}: expected a 1-d array or list of values, not "
                            f"{type(value).__name__}")
        if arr.ndim != 1:
            raise ValueError(f"{self.where}: a {self.type} column needs a 1-d array (one value "
                             f"per row), got shape {arr.shape}")
        if arr.dtype == object and self.item is not T.Text and len(arr):
            rows = [i for i in range(len(arr)) if _is_rowlike(arr[i])]
            if rows:
                raise TypeError(f"{where(rows[0])}: a sequence in a scalar {self.type} column")
        out = convert_items(self.item, arr, where)
        return np.ascontiguousarray(out), len(out)

    def _prepare_vector(self, value):
        t = self.type
        size = t.size
        if _is_sparse(value):
            if len(value.shape) != 2:
                raise ValueError(f"{self.where}: a sparse matrix must be 2-d, not {value.shape}")
            m = value.tocsr()
            if m.indptr[-1] != len(m.indices) or len(m.data) != len(m.indices):
                raise ValueError(f"{self.where}: inconsistent sparse matrix (indptr ends at "
                                 f"{m.indptr[-1]}, {len(m.indices)} indices, {len(m.data)} "
                                 f"values)")
            return self._prepare_sparse(np.asarray(m.data), m.indices, m.indptr, m.shape[1],
                                        "; call .sum_duplicates() and .sort_indices() on the "
                                        "matrix first")
        if isinstance(value, Sparse):
            return self._prepare_sparse(value.values, value.indices, value.offsets,
                                        value.length, "")
        if isinstance(value, Ragged):
            lengths = np.diff(value.offsets)
            self._check_lengths(lengths)
            where = _Where(self.where, value.offsets)
            values = convert_items(self.item, value.values, where)
            return _dense_vec(lengths, np.ascontiguousarray(values)), len(lengths)
        if isinstance(value, np.ndarray) and value.ndim >= 2:    # numbers, or objects (str)
            n = value.shape[0]
            shape = value.shape[1:]
            width = math.prod(shape)
            if t.is_fixed and not (shape == t.dims or (len(shape) == 1 and width == size)):
                raise ValueError(f"{self.where}: rows of shape {shape} do not fit {t} (wrong "
                                 f"vector size for a fixed-size type)")
            where = _Where(self.where, width=width)
            values = convert_items(self.item, value.reshape(-1), where)
            return _Vec.uniform(np.ascontiguousarray(values), width, n), n
        if isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype != object:
            raise ValueError(f"{self.where}: a {t} column needs one vector per row (a 2-d array, "
                             f"idv.Ragged, list of sequences or sparse matrix), got a 1-d "
                             f"{value.dtype} array")
        if not isinstance(value, (list, tuple, np.ndarray)):
            raise TypeError(f"{self.where}: expected a 2-d array, idv.Ragged, list of sequences "
                            f"or scipy.sparse matrix, not {type(value).__name__}")
        rows = list(value)
        lengths = np.array([_row_len(r, self.where, i) for i, r in enumerate(rows)], np.int64)
        self._check_lengths(lengths)
        flat = _flatten_rows(rows, self.where)
        where = _Where(self.where, _offsets(lengths))
        values = convert_items(self.item, flat, where)
        return _dense_vec(lengths, np.ascontiguousarray(values)), len(rows)

    def _check_lengths(self, lengths):
        t = self.type
        if t.is_fixed:
            bad = lengths != t.size
            if bad.any():
                i = _first(bad)
                raise ValueError(f"{self.where} row {i}: {lengths[i]} items, but {t} needs "
                                 f"{t.size} (wrong vector size for a fixed-size type)")
        if len(lengths) and lengths.max() > MAX_INT32:
            raise ValueError(f"{self.where} row {_first(lengths > MAX_INT32)}: vector longer "
                             f"than int32")

    def _prepare_sparse(self, data, indices, indptr, length, hint):
        """CSR rows (one vector length, or one per row) as sparse VBuffers; a row that stores
        every slot is written dense, as ML.NET does."""
        t = self.type
        n = len(indptr) - 1
        per_row = not isinstance(length, (int, np.integer))
        lengths = np.asarray(length, np.int64) if per_row else np.full(n, int(length), np.int64)
        if t.is_fixed:
            bad = lengths != t.size
            if bad.any():
                i = _first(bad)
                what = (f"row {i}: vector length {lengths[i]}" if per_row
                        else f"sparse matrix with {lengths[i]} columns")
                raise ValueError(f"{self.where} {what} does not fit {t} (wrong vector size for "
                                 f"a fixed-size type)")
        if n and lengths.max() > MAX_INT32:
            raise ValueError(f"{self.where}: vector length {lengths.max()} exceeds int32")
        indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        indices = np.ascontiguousarray(indices, dtype=np.int64)
        row, why = _encode.check_sparse_rows(indptr, indices, lengths if per_row
                                             else int(length))
        if row >= 0:
            raise ValueError(f"{self.where} row {row}: sparse {why}{hint}")
        nnz = np.diff(indptr)
        dense = nnz == lengths
        counts = np.where(dense, -1, nnz).astype(np.int32)
        where = _Where(self.where, indptr, indices)
        values = convert_items(self.item, np.asarray(data), where)
        sparse_idx = indices[np.repeat(~dense, nnz)] if dense.any() else indices
        return _Vec(lengths, counts, np.ascontiguousarray(values), indptr,
                    sparse_idx.astype(np.int32), _offsets(np.maximum(counts, 0))), n

    # ---- rows of prepared chunks
    def concat(self, chunks):
        if self.is_vector:
            return _Vec.concat(chunks)
        return chunks[0] if len(chunks) == 1 else np.concatenate(chunks)

    def rows(self, chunk, a, b):
        return chunk.rows(a, b) if self.is_vector else chunk[a:b]

    def copy(self, chunk):
        return chunk.copy()

    # ---- encoding
    def _items_payload(self, values):
        if self.kind == _FIXED:
            return _encode.encode_fixed(values)
        if self.kind == _BOOL:
            return _encode.encode_bool(values)
        if self.kind == _TEXT:
            return _encode.encode_text(np.ascontiguousarray(values))
        return _encode.encode_dto(values["minutes"], values["ticks"])

    def payload(self, chunk):
        """One block's codec payload (bytes or a contiguous uint8 array)."""
        if not self.is_vector:
            return self._items_payload(chunk)
        n = len(chunk)
        if self.type.is_fixed:
            size = self.type.size
        elif chunk.width is not None:
            size = chunk.width if n else 0
        else:
            lengths = chunk.lengths
            size = int(lengths[0]) if n and bool((lengths == lengths[0]).all()) else 0
        counts = chunk.counts if chunk.counts is not None else np.full(n, -1, np.int32)
        return _encode.encode_vbuffer(n, size, chunk.lengths if size == 0 else _EMPTY_I32,
                                      counts, chunk.indices, self._items_payload(chunk.values))

    def _items_estimate(self, values, items):
        """ML.NET's estimate for the item codec after `items` (cumulative) items."""
        if self.kind == _BOOL:
            return _encode.bool_estimate(items)
        if self.kind == _TEXT:
            units = _offsets(_encode.text_units(np.ascontiguousarray(values[:items[-1]]))) \
                if len(items) else np.zeros(1, np.int64)
            return _encode.text_estimate(items, units[items])
        return _encode.fixed_estimate(items, self.itemsize)

    def estimate(self, chunk, k):
        """ML.NET's commit-length estimate after each of the first k rows."""
        r = np.arange(1, k + 1, dtype=np.int64)
        if not self.is_vector:
            return self._items_estimate(chunk, r)
        items = chunk.vptr[1:k + 1]
        sparse = chunk.iptr[1:k + 1] if chunk.counts is not None else 0
        inner = self._items_estimate(chunk.values, items)
        return _encode.vbuffer_estimate(r, not self.type.is_fixed, sparse, inner)


# ---------------------------------------------------------------------------------------------
# metadata
# ---------------------------------------------------------------------------------------------

def _infer_metadata_type(value, where):
    if isinstance(value, str):
        return T.Text
    if isinstance(value, (bool, np.bool_)):
        return T.Boolean
    if _is_sparse(value):
        if value.shape[0] != 1:
            raise ValueError(f"{where}: a sparse metadata vector must have one row, not "
                             f"{value.shape}")
        return T.Vector(_item_from_dtype(value.dtype, where), value.shape[1])
    if isinstance(value, Sparse):
        if len(value) != 1:
            raise ValueError(f"{where}: a sparse metadata vector must have one row, not "
                             f"{len(value)}")
        return infer_type(value, where)
    if isinstance(value, (list, tuple, np.ndarray)):
        arr = value if isinstance(value, np.ndarray) else \
            np.fromiter(value, dtype=object, count=len(value))
        if arr.ndim == 0:
            return _infer_metadata_type(arr[()], where)
        if arr.size == 0:
            raise TypeError(f"{where}: cannot infer the type of an empty vector; give it as "
                            f"(type, value)")
        item = _item_from_dtype(arr.dtype, where)
        if item is None:
            item = _infer_objects(arr.reshape(-1), where, allow_rows=False)
        return T.Vector(item, *arr.shape)
    if isinstance(value, (int, float, np.generic)):
        item = _item_from_dtype(np.asarray(value).dtype, where)
        if item is None:
            raise TypeError(f"{where}: {value!r} has no ML.NET type")
        return item
    import datetime as _dt
    if isinstance(value, _dt.datetime):
        return T.DateTime
    if isinstance(value, _dt.timedelta):
        return T.TimeSpan
    raise TypeError(f"{where}: cannot infer an ML.NET type for {type(value).__name__}; give it "
                    f"as (type, value)")


def _metadata_block(type_, value, where):
    """One metadata value's codec payload: a block holding one item (one vector)."""
    col = _Column(0, "metadata", type_)
    col.where = where
    if col.is_vector:
        if isinstance(value, (list, tuple)):
            try:
                value = np.asarray(value, dtype=object if col.item is T.Text else None)
            except ValueError:
                raise ValueError(f"{where}: nested sequences of different lengths") from None
        if _is_sparse(value) or isinstance(value, Sparse):
            batch = value
        elif isinstance(value, np.ndarray):
            batch = value.reshape(1, -1) if value.dtype != object else [value.reshape(-1)]
        else:
            raise TypeError(f"{where}: a {col.type} value must be a sequence, array or sparse "
                            f"matrix, not {type(value).__name__}")
    else:
        if isinstance(value, (np.generic, np.ndarray)):
            batch = np.asarray(value)
            if batch.size != 1:
                raise TypeError(f"{where}: {batch.size} values given for the scalar type "
                                f"{col.type}")
            batch = batch.reshape(1)
        elif _is_rowlike(value):
            raise TypeError(f"{where}: a sequence given for the scalar type {col.type}")
        else:
            batch = np.empty(1, dtype=object)
            batch[0] = value
    chunk, n = col.prepare(batch)
    if n != 1:
        raise ValueError(f"{where}: a metadata value is one vector, got {n} rows")
    return col, bytes(col.payload(chunk))


def _metadata_for(name, entries):
    """[(kind, codec name, codec params, raw payload)] of one column's metadata dict."""
    if entries is None:
        return []
    if not hasattr(entries, "items"):
        raise TypeError(f"metadata for column {name!r} must be a dict kind -> value")
    out = []
    for kind, spec in entries.items():
        where = f"column {name!r} metadata {kind!r}"
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"{where}: metadata kinds must be non-empty str")
        if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], T.DataViewType):
            type_, value = spec
        else:
            value = _values_of(spec)
            type_ = _infer_metadata_type(value, where)
        col, raw = _metadata_block(type_, value, where)
        out.append((kind, col.codec_name, col.codec_params, raw))
    return out


# ---------------------------------------------------------------------------------------------
# output
# ---------------------------------------------------------------------------------------------

def _umask():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_WRITEBACK_CHUNK = 8 << 20     # bytes written between two early-writeback requests


class _Output:
    """Where the bytes go: a temporary file renamed over `dest` on commit, or a seekable
    binary file object written in place from its current position."""

    def __init__(self, dest):
        self.path = None
        self.file = None
        self.tmp = None
        self.base = 0
        self.size = 0
        self.synced = 0
        if isinstance(dest, (str, bytes, os.PathLike)):
            path = os.fsdecode(os.fspath(dest))
            parent = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(parent):
                raise FileNotFoundError(f"cannot write {path!r}: directory {parent!r} does not "
                                        f"exist")
            if os.path.isdir(path):
                raise IsADirectoryError(f"cannot write {path!r}: it is a directory")
            self.path = path
            self.parent = parent
        elif hasattr(dest, "write"):
            try:
                seekable = dest.seekable()
            except (AttributeError, ValueError, OSError):
                seekable = False
            if not seekable:
                raise ValueError("idv.write needs a seekable binary file object (the header is "
                                 "written last, at the start); write to a path or an "
                                 "io.BytesIO and copy it instead")
            if hasattr(dest, "writable") and not dest.writable():
                raise ValueError("the file object is not writable")
            if hasattr(dest, "mode") and "b" not in getattr(dest, "mode", "b"):
                raise TypeError("the file object must be opened in binary mode")
            self.file = dest
        else:
            raise TypeError(f"dest must be a path or a seekable binary file object, not "
                            f"{type(dest).__name__}")
        self.opened = False

    def open(self):
        if self.path is not None:
            fd, self.tmp = tempfile.mkstemp(dir=self.parent,
                                            prefix="." + os.path.basename(self.path) + ".",
                                            suffix=".tmp")
            self.file = os.fdopen(fd, "w+b")
        else:
            self.base = self.file.tell()
        self.opened = True

    def write(self, data):
        """Append; returns the offset (from the IDV start) where `data` begins."""
        offset = self.size
        n = memoryview(data).nbytes
        if n:
            self.file.write(data)
        self.size += n
        if self.tmp is not None and self.size - self.synced >= _WRITEBACK_CHUNK:
            # start writing to disk now, so that the fsync at the end has little to wait for
            self.file.flush()
            _encode.start_writeback(self.file.fileno(), self.synced, self.size - self.synced)
            self.synced = self.size
        return offset

    def write_at(self, offset, data):
        self.file.seek(self.base + offset)
        self.file.write(data)
        self.file.seek(self.base + self.size)

    def commit(self):
        f = self.file
        f.flush()
        if self.path is None:
            return
        try:
            mode = os.stat(self.path).st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o666 & ~_umask()
        os.chmod(self.tmp, mode)
        os.fsync(f.fileno())
        f.close()
        os.replace(self.tmp, self.path)
        self.tmp = None
        try:
            dirfd = os.open(self.parent, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(dirfd)
        except OSError:
            pass
        finally:
            os.close(dirfd)

    def abort(self):
        if self.path is not None:
            if self.file is not None:
                try:
                    self.file.close()
                except Exception:
                    pass
            if self.tmp is not None:
                try:
                    os.unlink(self.tmp)
                except FileNotFoundError:
                    pass
                self.tmp = None
        elif self.opened:
            try:   # a file object cannot be atomic: cut it back to where the IDV began
                self.file.seek(self.base)
                self.file.truncate()
            except Exception:
                pass


class _Done:
    """A result computed in place, in the pipeline's queue of futures."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def done(self):
        return True

    def result(self):
        return self.value

    def cancel(self):
        return False


def _compression_kind(compression):
    if compression in (None, False, 0, "none", "None"):
        return _compression.NONE
    if compression in (True, 1, "deflate", "Deflate", "default"):
        return _compression.DEFLATE
    raise ValueError(f"compression must be 'deflate' or 'none' (ML.NET reads no other), not "
                     f"{compression!r}")


_DEFLATERS = threading.local()      # per thread: level -> _compression.Deflater (not thread-safe)


def _libdeflate_compress(level):
    """fn(raw) -> bytes with libdeflate's C API (the GIL released, so blocks compress in
    parallel threads), one compressor per thread and level."""
    def compress(raw):
        cache = getattr(_DEFLATERS, "by_level", None)
        if cache is None:
            cache = _DEFLATERS.by_level = {}
        d = cache.get(level)
        if d is None:
            d = cache[level] = _compression.Deflater(level)
        return d.compress(raw)
    return compress


def default_backend():
    """The DEFLATE library idv.write uses by default: 'libdeflate' where the `deflate` package
    is installed, else 'zlib'."""
    return "libdeflate" if _compression.LIBDEFLATE_COMPRESS else "zlib"


def _compressor(kind, level, backend):
    """fn(raw bytes-like) -> compressed bytes, or None for no compression."""
    if kind == _compression.NONE:
        return None
    if backend is None:
        # libdeflate where installed: 3-5x zlib at the same size; zlib's bytes equal ML.NET's
        backend = default_backend()
    if backend == "zlib":
        lvl = 6 if level is None else int(level)
        if not -1 <= lvl <= 9:
            raise ValueError(f"zlib DEFLATE levels are 0-9, not {level}")
        return lambda raw: _compression.deflate_raw(raw, lvl)
    if backend == "libdeflate":
        lvl = 6 if level is None else int(level)
        if not 0 <= lvl <= 12:
            raise ValueError(f"libdeflate levels are 0-12, not {level}")
        if _compression.LIBDEFLATE_COMPRESS:
            return _libdeflate_compress(lvl)
        try:
            import deflate
        except ImportError:
            raise ImportError("backend='libdeflate' needs its package: pip install deflate") \
                from None
        return lambda raw: bytes(deflate.deflate_compress(raw, lvl))   # (holds the GIL)
    raise ValueError(f"unknown DEFLATE backend {backend!r}: 'zlib' (byte-identical to ML.NET) or "
                     f"'libdeflate'")


def _frame_rows(data):
    """The rows of a batch that has no columns: a DataFrame's or Arrow table's length, else 0."""
    shape = getattr(data, "shape", None)
    if isinstance(shape, tuple) and len(shape) == 2:
        return int(shape[0])
    n = getattr(data, "num_rows", None)
    return int(n) if isinstance(n, (int, np.integer)) else 0


def _schema_pairs(schema):
    """[(name, type)] from a dict, a list of pairs, or an idv.Schema."""
    if hasattr(schema, "fields") and not hasattr(schema, "items"):
        return [(f.name, f.type) for f in schema.fields]
    if hasattr(schema, "items"):
        return list(schema.items())
    pairs = []
    for p in schema:
        if not (isinstance(p, (tuple, list)) and len(p) == 2):
            raise TypeError(f"schema entries must be (name, type) pairs, not {p!r}")
        pairs.append((p[0], p[1]))
    return pairs


# ---------------------------------------------------------------------------------------------
# the writer
# ---------------------------------------------------------------------------------------------

class Writer:
    """Write an .idv in batches: ``write_batch`` any number of times, then ``close``.

    ``schema``: the columns in order, as a dict name -> type (``idv.Single``,
    ``idv.Vector(idv.Single, 10)``, ``idv.Key(idv.UInt32, count=5)``, or a numpy dtype), a list
    of (name, type) pairs, or the ``schema`` of an open idv file. ``metadata``: per column a dict
    kind -> value (type inferred) or kind -> (type, value).

    ``compression``: 'deflate' (raw DEFLATE, ML.NET's default) or 'none'. ``level``: DEFLATE
    level (default 6, ML.NET's). ``backend``: 'zlib' (default; byte-identical to ML.NET's files)
    or 'libdeflate' (faster, other bytes, same data).

    Rows per block follow ML.NET's saver: at most ``rows_per_block`` rows (default 8192), fewer
    when ML.NET's size estimate of one block row exceeds ``max_bytes_per_block`` (default
    80 MiB; None = exactly ``rows_per_block``). Blocks are compressed in ``threads`` threads and
    written as they fill, so memory stays around one block per column.

    A path is written through a temporary file beside it, renamed over it by ``close()``; on
    any error (or ``abort()``) the temporary file is removed and an existing file is left as it
    was. A seekable binary file object is written in place from its current position.
    """

    def __init__(self, dest, schema, *, metadata=None, compression="deflate", level=None,
                 rows_per_block=None, max_bytes_per_block=DEFAULT_MAX_BYTES_PER_BLOCK,
                 threads=None, backend=None):
        self._closed = True
        pairs = _schema_pairs(schema)
        names = [n for n, _ in pairs]
        self._columns = [_Column(i, n, t) for i, (n, t) in enumerate(pairs)]
        self._by_name = {c.name: c for c in self._columns}       # the last of each name
        # names used more than once (ML.NET's hidden columns): batches must then be given by
        # position, as a list of (name, values) pairs
        self._duplicates = sorted({n for n in names if names.count(n) > 1})
        self._kind = _compression_kind(compression)
        self._compress = _compressor(self._kind, level, backend)
        per_column = self._metadata_by_column(metadata)
        self._metadata = [self._encode_metadata(_metadata_for(c.name, per_column[c.index]))
                          for c in self._columns]
        if rows_per_block is None:
            rows_per_block = DEFAULT_MAX_ROWS_PER_BLOCK
        if not 0 < int(rows_per_block) <= MAX_INT32:
            raise ValueError(f"rows_per_block must be in [1, 2**31 - 1], not {rows_per_block}")
        if max_bytes_per_block is not None and int(max_bytes_per_block) <= 0:
            raise ValueError(f"max_bytes_per_block must be positive or None, not "
                             f"{max_bytes_per_block}")
        self._max_rows = int(rows_per_block)
        self._max_bytes = None if max_bytes_per_block is None else int(max_bytes_per_block)
        self._rpb = self._max_rows if self._max_bytes is None else None
        self._threads = int(threads) if threads else _threads.default_threads()
        self._out = _Output(dest)
        self._pending = [[] for _ in self._columns]
        self._pending_rows = 0
        self._lookups = [([], [], []) for _ in self._columns]
        self._rows = 0
        self._closed = False

    def _metadata_by_column(self, metadata):
        """The metadata dict of each column, from one keyed by column name or index (with a
        name that several columns share, only the index says which)."""
        out = [None] * len(self._columns)
        names = [c.name for c in self._columns]
        for key, entries in (metadata or {}).items():
            if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
                i = int(key)
                if not -len(names) <= i < len(names):
                    raise KeyError(f"metadata for column index {i}, but there are "
                                   f"{len(names)} columns")
                i %= len(names)
            elif key in self._by_name:
                if key in self._duplicates:
                    where = [i for i, n in enumerate(names) if n == key]
                    raise ValueError(f"metadata for {key!r}, a name of several columns "
                                     f"(indices {where}); key it by column index instead")
                i = self._by_name[key].index
            else:
                raise KeyError(f"metadata for unknown columns [{key!r}]; columns: {names}")
            if out[i] is not None:
                raise ValueError(f"metadata for column {i} ({names[i]!r}) given twice (by name "
                                 f"and by index)")
            out[i] = entries
        return out

    def _encode_metadata(self, entries):
        """Compress each value and keep the smaller form; a tie stays uncompressed."""
        out = []
        for kind, codec_name, params, raw in entries:
            comp = raw if self._compress is None else self._compress(raw)
            if len(raw) <= len(comp):
                out.append((kind, codec_name, params, _compression.NONE, raw))
            else:
                out.append((kind, codec_name, params, self._kind, comp))
        return out

    # ---- description
    @property
    def columns(self):
        """The schema: a list of (name, type) pairs, in column order."""
        return [(c.name, c.type) for c in self._columns]

    @property
    def num_rows(self):
        """Rows accepted so far."""
        return self._rows

    @property
    def rows_per_block(self):
        """The block size, once decided (after rows_per_block rows, or at close)."""
        return self._rpb

    @property
    def closed(self):
        """True once the writer has been closed or aborted."""
        return self._closed

    # ---- writing
    def write_batch(self, data=None, /, **columns):
        """Append rows: a dict name -> values with every column of the schema (or keyword
        arguments), or a list of (name, values) pairs, one per column in schema order (needed
        when several columns share a name). All of the batch is checked before any of it is
        kept. With no columns, a pandas DataFrame or pyarrow Table adds its rows."""
        self._check_open()
        if data is None:
            data = columns
        elif columns:
            raise TypeError("give the batch as one dict or as keyword arguments, not both")
        chunks, n = self._prepare(data)
        self._append(chunks, n)

    def add_empty_rows(self, n):
        """Append `n` rows to a writer whose schema has no columns. ML.NET's saver writes such
        files (a header with the row count, no columns; its public SaveAsBinary refuses them)
        and its loader reads them back as that many rows."""
        self._check_open()
        if self._columns:
            raise ValueError(f"add_empty_rows is for a schema with no columns; this one has "
                             f"{len(self._columns)} (use write_batch)")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"add_empty_rows needs a row count >= 0, not {n!r}")
        if self._rows + int(n) >= 2**63:
            raise ValueError("the row count would exceed int64")
        self._append([], int(n))

    def _append(self, chunks, n):
        try:
            for c, ch in enumerate(chunks):
                self._pending[c].append(ch)
            self._pending_rows += n
            self._rows += n
            self._flush(final=False)
        except BaseException:
            self.abort()
            raise

    def _prepare(self, data):
        values = self._batch_values(data)
        if not self._columns:
            return [], _frame_rows(data)
        chunks, sizes = [], []
        for c, v in zip(self._columns, values):
            chunk, n = c.prepare(v)
            chunks.append(chunk)
            sizes.append(n)
        if len(set(sizes)) > 1:
            desc = ", ".join(f"{c.name!r}: {n}" for c, n in zip(self._columns, sizes))
            raise ValueError(f"columns have different numbers of rows ({desc})")
        return chunks, (sizes[0] if sizes else 0)

    def _batch_values(self, data):
        """Each column's values in schema order, from a dict or a list of (name, values)."""
        names = [c.name for c in self._columns]
        if isinstance(data, (list, tuple)):
            if len(data) != len(names):
                raise ValueError(f"a batch given as a list needs one (name, values) pair per "
                                 f"column ({len(names)}), got {len(data)}")
            out = []
            for i, (p, name) in enumerate(zip(data, names)):
                if not (isinstance(p, (tuple, list)) and len(p) == 2 and isinstance(p[0], str)):
                    raise TypeError(f"batch entry {i} must be a (name, values) pair, not "
                                    f"{type(p).__name__}")
                if p[0] != name:
                    raise KeyError(f"batch entry {i} is named {p[0]!r}, but column {i} of the "
                                   f"schema is {name!r} (pairs go in schema order)")
                out.append(p[1])
            return out
        keys = list(data.keys()) if hasattr(data, "keys") else None
        if keys is None:
            raise TypeError(f"a batch is a dict column name -> values or a list of (name, "
                            f"values) pairs, not {type(data).__name__}")
        if self._duplicates:
            raise ValueError(f"the schema has several columns named {self._duplicates}: give the "
                             f"batch as a list of (name, values) pairs in schema order")
        missing = [n for n in names if n not in data]
        extra = [k for k in keys if k not in self._by_name]
        if missing or extra:
            raise KeyError(f"batch columns do not match the schema: missing {missing}, "
                           f"unknown {extra}")
        return [data[n] for n in names]

    def _decide_rows_per_block(self, merged):
        k = min(self._max_rows, self._pending_rows)
        if k == 0:
            return 1
        total = np.zeros(k, np.int64)
        for c, chunk in zip(self._columns, merged):
            total += c.estimate(chunk, k)
        over = np.flatnonzero(total > self._max_bytes)
        return max(1, int(over[0]) if len(over) else k)

    def _flush(self, final):
        cols = self._columns
        if not final and self._pending_rows < (self._max_rows if self._rpb is None
                                               else self._rpb):
            return     # not a whole block yet: keep the batches as they came
        if not cols or self._pending_rows == 0:
            if self._rpb is None:
                self._rpb = 1 if self._pending_rows == 0 else self._max_rows
            return
        merged = [c.concat(p) for c, p in zip(cols, self._pending)]
        self._pending = [[] for _ in cols]      # the batches live on in `merged` only
        if self._rpb is None:
            self._rpb = self._decide_rows_per_block(merged)
        rpb = self._rpb
        n = self._pending_rows
        nblocks = n // rpb + (1 if final and n % rpb else 0)
        if nblocks == 0:
            self._pending = [[m] for m in merged]
            return
        tasks = []
        for b in range(nblocks):
            a, z = b * rpb, min((b + 1) * rpb, n)
            for c, m in zip(cols, merged):
                tasks.append((c, c.rows(m, a, z)))
        self._write_blocks(tasks)
        done = min(nblocks * rpb, n)
        if done < n:
            self._pending = [[c.copy(c.rows(m, done, n))] for c, m in zip(cols, merged)]
        else:
            self._pending = [[] for _ in cols]
        self._pending_rows = n - done

    def _encode_block(self, task):
        col, chunk = task
        raw = col.payload(chunk)
        nraw = memoryview(raw).nbytes
        data = raw if self._compress is None else self._compress(raw)
        ndisk = memoryview(data).nbytes
        if nraw > MAX_INT32 or ndisk > MAX_INT32:
            raise ValueError(f"column {col.name!r}: one block is {nraw} bytes, more than the "
                             f"int32 block lengths allow; write fewer rows_per_block")
        return col.index, data, nraw

    def _write_blocks(self, tasks):
        """Encode and compress the blocks in the pool's threads, a bounded number in flight,
        and write them in order as they come back. A block that needs no work (fixed-width
        items, no compression) is taken in this thread."""
        threads = self._threads
        if threads <= 1 or len(tasks) <= 1:
            for t in tasks:
                self._put_block(*self._encode_block(t))
            return
        pool = _threads.pool("write", threads)
        window = threads * 4
        inflight = collections.deque()
        try:
            for t in tasks:
                if self._compress is None and t[0].trivial:
                    inflight.append(_Done(self._encode_block(t)))
                else:
                    inflight.append(pool.submit(self._encode_block, t))
                while len(inflight) > window or (inflight and inflight[0].done()):
                    self._put_block(*inflight.popleft().result())
            while inflight:
                self._put_block(*inflight.popleft().result())
        except BaseException:
            for f in inflight:
                f.cancel()
            raise

    def _put_block(self, c, data, nraw):
        if not self._out.opened:
            self._out.open()
            self._out.write(bytes(_header.HEADER_SIZE))
        offset = self._out.write(data)
        offs, disk, raw = self._lookups[c]
        offs.append(offset)
        disk.append(memoryview(data).nbytes)
        raw.append(nraw)

    def close(self):
        """Write the remaining rows, the tables and the header; move the file into place."""
        if self._closed:
            return
        try:
            self._flush(final=True)
            self._finish()
        except BaseException:
            self.abort()
            raise
        self._closed = True

    def _finish(self):
        out = self._out
        if not out.opened:
            out.open()
            out.write(bytes(_header.HEADER_SIZE))
        lookup_offsets = []
        for offs, disk, raw in self._lookups:
            lookup_offsets.append(out.write(_lookup.pack_lookup(offs, disk, raw)))
        meta_offsets = []
        for entries in self._metadata:
            if not entries:
                meta_offsets.append(0)
                continue
            toc = []
            for kind, codec_name, params, comp, data in entries:
                off = out.write(data)
                toc.append(_toc.MetadataEntry(kind, codec_name, params, comp, off, len(data)))
            meta_offsets.append(out.write(_toc.pack_metadata_toc(toc)))
        rpb = self._rpb if self._rpb is not None else 1
        toc_offset = out.size
        out.write(b"".join(
            _toc.TocEntry(c.index, c.name, c.codec_name, c.codec_params, self._kind, rpb,
                          lookup_offsets[c.index], meta_offsets[c.index]).pack()
            for c in self._columns))
        tail = out.write(_header.pack_tail())
        head = _header.Header(_header.WRITER_VERSION, _header.WRITER_VERSION, toc_offset, tail,
                              self._rows, len(self._columns))
        out.write_at(0, head.pack())
        out.commit()

    def abort(self):
        """Stop without writing: remove the temporary file (dest is left as it was)."""
        if self._closed:
            return
        self._closed = True
        self._pending = [[] for _ in self._columns]
        self._out.abort()

    def _check_open(self):
        if self._closed:
            raise ValueError("I/O operation on a closed idv.Writer")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self):
        if not getattr(self, "_closed", True):
            warnings.warn("idv.Writer was not closed; its output was discarded", ResourceWarning,
                          stacklevel=2)
            self.abort()

    def __repr__(self):
        state = "closed" if self._closed else f"{self._rows} rows so far"
        return f"<idv.Writer {len(self._columns)} columns, {state}>"


def _data_columns(data, types=None):
    """([(name, values)], inferred types, inferred metadata) from a dict-like, a pandas
    DataFrame (through idv.pandas.from_pandas) or a pyarrow Table / RecordBatch (through
    idv.arrow.from_arrow); `types` are the caller's overrides, which those conversions take
    into account (a Categorical given a non-key type is written as its values)."""
    if hasattr(data, "columns") and hasattr(data, "iloc") and hasattr(data, "dtypes"):
        from idv.pandas import from_pandas
        return from_pandas(data, types=types)
    if type(data).__module__.split(".")[0] == "pyarrow" and hasattr(data, "schema"):
        from idv.arrow import from_arrow
        return from_arrow(data, types=types)
    if hasattr(data, "items") and hasattr(data, "keys"):
        return list(data.items()), {}, {}
    if isinstance(data, (list, tuple)) and all(
            isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in data):
        return list(data), {}, {}    # (name, values) pairs: names may repeat (hidden columns)
    raise TypeError(f"data must be a dict column name -> values, a list of (name, values) pairs, "
                    f"a pandas DataFrame or a pyarrow Table, not {type(data).__name__}")


def write(dest, data, *, types=None, metadata=None, compression="deflate", level=None,
          rows_per_block=None, max_bytes_per_block=DEFAULT_MAX_BYTES_PER_BLOCK, threads=None,
          backend=None):
    """Write a dict of columns (name -> numpy array, list, idv.Ragged or scipy.sparse matrix),
    a pandas DataFrame or a pyarrow Table / RecordBatch to an .idv file (a path, written
    atomically, or a seekable binary file object).

    Types come from the data: float32 -> Single, float64 -> Double, int8..uint64 -> SByte..
    UInt64, bool -> Boolean, str -> Text, datetime64 -> DateTime, timedelta64 -> TimeSpan,
    2-d arrays -> fixed-size vectors, idv.Ragged -> variable-size vectors, sparse matrices ->
    sparse vectors. DataFrames go through idv.pandas.from_pandas (Categorical -> key with
    KeyValues, zone-aware datetimes -> DateTimeOffset ...) and Arrow tables through
    idv.arrow.from_arrow (exact types and metadata back from to_arrow's field metadata).
    ``types={name or index: type}`` overrides them (keys, DateTimeOffset, RowId,
    multi-dimensional vectors ...). A list of (name, values) pairs may repeat a name (ML.NET's
    hidden columns: the last one is visible). ``metadata={name: {kind: value or (type, value)}}`` is added to (and per kind
    replaces) the metadata a DataFrame or Table brings. The other options are those of
    idv.Writer.
    """
    columns, inferred_types, inferred_metadata = _data_columns(data, types)
    types = dict(types or {})
    names = [n for n, _ in columns]
    unknown = [k for k in types if k not in names and not (
        isinstance(k, (int, np.integer)) and 0 <= k < len(columns))]
    if unknown:
        raise KeyError(f"types for unknown columns {unknown}; columns: {names}")
    schema = []
    for i, (name, value) in enumerate(columns):
        if i in types:
            schema.append((name, types[i]))
        elif name in types:
            schema.append((name, types[name]))
        elif name in inferred_types:
            schema.append((name, inferred_types[name]))
        else:
            schema.append((name, infer_type(value, f"column {name!r}")))
    if inferred_metadata:
        merged = {k: dict(v) for k, v in inferred_metadata.items()}
        for name, entries in (metadata or {}).items():
            if entries is not None and not hasattr(entries, "items"):
                raise TypeError(f"metadata for column {name!r} must be a dict kind -> value")
            merged.setdefault(name, {}).update(entries or {})
        metadata = merged
    w = Writer(dest, schema, metadata=metadata, compression=compression, level=level,
               rows_per_block=rows_per_block, max_bytes_per_block=max_bytes_per_block,
               threads=threads, backend=backend)
    try:
        if columns:
            w.write_batch(columns)
        else:
            w.add_empty_rows(_frame_rows(data))
        w.close()
    except BaseException:
        w.abort()
        raise
