"""idv.dask on a real distributed.LocalCluster (2 worker processes, the test session's,
conftest.py): datasets of ML.NET-written files read through Dask equal the single-process read; a
file written from Dask is loaded by ML.NET (the oracle) with the same values as the files it came
from.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import idv
from expected import (assert_column_equal, assert_equal_reads, assert_same_schema_and_values,
                      column_index, expected_column)
from reference import REPO_DIR, fixture, sidecar

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
pd = pytest.importorskip("pandas")
import idv.dask  # noqa: E402

MIXED = ["mixed_default", "mixed_deflate", "mixed_none", "mixed_smallblocks_deflate",
         "mixed_smallblocks_none", "mixed_smallblocks_ordered", "mixed_maxbytes"]
BIG = ["multiblock_200k_deflate", "multiblock_200k_none"]
# a computation on the cluster that takes longer than this is a failure, not a hang
TIMEOUT = 180


@pytest.fixture
def client(dask_client):
    """The test session's cluster (conftest.py)."""
    return dask_client


def _compute(client, collection):
    return client.compute(collection).result(timeout=TIMEOUT)


def _paths(names):
    return [str(fixture(n)) for n in names]


def test_a_dataset_through_dask_equals_the_single_process_read(client):
    paths = _paths(MIXED)
    ddf = idv.dask.read_idv(paths, blocks_per_partition=2)
    # partitions are groups of blocks, not files: 100 rows in blocks of 100, 7 and 3 rows
    per_file = [1, 1, 1, 8, 8, 8, 17]
    assert ddf.npartitions == sum(per_file)
    assert ddf.known_divisions and ddf.divisions[0] == 0 and ddf.divisions[-1] == 699
    got = _compute(client, ddf)
    with idv.dataset(paths) as ds:
        want = ds.to_pandas()
    assert list(got.index) == list(range(700))
    # variable vectors are object columns of arrays: compared row by row
    assert [v.tolist() for v in got.pop("Var")] == [v.tolist() for v in want.pop("Var")]
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    assert [str(d) for d in got.dtypes[["Id", "F32", "F64", "B", "DT"]]] == \
        ["int32", "float32", "float64", "bool", "datetime64[ns]"]
    # and ML.NET's own values, file by file
    for i, name in enumerate(MIXED):
        doc = sidecar(name)
        rows = got.iloc[i * 100:(i + 1) * 100]
        for col in ("Id", "F64"):
            assert_column_equal(rows[col].to_numpy(), expected_column(doc, column_index(doc, col)),
                                f"{name} {col}")


def test_one_big_file_gives_many_partitions_and_sums_agree(client):
    paths = _paths(BIG)
    ddf = idv.dask.read_idv(paths, blocks_per_partition=4)
    assert ddf.npartitions == 2 * 7          # 200,000 rows / (4 x 8192) per file
    assert ddf.divisions[:3] == (0, 32768, 65536)
    singles = [idv.read(p) for p in paths]
    total = sum(int(s["Id"].astype(np.int64).sum()) for s in singles)
    assert _compute(client, ddf["Id"].astype("int64").sum()) == total
    flags = sum(int(s["Flag"].sum()) for s in singles)
    assert _compute(client, ddf["Flag"].sum()) == flags
    part = _compute(client, ddf.loc[199_990:200_009, ["Id", "Name"]])
    assert part["Id"].tolist() == singles[0]["Id"][-10:].tolist() + singles[1]["Id"][:10].tolist()
    assert part["Name"].tolist() == \
        singles[0]["Name"][-10:].tolist() + singles[1]["Name"][:10].tolist()


def test_column_projection_reaches_the_reader(client, tmp_path):
    # X's blocks are damaged: a computation that needs only Id never decodes them
    folder = tmp_path / "d"
    folder.mkdir()
    paths = []
    for i, name in enumerate(BIG):
        dst = folder / f"{i}.idv"
        shutil.copyfile(fixture(name), dst)
        paths.append(str(dst))
    with idv.open(paths[0]) as f:
        table = f["X"].lookup
    with open(paths[0], "r+b") as fh:
        for entry in table:
            fh.seek(int(entry["offset"]))
            fh.write(b"\xff" * int(entry["disk"]))
    ddf = idv.dask.read_idv(str(folder), blocks_per_partition=8)
    assert _compute(client, ddf["Id"].max()) == 199_999
    assert _compute(client, ddf[["Id", "Flag"]].sum())["Id"] == 2 * sum(range(200_000))
    with pytest.raises(idv.IdvFormatError) as e:
        _compute(client, ddf["X"].sum())
    assert e.value.path == paths[0] and e.value.column == "X"
    # the expression itself carries the projection
    assert ddf[["Id"]].optimize().expr.columns == ["Id"]


def test_urls_reach_the_workers_with_their_filesystem(client, tmp_path):
    """A URL dataset (file://, through fsspec) is read by the worker processes, each opening
    the files through the pickled filesystem."""
    pytest.importorskip("fsspec")
    folder = tmp_path / "d"
    folder.mkdir()
    for i, name in enumerate(MIXED[:3]):
        shutil.copyfile(fixture(name), folder / f"{i}.idv")
    ddf = idv.dask.read_idv(f"file://{folder}", ["Id", "Txt"], blocks_per_partition=5)
    assert ddf.npartitions == 1 + 1 + 1
    got = _compute(client, ddf)
    assert got["Id"].tolist() == list(range(100)) * 3
    assert got["Txt"].tolist() == idv.read(str(fixture(MIXED[0])), "Txt")["Txt"].tolist() * 3


def test_a_vector_column_as_a_dask_array_chunked_by_blocks(client):
    paths = _paths(["mixed_smallblocks_deflate", "mixed_maxbytes"])
    arr = idv.dask.read_idv_array(paths, "Vec", blocks_per_chunk=2)
    assert arr.shape == (200, 4) and arr.dtype == np.float32
    assert arr.chunks[0] == (14,) * 7 + (2,) + (6,) * 16 + (4,)
    with idv.dataset(paths) as ds:
        want = ds.read("Vec")["Vec"]
    assert_equal_reads(_compute(client, arr), want)
    with pytest.raises(TypeError, match="variable-size vectors"):
        idv.dask.read_idv_array(paths, "Var")
    with pytest.raises(TypeError, match="numeric, Boolean and key columns"):
        idv.dask.read_idv_array(paths, "Txt")


COLUMNS = ["Id", "F32", "F64", "B", "Txt", "Key", "DT"]


def test_a_single_file_written_from_dask_is_loaded_by_ml_net(client, oracle, tmp_path):
    paths = _paths(MIXED)
    ddf = idv.dask.read_idv(paths, COLUMNS, blocks_per_partition=3)
    assert ddf.npartitions > len(paths)
    out = tmp_path / "from-dask.idv"
    assert idv.dask.to_idv(ddf, out) == str(out)
    doc = oracle.dump(out)
    assert [c["name"] for c in doc["columns"]] == COLUMNS
    assert len(doc["rows"]) == 700
    for name in COLUMNS:
        mlnet = expected_column(doc, column_index(doc, name))
        for i, src in enumerate(MIXED):
            want = expected_column(sidecar(src), column_index(sidecar(src), name))
            got = mlnet[i * 100:(i + 1) * 100]
            assert_column_equal(got, want, f"{src} {name}, through Dask and ML.NET")


def test_the_round_trip_through_dask_keeps_the_ml_net_schema(client, oracle, tmp_path):
    """read_idv's meta and every partition carry the schema (DataFrame.attrs), so to_idv
    writes the vectors, keys and KeyValues ML.NET wrote, whatever the partitioning."""
    paths = _paths(["mixed_smallblocks_none"])
    ddf = idv.dask.read_idv(paths, blocks_per_partition=1)
    assert idv.SCHEMA_ATTR in ddf._meta.attrs
    assert ddf.npartitions > 1
    parts = [_compute(client, ddf.partitions[i]) for i in (0, ddf.npartitions - 1)]
    assert all(p.attrs == ddf._meta.attrs for p in parts)
    ones = tmp_path / "one.idv"
    idv.dask.to_idv(ddf, ones)
    folder = tmp_path / "parts"
    written = idv.dask.to_idv(ddf[ddf["F64"] > 0], folder,
                              name_function=lambda i: f"p{i}.idv")
    dumps = oracle.dump_many([ones, written[0]])
    want = sidecar("mixed_smallblocks_none")
    names = [c["name"] for c in want["columns"]]
    assert_same_schema_and_values(dumps[str(ones)], want, names, "through Dask")
    part = dumps[written[0]]
    assert [c["type_string"] for c in part["columns"]] == \
        [c["type_string"] for c in want["columns"]]


def test_one_file_per_partition_in_parallel(client, tmp_path):
    paths = _paths(BIG)
    ddf = idv.dask.read_idv(paths, ["Id", "Name"], blocks_per_partition=10)
    folder = tmp_path / "parts"
    written = idv.dask.to_idv(ddf, folder, name_function=lambda i: f"day-{i:02d}.idv")
    assert written == [str(folder / f"day-{i:02d}.idv") for i in range(ddf.npartitions)]
    with idv.dataset(str(folder)) as back, idv.dataset(paths, ["Id", "Name"]) as src:
        assert back.num_rows == 400_000
        got, want = back.read(), src.read()
    for name in ("Id", "Name"):
        assert_equal_reads(got[name], want[name])


def test_bad_files_and_schemas_through_dask(tmp_path):
    a, b = str(tmp_path / "a.idv"), str(tmp_path / "b.idv")
    idv.write(a, {"x": np.arange(3, dtype=np.int32)})
    idv.write(b, {"x": np.arange(3, dtype=np.float32)})
    with pytest.raises(ValueError, match=f"{b}: column 'x' is Single, but Int32 in {a}"):
        idv.dask.read_idv([a, b])
    (tmp_path / "c.idv").write_bytes(b"\0" * 300)
    with pytest.warns(idv.IdvWarning, match="c.idv"):
        ddf = idv.dask.read_idv([a, str(tmp_path / "c.idv")], on_bad_file="skip")
    assert ddf.compute(scheduler="sync")["x"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("into", ["one file", "a file a partition"])
def test_to_idv_takes_idv_writes_options_as_idv_write_does(tmp_path, into):
    """types=, metadata= and missing_text= mean what they mean to idv.write of the computed
    frame (missing_text was not given to the partitions' conversion, metadata= and types=
    were refused); a refused value is named by its row in the file, or by its partition."""
    df = pd.DataFrame({"t": ["a", "b", "c", "d", None, "f"], "x": np.arange(6.0)})
    ddf = dd.from_pandas(df, npartitions=2)
    out = str(tmp_path / "one.idv") if into == "one file" else f"{tmp_path / 'parts'}/"
    options = dict(types={"x": idv.Single}, missing_text="",
                   metadata={"t": {"idv.Note": (idv.Text, "hello")}})
    idv.write(tmp_path / "whole.idv", df, **options)
    idv.dask.to_idv(ddf, out, **options)
    with idv.dataset(out) as got, idv.open(tmp_path / "whole.idv") as want:
        assert str(got.schema) == str(want.schema)
        assert got.read()["t"].tolist() == want.read()["t"].tolist()
    said = "row 4" if into == "one file" else "partition 1: column 't' row 1"
    with pytest.raises(ValueError, match=said):
        idv.dask.to_idv(ddf, out.replace("one", "two").replace("parts", "other"))


def test_partitions_with_different_categories_are_refused(tmp_path):
    df = pd.DataFrame({"k": ["a", "b", "c", "d"], "x": np.arange(4)})
    ddf = dd.from_pandas(df, npartitions=2).map_partitions(
        lambda p: p.assign(k=p["k"].astype("category")))
    out = tmp_path / "cats.idv"
    with pytest.raises(ValueError, match="partition 1: the categories of column 'k' differ"):
        idv.dask.to_idv(ddf, out, lookahead=1)
    assert not out.exists()           # nothing left behind
    idv.dask.to_idv(ddf.assign(k=ddf["k"].astype(pd.CategoricalDtype(list("abcd")))), out)
    with idv.open(out) as f:
        assert str(f["k"].type) == "Key<UInt32, 4>"
        assert f["k"].metadata["KeyValues"].tolist() == ["a", "b", "c", "d"]
        assert f["k"].read().tolist() == [1, 2, 3, 4]


def test_without_dask_the_error_names_the_extra(tmp_path):
    code = ("import sys; sys.modules['distributed'] = None\n"
            "import idv, idv.dask\n"
            "try:\n"
            "    idv.dask.read_idv(idv.sample_path())\n"
            "except idv.MissingDependencyError as e:\n"
            "    print(e)\n")
    env = dict(os.environ, PYTHONPATH=str(REPO_DIR))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "pip install 'idv[dask]'" in proc.stdout


@pytest.mark.parametrize("name", ["../x-{i}.idv", "{tmp}/abs-{i}.idv", "a/../../y-{i}.idv",
                                  "same.idv", ""])
def test_partition_names_stay_inside_the_directory(tmp_path, name):
    ddf = dd.from_pandas(pd.DataFrame({"x": np.arange(6, dtype=np.int32)}), npartitions=3)
    out = tmp_path / "inner" / "parts"
    with pytest.raises(ValueError, match="name_function"):
        idv.dask.to_idv(ddf, out, name_function=lambda i: name.format(i=i, tmp=tmp_path))
    assert not list(tmp_path.rglob("*.idv"))


def _idle(client):
    """Wait until no task runs on the cluster (a partition still being written when another
    failed finishes after to_idv raised)."""
    deadline = time.monotonic() + TIMEOUT
    while any(client.processing().values()):
        assert time.monotonic() < deadline, "the cluster stays busy"
        time.sleep(0.05)


def test_a_failed_partition_leaves_no_data_set(client, tmp_path):
    df = pd.DataFrame({"x": np.arange(1000, dtype=np.int32)})

    def fail_one(p):
        if len(p) and p["x"].iloc[0] == 900:
            raise RuntimeError("partition 9 fails")
        return p
    ddf = dd.from_pandas(df, npartitions=10).map_partitions(fail_one, meta=df.iloc[:0])
    out = tmp_path / "parts"
    with pytest.raises(RuntimeError, match="partition 9 fails"):
        idv.dask.to_idv(ddf, out, name_function=lambda i: f"sub/p{i}.idv")
    assert not list(out.rglob("*.idv"))       # no part visible, even while others finish
    _idle(client)
    # and then no staging directory either, nor the directory the job made: a task the
    # scheduler had not yet handed out when the job failed may still run, and removes what it
    # wrote when it ends
    deadline = time.monotonic() + TIMEOUT
    while out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not out.exists()
    good = dd.from_pandas(df.iloc[:900], npartitions=9)
    written = idv.dask.to_idv(good, out, name_function=lambda i: f"sub/p{i}.idv")
    assert written[0] == str(out / "sub" / "p0.idv")
    with idv.dataset(str(out)) as ds:
        assert ds.num_rows == 900
    assert sorted(p.name for p in out.iterdir()) == sorted(["sub", idv._storage.staging.MANIFEST])


def test_compute_false_writes_when_computed_and_a_failed_write_leaves_nothing(client,
                                                                               tmp_path):
    """to_idv(compute=False) touches nothing until its delayed is computed (one never
    computed leaves no trace); computed, it writes the parts. A partition that fails to be
    written (a value its column cannot hold) removes the job's staging folder itself, as no
    driver waits on the delayed; and a commit after that abort is refused."""
    df = pd.DataFrame({"x": np.arange(1000, dtype=np.int32),
                       "t": [f"r{i}" for i in range(1000)]})
    out = tmp_path / "parts"
    idv.dask.to_idv(dd.from_pandas(df, npartitions=4), f"{out}/", compute=False)
    assert not out.exists()
    later = idv.dask.to_idv(dd.from_pandas(df, npartitions=4), f"{out}/", compute=False)
    assert not out.exists()
    written = later.compute()
    assert len(written) == 4
    with idv.dataset(str(out)) as ds:
        assert ds.read(["x"])["x"].tolist() == list(range(1000))
    def unwritable(p):      # partition 9: a text column holding a dict
        if len(p) and p["x"].iloc[0] == 900:
            p = p.assign(t=np.array([{"not": "text"}] * len(p), dtype=object))
        return p
    bad = dd.from_pandas(df, npartitions=10).map_partitions(unwritable, meta=df.iloc[:0])
    failing = idv.dask.to_idv(bad, f"{tmp_path}/bad/", compute=False)
    assert not (tmp_path / "bad").exists()
    with pytest.raises((TypeError, ValueError), match="partition 9"):
        failing.compute()
    _idle(client)
    deadline = time.monotonic() + TIMEOUT
    while (tmp_path / "bad").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not (tmp_path / "bad").exists()
    from idv._storage.staging import Staging
    job = Staging(tmp_path / "c")
    job.start()
    job.abort()
    with pytest.raises(RuntimeError, match="aborted"):
        job.commit([])
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("bad,match", [
    ("oops", r"column 'x' row 25: 'oops' \(str\) is not a number"),    # refused by the Writer
    (None, r"column 'x' row 25: None, but Int64 has no missing value"),  # by the conversion
], ids=["writer", "conversion"])
def test_one_file_names_a_refused_value_by_its_row_in_the_file(client, tmp_path, bad, match):
    """to_idv into one file: a value refused in partition 2 (rows 20-29) is named by its row
    in the file, whichever layer refuses it."""
    parts = [pd.DataFrame({"x": np.arange(10 * i, 10 * i + 10)}) for i in range(3)]
    parts[2] = parts[2].astype(object)
    parts[2].loc[5, "x"] = bad
    import dask
    ddf = dd.from_delayed([dask.delayed(lambda d: d)(p) for p in parts], meta=parts[0],
                          verify_meta=False)
    with pytest.raises((TypeError, ValueError), match=match):
        idv.dask.to_idv(ddf, tmp_path / "one.idv")
    assert not list(tmp_path.iterdir())


def test_a_task_failing_after_the_job_was_aborted_leaves_the_error_to_the_first(tmp_path):
    """A partition whose write fails because another task already failed and aborted the
    job (its staging folder removed under it) returns quietly: the job's error is the
    first task's, not a FileNotFoundError about the staging folder."""
    from idv._engines.dask_writer import _write_partition
    from idv._storage.staging import Staging
    job = Staging(tmp_path / "out")
    job.start()
    job.abort()
    df = pd.DataFrame({"x": np.arange(3, dtype=np.int32)})
    assert _write_partition(df, job, 0, {}) is None
    assert not (tmp_path / "out").exists()
    live = Staging(tmp_path / "live")
    live.start()
    bad = pd.DataFrame({"x": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(TypeError, match="mixed or unsupported"):
        _write_partition(bad, live, 0, {})
    assert live.aborted() and not (tmp_path / "live").exists()


def test_the_limit_set_here_holds_in_the_worker_processes(client, tmp_path):
    """idv.set_memory_limit holds in the cluster's worker processes too, which have none set
    of their own: a partition whose block is over it is refused there, as a read here is."""
    path = tmp_path / "big.idv"
    idv.write(path, {"x": np.arange(20_000, dtype=np.int64)}, rows_per_block=10_000)
    idv.set_memory_limit(30_000)                 # a block of 'x' decodes to 80 KB
    try:
        with pytest.raises(idv.MemoryLimitError, match="over idv's memory limit"):
            idv.read(path)
        ddf = idv.dask.read_idv(str(path), columns=["x"])
        with pytest.raises(Exception, match=r"(?s)MemoryLimitError|over idv's memory limit"):
            _compute(client, ddf)
    finally:
        idv.set_memory_limit(None)
    assert int(_compute(client, idv.dask.read_idv(str(path), columns=["x"])["x"].sum())) == \
        sum(range(20_000))


def test_every_file_of_a_directory_write_has_the_meta_types(client, tmp_path):
    """One type per column in every file, as idv.write(partition_by=) gives: a partition
    whose int64 column (by Dask's meta) arrives as floats is written as Int64, so the folder
    reads as one dataset; one holding a NaN there is refused, naming its row."""
    import dask
    meta = pd.DataFrame({"x": np.arange(3, dtype=np.int64), "t": ["a", "b", "c"]})
    parts = [meta, meta.assign(x=meta["x"].astype(np.float64) + 3)]
    ddf = dd.from_delayed([dask.delayed(lambda d: d)(p) for p in parts], meta=meta.iloc[:0],
                          verify_meta=False)
    paths = idv.dask.to_idv(ddf, f"{tmp_path}/out/")
    for p in paths:
        with idv.open(p) as f:
            assert f["x"].type == idv.Int64 and f["t"].type == idv.Text
    with idv.dataset(f"{tmp_path}/out/") as ds:
        assert ds.read(["x"])["x"].tolist() == [0, 1, 2, 3, 4, 5]
    parts[1] = parts[1].assign(x=[3.0, np.nan, 5.0])
    ddf = dd.from_delayed([dask.delayed(lambda d: d)(p) for p in parts], meta=meta.iloc[:0],
                          verify_meta=False)
    with pytest.raises(ValueError, match="column 'x' row 1"):
        idv.dask.to_idv(ddf, f"{tmp_path}/bad/")
    assert not (tmp_path / "bad").exists()


def test_a_directory_writes_its_object_columns_with_the_first_partitions_types(client,
                                                                               tmp_path):
    """Columns of objects (lists, text) have the types the first partition's values give,
    in every file, as to_idv into one file takes them: a partition of empty lists, which
    alone would say Vector<Double>, is written Vector<Text> beside the others, and the
    folder reads as one dataset (by key folders too)."""
    import dask
    with dask.config.set({"dataframe.convert-string": False}):
        df = pd.DataFrame({"k": [1, 1, 2, 2], "t": [["a", ""], ["x"], [], []]})
        ddf = dd.from_pandas(df, npartitions=2, sort=False)
        for where, by in (("plain", None), ("keyed", "k")):
            paths = idv.dask.to_idv(ddf, f"{tmp_path}/{where}/", partition_by=by)
            for p in paths:
                with idv.open(p) as f:
                    assert f["t"].type == idv.Vector(idv.Text), (where, p)
            with idv.dataset(f"{tmp_path}/{where}/") as ds:
                assert [list(r) for r in ds.read(["t"])["t"]] == [["a", ""], ["x"], [], []]


def test_a_task_finishing_after_an_abort_removes_what_it_wrote(tmp_path):
    """A partition still being written when another fails: the abort may run while its file
    is half-written (the staging folder, and the output directory the job made, cannot be
    removed then); settling it afterwards removes the file and both folders. A task of a
    live job keeps its file."""
    from idv._storage.staging import Staging
    live = Staging(tmp_path / "a")
    live.start()
    kept = live.staged("p0.idv")
    idv.write(kept, {"x": np.arange(3, dtype=np.int32)})
    live.settle(kept)
    assert os.path.exists(kept)
    late = Staging(tmp_path / "b")
    late.start()
    late.abort()
    os.makedirs(late.dir)                  # as a writer's temporary file keeps it alive
    path = late.staged("p1.idv")
    idv.write(path, {"x": np.arange(3, dtype=np.int32)})
    late.settle(path)
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("stats", [True, False], ids=["statistics", "none"])
def test_a_filter_reads_the_matching_rows_and_drops_partitions_ruled_out(client, tmp_path,
                                                                         stats):
    rng = np.random.default_rng(5)
    rows = 5000
    data = {"Id": np.arange(rows, dtype=np.int64), "I": rng.integers(0, 100, rows),
            "Txt": np.array([f"t{i % 37}" for i in range(rows)], dtype=object)}
    paths = [str(tmp_path / f"part{k}.idv") for k in range(2)]
    for k, p in enumerate(paths):
        idv.write(p, {n: v[k * 2500:(k + 1) * 2500] for n, v in data.items()},
                  rows_per_block=250, statistics=stats)
    full = pd.concat([idv.read_pandas(p) for p in paths], ignore_index=True)
    every = idv.dask.read_idv(paths, blocks_per_partition=2)
    for flt, mask in [([("Id", ">=", 2400), ("Id", "<", 2600), ("I", "<", 50)],
                       (full.Id >= 2400) & (full.Id < 2600) & (full.I < 50)),
                      ("Txt == 't3' or I > 97", (full.Txt == "t3") | (full.I > 97)),
                      ([("Id", "<", 0)], full.Id < 0)]:
        ddf = idv.dask.read_idv(paths, blocks_per_partition=2, filter=flt)
        got = _compute(client, ddf)
        pd.testing.assert_frame_equal(got, full[mask], check_index_type=False)
        assert _compute(client, ddf["Txt"]).tolist() == full.Txt[mask].tolist()
        if ddf.known_divisions:           # each partition's rows within its divisions
            for i in range(ddf.npartitions):
                index = _compute(client, ddf.partitions[i]).index
                assert ((index >= ddf.divisions[i]) & (index <= ddf.divisions[i + 1])).all()
    sorted_filter = [("Id", ">=", 2400), ("Id", "<", 2600)]
    kept = idv.dask.read_idv(paths, blocks_per_partition=2, filter=sorted_filter).npartitions
    # statistics rule out every partition but the two holding rows 2400-2599
    assert kept == (2 if stats else every.npartitions)


def test_a_filter_the_columns_refuse_is_refused_on_a_file_without_rows(tmp_path):
    path = str(tmp_path / "empty.idv")
    idv.write(path, {"x": np.zeros(0, np.int32), "t": np.array([], dtype=object)})
    for where, error in [("t == 5", TypeError), ("nope == 1", KeyError)]:
        with pytest.raises(error, match="'t'|'nope'"):
            idv.dask.read_idv(path, filter=where).compute(scheduler="sync")
    assert len(idv.dask.read_idv(path, filter="t == 'a'").compute(scheduler="sync")) == 0


def _replace_after_planning(path, rows, how):
    """`path` (int64 values, 1,000 rows a block) given `rows` other values: replaced by
    idv.write (a new file renamed in) or rewritten in place, a newer modification time."""
    values = np.arange(rows, dtype=np.int64) + 10**9
    if how == "replaced":
        idv.write(path, {"x": values}, rows_per_block=1000)
    else:
        idv.write(str(path) + ".new", {"x": values}, rows_per_block=1000)
        with open(str(path) + ".new", "rb") as src, open(path, "r+b") as out:
            out.truncate(0)
            out.write(src.read())
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


@pytest.mark.parametrize("rows", [20_000, 40_000], ids=["same-rows", "more-rows"])
@pytest.mark.parametrize("how", ["replaced", "rewritten"])
def test_a_file_changed_after_planning_is_refused_not_read(tmp_path, rows, how):
    path = tmp_path / "f.idv"
    idv.write(path, {"x": np.arange(20_000, dtype=np.int64)}, rows_per_block=1000)
    ddf = idv.dask.read_idv(str(path), blocks_per_partition=5)
    arr = idv.dask.read_idv_array(str(path), "x", blocks_per_chunk=5)
    assert ddf.compute(scheduler="sync")["x"].sum() == arr.sum().compute() == 199_990_000
    _replace_after_planning(path, rows, how)
    for collection in (ddf, arr):
        with pytest.raises(idv.IdvFormatError, match="f.idv.*changed since the dataset listed"):
            collection.compute(scheduler="sync")
    assert len(idv.dask.read_idv(str(path)).compute(scheduler="sync")) == rows   # planned anew


def test_workers_refuse_a_file_replaced_after_planning(client, tmp_path):
    path = tmp_path / "f.idv"
    idv.write(path, {"x": np.arange(20_000, dtype=np.int64)}, rows_per_block=1000)
    ddf = idv.dask.read_idv(str(path), blocks_per_partition=5)
    assert _compute(client, ddf["x"].sum()) == 199_990_000
    _replace_after_planning(path, 20_000, "replaced")
    with pytest.raises(idv.IdvFormatError, match="f.idv.*another file is in its place"):
        _compute(client, ddf["x"].sum())


def _offsets(minutes):
    """A DateTimeOffset column: 2020-01-01T00:00Z at each UTC offset of `minutes`."""
    a = np.zeros(len(minutes), [("utc", "datetime64[100ns]"), ("offset_minutes", "int16")])
    a["utc"] = np.datetime64("2020-01-01T00:00", "100ns")
    a["offset_minutes"] = minutes
    return a


@pytest.mark.parametrize("minutes, zone", [([60, 60, 120, 120], "UTC"),
                                           ([60, 60, 60, 60], "UTC+01:00")])
def test_a_datetimeoffset_column_has_one_zone_however_it_is_cut(tmp_path, minutes, zone):
    one, a, b = (str(tmp_path / f"{n}.idv") for n in ("one", "a", "b"))
    idv.write(one, {"d": _offsets(minutes), "i": np.arange(4)}, types={"d": idv.DateTimeOffset},
              rows_per_block=2)
    idv.write(a, {"d": _offsets(minutes[:2]), "i": np.arange(2)},
              types={"d": idv.DateTimeOffset})
    idv.write(b, {"d": _offsets(minutes[2:]), "i": np.arange(2)},
              types={"d": idv.DateTimeOffset})
    want = f"datetime64[ns, {zone}]"
    assert str(idv.read_pandas(one)["d"].dtype) == want
    for source in (one, [a, b]):
        ddf = idv.dask.read_idv(source, blocks_per_partition=1)
        assert ddf.npartitions == 2
        got = ddf.compute(scheduler="sync")["d"]
        assert str(ddf["d"].dtype) == want and str(got.dtype) == want
        assert {str(ddf.partitions[i].compute(scheduler="sync")["d"].dtype)
                for i in range(2)} == {want}
        assert (got == pd.Timestamp("2020-01-01", tz="UTC")).all()
        only = idv.dask.read_idv(source, blocks_per_partition=1, filter="i < 1")
        assert str(only.compute(scheduler="sync")["d"].dtype) == want
    with idv.dataset([a, b]) as ds:
        assert str(ds.to_pandas()["d"].dtype) == want
        assert str(ds.to_pandas(filter="i < 1")["d"].dtype) == want
        assert str(ds.to_pandas(filter="i < 0")["d"].dtype) == want
        assert len(ds.to_pandas(filter="i < 1")) == 2


def test_a_datetimeoffset_column_has_the_zone_of_every_row_whatever_rows_are_read(tmp_path):
    """The zone is every row's, of the file or the dataset: not the one offset the rows a
    filter or rows= keeps share, whatever the entry point."""
    one, a, b = (str(tmp_path / f"{n}.idv") for n in ("one", "a", "b"))
    for path, minutes in ((one, [330, 330, 0, 60]), (a, [330, 330]), (b, [0, 60])):
        idv.write(path, {"d": _offsets(minutes), "i": np.arange(len(minutes))},
                  types={"d": idv.DateTimeOffset}, rows_per_block=2)
    want = "datetime64[ns, UTC]"
    assert str(idv.read_pandas(one)["d"].dtype) == want
    got = {"read_pandas filter": idv.read_pandas(one, filter="i < 2")["d"],
           "to_pandas rows": idv.to_pandas(one, rows=slice(0, 2))["d"],
           "dask filter": idv.dask.read_idv(one, filter="i < 2").compute(scheduler="sync")["d"]}
    with idv.open(one) as f:
        got["IdvFile.to_pandas filter"] = f.to_pandas(["d"], filter="i < 2")["d"]
    with idv.dataset([a, b]) as ds:
        got["dataset rows"] = ds.to_pandas(rows=slice(0, 2))["d"]
    for how, s in got.items():
        assert str(s.dtype) == want, how
        assert (s == pd.Timestamp("2020-01-01", tz="UTC")).all() and len(s) == 2, how
    # every row in one offset: that zone, for the rows kept too
    idv.write(one, {"d": _offsets([330, 330, 330, 330]), "i": np.arange(4)},
              types={"d": idv.DateTimeOffset}, rows_per_block=2)
    assert str(idv.read_pandas(one, filter="i < 2")["d"].dtype) == "datetime64[ns, UTC+05:30]"


def test_each_slot_of_a_datetimeoffset_vector_has_the_zone_of_every_row(tmp_path):
    """A vector's slots are columns of their own in pandas, each in the zone of its every
    row (slot 0 in one offset, slot 1 in two), whatever rows a read keeps."""
    one = str(tmp_path / "one.idv")
    v = np.stack([_offsets([60, 60, 60, 60]), _offsets([120, 120, 330, 330])], axis=1)
    idv.write(one, {"v": v, "i": np.arange(4)}, types={"v": idv.Vector(idv.DateTimeOffset, 2)},
              rows_per_block=2)
    want = ["datetime64[ns, UTC+01:00]", "datetime64[ns, UTC]"]
    got = {"whole": idv.read_pandas(one), "filter": idv.read_pandas(one, filter="i < 2"),
           "rows": idv.to_pandas(one, rows=slice(2, 4)),
           "dask": idv.dask.read_idv(one, filter="i >= 2").compute(scheduler="sync")}
    for how, df in got.items():
        assert [str(df[c].dtype) for c in ("v.0", "v.1")] == want, how
        assert (df["v.1"] == pd.Timestamp("2020-01-01", tz="UTC")).all(), how


def test_partitions_are_cut_to_fit_the_memory_limit(tmp_path):
    """A partition is read whole (a frame checked against the limit before it is read): by
    default the partitions hold at most half the limit, so each one reads; the frame is
    the file's."""
    path = str(tmp_path / "w.idv")
    data = {f"c{i}": np.arange(200_000, dtype=np.float64) + i for i in range(4)}
    idv.write(path, data, rows_per_block=8192)           # 6.4 MB of values
    ddf = idv.dask.read_idv(path, memory_limit=4_000_000)
    assert ddf.npartitions >= 4
    got = ddf.compute(scheduler="sync")
    assert np.array_equal(got["c3"].to_numpy(), data["c3"])


def test_files_whose_slot_names_differ_are_refused_where_slots_become_columns(tmp_path):
    """Slot columns named by SlotNames hold one set of names: a dataset whose files name
    them otherwise is refused by Dataset.to_pandas and Dask alike (as idv.convert refuses
    it), naming the file and column; kept as one column of arrays, it reads."""
    a, b = str(tmp_path / "a.idv"), str(tmp_path / "b.idv")
    idv.write(a, {"v": np.array([[1.0, 2.0]])}, metadata={"v": {"SlotNames": ["a", "b"]}})
    idv.write(b, {"v": np.array([[1.0, 2.0]])}, metadata={"v": {"SlotNames": ["b", "a"]}})
    with idv.dataset([a, b]) as ds:
        with pytest.raises(ValueError, match=r"b\.idv: column 'v' has other SlotNames"):
            ds.to_pandas()
        assert [list(x) for x in ds.to_pandas(vectors="object")["v"]] == [[1.0, 2.0]] * 2
    with pytest.raises(ValueError, match=r"b\.idv: column 'v' has other SlotNames"):
        idv.dask.read_idv([a, b])
    got = idv.dask.read_idv([a, b], vectors="object").compute(scheduler="sync")
    assert [list(x) for x in got["v"]] == [[1.0, 2.0]] * 2
    same = str(tmp_path / "c.idv")
    idv.write(same, {"v": np.array([[3.0, 4.0]])}, metadata={"v": {"SlotNames": ["a", "b"]}})
    assert idv.dask.read_idv([a, same]).compute(scheduler="sync")["v.b"].tolist() == [2.0, 4.0]


def test_the_meta_and_its_columns_sources_come_from_one_frame(tmp_path, monkeypatch):
    """The lazy frame's meta is one empty frame of every column, and which idv column each of
    its columns (a vector's slots too) comes from is read off it: a wide file is planned
    without a frame per column; a projection reads the columns it names."""
    import idv._interop.pandas as idv_pandas
    path = str(tmp_path / "w.idv")
    n = 40
    data = {f"c{k}": np.arange(n, dtype=np.int32) + k for k in range(30)}
    data["V"] = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
    data["T"] = np.array([f"t{i}" for i in range(n)], object)
    idv.write(path, data, metadata={"V": {"SlotNames": ["a", "", "c"]}}, rows_per_block=16)
    frames = []
    frame = idv_pandas.frame
    monkeypatch.setattr(idv_pandas, "frame", lambda *a, **k: frames.append(1) or frame(*a, **k))
    ddf = idv.dask.read_idv(path)
    assert len(frames) == 1
    assert list(ddf.columns) == [f"c{k}" for k in range(30)] + ["V.a", "V.1", "V.c", "T"]
    got = ddf[["V.c", "c29", "T"]].compute(scheduler="sync")
    assert got["V.c"].tolist() == data["V"][:, 2].tolist()
    assert got["c29"].tolist() == data["c29"].tolist()
    assert got["T"].tolist() == data["T"].tolist()


def test_len_reads_no_partition_whose_rows_are_known(tmp_path, monkeypatch):
    """Every partition's rows are known when the frame is planned: len, and what dask reduces
    to len, open no file; the rows a filter keeps are counted by reading."""
    for i, n in enumerate((50, 60, 70)):
        idv.write(str(tmp_path / f"{i}.idv"), {"x": np.arange(n), "t": np.array(
            [f"w{j}" for j in range(n)], object)}, rows_per_block=16)
    ddf = idv.dask.read_idv(str(tmp_path), blocks_per_partition=1)
    opened = []
    open_listed = idv.dask.open_listed
    monkeypatch.setattr(idv.dask, "open_listed", lambda *a: opened.append(a) or open_listed(*a))
    import dask
    with dask.config.set(scheduler="sync"):
        assert [len(ddf), len(ddf["x"]), len(ddf[["t"]]), len(ddf.assign(y=ddf["x"] + 1)),
                ddf.shape[0].compute(), len(ddf.set_index("x"))] == [50 + 60 + 70] * 6
        assert opened == []
        assert len(ddf[ddf["x"] >= 20]) == 30 + 40 + 50
        assert len(opened) >= ddf.npartitions   # every partition (its index read apart too)
        opened.clear()
        kept = idv.dask.read_idv(str(tmp_path), blocks_per_partition=1, filter="x >= 20")
        assert len(kept) == 30 + 40 + 50
        assert len(opened) == kept.npartitions == 13 - 3     # block 0 of each file ruled out
        assert ddf["x"].sum().compute() == sum(range(50)) + sum(range(60)) + sum(range(70))


def test_keys_whose_files_name_other_labels_share_the_union_of_their_categories(tmp_path):
    """Each file's KeyValues name its own keys (here in another order, or other labels): the
    frame's categories are known, the union of the files' labels in file order, and every
    partition has them, so one code is one label across partitions."""
    keys = np.array([1, 2, 3, 0, 1], np.uint32)
    labels = [["a", "b", "c"], ["c", "b", "a"], ["z", "a", "y"]]
    for i, names in enumerate(labels):
        idv.write(str(tmp_path / f"{i}.idv"), {"K": keys}, types={"K": idv.Key(idv.UInt32, 3)},
                  metadata={"K": {"KeyValues": names}})
    want = [names[k - 1] if k else None for names in labels for k in keys]
    ddf = idv.dask.read_idv(str(tmp_path))
    assert ddf["K"].cat.known and list(ddf["K"].cat.categories) == ["a", "b", "c", "z", "y"]
    for i in range(ddf.npartitions):
        part = ddf.partitions[i].compute(scheduler="sync")["K"]
        assert list(part.cat.categories) == ["a", "b", "c", "z", "y"]
    got = ddf.compute(scheduler="sync")["K"]
    assert [None if pd.isna(v) else v for v in got] == want
    codes = ddf["K"].cat.codes.compute(scheduler="sync").tolist()
    assert [ddf["K"].cat.categories[c] if c >= 0 else None for c in codes] == want
    dummies = dd.get_dummies(ddf[["K"]]).compute(scheduler="sync")
    assert dummies.sum().to_dict() == {f"K_{v}": want.count(v) for v in "abczy"}
    kept = idv.dask.read_idv(str(tmp_path), filter="K == 'z'").compute(scheduler="sync")
    assert kept["K"].tolist() == ["z", "z"] and kept["K"].cat.codes.tolist() == [3, 3]


def test_a_datetimeoffset_column_written_in_other_zones_is_in_one_zone(tmp_path):
    """Files written from pandas in different zones: every partition is in the meta's zone,
    the one read_pandas gives the dataset, its instants those written."""
    t = pd.to_datetime(["2001-01-01 00:00:01", "2001-07-01 00:00:02"]).as_unit("us")
    written = [t.tz_localize("Europe/Paris"), t.tz_localize("America/New_York")]
    for i, times in enumerate(written):
        idv.write(str(tmp_path / f"{i}.idv"), pd.DataFrame({"c": times}))
    want = idv.read_pandas(idv.dataset(str(tmp_path)))["c"].dtype
    ddf = idv.dask.read_idv(str(tmp_path))
    assert ddf["c"].dtype == want
    assert [ddf.partitions[i].compute(scheduler="sync")["c"].dtype
            for i in range(ddf.npartitions)] == [want] * 2
    got = ddf.compute(scheduler="sync")["c"]
    assert got.dtype == want and got.tolist() == [*written[0], *written[1]]


def test_filters_spelled_as_dask_and_pyarrow_spell_them_is_refused_naming_filter(tmp_path):
    path = str(tmp_path / "k.idv")
    idv.write(path, {"x": np.arange(3)})
    with pytest.raises(TypeError, match=r"read_idv\(\) .*'filters'.* filter="):
        idv.dask.read_idv(path, filters=[("x", "==", 1)])
    assert idv.dask.read_idv(path, filter=[("x", "==", 1)]).compute(
        scheduler="sync")["x"].tolist() == [1]


@pytest.mark.parametrize("dest", ["file.idv", "parts/"])
def test_an_option_idv_write_does_not_take_is_refused_before_any_task(tmp_path, dest):
    """Not once per task, late, as the Writer's TypeError; nothing is made."""
    ddf = dd.from_pandas(pd.DataFrame({"x": np.arange(4)}), npartitions=2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'mode'.*rows_per_block"):
        idv.dask.to_idv(ddf, str(tmp_path / dest), mode="append")
    assert os.listdir(tmp_path) == []


def test_a_frame_without_columns_keeps_its_rows_into_one_file_or_many(tmp_path):
    """As idv.write keeps a DataFrame's rows without columns (ML.NET's saver writes such
    files), to_idv does, into one file and into a directory; it wrote no rows."""
    ddf = dd.from_pandas(pd.DataFrame(index=range(3)), npartitions=2)
    idv.dask.to_idv(ddf, tmp_path / "one.idv")
    with idv.open(tmp_path / "one.idv") as f:
        assert (f.num_rows, f.num_columns) == (3, 0)
    idv.dask.to_idv(ddf, str(tmp_path / "many") + "/")
    with idv.dataset(tmp_path / "many") as ds:
        assert ds.num_rows == 3

