"""pandas, Arrow and scipy.sparse against what ML.NET reads.

Ground truth is ML.NET's view of each file: the sidecars of the sample fixtures
(shared/oracle/fixtures-sample) and, where the oracle runs, ML.NET's dump of files written
here. Arrow tables and DataFrames are turned back into idv's numpy forms by hand (plain
pyarrow / pandas calls, not idv's converters: tests/arrow_check.py and this file) and compared
bit for bit with tests/expected.py's reading of the JSON.
"""
from __future__ import annotations

import datetime as dt
import io
import re
import tracemalloc

import numpy as np
import pytest

import dumpcheck as dc
import idv
from arrow_check import DT100, TS100, check_arrow_table
from dumpcheck import check_idv_against_dump
from expected import (EPOCH_TICKS, TICKS_PER_MINUTE, annotation_expected, annotations_by_kind,
                      assert_arrays_equal, expected_column, has_sub_microsecond,
                      parse_type_string, visible_columns)
from reference import fixture, sample_params, sidecar

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")
sp = pytest.importorskip("scipy.sparse")

# ---------------------------------------------------------------------------------------------
# to_arrow
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sample_params())
def test_to_arrow_ticks_equals_mlnet(name):
    """datetime='ticks' is exact for every type: every value equals ML.NET's."""
    with dc.open_quietly(fixture(name)) as f:
        table = idv.to_arrow(f, datetime="ticks")
    check_arrow_table(table, sidecar(name))


def _time_ticks(dump, dcol):
    """A time column's 100-ns counts as ML.NET dumped them (DateTime: from 1970), implicit
    zeros of sparse rows included."""
    out = []
    for row in dump["rows"]:
        cell = row[dcol["index"]]
        if isinstance(cell, dict) and "values" in cell:
            items = cell["values"]
            if len(items) < cell.get("length", len(items)):
                items = items + [0]
        else:
            items = cell if isinstance(cell, list) else [cell]
        out += [int(c["ticks"] if isinstance(c, dict) else c) for c in items]
    return [t - EPOCH_TICKS if dcol["item_type"] == "DateTime" else t for t in out]


@pytest.mark.parametrize("name", sample_params())
def test_to_arrow_default_chooses_the_finest_exact_unit(name):
    """datetime='auto' (the default): per DateTime / TimeSpan column nanoseconds when all its
    values fit them, else microseconds, flooring with one IdvWarning per column that counts the
    values changed when some have 100-ns ticks; worked out here from ML.NET's own dump."""
    import warnings
    dump = sidecar(name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = idv.to_arrow(fixture(name))
    warned = {}
    for w in caught:
        m = re.match(r"column '([^']*)': (\d+) ", str(w.message))
        if issubclass(w.category, idv.IdvWarning) and m:
            warned[m.group(1)] = int(m.group(2))
    expected = {}
    for i, dcol in enumerate(visible_columns(dump)):
        if dcol["item_type"] not in ("DateTime", "TimeSpan"):
            continue
        v = _time_ticks(dump, dcol)
        unit = "ns" if all(-(2**63 - 1) // 100 <= t <= (2**63 - 1) // 100 for t in v) else "us"
        assert f"[{unit}" in str(table.schema.field(i).type), (dcol["name"], unit)
        changed = sum(t % 10 != 0 for t in v) if unit == "us" else 0
        if changed:
            expected[dcol["name"]] = changed
    assert {k: v for k, v in warned.items() if k in expected or k not in
            [c["name"] for c in visible_columns(dump) if c["item_type"] == "DateTimeOffset"]} \
        == expected
    if not warned:
        check_arrow_table(table, dump)


@pytest.mark.parametrize("name", sample_params())
def test_to_arrow_in_microseconds(name):
    """datetime='us': timestamp[us] / duration[us], exact where ML.NET's ticks are whole
    microseconds; sub-microsecond ticks raise (safe) or floor (safe=False)."""
    dump = sidecar(name)
    path = fixture(name)
    if has_sub_microsecond(dump):
        with pytest.raises(ValueError, match="sub-microsecond ticks"):
            idv.to_arrow(path, datetime="us")
        table = idv.to_arrow(path, datetime="us", safe=False)
        for i, dcol in enumerate(visible_columns(dump)):
            if dcol["item_type"] != "DateTime" or dcol["is_vector"]:
                continue
            got = table.column(i).combine_chunks().cast(pa.int64()).to_numpy()
            ticks = np.array([int(r[dcol["index"]]) for r in dump["rows"]], dtype=object)
            want = np.array([(t - EPOCH_TICKS) // 10 for t in ticks], np.int64)
            assert np.array_equal(got, want), dcol["name"]
        return
    table = idv.to_arrow(path, datetime="us")
    for field in table.schema:
        assert "timestamp[ns" not in str(field.type) and "duration[ns" not in str(field.type)
    check_arrow_table(table, dump)


def test_arrow_types_of_each_kind():
    path = fixture("mixed_default")
    schema = idv.to_arrow(path).schema
    assert schema.field("Id").type == pa.int32()
    assert schema.field("F32").type == pa.float32()
    assert schema.field("Txt").type == pa.string()
    assert schema.field("B").type == pa.bool_()
    assert schema.field("Key").type == pa.dictionary(pa.int32(), pa.string())
    assert schema.field("Vec").type == pa.list_(pa.float32(), 4)
    assert schema.field("Var").type == pa.list_(pa.int16())
    assert schema.field("DT").type == pa.timestamp("ns")    # all its values fit ns
    assert idv.to_arrow(path, datetime="us").schema.field("DT").type == pa.timestamp("us")
    from idv._interop.arrow import arrow_schema
    s2 = arrow_schema(fixture("scalars_datetime"), columns=["TS"], datetime="ns")
    assert s2.field("TS").type == pa.duration("ns")
    s3 = idv.to_arrow(fixture("vector_multidim"), columns=["Mat2x3"]).schema
    # multi-dimensional: flattened fixed_size_list, the dims in idv.type
    assert s3.field(0).type == pa.list_(pa.float32(), 6)
    assert s3.field(0).metadata[b"idv.type"] == b"Vector<Single, 2, 3>"
    keys = idv.to_arrow(fixture("keys")).schema
    assert keys.field("KeyU1").type == pa.uint8()           # no KeyValues: the raw key
    assert keys.field("KeyWithText").type == pa.dictionary(pa.int32(), pa.string())
    # Single KeyValues holding NaN cannot be a dictionary: raw ints, KeyValues kept as metadata
    assert keys.field("KeyWithNum").type == pa.uint32()


def test_to_arrow_ns_out_of_range_raises():
    with pytest.raises(ValueError, match="outside what nanoseconds"):
        idv.to_arrow(fixture("scalars_datetime"), columns=["DT"], datetime="ns")
    with pytest.raises(ValueError, match="datetime must be one of"):
        idv.to_arrow(fixture("scalars_datetime"), datetime="ms")


def test_to_arrow_sparse_columns_dense():
    """Sparse vector columns come out dense, with ML.NET's implicit zeros filled in."""
    name = "vectors_sparse"
    table = idv.to_arrow(fixture(name))
    check_arrow_table(table, sidecar(name))
    assert table.schema.field("SparseF64Big").type == pa.list_(pa.float64(), 1000)


# ---------------------------------------------------------------------------------------------
# from_arrow: back to the same .idv
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sample_params(lambda n: n != "no_columns"))
def test_arrow_round_trip_exact(name, tmp_path):
    """to_arrow -> from_arrow -> idv.write gives ML.NET's types, annotations and values."""
    table = idv.to_arrow(fixture(name), datetime="ticks")
    out = tmp_path / "back.idv"
    idv.write(out, table)
    check_idv_against_dump(out, sidecar(name))


def test_arrow_round_trip_via_record_batch(tmp_path):
    name = "mixed_default"
    table = idv.to_arrow(fixture(name))
    batch = table.combine_chunks().to_batches()[0]
    out = tmp_path / "b.idv"
    idv.write(out, batch)
    check_idv_against_dump(out, sidecar(name))


def test_from_arrow_plain_table():
    """Tables from elsewhere (no idv metadata) take their types from Arrow."""
    paris = pa.array(np.array(["2020-01-01T11:00", "2020-07-01T10:00"], "datetime64[us]")) \
        .cast(pa.timestamp("us", tz="Europe/Paris"))
    table = pa.table({
        "i8": pa.array([1, -2], pa.int8()), "u64": pa.array([2**64 - 1, 0], pa.uint64()),
        "h": pa.array(np.array([1.5, 2], np.float16)), "f": pa.array([1.5, None]),
        "b": [True, False], "s": ["x", "é"], "ls": pa.array(["a", "b"], pa.large_string()),
        "ts": pa.array(np.array(["0001-01-01", "9999-12-31T23:59:59.999999"], "datetime64[us]")),
        "date": pa.array([dt.date(2020, 1, 2), dt.date(1, 1, 1)]),
        "dur": pa.array(np.array([1, -5], "timedelta64[ms]")),
        "tod": pa.array([dt.time(1, 2, 3), dt.time(0, 0)]),
        "paris": paris,
        "cat": pa.array(["b", None]).dictionary_encode(),
        "fixed": pa.FixedSizeListArray.from_arrays(pa.array([1, 2, 3, 4], pa.int32()), 2),
        "var": pa.array([[1.5], []], pa.list_(pa.float32())),
        "tensor": pa.ExtensionArray.from_storage(
            pa.fixed_shape_tensor(pa.float64(), [1, 2]),
            pa.FixedSizeListArray.from_arrays(pa.array([1.0, 2, 3, 4]), 2)),
    })
    columns, types, meta = idv.from_arrow(table)
    assert {k: str(v) for k, v in types.items()} == {
        "i8": "SByte", "u64": "UInt64", "h": "Single", "f": "Double", "b": "Boolean",
        "s": "Text", "ls": "Text", "ts": "DateTime", "date": "DateTime", "dur": "TimeSpan",
        "tod": "TimeSpan", "paris": "DateTimeOffset", "cat": "Key<UInt32, 1>",
        "fixed": "Vector<Int32, 2>", "var": "Vector<Single>", "tensor": "Vector<Double, 1, 2>"}
    assert meta["cat"]["KeyValues"][1].tolist() == ["b"]
    # the time columns keep the Arrow type they had (time64 has no DateTime or TimeSpan of
    # its own to come back as)
    assert {n: m for n, m in meta.items() if n != "cat"} == {
        n: {"idv.SourceType": (idv.Text, text)} for n, text in (
            ("ts", "timestamp[us]"), ("date", "date32[day]"), ("dur", "duration[ms]"),
            ("paris", "timestamp[us, tz=Europe/Paris]"))}
    buf = io.BytesIO()
    idv.write(buf, table)
    r = idv.read(buf.getvalue())
    assert np.isnan(r["f"][1]) and r["f"][0] == 1.5          # null float -> NaN
    assert r["cat"].tolist() == [1, 0]                        # null key -> 0 (missing)
    assert r["u64"].tolist() == [2**64 - 1, 0]
    assert r["ts"].view(np.int64).tolist() == [-EPOCH_TICKS,
                                               3155378975999999990 - EPOCH_TICKS]
    assert r["date"].view(np.int64)[1] == -EPOCH_TICKS
    assert r["dur"].view(np.int64).tolist() == [10000, -50000]
    assert r["tod"].view(np.int64).tolist() == [(3600 + 120 + 3) * 10**7, 0]
    # Paris: +60 in winter, +120 in summer; utc instants exact
    assert r["paris"]["offset_minutes"].tolist() == [60, 120]
    assert r["paris"]["utc"].astype("datetime64[us]").tolist() == \
        [dt.datetime(2020, 1, 1, 11), dt.datetime(2020, 7, 1, 10)]
    assert r["fixed"].tolist() == [[1, 2], [3, 4]]
    assert r["tensor"].shape == (2, 1, 2) and r["tensor"].reshape(-1).tolist() == [1, 2, 3, 4]
    assert [x.tolist() for x in r["var"]] == [[1.5], []]


@pytest.mark.parametrize("table,match", [
    (lambda: pa.table({"x": pa.array([1, None])}), "row 1: null"),
    (lambda: pa.table({"x": pa.array(["a", None])}), "row 1: null"),
    (lambda: pa.table({"x": pa.array([[1], None])}), "row 1: a missing vector"),
    (lambda: pa.table({"x": pa.array([None, None])}), "only missing values"),
    (lambda: pa.table({"x": pa.array([1], pa.decimal128(5, 2))}), "cast it to float64"),
    (lambda: pa.table({"x": pa.array([[[1]]])}), "nested lists"),
    (lambda: pa.table({"x": pa.array([], pa.string()).dictionary_encode()}), "empty dictionary"),
])
def test_from_arrow_refuses(table, match):
    with pytest.raises((ValueError, TypeError), match=match):
        idv.write(io.BytesIO(), table())


def test_from_arrow_ignores_stale_metadata():
    """idv.type that no longer fits the Arrow type (a cast since) is not trusted."""
    table = idv.to_arrow(fixture("mixed_default"), columns=["F32", "Key"])
    f64 = table.column(0).cast(pa.float64())
    field = table.schema.field(0).with_type(pa.float64())
    stale = pa.Table.from_arrays([f64, table.column(1)],
                                 schema=pa.schema([field, table.schema.field(1)]))
    _, types, meta = idv.from_arrow(stale)
    assert types["F32"] == idv.Double              # not Single: that would lose precision
    assert types["Key"] == idv.Key(idv.UInt32, 7) and "KeyValues" in meta["Key"]


def test_dictionary_chunks_merged_by_value():
    """Chunks with different dictionaries: KeyValues = all values in order of first
    appearance, raw keys mapped by value."""
    c1 = pa.array(["b", "a", None]).dictionary_encode()
    c2 = pa.array(["c", "a"]).dictionary_encode()
    table = pa.Table.from_arrays([pa.chunked_array([c1, c2])], names=["k"])
    columns, types, meta = idv.from_arrow(table)
    assert types["k"] == idv.Key(idv.UInt32, 3)
    assert meta["k"]["KeyValues"][1].tolist() == ["b", "a", "c"]
    assert columns[0][1].tolist() == [1, 2, 0, 3, 2]


def test_labels_given_anew_keep_each_row_its_label_whatever_the_writer(tmp_path):
    """A Categorical or dictionary (labels b, a) written with metadata= KeyValues [a, b, z]:
    every writer maps it onto the given labels by value, as idv.Writer does, so each row keeps
    its label. idv.write, its stream path, partition_by and Dask's to_idv kept the data's own
    codes under the new labels: b read back as a, a as b. A label the given ones lack is
    refused, naming its row."""
    pd = pytest.importorskip("pandas", reason="a pandas Categorical")
    types = {"c": idv.Key(idv.UInt32, count=3)}
    meta = {"c": {"KeyValues": ["a", "b", "z"]}}
    frame = pd.DataFrame({"c": pd.Categorical(["b", "a", None], categories=["b", "a"])})
    table = pa.table({"c": pa.DictionaryArray.from_arrays(pa.array([0, 1, None], pa.int32()),
                                                          pa.array(["b", "a"]))})
    want = ["b", "a", None]
    writes = {"frame": lambda p: idv.write(p, frame, types=types, metadata=meta),
              "table": lambda p: idv.write(p, table, types=types, metadata=meta),
              "reader": lambda p: idv.write(p, table.to_reader(), types=types, metadata=meta)}
    for name, write in writes.items():
        write(tmp_path / "k.idv")
        got = idv.to_arrow(tmp_path / "k.idv").column("c")
        assert got.to_pylist() == want, name
        assert got.type.value_type == pa.string()
    parts = idv.write(tmp_path / "parts", frame.assign(g=1), partition_by="g", types=types,
                      metadata=meta)
    assert idv.to_arrow(parts[0]).column("c").to_pylist() == want
    dd = pytest.importorskip("dask.dataframe", reason="Dask's to_idv")
    from idv.dask import to_idv
    to_idv(dd.from_pandas(frame, npartitions=1), tmp_path / "d.idv", types=types, metadata=meta)
    assert idv.to_arrow(tmp_path / "d.idv").column("c").to_pylist() == want
    # without types=, the key counts the labels given (it kept the data's count: refused)
    for write in (lambda p: idv.write(p, frame, metadata=meta),
                  lambda p: idv.write(p, table.to_reader(), metadata=meta),
                  lambda p: to_idv(dd.from_pandas(frame, npartitions=1), p, metadata=meta)):
        write(tmp_path / "m.idv")
        with idv.open(tmp_path / "m.idv") as f:
            assert f["c"].type == idv.Key(idv.UInt32, count=3)
        assert idv.to_arrow(tmp_path / "m.idv").column("c").to_pylist() == want
    with pytest.raises(ValueError, match=r"column 'c' row 0: 'b' is not one of the column's "
                                         r"key values \(2 values\)"):
        idv.write(tmp_path / "x.idv", frame, types={"c": idv.Key(idv.UInt32, count=2)},
                  metadata={"c": {"KeyValues": ["a", "z"]}})
    assert not (tmp_path / "x.idv").exists()


# ---------------------------------------------------------------------------------------------
# record_batch_reader
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sample_params(lambda n: n.startswith(("multiblock", "mixed_"))))
def test_record_batches_are_blocks(name):
    dump = sidecar(name)
    path = fixture(name)
    with dc.open_quietly(path) as f:
        blocks = f.columns[0].num_blocks
        rpb = f.columns[0].rows_per_block
        reader = idv.record_batch_reader(f)
        batches = list(reader)
        assert len(batches) == blocks
        assert [b.num_rows for b in batches] == \
            [min(rpb, f.num_rows - i * rpb) for i in range(blocks)]
        assert len(list(f.iter_batches())) == blocks
    check_arrow_table(pa.Table.from_batches(batches, schema=reader.schema), dump)


def test_record_batch_reader_schema_and_closing(tmp_path):
    path = fixture("mixed_smallblocks_deflate")
    reader = idv.record_batch_reader(path, columns=["Key", "Vec"])
    assert reader.schema.names == ["Key", "Vec"]
    assert reader.schema == idv.to_arrow(path, columns=["Key", "Vec"]).schema
    n = sum(b.num_rows for b in reader)
    assert n == 100
    # an IdvFile passed in stays open
    with idv.open(path) as f:
        list(idv.record_batch_reader(f, columns=[0]))
        assert not f.closed


def test_record_batch_reader_bounded_memory(tmp_path, monkeypatch):
    """Peak memory while streaming a multi-block file stays a small fraction of its size:
    a few windows of decoded blocks (here 256 KiB each) at a time."""
    monkeypatch.setattr(idv._scan.scan, "WINDOW_BYTES", 256 << 10)
    n = 600_000
    rng = np.random.default_rng(1)
    path = tmp_path / "big.idv"
    idv.write(path, {"x": rng.random(n), "i": np.arange(n, dtype=np.int64),
                     "v": rng.random((n, 6)).astype(np.float32),
                     "s": np.array([f"row {i % 977}" for i in range(n)], dtype=object)},
              compression="none")
    size = path.stat().st_size
    assert size > 30 << 20
    with idv.open(path) as f:
        blocks = f["x"].num_blocks
        assert blocks > 50
        next(iter(idv.record_batch_reader(f)))       # imports and pools warmed up
        tracemalloc.start()
        try:
            arrow_peak, count, rows = 0, 0, 0
            for batch in idv.record_batch_reader(f):
                count += 1
                rows += batch.num_rows
                arrow_peak = max(arrow_peak, pa.total_allocated_bytes())
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert count == blocks and rows == n
    assert peak < size / 10, f"numpy peak {peak} bytes for a {size}-byte file"
    assert arrow_peak < size / 10, f"Arrow peak {arrow_peak} bytes for a {size}-byte file"


# ---------------------------------------------------------------------------------------------
# to_pandas
# ---------------------------------------------------------------------------------------------

def test_pandas_keys_categorical():
    dump = sidecar("keys")
    df = idv.read_pandas(fixture("keys"))
    cols = {c["name"]: c for c in dump["columns"]}
    # KeyValues -> Categorical: codes = raw - 1, raw 0 -> NaN, categories = KeyValues
    dcol = cols["KeyWithText"]
    s = df["KeyWithText"]
    assert isinstance(s.dtype, pd.CategoricalDtype)
    kv = annotation_expected(annotations_by_kind(dcol)["KeyValues"])
    assert list(s.cat.categories) == list(kv)
    raw = expected_column(dump, dcol["index"]).astype(np.int64)
    assert s.cat.codes.to_numpy().tolist() == (raw - 1).tolist()
    assert s.isna().to_numpy().tolist() == (raw == 0).tolist()
    # no KeyValues: the raw unsigned ints
    for name in ("KeyU4", "KeyU1", "KeyU2", "KeyU8"):
        assert_arrays_equal(df[name].to_numpy(), expected_column(dump, cols[name]["index"]), name)
    # KeyValues with NaN cannot be categories: raw ints (documented)
    assert df["KeyWithNum"].dtype == np.uint32


def test_pandas_mixed_default():
    dump = sidecar("mixed_default")
    df = idv.to_pandas(fixture("mixed_default"))
    cols = {c["name"]: c for c in dump["columns"]}
    slots = annotation_expected(annotations_by_kind(cols["Vec"])["SlotNames"])
    vec_names = [f"Vec.{s}" for s in slots]
    assert list(df.columns) == ["Id", "F32", "F64", "B", "Txt", "Key", *vec_names, "Var", "DT"]
    for name in ("Id", "F32", "F64", "B"):
        assert_arrays_equal(df[name].to_numpy(), expected_column(dump, cols[name]["index"]), name)
    assert df["Txt"].tolist() == expected_column(dump, cols["Txt"]["index"]).tolist()
    vec = expected_column(dump, cols["Vec"]["index"])
    assert_arrays_equal(df[vec_names].to_numpy(), vec, "Vec")
    var = expected_column(dump, cols["Var"]["index"])
    for i, cell in enumerate(df["Var"]):
        assert_arrays_equal(cell, var.row(i), f"Var row {i}")
    assert df["DT"].dtype == np.dtype("datetime64[ns]")
    assert_arrays_equal(df["DT"].to_numpy().astype(DT100),
                        expected_column(dump, cols["DT"]["index"]), "DT")


def test_pandas_vectors_object_and_multidim():
    dump = sidecar("vector_multidim")
    df = idv.to_pandas(fixture("vector_multidim"))
    assert list(df.columns)[:6] == [f"Mat2x3.{i}.{j}" for i in range(2) for j in range(3)]
    mat = expected_column(dump, dump["columns"][0]["index"])
    assert_arrays_equal(df.iloc[:, :6].to_numpy(), mat.reshape(len(mat), 6), "Mat2x3")
    obj = idv.to_pandas(fixture("vector_multidim"), vectors="object")
    assert list(obj.columns) == ["Mat2x3", "VarBy4"] and obj["Mat2x3"].dtype == object
    for i, cell in enumerate(obj["Mat2x3"]):
        assert_arrays_equal(cell, mat[i], f"Mat2x3 row {i}")


def test_pandas_slot_names():
    dump = sidecar("pipeline_featurize_text")
    dcol = next(c for c in dump["columns"] if c["name"] == "ReviewFeatures")
    names = annotation_expected(annotations_by_kind(dcol)["SlotNames"])
    df = idv.to_pandas(fixture("pipeline_featurize_text"), columns=["ReviewFeatures"])
    assert list(df.columns) == [f"ReviewFeatures.{s}" for s in names]
    assert_arrays_equal(df.to_numpy(), expected_column(dump, dcol["index"]), "ReviewFeatures")
    # an empty slot name: that slot is named by its index
    misc = idv.to_pandas(fixture("vectors_misc"), columns=["VecTextSlots"])
    slots = annotation_expected(annotations_by_kind(next(
        c for c in sidecar("vectors_misc")["columns"] if c["name"] == "VecTextSlots"))["SlotNames"])
    assert list(slots) == ["a", "", "c"]
    assert list(misc.columns) == ["VecTextSlots.a", "VecTextSlots.1", "VecTextSlots.c"]
    # no SlotNames: indices
    fixed = idv.to_pandas(fixture("vectors_fixed"), columns=["VecI32"])
    assert list(fixed.columns) == [f"VecI32.{j}" for j in range(4)]


def test_pandas_datetime_rules():
    """scalars_datetime holds 0001-01-01 + 100 ns and DateTime.MaxValue: neither fits
    nanoseconds, and microseconds cannot hold their last tick: 'auto' floors to microseconds
    with a warning counting the values changed, 'exact' refuses, 'ticks' is exact, 'us'
    refuses unless safe=False, which floors."""
    dump = sidecar("scalars_datetime")
    path = fixture("scalars_datetime")
    cols = {c["name"]: c for c in dump["columns"]}
    dt_ticks = [int(r[cols["DT"]["index"]]) for r in dump["rows"]]
    changed = sum(t % 10 != 0 for t in dt_ticks)
    assert changed > 0
    with pytest.warns(idv.IdvWarning, match=rf"column 'DT': {changed} DateTime values? .*"
                                             rf"floored to microseconds"):
        auto = idv.to_pandas(path, columns=["DT"])
    assert auto["DT"].to_numpy().view(np.int64).tolist() == \
        [(t - EPOCH_TICKS) // 10 for t in dt_ticks]
    with pytest.raises(ValueError, match="no unit holds it exactly"):
        idv.to_pandas(path, columns=["DT"], datetime="exact")
    with pytest.raises(ValueError, match="sub-microsecond"):
        idv.to_pandas(path, columns=["DT"], datetime="us")
    ticks = idv.to_pandas(path, datetime="ticks")
    assert ticks["DT"].tolist() == [int(r[cols["DT"]["index"]]) for r in dump["rows"]]
    assert ticks["TS"].tolist() == [int(r[cols["TS"]["index"]]) for r in dump["rows"]]
    floored = idv.to_pandas(path, columns=["DT"], datetime="us", safe=False)
    assert floored["DT"].dtype == np.dtype("datetime64[us]")
    want = [(int(r[cols["DT"]["index"]]) - EPOCH_TICKS) // 10 for r in dump["rows"]]
    assert floored["DT"].to_numpy().view(np.int64).tolist() == want
    with pytest.raises(ValueError, match="outside what nanoseconds"):
        idv.to_pandas(path, columns=["DT"], datetime="ns")


def test_pandas_datetime_range_edges(tmp_path):
    """Year 1 and 9999 come out as datetime64[us] (exact); dates within 1677-2262 as [ns]."""
    edges = np.array(["0001-01-01T00:00:00", "9999-12-31T23:59:59.999999",
                      "2020-02-29T12:34:56.123456"], "datetime64[us]")
    inside = np.array(["1677-09-22", "2262-04-10T23:59:59.9999999"], "datetime64[100ns]")
    path = tmp_path / "edges.idv"
    idv.write(path, {"E": edges, "TS": np.array([-2 * 10**16, 0, 2 * 10**16], "timedelta64[us]")})
    df = idv.to_pandas(path)
    assert df["E"].dtype == np.dtype("datetime64[us]")
    assert df["E"].to_numpy().tolist() == edges.tolist()
    assert df["TS"].dtype == np.dtype("timedelta64[us]")
    assert df["TS"].to_numpy().astype(np.int64).tolist() == [-2 * 10**16, 0, 2 * 10**16]
    path2 = tmp_path / "inside.idv"
    idv.write(path2, {"I": inside})
    df2 = idv.to_pandas(path2)
    assert df2["I"].dtype == np.dtype("datetime64[ns]")
    assert df2["I"].to_numpy().view(np.int64).tolist() == \
        (inside.view(np.int64) * 100).tolist()


def _fields_and_converters(f, datetime):
    """(fields(), each column's own converter's field) of every column of open file `f`."""
    from idv._interop.arrow_columns import converters, fields
    keys = f.resolve_columns(None)
    unit, safe = f.time_unit([f[k].name for k in keys], datetime, True)
    views = {f[k].name for k in keys if f[k].type is idv.types.Text}
    return (fields(pa, f, keys, unit, safe, views),
            [c.field for c in converters(pa, [f[k] for k in keys], unit, safe, views)])


# the unit chosen for 100-ns ticks beyond what a unit holds warns: not what these test
@pytest.mark.filterwarnings("ignore:.* 100-ns ticks:idv.IdvWarning")
@pytest.mark.parametrize("datetime", ["auto", "us", "ticks"])
@pytest.mark.parametrize("name", sample_params())
def test_a_schemas_fields_are_each_columns_converters(name, datetime):
    """A schema's fields come from one converter per kind of column, renamed for the rest:
    each the field the column's own converter gives."""
    with idv.open(fixture(name)) as f:
        got, want = _fields_and_converters(f, datetime)
    assert [g.equals(w, check_metadata=True) for g, w in zip(got, want)] == [True] * len(want)


@pytest.mark.filterwarnings("ignore:.* 100-ns ticks:idv.IdvWarning")
def test_columns_of_one_type_in_other_units_keep_their_own_fields():
    """Time columns of one type whose values need different units, beside repeated numbers,
    Text and keys: the fields of a kind are shared only within the same unit."""
    base = np.datetime64("2020-01-01T00:00:00", "ns")
    buf = io.BytesIO()
    idv.write(buf, {"a": np.arange(3, dtype=np.float32), "b": np.arange(3, dtype=np.float32),
                    "whole": base + np.arange(3) * np.timedelta64(1, "D"),
                    "ticks": base + np.arange(3) * np.timedelta64(100, "ns"),
                    "far": np.array(["0001-01-01", "9999-12-31", "2000-01-01"], "M8[us]"),
                    "s": np.array(["x", "y", "z"], object), "t": np.array(["u", "v", "w"], object),
                    "k": pa.array([1, 2, 3], pa.uint32())})
    with idv.open(buf.getvalue()) as f:
        for mode in ("auto", "auto-us", "us"):
            got, want = _fields_and_converters(f, mode)
            assert [g.equals(w, check_metadata=True) for g, w in zip(got, want)] == \
                [True] * len(want), mode
            assert [g.name for g in got] == f.column_names
        types = {g.name: g.type for g in _fields_and_converters(f, "auto")[0]}
    assert types["whole"] != types["far"]           # one type, two units


def test_pandas_datetimeoffset_tz_aware(tmp_path):
    """Mixed offsets: UTC (the instants); one shared offset: that fixed-offset zone."""
    dump = sidecar("scalars_datetime")
    cols = {c["name"]: c for c in dump["columns"]}
    with pytest.warns(idv.IdvWarning, match="100-ns ticks.*floored to microseconds"):
        df = idv.to_pandas(fixture("scalars_datetime"), columns=["DTO"], safe=False)
    s = df["DTO"]
    assert str(s.dt.tz) == "UTC"
    cells = [r[cols["DTO"]["index"]] for r in dump["rows"]]
    utc_us = [(int(c["ticks"]) - int(c["offset_minutes"]) * TICKS_PER_MINUTE - EPOCH_TICKS) // 10
              for c in cells]
    assert s.dt.tz_localize(None).to_numpy().astype("datetime64[us]").view(np.int64).tolist() \
        == utc_us
    # one offset for all rows -> that zone, local clock times as ML.NET sees them
    clock = np.array(["2020-01-01T12:00", "1999-12-31T23:59:59.123456"], "datetime64[us]")
    values = np.zeros(2, [("utc", "datetime64[us]"), ("offset_minutes", "i2")])
    values["utc"] = clock - np.timedelta64(330, "m")
    values["offset_minutes"] = 330
    path = tmp_path / "dto.idv"
    idv.write(path, {"D": values})
    d = idv.to_pandas(path)["D"]
    assert d.dt.tz.utcoffset(None) == dt.timedelta(minutes=330)
    assert d.dt.tz_localize(None).to_numpy().astype("datetime64[us]").tolist() == \
        clock.tolist()


def test_pandas_rowid_and_timespan_vectors():
    dump = sidecar("scalars_rowid")
    df = idv.to_pandas(fixture("scalars_rowid"))
    assert df["RID"].tolist() == [int(r[0]) for r in dump["rows"]]
    fixed = sidecar("vectors_fixed")
    dcol = next(c for c in fixed["columns"] if c["name"] == "VecTS")
    ts = idv.to_pandas(fixture("vectors_fixed"), columns=["VecTS"])
    assert list(ts.columns) == ["VecTS.0"] and ts["VecTS.0"].dtype == np.dtype("timedelta64[ns]")
    assert_arrays_equal(ts.to_numpy().astype(TS100), expected_column(fixed, dcol["index"]), "VecTS")


def test_pandas_dto_and_key_vectors_expand():
    dump = sidecar("vectors_misc")
    cols = {c["name"]: c for c in dump["columns"]}
    df = idv.to_pandas(fixture("vectors_misc"), columns=["VecKeyKV", "VecDTO"], safe=False)
    kv = list(annotation_expected(annotations_by_kind(cols["VecKeyKV"])["KeyValues"]))
    raw = expected_column(dump, cols["VecKeyKV"]["index"]).astype(np.int64)
    for j in range(4):
        s = df[f"VecKeyKV.{j}"]
        assert list(s.cat.categories) == kv
        assert s.cat.codes.tolist() == (raw[:, j] - 1).tolist()
    dto = expected_column(dump, cols["VecDTO"]["index"])
    for j in range(2):
        got = df[f"VecDTO.{j}"].dt.tz_convert("UTC").dt.tz_localize(None).to_numpy()
        want = dto["utc"][:, j].view(np.int64) // 10
        assert got.astype("datetime64[us]").view(np.int64).tolist() == want.tolist()


def test_zone_aware_series_keeps_its_offsets_whatever_the_entry_point(tmp_path):
    """A datetime64[ns, tz] Series gives the same DateTimeOffset values (instants exact to the
    100 ns, the zone's offset at each) in a DataFrame, in a dict and in an idv.Writer batch;
    given DateTime it is its UTC instants."""
    clock = ["2020-01-01 12:00:00.1234567", "2020-07-01 12:00:00.0", "2021-03-28 03:30:00.0"]
    s = pd.Series(pd.to_datetime(clock).tz_localize("Europe/Paris"))
    utc = (pd.to_datetime(clock).to_numpy().astype("datetime64[ns]")
           - np.array([60, 120, 120], "timedelta64[m]"))
    paths = {k: tmp_path / f"{k}.idv" for k in ("frame", "dict", "Writer", "DateTime")}
    idv.write(paths["frame"], pd.DataFrame({"d": s}))
    idv.write(paths["dict"], {"d": s})
    with idv.Writer(paths["Writer"], {"d": idv.DateTimeOffset}) as w:
        w.write_batch({"d": s[:1]})
        w.write_batch({"d": s[1:]})
    with idv.Writer(paths["DateTime"], {"d": idv.DateTime}) as w:
        w.write_batch({"d": s})
    for k in ("frame", "dict", "Writer"):
        got = idv.read(paths[k])["d"]
        assert got["offset_minutes"].tolist() == [60, 120, 120], k
        assert got["utc"].view(np.int64).tolist() == (utc.view(np.int64) // 100).tolist(), k
    got = idv.read(paths["DateTime"])["d"]
    assert got.view(np.int64).tolist() == (utc.view(np.int64) // 100).tolist()


def test_pandas_expansion_name_clash(tmp_path):
    path = tmp_path / "clash.idv"
    idv.write(path, {"V": np.zeros((2, 2), np.float32), "V.1": np.zeros(2)})
    with pytest.raises(ValueError, match="vectors='object'"):
        idv.to_pandas(path)
    assert list(idv.to_pandas(path, vectors="object").columns) == ["V", "V.1"]


def test_idvfile_methods():
    path = fixture("mixed_default")
    with idv.open(path) as f:
        df = f.to_pandas(["Id", "Key"])
        assert list(df.columns) == ["Id", "Key"] and len(df) == 100
        t = f.to_arrow(["Id"])
        assert t.column_names == ["Id"] and t.num_rows == 100
        assert sum(b.num_rows for b in f.iter_batches(["Txt"])) == 100
    with pytest.raises(ValueError, match="vectors must be one of"):
        idv.read_pandas(path, vectors="wide")


# ---------------------------------------------------------------------------------------------
# from_pandas and idv.write(DataFrame)
# ---------------------------------------------------------------------------------------------

PANDAS_ROUND_TRIP = {
    "mixed_default": None, "keys": ["KeyU4", "KeyU8", "KeyWithText"],
    "scalars_numeric": None, "scalars_text": None, "scalars_bool": None,
    "vectors_fixed": ["VecF32", "VecF64", "VecI32", "VecU8", "VecI64", "VecText", "VecBool"],
    "vectors_variable": None, "pipeline_keys": None, "pipeline_multiclass_scored": None,
}


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in PANDAS_ROUND_TRIP])
def test_pandas_round_trip_values(name, tmp_path):
    """idv -> DataFrame (vectors as objects) without the schema it carries -> idv: ML.NET's
    values; Categorical columns come back as Key<UInt32, n> with the KeyValues (with the
    schema, the types too: test_roundtrip.py)."""
    columns = PANDAS_ROUND_TRIP[name]
    dump = sidecar(name)
    df = idv.to_pandas(fixture(name), columns, vectors="object")
    df.attrs.clear()
    out = tmp_path / "p.idv"
    idv.write(out, df)
    dcols = [c for c in visible_columns(dump) if columns is None or c["name"] in columns]
    with dc.open_quietly(out) as f:
        assert f.column_names == [c["name"] for c in dcols]
        for dcol in dcols:
            col = f[dcol["name"]]
            t = parse_type_string(dcol["type_string"])
            anns = annotations_by_kind(dcol)
            exp = expected_column(dump, dcol["index"])
            where = dcol["name"]
            if isinstance(t, idv.Key) and "KeyValues" in anns and \
                    len(set(annotation_expected(anns["KeyValues"]).tolist())) == t.count:
                assert col.type == idv.Key(idv.UInt32, t.count), where
                assert_arrays_equal(col.metadata["KeyValues"],
                                    annotation_expected(anns["KeyValues"]), where)
                assert_arrays_equal(col.read(), exp.astype(np.uint32), where)
                continue
            if isinstance(t, idv.Vector) and not t.is_fixed:
                got = col.read()
                lengths = np.diff(exp.offsets)
                if len(set(lengths.tolist())) == 1:
                    # rows all of one length read back as a fixed-size vector (documented)
                    assert col.type == idv.Vector(col.type.item, int(lengths[0])), where
                    assert_arrays_equal(got.reshape(-1).astype(exp.values.dtype), exp.values,
                                        where)
                    continue
                assert isinstance(got, idv.Ragged), where
                assert np.array_equal(got.offsets, exp.offsets), where
                if len(exp.values):
                    assert_arrays_equal(got.values.astype(exp.values.dtype), exp.values, where)
                continue
            got = col.read()
            assert_arrays_equal(got, exp, where)


def test_write_dataframe_categorical_to_mlnet(tmp_path, oracle):
    """A Categorical written from pandas is a key ML.NET reads, with its KeyValues."""
    df = pd.DataFrame({
        "color": pd.Categorical(["red", None, "blue", "red"], categories=["red", "green", "blue"]),
        "when": pd.to_datetime(["2020-01-01 12:00", "2020-07-01 12:00", "2021-01-01 00:00",
                                "1999-03-03 00:00"]).tz_localize("Europe/Paris"),
        "x": pd.array([1.5, None, 3.0, 4.0], dtype="Float64"),
        "n": pd.array([1, 2, 3, 4], dtype="Int32"),
        "var": [[1, 2], [], [3], [4, 5, 6]],
        "s": pd.Series(["a", "b", "c", "d"], dtype="string"),
    })
    path = tmp_path / "df.idv"
    idv.write(path, df)
    dump = oracle.dump(path)
    cols = {c["name"]: c for c in dump["columns"]}
    assert cols["color"]["type_string"] == "Key<UInt32, 0-2>"
    assert annotations_by_kind(cols["color"])["KeyValues"]["value"] == ["red", "green", "blue"]
    assert [r[0] for r in dump["rows"]] == [1, 0, 3, 1]
    assert cols["when"]["type_string"] == "DateTimeOffset"
    # ML.NET's clock ticks and offsets: Paris in winter +60, summer +120
    local = pd.to_datetime(["2020-01-01 12:00", "2020-07-01 12:00", "2021-01-01 00:00",
                            "1999-03-03 00:00"]).to_numpy().astype("datetime64[us]")
    want = [{"ticks": int(v) * 10 + EPOCH_TICKS, "offset_minutes": m}
            for v, m in zip(local.view(np.int64), [60, 120, 60, 60])]
    assert [r[1] for r in dump["rows"]] == want
    assert cols["x"]["type_string"] == "Double"
    assert [r[2] for r in dump["rows"]] == ["1.5", "NaN", "3.0", "4.0"]
    assert cols["n"]["type_string"] == "Int32"
    assert cols["var"]["type_string"] == "Vector<Int64>"
    assert [r[4] for r in dump["rows"]] == [[1, 2], [], [3], [4, 5, 6]]
    assert [r[5] for r in dump["rows"]] == ["a", "b", "c", "d"]
    # and back
    back = idv.to_pandas(path)
    assert back["color"].tolist()[0] == "red" and pd.isna(back["color"][1])
    assert list(back["color"].cat.categories) == ["red", "green", "blue"]


def test_write_dataframe_overrides(tmp_path):
    df = pd.DataFrame({"c": pd.Categorical(["x", "y", "x"]), "v": [1, 2, 3],
                       "t": pd.Categorical(["p", "q", "p"])})
    path = tmp_path / "o.idv"
    idv.write(path, df, types={"c": idv.Key(idv.Byte, 2), "v": idv.Key(idv.UInt16, 3),
                               "t": idv.Text},
              metadata={"c": {"Note": "hi"}, "v": {"KeyValues": ["a", "b", "c"]}})
    with idv.open(path) as f:
        assert f["c"].type == idv.Key(idv.Byte, 2) and f["c"].read().tolist() == [1, 2, 1]
        assert list(f["c"].metadata) == ["KeyValues", "Note"]      # inferred kept, one added
        assert f["c"].metadata["KeyValues"].tolist() == ["x", "y"]
        assert f["v"].type == idv.Key(idv.UInt16, 3) and f["v"].read().tolist() == [1, 2, 3]
        assert f["t"].type == idv.Text and f["t"].read().tolist() == ["p", "q", "p"]
        assert f["t"].metadata == {}


@pytest.mark.parametrize("frame,match", [
    (lambda: pd.DataFrame({"n": pd.array([1, None], dtype="Int64")}),
     "row 1: <NA>, but Int64 has no missing value"),
    (lambda: pd.DataFrame({"b": pd.array([True, None], dtype="boolean")}),
     "row 1: <NA>, but Boolean has no missing value"),
    (lambda: pd.DataFrame({"s": ["a", None]}), "row 1: .*, but Text has no missing value"),
    (lambda: pd.DataFrame({"c": pd.Categorical([None, None], categories=[])}), "no categories"),
    (lambda: pd.DataFrame([[1, 2]], columns=["a", "a"]), "duplicate column names"),
    (lambda: pd.DataFrame({"t": pd.to_datetime(["2020-01-01", None])}), "NaT"),
    (lambda: pd.DataFrame({"v": [[1, 2], None]}), "row 1"),
    # rows of different lengths are judged item by item as a column's values are: numpy would
    # make text of the numbers beside a str ("1", "2")
    (lambda: pd.DataFrame({"v": [[1, "b"], [2]]}), r"mixed .*\(int at item 0, str at item 1\)"),
    (lambda: pd.DataFrame({"v": [["a"], [1, 2]]}), "mixed .*str at item 0, int at item 1"),
    (lambda: pd.DataFrame({"v": pd.Series([[[1, 2], [3]], [[4]]], dtype=object)}),
     r"column 'v': lists inside a vector \(a list at item 0\)"),
    (lambda: pd.DataFrame({"p": pd.period_range("2020-01", periods=2, freq="M")}),
     "no ML.NET type"),
])
def test_from_pandas_refuses(frame, match):
    with pytest.raises((ValueError, TypeError), match=match):
        idv.write(io.BytesIO(), frame())


_LIST_COLUMNS = [       # rows as lists -> (the type, the rows read back), or the error
    ([[1, 2], []], (idv.Vector(idv.Int64), [[1, 2], []])),
    ([[1.5], [2, 3]], (idv.Vector(idv.Double), [[1.5], [2.0, 3.0]])),
    ([[True], [False, True]], (idv.Vector(idv.Boolean), [[True], [False, True]])),
    ([["a"], ["b", "é"]], (idv.Vector(idv.Text), [["a"], ["b", "é"]])),
    ([[1, 2**63 + 1], [3]], (idv.Vector(idv.UInt64), [[1, 2**63 + 1], [3]])),
    ([np.array([1, 2]), np.array([3])], (idv.Vector(idv.Int64), [[1, 2], [3]])),
    ([[1, 2], [3, 4]], (idv.Vector(idv.Int64, 2), [[1, 2], [3, 4]])),
    ([[1], None], (ValueError, "row 1: a missing vector")),
    ([[1], float("nan")], (ValueError, "row 1: a missing vector")),
    ([[1], 5], (TypeError, "row 1: expected a sequence of items")),
    ([[1, "b"], [2]], (TypeError, r"mixed .*\(int at item 0, str at item 1\)")),
    ([[[1], [2]], [[3]]], (TypeError, r"lists inside a vector \(a list at item 0\)")),
]


@pytest.mark.parametrize("rows,expected", _LIST_COLUMNS, ids=lambda v: None)
@pytest.mark.parametrize("given", ["list", "object array", "pandas"])
def test_a_column_of_lists_means_one_thing_however_it_is_given(rows, expected, given):
    """Rows as lists (of any lengths: a variable-size vector, as pandas, Arrow and polars
    make them; of one length: a fixed size) are inferred alike from a list, a 1-d object
    array of them and a pandas column: the same type, the same values exactly, the same
    refusal."""
    def write(buf):
        if given == "list":
            idv.write(buf, {"v": rows})
        elif given == "pandas":
            idv.write(buf, pd.DataFrame({"v": pd.Series(rows, dtype=object)}))
        else:
            arr = np.empty(len(rows), object)
            for i, r in enumerate(rows):
                arr[i] = r
            idv.write(buf, {"v": arr})
    buf = io.BytesIO()
    if isinstance(expected[0], type) and issubclass(expected[0], Exception):
        with pytest.raises(expected[0], match=expected[1]):
            write(buf)
        return
    write(buf)
    with idv.open(buf.getvalue()) as f:
        assert f["v"].type == expected[0]
        got = f["v"].read()
    assert [[x for x in np.asarray(r).tolist()] for r in got] == expected[1]


_DAY = dt.datetime(2020, 1, 2)
_MISSING_INFERRED = [      # values with a missing one -> (the type, the values read), or the error
    ([1, None, 3], (idv.Double, [1.0, "nan", 3.0])),
    ([1.5, None], (idv.Double, [1.5, "nan"])),
    ([1, pd.NA], (idv.Double, [1.0, "nan"])),
    ([True, None], (ValueError, "row 1: None, but Boolean has no missing value")),
    ([_DAY, None], (ValueError, "row 1: None, but DateTime has no missing value")),
    ([None, None], (TypeError, "a column of only missing values")),
    (["a", None], (ValueError, "row 1: None, but Text has no missing value")),
]


def _readable(values):
    return ["nan" if isinstance(x, float) and x != x else x for x in values]


@pytest.mark.parametrize("values,expected", _MISSING_INFERRED, ids=lambda v: None)
@pytest.mark.parametrize("given", ["list", "object array", "pandas"])
def test_a_missing_value_means_one_thing_however_it_is_given(values, expected, given):
    """None, NaN or pandas' NA among values: numbers beside it are Double, it their NaN (as
    numpy and pandas make [1, nan]); any other type refuses it, naming the row, the same from
    a list, an object array and a pandas column of objects."""
    data = {"list": values, "object array": np.array(values, dtype=object),
            "pandas": pd.DataFrame({"v": pd.Series(values, dtype=object)})}[given]
    buf = io.BytesIO()
    if isinstance(expected[0], type) and issubclass(expected[0], Exception):
        with pytest.raises(expected[0], match=expected[1]):
            idv.write(buf, data if given == "pandas" else {"v": data})
        return
    idv.write(buf, data if given == "pandas" else {"v": data})
    with idv.open(buf.getvalue()) as f:
        assert f["v"].type == expected[0]
        assert _readable(f["v"].read().tolist()) == expected[1]


_MISSING_TYPED = [          # a type given -> what a missing value becomes, or the error
    (idv.Double, pa.float64(), [1.5, "nan"]),
    (idv.Single, pa.float32(), [1.5, "nan"]),
    (idv.Boolean, pa.bool_(), "Boolean has no missing value"),
    (idv.Int64, pa.int64(), "Int64 has no missing value"),
    (idv.DateTime, pa.timestamp("us"), "DateTime has no missing value"),
]


@pytest.mark.parametrize("t,arrow_type,expected", _MISSING_TYPED, ids=str)
@pytest.mark.parametrize("given", ["list", "arrow"])
def test_a_missing_value_given_a_type_means_one_thing(t, arrow_type, expected, given):
    """With the column's type given, a missing value (None, an Arrow null) is that type's
    missing value (NaN) or refused with the same message, from a list and from
    Arrow."""
    first = {idv.Boolean: True, idv.DateTime: _DAY}.get(t, 1.5 if arrow_type in (
        pa.float64(), pa.float32()) else 1)
    if given == "arrow":
        data = pa.table({"v": pa.array([first, None], arrow_type)})
    else:
        data = {"v": [first, None]}
    buf = io.BytesIO()
    if isinstance(expected, str):
        with pytest.raises(ValueError, match=f"row 1: .*, but {expected}"):
            idv.write(buf, data, types={"v": t})
        return
    idv.write(buf, data, types={"v": t})
    with idv.open(buf.getvalue()) as f:
        assert _readable(f["v"].read().tolist()) == expected


@pytest.mark.parametrize("dtype,t", [("Int64", idv.Int64), ("boolean", idv.Boolean),
                                     ("UInt8", idv.Byte)])
def test_a_nullable_pandas_column_with_na_means_what_a_null_does(dtype, t):
    """pandas' <NA> in a nullable column: refused as an Arrow null of the same type is (the
    same message, naming the row and the types that hold a missing value), and given Double
    as the types= the message proposes, its NaN, each value converted exactly."""
    first = True if dtype == "boolean" else 1
    frame = pd.DataFrame({"v": pd.array([first, None], dtype=dtype)})
    with pytest.raises(ValueError, match=rf"row 1: <NA>, but {t} has no missing value in "
                                         rf"ML.NET; the types that hold one are"):
        idv.write(io.BytesIO(), frame)
    with pytest.raises(ValueError, match=rf"row 1: null, but {t} has no missing value in "
                                         rf"ML.NET; the types that hold one are"):
        idv.write(io.BytesIO(), pa.table({"v": pa.array([first, None])}), types={"v": t})
    buf = io.BytesIO()
    idv.write(buf, frame, types={"v": "Double"})
    with idv.open(buf.getvalue()) as f:
        assert _readable(f["v"].read().tolist()) == [1.0, "nan"]
    with pytest.raises(ValueError, match="has no exact Double"):
        idv.write(io.BytesIO(), pd.DataFrame({"v": pd.array([2**53 + 1, None], dtype="Int64")}),
                  types={"v": "Double"})


@pytest.mark.parametrize("t", [idv.Text, idv.DateTime, idv.TimeSpan, idv.DateTimeOffset,
                               idv.Boolean, idv.Int64, idv.Key(idv.UInt32, 3)], ids=str)
def test_rows_of_no_items_are_written_whatever_the_item_type(t):
    """A batch whose variable-size vectors are all empty ([] rows, which numpy types float64)
    is written for every item type, as an Arrow list of empty rows is."""
    buf = io.BytesIO()
    with idv.Writer(buf, {"v": idv.Vector(t)}) as w:
        w.write_batch({"v": [[]]})
        w.write_batch(pd.DataFrame({"v": [[], []]}))
    with idv.open(buf.getvalue()) as f:
        got = f["v"].read()
    assert f["v"].type == idv.Vector(t) and got.lengths.tolist() == [0, 0, 0]


def test_from_pandas_shapes():
    df = pd.DataFrame({"fixed": [np.array([1.0, 2.0]), np.array([3.0, 4.0])],
                       "var": [[1, 2, 3], []], "nf": pd.array([None, 2.5], dtype="Float32"),
                       1: [True, False]})
    columns, types, meta = idv.from_pandas(df)
    assert [n for n, _ in columns] == ["fixed", "var", "nf", "1"]
    assert types == {"fixed": idv.Vector(idv.Double, 2), "var": idv.Vector(idv.Int64),
                     "nf": idv.Single, "1": idv.Boolean}
    assert np.isnan(columns[2][1][0]) and meta == {}
    columns, types, _ = idv.from_pandas(pd.DataFrame({"words": [["a", "é"], [], ["c"]]}))
    assert types == {"words": idv.Vector(idv.Text)}
    assert [list(r) for r in columns[0][1]] == [["a", "é"], [], ["c"]]


# ---------------------------------------------------------------------------------------------
# scipy.sparse
# ---------------------------------------------------------------------------------------------

def test_sparse_fixture_round_trip(tmp_path):
    """ML.NET's sparse columns read as CSR, written back from CSR, read the same (sparsity
    too: rows ML.NET stored sparse stay sparse)."""
    name = "vectors_sparse"
    dump = sidecar(name)
    cols = ["SparseF32", "SparseF64Big", "SparseKey"]
    with dc.open_quietly(fixture(name)) as f:
        data = {c: f[c].read(sparse=True) for c in cols}
        types = {c: f[c].type for c in cols}
    assert all(sp.issparse(m) for m in data.values())
    out = tmp_path / "sparse.idv"
    idv.write(out, data, types=types)
    with dc.open_quietly(out) as g:
        sub = _sub_dump(dump, g)
        for c in cols:
            dc.check_sparse_read(g[c], sub)
            dc.check_column_values(g[c], sub)


def test_sparse_csr_written_mlnet_reads(tmp_path, oracle):
    m = sp.csr_matrix(np.array([[0, 1.5, 0, 0], [0, 0, 0, 0], [1, 2, 3, 4], [0, 0, 0, -2]],
                               np.float32))
    path = tmp_path / "csr.idv"
    idv.write(path, {"S": m})
    dump = oracle.dump(path)
    assert dump["columns"][0]["type_string"] == "Vector<Single, 4>"
    cells = [r[0] for r in dump["rows"]]
    assert cells[0] == {"length": 4, "indices": [1], "values": ["1.5"]}
    assert cells[1] == {"length": 4, "indices": [], "values": []}
    assert cells[2] == ["1.0", "2.0", "3.0", "4.0"]          # a full row is stored dense
    assert cells[3] == {"length": 4, "indices": [3], "values": ["-2.0"]}
    back = idv.read(path, sparse=True)["S"]
    assert (back != m).nnz == 0 and back.nnz == m.nnz
    t = idv.to_arrow(path)
    assert t.column(0).to_pylist()[0] == [0, 1.5, 0, 0]


def _sub_dump(dump, f):
    """The dump restricted to file f's columns (by name), re-indexed like them."""
    idx = [next(c["index"] for c in dump["columns"] if c["name"] == n) for n in f.column_names]
    return {"rows": [[r[i] for i in idx] for r in dump["rows"]],
            "columns": [dict(dump["columns"][i], index=k) for k, i in enumerate(idx)]}


@pytest.mark.parametrize("size", [1, 7, 64, 70, 239, 240, 1000])
def test_iter_batches_with_any_batch_size(size):
    """batch_size rows a batch whatever the blocks (64 rows here), the last the rest, as
    pyarrow's ParquetFile.iter_batches; together the same table as to_arrow."""
    pa = pytest.importorskip("pyarrow")
    path = idv.sample_path()
    with idv.open(path) as f:
        batches = list(f.iter_batches(batch_size=size))
        assert [b.num_rows for b in batches] == [size] * (240 // size) + (
            [240 % size] if 240 % size else [])
        assert pa.Table.from_batches(batches).equals(idv.to_arrow(path))
        projected = list(idv.record_batch_reader(f, ["Title", "Features"], batch_size=size))
        assert [b.schema.names for b in projected[:1]] == [["Title", "Features"]]
        assert pa.Table.from_batches(projected).equals(idv.to_arrow(path, ["Title", "Features"]))


@pytest.mark.parametrize("size, error", [(0, ValueError), (-1, ValueError), (2.5, TypeError),
                                         (True, TypeError), ("64", TypeError)])
def test_iter_batches_refuses_a_bad_batch_size(size, error):
    pytest.importorskip("pyarrow")
    with idv.open(idv.sample_path()) as f, pytest.raises(error, match="batch_size"):
        f.iter_batches(batch_size=size)


@pytest.mark.parametrize("series", [
    lambda: pd.Series(pd.Categorical(["b", "a", None])),
    lambda: pd.Series(pd.date_range("2024-01-01", periods=3, tz="Europe/Paris")),
    lambda: pd.Series([1.5, None, 2.0]),
    lambda: pd.Series(["x", "", "é"], dtype="string"),
], ids=["categorical", "zoned", "float", "string"])
def test_a_series_in_a_dict_is_written_as_a_frames_column(tmp_path, series):
    """A pandas Series among a dict's columns is typed as a DataFrame's column is (a
    Categorical was written as Text, a zone lost): the same file either way."""
    idv.write(tmp_path / "dict.idv", {"c": series(), "n": np.arange(3)})
    idv.write(tmp_path / "frame.idv", pd.DataFrame({"c": series(), "n": np.arange(3)}))
    assert (tmp_path / "dict.idv").read_bytes() == (tmp_path / "frame.idv").read_bytes()


def test_dates_are_written_as_midnight_from_every_input(tmp_path):
    """datetime.date objects are DateTime at midnight from a list, an object array and a
    DataFrame alike (a list and an array of them were refused as unsupported objects)."""
    import datetime as _dt
    days = [_dt.date(2020, 1, 1), _dt.date(1999, 12, 31)]
    idv.write(tmp_path / "frame.idv", pd.DataFrame({"d": pd.Series(days, dtype=object)}))
    for name, values in (("list", days), ("array", np.array(days, dtype=object))):
        idv.write(tmp_path / f"{name}.idv", {"d": values})
        assert (tmp_path / f"{name}.idv").read_bytes() == (tmp_path / "frame.idv").read_bytes()
    assert idv.read(tmp_path / "list.idv")["d"].astype("datetime64[D]").tolist() == days


def test_arrays_of_one_shape_keep_it_from_every_input(tmp_path):
    """Rows that are arrays of one 2-d shape are a Vector<T, 3, 2> from a list or a
    DataFrame's object column, as from the 3-d array (they were flattened to Vector<T, 6>)."""
    a = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    idv.write(tmp_path / "array.idv", {"v": a})
    for name, data in (("list", {"v": [a[0], a[1]]}),
                       ("frame", pd.DataFrame({"v": pd.Series([a[0], a[1]], dtype=object)}))):
        idv.write(tmp_path / f"{name}.idv", data)
        assert (tmp_path / f"{name}.idv").read_bytes() == (tmp_path / "array.idv").read_bytes()
    assert str(idv.open(tmp_path / "list.idv")["v"].type) == "Vector<Single, 3, 2>"
    for rows in ([np.ones((2, 3)), np.ones((3, 2))], [np.ones((2, 3)), np.ones(6)]):
        with pytest.raises(ValueError, match=r"rows of different shapes \(\(2, 3\) and"):
            idv.write(tmp_path / "shapes.idv", {"v": rows})       # flattened to 6 silently
    assert not (tmp_path / "shapes.idv").exists()


def test_series_of_different_indexes_in_a_dict_are_refused(tmp_path):
    """A dict is written by position and a DataFrame aligns on the index: Series of different
    indexes in a dict are refused, naming the column (written by position silently, where
    pd.DataFrame of the same dict gives other rows)."""
    data = {"a": pd.Series([1, 2], index=[1, 0]), "b": pd.Series([5, 6], index=[0, 1])}
    with pytest.raises(ValueError, match="column 'b': a Series whose index differs"):
        idv.write(tmp_path / "d.idv", data)
    assert not (tmp_path / "d.idv").exists()
    idv.write(tmp_path / "f.idv", pd.DataFrame(data))
    assert idv.read(tmp_path / "f.idv")["a"].tolist() == [2, 1]
