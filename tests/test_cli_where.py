"""`idv cat --where ... --limit N` and `idv head --where ... -n N`: the first N rows that
match, their blocks read no further than those rows need; `--rows` selects the rows the filter
tests."""
from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

import idv
from idv.cli import main

ROWS, RPB = 200_000, 4096


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = tmp_path_factory.mktemp("where") / "big.idv"
    idv.write(p, {"x": np.arange(ROWS), "t": np.array(["a", "b"] * (ROWS // 2), object)},
              rows_per_block=RPB)
    return p


def _run(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([str(a) for a in argv])
    return code, out.getvalue()


def test_cat_limit_gives_the_first_matching_rows(path):
    code, out = _run("cat", path, "--where", "x > 100000", "--limit", "3", "-f", "csv")
    assert code == 0 and out.splitlines() == ["x,t", "100001,b", "100002,a", "100003,b"]
    code, out = _run("cat", path, "--where", "t == 'b' and x >= 10", "-n", "2", "-f", "json")
    got = json.loads(out)
    assert got["data"] == [[11, "b"], [13, "b"]] and got["rows"]["count"] == 2


def test_rows_select_before_the_filter_and_limit_after(path):
    code, out = _run("cat", path, "--rows", "0:10", "--where", "x > 100000", "-f", "csv")
    assert code == 0 and out.splitlines() == ["x,t"]                 # none of rows 0-9
    code, out = _run("cat", path, "--rows", "::2", "--where", "x > 100", "-n", "2", "-f", "csv")
    assert out.splitlines()[1:] == ["102,a", "104,a"]


def test_head_where_shows_the_first_n_matches(path):
    code, out = _run("head", path, "--where", "x >= 150000", "-n", "2")
    lines = out.splitlines()
    assert code == 0 and "150000" in lines[3] and "150001" in lines[4]
    assert lines[-1] == f"(2 rows of {ROWS})"


def test_limit_stops_decoding(path, monkeypatch):
    decoded = []
    with idv.open(path) as f:
        monkeypatch.setattr("idv.cli.opener.open_file",
                            lambda *a, **k: decoded.append(f) or f, raising=True)
        code, out = _run("cat", path, "--where", "x >= 0", "--limit", "5", "-f", "csv")
        assert code == 0 and len(out.splitlines()) == 6 and decoded == [f]
        assert f["x"].blocks_decoded <= 2 < ROWS // RPB     # not the whole file


@pytest.mark.parametrize("where, said", [
    ("x > 'b'", "--where: column 'x' (Int64) > 'b': Int64 columns compare with numbers, not str"),
    ("x != x", "--where: cannot understand the filter 'x != x': x is a name, read as a "
               "column (a string is written in quotes: 'x'): a filter compares a column with "
               "values written out"),
    ("x != col('x')", "--where: cannot understand the filter \"x != col('x')\": col('x') is "
                      "a column: a filter compares a column with values written out"),
    # where Python's parser stops, not its "(<unknown>, line 1)"
    ("x >", "--where: cannot understand the filter 'x >': invalid syntax at its end\n"),
    ("(x > 3", "--where: cannot understand the filter '(x > 3': '(' was never closed at "
               "character 1\n"),
    # a column named wrongly: the one meant, as --columns says it
    ("X > 3", "--where: no column 'X' (did you mean 'x'?); columns: ['x'"),
])
def test_a_filter_the_columns_refuse_is_a_usage_error(path, capsys, where, said):
    code, out = _run("head", path, "--where", where)
    err = capsys.readouterr().err
    assert (code, out) == (2, "") and err.startswith(f"idv: error: {said}")
    assert "internal error" not in err and "<ast." not in err
