"""One unit for a time column whatever the entry point (idv.time_units): numpy with
datetime="auto", Arrow, a stream, pandas, a dataset, polars, the Arrow dataset (DuckDB's way
in, asked: DuckDB's default is its own microseconds) give DateTime, TimeSpan and
DateTimeOffset the same unit by default, with and
without statistics, for a whole read and for a few rows; keys and vectors keep their types.
The expected unit is written out here from the rule (ns when every value fits, else us)."""
from __future__ import annotations

import numpy as np
import pytest

import idv

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")

ROWS = 3000


def _columns(old):
    """A source of every time type, a key and a number; `old`: one DateTime of year 1
    (ML.NET's default(DateTime)), which nanoseconds cannot hold."""
    when = np.datetime64("2024-05-01T00:00:00", "ns") + np.arange(ROWS) * np.int64(10**9 + 100)
    when = when.astype("datetime64[us]") if old else when
    if old:
        when[-1] = np.datetime64("0001-01-01", "us")
    span = (np.arange(ROWS) * np.int64(1000)).astype("timedelta64[us]")
    return {"when": when, "span": span,
            "dto": pd.Series(pd.date_range("2024-01-01", periods=ROWS, freq="s", tz="UTC")),
            "key": pd.Categorical(np.array(["x", "y", "z"], object)[np.arange(ROWS) % 3]),
            "vec": np.arange(ROWS, dtype=np.float32)}


@pytest.fixture(params=[(False, True), (False, False), (True, True), (True, False)],
                ids=["ns-statistics", "ns-none", "year1-statistics", "year1-none"])
def source(request, tmp_path):
    old, stats = request.param
    p = tmp_path / "t.idv"
    cols = _columns(old)
    idv.write(p, pd.DataFrame(cols), rows_per_block=500, statistics=stats)
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
    assert whole.schema.field("key").type == pa.dictionary(pa.uint32(), pa.string()) or \
        pa.types.is_dictionary(whole.schema.field("key").type)
    with idv.open(p) as f:
        assert _arrow_units(idv.arrow.record_batch_reader(f, rows=slice(0, 2)).schema) == want
        assert _arrow_units(idv.arrow.record_batch_reader(f, batch_size=7).schema) == want
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
    # DuckDB's unit, in which it pushes filters into the scan
    assert set(_arrow_units(idv.arrow_dataset(str(p)).schema).values()) == {"us"}
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


def test_statistics_choose_without_decoding_a_block(tmp_path, monkeypatch):
    from idv import column
    p = tmp_path / "s.idv"
    idv.write(p, {"when": np.datetime64("2024-01-01", "ns") + np.arange(10)}, statistics=True)

    def refuse(self, *a, **k):
        raise AssertionError("a block was decoded to choose the unit")
    monkeypatch.setattr(column.Column, "iter_blocks", refuse)
    with idv.open(p) as f:
        assert idv.arrow.arrow_schema(f).field("when").type == pa.timestamp("ns")
    idv.write(p, {"when": np.datetime64("2024-01-01", "ns") + np.arange(10)}, statistics=False)
    with idv.open(p) as f, pytest.raises(AssertionError, match="decoded to choose"):
        idv.arrow.arrow_schema(f)
