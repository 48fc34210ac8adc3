"""Which columns and which rows a read covers: one rule for each, used by every reader.

Columns are picked among a list of names, as a file's table of contents or a dataset's schema
lists them: by name (a name that repeats means its last column, as in ML.NET, where the
earlier ones are hidden), by index (negative from the end), or, where a caller offers it, by a
glob (``Feature*``). Rows are a slice, row numbers (negative from the end) or a boolean mask,
over one file's rows or a dataset's rows end to end.
"""
from __future__ import annotations

import fnmatch

import numpy as np

from idv.errors import no_column

_GLOB_CHARS = frozenset("*?[")


def visible(names):
    """Positions of the visible columns of `names`: the last of each name, in order."""
    last = {n: i for i, n in enumerate(names)}
    return [i for i, n in enumerate(names) if last[n] == i]


def is_index(x):
    """Whether `x` picks a column by position (an int or numpy integer, not a bool)."""
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def as_list(columns):
    """One column (a name or an index) as a list of one; a list (or other iterable) as a
    list."""
    if isinstance(columns, str) or is_index(columns):
        return [columns]
    return list(columns)


def positions(names, columns, *, where="", globs=False, index_hint=""):
    """Positions in `names` of `columns`: None for every visible column; else a name, an index
    or a list of them, in the order given. With `globs`, a name that is no column but holds
    ``*``, ``?`` or ``[`` picks every visible column it matches, in order.

    KeyError for a missing name and IndexError for an index beyond the columns, naming the
    columns there are; `where` (e.g. " in the dataset") and `index_hint` complete them."""
    if columns is None:
        return visible(names)
    last = {n: i for i, n in enumerate(names)}
    out = []
    for c in as_list(columns):
        if is_index(c):
            n = len(names)
            if not -n <= int(c) < n:
                span = f" (0 to {n - 1})" if n else ""
                raise IndexError(f"column index {int(c)} out of range{where}: {n} "
                                 f"column{'s' * (n != 1)}{span}{index_hint}")
            out.append(int(c) % n)
        elif isinstance(c, str) and c in last:
            out.append(last[c])
        elif isinstance(c, str) and globs and _GLOB_CHARS & set(c):
            found = [i for i in visible(names) if fnmatch.fnmatchcase(names[i], c)]
            if not found:
                raise KeyError(f"no column matches {c!r}{where}; columns: {list(last)}")
            out.extend(found)
        elif isinstance(c, str):
            raise no_column(c, list(last), where)
        else:
            raise TypeError(f"columns are picked by name or index, not "
                            f"{type(c).__name__} ({c!r})")
    return out


def file_columns(f, columns, *, globs=False):
    """The Columns of an open file that `columns` picks (positions() over its column names):
    by default every readable visible one; a column asked for by name or index must be
    readable (UnsupportedCodecError, saying why, when it is not)."""
    picked = [f[i] for i in positions(f.column_names, columns, globs=globs)]   # those built
    if columns is None:
        return [c for c in picked if c.readable]
    for c in picked:
        c.check_readable()
    return picked


def one_per_name(cols, where="read()",
                 instead="read them one at a time, or through to_arrow or to_pandas, which "
                         "keep both"):
    """ValueError when Columns `cols` hold two columns of one name (a file's hidden column
    and the one shown, picked by index) for a reader whose answer is keyed by name (a dict,
    a Hugging Face dataset, a JSON object), which would keep one silently; the same column
    twice is one. `instead`: what the message offers."""
    seen = {}
    for c in cols:
        other = seen.setdefault(c.name, c.index)
        if other != c.index:
            raise ValueError(f"{where} keys its answer by name, and columns {other} and "
                             f"{c.index} are both named {c.name!r}: {instead}")
    return cols


def names_of(names, columns, *, where="", globs=False):
    """The names `columns` picks among `names` (positions(), as names): for sources whose
    names do not repeat (a dataset, an Arrow schema); None stays None (every column)."""
    if columns is None:
        return None
    return [names[i] for i in positions(names, columns, where=where, globs=globs)]


# ---------------------------------------------------------------------------------------------
# rows
# ---------------------------------------------------------------------------------------------

def row_numbers(key, n, what="column"):
    """Row numbers (int64, in the order given, each in [0, n)) from a slice, a list or array of
    row numbers (negative from the end) or a boolean mask of all `n` rows of a `what`."""
    if isinstance(key, slice):
        start, stop, step = key.indices(n)
        return np.arange(start, stop, step, dtype=np.int64)
    try:
        rows = np.asarray(key)
    except (TypeError, ValueError):
        rows = None
    if rows is not None:
        _beyond_int64(rows, n)
    if rows is None or rows.ndim != 1 or (rows.dtype.kind not in "biu" and
                                          not _empty_list(key, rows)):
        raise TypeError(f"rows are selected by an int, a slice, a list or array of row "
                        f"numbers, or a boolean mask, not {_described(key)}")
    if rows.dtype.kind == "b":
        if len(rows) != n:
            raise IndexError(f"boolean mask of {len(rows)} rows for a {what} of {n}")
        return np.flatnonzero(rows)
    rows = _unsigned(rows, n) if rows.dtype.kind == "u" else rows.astype(np.int64)
    bad = (rows < -n) | (rows >= n)
    if bad.any():
        raise IndexError(f"row {int(rows[bad][0])} out of range for {n} rows")
    return np.where(rows < 0, rows + n, rows)


def _described(key):
    """What `key` is, for a message: ``a 2-d float64 array``, ``a list of int and str``."""
    what = type(key).__name__
    if isinstance(key, np.ndarray):
        return f"a {key.ndim}-d {key.dtype} array"
    if isinstance(key, (list, tuple)) and len(key):
        kinds = dict.fromkeys(type(x).__name__ for x in key[:100])
        return f"a {what} of {' and '.join(kinds)}"
    return what


def in_order(key):
    """Whether rows `key` (None: all) are read in file order, each once: a slice with a
    positive step. The readers read those block by block; any other selection (row numbers,
    a mask, a slice backwards) they read as row numbers."""
    return key is None or (isinstance(key, slice) and (key.step is None or key.step > 0))


def table_rows(key, n, what="file"):
    """rows= of a reader that makes a table (to_arrow, to_pandas): None or a slice with a
    positive step as given, any other selection as row numbers (row_numbers: checked against
    the `n` rows of a `what`, in the order asked); an int is a table of that one row."""
    if in_order(key):
        return key
    if is_index(key):
        key = [key]
    return row_numbers(key, n, what)


def stream_rows(key, n):
    """rows= of a stream (rows in file order): a slice or range with a positive step, as a
    range over the `n` rows; other selections are a TypeError naming the readers that take
    them, a step below 1 a ValueError."""
    if not isinstance(key, (slice, range)):
        raise TypeError(f"a stream's rows= (record_batch_reader, iter_batches) are in file "
                        f"order: a slice, not {_described(key)}; to_arrow(rows=) and take() "
                        f"read rows by number")
    rows = range(*slice(key.start, key.stop, key.step).indices(n))
    if rows.step < 1:
        raise ValueError(f"a stream's rows= (record_batch_reader, iter_batches) are in file "
                         f"order: a slice with a positive step, not {rows.step}; "
                         f"to_arrow(rows=) reads them in any order")
    return rows


def count(key, n):
    """How many rows `key` (a slice, or what row_numbers takes) selects of `n`."""
    if isinstance(key, slice):
        return len(range(*key.indices(n)))
    return len(row_numbers(key, n))


def take_numbers(indices):
    """The row numbers of a take (int64, 1-d, not yet checked against a row count; a slice
    stays a slice): integers only. A boolean mask is a filter, not a take, and floats, text
    and nested lists are not row numbers: each a TypeError."""
    if isinstance(indices, slice):
        return indices
    if isinstance(indices, (int, np.integer)) and not isinstance(indices, (bool, np.bool_)):
        indices = [indices]
    try:
        rows = np.asarray(indices)
    except (TypeError, ValueError):
        _not_numbers(indices)
    _beyond_int64(rows)
    if rows.ndim != 1 or (rows.dtype.kind not in "iu" and not _empty_list(indices, rows)):
        _not_numbers(indices)
    return rows.astype(np.int64) if rows.dtype.kind != "u" else _unsigned(rows)


def _empty_list(key, rows):
    """Whether `key` is an empty list or tuple (numpy makes it float64): no rows, as numpy
    indexes with it; an empty array of floats is refused as numpy refuses it."""
    return not len(rows) and not isinstance(key, np.ndarray)


def _beyond_int64(rows, n=None):
    """IndexError for Python ints beyond int64 (numpy holds them as objects) among `rows`:
    out of range of any file, not a type a row number cannot have."""
    if rows.dtype == object and rows.ndim == 1 and len(rows) and all(
            isinstance(r, int) and not isinstance(r, bool) for r in rows.tolist()):
        big = next((r for r in rows.tolist() if not -2**63 <= r < 2**63), None)
        if big is not None:     # (an object array of small ints is refused as other objects)
            of = "" if n is None else f" for {n} rows"
            raise IndexError(f"row {big} out of range{of}")


def _unsigned(rows, n=None):
    """Unsigned row numbers as int64, each beyond int64 (2**63 and more, which the cast
    would make negative: rows from the end) refused, naming it (and the `n` rows)."""
    big = rows > np.iinfo(np.int64).max
    if big.any():
        of = "" if n is None else f" for {n} rows"
        raise IndexError(f"row {int(rows[big][0])} out of range{of}")
    return rows.astype(np.int64)


def _not_numbers(indices):
    shown = repr(indices)
    raise TypeError(f"take() takes row numbers (a list or array of integers), not "
                    f"{shown[:60]}{'...' if len(shown) > 60 else ''}: select rows by a "
                    f"boolean mask with a filter, or with read(rows=mask)")


def contiguous(key, n):
    """(start, stop) when `key` is a slice of step 1 (or None: all rows), else None."""
    if key is None:
        return 0, n
    if isinstance(key, slice):
        start, stop, step = key.indices(n)
        if step == 1:
            return start, max(start, stop)
    return None


def slice_run(key, n, rows_per_block):
    """For a slice of `n` rows stored in blocks of `rows_per_block` whose step is smaller than
    a block (so that it touches every block between its first and last row): ((first block,
    stop block), the slice within those blocks' rows), found from start, stop and step alone
    (no array of row numbers); (0, 0) blocks when it selects nothing. None for a larger step
    (row_numbers then names the few rows, at most one per block)."""
    start, stop, step = key.indices(n)
    if abs(step) >= rows_per_block > 1:
        return None
    count = len(range(start, stop, step))
    if count == 0:
        return (0, 0), slice(0, 0)
    last = start + (count - 1) * step
    lo, hi = min(start, last), max(start, last)
    b0, b1 = lo // rows_per_block, hi // rows_per_block + 1
    base = b0 * rows_per_block
    end = last - base + (1 if step > 0 else -1)
    return (b0, b1), slice(start - base, None if end < 0 else end, step)


def split_rows(key, starts, n, what="dataset"):
    """A selection of the rows of parts laid end to end (a dataset's files; `starts`: each
    part's first row, `n`: all rows) -> ([(part, local rows)], restore).

    Local rows are a slice of step 1 where the selection is one (each part's share of it),
    else sorted-by-part row numbers; `restore` is None when the parts' rows, joined in part
    order, are already in the order asked for, else the permutation that restores it."""
    starts = np.asarray(starts, np.int64)
    stops = np.append(starts[1:], n)
    span = contiguous(key, n)
    if span is not None:
        a, b = span
        parts = [(i, slice(int(max(a, s) - s), int(min(b, e) - s)))
                 for i, (s, e) in enumerate(zip(starts, stops)) if max(a, s) < min(b, e)]
        return parts, None
    idx = row_numbers(key, n, what)
    which = np.searchsorted(starts, idx, side="right") - 1
    order = np.argsort(which, kind="stable")
    sorted_which = which[order]
    parts = []
    for i in np.unique(sorted_which):
        sel = order[sorted_which == i]
        parts.append((int(i), idx[sel] - starts[int(i)]))
    restore = None if np.array_equal(order, np.arange(len(order))) else np.argsort(order)
    return parts, restore
