"""Arrow tables turned back into idv's numpy forms by hand, and checked against ML.NET's values.

Plain pyarrow calls, not idv's converters: what to_arrow, Parquet or Feather give is compared
bit for bit with expected.py's reading of the oracle's JSON.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import idv
from expected import (EPOCH_TICKS, annotation_expected, annotations_by_kind, assert_arrays_equal,
                      assert_column_equal, expected_column, our_type_string, parse_type_string,
                      visible_columns)

pa = pytest.importorskip("pyarrow")

DT100 = np.dtype("datetime64[100ns]")
TS100 = np.dtype("timedelta64[100ns]")


def _times_from_arrow(arr, kind):
    """timestamp / duration (any unit) or int64 .NET ticks -> datetime64 / timedelta64[100ns]."""
    t = arr.type
    if pa.types.is_int64(t):
        v = np.asarray(arr.to_numpy(zero_copy_only=False), np.int64)
        return (v - EPOCH_TICKS).view(DT100) if kind == "M" else v.view(TS100)
    v = np.asarray(arr.cast(pa.int64()).to_numpy(zero_copy_only=False), np.int64)
    if t.unit == "us":
        v = v * 10
    elif t.unit == "ns":
        assert (v % 100 == 0).all()
        v = v // 100
    else:
        raise AssertionError(f"unexpected unit {t.unit}")
    return v.view(DT100) if kind == "M" else v.view(TS100)


def items_from_arrow(item, arr):
    """A flat Arrow array of `item` values in idv's numpy form."""
    name = item.name if not isinstance(item, idv.Key) else "Key"
    if name == "Text":
        out = np.empty(len(arr), object)
        out[:] = arr.to_pylist()
        return out
    if name == "DateTime":
        return _times_from_arrow(arr, "M")
    if name == "TimeSpan":
        return _times_from_arrow(arr, "m")
    if name == "DateTimeOffset":
        assert pa.types.is_struct(arr.type)
        utc = _times_from_arrow(arr.field("utc"), "M")
        out = np.zeros(len(arr), [("utc", DT100), ("offset_minutes", "<i2")])
        out["utc"] = utc
        out["offset_minutes"] = arr.field("offset_minutes").to_numpy()
        return out
    if name == "RowId":
        out = np.zeros(len(arr), [("low", "<u8"), ("high", "<u8")])
        out["low"] = arr.field("low").to_numpy()
        out["high"] = arr.field("high").to_numpy()
        return out
    if name == "Key":
        return np.asarray(arr.to_numpy(zero_copy_only=False)).astype(item.raw.dtype)
    return np.asarray(arr.to_numpy(zero_copy_only=False))


def column_from_arrow(t, chunked, kv_expected=None, exact_dictionary=True):
    """An Arrow column of idv type t in idv's numpy form (Ragged for variable vectors).
    A dictionary column is mapped onto the KeyValues ML.NET reports, by value; with
    `exact_dictionary` its dictionary must also be exactly those KeyValues (to_arrow's; a
    Parquet file keeps only the values its row groups use)."""
    arr = chunked.combine_chunks() if isinstance(chunked, pa.ChunkedArray) else chunked
    if isinstance(t, idv.Vector):
        if t.is_fixed:
            assert pa.types.is_fixed_size_list(arr.type) and arr.type.list_size == t.size
            return items_from_arrow(t.item, arr.flatten()).reshape((len(arr),) + t.dims)
        assert pa.types.is_list(arr.type)
        offsets = np.asarray(arr.offsets.to_numpy(), np.int64)
        return idv.Ragged(items_from_arrow(t.item, arr.flatten()), offsets - offsets[0])
    if pa.types.is_dictionary(arr.type):
        assert isinstance(t, idv.Key) and kv_expected is not None
        kv = annotation_expected(kv_expected)
        if exact_dictionary:
            assert_arrays_equal(items_from_arrow(_kv_item(kv_expected), arr.dictionary), kv,
                                "dictionary")
        values = items_from_arrow(_kv_item(kv_expected), arr.dictionary).tolist()
        position = {v: i + 1 for i, v in enumerate(kv.tolist())}
        idx = arr.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        return np.array([position[values[i]] if i >= 0 else 0 for i in idx], t.raw.dtype)
    if isinstance(t, idv.Key) and not pa.types.is_integer(arr.type):
        # a key's values decoded from their dictionary (Parquet does so for non-strings)
        assert kv_expected is not None and not exact_dictionary
        kv = annotation_expected(kv_expected).tolist()
        position = {v: i + 1 for i, v in enumerate(kv)}
        values = items_from_arrow(_kv_item(kv_expected), arr)
        valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), bool)
        return np.array([position[v] if ok else 0 for v, ok in zip(values.tolist(), valid)],
                        t.raw.dtype)
    return items_from_arrow(t, arr)


def _kv_item(ann):
    return parse_type_string(ann["type_string"]).item


def check_arrow_table(table, dump, columns=None, exact_dictionary=True):
    """Every visible column of an Arrow table (from to_arrow / Parquet / Feather) against
    ML.NET's values, with the idv.type / idv.metadata field metadata."""
    dcols = visible_columns(dump)
    if columns is not None:
        dcols = [c for c in dcols if c["name"] in columns]
    assert table.column_names == [c["name"] for c in dcols]
    assert table.num_rows == dump["row_count"]
    for i, dcol in enumerate(dcols):
        where = f"column {dcol['name']!r}"
        field = table.schema.field(i)
        t = parse_type_string(dcol["type_string"])
        meta = field.metadata or {}
        assert meta[b"idv.type"].decode() == our_type_string(dcol["type_string"]), where
        anns = annotations_by_kind(dcol)
        if anns:
            got = json.loads(meta[b"idv.metadata"])
            assert [e["kind"] for e in got] == list(anns), where
            for e in got:
                a = anns[e["kind"]]
                assert e["type"] == our_type_string(a["type_string"]), where
        else:
            assert b"idv.metadata" not in meta, where
        kv = anns.get("KeyValues")
        actual = column_from_arrow(t, table.column(i), kv, exact_dictionary)
        assert_column_equal(actual, expected_column(dump, dcol["index"]), where)
