"""idv.polars.scan_idv: a polars LazyFrame whose projection, predicate, row limit and batch
size pass into the read; results equal polars over the same data in memory, with and without
block statistics, and DuckDB queries the LazyFrame."""
from __future__ import annotations

import datetime as dt
import io

import numpy as np
import pytest

import idv

pl = pytest.importorskip("polars", reason="scan_idv needs polars")
from idv._engines.engine_filters import from_polars  # noqa: E402
from idv.polars import scan_idv  # noqa: E402
from idv._scan import filter_tree  # noqa: E402

N = 20_000


def _data():
    rng = np.random.default_rng(2)
    x = rng.random(N)
    x[::7] = np.nan
    return {"ts": np.arange(N, dtype=np.int64), "x": x,
            "c": np.array(["a", "b", "c"], object)[np.arange(N) % 3],
            "when": np.datetime64("2024-01-01") + np.arange(N).astype("timedelta64[m]")}


@pytest.fixture(scope="module", params=[True, False], ids=["statistics", "none"])
def path(request, tmp_path_factory):
    p = tmp_path_factory.mktemp("polars") / "d.idv"
    idv.write(p, _data(), rows_per_block=1000, statistics=request.param)
    return p


@pytest.fixture(scope="module")
def frame():
    d = _data()
    return pl.DataFrame({"ts": d["ts"], "x": d["x"], "c": d["c"],
                         "when": d["when"].astype("datetime64[us]")})


PREDICATES = [
    (pl.col("ts") >= 5000) & (pl.col("ts") < 5200),
    (pl.col("c") == "b") | (pl.col("ts") < 10),
    pl.col("x") > 0.5,                                   # NaN: polars' rules, not translated
    pl.col("when") < dt.datetime(2024, 1, 1, 2),
    ~(pl.col("ts") > 3),
    pl.col("ts") > 10**9,
]


@pytest.mark.parametrize("k", range(len(PREDICATES)))
def test_filtered_scans_equal_polars_in_memory(path, frame, k):
    pred = PREDICATES[k]
    got = scan_idv(path).filter(pred).select("ts", "c").collect()
    want = frame.filter(pred).select("ts", "c")
    assert got.equals(want)


def test_projection_limit_and_batches(path, frame):
    got = scan_idv(path).select("c").head(2500).collect()
    assert got.equals(frame.select("c").head(2500))
    assert scan_idv(path).collect().shape == frame.shape


@pytest.mark.parametrize("n", [0, 1, 999, 1000, 1001, N + 5])
def test_a_row_limit_reads_only_the_blocks_that_hold_its_rows(path, frame, n):
    """head(n) without a predicate: the first n rows, the blocks (of 1,000 rows) past them
    never decoded; with a predicate, the limit applies to the rows that match."""
    with idv.dataset(path) as ds:
        got = scan_idv(ds).head(n).collect()
        with ds.using(0) as f:
            decoded = {name: f[name].blocks_decoded for name in ("ts", "c")}
    assert got.equals(frame.head(n))
    assert decoded == dict.fromkeys(decoded, min(-(-n // 1000), N // 1000))
    pred = pl.col("ts") % 3 == 1
    assert scan_idv(path).filter(pred).head(n).collect().equals(frame.filter(pred).head(n))


def test_polars_gets_frames_of_its_batch_size_with_text_as_string_views(path, frame,
                                                                         monkeypatch):
    """The frames polars is handed: whole blocks (1,000 rows) grouped up to the batch size it
    asks for or FRAME_BYTES, with only the columns it asked for, Text in polars' own layout
    (Arrow string views, which polars takes as they are); the rows tested by idv where the
    predicate is taken whole, else by polars on frames of whole blocks."""
    import polars.io.plugins as plugins
    got = {}
    register = plugins.register_io_source

    def keep(io_source, **kw):
        got["source"] = io_source
        return register(io_source, **kw)
    monkeypatch.setattr(plugins, "register_io_source", keep)
    scan_idv(path)
    seen = []
    monkeypatch.setattr(pl, "from_arrow", lambda t, **kw: seen.append(t) or pl.DataFrame(t))
    with idv.open(path) as f:           # statistics: only the 5 blocks that may match read
        stats = f.statistics is not None
    half = (pl.col("ts") < 4500) & (pl.col("x") > 0.5)     # x > 0.5: polars' rules
    whole = pl.col("ts") < 4500
    for pred, rows, cols in [(half, 5000 if stats else N, ["c", "ts", "x"]),
                             (whole, 4500, ["c"])]:
        seen.clear()
        frames = list(got["source"](["c"], pred, None, 2500))  # up to 16 MiB a frame: one
        assert [(t.num_rows, t.column_names) for t in seen] == [(rows, cols)]
        assert pl.concat(frames).equals(frame.filter(pred).select("c"))
    monkeypatch.setattr(idv.polars, "FRAME_BYTES", 0)      # frames of the batch size alone
    for pred, want in [(half, [2000, 2000, 1000] if stats else [2000] * 10),
                       (whole, [2000, 2500])]:
        seen.clear()
        frames = list(got["source"](["c"], pred, None, 2500))
        assert [t.num_rows for t in seen] == want
        assert all(t.schema.field("c").type == "string_view" for t in seen)
        assert all(f.columns == ["c"] for f in frames)
        assert pl.concat(frames).equals(frame.filter(pred).select("c"))


def test_predicates_that_translate_skip_blocks():
    import json
    types = {"ts": idv.Int64, "x": idv.Double, "c": idv.Text}

    def tree(e):
        return from_polars(json.loads(e.meta.serialize(format="json")), types)
    both = filter_tree.And((filter_tree.Cmp("ts", ">=", 5), filter_tree.Cmp("c", "==", "b")))
    assert tree((pl.col("ts") >= 5) & (pl.col("c") == "b")) == (both, True)
    assert tree(pl.lit(3) < pl.col("ts")) == (filter_tree.Cmp("ts", ">", 3), True)
    assert tree(pl.col("x") > 0.5) == (None, False)     # NaN orders differently in polars
    assert tree((pl.col("ts") > 1) & (pl.col("x") > 0.5)) == \
        (filter_tree.Cmp("ts", ">", 1), False)          # blocks skipped; polars tests rows
    flags = {"b": idv.Boolean, "s": idv.Single, "u": idv.Byte}

    def flag(e):
        return from_polars(json.loads(e.meta.serialize(format="json")), flags)
    assert flag(pl.col("b") == True) == (filter_tree.Cmp("b", "==", True), True)  # noqa: E712
    assert flag(pl.col("b") > 0.5) == (None, False)     # polars compares it as a float
    assert flag(pl.col("s") == 0.1) == (None, False)    # polars casts 0.1 to Float32
    assert flag(pl.col("u") > 300) == (None, False)     # beyond Byte: polars' own rules
    assert flag(pl.col("u") > 3) == (filter_tree.Cmp("u", ">", 3), True)
    assert tree((pl.col("ts") > 1) | (pl.col("x") > 0.5)) == (None, False)


def test_a_predicate_polars_refuses_is_refused_whatever_the_rows(tmp_path):
    """A comparison polars refuses over a frame in memory (a key's Categorical with a float)
    is refused through scan_idv too, over a file of no rows and where the statistics rule out
    every block for the predicate's other part."""
    empty, full = tmp_path / "empty.idv", tmp_path / "full.idv"
    for p, n in ((empty, 0), (full, 50)):
        idv.write(p, {"k": np.arange(n, dtype=np.uint32) % 3, "i": np.arange(n)},
                  types={"k": idv.Key(idv.UInt32, 2)}, metadata={"k": {"KeyValues": ["a", "b"]}},
                  rows_per_block=10)
    for p, e in ((empty, pl.col("k") < 0.5), (full, (pl.col("i") < -1) & (pl.col("k") < 0.5))):
        with pytest.raises(pl.exceptions.ComputeError) as in_memory:
            pl.from_arrow(idv.to_arrow(p)).filter(e)
        with pytest.raises(pl.exceptions.ComputeError) as got:
            scan_idv(p).filter(e).collect()
        assert str(got.value).splitlines()[0] == str(in_memory.value).splitlines()[0]
    # and answered where polars answers in memory: what it pushes (``false & (k >= 2)``)
    # is filtered through its optimizer, which folds the refused part away there too
    e = (pl.col("k") >= 2) & pl.col("k").is_in(["a", ""]) & pl.col("k").is_in([])
    assert pl.from_arrow(idv.to_arrow(full)).filter(e).height == 0
    assert scan_idv(full).filter(e).collect().height == 0


def test_duckdb_queries_the_lazy_frame(path, frame):
    duckdb = pytest.importorskip("duckdb", reason="needs duckdb")
    lf = scan_idv(path)       # noqa: F841 - DuckDB finds it by name
    query = "select count(*), min(ts) from lf where ts >= 15000 and c = 'a'"
    got = duckdb.sql(query).fetchall()[0]
    want = frame.filter((pl.col("ts") >= 15000) & (pl.col("c") == "a"))
    assert got == (want.height, want["ts"].min())


# ---- many files: scan_idv reads through idv.dataset -----------------------------------------

def _parts(n=3, rows=1000):
    return [{"ts": np.arange(i * rows, (i + 1) * rows, dtype=np.int64),
             "c": np.array(["a", "b"], object)[np.arange(rows) % 2]} for i in range(n)]


def test_a_url_glob_of_several_files_opens_each_once(monkeypatch):
    fsspec = pytest.importorskip("fsspec")
    from idv._reader import reader
    fs = fsspec.filesystem("memory")
    root = "/idv-polars-glob"
    try:
        for i, part in enumerate(_parts()):
            buf = io.BytesIO()
            idv.write(buf, part)
            fs.pipe(f"{root}/part-{i}.idv", buf.getvalue())
        opens = []
        real = reader.open_any
        monkeypatch.setattr(reader, "open_any", lambda *a, **k: (opens.append(a[0]),
                                                                  real(*a, **k))[1])
        lf = scan_idv(f"memory://{root}/*.idv")
        got = lf.filter(pl.col("ts") % 500 == 0).collect()
        assert got["ts"].to_list() == [0, 500, 1000, 1500, 2000, 2500]
        assert got["c"].to_list() == ["a"] * 6
        assert sorted(map(str, opens)) == [f"{root}/part-{i}.idv" for i in range(3)]
        assert lf.select(pl.len()).collect().item() == 3000
        assert len(opens) == 3                      # a second query opens nothing again
    finally:
        fs.rm(root, recursive=True)


def test_files_whose_schemas_differ_are_refused_naming_the_file(tmp_path):
    a, b = tmp_path / "a.idv", tmp_path / "b.idv"
    idv.write(a, {"x": np.arange(3, dtype=np.int32)})
    idv.write(b, {"x": np.arange(3, dtype=np.float64)})
    with pytest.raises(ValueError, match=r"b\.idv.*'x'"):
        scan_idv(str(tmp_path))
    with pytest.warns(idv.IdvWarning, match="leaves out 1 column .* 'x'"):
        lf = scan_idv([a, b], schema="common")      # dataset options pass through
    assert lf.collect_schema().names() == []


def test_a_directory_and_a_list_read_every_file_in_order(tmp_path):
    for i, part in enumerate(_parts()):
        idv.write(tmp_path / f"p{i}.idv", part)
    by_dir = scan_idv(tmp_path).collect()
    by_list = scan_idv([tmp_path / "p0.idv", tmp_path / "p1.idv"]).collect()
    assert by_dir["ts"].to_list() == list(range(3000))
    assert by_list["ts"].to_list() == list(range(2000))


def test_each_schema_is_its_own_across_scans(tmp_path, monkeypatch):
    """A scan's polars schema is its files' own, however many scans came before: the same
    names with other types, then past the number of schemas kept."""
    import idv.polars as ip
    monkeypatch.setattr(ip, "SCHEMAS", 2)
    kinds = [np.int32, np.float64, np.int64, np.bool_, np.int32]
    for i, kind in enumerate(kinds):
        path = str(tmp_path / f"{i}.idv")
        idv.write(path, {"a": np.arange(3).astype(kind), "b": np.zeros(3, np.float32)})
        lf = scan_idv(path)
        assert lf.collect_schema() == pl.Schema({"a": pl.from_numpy(
            np.zeros(1, kind)).to_series().dtype, "b": pl.Float32})
        assert lf.collect()["a"].to_list() == np.arange(3).astype(kind).tolist()
    assert len(ip._schemas) <= 2


# ---- times polars gets floored to microseconds ----------------------------------------------

T0 = np.datetime64("2020-01-01T00:00:00", "us").astype("datetime64[100ns]")
US_MIN = -(2**63 - 1) // 10            # the least microsecond whose ticks int64 holds


@pytest.fixture(scope="module", params=[True, False], ids=["statistics", "none"])
def floored_path(request, tmp_path_factory):
    """DateTime and TimeSpan columns 'auto' reads in microseconds (0001-01-01 and the least
    TimeSpans do not fit nanoseconds), flooring their 100-ns ticks: one row a block."""
    p = tmp_path_factory.mktemp("floored") / "f.idv"
    tick = np.timedelta64(1, "100ns")
    year1 = np.int64(-idv.types.EPOCH_TICKS).view("datetime64[100ns]")       # 0001-01-01
    when = np.array([T0 + 3 * tick, T0, year1, T0 + 10 * tick, T0 - 3 * tick, T0 + 13 * tick])
    # -2**63 (TimeSpan.MinValue) is numpy's NaT: the least ticks it writes, floored to the
    # least microsecond int64 ticks hold (clamped) as the next ones are
    span = np.array([3, 0, -2**63 + 1, 10, -3, -2**63 + 5], "int64").view("timedelta64[100ns]")
    idv.write(p, {"when": when, "span": span, "i": np.arange(6)}, rows_per_block=1,
              statistics=request.param)
    return p


FLOORED_PREDICATES = [getattr(pl.col("when"), op)(dt.datetime(2020, 1, 1)) for op in
                      ("__gt__", "__ge__", "__lt__", "__le__", "__eq__", "__ne__")] + [
    pl.col("when") == dt.datetime(2020, 1, 1, 0, 0, 0, 1),
    pl.col("span") > dt.timedelta(0), pl.col("span") <= dt.timedelta(0),
    pl.col("span") == dt.timedelta(microseconds=-1),
    pl.col("span") == pl.lit(US_MIN, pl.Duration("us")),
    pl.col("span") > pl.lit(US_MIN, pl.Duration("us")),
    (pl.col("when") <= dt.datetime(2020, 1, 1)) & (pl.col("span") >= dt.timedelta(0)),
]


@pytest.mark.filterwarnings("ignore::idv.IdvWarning")
@pytest.mark.parametrize("k", range(len(FLOORED_PREDICATES)))
def test_a_predicate_on_floored_times_keeps_what_polars_keeps_of_them(floored_path, k):
    """polars compares the floored values it is given: a pushed-down comparison keeps the rows
    polars keeps of the collected frame, and the statistics rule out no block of them."""
    pred = FLOORED_PREDICATES[k]
    lf = scan_idv(floored_path)
    assert lf.collect_schema()["when"] == pl.Datetime("us")
    want = lf.collect().filter(pred)["i"].to_list()
    assert lf.filter(pred).collect()["i"].to_list() == want
    duckdb = pytest.importorskip("duckdb", reason="needs duckdb")
    if k < 6:                   # DuckDB pushes its WHERE into the LazyFrame
        op = [">", ">=", "<", "<=", "=", "<>"][k]
        got = duckdb.sql(f"select i from lf where \"when\" {op} timestamp '2020-01-01' "
                         f"order by i").fetchall()
        assert [r[0] for r in got] == want


def test_frames_fit_half_the_memory_limit_as_every_streams_pieces(tmp_path):
    """Under a limit smaller than two frames of 16 MiB, the frames are cut to half of it: a
    filtered query over a column larger than the limit runs, its frames' matches kept (a
    frame of the whole column was refused)."""
    p = str(tmp_path / "x.idv")
    x = np.random.default_rng(3).random(400_000)              # 3.2 MB, blocks of 64 KB
    idv.write(p, {"x": x}, rows_per_block=8192)
    lf = scan_idv(p, memory_limit=1_000_000)
    got = lf.filter(pl.col("x") > 0.95).select(pl.col("x").sum()).collect().item()
    assert got == pytest.approx(x[x > 0.95].sum(), rel=1e-12)
    with pytest.raises(idv.MemoryLimitError, match="frames for polars"):
        lf.filter(pl.col("x") > 0.01).collect()            # nearly every row: kept
    with pytest.raises(idv.MemoryLimitError, match="reading 1 column of 1 file"):
        lf.collect()               # the whole column (3.2 MB): refused before it is read
