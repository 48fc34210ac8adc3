"""How the ``idv`` command reads its options (spelled in full, a misspelled one answered with
the nearest, column lists with quoted names) and the shapes its commands share: every column
listed by ``stats``, bounds typed in JSON as ``head --json`` types values, file names with
control characters escaped on the terminal."""
from __future__ import annotations

import numpy as np
import pytest

import idv
from cli_run import run, run_json, run_main


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "s.idv"
    idv.write(path, {"a": np.array([3, -7, 12]), "f": np.array([0.1, 0.3, 2.5], np.float32),
                     "b": np.array([True, False, True]), "t": ["x", "y", "z"]})
    return path


@pytest.mark.parametrize("cmd", ["head", "cat", "stats"])
def test_a_misspelled_option_is_named_with_the_nearest(small, cmd):
    rc, out, err = run(cmd, small, "--columnz", "a")
    assert rc == 2 and out == ""
    assert "unrecognized arguments: --columnz (did you mean --columns?) a" in err \
        if cmd != "stats" else "--columnz" in err


def test_an_option_is_spelled_in_full(small):
    """A prefix would change meaning as options are added: --col is no --columns."""
    rc, out, err = run("head", small, "--col", "a")
    assert rc == 2 and "unrecognized arguments: --col" in err and "did you mean" in err
    rc, out, err = run("--memory", "1GB", "info", small)
    assert rc == 2


def test_a_word_too_many_is_still_unrecognized(small, tmp_path):
    rc, out, err = run_main("info", small.name, "5", cwd=tmp_path)
    assert rc == 2 and "unrecognized arguments: 5\n" in err


def test_a_column_name_with_a_comma_is_quoted_as_in_csv(tmp_path):
    path = tmp_path / "c.idv"
    idv.write(path, {"a,b": np.arange(3), "c": np.arange(3) * 2, "d": np.arange(3) * 3})
    got = run_json("head", path, "--columns", '"a,b", c')
    assert [c["name"] for c in got["columns"]] == ["a,b", "c"]
    got = run_json("head", path, "--columns", "a,b")      # the whole of it names a column
    assert [c["name"] for c in got["columns"]] == ["a,b"]
    got = run_json("cat", path, "--columns", 'd,"a,b"')
    assert [c["name"] for c in got["columns"]] == ["d", "a,b"]
    rc, out, err = run("head", path, "--columns", "")
    assert rc == 2 and "no column ''" in err
    out_path = tmp_path / "o.csv"
    run("convert", path, out_path, "--columns", '"a,b",d', check_rc=0)
    assert out_path.read_text().splitlines()[0] == '"a,b",d'


def test_stats_lists_every_column_and_types_bounds_in_json(tmp_path):
    path = tmp_path / "v.idv"
    idv.write(path, {"n": np.array([3, -7, 12]), "f": np.array([0.1, 0.3, 2.5], np.float32),
                     "b": np.array([True, False, True]),
                     "vt": idv.Ragged.from_list([["p"], ["q", "r"], []])})
    cols = run_json("stats", path)["files"][0]["columns"]
    assert [(c["name"], c["present"], c["min"], c["max"]) for c in cols] == [
        ("n", 3, -7, 12), ("f", 3, 0.1, 2.5), ("b", 3, False, True),
        ("vt", None, None, None)]
    head = run_json("head", path, "--columns", "n,f,b")["data"]
    assert [min(r[i] for r in head) for i in range(3)] == [-7, 0.1, False]
    rc, out, err = run("stats", path, check_rc=0)
    vt = [line.split() for line in out.splitlines() if line.startswith("vt")]
    assert vt == [["vt", "Vector<Text>", "-", "-", "-", "-"]]


def test_stats_of_no_rows_counts_none_present(tmp_path):
    path = tmp_path / "e.idv"
    idv.write(path, {"n": np.array([], np.int64), "t": np.array([], object)})
    cols = run_json("stats", path)["files"][0]["columns"]
    assert [(c["name"], c["present"], c["missing"], c["min"]) for c in cols] == \
        [("n", 0, 0, None), ("t", 0, 0, None)]


def test_a_file_name_with_a_control_character_is_escaped(small, tmp_path):
    odd = tmp_path / "a\x1b[31mb.idv"
    odd.write_bytes(small.read_bytes())
    other = tmp_path / "z.idv"
    other.write_bytes(small.read_bytes())
    for args in (("stats", odd, other), ("verify", odd), ("verify", odd, other),
                 ("stats", "--add", odd)):
        rc, out, err = run(*args, check_rc=0)
        assert "\x1b" not in out and "a\\x1b[31mb.idv" in out, args


def test_schema_and_head_json_say_file_and_rows_as_cat_does(small):
    assert run_json("schema", small)["file"] == str(small)
    head = run_json("head", small, "--start", "1", "-n", "5")
    cat = run_json("cat", small, "--rows", "1:")
    assert head["rows"] == cat["rows"] == {"start": 1, "stop": 3, "step": 1, "count": 2}
    assert head["data"] == cat["data"]


def test_an_unknown_backend_is_a_usage_error_on_every_command(small, tmp_path):
    for args in (("head", small), ("convert", small, tmp_path / "o.idv"),
                 ("cat", small, "-f", "csv")):
        rc, out, err = run(*args, "--backend", "zip")
        assert rc == 2 and "--backend: takes a DEFLATE library, libdeflate, isal, zlib; " \
            "not 'zip'" in err, (args, err)


def test_a_backend_not_installed_names_its_extra(small, tmp_path, monkeypatch):
    """Code 1 with the pip command, as every optional package missing: no internal error."""
    import dataclasses
    from idv import compression
    monkeypatch.setitem(compression.BACKENDS, "isal",
                        dataclasses.replace(compression.BACKENDS["isal"], installed=False))
    for args in (("head", small), ("info", small), ("convert", small, tmp_path / "o.idv")):
        rc, out, err = run_main(*args, "--backend", "isal")
        assert rc == 1 and err == "idv: error: DEFLATE backend 'isal' needs the isal " \
            "package: pip install 'idv[isal]'\n", (args, err)
    with pytest.raises(idv.MissingDependencyError, match=r"pip install 'idv\[isal\]'"):
        idv.open(small, backend="isal")


def test_a_url_without_fsspec_is_code_1_naming_the_extra(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "fsspec", None)        # import fsspec fails
    for cmd in ("info", "ls"):
        rc, out, err = run_main(cmd, "https://example.com/x.idv")
        assert (rc, out) == (1, "") and err == "idv: error: reading URLs and fsspec " \
            "filesystems needs fsspec: pip install 'idv[remote]'\n", (cmd, err)


def test_json_lines_refuse_two_columns_of_one_name(tmp_path):
    """A JSON object keys its values by name: of a hidden column and the one shown, picked
    by index, one would be lost silently; CSV and JSON keep both."""
    path = tmp_path / "dup.idv"
    idv.write(path, [("a", np.arange(3)), ("b", np.arange(3.0)), ("a", ["x", "y", "z"])])
    rc, out, err = run("cat", path, "-f", "jsonl", "-c", "a,0")
    assert (rc, out) == (2, "") and "JSON Lines keys its answer by name, and columns 2 and 0 " \
        "are both named 'a': choose one of them" in err
    rc, out, err = run("convert", path, tmp_path / "o.jsonl", "--columns", "a,0")
    assert rc == 1 and "are both named 'a'" in err and not (tmp_path / "o.jsonl").exists()
    rc, out, err = run("cat", path, "-f", "csv", "-c", "a,0", check_rc=0)
    assert out.splitlines()[:2] == ["a,a", "x,0"]
    rc, out, err = run("cat", path, "-f", "jsonl", "-c", "a,a", "-r", ":1", check_rc=0)
    assert out == '{"a": "x"}\n'
