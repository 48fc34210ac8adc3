"""Notebook display (``_repr_html_``) of files, schemas, columns and datasets: the columns
with their ML.NET and Arrow types, annotations and statistics, the first rows, every value
escaped."""
from __future__ import annotations

import html
import re

import numpy as np
import pytest

import idv


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "shown.idv"
    idv.write(p, {"x": np.arange(100), "t": np.array(["<b>bold</b>", "a&b"] * 50, object),
                  "v": np.ones((100, 3), np.float32)}, rows_per_block=30)
    return p


def _cells(page):
    return [html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", page)]


def test_a_file_shows_its_columns_statistics_and_first_rows(path):
    with idv.open(path) as f:
        page = f._repr_html_()
    assert "100 rows, 3 columns, 4 blocks a column" in page
    cells = _cells(page)
    assert ["0", "x", "Int64", "int64", "", "0", "99"] == cells[:7]
    assert cells[7:12] == ["1", "t", "Text", "string", ""]
    assert "<b>bold</b>" not in page and "&lt;b&gt;bold&lt;/b&gt;" in page     # escaped
    assert "Vector<Single, 3>" in cells and "fixed_size_list<item: float>[3]" in cells
    rows = page.split("<th>row</th>")[1]
    assert _cells(rows)[:3] == ["0", "0", "<b>bold</b>"]
    assert len(re.findall("<tr>", rows)) == 5                      # the first 5 rows


def test_without_statistics_nothing_is_decoded_for_bounds(tmp_path):
    p = tmp_path / "plain.idv"
    idv.write(p, {"x": np.arange(100)}, rows_per_block=10, statistics=False)
    with idv.open(p) as f:
        page = f._repr_html_()
        assert f["x"].blocks_decoded == 1                           # the first rows' block
    assert "no block statistics" in page


def test_schema_column_dataset_and_closed_file(path):
    with idv.open(path) as f:
        assert "<b>idv schema</b>: 3 columns, 100 rows" in f.schema._repr_html_()
        assert "x: Int64, 100 rows, 4 blocks" in html.unescape(f["x"]._repr_html_())
    assert "(closed)" in f._repr_html_()
    ds = idv.dataset([path, path])
    page = ds._repr_html_()
    assert "2 files, 200 rows, 3 columns" in page and "&lt;b&gt;" in page
