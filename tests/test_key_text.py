"""One rule for keys with KeyValues in every text output: ``idv head`` and ``idv cat``'s table
show the KeyValues text, as ``cat --format csv`` (and Arrow's dictionaries, polars, DuckDB)
do; the missing key (raw 0) is empty. Expected text from ML.NET's sidecars."""
from __future__ import annotations

import csv
import io

import pytest

from cli_run import run
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
