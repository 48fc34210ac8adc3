"""What a filter's literal denotes, exactly: a number as an int or a Fraction (a float by its
binary value; NaN and infinities as floats), a time as .NET ticks (an int, or a Fraction
between two ticks), over all of .NET's years. idv._values.comparison binds these to a column;
nothing here casts or rounds. """
from __future__ import annotations

import datetime as dt
import math
import numbers
from decimal import Decimal
from fractions import Fraction

import numpy as np

from idv import types as T
from idv._values.tick_text import civil_ticks, iso_ticks, span_ticks

NAN = float("nan")



def exact_number(value):
    """The exact value of a numeric literal: an int, a Fraction (not an integer), or a float
    NaN / +-inf; None for a value that is not a number (bool is 0 or 1)."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, np.timedelta64):       # a numpy integer, but a time span
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        if math.isnan(value) or math.isinf(value):
            return float(value)
        return _normal(Fraction(*value.as_integer_ratio()))
    if isinstance(value, Decimal):
        if value.is_nan() or value.is_infinite():
            return float(value)
        return _normal(Fraction(value))
    if isinstance(value, numbers.Rational):
        return _normal(Fraction(value.numerator, value.denominator))
    return None


def _normal(q):
    return int(q) if q.denominator == 1 else q


_UNIT_NS = {"W": 604_800 * 10**9, "D": 86_400 * 10**9, "h": 3_600 * 10**9, "m": 60 * 10**9,
            "s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1, "ps": Fraction(1, 10**3),
            "fs": Fraction(1, 10**6), "as": Fraction(1, 10**9)}


def _np_ticks(value):
    """.NET ticks of a numpy datetime64 / timedelta64 (exact: an int or a Fraction; NaN for
    NaT); None for a unit without a fixed length (years, months) of a timedelta."""
    if np.isnat(value):
        return NAN
    unit, count = np.datetime_data(value.dtype)
    if unit in ("Y", "M"):
        if isinstance(value, np.timedelta64):
            return None
        value, unit, count = value.astype("datetime64[D]"), "D", 1
    ns = int(value.astype(np.int64)) * count * _UNIT_NS[unit]
    got = Fraction(ns, 100)
    return _normal(got + (T.EPOCH_TICKS if isinstance(value, np.datetime64) else 0))


def time_ticks(value, item):
    """The exact .NET ticks of a literal for a DateTime, DateTimeOffset (by its UTC instant;
    a naive value is taken as UTC) or TimeSpan column; None: not a value of that kind. An int
    is ticks already; text is ISO 8601, or .NET's TimeSpan text (tick_text)."""
    if isinstance(value, (int, np.integer)) and \
            not isinstance(value, (bool, np.bool_, np.timedelta64)):
        return int(value)
    if type(value).__name__ == "NaTType":       # pandas' missing time, a datetime subclass
        return NAN
    if item is T.TimeSpan:
        if type(value).__name__ == "Timedelta" and hasattr(value, "asm8"):     # pandas
            # its own unit (asm8): .value, in nanoseconds, overflows beyond 292 years
            return NAN if value != value else _np_ticks(value.asm8)
        if isinstance(value, dt.timedelta):
            return ((value.days * 86_400 + value.seconds) * 10**6 + value.microseconds) * 10
        if isinstance(value, np.timedelta64):
            return _np_ticks(value)
        return span_ticks(value) if isinstance(value, str) else None
    if type(value).__name__ == "Timestamp" and hasattr(value, "asm8"):        # pandas
        # its UTC instant in its own unit (asm8): .value, in nanoseconds, overflows outside
        # the years 1677-2262
        return NAN if value != value else _np_ticks(value.asm8)
    if isinstance(value, str):
        return iso_ticks(value)
    if isinstance(value, dt.datetime):
        wall = civil_ticks(value.year, value.month, value.day, value.hour, value.minute,
                            value.second) + value.microsecond * 10
        offset = value.utcoffset()          # the UTC instant, exact beyond years 1 and 9999
        return wall if offset is None else wall - time_ticks(offset, T.TimeSpan)
    if isinstance(value, dt.date):
        return civil_ticks(value.year, value.month, value.day)
    if isinstance(value, np.datetime64):
        return _np_ticks(value)
    return None


def object_times(arr, kind, where):
    """An object array of dates (kind 'M': datetime, date, pandas Timestamp, numpy
    datetime64, ISO 8601 text) or spans ('m': timedelta, pandas Timedelta, numpy timedelta64,
    .NET's TimeSpan text) ->
    datetime64 / timedelta64 (100 ns), each value by time_ticks, exactly: never through a
    unit that drops a part (pandas' nanoseconds) or wraps (a timedelta of 2**64 us); a part
    finer than a tick floored, with the writer's warning. An int is no time here (numpy's
    ints are refused too), nor a missing value (NaT, None, NaN: ML.NET's times have none)."""
    values = arr.tolist()
    if kind == "M" and all(type(x) in (dt.datetime, dt.date) for x in values):
        return np.array(values, "datetime64[us]")       # microseconds at most: exact, fast
    item, what = (T.DateTime, "DateTime") if kind == "M" else (T.TimeSpan, "TimeSpan")
    out = np.empty(len(values), np.int64)
    finer = False
    for i, x in enumerate(values):
        if x is None or x != x:
            raise ValueError(f"{where(i)}: {x} ({what} has no missing value in ML.NET)")
        t = None if isinstance(x, (int, float, np.number)) else time_ticks(x, item)
        if t is None and isinstance(x, str):
            raise ValueError(f"{where(i)}: {x!r} is not " + (
                "an ISO 8601 date and time" if kind == "M" else
                "a TimeSpan's text ([-][d.]hh:mm:ss[.fffffff], or days alone)"))
        if t is None or isinstance(t, float):
            raise TypeError(f"{where}: cannot convert objects to "
                            f"{'datetime64' if kind == 'M' else 'timedelta64'}: row {i} holds "
                            f"{type(x).__name__} {x!r:.40}")
        finer = finer or not isinstance(t, int)
        t = int(t // 1) - (T.EPOCH_TICKS if kind == "M" else 0)
        if t == -2**63 and kind == "m":
            raise ValueError(f"{where(i)}: {x} is .NET's TimeSpan.MinValue, which ML.NET reads "
                             f"as 0 (its old missing value) and numpy as NaT: not written")
        if not -2**63 < t < 2**63:
            raise ValueError(f"{where(i)}: {x} is outside .NET's {what} range")
        out[i] = t
    if finer:
        from idv.errors import warn
        warn(f"{where}: {what} values finer than .NET's ticks of 100 ns are floored to them")
    return out.view(f"{'datetime64' if kind == 'M' else 'timedelta64'}[100ns]")


def is_collection(value) -> bool:
    """Whether `value` is a collection of literals for in / not in (not text, bytes or a
    mapping, which are single values)."""
    if isinstance(value, (str, bytes, bytearray, memoryview, dict)):
        return False
    if isinstance(value, np.ndarray):
        return value.ndim == 1
    return isinstance(value, (list, tuple, set, frozenset, range)) or \
        type(value).__name__ in ("Series", "Index", "Array", "ChunkedArray")
