"""The zone of a DateTimeOffset column in pandas (docs/interop.md): the values' one UTC offset
when they all share it, else UTC. One rule for a whole read, however it is cut: a dataset's
files read one by one (``zone_of`` each, then ``concat``), and Dask's partitions (the zone of
every row, ``dataset_zones``, given to each partition by ``in_zones``)."""
from __future__ import annotations

import datetime as _dt

import numpy as np

from idv import types as T
from idv._values.arrow_types import written_from

__all__ = ["zone_of", "concat", "dataset_zones", "in_zones", "as_written"]


def as_written(datetime):
    """The finest unit in which a time column read in mode `datetime` (a ticks.Units or a
    mode) is given the pandas type it was written from (its SOURCE_TYPE); None: not so."""
    return {"auto": "ns", "auto-us": "us"}.get(getattr(datetime, "mode", None))


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


def dataset_zones(src, names, datetime):
    """{name: zone} of the scalar DateTimeOffset columns among `names` of every file of
    `src` (an idv.Dataset or IdvFile) read in mode `datetime`, their offsets read block by
    block until two differ; not those read as ticks or in the zone they were written from."""
    zones, finest = {}, as_written(datetime)
    if datetime == "ticks":
        return zones
    with src.using(0) as first:
        dto = [n for n in names if first[n].type is T.DateTimeOffset
               and not (finest and written_from(first[n], finest))]
    for n in dto:
        seen = None
        for i in range(len(src.files)):
            with src.using(i) as f:
                for block in f[n].iter_blocks():
                    got = np.unique(block["offset_minutes"])
                    seen = got if seen is None else np.union1d(seen, got)
                    if len(seen) > 1:
                        break
            if seen is not None and len(seen) > 1:
                break
        zones[n] = zone_of(seen if seen is not None else [])
    return zones


def in_zones(pd, df, zones):
    """DataFrame `df` with its tz-aware columns of `zones` ({name: zone}) in those zones."""
    for n, zone in zones.items():
        if n in df.columns and _is_zoned(pd, df[n]):
            df[n] = df[n].dt.tz_convert(zone)
    return df
