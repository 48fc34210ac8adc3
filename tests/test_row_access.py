"""Rows as numpy, h5py and pandas users reach for them: np.asarray(col), list(col), col[i],
col[[i, j]], boolean masks, f[a:b], f.read(rows=...), shape / dtype / ndim / len, and schemas
that compare by their columns. Each block is decoded once per access, and no selection keeps
a whole decoded block alive.

Expected values come from ML.NET's dump of the bundled sample (testdata/sample.json).
"""
from __future__ import annotations

import numpy as np
import pytest

import idv
from reference import REPO_DIR, load_json

SIDE = load_json(REPO_DIR / "testdata" / "sample.json")
COLS = {c["name"]: c["index"] for c in SIDE["columns"]}


def mlnet(name):
    """ML.NET's values of a sample column, as numbers."""
    return [row[COLS[name]] for row in SIDE["rows"]]


def features():
    return np.array([[float(x) for x in r] for r in mlnet("Features")], np.float32)


def test_asarray_and_iteration_decode_each_block_once():
    with idv.open(idv.sample_path()) as f:
        col = f["Features"]
        assert col.shape == (240, 4) and col.ndim == 2 and col.dtype == np.float32
        assert len(f) == 240 and f["Id"].shape == (240,)
        arr = np.asarray(col)
        assert col.blocks_decoded == col.num_blocks == 4
        np.testing.assert_array_equal(arr, features())
        assert np.asarray(col, dtype=np.float64).dtype == np.float64
        ids = f["Id"]
        assert list(ids) == mlnet("Id") and ids.blocks_decoded == 4
        rows = [r for r in col]
        assert len(rows) == 240 and col.blocks_decoded == 12     # 4 per pass, 3 passes
        np.testing.assert_array_equal(np.stack(rows), features())


def test_variable_vectors_have_no_array_form(tmp_path):
    p = tmp_path / "ragged.idv"
    idv.write(p, {"v": idv.Ragged.from_list([[1.0], [2.0, 3.0]])})
    with idv.open(p) as f:
        assert f["v"].shape == (2, None)
        with pytest.raises(TypeError, match="variable-size vectors.*read\\(\\)"):
            np.asarray(f["v"])
        assert [r.tolist() for r in f["v"]] == [[1.0], [2.0, 3.0]]


def test_selections_decode_only_their_blocks_and_pin_none():
    want = features()
    with idv.open(idv.sample_path()) as f:
        col = f["Features"]
        row = col[70]
        assert row.base is None and row.tolist() == want[70].tolist()
        assert col.blocks_decoded == 1
        picked = col[[3, 200, -1, 3]]
        assert picked.tolist() == want[[3, 200, 239, 3]].tolist()
        assert col.blocks_decoded == 1 + 2          # blocks 0 and 3, once each
        mask = np.zeros(240, bool)
        mask[[130, 131, 190]] = True
        assert col[mask].tolist() == want[mask].tolist()
        assert col.blocks_decoded == 3 + 1          # block 2 only
        small = col[65:67]
        assert small.base is None                   # 2 rows of a 64-row block: a copy
        with pytest.raises(IndexError, match="row 240 out of range"):
            col[[0, 240]]
        with pytest.raises(IndexError, match="mask of 3 rows"):
            col[np.array([True, False, True])]
        with pytest.raises(TypeError, match="boolean mask"):
            col[1.5]


def test_file_slices_select_rows():
    with idv.open(idv.sample_path()) as f:
        part = f[100:103]
        assert list(part) == [c.name for c in f.columns]
        assert part["Id"].tolist() == mlnet("Id")[100:103]
        assert part["Title"].tolist() == mlnet("Title")[100:103]
        sub = f.read(columns=["Price"], rows=[0, 239])
        assert sub["Price"].tolist() == [float(x) for x in mlnet("Price")[0:240:239]]
        assert f["Price"].blocks_decoded == 1 + 2     # f[100:103], then blocks 0 and 3
        with pytest.raises(IndexError, match="9 columns"):
            f[9]
        with pytest.raises(ValueError, match="sparse"):
            f.read(rows=slice(0, 2), sparse=True)


def test_schema_membership_and_equality(tmp_path):
    with idv.open(idv.sample_path()) as a, idv.open(idv.sample_path()) as b:
        assert "Title" in a.schema and "Nope" not in a.schema
        assert a.schema == b.schema and a.schema[0] == b.schema[0]
        assert a.schema != b.schema.fields          # a Schema equals only a Schema
    p = tmp_path / "other.idv"
    idv.write(p, {"Id": np.arange(3)})
    with idv.open(p) as c, idv.open(idv.sample_path()) as a:
        assert c.schema != a.schema
