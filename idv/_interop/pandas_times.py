"""Times in pandas (docs/interop.md): the Series of DateTime, TimeSpan and DateTimeOffset
columns, in the unit the read chose (idv._reader.time_units) or the type they were written
from, made on the converted values as they are (no copy, no pass of pandas' own); and the
zone of a DateTimeOffset column: the one UTC offset of every row of the file or dataset when
they all share it, else UTC; never that of the rows a read keeps. A read of every row has them
(``zone_of``; a dataset's files read one by one: each file's, then ``concat``); a read of some
(``rows=``, ``filter=``, Dask's partitions) is given ``dataset_zones``."""
from __future__ import annotations

import datetime as _dt

import numpy as np

from idv import types as T
from idv._reader import read_source, time_units
from idv._values import ticks
from idv._values.time_zones import as_written, written_from

__all__ = ["zone_of", "concat", "dataset_zones", "TIME_KINDS", "times", "time_series",
           "dto_series"]


# the times pandas holds: item type -> numpy kind (datetime64 'M', timedelta64 'm')
TIME_KINDS = {T.DateTime: "M", T.TimeSpan: "m"}


def times(ctx, item, values, describe):
    """DateTime / TimeSpan values (any shape) in the unit `ctx.mode` picks, or int64 ticks."""
    v = np.ascontiguousarray(values).view(np.int64)
    mode, safe = ticks.unit_of(ctx.mode, ctx.name, ctx.safe)
    if mode == "ticks":
        return ticks.net_ticks(values) if item is T.DateTime else v.copy()
    unit, safe = ticks.unit_for(v, mode, f"column {ctx.name!r}", item.name, safe)
    return _counts(ctx, v.reshape(-1), unit, safe, describe, item.name,
                   TIME_KINDS[item]).reshape(v.shape)


def _counts(ctx, ticks100, unit, safe, describe, what, kind):
    """100-ns counts as datetime64 / timedelta64 ('M' / 'm': `kind`) of the unit their column
    was written in (ctx.source), exactly (a value it cannot hold raises), else of `unit`:
    straight from the ticks (ticks.ticks_to_unit's `target`)."""
    target = ctx.source[1] if ctx.source is not None and ctx.source[0] != "date" else None
    counts = ticks.ticks_to_unit(ticks100, unit, safe, describe, what, target=target)
    if counts is None:
        raise ValueError(f"column {ctx.name!r}: {target}, the unit it was written in, cannot "
                         f"hold its values; read it with datetime='us' or 'ns' instead")
    return ticks.counts_as(counts, kind, target or unit)


def time_series(ctx, t, values, describe):
    """The Series of a DateTime / TimeSpan column's 1-d `values` (read()'s form)."""
    return _series(ctx, times(ctx, t, values, describe))


def dto_series(ctx, t, values, describe):
    """The tz-aware Series of a DateTimeOffset column's 1-d `values` (read()'s form): in the
    zone it was written from (ctx.source), else ctx.zone, else that of its offsets."""
    pd = ctx.pd
    mode, safe = ticks.unit_of(ctx.mode, ctx.name, ctx.safe)
    if mode == "ticks":
        return pd.Series(ticks.net_ticks(values["utc"]))
    utc = values["utc"].view(np.int64)           # a view of the field: no copy
    unit, safe = ticks.unit_for(utc, mode, f"column {ctx.name!r}", "DateTimeOffset", safe)
    inst = _counts(ctx, utc, unit, safe, describe, "DateTimeOffset", "M")
    zone = None if ctx.source is not None else (
        ctx.zone or zone_of(values["offset_minutes"]))
    return _series(ctx, inst, zone)


def _series(ctx, values, zone=None):
    """The Series of 1-d datetime64 / timedelta64 `values` (UTC instants where `zone` is given),
    in the zone its column was written from (ctx.source; its unit: _counts), if any."""
    pd = ctx.pd
    if ctx.source is not None and ctx.source[0] != "date":
        zone = ctx.source[2]
    if zone is None:
        return pd.Series(values, copy=False)
    utc = pd.DatetimeTZDtype(np.datetime_data(values.dtype)[0], "UTC")     # integers: instants
    return pd.Series(values.view(np.int64), dtype=utc, copy=False).dt.tz_convert(zone)


def zone_of(offsets):
    """The zone of values with UTC `offsets` (minutes): their one offset as a fixed-offset
    zone, ``"UTC"`` when they differ, are 0 or there are none."""
    off = np.asarray(offsets)
    if len(off) and (off == off[0]).all() and off[0] != 0:
        return _dt.timezone(_dt.timedelta(minutes=int(off[0])))
    return "UTC"


def _is_zoned(pd, s):
    return isinstance(s.dtype, pd.DatetimeTZDtype)


def concat(pd, frames):
    """The `frames` (of the same columns) end to end, each tz-aware column in one zone: the
    zone its non-empty pieces share, else UTC (as if read at once)."""
    if len(frames) == 1:
        return frames[0]
    frames = [f.copy(deep=False) for f in frames]
    for j in range(frames[0].shape[1]):
        pieces = [f.iloc[:, j] for f in frames]
        if not all(_is_zoned(pd, s) for s in pieces) or \
                len({str(s.dt.tz) for s in pieces}) == 1:
            continue
        zones = {str(s.dt.tz) for s in pieces if len(s)}
        target = next(s.dt.tz for s in pieces if len(s)) if len(zones) == 1 else "UTC"
        for f, s in zip(frames, pieces):
            f.isetitem(j, s.dt.tz_convert(target))
    return pd.concat(frames, ignore_index=True)


def dataset_zones(src, columns, datetime):
    """{name: zone} of the DateTimeOffset columns among `columns` (names or indices; None:
    all) of every file of `src` (an idv.Dataset or IdvFile) read in mode `datetime`, their
    offsets read block by block until two differ; for a vector of them, a tuple of its slots'
    zones (each slot a column of its own); not those read as ticks or in the zone they were
    written from."""
    zones, finest = {}, as_written(datetime)
    if datetime == "ticks":
        return zones
    keys = read_source.split(src, src.resolve_columns(columns))[0]    # the files' columns
    if finest:      # those whose files disagree on the type they were written from
        finest.mixed = time_units.mixed(
            lambda: (src.using(i) for i in range(len(src.files))), keys, datetime)
    with src.using(0) as first:
        dto = {n: (first[n].name, _slots(first[n].type), isinstance(first[n].type, T.Vector))
               for n in keys
               if _slots(first[n].type) and not (finest and written_from(first[n], finest))}
    for n, (name, slots, vector) in dto.items():
        seen = [np.zeros(0, np.int16)] * slots
        for i in range(len(src.files)):
            with src.using(i) as f:
                for block in f[n].iter_blocks():
                    got = block["offset_minutes"].reshape(-1, slots)
                    seen = [np.union1d(s, got[:, j]) for j, s in enumerate(seen)]
                    if all(len(s) > 1 for s in seen):
                        break
            if all(len(s) > 1 for s in seen):
                break
        slot_zones = tuple(zone_of(s) for s in seen)
        zones[name] = slot_zones if vector else slot_zones[0]
    return zones


def _slots(t):
    """The columns a DateTimeOffset type `t` is read into: 1 for a scalar, its size for a
    vector of a fixed size; 0 for other types."""
    if t is T.DateTimeOffset:
        return 1
    return t.size if isinstance(t, T.Vector) and t.item is T.DateTimeOffset else 0
