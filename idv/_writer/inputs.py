"""What idv.write and idv.Writer accept: a dict, (name, values) pairs, a pandas DataFrame or
a pyarrow Table as data; a dict, pairs or an idv.Schema as schema. Frames are handed to their
adapters (idv._writer.pandas.from_pandas, idv._writer.arrow.from_arrow), which give back
columns, types and metadata; the rest is typed here, from the caller's types or by
idv._values.infer. """
from __future__ import annotations

import os

import numpy as np

from idv._values.infer import infer_column
from idv._values.arrow_types import import_pyarrow
from idv._writer.arrow import from_arrow
from idv._writer.missing import ensure_missing_text
from idv._writer.pandas import from_pandas


def schema_of(columns, types, inferred_types):
    """(schema, columns): each column's type (the caller's, by index or name; the frame
    adapter's; else inferred from its values, which then come back in the form the inference
    normalized them to, so that they are not flattened twice)."""
    types = dict(types or {})
    names = [n for n, _ in columns]
    unknown = [k for k in types if k not in names and not (
        isinstance(k, (int, np.integer)) and 0 <= k < len(columns))]
    if unknown:
        raise KeyError(f"types for unknown columns {unknown}; columns: {names}")
    schema, out = [], []
    for i, (name, value) in enumerate(columns):
        if i in types:
            t = types[i]
        elif name in types:
            t = types[name]
        elif i in inferred_types or name in inferred_types:
            t = inferred_types.get(i, inferred_types.get(name))
        else:
            t, value = infer_column(value, f"column {name!r}")
        schema.append((name, t))
        out.append((name, value))
    return schema, out


def merged_metadata(inferred, given):
    """The metadata a frame brings, each kind replaced by the caller's."""
    if not inferred:
        return given
    merged = {k: dict(v) for k, v in inferred.items()}
    for name, entries in (given or {}).items():
        if entries is not None and not hasattr(entries, "items"):
            raise TypeError(f"metadata for column {name!r} must be a dict kind -> value")
        merged.setdefault(name, {}).update(entries or {})
    return merged


def data_columns(data, types=None, missing_text=None):
    """([(name, values)], inferred types, inferred metadata) from a dict-like, a pandas
    DataFrame (through from_pandas) or Arrow data (a Table / RecordBatch, another library's
    frame, Arrow columns in a dict: through from_arrow); `types` are the caller's overrides,
    which those conversions take into account (a Categorical given a non-key type is written
    as its values); `missing_text`: what their missing Text becomes."""
    ensure_missing_text(missing_text)
    if hasattr(data, "iloc") and hasattr(data, "columns") and hasattr(data, "dtypes"):
        return from_pandas(data, types=types, missing_text=missing_text)
    arrow = as_pyarrow(data, table=True)
    if arrow is not None and hasattr(arrow, "schema"):
        return from_arrow(arrow, types=types, missing_text=missing_text)
    if isinstance(data, np.ndarray) and data.dtype.names:     # a structured array: its fields
        return _arrow_values([(n, data[n]) for n in data.dtype.names], types or {},
                             missing_text)
    if hasattr(data, "items") and hasattr(data, "keys"):
        return _arrow_values(list(data.items()), types or {}, missing_text)
    if isinstance(data, (list, tuple)) and all(
            isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in data):
        # (name, values) pairs: names may repeat (hidden columns)
        return _arrow_values(list(data), types or {}, missing_text)
    hint = ": collect() it first" if hasattr(data, "collect") else ""
    raise TypeError(f"data must be a dict column name -> values, a list of (name, values) pairs, "
                    f"a numpy structured array, a pandas DataFrame, a pyarrow Table or Dataset "
                    f"or a frame of another Arrow library (polars, DuckDB: __arrow_c_stream__), "
                    f"not {type(data).__name__}{hint}")


def check_dest(dest):
    """ValueError for an empty path (a file of no name, which would be a temporary file
    renamed to nothing); other destinations are checked where they are opened
    (idv._storage.sink)."""
    if isinstance(dest, (str, bytes, os.PathLike)) and not os.fspath(dest):
        raise ValueError(f"cannot write to {dest!r}: the path is empty (give a file name)")


def check_table(data):
    """TypeError for one column given where a table goes: a pandas or polars Series, a
    pyarrow Array or ChunkedArray. pandas' and pyarrow's table writers refuse them too
    (``to_parquet`` is a DataFrame's, ``pa.table`` takes no Series), and a Series read as a
    table would be taken for a mapping of its index (pandas) or fail inside Arrow (polars)."""
    one_column = hasattr(data, "to_frame") and not hasattr(data, "columns")
    arrow = type(data).__module__.split(".")[0] == "pyarrow" and hasattr(data, "null_count")
    if one_column or arrow:
        name = getattr(data, "name", None)
        what = "series" if one_column else "array"
        how = f"{{{name if isinstance(name, str) and name else 'name'!r}: {what}}}"
        hint = f" or {what}.to_frame()" if one_column else ""
        raise TypeError(f"data is one column ({type(data).__name__}), not a table: pass {how}"
                        f"{hint}")


def as_pyarrow(value, table=False):
    """`value` as pyarrow holds it: pyarrow's own objects as they are; another library's
    (polars, DuckDB ...: Arrow's C stream interface, ``__arrow_c_stream__``; a Hugging Face
    Dataset's rows) read into a Table (`table`) or a ChunkedArray, without a copy; None for
    anything else, pandas' and numpy's objects included (they have ways of their own:
    from_pandas, numpy arrays)."""
    top = type(value).__module__.split(".")[0]
    if top == "pyarrow":
        return value
    if top == "datasets" and table and hasattr(value, "with_format"):
        return value.with_format("arrow")[:]        # a Hugging Face Dataset's rows
    if table and all(hasattr(value, a) for a in ("scanner", "to_table", "schema")):
        return value                    # a pyarrow Dataset's kin (idv.arrow_dataset)
    if top in ("pandas", "numpy") or not hasattr(value, "__arrow_c_stream__"):
        return None
    pa = import_pyarrow()
    try:
        return pa.table(value) if table else pa.chunked_array(value)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise TypeError(f"{type(value).__name__}: pyarrow cannot read its Arrow data ({e}); "
                        f"cast the columns of types pyarrow lacks first") from e


def _arrow_column(value):
    """A column's values, another Arrow library's as a pyarrow ChunkedArray (as_pyarrow)."""
    arrow = as_pyarrow(value)
    return value if arrow is None else arrow


def _arrow_values(pairs, types, missing_text):
    """(pairs, types, metadata) of data_columns for (name, values) pairs, the Arrow columns
    among them (pyarrow's, another library's: as_pyarrow) typed and converted as a Table's
    columns are (from_arrow; their types by position), a pandas Series as a DataFrame's
    (from_pandas: a Categorical a key, a zone kept), the other values left as they are."""
    columns, inferred, metadata = [], {}, {}
    index = None            # the first Series' index: the others' must be it
    for i, (name, value) in enumerate(pairs):
        given = types.get(i, types.get(name))
        given = None if given is None else {name: given}
        if hasattr(value, "iloc") and hasattr(value, "dtype"):    # a pandas Series
            index = value.index if index is None else index
            if not value.index.equals(index):
                raise ValueError(f"column {name!r}: a Series whose index differs from the first "
                                 f"Series' (a dict is written by position, where a DataFrame "
                                 f"aligns on the index): make them a DataFrame, or reset_index"
                                 f"(drop=True) each")
            got, typed, meta = from_pandas(value.to_frame(name), types=given,
                                           missing_text=missing_text)
        else:
            arrow = as_pyarrow(value)
            if not (hasattr(arrow, "type") and hasattr(arrow, "null_count")):
                columns.append((name, value))      # missing Text filled by the writer's Column
                continue
            got, typed, meta = from_arrow(import_pyarrow().table({name: arrow}), types=given,
                                          missing_text=missing_text)
        columns += got
        if name in typed:
            inferred[i] = typed[name]          # by position: a name may repeat
        metadata.update(meta)
    return columns, inferred, metadata


def arrow_batch(data):
    """A batch given to write_batch, its Arrow data as pyarrow's (as_pyarrow): a Table or
    RecordBatch, or another library's frame, as its columns by name (as (name, column) pairs
    when names repeat); another library's columns in a dict or in pairs as ChunkedArrays;
    anything else as it is."""
    arrow = as_pyarrow(data, table=True)
    if arrow is not None and hasattr(arrow, "schema") and hasattr(arrow, "column"):
        names = list(arrow.schema.names)
        pairs = [(n, arrow.column(i)) for i, n in enumerate(names)]
        return pairs if len(set(names)) < len(names) else dict(pairs)
    if isinstance(data, dict):
        return {k: _arrow_column(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [(p[0], _arrow_column(p[1])) if isinstance(p, (tuple, list)) and len(p) == 2
                else p for p in data]
    return data


def frame_rows(data):
    """The rows of a batch that has no columns: a DataFrame's or Arrow table's length, else 0."""
    shape = getattr(data, "shape", None)
    if isinstance(shape, tuple) and len(shape) == 2:
        return int(shape[0])
    n = getattr(data, "num_rows", None)
    return int(n) if isinstance(n, (int, np.integer)) else 0


def schema_pairs(schema):
    """[(name, type)] from a dict, a list of pairs, or an idv.Schema."""
    if hasattr(schema, "fields") and not hasattr(schema, "items"):
        return [(f.name, f.type) for f in schema.fields]
    if hasattr(schema, "items"):
        return list(schema.items())
    pairs = []
    for p in schema:
        if not (isinstance(p, (tuple, list)) and len(p) == 2):
            raise TypeError(f"schema entries must be (name, type) pairs, not {p!r}")
        pairs.append((p[0], p[1]))
    return pairs
