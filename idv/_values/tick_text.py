"""ML.NET's time values as the text .NET writes them (cells of the CLI, CSV and JSON; block
statistics shown): DateTime in ISO 8601 exact to the tick, TimeSpan in .NET's constant
format, DateTimeOffset as its local clock with the offset."""
from __future__ import annotations

import numpy as np

from idv.types import DATETIME_DTYPE, TICKS_PER_MINUTE
from idv._values.ticks import TICKS_PER_DAY


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
