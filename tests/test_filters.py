"""Filters: a filtered read equals the full read filtered with numpy, for every operator and
type, with and without block statistics, locally and over HTTP; blocks that statistics rule
out are neither fetched nor decoded."""
from __future__ import annotations

import datetime as dt
import io

import numpy as np
import pytest

import idv
from http_server import RangeServer

ROWS, RPB = 3000, 256
KEYS = ["red", "green", "blue"]
LONG = "p" * 70                     # a prefix longer than any stored Text bound


def _data():
    rng = np.random.default_rng(11)
    f = rng.normal(size=ROWS)
    f[rng.random(ROWS) < 0.1] = np.nan
    f[1024:1280] = np.nan
    return {
        "Id": np.arange(ROWS, dtype=np.int64),
        "I": rng.integers(-50, 50, ROWS).astype(np.int32),
        "U": rng.integers(0, 1000, ROWS).astype(np.uint16),
        "F": f,
        "B": rng.random(ROWS) < 0.3,
        "K": rng.integers(0, 4, ROWS).astype(np.uint32),
        "When": np.datetime64("2024-01-01") + np.arange(ROWS).astype("timedelta64[m]"),
        "Span": rng.integers(0, 10**6, ROWS).astype("timedelta64[s]"),
        "Zoned": [dt.datetime(2024, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=i % 3)))
                  + dt.timedelta(minutes=i) for i in range(ROWS)],
        "Txt": [(LONG if i % 3 else "") + f"{rng.integers(0, 500):03d}" + ("é" if i % 7 else "")
                for i in range(ROWS)],
    }


def _write(statistics):
    buf = io.BytesIO()
    idv.write(buf, _data(), types={"K": idv.Key(idv.UInt32, count=3),
                                   "Zoned": idv.DateTimeOffset},
              metadata={"K": {"KeyValues": KEYS}}, rows_per_block=RPB, statistics=statistics)
    return buf.getvalue()


@pytest.fixture(scope="module")
def files():
    return {True: _write(True), False: _write(False)}


@pytest.fixture(scope="module")
def full(files):
    with idv.open(files[False]) as f:
        return f.read()


NP_OPS = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
          ">": np.greater, ">=": np.greater_equal}

CASES = [
    ("I", [-50, 0, 13, 49, 100, -1000]),
    ("U", [0, 500, 999, 5000]),
    ("F", [0.0, 1.5, -3.0, float("nan")]),
    ("B", [True, False]),
    ("K", [0, 1, 2, 3]),
    ("When", [np.datetime64("2024-01-01T10:00"), np.datetime64("2023-01-01"),
              np.datetime64("2024-01-02T23:59")]),
    ("Span", [np.timedelta64(500000, "s"), np.timedelta64(0, "s")]),
    ("Zoned", [np.datetime64("2024-01-01T12:00")]),
    ("Txt", ["", "250", LONG + "250", LONG + "250é", LONG, "zzz", LONG + "9"]),
]


def _expected(full, column, op, value):
    """The Ids of the rows numpy selects."""
    x = full[column]
    if x.dtype.names:                      # DateTimeOffset: by its UTC instant
        x = x["utc"]
    if x.dtype == object:
        mask = np.array([NP_OPS[op](v, value) for v in x], bool)
    else:
        with np.errstate(invalid="ignore"):
            mask = NP_OPS[op](x, value)
    return full["Id"][mask]


def test_a_timespan_compares_with_the_text_idv_prints_for_it(tmp_path):
    """The text `idv cat` prints for a TimeSpan (.NET's) is a literal it compares with, in a
    tuple, a filter string and --where, as an ISO date is for a DateTime."""
    from cli_run import run
    path = tmp_path / "spans.idv"
    day = 864_000_000_000
    idv.write(path, {"t": (np.arange(5) * day + 1).view("m8[100ns]")}, rows_per_block=2)
    _, out, _ = run("cat", path, "--format", "csv", check_rc=0)
    assert out.splitlines()[3] == "2.00:00:00.0000001"
    for flt in ([("t", ">", "2.00:00:00.0000001")], "t > '2.00:00:00.0000001'"):
        assert idv.read(path, filter=flt)["t"].view(np.int64).tolist() == [3 * day + 1,
                                                                          4 * day + 1]
    _, out, _ = run("cat", path, "--where", "t <= '1.00:00:00.0000001'", "--format", "csv",
                    check_rc=0)
    assert out.splitlines()[1:] == ["00:00:00.0000001", "1.00:00:00.0000001"]
    with pytest.raises(TypeError, match="TimeSpan columns compare with .*'1.02:03:04.5'"):
        idv.read(path, filter=[("t", ">", "two days")])


@pytest.mark.parametrize("stats", [True, False], ids=["statistics", "none"])
@pytest.mark.parametrize("column,values", CASES, ids=[c for c, _ in CASES])
def test_every_operator_equals_numpy(files, full, stats, column, values):
    with idv.open(files[stats]) as f:
        for value in values:
            for op in NP_OPS:
                got = f.read(["Id"], filter=[(column, op, value)])["Id"]
                want = _expected(full, column, op, value)
                assert np.array_equal(got, want), (column, op, value, len(got), len(want))


@pytest.mark.parametrize("stats", [True, False], ids=["statistics", "none"])
def test_in_not_in_null_and_keys_by_text(files, full, stats):
    ids, k, fl = full["Id"], full["K"], full["F"]
    with idv.open(files[stats]) as f:
        def got(flt):
            return f.read(["Id"], filter=flt)["Id"].tolist()
        assert got([("K", "==", "green")]) == ids[k == 2].tolist()
        assert got([("K", "!=", "green")]) == ids[k != 2].tolist()
        assert got([("K", "==", "purple")]) == []                  # not among its KeyValues
        assert got([("K", "in", ["red", "blue"])]) == ids[(k == 1) | (k == 3)].tolist()
        assert got([("K", "not in", ["red"])]) == ids[k != 1].tolist()
        assert got([("I", "in", [3, 7])]) == ids[np.isin(full["I"], [3, 7])].tolist()
        assert got([("I", "in", [])]) == []
        assert got("isnull(F)") == ids[np.isnan(fl)].tolist()
        assert got("notnull(K)") == ids[k != 0].tolist()
        assert got([[("I", "<", -40)], [("I", ">", 45)]]) == \
            ids[(full["I"] < -40) | (full["I"] > 45)].tolist()
        assert got("not (I < 0)") == ids[~(full["I"] < 0)].tolist()


def test_three_forms_agree_and_unselected_columns_filter(files, full):
    pa = pytest.importorskip("pyarrow", reason="pyarrow expressions need pyarrow")
    import pyarrow.compute as pc
    want = full["Id"][(full["I"] > 10) & (full["Txt"] < LONG + "3")]
    t = dt.datetime(2024, 1, 2)
    with idv.open(files[True]) as f:
        forms = [[("I", ">", 10), ("Txt", "<", LONG + "3")],
                 f"I > 10 and Txt < '{LONG}3'",
                 (pc.field("I") > 10) & (pc.field("Txt") < LONG + "3")]
        for form in forms:
            assert f.read(["Id"], filter=form)["Id"].tolist() == want.tolist(), form
        late = f.read(["Id"], filter=pc.field("When") >= t)["Id"]
        assert late.tolist() == full["Id"][full["When"] >= np.datetime64(t)].tolist()
        second = dt.timedelta(seconds=1)           # printed by pyarrow as 1000000 (its us)
        want = full["Id"][full["Span"] > np.timedelta64(1, "s")].tolist()
        for form in (pc.field("Span") > pa.scalar(second), [("Span", ">", second)],
                     pc.field("Span") > pa.scalar(1000, pa.duration("ms"))):
            assert f.read(["Id"], filter=form)["Id"].tolist() == want, form
        both = f.read(filter=[("Id", "<", 5)])
        assert list(both) == f.column_names and both["Txt"].tolist() == full["Txt"][:5].tolist()


def test_pyarrow_expressions_keep_their_literals_and_refuse_what_they_cannot_read():
    pa = pytest.importorskip("pyarrow", reason="pyarrow expressions need pyarrow")
    import pyarrow.compute as pc
    from idv._scan import filter_tree
    odd = 'on 2024-01-01 00:00:00 and "quoted" or invert(x) true'   # looks like code
    assert filter_tree.parse(pc.field("s") == odd) == filter_tree.Cmp("s", "==", odd)
    assert filter_tree.parse(pc.field("I").isin([3, 5])) == filter_tree.Cmp("I", "in", [3, 5])
    duck_in = pc.if_else(pc.field("I").is_valid(), pc.field("I").isin([3, 5]),
                         pa.scalar(None, pa.bool_()))           # DuckDB's I IN (3, 5)
    assert filter_tree.parse(duck_in) == filter_tree.And((filter_tree.IsNull("I", True, False),
                                                      filter_tree.Cmp("I", "in", [3, 5])))
    # pyarrow prints a set's strings as they are: their values are read, not that text
    assert filter_tree.parse(pc.field("s").isin(['a",\n  "b', "c"])) == \
        filter_tree.Cmp("s", "in", ['a",\n  "b', "c"])
    assert filter_tree.parse((3 < pc.field("I")) & ~pc.field("F").is_null()) == filter_tree.And(
        (filter_tree.Cmp("I", ">", 3), filter_tree.Not(filter_tree.IsNull("F", False, False))))
    assert filter_tree.parse(pc.field("W") >= dt.datetime(2024, 1, 2, 3)) == \
        filter_tree.Cmp("W", ">=", np.datetime64("2024-01-02T03:00:00.000000"))
    for e in (pc.field("F").is_nan(), pc.add(pc.field("I"), 1) > 3,
              pc.field("I") > pc.field("U"), pc.field(("a", "b")) > 1,
              pc.field("I") == pa.scalar(None, pa.int64())):
        with pytest.raises(ValueError, match="cannot understand"):
            filter_tree.parse(e)
    # a bytes literal prints as its hex digits, the text of the str "616263": refused
    assert str(pc.field("s") == b"abc") == str(pc.field("s") == "616263")
    for literal in (b"abc", pa.scalar(b"abc", pa.large_binary())):
        with pytest.raises(ValueError, match="bytes literal"):
            filter_tree.parse((pc.field("I") > 3) | (pc.field("s") == literal))
    assert filter_tree.parse(pc.field("s") == "616263") == filter_tree.Cmp("s", "==", "616263")


def test_a_bytes_literal_reads_pyarrows_rows_through_the_arrow_dataset(tmp_path):
    """An engine's filter idv cannot read is not pushed down: the engine's own row filter
    gives its answer, never the rows of another reading."""
    pa = pytest.importorskip("pyarrow", reason="pyarrow expressions need pyarrow")
    import pyarrow.compute as pc
    data = {"t": ["abc", "616263", "x", "abc"], "n": np.arange(4, dtype=np.int32)}
    idv.write(tmp_path / "b.idv", data)
    expr = pc.field("t") == b"abc"                 # pyarrow: the rows holding "abc"
    with pytest.raises(ValueError, match="bytes literal"):
        idv.read(tmp_path / "b.idv", filter=expr)
    got = idv.arrow_dataset(tmp_path / "b.idv").to_table(filter=expr)
    assert got.column("n").to_pylist() == pa.table(data).filter(expr).column("n").to_pylist() \
        == [0, 3]


def test_the_string_form_joins_with_pandas_and_polars_operators():
    """&, | and ~ (pandas' query, polars) join parenthesized tests as and, or and not do:
    the same tree, so the same rows in every door; written without the parentheses
    (Python binds & before >), or with `is None` or an expression that tests no column, the
    filter is refused saying how to write it."""
    from idv._scan import filter_tree as T
    assert T.parse("(I > 3) & (s == 'a') | ~(F < 1.5)") == \
        T.parse("I > 3 and s == 'a' or not F < 1.5") == T.Or((
            T.And((T.Cmp("I", ">", 3), T.Cmp("s", "==", "a"))), T.Not(T.Cmp("F", "<", 1.5))))
    assert T.parse("~isnull(F) & (I in [1, 2])") == T.And(
        (T.Not(T.IsNull("F")), T.Cmp("I", "in", [1, 2])))
    many = [f"(I != {k})" for k in range(300)]       # one level, as 300 terms joined by and
    assert T.parse(" & ".join(many)) == T.parse(" and ".join(many)) == T.And(
        tuple(T.Cmp("I", "!=", k) for k in range(300)))
    cases = {"I > 3 & s == 'a'": r"3 & s is not a literal value: .*; & and \| join "
                                 r"comparisons written in parentheses: \(a > 1\) & \(b < 2\)",
             "F is None": r"missing values are tested by isnull\(column\) and "
                          r"notnull\(column\), not by is / is not",
             "I >> 1": r"I >> 1 is not a test of a column: a filter compares columns with "
                       r"values \(==, .*joins them with and / &, or / \|, not / ~",
             "~I": "I is not a test of a column"}
    for text, why in cases.items():
        with pytest.raises(ValueError, match=f"^cannot understand the filter .*: {why}"):
            T.parse(text)


def test_bad_filters_say_why(files):
    with idv.open(files[True]) as f:
        with pytest.raises(KeyError, match="Nope"):
            f.read(filter=[("Nope", "==", 1)])
        with pytest.raises(ValueError, match="operator"):
            f.read(filter=[("I", "~", 1)])
        with pytest.raises(ValueError, match="cannot understand"):
            f.read(filter="I >")
        with pytest.raises(ValueError, match="'K'.* < 'red'.*a key compares with a label by "):
            f.read(filter=[("K", "<", "red")])


def _sorted_file(statistics):
    """200,000 rows, a sorted int64 and a random double, in blocks of 1,024 rows (1% of the
    rows: 2 to 3 of 196 blocks)."""
    buf = io.BytesIO()
    n = 200_000
    idv.write(buf, {"ts": np.arange(n, dtype=np.int64),
                    "v": np.random.default_rng(0).random(n)}, rows_per_block=1024,
              statistics=statistics)
    return buf.getvalue(), n


def test_statistics_skip_the_blocks_they_rule_out():
    data, n = _sorted_file(True)
    with idv.open(data) as f:
        got = f.read(["v"], filter=[("ts", ">=", 1000), ("ts", "<", 3000)])
        assert len(got["v"]) == 2000
        assert f["v"].blocks_decoded == 3 and f["ts"].blocks_decoded == 3     # rows 0-3071
    plain, _ = _sorted_file(False)
    with idv.open(plain) as f:
        assert len(f.read(["v"], filter=[("ts", ">=", 1000), ("ts", "<", 3000)])["v"]) == 2000
        assert f["v"].blocks_decoded == f["v"].num_blocks


@pytest.mark.parametrize("per", [1, 3])
def test_partitions_with_a_filter_are_those_with_a_block_not_ruled_out(tmp_path, per):
    """scan.partitions with a filter keeps exactly the partitions with a block whose min/max
    (computed here from the values written) may hold a match, at the bounds they have
    without the filter; with no statistics it keeps them all."""
    from idv._scan import filters, scan
    rng = np.random.default_rng(3)
    files, sizes = [], [(1000, 64), (700, 100)]
    for k, (n, rpb) in enumerate(sizes):
        g = np.repeat(rng.integers(0, 40, n // rpb + 1), rpb)[:n].astype(np.int32)
        files.append({"ts": np.arange(n, dtype=np.int64) + 10_000 * k, "g": g})
        idv.write(tmp_path / f"{k}.idv", files[-1], rows_per_block=rpb)
    flt = [[("ts", ">=", 10_150), ("ts", "<", 10_420)], [("g", "==", 7)], [("g", ">", 37)]]

    def may(lo, hi, glo, ghi):          # the filter's DNF over one block's bounds
        return (hi >= 10_150 and lo < 10_420) or glo <= 7 <= ghi or ghi > 37
    want = []
    for k, ((n, rpb), data) in enumerate(zip(sizes, files)):
        nb = -(-n // rpb)
        blocks = [may(*(fn(data[c][b * rpb:(b + 1) * rpb]) for c in ("ts", "g")
                        for fn in (np.min, np.max))) for b in range(nb)]
        want += [(k, b0, min(b0 + per, nb)) for b0 in range(0, nb, per)
                 if any(blocks[b0:b0 + per])]
    with idv.dataset(sorted(tmp_path.glob("*.idv"))) as ds:
        every = scan.partitions(ds, ["g"], per)
        got = scan.partitions(ds, ["g"], per, block_filter=filters.blocks_of(flt))
        assert [(p.part, p.b0, p.b1) for p in got] == want
        assert 0 < len(got) < len(every) and set(got) <= set(every)
        none = [("ts", "<", -1)]
        assert scan.partitions(ds, ["g"], per, block_filter=filters.blocks_of(none)) == []
        assert scan.partitions(ds, ["g"], per, block_filter=filters.blocks_of(none),
                               at_least_one=True) == every[:1]
    plain = tmp_path / "plain.idv"
    idv.write(plain, files[0], rows_per_block=64, statistics=False)
    with idv.open(plain) as f:
        assert scan.partitions(f, ["g"], per, block_filter=filters.blocks_of(flt)) == \
            scan.partitions(f, ["g"], per)


def test_a_one_percent_filter_over_http_fetches_at_most_3_percent_of_the_bytes():
    pytest.importorskip("fsspec", reason="remote reads need the remote extra")
    pytest.importorskip("aiohttp", reason="HTTP reads need aiohttp")
    data, n = _sorted_file(True)
    lo = n // 2
    with RangeServer({"/s.idv": data}) as srv:
        with idv.open(srv.url("/s.idv")) as f:
            srv.reset_counts()
            got = f.read(filter=[("ts", ">=", lo), ("ts", "<", lo + n // 100)])
        assert got["ts"].tolist() == list(range(lo, lo + n // 100))
        assert srv.bytes_served <= 0.03 * len(data), (srv.bytes_served, len(data))


def test_cat_where_prints_the_matching_rows_with_their_numbers(tmp_path):
    from cli_run import run, run_json
    path = tmp_path / "people.idv"
    n = 5000
    idv.write(path, {"Age": np.arange(n) % 90,
                     "City": np.array(["Paris", "Lyon", "Nice"], object)[np.arange(n) % 3]},
              rows_per_block=512)
    want = [i for i in range(n) if i % 90 > 80 and i % 3 == 0]
    got = run_json("cat", path, "--where", "Age > 80 and City == 'Paris'")
    assert got["rows"]["count"] == len(want)
    assert [r[0] for r in got["data"]] == [i % 90 for i in want]
    rc, out, err = run("cat", path, "--where", "Age > 80 and City == 'Paris'", check_rc=0)
    numbers = [int(line.split()[0]) for line in out.splitlines()[3:-1]]
    assert numbers == want
    rc, out, err = run("cat", path, "--where", "Nope == 1", check_rc=2)
    assert "Nope" in err


@pytest.mark.parametrize("stats", [True, False], ids=["statistics", "none"])
def test_arrow_reads_take_the_filter(files, full, stats):
    pytest.importorskip("pyarrow", reason="Arrow reads need pyarrow")
    want = full["Id"][(full["I"] >= 40) | (full["K"] == 2)].tolist()
    flt = [[("I", ">=", 40)], [("K", "==", "green")]]
    with idv.open(files[stats]) as f:
        assert f.to_arrow(["Id", "Txt"], filter=flt).column("Id").to_pylist() == want
        batches = list(f.iter_batches(["Id"], filter=flt, batch_size=100))
        assert [i for b in batches for i in b.column(0).to_pylist()] == want
        assert all(b.num_rows == 100 for b in batches[:-1])
        reader = idv.record_batch_reader(f, ["Txt"], filter="I >= 40 or K == 'green'")
        assert reader.read_all().num_rows == len(want)
        assert f.to_arrow(["Id"], filter=[("I", ">", 1000)]).num_rows == 0


def test_datasets_filter_every_file(tmp_path, full):
    pytest.importorskip("pyarrow", reason="Arrow reads need pyarrow")
    for i in range(3):
        idv.write(tmp_path / f"part{i}.idv", {"Id": full["Id"][i * 1000:(i + 1) * 1000],
                                               "I": full["I"][i * 1000:(i + 1) * 1000]},
                  rows_per_block=RPB, statistics=i != 1)
    ds = idv.dataset(tmp_path)
    want = full["Id"][full["I"] < -45].tolist()
    assert ds.read(["Id"], filter=[("I", "<", -45)])["Id"].tolist() == want
    assert ds.to_arrow(["Id"], filter="I < -45").column("Id").to_pylist() == want
    got = ds.record_batch_reader(["Id"], filter=[("I", "<", -45)]).read_all()
    assert got.column("Id").to_pylist() == want


def test_pandas_nat_is_numpy_nat(files, full):
    """pandas' NaT compares as numpy's NaT on a DateTime and a TimeSpan column: as a NaN,
    equal to nothing (it reached the calendar with a NaN year, a TypeError naming nothing)."""
    pd = pytest.importorskip("pandas", reason="the literal is pandas' NaT")
    with idv.open(files[True]) as f:
        for column, nat in (("When", np.datetime64("NaT")), ("Span", np.timedelta64("NaT"))):
            for op in ("==", "!=", "<"):
                want = f.read(["Id"], filter=[(column, op, nat)])["Id"].tolist()
                assert f.read(["Id"], filter=[(column, op, pd.NaT)])["Id"].tolist() == want
                assert len(want) == (len(full["Id"]) if op == "!=" else 0), (column, op)


@pytest.mark.parametrize("stats", [True, False], ids=["statistics", "none"])
def test_pandas_reads_take_the_filter(files, stats):
    pd = pytest.importorskip("pandas", reason="pandas reads need pandas")
    df = idv.read_pandas(files[False])
    t = pd.Timestamp("2024-01-01 20:00")
    cases = [([[("I", ">=", 40)], [("K", "==", "green")]], (df.I >= 40) | (df.K == "green")),
             (f"Txt < '{LONG}3' and F > 0", (df.Txt < LONG + "3") & (df.F > 0)),
             ([("When", ">=", t), ("Id", "<", 2000)], (df.When >= t) & (df.Id < 2000)),
             ([("F", "<", 0.5)], df.F < 0.5),                          # NaN: not kept
             ("isnull(F) or K == 'red'", df.F.isna() | (df.K == "red")),
             ([("I", ">", 1000)], df.I > 1000)]                       # none match
    with idv.open(files[stats]) as f:
        for flt, mask in cases:
            want = df[mask].reset_index(drop=True)
            pd.testing.assert_frame_equal(idv.read_pandas(files[stats], filter=flt), want)
            pd.testing.assert_frame_equal(f.to_pandas(["Id", "Txt"], filter=flt),
                                          want[["Id", "Txt"]])
            pd.testing.assert_frame_equal(idv.to_pandas(f, ["Zoned"], filter=flt,
                                                        dtype_backend="pyarrow"),
                                          idv.to_pandas(f, ["Zoned"], dtype_backend="pyarrow")
                                          [mask].reset_index(drop=True))


def test_an_arrow_read_tests_text_without_a_str_per_value(tmp_path, monkeypatch):
    """to_arrow's filter on a Text column tests its Arrow strings (their UTF-8 bytes): no
    block of it is decoded into str objects, and the rows are read()'s."""
    import numpy as np
    from idv._reader.column import Column
    path = tmp_path / "t.idv"
    names = np.array(["b", "a\0", "é", "", "ab", "b"] * 50, object)
    idv.write(path, {"Id": np.arange(len(names)), "Name": names}, rows_per_block=64)
    want = {op: idv.read(path, columns=["Id"], filter=[("Name", op, v)])["Id"]
            for op, v in (("==", "b"), ("<", "b"), (">=", "a\0"), ("in", ["", "é"]))}
    real = Column.read_blocks

    def no_text(self, *args, **kwargs):
        assert self.name != "Name", "Name decoded into str objects"
        return real(self, *args, **kwargs)
    monkeypatch.setattr(Column, "read_blocks", no_text)
    for op, v in (("==", "b"), ("<", "b"), (">=", "a\0"), ("in", ["", "é"])):
        got = idv.to_arrow(path, columns=["Id"], filter=[("Name", op, v)])
        assert np.array_equal(got.column("Id").to_numpy(), want[op]), op
    assert len(want["<"]) == 150 and len(want["=="]) == 100


def test_text_comparisons_in_c_answer_as_str():
    """Text tested on its UTF-8 bytes (idv._values.text_bytes, in C: idv._compare) gives
    Python's str answers, for Arrow strings and for the blocks' bytes (TextRows, every step
    of rows): NULs, prefixes, empty strings, characters of 2 to 4 bytes, literals of 8 bytes
    and around, `in` lists short and long; spans outside the text are refused."""
    pa = pytest.importorskip("pyarrow")
    from idv import _compare
    from idv._values import comparison
    from idv._values.text_bytes import TextRows, of_arrow

    words = ["", "a", "a\0", "a\0b", "ab", "abc", "b", "é", "e\u0301", "\U0001f600", "zz",
             "\uffff", "A", "a" * 40, "\0", "a" * 8, "a" * 7 + "b", "a\0\0\0\0\0\0\0"]
    literals = words + ["aa", "\U0001f600\0", "ä", "a" * 9]
    arr = pa.array(words * 3)
    rows = TextRows.joined([of_arrow(pa, arr.slice(0, 20)), of_arrow(pa, arr.slice(20))])
    cases = [arr, arr.slice(5, 20), pa.chunked_array([arr.slice(0, 7), arr.slice(7)]),
             arr.cast(pa.large_string()).slice(3), rows, rows.rows(3, 50, 4),
             rows.rows(19, 21), rows.rows(30, 30)]
    ops = {"==": str.__eq__, "!=": str.__ne__, "<": str.__lt__, "<=": str.__le__,
           ">": str.__gt__, ">=": str.__ge__}
    for x in cases:
        values = x.to_str().tolist() if isinstance(x, TextRows) else x.to_pylist()
        for op, fn in ops.items():
            for lit in literals:
                test = comparison.Test(comparison.CMP, op, lit)
                want = [fn(v, lit) for v in values]
                assert comparison.rows(test, x).tolist() == want, (op, lit)
                # the positions found without a mask: the same rows
                assert comparison.hits(test, x).tolist() == np.flatnonzero(want).tolist()
        for chosen in (literals[:3], literals):             # by equality, by a set
            test = comparison.Test(comparison.IN, None, np.array(sorted(chosen), object))
            assert comparison.rows(test, x).tolist() == [v in chosen for v in values]
    out = np.empty(2, np.uint8)
    with pytest.raises(ValueError, match="outside"):
        _compare.text_compare(np.array([0, 2], np.int32), np.array([2, 9], np.int32),
                              np.zeros(4, np.uint8), "==", b"", out)
    with pytest.raises(ValueError, match="outside"):        # reversed
        _compare.text_compare(np.array([0, 3], np.int32), np.array([2, 1], np.int32),
                              np.zeros(4, np.uint8), "<", b"", out)
    with pytest.raises(ValueError, match="spans for"):
        _compare.text_compare(np.array([0], np.int32), np.array([2], np.int32),
                              np.zeros(4, np.uint8), "==", b"", out)
    hits = np.empty(2, np.int64)
    for starts, ends, room, match in (([0, 2], [2, 9], hits, "outside"),
                                      ([0, 3], [2, 1], hits, "outside"),
                                      ([0, 2], [2], hits, "ends for"),
                                      ([0, 2], [2, 4], hits[:1], "room for")):
        with pytest.raises(ValueError, match=match):
            _compare.text_hits(np.array(starts, np.int32), np.array(ends, np.int32),
                               np.zeros(4, np.uint8), "<", b"b", 0, room)
    assert _compare.text_hits(np.array([0, 1], np.int64), np.array([1, 3], np.int64),
                              np.frombuffer(b"abc", np.uint8), "!=", b"a", 10, hits) == 1
    assert hits[0] == 11                        # counted from the base given


def test_number_comparisons_in_c_answer_as_numpy():
    """A comparison of numbers with a literal of their type is found in C without a mask
    (idv._compare.number_hits): the rows numpy's comparison gives, for every numeric dtype,
    at its limits, NaN, -0.0 and infinities, slices and empty arrays; a literal the type does
    not hold exactly (Single with 0.1) or a float with integers is left to numpy, as is a
    DateTime's literal out of reach of its ticks."""
    from idv import _compare, types as T
    from idv._values import comparison

    rng = np.random.default_rng(8)
    ops = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
           ">": np.greater, ">=": np.greater_equal}
    cases = []
    for dtype in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                  np.uint64):
        info = np.iinfo(dtype)
        x = np.concatenate([np.array([info.min, info.max, 0, 1, info.max - 1], dtype),
                            rng.integers(info.min, info.max, 300, dtype=dtype, endpoint=True)])
        cases.append((x, [int(info.min), int(info.max), 0, int(x[7])]))
    for dtype in (np.float32, np.float64):
        x = np.concatenate([[np.nan, -0.0, 0.0, np.inf, -np.inf, np.finfo(dtype).max,
                             np.finfo(dtype).tiny], rng.standard_normal(300)]).astype(dtype)
        cases.append((x, [float(x[8]), 0.0, -0.0, np.inf, np.nan, float(np.finfo(dtype).max)]))
    for x, literals in cases:
        for view in (x, x[3:200], x[::3], x[:0]):
            for op, fn in ops.items():
                for lit in literals:
                    test = comparison.Test(comparison.CMP, op, view.dtype.type(lit).item())
                    assert comparison._native(view, test) is not None
                    got = comparison.hits(test, view)
                    assert got.dtype == np.int64
                    assert got.tolist() == np.flatnonzero(fn(view, lit)).tolist(), (op, lit)
    single = np.array([0.1, 0.2], np.float32)
    for test in (comparison.Test(comparison.CMP, "==", 0.1),      # no Single is 0.1
                 comparison.Test(comparison.CMP, "<", 1.5)):
        assert comparison._native(single.astype(np.int64) if test.value == 1.5 else single,
                                  test) is None
    assert comparison.hits(comparison.Test(comparison.CMP, "==", 0.1), single).tolist() == []
    when = np.array(["0001-01-01", "1970-01-01", "9999-12-31"], "datetime64[100ns]")
    for ticks in (T.EPOCH_TICKS, 0, -2**63, np.int64(-2**63), np.int64(2**63 - 1)):
        for op, fn in ops.items():
            test = comparison.Test(comparison.CMP, op, ticks)
            want = np.flatnonzero(fn(when.view(np.int64) + T.EPOCH_TICKS, ticks)).tolist()
            assert comparison.column_hits(T.DateTime, test, when).tolist() == want
    hits = np.empty(2, np.int64)
    with pytest.raises(ValueError, match="room for"):
        _compare.number_hits(np.zeros(3), "<", np.zeros(1), hits)
    with pytest.raises(ValueError, match="one literal"):
        _compare.number_hits(np.zeros(2), "<", np.zeros(2), hits)


def test_a_long_text_in_list_tests_the_rows_bytes_without_str(monkeypatch):
    """An `in` list of many Text literals tests each row's UTF-8 bytes against those of its
    byte length (up to 8 bytes and beyond, NULs, empty, several blocks), with str's answers
    and no str made for a row."""
    pa = pytest.importorskip("pyarrow", reason="Arrow strings are one form of Text rows")
    from idv._values import comparison
    from idv._values.text_bytes import TextRows, of_arrow

    words = ["", "a", "a\0", "\0", "ab", "é", "abcdefgh", "abcdefgi", "a\0\0\0\0\0\0\0",
             "abcdefghi", "abcdefghj", "a\0" * 5, "a\0" * 4 + "a\1", "\U0001f600", "x" * 40,
             "x" * 39 + "y"]
    arr = pa.array(words * 5)
    rows = TextRows.joined([of_arrow(pa, arr.slice(0, 23)), of_arrow(pa, arr.slice(23))])
    literals = words[::2] + [f"w{k}" for k in range(100)] + ["abcdefgj", "x" * 41, "a\0\0",
                                                            "a\0" * 4 + "b\0"]

    def refused(*_):
        raise AssertionError("str made for the rows")
    monkeypatch.setattr(TextRows, "to_str", refused)
    monkeypatch.setattr(TextRows, "strings", refused)
    col = comparison.Column("t", idv.Text)
    for op in ("in", "not in"):
        test = comparison.bind(col, op, literals)
        want = [(v in literals) == (op == "in") for v in words * 5]
        assert comparison.rows(test, rows).tolist() == want, op
        assert comparison.rows(test, rows.rows(3, 60, 7)).tolist() == want[3:60:7], op


def test_a_text_in_list_is_one_search_a_block_of_the_statistics():
    """The blocks an `in` list of Text may match are found by one search of the sorted
    literals a block, not a comparison of each literal with each block's bounds: the blocks
    whose bounds hold a literal (or, without a high bound, lie below one)."""
    from idv._storage import statistics as S
    from idv._values import comparison
    compared = []

    class Bound(bytes):         # a block's bound, counting the comparisons it is in
        def _count(self, other, op):
            compared.append(1)
            return op(bytes(self), other)
        __lt__ = lambda s, o: s._count(o, bytes.__lt__)      # noqa: E731
        __le__ = lambda s, o: s._count(o, bytes.__le__)      # noqa: E731
        __gt__ = lambda s, o: s._count(o, bytes.__gt__)      # noqa: E731
        __ge__ = lambda s, o: s._count(o, bytes.__ge__)      # noqa: E731

    bounds = [(b"a", b"c"), (b"m", b"m"), (b"w5", b"w5"), (b"w50", b"w6"), (b"zz", b"zz"),
              (b"d", b"l"), (b"x", b"")]
    flags = [0, S.LOW_EXACT | S.HIGH_EXACT, 0, 0, 0, 0, S.NO_HIGH]
    present = [3, 1, 2, 2, 2, 0, 1]
    cs = S.ColumnStats(0, S.TEXT, np.array(present), np.zeros(7, np.int64),
                       [Bound(lo) for lo, _ in bounds], [Bound(hi) for _, hi in bounds],
                       np.array(flags, np.uint8))
    literals = [f"w{k}" for k in range(1000)] + ["b", "m", "y"]
    test = comparison.bind(comparison.Column("t", idv.Text), "in", literals)
    kept = comparison.Zones(idv.Text, cs).may_match(test)
    encoded = [v.encode() for v in literals]
    want = [n > 0 and any(lo <= v and (f & S.NO_HIGH or v <= hi) for v in encoded)
            for (lo, hi), f, n in zip(bounds, flags, present)]
    assert kept.tolist() == want == [True, True, True, True, False, False, True]
    assert len(compared) <= len(bounds) * 12         # log2(1003) + 2 a block at most


def test_matching_rows_of_text_taken_from_chunks():
    """The rows a filter keeps are copied out of a batch's chunks (arrow_columns.taken, in
    C: idv._compare.text_take) as Arrow's own take of the joined chunks gives them: strings
    of every length around the 16 bytes copied as two words, at the end of a block's bytes,
    chunks that are slices or empty; as string views, as pyarrow's cast makes them, around
    the 12 bytes a view holds; numbers by Arrow's take; bad rows refused."""
    pa = pytest.importorskip("pyarrow", reason="taking from Arrow chunks needs pyarrow")
    from idv import _compare
    from idv._interop.arrow_columns import taken

    rng = np.random.default_rng(7)
    words = ["", "a", "é" * 3, "u" * 11, "v" * 12, "t" * 13, "x" * 15, "y" * 16, "z" * 17,
             "\U0001f600" * 5, "w" * 40]
    arr = pa.array([words[i] for i in rng.integers(0, len(words), 300)])
    parts = [arr.slice(0, 100), arr.slice(100, 0), arr.slice(100, 37), arr.slice(137)]
    for x in (pa.chunked_array(parts), arr, pa.chunked_array([arr.slice(299)])):
        for rows in (np.arange(len(x)), np.flatnonzero(rng.random(len(x)) < 0.3),
                     np.array([len(x) - 1]), np.zeros(0, np.int64)):
            want = x.take(pa.array(rows, pa.int64()))
            got = taken(pa, x, rows)
            assert isinstance(got, pa.StringArray)
            assert got.to_pylist() == want.to_pylist()
            viewed = taken(pa, x, rows, views=True)
            viewed.validate(full=True)
            assert viewed.equals(pa.concat_arrays(want.chunks).cast(pa.string_view())
                                 if isinstance(want, pa.ChunkedArray)
                                 else want.cast(pa.string_view()))
    nums = pa.chunked_array([pa.array([1, 2, 3]), pa.array([4, 5])])
    assert taken(pa, nums, np.array([0, 3, 4])).to_pylist() == [1, 4, 5]
    starts, ends = np.array([0, 2], np.int32), np.array([2, 4], np.int32)
    part = (starts, ends, np.frombuffer(b"abcd", np.uint8))
    for rows, match in (([1, 0], "ascending"), ([2], "beyond"), ([1, 1], "ascending"),
                        ([-1], "ascending")):
        with pytest.raises(ValueError, match=match):
            _compare.text_take([part], np.array(rows, np.int64))
    with pytest.raises(ValueError, match="no span"):
        _compare.text_take([(starts, np.array([2, 9], np.int32), part[2])],
                           np.array([1], np.int64))
    with pytest.raises(ValueError, match="room for 1 string views, not 2"):
        _compare.text_take([part], np.array([0, 1], np.int64), np.zeros(16, np.uint8))
    with pytest.raises(ValueError, match="no span"):
        _compare.text_take([(starts, np.array([2, 9], np.int32), part[2])],
                           np.array([1], np.int64), np.zeros(16, np.uint8))


def test_a_column_read_and_tested_is_decoded_once(tmp_path):
    """A column both read and tested by the filter is decoded once for both, whether the
    source names its columns by index (a file) or by name (a dataset)."""
    path = str(tmp_path / "once.idv")
    idv.write(path, {"T": np.array(["a", "b", "c"] * 1000, object),
                     "N": np.arange(3000, dtype=np.int64)}, rows_per_block=100)
    for open_source in (idv.open, idv.dataset):
        with open_source(path) as src:
            got = idv.to_arrow(src, columns=["T", "N"], filter="T == 'b'")
            assert got.column("N").to_pylist() == list(range(1, 3000, 3))
            got = idv.to_arrow(src, columns=["N"], filter="N >= 1500")
            assert got.column("N").to_pylist() == list(range(1500, 3000))
            if open_source is idv.open:     # 30 blocks of T; 30 + the 15 kept of N
                assert (src["T"].blocks_decoded, src["N"].blocks_decoded) == (30, 45)


def _pieces_file(tmp_path, seed):
    """(path, T, N, F) of a file of 5,000 rows in blocks of 64: T of 4 short strings, N the
    row numbers, F random."""
    rng = np.random.default_rng(seed)
    t = rng.choice(np.array(["a", "b", "c", ""], object), 5000)
    n = np.arange(5000, dtype=np.int64)
    f = rng.random(5000, dtype=np.float32)
    path = str(tmp_path / "pieces.idv")
    idv.write(path, {"T": t, "N": n, "F": f}, rows_per_block=64)
    return path, t, n, f


PIECE_CASES = [     # (filter, the rows it keeps from T, N, F)
    ("T == 'b'", lambda t, n, f: t == "b"),
    ("N >= 1500 and N < 2500", lambda t, n, f: (n >= 1500) & (n < 2500)),
    ("T != 'a' and T < 'c'", lambda t, n, f: (t != "a") & (t < "c")),
    ("(T == 'b' or N < 10) and not (F > 0.5)",
     lambda t, n, f: ((t == "b") | (n < 10)) & ~(f > 0.5)),
    ("F > 0.5 or T == ''", lambda t, n, f: (f > 0.5) | (t == "")),
]


@pytest.mark.parametrize("where, keep", PIECE_CASES, ids=[c[0] for c in PIECE_CASES])
def test_a_filter_tested_piece_by_piece_keeps_the_reference_rows(tmp_path, monkeypatch,
                                                                 where, keep):
    """The scan's threads test each piece of a tested column as they decode it, and a batch
    combines what its pieces found: with windows and batches of several pieces of a few
    blocks each, every path, a row step and the columns tested or not read keep the rows
    numpy selects."""
    from idv._interop import arrow
    from idv._scan import scan
    monkeypatch.setattr(scan, "PIECE_BYTES", 1500)
    monkeypatch.setattr(scan, "WINDOW_BYTES", 7000)
    path, t, n, f = _pieces_file(tmp_path, 3)
    hit = keep(t.astype(str), n, f)
    got = idv.read(path, columns=["N", "T"], filter=where)
    assert np.array_equal(got["N"], n[hit]) and list(got["T"]) == list(t[hit])
    frame = idv.to_pandas(path, columns=["T", "N"], filter=where, rows=slice(3, 4900, 7))
    assert list(frame["T"]) == list(t[3:4900:7][hit[3:4900:7]])
    assert list(frame["N"]) == list(n[3:4900:7][hit[3:4900:7]])
    for columns in (["T", "N", "F"], ["N"], ["T"]):
        table = idv.to_arrow(path, columns=columns, filter=where)
        assert table.column(columns[0]).to_pylist() == list({"T": t, "N": n, "F": f}[
            columns[0]][hit])
        with idv.dataset([path, path]) as ds:
            assert ds.to_arrow(columns=columns, filter=where).num_rows == 2 * hit.sum()
    with idv.open(path) as src:
        batches = arrow.window_reader(src, ["N", "T"], filter=where,
                                      rows=slice(5, 4000, 3), batch_rows=200)
        got = [x for b in batches for x in b.column("N").to_pylist()]
    assert got == list(n[5:4000:3][hit[5:4000:3]])


STREAM_CASES = PIECE_CASES + [("N >= 0", lambda t, n, f: n >= 0),
                              ("N < 0", lambda t, n, f: n < 0)]


@pytest.mark.parametrize("where, keep", STREAM_CASES, ids=[c[0] for c in STREAM_CASES])
def test_a_filtered_stream_gives_a_block_each_taken_a_window_at_a_time(tmp_path, monkeypatch,
                                                                       where, keep):
    """record_batch_reader's batches of a filter's matches are cut as its batches without a
    filter are (a block each, or batch_size rows), also with a row step, while the matches
    are taken a window at a time: a take a column a window, not a block."""
    pytest.importorskip("pyarrow", reason="record_batch_reader gives pyarrow batches")
    from idv._interop import arrow_stream
    calls = []
    take = arrow_stream.taken
    monkeypatch.setattr(arrow_stream, "taken", lambda *a, **k: calls.append(1) or take(*a, **k))
    path, t, n, f = _pieces_file(tmp_path, 5)
    hit = keep(t.astype(str), n, f)
    for rows in (slice(None), slice(5, 4000, 3)):
        calls.clear()
        batches = list(idv.record_batch_reader(path, ["N", "T", "F"], filter=where, rows=rows))
        assert len(calls) <= 3          # one window, one piece: each column taken once
        got = [b.column("N").to_numpy() for b in batches]
        want = n[rows][hit[rows]]
        assert np.array_equal(np.concatenate(got + [n[:0]]), want)
        assert [b.column("T").to_pylist() for b in batches] == \
            [list(t[x]) for x in got]
        blocks = [np.unique(x // 64).tolist() for x in got if len(x)]
        assert blocks == [[b] for b in np.unique(want // 64).tolist()]
        # (every block ruled out by the statistics: no batch)
        assert len(batches) == len(blocks) or not blocks and len(batches) <= 1
    sized = list(idv.record_batch_reader(path, ["N"], filter=where, batch_size=100))
    assert [b.num_rows for b in sized[:-1]] == [100] * (len(sized) - 1)
    assert np.array_equal(np.concatenate([b.column("N").to_numpy() for b in sized] + [n[:0]]),
                          n[hit])


def test_the_string_form_writes_nan_and_inf_wherever_a_literal_may_be(tmp_path):
    path = str(tmp_path / "f.idv")
    x = np.array([np.nan, 0.0, -0.0, 1.5, np.inf, -np.inf])
    idv.write(path, {"x": x, "inf": np.arange(6.0)})
    for where, keep in [("x not in [0.0, nan]", [0, 3, 4, 5]), ("x in (nan, 1.5)", [3]),
                        ("x == inf", [4]), ("x == -inf", [5]), ("x in [inf, -inf]", [4, 5]),
                        ("inf > x", [1, 2, 3, 5]), ("-inf < x <= inf", [1, 2, 3, 4]),
                        ("x != NaN", [0, 1, 2, 3, 4, 5]), ("col('inf') >= 4", [4, 5])]:
        got = idv.read(path, ["inf"], filter=where)["inf"]
        assert got.tolist() == keep, where
    with pytest.raises(ValueError, match="inf - 1 is not a literal"):
        idv.read(path, filter="x > inf - 1")


@pytest.mark.parametrize("where, error", [("t == 5", TypeError), ("x == 'a'", TypeError),
                                          ("nope == 1", KeyError)])
def test_a_filter_is_checked_against_the_columns_of_a_file_without_rows(tmp_path, where,
                                                                       error):
    path = str(tmp_path / "empty.idv")
    idv.write(path, {"x": np.zeros(0, np.int32), "t": np.array([], dtype=object)})
    with idv.open(path) as f:
        reads = [lambda: idv.read(path, filter=where), lambda: f.read(filter=where),
                 lambda: idv.to_pandas(path, filter=where),
                 lambda: idv.read_pandas(path, filter=where),
                 lambda: idv.dataset([path, path]).read(filter=where),
                 lambda: idv.dataset([path]).to_pandas(filter=where),
                 lambda: idv.to_arrow(path, filter=where)]
        for read in reads:
            with pytest.raises(error, match="'t'|'x'|'nope'"):
                read()


def test_one_term_given_without_its_list_says_how_to_write_it(tmp_path):
    """('a', '>', 5) alone, the slip of a filter of one term, is named with the list it
    should be (it was refused as "a filter term ... not 'a'")."""
    p = tmp_path / "t.idv"
    idv.write(p, {"a": np.arange(10)})
    with pytest.raises(ValueError, match=r"a list of \(column, op, value\) tuples: "
                                         r"\[\('a', '>', 5\)\], not the tuple alone"):
        idv.read(p, filter=("a", ">", 5))
    assert idv.read(p, filter=[("a", ">", 5)])["a"].tolist() == [6, 7, 8, 9]
