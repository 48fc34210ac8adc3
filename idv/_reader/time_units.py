"""Which unit a DateTime, TimeSpan or DateTimeOffset column is read in: one rule for every
entry point that gives Arrow or pandas types (to_arrow, record_batch_reader, to_pandas,
datasets, polars, Dask, Ray, Hugging Face; the Arrow dataset and Spark, asked).

``datetime="auto"``, their default, gives each time column nanoseconds when every value of
the column, in every file of a dataset, fits int64 nanoseconds (dates 1677-09-21 to
2262-04-11, durations within +-292 years), else microseconds, flooring 100-ns ticks there
with one IdvWarning per column. The answer depends on the column's values alone: never on
the rows a read asks for, a filter, a batch or the path taken, so that every file, partition
and batch of a read, and every entry point, give the same type. It is found once per open
file and column: from the file's block statistics where it has them (no block is read: their
bounds, and the count of values microseconds floor, which the warning gives), else by
decoding the column once, a window at a time by the scan, each piece summed up in the thread
that decoded it (a whole read uses the values it decodes anyway).
Two engines whose timestamps are microseconds default to them: Spark to ``"us"`` (its only
unit), the Arrow dataset to ``"auto-us"`` (DuckDB pushes filters into a scan only on
microsecond timestamps).
A column written from Arrow or pandas keeps the type it had there (its ``idv.SourceType``
annotation: ``timestamp[us, tz=Europe/Paris]``, ``date32[day]``, ``duration[ms]``...), and
'auto' gives that type back (idv._values.time_zones.restored_type), so that Parquet -> .idv ->
Parquet and pandas -> .idv -> pandas keep their types; in a dataset, only when every file
was written from that type (choose's ``mixed``: the others are read by the rule above).
``"exact"`` refuses instead of flooring; ``"auto-us"`` is microseconds always (Parquet
output: what Spark reads); ``"us"``, ``"ns"`` and ``"ticks"`` are fixed and read nothing
ahead. numpy's read() and take() keep .NET's own unit, ``datetime64[100ns]``, by default
(exact, and no pass over the data: numpy alone holds that unit); ``datetime="auto"`` gives
them this rule's unit, not the type a column was written from.
"""
from __future__ import annotations

import contextlib
import weakref

import numpy as np

from idv._scan import scan
from idv._values import ticks
from idv._values.time_zones import as_written, written_from
from idv import types as T
from idv.errors import IdvFormatError
from idv.types import EPOCH_TICKS

# Column -> UnitChoice of all its values (with the count of sub-microsecond ticks), or of
# its statistics' bounds only ("bounds")
_found: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def is_time(type_) -> bool:
    """Whether a column of this type holds times (scalars or vectors)."""
    return T.item_type(type_) in ticks.TIME_ITEMS


def _from_statistics(col, cs, exact):
    """A UnitChoice of the column's values (100-ns counts from 1970 / durations) by its
    statistics `cs`: their bounds, and the count of values that are no whole microsecond
    where the statistics keep it; None where they cannot answer (none, or `exact` without
    that count)."""
    if cs is None or exact and cs.sub_us is None:
        return None
    choice = ticks.UnitChoice()
    present = cs.present > 0
    shift = 0 if T.item_type(col.type) is T.TimeSpan else EPOCH_TICKS
    if present.any():
        choice.add_bounds(int(cs.low[present].min()) - shift,
                          int(cs.high[present].max()) - shift)
    if cs.sub_us is not None:
        some = np.flatnonzero(cs.sub_us)
        choice.add_sub_us(int(cs.sub_us.sum()),
                          int(cs.first_sub_us[some[0]]) - shift if len(some) else None)
    return choice


def summary(col, file, values=None, exact=False):
    """What a column's values say about its unit (ticks.UnitChoice), found once per column
    of open file `file`: from its statistics (their bounds; when `exact`, which wants the
    count of sub-microsecond ticks too, only where they keep it), else from `values` when
    given (read()'s form of the whole column), else by decoding the column's blocks (the
    scan's windows). The statistics come first even where the values are at hand: they
    answer without a pass over them."""
    known = _found.get(col)
    if known is not None and (not exact or known[1]):
        return known[0]
    try:
        cs = file.column_statistics(col.index)
    except IdvFormatError:
        cs = None
    choice = _from_statistics(col, cs, exact)
    if choice is not None:
        _found[col] = (choice, cs.sub_us is not None)
        return choice
    if values is not None:
        choice = _choice(values)
    else:                           # a window at a time, each piece summed up where decoded
        choice = _merged(rows.values[0]
                         for rows in scan.scan(file, [_Summed(col)], batch_rows=None))
    _found[col] = (choice, True)
    return choice


class _Summed(scan.NumpyColumn):
    """A scan reader of a time column that gives each piece's UnitChoice, summed up in the
    thread that decoded it (the decode's threads share the pass over the values), and a
    window's merged in row order."""

    def decode(self, b0, b1, out):
        return [_choice(super().decode(b0, b1, out)[0])]

    def inflated(self, b0, b1, out):
        return [_choice(out)]

    def join(self, chunks):
        return _merged(chunks)

    def cut(self, value, a, b, step=1):
        return value


def _choice(values):
    """The UnitChoice of some of a column's values (read()'s form)."""
    choice = ticks.UnitChoice()
    choice.add(ticks.ticks100_of(values))
    return choice


def _merged(choices):
    """UnitChoices of parts of a column, in row order, as one."""
    choice = ticks.UnitChoice()
    for part in choices:
        choice.merge(part)
    return choice


def choose(open_files, names, mode, values=None):
    """``datetime=`` for a read of columns `names` of the files `open_files()` gives (context
    managers giving open files: a dataset's, in turn; called again when the
    count of floored ticks is needed): for 'auto', 'exact' and 'auto-us' a ticks.Units of each
    time column's (unit, safe), chosen from all files; any other mode (or a Units already)
    as given. `values` (name -> read()'s form of a whole column of a single file) spares
    decoding what a read has decoded already. The Units' ``mixed``: the columns whose files
    were written from different types (_mixed), which no read restores."""
    if isinstance(mode, ticks.Units) or mode not in ticks.CHOSEN_MODES:
        return mode
    what, written = {}, set()

    def summed(names, exact):
        parts = {}
        for entry in open_files():
            with entry as f:
                for n in names:
                    col = f[n]
                    if is_time(col.type):
                        what[n] = T.item_type(col.type).name
                        given = None if values is None else values.get(n)
                        parts.setdefault(n, ticks.UnitChoice()).merge(
                            summary(col, f, given, exact))
                if not exact:
                    written.update(_written(f, names, as_written(mode)))
        return parts
    merged = summed(names, False)
    # microseconds: the values it floors are counted, from every block
    floored = [n for n, m in merged.items() if mode == "auto-us" or not m.fits_ns]
    if floored:
        merged.update(summed(floored, True))
    units = ticks.Units((n, m.settle(mode, f"column {n!r}", what[n]))
                        for n, m in merged.items())
    units.mode = mode
    units.mixed = _mixed(written)
    return units


def _written(f, keys, finest):
    """(key, name, the type it was written from) of each time column `keys` of open file
    `f` (time_zones.written_from within `finest`; None: none, or not a mode that restores)."""
    return [(k, f[k].name, finest and written_from(f[k], finest)) for k in keys
            if is_time(f[k].type)]


def _mixed(written):
    """The names of the columns whose files were written from different types (or some from
    none), among `written` (_written of every file): a read gives them by the rule above,
    none restored, so that every file, and every entry point, give them one type."""
    seen = {}
    for key, name, source in written:
        seen.setdefault((key, name), set()).add(source)
    return frozenset(name for (_, name), sources in seen.items() if len(sources) > 1)


def mixed(open_files, keys, mode):
    """_mixed of columns `keys` of the files `open_files()` gives (as choose's), read in
    mode `mode` (ticks.Units.mixed, where choose has found them already)."""
    if isinstance(mode, ticks.Units):
        return getattr(mode, "mixed", frozenset())
    finest, written = as_written(mode), []
    if finest is None:          # a mode that restores no written-from type
        return frozenset()
    for entry in open_files():
        with entry as f:
            if not any(is_time(f[k].type) for k in keys):
                return frozenset()      # no time column (the files agree on the types)
            written.extend(_written(f, keys, finest))
    return _mixed(written)


def for_file(f, names, mode, values=None):
    """choose() over one open file."""
    return choose(lambda: [contextlib.nullcontext(f)], names, mode, values)
