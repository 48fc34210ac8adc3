"""The Arrow C stream (PyCapsule interface): an open .idv is read directly by pyarrow, polars
and DuckDB, block by block; record_batch_reader's object too, with columns= and batch_size=.
Expected values are ML.NET's own (the bundled sample's sidecar, testdata/sample.json).
"""
from __future__ import annotations

import pytest

import idv
from reference import REPO_DIR, load_json

pa = pytest.importorskip("pyarrow")
SIDE = load_json(REPO_DIR / "testdata" / "sample.json")
COLS = {c["name"]: c["index"] for c in SIDE["columns"]}


def mlnet(name):
    return [row[COLS[name]] for row in SIDE["rows"]]


def test_pyarrow_reads_the_stream():
    if not hasattr(pa.RecordBatchReader, "__arrow_c_stream__"):
        pytest.skip("pyarrow < 14 has no PyCapsule stream")
    with idv.open(idv.sample_path()) as f:
        table = pa.table(f)
        assert table.equals(idv.to_arrow(f))
        assert table.column("Id").to_pylist() == mlnet("Id")
        # a requested schema is honoured where pyarrow can cast
        wanted = pa.schema([pa.field("Id", pa.float64()), pa.field("Bedrooms", pa.int64())])
        reader = idv.record_batch_reader(f, ["Id", "Bedrooms"])
        got = pa.RecordBatchReader._import_from_c_capsule(
            reader.__arrow_c_stream__(wanted.__arrow_c_schema__())).read_all()
        assert got.schema == wanted and got.column("Id").to_pylist() == \
            [float(x) for x in mlnet("Id")]


def test_polars_reads_an_open_file():
    pl = pytest.importorskip("polars")
    with idv.open(idv.sample_path()) as f:
        df = pl.DataFrame(f)
    assert df.shape == (240, 9)
    assert df["Id"].to_list() == mlnet("Id")
    assert df["Title"].to_list() == mlnet("Title")
    assert df["Sold"].to_list() == mlnet("Sold")
    kv = next(a["value"] for c in SIDE["columns"] if c["name"] == "City"
              for a in c["annotations"] if a["kind"] == "KeyValues")
    assert df["City"].cast(pl.Utf8).to_list() == [kv[k - 1] if k else None for k in mlnet("City")]


def test_duckdb_queries_an_open_file_and_a_batch_reader():
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    with idv.open(idv.sample_path()) as f:
        con.register("listings", f)
        n, total = con.sql("SELECT count(*), sum(Price) FROM listings").fetchall()[0]
        assert (n, total) == (240, sum(float(p) for p in mlnet("Price")))
        sold = con.sql("SELECT count(*) FROM listings WHERE Sold").fetchall()[0][0]
        assert sold == sum(1 for s in mlnet("Sold") if s)
        reader = idv.record_batch_reader(f, ["Id", "Bedrooms"], batch_size=50)
        con.register("few", reader)
        rows = con.sql("SELECT Id, Bedrooms FROM few ORDER BY Id LIMIT 3").fetchall()
        want = sorted(zip(mlnet("Id"), mlnet("Bedrooms")))[:3]
        assert rows == [tuple(w) for w in want]


@pytest.mark.parametrize("rows", [slice(37, 201), slice(5, 240, 7), slice(90, 90)])
def test_record_batch_reader_reads_a_range_of_rows(rows):
    with idv.open(idv.sample_path()) as f:
        got = idv.record_batch_reader(f, ["Id", "Title"], rows=rows, batch_size=64).read_all()
    picked = list(range(240))[rows]
    assert got.column("Id").to_pylist() == [mlnet("Id")[i] for i in picked]
    assert got.column("Title").to_pylist() == [mlnet("Title")[i] for i in picked]


def test_a_filtered_read_of_no_column_gives_the_rows_that_match(tmp_path):
    """Asked for no column (a count), a filtered read still gives as many rows as match: as
    many as pyarrow's own filter of the table written keeps."""
    import numpy as np
    import pyarrow.compute as pc
    p = tmp_path / "a.idv"
    table = pa.table({"X": np.arange(100.0), "K": np.arange(100) % 7})
    idv.write(p, table, rows_per_block=16)
    want = table.filter((pc.field("X") > 30) & (pc.field("K") != 3)).num_rows
    where = "X > 30 and K != 3"
    assert idv.to_arrow(p, [], filter=where).num_rows == want
    assert idv.record_batch_reader(p, [], filter=where, batch_size=10).read_all().num_rows \
        == want
    expr = (pc.field("X") > 30) & (pc.field("K") != 3)
    with idv.arrow_dataset(p) as ds:
        assert ds.to_table(columns=[], filter=expr).num_rows == want
        assert ds.count_rows(filter=expr) == want
        # a filter pyarrow tests (idv skips blocks only)
        odd = pc.equal(pc.bit_wise_and(pc.field("K"), 1), 1)
        assert ds.to_table(columns=[], filter=odd).num_rows == table.filter(odd).num_rows
    assert idv.to_arrow(p, []).num_rows == 100
