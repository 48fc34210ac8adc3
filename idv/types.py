"""ML.NET's column types as Python objects, and the table of facts about each item type.

Item types are singletons (`idv.Single`, `idv.Text`, ...); `Key` and `Vector` are built from
them: `idv.Key(idv.UInt32, count=5)`, `idv.Vector(idv.Single, 10)`, `idv.Vector(idv.Int32, 2, 3)`,
`idv.Vector(idv.Single)` (variable size). Types compare by value.

`ITEM_TYPES` holds, per item type, what the file format needs to know about it: its codec load
name (and the legacy names still read), how it is encoded, the little-endian dtype it is stored
as. The decoders (`idv._codecs.CODECS`) and the writer are both built from it, so a new item
type is one entry here plus its codec.

A type's string form (``str(t)``, ML.NET's own: ``Vector<Key<Byte, 9>, 3>``) reads back with
`parse_type`: Arrow field metadata and the JSON of annotations carry types that way.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

# .NET ticks (100 ns since 0001-01-01) of the Unix epoch, which numpy's datetime64 counts from;
# the tick conversions themselves are in idv._values.ticks
EPOCH_TICKS = 621355968000000000
MAX_DATETIME_TICKS = 3155378975999999999   # DateTime.MaxValue
TICKS_PER_MINUTE = 600000000
TICKS_PER_DAY = 864000000000

DATETIME_DTYPE = np.dtype("datetime64[100ns]")
TIMESPAN_DTYPE = np.dtype("timedelta64[100ns]")
# Lossless DateTimeOffset: the UTC instant plus the offset; local clock = utc + offset.
DATETIMEOFFSET_DTYPE = np.dtype([("utc", DATETIME_DTYPE), ("offset_minutes", "<i2")])
# DataViewRowId is a 128-bit integer stored as (Low, High); numpy has no uint128.
ROWID_DTYPE = np.dtype([("low", "<u8"), ("high", "<u8")])
# A DateTimeOffset block stores n int16 offset minutes, then n int64 local clock ticks; the
# writer holds the values in this form until it encodes them.
DTO_STORE_DTYPE = np.dtype([("minutes", "<i2"), ("ticks", "<i8")])
TICKS_DTYPE = np.dtype("<i8")


class DataViewType:
    """Base of all column types."""

    __slots__ = ()

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype this type's items read into."""
        raise NotImplementedError

    def __repr__(self):
        return str(self)


class PrimitiveType(DataViewType):
    """A scalar item type: number, Boolean, Text, date/time or RowId.

    The sixteen of them are singletons (``idv.Single``, ``idv.Text`` ...): compare them with
    ``is`` or ``==``. ``name`` is ML.NET's name (``"Single"``), ``short_name`` the code of
    ML.NET's text loader (``"R4"``).
    """

    __slots__ = ("name", "_dtype", "short_name")

    def __init__(self, name: str, dtype, short_name: str):
        self.name = name
        self._dtype = np.dtype(dtype)
        self.short_name = short_name

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype of the values (``object`` for Text, structured for DateTimeOffset
        and RowId)."""
        return self._dtype

    @property
    def is_numeric(self) -> bool:
        """True for the integer and floating-point types."""
        return self._dtype.kind in "iuf"

    def __str__(self):
        return self.name

    def __reduce__(self):
        return (_primitive, (self.name,))


def _primitive(name):
    return PRIMITIVES[name]


SByte = PrimitiveType("SByte", np.int8, "I1")
Byte = PrimitiveType("Byte", np.uint8, "U1")
Int16 = PrimitiveType("Int16", np.int16, "I2")
UInt16 = PrimitiveType("UInt16", np.uint16, "U2")
Int32 = PrimitiveType("Int32", np.int32, "I4")
UInt32 = PrimitiveType("UInt32", np.uint32, "U4")
Int64 = PrimitiveType("Int64", np.int64, "I8")
UInt64 = PrimitiveType("UInt64", np.uint64, "U8")
Single = PrimitiveType("Single", np.float32, "R4")
Double = PrimitiveType("Double", np.float64, "R8")
Boolean = PrimitiveType("Boolean", np.bool_, "BL")
Text = PrimitiveType("Text", object, "TX")
DateTime = PrimitiveType("DateTime", DATETIME_DTYPE, "DT")
DateTimeOffset = PrimitiveType("DateTimeOffset", DATETIMEOFFSET_DTYPE, "DZ")
TimeSpan = PrimitiveType("TimeSpan", TIMESPAN_DTYPE, "TS")
RowId = PrimitiveType("RowId", ROWID_DTYPE, "UG")

KEY_RAW_TYPES = (Byte, UInt16, UInt32, UInt64)

# How a block holds the items of a type (reference section 4): raw little-endian values of a
# fixed width, bits, length-prefixed UTF-16 boundaries plus UTF-8, or DateTimeOffset's two runs.
FIXED, BOOL, TEXT, DTO = "fixed", "bool", "text", "dto"


@dataclass(frozen=True)
class ItemType:
    """What the format needs to know about one item type.

    ``load_name`` is the codec name ML.NET writes; ``legacy_names`` are older load names that
    still read as this type (idv._codecs decodes them, DvBool with a layout of its own);
    ``kind`` is how a block holds the items (FIXED, BOOL, TEXT or DTO); ``stored`` is the
    little-endian dtype the items are encoded from (None for BOOL and TEXT, which are not an
    array of fixed-size records).
    """

    type: PrimitiveType
    load_name: str
    kind: str
    stored: np.dtype = None
    legacy_names: tuple = ()

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype the items read into (the type's own)."""
        return self.type.dtype

    @property
    def itemsize(self) -> int:
        """Bytes per stored item (FIXED and DTO), 0 for BOOL and TEXT."""
        return self.stored.itemsize if self.stored is not None else 0


ITEM_TYPES = (
    #        type            load name         kind   stored as         legacy load names
    ItemType(SByte,          "SByte",          FIXED, np.dtype("<i1")),
    ItemType(Byte,           "Byte",           FIXED, np.dtype("<u1")),
    ItemType(Int16,          "Int16",          FIXED, np.dtype("<i2")),
    ItemType(UInt16,         "UInt16",         FIXED, np.dtype("<u2")),
    ItemType(Int32,          "Int32",          FIXED, np.dtype("<i4")),
    ItemType(UInt32,         "UInt32",         FIXED, np.dtype("<u4")),
    ItemType(Int64,          "Int64",          FIXED, np.dtype("<i8")),
    ItemType(UInt64,         "UInt64",         FIXED, np.dtype("<u8")),
    ItemType(Single,         "Single",         FIXED, np.dtype("<f4")),
    ItemType(Double,         "Double",         FIXED, np.dtype("<f8")),
    ItemType(Boolean,        "Boolean",        BOOL,  None,             ("DvBool",)),
    ItemType(Text,           "TextSpan",       TEXT),
    ItemType(DateTime,       "DateTime",       FIXED, TICKS_DTYPE,      ("DvDateTime",)),
    ItemType(DateTimeOffset, "DateTimeOffset", DTO,   DTO_STORE_DTYPE,  ("DvDateTimeZone",)),
    ItemType(TimeSpan,       "TimeSpan",       FIXED, TICKS_DTYPE,      ("DvTimeSpan",)),
    ItemType(RowId,          "DataViewRowId",  FIXED, ROWID_DTYPE),
)
_BY_TYPE = {e.type: e for e in ITEM_TYPES}
PRIMITIVES = {e.type.name: e.type for e in ITEM_TYPES}


def item_info(item) -> ItemType:
    """The ITEM_TYPES entry of an item type; a key's is that of its raw type."""
    return _BY_TYPE[item.raw if isinstance(item, Key) else item]


class Key(DataViewType):
    """A key (categorical) type: raw unsigned values, 0 = missing, 1..count valid.

    Parameters
    ----------
    raw : PrimitiveType, default idv.UInt32
        The unsigned type the keys are stored as: Byte, UInt16, UInt32 or UInt64.
    count : int
        The number of valid values (positive, and fitting ``raw``).
    min : int, default 0
        Only ever nonzero on keys read from files that ML.NET 0.x wrote with its legacy
        ``Key`` codec (``Key<UInt32, 5, min=3>``: raw value v > 0 is the key min + v - 1).
        ML.NET 1.x keys have no min, so such a type can be read but not written.

    Examples
    --------
    ML.NET's ``Key<UInt32, 0-4>``:

    >>> idv.Key(idv.UInt32, count=5)
    Key<UInt32, 5>
    """

    __slots__ = ("raw", "count", "min")

    def __init__(self, raw: PrimitiveType = UInt32, count: int = None, *, min: int = 0):
        if raw not in KEY_RAW_TYPES:
            raise TypeError(f"a key's raw type is Byte, UInt16, UInt32 or UInt64, not {raw}")
        if count is None or int(count) <= 0:
            raise ValueError(f"a key's count must be positive (ML.NET rejects {count})")
        if int(count) > np.iinfo(raw.dtype).max:
            raise ValueError(f"key count {count} does not fit {raw}")
        if not 0 <= int(min) <= 2**64 - 1:
            raise ValueError(f"a key's min is an unsigned 64-bit integer, not {min}")
        self.raw = raw
        self.count = int(count)
        self.min = int(min)

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the raw key values (that of the ``raw`` type)."""
        return self.raw.dtype

    def __str__(self):
        return f"Key<{self.raw}, {self.count}{f', min={self.min}' if self.min else ''}>"

    def __eq__(self, other):
        return isinstance(other, Key) and ((self.raw, self.count, self.min)
                                           == (other.raw, other.count, other.min))

    def __hash__(self):
        return hash(("Key", self.raw.name, self.count, self.min))


class Vector(DataViewType):
    """A vector of an item type; dims all > 0 is fixed size, a 0 dim (or none) is variable.

    Parameters
    ----------
    item : PrimitiveType or Key
        The item type.
    *dims : int
        The dimensions: ``idv.Vector(idv.Int32, 2, 3)`` is a 2 x 3 matrix per row; none
        (``dims == (0,)``) is variable size.

    Examples
    --------
    >>> idv.Vector(idv.Single, 10), idv.Vector(idv.Single).is_fixed
    (Vector<Single, 10>, False)
    """

    __slots__ = ("item", "dims")

    def __init__(self, item, *dims: int):
        if isinstance(item, Vector) or not isinstance(item, (PrimitiveType, Key)):
            raise TypeError(f"a vector's item type must be a primitive or key type, not {item!r}")
        dims = tuple(int(d) for d in dims) or (0,)
        if any(d < 0 for d in dims):
            raise ValueError(f"vector dimensions must be >= 0, got {dims}")
        self.item = item
        self.dims = dims

    @property
    def size(self) -> int:
        """The number of items, 0 for variable size."""
        return math.prod(self.dims)

    @property
    def is_fixed(self) -> bool:
        """True when every row has the same size (no dimension is 0)."""
        return self.size > 0

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the items."""
        return self.item.dtype

    def __str__(self):
        if self.dims == (0,):
            return f"Vector<{self.item}>"
        return f"Vector<{self.item}, {', '.join(str(d) if d else '*' for d in self.dims)}>"

    def __eq__(self, other):
        return isinstance(other, Vector) and (self.item, self.dims) == (other.item, other.dims)

    def __hash__(self):
        return hash(("Vector", self.item, self.dims))


def item_type(t: DataViewType):
    """The item type of a vector, else the type itself."""
    return t.item if isinstance(t, Vector) else t


# numpy dtype (native order) -> the item type that reads into it, for the plain numbers and bool
_BY_DTYPE = {e.dtype: e.type for e in ITEM_TYPES if e.dtype.kind in "biuf"}
# structured dtypes: the fields that identify DateTimeOffset and RowId values
_BY_FIELDS = ((DateTimeOffset, {"utc", "offset_minutes"}), (RowId, {"low", "high"}))


def item_from_dtype(dt, where="value"):
    """The ML.NET item type for a numpy dtype, or None for object (decided by the values)."""
    dt = np.dtype(dt)
    if dt.names:
        for item, fields in _BY_FIELDS:
            if fields <= set(dt.names):
                return item
        raise TypeError(f"{where}: structured dtype {dt} has no ML.NET type (DateTimeOffset needs "
                        f"fields utc, offset_minutes; RowId needs low, high)")
    k = dt.kind
    if k == "O":
        return None
    if k == "f" and dt.itemsize == 2:
        return Single
    base = _BY_DTYPE.get(dt.newbyteorder("=")) if k in "iufb" else None
    if base is not None:
        return base
    if k == "U":
        return Text
    if k == "M":
        return DateTime
    if k == "m":
        return TimeSpan
    if k == "c":
        raise TypeError(f"{where}: complex numbers ({dt}) have no ML.NET type")
    if k == "S":
        raise TypeError(f"{where}: bytes ({dt}) have no ML.NET type; decode them to str for Text")
    raise TypeError(f"{where}: numpy dtype {dt} has no ML.NET type")


def as_type(t, where="type"):
    """A DataViewType from a type object, its name (``"Single"``, ``"Key<UInt32, 5>"``, as
    str(type) gives it) or a numpy dtype-like (np.float32 -> Single)."""
    if isinstance(t, DataViewType):
        return t
    refused = None
    if isinstance(t, str):
        try:
            return parse_type(t)
        except (ValueError, TypeError, KeyError) as e:
            refused = e   # a numpy dtype name ("float32"), or neither
    try:
        dt = np.dtype(t)
    except (TypeError, ValueError):
        if refused is not None and not str(refused).startswith("not an idv type string"):
            raise refused from None      # an idv type string's own fault (a key's count...)
        raise TypeError(f"{where}: {t!r} is not an idv type (idv.Single or 'Single', "
                        f"idv.Key(...) or 'Key<UInt32, 5>', idv.Vector(...) or "
                        f"'Vector<Single, 3>') or a numpy dtype") from None
    item = item_from_dtype(dt, where)
    if item is None:
        raise TypeError(f"{where}: dtype object does not name an ML.NET type; use idv.Text etc.")
    return item


# ---------------------------------------------------------------------------------------------
# type strings
# ---------------------------------------------------------------------------------------------

_KEY_RE = re.compile(r"^Key<\s*(\w+)\s*,\s*(\d+)\s*(?:,\s*min=(\d+)\s*)?>$")


def _split_top(s):
    """The comma-separated parts of `s` outside any <...>."""
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur).strip())
    return parts


def parse_type(s):
    """str(type) back into the type: 'Single', 'Key<UInt32, 5>' (legacy: 'Key<UInt32, 5, min=3>'),
    'Vector<Single, 2, 3>', 'Vector<Int32, *, 4>', 'Vector<Key<Byte, 9>, 3>', 'Vector<Text>'."""
    s = s.strip()
    m = _KEY_RE.match(s)
    if m:
        if m.group(1) not in PRIMITIVES:
            raise ValueError(f"unknown key raw type in {s!r}")
        return Key(PRIMITIVES[m.group(1)], count=int(m.group(2)), min=int(m.group(3) or 0))
    if s.startswith("Vector<") and s.endswith(">"):
        parts = _split_top(s[len("Vector<"):-1])
        dims = [0 if p == "*" else int(p) for p in parts[1:]]
        return Vector(parse_type(parts[0]), *dims)
    if s in PRIMITIVES:
        return PRIMITIVES[s]
    raise ValueError(f"not an idv type string: {s!r}")
