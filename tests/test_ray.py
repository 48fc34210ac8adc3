"""idv.ray on a local Ray (2 CPUs, the test session's, conftest.py): ML.NET-written files read
through Ray Data equal idv's single-process read (count, sums, projection); a multi-block file
gives several blocks; a dataset written through IdvDatasink reads back equal and every file loads
in ML.NET (the oracle); a job whose task fails leaves nothing idv.dataset would pick up.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import idv
from expected import assert_column_equal, assert_equal_reads, column_index, expected_column
from reference import fixture, sidecar

ray = pytest.importorskip("ray", reason="Ray tests need ray[data] (pip install 'idv[ray]')")
pytest.importorskip("ray.data", reason="Ray tests need ray[data] (pip install 'idv[ray]')")
import idv.ray  # noqa: E402
import pyarrow as pa  # noqa: E402
from ray.data.aggregate import Sum  # noqa: E402

MIXED = ["mixed_default", "mixed_deflate", "mixed_none", "mixed_smallblocks_deflate",
         "mixed_smallblocks_none", "mixed_smallblocks_ordered", "mixed_maxbytes"]
SCALARS = ["Id", "F32", "F64", "B", "Txt", "Key", "DT"]


@pytest.fixture(autouse=True)
def local_ray(ray_runtime):
    """The test session's Ray (conftest.py)."""


def _paths(names):
    return [str(fixture(n)) for n in names]


def test_the_limit_set_here_holds_in_the_read_tasks(tmp_path):
    """idv.set_memory_limit holds in Ray's read tasks, in processes that have none set."""
    path = tmp_path / "big.idv"
    idv.write(path, {"x": np.arange(20_000, dtype=np.int64)}, rows_per_block=10_000)
    idv.set_memory_limit(30_000)                 # a block of 'x' decodes to 80 KB
    try:
        with pytest.raises(Exception, match="over idv's memory limit"):
            idv.ray.read_idv(str(path), columns=["x"]).materialize()
    finally:
        idv.set_memory_limit(None)
    assert idv.ray.read_idv(str(path), columns=["x"]).sum("x") == sum(range(20_000))


def test_count_sums_and_projection_equal_idv_read():
    paths = _paths(MIXED)
    ds = idv.ray.read_idv(paths)
    with idv.dataset(paths) as want:
        wanted = want.read(["Id", "F64"])
        expected = want.to_arrow(["Id", "Txt"])
    assert ds.count() == 700
    sums = ds.aggregate(Sum("Id"), Sum("F64", ignore_nulls=True))
    assert sums["sum(Id)"] == int(wanted["Id"].sum())
    assert sums["sum(F64)"] == pytest.approx(float(np.nansum(wanted["F64"])))
    table = pa.concat_tables(ray.get(ds.select_columns(["Id", "Txt"]).to_arrow_refs()))
    assert table.column_names == ["Id", "Txt"]
    assert table.sort_by("Id").equals(expected.sort_by("Id"))
    # the fields keep the exact ML.NET types
    assert table.schema.field("Id").metadata[b"idv.type"] == b"Int32"


def test_a_multi_block_file_gives_several_blocks_with_known_sizes():
    path = _paths(["multiblock_200k_deflate"])
    source = idv.ray.IdvDatasource(path, ["Id", "X"], blocks_per_task=5)
    tasks = source.get_read_tasks(2)
    f = idv.open(path[0])
    assert len(tasks) == -(-f["Id"].num_blocks // 5) > 1
    # decoded sizes, not the DEFLATE bytes on disk
    assert sum(t.metadata.size_bytes for t in tasks) == f["Id"].nbytes + f["X"].nbytes \
        == 200_000 * 8 == source.estimate_inmemory_data_size()
    refs = idv.ray.read_idv(path, ["Id", "X"], blocks_per_task=5).to_arrow_refs()
    assert len(refs) >= len(tasks)
    ids = pa.concat_tables(ray.get(refs)).column("Id").to_numpy()
    assert len(ids) == 200_000 and int(ids.sum()) == int(f["Id"].read().sum())


def test_a_filter_reads_the_matching_rows_in_the_tasks_statistics_leave(tmp_path):
    ids = np.arange(50_000, dtype=np.int64)
    idv.write(tmp_path / "sorted.idv", {"id": ids, "x": ids * 0.5}, rows_per_block=5_000)
    path = [str(tmp_path / "sorted.idv")]
    flt = [("id", ">=", 12_000), ("id", "<", 21_000)]
    source = idv.ray.IdvDatasource(path, blocks_per_task=1, filter=flt)
    # the blocks of rows 10,000-24,999 only: 3 of 10
    assert len(source.get_read_tasks(2)) == 3
    got = pa.concat_tables(ray.get(idv.ray.read_idv(path, blocks_per_task=1,
                                                    filter=flt).to_arrow_refs()))
    assert np.array_equal(np.sort(got.column("id").to_numpy()), np.arange(12_000, 21_000))
    none = idv.ray.read_idv(path, filter=[("id", ">", 10**9)])
    assert none.count() == 0


def test_columns_come_in_the_order_asked_for_by_index_or_name(tmp_path):
    """As every other reader gives them (indices were counted again among the columns
    already picked: another order, or an IndexError)."""
    p = str(tmp_path / "three.idv")
    idv.write(p, {"x": np.arange(4), "y": np.arange(4.0), "z": np.arange(4) * 2})
    for cols in ([2, 0, 1], ["z", 0, "y"]):
        row = idv.ray.read_idv(p, columns=cols).take(1)[0]
        assert list(row) == ["z", "x", "y"], cols


def test_blocks_per_task_is_refused_by_its_own_name(tmp_path):
    idv.write(tmp_path / "t.idv", {"a": np.arange(3)})
    with pytest.raises(ValueError, match="blocks_per_task must be a number of blocks"):
        idv.ray.IdvDatasource(str(tmp_path / "t.idv"), blocks_per_task=0)


def test_a_read_of_no_rows_has_the_schema_of_every_other_read(tmp_path):
    """A file of no rows, and a filter that keeps none, give Ray the columns and Arrow types
    to_arrow gives (Ray had no schema: no task, or only empty blocks), projected as asked."""
    zero, some = str(tmp_path / "zero.idv"), str(tmp_path / "some.idv")
    idv.write(zero, {"a": np.zeros(0, np.int32), "s": np.array([], object)},
              types={"s": idv.Text})
    idv.write(some, {"a": np.arange(10, dtype=np.int32), "s": np.array(list("abcdefghij"))})
    want = idv.to_arrow(zero).schema
    for data in (idv.ray.read_idv(zero), idv.ray.read_idv(some, filter=[("a", ">", 100)])):
        assert data.count() == 0
        schema = data.schema()
        assert schema is not None and list(schema.names) == want.names
        assert list(schema.types) == list(want.types)
    assert list(idv.ray.read_idv(zero).select_columns(["s"]).schema().names) == ["s"]


def test_a_written_dataset_reads_back_equal_and_ml_net_loads_each_file(oracle, tmp_path):
    paths = _paths(MIXED)
    ds = idv.ray.read_idv(paths, SCALARS + ["Vec", "Var"], blocks_per_task=4)
    sink = idv.ray.IdvDatasink(tmp_path / "out", name="day-{task:03d}.idv")
    ds.write_datasink(sink)
    assert sink.paths and all(p.endswith(".idv") for p in sink.paths)
    assert sorted(set(os.listdir(tmp_path / "out")) - {idv._storage.staging.MANIFEST}) == \
        sorted(os.path.basename(p) for p in sink.paths)
    columns = SCALARS + ["Vec", "Var"]
    with idv.dataset(sink.paths) as back, idv.dataset(paths, columns) as src:
        assert back.schema.fields == src.schema.fields
        got, want = back.read(), src.read()
    for name in columns:
        assert_equal_reads(got[name], want[name])
    docs = oracle.dump_many(sink.paths)
    assert all("error" not in doc for doc in docs.values()), docs
    for name in SCALARS:
        mlnet = np.concatenate([expected_column(docs[p], column_index(docs[p], name))
                                for p in sink.paths])
        assert len(mlnet) == 700
        for i, src in enumerate(MIXED):
            want = expected_column(sidecar(src), column_index(sidecar(src), name))
            assert_column_equal(mlnet[i * 100:(i + 1) * 100], want,
                                f"{src} {name}, through Ray and ML.NET")


def test_an_option_idv_write_does_not_take_is_refused_when_the_sink_is_made(tmp_path):
    with pytest.raises(TypeError, match="unexpected keyword argument 'mode'.*rows_per_block"):
        idv.ray.IdvDatasink(str(tmp_path / "out"), mode="append")
    assert os.listdir(tmp_path) == []


def test_a_failed_write_leaves_nothing(tmp_path):
    out = tmp_path / "out"
    out.mkdir()

    def fail_late(batch):
        if int(batch["Id"].to_numpy().min()) >= 50:
            raise RuntimeError("a task fails mid-write")
        return batch

    ds = idv.ray.read_idv(_paths(MIXED[:2]), ["Id", "F32"], blocks_per_task=1)
    with pytest.raises(Exception, match="mid-write"):
        ds.map_batches(fail_late, batch_format="pyarrow").write_datasink(
            idv.ray.IdvDatasink(out))
    assert os.listdir(out) == []
    with pytest.raises(ValueError, match="one file name per task"):
        idv.ray.IdvDatasink(out, name="fixed.idv")


def test_the_sink_writes_few_large_files(tmp_path):
    ds = ray.data.range(100_000, override_num_blocks=50).map_batches(
        lambda b: {"x": b["id"].astype(np.float64)})
    sink = idv.ray.IdvDatasink(tmp_path / "one")
    ds.write_datasink(sink)
    assert len(sink.paths) == 1                          # 100,000 rows: under one file's worth
    few = idv.ray.IdvDatasink(tmp_path / "few", rows_per_file=30_000)
    ds.write_datasink(few)
    assert 2 <= len(few.paths) <= 4
    with idv.dataset(few.paths) as back:
        sizes = [f.num_rows for f in back.files]
    assert sum(sizes) == 100_000
    assert sum(s < 30_000 for s in sizes) <= 1               # all but the remainder: full
    split = idv.ray.IdvDatasink(tmp_path / "split", rows_per_file=None)
    ds.write_datasink(split)
    assert len(split.paths) > len(few.paths)             # Ray's own split: more, smaller
    with pytest.raises(ValueError, match="rows_per_file"):
        idv.ray.IdvDatasink(tmp_path / "bad", rows_per_file=0)


def test_a_file_replaced_after_planning_is_refused_not_read(tmp_path):
    path = tmp_path / "f.idv"
    idv.write(path, {"x": np.arange(20_000, dtype=np.int64)}, rows_per_block=1000)
    ds = idv.ray.read_idv(str(path), blocks_per_task=5)
    idv.write(path, {"x": np.arange(40_000, dtype=np.int64) + 10**9}, rows_per_block=1000)
    with pytest.raises(idv.IdvFormatError, match="f.idv.*changed since the dataset listed"):
        ds.to_pandas()
    assert idv.ray.read_idv(str(path)).count() == 40_000          # planned anew


def test_a_dataset_without_rows_writes_one_file_of_its_columns(tmp_path):
    """A dataset whose rows a filter removed writes one file of its columns (as Spark's
    writer does), which reads back as them and no rows; one whose blocks lost their columns
    (a row filter's) publishes the directory's list, empty, rather than a file of no
    columns."""
    import ray
    ds = ray.data.from_arrow(pa.table({"x": [1, 2], "s": ["a", "b"]})).filter(expr="x > 5")
    sink = idv.ray.IdvDatasink(tmp_path / "out")
    ds.write_datasink(sink)
    assert [os.path.basename(p) for p in sink.paths] == \
        [os.path.basename(p) for p in (tmp_path / "out").glob("*.idv")] and len(sink.paths) == 1
    with idv.dataset(tmp_path / "out") as back:
        assert back.num_rows == 0
        assert {c: str(back.schema[c].type) for c in back.column_names} == \
            {"x": "Int64", "s": "Text"}
    none = idv.ray.IdvDatasink(tmp_path / "none")      # blocks that lost their columns
    ray.data.from_items([{"x": 1}]).filter(lambda r: r["x"] > 5).write_datasink(none)
    assert none.paths == []
    assert json.loads((tmp_path / "none" / idv._storage.staging.MANIFEST).read_text()) == \
        {"files": []}
    with pytest.raises(FileNotFoundError, match=r"names none \(the write that made it had no "
                                                r"rows\)"):
        idv.dataset(tmp_path / "none")
