"""What the writer tests write: named cases of data in the exact numpy forms idv.read gives
back, and the check that a file holds them.

Because the data is already in read form, a round trip is checked against the input itself.
write_spec.py turns the same data into an oracle write-spec, so ML.NET can write it too.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import idv
from expected import EPOCH_TICKS, TICKS_PER_MINUTE, assert_arrays_equal, assert_column_equal, \
    column_expected

sp = pytest.importorskip("scipy.sparse")

DT = np.dtype("datetime64[100ns]")
TS = np.dtype("timedelta64[100ns]")
DTO = idv.types.DATETIMEOFFSET_DTYPE
ROWID = idv.types.ROWID_DTYPE
MAX_TICKS = 3155378975999999999


def obj(values):
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


def ticks_to_dt(ticks):
    return (np.asarray(ticks, np.int64) - EPOCH_TICKS).view(DT)


def dto(clock_ticks, minutes):
    out = np.zeros(len(minutes), DTO)
    m = np.asarray(minutes, np.int64)
    out["utc"] = (np.asarray(clock_ticks, np.int64) - m * TICKS_PER_MINUTE - EPOCH_TICKS).view(DT)
    out["offset_minutes"] = m
    return out


def rowid(values):
    out = np.zeros(len(values), ROWID)
    out["low"] = [v & 0xFFFFFFFFFFFFFFFF for v in values]
    out["high"] = [v >> 64 for v in values]
    return out


# ---- the named cases -------------------------------------------------------------------------

def numeric():
    f32 = np.array([0, 1.5, -2.25, np.nan, np.inf, -np.inf, -0.0, 1e-45, 3.4028235e38,
                    np.float32(0.1), 16777217, -1, 2, 3], dtype=np.float32)
    f64 = np.array([0, 1.5, -2.25, np.nan, np.inf, -np.inf, -0.0, 5e-324, 1.7976931348623157e308,
                    0.1, 2**53 + 1, -1, 2, 1 / 3])
    data = {"R4": f32, "R8": f64}
    for dt in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64):
        info = np.iinfo(dt)
        vals = [0, 1, info.max, info.min, info.max - 1, info.min + 1, 7, 42, 100, 3, 5, 9, 11,
                int(info.max // 2)]
        data[np.dtype(dt).name] = np.array(vals, dtype=dt)
    return {"data": data}


def scalars_misc():
    n = 21
    text = obj(["", "a", "héllo", "日本語", "😀 emoji", "tab\tnew\nline", "nul\x00x", "x" * 1000,
                "ö", "surrogate 😀😀", "Ω", "", "z", "yy", "é" * 50, "last", "mixed aé日😀",
                "ascii", "\u20ac", "q", "end"])
    ticks = np.array([0, 1, MAX_TICKS, 630822816000000000, 637134336000000000] + [
        637134336000000000 + i * 36000000000 for i in range(n - 5)], np.int64)
    spans = np.array([0, 1, -1, 2**63 - 1, -(2**63) + 1, 864000000000] + list(range(n - 6)),
                     np.int64)
    minutes = np.array([0, 60, -60, 840, -840, 330, -210] + [15 * i for i in range(n - 7)])
    clock = np.array([637134336000000000 + i * 10**9 for i in range(n)], np.int64)
    rid = [0, 1, 2**64 - 1, 2**64, 2**128 - 1, 12345678901234567890123456789] + list(range(n - 6))
    return {"data": {
        "Bool": (np.arange(n) % 3 == 0) | (np.arange(n) == 20),
        "Text": text,
        "DateTime": ticks_to_dt(ticks),
        "TimeSpan": spans.view(TS),
        "DTO": dto(clock, minutes),
        "RowId": rowid(rid),
    }}


def keys():
    data = {
        "K1": np.array([0, 1, 2, 3, 0, 3, 1, 2], np.uint8),
        "K2": np.array([0, 1, 2, 300, 65535, 5, 6, 7], np.uint16),
        "K4": np.array([0, 1, 2, 3, 4, 5, 6, 7], np.uint32),
        "K8": np.array([0, 1, 2**64 - 1, 3, 4, 5, 6, 7], np.uint64),
        "KF": np.array([1, 2, 1, 2, 0, 0, 1, 2], np.uint32),
    }
    types = {"K1": idv.Key(idv.Byte, 3), "K2": idv.Key(idv.UInt16, 65535),
             "K4": idv.Key(idv.UInt32, 7), "K8": idv.Key(idv.UInt64, 2**64 - 1),
             "KF": idv.Key(idv.UInt32, 2)}
    metadata = {"K1": {"KeyValues": ["red", "green", "blue"]},
                "K4": {"KeyValues": (idv.Vector(idv.Text, 7), list("abcdefg"))},
                "KF": {"KeyValues": np.array([0.5, 1.5], np.float32)}}
    return {"data": data, "types": types, "metadata": metadata}


def vectors_fixed():
    n = 6
    r = np.arange(n)
    data = {
        "R4": (np.arange(n * 4, dtype=np.float32) / 3).reshape(n, 4),
        "R8": np.arange(n * 3, dtype=np.float64).reshape(n, 3) - 0.5,
        "I4": np.arange(n * 2, dtype=np.int32).reshape(n, 2) * -7,
        "U1": (np.arange(n * 5) % 256).astype(np.uint8).reshape(n, 5),
        "I8": np.arange(n, dtype=np.int64).reshape(n, 1) * 2**40,
        "Txt": obj([f"r{i}c{j}" + "é" * j for i in range(n) for j in range(3)]).reshape(n, 3),
        "Bool": (np.arange(n * 11) % 5 == 0).reshape(n, 11),
        "Key": (np.arange(n * 3) % 5).astype(np.uint32).reshape(n, 3),
        "Dt": ticks_to_dt(637134336000000000 + np.arange(n * 2) * 10**7).reshape(n, 2),
        "Ts": (np.arange(n * 2, dtype=np.int64) * 10**6).view(TS).reshape(n, 2),
        "M23": np.arange(n * 6, dtype=np.int32).reshape(n, 2, 3),
    }
    types = {"Key": idv.Vector(idv.Key(idv.UInt32, 4), 3)}
    metadata = {"R4": {"SlotNames": ["a", "b", "c", "d"]},
                "Txt": {"SlotNames": obj(["x", "y", "z"])}}
    del r
    return {"data": data, "types": types, "metadata": metadata}


def vectors_variable():
    rows = [[1.0, 2.0], [], [3.0], [4.0, 5.0, 6.0], [], [7.0]]
    return {"data": {
        "Var": idv.Ragged.from_list(rows, dtype=np.float32),
        "Equal": idv.Ragged.from_list([[1, 2], [3, 4], [5, 6], [7, 8], [9, 10], [11, 12]],
                                      dtype=np.int32),
        "Empty": idv.Ragged.from_list([[]] * 6, dtype=np.float64),
        "Text": idv.Ragged(obj(["a", "bé", "", "日本", "c", "d", "e"]), [0, 2, 2, 3, 5, 6, 7]),
        "Bool": idv.Ragged.from_list([[True], [False, True], [], [True] * 17, [False], [True]],
                                     dtype=bool),
        "D04": idv.Ragged(np.arange(16, dtype=np.int32), [0, 4, 4, 8, 8, 12, 16]),
    }, "types": {"D04": idv.Vector(idv.Int32, 0, 4)}}


def csr(dense, dtype=None):
    m = sp.csr_matrix(np.asarray(dense, dtype=dtype))
    m.sort_indices()
    return m


def vectors_sparse():
    a = np.zeros((6, 8), np.float32)
    a[0, [1, 5]] = [1.5, -2]
    a[2] = np.arange(1, 9)          # a full row: written dense
    a[3, 7] = 3
    a[5, 0] = 4                      # rows 1 and 4 all zero: sparse with count 0
    long = sp.csr_matrix((np.array([1.0, 2.0, 3.0]), np.array([0, 500, 999]),
                          np.array([0, 1, 1, 2, 2, 3, 3])), shape=(6, 1000))
    keys = sp.csr_matrix((np.array([1, 2, 3], np.uint32), np.array([0, 2, 1]),
                          np.array([0, 1, 1, 2, 2, 3, 3])), shape=(6, 3))
    var = sp.csr_matrix((np.array([5, 6], np.float64), np.array([1, 2]),
                         np.array([0, 0, 1, 1, 2, 2, 2])), shape=(6, 4))
    explicit_zero = sp.csr_matrix((np.array([0.0, 1.0]), np.array([0, 2]),
                                   np.array([0, 1, 1, 2, 2, 2, 2])), shape=(6, 3))
    return {"data": {"S": csr(a), "Long": long, "Keys": keys, "VarSparse": var,
                     "Zero": explicit_zero,
                     "Bools": csr(np.eye(6, 3, dtype=bool))},
            "types": {"Keys": idv.Vector(idv.Key(idv.UInt32, 3), 3),
                      "VarSparse": idv.Vector(idv.Double)}}


def sparse_items():
    """Sparse vectors of the non-numeric item types, through idv.Sparse (CSR of any items)."""
    return {"data": {
        "Txt": idv.Sparse(obj(["a", "é", "", "日本😀", "z", "q"]), [0, 3, 5, 1, 0, 4],
                          [0, 2, 3, 3, 4, 6], 6),
        "TxtVar": idv.Sparse(obj(["x", "y", "w", "v"]), [2, 0, 1, 0],
                             [0, 1, 1, 3, 4, 4], [3, 0, 2, 1, 5]),      # row 2 full: dense
        "Dt": idv.Sparse(ticks_to_dt([637134336000000000, 1, MAX_TICKS]), [1, 0, 2],
                         [0, 1, 1, 2, 3, 3], 3),
        "Ts": idv.Sparse(np.array([5, -7], np.int64).view(TS), [0, 3], [0, 0, 1, 1, 1, 2], 4),
        "Dto": idv.Sparse(dto([637134336000000000, 637134336000000001], [60, -840]), [2, 0],
                          [0, 1, 1, 1, 2, 2], 3),
        "Rid": idv.Sparse(rowid([2**64 + 5, 7]), [1, 0], [0, 0, 1, 1, 2, 2], 2),
        "Key": idv.Sparse(np.array([3, 1, 2], np.uint16), [0, 2, 1], [0, 2, 2, 2, 3, 3], 3),
        "Bool": idv.Sparse(np.array([True, False, True]), [4, 0, 9], [0, 1, 2, 2, 3, 3], 10),
    }, "types": {"Key": idv.Vector(idv.Key(idv.UInt16, 3), 3)},
        "metadata": {"Txt": {"Names": (idv.Vector(idv.Text, 6),
                                       idv.Sparse(obj(["first", "last"]), [0, 5], [0, 2], 6))}}}


def vectors_misc():
    n = 5
    return {"data": {
        "DTO": dto(637134336000000000 + np.arange(n * 2) * 10**8,
                   np.arange(n * 2) * 30 - 120).reshape(n, 2),
        "Rid": rowid([i * 2**64 + i for i in range(n * 2)]).reshape(n, 2),
        "I1": np.arange(n * 3, dtype=np.int8).reshape(n, 3) - 7,
        "U8": np.arange(n * 2, dtype=np.uint64).reshape(n, 2) + np.uint64(2**63),
        "KeyVar": idv.Ragged(np.array([1, 2, 0, 3, 2], np.uint8), [0, 2, 2, 3, 5, 5]),
        "TxtSlots": obj(["p", "q", "r", "s", "t", "u", "v", "w", "x", "y"]).reshape(n, 2),
    }, "types": {"KeyVar": idv.Vector(idv.Key(idv.Byte, 3))},
        "metadata": {"KeyVar": {"KeyValues": ["one", "two", "three"]},
                     "TxtSlots": {"SlotNames": ["first", "second"]}}}


def annotations():
    n = 3
    return {"data": {"A": np.arange(n, dtype=np.int32), "B": np.ones(n, np.float32)},
            "metadata": {
                "A": {"IsNormalized": True,
                      "MyFloat": np.float32(1.25),
                      "MyDouble": 2.5,
                      "MyInt": (idv.Int32, -7),
                      "MyLong": 2**40,
                      "MyText": "hello é",
                      "MyKey": (idv.Key(idv.UInt32, 2**31 - 1), 1),
                      "MyDate": (idv.DateTime, ticks_to_dt([637134336000000000])[0]),
                      "MyIntVec": np.array([1, 2, 3], np.int32),
                      "MyFloatVec": (idv.Vector(idv.Single, 4), [0.5, 0, 0, 1]),
                      "MySparse": (idv.Vector(idv.Double, 6),
                                   sp.csr_matrix(([7.0], [4], [0, 1]), shape=(1, 6))),
                      "MyKeyVec": (idv.Vector(idv.Key(idv.Byte, 4), 3), [1, 0, 4]),
                      "MyVarVec": (idv.Vector(idv.Int64), [5, 6]),
                      "CategoricalSlotRanges": np.array([[0, 1], [2, 3]], np.int32)},
                "B": {"ScoreColumnKind": "BinaryClassification",
                      "IsUserVisible": (idv.Boolean, False)}}}


def empty_rows():
    return {"data": {"S": np.zeros(0, np.float32), "T": obj([]), "B": np.zeros(0, bool),
                     "K": np.zeros(0, np.uint32), "V": np.zeros((0, 3), np.float64)},
            "types": {"K": idv.Key(idv.UInt32, 4)},
            "metadata": {"K": {"KeyValues": ["a", "b", "c", "d"]},
                         "V": {"SlotNames": ["x", "y", "z"]}}}


def multiblock():
    n = 20000
    r = np.arange(n)
    return {"data": {"I": r.astype(np.int32), "F": (r * 0.25).astype(np.float32),
                     "T": obj([f"row {i}" for i in range(n)]), "B": r % 3 == 0}}


def noise():
    """Random numbers (libdeflate's noise rule: level 1), one column with a block of zeros
    (level 6 again for that block)."""
    n = 20000
    g = np.random.default_rng(7)
    f = g.standard_normal(n).astype(np.float32)
    then = f.copy()
    then[8192:16384] = 0
    return {"data": {"F": f, "D": g.standard_normal(n), "Then": then}}


def mixed(n=100):
    r = np.arange(n)
    return {"data": {
        "Id": r.astype(np.int32), "F": (r / 7).astype(np.float32), "D": r / 3,
        "B": r % 4 == 1, "Txt": obj(["t%dé" % i * (i % 3) for i in range(n)]),
        "Key": (r % 8).astype(np.uint32),
        "Vec": csr(np.where(r[:, None] % 3 == 0, 0, r[:, None] + np.arange(4)).astype(np.float32)),
        "Var": idv.Ragged.from_list([list(range(i % 4)) for i in range(n)], dtype=np.int32),
        "Dt": ticks_to_dt(637134336000000000 + r * 36000000000),
    }, "types": {"Key": idv.Key(idv.UInt32, 7), "Vec": idv.Vector(idv.Single, 4)},
        "metadata": {"Key": {"KeyValues": [f"k{i}" for i in range(7)]}}}


def smallblocks():
    f = mixed()
    f["options"] = {"rows_per_block": 7}
    f["oracle_options"] = ["--max-rows-per-block", "7"]
    return f


def maxbytes():
    # every row has the same size estimate, so ML.NET's shuffled estimate gives the same answer
    n = 50
    r = np.arange(n)
    return {"data": {"I": r.astype(np.int32), "D": r / 2, "B": r % 2 == 0,
                     "T": obj([f"{i:04d}" for i in r]),
                     "V": np.ones((n, 3), np.float32)},
            "options": {"max_bytes_per_block": 300},
            "oracle_options": ["--max-bytes-per-block", "300"]}


# name -> builder of dict(data, types, metadata, options, oracle_options)
CASES = {
    "numeric": numeric, "scalars_misc": scalars_misc, "keys": keys,
    "vectors_fixed": vectors_fixed, "vectors_variable": vectors_variable,
    "vectors_sparse": vectors_sparse, "sparse_items": sparse_items,
    "vectors_misc": vectors_misc,
    "annotations": annotations, "empty_rows": empty_rows, "multiblock": multiblock,
    "noise": noise, "mixed": mixed, "smallblocks": smallblocks, "maxbytes": maxbytes,
}
COMPRESSIONS = ("none", "deflate")


def write_case(name, path, compression, backend="zlib", checksums=False):
    """Write case `name`; zlib level 6 without checksums and statistics by default: the mode
    whose bytes equal ML.NET's (`checksums=True` adds both)."""
    fx = CASES[name]()
    idv.write(path, fx["data"], types=fx.get("types"), metadata=fx.get("metadata"),
              compression=compression, backend=backend, checksums=checksums,
              statistics=checksums,
              **fx.get("options", {}))
    return fx


# ---- what a file written from a case reads back ----------------------------------------------

def sparse_expected(value, t):
    """What idv reads back for an idv.Sparse (or scipy) column of type t: dense rows with the
    defaults filled in (scipy's own toarray() would turn a stored -0.0 into 0.0)."""
    from write_spec import vector_cells
    return column_expected(t, vector_cells(t.item, value))


def assert_read_equal(got, value, where, t=None):
    """A column read back against the value it was written from (Sparse and scipy values
    densified with ML.NET's defaults)."""
    if isinstance(value, idv.Sparse) or (sp.issparse(value) and t is not None):
        exp = sparse_expected(value, t)
        if isinstance(got, idv.Ragged):
            assert_column_equal(got, exp, where)
        else:
            assert_arrays_equal(got, exp, where)
    elif sp.issparse(value):
        dense = value.toarray()
        assert_arrays_equal(got, dense.reshape(got.shape) if got.ndim == dense.ndim else dense,
                            where)
    elif isinstance(value, idv.Ragged):
        assert isinstance(got, idv.Ragged), where
        assert_arrays_equal(got.offsets, value.offsets, where + " offsets")
        assert_arrays_equal(got.values, value.values, where + " values")
    else:
        assert_arrays_equal(got, np.asarray(value), where)


def check_roundtrip(path, fx):
    """The file at `path`, written from case `fx`, reads back exactly the case's data, types
    and metadata (without a warning)."""
    data = fx["data"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with idv.open(path) as f:
            assert f.column_names == list(data)
            assert f.version == "1.1.1.6" and f.header.compatible_version_string == "1.1.1.6"
            types = fx.get("types") or {}
            for col in f.columns:
                value = data[col.name]
                if col.name in types:
                    assert col.type == types[col.name]
                got = col.read()
                if sp.issparse(value) and col.type.is_fixed is False:
                    got = col.read(sparse=True).toarray()
                    assert_arrays_equal(got, value.toarray(), col.name)
                    continue
                assert_read_equal(got, value, f"column {col.name!r}", col.type)
                if sp.issparse(value):
                    m = col.read(sparse=True)
                    assert m.nnz == value.nnz
                    assert_arrays_equal(m.toarray(), value.toarray(), col.name + " sparse")
            meta = fx.get("metadata") or {}
            for name, kinds in meta.items():
                col = f[name]
                assert col.metadata_kinds == list(kinds)
                for kind, v in kinds.items():
                    explicit = isinstance(v, tuple) and isinstance(v[0], idv.DataViewType)
                    if explicit:
                        assert col.metadata_types[kind] == v[0]
                        v = v[1]
                    got = col.metadata[kind]
                    if sp.issparse(v):
                        v = v.toarray().reshape(-1)
                    if isinstance(v, idv.Sparse):
                        v = sparse_expected(v, col.metadata_types[kind]).reshape(-1)
                    if isinstance(got, np.ndarray):
                        exp = np.asarray(v, dtype=got.dtype)
                        assert_arrays_equal(got, exp.reshape(got.shape), f"{name} {kind}")
                    elif isinstance(got, (str, bool)):
                        assert got == v
                    else:
                        assert_arrays_equal(np.asarray([got]), np.asarray([v], dtype=got.dtype),
                                            f"{name} {kind}")
