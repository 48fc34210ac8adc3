"""Hive-partitioned directories: the folder names both ways (checked against pyarrow's own
hive partitioning), idv.write(partition_by=) and Dask's to_idv(partition_by=), and
idv.dataset(partitioning="hive"): the keys as columns, files pruned by filters on them."""
from __future__ import annotations

import os

import numpy as np
import pytest

import idv
from idv._storage import partitioning
from idv import types as T


def _files(root):
    """The .idv files under `root`, relative, sorted."""
    out = []
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        out += [os.path.relpath(os.path.join(dirpath, n), root).replace(os.sep, "/")
                for n in names if n.endswith(".idv")]
    return sorted(out)


@pytest.mark.parametrize("text", ["2024-01-01", "a/b", "x=y", "50%", "two words", "é€😀",
                                  "__HIVE", "", "-12"])
def test_a_folder_names_its_value_as_pyarrow_reads_it(text):
    pa = pytest.importorskip("pyarrow")
    ds = pytest.importorskip("pyarrow.dataset")
    folder = partitioning.segment("key", text)
    assert "/" not in folder and folder.count("=") == 1
    assert partitioning.parse(f"/root/{folder}/part.0.idv", "/root") == {"key": text}
    hive = ds.HivePartitioning(pa.schema([("key", pa.string())]))
    assert hive.parse(f"/{folder}/part.0.idv").equals(ds.field("key") == text)


def test_a_missing_value_is_hives_default_partition():
    pa = pytest.importorskip("pyarrow")
    ds = pytest.importorskip("pyarrow.dataset")
    folder = partitioning.segment("key", None)
    assert folder == "key=__HIVE_DEFAULT_PARTITION__"
    assert partitioning.parse(f"r/{folder}/f.idv", "r") == {"key": None}
    hive = ds.HivePartitioning(pa.schema([("key", pa.string())]))
    assert hive.parse(f"/{folder}/part.0.idv").equals(ds.field("key").is_null())


def test_values_become_folder_texts_by_one_rule():
    import datetime as dt
    cases = [(3, "3"), (np.int8(-4), "-4"), (True, "true"), (np.bool_(False), "false"),
             ("x", "x"), (2.5, "2.5"), (dt.date(2024, 1, 2), "2024-01-02"),
             (np.datetime64("2024-01-02"), "2024-01-02"),
             (np.datetime64("2024-01-02T03:04:05"), "2024-01-02T03:04:05"),
             (dt.datetime(2024, 1, 2, 3, 4, 5), "2024-01-02T03:04:05"),
             (None, None), (float("nan"), None), (np.datetime64("NaT"), None)]
    for value, text in cases:
        assert partitioning.text_of(value) == text, value
    with pytest.raises(TypeError, match="partition key"):
        partitioning.text_of(object())


def test_keys_read_back_as_int64_when_every_value_is_an_integer():
    found = [{"a": "1", "b": "x", "c": str(2**63), "d": None, "e": "4"},
             {"a": "-7", "b": "2", "c": "1", "d": None, "e": None},
             {"a": "0", "b": "3", "c": "2", "d": None, "e": "5"}]
    assert partitioning.column_types(found, ["a", "b", "c", "d", "e"]) == {
        "a": T.Int64, "b": T.Text, "c": T.Text, "d": T.Text, "e": T.Text}
    assert partitioning.value(None, T.Text) == ""
    with pytest.raises(ValueError, match="no Int64 form"):
        partitioning.value(None, T.Int64)
    assert partitioning.value("-7", T.Int64) == -7
    assert partitioning.value("007", T.Text) == "007"


def test_paths_whose_keys_differ_are_refused_naming_the_file():
    with pytest.raises(ValueError, match=r"r/b=1/f\.idv.*differ"):
        partitioning.common_keys(["r/a=1/f.idv", "r/b=1/f.idv"], "r")
    with pytest.raises(ValueError, match="twice"):
        partitioning.parse("r/a=1/a=2/f.idv", "r")


def test_groups_keep_the_order_of_first_rows_and_rows_in_order():
    got = partitioning.groups([np.array([2, 1, 2, 1, 3]), ["a", "a", "a", "b", None]])
    assert [(t, r.tolist()) for t, r in got] == [
        (("2", "a"), [0, 2]), (("1", "a"), [1]), (("1", "b"), [3]), (("3", None), [4])]
    nan = partitioning.groups([np.array([np.nan, 1.0, np.nan])])
    assert [(t, r.tolist()) for t, r in nan] == [((None,), [0, 2]), (("1.0",), [1])]


# ---------------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------------

def test_write_partition_by_a_frame_writes_a_file_per_combination(tmp_path):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"day": ["2024-01-01", "2024-01-02", "2024-01-01", None],
                       "x": np.arange(4.0), "k": [1, 2, 1, 2]})
    paths = idv.write(tmp_path / "out", df, partition_by=["day", "k"])
    assert _files(tmp_path / "out") == [
        "day=2024-01-01/k=1/part.0.idv", "day=2024-01-02/k=2/part.0.idv",
        "day=__HIVE_DEFAULT_PARTITION__/k=2/part.0.idv"]
    assert [os.path.relpath(p, tmp_path / "out").replace(os.sep, "/") for p in paths] == \
        _files(tmp_path / "out")
    got = idv.read(tmp_path / "out" / "day=2024-01-01" / "k=1" / "part.0.idv")
    assert list(got) == ["x"] and got["x"].tolist() == [0.0, 2.0]


def test_write_partition_by_an_arrow_table_and_a_dict(tmp_path):
    pa = pytest.importorskip("pyarrow")
    t = pa.table({"g": [3, 3, 4], "v": ["a/b", "c", "d"], "n": [1.5, 2.5, 3.5]})
    idv.write(tmp_path / "t", t, partition_by="v")
    assert _files(tmp_path / "t") == ["v=a%2Fb/part.0.idv", "v=c/part.0.idv", "v=d/part.0.idv"]
    assert idv.read(tmp_path / "t" / "v=a%2Fb" / "part.0.idv")["n"].tolist() == [1.5]
    idv.write(tmp_path / "d", {"g": np.array([1, 2, 1]), "s": ["p", "q", "r"]}, partition_by="g")
    assert idv.read(tmp_path / "d" / "g=1" / "part.0.idv")["s"].tolist() == ["p", "r"]


def test_write_partition_by_refuses_what_it_cannot_split(tmp_path):
    data = {"a": np.arange(3), "b": np.arange(3)}
    with pytest.raises(ValueError, match="partition_by must name"):
        idv.write(tmp_path / "x", data, partition_by=["c"])
    with pytest.raises(ValueError, match="every column"):
        idv.write(tmp_path / "x", data, partition_by=["a", "b"])
    with pytest.raises(TypeError, match="partition_by takes"):
        idv.write(tmp_path / "x", [("a", np.arange(3)), ("b", np.arange(3))], partition_by="a")
    assert not (tmp_path / "x").exists() or _files(tmp_path / "x") == []


def test_a_failed_partitioned_write_leaves_the_directory_as_it_was(tmp_path):
    out = tmp_path / "out"
    idv.write(out, {"k": np.array([1, 2]), "v": np.array([1.0, 2.0])}, partition_by="k")
    before = {f: (out / f).read_bytes() for f in _files(out)}
    # the second group's values cannot be written (a list of mixed types)
    bad = {"k": np.array([1, 3, 3]), "v": [1.0, "text", 2.0]}
    with pytest.raises((TypeError, ValueError)):
        idv.write(out, bad, partition_by="k")
    assert {f: (out / f).read_bytes() for f in _files(out)} == before
    assert not [d for d in os.listdir(out) if d.startswith(".")]


def test_dask_to_idv_partition_by_writes_each_partitions_groups(tmp_path):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    import idv.dask
    df = pd.DataFrame({"k": ["a", "b", "a", "b", "c", "a"], "x": np.arange(6, dtype=np.int32)})
    ddf = dd.from_pandas(df, npartitions=2, sort=False)
    paths = idv.dask.to_idv(ddf, tmp_path / "out", partition_by="k")
    assert _files(tmp_path / "out") == ["k=a/part.0.idv", "k=a/part.1.idv", "k=b/part.0.idv",
                                        "k=b/part.1.idv", "k=c/part.1.idv"]
    assert len(paths) == 5
    rows = {}
    for f in _files(tmp_path / "out"):
        rows.setdefault(f.split("/")[0], []).extend(
            idv.read(tmp_path / "out" / f)["x"].tolist())
    assert {k: sorted(v) for k, v in rows.items()} == {"k=a": [0, 2, 5], "k=b": [1, 3],
                                                       "k=c": [4]}
