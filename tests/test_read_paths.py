"""The reader's fast paths give the same values as the plain ones (no timing here; see
benchmarks/bench_read.py for speed).

- libdeflate through its C API vs its Python function vs zlib vs ISA-L, on multi-MB columns
  that take the parallel path (text and numbers);
- big text columns decoded in parallel (each task decompresses a few blocks at a time);
- output arrays of several MB on huge-page mappings (idv._compression.empty) behave as
  ordinary numpy arrays: own their data, resize, pickle, free.
"""
import dataclasses
import pickle

import numpy as np
import pytest

import idv
from idv import _compression, compression

try:
    from numpy._core.multiarray import get_handler_name
except ImportError:                         # numpy < 2
    from numpy.core.multiarray import get_handler_name


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    """A file whose columns are several MB each, so reads take the parallel paths."""
    n = 600_000
    rng = np.random.default_rng(1)
    data = {
        "I": np.arange(n, dtype=np.int32),
        "F": rng.normal(size=n).astype(np.float64),
        "T": np.array(_text(n), dtype=object),
        "B": rng.random(n) < 0.3,
    }
    path = tmp_path_factory.mktemp("paths") / "big.idv"
    idv.write(str(path), data, rows_per_block=4096)
    return path, data


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_every_backend_reads_big_columns_alike(big_file, threads):
    path, data = big_file
    for name in compression.installed():
        with idv.open(str(path), backend=name, threads=threads) as f:
            _check(f.read(), data)


def test_libdeflate_c_path_matches_python_function(big_file):
    libdeflate = compression.BACKENDS["libdeflate"]
    if libdeflate.native is None:
        pytest.skip("libdeflate's C API not found")
    path, data = big_file
    compression.BACKENDS["libdeflate"] = dataclasses.replace(libdeflate, native=None)
    try:
        with idv.open(str(path), backend="libdeflate", threads=2) as f:
            _check(f.read(), data)       # Python-level deflate_decompress
    finally:
        compression.BACKENDS["libdeflate"] = libdeflate
    with idv.open(str(path), backend="libdeflate", threads=2) as f:
        _check(f.read(), data)


def test_big_text_column_through_a_file_object(big_file):
    path, data = big_file
    with open(path, "rb") as fo, idv.open(fo, threads=2) as f:
        assert f["T"].read().tolist() == data["T"].tolist()
        assert f["T"][123_456:123_460].tolist() == data["T"][123_456:123_460].tolist()


def test_prefetch_switch_does_not_change_values(big_file):
    path, data = big_file
    old = _compression.set_prefetch(False)
    try:
        with idv.open(str(path)) as f:
            _check(f.read(), data)
    finally:
        _compression.set_prefetch(old)


@pytest.mark.parametrize("dtype", [np.int32, np.float64, np.bool_, object])
def test_huge_page_arrays_are_ordinary(dtype):
    n = (_compression.HUGE_MIN // np.dtype(dtype).itemsize) * 2
    a = _compression.empty(n, dtype)
    assert a.shape == (n,) and a.dtype == dtype and a.flags.owndata and a.flags.writeable
    if _compression._HUGE_HANDLER is not None:
        assert get_handler_name(a) == "idv_huge_pages"
        assert a.ctypes.data % (2 << 20) == 0
    assert a.flags.c_contiguous and a.ctypes.data % 64 == 0
    if dtype is object:
        assert a[0] is None and a[-1] is None
    a[:] = np.arange(n).astype(dtype) if dtype is not object else "s"
    b = pickle.loads(pickle.dumps(a))
    assert np.array_equal(a, b)
    want = a[:10].copy()
    a.resize(10, refcheck=False)              # shrinking realloc
    assert np.array_equal(a, want)
    a.resize(3 * n, refcheck=False)           # growing realloc keeps the data, zero tail
    assert np.array_equal(a[:10], want)
    if dtype is not object:
        assert not a[10:].any()
    del a, b


def test_small_and_odd_sizes_use_numpy_empty():
    for n in (0, 1, 1000, _compression.HUGE_MIN + 1):     # the last wastes too much rounding up
        a = _compression.empty(n, np.uint8)
        assert a.shape == (n,) and a.flags.owndata
        assert get_handler_name(a) != "idv_huge_pages"


def _text(n, seed=3):
    rng = np.random.default_rng(seed)
    words = ["alpha", "béta", "gamma", "δέλτα", "中文", "x", "", "emoji 😀", "tab\there"]
    return [words[i] + str(j) for i, j in zip(rng.integers(0, len(words), n),
                                             rng.integers(0, 10**6, n))]


def _check(got, data):
    assert np.array_equal(got["I"], data["I"])
    assert np.array_equal(got["F"], data["F"])
    assert got["T"].tolist() == data["T"].tolist()
    assert np.array_equal(got["B"], data["B"])


@pytest.mark.parametrize("rows_per_block", [8, 13, 4096])
def test_booleans_from_their_bits_on_every_path(tmp_path, rows_per_block):
    """Boolean scalars are read from their blocks' bits into numpy and into Arrow (one array
    where each block fills whole bytes, one per block where it does not): every path gives the
    values written, whole, sliced, streamed and filtered, the last block partial."""
    pa = pytest.importorskip("pyarrow", reason="the Arrow paths need pyarrow")
    n = 3 * 4096 + 5
    rng = np.random.default_rng(7)
    data = {"B": rng.random(n) < 0.5, "I": np.arange(n, dtype=np.int32)}
    path = str(tmp_path / "b.idv")
    idv.write(path, data, rows_per_block=rows_per_block)
    with idv.open(path) as f:
        np.testing.assert_array_equal(f["B"].read(), data["B"])
        np.testing.assert_array_equal(f["B"][5:n - 3], data["B"][5:n - 3])
        assert f["B"].read().dtype == np.bool_
    whole = idv.to_arrow(path, columns=["B"]).column("B")
    assert whole.type == pa.bool_()
    assert whole.num_chunks == (1 if rows_per_block % 8 == 0 else -(-n // rows_per_block))
    assert whole.to_pylist() == data["B"].tolist()
    for batch_size in (None, 1000):
        got = pa.concat_arrays([b.column(0) for b in idv.record_batch_reader(
            path, ["B"], batch_size=batch_size)])
        assert got.to_pylist() == data["B"].tolist()
    hit = (data["I"] >= 10) & data["B"]
    got = idv.to_arrow(path, columns=["I", "B"], filter="I >= 10 and B == True")
    assert got.column("I").to_pylist() == data["I"][hit].tolist()
    assert got.column("B").to_pylist() == [True] * int(hit.sum())
