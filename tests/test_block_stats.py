"""Adding block statistics to existing files (idv.add_statistics, idv stats --add): every
block keeps its bytes and offset, ML.NET reads the same values, the statistics equal those
idv's writer records for the same blocks; idv stats prints them."""
from __future__ import annotations

import shutil

import os

import numpy as np
import pytest

import idv
from idv._storage import statistics as S
from cli_run import run, run_json
from reference import shared_path


def _blocks(path):
    """Every column's block bytes, by (column, block)."""
    data = open(path, "rb").read()
    with idv.open(path) as f:
        return {(c.index, b): data[int(o):int(o) + int(n)] for c in f.columns
                for b, (o, n) in enumerate(zip(c.lookup["offset"], c.lookup["disk"]))}


def _copy(src, tmp_path):
    dest = tmp_path / src.name
    shutil.copyfile(src, dest)
    dest.chmod(0o644)
    return dest


MLNET = ["datatypes.idv", "sample"]


@pytest.mark.parametrize("name", MLNET)
def test_mlnet_files_get_statistics_and_keep_every_block(tmp_path, name):
    """ML.NET's datatypes file and the ML.NET-written sample that ships with idv."""
    from pathlib import Path
    src = Path(idv.sample_path()) if name == "sample" else shared_path("mlnet-files", name)
    if not src.exists():
        pytest.skip(f"ML.NET reference file missing: {src} (set IDV_SHARED)")
    path = _copy(src, tmp_path)
    before = _blocks(path)
    with idv.open(path) as f:
        values = f.read()
    assert idv.add_statistics(path) is True
    assert _blocks(path) == before
    with idv.open(path) as f:
        assert f.statistics is not None
        after = f.read()
    assert idv.verify(path).ok
    for k in values:
        assert np.array_equal(np.asarray(values[k]), np.asarray(after[k])), k
    assert idv.add_statistics(path) is False          # has them already


def test_mlnet_loads_files_after_add_with_the_same_values(tmp_path, oracle):
    src = shared_path("mlnet-files", "datatypes.idv")
    if not src.exists():
        pytest.skip(f"ML.NET reference file missing: {src} (set IDV_SHARED)")
    path = _copy(src, tmp_path)
    idv.add_statistics(path)
    dumps = oracle.dump_many([src, path])
    d, ref = dumps[str(path)], dumps[str(src)]
    assert "error" not in d, d.get("error")
    assert d["columns"] == ref["columns"] and d["rows"] == ref["rows"]


def _data(n=3000):
    rng = np.random.default_rng(5)
    return {"I": rng.integers(-9, 9, n), "F": np.where(rng.random(n) < 0.1, np.nan,
                                                        rng.random(n)),
            "T": [f"word {i % 37} é" * (i % 9) for i in range(n)],
            "W": np.datetime64("2001-01-01") + np.arange(n).astype("timedelta64[D]"),
            "V": rng.random((n, 2)).astype(np.float32)}


def _arrow_batches():
    """_data as Arrow batches of 700 rows (blocks of 500 span them), its Text as Arrow strings
    and large strings (int32 and int64 offsets)."""
    pa = pytest.importorskip("pyarrow", reason="the batches are Arrow's")
    data = _data()
    table = pa.table({k: (pa.array(v, pa.string()) if k == "T" else v) for k, v in
                      data.items() if k != "V"})
    table = table.append_column("L", pa.array(data["T"][::-1], pa.large_string()))
    return table.to_batches(max_chunksize=700)


def _write_arrow(path, **options):
    batches = _arrow_batches()
    idv.write(path, batches[0])             # its schema
    with idv.open(path) as f:
        schema = f.schema
    with idv.Writer(path, schema, rows_per_block=500, **options) as w:
        for batch in batches:
            w.write_batch(batch)


@pytest.mark.parametrize("checksums", [True, False], ids=["checksums", "plain"])
@pytest.mark.parametrize("source", ["numpy", "arrow"])
def test_added_statistics_equal_the_writers(tmp_path, checksums, source):
    """The writer's statistics (a batch's blocks found in one pass where they can be) equal
    those found block by block from the blocks read back."""
    added, written = tmp_path / "added.idv", tmp_path / "written.idv"
    if source == "numpy":
        idv.write(added, _data(), rows_per_block=500, checksums=checksums, statistics=False)
        idv.write(written, _data(), rows_per_block=500, checksums=checksums)
    else:
        _write_arrow(added, checksums=checksums, statistics=False)
        _write_arrow(written, checksums=checksums)
    assert idv.add_statistics(added)
    with idv.open(added) as a, idv.open(written) as w:
        assert a.has_checksums == checksums
        sa, sw = a.statistics, w.statistics
        assert sorted(sa.columns) == sorted(sw.columns)
        for i in sw.columns:
            ca, cw = sa.columns[i], sw.columns[i]
            assert np.array_equal(ca.present, cw.present)
            assert np.array_equal(ca.missing, cw.missing)
            if cw.domain == S.TEXT:
                assert ca.low == cw.low and ca.high == cw.high
                assert np.array_equal(ca.flags, cw.flags)
            else:
                has = cw.present > 0
                assert np.array_equal(ca.low[has], cw.low[has])
                assert np.array_equal(ca.high[has], cw.high[has])
        assert a.read(["I"], filter=[("I", ">", 5)])["I"].tolist() == \
            [v for v in _data()["I"].tolist() if v > 5]
    assert idv.verify(added).ok


def test_stats_command_prints_each_column(tmp_path):
    path = tmp_path / "d.idv"
    idv.write(path, {"n": np.array([3, -7, 12]), "s": ["b", "a", "c"]}, statistics=False)
    rc, out, err = run("stats", path, check_rc=0)
    assert "carries no statistics" in out
    assert "-7" in out and "12" in out
    run("stats", "--add", path, check_rc=0)
    got = run_json("stats", path)["files"][0]
    assert got["stored"] is True
    assert [(c["name"], c["min"], c["max"], c["present"]) for c in got["columns"]] == \
        [("n", -7, 12, 3), ("s", "a", "c", 3)]


def test_stats_prints_floats_as_cat_prints_them(tmp_path):
    """At the column's precision: a Single 0.3 is 0.3, not 0.30000001192092896."""
    path = tmp_path / "f.idv"
    idv.write(path, {"f": np.array([0.1, 0.3, 1e-7, np.nan, 123456792.0], np.float32),
                     "d": np.array([0.1, 0.3, 2.5, np.nan, 1e300])})
    got = {c["name"]: (c["min"], c["max"]) for c in run_json("stats", path)["files"][0]["columns"]}
    assert got == {"f": (1e-07, 1.2345679e+08), "d": (0.1, 1e+300)}     # as head --json
    rc, out, err = run("stats", path, check_rc=0)
    assert [line.split()[4:] for line in out.splitlines()[2:]] == \
        [["1e-07", "1.2345679e+08"], ["0.1", "1e+300"]]
    rc, out, err = run("cat", path, "--format", "csv", check_rc=0)
    assert {"1e-07", "1.2345679e+08", "1e+300"} <= set(out.replace("\n", ",").split(","))


def test_stats_marks_a_hidden_column_as_info_does(tmp_path):
    path = tmp_path / "dup.idv"
    idv.write(path, [("a", np.arange(3)), ("b", np.arange(3.0)), ("a", np.arange(3) * 10)])
    got = run_json("stats", path)["files"][0]["columns"]
    assert [(c["name"], c["hidden"], c["max"]) for c in got] == \
        [("a", True, 2), ("b", False, 2.0), ("a", False, 20)]
    rc, out, err = run("stats", path, check_rc=0)
    assert [line.split()[:2] for line in out.splitlines()[2:]] == \
        [["a", "(hidden)"], ["b", "Double"], ["a", "Int64"]]


def test_adding_never_replaces_a_file_replaced_meanwhile(tmp_path, monkeypatch):
    from idv._reader import block_stats
    path, newer = tmp_path / "f.idv", tmp_path / "newer.idv"
    idv.write(path, {"x": np.arange(1000.0)}, statistics=False)
    idv.write(newer, {"x": np.ones(1500)}, statistics=False)
    want = newer.read_bytes()
    compute = block_stats.compute

    def replaced_meanwhile(f):          # another program's atomic replace, mid-computation
        got = compute(f)
        os.replace(newer, path)
        return got
    monkeypatch.setattr(block_stats, "compute", replaced_meanwhile)
    with pytest.raises(idv.IdvFormatError, match="changed while its statistics were computed"):
        idv.add_statistics(path)
    assert path.read_bytes() == want                        # the newer file, untouched
    assert [p.name for p in tmp_path.iterdir()] == ["f.idv"]   # no temporary left


def test_adding_to_a_file_without_rows_says_so(tmp_path):
    path = tmp_path / "empty.idv"
    idv.write(path, {"x": np.zeros(0)})
    from idv.cli import main
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["stats", "--add", str(path)]) == 0
    assert "nothing to add: no rows" in out.getvalue()
