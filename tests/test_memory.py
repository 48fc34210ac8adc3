"""One memory limit over every allocation of a read: the default follows the limits the
process really has (RLIMIT_AS, the cgroup's memory limit, available memory), and the reads
that used to escape it (annotations, decoders' temporaries, slices, vectors expanded into
columns, datasets) are refused with idv.MemoryLimitError naming the file and the column, in a
child process under an address-space limit (tests/limited.py), never numpy's MemoryError.

The files are built here (tests/craft.py, idv.write); no binary is committed.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import idv
from idv import budget
from craft import Col, Model, build, compress
from cli_run import run
from limited import run_limited

WIDE = 30_015_814         # a vector ML.NET's text featurizer wrote in a real training schema


# ---------------------------------------------------------------------------- the default


def test_the_default_takes_the_address_space_limit(tmp_path):
    path = tmp_path / "small.idv"
    idv.write(path, {"x": np.arange(10.0)})
    got = run_limited("""
        with idv.open(path) as f:
            result["limit"] = int(f.memory_limit)
            result["source"] = f.memory_limit.source
    """, path, memory=1 << 30)
    assert got["outcome"] == "ok", got
    assert got["limit"] < 1 << 29, got            # at most half of what the 1 GiB leaves
    assert "RLIMIT_AS" in got["source"], got


@pytest.mark.parametrize("version", ["v2", "v1"])
def test_the_cgroup_limit_is_read(tmp_path, version):
    """A cgroup hierarchy laid out as the kernel mounts it, the process in a nested group."""
    proc = tmp_path / "cgroup"
    if version == "v2":
        proc.write_text("0::/app/worker\n")
        group = tmp_path / "fs" / "app" / "worker"
        group.mkdir(parents=True)
        (group / "memory.max").write_text("536870912\n")
        (group / "memory.current").write_text("134217728\n")
    else:
        proc.write_text("5:cpu,cpuacct:/\n4:memory:/docker/abc\n")
        group = tmp_path / "fs" / "memory" / "docker" / "abc"
        group.mkdir(parents=True)
        (group / "memory.limit_in_bytes").write_text("536870912\n")
        (group / "memory.usage_in_bytes").write_text("134217728\n")
    assert budget.cgroup_room(str(tmp_path / "fs"), str(proc)) == (512 - 128) << 20


def test_no_cgroup_limit(tmp_path):
    proc = tmp_path / "cgroup"
    proc.write_text("0::/\n")
    (tmp_path / "memory.max").write_text("max\n")
    assert budget.cgroup_room(str(tmp_path), str(proc)) is None
    proc.write_text("4:memory:/\n")
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert budget.cgroup_room(str(tmp_path), str(proc)) is None


@pytest.fixture(scope="module")
def big_double(tmp_path_factory):
    """A valid file of 120M zero Doubles (960 MB decoded) in 120 blocks, about 1 MB."""
    rows = 1_000_000
    payload = bytes(8 * rows)
    stored = compress(1, payload)
    col = Col("Weight", "Double", comp=1, rpb=rows, blocks=[payload] * 120,
              stored={b: stored for b in range(120)})
    data, _ = build(Model(120 * rows, [col]))
    path = tmp_path_factory.mktemp("memory") / "big_double.idv"
    path.write_bytes(data)
    return path


def test_a_container_limit_says_which_file_and_column(big_double):
    """A real user's case: a large column read in a process limited to 1 GiB of address space
    (a container), where numpy's MemoryError would name nothing. The default limit is under
    what the process may take, so the read is refused before allocating, naming the file and
    the column."""
    got = run_limited("kept.append(idv.read(path)['Weight'])", big_double, memory=1 << 30)
    assert got["outcome"] == "MemoryLimitError", got
    assert "big_double.idv" in got["message"] and "'Weight'" in got["message"], got
    assert "RLIMIT_AS" in got["message"], got


# ---------------------------------------------------------------------------- wide vectors


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """A training schema with a Vector<Single, 30015814> (a few hundred bytes, no rows) whose
    SlotNames name three slots."""
    names = idv.Sparse(["w:the", "w:cat", "w:sat"], indices=[0, 5, WIDE - 1], offsets=[0, 3],
                       length=WIDE)
    path = tmp_path_factory.mktemp("wide") / "wide.idv"
    idv.write(path, {"Label": np.zeros(0, np.float32),
                     "Features": np.zeros((0, WIDE), np.float32)},
              metadata={"Features": {"SlotNames": (idv.types.Vector(idv.types.Text, WIDE),
                                                   names)}})
    return path


def test_read_pandas_keeps_a_wide_vector_one_column(wide):
    pytest.importorskip("pandas", reason="pandas is an optional dependency")
    got = run_limited("""
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            df = idv.read_pandas(path)
        result["columns"] = list(df.columns)
        result["dtypes"] = [str(d) for d in df.dtypes]
        result["rows"] = len(df)
        result["warnings"] = [str(w.message) for w in seen]
    """, wide, memory=2 << 30)
    assert got["outcome"] == "ok", got
    assert got["columns"] == ["Label", "Features"] and got["rows"] == 0
    assert got["dtypes"] == ["float32", "object"]
    assert len(got["warnings"]) == 1, got["warnings"]
    assert "'Features' (Vector<Single, 30015814>)" in got["warnings"][0]
    assert "MAX_EXPAND_SLOTS" in got["warnings"][0]


def test_the_expand_bound(tmp_path):
    pd = pytest.importorskip("pandas", reason="pandas is an optional dependency")
    from idv.pandas import MAX_EXPAND_SLOTS
    path = tmp_path / "two.idv"
    at, over = MAX_EXPAND_SLOTS, MAX_EXPAND_SLOTS + 1
    idv.write(path, {"a": np.ones((2, at), np.float32), "b": np.ones((2, over), np.float32)})
    with pytest.warns(idv.IdvWarning, match=r"'b' \(Vector<Single, 10001>\)"):
        df = idv.read_pandas(path)
    assert list(df.columns[:2]) == ["a.0", "a.1"] and df.shape == (2, at + 1)
    assert df.columns[-1] == "b" and df["b"].dtype == object
    assert np.array_equal(df["b"][1], np.ones(over, np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert idv.read_pandas(path, vectors="object").shape == (2, 2)
    assert isinstance(df, pd.DataFrame)


def test_dask_keeps_a_wide_vector_one_column(wide):
    pytest.importorskip("dask.dataframe", reason="dask is an optional dependency")
    pytest.importorskip("distributed", reason="distributed is an optional dependency")
    got = run_limited("""
        import idv.dask
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            ddf = idv.dask.read_idv(path)
            df = ddf.compute(scheduler="sync")
        result["columns"] = list(ddf.columns)
        result["rows"] = len(df)
        result["warnings"] = [str(w.message) for w in seen if "MAX_EXPAND" in str(w.message)]
    """, wide, memory=3 << 30)
    assert got["outcome"] == "ok", got
    assert got["columns"] == ["Label", "Features"] and got["rows"] == 0
    assert len(got["warnings"]) == 1, got["warnings"]


def test_cat_csv_writes_a_wide_vector_as_one_cell(wide, tmp_path):
    rc, out, err = run("cat", "--format", "csv", wide, check_rc=0)
    assert out == "Label,Features\n"
    assert "MAX_EXPAND_SLOTS" in err
    rows = tmp_path / "rows.idv"
    idv.write(rows, {"v": np.arange(2 * 10_001, dtype=np.int32).reshape(2, 10_001)})
    rc, out, err = run("cat", "--format", "csv", rows, check_rc=0)
    lines = out.splitlines()
    assert lines[0] == "v"
    assert lines[2] == '"[' + ",".join(map(str, range(10_001, 20_002))) + ']"'


def test_convert_parquet_of_a_wide_vector(wide, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is an optional dependency")
    out = tmp_path / "wide.parquet"
    run("convert", wide, out, check_rc=0)
    assert out.stat().st_size < 1 << 20           # the SlotNames kept sparse in the footer
    assert pq.read_schema(out).field("Features").type.list_size == WIDE
    back = tmp_path / "back.idv"
    run("convert", out, back, check_rc=0)
    with idv.open(back) as f:
        assert str(f["Features"].type) == f"Vector<Single, {WIDE}>"
        names = f["Features"].metadata["SlotNames"]
        assert np.flatnonzero(names != "").tolist() == [0, 5, WIDE - 1]
        assert names[[0, 5, WIDE - 1]].tolist() == ["w:the", "w:cat", "w:sat"]
