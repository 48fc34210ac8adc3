"""idv.arrow_dataset: a pyarrow.dataset.Dataset over .idv files. DuckDB's queries over it equal
numpy's filtering of the full read, with the projection and the filter pushed into idv (fewer
blocks decoded, fewer bytes fetched); pyarrow's calls give the Table that pyarrow's own
filtering of the whole data gives, with and without statistics, over one file or several."""
from __future__ import annotations

import datetime as dt
import importlib

import numpy as np
import pytest

import idv
from http_server import RangeServer

pa = pytest.importorskip("pyarrow", reason="idv.arrow_dataset needs pyarrow")
pc = pytest.importorskip("pyarrow.compute", reason="idv.arrow_dataset needs pyarrow")
pads = pytest.importorskip("pyarrow.dataset", reason="idv.arrow_dataset needs pyarrow")

from idv._scan import filter_tree  # noqa: E402
from idv._engines.engine_filters import from_arrow  # noqa: E402

ROWS, RPB = 3000, 256
KEYS = ["red", "green", "blue"]
LONG = "p" * 70                     # longer than any stored Text bound
STAMP = 'at 2024-01-01 00:00:00 and "q"'        # a text that looks like a timestamp
T0 = np.datetime64("2024-01-01T00:00:00")


def _data():
    rng = np.random.default_rng(5)
    f = rng.normal(size=ROWS)
    f[rng.random(ROWS) < 0.1] = np.nan
    f[1024:1280] = np.nan                                   # a block with no number
    f[3::97], f[5::89] = -0.0, 0.0          # zeros of both signs: Arrow's is_in tells them apart
    f32 = rng.random(ROWS).astype(np.float32)
    f32[::50] = np.float32(0.1)                 # 0.1 in float32 is above the double 0.1
    txt = [(LONG if i % 3 else "") + f"{rng.integers(0, 500):03d}" for i in range(ROWS)]
    txt[7] = STAMP
    return {
        "Id": np.arange(ROWS, dtype=np.int64),
        "I": rng.integers(-50, 50, ROWS).astype(np.int32),
        "F": f,
        "F32": f32,
        "B": rng.random(ROWS) < 0.3,
        "K": rng.integers(0, 4, ROWS).astype(np.uint32),
        "When": T0 + np.arange(ROWS).astype("timedelta64[m]"),          # sorted
        "Span": rng.integers(0, 10**6, ROWS).astype("timedelta64[s]"),
        "Txt": txt,
    }


def _write(folder, statistics, parts=1):
    """The data in `parts` files of `folder` (rows end to end)."""
    data = _data()
    cuts = np.linspace(0, ROWS, parts + 1).astype(int)
    paths = []
    for i in range(parts):
        path = folder / f"part{i}.idv"
        idv.write(path, {k: v[cuts[i]:cuts[i + 1]] for k, v in data.items()},
                  types={"K": idv.Key(idv.UInt32, count=3)},
                  metadata={"K": {"KeyValues": KEYS}}, rows_per_block=RPB,
                  statistics=statistics)
        paths.append(str(path))
    return paths


@pytest.fixture(scope="module", params=[(True, 1), (False, 1), (True, 3)],
                ids=["statistics", "none", "three-files"])
def paths(request, tmp_path_factory):
    statistics, parts = request.param
    return _write(tmp_path_factory.mktemp("ad"), statistics, parts)


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """The whole data as pyarrow reads it without any filter (the reference)."""
    path = _write(tmp_path_factory.mktemp("whole"), False)[0]
    return idv.to_arrow(path, datetime="us")


@pytest.fixture(scope="module")
def full():
    return _data()


def _same(got, want):
    """Tables equal in schema (metadata included) and values, NaN equal to NaN."""
    assert got.schema.equals(want.schema, check_metadata=True)
    for name in want.column_names:
        a, b = got.column(name), want.column(name)
        if pa.types.is_floating(b.type):
            np.testing.assert_array_equal(a.to_numpy(), b.to_numpy(), err_msg=name)
        else:
            assert a.equals(b), name
    return True


def _blocks_decoded(ds, name):
    d = ds.idv_dataset
    return sum(d.open_file(i)[name].blocks_decoded for i in range(len(d.files)))


EXPRESSIONS = {
    "range": (pc.field("Id") >= 1000) & (pc.field("Id") < 1200),
    "or": (pc.field("I") < -45) | (pc.field("I") > 45),
    "nan": pc.field("F") > 0.5,
    "float32": pc.field("F32") > 0.1,
    "bool": pc.field("B") == True,  # noqa: E712 - a pyarrow expression
    "text": pc.field("Txt") < LONG + "3",
    "text-in": pc.field("Txt").isin(["007", "123", LONG + "042"]),
    "zero-in": pc.field("F").isin([0.0, 0.5]),
    "negative-zero-not-in": ~pc.field("F").isin([-0.0]),
    "timestamp-in-text": pc.field("Txt") == STAMP,
    "when": pc.field("When") < pa.scalar(dt.datetime(2024, 1, 1, 5), pa.timestamp("us")),
    "span": pc.field("Span") > pa.scalar(500_000, pa.duration("s")),
    "key": pc.field("K") == "green",
    "not": ~(pc.field("I") > 0),
    "is_nan": pc.field("F").is_nan(),
    "is_valid": pc.field("F").is_valid() & (pc.field("Id") >= 1000),
    "function": pc.add(pc.field("I"), 1) > 40,
    "empty": pc.field("Id") < 0,
}


@pytest.mark.parametrize("name", list(EXPRESSIONS))
def test_filtered_tables_equal_pyarrow_filtering_the_whole_data(paths, whole, name):
    ds = idv.arrow_dataset(paths)
    e = EXPRESSIONS[name]
    want = whole.filter(e)
    got = ds.to_table(filter=e)
    assert _same(got, want)
    assert ds.count_rows(filter=e) == want.num_rows
    some = ds.to_table(columns=["Id", "Txt"], filter=e)
    assert some.equals(want.select(["Id", "Txt"]))


def test_duckdb_pushes_projection_and_filter_into_idv(paths, full):
    duckdb = pytest.importorskip("duckdb", reason="needs duckdb")
    ds = idv.arrow_dataset(paths)
    t = T0 + np.timedelta64(2800, "m")
    got = duckdb.sql("select Id, I from ds where \"When\" >= timestamp '2024-01-02 22:40:00' "
                     "order by Id").fetchall()
    keep = full["When"] >= t
    assert got == list(zip(full["Id"][keep].tolist(), full["I"][keep].tolist()))
    assert _blocks_decoded(ds, "F") == 0 and _blocks_decoded(ds, "Txt") == 0   # projection
    whole = ROWS // RPB + 1
    if ds.idv_dataset.open_file(0).statistics is not None:          # 200 of 3,000 rows
        assert _blocks_decoded(ds, "I") <= 3
    else:
        assert _blocks_decoded(ds, "I") == whole
    before = _blocks_decoded(ds, "I")                  # IN: pushed as if_else(is_valid...)
    got = duckdb.sql("select I from ds where Id in (5, 2900) order by Id").fetchall()
    assert [r[0] for r in got] == full["I"][[5, 2900]].tolist()
    if ds.idv_dataset.open_file(0).statistics is not None:
        assert _blocks_decoded(ds, "I") - before == 2
    # a filter on a column the query does not select, and an empty result
    got = duckdb.sql("select Id from ds where I > 45 and B order by Id").fetchall()
    assert [r[0] for r in got] == full["Id"][(full["I"] > 45) & full["B"]].tolist()
    assert duckdb.sql("select count(*) from ds where Id < 0").fetchall() == [(0,)]
    got = duckdb.sql("select count(*) from ds where F > 0.5 and Txt < 'p'").fetchall()
    above = (full["F"] > 0.5) | np.isnan(full["F"])        # DuckDB: NaN above every number
    assert got == [(int(np.sum(above & (np.array(full["Txt"]) < "p"))),)]


def test_a_one_percent_duckdb_query_over_http_fetches_at_most_3_percent_of_the_bytes(
        tmp_path):
    duckdb = pytest.importorskip("duckdb", reason="needs duckdb")
    pytest.importorskip("fsspec", reason="remote reads need the remote extra")
    pytest.importorskip("aiohttp", reason="HTTP reads need aiohttp")
    n = 200_000
    path = tmp_path / "s.idv"
    idv.write(path, {"ts": np.arange(n, dtype=np.int64),
                     "v": np.random.default_rng(0).random(n)}, rows_per_block=1024)
    data = path.read_bytes()
    lo = n // 2
    with RangeServer({"/s.idv": data}) as srv:
        ds = idv.arrow_dataset(srv.url("/s.idv"))
        srv.reset_counts()
        got = duckdb.sql(f"select ts, v from ds where ts >= {lo} and ts < {lo + n // 100} "
                         "order by ts").fetchall()
        assert [r[0] for r in got] == list(range(lo, lo + n // 100))
        assert srv.bytes_served <= 0.03 * len(data), (srv.bytes_served, len(data))


def test_head_reads_only_the_blocks_that_hold_its_rows(tmp_path):
    """head(n) without a filter decodes the blocks of its rows alone, in one file or across
    files (over HTTP: their bytes alone are fetched); with a filter, the windows until n rows
    match."""
    path = _sorted(tmp_path, True)
    ds = idv.arrow_dataset(path)
    got = ds.head(1500, columns=["ts", "x"])
    assert got.column("ts").to_pylist() == list(range(1500))
    assert got.column("x").to_pylist() == [v % 7 for v in range(1500)]
    assert _blocks_decoded(ds, "ts") == 2 and _blocks_decoded(ds, "x") == 2
    two = idv.arrow_dataset([path, path])
    assert two.head(100_500, columns=["ts"]).column("ts").to_pylist() == \
        list(range(100_000)) + list(range(500))
    assert [two.idv_dataset.open_file(i)["ts"].blocks_decoded for i in (0, 1)] == [100, 1]
    e = pc.field("ts") >= 50_000
    assert ds.head(3, columns=["ts"], filter=e).column("ts").to_pylist() == [50_000, 50_001,
                                                                           50_002]
    pytest.importorskip("fsspec", reason="remote reads need the remote extra")
    pytest.importorskip("aiohttp", reason="HTTP reads need aiohttp")
    data = path.read_bytes()
    with RangeServer({"/s.idv": data}) as srv:
        remote = idv.arrow_dataset(srv.url("/s.idv"))
        srv.reset_counts()
        assert remote.head(5, columns=["ts"]).column("ts").to_pylist() == list(range(5))
        assert srv.bytes_served <= 0.03 * len(data), (srv.bytes_served, len(data))


def _sorted(tmp_path, statistics):
    path = tmp_path / f"sorted{statistics}.idv"
    idv.write(path, {"ts": np.arange(100_000, dtype=np.int64),
                     "x": np.arange(100_000) % 7}, rows_per_block=1000, statistics=statistics)
    return path


def test_count_rows_decodes_only_the_blocks_statistics_cannot_decide(tmp_path):
    e = (pc.field("ts") >= 10_500) & (pc.field("ts") < 30_500)
    ds = idv.arrow_dataset(_sorted(tmp_path, True))
    assert ds.count_rows(filter=e) == 20_000
    assert _blocks_decoded(ds, "ts") == 2               # blocks 10 and 30: the others decided
    assert ds.count_rows(filter=pc.field("ts") >= 0) == 100_000
    assert ds.count_rows(filter=(pc.field("ts") < 0) | (pc.field("ts") > 10**6)) == 0
    assert _blocks_decoded(ds, "ts") == 2
    assert ds.count_rows() == 100_000
    plain = idv.arrow_dataset(_sorted(tmp_path, False))
    assert plain.count_rows(filter=e) == 20_000
    assert _blocks_decoded(plain, "ts") == 100
    # what statistics cannot decide is decoded, and still counted exactly
    x = idv.arrow_dataset(_sorted(tmp_path, True))
    assert x.count_rows(filter=(pc.field("x") == 3) & (pc.field("ts") < 7000)) == 1000
    assert _blocks_decoded(x, "x") == 7


def test_a_filter_taken_whole_is_tested_by_idv_on_columns_decoded_once(tmp_path,
                                                                        monkeypatch):
    """A filter every comparison of which means to Arrow what it means to idv: idv tests the
    rows, on the columns it reads for the batches, each block decoded once; a filter idv takes
    in part: pyarrow tests the rows."""
    from idv._values import comparison
    ds = idv.arrow_dataset(_sorted(tmp_path, False))
    tested = []
    real = comparison.rows
    monkeypatch.setattr(comparison, "rows", lambda t, x: tested.append(len(x)) or real(t, x))
    whole = (pc.field("ts") >= 10_500) & (pc.field("x") == 3)
    got = ds.to_table(columns=["ts", "x"], filter=whole)
    assert got.column("ts").to_pylist() == [v for v in range(10_500, 100_000) if v % 7 == 3]
    assert _blocks_decoded(ds, "ts") == 100 and _blocks_decoded(ds, "x") == 100
    assert sum(tested) == 2 * 100_000           # each comparison on every row, by idv
    tested.clear()
    part = (pc.field("ts") >= 10_500) & (pc.field("x") == pa.scalar(3.0, pa.float32()))
    assert ds.to_table(columns=["ts"], filter=part).num_rows == got.num_rows
    assert not tested                           # pyarrow tests the rows


def test_scanner_head_take_and_batches(paths, whole):
    ds = idv.arrow_dataset(paths)
    assert isinstance(ds, pads.Dataset) and ds.schema.equals(whole.schema)
    e = pc.field("I") > 40
    sc = ds.scanner(columns=["Txt", "Id"], filter=e, batch_size=100)
    assert sc.projected_schema.names == ["Txt", "Id"] and sc.dataset_schema.equals(ds.schema)
    reader = sc.to_reader()
    batches = list(reader)
    assert all(b.num_rows <= 100 for b in batches) and reader.schema.equals(sc.projected_schema)
    want = whole.filter(e).select(["Txt", "Id"])
    assert pa.Table.from_batches(batches, sc.projected_schema).equals(want)
    assert sc.to_table().equals(want) and sc.count_rows() == want.num_rows
    assert pa.Table.from_batches(list(sc.to_batches())).equals(want)
    assert sc.head(7).equals(want.slice(0, 7))
    assert sc.take([2, 0]).equals(want.take([2, 0]))
    assert ds.head(5, columns=["Id"]).column("Id").to_pylist() == [0, 1, 2, 3, 4]
    assert ds.head(0).num_rows == 0
    assert ds.head(10, columns=["Id"], filter=e).equals(want.select(["Id"]).slice(0, 10))
    rows = [2999, 0, 1500, 1500, 257, 1999]
    assert _same(ds.take(rows), whole.take(rows))
    assert ds.take(rows, columns=["Txt", "K"]).equals(whole.select(["Txt", "K"]).take(rows))
    assert ds.take([], columns=["Id"]).num_rows == 0
    assert pa.Table.from_batches(ds.to_batches(columns=["Id"])).column("Id").to_pylist() == \
        list(range(ROWS))
    assert ds.files == paths
    with idv.arrow_dataset(paths) as again:
        assert again.count_rows() == ROWS
    assert again.idv_dataset.num_open_files == 0


def test_a_scan_hands_out_groups_of_blocks_with_numbers_uncopied(paths, monkeypatch):
    """Without a batch size, the blocks go out together, up to pyarrow's default batch size:
    the reader DuckDB reads gives the first block alone (a LIMIT stops there), then the
    others in one batch (3000 rows, 12 blocks, in one file or three); the numbers of the
    blocks read together seen as one array rather than copied."""
    from idv._engines.arrow_scanner import BATCH_ROWS
    ds = idv.arrow_dataset(paths)
    batches = list(ds.scanner(["Id", "Txt"]).to_reader())
    first = batches[0].num_rows     # a block; of small files read together, the first file
    assert len(batches) == 2 and first in (RPB, ROWS // 3) and batches[1].num_rows == ROWS - first
    assert all(b.num_rows <= BATCH_ROWS for b in batches)
    assert pa.Table.from_batches(batches).equals(idv.arrow_dataset(paths).to_table(
        ["Id", "Txt"], batch_size=RPB))
    assert ds.to_table(["Id", "Txt"]).column("Txt").num_chunks == 1
    monkeypatch.setattr(pa, "concat_arrays", None)      # numbers: no copy to make
    ids = pa.chunked_array([b.column(0) for b in ds.scanner(["Id"]).to_reader()])
    assert ids.to_pylist() == list(range(ROWS)) and ids.num_chunks == 2


def test_the_reader_decodes_no_block_past_the_first_until_asked(tmp_path):
    """The reader DuckDB reads (to_reader) decodes the file's first block for its first
    batch and queues the rest only when the next batch is asked for: a LIMIT that stops
    after the first batch waits for no other decoding."""
    idv.write(tmp_path / "t.idv", {"Id": np.arange(3000, dtype=np.int64)}, rows_per_block=250)
    with idv.arrow_dataset(tmp_path / "t.idv") as ds:
        reader = ds.scanner(["Id"]).to_reader()
        first = reader.read_next_batch()
        with ds.idv_dataset.using(0) as f:
            assert first.num_rows == 250 and f["Id"].blocks_decoded == 1
            rest = reader.read_all()
            assert f["Id"].blocks_decoded == 12
        assert first.column(0).to_pylist() + rest.column("Id").to_pylist() == list(range(3000))


def test_times_come_as_written_in_microseconds_by_default(tmp_path):
    """By default (datetime="auto-us") the dataset DuckDB reads gives each time column in
    microseconds, DuckDB's unit, as the type it was written from (a zoned column a zoned
    timestamp, as to_arrow gives it, not a struct of UTC and offset), and 100-ns ticks floored
    with a warning rather than refused; DuckDB reads them so."""
    duckdb = pytest.importorskip("duckdb", reason="the dataset is read by DuckDB")
    pd = pytest.importorskip("pandas", reason="a zoned column is written from pandas")
    path = tmp_path / "t.idv"
    zoned = pd.to_datetime(["2024-01-01", "2024-06-01"]).tz_localize("Europe/Paris")
    fine = np.array(["2024-01-01T00:00:00.1234567", "2024-01-02"], "datetime64[ns]")
    idv.write(path, pd.DataFrame({"tz": zoned, "fine": fine}))
    with pytest.warns(idv.IdvWarning, match="floored to microseconds"), \
            idv.arrow_dataset(path) as ds:
        assert ds.schema.field("tz").type == pa.timestamp("us", tz="Europe/Paris") \
            == idv.to_arrow(path).schema.field("tz").type
        assert ds.schema.field("fine").type == pa.timestamp("us")
        got = pa.table(duckdb.sql("select tz, fine from ds").arrow())
    assert got.column("tz").cast(pa.int64()).to_pylist() == \
        pa.array(zoned).cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_pylist()
    assert got.column("fine").cast(pa.int64()).to_pylist() == \
        fine.astype("datetime64[us]").astype(np.int64).tolist()


def test_one_array_joins_slices_of_one_buffer_without_a_copy():
    from idv._engines.arrow_scanner import grouped
    from idv._interop.arrow_columns import one_array
    a = pa.array(np.arange(10, dtype=np.int64))
    one = one_array(pa, pa.chunked_array([a.slice(0, 4), a.slice(4, 6)]))
    assert one.equals(a) and one.buffers()[1].address == a.buffers()[1].address
    gap = one_array(pa, pa.chunked_array([a.slice(0, 4), a.slice(5, 5)]))
    assert gap.to_pylist() == [0, 1, 2, 3, 5, 6, 7, 8, 9]
    assert gap.buffers()[1].address != a.buffers()[1].address
    # arrays of their own over one memory, end to end (a scan window's pieces): one view
    memory = np.arange(10, dtype=np.float32)
    pieces = [pa.array(memory[:3]), pa.array(memory[3:3]), pa.array(memory[3:])]
    seen = one_array(pa, pa.chunked_array(pieces))
    assert seen.to_pylist() == memory.tolist()
    assert seen.buffers()[1].address == memory.ctypes.data
    del pieces, memory
    assert seen.to_pylist() == list(range(10))          # the memory held by the view
    apart = [pa.array(np.arange(3, dtype=np.float32)), pa.array(np.ones(2, np.float32))]
    assert one_array(pa, pa.chunked_array(apart)).to_pylist() == [0, 1, 2, 1, 1]
    with_nulls = [pa.array(memory_ := np.arange(4.0))[:2], pa.array([None, 1.0])]
    assert one_array(pa, pa.chunked_array(with_nulls)).to_pylist() == [0, 1, None, 1]
    del memory_
    texts = pa.chunked_array([pa.array(["a", "b"]), pa.array(["c"])])
    assert one_array(pa, texts).to_pylist() == ["a", "b", "c"]
    keys = pa.array(["x", "y"]).dictionary_encode()
    assert one_array(pa, pa.chunked_array([keys, keys])).to_pylist() == ["x", "y"] * 2
    assert one_array(pa, pa.chunked_array([], pa.int8())).to_pylist() == []
    rows = [pa.record_batch({"x": a.slice(i, 1)}) for i in range(10)]
    assert [[b.num_rows for b in g] for g in grouped(iter(rows), 3)] == [[1] * 3] * 3 + [[1]]
    assert [len(g) for g in grouped(iter(rows), 3, nbytes=5 * 8)] == [5, 5]   # or 40 bytes
    long = pa.record_batch({"x": a})
    cut = list(grouped(iter([long]), 4))
    assert [[b.num_rows for b in g] for g in cut] == [[4], [4], [2]]
    assert [b.column(0)[0].as_py() for g in cut for b in g] == [0, 4, 8]


def test_what_cannot_work_says_so(paths):
    ds = idv.arrow_dataset(paths)
    for call in (ds.get_fragments, lambda: ds.sort_by("Id"), lambda: ds.join(ds, "Id"),
                 lambda: ds.filter(pc.field("Id") > 3), lambda: ds.replace_schema(ds.schema),
                 lambda: ds.partition_expression,
                 lambda: pads.Scanner.from_dataset(ds).to_table(),
                 lambda: pads.write_dataset(ds, "unused", format="parquet")):
        with pytest.raises((NotImplementedError, TypeError)):
            call()
    with pytest.raises(TypeError, match="unexpected"):
        ds.scanner(nonsense=1)
    with pytest.raises(TypeError, match="Expression"):
        ds.to_table(filter=[("Id", ">", 3)])
    with pytest.raises(KeyError, match="Nope"):
        ds.to_table(filter=pc.field("Nope") > 3)
    with pytest.raises(TypeError):
        ds.scanner(columns={"x": pc.field("Id")})
    import pickle
    with pytest.raises(TypeError, match="picklable"):
        pickle.dumps(ds)
    # pyarrow's own options are taken (they tune Arrow's C++ scanner, which is not used)
    assert ds.to_table(columns=["Id"], use_threads=False, batch_readahead=2).num_rows == ROWS


def test_only_what_arrow_and_the_statistics_agree_on_prunes():
    types = {"i": idv.Int32, "f": idv.Single, "k": idv.Key(idv.UInt32, count=3),
             "s": idv.TimeSpan, "w": idv.DateTime, "t": idv.Text}

    def tree(e):
        return from_arrow(e, types)[:2]
    assert tree(pc.field("i") > 3) == (filter_tree.Cmp("i", ">", 3), True)
    got, exact = tree(pc.field("f") > 0.1)
    assert exact and got.value == 0.1                           # float32 compares in float64
    assert tree(pc.field("k") == "red") == (None, False)
    assert tree(pc.field("s") > pa.scalar(5, pa.duration("us"))) == (None, False)
    assert tree(pc.field("f").is_valid()) == (None, False)      # NaN is valid to Arrow
    # beyond Int32's range: no row, or every row, exactly
    assert tree(pc.field("i") > 10**12) == (filter_tree.Cmp("i", ">", 10**12), True)
    between = pa.scalar(150, pa.timestamp("ns"))                # between two ticks
    assert tree(pc.field("w") < between) == (None, False)
    # a part not taken is Arrow's to test on every row (it may raise on one the others rule
    # out): no block is skipped
    assert tree((pc.field("i") > 3) & (pc.field("k") == 1)) == (None, False)
    assert tree((pc.field("i") > 3) & (pc.field("i") < 9)) == (
        filter_tree.And((filter_tree.Cmp("i", ">", 3), filter_tree.Cmp("i", "<", 9))), True)
    assert tree((pc.field("i") > 3) | (pc.field("k") == 1)) == (None, False)
    assert tree(pc.field("i") > 1.5) == (None, False)          # Arrow: in float64
    # Arrow's is_in casts its set to a Single column's float32: taken only where no value
    # of the set is rounded (1000000001.0 would match 1e9)
    assert tree(pc.field("f").isin([0.5, 2.0]))[1]
    assert tree(pc.field("f").isin([0.5, 1000000001.0])) == (None, False)
    assert tree(pc.field("f").isin([0.5, -0.0])) == (None, False)      # -0.0 is not 0.0 there
    assert tree(~(pc.field("f").is_null())) == (None, False)   # not of a non-exact part
    assert tree(~(pc.field("i") > 3)) == (filter_tree.Not(filter_tree.Cmp("i", ">", 3)), True)


def test_statistics_and_empty_files_never_hide_an_error_arrow_raises_in_memory(tmp_path):
    """Arrow compares an Int64 column with a float by casting the column to float32, and
    raises on a value beyond its exact range, over a table in memory as over Parquet: the
    Arrow dataset raises as well, though the statistics rule out every block."""
    path = tmp_path / "t.idv"
    idv.write(path, {"c": np.array([-2**62, 0, 4, 210, 2555, 9]),
                     "f": np.array([np.inf, 0, 0, 1, 5, 7], np.float32)}, rows_per_block=3)
    expr = (pc.field("f") == np.inf) & (pc.field("c") <= -1.0) & (pc.field("c") > 210)
    ds = idv.arrow_dataset(path)
    with pytest.raises(pa.ArrowInvalid) as in_memory:
        ds.to_table().filter(expr)
    for read in (lambda: ds.to_table(filter=expr), lambda: ds.count_rows(filter=expr)):
        with pytest.raises(pa.ArrowInvalid) as got:
            read()
        assert str(got.value) == str(in_memory.value)
    # a comparison Arrow has no kernel for (a DateTimeOffset's struct with a timestamp) is
    # refused over a file of no rows as over a table in memory
    empty = tmp_path / "empty.idv"
    idv.write(empty, {"d": np.zeros(0, [("utc", "<M8[100ns]"), ("offset_minutes", "<i2")])},
              types={"d": idv.DateTimeOffset})
    at = pa.scalar(dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc))
    ds = idv.arrow_dataset(empty)
    with pytest.raises(pa.ArrowNotImplementedError) as in_memory:
        ds.to_table().filter(pc.field("d") == at)
    for read in (ds.to_table, ds.count_rows):
        with pytest.raises(pa.ArrowNotImplementedError) as got:
            read(filter=pc.field("d") == at)
        assert str(got.value) == str(in_memory.value)


def test_a_filter_pyarrow_applies_reads_only_the_columns_the_query_needs(tmp_path):
    """A filter idv does not take (is_null / is_nan of a float, an integer against a float,
    arithmetic) is tested by pyarrow on the projection and the filter's columns alone: a
    DateTime column that datetime="us" refuses (100-ns ticks) fails no query that leaves it
    out, in to_table, head and count_rows."""
    path = tmp_path / "t.idv"
    idv.write(path, {"x": np.array([1.0, np.nan, 3.0, 0.5]),
                     "i": np.array([0, 1, 2, 3], np.int8),
                     "when": np.array(["2024-01-01T00:00:00.0000001"] * 4, "datetime64[ns]")})
    ds = idv.arrow_dataset(path, datetime="us")
    with pytest.raises(ValueError, match="when"):        # the column itself is refused
        ds.to_table(columns=["when"])
    for expr, rows in [(pc.field("x").is_null(), []), (pc.is_nan(pc.field("x")), [1]),
                       (pc.field("i") > 0.5, [1, 2, 3]), ((pc.field("i") + 1) > 2, [2, 3]),
                       (pc.is_nan(pc.field("x")) | (pc.field("i") == 0), [0, 1])]:
        got = ds.to_table(columns=["i"], filter=expr).column("i").to_pylist()
        assert got == rows, expr
        assert ds.count_rows(filter=expr) == len(rows), expr
        head = ds.head(3, columns=["i", "x"], filter=expr)
        assert head.column_names == ["i", "x"] and head.column("i").to_pylist() == rows[:3]
    with pytest.raises(KeyError, match="Nope"):
        ds.count_rows(filter=pc.is_nan(pc.field("Nope")))


def test_a_filter_on_times_read_floored_keeps_what_pyarrow_keeps_of_them(tmp_path):
    """With safe=False a DateTime of 100-ns ticks is read floored to microseconds: a filter
    compares the floored values, the rows pyarrow keeps of the table (a value 300 ns after t
    is t), with blocks of one row each skipped on the same terms."""
    path = str(tmp_path / "floored.idv")
    when = np.array(["0001-01-01", "2020-01-01T00:00:00.0000003", "2020-01-01",
                     "2020-01-02"], "datetime64[100ns]")
    idv.write(path, {"dt": when, "i": np.arange(4)}, rows_per_block=1)
    t = pa.scalar(dt.datetime(2020, 1, 1), pa.timestamp("us"))
    with idv.arrow_dataset(path, datetime="us", safe=False) as ds:
        table = ds.to_table()
        for expr in (pc.field("dt") > t, pc.field("dt") == t, pc.field("dt") <= t,
                     pc.field("dt") != t, pc.field("dt") >= t, pc.field("dt") < t):
            want = table.filter(expr).column("i").to_pylist()
            assert ds.to_table(filter=expr).column("i").to_pylist() == want, expr
            assert ds.count_rows(filter=expr) == len(want), expr


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-1, ValueError), (2.5, TypeError)])
def test_a_batch_size_is_checked_as_every_stream_checks_it(bad, error):
    ds = idv.arrow_dataset(idv.sample_path())
    with pytest.raises(error) as got:
        ds.to_batches(batch_size=bad)
    with pytest.raises(error) as stream:
        idv.record_batch_reader(idv.sample_path(), batch_size=bad)
    assert str(got.value) == str(stream.value) == \
        f"batch_size must be a number of rows (1 or more) or None, not {bad}"


@pytest.mark.parametrize("engine", ["arrow_dataset", "polars"])
def test_an_engine_reader_given_columns_says_where_to_select_them(engine):
    reader = idv.arrow_dataset
    if engine == "polars":
        pytest.importorskip("polars", reason="scan_idv needs polars (pip install 'idv[polars]')")
        reader = importlib.import_module("idv.polars").scan_idv
    with pytest.raises(TypeError, match=r"columns= is no option of this reader: .*"
                                        r"LazyFrame\.select"):
        reader(idv.sample_path(), columns=["Id"])
