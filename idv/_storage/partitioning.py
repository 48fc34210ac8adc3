"""Hive-style partitioned directories (``day=2024-01-01/part-0.idv``): each ``key=value``
folder on a file's path is a column whose value is the same for every row of the file.

The one place for that naming, both ways: the writers (``idv.write(..., partition_by=)``,
Dask's ``to_idv(..., partition_by=)``) name folders with `segment`, and
``idv.dataset(..., partitioning="hive")`` reads them back with `parse` and `column_types`.
As pyarrow and Spark write them, values are URL-encoded in folder names (a ``/`` or ``=`` in a
value cannot appear raw) and a missing value is Hive's ``__HIVE_DEFAULT_PARTITION__`` (a text
value that is that name is missing too: it has no other folder, and reads back as missing).
Read back, a key whose every value is a decimal integer within int64 is an Int64 column, any
other a Text column (dates stay text, as pyarrow reads them). ML.NET's Int64 has no missing
value, so a key with a missing value is Text, and the missing value reads as the empty text
``""`` in numpy, Arrow and pandas alike (pyarrow reads it as null): idv's Text has no null
either, so a frame or table read from the dataset writes back with ``idv.write`` as Text, and
a filter compares it as the empty text, as it compares a Text column's rows.
"""
from __future__ import annotations

import datetime as _dt
import os
import re
from urllib.parse import quote, unquote

import numpy as np

from idv import types as T

HIVE = "hive"
PARTITIONINGS = (None, HIVE)
NULL = "__HIVE_DEFAULT_PARTITION__"
_SEGMENT = re.compile(r"^([^=]+)=(.*)$")
_INT = re.compile(r"^-?[0-9]+$")


def check_partitioning(partitioning):
    """ValueError unless `partitioning` is one idv reads (None or "hive")."""
    if partitioning not in PARTITIONINGS:
        raise ValueError(f"partitioning must be None or 'hive', not {partitioning!r}")


# ---------------------------------------------------------------------------------------------
# reading: the keys and values of a file's path
# ---------------------------------------------------------------------------------------------

def parse(path, root):
    """{key: value text or None} of the ``key=value`` folders of `path` below `root` (None:
    every folder of the path, as pyarrow does without a base directory; in path order; a
    folder of another form is not a key). ValueError when a key repeats."""
    if root is None:
        rel = os.fspath(path)
    elif _is_url(path):
        rel = str(path)[len(str(root).rstrip("/")) + 1:]
    else:
        rel = os.path.relpath(os.fspath(path), os.fspath(root))
    out = {}
    for part in re.split(r"[/\\]", rel)[:-1]:
        m = _SEGMENT.match(part)
        if m is None:
            continue
        key, value = unquote(m.group(1)), unquote(m.group(2))
        if key in out:
            raise ValueError(f"{path}: the partition key {key!r} appears twice on its path")
        out[key] = None if value == NULL else value
    return out


def _is_url(path):
    return isinstance(path, str) and "://" in path


def common_keys(paths, root):
    """[{key: text}] for each of `paths`, and the keys, which every file must have in the same
    order: ValueError naming the first file whose keys differ from the first's."""
    found = [parse(p, root) for p in paths]
    keys = list(found[0]) if found else []
    for p, f in zip(paths, found):
        if list(f) != keys:
            raise ValueError(f"{p}: its partition keys {list(f)} differ from {keys} (those of "
                             f"{paths[0]}); a hive-partitioned dataset has the same keys, in "
                             f"the same order, on every file's path")
    return found, keys


def column_types(found, keys):
    """{key: T.Int64 or T.Text}: Int64 when every value of the key is a decimal integer
    within int64 (a missing one makes it Text: Int64 has no missing value)."""
    out = {}
    for k in keys:
        values = [f[k] for f in found]
        whole = values and all(v is not None and _INT.match(v) and -2**63 <= int(v) < 2**63
                               for v in values)
        out[k] = T.Int64 if whole else T.Text
    return out


def value(text, t):
    """A key's value of type `t` (column_types) from its folder text: an int for Int64, the
    text for Text, "" for a missing value (of a Text key: the module's docstring says why)."""
    if text is None:
        if t is T.Int64:
            raise ValueError("a missing value of an Int64 partition key has no Int64 form")
        return ""
    return int(text) if t is T.Int64 else text


def constant(v, t, n):
    """`n` rows of the constant value `v` (value()'s) in read()'s form of type `t`: int64 for
    Int64, an object array of str for Text."""
    if t is T.Int64:
        return np.full(n, v, np.int64)
    out = np.empty(n, object)
    out[:] = v
    return out


def keys_of(paths, root):
    """({key: type}, [{key: value} per path]) of a hive-partitioned dataset's files
    (common_keys, column_types, value)."""
    found, keys = common_keys(paths, root)
    types = column_types(found, keys)
    return types, [{k: value(f[k], types[k]) for k in keys} for f in found]


# ---------------------------------------------------------------------------------------------
# writing: one folder per combination of the keys' values
# ---------------------------------------------------------------------------------------------

def text_of(v):
    """The folder text of one value (before URL encoding): integers and text as they are,
    Booleans as ``true``/``false``, dates as ``YYYY-MM-DD``, times as ISO 8601; None, NaN,
    NaT and the text `NULL` missing. TypeError for other values."""
    if v is None or (isinstance(v, float) and v != v):
        return None
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, str):
        return None if v == NULL else v
    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    if isinstance(v, np.datetime64):
        if np.isnat(v):
            return None
        return str(v.astype("datetime64[D]")) if v == v.astype("datetime64[D]") else str(v)
    if isinstance(v, _dt.datetime):
        return v.isoformat()
    if isinstance(v, _dt.date):
        return v.isoformat()
    if type(v).__name__ in ("NaTType", "NAType"):
        return None
    raise TypeError(f"a partition key's value must be a number, text, Boolean, date or time, "
                    f"not {type(v).__name__} ({v!r})")


def segment(key, text):
    """The folder ``key=value`` of a key and its value's text (text_of), URL-encoded."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"a partition key must be a non-empty column name, not {key!r}")
    return f"{quote(key, safe='')}={NULL if text is None else quote(text, safe='')}"


def groups(keys):
    """The rows of each combination of the keys' values: `keys` is a list of sequences (one a
    key, its values per row); returns [(texts, row numbers)], texts the values' folder texts
    (text_of), in the order of each combination's first row."""
    n = len(keys[0]) if keys else 0
    if not n:
        return []
    codes, texts = [], []
    for values in keys:
        code, text = _coded(values)
        codes.append(code)
        texts.append(text)
    # one code per combination, key by key (each below n, so no product overflows), then
    # the rows of each by one sort: not a sort of rows of codes and a pass per combination
    combined = codes[0]
    for code in codes[1:]:
        combined = _dense(combined * (int(code.max()) + 1) + code)
    counts = np.bincount(combined)          # codes are dense: 0 up to their count
    # a stable sort of 16-bit integers is numpy's radix sort: one pass, not n log n
    order = np.argsort(combined.astype(np.int16) if len(counts) < 1 << 15 else combined,
                       kind="stable")
    stops = np.cumsum(counts)
    starts = stops - counts
    out = []
    for g in np.argsort(order[starts], kind="stable").tolist():     # by first row
        rows = order[starts[g]:stops[g]]
        out.append((tuple(t[c[rows[0]]] for c, t in zip(codes, texts)), rows))
    return out


def _dense(code):
    """`code` (integers from 0) renumbered 0 up to the count of values it holds, in order."""
    top = int(code.max()) + 1
    if top <= 4 * len(code):                # a table over the range: no sort
        renumber = np.cumsum(np.bincount(code, minlength=top) > 0) - 1
        return renumber[code]
    return np.unique(code, return_inverse=True)[1].reshape(-1)


def _coded(values):
    """(a code per row, the folder text of each code) of one key's values: numbers and
    Booleans of a numpy array through np.unique, other values one by one."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "biuf":
        uniq, code = np.unique(values, return_inverse=True)
        canon = {}          # values of one text (NaNs) are one code
        remap = np.asarray([canon.setdefault(text_of(v), len(canon)) for v in uniq.tolist()],
                           np.int64)
        return remap[code.reshape(-1)], list(canon)
    seen, code = {}, []
    for v in _items(values):
        code.append(seen.setdefault(text_of(v), len(seen)))
    return np.asarray(code, np.int64), list(seen)


def _items(values):
    """The Python items of a key's values (a numpy array, list, pandas Series or Arrow
    array)."""
    if hasattr(values, "to_pylist"):
        return values.to_pylist()
    if hasattr(values, "to_numpy") and not isinstance(values, np.ndarray):
        return values.to_numpy(dtype=object)
    return values


def folder(keys, texts):
    """The relative folder of one combination: ``k1=v1/k2=v2``."""
    return "/".join(segment(k, t) for k, t in zip(keys, texts))
