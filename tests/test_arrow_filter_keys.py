"""A key column labelled by KeyValues that a filter tests, read into Arrow (a dictionary of its
labels): its blocks are decoded once, as its key numbers, which the filter tests, and only the
matching rows become a dictionary array. The rows and their values are pyarrow's own filter's
over the table the file was written from; a key without a label is refused as the unfiltered
read refuses it, whether its row matches or not."""
from __future__ import annotations

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow", reason="the Arrow reads need pyarrow")
import pyarrow.compute as pc  # noqa: E402

import idv  # noqa: E402
from craft import key_above_count  # noqa: E402

LABELS = [f"c{i}" for i in range(40)]
ROWS = 5000
RPB = 512           # 10 blocks


def _source():
    """The table written: K a labelled key with missing values (Arrow nulls), X numbers."""
    rng = np.random.default_rng(7)
    idx = rng.integers(0, len(LABELS), ROWS).astype(np.int32)
    missing = rng.random(ROWS) < 0.1
    keys = pa.DictionaryArray.from_arrays(pa.array(idx, mask=missing), pa.array(LABELS))
    return pa.table({"K": keys, "X": rng.random(ROWS)})


@pytest.fixture(scope="module", params=["deflate", None], ids=["deflate", "stored"])
def written(request, tmp_path_factory):
    """The file of _source in blocks of RPB rows, deflated or stored (read on its map)."""
    path = tmp_path_factory.mktemp("keys") / "k.idv"
    source = _source()
    idv.write(path, source, rows_per_block=RPB, compression=request.param)
    return path, source


def _labels(table):
    return table["K"].cast(pa.string())


# (columns read, idv's filter, the rows pyarrow keeps of the source table)
CASES = [
    (["K"], "K == 'c3'", lambda t: pc.equal(_labels(t), "c3")),
    # a missing key has no label, so it is not 'c3' (docs/filters.md): kept
    (["K"], "K != 'c3'", lambda t: pc.invert(pc.fill_null(pc.equal(_labels(t), "c3"), False))),
    (["K", "X"], "K == 'c3' or X > 0.9",
     lambda t: pc.or_kleene(pc.equal(_labels(t), "c3"), pc.greater(t["X"], 0.9))),
    (["X", "K"], "K in ['c1', 'c2'] and X < 0.5",
     lambda t: pc.and_(pc.is_in(_labels(t), pa.array(["c1", "c2"])), pc.less(t["X"], 0.5))),
    (["X"], "K == 'c3'", lambda t: pc.equal(_labels(t), "c3")),
    (None, "K == 'c39'", lambda t: pc.equal(_labels(t), "c39")),
]


def _same_as_pyarrow(got, path, source, columns, keep):
    """`got` holds the rows of `source` pyarrow's filter by mask `keep` keeps (a null: not
    kept), with the types the unfiltered read gives and every label in each dictionary."""
    want = source.filter(pc.fill_null(keep(source), False))
    want = want.select(columns or source.column_names)
    assert got.column_names == want.column_names
    assert got.num_rows == want.num_rows > 0
    for name in want.column_names:
        assert got[name].to_pylist() == want[name].to_pylist(), name
    assert got.schema == idv.arrow_schema(path, got.column_names)
    if "K" in got.column_names:
        assert got["K"].null_count == want["K"].null_count
        for chunk in got["K"].chunks:
            assert chunk.dictionary.to_pylist() == LABELS


@pytest.mark.parametrize("columns, where, keep", CASES, ids=[f"{c[0]} {c[1]}" for c in CASES])
def test_tested_key_read_once_and_its_matches_made_arrow(written, columns, where, keep):
    path, source = written
    with idv.open(path) as f:
        got = idv.to_arrow(f, columns, filter=where)
        assert f["K"].blocks_decoded == f["K"].num_blocks
    _same_as_pyarrow(got, path, source, columns, keep)


@pytest.mark.parametrize("columns, where, keep", CASES, ids=[f"{c[0]} {c[1]}" for c in CASES])
def test_tested_key_in_batches_and_a_step(written, columns, where, keep):
    """A batch at a time, and every third row (the matches then found by position, not
    taken as tested)."""
    path, source = written
    got = idv.record_batch_reader(path, columns, filter=where, batch_size=700).read_all()
    _same_as_pyarrow(got, path, source, columns, keep)
    got = idv.record_batch_reader(path, columns, filter=where, rows=slice(0, None, 3)).read_all()
    _same_as_pyarrow(got, path, source.take(np.arange(0, ROWS, 3)), columns, keep)


def test_engine_filter_on_key_label_reads_it_once(written):
    """What DuckDB asks of an arrow_dataset for ``where K = 'c3'``: a label comparison idv
    takes whole, its column read once."""
    path, source = written
    ds = idv.arrow_dataset(path)
    with ds.idv_dataset.using(0) as f:
        before = f["K"].blocks_decoded
        got = ds.scanner(columns=["K"], filter=pc.field("K") == "c3").to_table()
        assert f["K"].blocks_decoded - before == f["K"].num_blocks
    _same_as_pyarrow(got, path, source, ["K"], CASES[0][2])


@pytest.mark.parametrize("where", ["K == 'a'", "K == 'c'", "K != 'b'"])
def test_key_without_label_refused_though_its_row_fails_the_filter(tmp_path, where):
    """Row 0 holds key 7 of a key of 3 labels: refused as the unfiltered read refuses it,
    naming the file and row, whether the filter keeps row 0 or not."""
    p = key_above_count(tmp_path / "k.idv")
    for read in (lambda: idv.to_arrow(p, ["K"], filter=where),
                 lambda: idv.record_batch_reader(p, filter=where).read_all()):
        with pytest.raises(ValueError) as e:
            read()
        assert str(e.value).startswith(f"{p}: column 'K' row 0: key value 7 is above the key "
                                       f"count 3")
