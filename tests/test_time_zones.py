"""The zone of a DateTimeOffset column written from pandas or Arrow, as its ``idv.SourceType``
annotation keeps it and every reader gives it back: the name Arrow gives that zone (a pandas
zone's ``str()`` is often no zone Arrow, pandas or polars can take), no zone where Arrow has
no name for it, and an annotation whose zone Arrow cannot take read as if there were none.
The expected names are Arrow's own (docs/interop.md)."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

import idv

pa = pytest.importorskip("pyarrow", reason="the Arrow names of zones are pyarrow's")
pd = pytest.importorskip("pandas", reason="the zones are written from pandas")
dateutil_tz = pytest.importorskip("dateutil.tz", reason="dateutil zones are pandas' own "
                                                          "dependency's")

INSTANTS = ["2001-01-01T00:00:00", "2001-06-01T12:34:56"]


def _zones():
    """(a pandas zone, the name Arrow gives it)."""
    return [(dt.timezone(dt.timedelta(hours=5, minutes=30)), "+05:30"),
            (dt.timezone(dt.timedelta(hours=-8)), "-08:00"),
            (dt.timezone(dt.timedelta(hours=1), "CET-ish"), "+01:00"),
            (dt.timezone.utc, "UTC"),
            (dateutil_tz.tzutc(), "UTC"),
            (dateutil_tz.gettz("Europe/Paris"), "Europe/Paris"),
            ("Europe/Paris", "Europe/Paris")]


def _series(zone):
    return pd.Series(pd.to_datetime(INSTANTS).tz_localize("UTC").tz_convert(zone))


@pytest.mark.parametrize("zone, name", _zones(), ids=lambda z: repr(z))
def test_a_pandas_zone_is_kept_as_arrow_names_it(tmp_path, zone, name):
    """Every reader gives the column in that zone, and Parquet written from it is read by
    pandas as it was."""
    s = _series(zone)
    p = tmp_path / "a.idv"
    idv.write(p, pd.DataFrame({"c": s}))
    with idv.open(p) as f:
        assert f["c"].metadata["idv.SourceType"] == f"timestamp[us, tz={name}]"
    table = idv.to_arrow(str(p))
    assert table.schema.field("c").type == pa.timestamp("us", tz=name)
    want = s.dt.tz_convert("UTC").tolist()
    assert table.to_pandas()["c"].dt.tz_convert("UTC").tolist() == want
    back = idv.read_pandas(p)["c"]
    assert back.dt.tz_convert("UTC").tolist() == want
    assert back.iloc[1].utcoffset() == s.iloc[1].utcoffset()
    idv.convert(p, tmp_path / "a.parquet")
    assert pd.read_parquet(tmp_path / "a.parquet")["c"].dt.tz_convert("UTC").tolist() == want


@pytest.mark.parametrize("source", ["timestamp[us, tz=Bogus/Zone]",
                                    "timestamp[us, tz=UTC+05:30]",
                                    "timestamp[ms, tz=tzutc()]"])
def test_an_annotation_whose_zone_arrow_cannot_take_is_read_as_none(tmp_path, source):
    """A file written before zones were named so, or by hand: the column is read as one
    written from numpy (a struct in Arrow, its offsets' zone in pandas), never an error."""
    values = np.zeros(2, [("utc", "datetime64[100ns]"), ("offset_minutes", "i2")])
    values["utc"] = np.array(INSTANTS, "datetime64[s]")
    values["offset_minutes"] = 330
    p = tmp_path / "a.idv"
    idv.write(p, {"c": values}, metadata={"c": {"idv.SourceType": (idv.Text, source)}})
    table = idv.to_arrow(str(p))
    assert pa.types.is_struct(table.schema.field("c").type)
    assert table.to_pandas()["c"].tolist()      # pyarrow converts it
    got = idv.read_pandas(p)["c"]
    assert got.dt.tz_convert("UTC").dt.tz_localize(None).tolist() == \
        [pd.Timestamp(v) for v in INSTANTS]
    assert got.iloc[0].utcoffset() == dt.timedelta(minutes=330)


class _Unnamed(dt.tzinfo):
    """A zone of one offset whose only name (tzname) is none Arrow takes."""

    def utcoffset(self, when):
        return dt.timedelta(hours=3)

    def dst(self, when):
        return dt.timedelta(0)

    def tzname(self, when):
        return "Somewhere"


def test_a_zone_arrow_cannot_name_keeps_no_type(tmp_path):
    """The column is written without the type it was written from rather than with one no
    reader can take, and read in the zone of its offsets."""
    s = _series(_Unnamed())
    p = tmp_path / "a.idv"
    idv.write(p, pd.DataFrame({"c": s}))
    with idv.open(p) as f:
        assert "idv.SourceType" not in f["c"].metadata
    got = idv.read_pandas(p)["c"]
    assert got.dt.tz_convert("UTC").tolist() == s.dt.tz_convert("UTC").tolist()
    assert got.iloc[0].utcoffset() == dt.timedelta(hours=3)
    assert pa.types.is_struct(idv.to_arrow(str(p)).schema.field("c").type)


def test_polars_gets_a_zone_of_part_of_an_hour_in_utc(tmp_path):
    """polars cannot name +05:30 (it panics on it): scan_idv gives the same instants in UTC;
    a whole hour polars names itself."""
    pl = pytest.importorskip("polars", reason="scan_idv is polars'")
    import idv.polars as ip
    for zone, polars_zone in (("+05:30", "UTC"), ("-08:00", "Etc/GMT+8")):
        p = tmp_path / f"{zone[1:3]}.idv"
        utc = pa.array([0, 10**6], pa.int64())
        idv.write(p, pa.table({"c": utc.cast(pa.timestamp("us", tz=zone))}))
        got = ip.scan_idv(str(p)).collect()
        assert got.schema["c"] == pl.Datetime("us", polars_zone)
        assert got["c"].dt.epoch("us").to_list() == [0, 10**6]
