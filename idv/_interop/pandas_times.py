"""The zone of a DateTimeOffset column in pandas (docs/interop.md): the one UTC offset of
every row of the file or dataset when they all share it, else UTC; never that of the rows a
read keeps. A read of every row has them (``zone_of``; a dataset's files read one by one:
each file's, then ``concat``); a read of some (``rows=``, ``filter=``, Dask's partitions) is
given ``dataset_zones``."""
from __future__ import annotations

import datetime as _dt

import numpy as np

from idv import types as T
from idv._reader import read_source
from idv._values.arrow_types import as_written, written_from

__all__ = ["zone_of", "concat", "dataset_zones"]


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
    """{name: zone} of the scalar DateTimeOffset columns among `columns` (names or indices;
    None: all) of every file of `src` (an idv.Dataset or IdvFile) read in mode `datetime`,
    their offsets read block by block until two differ; not those read as ticks or in the
    zone they were written from."""
    zones, finest = {}, as_written(datetime)
    if datetime == "ticks":
        return zones
    keys = read_source.split(src, src.resolve_columns(columns))[0]    # the files' columns
    with src.using(0) as first:
        dto = {n: first[n].name for n in keys if first[n].type is T.DateTimeOffset
               and not (finest and written_from(first[n], finest))}
    for n, name in dto.items():
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
        zones[name] = zone_of(seen if seen is not None else [])
    return zones
