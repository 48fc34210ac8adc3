"""An IdvFile and a Dataset of that one file are the same source of rows (idv._reader.read_source):
every read method gives them equal results of the same types, with every option, so that
the two cannot drift apart; and a dataset takes the options a file takes, or refuses them
with a ValueError saying why."""
from __future__ import annotations

import numpy as np
import pytest

import idv
from reference import fixture
from readback import same

# uncompressed (views of the memory map), DEFLATE in small blocks, and the bundled sample
FILES = ["mixed_none", "mixed_smallblocks_deflate", "sample"]


def _path(name):
    return idv.sample_path() if name == "sample" else str(fixture(name))


def _same_value(a, b):
    """Equal values of the same type: arrays (dtype, shape; NaN equals NaN), Ragged, CSR."""
    assert type(a) is type(b), (type(a), type(b))
    if hasattr(a, "tocsr"):
        assert a.shape == b.shape and a.dtype == b.dtype and (a != b).nnz == 0
        return
    assert same(a, b)


def _same_dict(a, b):
    assert isinstance(a, dict) and list(a) == list(b)
    for name in a:
        _same_value(a[name], b[name])


def _same_table(a, b):
    """Equal schemas (metadata too) and values (NaN equals NaN, which Arrow's equals does
    not hold)."""
    assert a.schema.equals(b.schema, check_metadata=True), (a.schema, b.schema)
    assert a.num_rows == b.num_rows
    for x, y in zip(a.columns, b.columns):
        if not x.equals(y):
            assert x.type.id == y.type.id and str(x.type) in ("float", "double")
            assert np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True)


def _same_batches(a, b):
    a, b = list(a), list(b)
    assert [x.num_rows for x in a] == [x.num_rows for x in b]
    pa = pytest.importorskip("pyarrow")
    for x, y in zip(a, b):
        _same_table(pa.Table.from_batches([x]), pa.Table.from_batches([y]))


def _numbers_filter(name):
    return "Price > 300000" if name == "sample" else "Id >= 40"


def _numpy_calls(name):
    """(what, call(source)) of the numpy reads and their options."""
    flt = _numbers_filter(name)
    calls = [("read", lambda s: s.read()),
             ("read columns", lambda s: s.read([1, 0])),
             ("read rows slice", lambda s: s.read(rows=slice(3, 90, 7))),
             ("read rows numbers", lambda s: s.read(rows=[5, 0, 5, -1])),
             ("read rows mask", lambda s: s.read(rows=np.arange(len(s)) % 3 == 0)),
             ("read datetime auto", lambda s: s.read(datetime="auto")),
             ("read datetime us rows", lambda s: s.read(rows=slice(0, 9), datetime="us")),
             ("read sparse", lambda s: s.read(sparse=True)),
             ("read copy=False", lambda s: s.read(copy=False)),
             ("read filter", lambda s: s.read(filter=flt)),
             ("read filter auto", lambda s: s.read(filter=flt, datetime="auto")),
             ("take", lambda s: s.take([7, 1, 7, -2])),
             ("take slice", lambda s: s.take(slice(1, 30, 4), datetime="ns")),
             ("take nothing", lambda s: s.take([])),
             ("ds[a:b]", lambda s: s[2:11])]
    if hasattr(getattr(np, "dtypes", None), "StringDType"):
        calls += [("read StringDType", lambda s: s.read(text="StringDType")),
                  ("read StringDType rows", lambda s: s.read(rows=[3, 1], text="StringDType"))]
    return calls


def _compare(name, f, ds, calls, check):
    """``check(call(ds), call(f))`` for each (what, call) of `calls`, naming the failing one."""
    for what, call in calls:
        try:
            check(call(ds), call(f))
        except AssertionError as e:
            raise AssertionError(f"{name}: {what}: {e}") from None


@pytest.mark.parametrize("name", FILES)
def test_numpy_reads_of_a_file_and_of_its_one_file_dataset_are_equal(name):
    with idv.open(_path(name)) as f, idv.dataset(_path(name)) as ds:
        _compare(name, f, ds, _numpy_calls(name), _same_dict)


@pytest.mark.parametrize("name", FILES)
def test_arrow_reads_of_a_file_and_of_its_one_file_dataset_are_equal(name):
    pa = pytest.importorskip("pyarrow")
    flt = _numbers_filter(name)
    with idv.open(_path(name)) as f, idv.dataset(_path(name)) as ds:
        _compare(name, f, ds, [
            ("to_arrow", lambda s: s.to_arrow()),
            ("to_arrow columns", lambda s: s.to_arrow([2, 0])),
            ("to_arrow filter", lambda s: s.to_arrow(filter=flt)),
            ("to_arrow us", lambda s: s.to_arrow(datetime="us", safe=False)),
            ("to_arrow ticks", lambda s: s.to_arrow(datetime="ticks")),
            ("arrow stream", lambda s: pa.table(s)),
            ("idv.to_arrow", lambda s: idv.to_arrow(s))], _same_table)
        _compare(name, f, ds, [
            ("record_batch_reader", lambda s: s.record_batch_reader()),
            ("batch_size", lambda s: s.record_batch_reader(batch_size=13)),
            ("rows", lambda s: s.record_batch_reader(rows=slice(5, 80, 3))),
            ("filter", lambda s: s.record_batch_reader(filter=flt, datetime="us")),
            ("iter_batches", lambda s: s.iter_batches([0, 1], batch_size=40)),
            ("idv.record_batch_reader", lambda s: idv.record_batch_reader(s))], _same_batches)


@pytest.mark.parametrize("name", FILES)
def test_pandas_reads_of_a_file_and_of_its_one_file_dataset_are_equal(name):
    pd = pytest.importorskip("pandas")
    flt = _numbers_filter(name)
    with idv.open(_path(name)) as f, idv.dataset(_path(name)) as ds:
        def same_frame(got, want):
            assert type(got) is type(want) is pd.DataFrame
            pd.testing.assert_frame_equal(got, want)
            assert got.attrs == want.attrs
        _compare(name, f, ds, [
            ("to_pandas", lambda s: s.to_pandas()),
            ("object vectors", lambda s: s.to_pandas(vectors="object")),
            ("filter", lambda s: s.to_pandas(filter=flt)),
            ("rows", lambda s: s.to_pandas(rows=slice(4, 60, 2))),
            ("datetime us", lambda s: s.to_pandas(datetime="us")),
            ("idv.to_pandas", lambda s: idv.to_pandas(s, [0, 1]))], same_frame)


def test_a_dataset_takes_the_options_of_a_file_over_its_files_end_to_end():
    """sparse, text, copy and rows of a dataset of several files: each file's result,
    joined."""
    paths = [str(fixture(n)) for n in FILES[:2]]
    with idv.dataset(paths) as ds:
        parts = []
        for p in paths:
            with idv.open(p) as f:
                parts.append(f.read(["Var", "Vec", "Id"], sparse=True))
        got = ds.read(["Var", "Vec", "Id"], sparse=True, copy=False)
        sp = pytest.importorskip("scipy.sparse")
        for n in ("Vec", "Var"):
            assert (got[n] != sp.vstack([p[n] for p in parts], format="csr")).nnz == 0
        assert same(got["Id"], np.concatenate([p["Id"] for p in parts]))
        pa = pytest.importorskip("pyarrow")
        ids = np.concatenate([p["Id"] for p in parts])
        batches = list(ds.record_batch_reader(["Id"], rows=slice(95, 105)))
        assert pa.Table.from_batches(batches)["Id"].to_pylist() == ids[95:105].tolist()
        pytest.importorskip("pandas")
        assert ds.to_pandas(["Id"], rows=slice(95, 105, 2))["Id"].tolist() == \
            ids[95:105:2].tolist()
        assert ds.to_pandas(["Id"], filter="Id >= 98")["Id"].tolist() == \
            ids[ids >= 98].tolist()


def test_the_way_to_sparse_rows_the_refusal_gives_keeps_them_sparse(tmp_path):
    """read(rows=..., sparse=True) is refused with a way that works: the column's matrix,
    indexed, whose rows stay sparse and are the rows asked for."""
    sp = pytest.importorskip("scipy.sparse", reason="sparse matrices are scipy's")
    m = sp.random(20, 50, density=0.05, format="csr", dtype=np.float32, random_state=0)
    idv.write(tmp_path / "sp.idv", {"V": m})
    with idv.open(tmp_path / "sp.idv") as f:
        with pytest.raises(ValueError, match=r"f\[name\]\.read\(sparse=True\)\[rows\]"):
            f.read(["V"], rows=[1, 3], sparse=True)
        got = f["V"].read(sparse=True)[[1, 3]]
    assert sp.issparse(got) and np.array_equal(got.toarray(), m[[1, 3]].toarray())


@pytest.mark.parametrize("source", ["file", "dataset"])
def test_options_that_do_not_go_together_are_refused_alike(source):
    path = str(fixture("mixed_none"))
    opened = idv.open(path) if source == "file" else idv.dataset(path)
    with opened as s:
        with pytest.raises(ValueError, match=r"read\(rows=...\) does not take sparse=True"):
            s.read(rows=slice(0, 3), sparse=True)
        with pytest.raises(ValueError, match=r"read\(filter=...\) does not take sparse=True"):
            s.read(filter="Id > 3", sparse=True)
        with pytest.raises(ValueError, match="file order"):
            s.read(filter="Id > 3", rows=[0, 1])
        with pytest.raises(ValueError, match="text must be one of"):
            s.read(text="bytes")
        with pytest.raises(ValueError, match="datetime"):
            s.to_arrow(datetime="100ns")
        with pytest.raises(ValueError, match="positive step"):
            s.record_batch_reader(rows=slice(None, None, -1))
