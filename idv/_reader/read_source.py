"""What a reader reads from: a source of rows, one file (an IdvFile) or many end to end (an
idv.Dataset). Both offer the interface below, so that the scan, the whole reads
(idv._reader.whole_read), numpy's read and take (idv._reader.reads), Arrow's (idv._interop.arrow)
and pandas' (idv._interop.pandas) readers are written once, and an IdvFile is read as a dataset of
one file. """
from __future__ import annotations

from typing import Any, Callable, ContextManager, NamedTuple, Protocol, Sequence

import numpy as np

from idv._values import ticks
from idv._reader import selection, take, time_units
from idv._scan import filters
from idv._scan.filter_tree import parse
from idv._scan.scan_windows import local_rows
from idv._storage import partitioning

# read(datetime=...): the modes of idv._reader.time_units, and .NET's own 100-ns ticks
READ_TIME_MODES = ("100ns",) + ticks.TIME_MODES


class FileSpan(NamedTuple):
    """The one file of an IdvFile as a source: its path (None for bytes) and rows."""
    path: Any
    num_rows: int
    start: int = 0

    @property
    def stop(self):
        return self.start + self.num_rows


class _At(NamedTuple):
    row0: int
    num_rows: int


def file_rows(rows, entry):
    """The rows of `rows` (a range with a positive step over a source's rows) in `entry`, one
    of its files, as a range over the file's own rows (empty when none)."""
    return local_rows(rows, _At(entry.start, entry.num_rows))


def row_parts(source, rows):
    """Rows `rows` of a source (a slice, or row numbers in range: selection.table_rows) as
    ([(file, its rows: a slice, or row numbers)], restore): the files that hold some, in file
    order, and None when their rows joined are in the order asked, else the permutation that
    restores it. A slice of a positive step stays a slice in each file, whatever its step."""
    files = source.files
    if rows is None:
        return [(i, None) for i in range(len(files))], None
    if len(files) == 1:
        return [(0, rows)], None
    if selection.in_order(rows):
        within = range(*rows.indices(source.num_rows))
        return [(i, slice(r.start, r.stop, r.step)) for i, e in enumerate(files)
                if len(r := file_rows(within, e))], None
    return selection.split_rows(rows, np.array([e.start for e in files], np.int64),
                                source.num_rows)


def column_types(source, keys):
    """The types of columns `keys` (resolve_columns'): the files' columns' as the first file
    has them, and the constant columns'."""
    own, fixed = split(source, keys)
    with source.using(0) as first:
        types = {k: first[k].type for k in own}
    return [types[k] if k in types else constant_types(source)[k] for k in keys]


def table_rows(source, rows, filter_=None, keys=()):
    """rows= of a reader of `source` that makes a table (selection.table_rows); row numbers
    with a filter are a ValueError (a filter tests rows in file order: a slice with it). A
    selection in another order is a take of columns `keys`, whose result is checked against
    the memory limit first (take.check_result). A range is its slice."""
    if isinstance(rows, range):
        rows = slice(rows.start, rows.stop, rows.step)
    if isinstance(rows, slice) and rows.step == 0:
        raise ValueError("rows: a slice's step cannot be zero")
    if not selection.in_order(rows):
        if filter_ is not None:
            raise ValueError("filter= tests rows in file order: rows= with it takes a slice "
                             "with a positive step, not row numbers")
        take.check_result([rows] if selection.is_index(rows) else rows, source.num_rows,
                          column_types(source, keys), source.need)
    return selection.table_rows(rows, source.num_rows,
                                "dataset" if len(source.files) > 1 else "file")


class RowSource(Protocol):
    """A file or a dataset as the readers see it.

    ``files``: each file in row order, with ``path``, ``num_rows``, ``start`` and ``stop``
    (its rows among the source's); ``filesystem``: the fsspec filesystem of their paths, or
    None; ``num_rows``, ``schema``, ``memory_limit`` (the bytes one read may allocate);
    ``max_open_files``: the files a read may hold open at once. A source may also have
    ``constant_types`` ({name: type} of columns whose rows hold one value per file: a
    hive-partitioned dataset's keys, whose value of file i is ``files[i].constants[name]``;
    resolve_columns gives their names, which no file has: the readers build them with
    `constants` and leave out the files `decided` rules out)."""

    files: Sequence
    filesystem: Any
    num_rows: int
    memory_limit: int
    max_open_files: int
    # whether a read is checked against memory_limit as a whole before it allocates (a
    # dataset, whose files' limits are one), or as each allocation is made (a file's store)
    checked_whole: bool

    def using(self, i: int) -> ContextManager:
        """File i, open for a ``with`` block (a file: itself, left open)."""

    def resolve_columns(self, columns) -> list:
        """The columns a read of `columns` covers, each a key that ``f[key]`` finds in every
        file (a file: column indices, hidden and repeated names told apart; a dataset:
        names)."""

    def time_unit(self, names, datetime, safe, values=None, modes=None) -> tuple:
        """(datetime, safe) to read every file with: idv._reader.time_units' one rule (time_unit
        below)."""

    def need(self, nbytes: int, what: Callable[[], str]) -> None:
        """MemoryLimitError when `what` needs more than ``memory_limit``, naming the source."""

    def decoded_bytes(self, i: int, key, rows, arrow: bool = False) -> int:
        """What reading `rows` (None: all) of column `key` of file i allocates
        (Column.decoded_bytes; `arrow`: into Arrow)."""


def key_names(source, keys):
    """The names of columns `keys` (a file's indices or a dataset's names) of `source`, from
    its first file's schema: no Column built (a file of thousands of columns)."""
    with source.using(0) as first:
        return [first.schema[k].name for k in keys]


def time_unit(source, names, datetime, safe, values=None, modes=None):
    """(datetime, safe) for a read of columns `names` of every file of `source`: for 'auto',
    'exact' and 'auto-us' a ticks.Units of each time column's unit, chosen from all files
    (idv._reader.time_units); other modes as given. `values` (name -> read()'s form of a whole
    column) spares decoding what a read of a source of one file decoded already. `modes`: the
    reader's modes (default ticks.TIME_MODES, those of Arrow and the engines; numpy's readers
    take '100ns' too, READ_TIME_MODES)."""
    ticks.check_time_mode(datetime, modes or ticks.TIME_MODES)
    files = range(len(source.files))
    if datetime not in ticks.CHOSEN_MODES:
        return datetime, safe
    with source.using(0) as first:
        timed = [n for n in names if time_units.is_time(first.schema[n].type)]  # no Column
    if not timed:
        return datetime, safe
    return time_units.choose(lambda: (source.using(i) for i in files), timed, datetime,
                             values if len(files) == 1 else None), safe


# ---------------------------------------------------------------------------------------------
# columns of one value per file (a hive-partitioned dataset's keys): the one hook of the readers
# ---------------------------------------------------------------------------------------------

def constant_types(source):
    """{name: type} of the source's columns of one value per file ({} for a file)."""
    return getattr(source, "constant_types", None) or {}


def split(source, keys):
    """(the keys of `keys` the files have, the names of `keys` that are constant columns)."""
    types = constant_types(source)
    if not types:
        return list(keys), []
    return [k for k in keys if k not in types], [k for k in keys if k in types]


def constants(source, names, i, n):
    """`n` rows of each constant column `names` of file i, in read()'s form."""
    types = constant_types(source)
    return [partitioning.constant(source.files[i].constants[k], types[k], n) for k in names]


def joined_constants(source, fixed, counts):
    """The constant columns `fixed` of the source's files, `counts` ([(file, its rows)]) of
    each, joined in that order."""
    if not fixed:
        return []
    parts = [constants(source, fixed, i, n) for i, n in counts] or \
        [constants(source, fixed, 0, 0)]
    return [np.concatenate([p[j] for p in parts]) for j in range(len(fixed))]


def filter_of(filter_):
    """`filter_` as a tree (None: None), once for every file's `decided`."""
    return None if filter_ is None else parse(filter_)


def decided(source, i, node):
    """The filter tree `node` (filter_of) left for file i: False when no row of it can match
    (the file is not read), True when every row does, else a tree on the files' columns
    (filters.decided with its constant columns' values); `node` itself without them."""
    types = constant_types(source)
    if node is None or not types:
        return True if node is None else node
    values = source.files[i].constants
    return filters.decided(node, {k: (t, values[k]) for k, t in types.items()})
