"""Checking and converting a column's values into the stored form of their item type.

Every value is checked before anything is written: a bad one raises TypeError or ValueError
naming the column, the row and (in a vector) the item. What comes out is what the block
encoder takes (see idv.types.ItemType.kind): numbers in their little-endian dtype, bools, str
objects, .NET ticks, DateTimeOffset as (minutes, clock ticks), RowId as (low, high).
"""
from __future__ import annotations

import numbers

import numpy as np

from idv import _encode, types as T
from idv._values import ticks
from idv._values.literals import exact_number
from idv._values.tick_text import iso_offset_minutes
from idv._values.infer import is_missing, missing_positions, number_array
from idv._writer.missing import missing_value


def first(mask):
    """The position of the first True."""
    return int(np.flatnonzero(mask)[0])


def _object_numbers(arr, where, dtype, type_name):
    """Numbers held in an object array, as a numpy array. Python ints stay exact: where numpy
    would take them through float64 (ints beyond int64 among others), an integer type gets
    each one as it is, range-checked, and a float type each one's nearest float (checked by
    the caller)."""
    kinds = set(map(type, arr))         # each value looked at only where some kind is bad
    bad = [] if all(issubclass(k, (numbers.Number, np.bool_)) and not issubclass(k, complex)
                    for k in kinds) else \
        [i for i, x in enumerate(arr) if not isinstance(x, (numbers.Number, np.bool_))
         or isinstance(x, complex)]
    if bad:
        x = arr[bad[0]]
        raise TypeError(f"{where(bad[0])}: {x!r} ({type(x).__name__}) is not a number")
    values = arr.tolist()
    try:
        out = number_array(values)
    except (ValueError, OverflowError):
        out = None
    if out is not None and out.dtype != object:
        return out
    if np.dtype(dtype).kind in "iu":
        return _exact_ints(values, where, dtype, type_name)
    out = np.empty(len(values), np.float64)
    for i, x in enumerate(values):
        try:
            out[i] = x
        except OverflowError:
            raise ValueError(f"{where(i)}: {x} is outside the range of {type_name}") from None
    return out


def _exact_ints(values, where, dtype, type_name):
    """Integers and integral floats as `dtype`, one by one, each range-checked."""
    info = np.iinfo(dtype)
    out = np.empty(len(values), dtype)
    for i, x in enumerate(values):
        if not isinstance(x, numbers.Integral):
            exact = exact_number(x)         # a Decimal's or a float's own value, not float(x)
            if not isinstance(exact, int) or isinstance(x, (bool, np.bool_)):
                raise ValueError(f"{where(i)}: {x!r} is not an integer ({type_name})")
            x = exact
        if not info.min <= x <= info.max:
            raise ValueError(f"{where(i)}: {x} is outside the range of {type_name} "
                             f"[{info.min}, {info.max}]")
        out[i] = x
    return out


def _no_overflow(arr, out, where, type_name):
    """ValueError at the first finite value of `arr` that `out`, its narrower float, holds as
    an infinity: rounding to the nearest float is a conversion, a finite value made infinite
    is not."""
    if arr.dtype.kind != "f" or out.dtype.itemsize >= arr.dtype.itemsize:
        return
    inf = np.isinf(out)
    if inf.any():
        bad = inf & np.isfinite(arr)
        if bad.any():
            i = first(bad)
            raise ValueError(f"{where(i)}: {arr[i].item()!r} is outside the range of "
                             f"{type_name} (+-{np.finfo(out.dtype).max.item():.8g})")


def _exact_floats(arr, out, where, type_name):
    """ValueError at the first integer of `arr` that its float `out` does not hold exactly
    (beyond 2**24 for Single, 2**53 for Double, some are rounded)."""
    k = arr.dtype.kind
    if k not in "iuO" or k != "O" and np.iinfo(arr.dtype).bits - (k == "i") <= \
            np.finfo(out.dtype).nmant + 1:
        return                          # every such integer has a float of its own
    if arr.dtype == object:             # integral values of any kind: ints, Decimals...
        exact = [None if isinstance(x, (bool, np.bool_)) else exact_number(x)
                 for x in arr.tolist()]
        bad = [i for i, (e, f) in enumerate(zip(exact, out.tolist()))
               if isinstance(e, int) and not (np.isfinite(f) and int(f) == e)]
        i = bad[0] if bad else None
    else:
        # a float from 2**63 (2**64 unsigned) up is no integer of the dtype: none casts back
        inside = out < float(np.iinfo(arr.dtype).max) + 1.0
        bad = ~inside | (np.where(inside, out, 0).astype(arr.dtype) != arr)
        i = first(bad) if bad.any() else None
    if i is not None:
        raise ValueError(f"{where(i)}: {arr[i]} has no exact {type_name} (it would be "
                         f"stored as {out[i].item()!r}): keep an integer type")


def to_int(arr, dtype, where, type_name):
    dtype = np.dtype(dtype)
    info = np.iinfo(dtype)
    k = arr.dtype.kind
    if k == "O":
        arr = _object_numbers(arr, where, dtype, type_name)
        k = arr.dtype.kind
    if k == "b":
        return arr.astype(dtype, copy=False)
    if k in "iu":
        if not np.can_cast(arr.dtype, dtype):
            bad = (arr < info.min) | (arr > info.max)
            if bad.any():
                i = first(bad)
                raise ValueError(f"{where(i)}: {arr[i]} is outside the range of {type_name} "
                                 f"[{info.min}, {info.max}]")
        return arr.astype(dtype, copy=False)
    if k == "f":
        nan = np.isnan(arr)
        if nan.any():
            raise ValueError(f"{where(first(nan))}: NaN in an integer column ({type_name} has "
                             f"no missing value)")
        bad = ~np.isfinite(arr) | (arr != np.floor(arr))
        if bad.any():
            i = first(bad)
            raise ValueError(f"{where(i)}: {arr[i]} is not an integer ({type_name})")
        bad = (arr < float(info.min)) | (arr >= float(info.max + 1))
        if bad.any():
            i = first(bad)
            raise ValueError(f"{where(i)}: {arr[i]} is outside the range of {type_name} "
                             f"[{info.min}, {info.max}]")
        return arr.astype(dtype)
    raise TypeError(f"{where}: cannot store {arr.dtype} values as {type_name}")


def _to_float(arr, dtype, where, type_name):
    given = arr
    k = arr.dtype.kind
    if k == "O":
        arr = _object_numbers(arr, where, np.float64, type_name)
        k = arr.dtype.kind
    if k in "fiub":
        if k == "f" and arr.dtype.itemsize > 8:
            raise TypeError(f"{where}: {arr.dtype} has no ML.NET type (Double is 64-bit)")
        with np.errstate(over="ignore"):
            out = arr.astype(dtype, copy=False)
        _no_overflow(arr, out, where, type_name)
        _exact_floats(given if given.dtype == object else arr, out, where, type_name)
        return out
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
            if is_missing(x):
                missing_value(where(bad), T.Text, repr(x), "fill it first")
            raise TypeError(f"{where(bad)}: {x!r} ({type(x).__name__}) is not a str (Text "
                            f"values must be str)")
        return arr
    raise TypeError(f"{where}: cannot store {arr.dtype} values as Text (values must be str)")


class Utf8Text:
    """Text values as UTF-8 bytes and the byte offset of each value (Arrow's string layout),
    checked valid UTF-8, with the UTF-16 units ML.NET's block ends count: how Arrow strings go
    into Text blocks without a Python str each. The bytes are not copied (``data`` may be an
    Arrow buffer); slices share them, ``copy`` and ``concat`` compact them.

    ``offsets``: n + 1 byte offsets into ``data`` (int32 or int64, as Arrow gives them: a
    batch's offsets converted would be a fresh array each time); ``units``: n + 1 cumulative
    UTF-16 units (int64), or None when every byte is ASCII (the offsets then count the units
    too)."""

    __slots__ = ("offsets", "data", "units")

    def __init__(self, offsets, data, units=None):
        self.offsets = offsets
        self.data = data
        self.units = units

    @classmethod
    def checked(cls, offsets, data, where):
        """From Arrow's buffers (`offsets` int32 or int64), every value checked to be UTF-8;
        ValueError naming the first that is not (`where`: an idv.errors.Where)."""
        offsets = np.ascontiguousarray(offsets)
        if offsets.dtype != np.int32:
            offsets = offsets.astype(np.int64, copy=False)
        data = np.frombuffer(data, np.uint8) if not isinstance(data, np.ndarray) else data
        units, bad = _encode.utf8_units(offsets, data)
        if bad >= 0:
            raw = bytes(data[offsets[bad]:offsets[bad + 1]][:40])
            raise ValueError(f"{where(bad)}: the bytes {raw!r} are not valid UTF-8 (Text values "
                             f"must be)")
        return cls(offsets, data, units)

    def __len__(self):
        return len(self.offsets) - 1

    def __getitem__(self, rows):
        a, b, step = rows.indices(len(self))
        if step != 1 or b < a:
            raise IndexError("Utf8Text takes contiguous slices of rows only")
        return Utf8Text(self.offsets[a:b + 1], self.data,
                        None if self.units is None else self.units[a:b + 1])

    def cumulative_units(self):
        """UTF-16 units from the first value to the end of each (n + 1, from 0)."""
        u = self.offsets if self.units is None else self.units
        return u - u[0]

    def copy(self):
        """The values with only their own bytes (a slice lets go of the rest)."""
        o = self.offsets
        units = None if self.units is None else self.units - self.units[0]
        return Utf8Text(o - o[0], self.data[o[0]:o[-1]].copy(), units)

    @staticmethod
    def concat(parts):
        if len(parts) == 1:
            return parts[0]
        data = np.concatenate([p.data[p.offsets[0]:p.offsets[-1]] for p in parts])
        offsets = np.zeros(sum(len(p) for p in parts) + 1, np.int64)
        ascii = all(p.units is None for p in parts)
        units = None if ascii else np.zeros(len(offsets), np.int64)
        at = 0
        for p in parts:
            n = len(p)
            offsets[at + 1:at + n + 1] = p.offsets[1:] - p.offsets[0] + offsets[at]
            if units is not None:
                units[at + 1:at + n + 1] = p.cumulative_units()[1:] + units[at]
            at += n
        return Utf8Text(offsets, data, units)

    def payload(self):
        """The TextSpan block of these values."""
        return _encode.encode_text_utf8(self.offsets, self.data, self.units)

    def to_objects(self):
        """The values as an object array of str (to join batches given as str)."""
        o, d = self.offsets.tolist(), self.data
        out = np.empty(len(self), object)
        out[:] = [bytes(d[a:b]).decode("utf-8") for a, b in zip(o[:-1], o[1:])]
        return out

    def __array__(self, dtype=None, copy=None):
        out = self.to_objects()
        return out if dtype is None else out.astype(dtype)

    def tolist(self):
        return self.to_objects().tolist()

    def __repr__(self):
        return f"<idv Utf8Text: {len(self)} values, {self.offsets[-1] - self.offsets[0]} bytes>"


class Utf8Vectors:
    """Rows of Text items from Arrow lists: every row's items as one Utf8Text, and the n + 1
    row starts into them (0 first), as idv.Ragged holds other items."""

    __slots__ = ("values", "offsets")

    def __init__(self, values, offsets):
        self.values = values
        self.offsets = np.asarray(offsets, dtype=np.int64)

    def __len__(self):
        return len(self.offsets) - 1

    @staticmethod
    def concat(parts):
        offsets = [parts[0].offsets[:1]]
        at = 0
        for p in parts:
            offsets.append(p.offsets[1:] - p.offsets[0] + at)
            at += int(p.offsets[-1] - p.offsets[0])
        return Utf8Vectors(Utf8Text.concat([p.values[int(p.offsets[0]):int(p.offsets[-1])]
                                            for p in parts]), np.concatenate(offsets))


def join_items(parts):
    """Stored items of several batches as one: Utf8Text joined as such, else numpy arrays (a
    Utf8Text among str objects becomes str objects)."""
    if len(parts) == 1:
        return parts[0]
    if any(isinstance(p, Utf8Text) for p in parts):
        if all(isinstance(p, Utf8Text) for p in parts):
            return Utf8Text.concat(parts)
        parts = [p.to_objects() if isinstance(p, Utf8Text) else p for p in parts]
    return np.concatenate(parts)


def _to_dto(arr, where):
    if ticks.is_text(arr):          # ISO 8601 text: each its instant and its own offset
        text = arr.astype(object)
        utc = ticks.as_time(text, "M", where)          # its unit kept: to_ticks floors, warning
        arr = np.empty(len(text), [("utc", utc.dtype), ("offset_minutes", np.int16)])
        arr["utc"], arr["offset_minutes"] = utc, iso_offset_minutes(text, where)
    aware = ticks.aware_objects(arr, where) if arr.dtype == object else None
    if aware is not None:           # aware datetime objects: each with its own offset
        arr = aware
    if arr.dtype.names:
        if not {"utc", "offset_minutes"} <= set(arr.dtype.names):
            raise TypeError(f"{where}: DateTimeOffset values need fields utc and "
                            f"offset_minutes, not {arr.dtype}")
        utc, off = arr["utc"], arr["offset_minutes"]
    else:
        utc, off = arr, np.zeros(len(arr), np.int16)
    utc = ticks.datetime_ticks(np.asarray(utc), where, "DateTimeOffset")
    off = to_int(np.asarray(off), np.int64, where, "offset_minutes")
    bad = (off < -840) | (off > 840)
    if bad.any():
        i = first(bad)
        raise ValueError(f"{where(i)}: offset {off[i]} minutes is beyond +-14 hours")
    out = np.empty(len(arr), T.DTO_STORE_DTYPE)
    out["minutes"] = off
    out["ticks"] = ticks.clock_ticks(utc, off, where)
    return out


def _to_rowid(arr, where):
    if arr.dtype.names:
        if not {"low", "high"} <= set(arr.dtype.names):
            raise TypeError(f"{where}: RowId values need fields low and high, not {arr.dtype}")
        out = np.empty(len(arr), T.ROWID_DTYPE)
        out["low"] = to_int(np.asarray(arr["low"]), np.uint64, where, "RowId low")
        out["high"] = to_int(np.asarray(arr["high"]), np.uint64, where, "RowId high")
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
    out["low"] = to_int(arr, np.uint64, where, "RowId")
    return out


def _to_key(arr, item, where):
    # NaN, None, pandas' <NA>: a key's missing value, 0
    missing = np.isnan(arr) if arr.dtype.kind == "f" else \
        np.fromiter(map(is_missing, arr), bool, len(arr)) if arr.dtype == object else None
    if missing is not None and missing.any():
        arr = np.where(missing, 0, arr)
    out = to_int(arr, T.item_info(item).stored, where, str(item))
    bad = out > item.count
    if bad.any():
        i = first(bad)
        raise ValueError(f"{where(i)}: key value {out[i]} is above the key count "
                         f"{item.count} of {item} (0 = missing, 1..{item.count} valid)")
    return out


def _to_number(arr, item, where):
    info = T.item_info(item)
    convert = _to_float if info.dtype.kind == "f" else to_int
    return convert(arr, info.stored, where, item.name)


# item type -> fn(arr, where) for the items that are not plain numbers
_CONVERT = {
    T.Boolean: _to_bool,
    T.Text: _to_text,
    T.DateTime: ticks.datetime_ticks,
    T.TimeSpan: ticks.timespan_ticks,
    T.DateTimeOffset: _to_dto,
    T.RowId: _to_rowid,
}


def convert_items(item, arr, where):
    """Values of one item type (flattened) in their stored form, checked."""
    arr = np.asarray(arr)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    if not arr.size:        # no items (rows of []: numpy's float64), of any item type alike
        arr = np.empty(0, object)
    if isinstance(item, T.Key):
        return _to_key(arr, item, where)
    if arr.dtype == object and item is not T.Text:
        arr = _missing_as_nan(arr, item, where)
    convert = _CONVERT.get(item)
    if convert is not None:
        return convert(arr, where)
    return _to_number(arr, item, where)


def _missing_as_nan(arr, item, where):
    """The missing values among objects (None, NaN, pandas' NA) as `item` holds one: NaN in
    Single and Double; any other type (keys and Text have their own rules) refuses it, naming
    its row and the types that hold one, as for an Arrow null."""
    missing = missing_positions(arr.tolist())
    if not missing:
        return arr
    if item in (T.Single, T.Double):
        arr = arr.copy()
        arr[missing] = np.nan
        return arr
    i = missing[0]
    missing_value(where(i), item, repr(arr[i]))
