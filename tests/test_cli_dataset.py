"""The ``idv`` command on a dataset: a directory, a quoted glob, several paths (a glob the
shell expanded) or a ``file://`` URL, wherever a command takes one file.

The datasets are copies of ML.NET-written sample fixtures; expected values are ML.NET's
(their JSON sidecars, and the oracle's dump of what convert writes). The ML.NET files that
share a schema also share their rows, so file order is checked on datasets that mix fixtures
with a common column (``--schema common``): mixed_* and scalars_text share Id and Txt.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

import idv
from cli_run import (COUNTING_CLI, assert_one_line_error, check_cell, csv_columns,
                     read_delimited, run, run_into_head, run_json, table_rows)
from expected import column_index, dense_cell, our_type_string, type_from_description
from reference import REPO_DIR, fixture, sidecar

MIXED = ["mixed_default", "mixed_smallblocks_none", "mixed_maxbytes"]   # 9 columns, 100 rows
MIXED_AND_TEXT = ["mixed_default", "scalars_text", "mixed_smallblocks_deflate"]   # Id, Txt
BIG = ["multiblock_200k_deflate", "multiblock_200k_none"]      # 200,000 rows, 25 blocks a column


def _dataset(tmp_path, names, folder="d"):
    """A folder of copies of the fixtures `names`, in that (sorted) order; their paths."""
    d = tmp_path / folder
    d.mkdir()
    paths = []
    for i, n in enumerate(names):
        paths.append(d / f"{i:02d}_{n}.idv")
        shutil.copyfile(fixture(n), paths[-1])
    return d, paths


def _expected(names, columns):
    """ML.NET's rows of the fixtures end to end: per row, (cell, sidecar column) of each of
    `columns`."""
    rows = []
    for n in names:
        side = sidecar(n)
        cols = [side["columns"][column_index(side, c)] for c in columns]
        rows += [[(r[c["index"]], c) for c in cols] for r in side["rows"]]
    return rows


def _check_rows(got, expected):
    assert len(got) == len(expected)
    for g_row, e_row in zip(got, expected):
        for g, (cell, col) in zip(g_row, e_row):
            check_cell(g, cell, col)


# ---------------------------------------------------------------- info, schema

def test_info_of_a_directory_a_glob_and_expanded_paths(tmp_path):
    d, paths = _dataset(tmp_path, MIXED)
    side = sidecar(MIXED[0])
    by_dir = run_json("info", d)
    assert run_json("info", f"{d}/*.idv") == {**by_dir, "source": f"{d}/*.idv"}
    assert run_json("info", *paths) == {**by_dir, "source": " ".join(map(str, paths))}
    assert by_dir["num_files"] == 3 and by_dir["num_rows"] == 300
    assert [(c["name"], c["type"]) for c in by_dir["columns"]] == [
        (c["name"], our_type_string(c["type_string"])) for c in side["columns"]]
    assert [(f["path"], f["num_rows"], f["first_row"]) for f in by_dir["files"]] == [
        (str(p), 100, 100 * i) for i, p in enumerate(paths)]
    for f, n in zip(by_dir["files"], MIXED):
        toc = sidecar(n)["table_of_contents"]["columns"]
        assert f["blocks"] == sum(-(-100 // t["rows_per_block"]) for t in toc)
        assert f["file_size"] == fixture(n).stat().st_size
    rc, out, err = run("info", d, check_rc=0)
    assert "files:    3" in out and "rows:     300" in out
    lines = table_rows(out.split("\n\n")[2])
    assert [ln[:4] for ln in lines[:-1]] == [[str(p), "100", str(100 * i), str(f["blocks"])]
                                             for i, (p, f) in enumerate(zip(paths,
                                                                            by_dir["files"]))]
    assert lines[-1][:3] == ["total", "300", str(sum(f["blocks"] for f in by_dir["files"]))]


def test_one_file_among_a_glob_or_url_is_still_a_file(tmp_path):
    """A glob or URL that names one file is a dataset or a file as its form says: a glob a
    dataset of one, a file:// URL of a file the file itself (today's output)."""
    d, (path,) = _dataset(tmp_path, ["mixed_none"])
    assert run_json("info", f"{d}/*.idv")["num_files"] == 1
    by_url = run_json("info", f"file://{d}/*.idv")
    assert (by_url["num_files"], by_url["num_rows"]) == (1, 100)
    assert by_url["files"][0]["path"].endswith(path.name)
    as_file = run_json("info", path)
    assert run_json("info", f"file://{path}") == {**as_file, "file": f"file://{path}"}
    got = run_json("head", f"file://{path}", "-n", "3")
    _check_rows(got["data"], _expected(["mixed_none"], [c["name"] for c in got["columns"]])[:3])


def test_schema_of_a_dataset(tmp_path):
    d, _ = _dataset(tmp_path, MIXED)
    rc, out, err = run("schema", d, check_rc=0)
    assert out == run("schema", fixture(MIXED[0]), check_rc=0)[1]
    got = run_json("schema", d)
    assert got["num_rows"] == 300 and got["num_files"] == 3
    d2, _ = _dataset(tmp_path, MIXED_AND_TEXT, "d2")
    got = run_json("schema", d2, "--schema", "common")
    assert [(c["name"], c["type"]) for c in got["columns"]] == [("Id", "Int32"), ("Txt", "Text")]
    assert got["num_rows"] == 214


# ---------------------------------------------------------------- head, cat

def test_cat_of_a_dataset_gives_every_files_rows_in_order(tmp_path):
    d, paths = _dataset(tmp_path, MIXED_AND_TEXT)
    want = _expected(MIXED_AND_TEXT, ["Id", "Txt"])
    got = run_json("cat", d, "--schema", "common")
    assert [c["name"] for c in got["columns"]] == ["Id", "Txt"]
    _check_rows(got["data"], want)
    # a range across both boundaries, with a step; given as the shell expands a glob
    got = run_json("cat", *paths, "--schema", "common", "--rows", "95:120:3")
    _check_rows(got["data"], want[95:120:3])
    rc, out, err = run("cat", d, "--schema", "common", "--format", "jsonl", check_rc=0)
    _check_rows([list(json.loads(ln).values()) for ln in out.splitlines()], want)
    # all columns of files with one schema, as CSV
    rc, out, err = run("cat", f"{d.parent}/d/*mixed*.idv", "--format", "csv", check_rc=0)
    table = read_delimited(out, ",")
    rows = []
    for n in (MIXED_AND_TEXT[0], MIXED_AND_TEXT[2]):
        visible, cells = csv_columns([table[0]] + table[1 + len(rows):101 + len(rows)],
                                     sidecar(n))
        _check_rows(cells, [[(r[c["index"]], c) for c in visible] for r in sidecar(n)["rows"]])
        rows += cells
    assert len(table) == 1 + 200


def test_head_of_a_dataset_and_the_table_row_numbers(tmp_path):
    d, _ = _dataset(tmp_path, MIXED_AND_TEXT)
    want = _expected(MIXED_AND_TEXT, ["Txt", "Id"])
    got = run_json("head", d, "--schema", "common", "--start", "98", "-n", "5",
                   "--columns", "Txt,Id")
    assert got["num_rows"] == 214 and got["start"] == 98
    assert [(c["index"], c["name"]) for c in got["columns"]] == [(4, "Txt"), (0, "Id")]
    _check_rows(got["data"], want[98:103])
    txt = idv.dataset(d, schema="common").column_names.index("Txt")    # the dataset's index
    got = run_json("head", d, "--schema", "common", "--start=-2", "--columns", str(txt))
    _check_rows(got["data"], [[w[0]] for w in want[-2:]])
    rc, out, err = run("cat", d, "--schema", "common", "--rows", "99:101", check_rc=0)
    assert [r[0] for r in table_rows(out)] == ["99", "100"]
    assert out.splitlines()[-1] == "(2 rows of 214)"
    rc, out, err = run("head", d, "--schema", "common", "-n", "3", check_rc=0)
    assert out.splitlines()[-1] == "(rows 0-2 of 214)"


@pytest.mark.parametrize("fmt", ["table", "csv", "jsonl"])
def test_cat_of_a_dataset_into_head_decodes_only_the_first_blocks_of_the_first_file(
        tmp_path, fmt):
    d, paths = _dataset(tmp_path, BIG)
    count = tmp_path / "blocks.json"
    rc, err, first = run_into_head("-c", COUNTING_CLI, count, "cat", d, "--format", fmt)
    assert rc == 0 and err == "", err
    assert first.strip()
    decoded = json.loads(count.read_text())
    assert set(decoded) == {str(p) for p in paths}        # both opened (headers) ...
    assert decoded[str(paths[1])] == 0                    # ... the second decodes nothing
    # the first group of rows (8192: one block a column) and at most the next, of 100
    assert 0 < decoded[str(paths[0])] <= 2 * 4, decoded


# ---------------------------------------------------------------- convert

def _mlnet_cells(doc, names):
    """The oracle's rows of the columns `names`, vectors dense (ML.NET may write either)."""
    cols = [doc["columns"][column_index(doc, n)] for n in names]
    return [[dense_cell(r[c["index"]], type_from_description(c).item) if c["is_vector"]
             else r[c["index"]] for c in cols] for r in doc["rows"]]


def test_convert_a_dataset_into_one_idv_that_mlnet_loads(tmp_path, oracle):
    d, _ = _dataset(tmp_path, MIXED)
    d2, _ = _dataset(tmp_path, MIXED_AND_TEXT, "d2")
    out, out2 = tmp_path / "all.idv", tmp_path / "common.idv"
    rc, o, err = run("convert", d, out, "--rows-per-block", "64", check_rc=0)
    assert "300 rows" in err
    run("convert", f"{d2}/*.idv", out2, "--schema", "common", "-q", check_rc=0)
    dumps = oracle.dump_many([out, out2])
    got, got2 = dumps[str(out)], dumps[str(out2)]
    assert "error" not in got and "error" not in got2, (got.get("error"), got2.get("error"))
    side = sidecar(MIXED[0])
    names = [c["name"] for c in side["columns"]]
    assert [(c["name"], c["type_string"]) for c in got["columns"]] == [
        (c["name"], c["type_string"]) for c in side["columns"]]
    for mine, theirs in zip(got["columns"], side["columns"]):      # KeyValues, SlotNames
        assert mine["annotations"] == theirs["annotations"], mine["name"]
    assert got["row_count"] == 300
    assert _mlnet_cells(got, names) == [row for n in MIXED
                                        for row in _mlnet_cells(sidecar(n), names)]
    assert [(c["name"], c["type_string"]) for c in got2["columns"]] == [
        ("Id", "Int32"), ("Txt", "String")]
    assert _mlnet_cells(got2, ["Id", "Txt"]) == [row for n in MIXED_AND_TEXT
                                                 for row in _mlnet_cells(sidecar(n),
                                                                         ["Id", "Txt"])]


def test_convert_a_dataset_to_parquet_feather_and_csv(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.feather as feather
    import pyarrow.parquet as pq
    d, paths = _dataset(tmp_path, MIXED_AND_TEXT)
    want = _expected(MIXED_AND_TEXT, ["Id", "Txt"])
    for ext, read in ((".parquet", pq.read_table), (".feather", feather.read_table)):
        out = tmp_path / f"out{ext}"
        got = json.loads(run("convert", d, out, "--schema", "common", "--json", check_rc=0)[1])
        assert got["rows"] == 214 and got["input"] == str(d)
        table = read(out)
        assert table.column_names == ["Id", "Txt"]
        _check_rows([list(r.values()) for r in table.to_pylist()], want)
    out = tmp_path / "out.csv"
    run("convert", *paths, out, "--schema", "common", "--columns", "Txt", "-q", check_rc=0)
    table = read_delimited(out.read_text(encoding="utf-8"), ",")
    assert table[0] == ["Txt"]
    _check_rows([[r[0]] for r in table[1:]], [[w[1]] for w in want])
    assert isinstance(pa.table({"x": [1]}), pa.Table)


# the CLI in this process, then its peak resident memory (KiB) on stdout's last line
_PEAK_CLI = r"""
import resource, sys
from idv.cli import main
rc = main(sys.argv[1:])
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
sys.exit(rc)
"""


@pytest.mark.parametrize("ext", [".idv", ".csv"])
def test_convert_of_a_dataset_streams_in_bounded_memory(tmp_path, ext):
    """Eight files (1.6 million rows: ~100 MB decoded, their texts as Python strings) take
    hardly more memory to convert than one."""
    d, paths = _dataset(tmp_path, [BIG[0]] * 8)
    env = {**os.environ, "PYTHONPATH": str(REPO_DIR)}
    peaks = []
    for source in (paths[0], d):
        p = subprocess.run([sys.executable, "-c", _PEAK_CLI, "convert", str(source),
                            str(tmp_path / f"out{len(peaks)}{ext}"), "-q", "--no-progress"],
                           capture_output=True, text=True, env=env, timeout=300)
        assert p.returncode == 0, p.stderr
        peaks.append(int(p.stdout.splitlines()[-1]))
    assert peaks[1] < peaks[0] + 30 * 1024, peaks


def test_convert_a_dataset_refuses_to_overwrite_one_of_its_files(tmp_path):
    d, paths = _dataset(tmp_path, MIXED)
    before = paths[1].read_bytes()
    rc, o, err = run("convert", d, paths[1])
    assert rc == 2
    assert_one_line_error(err, str(paths[1]), "overwrite the input")
    # `idv convert d/*.idv` expanded by the shell: the last file would be OUTPUT
    rc, o, err = run("convert", paths[0], paths[2], paths[1])
    assert rc == 2
    assert_one_line_error(err, str(paths[1]), "quote it")
    assert paths[1].read_bytes() == before
    assert sorted(d.iterdir()) == paths


def test_convert_refuses_files_whose_annotations_differ(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    for i, labels in enumerate((["cat", "dog"], ["dog", "cat"])):
        idv.write(d / f"{i}.idv", {"Label": np.array([1, 2], np.uint32)},
                  types={"Label": idv.Key(idv.UInt32, count=2)},
                  metadata={"Label": {"KeyValues": labels}})
    rc, o, err = run("convert", d, tmp_path / "out.idv")
    assert rc == 1
    assert_one_line_error(err, str(d / "1.idv"), "'Label'", "KeyValues")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


# ---------------------------------------------------------------- verify

def _damage_a_block(path, name, column, block):
    """Overwrite block `block` of `column` with bytes that are not DEFLATE; its offset read
    with struct from the lookup table the sidecar locates."""
    side = sidecar(name)
    toc = next(t for t in side["table_of_contents"]["columns"]
               if t["column_index"] == column_index(side, column))
    data = bytearray(path.read_bytes())
    offset, disk, _raw = struct.unpack_from("<qii", data, toc["lookup_offset"] + 16 * block)
    data[offset:offset + disk] = b"\xff" * disk
    path.write_bytes(bytes(data))


def test_verify_checks_every_file_and_sums_up(tmp_path):
    d, paths = _dataset(tmp_path, ["mixed_smallblocks_deflate", "mixed_default",
                                   "mixed_smallblocks_deflate"])
    rc, out, err = run("verify", d, check_rc=0)
    assert err == ""
    assert out.splitlines()[-1] == "3 files checked, 0 with problems, 0 problems"
    assert [ln for ln in out.splitlines() if ln.startswith(str(d))] == [
        f"{p}: OK" for p in paths]
    _damage_a_block(paths[0], "mixed_smallblocks_deflate", "Txt", 2)
    _damage_a_block(paths[0], "mixed_smallblocks_deflate", "DT", 4)
    paths[1].write_bytes(b"not an idv file at all, but named like one" * 10)
    rc, out, err = run("verify", d)
    assert rc == 1
    assert_one_line_error(err, str(d), "2 files of 3", "3 problems")
    lines = out.splitlines()
    assert lines[-1] == "3 files checked, 2 with problems, 3 problems"
    heads = [i for i, ln in enumerate(lines) if ln.startswith(str(d))]
    assert [lines[i] for i in heads] == [f"{paths[0]}: 2 problems", f"{paths[1]}: 1 problem",
                                        f"{paths[2]}: OK"]
    first = lines[heads[0] + 1:heads[1]]
    assert any("'Txt' block 2 " in ln for ln in first) and any("'DT' block 4 " in ln
                                                              for ln in first)
    assert "signature" in lines[heads[1] + 1]
    got = json.loads(run("verify", *paths, "--json")[1])
    assert (got["ok"], got["num_files"], got["num_failed"], got["num_problems"]) == \
        (False, 3, 2, 3)
    assert [(f["file"], f["ok"], len(f["problems"])) for f in got["files"]] == [
        (str(paths[0]), False, 2), (str(paths[1]), False, 1), (str(paths[2]), True, 0)]


# ---------------------------------------------------------------- errors

def test_a_corrupt_file_in_a_dataset_is_named(tmp_path):
    d, paths = _dataset(tmp_path, MIXED)
    paths[1].write_bytes(fixture(MIXED[1]).read_bytes()[:300])       # truncated
    for cmd in ("info", "head", "schema", "cat", "convert"):
        rc, out, err = run(cmd, d, *([tmp_path / "out.idv"] if cmd == "convert" else []))
        assert rc == 1 and out == "", (cmd, out)
        assert_one_line_error(err, str(paths[1]))
    rc, out, err = run("cat", d, "--skip-bad-files", "--format", "jsonl", "--columns", "Id")
    assert rc == 0
    warning, = err.splitlines()
    assert warning.startswith("idv: warning: ") and str(paths[1]) in warning
    assert [json.loads(ln)["Id"] for ln in out.splitlines()] == list(range(100)) * 2
    rc, out, err = run("info", d, "--skip-bad-files", "--json", check_rc=0)
    got = json.loads(out)
    assert [f["path"] for f in got["files"]] == [str(paths[0]), str(paths[2])]
    assert [s["path"] for s in got["skipped"]] == [str(paths[1])]
    assert not (tmp_path / "out.idv").exists()


def test_a_damaged_block_in_a_later_file_is_named(tmp_path):
    d, paths = _dataset(tmp_path, ["mixed_default", "mixed_smallblocks_deflate"])
    _damage_a_block(paths[1], "mixed_smallblocks_deflate", "Txt", 3)
    rc, out, err = run("cat", d, "--format", "csv")
    assert rc == 1
    assert_one_line_error(err, str(paths[1]), "'Txt' block 3")
    assert len(read_delimited(out, ",")) > 100        # the first file's rows came out


def test_nothing_matched_is_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("no .idv here")
    for arg, says in ((tmp_path / "empty", "no .idv files in this directory"),
                      (tmp_path / "other", "no .idv files in this directory"),
                      (f"{tmp_path}/*.idv", "no file matches")):
        for cmd in ("info", "cat", "verify"):
            rc, out, err = run(cmd, arg)
            assert rc == 1 and out == ""
            assert_one_line_error(err, str(arg), says)


def test_schemas_that_differ_name_the_file_column_and_both_types(tmp_path):
    d, paths = _dataset(tmp_path, ["mixed_default"])
    odd = d / "01_other.idv"
    idv.write(odd, {"Id": np.arange(3, dtype=np.int64)})
    rc, out, err = run("head", d, "--columns", "Id")
    assert rc == 1
    assert_one_line_error(err, str(odd), "'Id'", "Int64", "Int32", str(paths[0]))
    rc, out, err = run("info", d)
    assert rc == 1
    assert_one_line_error(err, str(odd), "--schema common")
    got = run_json("info", d, "--schema", "common")
    assert got["columns"] == [] and got["num_rows"] == 103


def test_dataset_usage_errors_exit_2(tmp_path):
    d, paths = _dataset(tmp_path, MIXED)
    rc, out, err = run("cat", d, "--columns", "Id,Nope")
    assert rc == 2
    assert_one_line_error(err, "Nope")
    rc, out, err = run("info", paths[0], "5")                # a stray word, no file's name
    assert rc == 2 and "usage: idv info" in err and "5" in err
    rc, out, err = run("info", paths[0], tmp_path / "typo.idv")      # a file's name: missing
    assert rc == 1 and "typo.idv" in err and "no such file" in err, err
    rc, out, err = run("info", paths[0], f"file://{paths[1]}")
    assert rc == 2
    assert_one_line_error(err, "all be local")
    rc, out, err = run("convert", d, tmp_path / "out.idv", "--from", "parquet")
    assert rc == 2
    assert_one_line_error(err, "--from parquet", ".idv")
    assert not (tmp_path / "out.idv").exists()


def test_where_may_name_a_column_that_columns_leaves_out(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    idv.write(d / "a.idv", {"id": np.arange(5), "x": np.array([1, 2, 3, 2, 1])})
    idv.write(d / "b.idv", {"id": np.arange(5, 10), "x": np.array([2, 2, 9, 9, 1])})
    for files in [(d,), (d / "a.idv", d / "b.idv"), (f"{d}/*.idv",)]:
        rc, out, err = run("cat", *files, "--columns", "id", "--where", "x == 2",
                           "--format", "csv", check_rc=0)
        assert out.split() == ["id", "1", "3", "5", "6"]
    rc, out, err = run("head", d, "--columns", "id", "--where", "x == 9", "--json")
    assert rc == 0 and json.loads(out)["data"] == [[7], [8]]
    rc, out, err = run("cat", d, "--columns", "id", "--where", "nope == 1")
    assert rc == 2
    assert_one_line_error(err, "'nope'")


def _files_of_other_annotations(tmp_path):
    """Two files of the same raw keys [1, 2, 0] and vector rows [1.0, 2.0], whose KeyValues
    (cat, dog / dog, cat) and SlotNames (a, b / b, a) differ."""
    paths = [tmp_path / "a.idv", tmp_path / "b.idv"]
    for p, kv, slots in zip(paths, (["cat", "dog"], ["dog", "cat"]), (["a", "b"], ["b", "a"])):
        idv.write(p, {"k": np.array([1, 2, 0], np.uint32), "v": np.array([[1.0, 2.0]] * 3)},
                  types={"k": idv.Key(idv.UInt32, count=2)},
                  metadata={"k": {"KeyValues": kv}, "v": {"SlotNames": slots}})
    return paths


def test_each_files_keys_are_shown_by_its_own_key_values(tmp_path):
    paths = _files_of_other_annotations(tmp_path)
    labels = ["cat", "dog", "", "dog", "cat", ""]
    for fmt, sep in (("csv", ","), ("tsv", "\t")):
        rc, out, err = run("cat", *paths, "--columns", "k", "--format", fmt, check_rc=0)
        assert [r[0] for r in read_delimited(out, sep)] == ["k", *labels]
    for cmd in ("cat", "head"):
        rc, out, err = run(cmd, *paths, "--columns", "k", check_rc=0)
        assert [r[1:] for r in table_rows(out)] == [[x] if x else [] for x in labels]
    rc, out, err = run("cat", *paths, "--columns", "k", "--where", "k > 0", "--format", "csv",
                       check_rc=0)
    assert out.split() == ["k", "cat", "dog", "dog", "cat"]


def test_slot_columns_of_other_slot_names_are_refused_in_csv(tmp_path):
    """The header names the slot columns once: a file whose SlotNames differ is an error
    naming it and the column, never its slots under the first file's names."""
    paths = _files_of_other_annotations(tmp_path)
    rc, out, err = run("cat", *paths, "--columns", "v", "--format", "csv")
    assert rc == 1 and out.split() == ["v.a,v.b"] + ["1.0,2.0"] * 3
    assert_one_line_error(err, str(paths[1]), "'v'", "SlotNames", str(paths[0]))
    rc, out, err = run("cat", *paths, "--columns", "v", check_rc=0)      # no slot names shown
    assert [r[1] for r in table_rows(out)] == ["[1.0, 2.0]"] * 6
