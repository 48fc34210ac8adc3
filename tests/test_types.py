"""The item type table (idv.types.ITEM_TYPES): every entry decodes through the codec registry
and round-trips through the writer and the reader, as a scalar column, a fixed-size and a
variable-size vector column, and sparse vectors.

Values are compared with the input as written here (and the defaults of absent sparse slots
with ML.NET's default(T) spelled out below), not with anything the code under test computes.
"""
from __future__ import annotations

import numpy as np
import pytest

import idv
from idv import _codecs
from idv.types import ITEM_TYPES

DT = "datetime64[100ns]"
TS = "timedelta64[100ns]"



def _dates(seconds, ticks):
    return np.array(seconds, "datetime64[s]").astype(DT) + np.array(ticks, TS)


def _dtos(utc, offset_minutes):
    out = np.zeros(len(utc), idv.types.DATETIMEOFFSET_DTYPE)
    out["utc"] = utc
    out["offset_minutes"] = offset_minutes
    return out


# three values of each item type, in the form read() gives them back
VALUES = {
    "SByte": np.array([-128, 0, 127], np.int8),
    "Byte": np.array([0, 1, 255], np.uint8),
    "Int16": np.array([-32768, 7, 32767], np.int16),
    "UInt16": np.array([0, 9, 65535], np.uint16),
    "Int32": np.array([-2**31, -1, 2**31 - 1], np.int32),
    "UInt32": np.array([0, 3, 2**32 - 1], np.uint32),
    "Int64": np.array([-2**63, 5, 2**63 - 1], np.int64),
    "UInt64": np.array([0, 11, 2**64 - 1], np.uint64),
    "Single": np.array([-1.5, np.inf, 3.25], np.float32),
    "Double": np.array([-0.0, 1e300, np.nan], np.float64),
    "Boolean": np.array([True, False, True]),
    "Text": np.array(["", "a", "h\u00e9llo \u2713"], dtype=object),
    # .NET's first and last instants, and one tick after 1970 (numpy parses 100 ns dates
    # outside 1678-2262 wrongly: seconds, then ticks added)
    "DateTime": _dates(["0001-01-01T00:00:00", "1970-01-01T00:00:00", "9999-12-31T23:59:59"],
                       [0, 1, 9999999]),
    "TimeSpan": np.array([-1, 0, 864000000000 * 365], TS),
    "DateTimeOffset": _dtos(_dates(["2020-02-29T12:00:00", "1970-01-01T00:00:00",
                                    "9999-12-31T00:00:00"], [0, 0, 0]), [60, -840, 0]),
    "RowId": np.array([(0, 0), (2**64 - 1, 2**64 - 1), (5, 1)], dtype=idv.types.ROWID_DTYPE),
}

# ML.NET's default(T): what an absent sparse slot reads as
DEFAULTS = {
    "Text": "",
    "DateTime": _dates(["0001-01-01T00:00:00"], [0])[0],
    "DateTimeOffset": (_dates(["0001-01-01T00:00:00"], [0])[0], 0),
}

ENTRIES = {e.type.name: e for e in ITEM_TYPES}


def test_every_item_type_has_test_values():
    assert set(ENTRIES) == set(VALUES) == set(idv.types.PRIMITIVES)


def _same(got, expected, where):
    assert isinstance(got, np.ndarray), where
    assert got.dtype == expected.dtype, (where, got.dtype, expected.dtype)
    assert got.shape == expected.shape, (where, got.shape, expected.shape)
    if expected.dtype.names:
        for f in expected.dtype.names:
            _same(got[f], expected[f], f"{where}.{f}")
    elif expected.dtype.kind == "O":
        assert [type(x) for x in got.reshape(-1)] == [str] * got.size, where
        assert got.tolist() == expected.tolist(), where
    else:       # bit for bit: NaN and -0.0 included
        assert got.tobytes() == expected.tobytes(), where


# ---------------------------------------------------------------- the registry

@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_load_names_resolve_to_codecs_of_the_type(name):
    entry = ENTRIES[name]
    for load_name in (entry.load_name,) + entry.legacy_names:
        assert load_name in _codecs.CODECS
        codec = _codecs.resolve(load_name, b"")
        assert codec.type is entry.type, load_name
        assert codec.dtype == entry.type.dtype, load_name
    assert _codecs.codec_of(entry.type) == (entry.load_name, b"")


@pytest.mark.parametrize("t", [idv.Key(idv.Byte, count=3), idv.Key(idv.UInt64, count=2**40),
                               idv.Vector(idv.Text), idv.Vector(idv.Single, 2, 3),
                               idv.Vector(idv.Key(idv.UInt16, count=7), 4)])
def test_codec_of_is_resolved_back_to_its_type(t):
    assert _codecs.resolve(*_codecs.codec_of(t)).type == t


def test_legacy_load_names_are_not_written():
    legacy = {n for e in ITEM_TYPES for n in e.legacy_names}
    assert legacy == {"DvBool", "DvDateTime", "DvDateTimeZone", "DvTimeSpan"}
    assert not legacy & {e.load_name for e in ITEM_TYPES}


# ---------------------------------------------------------------- write and read back

def _roundtrip(tmp_path, columns, types, backend="zlib"):
    path = tmp_path / "t.idv"
    idv.write(path, columns, types=types, rows_per_block=2, backend=backend)
    with idv.open(path) as f:
        return {c.name: (c.type, c.read()) for c in f.columns}


@pytest.mark.parametrize("name", sorted(VALUES))
def test_item_type_roundtrips_as_scalar_and_vectors(tmp_path, name):
    item = ENTRIES[name].type
    v = VALUES[name]
    fixed = np.stack([v, v[::-1], v])                    # 3 rows of Vector<item, 3>
    columns = {"scalar": v, "fixed": fixed,
               "variable": idv.Ragged(v, [0, 1, 1, 3])}  # rows of 1, 0 and 2 items
    types = {"scalar": item, "fixed": idv.Vector(item, 3), "variable": idv.Vector(item)}
    got = _roundtrip(tmp_path, columns, types)
    assert {k: t for k, (t, _) in got.items()} == types
    _same(got["scalar"][1], v, f"{name} scalar")
    _same(got["fixed"][1], fixed, f"{name} fixed vector")
    ragged = got["variable"][1]
    assert isinstance(ragged, idv.Ragged)
    assert ragged.offsets.tolist() == [0, 1, 1, 3]
    _same(ragged.values, v, f"{name} variable vector")


@pytest.mark.parametrize("name", sorted(VALUES))
def test_item_type_roundtrips_as_sparse_vectors(tmp_path, name):
    item = ENTRIES[name].type
    v = VALUES[name]
    # row 0: slot 1 = v[0]; row 1: slots 0 and 2 = v[1], v[2]; row 2: nothing stored
    sparse = idv.Sparse(v, indices=[1, 0, 2], offsets=[0, 1, 3, 3], length=3)
    got = _roundtrip(tmp_path, {"s": sparse}, {"s": idv.Vector(item, 3)})["s"][1]
    expected = np.empty((3, 3), v.dtype)
    expected[...] = DEFAULTS[name] if name == "Text" else \
        np.array([DEFAULTS.get(name, 0)], dtype=v.dtype)[0]
    expected[0, 1], expected[1, 0], expected[1, 2] = v[0], v[1], v[2]
    _same(got, expected, f"{name} sparse")


@pytest.mark.parametrize("raw", idv.types.KEY_RAW_TYPES)
def test_keys_roundtrip_over_every_raw_type(tmp_path, raw):
    values = np.array([0, 1, 5, 2], raw.dtype)           # 0 is the missing key
    t = idv.Key(raw, count=5)
    rows = np.stack([values, values[::-1], values, values])
    got = _roundtrip(tmp_path, {"k": values, "kv": rows}, {"k": t, "kv": idv.Vector(t, 4)})
    assert got["k"][0] == t
    _same(got["k"][1], values, f"Key<{raw}>")
    _same(got["kv"][1], rows, f"Vector<Key<{raw}>>")


@pytest.mark.parametrize("backend", ["libdeflate", "isal"])
def test_every_item_type_reads_the_same_from_each_backend(tmp_path, backend):
    if backend not in idv.compression.installed():
        pytest.skip(f"{backend} is not installed")
    columns = {name: np.stack([v] * 50) for name, v in VALUES.items()}
    types = {name: idv.Vector(ENTRIES[name].type, 3) for name in VALUES}
    got = _roundtrip(tmp_path, columns, types, backend=backend)
    for name, v in columns.items():
        _same(got[name][1], v, f"{name} ({backend})")


# a DateTimeOffset block's figures (reference section 4.6), spelled out here
EPOCH, MAX_TICKS, PER_MINUTE = 621355968000000000, 3155378975999999999, 600000000


def _dto_block(minutes, local):
    """A DateTimeOffset block: the int16 offset minutes, then the int64 local ticks."""
    return np.frombuffer(np.array(minutes, "<i2").tobytes() + np.array(local, "<i8").tobytes(),
                         np.uint8)


@pytest.mark.parametrize("align", [False, True], ids=["packed", "aligned"])
def test_datetimeoffset_block_reads_legacy_missing_values_as_zero(align):
    """UTC = local - offset, from 1970; the legacy NA patterns (the least int16 offset, the
    least int64 ticks) read as 0; into the packed layout read() uses or any other with the
    two fields."""
    codec = _codecs.resolve("DateTimeOffset", b"")
    minutes = [60, -32768, 0, -840, 840]
    local = [EPOCH + 36000 * 10**7, 5 * 10**14, -2**63, MAX_TICKS - 840 * PER_MINUTE,
             840 * PER_MINUTE]
    out = np.zeros(5, np.dtype([("utc", "datetime64[100ns]"), ("offset_minutes", "<i2")],
                               align=align))
    assert codec.decode_into(_dto_block(minutes, local), 0, 5, out) == 50
    m0 = [0 if m == -32768 else m for m in minutes]
    t0 = [0 if t == -2**63 else t for t in local]
    assert out["offset_minutes"].tolist() == m0
    assert out["utc"].view(np.int64).tolist() == [t - m * PER_MINUTE - EPOCH
                                                  for t, m in zip(t0, m0)]


@pytest.mark.parametrize("minutes, local, message", [
    ([0, 0], [5, -1], "ticks outside .NET's DateTime range"),
    ([0, 0], [5, MAX_TICKS + 1], "ticks outside .NET's DateTime range"),
    ([-1, 0], [MAX_TICKS, 5], "ticks outside .NET's DateTime range"),    # UTC beyond the max
    ([1, 0], [0, 5], "ticks outside .NET's DateTime range"),             # UTC before year 1
    # an offset beyond +-14 hours is named first, wherever the ticks go wrong
    ([0, 841], [-1, 5], "offset beyond \\+-14 hours"),
    ([-841, 0], [5, 5], "offset beyond \\+-14 hours"),
])
def test_datetimeoffset_block_out_of_range_is_refused(minutes, local, message):
    codec = _codecs.resolve("DateTimeOffset", b"")
    out = np.zeros(2, idv.types.DATETIMEOFFSET_DTYPE)
    with pytest.raises(idv.IdvFormatError, match=message):
        codec.decode_into(_dto_block(minutes, local), 0, 2, out)
