"""Read everything a user can read from a file, and compare two such reads.

The corrupt-file tests judge a file by ``read_all``: every column dense, sparse, sliced and by
block, all metadata and the schema. ``expect_error`` asserts that doing so fails with
``idv.IdvFormatError`` and the expected message, from bytes, a file object or a path.
"""
from __future__ import annotations

import io
import re
import warnings

import numpy as np
import pytest

import idv

def _is_sparse_readable(t):
    return isinstance(t, idv.Vector) and (isinstance(t.item, idv.Key)
                                          or t.item.dtype.kind in "biuf")


def read_all(source, backend=None, threads=None, slices=True):
    """Open and read everything a user can: every column (dense, sparse, sliced, by block),
    all metadata and the schema. Returns {column index: (dense values, metadata)}."""
    with idv.open(source, backend=backend, threads=threads) as f:
        str(f.schema)
        out = {}
        for c in f.columns:
            meta = c.metadata
            if not c.readable:
                out[c.index] = (None, meta)
                continue
            values = c.read()
            if _is_sparse_readable(c.type):
                c.read(sparse=True)
            if slices and c.num_rows:
                c[c.num_rows // 2]
                c[1:c.num_rows - 1]
                c[::3]
                for _ in c.iter_blocks():
                    pass
            out[c.index] = (values, meta)
        f.read()
        return out


def read_quiet(source, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", idv.IdvWarning)
        return read_all(source, **kw)


def same(a, b) -> bool:
    """Deep equality of read_all results (NaN-aware, arrays, Ragged, dicts)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, idv.Ragged):
        return isinstance(b, idv.Ragged) and same(a.offsets, b.offsets) \
            and same(a.values, b.values)
    if isinstance(a, np.ndarray):
        if not isinstance(b, np.ndarray) or a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype.kind in "fc":
            return np.array_equal(a, b, equal_nan=True)
        if a.dtype.names:
            return all(same(a[n], b[n]) for n in a.dtype.names)
        return np.array_equal(a, b)
    if isinstance(a, float) and isinstance(b, float) and a != a:
        return b != b
    return type(a) is type(b) and a == b


def prefix_same(a, b) -> bool:
    """Columns that exist in both agree on the rows that exist in both."""
    for k in a.keys() & b.keys():
        va, vb = a[k][0], b[k][0]
        if va is None or vb is None:
            continue
        n = min(len(va), len(vb))
        if not same(va[:n], vb[:n]):
            return False
    return True


SOURCES = ["bytes", "fileobj", "path"]


def as_source(kind, data, tmp_path):
    if kind == "bytes":
        return data
    if kind == "fileobj":
        return io.BytesIO(data)
    p = tmp_path / "crafted.idv"
    p.write_bytes(data)
    return str(p)


def expect_error(data, pattern, tmp_path=None, source="bytes", exact=idv.IdvFormatError,
                 **kw):
    """Reading everything fails with IdvFormatError (exactly `exact`) matching `pattern`."""
    src = as_source(source, data, tmp_path)
    with pytest.raises(idv.IdvFormatError) as ei:
        read_quiet(src, **kw)
    assert type(ei.value) is exact, repr(ei.value)
    assert re.search(pattern, str(ei.value)), f"{pattern!r} not in {str(ei.value)!r}"
    return str(ei.value)
