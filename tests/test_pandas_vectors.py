"""Vector columns in pandas kept whole (variable sizes, or vectors="object"): an object column of
one numpy array a row, as pyarrow's own conversion of the same lists gives it (what
pd.read_parquet gives), whichever way the rows were read: a whole file, a dataset of files,
some rows, a filter's."""
from __future__ import annotations

import numpy as np
import pytest

import idv

pa = pytest.importorskip("pyarrow", reason="the reference cells are pyarrow's to_pandas")
pd = pytest.importorskip("pandas", reason="read_pandas needs pandas")

ROWS = 3000


def _lists(rng, items, rows):
    """A list array of `items` cut into `rows` lists of 0-7 items (many empty)."""
    lengths = rng.integers(0, 8, rows) * (rng.random(rows) < 0.8)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), items[:offsets[-1]])


def _table(rows=ROWS):
    rng = np.random.default_rng(3)
    n = 8 * rows
    words = np.array(["", "a", "é", "日本語", "word with spaces", "x" * 300], dtype=object)
    when = np.datetime64("2024-01-01", "ns") + rng.integers(0, 10**12, n) * 100
    return pa.table({
        "single": _lists(rng, pa.array(rng.random(n, dtype=np.float32)), rows),
        "text": _lists(rng, pa.array(words[rng.integers(0, len(words), n)], pa.string()), rows),
        "when": _lists(rng, pa.array(when), rows),
        "int": _lists(rng, pa.array(rng.integers(-5, 5, n).astype(np.int64)), rows),
        "fixed": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(3 * rows)), 3)})


def _same_cells(got, ref, where):
    """Every cell of two object columns: numpy arrays of the same dtype and values."""
    assert got.dtype == object and len(got) == len(ref), where
    for i, (a, b) in enumerate(zip(got, ref)):
        assert isinstance(a, np.ndarray) and a.dtype == b.dtype, (where, i, a, b)
        assert a.tolist() == b.tolist(), (where, i)


def _check(frame, table):
    ref = table.to_pandas()
    assert list(frame.columns) == table.column_names
    for name in table.column_names:
        _same_cells(frame[name], ref[name], name)


def test_whole_file_cells_are_pyarrows_own(tmp_path):
    table = _table()
    idv.write(tmp_path / "v.idv", table, rows_per_block=700)
    _check(idv.read_pandas(tmp_path / "v.idv", vectors="object"), table)


def test_dataset_of_files_cells_are_pyarrows_own(tmp_path):
    table = _table()
    idv.write(tmp_path / "a.idv", table.slice(0, 1000), rows_per_block=300)
    idv.write(tmp_path / "b.idv", table.slice(1000), rows_per_block=500)
    with idv.dataset([tmp_path / "a.idv", tmp_path / "b.idv"]) as ds:
        _check(ds.to_pandas(vectors="object"), table)


def test_some_rows_and_matching_rows_are_pyarrows_own(tmp_path):
    table = _table().append_column("k", pa.array(np.arange(ROWS) % 7))
    idv.write(tmp_path / "v.idv", table, rows_per_block=700)
    with idv.open(tmp_path / "v.idv") as f:
        _check(idv.to_pandas(f, vectors="object", rows=slice(5, 2500, 3)).drop(columns="k"),
               table.slice(5, 2495).take(np.arange(0, 2495, 3)).drop_columns(["k"]))
    got = idv.read_pandas(tmp_path / "v.idv", vectors="object", filter="k == 3")
    _check(got.drop(columns="k"),
           table.filter(pa.array(np.arange(ROWS) % 7 == 3)).drop_columns(["k"]))


def test_no_rows_and_only_empty_vectors(tmp_path):
    table = _table(rows=4)
    empty = table.slice(0, 0)
    idv.write(tmp_path / "e.idv", empty)
    got = idv.read_pandas(tmp_path / "e.idv", vectors="object")
    assert got.shape == (0, 5) and (got.dtypes == object).all()
    blanks = pa.table({"single": pa.array([[]] * 5, pa.list_(pa.float32())),
                       "text": pa.array([[]] * 5, pa.list_(pa.string()))})
    idv.write(tmp_path / "b.idv", blanks)
    _check(idv.read_pandas(tmp_path / "b.idv"), blanks)
