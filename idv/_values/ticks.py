""".NET ticks (100 ns) and numpy's time units: every conversion between them, in one place.

ML.NET stores DateTime as ticks since 0001-01-01, TimeSpan as a tick count and DateTimeOffset
as the local clock's ticks plus an offset in minutes. idv reads them into ``datetime64[100ns]``
(from 1970) / ``timedelta64[100ns]``; the writer takes any datetime64 / timedelta64 unit (or
Python datetime / timedelta objects); Arrow and pandas want ``us`` or ``ns``, or the raw .NET
ticks. Conversions never wrap: a value a unit cannot hold raises, naming where it came from.

`where` / `describe` arguments are callables that name a flat position for error messages
(``where(i) -> "column 'x' row 3"``); `what` is the ML.NET type's name.
"""
from __future__ import annotations

import datetime as _dt

import numpy as np

from idv import _encode
from idv._values.literals import object_times
from idv._values.tick_text import arrow_iso_times
# the constants are defined with the types (the Cython codecs read them there)
from idv.types import (DATETIME_DTYPE, EPOCH_TICKS, MAX_DATETIME_TICKS, TICKS_PER_DAY,
                       TICKS_PER_MINUTE, DateTime, DateTimeOffset, TimeSpan)

TIME_ITEMS = (DateTime, TimeSpan, DateTimeOffset)    # the item types held as ticks

INT64_MIN = -2**63
INT64_MAX = 2**63 - 1

# numpy units coarser than a tick: ticks per unit; finer: units per tick
_TICKS_PER_UNIT = {"W": 7 * TICKS_PER_DAY, "D": TICKS_PER_DAY, "h": 36000000000,
                   "m": 600000000, "s": 10000000, "ms": 10000, "us": 10}
_UNITS_PER_TICK = {"ns": 100, "ps": 100000, "fs": 10**8, "as": 10**11}

# 100-ns counts (from 1970, or durations) that still fit int64 nanoseconds
NS_MIN_100 = -(INT64_MAX // 100)
NS_MAX_100 = INT64_MAX // 100


def _first(mask):
    return int(np.flatnonzero(mask)[0])


def _inexact(v, f):
    """(v // f, True where a value of int64 array `v` is no multiple of f): numpy divides by a
    constant several times faster than it takes a remainder. (A product that wraps is still
    unequal: the value it stands for was.)"""
    whole = v // np.int64(f)
    return whole, whole * np.int64(f) != v


def _multiples(v, whole, f):
    """Whether each of int64 array `v` is a multiple of f, given whole = v // f, with no temporary:
    floor division leaves remainders 0..f-1, whose sum (v's less f times whole's) is 0 only if
    each is (int64 sums wrap: exact modulo 2**64 while the remainders' sum is below it)."""
    if (f - 1) * v.size >= 2**64:
        return not _inexact(v, f)[1].any()
    return (int(v.sum()) - f * int(whole.sum())) % 2**64 == 0


# ---------------------------------------------------------------------------------------------
# numpy / Python values -> ticks (the writer)
# ---------------------------------------------------------------------------------------------

def as_time(arr, kind, where):
    """datetime64 ('M') or timedelta64 ('m') values, converting Python objects (literals.
    object_times) and text (ISO 8601 dates, .NET's TimeSpan text: idv._values.tick_text);
    zone-aware dates (DateTimeOffset values, aware datetime objects) as their UTC instants."""
    if arr.dtype.kind == kind:
        return arr
    if kind == "M" and arr.dtype.names and "utc" in arr.dtype.names:
        return np.asarray(arr["utc"])
    if is_text(arr):             # ISO 8601 dates (pyarrow's parser where it can), TimeSpan text
        text = arr.astype(object)
        fast = arrow_iso_times(text) if kind == "M" else None
        return fast if fast is not None else object_times(text, kind, where)
    if arr.dtype == object:
        aware = aware_objects(arr, where) if kind == "M" else None
        if aware is not None:
            return aware["utc"]
        return object_times(arr, kind, where)
    what = "datetime64 (DateTime)" if kind == "M" else "timedelta64 (TimeSpan)"
    raise TypeError(f"{where}: expected {what} values, got {arr.dtype}")


def is_text(arr):
    """Whether numpy array `arr` holds str values only (a 'U' array, or objects all str)."""
    if arr.dtype.kind == "U":
        return True
    return arr.dtype == object and arr.ndim == 1 and len(arr) > 0 and \
        _encode.first_non_str(np.ascontiguousarray(arr)) < 0


def _scaled(v, f, arr, where, what):
    lim = INT64_MAX // f
    bad = (v > lim) | (v < -lim)
    if bad.any():
        raise ValueError(f"{where(_first(bad))}: {arr[_first(bad)]} is outside .NET's "
                         f"{what} range")
    return v * np.int64(f)


def to_ticks(arr, where, what):
    """datetime64/timedelta64 -> int64 100-ns ticks (since 1970 / duration); NaT is refused,
    units finer than 100 ns are floored, with an IdvWarning where that loses a part (naming
    the column, not the row: a write of many batches warns once)."""
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
        return _scaled(v, _TICKS_PER_UNIT[unit] * count, arr, where, what)
    d = _UNITS_PER_TICK[unit]
    if count % d == 0:
        return _scaled(v, count // d, arr, where, what)
    if count == 1:
        out, part = np.divmod(v, d)         # one pass for the ticks and what is floored off
    else:
        exact = v.astype(object) * count    # Python ints: no overflow
        out, part = exact // d, exact % d
    if part.any():
        from idv.errors import warn
        warn(f"{where}: {what} values finer than .NET's ticks of 100 ns are floored to them")
    return out.astype(np.int64, copy=False)


def datetime_ticks(arr, where, what="DateTime"):
    """Dates (datetime64 or datetime objects) -> .NET DateTime ticks (since 0001-01-01),
    range-checked."""
    t = to_ticks(as_time(arr, "M", where), where, what)
    bad = (t < -EPOCH_TICKS) | (t > MAX_DATETIME_TICKS - EPOCH_TICKS)
    if bad.any():
        i = _first(bad)
        raise ValueError(f"{where(i)}: {arr[i]} is outside .NET's {what} range "
                         f"(0001-01-01 to 9999-12-31)")
    return t + np.int64(EPOCH_TICKS)


def timespan_ticks(arr, where):
    """Durations (timedelta64 or timedelta objects) -> .NET TimeSpan ticks."""
    return to_ticks(as_time(arr, "m", where), where, "TimeSpan")


def clock_ticks(utc_ticks, offset_minutes, where):
    """A DateTimeOffset's stored local clock ticks from its .NET UTC ticks and offset, checked
    to stay within DateTime's range."""
    clock = utc_ticks + offset_minutes * TICKS_PER_MINUTE
    bad = (clock < 0) | (clock > MAX_DATETIME_TICKS)
    if bad.any():
        raise ValueError(f"{where(_first(bad))}: local time outside .NET's DateTime range")
    return clock


# ---------------------------------------------------------------------------------------------
# zone-aware dates -> DateTimeOffset's (utc, offset_minutes), whatever they come in
# ---------------------------------------------------------------------------------------------

def dto_values(utc, offset_seconds, exact, where):
    """UTC instants (datetime64) and their offsets in seconds (`exact`: False where an offset
    had a fraction of a second) as structured DateTimeOffset values, checked whole minutes."""
    bad = ~exact | (offset_seconds % 60 != 0)
    if bad.any():
        raise ValueError(f"{where(_first(bad))}: the UTC offset is not a whole number of "
                         f"minutes, which .NET's DateTimeOffset needs")
    out = np.empty(len(utc), [("utc", utc.dtype), ("offset_minutes", np.int64)])
    out["utc"], out["offset_minutes"] = utc, offset_seconds // 60
    return out


def is_zoned(value):
    """Whether `value` holds pandas zone-aware datetimes (a Series, Index or array of a
    ``datetime64[unit, tz]`` dtype); pandas is not imported."""
    return type(getattr(value, "dtype", None)).__name__ == "DatetimeTZDtype"


def zoned_values(value, where):
    """pandas zone-aware datetimes -> DateTimeOffset values: each one's UTC instant and the
    offset its zone has then. NaT is refused."""
    arr = getattr(value, "array", value)         # a Series' or Index's DatetimeArray
    utc = arr.tz_convert("UTC").tz_localize(None).to_numpy()
    nat = np.isnat(utc)
    if nat.any():
        raise ValueError(f"{where(_first(nat))}: NaT (DateTimeOffset has no missing value in "
                         f"ML.NET)")
    diff = arr.tz_localize(None).to_numpy() - utc
    seconds = diff.astype("timedelta64[s]").astype(np.int64)
    return dto_values(utc, seconds, diff == seconds.astype("timedelta64[s]"), where)


def all_aware(arr, where):
    """Whether an object array's values are all zone-aware datetimes. Naive and aware datetimes
    together are a ValueError naming the first row where the second kind appears: a naive one
    has no instant to compare. An array of str alone (text, an object column's usual values)
    is answered by one pass in C, not a test of each value."""
    if arr.dtype == object and arr.ndim == 1 and \
            _encode.first_non_str(np.ascontiguousarray(arr)) < 0:
        return False
    kind = np.fromiter((0 if not isinstance(x, _dt.datetime) or x != x else     # NaT: none
                        1 if x.utcoffset() is not None else 2 for x in arr), np.int8, len(arr))
    aware, naive = kind == 1, kind == 2
    if aware.any() and naive.any():
        i = max(_first(aware), _first(naive))
        which = ("naive", "zone-aware") if aware[i] else ("zone-aware", "naive")
        raise ValueError(f"{where(i)}: {arr[i]!r} is a {which[1]} datetime among {which[0]} "
                         f"ones; give every value a zone (DateTimeOffset) or none (DateTime)")
    return bool(len(arr)) and bool(aware.all())


def aware_objects(arr, where):
    """An object array's zone-aware datetime objects -> DateTimeOffset values, each with its
    own offset; None when no value is aware (see all_aware)."""
    if not all_aware(arr, where):
        return None
    local = as_time(np.array([x.replace(tzinfo=None) for x in arr], dtype=object), "M", where)
    offsets = [x.utcoffset() for x in arr]
    seconds = np.array([o.days * 86400 + o.seconds for o in offsets], dtype=np.int64)
    exact = np.array([o.microseconds == 0 for o in offsets], dtype=bool)
    return dto_values(local - seconds.astype("timedelta64[s]"), seconds, exact, where)


# ---------------------------------------------------------------------------------------------
# read()'s forms <-> .NET ticks
# ---------------------------------------------------------------------------------------------

def net_ticks(values):
    """datetime64[100ns] values (read()'s DateTime) -> int64 .NET ticks since 0001-01-01."""
    return np.ascontiguousarray(values).view(np.int64) + np.int64(EPOCH_TICKS)


def from_net_ticks(ticks):
    """int64 .NET ticks since 0001-01-01 -> datetime64[100ns] (read()'s DateTime)."""
    return (np.asarray(ticks, dtype=np.int64) - np.int64(EPOCH_TICKS)).view(DATETIME_DTYPE)


# ---------------------------------------------------------------------------------------------
# ticks -> us / ns (Arrow, pandas)
# ---------------------------------------------------------------------------------------------

# How times convert for Arrow, pandas and read(): a unit ('us', 'ns'), the .NET ticks as
# int64 ('ticks'), read()'s own datetime64[100ns] ('100ns'), or chosen per column: 'auto', the
# finest unit that holds every value of the column exactly (ns, else us), flooring to us with
# an IdvWarning that counts the values changed where neither does; 'exact', the same, but
# refusing instead of flooring; 'auto-us', microseconds always (what every engine reads from
# Parquet: idv.convert's default there), flooring finer ticks with that IdvWarning.
CHOSEN_MODES = ("auto", "exact", "auto-us")
TIME_MODES = CHOSEN_MODES + ("us", "ns", "ticks")


class Units(dict):
    """The unit chosen for each time column of one read (column name -> (unit, safe)), by
    idv._reader.time_units.choose: passed as ``datetime=`` to the readers of each file, partition
    and batch of that read, so that all of them agree. ``mode``: the mode chosen by."""

    mode = None


def unit_of(mode, name, safe=True):
    """(mode, safe) for column `name`: its entry where `mode` is a Units, else as given."""
    return mode.get(name, ("us", safe)) if isinstance(mode, Units) else (mode, safe)


def check_time_mode(value, allowed=TIME_MODES, name="datetime"):
    """ValueError naming the allowed values unless `value` is one of them (the `datetime=`
    of to_pandas, to_arrow and convert; `name` and `allowed` for the other options)."""
    if value not in allowed and not (isinstance(value, Units) and name == "datetime"):
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, not {value!r}")


def ticks100_of(values):
    """The 100-ns counts in read()'s form of a time column's rows, as UnitChoice.add takes
    them: a Ragged's items, a DateTimeOffset's UTC instants."""
    if not isinstance(values, np.ndarray):      # idv.Ragged
        values = values.values
    return values["utc"] if values.dtype.names else values


class UnitChoice:
    """Sums up a column's 100-ns counts, block by block, to choose its unit (modes 'auto'
    and 'exact'): whether all fit nanoseconds, and how many have sub-microsecond ticks."""

    def __init__(self):
        self.lo, self.hi, self.sub_us, self.first_sub_us = None, None, 0, None

    def add(self, ticks100):
        v = np.ascontiguousarray(ticks100).view(np.int64).reshape(-1)
        if len(v):          # bounds and counts in a pass of C each
            self.add_bounds(*_encode.numeric_bounds(v)[2:])
            (count,), (first,) = _encode.sub_microsecond_blocks(v, len(v))
            self.add_sub_us(int(count), int(first) if count else None)

    def add_bounds(self, lo, hi):
        """Values known only by their least and greatest (block statistics)."""
        self.lo = lo if self.lo is None else min(self.lo, lo)
        self.hi = hi if self.hi is None else max(self.hi, hi)

    def add_sub_us(self, count, first):
        """`count` more values that are no whole microsecond, the first `first` (or None)."""
        if count and self.first_sub_us is None:
            self.first_sub_us = first
        self.sub_us += count

    def merge(self, other):
        """Add what another UnitChoice summed up (another file's part of a column)."""
        if other.lo is not None:
            self.add_bounds(other.lo, other.hi)
        self.add_sub_us(other.sub_us, other.first_sub_us)

    @property
    def fits_ns(self):
        """Whether every value added fits int64 nanoseconds."""
        return self.lo is None or (self.lo >= NS_MIN_100 and self.hi <= NS_MAX_100)

    def settle(self, mode, column, what):
        """(unit, safe) for ticks_to_unit: 'ns' where every value fits, else 'us', flooring
        (safe False) with an IdvWarning ('auto') or refusing with ValueError ('exact') when
        some values have sub-microsecond ticks."""
        from idv.errors import warn
        fits = self.fits_ns
        if fits and mode != "auto-us":
            return "ns", True
        if not self.sub_us:
            return "us", True
        example = show_ticks(self.first_sub_us, what)
        span = "+-292 years" if what == "TimeSpan" else "years 1677-2262"
        values = f"{column}: {self.sub_us} {what} value{'s' * (self.sub_us != 1)} (first: " \
                 f"{example}) {'has' if self.sub_us == 1 else 'have'} 100-ns ticks"
        message = f"{values}, which microseconds cannot hold" if mode == "auto-us" else \
            (f"{values}, and the column spans more than nanoseconds can hold ({span}), so no "
             f"unit holds it exactly")
        if mode == "exact":
            raise ValueError(f"{message}; use datetime='ticks' (exact .NET ticks) or 'auto' "
                             f"(floors them to microseconds, with a warning)")
        keep = "datetime='ns' or 'ticks' keeps them exact" if mode == "auto-us" and fits \
            else "datetime='ticks' keeps them exact"
        clamped = ", clamped at the ends of .NET's range (TimeSpan.MinValue becomes the " \
            "least microsecond inside it)" if what == "TimeSpan" else ""
        warn(f"{message}: floored to microseconds{clamped}, so that they convert back ({keep})")
        return "us", False


def unit_for(ticks100, mode, column="values", what="DateTime", safe=True):
    """(unit, safe) to convert these 100-ns counts with: for 'auto' and 'exact' chosen from
    the values (UnitChoice.settle); any other mode is its own unit, with `safe` as given."""
    if mode not in CHOSEN_MODES:
        return mode, safe
    choice = UnitChoice()
    choice.add(ticks100)
    return choice.settle(mode, column, what)


# the least count of microseconds whose 100-ns ticks fit int64 (.NET's TimeSpan range)
US_MIN = -(INT64_MAX // 10)


def ticks_to_unit(ticks100, unit, safe, describe, what, takes_safe=True, target=None,
                  out=None):
    """int64 counts of 100 ns -> counts of `unit` ('ns' or 'us'), into `out` if given (int64:
    Arrow's memory pool reuses its pages, where fresh ones cost more than the pass). 'ns'
    raises for values outside int64 nanoseconds (1677-09-21 .. 2262-04-11 for dates, +-292
    years for durations): never a wrap. 'us' floors sub-microsecond ticks when `safe` is False
    and raises when it is True, advising the options of the entry point: ``safe=False`` where
    it `takes_safe`, else (numpy's read) the other modes. `describe(i)` names flat position i
    for the message. `target` ('s', 'ms', 'us', 'ns', 'D'): the counts then rescaled to it
    exactly (the unit a column was written in), None where it cannot hold one of them
    (rescaled); by one division of the ticks where it is no finer than `unit`."""
    v = np.asarray(ticks100, dtype=np.int64)      # a strided view (a field) is not copied
    if target not in (None, unit):
        per = _TICKS_PER_UNIT.get(target)
        if per is not None and (unit == "ns" or safe and unit == "us"):
            whole, lim = np.floor_divide(v, np.int64(per), out=out), NS_MAX_100 // per
            # whole `target`s are whole microseconds: `unit`'s checks pass if they fit ns
            if not v.size or (_multiples(v, whole, per) and (
                    unit == "us" or (-lim <= whole.min() and whole.max() <= lim))):
                return whole
        return rescaled(ticks_to_unit(v, unit, safe, describe, what, takes_safe), unit, target)
    if unit == "ns":
        if v.size and (v.min() < NS_MIN_100 or v.max() > NS_MAX_100):
            i = _first((v < NS_MIN_100) | (v > NS_MAX_100))
            raise ValueError(f"{describe(i)}: {show_ticks(v[i], what)} is outside what "
                             f"nanoseconds in int64 can hold (years 1677-2262 for dates, "
                             f"+-292 years for durations); use datetime='us' or 'ticks'")
        return np.multiply(v, np.int64(100), out=out)
    if unit != "us":
        raise ValueError(f"unknown time unit {unit!r}")
    floor = np.floor_divide(v, np.int64(10), out=out)
    if not safe:
        # never below the least microsecond int64 ticks hold (TimeSpan.MinValue floors past it)
        return np.maximum(floor, np.int64(US_MIN), out=floor)
    if not _multiples(v, floor, 10):
        i = _first(_inexact(v, 10)[1])
        how = "pass safe=False to floor to microseconds" if takes_safe else \
            "use datetime='auto' (floors to microseconds, with a warning, where nanoseconds " \
            "cannot hold the column), datetime='100ns' (exact, numpy's datetime64[100ns])"
        raise ValueError(f"{describe(i)}: {show_ticks(v[i], what)} has sub-microsecond "
                         f"ticks that microseconds cannot hold; {how}, datetime='ns' "
                         f"(exact for years 1677-2262) or datetime='ticks' (exact .NET ticks)")
    return floor


# nanoseconds per numpy unit that Arrow and pandas hold
_NS_PER_UNIT = {"D": 864 * 10**11, "s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}


def rescaled(counts, unit, target):
    """int64 counts of `unit` ('D', 's', 'ms', 'us' or 'ns') as counts of `target`, exactly: None
    where `target` cannot hold one of them (a fraction of it, or beyond int64)."""
    have, want = _NS_PER_UNIT[unit], _NS_PER_UNIT[target]
    if want == have:
        return counts
    if want > have:
        whole, rest = _inexact(counts, want // have)
        return None if rest.any() else whole
    f = have // want
    if counts.size and (counts.min() < -(INT64_MAX // f) or counts.max() > INT64_MAX // f):
        return None
    return counts * np.int64(f)


def counts_as(counts, kind, unit):
    """int64 counts of `unit` as datetime64 ('M') or timedelta64 ('m') of that unit."""
    name = "datetime64" if kind == "M" else "timedelta64"
    return np.asarray(counts, dtype=np.int64).view(f"{name}[{unit}]")


# ---------------------------------------------------------------------------------------------
# text
# ---------------------------------------------------------------------------------------------

def show_ticks(t100, what):
    """A 100-ns count as text for an error message: an ISO date (DateTime, from 1970) or a
    duration."""
    t100 = int(t100)
    if what == "TimeSpan":
        return f"TimeSpan of {t100} ticks"
    secs, rem = divmod(t100, 10**7)
    day = np.datetime64(secs, "s").astype(object)
    try:
        return f"{what} {day.isoformat()}.{rem:07d}"
    except AttributeError:   # numpy gives an int for dates outside Python's range
        return f"{what} of {t100 + EPOCH_TICKS} .NET ticks"


# ---------------------------------------------------------------------------------------------
# read()'s forms in another unit (IdvFile.read(datetime=...))
# ---------------------------------------------------------------------------------------------

def retimed(values, item, mode, column, safe=True, takes_safe=True):
    """read()'s DateTime / TimeSpan / DateTimeOffset values (a 1-d array, rows of vectors,
    a Ragged or a scipy.sparse matrix) in `mode` ('auto', 'exact', 'us', 'ns', 'ticks');
    `safe` and `takes_safe` as ticks_to_unit takes them."""
    again = (lambda v: retimed(v, item, mode, column, safe, takes_safe))
    kind = "m" if item.name == "TimeSpan" else "M"
    if not isinstance(values, np.ndarray):
        if hasattr(values, "offsets") and hasattr(values, "values"):     # idv.Ragged
            return type(values)(again(values.values), values.offsets)
        return values                      # sparse matrices hold numbers only
    if values.dtype.names:                 # DateTimeOffset: (utc, offset_minutes)
        utc = again(np.ascontiguousarray(values["utc"]))
        out = np.empty(values.shape, [("utc", utc.dtype), ("offset_minutes", np.int16)])
        out["utc"], out["offset_minutes"] = utc, values["offset_minutes"]
        return out
    v = np.ascontiguousarray(values).view(np.int64)
    if mode == "ticks":
        return net_ticks(values) if kind == "M" else v.copy()
    unit, safe = unit_for(v, mode, column, item.name, safe)
    where = (lambda i: f"{column} item {i}")
    counts = ticks_to_unit(v.reshape(-1), unit, safe, where, item.name,
                           takes_safe).reshape(v.shape)
    return counts_as(counts, kind, unit)
