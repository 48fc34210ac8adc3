"""ML.NET types in Arrow, both ways: the one table of how each type and its items look in
Arrow, below idv._interop.arrow (reading into Arrow) and idv._writer.arrow (writing from Arrow).

Each item type's Arrow type (times in a unit: 'us', 'ns', or int64 .NET 'ticks'); items in
read()'s numpy forms as Arrow arrays; the ML.NET type of any Arrow type (for tables that do not
carry one), and whether an Arrow type still holds the type a field's ``idv.type`` names. The
field-metadata keys that carry the exact type and annotations are here too. pyarrow is imported
only when asked for (``import_pyarrow``).
"""
from __future__ import annotations

import numpy as np

from idv._values import ticks
from idv._values.infer import only_missing
from idv import types as T
from idv.errors import require

# Arrow field metadata: the ML.NET type string, and the column's annotations as JSON
# (idv._values.metadata.metadata_to_json)
TYPE_KEY = b"idv.type"
METADATA_KEY = b"idv.metadata"
# on a key column whose Arrow values are the KeyValues (a dictionary, or decoded back to the
# values, as Parquet does for non-string dictionaries) rather than the raw key integers
KEY_VALUES_KEY = b"idv.key"


def import_pyarrow():
    """pyarrow, or an ImportError that says how to install it."""
    return require("pyarrow", "reading or writing Arrow, Parquet or Feather, or reading CSV",
                   "idv[arrow]")


# ---------------------------------------------------------------------------------------------
# ML.NET -> Arrow
# ---------------------------------------------------------------------------------------------

# item type -> fn(pa, unit) -> its Arrow type, for the items that are not numbers; times are
# int64 .NET ticks with unit "ticks"
_ARROW_TYPE = {
    T.Text: lambda pa, unit: pa.string(),
    T.Boolean: lambda pa, unit: pa.bool_(),
    T.DateTime: lambda pa, unit: pa.int64() if unit == "ticks" else pa.timestamp(unit),
    T.TimeSpan: lambda pa, unit: pa.int64() if unit == "ticks" else pa.duration(unit),
    T.DateTimeOffset: lambda pa, unit: pa.struct([
        ("utc", pa.int64() if unit == "ticks" else pa.timestamp(unit, tz="UTC")),
        ("offset_minutes", pa.int16())]),
    T.RowId: lambda pa, unit: pa.struct([("low", pa.uint64()), ("high", pa.uint64())]),
}


def item_arrow_type(pa, item, unit):
    """The Arrow type of an item type's values (times in `unit`: 'us', 'ns' or 'ticks')."""
    if isinstance(item, T.Key):
        return pa.from_numpy_dtype(item.raw.dtype)
    make = _ARROW_TYPE.get(item)
    return make(pa, unit) if make is not None else pa.from_numpy_dtype(item.dtype)


def column_arrow_type(pa, t, unit, dictionary=None):
    """The Arrow type of a column of type `t`: vectors are (fixed-size) lists of their items; a
    key labelled by its KeyValues (`dictionary`, an Arrow array) is a dictionary of them."""
    if isinstance(t, T.Vector):
        inner = item_arrow_type(pa, t.item, unit)
        return pa.list_(inner, t.size) if t.is_fixed else pa.list_(inner)
    if dictionary is not None:
        index = pa.int32() if t.count <= 2**31 - 1 else pa.int64()
        return pa.dictionary(index, dictionary.type)
    return item_arrow_type(pa, t, unit)


# (numpy kind, item size) of numbers -> their format string in the Arrow C data interface
_C_FORMATS = {("i", 1): "c", ("u", 1): "C", ("i", 2): "s", ("u", 2): "S", ("i", 4): "i",
              ("u", 4): "I", ("i", 8): "l", ("u", 8): "L", ("f", 2): "e", ("f", 4): "f",
              ("f", 8): "g"}


def c_format(dtype):
    """The Arrow C data interface's format string of little-endian numbers of numpy `dtype`
    (the Arrow type pa.from_numpy_dtype gives them); None for other values."""
    dtype = np.dtype(dtype)
    if dtype.byteorder == ">":
        return None
    return _C_FORMATS.get((dtype.kind, dtype.itemsize))


def imports_c_streams(pa):
    """Whether pyarrow makes a ChunkedArray of an object that gives an Arrow C stream
    (``pa.chunked_array(obj)`` of ``obj.__arrow_c_stream__``: pyarrow 17 and later)."""
    return int(pa.__version__.split(".")[0]) >= 17


# Arrow's fixed-width types -> the numpy dtype of their buffer, and of the values where they
# differ (numpy_view reads the buffer itself)
_BUFFERS = {"int8": ("i1", None), "int16": ("<i2", None), "int32": ("<i4", None),
            "int64": ("<i8", None), "uint8": ("u1", None), "uint16": ("<u2", None),
            "uint32": ("<u4", None), "uint64": ("<u8", None), "halffloat": ("<f2", None),
            "float": ("<f4", None), "double": ("<f8", None),
            "date32[day]": ("<i4", "M8[D]"), "date64[ms]": ("<M8[ms]", None)}


def numpy_view(arr):
    """`arr`'s values in numpy, a view of Arrow's buffer where it can be: numbers, dates and
    Booleans without nulls straight from their buffer, because pyarrow's to_numpy imports
    pandas on its first call in a process (numbers_to_arrow says why that matters), the rest
    by to_numpy."""
    name = str(arr.type) if hasattr(arr, "buffers") and not arr.null_count else None
    if name != "bool" and name not in _BUFFERS:
        return arr.to_numpy(zero_copy_only=False)
    data, n = arr.buffers()[1], len(arr)
    if name == "bool":              # one bit a value, the first the lowest
        if data is None:
            return np.zeros(0, bool)
        bits = np.unpackbits(np.frombuffer(data, np.uint8), count=arr.offset + n,
                             bitorder="little")
        return bits[arr.offset:].view(bool)
    stored, values = _BUFFERS[name]
    stored = np.dtype(stored)
    if data is None:                # an empty array may come without buffers
        return np.empty(0, values or stored)
    view = np.frombuffer(data, stored, n, arr.offset * stored.itemsize)
    if values is not None:
        return view.astype(values)
    view.flags.writeable = False    # Arrow's memory, as to_numpy gives it
    return view


def numbers_to_arrow(pa, values, type_=None, mask=None):
    """An Arrow array of a 1-d numpy array of numbers or Booleans (`type_`: its Arrow type,
    else numpy's; `mask`: True where a value is null), numbers sharing the array's memory.
    Made from buffers, not by pa.array, which imports pandas on its first call in a process:
    0.3-0.6 s before a first to_arrow or `idv convert` gives anything."""
    values = np.ascontiguousarray(values)
    if values.dtype.kind not in "biuf" or not values.dtype.isnative or values.ndim != 1:
        return pa.array(values, type=type_, mask=mask)
    if type_ is None:
        type_ = pa.from_numpy_dtype(values.dtype)
    data = np.packbits(values, bitorder="little") if values.dtype.kind == "b" else values
    validity, nulls = None, 0
    if mask is not None and mask.any():
        validity = pa.py_buffer(np.packbits(~np.asarray(mask, bool), bitorder="little"))
        nulls = int(np.count_nonzero(mask))
    return pa.Array.from_buffers(type_, len(values), [validity, pa.py_buffer(data)], nulls)


# Text values crossing between Arrow and Python's str without pyarrow's conversions (which
# import pandas) at most: beyond, theirs (6-9x faster into Arrow than encoding a value at a
# time in Python, a third faster out of it than to_pylist) outweighs the import
SMALL_TEXTS = 1 << 16


def texts_to_arrow(pa, values):
    """An Arrow string array of a 1-d numpy array of str, for a key's KeyValues: up to
    SMALL_TEXTS made from buffers, not by pa.array (numbers_to_arrow says why; a column's text
    goes by pa.array, 6-9x faster); a lone surrogate raises UnicodeEncodeError either way."""
    items = values.tolist() if len(values) <= SMALL_TEXTS else None
    if items is None or not all(type(v) is str for v in items):  # pyarrow's, and its errors
        return pa.array(values, type=pa.string())
    encoded = [v.encode("utf-8") for v in items]
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    if offsets[-1] > 2**31 - 1:
        return pa.array(values, type=pa.string())
    return pa.Array.from_buffers(pa.string(), len(encoded), [
        None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))])


def empty_table(pa, schema):
    """A table of no rows of `schema`, made from empty arrays (not Schema.empty_table, which
    imports pandas: numbers_to_arrow says why that matters)."""
    return pa.Table.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)


def times_to_arrow(pa, ticks100, type_, unit, safe, describe, what, target=None):
    """int64 100-ns counts as an Arrow array of `type_` (timestamp, duration, date32): their
    counts of `unit` (or `target`: None where it cannot hold one) made by ticks.ticks_to_unit
    into Arrow's memory pool, whose pages are reused (fresh ones cost more than the pass)."""
    out = np.frombuffer(pa.allocate_buffer(8 * len(ticks100)), np.int64)
    counts = ticks.ticks_to_unit(ticks100, unit, safe, describe, what, target=target, out=out)
    if counts is not None and pa.types.is_date32(type_):
        counts = counts.astype(np.int32)
    return None if counts is None else numbers_to_arrow(pa, counts).view(type_)


def _datetimes_to_arrow(pa, flat, unit, safe, describe, what="DateTime", tz=None):
    if unit == "ticks":
        return numbers_to_arrow(pa, ticks.net_ticks(flat), pa.int64())
    at = pa.timestamp(unit, tz=tz)
    return times_to_arrow(pa, flat.view(np.int64), at, unit, safe, describe, what)


def _timespans_to_arrow(pa, flat, unit, safe, describe):
    v = flat.view(np.int64)
    if unit == "ticks":
        return numbers_to_arrow(pa, v, pa.int64())
    return times_to_arrow(pa, v, pa.duration(unit), unit, safe, describe, "TimeSpan")


def _dtos_to_arrow(pa, flat, unit, safe, describe):
    utc = _datetimes_to_arrow(pa, flat["utc"], unit, safe, describe, "DateTimeOffset", "UTC")
    off = numbers_to_arrow(pa, np.asarray(flat["offset_minutes"], dtype=np.int16))
    return pa.StructArray.from_arrays([utc, off], names=["utc", "offset_minutes"])


def _rowids_to_arrow(pa, flat, unit, safe, describe):
    return pa.StructArray.from_arrays(
        [numbers_to_arrow(pa, flat["low"]), numbers_to_arrow(pa, flat["high"])],
        names=["low", "high"])


# item type -> fn(pa, flat items, unit, safe, describe) -> Arrow array, where numpy's own
# conversion does not do
_TO_ARROW = {
    T.Text: lambda pa, flat, unit, safe, describe: pa.array(flat, type=pa.string()),
    T.DateTime: _datetimes_to_arrow,
    T.TimeSpan: _timespans_to_arrow,
    T.DateTimeOffset: _dtos_to_arrow,
    T.RowId: _rowids_to_arrow,
}


def key_values_mode(datetime):
    """The ``datetime=`` mode of a read (a mode, or the ticks.Units it chose, which name only
    its time columns) that a key's DateTime / TimeSpan KeyValues take: their unit is then
    chosen from their own values, whatever the read's other columns, so that every entry
    point gives them one type."""
    return (datetime.mode or "us") if isinstance(datetime, ticks.Units) else datetime


def key_value_times(values, datetime, safe, where):
    """A key's KeyValues (read()'s form) with DateTime / TimeSpan items in the unit the read's
    `datetime` gives them (key_values_mode; ticks.retimed), as pandas holds them; other
    items as they are."""
    kind = values.dtype.kind
    if kind not in "mM":
        return values
    item = T.DateTime if kind == "M" else T.TimeSpan
    return ticks.retimed(values, item, key_values_mode(datetime), where, safe)


def check_key_labels(raw, count, describe):
    """ValueError for the first of `raw` (stored values of a key labelled by its `count`
    KeyValues) above `count`: ML.NET writes and reads such a value as it is, but no KeyValue
    labels it, and a dictionary (Arrow) or Categorical (pandas) holds only labels. Its column
    type was chosen before the rows were read (a stream's schema), so the read refuses, naming
    the file, the column and row (`describe(i)`: errors.column_place's) and the reads that
    give raw keys."""
    bad = np.flatnonzero(np.asarray(raw) > count)
    if len(bad):
        i = int(bad[0])
        raise ValueError(f"{describe(i)}: key value {raw[i]} is above the key count "
                         f"{count}, so no KeyValue labels it; idv.read() and `idv cat` give "
                         f"the raw keys (or leave the column out of columns= and filter=)")


def key_values_to_arrow(pa, item, values, unit, safe, describe, where="KeyValues"):
    """A key's KeyValues annotation (its item type, its values) as the Arrow array its values
    map onto: items_to_arrow's, Text made by texts_to_arrow; times in `unit` (a mode, as
    key_values_mode gives it: 'auto' chooses from the values; `where` names them then)."""
    if item is T.Text:
        return texts_to_arrow(pa, values)
    if item in ticks.TIME_ITEMS:
        unit, safe = ticks.unit_for(ticks.ticks100_of(values), key_values_mode(unit), where,
                                    item.name, safe)
    return items_to_arrow(pa, item, values, unit, safe, describe)


def items_to_arrow(pa, item, flat, unit, safe, describe):
    """A flat numpy array of items (read()'s forms) -> an Arrow array (times in `unit`, checked
    by ticks.ticks_to_unit; `describe(i)` names item i in its messages)."""
    convert = _TO_ARROW.get(item)
    if convert is not None:
        return convert(pa, flat, unit, safe, describe)
    return numbers_to_arrow(pa, flat)


# ---------------------------------------------------------------------------------------------
# Arrow -> ML.NET
# ---------------------------------------------------------------------------------------------

def storage_type(at):
    """An extension type's storage type; any other Arrow type as it is."""
    pa = import_pyarrow()
    if isinstance(at, pa.BaseExtensionType):
        return at.storage_type
    return at


def is_string_type(pa, at):
    """Whether an Arrow type holds strings (string, large_string, string_view)."""
    return (pa.types.is_string(at) or pa.types.is_large_string(at)
            or getattr(pa.types, "is_string_view", lambda _: False)(at))


def is_list_type(pa, at):
    """Whether an Arrow type holds lists of any length (list, large_list and their views)."""
    return (pa.types.is_list(at) or pa.types.is_large_list(at)
            or getattr(pa.types, "is_list_view", lambda _: False)(at)
            or getattr(pa.types, "is_large_list_view", lambda _: False)(at))


def _struct_names(pa, at):
    return {at.field(i).name for i in range(at.num_fields)} if pa.types.is_struct(at) else set()


def infer_item(pa, at, where):
    """The ML.NET item type for an Arrow type (no idv.type metadata)."""
    if pa.types.is_dictionary(at):
        return infer_item(pa, at.value_type, where)
    if pa.types.is_boolean(at):
        return T.Boolean
    if pa.types.is_float16(at):
        return T.Single
    if pa.types.is_integer(at) or pa.types.is_floating(at):
        return T.item_from_dtype(at.to_pandas_dtype(), where)
    if is_string_type(pa, at):
        return T.Text
    if pa.types.is_timestamp(at):
        return T.DateTime if at.tz is None else T.DateTimeOffset
    if pa.types.is_date(at):
        return T.DateTime
    if pa.types.is_duration(at) or pa.types.is_time(at):
        return T.TimeSpan
    names = _struct_names(pa, at)
    if names:
        if {"utc", "offset_minutes"} <= names:
            return T.DateTimeOffset
        if {"low", "high"} <= names:
            return T.RowId
        raise TypeError(f"{where}: struct {at} has no ML.NET type (DateTimeOffset needs fields "
                        f"utc, offset_minutes; RowId needs low, high)")
    if pa.types.is_decimal(at):
        raise TypeError(f"{where}: {at} has no ML.NET type; cast it to float64 (Double) first")
    if pa.types.is_null(at):
        only_missing(where)
    raise TypeError(f"{where}: Arrow type {at} has no ML.NET type")


def infer_type(pa, at, where):
    """The ML.NET column type for an Arrow type; dictionaries are keys (decided by the caller)."""
    if isinstance(at, pa.BaseExtensionType):
        shape = getattr(at, "shape", None)
        if shape is not None and pa.types.is_fixed_size_list(at.storage_type):
            perm = getattr(at, "permutation", None)
            if perm is not None and list(perm) != list(range(len(shape))):
                raise TypeError(f"{where}: a permuted tensor {at} has no ML.NET type")
            return T.Vector(infer_item(pa, at.storage_type.value_type, where), *shape)
        return infer_type(pa, at.storage_type, where)
    if pa.types.is_fixed_size_list(at):
        dims = []
        while pa.types.is_fixed_size_list(at):
            dims.append(at.list_size)
            at = at.value_type
        if is_list_type(pa, at):
            raise TypeError(f"{where}: lists inside fixed-size lists have no ML.NET type")
        return T.Vector(infer_item(pa, at, where), *dims)
    if is_list_type(pa, at):
        inner = at.value_type
        if is_list_type(pa, inner) or pa.types.is_fixed_size_list(inner):
            raise TypeError(f"{where}: nested lists ({at}) have no ML.NET type")
        return T.Vector(infer_item(pa, inner, where))
    return infer_item(pa, at, where)


def _dto_compatible(pa, at):
    if not {"utc", "offset_minutes"} <= _struct_names(pa, at):
        return False
    utc = at.field("utc").type
    return pa.types.is_timestamp(utc) or pa.types.is_int64(utc)


# item type -> fn(pa, Arrow type) -> whether the Arrow type can hold the items as they are
# written (numbers: the same numpy dtype)
_COMPATIBLE = {
    T.Text: lambda pa, at: is_string_type(pa, at),
    T.Boolean: lambda pa, at: pa.types.is_boolean(at),
    T.DateTime: lambda pa, at: ((pa.types.is_timestamp(at) and at.tz is None)
                                or pa.types.is_int64(at) or pa.types.is_date(at)),
    T.TimeSpan: lambda pa, at: pa.types.is_duration(at) or pa.types.is_int64(at),
    T.DateTimeOffset: _dto_compatible,
    T.RowId: lambda pa, at: {"low", "high"} <= _struct_names(pa, at),
}


def _item_compatible(pa, item, at):
    if isinstance(item, T.Key):
        return pa.types.is_integer(at) or pa.types.is_dictionary(at)
    check = _COMPATIBLE.get(item)
    if check is not None:
        return check(pa, at)
    if pa.types.is_integer(at) or pa.types.is_floating(at):
        return np.dtype(at.to_pandas_dtype()) == item.dtype
    return False


def arrow_holds(pa, t, at, meta, key_values=False):
    """Whether Arrow type `at` can hold the column type `t` from idv.type metadata (so the
    metadata still describes the column: nobody cast it since). `key_values`: the column
    holds a key's values (its KeyValues), as a dictionary or decoded."""
    at = storage_type(at)
    if isinstance(t, T.Vector):
        if t.is_fixed:
            if not pa.types.is_fixed_size_list(at):
                return False
            size, inner = at.list_size, at.value_type
            while pa.types.is_fixed_size_list(inner):
                size *= inner.list_size
                inner = inner.value_type
            return size == t.size and _item_compatible(pa, t.item, inner)
        return is_list_type(pa, at) and _item_compatible(pa, t.item, at.value_type)
    if isinstance(t, T.Key):
        kv = meta.get("KeyValues")
        labelled = kv is not None and np.asarray(kv[1]).size == t.count
        if pa.types.is_dictionary(at):
            return labelled
        if key_values:
            return labelled and _item_compatible(pa, kv[0].item, at)
        return pa.types.is_integer(at)
    return _item_compatible(pa, t, at)
