"""The ``idv`` command line on real ML.NET files, run through ``idv.cli.main`` as ``python -m
idv`` runs it (cli_run.run), and in a child process where only a process shows what is checked.

Expected output is derived from the fixtures' JSON sidecars (what ML.NET read back) and from
ML.NET's own text dump of datatypes.idv, not from this reader.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from cli_run import (assert_one_line_error, check_cell, csv_columns, norm_type, read_delimited,
                     run, run_json, run_main, run_process, same_float, table_rows)
from expected import column_index, our_type_string
from reference import (REPO_DIR, SAMPLE_DIR, fixture, model_zip_entries, sample_params,
                       shared_path, sidecar, regenerated_fixtures)
from textdump import ticks_iso, timespan_str

COMMANDS = ("info", "head", "schema", "verify", "cat", "slice", "convert")
OPTIONAL_COLUMN_ZIP = "modelwithoptionalcolumntransform.zip"   # .idv entries with \ in names


# ---------------------------------------------------------------- usage, help, exit codes

def test_help_lists_the_commands():
    rc, out, err = run("--help", check_rc=0)
    listed = re.findall(r"^    (\w+)", out, re.M)
    assert listed == ["info", "head", "schema", "verify", "stats", "cat", "convert", "sample",
                      "ls"]
    assert "cat (slice)" in out
    for cmd in COMMANDS:
        rc, out, err = run(cmd, "--help", check_rc=0)
        assert out.startswith(f"usage: idv {'cat' if cmd == 'slice' else cmd} ")
        assert "--json" in out and "-v, --verbose" in out
        assert err == ""
    rc, out, err = run("head", "--help", check_rc=0)
    assert "-n N" in out and "--columns" in out
    rc, out, err = run("cat", "--help", check_rc=0)
    assert "--rows A:B" in out and "{table,csv,tsv,json,jsonl}" in out
    rc, out, err = run("convert", "--help", check_rc=0)
    for opt in ("--to FORMAT", "--from FORMAT", "--columns", "--compression NAME",
                "--rows-per-block N", "--progress"):
        assert opt in out
    rc, out, err = run("verify", "--help", check_rc=0)
    assert "--strict" in out


def test_version():
    """`python -m idv` itself (a child process) and idv.cli.main print the same version."""
    rc, out, err = run("--version", check_rc=0, process=True)
    assert re.match(r"idv \d+\.\d+", out)
    assert run("--version", check_rc=0) == (rc, out, err)


@pytest.mark.parametrize("args", [
    [], ["frobnicate", "x.idv"], ["info"], ["head"], ["info", "x.idv", "--bogus"],
    ["head", "{f}", "-n", "abc"], ["head", "{f}", "-n", "-1"], ["schema", "{f}", "extra"],
    ["verify"], ["verify", "{f}", "--bogus"], ["cat"], ["cat", "{f}", "--rows", "a:b"],
    ["cat", "{f}", "--rows", "1:2:3:4"], ["cat", "{f}", "--rows", "::0"],
    ["cat", "{f}", "--rows", "::-1"], ["cat", "{f}", "--format", "xml"], ["slice", "{f}", "x"],
    ["convert", "{f}"], ["convert", "{f}", "out.idv", "--rows-per-block", "0"],
    ["convert", "{f}", "out.idv", "--no-such-option"], ["info", "{f}", "--threads", "0"],
])
def test_usage_errors_exit_2(args):
    f = fixture("mixed_default")
    rc, out, err = run(*[a.format(f=f) for a in args])
    assert rc == 2, (out, err)
    assert "usage: idv" in err
    assert out == ""


@pytest.mark.parametrize("option", ["-n", "--max-width", "--rows-per-block", "--threads"])
def test_a_count_that_is_no_number_says_what_the_option_takes(option):
    """argparse names the function that parsed a value in its error: the message says what
    the option takes instead ("invalid _nonneg value")."""
    f = fixture("mixed_default")
    command = ["convert", f, "out.idv"] if option == "--rows-per-block" else ["head", f]
    rc, out, err = run(*command, option, "abc")
    assert rc == 2 and f"argument {option}" in err and "takes a whole number, not 'abc'" in err
    assert "_nonneg" not in err and "_positive" not in err, err


def test_unknown_column_is_a_usage_error():
    rc, out, err = run("head", fixture("mixed_default"), "--columns", "Id,Nope")
    assert rc == 2
    assert_one_line_error(err, "Nope", "Id")


def test_unknown_backend_is_a_usage_error():
    rc, out, err = run("info", fixture("mixed_default"), "--backend", "nope")
    assert rc == 2 and err.splitlines()[-1] == "idv info: error: argument --backend: takes " \
        "a DEFLATE library, libdeflate, isal, zlib; not 'nope'"


def test_main_returns_codes_in_process(capsys):
    from idv.cli import main
    assert main(["schema", str(fixture("keys"))]) == 0
    assert "KeyU4: Key<UInt32, 5>" in capsys.readouterr().out
    assert main(["info", str(SAMPLE_DIR / "definitely-missing.idv")]) == 1
    assert main(["nonsense"]) == 2
    assert main(["--help"]) == 0


# ---------------------------------------------------------------- bad files

def test_missing_file_exits_1_with_one_line(tmp_path):
    missing = tmp_path / "missing.idv"
    for cmd in ("info", "head", "schema", "verify", "cat", "slice"):
        rc, out, err = run(cmd, missing)
        assert rc == 1 and out == ""
        assert_one_line_error(err, str(missing), "no such file")


def test_a_missing_later_file_is_named_and_a_stray_word_is_a_usage_error(tmp_path):
    """FILE [FILE ...]: a missing second file is reported as missing, as a first one is;
    a word that is no file's name stays an argument too many."""
    (tmp_path / "a.idv").write_bytes(fixture("mixed_default").read_bytes())
    for missing in ("b.idv", "day/2"):
        rc, out, err = run_main("info", "a.idv", missing, cwd=tmp_path)
        assert (rc, out) == (1, "")
        assert_one_line_error(err, missing, "no such file")
    rc, out, err = run_main("info", "a.idv", "5", cwd=tmp_path)
    assert rc == 2 and "unrecognized arguments: 5" in err


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
        assert norm_type(got["type"]) == norm_type(our_type_string(c["type_string"]))
        assert got["hidden"] == c["hidden"] and got["readable"] is True
        assert got["codec"] == toc["codec"]
        assert got["compression"] == toc["compression"]
        assert got["rows_per_block"] == toc["rows_per_block"]
        assert got["blocks"] == -(-n // toc["rows_per_block"])
        assert list(got["metadata"]) == [a["kind"] for a in c["annotations"]]
        for a in c["annotations"]:
            assert norm_type(got["metadata"][a["kind"]]) == \
                norm_type(our_type_string(a["type_string"]))
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
        assert r[:7] == [str(c["index"]), c["name"], our_type_string(c["type_string"]),
                         toc["codec"], toc["compression"], str(toc["rows_per_block"]), "15"]
        assert int(r[7]) > 0 and int(r[8]) > 0
        for a in c["annotations"]:
            assert f"{a['kind']}: {our_type_string(a['type_string'])}" in r[9]
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
        assert ln.startswith(f"{c['name']}: {our_type_string(c['type_string'])}")
        assert ("hidden" in ln) == c["hidden"]
    metas = [ln.strip() for ln in lines if ln.startswith(" ")]
    annotations = [a for c in side["columns"] for a in c["annotations"]]
    assert len(metas) == len(annotations)
    for ln, a in zip(metas, annotations):    # "KeyValues (Vector<Text, 7>): ['k0', ...]"
        head = f"{a['kind']} ({our_type_string(a['type_string'])}): "
        assert ln.startswith(head), (ln, head)
        value = a["value"]
        if isinstance(value, list) and len(value) <= 10 and all(isinstance(v, str) for v in value):
            assert ln[len(head):] == "[" + ", ".join(repr(v) for v in value) + "]"
        elif isinstance(value, list) and len(value) > 10:
            assert ln.endswith(f"... ({len(value)} in all)")


def test_schema_json():
    name = "pipeline_keys"
    side = sidecar(name)
    got = run_json("schema", fixture(name))
    assert got["num_rows"] == side["row_count"]
    assert [c["name"] for c in got["columns"]] == [c["name"] for c in side["columns"]]
    for g, c in zip(got["columns"], side["columns"]):
        assert g["type"] == our_type_string(c["type_string"])
        assert g["metadata"] == {a["kind"]: our_type_string(a["type_string"])
                                 for a in c["annotations"]}
        for a in c["annotations"]:        # the values, as ML.NET read them
            if a["item_type"] == "Text" or isinstance(a["value"], (bool, str)):
                assert g["metadata_values"][a["kind"]] == a["value"], (c["name"], a["kind"])


def test_no_columns_file():
    name = "no_columns"
    rc, out, err = run("info", fixture(name), check_rc=0)
    assert re.search(r"^columns:\s+0$", out, re.M) and re.search(r"^rows:\s+5$", out, re.M)
    rc, out, err = run("head", fixture(name), check_rc=0)
    assert "5 rows, no columns" in out
    rc, out, err = run("schema", fixture(name), check_rc=0)
    assert out.strip() == "(no columns)"


# ---------------------------------------------------------------- head


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
        assert norm_type(g["type"]) == norm_type(our_type_string(c["type_string"]))
    assert got["num_rows"] == side["row_count"] and got["start"] == 0
    assert len(got["data"]) == n
    for r in range(n):
        for j, c in enumerate(visible):
            check_cell(got["data"][r][j], side["rows"][r][c["index"]], c)


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


def _spy_decodes(monkeypatch):
    """A list that gets (column name, b0, b1) of every run of blocks decoded: through a
    column's read_blocks, or inflated with other columns' in one call (fixed-width ones)."""
    sys.path.insert(0, str(REPO_DIR))
    import idv._store.blocks
    import idv._reader.reader
    calls = []
    read_blocks = idv._reader.reader.Column.read_blocks
    inflate_fixed = idv._store.blocks.BlockStore.inflate_fixed

    def spy_read(self, b0, b1, sparse=False, **how):
        calls.append((self.name, b0, b1))
        return read_blocks(self, b0, b1, sparse, **how)

    def spy_inflate(self, pieces, *args, **kwargs):
        calls.extend((blocks.name, b0, b1) for blocks, b0, b1, _out in pieces)
        return inflate_fixed(self, pieces, *args, **kwargs)
    monkeypatch.setattr(idv._reader.reader.Column, "read_blocks", spy_read)
    monkeypatch.setattr(idv._store.blocks.BlockStore, "inflate_fixed", spy_inflate)
    return calls


def test_head_decodes_only_the_blocks_it_shows(monkeypatch, capsys):
    from idv.cli import main
    calls = _spy_decodes(monkeypatch)
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
        [norm_type(our_type_string(c["type_string"])) for c in side["columns"]]
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
    idv_path = shared_path("mlnet-files", "datatypes.idv")
    dump = shared_path("mlnet-files", "Datatypes-datatypes.txt").read_text(encoding="utf-8")
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
    zp = shared_path("mlnet-files", "model-zips", OPTIONAL_COLUMN_ZIP)
    entries = [e for z, e in model_zip_entries() if z == zp.name]
    with zipfile.ZipFile(zp) as z:
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


# ---------------------------------------------------------------- verify

@pytest.mark.parametrize("name", sample_params())
def test_verify_every_fixture_is_sound(name):
    side = sidecar(name)
    got = run_json("verify", fixture(name))
    tocs = side["table_of_contents"]["columns"]
    assert got["ok"] is True and got["problems"] == [] and got["warnings"] == []
    assert got["num_rows"] == side["row_count"]
    assert got["num_columns"] == len(side["columns"])
    blocks = sum(num_blocks(side, t) for t in tocs)
    assert got["checked"]["blocks"] == blocks
    assert got["checked"]["columns"] == len(side["columns"])
    assert got["checked"]["lookup_tables"] == (len(tocs) if side["row_count"] else 0)
    assert got["checked"]["metadata"] == sum(len(c["annotations"]) for c in side["columns"])
    for g, c in zip(got["columns"], side["columns"]):
        toc = next(t for t in tocs if t["column_index"] == c["index"])
        assert (g["index"], g["name"]) == (c["index"], c["name"])
        assert g["blocks"] == g["blocks_ok"] == num_blocks(side, toc)
        assert g["metadata"] == len(c["annotations"])
    if side["row_count"]:   # every block counted once: the disk bytes add up
        disk = sum(lookup_entry(fixture(name), side, t["column_index"], b)[1]
                   for t in tocs for b in range(num_blocks(side, t)))
        assert got["checked"]["block_bytes"] == disk
    rc, out, err = run("verify", fixture(name), check_rc=0)
    assert out.splitlines()[0] == f"{fixture(name)}: OK" and err == ""
    assert f"{blocks} block" in out.splitlines()[-1]


@pytest.mark.parametrize("path", [f.idv_path for f in regenerated_fixtures()], ids=lambda p: p.stem)
def test_verify_testdata_files_are_sound(path):
    got = run_json("verify", path)
    assert got["ok"] and not got["problems"]
    assert got["checked"]["blocks"] == sum(c["blocks"] for c in got["columns"]) > 0


def test_verify_model_zip_entries():
    zp = shared_path("mlnet-files", "model-zips", OPTIONAL_COLUMN_ZIP)
    entries = [e for z, e in model_zip_entries() if z == zp.name]
    assert entries
    for n in entries:
        got = run_json("verify", f"{zp}:{n}")
        assert got["ok"] and got["problems"] == []


def test_verify_decodes_every_block_and_metadata_value(monkeypatch, capsys):
    """In process, with spies: each block of each column decoded (vectors' as stored), each
    annotation decoded."""
    name = "mixed_smallblocks_deflate"
    side = sidecar(name)
    sys.path.insert(0, str(REPO_DIR))
    import idv._reader.reader
    import idv._store.blocks
    from idv.cli import main
    blocks, metas = [], []
    read_blocks = idv._reader.reader.Column.read_blocks
    stored_vectors = idv._store.blocks.BlockStore.stored_vectors
    decode_metadata = idv._reader.reader.Column.decode_metadata

    def spy_blocks(self, b0, b1, sparse=False):
        blocks.extend((self.index, b) for b in range(b0, b1))
        return read_blocks(self, b0, b1, sparse)

    def spy_vectors(self, column, b0, b1, parallel=True):
        blocks.extend((column.index, b) for b in range(b0, b1))
        return stored_vectors(self, column, b0, b1, parallel)

    def spy_meta(self, m):
        metas.append((self.index, m.kind))
        return decode_metadata(self, m)
    monkeypatch.setattr(idv._reader.reader.Column, "read_blocks", spy_blocks)
    monkeypatch.setattr(idv._store.blocks.BlockStore, "stored_vectors", spy_vectors)
    monkeypatch.setattr(idv._reader.reader.Column, "decode_metadata", spy_meta)
    assert main(["verify", str(fixture(name))]) == 0
    nb = -(-side["row_count"] // side["table_of_contents"]["columns"][0]["rows_per_block"])
    assert sorted(set(blocks)) == [(c["index"], b) for c in side["columns"] for b in range(nb)]
    assert sorted(metas) == sorted((c["index"], a["kind"]) for c in side["columns"]
                                   for a in c["annotations"])
    assert "OK" in capsys.readouterr().out


def test_verify_reports_every_corrupt_block(tmp_path):
    name = "mixed_smallblocks_deflate"
    hits = {("Txt", 0), ("Txt", 9), ("Vec", 3), ("DT", 14)}
    where = {}

    def damage(data, side):
        for col, b in hits:
            off, disk, raw = lookup_entry(fixture(name), side, column_index(side, col), b)
            where[col, b] = (off, disk)
            data[off:off + disk] = b"\xff" * disk    # not a valid DEFLATE stream
    bad, side = _corrupt_copy(tmp_path, name, damage)
    rc, out, err = run("verify", bad)
    assert rc == 1
    assert_one_line_error(err, str(bad), "4 problems")
    lines = out.splitlines()
    assert lines[0] == f"{bad}: 4 problems"
    for (col, b), (off, disk) in where.items():
        i = column_index(side, col)
        line = next(ln for ln in lines if f"column {i} '{col}' block {b} " in ln)
        rpb = side["table_of_contents"]["columns"][i]["rows_per_block"]
        assert f"(rows {b * rpb}-{min(b * rpb + rpb, side['row_count']) - 1})" in line
        assert f"at byte {off} ({disk} bytes)" in line
    got = json.loads(run("verify", bad, "--json")[1])
    assert got["ok"] is False
    assert {(p["name"], p["block"]) for p in got["problems"]} == hits
    assert all(p["what"] == "block" and p["offset"] == where[p["name"], p["block"]][0]
               for p in got["problems"])
    ok = {c["name"]: c["blocks_ok"] for c in got["columns"]}
    assert ok == {c["name"]: 15 - sum(1 for h in hits if h[0] == c["name"])
                  for c in side["columns"]}


def test_verify_finds_a_flipped_byte_in_an_uncompressed_text_block(tmp_path):
    name = "mixed_smallblocks_none"

    def damage(data, side):
        i = column_index(side, "Txt")
        off, disk, raw = lookup_entry(fixture(name), side, i, 2)
        data[off] ^= 0x7f          # the first row's end offset: lengths no longer add up
    bad, side = _corrupt_copy(tmp_path, name, damage)
    got = json.loads(run("verify", bad, "--json")[1])
    assert not got["ok"]
    assert [(p["what"], p["name"], p["block"]) for p in got["problems"]] == \
        [("block", "Txt", 2)]


@pytest.mark.parametrize("cut", [0, 100, 255, "half", -9, -1])
def test_verify_truncated_file_exits_1(tmp_path, cut):
    data = fixture("mixed_default").read_bytes()
    n = len(data) // 2 if cut == "half" else (cut if cut >= 0 else len(data) + cut)
    bad = tmp_path / "truncated.idv"
    bad.write_bytes(data[:n])
    rc, out, err = run("verify", bad)
    assert rc == 1
    assert_one_line_error(err, "1 problem found")
    assert out.startswith(f"{bad}: 1 problem\n  file: ")
    got = json.loads(run("verify", bad, "--json")[1])
    assert got["ok"] is False and [p["what"] for p in got["problems"]] == ["file"]
    assert got["num_rows"] is None


def test_verify_reports_each_bad_lookup_entry(tmp_path):
    name = "mixed_smallblocks_deflate"

    def damage(data, side):
        toc = side["table_of_contents"]["columns"][column_index(side, "F64")]
        for b, off in ((2, 10**12), (5, 3), (11, -8)):
            struct.pack_into("<q", data, toc["lookup_offset"] + 16 * b, off)
    bad, side = _corrupt_copy(tmp_path, name, damage)
    got = json.loads(run("verify", bad, "--json")[1])
    lo = side["table_of_contents"]["columns"][2]["lookup_offset"]
    probs = [p for p in got["problems"] if p["what"] == "lookup"]
    assert sorted(p["block"] for p in probs) == [2, 5, 11]
    assert all(p["name"] == "F64" and p["offset"] == lo + 16 * p["block"] for p in probs)
    assert [c["blocks_ok"] for c in got["columns"] if c["name"] == "F64"] == [0]
    assert any(w["name"] == "F64" and "lookup table" in w["message"] for w in got["warnings"])
    # the other columns were still decoded
    assert all(c["blocks_ok"] == 15 for c in got["columns"] if c["name"] != "F64")
    rc, out, err = run("verify", bad)
    assert rc == 1 and f"column 2 'F64' lookup table entry 5 at byte {lo + 80}" in out


def test_verify_reports_an_impossible_block_length(tmp_path):
    name = "mixed_smallblocks_none"

    def damage(data, side):
        toc = side["table_of_contents"]["columns"][column_index(side, "F64")]
        struct.pack_into("<i", data, toc["lookup_offset"] + 16 * 3 + 12, 999)   # raw length
    bad, side = _corrupt_copy(tmp_path, name, damage)
    lo = side["table_of_contents"]["columns"][2]["lookup_offset"]
    rc, out, err = run("verify", bad)
    assert rc == 1
    assert f"column 2 'F64' lookup table entry 3 at byte {lo + 48}: decompressed length 999" \
        in out
    got = json.loads(run("verify", bad, "--json")[1])
    assert [(p["what"], p["block"]) for p in got["problems"]] == [("lookup", 3)]


def test_verify_reports_corrupt_metadata(tmp_path):
    name = "mixed_smallblocks_deflate"
    sys.path.insert(0, str(REPO_DIR))
    import idv
    with idv.open(fixture(name)) as f:     # where the metadata value is (checked below)
        m = f["Key"].metadata_entries()[0]
        offset, size = m.offset, m.size

    def damage(data, side):
        data[offset:offset + size] = b"\x07" * size
    bad, side = _corrupt_copy(tmp_path, name, damage)
    assert side["columns"][5]["annotations"][0]["kind"] == m.kind == "KeyValues"
    got = json.loads(run("verify", bad, "--json")[1])
    assert [(p["what"], p["name"], p["kind"], p["offset"]) for p in got["problems"]] == \
        [("metadata", "Key", "KeyValues", offset)]
    assert got["checked"]["metadata"] == 1           # Vec's SlotNames still decoded
    rc, out, err = run("verify", bad)
    assert rc == 1 and f"column 5 'Key' metadata 'KeyValues' at byte {offset}" in out


def test_verify_reports_overlapping_blocks(tmp_path):
    name = "mixed_smallblocks_none"

    def damage(data, side):
        i = column_index(side, "F32")
        toc = side["table_of_contents"]["columns"][i]
        off0 = lookup_entry(fixture(name), side, i, 0)[0]
        entry = toc["lookup_offset"] + 16
        struct.pack_into("<q", data, entry, off0)    # block 1 now reads block 0's bytes
    bad, side = _corrupt_copy(tmp_path, name, damage)
    got = json.loads(run("verify", bad, "--json")[1])
    assert [p["what"] for p in got["problems"]] == ["file"]     # refused at open
    msg = got["problems"][0]["message"]
    assert "column 1 'F32' block 1" in msg and "overlaps column 1 'F32' block 0" in msg


def test_verify_unknown_codec_is_a_warning_unless_strict(tmp_path):
    path = _with_unknown_codec(tmp_path)
    rc, out, err = run("verify", path, check_rc=0)
    assert out.splitlines()[0] == f"{path}: OK, 1 warning"
    assert "warning: column 2 'F64': not checked" in out and "Dooble" in out
    assert err == ""
    got = run_json("verify", path)
    assert got["ok"] and len(got["warnings"]) == 1 and got["warnings"][0]["name"] == "F64"
    assert got["checked"]["columns"] == 8 and got["checked"]["lookup_tables"] == 9
    rc, out, err = run("verify", path, "--strict")
    assert rc == 1
    assert_one_line_error(err, "1 warning (--strict)")


# ---------------------------------------------------------------- cat / slice


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
@pytest.mark.parametrize("name", ["mixed_default", "scalars_numeric", "scalars_text",
                                  "scalars_datetime", "scalars_rowid", "scalars_bool", "keys",
                                  "vectors_fixed", "vectors_variable", "vectors_sparse",
                                  "vectors_misc", "vector_multidim", "pipeline_hidden"])
def test_cat_csv_matches_the_sidecar(name, fmt):
    side = sidecar(name)
    rc, out, err = run("cat", fixture(name), "--format", fmt, check_rc=0)
    table = read_delimited(out, "," if fmt == "csv" else "\t")
    visible, rows = csv_columns(table, side)
    assert len(rows) == side["row_count"]
    for r, row in enumerate(rows):
        for got, c in zip(row, visible):
            check_cell(got, side["rows"][r][c["index"]], c)


def test_cat_rows_and_columns_on_a_multiblock_file():
    name = "multiblock_200k_deflate"
    side = sidecar(name)
    names = [c["name"] for c in side["columns"]]
    for spec, rows in [("8190:8195", range(8190, 8195)), ("199997:", range(199997, 200000)),
                       ("-2:", range(199998, 200000)), (":3", range(3)),
                       ("::50000", range(0, 200000, 50000)), ("100:40000:9999",
                                                              range(100, 40000, 9999)),
                       ("12345", [12345]), ("-1", [199999]), ("5:5", [])]:
        got = run_json("cat", fixture(name), f"--rows={spec}", "--columns", "Name,Id,X")
        assert [c["name"] for c in got["columns"]] == ["Name", "Id", "X"]
        assert got["rows"]["count"] == len(rows) == len(got["data"]), spec
        for g, r in zip(got["data"], rows):
            exp = side["rows"][r]
            assert g[0] == exp[names.index("Name")] and g[1] == exp[names.index("Id")]
            assert same_float(g[2], exp[names.index("X")], np.float32)


def test_cat_streams_the_whole_file_as_csv():
    name = "multiblock_200k_none"
    side = sidecar(name)
    rc, out, err = run("cat", fixture(name), "-f", "csv", "--no-header", check_rc=0)
    lines = out.splitlines()
    assert len(lines) == side["row_count"]
    for r in (0, 8191, 8192, 100_000, 199_999):
        vals = lines[r].split(",")
        exp = side["rows"][r]
        assert int(vals[0]) == exp[0] and vals[2] == exp[2]
        assert same_float(float(vals[1]), exp[1], np.float32)
        assert vals[3] == ("true" if exp[3] else "false")


def test_columns_by_glob():
    """--columns takes globs (idv._reader.selection's rule) beside names and indices, in the order
    given; a glob that matches nothing is a usage error naming the columns."""
    path = fixture("mixed_default")
    names = [c["name"] for c in sidecar("mixed_default")["columns"]]
    assert len(set(names)) == len(names)      # no hidden columns: every name is visible
    starting = [n for n in names if n.startswith("F")]
    assert len(starting) >= 2
    got = run_json("head", path, "-n", "1", "--columns", f"F*,{names[0]}")
    assert [c["name"] for c in got["columns"]] == starting + [names[0]]
    rc, out, err = run("cat", path, "--columns", "Zz*")
    assert rc == 2 and "no column matches 'Zz*'" in err, err


def test_cat_decodes_each_needed_block_once(monkeypatch, capsys):
    from idv.cli import main
    runs = _spy_decodes(monkeypatch)

    def calls():        # each block decoded, in order
        return [(name, b) for name, b0, b1 in runs for b in range(b0, b1)]
    path = str(fixture("multiblock_200k_none"))     # 8192 rows per block
    assert main(["cat", path, "--rows", "8191:8193", "--columns", "Id", "-f", "csv"]) == 0
    assert calls() == [("Id", 0), ("Id", 1)]
    assert capsys.readouterr().out.split() == ["Id", "8191", "8192"]
    runs.clear()
    assert main(["slice", path, "--rows", "::50000", "-c", "Name,Flag", "--json"]) == 0
    assert sorted(calls()) == sorted((c, b) for c in ("Name", "Flag") for b in (0, 6, 12, 18))
    assert len(json.loads(capsys.readouterr().out)["data"]) == 4
    runs.clear()
    assert main(["cat", path, "-c", "X", "-f", "tsv"]) == 0      # every block, once
    assert calls() == [("X", b) for b in range(25)]
    assert len(capsys.readouterr().out.splitlines()) == 200_001


@pytest.mark.parametrize("args", [["--rows", "-3:"], ["-r", "-3:"], ["--rows=-3:"],
                                  ["--rows", "-3:-1"], ["-r", "-2"]])
def test_a_row_selection_from_the_end_is_taken_with_or_without_equals(args):
    """``--rows -3:`` is the last three rows, as ``--rows=-3:`` (argparse would take a value
    starting with '-' for an option)."""
    rc, out, err = run("cat", fixture("mixed_default"), "-c", "0", "-f", "csv", *args,
                       check_rc=0)
    want = {"-3:": [97, 98, 99], "-3:-1": [97, 98], "-2": [98]}[args[-1].split("=")[-1]]
    side = sidecar("mixed_default")
    assert [ln.strip('"') for ln in out.splitlines()[1:]] == \
        [str(side["rows"][i][0]) for i in want], (out, err)


def test_cat_table_and_jsonl():
    name = "mixed_default"
    side = sidecar(name)
    names = [c["name"] for c in side["columns"]]
    rc, out, err = run("cat", fixture(name), "--rows", "10:13", check_rc=0)
    lines = out.splitlines()
    assert lines[0].split() == ["#"] + names
    rows = table_rows(out)
    assert [r[0] for r in rows] == ["10", "11", "12"]
    assert [r[1] for r in rows] == [str(side["rows"][i][0]) for i in (10, 11, 12)]
    assert lines[-1] == "(3 rows of 100)"
    rc, out, err = run("cat", fixture(name), "--rows", "98:", "-f", "jsonl", check_rc=0)
    objs = [json.loads(ln) for ln in out.splitlines()]
    assert len(objs) == 2 and list(objs[0]) == names
    for obj, r in zip(objs, (98, 99)):
        for c in side["columns"]:
            check_cell(obj[c["name"]], side["rows"][r][c["index"]], c)


def test_slice_is_cat():
    path = fixture("vectors_sparse")
    for args in (["--rows", "1:5", "-f", "csv"], ["--json"], ["-f", "tsv", "-c", "SparseKey"]):
        a = run("cat", path, *args, check_rc=0)
        b = run("slice", path, *args, check_rc=0)
        assert a == b and a[1]


def test_cat_edge_cases(tmp_path):
    rc, out, err = run("cat", fixture("no_columns"), check_rc=0)
    assert out == "(5 rows, no columns)\n"
    got = run_json("cat", fixture("no_columns"))
    assert got["data"] == [[]] * 5 and got["columns"] == []
    rc, out, err = run("cat", fixture("empty_rows"), "-f", "csv", check_rc=0)
    assert out == "F32,Txt,Vec.a,Vec.b,Vec.c,Var,Key,B\n"      # Vec's SlotNames: a, b, c
    got = run_json("cat", fixture("empty_rows"))
    assert got["data"] == [] and got["rows"]["count"] == 0
    rc, out, err = run("cat", fixture("mixed_default"), "--rows", "500:600", "-f", "csv",
                       check_rc=0)
    assert out.splitlines() == ["Id,F32,F64,B,Txt,Key,Vec.a,Vec.b,Vec.c,Vec.d,Var,DT"]
    # one row number: a row of the file (negative from the end), as idv.read's rows=
    n = sidecar("mixed_default")["row_count"]
    for row in (0, n - 1, -1, -n):
        one, in_slice = (run("cat", fixture("mixed_default"), f"--rows={rows}", "-f", "csv",
                             check_rc=0)[1] for rows in (row, f"{row}:{row + 1 or ''}"))
        assert one == in_slice and len(one.splitlines()) == 2
    for row in (n, -n - 1):
        rc, out, err = run("cat", fixture("mixed_default"), f"--rows={row}")
        assert (rc, out) == (2, "")
        assert_one_line_error(err, f"--rows {row}: row {row} out of range for {n} rows")
    rc, out, err = run("cat", fixture("mixed_default"), "-c", "Id,Nope")
    assert rc == 2
    assert_one_line_error(err, "Nope")


def test_cat_unknown_codec_column(tmp_path):
    path = _with_unknown_codec(tmp_path)
    rc, out, err = run("cat", path, "-f", "csv", "--rows", ":2", check_rc=0)
    assert out.splitlines()[0] == "Id,F32,B,Txt,Key,Vec.a,Vec.b,Vec.c,Vec.d,Var,DT"
    assert "warning" in err and "Dooble" in err
    rc, out, err = run("cat", path, "-c", "F64")
    assert rc == 1
    assert_one_line_error(err, "F64", "Dooble", warnings=True)


def test_cat_corrupt_block_is_one_line_error(tmp_path):
    name = "mixed_smallblocks_deflate"

    def damage(data, side):
        off, disk, raw = lookup_entry(fixture(name), side, column_index(side, "Txt"), 4)
        data[off:off + disk] = b"\xff" * disk
    bad, side = _corrupt_copy(tmp_path, name, damage)
    rc, out, err = run("cat", bad, "-c", "Txt", "-f", "csv")
    assert rc == 1
    assert_one_line_error(err, "Txt", "block 4")
    run("cat", bad, "-c", "Txt", "--rows", ":28", "-f", "csv", check_rc=0)   # blocks 0-3


# ---------------------------------------------------------------- convert

needs_convert = pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None,
                                   reason="idv convert needs pyarrow (pip install 'idv[arrow]')")


def test_convert_without_the_converter_is_a_one_line_error(monkeypatch, capsys, tmp_path):
    sys.path.insert(0, str(REPO_DIR))
    from idv.cli import main
    monkeypatch.setitem(sys.modules, "idv.formats", None)     # import idv.formats fails
    rc = main(["convert", str(fixture("mixed_default")), str(tmp_path / "out.idv")])
    err = capsys.readouterr().err
    assert rc == 1
    assert_one_line_error(err, "idv.formats")
    assert not (tmp_path / "out.idv").exists()


def test_progress_bar_only_on_a_terminal(monkeypatch):
    sys.path.insert(0, str(REPO_DIR))
    from idv import cli
    from idv.cli.convert import progress_callback
    args = cli.build_parser().parse_args(["convert", "a.idv", "b.idv"])
    monkeypatch.setattr(sys, "stderr", _FakeStream(tty=False))
    progress, close = progress_callback(args)
    assert progress is None
    pytest.importorskip("tqdm")
    stream = _FakeStream(tty=True)
    monkeypatch.setattr(sys, "stderr", stream)
    progress, close = progress_callback(args)
    assert progress is not None
    progress(0, 200)
    progress(150, 200)
    progress(200, 200)
    close()
    text = "".join(stream.parts)
    assert "b.idv" in text and "200/200" in text and "100%" in text
    args = cli.build_parser().parse_args(["convert", "a.idv", "b.idv", "--no-progress"])
    assert progress_callback(args)[0] is None
    monkeypatch.setitem(sys.modules, "tqdm", None)      # tqdm not installed: no bar
    args = cli.build_parser().parse_args(["convert", "a.idv", "b.idv", "--progress"])
    assert progress_callback(args)[0] is None


@pytest.mark.parametrize("out", ["out.parquet", "out.feather"])
def test_convert_without_pyarrow_names_the_extra(tmp_path, out):
    """pyarrow missing: one line naming the pip command, exit 1, no file left (.idv -> CSV
    needs no pyarrow: idv._interop.delimited writes it)."""
    rc, _, err = run("convert", fixture("mixed_default"), tmp_path / out, hide=("pyarrow",))
    assert rc == 1
    assert_one_line_error(err, "needs pyarrow", "pip install 'idv[arrow]'")
    assert list(tmp_path.iterdir()) == []
    rc, _, err = run("convert", fixture("mixed_default"), tmp_path / "out.csv", "-q",
                     hide=("pyarrow",))
    assert (rc, err) == (0, "") and (tmp_path / "out.csv").exists()


def test_progress_asked_for_without_tqdm_says_so(tmp_path):
    rc, _, err = run("convert", fixture("mixed_default"), tmp_path / "out.idv", "--progress",
                     "-q", hide=("tqdm",))
    assert rc == 0, err
    assert err.strip() == "idv: warning: the progress bar needs tqdm: pip install 'idv[progress]'"
    assert (tmp_path / "out.idv").exists()
    rc, _, err = run("convert", fixture("mixed_default"), tmp_path / "again.idv", "-q",
                     hide=("tqdm",))
    assert (rc, err) == (0, "")        # not asked for (stderr is no terminal here): silent


def test_missing_optional_packages_raise_one_error_type():
    from idv.errors import MissingDependencyError, require
    with pytest.raises(MissingDependencyError, match="pip install 'idv\\[nope\\]'") as e:
        require("idv_no_such_module", "this test", "idv[nope]")
    assert isinstance(e.value, ImportError)
    import idv
    assert idv.MissingDependencyError is MissingDependencyError


@needs_convert
def test_convert_idv_to_idv_with_options(tmp_path):
    name = "mixed_default"
    side = sidecar(name)
    out = tmp_path / "out.idv"
    rc, o, err = run("convert", fixture(name), out, "--columns", "Id,Txt,Vec",
                     "--compression", "none", "--rows-per-block", 7, check_rc=0)
    assert o == ""
    info = run_json("info", out)
    assert [c["name"] for c in info["columns"]] == ["Id", "Txt", "Vec"]
    assert all(c["compression"] == "None" and c["rows_per_block"] == 7
               for c in info["columns"])
    assert info["num_rows"] == side["row_count"]
    assert run_json("verify", out)["ok"]
    got = run_json("cat", out)
    for r, row in enumerate(got["data"]):
        for g, c in zip(row, [side["columns"][i] for i in (0, 4, 6)]):
            check_cell(g, side["rows"][r][c["index"]], c)


def test_convert_takes_threads_and_refuses_compression_of_text(tmp_path):
    """--threads is convert's as every reading command's (it was an unrecognized argument),
    and --compression given for a CSV output, which is never compressed, is a usage error
    (it was ignored)."""
    src = fixture("mixed_default")
    rc, o, err = run("convert", src, tmp_path / "t.idv", "--threads", 1, "-q", check_rc=0)
    assert run_json("verify", tmp_path / "t.idv")["ok"]
    assert run_json("cat", tmp_path / "t.idv")["data"] == run_json("cat", src)["data"]
    rc, o, err = run("convert", src, tmp_path / "t.csv", "--compression", "deflate")
    assert rc == 2 and "--compression: CSV output is not compressed" in err, err
    assert not (tmp_path / "t.csv").exists()
    run("convert", src, tmp_path / "t.csv", "--compression", "none", "-q", check_rc=0)


@needs_convert
def test_convert_json_summary_and_errors(tmp_path):
    out = tmp_path / "out.idv"
    rc, o, err = run("convert", fixture("keys"), out, "--json", check_rc=0)
    summary = json.loads(o)
    assert summary == {"input": str(fixture("keys")), "output": str(out),
                       "input_format": "idv", "output_format": "idv",
                       "rows": sidecar("keys")["row_count"], "bytes": out.stat().st_size}
    assert err == ""
    rc, o, err = run("convert", fixture("keys"), tmp_path / "s.idv", check_rc=0)
    assert o == "" and err.startswith("idv: ") and "8 rows" in err     # the summary line
    rc, o, err = run("convert", tmp_path / "missing.idv", tmp_path / "x.idv")
    assert rc == 1
    assert_one_line_error(err, "missing.idv", "no such file")
    bad = tmp_path / "bad.idv"
    bad.write_bytes(fixture("keys").read_bytes()[:300])
    rc, o, err = run("convert", bad, tmp_path / "y.idv")
    assert rc == 1
    assert_one_line_error(err)
    rc, o, err = run("convert", fixture("keys"), tmp_path / "nodir" / "z.idv")
    assert rc == 1
    assert_one_line_error(err, "nodir")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.idv", "out.idv", "s.idv"]


@needs_convert
@pytest.mark.parametrize("args,fragments", [
    (["{out}", "--compression", "lz4"], ["lz4", "none or deflate"]),
    (["{tmp}/x.xyz"], ["x.xyz", "--to"]),
    (["{tmp}/x.idv", "--to", "excel"], ["excel", "parquet"]),
    (["{tmp}/x.idv", "--columns", "Id,Nope"], ["Nope", "Txt"]),
    (["{f}"], ["overwrite"]),
    (["-", "--to", "csv"], ["OUTPUT '-'", "not standard output", "idv cat"]),
    # options for the other kind of input or output
    (["{tmp}/x.parquet", "--rows-per-block", "5"], ["--rows-per-block", ".idv output", "Parquet"]),
    (["{tmp}/x.parquet", "--level", "3"], ["--level", ".idv output", "Parquet"]),
    (["{tmp}/x.csv", "--backend", "zlib"], ["--backend", ".idv output", "CSV"]),
    (["{out}", "--types", "Id=Int64"], ["--types", "non-.idv input"]),
    (["{out}", "--missing-text", ""], ["--missing-text", "non-.idv input"]),
])
def test_convert_usage_errors_exit_2(tmp_path, args, fragments):
    f = fixture("mixed_default")
    rc, o, err = run("convert", f, *[a.format(f=f, out=tmp_path / "o.idv", tmp=tmp_path)
                                     for a in args])
    assert rc == 2 and o == ""
    assert_one_line_error(err, *fragments)
    assert list(tmp_path.iterdir()) == []


@needs_convert
def test_convert_to_parquet_and_back(tmp_path):
    pytest.importorskip("pyarrow")
    name = "mixed_default"
    side = sidecar(name)
    pq, back = tmp_path / "data.parquet", tmp_path / "back.idv"
    run("convert", fixture(name), pq, "-q", check_rc=0)
    import pyarrow.parquet as pqm
    table = pqm.read_table(pq)
    assert table.num_rows == side["row_count"]
    assert table.column_names == [c["name"] for c in side["columns"]]
    assert table.column("Id").to_pylist() == [r[0] for r in side["rows"]]
    rc, o, err = run("convert", pq, back, "--rows-per-block", 30, "-q", check_rc=0)
    info = run_json("info", back)
    assert [c["blocks"] for c in info["columns"]] == [4] * len(side["columns"])
    got = run_json("cat", back)
    assert [c["type"] for c in got["columns"]] == \
        [our_type_string(c["type_string"]) for c in side["columns"]]
    for r, row in enumerate(got["data"]):
        for g, c in zip(row, side["columns"]):
            check_cell(g, side["rows"][r][c["index"]], c)


@needs_convert
def test_convert_csv_and_a_zip_entry(tmp_path):
    pytest.importorskip("pyarrow")
    name = "mixed_smallblocks_deflate"
    side = sidecar(name)
    zpath = tmp_path / "model.zip"
    with zipfile.ZipFile(zpath, "w") as z:
        z.write(fixture(name), "DataLoaderModel/Schema.idv")
    out = tmp_path / "out.csv"
    rc, o, err = run("convert", f"{zpath}:DataLoaderModel/Schema.idv", out, "--columns",
                     "Id,4,DT", "-q", check_rc=0)
    rows = read_delimited(out.read_text(encoding="utf-8"), ",")
    assert rows[0] == ["Id", "Txt", "DT"]
    assert [int(r[0]) for r in rows[1:]] == [r[0] for r in side["rows"]]
    assert [r[1] for r in rows[1:]] == [r[4] for r in side["rows"]]
    # everything, as `idv cat -f csv` prints it (one writer): the same text, ML.NET's values
    run("convert", fixture(name), tmp_path / "all.csv", "-q", check_rc=0)
    rc, cat, err = run("cat", fixture(name), "-f", "csv", check_rc=0)
    text = (tmp_path / "all.csv").read_text(encoding="utf-8")
    assert text == cat
    visible, rows = csv_columns(read_delimited(text, ","), side)
    assert "Var" in [c["name"] for c in visible]          # a variable-size vector: JSON arrays
    for r, row in enumerate(rows):
        for got, c in zip(row, visible):
            check_cell(got, side["rows"][r][c["index"]], c)


def test_convert_to_jsonl_is_cat_jsonl(tmp_path):
    """``idv convert x.idv y.jsonl`` writes what ``idv cat --format jsonl`` prints (one writer),
    without pyarrow; --to takes a format's name or extension."""
    name = "mixed_default"
    out = tmp_path / "out.jsonl"
    rc, o, err = run("convert", fixture(name), out, "--json", hide=("pyarrow",), check_rc=0)
    summary = json.loads(o)
    assert summary["output_format"] == "jsonl" and summary["rows"] == 100
    _, cat, _ = run("cat", fixture(name), "--format", "jsonl", check_rc=0)
    assert out.read_text(encoding="utf-8") == cat
    run("convert", fixture(name), tmp_path / "b.txt", "--to", "ndjson", "--columns", "Id,Txt",
        "-q", check_rc=0)
    _, cat, _ = run("cat", fixture(name), "-f", "jsonl", "--columns", "Id,Txt", check_rc=0)
    assert (tmp_path / "b.txt").read_text(encoding="utf-8") == cat


def test_convert_formats_come_from_the_registry(tmp_path):
    """The help lists every format of idv.formats with its extensions and codecs; an unknown
    format's error names them all; an output-only input is a usage error."""
    sys.path.insert(0, str(REPO_DIR))
    from idv.formats import FORMATS
    _, out, _ = run("convert", "--help", check_rc=0)
    text = " ".join(out.split())
    compression = text.rsplit("--compression NAME", 1)[1].split("--rows-per-block")[0]
    for f in FORMATS.values():
        assert f"{f.name} ({', '.join(f.extensions)}" in text, f.name
        for codec in f.codecs or ():
            assert codec in compression, codec
    rc, _, err = run("convert", fixture("keys"), tmp_path / "x.out", "--to", "xlsx")
    assert rc == 2
    assert_one_line_error(err, "xlsx", ", ".join(sorted(FORMATS)))
    rc, _, err = run("convert", fixture("keys"), tmp_path / "y.idv", "--from", "jsonl")
    assert rc == 2
    assert_one_line_error(err, "JSON Lines is an output format only")
    (tmp_path / "x.what").write_bytes(b"?")
    rc, _, err = run("convert", tmp_path / "x.what", tmp_path / "y.idv")
    assert rc == 2
    assert_one_line_error(err, "x.what", "--from", ".jsonl")
    assert [p.name for p in tmp_path.iterdir()] == ["x.what"]


@needs_convert
def test_convert_shows_a_progress_bar_on_a_terminal(tmp_path):
    pytest.importorskip("tqdm")
    import pty
    out = tmp_path / "out.idv"
    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(REPO_DIR) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "idv", "convert",
                        str(fixture("multiblock_200k_none")), str(out), "--columns", "Id"],
                       stdout=subprocess.PIPE, stderr=slave, env=env, cwd=REPO_DIR, timeout=120)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    text = b"".join(chunks).decode("utf-8", "replace")
    assert p.returncode == 0, text
    assert "out.idv" in text and "rows" in text
    # not a terminal: no bar
    rc, o, err = run("convert", fixture("multiblock_200k_none"), tmp_path / "quiet.idv",
                     "--columns", "Id", "-q", check_rc=0)
    assert err == "" and o == ""


@needs_convert
@pytest.mark.parametrize("text, said", [
    ("a,a\n1,2\n", "the CSV header names 'a' more than once: give each column a name of its "
                  "own"),
    ("", "Empty CSV file"),
    ("a,b\n", "CSV columns 'a', 'b': no value in the first 16 MiB, from which the types are "
               "inferred (or no rows at all): give the type (--types NAME=TYPE)"),
    ("a,b\n1,\n", "CSV column 'b': no value in the first 16 MiB"),
    ("a,b\n1,\udcff\n", "CSV column 'b': its text is not UTF-8 (ML.NET's Text is); convert "
                       "the file's encoding first, e.g. iconv -f LATIN1 -t UTF-8"),
])
def test_convert_names_a_refused_csv_and_gives_command_line_advice(tmp_path, text, said):
    src = tmp_path / "in.csv"
    src.write_bytes(text.encode("utf-8", "surrogateescape"))     # \udcff: the byte 0xFF
    rc, o, err = run("convert", src, tmp_path / "out.idv")
    assert (rc, o) == (1, "")
    assert_one_line_error(err, f"idv: error: {src}: ", said)
    assert "pairs" not in err and "types=" not in err
    assert list(tmp_path.iterdir()) == [src]


def test_convert_datetime_ticks_round_trip_is_exact(tmp_path):
    """100 ns ticks do not fit Arrow's microseconds: --datetime us refuses with a hint naming
    the command-line options, Parquet's default (auto-us) and auto floor them with a warning,
    and --datetime ticks goes through Parquet and back exactly."""
    src = fixture("scalars_datetime")
    doc = sidecar("scalars_datetime")
    pq, back = tmp_path / "t.parquet", tmp_path / "back.idv"
    rc, _, err = run("convert", src, pq, "--datetime", "us")
    assert rc == 1 and "--floor-datetime" in err and "--datetime ticks" in err
    rc, _, err = run("convert", src, tmp_path / "default.parquet", "-q")   # Parquet: us
    assert rc == 0 and "floored to microseconds" in err and "'ticks' keeps them" in err
    rc, _, err = run("convert", src, tmp_path / "auto.parquet", "--datetime", "auto", "-q")
    assert rc == 0 and err.startswith("idv: warning: column 'DT': ") and \
        "floored to microseconds" in err
    run("convert", src, pq, "--datetime", "ticks", check_rc=0)
    run("convert", pq, back, check_rc=0)
    rows = run_json("head", back, "-n", "100")["data"]
    expected = run_json("head", src, "-n", "100")["data"]
    assert rows == expected and len(rows) == doc["row_count"]
    rc, _, _ = run("convert", src, tmp_path / "floored.parquet", "--floor-datetime")
    assert rc == 0


# ---------------------------------------------------------------- helpers of these tests

def lookup_entry(path, side, index, block):
    """(offset, disk, raw) of block `block` of column `index`, read with struct from the lookup
    table the sidecar locates (not through this reader)."""
    toc = next(t for t in side["table_of_contents"]["columns"] if t["column_index"] == index)
    with open(path, "rb") as fh:
        data = fh.read()
    return struct.unpack_from("<qii", data, toc["lookup_offset"] + 16 * block)


def num_blocks(side, toc):
    n = side["row_count"]
    return 0 if n == 0 else -(-n // toc["rows_per_block"])


def _corrupt_copy(tmp_path, name, damage):
    """A copy of a fixture with damage(bytearray, sidecar) applied."""
    side = sidecar(name)
    data = bytearray(fixture(name).read_bytes())
    damage(data, side)
    bad = tmp_path / f"bad_{name}.idv"
    bad.write_bytes(bytes(data))
    return bad, side


def _with_unknown_codec(tmp_path):
    """mixed_none with column F64's codec renamed: a dead column, as ML.NET would skip."""
    data = bytearray(fixture("mixed_none").read_bytes())
    toc = struct.unpack_from("<q", data, 24)[0]
    i = data.index(b"\x06Double", toc)
    data[i + 1:i + 7] = b"Dooble"
    path = tmp_path / "dead.idv"
    path.write_bytes(bytes(data))
    return path


def _block_of(path, column, block=0):
    """(offset, disk length) of a column's block, from the lookup table bytes in the file."""
    sys.path.insert(0, str(REPO_DIR))
    import idv
    with idv.open(path) as f:
        entry = f[column].lookup[block]
        return int(entry["offset"]), int(entry["disk"])


class _FakeStream:
    def __init__(self, tty):
        self.tty, self.parts = tty, []

    def isatty(self):
        return self.tty

    def write(self, s):
        self.parts.append(s)

    def flush(self):
        pass


def test_names_reach_the_terminal_escaped(tmp_path):
    """Column names (head, schema, cat) and zip entry names (ls) holding escape sequences,
    line breaks or bidi overrides are escaped as text cells are: nothing a file holds can set
    the terminal's title, clear it or forge a line."""
    from idv import write
    nasty = "a\x1b]0;pwned\x07b\x1b[2Jc\nforged\u202e"
    p = tmp_path / "names.idv"
    write(p, {nasty: np.arange(3, dtype=np.int32), "ok": np.ones(3)})
    z = tmp_path / "m.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr(f"Dir/{nasty}.idv", p.read_bytes())
    for args in (("head", p), ("schema", p), ("cat", p), ("info", p), ("ls", z)):
        rc, out, err = run(*args, check_rc=0)
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out, args
        assert not any(line.startswith("forged") for line in out.splitlines()), args
        assert "a\\x1b]0;pwned\\x07b\\x1b[2Jc\\nforged\\u202e" in out, args


@needs_convert
def test_messages_quoting_the_input_reach_the_terminal_escaped(tmp_path):
    """An error quoting a file's bytes (pyarrow's of a malformed CSV line) and a warning naming
    a file are escaped as text cells are: one line each, no escape sequence, no bell."""
    src = tmp_path / "bad.csv"
    src.write_text("a\n1\n2,3\x1b[2J\x1b]0;pwned\x07\n")
    rc, out, err = run("convert", src, tmp_path / "o.idv")
    assert (rc, out) == (1, "")
    assert_one_line_error(err, str(src), "2,3\\x1b[2J\\x1b]0;pwned\\x07")
    assert "\x1b" not in err and "\x07" not in err
    d = tmp_path / "days"
    d.mkdir()
    (d / "a.idv").write_bytes(fixture("mixed_default").read_bytes())
    (d / "b\x1b[2J.idv").write_bytes(b"garbage")
    rc, out, err = run("info", d, "--skip-bad-files", check_rc=0)
    assert err.startswith("idv: warning: ") and err.count("\n") == 1, err
    assert "b\\x1b[2J.idv" in err and "\x1b" not in err
    rc, out, err = run("info", d)       # without it: the file, and the option that skips it
    assert (rc, out) == (1, "")
    assert_one_line_error(err, "b\\x1b[2J.idv", "(one of the dataset's 2 files: "
                          "--skip-bad-files leaves out those that cannot be opened")


# ---------------------------------------------------------------- standard streams

def test_a_closed_stdout_is_a_one_line_error(tmp_path):
    """`idv info FILE >&-`: standard output is closed, said on one line, exit 1; a command
    that prints nothing there (convert) still runs."""
    f = fixture("mixed_default")
    rc, out, err = run_process("info", f, closed=(1,))
    assert rc == 1
    assert_one_line_error(err, "standard output is closed")
    out_file = tmp_path / "c.idv"
    rc, out, err = run_process("convert", f, out_file, "-q", closed=(1,), check_rc=0)
    assert err == ""
    from idv import open as idv_open
    with idv_open(out_file) as c:
        assert c.num_rows == sidecar("mixed_default")["row_count"]


def test_verify_exits_1_on_problems_when_its_reader_went_away(tmp_path):
    """`idv verify BAD | true`: the pipe closed before verify prints, its problems are still
    its exit status, said on stderr; a sound file's verify exits 0 quietly."""
    def damage(data, side):
        off, disk, _ = lookup_entry(fixture("mixed_smallblocks_none"), side,
                                    column_index(side, "Txt"), 2)
        data[off] ^= 0x7f
    bad, _ = _corrupt_copy(tmp_path, "mixed_smallblocks_none", damage)
    for path, code in ((bad, 1), (fixture("mixed_smallblocks_none"), 0)):
        for extra in ((), ("--json",)):
            read_end, write_end = os.pipe()
            os.close(read_end)              # the reader gone before anything is printed
            try:
                rc, _, err = run_process("verify", path, *extra, stdout=write_end)
            finally:
                os.close(write_end)
            assert rc == code, err
            if code:
                assert_one_line_error(err, str(bad), "1 problem found")
            else:
                assert err == ""


def test_a_closed_stderr_keeps_warnings_and_messages_out_of_the_data(tmp_path):
    """With stderr closed (2>&-) a warning, convert's summary and an error are dropped, never
    printed into standard output's data."""
    d = tmp_path / "days"
    d.mkdir()
    (d / "a.idv").write_bytes(fixture("mixed_default").read_bytes())
    (d / "b.idv").write_bytes(b"garbage")
    rc, alone, err = run("cat", d / "a.idv", "--format", "csv", check_rc=0)
    rc, out, err = run_process("cat", d, "--skip-bad-files", "--format", "csv", closed=(2,),
                               check_rc=0)
    assert out == alone
    rc, out, err = run_process("convert", d / "a.idv", tmp_path / "c.idv", closed=(2,),
                               check_rc=0)
    assert out == "" and (tmp_path / "c.idv").exists()
    rc, out, err = run_process("info", tmp_path / "missing.idv", closed=(2,))
    assert (rc, out) == (1, "")


def test_convert_json_to_a_full_stdout_blames_stdout_not_the_output(tmp_path):
    """`convert IN OUT --json > /dev/full`: OUT is written whole; the error says that writing
    to standard output failed, not that OUT did."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    out_file = tmp_path / "out.idv"
    with open("/dev/full", "wb") as full:
        rc, out, err = run_process("convert", fixture("keys"), out_file, "--json", stdout=full)
    assert rc == 1
    assert_one_line_error(err, "standard output", "No space left on device")
    assert str(out_file) not in err
    from idv import open as idv_open
    with idv_open(out_file) as c:
        assert c.num_rows == sidecar("keys")["row_count"]


def test_ctrl_c_exits_130_quietly_whenever_it_comes(monkeypatch):
    """Ctrl-C while the arguments are read, or while the command runs, ends the command with
    the shell's code for it, 130, and prints nothing."""
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    for where in ("build_parser", "open_sources"):
        with monkeypatch.context() as m:
            m.setattr(f"idv.cli.app.{where}", interrupted)
            assert run_main("info", fixture("mixed_default")) == (130, "", "")


@pytest.mark.parametrize("how", ["python -m idv", "console script"])
def test_ctrl_c_while_idv_loads_exits_130_quietly(tmp_path, how):
    """Ctrl-C in the first moments of `python -m idv` or of the `idv` command, while idv (and
    numpy) are imported, is the same quiet 130 as one while the command runs, not a
    traceback: here the import of idv.cli is interrupted, by a finder that raises as a Ctrl-C
    would."""
    command = [sys.executable, "-m", "idv"] if how == "python -m idv" else [shutil.which("idv")]
    if command[0] is None:
        pytest.skip("the idv console script is not installed (pip install -e .)")
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'idv.cli':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupt())\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_DIR)])}
    done = subprocess.run(command + ["info", fixture("mixed_default")],
                          capture_output=True, text=True, env=env, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "")


def test_a_full_disk_under_stats_add_names_the_file_not_stdout(monkeypatch, tmp_path):
    """A write that the disk refuses while `stats --add` rewrites a file names that file;
    standard output had nothing to do with it."""
    import errno
    path = tmp_path / "a.idv"
    path.write_bytes(fixture("mixed_default").read_bytes())

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr("idv.add_statistics", full)
    rc, out, err = run_main("stats", "--add", path)
    assert (rc, out) == (1, "")
    assert_one_line_error(err, f"{path}: No space left on device")
    assert "standard output" not in err


def test_memory_limit_is_an_option_of_every_command(tmp_path):
    """--memory-limit BYTES (before the command or after it; a number, or one with a unit as
    the messages print them, or in powers of 1024) is the limit of the files a command reads,
    also those it hands to idv by path (convert); a refusal names the option, and the limit
    is the command's alone."""
    import idv
    path = tmp_path / "a.idv"
    idv.write(path, {"x": np.arange(100_000, dtype=np.float64)})      # 65 KB blocks
    for args, shown in ((("--memory-limit", "10KB", "head", path), "10.0 KB"),
                        (("head", path, "--memory-limit", "10000"), "10.0 KB"),
                        (("cat", path, "-f", "csv", "--memory-limit", "10KiB"), "10.2 KB"),
                        (("convert", path, tmp_path / "a.csv", "--memory-limit", "10KB"),
                         "10.0 KB")):
        rc, out, err = run_main(*args)
        assert rc == 1, (args, out, err)
        assert_one_line_error(err, f"over idv's memory limit of {shown}",
                              "raise the limit: idv --memory-limit BYTES")
        assert "set_memory_limit" not in err and "iter_batches" not in err    # Python's
    # verify: a block over the limit is a part not checked, a warning (an error with --strict)
    rc, out, err = run_main("verify", path, "--memory-limit", "0.01MB", "--strict")
    assert rc == 1 and "not checked:" in out and "over idv's memory limit of 10.0 KB" in out, \
        (out, err)
    assert run_main("--memory-limit", "1MB", "verify", path)[0] == 0
    with idv.open(path) as f:
        assert f.memory_limit >= 1 << 30          # the default again
    for bad in ("8XB", "0", "1.5", "-3"):
        rc, out, err = run_main("head", path, "--memory-limit", bad)
        assert rc == 2 and "--memory-limit" in err, (bad, err)
