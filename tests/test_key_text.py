"""One rule for keys with KeyValues in every text output: ``idv head`` and ``idv cat``'s table
show the KeyValues text, as ``cat --format csv`` (and Arrow's dictionaries, polars, DuckDB)
do; the missing key (raw 0) is empty. Expected text from ML.NET's sidecars."""
from __future__ import annotations

import csv
import io

import pytest

from cli_run import run
from craft import key_above_count
from expected import annotations_by_kind, column_index
from reference import fixture, sidecar

CASES = [("mixed_default", "Key"), ("keys", "KeyWithText"), ("pipeline_keys", "ColorKey")]


def _mlnet_labels(name, column):
    """ML.NET's raw keys of the column turned into their KeyValues text ("" for 0)."""
    doc = sidecar(name)
    i = column_index(doc, column)
    kv = annotations_by_kind(doc["columns"][i])["KeyValues"]["value"]
    return ["" if int(r[i]) == 0 else kv[int(r[i]) - 1] for r in doc["rows"]]


def _table_column(text):
    """The one data column of a head / cat table (after the two header lines and the rule)."""
    lines = text.splitlines()[3:-1]
    return [line.split(maxsplit=1)[1] if len(line.split(maxsplit=1)) > 1 else ""
            for line in lines]


@pytest.mark.parametrize("name, column", CASES)
def test_head_and_cat_show_key_values_as_csv_does(name, column):
    want = _mlnet_labels(name, column)
    n = len(want)
    _, head, _ = run("head", fixture(name), "-c", column, "-n", n, check_rc=0)
    _, table, _ = run("cat", fixture(name), "-c", column, check_rc=0)
    _, text, _ = run("cat", fixture(name), "-c", column, "--format", "csv", check_rc=0)
    assert _table_column(head) == want
    assert _table_column(table) == want
    assert [r[0] for r in csv.reader(io.StringIO(text))][1:] == want


def test_text_outputs_print_a_key_above_its_count_as_its_raw_integer(tmp_path):
    import idv
    p = key_above_count(tmp_path / "k.idv")
    want = ["7", "c", "", "a"]
    _, head, _ = run("head", p, check_rc=0)
    _, table, _ = run("cat", p, check_rc=0)
    assert _table_column(head) == want
    assert _table_column(table) == want
    for fmt, sep in (("csv", ","), ("tsv", "\t")):
        _, text, _ = run("cat", p, "--format", fmt, check_rc=0)
        assert [r[0] for r in csv.reader(io.StringIO(text), delimiter=sep)] == ["K"] + want
    idv.convert(p, tmp_path / "k.csv")
    with open(tmp_path / "k.csv", newline="") as f:
        assert [r[0] for r in csv.reader(f)] == ["K"] + want


def test_arrow_refuses_a_key_above_its_count_naming_file_row_and_raw_reads(tmp_path):
    """A dictionary (or a Categorical) holds labels only, and its type is set before the rows
    are read: every Arrow path and pandas refuse the value with the file, the column, the row
    and the reads that give raw keys."""
    import idv
    pytest.importorskip("pyarrow", reason="the Arrow reads need pyarrow")
    pytest.importorskip("pandas", reason="the pandas read needs pandas")
    p = key_above_count(tmp_path / "k.idv")
    for read in (idv.to_arrow, lambda p: idv.record_batch_reader(p).read_all(),
                 idv.read_pandas):
        with pytest.raises(ValueError) as e:
            read(p)
        assert str(e.value).startswith(f"{p}: column 'K' row 0: key value 7 is above the key "
                                       f"count 3")
        assert "idv.read()" in str(e.value) and "columns=" in str(e.value)
    assert idv.read(p)["K"].tolist() == [7, 3, 0, 1]


def test_csv_key_vector_slots_are_their_labels(tmp_path):
    """Each slot column of a key vector with KeyValues holds labels, as a scalar key's column
    and pandas' slot Categoricals of the same names do."""
    import numpy as np
    import idv
    p = tmp_path / "kv.idv"
    idv.write(p, {"VK": np.array([[0, 1], [2, 2], [1, 0]], np.uint32)},
              types={"VK": idv.Vector(idv.Key(idv.UInt32, 2), 2)},
              metadata={"VK": {"KeyValues": ["p", "q"]}})
    _, text, _ = run("cat", p, "--format", "csv", check_rc=0)
    assert text.splitlines() == ["VK.0,VK.1", ",p", "q,q", "p,"]
