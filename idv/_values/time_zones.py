"""The type a time column was written from (Arrow or pandas), kept in its ``idv.SourceType``
annotation, and its zone as Arrow names it: what the writers record and what 'auto' reads
restore.

Arrow takes an IANA name (``Europe/Paris``, ``UTC``) or a fixed offset ``+05:30``; a tzinfo's
``str()`` is often neither (``UTC+05:30``, ``tzutc()``, ``tzfile(...)``), so a zone is named by
pyarrow's own rule (what ``pa.array(series).type.tz`` gives), and a zone with no such name is
not kept at all.
"""
from __future__ import annotations

import functools
import re
import zoneinfo

import numpy as np

from idv import types as T
from idv._values import ticks

# Arrow's fixed offsets: +HH:MM (what pyarrow names a datetime.timezone)
_OFFSET = re.compile(r"^[+-](?:[01]\d|2[0-3]):[0-5]\d$")


@functools.lru_cache(maxsize=256)
def is_arrow_zone(name) -> bool:
    """Whether `name` is a zone Arrow takes: a fixed offset +HH:MM, or a name the zone
    database knows (as pyarrow's conversions look it up)."""
    if not isinstance(name, str):
        return False
    if _OFFSET.match(name):
        return True
    try:
        zoneinfo.ZoneInfo(name)
    except (KeyError, ValueError, OSError):     # unknown, or no valid key
        return False
    return True


def arrow_zone(tz):
    """The name Arrow gives the zone `tz` (a tzinfo or a name): pyarrow's own (``+05:30``,
    ``UTC``, ``Europe/Paris``); without pyarrow, its ``str()`` where that is such a name.
    None where it has no name Arrow takes."""
    name = str(tz)
    try:
        import pyarrow as pa
    except ImportError:
        pa = None
    if pa is not None and not isinstance(tz, str):
        try:
            name = pa.lib.tzinfo_to_string(tz)
        except AttributeError:      # a pyarrow without it: the name as it is, if Arrow's
            pass
        except (ValueError, TypeError, pa.ArrowException):   # seconds in an offset, unknown
            return None
    return name if is_arrow_zone(name) else None


# the column annotation in which idv keeps the type a time column had where it was written
# from (Arrow or pandas), as Arrow names it: ``timestamp[us, tz=UTC]``, ``date32[day]``,
# ``duration[us]``; reading the column back with datetime="auto" gives that type again.
# ML.NET keeps it as any text annotation (and ignores it).
SOURCE_TYPE = "idv.SourceType"
_SOURCE = re.compile(r"^(?:timestamp\[(s|ms|us|ns)(?:, tz=([^\]]+))?\]|date32\[day\]"
                     r"|duration\[(s|ms|us|ns)\])$")


def source_type(at=None, dtype=None):
    """The SOURCE_TYPE text of an Arrow type `at` or a numpy / pandas `dtype` of times, its
    zone as Arrow names it (time_zones; None for other types and zones Arrow cannot name)."""
    if at is not None:
        m = _SOURCE.match(str(at))
        return str(at) if m and (m.group(2) is None or is_arrow_zone(m.group(2))) else None
    kind, unit = getattr(dtype, "kind", None), getattr(dtype, "unit", None)
    tz = getattr(dtype, "tz", None)
    if kind == "M" and unit in ("s", "ms", "us", "ns"):      # pandas' DatetimeTZDtype
        zone = None if tz is None else arrow_zone(tz)       # a zone Arrow cannot name: none
        return f"timestamp[{unit}]" if tz is None else zone and f"timestamp[{unit}, tz={zone}]"
    if isinstance(dtype, np.dtype) and dtype.kind in "Mm":
        unit = np.datetime_data(dtype)[0]
        if unit in ("s", "ms", "us", "ns"):
            return f"{'timestamp' if dtype.kind == 'M' else 'duration'}[{unit}]"
    return None


def restored_type(pa, col, finest="ns"):
    """The Arrow type scalar time column `col` was written from (its SOURCE_TYPE annotation),
    when that type can hold the column's values again and its unit is no finer than
    `finest`; else None."""
    kind, unit, tz = written_from(col, finest) or (None, None, None)
    return None if kind is None else pa.date32() if kind == "date" else \
        pa.duration(unit) if kind == "duration" else pa.timestamp(unit, tz=tz)


class Finest(str):
    """as_written's unit; `mixed`: the columns whose files were written from different types
    (ticks.Units.mixed), which the read gives by the ordinary rule, none restored."""
    mixed = frozenset()


def as_written(datetime):
    """The finest unit (a Finest) in which a time column read in mode `datetime` (a
    ticks.Units or a mode) is given the type it was written from (its SOURCE_TYPE: the 'auto'
    modes); None: not so. Arrow's and pandas' reads alike."""
    unit = {"auto": "ns", "auto-us": "us"}.get(getattr(datetime, "mode", datetime))
    finest = None if unit is None else Finest(unit)
    if finest is not None:
        finest.mixed = getattr(datetime, "mixed", frozenset())
    return finest


def written_from(col, finest="ns"):
    """(kind, unit, zone) of the type scalar time column `col` was written from (its
    SOURCE_TYPE annotation, decoded alone; kind 'timestamp', 'date' or 'duration'), when it
    can hold the column's values again, its unit is no finer than `finest` and its zone one
    Arrow takes (time_zones), unless `finest` (as_written) leaves the column out; else None."""
    col_type = col.type
    text = col.annotation(SOURCE_TYPE) if col_type in ticks.TIME_ITEMS else None
    m = _SOURCE.match(text) if isinstance(text, str) else None
    if m is None or col.name in getattr(finest, "mixed", ()):
        return None
    unit, tz, span = m.group(1), m.group(2), m.group(3)
    if finest == "us" and "ns" in (unit, span):
        return None
    if col_type is T.TimeSpan and span:
        return "duration", span, None
    if col_type is T.DateTime and unit and tz is None:
        return "timestamp", unit, None
    if col_type is T.DateTime and text == "date32[day]":
        return "date", "D", None
    if col_type is T.DateTimeOffset and unit and is_arrow_zone(tz):   # else Arrow cannot
        return "timestamp", unit, tz
    return None


def restore(pa, array, target):
    """An Arrow array of a time column (a DateTimeOffset's struct: its UTC instants) as
    `target` (restored_type) by pyarrow's safe cast, which raises, saying why, for a value
    `target` cannot hold (a time of day in a date, a tick below the unit)."""
    if pa.types.is_struct(array.type):
        array = array.field("utc")
    out = array.cast(target, safe=True)
    if pa.types.is_date32(target) and not out.cast(array.type).equals(array):
        raise ValueError(f"a value has a time of day, which {SOURCE_TYPE} date32[day] cannot "
                         f"hold")
    return out
