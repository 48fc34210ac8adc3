"""idv.convert (idv.formats): .idv <-> Parquet, Feather / Arrow IPC, CSV / TSV, streaming.

Ground truth: the ML.NET sidecars of the sample fixtures (what ML.NET reads from each file),
and ML.NET's own reading (oracle dump) of an .idv made from a Parquet file built here.
"""
from __future__ import annotations

import csv
import json
import datetime as dt
import importlib
import os
import re
import subprocess
import sys
import threading
import tracemalloc

import numpy as np
import pytest

import cli_run
import idv
from arrow_check import check_arrow_table
from dumpcheck import check_idv_against_dump
from expected import (EPOCH_TICKS, annotation_expected, annotations_by_kind, assert_arrays_equal,
                      expected_column, has_sub_microsecond, item_values)
from reference import REPO_DIR, fixture, sample_params, sidecar
from textdump import ticks_iso

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pcsv = pytest.importorskip("pyarrow.csv")

# the module of idv.convert
convert_module = importlib.import_module("idv.formats")
parquet_module = importlib.import_module("idv.formats.parquet")

# every fixture with at least one column (no_columns: 0 columns, 5 rows, is tested apart)
WITH_COLUMNS = sample_params(lambda n: n != "no_columns")


# ---------------------------------------------------------------------------------------------
# Parquet / Feather / Arrow round trips
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["parquet", "feather", "arrow"])
@pytest.mark.parametrize("name", WITH_COLUMNS)
def test_round_trip_exact(name, fmt, tmp_path):
    """.idv -> fmt -> .idv: ML.NET's visible columns come back with their exact types,
    annotations and values."""
    mid = tmp_path / f"mid.{fmt}"
    back = tmp_path / "back.idv"
    rows = convert_module.convert(fixture(name), mid, datetime=_mode(name))
    assert rows == sidecar(name)["row_count"]
    assert idv.convert(mid, back) == rows
    check_idv_against_dump(back, sidecar(name))


@pytest.mark.parametrize("name", WITH_COLUMNS)
def test_parquet_holds_mlnet_values(name, tmp_path):
    """The Parquet file itself, read by pyarrow, holds ML.NET's values (timestamps in
    microseconds where ML.NET's ticks allow)."""
    out = tmp_path / "x.parquet"
    idv.convert(fixture(name), out, datetime=_mode(name))
    check_arrow_table(pq.read_table(out), sidecar(name), exact_dictionary=False)


def test_no_columns(tmp_path):
    """ML.NET reads the file as 5 rows of no column: .idv, Feather and JSON Lines keep them;
    Parquet, CSV and TSV, which hold no row without a column, refuse them (rather than write
    none while reporting 5 converted), from the .idv and from the Feather file alike, and
    leave no file."""
    rows = sidecar("no_columns")["row_count"]
    assert rows == 5
    for name in ("x.idv", "x.feather", "x.jsonl"):
        assert idv.convert(fixture("no_columns"), tmp_path / name) == rows
    assert idv.open(tmp_path / "x.idv").num_rows == rows
    assert pa.ipc.open_file(tmp_path / "x.feather").read_all().num_rows == rows
    assert (tmp_path / "x.jsonl").read_text() == "{}\n" * rows
    for src in (fixture("no_columns"), tmp_path / "x.feather"):
        for name, fmt in (("y.parquet", "Parquet"), ("y.csv", "CSV"), ("y.tsv", "TSV")):
            with pytest.raises(ValueError, match=f"^{fmt} holds no row without a column: 5 "):
                idv.convert(src, tmp_path / name)
            assert not (tmp_path / name).exists()


def test_parquet_dictionary_encodes_only_values_that_repeat(tmp_path):
    """Parquet output writes nearly unique columns plain (no dictionary); columns whose values
    repeat, even half distinct, the leaves of nested columns and key columns with KeyValues
    get a dictionary; the values read back the same."""
    n = 50_000
    rng = np.random.default_rng(3)
    src = tmp_path / "enc.idv"
    colours = pa.DictionaryArray.from_arrays(pa.array(np.arange(n) % 3, pa.int32()),
                                             pa.array(["red", "green", "blue"]))
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(3 * n).astype(np.float32)), 3)
    idv.write(src, pa.table({"unique": rng.random(n),
                             "few": rng.integers(0, 20, n).astype(np.int32),
                             "some": rng.integers(0, 10_000, n).astype(np.int32),
                             "names": [f"id-{i}" for i in range(n)],
                             "colour": colours, "vec": vec}))
    out = tmp_path / "enc.parquet"
    assert idv.convert(src, out) == n
    meta = pq.ParquetFile(out).metadata
    encodings = {}
    for rg in range(meta.num_row_groups):
        for i in range(meta.num_columns):
            c = meta.row_group(rg).column(i)
            encodings.setdefault(c.path_in_schema, set()).update(c.encodings)
    dictionary = {p for p, e in encodings.items() if "RLE_DICTIONARY" in e}
    assert dictionary == {"few", "some", "colour", "vec.list.element"}, encodings
    back = pq.read_table(out)
    with idv.open(src) as f:
        for name in ("unique", "few", "some", "names"):
            assert back.column(name).to_pylist() == f[name].read().tolist(), name
        assert back.column("colour").type.value_type == pa.string()
        assert back.column("colour").to_pylist()[:4] == ["red", "green", "blue", "red"]


@pytest.mark.parametrize("fmt, bad, good", [("parquet", "bogus", "zstd"),
                                             ("feather", "snappy", "zstd"),
                                             ("csv", "zstd", "none")])
def test_compression_is_checked_before_any_file_is_made(fmt, bad, good, tmp_path):
    src = idv.sample_path()
    out = tmp_path / f"x.{fmt}"
    with pytest.raises(ValueError, match=f"{bad!r}"):
        idv.convert(src, out, compression=bad)
    assert os.listdir(tmp_path) == []
    assert idv.convert(src, out, compression=good) == 240
    assert os.listdir(tmp_path) == [out.name]
    rc, _, err = cli_run.run("convert", src, tmp_path / f"y.{fmt}", "--compression", bad)
    assert rc == 2 and err.startswith("idv: error: --compression: ") and "internal" not in err
    assert os.listdir(tmp_path) == [out.name]


def test_sub_microsecond_in_microseconds_refuses_and_writes_nothing(tmp_path):
    out = tmp_path / "dt.parquet"
    with pytest.raises(ValueError, match="sub-microsecond"):
        idv.convert(fixture("scalars_datetime"), out, datetime="us")
    assert os.listdir(tmp_path) == []
    # safe=False floors to microseconds
    idv.convert(fixture("scalars_datetime"), out, datetime="us", safe=False, columns=["DT"])
    dump = sidecar("scalars_datetime")
    got = pq.read_table(out).column("DT").cast(pa.int64()).to_pylist()
    assert got == [(int(r[0]) - EPOCH_TICKS) // 10 for r in dump["rows"]]


def test_idv_to_idv(tmp_path):
    """Columns, compression and block size change; types, annotations and values stay."""
    name = "pipeline_multiclass_scored"
    out = tmp_path / "sel.idv"
    cols = ["ClassKey", "Features", "PredictedLabel", "Score"]
    calls = []
    n = idv.convert(fixture(name), out, columns=cols, compression="none", rows_per_block=7,
                    progress=lambda done, total: calls.append((done, total)))
    assert n == 60
    check_idv_against_dump(out, sidecar(name), columns=cols)
    with idv.open(out) as f:
        assert all(c.compression == "None" and c.rows_per_block == 7 for c in f.columns)
    assert calls == [(0, 60), (60, 60)]      # the source is one block of 60 rows


def test_parquet_row_group_dictionaries(tmp_path):
    """A Parquet dictionary column whose row groups hold different dictionaries becomes one key
    whose KeyValues are all values in order of first appearance."""
    values = ["b", "a", None, "c", "a", "d"]
    table = pa.table({"k": pa.array(values).dictionary_encode(), "x": np.arange(6.0)})
    src = tmp_path / "d.parquet"
    pq.write_table(table, src, row_group_size=2)
    assert pq.ParquetFile(src).num_row_groups == 3
    out = tmp_path / "d.idv"
    idv.convert(src, out, rows_per_block=4)
    with idv.open(out) as f:
        assert f["k"].type == idv.Key(idv.UInt32, 4)
        kv = f["k"].metadata["KeyValues"].tolist()
        assert kv == ["b", "a", "c", "d"]
        raw = f["k"].read().tolist()
    assert [kv[r - 1] if r else None for r in raw] == values


def test_parquet_batches_grow_to_row_groups_of_narrow_columns(tmp_path, monkeypatch):
    """A Parquet source's batches hold a whole multiple of the batch size: as many as its
    largest row group, a _BATCHES-th of its rows and the file's bytes a row within
    _BATCH_BYTES allow, never fewer than one; the rows come through whole and in order
    whatever the cut."""
    n = 100_000
    src = tmp_path / "n.parquet"
    pq.write_table(pa.table({"x": np.arange(n, dtype=np.int32), "y": np.arange(n) / 7}), src,
                   row_group_size=70_000)
    meta = pq.ParquetFile(src).metadata
    assert parquet_module._batch_rows(meta, 8192) == 3 * 8192      # a 4th of the 100,000 rows
    assert parquet_module._batch_rows(meta, 1 << 20) == 1 << 20    # never fewer than asked
    monkeypatch.setattr(parquet_module, "_BATCHES", 1)
    assert parquet_module._batch_rows(meta, 8192) == 8 * 8192      # within the 70,000 rows
    per_row = meta.row_group(0).total_byte_size / meta.row_group(0).num_rows
    monkeypatch.setattr(parquet_module, "_BATCH_BYTES", int(5.5 * 8192 * per_row))
    assert parquet_module._batch_rows(meta, 8192) == 5 * 8192      # within the bytes
    wide = tmp_path / "w.parquet"
    pq.write_table(pa.table({f"c{i}": np.arange(50.0) for i in range(300)}), wide)
    monkeypatch.setattr(parquet_module, "_BATCH_BYTES", 1000)
    assert parquet_module._batch_rows(pq.ParquetFile(wide).metadata, 16) == 16
    monkeypatch.setattr(parquet_module, "_BATCH_BYTES", 16 << 20)
    n = 300_000                         # batches of 3 x 65,536 rows across 200,000-row groups
    pq.write_table(pa.table({"x": np.arange(n, dtype=np.int32), "y": np.arange(n) / 7}), src,
                   row_group_size=200_000)
    out, calls = tmp_path / "n.idv", []
    idv.convert(src, out, progress=lambda done, total: calls.append(done))
    steps = np.diff(calls)
    assert steps.max() > 65536 and steps.max() <= 3 * 65536, calls
    with idv.open(out) as f:
        assert np.array_equal(f["x"].read(), np.arange(n, dtype=np.int32))
        assert np.array_equal(f["y"].read(), np.arange(n) / 7)


# ---------------------------------------------------------------------------------------------
# CSV / TSV
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt,delimiter", [("csv", ","), ("tsv", "\t")])
def test_csv_text_holds_mlnet_values(fmt, delimiter, tmp_path):
    """mixed_default without its variable vector: one CSV column per vector slot, named from
    SlotNames; numbers, text, keys (their values), dates as ML.NET reads them."""
    name = "mixed_default"
    dump = sidecar(name)
    cols = {c["name"]: c for c in dump["columns"]}
    out = tmp_path / f"m.{fmt}"
    keep = ["Id", "F32", "F64", "B", "Txt", "Key", "Vec", "DT"]
    idv.convert(fixture(name), out, columns=keep)
    rows = _csv_rows(out, delimiter)
    slots = annotation_expected(annotations_by_kind(cols["Vec"])["SlotNames"])
    header = ["Id", "F32", "F64", "B", "Txt", "Key", *[f"Vec.{s}" for s in slots], "DT"]
    assert rows[0] == header
    body = rows[1:]
    assert len(body) == 100
    ids = expected_column(dump, cols["Id"]["index"])
    assert [int(r[0]) for r in body] == ids.tolist()
    f32 = expected_column(dump, cols["F32"]["index"])
    got = np.array([float(r[1]) if r[1] not in ("nan", "") else np.nan for r in body])
    assert_arrays_equal(got.astype(np.float32), f32, "F32")
    assert [r[3] for r in body] == ["true" if b else "false"
                                    for b in expected_column(dump, cols["B"]["index"])]
    assert [r[4] for r in body] == expected_column(dump, cols["Txt"]["index"]).tolist()
    kv = annotation_expected(annotations_by_kind(cols["Key"])["KeyValues"])
    raw = expected_column(dump, cols["Key"]["index"])
    assert [r[5] for r in body] == [kv[k - 1] if k else "" for k in raw]
    vec = expected_column(dump, cols["Vec"]["index"])
    got = np.array([[float(x) for x in r[6:10]] for r in body], np.float32)
    assert_arrays_equal(got, vec, "Vec")
    # .NET's ISO form, exact to the tick (trailing zeros of the fraction dropped)
    assert [r[10] for r in body] == [ticks_iso(int(r[cols["DT"]["index"]]))
                                     for r in dump["rows"]]


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_csv_round_trip_values(fmt, tmp_path):
    """.idv -> CSV -> .idv: values equal (types as pyarrow's CSV reader infers them)."""
    name = "mixed_smallblocks_deflate"
    dump = sidecar(name)
    cols = {c["name"]: c for c in dump["columns"]}
    mid = tmp_path / f"m.{fmt}"
    back = tmp_path / "m.idv"
    keep = ["Id", "F64", "B", "Key", "Vec", "DT"]
    idv.convert(fixture(name), mid, columns=keep)
    calls = []
    idv.convert(mid, back, progress=lambda d, t: calls.append((d, t)))
    assert calls[0] == (0, None) and calls[-1] == (100, None)
    slots = annotation_expected(annotations_by_kind(cols["Vec"])["SlotNames"])
    with idv.open(back) as f:
        r = f.read()
        assert f["Id"].type == idv.Int64 and f["DT"].type == idv.DateTime
        assert f["Key"].type == idv.Text                 # the key's values, as text
    assert r["Id"].tolist() == expected_column(dump, cols["Id"]["index"]).tolist()
    assert_arrays_equal(r["F64"], expected_column(dump, cols["F64"]["index"]), "F64")
    assert r["B"].tolist() == expected_column(dump, cols["B"]["index"]).tolist()
    kv = annotation_expected(annotations_by_kind(cols["Key"])["KeyValues"])
    assert r["Key"].tolist() == [kv[k - 1] if k else ""
                                 for k in expected_column(dump, cols["Key"]["index"])]
    vec = expected_column(dump, cols["Vec"]["index"])
    for j, s in enumerate(slots):
        assert_arrays_equal(r[f"Vec.{s}"].astype(np.float32), vec[:, j], f"Vec.{s}")
    assert_arrays_equal(r["DT"], expected_column(dump, cols["DT"]["index"]), "DT")


def test_csv_types_option(tmp_path):
    """types= tells the CSV reader how to parse (dates before 1677 included) and sets the
    ML.NET types."""
    src = tmp_path / "t.csv"
    src.write_text("when,n,k,d\n0001-01-01 00:00:00,1,2,5\n9999-12-31 23:59:59.999999,2,0,"
                   "00:00:07\n")
    out = tmp_path / "t.idv"
    idv.convert(src, out, types={"when": idv.DateTime, "n": idv.Int16,
                                 "k": idv.Key(idv.UInt32, 3), "d": idv.TimeSpan})
    with idv.open(out) as f:
        assert [str(t) for t in f.schema.types] == ["DateTime", "Int16", "Key<UInt32, 3>",
                                                    "TimeSpan"]
        r = f.read()
    assert r["when"].view(np.int64).tolist() == [-EPOCH_TICKS, 3155378975999999990 - EPOCH_TICKS]
    assert r["k"].tolist() == [2, 0]
    # .NET's TimeSpan text, as TimeSpan.Parse reads it (ML.NET's text loader): a number alone
    # is days
    assert r["d"].view(np.int64).tolist() == [5 * 864_000_000_000, 70_000_000]


def _ticks(*args, extra=0):
    """.NET ticks of a date and time by Python's datetime arithmetic, plus `extra` ticks."""
    return (dt.datetime(*args) - dt.datetime(1, 1, 1)) // dt.timedelta(microseconds=1) * 10 \
        + extra


def test_csv_datetime_text_is_read_to_the_tick(tmp_path):
    """ML.NET's own text of a DateTime (7 fractional digits), years 1 and 9999, an offset (its
    UTC instant), through types=DateTime to .idv: every tick kept; a value that is no date is
    an error naming its row, and nothing is written."""
    src = tmp_path / "t.csv"
    src.write_text("when\n2024-01-01T10:00:00.1234567\n0001-01-01T00:00:00.0000001\n"
                   "9999-12-31T23:59:59.9999999\n2024-01-01 10:00:00+02:00\n2024-01-02\n")
    out = tmp_path / "t.idv"
    idv.convert(src, out, types={"when": idv.DateTime})
    got = idv.read(out)["when"].view(np.int64) + EPOCH_TICKS
    assert got.tolist() == [_ticks(2024, 1, 1, 10, extra=1234567), 1,
                            _ticks(9999, 12, 31, 23, 59, 59, extra=9999999),
                            _ticks(2024, 1, 1, 8), _ticks(2024, 1, 2)]
    src.write_text("when\n2024-01-01T10:00:00\nsoon\n")
    with pytest.raises(ValueError, match=r"'when' row 1: 'soon' is not an ISO 8601 date"):
        idv.convert(src, tmp_path / "bad.idv", types={"when": idv.DateTime})
    assert not (tmp_path / "bad.idv").exists()


def test_csv_time_text_idv_writes_reads_back_with_types(tmp_path):
    """The CSV idv writes of TimeSpan and DateTimeOffset (.NET's TimeSpan text, ISO 8601 with
    the offset) read back with types= to the same ticks and offsets; text that is no such
    value is an error naming its row."""
    src = tmp_path / "t.idv"
    spans = np.array([0, 1, -1, 3 * 864_000_000_000 + 1, 2**63 - 1, -(2**63 - 1)])
    dto = np.zeros(3, [("utc", "<M8[100ns]"), ("offset_minutes", "<i2")])
    dto["utc"] = np.array([0, 1234567, -10**12]).view("<M8[100ns]")
    dto["offset_minutes"] = [330, -480, 0]
    idv.write(src, {"t": spans[:3].view("<m8[100ns]"), "d": dto})
    idv.write(tmp_path / "s.idv", {"t": spans.view("<m8[100ns]")})
    for path, types in ((src, {"t": idv.TimeSpan, "d": idv.DateTimeOffset}),
                        (tmp_path / "s.idv", {"t": idv.TimeSpan})):
        idv.convert(path, tmp_path / "t.csv")
        idv.convert(tmp_path / "t.csv", tmp_path / "back.idv", types=types)
        want, got = idv.read(path), idv.read(tmp_path / "back.idv")
        for name in want:
            assert want[name].tobytes() == got[name].tobytes(), name
    (tmp_path / "bad.csv").write_text("t\n00:00:01\n25:00:00\n")
    with pytest.raises(ValueError, match=r"'t' row 1: '25:00:00' is not a TimeSpan's text"):
        idv.convert(tmp_path / "bad.csv", tmp_path / "bad.idv", types={"t": idv.TimeSpan})


def test_csv_variable_vectors_are_json_arrays(tmp_path):
    out = tmp_path / "v.csv"
    idv.convert(fixture("mixed_default"), out)
    rows = _csv_rows(out, ",")
    dump = sidecar("mixed_default")
    i = rows[0].index("Var")
    var = next(c for c in dump["columns"] if c["name"] == "Var")
    assert [json.loads(r[i]) for r in rows[1:]] == \
        [[int(x) for x in r[var["index"]]] for r in dump["rows"]]


def test_csv_rowid_is_one_integer(tmp_path):
    out = tmp_path / "r.csv"
    idv.convert(fixture("scalars_rowid"), out)
    rows = _csv_rows(out, ",")
    dump = sidecar("scalars_rowid")
    assert rows[0] == ["RID"]
    assert [int(r[0]) for r in rows[1:]] == [int(r[0]) for r in dump["rows"]]


# ---------------------------------------------------------------------------------------------
# JSON Lines
# ---------------------------------------------------------------------------------------------

# keys, times, RowIds, text with unicode, NaN and infinities, fixed / variable / sparse /
# multi-dimensional vectors, hidden columns, no rows, no columns
JSONL = ["keys", "mixed_default", "scalars_datetime", "scalars_numeric", "scalars_rowid",
         "scalars_text", "vectors_fixed", "vectors_variable", "vectors_misc", "vectors_sparse",
         "vector_multidim", "pipeline_hidden", "empty_rows", "no_columns"]


@pytest.mark.parametrize("name", JSONL)
def test_jsonl_is_what_cat_writes(name, tmp_path):
    """.idv -> .jsonl: byte for byte what ``idv cat --format jsonl`` prints, one object per
    row."""
    out = tmp_path / "x.jsonl"
    n = sidecar(name)["row_count"]
    assert idv.convert(fixture(name), out) == n
    _, cat, _ = cli_run.run("cat", fixture(name), "--format", "jsonl", check_rc=0)
    assert out.read_bytes() == cat.encode("utf-8")
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == n and all(isinstance(json.loads(line), dict) for line in lines)


def test_jsonl_values(tmp_path):
    """Unicode text as is, NaN and infinities as strings, keys their raw numbers, times in
    .NET's ISO forms, vectors as arrays."""
    rows = {}
    for name in ("scalars_numeric", "scalars_text", "keys", "scalars_datetime", "vectors_fixed"):
        out = tmp_path / f"{name}.ndjson"
        idv.convert(fixture(name), out)
        rows[name] = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    floats = [v for r in rows["scalars_numeric"] for v in r.values() if isinstance(v, str)]
    assert {"NaN", "Infinity", "-Infinity"} <= set(floats)
    text = open(tmp_path / "scalars_text.ndjson", encoding="utf-8").read()
    assert any(ord(c) > 127 for c in text)         # UTF-8, not \\u escapes
    dump = sidecar("scalars_text")
    txt = next(c for c in dump["columns"] if c["name"] == "Txt")
    assert [r["Txt"] for r in rows["scalars_text"]] == [r[txt["index"]] for r in dump["rows"]]
    dump = sidecar("keys")
    first = dump["columns"][0]
    assert [r[first["name"]] for r in rows["keys"]] == [r[0] for r in dump["rows"]]
    dump = sidecar("scalars_datetime")
    assert [r["DT"] for r in rows["scalars_datetime"]] == [ticks_iso(int(r[0]))
                                                          for r in dump["rows"]]
    assert all(isinstance(v, list) for r in rows["vectors_fixed"] for v in r.values())


def test_jsonl_of_a_dataset_and_options(tmp_path):
    """A dataset's files end to end, the same lines as each file's; columns by name or
    index; progress per block; to= names the format; nothing is left on an error."""
    names = ["mixed_default", "mixed_smallblocks_none"]
    parts = []
    for name in names:
        out = tmp_path / f"{name}.jsonl"
        idv.convert(fixture(name), out, columns=["Id", 4, "Vec"])
        parts.append(out.read_bytes())
    calls = []
    with idv.dataset([fixture(n) for n in names]) as ds:
        both = tmp_path / "both.out"
        assert idv.convert(ds, both, to="jsonl", columns=["Id", "Txt", "Vec"],
                           progress=lambda d, t: calls.append((d, t))) == 200
    assert both.read_bytes() == b"".join(parts)
    assert calls[0] == (0, 200) and calls[-1] == (200, 200) and len(calls) > 3
    assert list(json.loads(both.read_text(encoding="utf-8").splitlines()[0])) == \
        ["Id", "Txt", "Vec"]
    for bad, error in (({"compression": "zstd"}, "not compressed"),
                       ({"columns": ["Nope"]}, "Nope")):
        with pytest.raises((ValueError, KeyError), match=error):
            idv.convert(fixture(names[0]), tmp_path / "bad.jsonl", **bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["both.out"] + [f"{n}.jsonl" for n in names])


def test_jsonl_streams(tmp_path):
    """25,000 rows of ML.NET's multiblock file in 25 blocks: what is held while writing is a
    block's cells (here about a quarter of the output's size); the rows held whole would take
    more than the output, as the same rows in one block do."""
    with idv.open(fixture("multiblock_200k_none")) as f:
        rows = {name: values[:25_000] for name, values in f.read().items()}
    blocks, whole = tmp_path / "blocks.idv", tmp_path / "whole.idv"
    idv.write(blocks, rows, compression="none", rows_per_block=1_000)
    idv.write(whole, rows, compression="none", rows_per_block=25_000)
    idv.convert(blocks, tmp_path / "warm.jsonl", columns=["Id"])
    out = tmp_path / "out.jsonl"
    peak, _ = _peaks(lambda _: idv.convert(blocks, out))
    assert peak < out.stat().st_size / 2, (peak, out.stat().st_size)
    peak, _ = _peaks(lambda _: idv.convert(whole, out))
    assert peak > out.stat().st_size, (peak, out.stat().st_size)


def test_jsonl_is_an_output_from_idv_only(tmp_path):
    src = tmp_path / "x.jsonl"
    idv.convert(fixture("keys"), src)
    with pytest.raises(ValueError, match="JSON Lines is an output format only"):
        idv.convert(src, tmp_path / "y.idv")
    pq.write_table(pa.table({"x": [1, 2]}), tmp_path / "x.parquet")
    with pytest.raises(ValueError, match="JSON Lines is written from an .idv source only"):
        idv.convert(tmp_path / "x.parquet", tmp_path / "y.jsonl")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.jsonl", "x.parquet"]


# ---------------------------------------------------------------------------------------------
# the registry
# ---------------------------------------------------------------------------------------------

def test_the_registry_names_every_format_once(tmp_path):
    """Every extension and name of the registry resolves to its format; to= takes a name or
    an extension; errors list the registry's formats."""
    formats = convert_module.FORMATS
    extensions = [e for f in formats.values() for e in f.extensions]
    assert len(extensions) == len(set(extensions))
    for f in formats.values():
        assert convert_module.format_of(f"x{f.extensions[0]}") is f
        assert convert_module.format_of("x", f.name) is f
        for e in f.extensions:
            assert convert_module.format_of(f"X{e.upper()}") is f
            assert convert_module.format_of("x.bin", e.lstrip(".")) is f
    assert convert_module.format_of("x", "ipc").name == "arrow"
    with pytest.raises(ValueError, match="one of: " + ", ".join(sorted(formats))):
        convert_module.format_of("x", "xlsx")
    with pytest.raises(ValueError, match="(?s)known: .*" + ".*".join(sorted(extensions))):
        convert_module.format_of("x.xlsx")


# ---------------------------------------------------------------------------------------------
# ML.NET reads an .idv made from a Parquet file
# ---------------------------------------------------------------------------------------------

def test_mlnet_reads_idv_from_parquet(tmp_path, oracle):
    n = 5
    when = np.array(["0001-01-01", "1970-01-01T00:00:01.5", "2020-02-29T12:00", "2262-01-01",
                     "9999-12-31T23:59:59.999999"], "datetime64[us]")
    table = pa.table({
        "i": pa.array([1, -2, 3, 2**31 - 1, -2**31], pa.int32()),
        "u": pa.array([0, 1, 2, 2**64 - 1, 7], pa.uint64()),
        "f": pa.array([0.1, float("nan"), None, -0.0, 1e30], pa.float32()),
        "b": [True, False, True, True, False],
        "s": ["a", "", "é\u4e2d", "x" * 300, "tab\tnl\n"],
        "when": pa.array(when),
        "dur": pa.array(np.array([1, -1, 0, 10**12, 5], "timedelta64[us]")),
        "tz": pa.array(when[1:4].tolist() + [dt.datetime(2000, 1, 1), dt.datetime(1999, 1, 1)],
                       pa.timestamp("us")).cast(pa.timestamp("us", tz="+05:30")),
        "cat": pa.array(["lo", "hi", None, "lo", "mid"]).dictionary_encode(),
        "fixed": pa.FixedSizeListArray.from_arrays(pa.array(np.arange(15, dtype=np.float64)), 3),
        "var": pa.array([[1], [], [2, 3], [4, 5, 6], []], pa.list_(pa.int64())),
    })
    src = tmp_path / "src.parquet"
    pq.write_table(table, src, row_group_size=2)
    out = tmp_path / "from_parquet.idv"
    assert idv.convert(src, out, rows_per_block=2) == n
    dump = oracle.dump(out)
    cols = {c["name"]: c for c in dump["columns"]}
    assert {k: c["type_string"] for k, c in cols.items()} == {
        "i": "Int32", "u": "UInt64", "f": "Single", "b": "Boolean", "s": "String",
        "when": "DateTime", "dur": "TimeSpan", "tz": "DateTimeOffset", "cat": "Key<UInt32, 0-2>",
        "fixed": "Vector<Double, 3>", "var": "Vector<Int64>"}
    assert dump["table_of_contents"]["columns"][0]["rows_per_block"] == 2

    def cells(name):
        return [r[cols[name]["index"]] for r in dump["rows"]]
    assert cells("i") == table.column("i").to_pylist()
    assert cells("u") == table.column("u").to_pylist()
    f32 = np.array([np.nan if v is None else v for v in table.column("f").to_pylist()],
                   np.float32)
    assert_arrays_equal(item_values(idv.Single, cells("f")), f32, "f")
    assert cells("b") == table.column("b").to_pylist()
    assert cells("s") == table.column("s").to_pylist()
    assert cells("when") == [int(v) * 10 + EPOCH_TICKS for v in when.view(np.int64)]
    assert cells("dur") == [v * 10 for v in [1, -1, 0, 10**12, 5]]
    tz = table.column("tz").cast(pa.int64()).to_pylist()
    assert cells("tz") == [{"ticks": v * 10 + EPOCH_TICKS + 330 * 600000000,
                            "offset_minutes": 330} for v in tz]
    assert annotations_by_kind(cols["cat"])["KeyValues"]["value"] == ["lo", "hi", "mid"]
    assert cells("cat") == [1, 2, 0, 1, 3]
    assert [[float(x) for x in c] for c in cells("fixed")] == \
        np.arange(15.0).reshape(5, 3).tolist()
    assert cells("var") == table.column("var").to_pylist()


# ---------------------------------------------------------------------------------------------
# streaming and errors
# ---------------------------------------------------------------------------------------------

def _write_big(path, n):
    rng = np.random.default_rng(7)
    idv.write(path, {"x": rng.random(n), "i": np.arange(n, dtype=np.int64),
                     "v": rng.random((n, 6)).astype(np.float32),
                     "s": np.array([f"row {i % 977}" for i in range(n)], dtype=object)},
              compression="none")
    return path


@pytest.fixture(scope="module")
def big_idv(tmp_path_factory):
    return _write_big(tmp_path_factory.mktemp("big") / "big.idv", 600_000)


@pytest.mark.parametrize("fmt", ["parquet", "feather"])
def test_streaming_bounded_memory(big_idv, tmp_path, monkeypatch, fmt):
    """idv -> fmt -> idv holds a few blocks (Parquet: two row groups, one being written while
    the next is gathered) at a time, far less than the file."""
    monkeypatch.setattr(parquet_module, "_ROW_GROUP_BYTES", 1 << 20)
    monkeypatch.setattr(idv._scan.scan, "WINDOW_BYTES", 256 << 10)
    size = big_idv.stat().st_size
    mid = tmp_path / f"big.{fmt}"
    back = tmp_path / "back.idv"
    idv.convert(big_idv, tmp_path / "warm.parquet", columns=["i"])     # imports, pools
    peak, arrow = _peaks(lambda p: idv.convert(big_idv, mid, progress=p))
    # what is held must not grow with the file: against a quarter of it (pyarrow's writers
    # keep working buffers of their own, the Parquet one's dictionary encoding about 23 MB
    # here whatever the file's size; idv a few windows and row groups)
    quarter = _write_big(tmp_path / "quarter.idv", 150_000)
    peak_quarter, arrow_quarter = _peaks(lambda p: idv.convert(quarter, tmp_path / f"q.{fmt}",
                                                               progress=p))
    assert peak < min(size / 6, peak_quarter + size / 16), (peak, peak_quarter, size)
    assert arrow < arrow_quarter + size / 16, (arrow, arrow_quarter, size)
    if fmt == "parquet":
        assert pq.ParquetFile(mid).num_row_groups > 4
    # back: a source batch (rows_per_block rows) plus, for Parquet, the row group being decoded
    peak, arrow = _peaks(lambda p: idv.convert(mid, back, progress=p, rows_per_block=8192))
    assert peak + arrow < size / 3, (peak, arrow, size)
    with idv.open(big_idv) as a, idv.open(back) as b:
        assert b.num_rows == a.num_rows and b["v"].type == a["v"].type
        for name in ("x", "i", "v", "s"):
            assert np.array_equal(a[name][::9973], b[name][::9973]), name


def test_progress_counts(big_idv, tmp_path):
    calls = []
    idv.convert(big_idv, tmp_path / "p.parquet", columns=["i"],
                progress=lambda d, t: calls.append((d, t)))
    with idv.open(big_idv) as f:
        blocks, n = f["i"].num_blocks, f.num_rows
    assert calls[0] == (0, n) and calls[-1] == (n, n) and len(calls) == blocks + 1
    assert all(a[0] < b[0] for a, b in zip(calls, calls[1:]))
    with pytest.raises(TypeError, match="^progress must be a callable.*not bool"):
        idv.convert(big_idv, tmp_path / "q.csv", progress=True)     # before anything is written
    assert not (tmp_path / "q.csv").exists()


def test_errors(tmp_path):
    src = fixture("mixed_default")
    with pytest.raises(ValueError, match="cannot tell the destination format"):
        idv.convert(src, tmp_path / "x.xlsx")
    with pytest.raises(ValueError, match="unknown destination format"):
        idv.convert(src, tmp_path / "x", to="xlsx")
    copy = tmp_path / "same.idv"
    copy.write_bytes(src.read_bytes())
    with pytest.raises(ValueError, match="same file"):
        idv.convert(copy, copy)
    with pytest.raises(ValueError, match="types= is for a non-.idv input, not an .idv"):
        idv.convert(src, tmp_path / "y.parquet", types={"Id": idv.Int64})
    with pytest.raises(ValueError, match="rows_per_block= is for an .idv output, not Parquet"):
        idv.convert(src, tmp_path / "y.parquet", rows_per_block=100)
    with pytest.raises(ValueError, match="missing_text= is for a non-.idv input"):
        idv.convert(src, tmp_path / "y.parquet", missing_text="")
    assert not (tmp_path / "y.parquet").exists()
    # to= wins over the extension
    out = tmp_path / "data.bin"
    idv.convert(src, out, to="parquet", columns=["Id"])
    assert pq.read_table(out).column_names == ["Id"]
    # a failure on the way leaves no output and no temporary file
    bad = tmp_path / "bad.csv"
    bad.write_text("a\n1\n2\n")
    with pytest.raises(KeyError):
        idv.convert(bad, tmp_path / "bad.idv", types={"zzz": idv.Int32})
    assert sorted(os.listdir(tmp_path)) == ["bad.csv", "data.bin", "same.idv"]


def test_arrow_stream_source(tmp_path):
    """An Arrow IPC stream (not the file format) is read too, with source_format=."""
    table = idv.to_arrow(fixture("vectors_variable"))
    src = tmp_path / "s.stream"
    with pa.OSFile(str(src), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    calls = []
    out = tmp_path / "s.idv"
    assert idv.convert(src, out, source_format="arrow",
                       progress=lambda d, t: calls.append((d, t))) == 6
    assert calls[-1] == (6, None)
    check_idv_against_dump(out, sidecar("vectors_variable"))


# ---- helpers of these tests

def _mode(name):
    return "ticks" if has_sub_microsecond(sidecar(name)) else "us"


def _csv_rows(path, delimiter):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh, delimiter=delimiter))


def _peaks(run):
    """(numpy peak from tracemalloc, Arrow peak) of run(progress). The Arrow peak is sampled
    in a thread every 0.1 ms besides each progress call: pyarrow's writers may be working in
    threads of their own in between."""
    arrow = [0]
    done = threading.Event()

    def progress(_done, _total):
        arrow[0] = max(arrow[0], pa.total_allocated_bytes())

    def sample():
        while not done.wait(0.0001):
            arrow[0] = max(arrow[0], pa.total_allocated_bytes())
    sampler = threading.Thread(target=sample)
    tracemalloc.start()
    sampler.start()
    try:
        run(progress)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        done.set()
        sampler.join()
        tracemalloc.stop()
    return peak, arrow[0]


def test_a_bad_value_is_named_by_its_row_in_the_whole_input(tmp_path):
    """Parquet -> .idv streams in row groups: the error names the input's row 499,999, not
    the row within its batch."""
    n = 500_000
    x = np.arange(n, dtype=np.float64)
    x[499_999] = np.nan
    pq.write_table(pa.table({"x": x}), tmp_path / "in.parquet", row_group_size=65_536)
    with pytest.raises(ValueError, match="column 'x' row 499999: NaN in an integer column"):
        idv.convert(tmp_path / "in.parquet", tmp_path / "out.idv", types={"x": idv.Int64})
    assert sorted(os.listdir(tmp_path)) == ["in.parquet"]


def test_idv_without_columns_keeps_its_rows(tmp_path, oracle):
    """.idv -> .idv of a file with rows but no columns (ML.NET's internal saver writes such
    files): the output has the same rows, and ML.NET loads it so."""
    out = tmp_path / "rows.idv"
    with idv.open(fixture("no_columns")) as f:
        rows = f.num_rows
    assert rows > 0
    assert idv.convert(fixture("no_columns"), out) == rows
    with idv.open(out) as f:
        assert (f.num_rows, f.num_columns) == (rows, 0)
    dump = oracle.dump(out)
    assert "error" not in dump, dump.get("error")
    assert dump["row_count"] == rows


def test_parquet_times_are_microseconds_by_default_which_every_engine_reads(tmp_path):
    src, out = tmp_path / "t.idv", tmp_path / "t.parquet"
    when = np.datetime64("2024-01-01") + np.arange(5).astype("timedelta64[s]")
    idv.write(src, {"when": when, "span": np.arange(5).astype("timedelta64[ms]")})
    idv.convert(src, out)
    schema = pq.read_schema(out)
    assert schema.field("when").type == pa.timestamp("us")
    assert schema.field("span").type == pa.duration("us")
    assert '"timeUnit":"microseconds"' in pq.ParquetFile(out).schema.column(0) \
        .logical_type.to_json()
    assert pq.read_table(out)["when"].to_pylist()[1] == dt.datetime(2024, 1, 1, 0, 0, 1)
    idv.convert(src, tmp_path / "ns.parquet", datetime="ns")      # asked for: kept
    assert pq.read_schema(tmp_path / "ns.parquet").field("when").type == pa.timestamp("ns")
    idv.convert(src, tmp_path / "t.feather")                       # other formats: auto
    assert pa.ipc.open_file(tmp_path / "t.feather").schema.field("when").type == \
        pa.timestamp("ns")


def test_parquet_of_ticks_finer_than_a_microsecond_says_how_to_keep_them(tmp_path):
    src = tmp_path / "fine.idv"
    idv.write(src, {"when": np.array([1, 2], "datetime64[us]").astype("datetime64[100ns]")
                    + np.array([0, 1], "timedelta64[100ns]")})
    with pytest.warns(idv.IdvWarning, match="1 DateTime value .*floored to microseconds.*"
                                            "datetime='ns' or 'ticks' keeps them exact"):
        idv.convert(src, tmp_path / "fine.parquet")
    assert pq.read_table(tmp_path / "fine.parquet")["when"].cast(pa.int64()).to_pylist() == \
        [1, 2]
    code, _, err = cli_run.run("convert", src, tmp_path / "fine.parquet", "-q")
    assert code == 0 and "floored to microseconds" in err
    code, _, err = cli_run.run("convert", src, tmp_path / "us.parquet", "--datetime", "us")
    assert code == 1 and "--datetime" in err                     # asked for: exact or refused
    idv.convert(src, tmp_path / "fine.parquet", datetime="ns")
    assert pq.read_table(tmp_path / "fine.parquet")["when"].cast(pa.int64()).to_pylist() == \
        [1000, 2100]


@pytest.mark.parametrize("offset", [0, 3, 9])
def test_arrow_numbers_dates_and_booleans_are_read_from_their_buffers_as_pyarrow_reads_them(
        offset):
    """idv's own view of Arrow's fixed-width buffers (numpy_view) gives what pyarrow's
    to_numpy gives: every width, dates, Booleans across bytes, a slice that starts inside a
    byte or a value, an empty array; the views read-only, as pyarrow's; with nulls, pyarrow's
    own answer."""
    from idv._values.arrow_types import numpy_view
    rng = np.random.default_rng(3)
    arrays = [pa.array(rng.integers(-100, 100, 40).astype(d))
              for d in ("i1", "i2", "i4", "i8", "f2", "f4", "f8")]
    arrays += [pa.array(rng.integers(0, 2**63, 40, dtype=np.uint64).astype(d))
               for d in ("u1", "u2", "u4", "u8")]
    arrays += [pa.array(rng.random(40) < 0.5),
               pa.array(rng.integers(-10**5, 10**5, 40).astype(np.int32), pa.date32()),
               pa.array(rng.integers(-10**12, 10**12, 40), pa.date64()),
               pa.array([1.5, None, 2.5] * 13 + [1.0])]
    for arr in arrays:
        for part in (arr.slice(offset), arr.slice(offset, 11), arr.slice(offset, 0)):
            got, want = numpy_view(part), part.to_numpy(zero_copy_only=False)
            assert got.dtype == want.dtype and got.shape == want.shape, part.type
            assert np.array_equal(got, want, equal_nan=True), part.type
            if part.type in (pa.int32(), pa.float64()) and len(part) and not part.null_count:
                assert not got.flags.writeable


def test_numbers_and_text_cross_into_arrow_as_pa_array_carries_them():
    """numbers_to_arrow and texts_to_arrow (Arrow arrays made from buffers) give what pa.array
    gives: every width, Booleans across bytes, nulls by a mask, an empty array, non-ASCII and
    empty strings; numbers share numpy's memory; a lone surrogate is refused alike."""
    from idv._values.arrow_types import numbers_to_arrow, texts_to_arrow
    rng = np.random.default_rng(5)
    for d in ("i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "?"):
        values = rng.integers(0, 100, 37).astype(d)
        mask = rng.random(37) < 0.3
        for v, m in ((values, None), (values, mask), (values[5:], mask[5:]), (values[:0], None)):
            got = numbers_to_arrow(pa, v, mask=m)
            assert got.equals(pa.array(v, mask=m)), (d, m is not None)
    shared = np.arange(10, dtype=np.int32)
    assert numbers_to_arrow(pa, shared).buffers()[1].address == shared.ctypes.data
    assert numbers_to_arrow(pa, shared, pa.uint32()).type == pa.uint32()
    texts = np.array(["", "a", "été", "日本語", "\U0001F600", "x" * 300], object)
    assert texts_to_arrow(pa, texts).equals(pa.array(texts, type=pa.string()))
    assert texts_to_arrow(pa, texts[:0]).equals(pa.array([], pa.string()))
    many = np.array([f"v{i}" for i in range(70_000)], object)      # beyond a few: pa.array
    assert texts_to_arrow(pa, many).equals(pa.array(many, type=pa.string()))
    from idv._writer.arrow_items import _texts_from_arrow           # and back, either way
    for strings in (many, texts):
        back = _texts_from_arrow(pa, pa.array(strings, type=pa.string()), None)
        assert back.dtype == object and back.tolist() == strings.tolist()
    for convert in (texts_to_arrow, lambda pa_, v: pa_.array(v, type=pa_.string())):
        with pytest.raises(UnicodeEncodeError):
            convert(pa, np.array(["a", "\ud800"], object))


def _modules_loaded_by(code):
    """Which of pandas and pyarrow a fresh interpreter has imported once `code` has run."""
    code += "\nimport sys\nprint(sorted(m for m in ('pandas', 'pyarrow') if m in sys.modules))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=REPO_DIR, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout.split()


def _every_parquet_type(path):
    pq.write_table(pa.table({
        "x": np.arange(10.0), "i": np.arange(10, dtype=np.int8), "t": ["a", "b"] * 5,
        "b": [True, False] * 5, "d": pa.array([dt.date(2020, 1, 1)] * 10),
        "ts": pa.array([dt.datetime(2020, 1, 1)] * 10, pa.timestamp("us")),
        "span": pa.array([1] * 10, pa.duration("ms")),
        "cat": pa.array(["u", "v"] * 5).dictionary_encode(),
        "vec": pa.array([[1.0, 2.0]] * 10, pa.list_(pa.float32(), 2))}), path)


def test_reading_into_arrow_and_converting_import_no_pandas(tmp_path):
    """pyarrow's to_numpy, pa.array and Schema.empty_table import pandas on their first call in
    a process (a third of a second or more before a first to_arrow or `idv convert` gives
    anything): idv makes and reads Arrow's buffers itself, both ways, for every type a Parquet
    file holds."""
    src, out = tmp_path / "all.parquet", tmp_path / "all.idv"
    _every_parquet_type(src)
    assert _modules_loaded_by(f"""import idv
idv.convert({str(src)!r}, {str(out)!r})
idv.convert({str(out)!r}, {str(tmp_path / 'back.parquet')!r})
idv.convert(idv.sample_path(), {str(tmp_path / 'sample.parquet')!r})
idv.convert({str(tmp_path / 'sample.parquet')!r}, {str(tmp_path / 'sample.idv')!r})
idv.to_arrow(idv.sample_path(), filter=[("Sold", "==", True), ("Area", ">", 1000.0)])""") == \
        ["['pyarrow']"]
    assert idv.read(out)["b"].tolist() == [True, False] * 5
    assert pq.read_table(tmp_path / "back.parquet")["d"].to_pylist() == \
        [dt.date(2020, 1, 1)] * 10


def test_scanning_with_polars_imports_no_pandas(tmp_path):
    """polars' scans and filters over .idv leave pandas unimported too (scan_idv's schema, the
    frames, the rows idv tests)."""
    pytest.importorskip("polars", reason="scan_idv needs polars")
    src, out = tmp_path / "all.parquet", tmp_path / "all.idv"
    _every_parquet_type(src)
    idv.convert(src, out)
    assert _modules_loaded_by(f"""import polars as pl, idv.polars
lf = idv.polars.scan_idv({str(out)!r})
assert lf.filter(pl.col("b") & (pl.col("x") > 2)).collect()["x"].to_list() == [4, 6, 8]
assert lf.collect().height == 10""") == ["['pyarrow']"]


def test_keys_of_times_read_into_pandas_arrow_and_parquet(tmp_path):
    """A key whose KeyValues are DateTime (a pandas Categorical of timestamps) or TimeSpan:
    categories and dictionaries of times, in the unit their own values take, whether the
    read holds a time column or not; through Parquet and back they stay keys of times."""
    pd = pytest.importorskip("pandas", reason="read_pandas needs pandas")
    days = np.array(["2024-01-01", "2024-01-02", "2024-01-01"], "datetime64[ns]")
    spans = np.array([1, 120, 1], "timedelta64[s]").astype("timedelta64[ns]")
    src, parquet, back = tmp_path / "k.idv", tmp_path / "k.parquet", tmp_path / "back.idv"
    idv.write(src, pd.DataFrame({"day": pd.Categorical(days), "span": pd.Categorical(spans),
                                 "t": days}))
    for path in (src, back):
        df = idv.read_pandas(path)
        assert str(df["day"].dtype) == "category" and str(df["span"].dtype) == "category"
        assert df["day"].cat.categories.dtype == np.dtype("datetime64[ns]")
        assert np.array_equal(np.asarray(df["day"], "datetime64[ns]"), days)
        assert np.array_equal(np.asarray(df["span"], "timedelta64[ns]"), spans)
        for columns in (None, ["day", "span"]):
            table = idv.to_arrow(path, columns=columns)
            assert table.schema.field("day").type == pa.dictionary(pa.int32(), pa.timestamp("ns"))
            assert table["day"].combine_chunks().dictionary_decode().equals(pa.array(days))
            assert table["span"].combine_chunks().dictionary_decode().equals(pa.array(spans))
        if path == src:
            idv.convert(src, parquet)
            idv.convert(parquet, back)
    ticks = idv.to_arrow(src, columns=["day"], datetime="ticks")["day"].combine_chunks()
    assert ticks.dictionary.to_pylist() == [EPOCH_TICKS + 19723 * 864_000_000_000,
                                            EPOCH_TICKS + 19724 * 864_000_000_000]
    assert pq.read_table(parquet)["day"].to_pylist() == \
        [dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2), dt.datetime(2024, 1, 1)]


@pytest.mark.parametrize("text, types, said", [
    ("1e39", {"x": "Single"}, "row 1: 1e+39 is outside the range of Single"),
    ("3000000000", {"x": "Int32"}, "row 1: 3000000000 is outside the range of Int32"),
    ("-1", {"x": "UInt16"}, "row 1: -1 is outside the range of UInt16"),
])
def test_csv_types_check_the_values_as_every_input_does(tmp_path, text, types, said):
    """A CSV column given a type is parsed at its kind's widest and checked by the writer,
    as a dict's or a table's column is: refused naming the row (a Single parsed as float32
    was inf, an Int32 pyarrow's error naming no row)."""
    pytest.importorskip("pyarrow.csv", reason="CSV is read by pyarrow")
    src = tmp_path / "in.csv"
    src.write_text(f"x\n1\n{text}\n")
    with pytest.raises(ValueError, match=re.escape(said)):
        idv.convert(src, tmp_path / "out.idv", types=types)
    with pytest.raises(ValueError, match=re.escape(said)):
        idv.write(tmp_path / "dict.idv", {"x": np.array([1, float(text)])
                                          if "e" in text else np.array([1, int(text)])},
                  types=types)
    assert not (tmp_path / "out.idv").exists()


def test_csv_times_with_offsets_keep_each_values_offset(tmp_path):
    """A CSV column of times with UTC offsets becomes DateTimeOffset with each value's own
    offset, as a pandas column of the same zone does and as types= reads it (pyarrow alone
    makes them UTC instants, offsets lost); idv's own round trip keeps them."""
    pd = pytest.importorskip("pandas", reason="the zone-aware column is pandas'")
    pytest.importorskip("pyarrow.csv", reason="CSV is read by pyarrow")
    times = pd.Series(pd.to_datetime(["2020-01-01 12:00", "2020-07-01 12:00"])
                      .tz_localize("Europe/Paris"))
    (tmp_path / "t.csv").write_text("t\n2020-01-01T12:00:00+01:00\n2020-07-01 12:00:00+02:00\n")
    idv.write(tmp_path / "pd.idv", pd.DataFrame({"t": times}))
    want = idv.read(tmp_path / "pd.idv")["t"]
    assert want["offset_minutes"].tolist() == [60, 120]
    for out, kw in (("csv.idv", {}), ("typed.idv", {"types": {"t": idv.DateTimeOffset}})):
        idv.convert(tmp_path / "t.csv", tmp_path / out, **kw)
        with idv.open(tmp_path / out) as f:
            assert f["t"].type == idv.DateTimeOffset
            assert f["t"].read().tolist() == want.tolist(), out
    idv.convert(tmp_path / "pd.idv", tmp_path / "back.csv")
    idv.convert(tmp_path / "back.csv", tmp_path / "back.idv")
    assert idv.read(tmp_path / "back.idv")["t"].tolist() == want.tolist()


def test_csv_times_beyond_the_nanoseconds_years_are_times_without_types(tmp_path):
    """ISO 8601 times outside 1677-2262 (which pyarrow leaves as text) are typed as those
    inside: with offsets DateTimeOffset, without DateTime, each to the tick as types= reads
    them, so that an .idv's own CSV comes back with its types; a column of other text, of
    times with and without offsets, or of dates alone is as pyarrow reads it."""
    pytest.importorskip("pyarrow.csv", reason="CSV is read by pyarrow")
    src = tmp_path / "t.csv"
    src.write_text("z,d,mixed,word,day\n"
                   "0001-01-01T12:00:00+05:30,0001-01-01T00:00:00.0000001,"
                   "0001-01-01T00:00:00Z,x,0001-01-01\n"
                   "9999-12-31T23:59:59.9999999Z,9999-12-31 23:59:59,"
                   "2000-01-01T00:00:00,2000-01-01T00:00:00,9999-12-31\n")
    idv.convert(src, tmp_path / "t.idv")
    typed = {"z": idv.DateTimeOffset, "d": idv.DateTime}
    idv.convert(src, tmp_path / "typed.idv", columns=["z", "d"], types=typed)
    with idv.open(tmp_path / "t.idv") as f, idv.open(tmp_path / "typed.idv") as g:
        assert {c.name: c.type for c in f.columns} == {
            **typed, "mixed": idv.Text, "word": idv.Text, "day": idv.DateTime}
        for name in typed:
            assert f[name].read().tolist() == g[name].read().tolist(), name
        assert f["z"].read()["offset_minutes"].tolist() == [330, 0]
        assert (f["d"].read().view(np.int64) + EPOCH_TICKS).tolist() == [
            1, _ticks(9999, 12, 31, 23, 59, 59)]
    dto = np.zeros(2, [("utc", "<M8[100ns]"), ("offset_minutes", "<i2")])
    dto["utc"] = np.array([-EPOCH_TICKS + 864_000_000_000, 2 * 10**18]).view("<M8[100ns]")
    dto["offset_minutes"] = [-480, 60]
    when = np.array([-EPOCH_TICKS + 1, 2 * 10**18]).view("<M8[100ns]")
    idv.write(tmp_path / "wide.idv", {"z": dto, "d": when})
    idv.convert(tmp_path / "wide.idv", tmp_path / "wide.csv")
    idv.convert(tmp_path / "wide.csv", tmp_path / "back.idv")
    want, got = idv.read(tmp_path / "wide.idv"), idv.read(tmp_path / "back.idv")
    assert all(want[k].tolist() == got[k].tolist() for k in want)


def test_datetime_is_refused_where_the_output_holds_ticks(tmp_path):
    """datetime= (--datetime) chooses the unit of times in an Arrow output: an .idv holds
    ticks and a text output .NET's text of them, whatever it says, so given for one it is
    refused, before any file is made, by the API and the command line alike."""
    src = tmp_path / "t.idv"
    idv.write(src, {"t": np.array([1, 2]).view("<M8[100ns]")})
    for out in ("t.csv", "t.tsv", "t.jsonl", "again.idv"):
        with pytest.raises(ValueError, match="sets the unit of times in a Parquet"):
            idv.convert(src, tmp_path / out, datetime="us")
        rc, _, err = cli_run.run("convert", src, tmp_path / out, "--datetime", "ticks")
        assert rc == 2 and "--datetime sets the unit of times" in err, err
        assert not (tmp_path / out).exists()
    pytest.importorskip("pyarrow.parquet", reason="the Parquet output is pyarrow's")
    idv.convert(src, tmp_path / "t.parquet", datetime="ticks")
    idv.convert(tmp_path / "t.parquet", tmp_path / "back.idv")
    assert idv.read(tmp_path / "back.idv")["t"].view(np.int64).tolist() == [1, 2]


def test_csv_errors_name_the_column_and_how_to_type_it(tmp_path):
    """pyarrow's parse errors name a CSV column by its number: idv's name it by its header
    name and the value's line (a quoted value may span lines), and say how to give a type
    pyarrow inferred (from the first block: a value further
    on that does not parse as it); a column asked for that the CSV lacks is named with the
    columns it has."""
    pytest.importorskip("pyarrow.csv", reason="CSV is read by pyarrow")
    src = tmp_path / "in.csv"
    src.write_text('a,b\n1,2\n"two\nlines",2\n3,x\n')     # the value refused: line 5
    with pytest.raises(ValueError, match=r"^CSV column 'b' line 5: .*invalid value 'x'$"):
        idv.convert(src, tmp_path / "out.idv", types={"b": idv.Int32})
    with open(src, "w") as f:                   # 'a' inferred Int64 from the first 16 MiB
        f.write("a,b\n" + "".join(f"{i},{i}\n" for i in range(1_700_000)) + "1.5,3\n")
    with pytest.raises(ValueError, match=r"CSV column 'a' line 1700002: .*invalid value '1.5'; "
                                         r"its type was inferred .* \(--types a=TYPE\)"):
        idv.convert(src, tmp_path / "out.idv")
    with pytest.raises(KeyError, match=r"has no column 'zz' \(its columns: a, b\)"):
        idv.convert(src, tmp_path / "out.idv", columns=["a", "zz"])
    assert not (tmp_path / "out.idv").exists()


@pytest.mark.parametrize("options", [{}, {"compression": "none"}, {"level": 1}])
def test_an_idv_written_again_keeps_its_block_size(tmp_path, options):
    """.idv -> .idv keeps the file's rows per block whether its blocks are copied or made
    again (another compression or level gave the default block size: a random-access layout
    of 1,000-row blocks became one block); rows_per_block= chooses another."""
    idv.write(tmp_path / "in.idv", {"x": np.arange(5000), "t": np.array(["a"] * 5000, object)},
              rows_per_block=1000)
    idv.convert(tmp_path / "in.idv", tmp_path / "out.idv", **options)
    with idv.open(tmp_path / "out.idv") as f:
        assert [(c.rows_per_block, c.num_blocks) for c in f.columns] == [(1000, 5)] * 2
        assert f.read()["x"].tolist() == list(range(5000))
    idv.convert(tmp_path / "in.idv", tmp_path / "other.idv", rows_per_block=2500, **options)
    assert idv.open(tmp_path / "other.idv")["x"].num_blocks == 2


def test_a_row_group_still_written_when_ctrl_c_comes_is_waited_for_by_abort():
    """Ctrl-C while the Parquet sink waits for the row group being written: the group stays
    pending, so that abort() waits for it before closing the writer (the writing thread,
    left running, crashed the process with a segmentation fault)."""
    from concurrent.futures import Future
    from idv.formats.parquet import ParquetSink

    class Interrupted(Future):
        def result(self, timeout=None):
            if not self.done():
                raise KeyboardInterrupt
            return super().result(timeout)
    sink = ParquetSink.__new__(ParquetSink)
    sink.pending = group = Interrupted()
    with pytest.raises(KeyboardInterrupt):
        sink._written()
    assert sink.pending is group
    group.set_result(None)
    sink._written()
    assert sink.pending is None


def test_convert_in_python_takes_the_reads_threads_and_memory_limit(tmp_path):
    src = fixture("mixed_default")
    out = tmp_path / "o.idv"
    assert idv.convert(src, out, threads=1, memory_limit="64MB") == sidecar(
        "mixed_default")["row_count"]
    with pytest.raises(idv.MemoryLimitError):
        idv.convert(src, tmp_path / "small.idv", memory_limit=10)
    with pytest.raises(TypeError, match="threads must be a number of threads"):
        idv.convert(src, tmp_path / "bad.idv", threads="2")
    assert not (tmp_path / "small.idv").exists() and not (tmp_path / "bad.idv").exists()
