"""ML.NET's time values as text, both ways, exact to the tick over all of .NET's years. Out:
as .NET writes them (cells of the CLI, CSV and JSON; block statistics shown): DateTime in
ISO 8601, TimeSpan in .NET's constant format, DateTimeOffset as its local clock with the
offset. In: ISO 8601 text as ticks (a filter's literal, idv._values.literals, and text
written to a DateTime or DateTimeOffset column, each value's offset kept for the latter) and
.NET's TimeSpan text, as TimeSpan.Parse reads it: ML.NET's own text has 7 fractional digits,
which no numpy or Arrow unit holds over years 1-9999."""
from __future__ import annotations

import datetime as dt
import re
from fractions import Fraction

import numpy as np

from idv.types import DATETIME_DTYPE, TICKS_PER_DAY, TICKS_PER_MINUTE


def _ticks_of(value):
    return int(np.asarray(value).view(np.int64))


def format_datetime(value):
    """A DateTime as read() gives it (datetime64[100ns]) -> ISO 8601, exact to the tick
    (numpy's own str misprints dates outside 1678-2262)."""
    us, rest = divmod(_ticks_of(value), 10)
    s = str(np.datetime64(us, "us"))
    date, _, frac = s.partition(".")
    frac = (frac + str(rest)).rstrip("0")
    return f"{date}.{frac}" if frac else date


def format_timespan(value):
    """A TimeSpan as read() gives it (timedelta64[100ns]) -> .NET's constant format
    ``[-][d.]hh:mm:ss[.fffffff]``."""
    ticks = _ticks_of(value)
    sign = "-" if ticks < 0 else ""
    days, rest = divmod(abs(ticks), TICKS_PER_DAY)
    secs, frac = divmod(rest, 10_000_000)
    h, secs = divmod(secs, 3600)
    m, s = divmod(secs, 60)
    out = f"{sign}{f'{days}.' if days else ''}{h:02d}:{m:02d}:{s:02d}"
    return out + (f".{frac:07d}" if frac else "")


def format_datetimeoffset(value):
    """A DateTimeOffset as read() gives it ((utc, offset_minutes)) -> the local clock time
    with its offset, ISO 8601."""
    offset = int(value["offset_minutes"])
    local = _ticks_of(value["utc"]) + offset * TICKS_PER_MINUTE
    sign = "-" if offset < 0 else "+"
    hh, mm = divmod(abs(offset), 60)
    return f"{format_datetime(np.int64(local).view(DATETIME_DTYPE))}{sign}{hh:02d}:{mm:02d}"


# ---------------------------------------------------------------------------------------------
# ISO 8601 text -> ticks
# ---------------------------------------------------------------------------------------------

def civil_ticks(year, month, day, hour=0, minute=0, second=0):
    """.NET ticks of a date and time of day (0 = 0001-01-01T00:00)."""
    days = dt.date(year, month, day).toordinal() - 1
    return days * TICKS_PER_DAY + ((hour * 60 + minute) * 60 + second) * 10**7


_ISO = re.compile(r"\s*(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?)?"
                  r"\s*(Z|[+-]\d{2}(?::?\d{2})?)?\s*$")


def iso_ticks(text):
    """The exact ticks of an ISO 8601 date or date and time (any number of fractional
    digits; with an offset or Z: its UTC instant), over all of .NET's years; None if it is
    not one."""
    m = _ISO.match(text)
    if m is None:
        return None
    y, mo, d, h, mi, s, frac, zone = m.groups()
    try:
        ticks = civil_ticks(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0))
    except ValueError:
        return None
    if frac:
        part = Fraction(int(frac) * 10**7, 10**len(frac))      # an int where it is whole ticks
        ticks += int(part) if part.denominator == 1 else part
    return ticks - _zone_minutes(zone) * TICKS_PER_MINUTE


def arrow_iso_times(arr):
    """An object array of ISO 8601 strings as datetime64[ns] by pyarrow's parser, where it
    reads every value (years 1677-2262, no offset: most text, in C); None where it does not
    (nor pyarrow is installed), for literals.object_times to read them one by one, exactly
    over all of .NET's years (numpy's parser is wrong at 100 ns beyond 1970 +- 292 years, and
    datetime64[us] drops ML.NET's seventh digit)."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        ns = pc.cast(pa.array(arr.tolist(), pa.string()), pa.timestamp("ns"))
        return ns.to_numpy(zero_copy_only=False).astype("datetime64[ns]", copy=False)
    except (ImportError, ValueError, TypeError, OverflowError):
        return None          # pyarrow's ArrowInvalid is a ValueError


def _zone_minutes(zone):
    """The minutes of an ISO 8601 offset (``+05:30``, ``-0800``, ``+02``; ``Z`` or none: 0)."""
    if not zone or zone == "Z":
        return 0
    digits = zone[1:].replace(":", "")
    minutes = int(digits[:2]) * 60 + (int(digits[2:]) if len(digits) > 2 else 0)
    return -minutes if zone[0] == "-" else minutes


def iso_offset_minutes(arr, where):
    """The offsets (int16 minutes; none or Z: 0) an object array of ISO 8601 strings, read as
    DateTimeOffset instants already, was written with."""
    out = np.empty(len(arr), np.int16)
    for i, text in enumerate(arr.tolist()):
        minutes = _zone_minutes(_ISO.match(text).group(8))
        if abs(minutes) > 840:
            raise ValueError(f"{where(i)}: offset {minutes} minutes is beyond +-14 hours")
        out[i] = minutes
    return out


# .NET's TimeSpan text, as TimeSpan.Parse reads it: [-][d.]hh:mm[:ss[.fffffff]], or a
# number of days alone
_SPAN = re.compile(r"\s*(-)?(?:(\d+)\.)?(\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,7}))?)?\s*$")
_DAYS = re.compile(r"\s*(-)?(\d+)\s*$")


def span_ticks(text):
    """The ticks of .NET's text of a TimeSpan (what format_timespan writes, and TimeSpan.Parse's
    other forms: ``hh:mm``, ``d`` days alone); None if it is not one."""
    m = _SPAN.match(text)
    if m is not None:
        sign, days, h, mi, sec, frac = m.groups()
        if int(h) > 23 or int(mi) > 59 or int(sec or 0) > 59:
            return None
        ticks = ((int(days or 0) * 24 + int(h)) * 60 + int(mi)) * 60 + int(sec or 0)
        ticks = ticks * 10**7 + int((frac or "").ljust(7, "0") or 0)
    else:
        m = _DAYS.match(text)
        if m is None:
            return None
        sign, ticks = m.group(1), int(m.group(2)) * TICKS_PER_DAY
    return -ticks if sign else ticks
