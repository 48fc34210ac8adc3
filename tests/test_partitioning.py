"""Hive-partitioned directories: the folder names both ways (checked against pyarrow's own
hive partitioning), idv.write(partition_by=) and Dask's to_idv(partition_by=), and
idv.dataset(partitioning="hive"): the keys as columns, files pruned by filters on them."""
from __future__ import annotations

import os
import stat
from collections import Counter

import numpy as np
import pytest

import idv
from idv._storage import partitioning, staging
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
             (None, None), (float("nan"), None), (np.datetime64("NaT"), None),
             (partitioning.NULL, None)]
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


@pytest.mark.parametrize("spread", [3, 1_000, 1 << 40])
def test_groups_equal_a_dict_of_rows_by_their_key_texts(spread):
    """Three keys (ints over a small and a wide range, floats with NaN, texts), many
    combinations: the rows of each as a dict filled row by row gives them."""
    rng = np.random.default_rng(spread)
    n = 5_000
    ints = rng.integers(-spread, spread, n)
    floats = np.where(rng.random(n) < 0.1, np.nan, rng.integers(0, 7, n) / 2)
    texts = [f"t{v}" for v in rng.integers(0, 5, n)]
    expected = {}
    for i, key in enumerate(zip(ints.tolist(), floats.tolist(), texts)):
        expected.setdefault(tuple(partitioning.text_of(v) for v in key), []).append(i)
    got = partitioning.groups([ints, floats, texts])
    assert [(t, r.tolist()) for t, r in got] == list(expected.items())


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


@pytest.mark.skipif(os.name == "nt", reason="Windows opens no directory to fsync it")
def test_a_partitioned_write_fsyncs_each_file_and_each_folder_once(tmp_path, monkeypatch):
    """Every file is fsynced before it is published, and each folder it passes through once
    (the staging folder after all the files are in it, not once a file); the staging folder
    is listed once for the temporary files of killed writers."""
    synced, listed, fsync, listdir = [], [], os.fsync, os.listdir

    def counting_fsync(fd):         # os.fsync of idv._storage.sink and .staging: os's own
        st = os.fstat(fd)
        synced.append((st.st_ino, stat.S_ISDIR(st.st_mode)))
        return fsync(fd)

    def counting_listdir(path="."):
        listed.append(os.fspath(path))
        return listdir(path)
    monkeypatch.setattr(os, "fsync", counting_fsync)
    monkeypatch.setattr(os, "listdir", counting_listdir)
    keys, out = 6, tmp_path / "out"
    idv.write(out, {"k": np.arange(60) % keys, "x": np.arange(60.0)}, partition_by="k")
    monkeypatch.undo()
    files = _files(out)
    assert files == [f"k={k}/part.0.idv" for k in range(keys)]
    for k in range(keys):
        assert idv.read(out / files[k])["x"].tolist() == np.arange(60.0)[k::keys].tolist()
    file_syncs = Counter(ino for ino, is_dir in synced if not is_dir)
    assert [file_syncs[os.stat(out / f).st_ino] for f in files] == [1] * keys
    dir_syncs = Counter(ino for ino, is_dir in synced if is_dir)
    folders = [os.stat(out / f"k={k}").st_ino for k in range(keys)]
    assert [dir_syncs[ino] for ino in folders] == [1] * keys
    gone = set(dir_syncs) - set(folders) - {os.stat(out).st_ino}     # the staging folder
    assert len(gone) == 1 and dir_syncs[gone.pop()] == 1
    assert len([p for p in listed if staging.STAGING_PREFIX in p]) == 1


@pytest.mark.skipif(os.name == "nt", reason="Windows opens no directory to fsync it")
def test_the_folders_of_nested_keys_are_synced_where_their_entries_were_made(tmp_path,
                                                                             monkeypatch):
    """With two keys, a=0/b=1/...: the folder a=0, where the entry b=1 was made, is synced
    too, as the output folder is for a=0 (else a crash could lose a published file's
    folder)."""
    synced, fsync = [], os.fsync

    def counting_fsync(fd):
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            synced.append(st.st_ino)
        return fsync(fd)
    monkeypatch.setattr(os, "fsync", counting_fsync)
    out = tmp_path / "out"
    idv.write(out, {"a": np.arange(8) % 2, "b": np.arange(8) // 4, "x": np.arange(8.0)},
              partition_by=["a", "b"])
    monkeypatch.undo()
    for a in range(2):
        assert os.stat(out / f"a={a}").st_ino in synced, a
        for b in range(2):
            assert os.stat(out / f"a={a}" / f"b={b}").st_ino in synced, (a, b)
    assert os.stat(out).st_ino in synced


def test_write_partition_by_an_arrow_table_and_a_dict(tmp_path):
    pa = pytest.importorskip("pyarrow")
    t = pa.table({"g": [3, 3, 4], "v": ["a/b", "c", "d"], "n": [1.5, 2.5, 3.5]})
    idv.write(tmp_path / "t", t, partition_by="v")
    assert _files(tmp_path / "t") == ["v=a%2Fb/part.0.idv", "v=c/part.0.idv", "v=d/part.0.idv"]
    assert idv.read(tmp_path / "t" / "v=a%2Fb" / "part.0.idv")["n"].tolist() == [1.5]
    idv.write(tmp_path / "d", {"g": np.array([1, 2, 1]), "s": ["p", "q", "r"]}, partition_by="g")
    assert idv.read(tmp_path / "d" / "g=1" / "part.0.idv")["s"].tolist() == ["p", "r"]


def test_write_partition_by_frames_of_other_arrow_libraries(tmp_path):
    """A polars frame (its strings Arrow string views), a DuckDB relation, an arrow_dataset
    and a dict holding Arrow columns split as a pyarrow Table does; a dict Arrow cannot make a
    Table of is a TypeError saying so."""
    pa = pytest.importorskip("pyarrow", reason="Arrow data needs pyarrow")
    pl = pytest.importorskip("polars", reason="splitting a polars frame needs polars")
    duckdb = pytest.importorskip("duckdb", reason="splitting a DuckDB relation needs duckdb")
    t = pa.table({"g": [3, 3, 4], "v": ["a/b", "c", "d"], "n": [1.5, 2.5, 3.5]})
    idv.write(tmp_path / "want", t, partition_by="g")
    idv.write(tmp_path / "whole.idv", t)
    for name, data in {"polars": pl.from_arrow(t).with_columns(pl.col("v").cast(pl.String)),
                       "duckdb": duckdb.sql("select * from t"),
                       "dataset": idv.arrow_dataset(tmp_path / "whole.idv"),
                       "dict": {"g": pa.array([3, 3, 4]), "v": ["a/b", "c", "d"],
                                "n": np.array([1.5, 2.5, 3.5])}}.items():
        idv.write(tmp_path / name, data, partition_by="g")
        assert _files(tmp_path / name) == _files(tmp_path / "want")
        for f in _files(tmp_path / name):
            got, want = (idv.read(tmp_path / d / f) for d in (name, "want"))
            assert {k: v.tolist() for k, v in got.items()} == \
                {k: v.tolist() for k, v in want.items()}
    with pytest.raises(TypeError, match="give a pyarrow Table"):
        idv.write(tmp_path / "x", {"g": pa.array([1, 2]), "m": np.zeros((2, 3))},
                  partition_by="g")


def test_write_partition_by_refuses_what_it_cannot_split(tmp_path):
    data = {"a": np.arange(3), "b": np.arange(3)}
    with pytest.raises(ValueError, match="partition_by must name"):
        idv.write(tmp_path / "x", data, partition_by=["c"])
    with pytest.raises(ValueError, match="every column"):
        idv.write(tmp_path / "x", data, partition_by=["a", "b"])
    with pytest.raises(TypeError, match="partition_by takes"):
        idv.write(tmp_path / "x", [("a", np.arange(3)), ("b", np.arange(3))], partition_by="a")
    assert not (tmp_path / "x").exists() or _files(tmp_path / "x") == []


def test_the_text_of_hives_missing_value_is_written_with_the_missing_ones(tmp_path):
    """Both have one folder, and read back alike: one group, not two files of one name."""
    out = tmp_path / "out"
    idv.write(out, {"k": ["a", partitioning.NULL, None], "x": [1.0, 2.0, 3.0]},
              partition_by="k")
    assert _files(out) == ["k=__HIVE_DEFAULT_PARTITION__/part.0.idv", "k=a/part.0.idv"]
    got = idv.dataset(out, partitioning="hive").read(filter="k == ''")
    assert got["x"].tolist() == [2.0, 3.0]


def test_a_partitioned_write_that_fails_while_it_moves_its_files_in_changes_nothing(
        tmp_path, monkeypatch):
    """A second group's folder is blocked by a file: the first group's new file, whose name
    the old set lists, must not replace the old one. Into a new directory, a write stopped
    (Ctrl-C) between two moves leaves no directory."""
    out = tmp_path / "out"
    idv.write(out, {"k": np.array([1, 1, 2]), "x": np.array([10.0, 11.0, 20.0])},
              partition_by="k")
    (out / "k=3").write_text("not a folder")
    before = sorted(os.listdir(out))
    with pytest.raises(OSError):
        idv.write(out, {"k": np.array([1, 3]), "x": np.array([-1.0, -3.0])}, partition_by="k")
    assert idv.dataset(out, partitioning="hive").read()["x"].tolist() == [10.0, 11.0, 20.0]
    assert sorted(os.listdir(out)) == before
    (out / "k=4" / "part.0.idv").mkdir(parents=True)         # a folder where a file must go
    with pytest.raises(IsADirectoryError, match="k=4.part.0.idv is a folder"):
        idv.write(out, {"k": np.array([1, 4]), "x": np.array([-1.0, -4.0])}, partition_by="k")
    assert idv.dataset(out, partitioning="hive").read()["x"].tolist() == [10.0, 11.0, 20.0]
    real, moved = os.replace, []

    def replace(src, dst):
        if str(dst).endswith(".idv"):
            moved.append(dst)
            if len(moved) == 2:
                raise KeyboardInterrupt
        real(src, dst)
    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        idv.write(tmp_path / "new", {"k": np.array([1, 2, 3]), "x": np.array([1.0, 2.0, 3.0])},
                  partition_by="k")
    assert len(moved) == 2 and not (tmp_path / "new").exists()


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


@pytest.mark.parametrize("form", ["pandas", "arrow", "dict"])
def test_a_failed_partitioned_write_names_the_row_of_the_data(tmp_path, form):
    """The bad value is row 3 of the data (row 1 of its group's file), and the write into a
    new directory leaves no directory behind."""
    keys, names = [1, 1, 2, 2], ["a", "b", "c", None]
    data = {"pandas": lambda: pytest.importorskip("pandas", reason="a DataFrame needs pandas")
            .DataFrame({"day": keys, "s": names}),
            "arrow": lambda: pytest.importorskip("pyarrow", reason="a Table needs pyarrow")
            .table({"day": keys, "s": names}),
            "dict": lambda: {"day": np.array(keys), "s": names}}[form]()
    out = tmp_path / "new" / "parts"
    with pytest.raises((TypeError, ValueError), match=r"row 3\b") as e:
        idv.write(out, data, partition_by="day")
    assert "row 1" not in str(e.value)
    assert os.listdir(tmp_path) == []


def test_a_name_or_value_that_reads_like_a_row_is_not_renumbered(tmp_path):
    """A refused value's row is told by its number in the data; a column named 'row 9' and a
    text value 'row 0' quoted in the message stay as they are."""
    data = {"k": ["a", "b", "b"], "row 9": [1, 2, 2**40]}
    with pytest.raises(ValueError, match=r"^column 'row 9' row 2: 1099511627776 is outside"):
        idv.write(tmp_path / "a", data, types={"row 9": idv.Int32}, partition_by="k")
    data = {"k": ["a", "b", "b"], "v": [1.0, 2.0, "row 0"]}
    with pytest.raises(TypeError, match=r"row 2: 'row 0' \(str\)"):
        idv.write(tmp_path / "b", data, types={"v": idv.Double}, partition_by="k")


@pytest.mark.skipif(not hasattr(os, "writev"), reason="the full disk is simulated in writev")
def test_a_full_disk_in_a_directory_write_names_the_file_not_its_staging(tmp_path, monkeypatch):
    """A full disk while a partitioned write stages its files: the OSError names the file
    the job was writing as it would be in the directory, not the hidden staged copy; the
    directory is left as it was."""
    import errno

    from idv._storage import sink

    def full(fd, parts):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))   # as os.writev raises it
    monkeypatch.setattr(sink, "write_vectored", full)
    out = tmp_path / "out"
    with pytest.raises(OSError) as raised:
        idv.write(out, {"k": ["a", "b"] * 50, "x": np.arange(100.0)}, partition_by="k",
                  rows_per_block=10)
    assert raised.value.errno == errno.ENOSPC
    named = os.path.relpath(raised.value.filename, out)
    assert named.startswith("k=") and named.endswith(".idv"), raised.value.filename
    assert not out.exists()


def test_a_dicts_vector_columns_split_as_idv_write_takes_them(tmp_path):
    """With partition_by, a dict's idv.Ragged and scipy.sparse columns are split by rows as
    its arrays are (idv.write takes them without partition_by too)."""
    sp = pytest.importorskip("scipy.sparse", reason="sparse matrices are scipy's")
    data = {"k": ["a", "b", "a"], "v": idv.Ragged(np.arange(5), [0, 2, 3, 5]),
            "m": sp.csr_matrix(np.eye(3, 4))}
    idv.write(tmp_path / "out", data, partition_by="k")
    with idv.open(tmp_path / "out" / "k=a" / "part.0.idv") as f:
        assert [r.tolist() for r in f["v"].read()] == [[0, 1], [3, 4]]
        assert f["m"].read().tolist() == [[1, 0, 0, 0], [0, 0, 1, 0]]
    with idv.open(tmp_path / "out" / "k=b" / "part.0.idv") as f:
        assert [r.tolist() for r in f["v"].read()] == [[2]]


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


# ---------------------------------------------------------------------------------------------
# reading: idv.dataset(partitioning="hive") against pyarrow.dataset over the same folders
# ---------------------------------------------------------------------------------------------

_NAMES = ["a/b", "x y", None, "50%", "a/b", "x y", "é", None]


@pytest.fixture
def hive_pair(tmp_path):
    """(root, pyarrow's dataset): the same rows as .idv and Parquet files in the same
    key=value folders (an Int64 key `n`, a Text key `name` with a missing value and values
    that URL encoding changes), each folder's rows in one file of each format."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pads = pytest.importorskip("pyarrow.dataset")
    rng = np.random.default_rng(3)
    size = 64
    data = {"id": np.arange(size, dtype=np.int64), "v": rng.normal(size=size),
            "t": [f"w{i % 5}" for i in range(size)],
            "n": np.arange(size) % 3 + 1, "name": [_NAMES[i % len(_NAMES)] for i in range(size)]}
    root = tmp_path / "idv"
    paths = idv.write(root, data, partition_by=["n", "name"])
    parquet = []
    for p in paths:
        own = idv.read(p)
        parquet.append(os.path.join(os.path.dirname(p), "part.0.parquet"))
        pq.write_table(pa.table({k: list(v) if v.dtype == object else v
                                 for k, v in own.items()}), parquet[-1])
    return root, pads.dataset(parquet, format="parquet", partitioning="hive",
                              partition_base_dir=str(root))


def _reference(ref, columns=None, filter=None):  # noqa: A002
    """pyarrow's rows, sorted by id, as lists: the keys as idv reads them (int64, and a
    missing Text value as "")."""
    t = ref.to_table(filter=filter)
    t = t.sort_by("id")
    out = {}
    for name in t.column_names:
        values = t.column(name).to_pylist()
        out[name] = ["" if v is None else v for v in values] if name == "name" else values
    return {k: out[k] for k in (columns or list(out))}


def _sorted(got, columns=None):
    """idv's rows (dict name -> sequence) sorted by id, as lists."""
    got = {k: (v.tolist() if hasattr(v, "tolist") else list(v)) for k, v in got.items()}
    order = np.argsort(got["id"], kind="stable")
    return {k: [got[k][i] for i in order] for k in (columns or list(got))}


def test_hive_keys_are_columns_after_the_files_own(hive_pair):
    root, ref = hive_pair
    with idv.dataset(root, partitioning="hive") as ds:
        assert ds.column_names == ["id", "v", "t", "n", "name"]
        assert ds.schema["n"].type is T.Int64 and ds.schema["name"].type is T.Text
        assert ds.schema.names == ds.column_names
        assert _sorted(ds.read()) == _reference(ref, ds.column_names)
        assert "n" not in idv.dataset(root).column_names      # without partitioning


def test_every_read_path_gives_pyarrows_rows(hive_pair):
    pa = pytest.importorskip("pyarrow")
    pl = pytest.importorskip("polars")
    root, ref = hive_pair
    want = _reference(ref, ["id", "v", "t", "n", "name"])
    with idv.dataset(root, partitioning="hive") as ds:
        assert _sorted(ds.to_arrow().to_pydict()) == want
        assert _sorted(pa.table(ds).to_pydict()) == want
        assert _sorted(ds.record_batch_reader(batch_size=5).read_all().to_pydict()) == want
        assert _sorted(pa.Table.from_batches(list(ds.iter_batches())).to_pydict()) == want
        assert _sorted(pl.DataFrame(ds).to_dict(as_series=False)) == want
        assert _sorted(ds.to_pandas().to_dict("list")) == want
        assert list(ds.to_pandas().columns) == ds.column_names
        # columns in another order, the keys among them
        cols = ["name", "id", "n"]
        assert list(ds.read(columns=cols)) == cols
        assert _sorted(ds.read(columns=cols)) == {k: want[k] for k in cols}
        assert ds.to_arrow(columns=cols).column_names == cols
        assert list(ds.to_pandas(columns=cols).columns) == cols
        assert ds.record_batch_reader(cols).schema.names == cols
        assert idv.to_arrow(ds, cols).schema.field("n").metadata[b"idv.type"] == b"Int64"
        # rows and take, over the files end to end
        whole = ds.read()
        part = ds.read(rows=slice(5, 40, 3))
        assert {k: v.tolist() for k, v in part.items()} == \
            {k: v[5:40:3].tolist() for k, v in whole.items()}
        assert ds.to_pandas(rows=slice(7, 30))["name"].tolist() == whole["name"][7:30].tolist()
        picked = [60, 3, 3, 17, -1]
        assert {k: v.tolist() for k, v in ds.take(picked).items()} == \
            {k: v[picked].tolist() for k, v in whole.items()}
        assert ds.take([2], columns=["n"])["n"].dtype == np.int64


def _filters():
    """The same filters as pyarrow expressions (for both readers): keys only, data only,
    mixed with and / or / not, on the Int64 and the Text key."""
    pc = pytest.importorskip("pyarrow.compute")
    f = pc.field
    return [f("n") == 2, f("n") >= 2, f("name") == "a/b", f("name") == "50%",
            f("v") > 0.3, f("t") == "w1",
            (f("n") == 1) & (f("v") < 0), (f("n") == 3) | (f("name") == "x y"),
            ~(f("n") == 2), ~((f("n") == 1) & (f("v") > 0)),
            ((f("n") > 1) & (f("name") == "é")) | (f("t") == "w4"),
            (f("n") == 9), (f("name") == "a/b") & (f("t") == "w0")]


def test_filters_give_pyarrows_rows_on_every_read_path(hive_pair):
    root, ref = hive_pair
    cols = ["id", "v", "t", "n", "name"]
    with idv.dataset(root, partitioning="hive") as ds:
        for expr in _filters():
            want = _reference(ref, cols, expr)
            assert _sorted(ds.read(filter=expr)) == want, expr
            assert _sorted(ds.to_arrow(filter=expr).to_pydict()) == want, expr
            assert _sorted(ds.to_pandas(filter=expr).to_dict("list")) == want, expr
            got = ds.record_batch_reader(["id", "n"], filter=expr, batch_size=4).read_all()
            assert _sorted(got.to_pydict()) == {k: want[k] for k in ("id", "n")}, expr


def test_filters_as_strings_and_tuples_decide_the_keys_alike(hive_pair):
    root, ref = hive_pair
    pc = pytest.importorskip("pyarrow.compute")
    with idv.dataset(root, partitioning="hive") as ds:
        want = _reference(ref, ["id"], (pc.field("n") == 2) & (pc.field("v") > 0))["id"]
        assert sorted(ds.read(["id"], filter="n == 2 and v > 0")["id"].tolist()) == want
        assert sorted(ds.read(["id"], filter=[("n", "==", 2), ("v", ">", 0)])["id"]
                      .tolist()) == want


def test_polars_scan_prunes_by_keys(hive_pair):
    pl = pytest.importorskip("polars")
    import idv.polars
    root, ref = hive_pair
    pc = pytest.importorskip("pyarrow.compute")
    got = idv.polars.scan_idv(root, partitioning="hive").filter(
        (pl.col("n") == 3) & (pl.col("v") > 0)).select("id", "name").collect()
    want = _reference(ref, ["id", "name"], (pc.field("n") == 3) & (pc.field("v") > 0))
    assert _sorted(got.to_dict(as_series=False)) == want


def test_a_missing_value_reads_as_empty_text_and_writes_back(hive_pair, tmp_path):
    root, _ = hive_pair
    with idv.dataset(root, partitioning="hive") as ds:
        names = ds.read(["name"])["name"]
        assert "" in names.tolist() and None not in names.tolist()
        assert set(ds.read(filter="name == ''")["name"].tolist()) == {""}
        assert ds.to_arrow(["name"]).column("name").null_count == 0
        df = ds.to_pandas()
        idv.write(tmp_path / "back.idv", df)
        back = idv.read(tmp_path / "back.idv")
        assert back["name"].tolist() == df["name"].tolist()
        assert back["n"].tolist() == df["n"].tolist()


def test_a_filter_on_keys_opens_no_file_it_rules_out(hive_pair, monkeypatch):
    from idv._reader import dataset as dataset_module
    root, _ = hive_pair
    opened = []
    real = dataset_module.IdvFile

    def counted(path, *args, **kwargs):
        opened.append(os.path.relpath(path, root).split(os.sep)[0])
        return real(path, *args, **kwargs)
    with idv.dataset(root, partitioning="hive", max_open_files=1) as ds:
        monkeypatch.setattr(dataset_module, "IdvFile", counted)
        kept = [e.constants["n"] for e in ds.files]
        assert kept[0] == 1           # the first file is kept by the filters below
        reads = [lambda: ds.read(filter="n == 1"),
                 lambda: ds.read(["v"], filter="n == 1 and v > 0"),
                 lambda: ds.to_arrow(filter="n == 1"),
                 lambda: ds.to_pandas(filter="not (n != 1)"),
                 lambda: ds.record_batch_reader(["id"], filter="n < 2").read_all()]
        for read in reads:
            opened.clear()
            got = read()
            assert opened and set(opened) == {"n=1"}, opened
            assert len(got) > 0 or got.num_rows > 0


def test_partitioning_errors_name_the_file(tmp_path):
    for d in ("a/k=1", "a/j=1", "b/x=1"):
        (tmp_path / d).mkdir(parents=True)
    idv.write(tmp_path / "a" / "k=1" / "f.idv", {"x": np.arange(2)})
    idv.write(tmp_path / "a" / "j=1" / "f.idv", {"x": np.arange(2)})
    with pytest.raises(ValueError, match=r"k=1.f\.idv: its partition keys .*differ"):
        idv.dataset(tmp_path / "a", partitioning="hive")
    idv.write(tmp_path / "b" / "x=1" / "f.idv", {"x": np.arange(2)})
    with pytest.raises(ValueError, match=r"x=1.f\.idv: the partition key 'x'.*also a column"):
        idv.dataset(tmp_path / "b", partitioning="hive")
    with pytest.raises(ValueError, match="partitioning must be"):
        idv.dataset(tmp_path / "b", partitioning="directory")


def test_files_lists_and_globs_take_keys_from_the_whole_path(tmp_path):
    idv.write(tmp_path / "r", {"k": np.array([1, 2]), "x": np.arange(2.0)}, partition_by="k")
    ds = idv.dataset(str(tmp_path / "r" / "k=*" / "*.idv"), partitioning="hive")
    assert ds.read()["k"].tolist() == [1, 2]
    one = idv.dataset([tmp_path / "r" / "k=2" / "part.0.idv"], partitioning="hive")
    assert one.read()["k"].tolist() == [2] and one.read()["x"].tolist() == [1.0]
    assert one.to_pandas()["k"].tolist() == [2]
    assert one.to_arrow().column_names == ["x", "k"]
    assert one.read(columns=["k"], filter="x > 5")["k"].tolist() == []


def test_arrow_dataset_and_duckdb_read_the_keys(hive_pair):
    pc = pytest.importorskip("pyarrow.compute")
    root, ref = hive_pair
    ad = idv.arrow_dataset(root, partitioning="hive")
    expr = (pc.field("n") == 2) | (pc.field("name") == "é")
    want = _reference(ref, ["id", "n", "name"], expr)
    got = ad.to_table(columns=["id", "n", "name"], filter=expr)
    assert _sorted(got.to_pydict()) == want
    duckdb = pytest.importorskip("duckdb")
    rows = duckdb.connect().execute(
        "select n, count(*) from ad where n >= 2 group by n order by n").fetchall()
    counts = _reference(ref, ["n"])["n"]
    assert rows == [(k, counts.count(k)) for k in (2, 3)]


def test_readers_by_path_refuse_hive_keys_they_cannot_give_yet(tmp_path):
    idv.write(tmp_path / "d", {"k": np.array([1, 2]), "v": np.array([1.0, 2.0])},
              partition_by="k")
    from idv._engines.reopen import Reopenable
    with pytest.raises(ValueError, match="PyTorch and Hugging Face.*hive keys \\['k'\\]"):
        Reopenable(str(tmp_path / "d"), partitioning="hive").dataset()
    pytest.importorskip("dask.dataframe")
    from idv import dask as idv_dask
    with pytest.raises(ValueError, match="idv.dask.*hive keys"):
        idv_dask.read_idv(str(tmp_path / "d"), partitioning="hive")
    assert idv_dask.read_idv(str(tmp_path / "d")).compute()["v"].sort_values().tolist() == \
        [1.0, 2.0]


def test_arrow_dataset_counts_heads_and_takes_with_the_keys(hive_pair):
    """count_rows, head and take of a hive-partitioned arrow_dataset give the keys as its
    to_table does: filters on a key, on a file column, on both, and ones pyarrow applies."""
    pc = pytest.importorskip("pyarrow.compute", reason="arrow_dataset filters need pyarrow")
    root, ref = hive_pair
    ad = idv.arrow_dataset(root, partitioning="hive")
    cols = ["id", "n", "name"]
    for expr in [pc.field("n") == 2, pc.field("v") > 0, pc.field("n") > 1.5,
                 (pc.field("name") == "é") & (pc.field("v") > 0),
                 pc.is_nan(pc.field("v")) | (pc.field("n") == 3)]:
        want = _reference(ref, cols, expr)
        assert 0 < ad.count_rows(filter=expr) == len(want["id"]), expr
        head = ad.head(5, columns=cols, filter=expr).to_pydict()
        rows = {i: (n, name) for i, n, name in zip(*want.values())}
        assert len(head["id"]) == min(5, len(rows))
        assert [rows[i] for i in head["id"]] == list(zip(head["n"], head["name"]))
    with idv.dataset(root, partitioning="hive") as ds:
        full, two = ds.read(cols), ds.read(cols, filter="n == 2")
    idx = [5, 0, 63, 5]
    assert ad.take(idx, columns=cols).to_pydict() == {k: [full[k][i] for i in idx]
                                                      for k in cols}
    assert ad.take([1, 0], columns=["n", "id"]).to_pydict() == \
        {"n": [full["n"][1], full["n"][0]], "id": [full["id"][1], full["id"][0]]}
    assert ad.take([2, 0], columns=cols, filter=pc.field("n") == 2).to_pydict() == \
        {k: [two[k][2], two[k][0]] for k in cols}


@pytest.mark.parametrize("column", [[1, 2, 3.5, 4], [1, 2, 3, 2**63], ["1", "2", None, "4"]],
                         ids=["int then float", "int then beyond int64", "text"])
def test_every_part_has_the_type_of_the_whole_column(tmp_path, column):
    """A column typed from its values is typed from all of them, not part by part: the files
    of one write agree, and on the type an unpartitioned write gives (each part's own values
    typed [1, 2] Int64 and [3.5, 4] Double, a dataset then refused)."""
    data = {"g": ["a", "a", "b", "b"], "x": column}
    idv.write(tmp_path / "one.idv", {"x": column}, missing_text="")
    idv.write(tmp_path / "parts", data, partition_by="g", missing_text="")
    want = idv.open(tmp_path / "one.idv").schema["x"].type
    for f in _files(tmp_path / "parts"):
        assert idv.open(tmp_path / "parts" / f).schema["x"].type == want, f
    got = idv.dataset(tmp_path / "parts", partitioning="hive").read(["x"])["x"]
    assert got.tolist() == idv.read(tmp_path / "one.idv")["x"].tolist()


def test_a_pandas_object_column_of_arrays_is_typed_as_a_whole(tmp_path):
    pd = pytest.importorskip("pandas", reason="the object column of arrays is a DataFrame's")
    df = pd.DataFrame({"g": ["a", "b"], "v": pd.Series([np.array([1.0, 2.0]), np.array([3.0])],
                                                       dtype=object)})
    idv.write(tmp_path / "parts", df, partition_by="g")
    types = {str(idv.open(tmp_path / "parts" / f).schema["v"].type)
             for f in _files(tmp_path / "parts")}
    assert types == {"Vector<Double>"}


def test_a_text_key_has_the_dtype_of_text_whatever_the_rows_kept(tmp_path):
    """A hive Text key in pandas has the dtype the files' Text has, with rows or none (a
    filter or rows= that kept none gave object)."""
    pytest.importorskip("pandas", reason="the dtypes checked are pandas'")
    idv.write(tmp_path / "d", {"h": ["a", "b"], "x": [1.0, 2.0], "t": ["u", "v"]},
              partition_by="h")
    ds = idv.dataset(tmp_path / "d", partitioning="hive")
    for backend in (None, "pyarrow"):
        if backend:
            pytest.importorskip("pyarrow", reason="dtype_backend='pyarrow' needs pyarrow")
        want = ds.to_pandas(dtype_backend=backend)["t"].dtype
        for kw in ({}, {"filter": "x > 5"}, {"rows": slice(0, 0)}, {"rows": []}):
            got = ds.to_pandas(dtype_backend=backend, **kw)
            assert got["h"].dtype == want, (backend, kw)
