"""idv values as the oracle's JSON cells, and a writer case as an oracle write-spec.

The inverse of expected.py: floats as repr strings, dates as .NET ticks, RowId as one integer,
sparse rows as {length, indices, values} (see shared/oracle/README.md). ML.NET writes the spec
with ``mlnet_oracle.py write-spec``; its file must equal ours byte for byte.
"""
from __future__ import annotations

import numpy as np
import pytest

import idv
from expected import EPOCH_TICKS, TICKS_PER_MINUTE
from write_cases import DT, TS

sp = pytest.importorskip("scipy.sparse")


def _float_cell(x):
    x = float(x)
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    return repr(x)


def item_cells(item, arr):
    """JSON cells of a 1-d array of items in idv's read form."""
    arr = np.asarray(arr).reshape(-1)
    if isinstance(item, idv.Key):
        return [int(x) for x in arr.tolist()]
    name = item.name
    if name in ("Single", "Double"):
        return [_float_cell(x) for x in arr.tolist()]
    if name == "Boolean":
        return [bool(x) for x in arr.tolist()]
    if name == "Text":
        return [str(x) for x in arr]
    if name == "DateTime":
        return (arr.astype(DT).view(np.int64) + EPOCH_TICKS).tolist()
    if name == "TimeSpan":
        return arr.astype(TS).view(np.int64).tolist()
    if name == "DateTimeOffset":
        m = arr["offset_minutes"].astype(np.int64)
        clock = arr["utc"].astype(DT).view(np.int64) + EPOCH_TICKS + m * TICKS_PER_MINUTE
        return [{"ticks": int(t), "offset_minutes": int(o)} for t, o in zip(clock, m)]
    if name == "RowId":
        return [(int(h) << 64) | int(lo) for lo, h in zip(arr["low"], arr["high"])]
    return [int(x) for x in arr.tolist()]


def vector_cells(item, value):
    """One cell per row: dense lists, or sparse {length, indices, values} dicts."""
    if sp.issparse(value):
        m = value.tocsr()
        out = []
        for r in range(m.shape[0]):
            a, b = m.indptr[r], m.indptr[r + 1]
            vals = item_cells(item, m.data[a:b])
            if b - a == m.shape[1]:
                out.append(vals)
            else:
                out.append({"length": m.shape[1], "indices": m.indices[a:b].tolist(),
                            "values": vals})
        return out
    if isinstance(value, idv.Sparse):
        out = []
        lengths = value.lengths
        for r in range(len(value)):
            a, b = value.offsets[r], value.offsets[r + 1]
            vals = item_cells(item, value.values[a:b])
            if b - a == lengths[r]:
                out.append(vals)
            else:
                out.append({"length": int(lengths[r]), "indices": value.indices[a:b].tolist(),
                            "values": vals})
        return out
    if isinstance(value, idv.Ragged):
        return [item_cells(item, r) for r in value]
    arr = np.asarray(value)
    return [item_cells(item, row) for row in arr.reshape(arr.shape[0], -1 if len(arr) else 0)]


def type_spec(t):
    spec = {}
    item = t.item if isinstance(t, idv.Vector) else t
    if isinstance(item, idv.Key):
        spec.update(type="Key", key_raw=item.raw.name, key_count=item.count)
    else:
        spec["type"] = item.name
    if isinstance(t, idv.Vector):
        spec["vector"] = list(t.dims) if len(t.dims) > 1 else t.dims[0]
    return spec


def oracle_spec(fx, path):
    """The oracle's write-spec of case `fx`, with the types the file at `path` (ours, written
    from it) has."""
    with idv.open(path) as f:
        columns = []
        for col in f.columns:
            value = fx["data"][col.name]
            t = col.type
            c = {"name": col.name, **type_spec(t)}
            if isinstance(t, idv.Vector):
                c["values"] = vector_cells(t.item, value)
            else:
                c["values"] = item_cells(t, value)
            anns = []
            meta = (fx.get("metadata") or {}).get(col.name, {})
            for kind, mtype in col.metadata_types.items():
                v = meta[kind]
                v = v[1] if isinstance(v, tuple) and isinstance(v[0], idv.DataViewType) else v
                a = {"kind": kind, **type_spec(mtype)}
                if isinstance(mtype, idv.Vector):
                    if sp.issparse(v) or isinstance(v, idv.Sparse):
                        a["value"] = vector_cells(mtype.item, v)[0]
                    else:
                        a["value"] = item_cells(mtype.item, np.asarray(v, dtype=object
                                                                        if isinstance(v, list)
                                                                        else None))
                else:
                    a["value"] = item_cells(mtype, np.asarray([v]))[0]
                anns.append(a)
            if anns:
                c["annotations"] = anns
            columns.append(c)
        return {"rows": f.num_rows, "columns": columns}
