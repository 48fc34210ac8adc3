"""A labelled key holding a raw key above its count (ML.NET writes and reads such a value as it
is): every read that gives the key's labels (Arrow, pandas, Dask, polars, DuckDB, an Arrow
dataset's count) refuses the file with one message, naming the file, column and row, whether
it returns the column or only tests it in a filter, and whatever the filter keeps; the reads
of raw keys (idv.read, the command line) answer."""
from __future__ import annotations

import json

import pytest

import idv
from cli_run import run
from craft import key_above_count

pa = pytest.importorskip("pyarrow", reason="the labelled reads are Arrow's and pandas'")
pc = pytest.importorskip("pyarrow.compute", reason="Arrow dataset filters are expressions")

KEEPS_ROW_0 = "K != 'a'"        # raw 7 has no label: Arrow would compare a null
DROPS_ROW_0 = "K == 'a'"


@pytest.fixture
def path(tmp_path):
    """Raw keys 7, 3, 0, 1 of a Key<UInt32, 3> labelled a, b, c."""
    return key_above_count(tmp_path / "k.idv")


def _refused(path, read, engine=None):
    """`read` refuses the key above its count with check_key_labels' message (an engine's
    own error that carries it where `engine` names one: DuckDB and polars wrap what the
    stream raised)."""
    with pytest.raises(ValueError if engine is None else Exception) as e:
        read()
    said = f"{path}: column 'K' row 0: key value 7 is above the key count 3"
    text = str(e.value)
    assert text.startswith(said) if engine is None else said in text, text
    assert "filter=" in text and "idv.read()" in text


@pytest.mark.parametrize("where", [DROPS_ROW_0, KEEPS_ROW_0])
@pytest.mark.parametrize("columns", [None, []], ids=["returned", "tested-only"])
def test_arrow_and_pandas_refuse_whatever_the_filter_keeps(path, where, columns):
    _refused(path, lambda: idv.to_arrow(path, columns, filter=where))
    _refused(path, lambda: idv.record_batch_reader(path, columns, filter=where).read_all())
    pytest.importorskip("pandas", reason="the pandas read needs pandas")
    _refused(path, lambda: idv.read_pandas(path, columns, filter=where))


@pytest.mark.parametrize("where", [DROPS_ROW_0, KEEPS_ROW_0])
def test_dask_refuses_whatever_the_filter_keeps(path, where):
    pytest.importorskip("dask.dataframe", reason="the Dask read needs dask[dataframe]")
    from idv.dask import read_idv
    _refused(path, lambda: read_idv(path, filter=where).compute())


@pytest.mark.parametrize("expr", [pc.field("K") == "a", pc.field("K") != "a"],
                         ids=["drops-row-0", "keeps-row-0"])
def test_arrow_dataset_table_and_count_refuse(path, expr):
    ds = idv.arrow_dataset(path)
    _refused(path, lambda: ds.to_table(filter=expr))
    _refused(path, lambda: ds.to_table(columns=[], filter=expr))
    _refused(path, lambda: ds.count_rows(filter=expr))
    _refused(path, lambda: ds.scanner(filter=expr).count_rows())


@pytest.mark.parametrize("expr", [pc.field("K").is_null(),
                                  pc.field("K").is_null() | pc.field("K").is_valid()],
                         ids=["some-rows", "every-row"])
def test_arrow_dataset_count_with_statistics_refuses(path, expr):
    """Statistics that decide a block are not the answer when the key tested has labels:
    its rows are decoded, and checked, as to_table's are."""
    idv.add_statistics(path)
    assert idv.open(path).statistics is not None
    ds = idv.arrow_dataset(path)
    _refused(path, lambda: ds.to_table(filter=expr))
    _refused(path, lambda: ds.count_rows(filter=expr))


def test_duckdb_and_polars_refuse(path):
    duckdb = pytest.importorskip("duckdb", reason="the DuckDB read needs duckdb")
    ds = idv.arrow_dataset(path)
    _refused(path, lambda ds=ds: duckdb.sql("select count(*) from ds where K = 'b'").fetchall(), "duckdb")
    _refused(path, lambda ds=ds: duckdb.sql("select 1 from ds where K = 'b'").fetchall(), "duckdb")
    pytest.importorskip("polars", reason="the polars read needs polars")
    import polars as pl
    from idv.polars import scan_idv
    _refused(path, lambda: scan_idv(path).filter(pl.col("K") == "b").collect(),
             "polars")


def test_raw_key_reads_answer(path):
    """idv.read and the command line give raw keys (the CLI prints a key above its count as
    its integer), filtered or not."""
    assert idv.read(path)["K"].tolist() == [7, 3, 0, 1]
    assert idv.read(path, filter="K == 'c'")["K"].tolist() == [3]
    assert 7 in idv.read(path, filter="K != 'a'")["K"].tolist()
    _, out, _ = run("cat", path, "--where", "K == 'c'", "--format", "jsonl", check_rc=0)
    assert [json.loads(line)["K"] for line in out.splitlines()] == [3]
    _, out, _ = run("cat", path, "--where", "K != 'a'", "--format", "jsonl", check_rc=0)
    assert 7 in [json.loads(line)["K"] for line in out.splitlines()]


def _vector_key_above_count(path):
    """Vector<Key<UInt32, 2>, 2> VK (KeyValues p, q) holding raw keys [1, 2], [9, 2], [1, 1],
    and X = 0, 1, 2 (the 9 patched into the stored block, which the writer would refuse)."""
    import struct
    import numpy as np
    from craft import build, col_named, parse
    idv.write(path, {"VK": np.array([[1, 2], [2, 2], [1, 1]], np.uint32),
                     "X": np.arange(3.0)},
              types={"VK": idv.Vector(idv.Key(idv.UInt32, 2), 2)},
              metadata={"VK": {"KeyValues": ["p", "q"]}}, checksums=False, statistics=False)
    model = parse(path.read_bytes())
    col = col_named(model, "VK")
    items = struct.pack("<6I", 1, 2, 2, 2, 1, 1)
    assert col.blocks[0].count(items) == 1
    col.blocks = [col.blocks[0].replace(items, struct.pack("<6I", 1, 2, 9, 2, 1, 1))]
    path.write_bytes(build(model)[0])
    return path


def test_pandas_vector_slots_refuse_whatever_the_filter_keeps(tmp_path):
    """A vector's slots expanded into Categoricals are checked in every row decoded, as the
    unfiltered read checks them; kept as cells of raw keys (vectors="object") they are not."""
    pytest.importorskip("pandas", reason="the pandas read needs pandas")
    p = _vector_key_above_count(tmp_path / "v.idv")
    said = f"{p}: column 'VK' row 1 item 0: key value 9 is above the key count 2"
    for read in (lambda: idv.read_pandas(p), lambda: idv.read_pandas(p, filter="X != 1"),
                 lambda: idv.read_pandas(p, ["VK"], filter="X == 1")):
        with pytest.raises(ValueError) as e:
            read()
        assert str(e.value).startswith(said), str(e.value)
    got = idv.read_pandas(p, vectors="object", filter="X != 1")
    assert [c.tolist() for c in got["VK"]] == [[1, 2], [1, 1]]
    assert idv.read(p, filter="X != 1")["VK"].tolist() == [[1, 2], [1, 1]]


def test_verify_warns_of_a_key_that_reads_giving_labels_refuse(path, tmp_path):
    """The file stays sound (ML.NET writes and reads such a value), but verify tells, once a
    column with its block and rows, what every labelled read will refuse; the command line's
    report carries it and exits 0."""
    for p, name, value, count in [(path, "K", 7, 3),
                                  (_vector_key_above_count(tmp_path / "v.idv"), "VK", 9, 2)]:
        report = idv.verify(p)
        assert report.ok and not report.problems
        said = [str(w) for w in report.warnings]
        assert len(said) == 1, said
        assert f"'{name}' block 0" in said[0], said
        assert f"key value {value} is above the key count {count}" in said[0], said
        _, out, _ = run("verify", p, check_rc=0)
        assert "1 warning" in out and f"key value {value}" in out, out
    clean = tmp_path / "clean.idv"
    idv.write(clean, {"K": [1, 3, 0]}, types={"K": idv.Key(idv.UInt32, 3)},
              metadata={"K": {"KeyValues": ["a", "b", "c"]}})
    assert not idv.verify(clean).warnings
