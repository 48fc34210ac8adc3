"""Dates always convert: the DateTimes of real ML.NET data (testdata/mixed_dates, written by
ML.NET through the oracle's write-spec) go to Arrow, pandas and Parquet by default.

Per column, the finest unit that holds every value exactly: nanoseconds when all fit
(1677-2262), else microseconds; a column that neither holds (default(DateTime), year 1, beside
DateTime.Now values with 100-ns digits) is floored to microseconds with one IdvWarning that
counts the values changed. ``datetime="ticks"`` is exact, ``datetime="exact"`` refuses. Every
expectation below is worked out from ML.NET's own dump (the sidecar), not from idv.
"""
from __future__ import annotations

import datetime as dt
import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import idv
from cli_run import run

HERE = Path(__file__).resolve().parent.parent / "testdata"
PATH = HERE / "mixed_dates.idv"
DUMP = json.loads((HERE / "mixed_dates.json").read_text())
EPOCH = 621355968000000000          # .NET ticks of 1970-01-01

pa = pytest.importorskip("pyarrow")


def ticks_of(name):
    """The column's .NET ticks, as ML.NET read them."""
    i = [c["name"] for c in DUMP["columns"]].index(name)
    return [int(r[i]) for r in DUMP["rows"]]


def since_1970(name):
    t = ticks_of(name)
    return t if name == "Elapsed" else [x - EPOCH for x in t]      # TimeSpan: a duration


CREATED_CHANGED = sum(t % 10 != 0 for t in since_1970("Created"))


def _warnings_of(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message) for w in caught if issubclass(w.category, idv.IdvWarning)]


def test_the_fixture_is_the_case_of_the_issue():
    created = since_1970("Created")
    assert 0 - EPOCH in created and CREATED_CHANGED > 30          # year 1 and 100-ns values
    assert all(t % 10 for t in since_1970("Updated"))             # 100-ns digits, 2020s
    assert all(t % 10 == 0 for t in since_1970("Day")) and -EPOCH in since_1970("Day")


def _check_arrow_columns(table):
    """The units and values the rule gives, from ML.NET's ticks."""
    assert table.schema.field("Created").type == pa.timestamp("us")
    assert table.schema.field("Updated").type == pa.timestamp("ns")
    assert table.schema.field("Day").type == pa.timestamp("us")
    assert table.schema.field("Elapsed").type == pa.duration("ns")
    as_ints = {n: table.column(n).cast(pa.int64()).to_pylist() for n in
               ("Created", "Updated", "Day", "Elapsed")}
    assert as_ints["Created"] == [t // 10 for t in since_1970("Created")]       # floored
    assert as_ints["Updated"] == [t * 100 for t in since_1970("Updated")]       # exact
    assert as_ints["Day"] == [t // 10 for t in since_1970("Day")]               # exact
    assert as_ints["Elapsed"] == [t * 100 for t in since_1970("Elapsed")]       # exact


def _one_warning_for_created(messages):
    assert len(messages) == 1, messages
    assert re.match(rf"column 'Created': {CREATED_CHANGED} DateTime values \(first: DateTime "
                    rf"\d{{4}}-.*floored to microseconds", messages[0]), messages


@pytest.mark.parametrize("how", ["to_arrow", "record_batch_reader", "iter_batches"])
def test_arrow_by_default(how):
    def call():
        if how == "to_arrow":
            return idv.to_arrow(PATH)
        if how == "record_batch_reader":
            return idv.record_batch_reader(PATH).read_all()
        with idv.open(PATH) as f:
            return pa.Table.from_batches(list(f.iter_batches(batch_size=10)))
    table, messages = _warnings_of(call)
    _one_warning_for_created(messages)
    _check_arrow_columns(table)


def test_pandas_by_default():
    pd = pytest.importorskip("pandas")
    df, messages = _warnings_of(lambda: idv.read_pandas(PATH))
    _one_warning_for_created(messages)
    assert df["Created"].dtype == np.dtype("datetime64[us]")
    assert df["Updated"].dtype == np.dtype("datetime64[ns]")
    assert df["Updated"].to_numpy().view(np.int64).tolist() == \
        [t * 100 for t in since_1970("Updated")]
    assert df["Created"].iloc[0] == pd.Timestamp("0001-01-01")
    assert df["Created"].to_numpy().view(np.int64).tolist() == \
        [t // 10 for t in since_1970("Created")]


FLOORED = {"Created": "DateTime", "Updated": "DateTime", "Elapsed": "TimeSpan"}


def _floored_for_parquet(messages):
    """Parquet's default (auto-us): microseconds, one warning per column with finer ticks."""
    assert len(messages) == len(FLOORED), messages
    for (name, what), message in zip(FLOORED.items(), messages):
        n = sum(t % 10 != 0 for t in since_1970(name))
        assert re.match(rf"column '{name}': {n} {what} values \(first: .*which microseconds "
                        rf"cannot hold: floored to microseconds", message), message


def test_parquet_by_default_and_exactly_with_ticks(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    _, messages = _warnings_of(lambda: idv.convert(PATH, tmp_path / "x.parquet"))
    _floored_for_parquet(messages)
    table = pq.read_table(tmp_path / "x.parquet")       # microseconds: what Spark reads
    for name in ("Created", "Updated", "Day"):
        assert table.schema.field(name).type == pa.timestamp("us")
        assert table.column(name).cast(pa.int64()).to_pylist() == \
            [t // 10 for t in since_1970(name)], name
    assert table.schema.field("Elapsed").type == pa.duration("us")
    assert table.column("Elapsed").cast(pa.int64()).to_pylist() == \
        [t // 10 for t in since_1970("Elapsed")]
    # auto, as asked: nanoseconds where every value fits
    _, messages = _warnings_of(lambda: idv.convert(PATH, tmp_path / "a.parquet",
                                                   datetime="auto"))
    _one_warning_for_created(messages)
    _check_arrow_columns(pq.read_table(tmp_path / "a.parquet"))
    # ticks: exact, and back to an .idv with ML.NET's ticks
    _, messages = _warnings_of(lambda: idv.convert(PATH, tmp_path / "t.parquet",
                                                   datetime="ticks"))
    assert messages == []
    t = pq.read_table(tmp_path / "t.parquet")
    assert t.column("Created").to_pylist() == ticks_of("Created")
    idv.convert(tmp_path / "t.parquet", tmp_path / "back.idv")
    back = idv.read(tmp_path / "back.idv")
    for name in ("Created", "Updated", "Day"):
        assert (back[name].view(np.int64) + EPOCH).tolist() == ticks_of(name), name
    assert back["Elapsed"].view(np.int64).tolist() == ticks_of("Elapsed")


def test_exact_refuses_and_names_the_column(tmp_path):
    with pytest.raises(ValueError, match=rf"column 'Created': {CREATED_CHANGED} DateTime values"):
        idv.to_arrow(PATH, datetime="exact")
    with pytest.raises(ValueError, match="no unit holds it exactly"):
        idv.convert(PATH, tmp_path / "x.parquet", datetime="exact")
    assert list(tmp_path.iterdir()) == []
    table = idv.to_arrow(PATH, columns=["Updated", "Day", "Elapsed"], datetime="exact")
    assert table.schema.field("Updated").type == pa.timestamp("ns")


def test_cli_convert_by_default_warns_once_a_column(tmp_path):
    pytest.importorskip("pyarrow.parquet")
    rc, out, err = run("convert", PATH, tmp_path / "x.parquet", "-q")
    assert rc == 0, err
    lines = err.strip().splitlines()
    assert [line.split("'")[1] for line in lines] == list(FLOORED), err
    assert lines[0].startswith(
        f"idv: warning: column 'Created': {CREATED_CHANGED} DateTime values"), err
    # the clamp at the ends of the range is TimeSpan's alone (a DateTime floors inside it)
    assert ["TimeSpan.MinValue" in line for line in lines] == \
        [name == "Elapsed" for name in FLOORED], err
    rc, out, err = run("convert", PATH, tmp_path / "f.feather", "-q")     # auto: ns fits
    assert rc == 0 and len(err.strip().splitlines()) == 1, err
    rc, out, err = run("convert", PATH, tmp_path / "y.parquet", "-q", "--datetime", "ticks")
    assert (rc, err) == (0, "")


def test_read_in_the_units_numpy_and_pandas_handle():
    """read(datetime='auto'): datetime64[ns] / [us] that pd.Series, printing and .tolist()
    handle (datetime64[100ns] prints year 1 as 1754 and lists as integers); the default stays
    read()'s exact datetime64[100ns]."""
    pd = pytest.importorskip("pandas")
    exact = idv.read(PATH)
    assert exact["Created"].dtype == np.dtype("datetime64[100ns]")
    assert exact["Created"].view(np.int64).tolist() == since_1970("Created")
    data, messages = _warnings_of(lambda: idv.read(PATH, datetime="auto"))
    _one_warning_for_created(messages)
    assert data["Created"].dtype == np.dtype("datetime64[us]")
    assert data["Updated"].dtype == np.dtype("datetime64[ns]")
    assert data["Elapsed"].dtype == np.dtype("timedelta64[ns]")
    assert str(data["Created"][0]) == "0001-01-01T00:00:00.000000"
    import datetime as dt
    assert data["Day"].tolist()[1] == dt.datetime(1, 1, 1) + dt.timedelta(days=1000)
    assert pd.Series(data["Updated"]).astype("int64").tolist() == \
        [t * 100 for t in since_1970("Updated")]
    assert idv.read(PATH, columns=["Created"], datetime="ticks")["Created"].tolist() == \
        ticks_of("Created")
    with pytest.raises(ValueError, match="no unit holds it exactly"):
        idv.read(PATH, columns=["Created"], datetime="exact")
    with pytest.raises(ValueError, match="datetime must be one of"):
        idv.read(PATH, datetime="seconds")


def test_timespan_range_ends_come_back_from_parquet(tmp_path, oracle):
    """TimeSpans at the ends of .NET's range (one tick above TimeSpan.MinValue, which ML.NET
    saves as 0, and MaxValue) floored to microseconds in Parquet are clamped inside the range
    (the warning says so), so the Parquet converts back: to the nearest microsecond inside
    the range, which ML.NET loads."""
    spec = {"rows": 3, "columns": [{"name": "TS", "type": "TimeSpan",
                                    "values": [-2**63 + 1, 2**63 - 1, 5]}]}
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    src = tmp_path / "ends.idv"
    oracle.write_spec(spec_path, src)
    with pytest.warns(idv.IdvWarning, match="clamped at the ends of .NET's range"):
        idv.convert(src, tmp_path / "ends.parquet")
    back = tmp_path / "back.idv"
    idv.convert(tmp_path / "ends.parquet", back)
    doc = oracle.dump(back)
    assert doc["columns"][0]["type_string"] == "TimeSpan"
    # microseconds floored, but never below the least one whose ticks .NET holds
    top = (2**63 - 1) // 10 * 10
    assert [int(r[0]) for r in doc["rows"]] == [-top, top, 0]


def _net_ticks(clock):
    """.NET ticks of a naive clock time, by Python's own date arithmetic."""
    return (clock - dt.datetime(1, 1, 1)) // dt.timedelta(microseconds=1) * 10


def test_aware_datetimes_keep_their_offsets_whatever_the_entry_point(tmp_path, oracle):
    """Zone-aware datetime objects are DateTimeOffset values with each one's own offset,
    inferred or given types=, in a list, an object array, a DataFrame, their ISO 8601 text
    or an idv.Writer batch:
    ML.NET reads the same clock ticks and offsets from each file."""
    pd = pytest.importorskip("pandas", reason="one entry point is a DataFrame")
    zones = [dt.timezone(dt.timedelta(hours=2)), dt.timezone.utc,
             dt.timezone(-dt.timedelta(hours=5, minutes=30))]
    values = [dt.datetime(2020, 1, 1, 12, 0, 0, 123456, tzinfo=zones[0]),
              dt.datetime(1999, 12, 31, 23, 59, tzinfo=zones[1]),
              dt.datetime(2021, 6, 1, tzinfo=zones[2])]
    want = [{"ticks": _net_ticks(x.replace(tzinfo=None)),
             "offset_minutes": x.utcoffset() // dt.timedelta(minutes=1)} for x in values]
    files = {}
    for name, data, types in [
            ("typed", {"d": values}, {"d": idv.DateTimeOffset}),
            ("inferred", {"d": values}, None),
            ("objects", {"d": np.array(values, dtype=object)}, None),
            ("frame", pd.DataFrame({"d": pd.Series(values, dtype=object)}), None),
            ("text", {"d": [x.isoformat() for x in values]}, {"d": idv.DateTimeOffset})]:
        files[name] = tmp_path / f"{name}.idv"
        idv.write(files[name], data, types=types)
    files["Writer"] = tmp_path / "writer.idv"
    with idv.Writer(files["Writer"], {"d": idv.DateTimeOffset}) as w:
        w.write_batch({"d": values[:1]})
        w.write_batch({"d": pd.Series(values[1:], dtype=object)})
    dumps = oracle.dump_many(list(files.values()))
    for name, path in files.items():
        doc = dumps[str(path)]
        assert doc["columns"][0]["type_string"] == "DateTimeOffset", name
        assert [r[0] for r in doc["rows"]] == want, name


@pytest.mark.parametrize("types", [None, "DateTime", "DateTimeOffset", "pandas"])
def test_naive_and_aware_datetimes_in_one_column_are_refused(tmp_path, types):
    """A naive datetime has no instant to put beside aware ones: the row is named."""
    values = [dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc),
              dt.datetime(2020, 1, 2, tzinfo=dt.timezone.utc), dt.datetime(2020, 1, 3)]
    data = {"d": values}
    if types == "pandas":
        pd = pytest.importorskip("pandas", reason="the DataFrame case needs pandas")
        data, types = pd.DataFrame({"d": pd.Series(values, dtype=object)}), None
    with pytest.raises(ValueError, match=r"column 'd' row 2: .* is a naive datetime among "
                                         r"zone-aware ones"):
        idv.write(tmp_path / "m.idv", data, types=types and {"d": getattr(idv, types)})
    assert list(tmp_path.iterdir()) == []


def test_iso_text_given_as_datetime_keeps_every_tick(tmp_path, oracle):
    """ISO 8601 text written as DateTime (a list, an object array, an Arrow string column,
    with pyarrow's parser or, past its years or with an offset, idv's own): ML.NET reads each
    value to the tick, the seventh fractional digit included."""
    text = ["2024-01-01T10:00:00.1234567", "1999-12-31 23:59:59.9999999", "2024-02-29"]
    far = ["0001-01-01T00:00:00.0000001", "9999-12-31T23:59:59.9999999",
           "2024-01-01T10:00:00.1234567+02:00"]
    want = [_net_ticks(dt.datetime(2024, 1, 1, 10)) + 1234567,
            _net_ticks(dt.datetime(1999, 12, 31, 23, 59, 59)) + 9999999,
            _net_ticks(dt.datetime(2024, 2, 29))]
    want_far = [1, _net_ticks(dt.datetime(9999, 12, 31, 23, 59, 59)) + 9999999,
                _net_ticks(dt.datetime(2024, 1, 1, 8)) + 1234567]
    files = {}
    for name, values in [("list", text), ("objects", np.array(text, object)),
                         ("arrow", pa.array(text)), ("far", far)]:
        files[name] = tmp_path / f"{name}.idv"
        idv.write(files[name], {"d": values}, types={"d": idv.DateTime})
    dumps = oracle.dump_many(list(files.values()))
    for name, path in files.items():
        doc = dumps[str(path)]
        assert doc["columns"][0]["type_string"] == "DateTime", name
        assert [int(r[0]) for r in doc["rows"]] == (want_far if name == "far" else want), name


def test_time_objects_keep_every_tick_or_are_refused(tmp_path):
    """Objects of any time kind (pandas' nanoseconds, numpy's datetime64 objects, timedeltas
    beyond int64's microseconds) are written exactly: a part finer than a tick floored with a
    warning, a span no TimeSpan holds refused, never squeezed through microseconds or wrapped;
    an int or a missing value among them is refused, naming its row."""
    pd = pytest.importorskip("pandas", reason="pandas' Timestamp and Timedelta objects")
    p = tmp_path / "t.idv"
    cases = [([pd.Timestamp("2020-01-01T00:00:00.123456789"), dt.datetime(2020, 1, 1)], idv.DateTime,
              [_net_ticks(dt.datetime(2020, 1, 1)) - EPOCH + 1234567,
               _net_ticks(dt.datetime(2020, 1, 1)) - EPOCH]),
             ([np.datetime64("2020-01-01T00:00:00.000000250")], idv.DateTime,
              [_net_ticks(dt.datetime(2020, 1, 1)) - EPOCH + 2]),
             ([dt.timedelta(days=1), pd.Timedelta(1234567891, "ns")], idv.TimeSpan,
              [864_000_000_000, 12_345_678])]
    for values, t, want in cases:
        with pytest.warns(idv.IdvWarning, match="finer than .NET's ticks"):
            idv.write(p, {"a": values}, types={"a": t})
        assert idv.read(p)["a"].view(np.int64).tolist() == want
    # pandas' objects of another unit than nanoseconds, beyond nanoseconds' years and span
    # (Series.tolist() of datetime64[us]), by their own unit: .value overflowed
    far = pd.Series(np.array(["0001-01-01", "9999-12-31T23:59:59.999999"], "datetime64[us]"))
    span = pd.Series(np.array([200_000 * 86_400 * 10**6], "timedelta64[us]"))
    for values, t, want in [(far.tolist(), None, [0, 3_155_378_975_999_999_990]),
                            (span.tolist(), None, [200_000 * 864_000_000_000])]:
        idv.write(p, {"a": values}, types={"a": t} if t else None)
        assert idv.read(p, datetime="ticks")["a"].tolist() == want
        assert idv.read(p, filter=[("a", "==", values[0])], datetime="ticks")["a"].tolist() \
            == want[:1]
    for values, t, said in [([dt.timedelta(microseconds=2**64 + 5)], idv.TimeSpan,
                             "row 0: .* outside .NET's TimeSpan range"),
                            ([dt.datetime(2020, 1, 1), 5], idv.DateTime, "row 1 holds int 5"),
                            (["-10675199.02:48:05.4775808"], idv.TimeSpan,
                             "row 0: .* is .NET's TimeSpan.MinValue, which ML.NET reads as 0"),
                            ([dt.datetime(2020, 1, 1), None], idv.DateTime,
                             "row 1: None, but DateTime has no missing value"),
                            ([dt.datetime(2020, 1, 1), pd.NaT], idv.DateTime,
                             "row 1: NaT, but DateTime has no missing value"),
                            ([dt.timedelta(1), np.timedelta64("NaT")], idv.TimeSpan,
                             "row 1: np.timedelta64.'NaT'.*, but TimeSpan has no missing")]:
        with pytest.raises((TypeError, ValueError), match=said):
            idv.write(tmp_path / "bad.idv", {"a": values}, types={"a": t})
    assert not (tmp_path / "bad.idv").exists()



@pytest.mark.parametrize("engine", ["arrow_dataset", "polars", "dask"])
def test_an_engine_names_the_time_modes_it_takes(engine):
    """'100ns' is numpy's alone: an engine refuses it, and 'ms', naming its own modes as
    to_arrow does."""
    import importlib
    path = idv.sample_path()
    read = {"arrow_dataset": lambda d: idv.arrow_dataset(path, datetime=d),
            "polars": lambda d: importlib.import_module("idv.polars").scan_idv(path, datetime=d),
            "dask": lambda d: importlib.import_module("idv.dask").read_idv(path, datetime=d)}
    pytest.importorskip({"arrow_dataset": "pyarrow", "polars": "polars",
                         "dask": "dask.dataframe"}[engine])
    for mode in ("100ns", "ms"):
        with pytest.raises(ValueError) as arrow:
            idv.to_arrow(path, datetime=mode)
        with pytest.raises(ValueError) as got:
            read[engine](mode)
        assert str(got.value) == str(arrow.value)
        assert "'100ns'" not in str(got.value).rpartition(", not ")[0]
