"""One unit for a time column whatever the entry point (idv._reader.time_units): numpy with
datetime="auto", Arrow, a stream, pandas, a dataset, polars, the Arrow dataset (DuckDB's way
in, asked: DuckDB's default is its own microseconds) give DateTime, TimeSpan and
DateTimeOffset the same unit by default, with and
without statistics, for a whole read and for a few rows; a column written from Arrow or
pandas comes back as the type it was written from.
The expected unit is written out here from the rule (ns when every value fits, else us)."""
from __future__ import annotations

import datetime as dt
import re
import warnings

import numpy as np
import pytest

import idv

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")

ROWS = 3000


def _columns(old):
    """A source of every time type and a number, written from numpy (so without the type it
    was written from: the rule alone decides); `old`: one DateTime of year 1 (ML.NET's
    default(DateTime)), which nanoseconds cannot hold."""
    when = np.datetime64("2024-05-01T00:00:00", "ns") + np.arange(ROWS) * np.int64(10**9 + 100)
    when = when.astype("datetime64[us]") if old else when
    if old:
        when[-1] = np.datetime64("0001-01-01", "us")
    span = (np.arange(ROWS) * np.int64(1000)).astype("timedelta64[us]")
    dto = np.zeros(ROWS, [("utc", "datetime64[100ns]"), ("offset_minutes", "i2")])
    dto["utc"] = np.datetime64("2024-01-01", "s") + np.arange(ROWS)
    dto["offset_minutes"] = 60
    return {"when": when, "span": span, "dto": dto,
            "vec": np.arange(ROWS, dtype=np.float32)}


@pytest.fixture(params=[(False, True), (False, False), (True, True), (True, False)],
                ids=["ns-statistics", "ns-none", "year1-statistics", "year1-none"])
def source(request, tmp_path):
    old, stats = request.param
    p = tmp_path / "t.idv"
    idv.write(p, _columns(old), types={"dto": idv.DateTimeOffset}, rows_per_block=500,
              statistics=stats)
    return p, ("us" if old else "ns")


def _arrow_units(schema):
    out = {}
    for name in ("when", "span"):
        out[name] = schema.field(name).type.unit
    dto = schema.field("dto").type
    out["dto"] = dto.field("utc").type.unit if pa.types.is_struct(dto) else dto.unit
    return out


def _numpy_units(values):
    return {"when": np.datetime_data(values["when"].dtype)[0],
            "span": np.datetime_data(values["span"].dtype)[0],
            "dto": np.datetime_data(values["dto"]["utc"].dtype)[0]}


def test_every_entry_point_gives_the_same_unit(source):
    p, unit = source
    # the year-1 DateTime moves its own column to microseconds, no other
    want = {"when": unit, "span": "ns", "dto": "ns"}
    whole = idv.to_arrow(str(p))
    assert _arrow_units(whole.schema) == want
    with idv.open(p) as f:
        assert _arrow_units(idv._interop.arrow.record_batch_reader(f, rows=slice(0, 2)).schema) == want
        assert _arrow_units(idv._interop.arrow.record_batch_reader(f, batch_size=7).schema) == want
        assert _numpy_units(f.read(datetime="auto")) == want
        assert _numpy_units(f.read(rows=[0, 5], datetime="auto")) == want
        assert _numpy_units(f.take([3, 1], datetime="auto")) == want
        assert _numpy_units(f.read(filter=[("vec", "!=", -1.0)], datetime="auto")) == want
    frame = idv.to_pandas(str(p))
    assert {n: np.datetime_data(frame[n].dtype)[0] for n in ("when", "span")} == \
        {"when": want["when"], "span": want["span"]}
    with idv.dataset([p, p]) as ds:
        assert _arrow_units(ds.to_arrow().schema) == want
        assert _arrow_units(ds.record_batch_reader().schema) == want
        assert _numpy_units(ds.read(datetime="auto")) == want
        assert _numpy_units(ds.take([0, ROWS + 1], datetime="auto")) == want
    assert _arrow_units(idv.arrow_dataset(str(p), datetime="auto").schema) == want
    # DuckDB's unit, in which it pushes filters into the scan: the 100-ns ticks of the "ns"
    # files' DateTime floored, with a warning
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert set(_arrow_units(idv.arrow_dataset(str(p)).schema).values()) == {"us"}
    floored = [w for w in seen if "floored to microseconds" in str(w.message)]
    assert len(floored) == (unit == "ns"), [str(w.message) for w in seen]
    polars = pytest.importorskip("polars")
    from idv.polars import scan_idv
    lf = scan_idv(p)
    got = lf.head(3).collect()
    assert got.schema["when"] == polars.Datetime(want["when"])
    assert got.schema["span"] == polars.Duration(want["span"])
    assert lf.collect_schema()["when"] == polars.Datetime(want["when"])


def test_numpy_keeps_net_ticks_by_default(source):
    p, _ = source
    got = idv.read(p, ["when", "span", "dto"])
    assert got["when"].dtype == np.dtype("datetime64[100ns]")
    assert got["span"].dtype == np.dtype("timedelta64[100ns]")
    assert got["dto"]["utc"].dtype == np.dtype("datetime64[100ns]")
    assert np.array_equal(got["when"].astype("datetime64[us]"),
                          idv.read(p, ["when"], datetime="auto")["when"].astype("datetime64[us]"))


def test_a_dataset_chooses_one_unit_per_column_from_every_file(tmp_path):
    recent, old = tmp_path / "a.idv", tmp_path / "b.idv"
    idv.write(recent, {"T": np.array(["2020-01-01"], "datetime64[ns]"),
                       "S": np.array([5], "timedelta64[s]")})
    idv.write(old, {"T": np.array(["0001-01-01"], "datetime64[us]"),
                    "S": np.array([7], "timedelta64[s]")})
    with idv.dataset([recent, old]) as ds:
        schema = ds.to_arrow().schema
        assert (schema.field("T").type.unit, schema.field("S").type.unit) == ("us", "ns")
        part = next(iter(ds.record_batch_reader(batch_size=1)))     # the first file's batch
        assert part.schema.field("T").type.unit == "us"
        assert ds.to_pandas()["T"].dtype == np.dtype("datetime64[us]")


def test_statistics_choose_without_decoding_a_block(tmp_path):
    p = tmp_path / "s.idv"
    idv.write(p, {"when": np.datetime64("2024-01-01", "ns") + 100 * np.arange(10)}, statistics=True)
    with idv.open(p) as f:
        assert idv._interop.arrow.arrow_schema(f).field("when").type == pa.timestamp("ns")
        assert f["when"].blocks_decoded == 0
    idv.write(p, {"when": np.datetime64("2024-01-01", "ns") + 100 * np.arange(10)}, statistics=False)
    with idv.open(p) as f:
        assert idv._interop.arrow.arrow_schema(f).field("when").type == pa.timestamp("ns")
        assert f["when"].blocks_decoded == 1


def test_values_summed_a_piece_at_a_time_count_every_sub_microsecond_tick(tmp_path,
                                                                          monkeypatch):
    """Where the statistics cannot answer (microseconds asked for: how many values they
    floor), the column is decoded by the scan, each piece summed up in the thread that
    decoded it: with many small windows and pieces, the count of values with 100-ns ticks
    and the first of them are numpy's."""
    from idv._reader import column
    from idv._scan import scan
    monkeypatch.setattr(column.Column, "iter_blocks", None)     # not block by block
    monkeypatch.setattr(scan, "WINDOW_BYTES", 6000)
    monkeypatch.setattr(scan, "PIECE_BYTES", 1500)
    rng = np.random.default_rng(4)
    base = np.datetime64("2024-01-01", "ns") + np.arange(5000) * np.timedelta64(1000, "ns")
    odd = np.sort(rng.choice(np.arange(1000, 5000), 37, replace=False))
    when = base.copy()
    when[odd] += np.timedelta64(300, "ns")          # 3 ticks past a microsecond
    p = tmp_path / "t.idv"
    idv.write(p, {"when": when, "vec": np.stack([base, when], axis=1)}, rows_per_block=64,
              statistics=False)               # statistics would answer without a decode
    first = np.datetime_as_string(when[odd[0]], "ns")[:27]     # .NET's 7 digits of second
    for name in ("when", "vec"):
        with idv.open(p) as f, pytest.warns(
                idv.IdvWarning, match=rf"'{name}': 37 DateTime values \(first: DateTime "
                                      rf"{re.escape(first)}\) have 100-ns ticks"):
            field = idv.arrow_schema(f, [name], datetime="auto-us").field(0)
            assert "timestamp[us]" in str(field.type)


def test_statistics_choose_for_a_whole_read_without_a_pass_over_its_values(tmp_path,
                                                                           monkeypatch):
    """A whole read has the values at hand, but the statistics still decide (no pass), a
    column that needs microseconds too (are ticks floored? their counts say); only where the
    statistics do not keep those counts (an idv that did not write them), or are missing,
    are the values summed up."""
    from idv._storage import sub_microseconds
    from idv._values import ticks
    p = tmp_path / "s.idv"
    data = _columns(False)
    idv.write(p, data, types={"dto": idv.DateTimeOffset})

    def refuse(self, values):
        raise AssertionError("the values were summed up to choose the unit")
    monkeypatch.setattr(ticks.UnitChoice, "add", refuse)
    table = idv.to_arrow(str(p))
    assert _arrow_units(table.schema) == {"when": "ns", "span": "ns", "dto": "ns"}
    assert table.column("when").to_numpy().tolist() == data["when"].tolist()
    assert idv.read_pandas(p)["when"].to_numpy().tolist() == data["when"].tolist()
    old = _columns(True)                                    # year 1: microseconds
    idv.write(p, old, types={"dto": idv.DateTimeOffset})
    table = idv.to_arrow(str(p))
    assert _arrow_units(table.schema) == {"when": "us", "span": "ns", "dto": "ns"}
    assert table.column("when").to_numpy().tolist() == old["when"].tolist()
    with monkeypatch.context() as m:        # statistics without the counts
        m.setattr(sub_microseconds, "pack", lambda columns: b"")
        idv.write(p, old, types={"dto": idv.DateTimeOffset})
    with pytest.raises(AssertionError, match="summed up"):
        idv.to_arrow(str(p))
    idv.write(p, data, types={"dto": idv.DateTimeOffset}, statistics=False)
    with pytest.raises(AssertionError, match="summed up"):
        idv.read_pandas(p)


def _written_in(tmp_path, table):
    """`table` written to an .idv and read back by idv.read_pandas, with pyarrow's own
    conversion of the same table (the reference: what pd.read_parquet gives)."""
    idv.write(tmp_path / "w.idv", table)
    return idv.read_pandas(tmp_path / "w.idv"), table.to_pandas()


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_pandas_times_are_pyarrows_own_conversion(tmp_path, unit):
    rng = np.random.default_rng(5)
    counts = rng.integers(-10**17, 10**17, 2000) // {"s": 10**9, "ms": 10**6, "us": 10**3,
                                                     "ns": 1}[unit]
    if unit == "ns":
        counts = counts // 100 * 100                    # whole .NET ticks
    table = pa.table({
        "paris": pa.array(counts, pa.timestamp(unit, tz="Europe/Paris")),
        "utc": pa.array(counts, pa.timestamp(unit, tz="UTC")),
        "plain": pa.array(counts, pa.timestamp(unit)),
        "span": pa.array(counts, pa.duration(unit))})
    got, ref = _written_in(tmp_path, table)
    assert got.dtypes.to_dict() == ref.dtypes.to_dict()
    assert str(got["paris"].dt.tz) == "Europe/Paris"
    for name in table.column_names:
        assert got[name].astype("int64").tolist() == counts.tolist(), name
        assert got[name].equals(ref[name]), name


def test_pandas_offsets_give_the_zone_of_the_values(tmp_path):
    """DateTimeOffset written without a zone (a struct of UTC instants and offsets): one offset
    is its fixed zone, several are UTC; the instants are the same either way."""
    utc = np.datetime64("2024-01-01", "us") + np.arange(0, 3000, 7).astype("timedelta64[m]")
    instants = pa.array(utc.view(np.int64), pa.timestamp("us", tz="UTC"))
    for offsets, zone in ((np.full(len(utc), 150), dt.timezone(dt.timedelta(minutes=150))),
                          (np.arange(len(utc)) % 3 * 60, dt.timezone.utc)):
        dto = pa.StructArray.from_arrays(
            [instants, pa.array(offsets.astype(np.int16))], ["utc", "offset_minutes"])
        got, _ = _written_in(tmp_path, pa.table({"dto": dto}))
        assert got["dto"].dt.tz.utcoffset(None) == zone.utcoffset(None)
        assert got["dto"].dt.tz_convert("UTC").dt.tz_localize(None).to_numpy().astype(
            "datetime64[us]").tolist() == utc.tolist()


def test_pandas_refuses_a_value_its_written_unit_cannot_hold_naming_the_column(tmp_path):
    """The type a column was written from comes back exactly or not at all, coarser (a
    fraction of a second in seconds) or finer (a year nanoseconds cannot hold)."""
    year1500 = np.array(["1500-01-01", "2024-01-01"], "datetime64[us]")
    for values, source in ((year1500, "timestamp[ns]"),
                           (year1500 + np.timedelta64(1, "ms"), "timestamp[s]")):
        idv.write(tmp_path / "x.idv", {"X": values},
                  metadata={"X": {"idv.SourceType": (idv.Text, source)}})
        unit = source[10:-1]
        with pytest.raises(ValueError, match=rf"column 'X': {unit}, the unit it was written in"):
            idv.read_pandas(tmp_path / "x.idv")
        assert idv.read_pandas(tmp_path / "x.idv", datetime="us")["X"].tolist() == \
            [pd.Timestamp(v) for v in values.tolist()]


def test_ticks_convert_from_a_field_of_structured_values():
    """ticks_to_unit and rescaled take views (a DateTimeOffset's UTC field) as they are."""
    from idv._values import ticks
    rows = np.zeros(4, [("utc", "i8"), ("offset_minutes", "i2")])
    rows["utc"] = [0, 10, -20, 12340]
    assert ticks.ticks_to_unit(rows["utc"], "ns", True, str, "DateTime").tolist() == \
        [0, 1000, -2000, 1234000]
    assert ticks.ticks_to_unit(rows["utc"], "us", True, str, "DateTime").tolist() == \
        [0, 1, -2, 1234]
    rows["utc"][1] = -15                                  # floors: -1.5 us is -2 us
    assert ticks.ticks_to_unit(rows["utc"], "us", False, str, "DateTime").tolist() == \
        [0, -2, -2, 1234]
    with pytest.raises(ValueError, match="row 1.*sub-microsecond"):
        ticks.ticks_to_unit(rows["utc"], "us", True, lambda i: f"row {i}", "DateTime")
    assert ticks.ticks_to_unit(np.array([-2**63]), "us", False, str, "TimeSpan").tolist() == \
        [-((2**63 - 1) // 10)]              # clamped: the least microsecond int64 ticks hold
    assert ticks.rescaled(np.array([3000, -6000]), "us", "ms").tolist() == [3, -6]
    assert ticks.rescaled(np.array([3000, -6001]), "us", "ms") is None
    assert ticks.rescaled(np.array([-3]), "s", "ns").tolist() == [-3 * 10**9]
    assert ticks.rescaled(np.array([2**62]), "us", "ns") is None


# nanoseconds per unit, for the reference below
_NS = {"D": 86400 * 10**9, "s": 10**9, "ms": 10**6, "us": 1000, "ns": 1}


def _reference(t100, unit, safe, target):
    """What converting 100-ns counts to `unit` and then, exactly, to `target` gives, in Python
    integers: (the start of the message, the row) where `unit` refuses a value, None where
    `target` cannot hold one, else the counts."""
    if unit == "ns" and any(abs(t) > (2**63 - 1) // 100 for t in t100):
        return "outside what nanoseconds", [abs(t) > (2**63 - 1) // 100 for t in t100].index(True)
    if unit == "us" and safe and any(t % 10 for t in t100):
        return "sub-microsecond", [t % 10 != 0 for t in t100].index(True)
    ns = [t * 100 if unit == "ns" else t // 10 * 1000 for t in t100]
    if any(n % _NS[target] or not -2**63 <= n // _NS[target] < 2**63 for n in ns):
        return None
    return [n // _NS[target] for n in ns]


@pytest.mark.parametrize("unit, safe", [("ns", True), ("us", True), ("us", False)])
@pytest.mark.parametrize("target", ["D", "s", "ms", "us", "ns"])
def test_ticks_convert_straight_to_the_unit_written_in(unit, safe, target):
    """ticks_to_unit's `target`: the counts of the unit chosen, then exactly of `target`
    (None where it cannot hold one), from a DateTimeOffset's UTC field as it is, into `out`."""
    from idv._values import ticks
    day, ns_max = 864 * 10**9, (2**63 - 1) // 100
    cases = [[0, 10, -20, 12340 * 10**4], [day, -3 * day, 5 * day], [-15, 7 * day],
             [10**7, -10**7 + 5], [ns_max // day * day, -(ns_max // day) * day],
             [ns_max + 10**7 - ns_max % 10**7], [day, 2 * 10**18], []]
    for case in cases:
        rows = np.zeros(len(case), [("utc", "i8"), ("offset_minutes", "i2")])
        rows["utc"] = case
        want = _reference(case, unit, safe, target)
        out = np.full(len(case), -1, np.int64)
        call = (lambda: ticks.ticks_to_unit(rows["utc"], unit, safe, lambda i: f"row {i}",
                                            "DateTime", target=target, out=out))
        if isinstance(want, tuple):
            with pytest.raises(ValueError, match=rf"^row {want[1]}: .*{want[0]}"):
                call()
        elif want is None:
            assert call() is None, case
        else:
            got = call()
            assert got.tolist() == want, case
            if target != "ns" and (unit == "ns" or safe):     # made in one division
                assert got is out


def _written_sources():
    """A table of every type a time column is written from, with its values (whole .NET
    ticks) and zones."""
    rng = np.random.default_rng(7)
    n = 5000
    us = rng.integers(-10**15, 10**15, n)          # 1938-2001: no local mean time
    return pa.table({
        "paris": pa.array(us, pa.timestamp("us", tz="Europe/Paris")),
        "utc_ms": pa.array(us // 1000, pa.timestamp("ms", tz="UTC")),
        "plain_s": pa.array(us // 10**6, pa.timestamp("s")),
        "ns": pa.array(us // 10 * 1000, pa.timestamp("ns")),
        "day": pa.array((us // 86400 // 10**6).astype(np.int32), pa.date32()),
        "span_ms": pa.array(us // 1000, pa.duration("ms")),
        "span_us": pa.array(us, pa.duration("us"))})


def test_written_types_come_back_straight_from_the_ticks(tmp_path, monkeypatch):
    """Arrow and pandas give each column the type it was written from by converting its ticks
    to that unit directly: no pyarrow cast of an array in another unit, no rescaling pass over
    one; the values are the table written, and pyarrow's own conversion of it to pandas."""
    from idv._interop import arrow_columns
    from idv._values import ticks
    table = _written_sources()
    idv.write(tmp_path / "t.idv", table, rows_per_block=1000)

    def refuse(*args, **kwargs):
        raise AssertionError("converted in another unit first")
    monkeypatch.setattr(arrow_columns, "restore", refuse)
    monkeypatch.setattr(ticks, "rescaled", refuse)
    assert idv.to_arrow(str(tmp_path / "t.idv")).equals(table)
    batches = pa.Table.from_batches(list(idv.record_batch_reader(str(tmp_path / "t.idv"),
                                                                 batch_size=700)))
    assert batches.equals(table)
    # pandas holds a date32 column as datetime64 (pyarrow: date objects)
    got = idv.read_pandas(tmp_path / "t.idv").drop(columns="day")
    want = table.drop(["day"]).to_pandas()
    assert got.dtypes.to_dict() == want.dtypes.to_dict()
    for name in want.columns:
        assert got[name].equals(want[name]), name


def test_arrow_refuses_a_value_its_written_unit_cannot_hold_naming_the_column(tmp_path):
    """A fraction of the unit a column was written in, or a year beyond it: the read says
    which column, from which row, and how to read it."""
    year1500 = np.array(["1500-01-01", "2024-01-01"], "datetime64[us]")
    for values, source in ((year1500, "timestamp[ns]"),
                           (year1500 + np.timedelta64(1, "ms"), "timestamp[s]"),
                           (year1500[1:] + np.timedelta64(1, "us"), "timestamp[ms, tz=UTC]")):
        types = {"X": idv.DateTimeOffset} if "tz" in source else None
        idv.write(tmp_path / "x.idv", {"X": values}, types=types,
                  metadata={"X": {"idv.SourceType": (idv.Text, source)}})
        with pytest.raises(ValueError, match=rf"column 'X' rows from 0: as "
                                             rf"{re.escape(source)}, the type it was written "
                                             rf"from: .*; read it with datetime='us' or 'ns'"):
            idv.to_arrow(str(tmp_path / "x.idv"))
        got = idv.to_arrow(str(tmp_path / "x.idv"), datetime="us").column("X")
        instants = got.combine_chunks().field("utc") if "tz" in source else got
        assert instants.to_numpy().astype("datetime64[us]").tolist() == values.tolist()


# ---- the type a column was written from ----------------------------------------------------

def _arrow_source():
    utc = dt.timezone.utc
    return pa.table({
        "at": pa.array([dt.datetime(2024, 1, 1, 12, 0, 0, 5, tzinfo=utc), None][:1] * 3,
                       pa.timestamp("us", tz="UTC")),
        "day": pa.array([dt.date(2024, 1, 2), dt.date(1, 1, 1), dt.date(9999, 12, 31)],
                        pa.date32()),
        "span": pa.array([5, -7, 10**12], pa.duration("us")),
        "ms": pa.array([0, 1, 2**40], pa.timestamp("ms")),
        "ns": pa.array([0, 100, 2**62 // 100 * 100], pa.timestamp("ns"))})   # whole ticks


def test_parquet_to_idv_to_parquet_keeps_every_time_type(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    table = _arrow_source()
    pq.write_table(table, tmp_path / "a.parquet")
    idv.convert(tmp_path / "a.parquet", tmp_path / "a.idv")
    assert idv.to_arrow(str(tmp_path / "a.idv")).equals(table)
    # its 100-ns ticks floored to Parquet's microseconds, with a warning
    with pytest.warns(idv.IdvWarning, match="column 'ns'.*floored to microseconds"):
        idv.convert(tmp_path / "a.idv", tmp_path / "b.parquet")
    back = pq.read_table(tmp_path / "b.parquet")
    # Parquet's default is microseconds (what Spark reads): all but the nanoseconds come back
    assert back.drop(["ns"]).equals(table.drop(["ns"]))
    assert back.schema.field("ns").type == pa.timestamp("us")
    # another unit asked for: that unit, whatever the column was written from
    assert idv.to_arrow(str(tmp_path / "a.idv"), ["day"], datetime="us").schema.field(
        "day").type == pa.timestamp("us")


def test_pandas_zones_and_units_come_back(tmp_path):
    df = pd.DataFrame({
        "paris": pd.date_range("2024-03-30", periods=4, freq="12h", tz="Europe/Paris")
        .astype("datetime64[us, Europe/Paris]"),
        "td": pd.to_timedelta([1, 2, 3, 4], unit="s").astype("timedelta64[ms]"),
        "plain": pd.date_range("2024-03-01", periods=4, freq="s").astype("datetime64[s]")})
    idv.write(tmp_path / "p.idv", df)
    back = idv.to_pandas(tmp_path / "p.idv")
    assert back.dtypes.to_dict() == df.dtypes.to_dict()
    assert back.equals(df)
    with idv.dataset([tmp_path / "p.idv", tmp_path / "p.idv"]) as ds:
        assert ds.to_pandas().dtypes.to_dict() == df.dtypes.to_dict()
        assert ds.to_arrow().schema.field("paris").type == pa.timestamp("us", tz="Europe/Paris")


def test_arrow_backed_pandas_gives_the_types_arrow_does(tmp_path):
    """dtype_backend="pyarrow" gives each time column the Arrow type to_arrow gives it, the
    type it was written from: a date32 column dates again (not timestamps), in a file's frame,
    rows by number and a dataset's."""
    table = pa.table({"d": pa.array([dt.date(2020, 1, 2), dt.date(1, 1, 1)], pa.date32()),
                      "ms": pa.array([5, 6], pa.duration("ms")),
                      "t": pa.array([1, 2], pa.timestamp("s", tz="UTC"))})
    idv.write(tmp_path / "a.idv", table)
    want = {f.name: pd.ArrowDtype(f.type) for f in idv.to_arrow(tmp_path / "a.idv").schema}
    assert want["d"] == pd.ArrowDtype(pa.date32())
    for df in (idv.read_pandas(tmp_path / "a.idv", dtype_backend="pyarrow"),
               idv.to_pandas(tmp_path / "a.idv", dtype_backend="pyarrow", rows=[1, 0])):
        assert df.dtypes.to_dict() == want
    assert idv.read_pandas(tmp_path / "a.idv", dtype_backend="pyarrow")["d"].tolist() == \
        [dt.date(2020, 1, 2), dt.date(1, 1, 1)]
    with idv.dataset([tmp_path / "a.idv", tmp_path / "a.idv"]) as ds:
        assert ds.to_pandas(dtype_backend="pyarrow").dtypes.to_dict() == want


def _pandas_parts(tmp_path, frames):
    """A dataset folder of one file written from each pandas frame of `frames`, in order."""
    folder = tmp_path / "ds"
    folder.mkdir()
    for i, df in enumerate(frames):
        idv.write(folder / f"part-{i}.idv", df)
    return folder


@pytest.mark.parametrize("order", [1, -1], ids=["seconds-first", "nanoseconds-first"])
def test_a_dataset_gives_the_written_type_only_where_every_file_was_written_from_it(
        tmp_path, order):
    """Files written from seconds and from nanoseconds: the column is read by the rule
    (nanoseconds: every value fits), whatever the files' order, through every entry point;
    a column every file was written from in one type still comes back as that type."""
    paris = pd.Series(pd.date_range("2001-01-01", periods=2, freq="h", tz="Europe/Paris")
                      .astype("datetime64[ms, Europe/Paris]"))
    seconds = pd.DataFrame({"c": pd.to_datetime(["2001-01-01 00:00:01", "2001-01-01 00:00:02"])
                            .as_unit("s"), "z": paris})
    fine = pd.DataFrame({"c": pd.to_datetime(["2001-01-01 00:00:03.1234567",
                                              "2001-01-01 00:00:04.5"]).as_unit("ns"),
                         "z": paris})
    frames = [seconds, fine][::order]
    folder = _pandas_parts(tmp_path, frames)
    want = np.concatenate([df["c"].to_numpy().astype("datetime64[ns]") for df in frames])
    with idv.dataset(folder) as ds:
        whole = ds.to_arrow()
        assert whole.schema.field("c").type == pa.timestamp("ns")
        assert whole.schema.field("z").type == pa.timestamp("ms", tz="Europe/Paris")
        assert np.array_equal(whole["c"].to_numpy(), want)
        streamed = ds.record_batch_reader(batch_size=1).read_all()
        assert streamed.schema == whole.schema
        frame = idv.read_pandas(ds)
        assert frame["c"].dtype == np.dtype("datetime64[ns]")
        assert frame["z"].dtype == paris.dtype
        assert np.array_equal(frame["c"].to_numpy(), want)
        some = idv.read_pandas(ds, filter=[("c", ">", np.datetime64("2001-01-01T00:00:01"))])
        assert some["c"].dtype == np.dtype("datetime64[ns]") and some["z"].dtype == paris.dtype
    polars = pytest.importorskip("polars", reason="scan_idv is polars'")
    from idv.polars import scan_idv
    got = scan_idv(folder).collect()
    assert got.schema["c"] == polars.Datetime("ns")
    assert np.array_equal(got["c"].to_numpy(), want)


def test_a_dataset_of_files_with_and_without_a_written_type_reads_by_the_rule(tmp_path):
    """A file written from pandas seconds and one from numpy (no written-from type)."""
    seconds = pd.DataFrame({"c": pd.to_datetime(["2001-01-01 00:00:01"]).as_unit("s")})
    folder = _pandas_parts(tmp_path, [seconds])
    idv.write(folder / "part-1.idv", {"c": np.array(["2001-01-01T00:00:02.5"], "datetime64[ms]")})
    with idv.dataset(folder) as ds:
        assert ds.to_arrow().schema.field("c").type == pa.timestamp("ns")
        assert idv.read_pandas(ds)["c"].tolist() == [pd.Timestamp("2001-01-01 00:00:01"),
                                                      pd.Timestamp("2001-01-01 00:00:02.5")]


def test_a_dataset_zone_written_in_different_units_is_that_of_every_row(tmp_path):
    """A DateTimeOffset column written from Paris in milliseconds, then in microseconds (a
    summer's offset): read by the rule, its zone that of all its rows (UTC: two offsets),
    whatever rows a read keeps."""
    winter = pd.Series(pd.to_datetime(["2001-01-01 00:00:01"]).tz_localize("Europe/Paris"))
    summer = pd.Series(pd.to_datetime(["2001-07-01 00:00:01"]).tz_localize("Europe/Paris"))
    folder = _pandas_parts(tmp_path, [pd.DataFrame({"z": winter.astype(
        "datetime64[ms, Europe/Paris]")}), pd.DataFrame({"z": summer.astype(
            "datetime64[us, Europe/Paris]")})])
    with idv.dataset(folder) as ds:
        assert str(idv.read_pandas(ds)["z"].dt.tz) == "UTC"
        first = ds.to_pandas(rows=slice(0, 1))["z"]
        assert str(first.dt.tz) == "UTC" and first[0] == winter[0]


@pytest.mark.parametrize("unit, ticks_per", [("s", 10**7), ("ms", 10**4)])
def test_arrow_time32_is_written_as_a_timespan(tmp_path, unit, ticks_per):
    """A time of day in seconds or milliseconds (what Parquet and CSV readers give)."""
    counts = [0, 1, 86399]
    idv.write(tmp_path / "t.idv", pa.table({"t": pa.array(counts, pa.int32()).cast(
        pa.time32(unit))}))
    got = idv.read(tmp_path / "t.idv")["t"]
    assert got.dtype == np.dtype("timedelta64[100ns]")
    assert got.view(np.int64).tolist() == [c * ticks_per for c in counts]


def test_a_column_no_longer_its_written_type_says_how_to_read_it(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"day": pa.array([dt.date(2024, 1, 2)], pa.date32())}),
                   tmp_path / "a.parquet")
    idv.convert(tmp_path / "a.parquet", tmp_path / "a.idv")
    with idv.open(tmp_path / "a.idv") as f:
        annotations = {"idv.SourceType": (idv.Text, f["day"].metadata["idv.SourceType"])}
    noon = np.array(["2024-01-02T12:00"], "datetime64[us]")     # a time of day: no date
    idv.write(tmp_path / "b.idv", {"day": noon}, metadata={"day": annotations})
    with pytest.raises(ValueError, match="'day'.*date32.*datetime='us'"):
        idv.to_arrow(str(tmp_path / "b.idv"))
    assert idv.to_arrow(str(tmp_path / "b.idv"), datetime="us").column("day")[0].as_py() == \
        dt.datetime(2024, 1, 2, 12)



def test_numpy_read_refuses_ticks_microseconds_cannot_hold_naming_its_own_options(tmp_path):
    """numpy's read takes no safe=: its refusal of a DateTime microseconds cannot hold advises
    the modes it takes (the Arrow-typed readers', safe=False), each of which then reads the
    value; an argument it does not take is a TypeError naming the method as called."""
    p = tmp_path / "t.idv"
    net = np.array([0, 3155378975999999999], np.int64)        # 0001-01-01, DateTime.MaxValue
    idv.write(p, {"DT": (net - 621355968000000000).view("datetime64[100ns]")})
    with pytest.raises(ValueError, match="'DT' item 1: .*microseconds cannot hold") as e:
        idv.read(p, datetime="us")
    assert "safe" not in str(e.value)
    assert set(re.findall(r"datetime='(\w+)'", str(e.value))) == {"auto", "100ns", "ns", "ticks"}
    with pytest.warns(idv.IdvWarning, match="floored to microseconds"):
        assert idv.read(p, datetime="auto")["DT"][1] == \
            np.datetime64("9999-12-31T23:59:59.999999")
    assert idv.read(p, datetime="100ns")["DT"].view(np.int64)[1] == net[1] - 621355968000000000
    assert idv.read(p, datetime="ticks")["DT"].tolist() == net.tolist()
    with pytest.raises(ValueError, match="pass safe=False"):
        idv.to_arrow(str(p), datetime="us")
    with idv.open(p) as f, idv.dataset([p]) as ds:
        for src, name in ((f, "IdvFile"), (ds, "Dataset")):
            with pytest.raises(TypeError, match=rf"^{name}\.read\(\) got an unexpected keyword "
                                                r"argument 'safe'$"):
                src.read(datetime="us", safe=False)
            with pytest.raises(TypeError, match=rf"^{name}\.take\(\) missing .*'indices'"):
                src.take()


def test_mlnet_loads_the_annotation_with_the_same_values(tmp_path, oracle):
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(_arrow_source(), tmp_path / "a.parquet")
    idv.convert(tmp_path / "a.parquet", tmp_path / "a.idv")
    plain = tmp_path / "plain.idv"
    with idv.open(tmp_path / "a.idv") as f:
        values = f.read()
        types = {c.name: c.type for c in f.columns}
    idv.write(plain, values, types=types)
    dumps = oracle.dump_many([tmp_path / "a.idv", plain])
    ours, ref = dumps[str(tmp_path / "a.idv")], dumps[str(plain)]
    assert "error" not in ours, ours.get("error")
    assert ours["rows"] == ref["rows"] and ours["row_count"] == 3
    assert [c["name"] for c in ours["columns"]] == [c["name"] for c in ref["columns"]]


def _unit_readers(p):
    """name -> (the package it needs, read(**kw) -> the column's values) of every reader of
    path `p` that takes datetime= and safe=."""
    def polars(**kw):
        from idv.polars import scan_idv
        return scan_idv(p, **kw).collect()["when"].to_list()

    def dask(**kw):
        from idv.dask import read_idv
        return read_idv(p, **kw).compute()["when"].tolist()

    def huggingface(**kw):
        from idv.huggingface import load
        return load(p, **kw)["when"]
    return {
        "to_arrow": ("pyarrow", lambda **kw: idv.to_arrow(p, **kw).column("when").to_pylist()),
        "stream": ("pyarrow", lambda **kw: idv.record_batch_reader(p, **kw).read_all()["when"]
                   .to_pylist()),
        "read_pandas": ("pandas", lambda **kw: idv.read_pandas(p, **kw)["when"].tolist()),
        "arrow_dataset": ("pyarrow", lambda **kw: idv.arrow_dataset(p, **kw).to_table()["when"]
                          .to_pylist()),
        "polars": ("polars", polars), "dask": ("dask", dask), "huggingface": ("datasets",
                                                                           huggingface),
    }


@pytest.mark.parametrize("reader", ["to_arrow", "stream", "read_pandas", "arrow_dataset",
                                    "polars", "dask", "huggingface"])
def test_safe_means_the_same_on_every_reader_that_takes_a_unit(tmp_path, reader):
    """datetime='us' refuses 100-ns ticks microseconds cannot hold, advising safe=False, and
    safe=False floors them, on every reader that takes datetime= (those that took no safe=
    advised an option they refused)."""
    p = str(tmp_path / "t.idv")
    when = np.datetime64("2024-05-01", "ns") + np.arange(4) * np.int64(1_000_000_100)
    idv.write(p, {"when": when})
    floored = when.astype("datetime64[us]").astype("datetime64[ns]").tolist()
    package, read = _unit_readers(p)[reader]
    pytest.importorskip(package, reason=f"the {reader} reader needs {package}")
    with pytest.raises(ValueError, match="safe=False"):
        read(datetime="us")
    got = [np.datetime64(v, "ns").tolist() for v in read(datetime="us", safe=False)]
    assert got == floored


def test_a_value_the_unit_cannot_hold_is_named_with_its_file_on_every_arrow_path(tmp_path):
    """Of a dataset's many files, the one holding it (the Arrow paths said "row 1" alone)."""
    folder = tmp_path / "d"
    folder.mkdir()
    idv.write(folder / "a.idv", {"dt": np.array(["2020-01-01"] * 3, "datetime64[ns]")})
    idv.write(folder / "b.idv", {"dt": np.array(["2020-01-01", "2020-01-01T00:00:00.0000001"],
                                                "datetime64[ns]")})
    b = re.escape(str(folder / "b.idv"))
    paths = {"to_arrow": lambda: idv.dataset(folder).to_arrow(datetime="us"),
             "stream": lambda: idv.dataset(folder).record_batch_reader(datetime="us").read_all(),
             "arrow_dataset": lambda: idv.arrow_dataset(folder, datetime="us").to_table(),
             "file": lambda: idv.to_arrow(folder / "b.idv", datetime="us"),
             "file pandas": lambda: idv.to_pandas(folder / "b.idv", datetime="us")}
    for name, read in paths.items():
        with pytest.raises(ValueError, match=f"^{b}: column 'dt' row 1: DateTime"):
            read()
    with pytest.raises(ValueError, match="^column 'dt' dataset row 4: DateTime"):
        idv.dataset(folder).to_pandas(datetime="us")
