"""One memory limit over every allocation of a read: the default follows the limits the
process really has (RLIMIT_AS, the cgroup's memory limit, available memory), and the reads
that used to escape it (annotations, decoders' temporaries, slices, vectors expanded into
columns, datasets) are refused with idv.MemoryLimitError naming the file and the column, in a
child process under an address-space limit (tests/limited.py), never numpy's MemoryError.

The files are built here (tests/craft.py, idv.write); no binary is committed.
"""
from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import idv
from idv import _compression
from idv._resources import budget
from craft import Col, Meta, Model, build, compress, leb, vbuf_params
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


def zero_doubles(name, blocks, rows=1_000_000):
    """A file of one Double column of `blocks` blocks of `rows` zeros (deflated once)."""
    payload = bytes(8 * rows)
    stored = compress(1, payload)
    col = Col(name, "Double", comp=1, rpb=rows, blocks=[payload] * blocks,
              stored={b: stored for b in range(blocks)})
    return build(Model(blocks * rows, [col]))[0]


@pytest.fixture(scope="module")
def big_double(tmp_path_factory):
    """A valid file of 120M zero Doubles (960 MB decoded) in 120 blocks, about 1 MB."""
    path = tmp_path_factory.mktemp("memory") / "big_double.idv"
    path.write_bytes(zero_doubles("Weight", 120))
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
    from idv._interop.pandas import MAX_EXPAND_SLOTS
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


# ---------------------------------------------------------------------------- annotations

BITS = 2**31 - 1          # a Vector<Boolean, 2^31-1>: 268 MB of bits, about 260 KB deflated


def _dense_bool_vector(length):
    """A VBuffer payload of one dense Boolean vector of `length` items, all false."""
    return (np.array([1, length, -1, 0], "<i4").tobytes() + bytes((length + 7) // 8))


@pytest.fixture(scope="module")
def huge_annotation(tmp_path_factory):
    """A Single column of 3 rows whose 'Bits' annotation is a Vector<Boolean, 2^31-1>."""
    meta = Meta("Bits", "VBuffer", vbuf_params("Boolean", (BITS,)), 1,
                _dense_bool_vector(BITS))
    col = Col("x", "Single", comp=1, rpb=3, blocks=[np.arange(3, dtype="<f4").tobytes()],
              meta=[meta])
    data, _ = build(Model(3, [col]))
    path = tmp_path_factory.mktemp("annotation") / "huge_annotation.idv"
    path.write_bytes(data)
    return path


def test_an_annotation_is_counted_against_the_limit(huge_annotation):
    assert huge_annotation.stat().st_size < 1 << 20
    got = run_limited("kept.append(idv.open(path).columns[0].metadata)", huge_annotation,
                      memory=1536 << 20)
    assert got["outcome"] == "MemoryLimitError", got
    assert "column 0 'x' annotation 'Bits' (Vector<Boolean, 2147483647>)" in got["message"]
    assert "huge_annotation.idv" in got["message"]


def test_readers_decode_only_the_annotations_they_use(huge_annotation):
    """pandas, Arrow (which leaves the annotation out, saying so), batches, the values:
    the column reads although one of its annotations is beyond the limit."""
    pytest.importorskip("pandas", reason="pandas is an optional dependency")
    pytest.importorskip("pyarrow", reason="pyarrow is an optional dependency")
    got = run_limited("""
        with idv.open(path) as f:
            result["pandas"] = idv.to_pandas(f)["x"].tolist()
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                table = f.to_arrow()
            result["arrow"] = table.column("x").to_pylist()
            result["warned"] = [str(w.message) for w in seen]
            result["batches"] = sum(len(b) for b in f.iter_batches())
    """, huge_annotation, memory=3 << 30)
    assert got["outcome"] == "ok", got
    assert got["pandas"] == got["arrow"] == [0.0, 1.0, 2.0]
    assert got["batches"] == 3
    assert any("annotation left out" in w and "'Bits'" in w for w in got["warned"]), got


def test_schema_and_verify_survive_a_huge_annotation(huge_annotation):
    from limited import cli_limited
    rc, out, err = cli_limited(["schema", huge_annotation], memory=1536 << 20)
    assert rc == 0, (out, err)
    assert "Bits" in out and "not shown" in out
    rc, out, err = cli_limited(["verify", huge_annotation], memory=1536 << 20)
    assert "internal error" not in out + err and "Traceback" not in err, (out, err)
    assert "'Bits' not checked" in out + err, (out, err)


# ---------------------------------------------------------------------------- decoders


def test_dvbool_decodes_without_temporaries(tmp_path):
    """700M legacy DvBool values (175 MB of words, about 170 KB deflated) read into 700 MB of
    bools, under 2 GiB of address space (the vectorised decode held 8 bytes a value more)."""
    n = 700_000_000
    words = bytes(4 * ((n + 15) // 16))
    col = Col("flag", "DvBool", comp=1, rpb=n, blocks=[words])
    data, _ = build(Model(n, [col]))
    path = tmp_path / "dvbool.idv"
    path.write_bytes(data)
    got = run_limited("""
        values = idv.open(path)["flag"].read()
        result["rows"] = len(values)
        result["true"] = int(values.sum())
    """, path, memory=2 << 30)
    assert got["outcome"] == "ok", got
    assert got["rows"] == n and got["true"] == 0


def test_dvbool_values(tmp_path):
    """Each 2-bit pattern: 00 false, 01 true, 10 missing (false); 11 is refused."""
    pattern = [1, 0, 2, 1] * 5                 # 20 values over two words
    word = [sum(v << (2 * j) for j, v in enumerate(pattern[k:k + 16])) for k in (0, 16)]
    col = Col("flag", "DvBool", comp=0, rpb=20, blocks=[np.array(word, "<u4").tobytes()])
    path = tmp_path / "dvbool.idv"
    path.write_bytes(build(Model(20, [col]))[0])
    with idv.open(path) as f:
        assert f["flag"].read().tolist() == [v == 1 for v in pattern]
    word[1] |= 3 << 6                          # value 19
    col.blocks = [np.array(word, "<u4").tobytes()]
    path.write_bytes(build(Model(20, [col]))[0])
    with idv.open(path) as f, pytest.raises(idv.IdvFormatError, match="DvBool value 19"):
        f["flag"].read()


def test_a_variable_boolean_vector_is_counted_before_decoding(tmp_path):
    """One row of a Vector<Boolean> holding 2^31-1 items (a 260 KB file) is refused before
    its 2 GiB of bools are allocated."""
    col = Col("v", "VBuffer", vbuf_params("Boolean", (0,)), comp=1, rpb=1,
              blocks=[np.array([1, 0, BITS, -1, 0], "<i4").tobytes() + bytes((BITS + 7) // 8)])
    path = tmp_path / "vbool.idv"
    path.write_bytes(build(Model(1, [col]))[0])
    got = run_limited("kept.append(idv.open(path)['v'].read())", path, memory=1 << 30)
    assert got["outcome"] == "MemoryLimitError", got
    assert "column 0 'v'" in got["message"], got


def test_text_rows_are_counted_as_str_objects(tmp_path):
    """10M rows of 'ab': 60 MB stored, some 600 MB as str objects: refused under a 300 MB
    limit (8 bytes a row would have let it through)."""
    n, per_block = 10_000_000, 1_000_000
    bounds = (np.arange(1, per_block + 1, dtype="<i4") * 2).tobytes()
    payload = np.array([per_block], "<i4").tobytes() + bounds + leb(2 * per_block) \
        + b"ab" * per_block
    stored = compress(1, payload)
    col = Col("t", "TextSpan", comp=1, rpb=per_block, blocks=[payload] * 10,
              stored={b: stored for b in range(10)})
    path = tmp_path / "text.idv"
    path.write_bytes(build(Model(n, [col]))[0])
    got = run_limited("""
        f = idv.open(path, memory_limit=300_000_000)
        result["few"] = f["t"][:3].tolist()
        kept.append(f["t"].read())
    """, path, memory=2 << 30)
    assert got["outcome"] == "MemoryLimitError", got
    assert got["few"] == ["ab", "ab", "ab"]
    assert "column 0 't'" in got["message"], got


# ---------------------------------------------------------------------------- slices


@pytest.fixture(scope="module")
def many_booleans(tmp_path_factory):
    """A valid 64 KB file of 2^29 Boolean rows in one block."""
    n = 1 << 29
    col = Col("B", "Boolean", comp=1, rpb=n, blocks=[bytes(n // 8)])
    path = tmp_path_factory.mktemp("slices") / "many_booleans.idv"
    path.write_bytes(build(Model(n, [col]))[0])
    return path


@pytest.mark.parametrize("key", ["[::2]", "[:]", "[1::3]", "[::-1]"])
def test_a_slice_is_checked_before_allocating(many_booleans, key):
    got = run_limited(f"""
        f = idv.open(path, memory_limit=600_000_000)
        kept.append(f["B"]{key})
    """, many_booleans, memory=2 << 30)
    assert got["outcome"] == "MemoryLimitError", got
    assert got["peak_rss"] is None or got["peak_rss"] < 600 << 20, got


def test_slices_with_steps(tmp_path):
    path = tmp_path / "steps.idv"
    x = np.arange(1000, dtype=np.int64)
    v = np.arange(3000, dtype=np.float32).reshape(1000, 3)
    t = np.array([str(i) for i in range(1000)], object)
    idv.write(path, {"x": x, "v": v, "t": t}, rows_per_block=7)
    keys = [slice(a, b, s) for a in (None, 0, 5, -3, 13, 999, -1000)
            for b in (None, 0, 14, -2, 500, 1000) for s in (None, 2, -1, -3, 6, 7, 8, -999)]
    with idv.open(path) as f:
        for name, values in (("x", x), ("v", v), ("t", t)):
            for key in keys:
                assert np.array_equal(f[name][key], values[key]), (name, key)


@pytest.mark.parametrize("group", [1, 100, 1 << 30], ids=["a-block", "some-blocks", "all"])
def test_a_stepped_slice_gathers_its_rows_a_group_of_blocks_at_a_time(tmp_path, monkeypatch,
                                                                    group):
    """A slice whose step skips rows decodes its blocks a group at a time (each let go
    before the next): the rows of every group size are numpy's."""
    from idv._reader import row_picks
    monkeypatch.setattr(row_picks, "STRIDE_BYTES", group)
    path = tmp_path / "steps.idv"
    x = np.arange(1000, dtype=np.int64)
    t = np.array([str(i) for i in range(1000)], object)
    when = np.arange(1000).view("<M8[100ns]")
    idv.write(path, {"x": x, "t": t, "when": when}, rows_per_block=7)
    keys = [slice(a, b, s) for a in (None, 3, -5) for b in (None, 500, -1)
            for s in (2, -2, 3, 13, -99)]
    with idv.open(path) as f:
        for name, values in (("x", x), ("t", t), ("when", when)):
            for key in keys:
                assert np.array_equal(f[name][key], values[key]), (name, key)
        assert np.array_equal(f.read(rows=slice(1, None, 9))["t"], t[1::9])


def test_a_stepped_slice_needs_its_rows_not_its_span(tmp_path):
    """col[::1000] of 2M rows (16 MB) under a 4 MB limit: its 16 KB of rows are read, in
    blocks let go group by group, never the span at once (refused before, allocated whole
    under a limit that let it)."""
    import tracemalloc
    path = tmp_path / "long.idv"
    x = np.arange(2_000_000, dtype=np.int64)
    idv.write(path, {"x": x})
    with idv.open(path, memory_limit=4_000_000) as f:
        tracemalloc.start()
        try:
            got = f["x"][::1000]
            back = f["x"][::-999]
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert np.array_equal(got, x[::1000]) and np.array_equal(back, x[::-999])
        assert peak < 4_000_000, peak
        assert np.array_equal(f.read(rows=slice(None, None, 1000))["x"], x[::1000])
        with pytest.raises(idv.MemoryLimitError):       # its rows alone are over the limit
            f["x"][::3]


# ---------------------------------------------------------------------------- datasets


@pytest.fixture(scope="module")
def six_files(tmp_path_factory):
    """Six valid files of 50M zero Doubles each (400 MB decoded, under 1 MB stored)."""
    data = zero_doubles("w", 50)
    folder = tmp_path_factory.mktemp("dataset")
    for i in range(6):
        (folder / f"part{i}.idv").write_bytes(data)
    return folder


@pytest.mark.parametrize("how", ["read()", "to_pandas()", "to_arrow()", "[10:40_000_000]"])
def test_a_dataset_read_is_checked_as_a_whole(six_files, how):
    """Each file fits the 700 MB limit, the six together do not: refused before reading."""
    if how != "read()" and how[0] != "[":
        pytest.importorskip(how[3:-2] if how != "to_arrow()" else "pyarrow",
                            reason="an optional dependency")
    got = run_limited(f"""
        ds = idv.dataset(path, memory_limit=700_000_000)
        result["few"] = ds[:3]["w"].tolist()
        result["limit"] = int(ds.memory_limit)
        kept.append(ds{'.' if how[0] != '[' else ''}{how})
    """, six_files, memory=2 << 30)
    assert got["few"] == [0.0, 0.0, 0.0] and got["limit"] == 700_000_000, got
    if how.startswith("[10:"):          # 40M rows, within one file: allowed
        assert got["outcome"] == "ok", got
        return
    assert got["outcome"] == "MemoryLimitError", got
    assert "6 files of the dataset" in got["message"], got


# ---------------------------------------------------------------- freed arrays kept for reuse

needs_huge = pytest.mark.skipif(_compression._HUGE_HANDLER is None,
                                reason="numpy memory handlers on Linux only")


@pytest.fixture
def keep_limit():
    """Sets the bytes kept for reuse for one test, and restores the limit and an empty pool."""
    old = _compression.keep_freed(0, drop=True)
    yield _compression.keep_freed
    _compression.keep_freed(old, drop=True)


@needs_huge
def test_a_freed_array_is_the_next_one_of_its_size(keep_limit):
    keep_limit(64 << 20)
    a = _compression.empty(2_000_000, np.float32)         # 8 MiB of huge pages
    a[:] = 7
    at = a.ctypes.data
    del a
    assert _compression.kept_bytes() == 8 << 20
    b = _compression.empty(2_000_000, np.float32)
    assert b.ctypes.data == at and _compression.kept_bytes() == 0
    c = _compression.empty(2_000_000, np.float32)         # none kept: a fresh mapping
    assert c.ctypes.data != at
    d = _compression.empty(3_000_000, np.float32)         # another size: not served by b's
    del b
    e = _compression.empty(3_000_000, np.float32)
    assert e.ctypes.data != at and _compression.kept_bytes() == 8 << 20
    del c, d, e


@needs_huge
def test_what_is_kept_is_bounded_and_dropped_on_demand(keep_limit):
    keep_limit(20 << 20)
    arrays = [_compression.empty(2_000_000, np.float32) for _ in range(4)]   # 4 x 8 MiB
    del arrays
    assert _compression.kept_bytes() == 16 << 20          # two fit under 20 MiB
    keep_limit(20 << 20, drop=True)
    assert _compression.kept_bytes() == 0
    keep_limit(0)
    _compression.empty(2_000_000, np.float32)              # made and freed at once
    assert _compression.kept_bytes() == 0
    with pytest.raises(ValueError):
        keep_limit(-1)


@needs_huge
def test_a_kept_array_resized_keeps_its_values(keep_limit):
    keep_limit(64 << 20)
    _compression.empty(4_000_000, np.float32)              # 16 MiB, freed and kept
    a = _compression.empty(2_000_000, np.float32)
    a[:] = np.arange(2_000_000, dtype=np.float32)
    a.resize(4_000_000, refcheck=False)                   # a realloc, served by the kept one
    assert np.array_equal(a[:2_000_000], np.arange(2_000_000, dtype=np.float32))
    a.resize(1000, refcheck=False)
    assert np.array_equal(a, np.arange(1000, dtype=np.float32))


@needs_huge
def test_a_forked_child_keeps_nothing_of_its_parent(keep_limit):
    keep_limit(64 << 20)
    _compression.empty(2_000_000, np.float32)              # made and freed at once
    assert _compression.kept_bytes() == 8 << 20
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                                          # the child
        os.write(write, str(_compression.kept_bytes()).encode())
        os._exit(0)
    os.close(write)
    got = os.read(read, 100)
    os.close(read)
    os.waitpid(pid, 0)
    assert got == b"0" and _compression.kept_bytes() == 8 << 20


@needs_huge
def test_nothing_is_kept_under_an_address_space_limit(tmp_path):
    """Under RLIMIT_AS a kept mapping would hold room other allocations may need."""
    got = run_limited("""
        from idv import _compression
        import numpy as np
        _compression.empty(2_000_000, np.float32)
        result["kept"] = _compression.kept_bytes()
    """, tmp_path)
    assert got["outcome"] == "ok" and got["kept"] == 0


# ---------------------------------------------------------------------------- streams

_STREAM_GROWTH = r"""
import sys
import duckdb, idv
idv.set_memory_limit(int(sys.argv[2]))
ds = idv.arrow_dataset(sys.argv[1])
read = {"batches": lambda: sum(b.num_rows for b in ds.to_batches()),
        "duckdb": lambda: duckdb.sql("select count(*) from ds").fetchall()[0][0]}[sys.argv[3]]
duckdb.sql("select * from ds limit 1").fetchall()      # imports and setups: not the stream's

def status(key):
    with open("/proc/self/status") as s:
        return int(next(line for line in s if line.startswith(key)).split()[1]) << 10

with open("/proc/self/clear_refs", "w") as c:     # the peak so far forgotten
    c.write("5")
before = status("VmRSS:")
print(read(), status("VmHWM:") - before)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="reads Linux's /proc")
@pytest.mark.parametrize("how", ["batches", "duckdb"])
def test_an_arrow_dataset_stream_holds_about_its_limit(tmp_path, how):
    """idv.arrow_dataset's stream of batches (what DuckDB reads) over a file of eight times
    the memory limit grows the process by about the limit, not four times it: its batches
    are cut to what the scan's windows queued ahead (within the limit), the batch's pieces and
    the batch itself leave room for. (The bound leaves room for what the threads' allocators
    keep of freed memory: 83-93 MB here at 50 MB, against 178-201 with batches of half the
    limit.)"""
    import subprocess
    import sys
    pytest.importorskip("duckdb", reason="DuckDB reads the stream")
    path = tmp_path / "v.idv"
    idv.write(path, {"v": np.round(np.random.default_rng(0).random((400_000, 32)), 1)})
    limit = 50_000_000
    done = subprocess.run([sys.executable, "-c", _STREAM_GROWTH, str(path), str(limit), how],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    rows, growth = map(int, done.stdout.split())
    assert rows == 400_000 and growth < 2.5 * limit, growth >> 20
