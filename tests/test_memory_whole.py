"""The memory limit of whole reads and of streams' batches, one rule on every path: a read of
several columns is checked with all of them together (a file's as a dataset's), before any
block is decoded, and a stream asked for batches larger than the limit allows is refused
before it reads."""
from __future__ import annotations

import numpy as np
import pytest

import idv

ROWS = 100_000          # a Double column: 800 KB
LIMIT = 1_000_000       # each column fits, the three together do not


@pytest.fixture
def three(tmp_path):
    """A file of three Double columns of ROWS rows in blocks of 8,192."""
    path = tmp_path / "three.idv"
    idv.write(path, {k: np.arange(ROWS, dtype=np.float64) for k in "abc"},
              rows_per_block=8192)
    return path


@pytest.mark.parametrize("how", [
    lambda f: f.read(),
    lambda f: f.read(rows=slice(None)),
    lambda f: f.read(rows=slice(0, ROWS, 2)),
    lambda f: idv.read(f),
    lambda f: idv.to_arrow(f),
    lambda f: idv.read_pandas(f),
    lambda f: f.to_pandas(columns=["a", "b"]),
], ids=["read", "read-slice", "read-step", "idv.read", "to_arrow", "read_pandas", "two-cols"])
def test_a_files_read_of_several_columns_is_checked_as_a_whole(three, how):
    """Each column alone fits the limit: the read of them all is refused before any block
    is decoded, as the same read of a dataset of the file is."""
    pytest.importorskip("pyarrow", reason="to_arrow needs pyarrow")
    pytest.importorskip("pandas", reason="to_pandas needs pandas")
    with idv.open(three, memory_limit=LIMIT) as f:
        assert len(f.read(["a"])["a"]) == ROWS                 # one column fits
        decoded = f["b"].blocks_decoded
        with pytest.raises(idv.MemoryLimitError, match="reading [23] columns of 1 file"):
            how(f)
        assert f["b"].blocks_decoded == decoded
    with idv.dataset(three, memory_limit=LIMIT) as ds:
        with pytest.raises(idv.MemoryLimitError, match="reading 3 columns of 1 file"):
            ds.read()


def test_a_one_file_dataset_frame_is_checked_as_a_whole(three):
    pytest.importorskip("pandas", reason="to_pandas needs pandas")
    with idv.dataset(three, memory_limit=LIMIT) as ds:
        for columns in (None, ["a", "c"]):
            with pytest.raises(idv.MemoryLimitError, match="columns of 1 file of the dataset"):
                ds.to_pandas(columns)
        assert ds.to_pandas(["a"])["a"].iloc[-1] == ROWS - 1


def test_a_frame_of_some_rows_is_checked_as_a_whole(three):
    """to_pandas(rows=) (idv.dask's partitions) of a file or of a dataset's files: the rows
    of every column together, before any block is decoded."""
    pytest.importorskip("pandas", reason="to_pandas needs pandas")
    with idv.open(three, memory_limit=LIMIT) as f:
        with pytest.raises(idv.MemoryLimitError, match="reading 3 columns of 1 file"):
            idv.to_pandas(f, rows=slice(0, ROWS - 10))
        assert f["a"].blocks_decoded == 0
        assert len(idv.to_pandas(f, rows=slice(0, 20_000))) == 20_000
    with idv.dataset([three, three], memory_limit=LIMIT) as ds:
        with pytest.raises(idv.MemoryLimitError, match="reading 3 columns of 2 files"):
            ds.to_pandas(rows=slice(ROWS // 2, ROWS + ROWS // 2))


def test_the_one_column_over_the_limit_is_named(three):
    with pytest.raises(idv.MemoryLimitError, match="column 'a': reading 1 column of 1 file"):
        idv.read(three, ["a"], memory_limit=500_000)


def test_a_mapped_column_is_not_charged(tmp_path):
    """copy=False gives an uncompressed one-block column as a view of the file's map: it
    allocates nothing, and is read under a limit smaller than it."""
    path = tmp_path / "plain.idv"
    idv.write(path, {"x": np.arange(ROWS, dtype=np.float64)}, compression="none",
              rows_per_block=ROWS)
    got = idv.read(path, copy=False, memory_limit=LIMIT // 2)["x"]
    assert got[-1] == ROWS - 1 and not got.flags.writeable


@pytest.mark.parametrize("how", [
    lambda f: f.iter_batches(batch_size=ROWS),
    lambda f: idv.record_batch_reader(f, batch_size=ROWS // 2),
    lambda f: f.record_batch_reader(["a", "b"], batch_size=ROWS),
], ids=["iter_batches", "record_batch_reader", "two-cols"])
def test_a_batch_size_beyond_the_limit_is_refused_before_reading(three, how):
    """batch_size is the size of every batch, as asked: batches whose rows the limit cannot
    hold are refused, naming batch_size, before a block is decoded; a stream without one
    cuts its windows to fit, and a batch size that fits streams."""
    pytest.importorskip("pyarrow", reason="the streams are Arrow's")
    with idv.open(three, memory_limit=LIMIT) as f:
        with pytest.raises(idv.MemoryLimitError, match=r"batch_size=\d+ rows of [23] columns"):
            how(f)
        assert f["a"].blocks_decoded == 0
        assert sum(b.num_rows for b in f.iter_batches()) == ROWS
        sizes = [b.num_rows for b in f.iter_batches(batch_size=10_000)]
        assert sizes == [10_000] * 10
    with idv.dataset([three, three], memory_limit=LIMIT) as ds:
        with pytest.raises(idv.MemoryLimitError, match=r"batch_size=\d+ rows"):
            ds.iter_batches(batch_size=ROWS)


def test_a_torch_stream_refuses_a_batch_size_beyond_the_limit(three):
    pytest.importorskip("torch", reason="the iterable dataset needs torch")
    import idv.torch
    with pytest.raises(idv.MemoryLimitError, match=f"batch_size={ROWS} rows of 3 columns"):
        idv.torch.IdvIterableDataset(three, batch_size=ROWS, memory_limit=LIMIT)
    stream = idv.torch.IdvIterableDataset(three, ["a"], batch_size=10_000, memory_limit=LIMIT)
    assert sum(len(b["a"]) for b in stream) == ROWS


def test_an_arrow_dataset_scanner_cuts_its_batches_to_fit(three):
    """pyarrow's scanner batch_size is a most ("at most batch_size rows"): the scanner gives
    batches of fewer rows where those asked would not fit the limit."""
    pytest.importorskip("pyarrow", reason="idv.arrow_dataset needs pyarrow")
    scanner = idv.arrow_dataset(three, memory_limit=LIMIT).scanner(batch_size=ROWS)
    batches = list(scanner.to_batches())
    assert sum(b.num_rows for b in batches) == ROWS
    assert max(b.nbytes for b in batches) <= LIMIT // 2


def test_an_arrow_dataset_table_is_checked_before_it_is_read(three):
    """A scan's table without a filter has a known size: refused as the dataset's read of
    those columns is, before any block is decoded (not once the batches kept pass it)."""
    pytest.importorskip("pyarrow", reason="idv.arrow_dataset needs pyarrow")
    ds = idv.arrow_dataset(three, memory_limit=LIMIT)
    with pytest.raises(idv.MemoryLimitError, match="reading 3 columns of 1 file"):
        ds.to_table()
    with pytest.raises(idv.MemoryLimitError, match="reading 2 columns of 1 file"):
        ds.scanner(columns=["a", "b"]).to_table()
    assert ds.to_table(columns=["a"]).num_rows == ROWS


# ---------------------------------------------------------------------------- sparse vectors

SPARSE_ROWS, SPARSE_SIZE = 2000, 10_000         # dense: 80 MB of float32


@pytest.fixture(scope="module")
def sparse_file(tmp_path_factory):
    """(path, the matrix written): Vector<Single, 10000> at 1% non-zeros, some rows empty, in
    blocks of 300 rows (the last one shorter)."""
    sp = pytest.importorskip("scipy.sparse", reason="the sparse matrix is written from scipy")
    m = sp.random(SPARSE_ROWS, SPARSE_SIZE, density=0.01, format="csr", dtype=np.float32,
                  random_state=0)
    m = sp.csr_matrix(m.multiply(np.arange(SPARSE_ROWS)[:, None] % 7 != 3))
    path = tmp_path_factory.mktemp("sparse") / "sparse.idv"
    idv.write(path, {"F": m}, rows_per_block=300)
    return path, m


def test_sparse_rows_read_dense_hold_the_matrix(sparse_file):
    """Densified, every block's rows are the matrix's, zeros where nothing is stored."""
    path, m = sparse_file
    want = m.toarray()
    with idv.open(path) as f:
        assert f["F"].num_blocks > 1
        assert np.array_equal(f["F"].read(), want)
        assert np.array_equal(f.read(["F"], rows=slice(250, 1250))["F"], want[250:1250])
    assert np.array_equal(idv.read(path)["F"], want)


def test_sparse_rows_read_dense_peak_near_the_output(sparse_file):
    """A dense read of sparse rows densifies each block straight into the array it returns:
    the process grows by that array and the blocks' small pieces, not by a dense copy of
    them besides."""
    path, _ = sparse_file
    from limited import run_limited
    got = run_limited("""
        def rss():
            with open("/proc/self/status") as status:
                line = next(x for x in status if x.startswith("VmRSS:"))
            return int(line.split()[1]) * 1024
        result["before"] = rss()
        values = idv.read(path)["F"]
        result["nbytes"] = values.nbytes
        kept.append(values)
    """, path, memory=2 << 30)
    assert got["outcome"] == "ok", got
    if got["peak_rss"] is None:
        pytest.skip("the peak needs /proc/self/status")
    assert got["nbytes"] == SPARSE_ROWS * SPARSE_SIZE * 4
    grew = got["peak_rss"] - got["before"]
    assert grew < 1.3 * got["nbytes"], f"grew {grew} bytes for {got['nbytes']}"
