"""Arrow arrays' items as the values idv.Writer takes, one ML.NET item type at a time: numbers
as numpy views of Arrow's buffers, strings as a Utf8Text on Arrow's bytes and offsets, times
as .NET ticks (idv._values.ticks), keys checked against their count; a missing value refused where
the type has none. Used by idv._writer.arrow for each field's chunks. """
from __future__ import annotations

import numpy as np

from idv._values import ticks
from idv._values.arrow_types import SMALL_TEXTS, numpy_view
from idv import types as T
from idv._writer.missing import missing_value
from idv._writer.values import Utf8Text


def first_null(arr):
    """The position of the first null of `arr` (an Arrow array or chunked array that has one)."""
    mask = arr.is_null()
    if hasattr(mask, "combine_chunks"):
        mask = mask.combine_chunks()
    return int(np.flatnonzero(mask.to_numpy(zero_copy_only=False))[0])


def no_nulls(arr, describe, t):
    """ValueError at the first null of `arr` (`describe(i)` names row i) for a column of type
    `t`, which has no missing value, saying how to write it."""
    if arr.null_count:
        missing_value(describe(first_null(arr)), t, "null",
                      "fill the nulls first" if t is T.Text else "fill or drop the nulls first")


def _int64s(pa, arr):
    """`arr`'s values as int64 counts (of its unit, for times); time32 by way of int32, as
    pyarrow casts it to no wider integer."""
    if pa.types.is_time32(arr.type):
        arr = arr.cast(pa.int32())
    return numpy_view(arr.cast(pa.int64())).astype(np.int64)


def _utc_datetime64(pa, arr):
    """Timestamps (any unit and zone) as UTC datetime64; int64 as .NET ticks."""
    if pa.types.is_timestamp(arr.type):
        counts = numpy_view(arr.view(pa.int64()) if arr.offset == 0 else arr.cast(pa.int64()))
        return ticks.counts_as(counts.astype(np.int64), "M", arr.type.unit)
    return ticks.from_net_ticks(_int64s(pa, arr))


def _offsets_of_zone(pa, arr, describe):
    """Per-value UTC offsets (minutes) of a zoned timestamp array."""
    import pyarrow.compute as pc
    tz = arr.type.tz
    if tz in ("UTC", "utc", "Z", "+00:00", "Etc/UTC"):
        return np.zeros(len(arr), np.int16)
    unit = arr.type.unit
    local = numpy_view(pc.local_timestamp(arr).cast(pa.int64())).astype(np.int64)
    utc = numpy_view(arr.cast(pa.int64())).astype(np.int64)
    per_minute = {"s": 60, "ms": 60_000, "us": 60_000_000, "ns": 60_000_000_000}[unit]
    diff = local - utc
    bad = diff % per_minute != 0
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{describe(i)}: the UTC offset of zone {tz!r} here is not a whole "
                         f"number of minutes, which .NET's DateTimeOffset needs")
    return (diff // per_minute).astype(np.int16)


def _struct_fields(arr):
    return {arr.type.field(i).name: child for i, child in enumerate(arr.flatten())}


def _keys_from_arrow(pa, item, arr, describe, remap):
    at = arr.type
    if remap is not None:       # the column holds the key's values: map them
        return remap(arr, describe)
    if pa.types.is_dictionary(at):
        raise TypeError(f"{describe(0)}: a dictionary inside a vector cannot be a key "
                        f"vector; decode it first")
    if pa.types.is_integer(at) or pa.types.is_floating(at):
        return numpy_view(arr.fill_null(0)) if arr.null_count else numpy_view(arr)
    no_nulls(arr, describe, item)
    return numpy_view(arr)


def _floats_from_arrow(pa, item, arr, describe):
    at = arr.type
    if pa.types.is_null(at):
        return np.full(len(arr), np.nan, item.dtype)
    if pa.types.is_floating(at) and arr.null_count:
        arr = arr.fill_null(float("nan"))
    elif arr.null_count:
        no_nulls(arr, describe, item)
    return numpy_view(arr)


def filled_text(pa, arr, text):
    """Arrow strings with their nulls replaced by `text` (None: as they are): what null Text
    becomes where the caller said (``missing_text=``), ML.NET having no missing Text."""
    if text is None or not arr.null_count:
        return arr
    import pyarrow.compute as pc
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = arr.cast(pa.large_string())     # string_view: fill_null has no kernel for it
    return pc.fill_null(arr, text)


def utf8_from_arrow(pa, arr, describe):
    """A Text column's Arrow strings (no nulls) as the writer's Utf8Text: the offsets and the
    UTF-8 bytes of Arrow's buffers, checked, the bytes not copied. Binary is taken as its
    bytes (checked as text is); string_view (and numbers given types=Text) are cast to
    large_string first."""
    at = arr.type
    if pa.types.is_binary(at) or pa.types.is_large_binary(at):     # checked below, by row
        arr = arr.view(pa.large_string() if pa.types.is_large_binary(at) else pa.string())
        at = arr.type
    if not (pa.types.is_string(at) or pa.types.is_large_string(at)):
        arr = arr.cast(pa.large_string())
        at = arr.type
    n = len(arr)
    _, offsets, data = arr.buffers()
    wide = pa.types.is_large_string(at)
    if offsets is None:             # an empty array may come without buffers
        return Utf8Text(np.zeros(n + 1, np.int64), np.zeros(0, np.uint8))
    offsets = np.frombuffer(offsets, np.int64 if wide else np.int32, n + 1,
                            arr.offset * (8 if wide else 4))
    data = np.zeros(0, np.uint8) if data is None else np.frombuffer(data, np.uint8)
    return Utf8Text.checked(offsets, data, describe)


def _texts_from_arrow(pa, arr, describe):
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = arr.cast(pa.string())      # string_view, or numbers given types=Text
    if len(arr) > SMALL_TEXTS:           # to_numpy: a third faster, and imports pandas
        return numpy_view(arr).astype(object, copy=False)
    out = np.empty(len(arr), object)     # a dictionary's values, most often
    out[:] = arr.to_pylist()
    return out


def _datetimes_from_arrow(pa, arr, describe):
    if pa.types.is_timestamp(arr.type) or pa.types.is_integer(arr.type):
        return _utc_datetime64(pa, arr)
    return numpy_view(arr)


def _timespans_from_arrow(pa, arr, describe):
    at = arr.type
    if pa.types.is_duration(at) or pa.types.is_time(at):
        return ticks.counts_as(_int64s(pa, arr), "m", at.unit)
    if pa.types.is_integer(at):
        return _int64s(pa, arr).view(T.TIMESPAN_DTYPE)
    return numpy_view(arr)


def _dtos_from_arrow(pa, arr, describe):
    at = arr.type
    if pa.types.is_struct(at):
        fields = _struct_fields(arr)
        utc = _utc_datetime64(pa, fields["utc"])
        off = numpy_view(fields["offset_minutes"])
    elif pa.types.is_timestamp(at):
        utc = _utc_datetime64(pa, arr)
        off = (_offsets_of_zone(pa, arr, describe) if at.tz is not None
               else np.zeros(len(arr), np.int16))
    else:
        return numpy_view(arr)
    out = np.empty(len(arr), [("utc", utc.dtype), ("offset_minutes", np.int64)])
    out["utc"] = utc
    out["offset_minutes"] = off
    return out


def _rowids_from_arrow(pa, arr, describe):
    if not pa.types.is_struct(arr.type):
        return numpy_view(arr)
    fields = _struct_fields(arr)
    out = np.empty(len(arr), T.ROWID_DTYPE)
    out["low"] = numpy_view(fields["low"])
    out["high"] = numpy_view(fields["high"])
    return out


# item type -> fn(pa, Arrow array without nulls, describe) -> the values the writer takes,
# where numpy's own conversion does not do
_FROM_ARROW = {
    T.Text: _texts_from_arrow,
    T.DateTime: _datetimes_from_arrow,
    T.TimeSpan: _timespans_from_arrow,
    T.DateTimeOffset: _dtos_from_arrow,
    T.RowId: _rowids_from_arrow,
}


def items_from_arrow(pa, item, arr, describe, remap=None):
    """A flat Arrow array -> numpy values the writer takes for `item`."""
    if isinstance(arr.type, pa.BaseExtensionType):
        arr = arr.storage
    if isinstance(item, T.Key):
        return _keys_from_arrow(pa, item, arr, describe, remap)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if item in (T.Single, T.Double):      # nulls are NaN
        return _floats_from_arrow(pa, item, arr, describe)
    no_nulls(arr, describe, item)
    convert = _FROM_ARROW.get(item)
    return convert(pa, arr, describe) if convert is not None else numpy_view(arr)
