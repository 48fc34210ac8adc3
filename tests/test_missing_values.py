"""Missing values from CSV and pandas: ML.NET has them only in Single / Double (NaN), keys (0)
and Text (empty). The errors say so and how to choose; ``--types`` / ``types=`` choose,
``missing_text=`` writes missing text as ML.NET's empty text. ML.NET (the oracle) reads what
comes out.
"""
from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest

import idv
from cli_run import run
from expected import column_index

pd = pytest.importorskip("pandas", reason="the pandas cases need pandas")
pytest.importorskip("pyarrow", reason="CSV conversion needs pyarrow")

PEOPLE = "Name,Age,Grade\nann,31,2\nbob,,1\n,40,3\n"


def _people(tmp_path):
    src = tmp_path / "people.csv"
    src.write_text(PEOPLE)
    return src


def test_an_empty_integer_cell_names_the_types_that_hold_one(tmp_path):
    rc, _, err = run("convert", _people(tmp_path), tmp_path / "p.idv")
    assert rc != 0
    assert "column 'Age' row 1" in err and "Int64 has no missing value" in err
    assert "Single and Double (NaN), keys (0) and Text (empty)" in err
    assert "--types COLUMN=Double" in err
    assert not (tmp_path / "p.idv").exists()


def test_types_on_the_command_line_as_in_python(tmp_path, oracle):
    src = _people(tmp_path)
    out_cli, out_py = tmp_path / "cli.idv", tmp_path / "py.idv"
    run("convert", src, out_cli, "--types", "Age=Single,Grade=Key<UInt32, 3>", check_rc=0)
    idv.convert(src, out_py, types={"Age": "Single", "Grade": idv.Key(idv.UInt32, 3)})
    dumps = oracle.dump_many([out_cli, out_py])
    for doc in dumps.values():
        types = {c["name"]: c["type_string"] for c in doc["columns"]}
        assert types == {"Name": "String", "Age": "Single", "Grade": "Key<UInt32, 0-2>"}
        ages = [float(r[column_index(doc, "Age")]) for r in doc["rows"]]
        assert ages[0] == 31 and ages[2] == 40 and math.isnan(ages[1])
        assert [r[column_index(doc, "Name")] for r in doc["rows"]] == ["ann", "bob", ""]


def test_types_given_once_a_column_are_all_kept(tmp_path):
    """--types repeated, a column each, is the comma-separated list (the last one alone was
    kept, and the other columns typed by inference)."""
    src = _people(tmp_path)
    run("convert", src, tmp_path / "one.idv", "--types", "Age=Single,Grade=Key<UInt32, 3>",
        check_rc=0)
    run("convert", src, tmp_path / "each.idv", "--types", "Age=Single", "--types",
        "Grade=Key<UInt32, 3>", check_rc=0)
    with idv.open(tmp_path / "one.idv") as one, idv.open(tmp_path / "each.idv") as each:
        assert str(one.schema) == str(each.schema)      # ISA-L's bytes may differ run to run
        assert [str(c.type) for c in each.columns] == ["Text", "Single", "Key<UInt32, 3>"]
        assert str(one.read()) == str(each.read())


@pytest.mark.parametrize("spec, message", [
    ("Age", "give NAME=TYPE"), ("Age=Sngle", "'Sngle' is not an idv type"),
    ("Nope=Single", "Nope"), ("Age=Single,Age=Double", "'Age' is given a type twice"),
    ("Age=Key<Byte, 400>", "--types Age: key count 400 does not fit Byte")])
def test_bad_types_are_usage_errors(tmp_path, spec, message):
    rc, _, err = run("convert", _people(tmp_path), tmp_path / "p.idv", "--types", spec)
    assert rc == 2 and message in err, err


@pytest.mark.parametrize("missing", [np.nan, None])
def test_missing_text_among_strings(tmp_path, missing, oracle):
    df = pd.DataFrame({"Id": [1, 2, 3], "Name": pd.Series(["a", missing, "c"], dtype=object)})
    with pytest.raises(ValueError, match=r"column 'Name' row 1: .* missing_text=\"\""):
        idv.write(tmp_path / "x.idv", df)
    assert not (tmp_path / "x.idv").exists()
    idv.write(tmp_path / "x.idv", df, missing_text="")
    doc = oracle.dump(tmp_path / "x.idv")
    assert [r[column_index(doc, "Name")] for r in doc["rows"]] == ["a", "", "c"]


def test_missing_text_in_arrow_strings(tmp_path, oracle):
    """missing_text= means the same for Arrow data as for a DataFrame: a Table's strings and
    string views, Arrow columns in a dict, the string items of lists; without it, the error
    that names it."""
    pa = pytest.importorskip("pyarrow", reason="Arrow strings need pyarrow")
    names = ["a", None, "c"]
    forms = {"table": pa.table({"Name": names}),
             "views": {"Name": pa.array(names, pa.string_view())},
             "lists": pa.table({"Name": names, "Tags": [["x", None], [], [None]]})}
    for form, data in forms.items():
        with pytest.raises(ValueError, match=r"column 'Name' row 1: .* missing_text=\"\""):
            idv.write(tmp_path / f"{form}.idv", data)
        assert not (tmp_path / f"{form}.idv").exists()
        idv.write(tmp_path / f"{form}.idv", data, missing_text="")
    dumps = oracle.dump_many([tmp_path / f"{form}.idv" for form in forms])
    for doc in dumps.values():
        assert [r[column_index(doc, "Name")] for r in doc["rows"]] == ["a", "", "c"]
    with idv.open(tmp_path / "lists.idv") as f:
        assert [list(r) for r in f["Tags"].read()] == [["x", ""], [], [""]]


def test_missing_text_means_the_same_whatever_form_the_text_comes_in(tmp_path, oracle):
    """None or NaN among a list's or a numpy array's strings, a masked string, an Arrow null:
    through idv.write and idv.Writer, the one refusal without missing_text, and with it the
    text ML.NET then reads."""
    pa = pytest.importorskip("pyarrow", reason="the Arrow form needs pyarrow")
    forms = {"list": ["a", None, "c"], "nan": ["a", math.nan, "c"],
             "objects": np.array(["a", None, "c"], dtype=object),
             "masked": np.ma.masked_array(["a", "x", "c"], mask=[0, 1, 0]),
             "arrow": pa.array(["a", None, "c"])}
    refused = r"column 'Name' row 1: .*, but Text has no missing value in ML.NET .*missing_text"
    written = []
    for form, values in forms.items():
        with pytest.raises(ValueError, match=refused):
            idv.write(tmp_path / "x.idv", {"Name": values})
        with pytest.raises(ValueError, match=refused):
            with idv.Writer(tmp_path / "x.idv", {"Name": idv.Text}) as w:
                w.write_batch({"Name": values})
        assert not (tmp_path / "x.idv").exists()
        written.append(tmp_path / f"{form}.idv")
        idv.write(written[-1], {"Name": values}, missing_text="")
        written.append(tmp_path / f"{form}-writer.idv")
        with idv.Writer(written[-1], {"Name": idv.Text}, missing_text="") as w:
            w.write_batch({"Name": values})
    with pytest.raises(TypeError, match="missing_text must be a str"):
        idv.Writer(tmp_path / "x.idv", {"Name": idv.Text}, missing_text=0)
    for doc in oracle.dump_many(written).values():
        assert [r[column_index(doc, "Name")] for r in doc["rows"]] == ["a", "", "c"]


def test_missing_text_in_a_string_dtype_column(tmp_path):
    df = pd.DataFrame({"Name": pd.Series(["a", None], dtype="string")})
    with pytest.raises(ValueError, match="missing_text"):
        idv.write(tmp_path / "x.idv", df)
    idv.write(tmp_path / "x.idv", df, missing_text="?")
    with idv.open(tmp_path / "x.idv") as f:
        assert f["Name"].read().tolist() == ["a", "?"]


def test_other_object_columns_are_not_touched_by_missing_text(tmp_path):
    df = pd.DataFrame({"F": [1.5, math.nan], "V": pd.Series([[1, 2], [3, 4]], dtype=object)})
    idv.write(tmp_path / "x.idv", df, missing_text="")
    with idv.open(tmp_path / "x.idv") as f:
        assert np.isnan(f["F"].read()[1]) and f["V"].type == idv.Vector(idv.Int64, 2)


def test_date_objects_are_dates(tmp_path, oracle):
    df = pd.DataFrame({"D": pd.Series([dt.date(2024, 2, 29), dt.date(1, 1, 1)], dtype=object)})
    idv.write(tmp_path / "d.idv", df)
    doc = oracle.dump(tmp_path / "d.idv")
    assert doc["columns"][0]["type_string"] == "DateTime"
    days = [(d - dt.date(1, 1, 1)).days for d in df["D"]]       # .NET ticks: 100 ns since 0001
    assert [int(r[0]) for r in doc["rows"]] == [d * 864_000_000_000 for d in days]


def test_null_text_from_parquet_with_missing_text(tmp_path, oracle):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    src = tmp_path / "names.parquet"
    pq.write_table(pa.table({"Name": ["a", None, "c"], "N": [1, 2, 3]}), src)
    rc, _, err = run("convert", src, tmp_path / "x.idv")
    assert rc == 1 and "column 'Name' row 1: null, but Text" in err and "--missing-text" in err
    run("convert", src, tmp_path / "cli.idv", "--missing-text", "", check_rc=0)
    idv.convert(src, tmp_path / "py.idv", missing_text="")
    dumps = oracle.dump_many([tmp_path / "cli.idv", tmp_path / "py.idv"])
    for doc in dumps.values():
        assert [r[column_index(doc, "Name")] for r in doc["rows"]] == ["a", "", "c"]


def test_a_missing_value_given_a_key_type_is_the_missing_key_on_every_input(tmp_path):
    """NaN, None, a null, a masked entry and pandas' <NA> written to a key are 0, its
    missing value, from every input (NaN, None and <NA> were refused as if a key had no
    missing value)."""
    pa = pytest.importorskip("pyarrow", reason="the Arrow inputs need pyarrow")
    key = idv.Key(idv.Byte, 3)
    inputs = {
        "numpy NaN": {"k": np.array([1, np.nan, 3])},
        "masked": {"k": np.ma.masked_array([1, 2, 3], mask=[0, 1, 0])},
        "Arrow NaN": pa.table({"k": pa.array([1, float("nan"), 3])}),
        "Arrow null": pa.table({"k": pa.array([1, None, 3])}),
        "pandas <NA>": pd.DataFrame({"k": pd.array([1, None, 3], dtype="Int64")}),
        "pandas NaN": pd.DataFrame({"k": [1, np.nan, 3]}),
        "None": {"k": [1, None, 3]},
        "<NA> among objects": {"k": np.array([1, pd.NA, 3], object)},
        "frame of objects": pd.DataFrame({"k": pd.Series([1, pd.NA, 3], dtype=object)}),
    }
    for name, data in inputs.items():
        idv.write(tmp_path / "k.idv", data, types={"k": key})
        assert idv.read(tmp_path / "k.idv")["k"].tolist() == [1, 0, 3], name


def test_a_text_column_of_only_missing_values_is_filled_as_any_other(tmp_path):
    """missing_text fills a Text column whose every value is missing, as it fills one with a
    few (it was refused, advising the option given); so a partitioned write whose part holds
    only missing text writes it."""
    idv.write(tmp_path / "all.idv", {"x": [None, None]}, types={"x": idv.Text},
              missing_text="")
    assert idv.read(tmp_path / "all.idv")["x"].tolist() == ["", ""]
    idv.write(tmp_path / "parts", {"p": [1, 2], "x": ["a", None]}, partition_by=["p"],
              missing_text="")
    got = idv.dataset(tmp_path / "parts", partitioning="hive").read()
    assert sorted(zip(got["p"].tolist(), got["x"].tolist())) == [(1, "a"), (2, "")]
