"""Column metadata (annotations) for the writer: each value checked and encoded as the codec
payload of one block holding one item (or one vector), as ML.NET writes them.
"""
from __future__ import annotations

import numpy as np

from idv import types as T
from idv._values.infer import infer_metadata_type, is_rowlike, is_scipy_sparse, values_of
from idv._values.metadata import annotation_size_problem
from idv._values.vectors import Sparse
from idv._writer.columns import Column


def metadata_block(type_, value, where):
    """One metadata value's codec payload: a block holding one item (one vector)."""
    col = Column(0, "metadata", type_)
    col.where = where
    if col.is_vector:
        if isinstance(value, (list, tuple)):
            try:
                value = np.asarray(value, dtype=object if col.item is T.Text else None)
            except ValueError:
                raise ValueError(f"{where}: nested sequences of different lengths") from None
        if is_scipy_sparse(value) or isinstance(value, Sparse):
            batch = value
        elif isinstance(value, np.ndarray):
            batch = value.reshape(1, -1) if value.dtype != object else [value.reshape(-1)]
        else:
            raise TypeError(f"{where}: a {col.type} value must be a sequence, array or sparse "
                            f"matrix, not {type(value).__name__}")
    else:
        if isinstance(value, (np.generic, np.ndarray)):
            batch = np.asarray(value)
            if batch.size != 1:
                raise TypeError(f"{where}: {batch.size} values given for the scalar type "
                                f"{col.type}")
            batch = batch.reshape(1)
        elif is_rowlike(value):
            raise TypeError(f"{where}: a sequence given for the scalar type {col.type}")
        else:
            batch = np.empty(1, dtype=object)
            batch[0] = value
    chunk, n = col.prepare(batch)
    if n != 1:
        raise ValueError(f"{where}: a metadata value is one vector, got {n} rows")
    return col, bytes(col.payload(chunk))


def _nested_array(value, where):
    """A list of sequences as the array it spells (as np.array of the same would be), its
    items kept as Python objects so they are judged as a flat list's are; ragged is refused."""
    if not isinstance(value, (list, tuple)) or not any(is_rowlike(x) for x in value):
        return value
    try:
        arr = np.array(value, dtype=object)
    except ValueError:
        arr = None
    if arr is None or any(is_rowlike(x) for x in arr.reshape(-1)):
        raise ValueError(f"{where}: nested sequences of different lengths")
    return arr


def column_metadata(name, entries, column_type=None):
    """[(kind, codec name, codec params, raw payload)] of one column's metadata dict, each
    value's size checked against `column_type` (annotation_size_problem)."""
    if entries is None:
        return []
    if not hasattr(entries, "items"):
        raise TypeError(f"metadata for column {name!r} must be a dict kind -> value")
    out = []
    for kind, spec in entries.items():
        where = f"column {name!r} metadata {kind!r}"
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"{where}: metadata kinds must be non-empty str")
        type_, value = typed_value(spec, where)
        col, raw = metadata_block(type_, value, where)
        problem = None if column_type is None else \
            annotation_size_problem(column_type, kind, col.type)
        if problem:
            raise ValueError(f"{where}: {problem}")
        out.append((kind, col.codec_name, col.codec_params, raw))
    return out


def typed_value(spec, where):
    """(type, value) of one annotation as metadata= gives it: a (type, value) pair, or a value
    whose type is inferred."""
    if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], T.DataViewType):
        return spec
    value = _nested_array(values_of(spec), where)
    return infer_metadata_type(value, where), value


def metadata_by_column(metadata, names):
    """The metadata dict of each column (None: none), from one keyed by column name or index
    (with a name that several columns share, only the index says which)."""
    out = [None] * len(names)
    by_name = {n: i for i, n in enumerate(names)}        # the last column of each name
    for key, entries in (metadata or {}).items():
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            i = int(key)
            if not -len(names) <= i < len(names):
                raise KeyError(f"metadata for column index {i}, but there are "
                               f"{len(names)} columns")
            i %= len(names)
        elif key in by_name:
            if names.count(key) > 1:
                where = [i for i, n in enumerate(names) if n == key]
                raise ValueError(f"metadata for {key!r}, a name of several columns "
                                 f"(indices {where}); key it by column index instead")
            i = by_name[key]
        else:
            raise KeyError(f"metadata for unknown columns [{key!r}]; columns: {names}")
        if out[i] is not None:
            raise ValueError(f"metadata for column {i} ({names[i]!r}) given twice (by name "
                             f"and by index)")
        out[i] = entries
    return out
