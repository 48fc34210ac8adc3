"""Real files from ML.NET's repository against ML.NET's own view of them.

* ``datatypes.idv`` (version 1.1.1.5, legacy codecs DvBool / DvDateTimeZone / DvDateTime and
  text NA bits) against ML.NET's text dump ``Datatypes-datatypes.txt``, parsed here;
* ``schema-codec-test.idv`` (Key2 columns, 0 rows) against ``OldKeyTypeCodecTest.txt``;
* the ``.idv`` entries of ML.NET model zips, read straight from the archive (some carry a
  4-byte length prefix), against the oracle's dump of the same bytes, and
  termlookup_with_key.zip's DefaultMap.idv (legacy ``Key`` codec) against the values the format
  reference (section 10.5) gives.
"""
from __future__ import annotations

import struct
import zipfile

import numpy as np
import pytest

import dumpcheck as dc
import idv
from expected import assert_column_equal, column_expected
from reference import MODEL_ZIPS_DIR as ZIPS_DIR, model_zip_entries, shared_path, skip_param
from textdump import clock_ticks, parse_textloader_dump, text_to_cell, timespan_ticks

SIGNATURE = b"CML\x00DVB\x00"

# format reference section 10.4: the codecs datatypes.idv (version 1.1.1.5) was written with
DATATYPES_CODECS = {"bl": "DvBool", "i1": "SByte", "i2": "Int16", "i4": "Int32", "i8": "Int64",
                    "ts": "TimeSpan", "dto": "DvDateTimeZone", "dt": "DvDateTime", "tx": "TextSpan"}

# the .idv entries of the model zips, named zip:entry (with / for \\)
ZIP_ENTRIES = [pytest.param((z, e), id=f"{z[:-len('.zip')]}:{e.replace(chr(92), '/')}")
               for z, e in model_zip_entries()] \
    or [skip_param(f"model zips missing: {ZIPS_DIR} (set IDV_SHARED)")]


# ---- ML.NET's TextLoader dumps --------------------------------------------------------------

def test_parsers_on_known_strings():
    """The dump parsers, on values whose ticks are known independently."""
    assert timespan_ticks("2.00:00:00") == 2 * 864_000_000_000
    assert timespan_ticks("-00:00:01.5") == -15_000_000
    assert timespan_ticks("00:00:00") == 0
    assert clock_ticks("1970-01-01T00:00:00.0000000") == 621355968000000000
    assert clock_ticks("0001-01-01T00:00:00.0000001") == 1
    assert text_to_cell(idv.DateTimeOffset, "1970-01-01T01:00:00.0000000+01:00") == \
        {"ticks": 621355968000000000 + 36_000_000_000, "offset_minutes": 60}


# ---- datatypes.idv --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def datatypes():
    path = shared_path("mlnet-files", "datatypes.idv")
    columns, rows = parse_textloader_dump(shared_path("mlnet-files", "Datatypes-datatypes.txt"))
    with dc.open_quietly(path) as f:
        yield f, columns, rows


def test_datatypes_header(datatypes):
    f, columns, rows = datatypes
    assert f.version == "1.1.1.5"
    assert f.num_rows == len(rows) == 5
    assert f.column_names == [name for name, _ in columns]


def test_datatypes_types_and_codecs(datatypes):
    f, columns, _ = datatypes
    for (name, t), col in zip(columns, f.columns):
        assert col.type == t, f"{name}: {col.type}, ML.NET's dump declares {t}"
        assert col.codec_name == DATATYPES_CODECS[name]
        assert col.compression == "Deflate"
        assert col.rows_per_block == 5 and col.num_blocks == 1
        assert col.metadata == {}


@pytest.mark.parametrize("name", list(DATATYPES_CODECS))
def test_datatypes_values(datatypes, name):
    """Legacy NA values come out as ML.NET 1.x maps them: NA bool -> false, NA text -> "",
    TimeSpan/DateTime/DateTimeOffset long.MinValue ticks -> 0, integer NA -> MinValue."""
    f, columns, rows = datatypes
    index = [c[0] for c in columns].index(name)
    t = columns[index][1]
    cells = [text_to_cell(t, row[index]) for row in rows]
    assert_column_equal(f[name].read(), column_expected(t, cells), f"datatypes.idv {name}")


def test_datatypes_against_oracle(oracle):
    """ML.NET 1.5 itself reads this 1.1.1.5 file the same way (schema, TOC, every value)."""
    path = shared_path("mlnet-files", "datatypes.idv")
    dump = oracle.dump(path)
    with dc.open_quietly(path) as f:
        dc.check_file(f, dump)


# ---- schema-codec-test.idv ------------------------------------------------------------------

def test_schema_codec_test_key_counts():
    path = shared_path("mlnet-files", "schema-codec-test.idv")
    columns, rows = parse_textloader_dump(shared_path("mlnet-files", "OldKeyTypeCodecTest.txt"))
    assert rows == []
    assert [str(t) for _, t in columns][-1] == "Key<UInt64, 18446744073709551615>"
    with dc.open_quietly(path) as f:
        assert f.version == "1.1.1.6"
        assert f.num_rows == 0
        assert f.column_names == [name for name, _ in columns]
        for (name, t), col in zip(columns, f.columns):
            assert col.type == t, f"{name}: {col.type}, ML.NET's dump declares {t}"
            assert col.codec_name == "Key2"
            values = col.read()
            assert values.shape == (0,) and values.dtype == t.raw.dtype


def test_schema_codec_test_against_oracle(oracle):
    path = shared_path("mlnet-files", "schema-codec-test.idv")
    dump = oracle.dump(path)
    with dc.open_quietly(path) as f:
        dc.check_header(f, dump)
        dc.check_schema(f, dump)
        dc.check_toc(f, dump)
        dc.check_read_dict(f, dump)


# ---- model zips -----------------------------------------------------------------------------

def _plain_idv(data):
    """(the IDV bytes, whether a 4-byte length prefix was removed)."""
    if data[:8] == SIGNATURE:
        return data, False
    (n,) = struct.unpack_from("<i", data, 0)
    assert data[4:12] == SIGNATURE and n == len(data) - 4, \
        f"neither an IDV nor a length-prefixed IDV: {data[:12].hex()}"
    return data[4:], True


@pytest.fixture(scope="module")
def zip_dumps(oracle, tmp_path_factory):
    """ML.NET's dump of every .idv entry (length prefix removed), in one oracle run."""
    folder = tmp_path_factory.mktemp("zip-entries")
    paths = {}
    for p in ZIP_ENTRIES:
        zname, entry = p.values[0]
        with zipfile.ZipFile(ZIPS_DIR / zname) as zf:
            data, _ = _plain_idv(zf.read(entry))
        out = folder / f"{len(paths):02d}.idv"
        out.write_bytes(data)
        paths[(zname, entry)] = out
    dumps = oracle.dump_many(list(paths.values()))
    return {key: dumps[str(path)] for key, path in paths.items()}


def test_length_prefixed_entries():
    """The format reference (10.4): the Transform_00x Schema.idv entries of ep_model1 and
    modelwithoptionalcolumntransform carry a 4-byte length prefix, the other entries do not."""
    if not ZIPS_DIR.is_dir():
        pytest.skip(f"model zips missing: {ZIPS_DIR} (set IDV_SHARED)")
    prefixed = set()
    for p in ZIP_ENTRIES:
        zname, entry = p.values[0]
        with zipfile.ZipFile(ZIPS_DIR / zname) as zf:
            if _plain_idv(zf.read(entry))[1]:
                prefixed.add((zname, entry))
    assert prefixed == {("ep_model1.zip", "DataLoaderModel\\Transform_002\\Schema.idv"),
                        ("modelwithoptionalcolumntransform.zip",
                         "DataLoaderModel\\Transform_003\\Schema.idv")}


@pytest.mark.parametrize("key", ZIP_ENTRIES)
@pytest.mark.parametrize("how", ["zip member", "bytes"])
def test_zip_entry_against_oracle(zip_dumps, key, how):
    """Opened straight from the archive (prefix auto-detected), the entry reads as ML.NET
    reads it: header, schema, codecs, annotations, every value."""
    zname, entry = key
    dump = zip_dumps[key]
    assert "error" not in dump, f"ML.NET could not read {zname}:{entry}: {dump.get('error')}"
    with zipfile.ZipFile(ZIPS_DIR / zname) as zf:
        source = zf.open(entry) if how == "zip member" else zf.read(entry)
        with dc.open_quietly(source) as f:
            dc.check_file(f, dump)
            dc.check_read_dict(f, dump)


def test_termlookup_with_key_default_map():
    """The legacy ``Key`` codec (format reference 4.8 and 10.5): Term = Bad .. Perfect,
    Value = keys 1..5 over UInt32 with count 5."""
    z = shared_path("mlnet-files", "model-zips", "termlookup_with_key.zip")
    with zipfile.ZipFile(z) as zf, \
            dc.open_quietly(zf.open("DataLoaderModel\\Transform_000\\DefaultMap.idv")) as f:
        assert f.num_rows == 5
        assert f.column_names == ["Term", "Value"]
        assert f["Term"].type == idv.Text and f["Term"].codec_name == "TextSpan"
        assert f["Value"].type == idv.Key(idv.UInt32, count=5)
        assert f["Value"].codec_name == "Key"
        terms = f["Term"].read()
        assert terms.dtype == object
        assert terms.tolist() == ["Bad", "Fair", "Good", "Excellent", "Perfect"]
        values = f["Value"].read()
        assert values.dtype == np.uint32
        assert values.tolist() == [1, 2, 3, 4, 5]


def _legacy_key_file(kmin: int) -> bytes:
    """termlookup_with_key.zip's DefaultMap.idv with the legacy Key codec's min (always 0 in
    ML.NET 1.x's files) set to `kmin`, as ML.NET 0.x wrote it for keys starting above 0."""
    z = shared_path("mlnet-files", "model-zips", "termlookup_with_key.zip")
    with zipfile.ZipFile(z) as zf:
        data = zf.read("DataLoaderModel\\Transform_000\\DefaultMap.idv")
    params = b"\x06UInt32\x00\x01" + bytes(8) + (5).to_bytes(4, "little")
    assert data.count(params) == 1
    at = data.index(params) + len(b"\x06UInt32\x00\x01")
    return data[:at] + kmin.to_bytes(8, "little") + data[at + 8:]


def test_legacy_key_with_nonzero_min_is_read_as_stored():
    """Files of ML.NET 0.x may carry keys with a min (ML.NET 1.5 refuses them): the min is kept
    on the type and the values are the raw ones, as stored."""
    with dc.open_quietly(_legacy_key_file(3)) as f:
        t = f["Value"].type
        assert t == idv.Key(idv.UInt32, count=5, min=3) and t != idv.Key(idv.UInt32, count=5)
        assert (t.min, t.count, str(t)) == (3, 5, "Key<UInt32, 5, min=3>")
        assert f["Value"].read().tolist() == [1, 2, 3, 4, 5]
        assert f["Term"].read().tolist() == ["Bad", "Fair", "Good", "Excellent", "Perfect"]
        assert idv.verify(f).ok


def test_legacy_key_with_min_is_not_written(tmp_path):
    """ML.NET 1.x keys have no min: writing one would change what the values mean."""
    with dc.open_quietly(_legacy_key_file(3)) as f:
        values = f["Value"].read()
        key = f["Value"].type
    with pytest.raises(ValueError, match="legacy ML.NET 0.x key"):
        idv.write(tmp_path / "out.idv", {"Value": values}, types={"Value": key})
    assert not (tmp_path / "out.idv").exists()
    idv.write(tmp_path / "out.idv", {"Value": values},
              types={"Value": idv.Key(idv.UInt32, count=key.count)})
    with idv.open(tmp_path / "out.idv") as f:
        assert f["Value"].read().tolist() == [1, 2, 3, 4, 5]


def test_legacy_key_type_string_round_trips():
    from idv.types import parse_type   # the form Arrow and JSON metadata carry types in
    for t in (idv.Key(idv.UInt32, count=5, min=3), idv.Key(idv.Byte, count=9),
              idv.Vector(idv.Key(idv.UInt64, count=7, min=2**40), 3)):
        assert parse_type(str(t)) == t


def test_a_legacy_key_frame_names_its_column_and_the_shift(tmp_path):
    """A frame read from a legacy key file carries a key type ML.NET 1.x cannot load: writing
    it back names the column and the conversion that makes the file loadable."""
    src = tmp_path / "legacy.idv"
    src.write_bytes(_legacy_key_file(1))
    df = idv.read_pandas(src)
    with pytest.raises(ValueError, match=r"column 'Value'.*legacy_keys='shift'"):
        idv.write(tmp_path / "back.idv", df)
    assert not (tmp_path / "back.idv").exists()


def test_legacy_keys_convert_from_min_zero_when_asked(tmp_path, oracle):
    """A legacy key with min m: raw v > 0 is the key m + v - 1 (format reference 10.5), which
    ML.NET 1.x holds as raw m + v under a count of m + count. Without the option the error
    names the column and the option; with it ML.NET loads the file."""
    from cli_run import run
    src = tmp_path / "legacy.idv"
    src.write_bytes(_legacy_key_file(1))
    out = tmp_path / "shifted.idv"
    with pytest.raises(ValueError, match=r"column 'Value'.*legacy_keys='shift'"):
        idv.convert(src, out)
    rc, _, err = run("convert", src, out)
    assert rc == 1 and "column 'Value'" in err and "--legacy-keys shift" in err, err
    assert not out.exists()
    run("convert", src, out, "--legacy-keys", "shift", check_rc=0)
    idv.convert(src, tmp_path / "py.idv", legacy_keys="shift")
    dumps = oracle.dump_many([out, tmp_path / "py.idv"])
    for doc in dumps.values():
        col = doc["columns"][1]
        assert (col["name"], col["type_string"]) == ("Value", "Key<UInt32, 0-5>")
        # keys 1..5 (min 1 + raw 1..5 - 1) are raw 2..6 from min 0
        assert [int(r[1]) for r in doc["rows"]] == [2, 3, 4, 5, 6]
        assert [r[0] for r in doc["rows"]] == ["Bad", "Fair", "Good", "Excellent", "Perfect"]
