"""The ``idv`` command line, run as ``python -m idv`` in a subprocess on real ML.NET files.

Expected output is derived from the fixtures' JSON sidecars (what ML.NET read back) and from
ML.NET's own text dump of datatypes.idv, not from this reader.
"""
from __future__ import annotations

import datetime
import functools
import gzip
import json
import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED = pathlib.Path(os.environ.get("IDV_SHARED") or REPO.parent / "shared")
FIXTURES = SHARED / "oracle" / "fixtures-sample"
MLNET_FILES = SHARED / "mlnet-files"
MODEL_ZIPS = MLNET_FILES / "model-zips"

EPOCH_TICKS = 621355968000000000


# ---------------------------------------------------------------- helpers

def fixture(name):
    path = FIXTURES / f"{name}.idv"
    if not path.exists():
        pytest.skip(f"fixture {path} not available (set IDV_SHARED to the shared directory)")
    return path


def shared_file(*parts):
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not available (set IDV_SHARED to the shared directory)")
    return path


@functools.lru_cache(maxsize=None)
def sidecar(name):
    fixture(name)
    plain, packed = FIXTURES / f"{name}.json", FIXTURES / f"{name}.json.gz"
    if plain.exists():
        return json.loads(plain.read_text(encoding="utf-8"))
    with gzip.open(packed, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def run(*args, check_rc=None):
    """Run ``python -m idv ARGS``; returns (returncode, stdout, stderr)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONIOENCODING"] = "utf-8"
    env.pop("PYTHONWARNINGS", None)
    p = subprocess.run([sys.executable, "-m", "idv", *map(str, args)], capture_output=True,
                       env=env, cwd=REPO, timeout=120)
    out, err = p.stdout.decode("utf-8"), p.stderr.decode("utf-8")
    if check_rc is not None:
        assert p.returncode == check_rc, (p.returncode, out, err)
    return p.returncode, out, err


def run_json(*args):
    rc, out, err = run(*args, "--json", check_rc=0)
    return json.loads(out)


def assert_one_line_error(err, *fragments, warnings=False):
    lines = err.strip().splitlines()
    if warnings:   # IdvWarnings may come first, one line each
        assert all(ln.startswith("idv: warning: ") for ln in lines[:-1]), err
        lines = lines[-1:]
    assert len(lines) == 1, err
    assert lines[0].startswith("idv: error: "), err
    assert "Traceback" not in err and "internal error" not in err, err
    for frag in fragments:
        assert frag in lines[0], (frag, err)


_ITEM_NAMES = {"String": "Text", "DataViewRowId": "RowId", "Text": "Text"}


def type_str(d):
    """This library's name for a sidecar column/annotation type, from its structured fields."""
    item = d["item_type"]
    if item == "Key":
        item = f"Key<{d['key_raw_type']}, {d['key_count']}>"
    item = _ITEM_NAMES.get(item, item)
    if not d["is_vector"]:
        return item
    if d["dims"] == [0]:
        return f"Vector<{item}>"
    return f"Vector<{item}, {', '.join(map(str, d['dims']))}>"


def norm_type(s):
    return s.replace("*", "0")   # a variable dim may print as * or 0


def ticks_iso(ticks):
    """.NET ticks -> ISO 8601 at tick precision, trailing zero fraction dropped."""
    d = datetime.datetime(1, 1, 1) + datetime.timedelta(microseconds=ticks // 10)
    s = f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:{d.second:02d}"
    frac = f"{d.microsecond:06d}{ticks % 10}".rstrip("0")
    return f"{s}.{frac}" if frac else s


def timespan_str(ticks):
    """.NET TimeSpan "c" format: [-][d.]hh:mm:ss[.fffffff]."""
    sign = "-" if ticks < 0 else ""
    t = abs(ticks)
    days, t = divmod(t, 864_000_000_000)
    secs, frac = divmod(t, 10_000_000)
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    return (f"{sign}{str(days) + '.' if days else ''}{h:02d}:{m:02d}:{s:02d}"
            + (f".{frac:07d}" if frac else ""))


def densify(cell, zero):
    if isinstance(cell, dict):
        out = [zero] * cell["length"]
        for i, v in zip(cell["indices"], cell["values"]):
            out[i] = v
        return out
    return list(cell)


def same_float(json_value, sidecar_value, dtype):
    """A CLI JSON float against a sidecar float string, compared at the column's precision."""
    a = dtype(float(json_value)) if not isinstance(json_value, str) else dtype(
        {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}[json_value])
    b = dtype(float(sidecar_value))
    return (np.isnan(a) and np.isnan(b)) or (a == b and np.signbit(a) == np.signbit(b))


def table_rows(text):
    """Data lines of the first table in `text` (after its dashed separator), split on 2+ spaces."""
    lines = text.splitlines()
    sep = next(i for i, ln in enumerate(lines) if ln and set(ln.replace(" ", "")) == {"-"})
    out = []
    for ln in lines[sep + 1:]:
        if not ln.strip() or ln.startswith("("):
            break
        out.append(re.split(r"\s{2,}", ln.strip()))
    return out


# ---------------------------------------------------------------- usage, help, exit codes

def test_help_lists_the_commands():
    rc, out, err = run("--help", check_rc=0)
    for cmd in ("info", "head", "schema"):
        assert cmd in out
    for cmd in ("info", "head", "schema"):
        rc, out, err = run(cmd, "--help", check_rc=0)
        assert out.startswith(f"usage: idv {cmd}")
        assert "--json" in out
    rc, out, err = run("head", "--help", check_rc=0)
    assert "-n N" in out and "--columns" in out


def test_version():
    rc, out, err = run("--version", check_rc=0)
    assert re.match(r"idv \d+\.\d+", out)


@pytest.mark.parametrize("args", [
    [], ["frobnicate", "x.idv"], ["info"], ["head"], ["info", "x.idv", "--bogus"],
    ["head", "{f}", "-n", "abc"], ["head", "{f}", "-n", "-1"], ["schema", "{f}", "extra"],
])
def test_usage_errors_exit_2(args):
    f = fixture("mixed_default")
    rc, out, err = run(*[a.format(f=f) for a in args])
    assert rc == 2, (out, err)
    assert "usage: idv" in err
    assert out == ""


def test_unknown_column_is_a_usage_error():
    rc, out, err = run("head", fixture("mixed_default"), "--columns", "Id,Nope")
    assert rc == 2
    assert_one_line_error(err, "Nope", "Id")


def test_unknown_backend_is_a_usage_error():
    rc, out, err = run("info", fixture("mixed_default"), "--backend", "nope")
    assert rc == 2
    assert_one_line_error(err, "nope")


def test_main_returns_codes_in_process(capsys):
    from idv.cli import main
    assert main(["schema", str(fixture("keys"))]) == 0
    assert "KeyU4: Key<UInt32, 5>" in capsys.readouterr().out
    assert main(["info", str(FIXTURES / "definitely-missing.idv")]) == 1
    assert main(["nonsense"]) == 2
    assert main(["--help"]) == 0


# ---------------------------------------------------------------- bad files

def test_missing_file_exits_1_with_one_line(tmp_path):
    missing = tmp_path / "missing.idv"
    for cmd in ("info", "head", "schema"):
        rc, out, err = run(cmd, missing)
        assert rc == 1 and out == ""
        assert_one_line_error(err, str(missing), "no such file")


def test_directory_and_empty_file_exit_1(tmp_path):
    rc, out, err = run("info", tmp_path)
    assert rc == 1
    assert_one_line_error(err, "directory")
    empty = tmp_path / "empty.idv"
    empty.write_bytes(b"")
    rc, out, err = run("info", empty)
    assert rc == 1
    assert_one_line_error(err)
    text = tmp_path / "text.idv"
    text.write_text("Label\tFeatures\n" * 40)
    rc, out, err = run("head", text)
    assert rc == 1
    assert_one_line_error(err, "signature")


@pytest.mark.parametrize("name", ["mixed_smallblocks_deflate", "mixed_none", "vectors_sparse"])
@pytest.mark.parametrize("cut", [10, 300, "half", -1])
def test_truncated_file_exits_1_with_one_line(tmp_path, name, cut):
    data = fixture(name).read_bytes()
    n = len(data) // 2 if cut == "half" else (cut if cut > 0 else len(data) + cut)
    bad = tmp_path / "truncated.idv"
    bad.write_bytes(data[:n])
    for cmd in ("info", "head"):
        rc, out, err = run(cmd, bad)
        assert rc == 1, (cmd, out, err)
        assert_one_line_error(err)


def test_verbose_shows_the_traceback(tmp_path):
    bad = tmp_path / "truncated.idv"
    bad.write_bytes(fixture("mixed_default").read_bytes()[:1000])
    for args in (["-v", "info", bad], ["info", bad, "-v"], ["head", "--verbose", bad]):
        rc, out, err = run(*args)
        assert rc == 1
        assert "Traceback" in err and "IdvFormatError" in err
        assert err.strip().splitlines()[-1].startswith("idv: error: ")


def _block_of(path, column, block=0):
    """(offset, disk length) of a column's block, from the lookup table bytes in the file."""
    sys.path.insert(0, str(REPO))
    import idv
    with idv.open(path) as f:
        entry = f[column].lookup[block]
        return int(entry["offset"]), int(entry["disk"])


@pytest.mark.parametrize("name,column", [("mixed_smallblocks_deflate", "Txt"),
                                         ("mixed_smallblocks_deflate", "Vec"),
                                         ("mixed_smallblocks_none", "Txt"),
                                         ("mixed_smallblocks_none", "Var"),
                                         ("multiblock_200k_deflate", "Name")])
def test_corrupt_block_fails_head_with_one_line(tmp_path, name, column):
    path = fixture(name)
    data = bytearray(path.read_bytes())
    offset, size = _block_of(path, column)
    data[offset:offset + size] = b"\xff" * size
    bad = tmp_path / "corrupt.idv"
    bad.write_bytes(bytes(data))
    rc, out, err = run("info", bad, check_rc=0)     # the layout is intact
    rc, out, err = run("head", bad, "--columns", column)
    assert rc == 1
    assert_one_line_error(err, column)
    # other columns still read, and blocks past the corrupt one too
    rc, out, err = run("head", bad, "--columns", "Id", check_rc=0)
    rows = sidecar(name)["row_count"]
    rc, out, err = run("head", bad, "--columns", column, "--start", rows - 2, "--json",
                       check_rc=0)
    assert len(json.loads(out)["data"]) == 2


def _with_unknown_codec(tmp_path):
    """mixed_none with column F64's codec renamed: a dead column, as ML.NET would skip."""
    data = bytearray(fixture("mixed_none").read_bytes())
    toc = struct.unpack_from("<q", data, 24)[0]
    i = data.index(b"\x06Double", toc)
    data[i + 1:i + 7] = b"Dooble"
    path = tmp_path / "dead.idv"
    path.write_bytes(bytes(data))
    return path


def test_unknown_codec_column_is_shown_as_unreadable(tmp_path):
    path = _with_unknown_codec(tmp_path)
    rc, out, err = run("info", path, check_rc=0)
    row = [r for r in table_rows(out.split("\n\n", 1)[1]) if r[1] == "F64"][0]
    assert row[2] == "<unreadable>" and row[3] == "Dooble"
    assert "unreadable" in out.split("\n\n")[-1] and "Dooble" in out.split("\n\n")[-1]
    info = run_json("info", path)
    col = info["columns"][2]
    assert col["name"] == "F64" and col["readable"] is False and col["type"] is None
    assert col["codec"] == "Dooble" and "Dooble" in col["error"]
    assert all(c["readable"] for c in info["columns"] if c["name"] != "F64")
    rc, out, err = run("schema", path, check_rc=0)
    assert "F64: <unreadable" in out
    # head skips it (warning on stderr) and shows the rest; asking for it is an error
    rc, out, err = run("head", path, "-n", "2", "--json", check_rc=0)
    assert [c["name"] for c in json.loads(out)["columns"]] == \
        ["Id", "F32", "B", "Txt", "Key", "Vec", "Var", "DT"]
    assert "warning" in err and "Dooble" in err
    rc, out, err = run("head", path, "--columns", "F64")
    assert rc == 1
    assert_one_line_error(err, "F64", "Dooble", warnings=True)


# ---------------------------------------------------------------- info

@pytest.mark.parametrize("name", ["mixed_default", "mixed_smallblocks_none", "keys",
                                  "pipeline_hidden", "vector_multidim", "multiblock_200k_none",
                                  "annotations_custom", "empty_rows", "no_columns"])
def test_info_json_matches_the_sidecar(name):
    side = sidecar(name)
    info = run_json("info", fixture(name))
    h = side["header"]
    assert info["version"] == h["version"]
    assert info["compatible_version"] == h["compatible_version"]
    assert info["num_rows"] == side["row_count"] == h["row_count"]
    assert info["num_columns"] == h["column_count"] == len(side["columns"])
    assert info["file_size"] == h["file_size"] == fixture(name).stat().st_size
    assert info["toc_offset"] == h["table_of_contents_offset"]
    assert info["tail_offset"] == h["tail_offset"]
    tocs = side["table_of_contents"]["columns"]
    assert len(info["columns"]) == len(side["columns"])
    n = side["row_count"]
    for got, c in zip(info["columns"], side["columns"]):
        toc = next(t for t in tocs if t["column_index"] == c["index"])
        assert got["index"] == c["index"] and got["name"] == c["name"]
        assert norm_type(got["type"]) == norm_type(type_str(c))
        assert got["hidden"] == c["hidden"] and got["readable"] is True
        assert got["codec"] == toc["codec"]
        assert got["compression"] == toc["compression"]
        assert got["rows_per_block"] == toc["rows_per_block"]
        assert got["blocks"] == -(-n // toc["rows_per_block"])
        assert list(got["metadata"]) == [a["kind"] for a in c["annotations"]]
        for a in c["annotations"]:
            assert norm_type(got["metadata"][a["kind"]]) == norm_type(type_str(a))
        if toc["compression"] == "None":
            assert got["bytes_disk"] == got["bytes"]
        width = {"Int32": 4, "Single": 4, "Double": 8, "DateTime": 8, "Int64": 8}.get(
            c["item_type"]) if not c["is_vector"] else None
        if width:
            assert got["bytes"] == n * width
        if n == 0:
            assert got["bytes"] == got["bytes_disk"] == 0


def test_info_text_table():
    name = "mixed_smallblocks_deflate"
    side = sidecar(name)
    rc, out, err = run("info", fixture(name), check_rc=0)
    assert err == ""
    head, table = out.split("\n\n", 1)
    fields = dict(re.split(r":\s+", ln.strip(), maxsplit=1) for ln in head.splitlines())
    assert fields["version"].startswith(side["header"]["version"])
    assert fields["rows"] == str(side["row_count"])
    assert fields["columns"] == str(len(side["columns"]))
    assert fields["file size"] == f"{side['header']['file_size']} bytes"
    assert fields["TOC offset"] == str(side["header"]["table_of_contents_offset"])
    header = table.splitlines()[0].split()
    assert header[:4] == ["#", "name", "type", "codec"]
    rows = table_rows(table)
    tocs = {t["column_index"]: t for t in side["table_of_contents"]["columns"]}
    for c in side["columns"]:
        r = rows[c["index"]]
        toc = tocs[c["index"]]
        assert r[:7] == [str(c["index"]), c["name"], type_str(c), toc["codec"],
                         toc["compression"], str(toc["rows_per_block"]), "15"]
        assert int(r[7]) > 0 and int(r[8]) > 0
        for a in c["annotations"]:
            assert f"{a['kind']}: {type_str(a)}" in r[9]
    total = rows[len(side["columns"])]
    assert total[0] == "total"
    assert int(total[1]) == sum(int(r[7]) for r in rows[:-1])
    assert int(total[2]) == sum(int(r[8]) for r in rows[:-1])
    # columns are aligned: every line of the table has "type" starting at the same offset
    lines = table.splitlines()
    col = lines[0].index("type")
    assert all(ln[col - 2:col] == "  " for ln in lines[2:-1])


def test_info_marks_hidden_columns():
    rc, out, err = run("info", fixture("pipeline_hidden"), check_rc=0)
    names = [r[1] for r in table_rows(out.split("\n\n", 1)[1])]
    assert names[:4] == ["Color (hidden)", "Color", "Size (hidden)", "Size"]


# ---------------------------------------------------------------- schema

@pytest.mark.parametrize("name", ["mixed_default", "pipeline_hidden", "pipeline_multiclass_scored",
                                  "vectors_misc", "scalars_rowid"])
def test_schema_text_matches_the_sidecar(name):
    side = sidecar(name)
    rc, out, err = run("schema", fixture(name), check_rc=0)
    lines = out.splitlines()
    heads = [ln for ln in lines if not ln.startswith(" ")]
    assert len(heads) == len(side["columns"])
    for ln, c in zip(heads, side["columns"]):
        assert ln.startswith(f"{c['name']}: {type_str(c)}")
        assert ("hidden" in ln) == c["hidden"]
    metas = [ln.strip() for ln in lines if ln.startswith(" ")]
    expected = ["-- metadata: " + ", ".join(f"{a['kind']}: {type_str(a)}"
                                            for a in c["annotations"])
                for c in side["columns"] if c["annotations"]]
    assert metas == expected


def test_schema_json():
    name = "pipeline_keys"
    side = sidecar(name)
    got = run_json("schema", fixture(name))
    assert got["num_rows"] == side["row_count"]
    assert [c["name"] for c in got["columns"]] == [c["name"] for c in side["columns"]]
    for g, c in zip(got["columns"], side["columns"]):
        assert g["type"] == type_str(c)
        assert g["metadata"] == {a["kind"]: type_str(a) for a in c["annotations"]}


def test_no_columns_file():
    name = "no_columns"
    rc, out, err = run("info", fixture(name), check_rc=0)
    assert re.search(r"^columns:\s+0$", out, re.M) and re.search(r"^rows:\s+5$", out, re.M)
    rc, out, err = run("head", fixture(name), check_rc=0)
    assert "5 rows, no columns" in out
    rc, out, err = run("schema", fixture(name), check_rc=0)
    assert out.strip() == "(no columns)"


# ---------------------------------------------------------------- head

def _check_cell(got, cell, col):
    """A CLI JSON cell against a sidecar cell."""
    item = col["item_type"]
    if col["is_vector"]:
        zero = {"Text": "", "Boolean": False, "Single": "0.0", "Double": "0.0",
                "DateTimeOffset": {"ticks": 0, "offset_minutes": 0}}.get(item, 0)
        exp = densify(cell, zero)
        flat = np.asarray(got, dtype=object).reshape(-1).tolist() if got else []
        assert len(flat) == len(exp), (got, exp)
        for g, e in zip(flat, exp):
            _check_cell(g, e, {**col, "is_vector": False})
        if len(col["dims"]) > 1 and all(col["dims"]):
            assert np.asarray(got, dtype=object).shape == tuple(col["dims"])
        return
    if item in ("Single", "Double"):
        assert same_float(got, cell, np.float32 if item == "Single" else np.float64), (got, cell)
    elif item == "DateTime":
        assert got == ticks_iso(cell)
    elif item == "TimeSpan":
        assert got == timespan_str(cell)
    elif item == "DateTimeOffset":
        m = cell["offset_minutes"]
        sign = "-" if m < 0 else "+"
        assert got == f"{ticks_iso(cell['ticks'])}{sign}{abs(m) // 60:02d}:{abs(m) % 60:02d}"
    else:   # ints, keys (raw), Boolean, Text, RowId
        assert got == cell and type(got) is type(cell), (got, cell)


@pytest.mark.parametrize("name", ["mixed_default", "scalars_numeric", "scalars_text",
                                  "scalars_datetime", "scalars_rowid", "scalars_bool", "keys",
                                  "vectors_fixed", "vectors_variable", "vectors_sparse",
                                  "vectors_misc", "vector_multidim", "pipeline_hidden"])
def test_head_json_matches_the_sidecar(name):
    side = sidecar(name)
    n = min(side["row_count"], 10)
    got = run_json("head", fixture(name), "-n", 10)
    visible = [c for c in side["columns"] if not c["hidden"]]
    assert [c["name"] for c in got["columns"]] == [c["name"] for c in visible]
    assert [c["index"] for c in got["columns"]] == [c["index"] for c in visible]
    for g, c in zip(got["columns"], visible):
        assert norm_type(g["type"]) == norm_type(type_str(c))
    assert got["num_rows"] == side["row_count"] and got["start"] == 0
    assert len(got["data"]) == n
    for r in range(n):
        for j, c in enumerate(visible):
            _check_cell(got["data"][r][j], side["rows"][r][c["index"]], c)


def test_head_start_and_columns_on_a_multiblock_file():
    name = "multiblock_200k_deflate"
    side = sidecar(name)
    names = [c["name"] for c in side["columns"]]
    for start, n, first in [(199_998, 5, 199_998), (-3, 2, 199_997), (8190, 4, 8190),
                            (100_000, 1, 100_000)]:
        got = run_json("head", fixture(name), "--start", start, "-n", n,
                       "--columns", "Name,Id,X")
        assert [c["name"] for c in got["columns"]] == ["Name", "Id", "X"]
        rows = list(range(first, min(first + n, side["row_count"])))
        assert got["start"] == first and len(got["data"]) == len(rows)
        for g, r in zip(got["data"], rows):
            exp = side["rows"][r]
            assert g[0] == exp[names.index("Name")]
            assert g[1] == exp[names.index("Id")]
            assert same_float(g[2], exp[names.index("X")], np.float32)


def test_head_decodes_only_the_blocks_it_shows(monkeypatch, capsys):
    sys.path.insert(0, str(REPO))
    import idv.reader
    from idv.cli import main
    calls = []
    original = idv.reader.Column._read_blocks

    def spy(self, b0, b1, sparse=False):
        calls.append((self.name, b0, b1))
        return original(self, b0, b1, sparse)
    monkeypatch.setattr(idv.reader.Column, "_read_blocks", spy)
    path = str(fixture("multiblock_200k_none"))
    assert main(["head", path, "-n", "3"]) == 0
    assert sorted(calls) == sorted((c, 0, 1) for c in ("Id", "X", "Name", "Flag"))
    calls.clear()
    assert main(["head", path, "--start", "8191", "-n", "2", "--columns", "Id"]) == 0
    assert calls == [("Id", 0, 2)]
    calls.clear()
    assert main(["head", path, "-n", "0", "--columns", "Name"]) == 0
    assert all(b1 <= b0 for _, b0, b1 in calls)
    out = capsys.readouterr().out
    assert "8191" in out and "8192" in out


def test_head_text_table():
    name = "mixed_default"
    side = sidecar(name)
    rc, out, err = run("head", fixture(name), check_rc=0)
    lines = out.splitlines()
    assert lines[0].split() == ["#"] + [c["name"] for c in side["columns"]]
    assert [norm_type(t) for t in re.split(r"\s{2,}", lines[1].strip())] == \
        [norm_type(type_str(c)) for c in side["columns"]]
    rows = table_rows(out)
    assert len(rows) == 10                         # -n defaults to 10
    assert lines[-1] == f"(rows 0-9 of {side['row_count']})"
    names = [c["name"] for c in side["columns"]]
    for i, r in enumerate(rows):
        exp = side["rows"][i]
        assert r[0] == str(i)
        assert r[1] == str(exp[names.index("Id")])
        assert ticks_iso(exp[names.index("DT")]) in r
        txt = exp[names.index("Txt")]
        if txt:
            assert txt in r
    assert "t1é" in out
    assert "[1.0, 2.0, 3.0, 4.0]" in out              # a dense Vector<Single, 4> row
    assert "[1.0, 0.0, 0.0, 0.0]" in out              # a sparse row, densified
    assert "[0, 1, 2]" in out                          # a variable Vector<Int16> row
    rc, out, err = run("head", fixture(name), "-n", 3, check_rc=0)
    assert len(table_rows(out)) == 3 and out.splitlines()[-1] == "(rows 0-2 of 100)"
    rc, out, err = run("head", fixture(name), "-n", 1000, check_rc=0)
    assert len(table_rows(out)) == 100
    rc, out, err = run("head", fixture(name), "-n", 0, check_rc=0)
    assert table_rows(out) == [] and "(0 rows of 100)" in out


def test_head_shows_vectors_compactly():
    name = "pipeline_featurize_text"
    rc, out, err = run("head", fixture(name), "-n", 3, "--columns", "ReviewFeatures",
                       "--max-width", 0, check_rc=0)
    for r in table_rows(out):
        cell = r[1]
        assert cell.startswith("[") and cell.endswith(", ...]")
        assert cell.count(",") == 5                  # five items, then "..."
    rc, out, err = run("head", fixture("vector_multidim"), "-n", 1, "--columns", "Mat2x3",
                       check_rc=0)
    assert "[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]" in out


def test_head_dates_print_right_outside_numpys_nanosecond_range():
    name = "scalars_datetime"
    side = sidecar(name)
    rc, out, err = run("head", fixture(name), check_rc=0)
    rows = table_rows(out)
    for r, exp in zip(rows, side["rows"]):
        dt, dto, ts = exp
        assert r[1] == ticks_iso(dt)
        assert r[3] == timespan_str(ts)
    assert "0001-01-01T00:00:00" in out and "9999-12-31T23:59:59.9999999" in out
    assert "1754-08-30" not in out     # what numpy prints for 0001-01-01 in 100ns units


def test_head_escapes_control_characters_in_text():
    rc, out, err = run("head", fixture("scalars_text"), "-n", 14, "--max-width", 0, check_rc=0)
    assert "tab\\tnew\\nline" in out and "nul\\x00inside" in out
    assert "emoji 😀 pair" in out and "日本語" in out
    assert len(out.splitlines()) == 14 + 4     # no row broke across lines


def test_head_on_legacy_file_matches_mlnets_text_dump():
    """datatypes.idv (1.1.1.5, DvBool/DvDateTime...) against ML.NET's own TextLoader dump."""
    idv_path = shared_file("mlnet-files", "datatypes.idv")
    dump = shared_file("mlnet-files", "Datatypes-datatypes.txt").read_text(encoding="utf-8")
    lines = [ln for ln in dump.splitlines() if not ln.startswith("#@")]
    names = lines[0].split("\t")
    got = run_json("head", idv_path)
    assert [c["name"] for c in got["columns"]] == names
    data = [ln.split("\t") for ln in lines[1:]]
    assert len(got["data"]) == len(data)
    for g_row, d_row in zip(got["data"], data):
        if len(d_row) != len(names):     # ML.NET's sparse row form "9 0:0": all defaults
            assert g_row[names.index("i4")] == 0 and g_row[names.index("tx")] == ""
            assert g_row[names.index("dt")] == "0001-01-01T00:00:00"
            continue
        for name, g, d in zip(names, g_row, d_row):
            d = d.strip('"')
            if name == "bl":
                assert g is bool(int(d))
            elif name in ("i1", "i2", "i4", "i8"):
                assert g == int(d)
            elif name in ("dt", "dto"):
                assert g == d.replace(".0000000", "")
            else:
                assert g == d, (name, g, d)


# ---------------------------------------------------------------- zip entries

def test_zip_entry(tmp_path):
    name = "mixed_smallblocks_deflate"
    side = sidecar(name)
    zpath = tmp_path / "bundle.zip"
    with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(fixture(name), "DataLoaderModel/data.idv")
    spec = f"{zpath}:DataLoaderModel/data.idv"
    info = run_json("info", spec)
    assert info["num_rows"] == side["row_count"]
    got = run_json("head", spec, "-n", 2, "--columns", "Id,Txt")
    assert [r[1] for r in got["data"]] == [side["rows"][i][4] for i in range(2)]
    rc, out, err = run("info", f"{zpath}:nope.idv")
    assert rc == 1
    assert_one_line_error(err, "nope.idv", "DataLoaderModel/data.idv")
    rc, out, err = run("info", zpath)
    assert rc == 1
    assert_one_line_error(err, "zip", "DataLoaderModel/data.idv")


def test_model_zip_entries_with_backslash_names_and_length_prefix():
    zp = MODEL_ZIPS / "modelwithoptionalcolumntransform.zip"
    if not zp.exists():
        pytest.skip(f"{zp} not available")
    with zipfile.ZipFile(zp) as z:
        entries = [n for n in z.namelist() if n.lower().endswith(".idv")]
        raw = {n: z.read(n) for n in entries}
    assert any("\\" in n for n in entries)      # stored with Windows separators
    prefixed = [n for n in entries if raw[n][4:12] == b"CML\x00DVB\x00"]
    assert prefixed, "the optional-column transform's Schema.idv has an int32 length prefix"
    for n in entries:
        for spelled in (n, n.replace("\\", "/")):
            info = run_json("info", f"{zp}:{spelled}")
            body = raw[n][4:] if n in prefixed else raw[n]
            assert info["file_size"] == len(body)
            assert info["num_columns"] == struct.unpack_from("<i", body, 48)[0]
            assert info["num_rows"] == struct.unpack_from("<q", body, 40)[0]


def test_python_dash_m_and_console_entry_agree(tmp_path):
    """`python -m idv` and the `idv` console script (when installed) print the same."""
    path = fixture("keys")
    rc, out, err = run("schema", path, check_rc=0)
    exe = shutil.which("idv")
    if exe is None:
        assert "KeyWithText: Key<UInt32, 3>" in out
        return
    p = subprocess.run([exe, "schema", str(path)], capture_output=True, timeout=60)
    assert p.returncode == 0 and p.stdout.decode() == out
