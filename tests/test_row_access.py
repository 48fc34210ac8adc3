"""Rows as numpy, h5py and pandas users reach for them: np.asarray(col), list(col), col[i],
col[[i, j]], boolean masks, f[a:b], f.read(rows=...), shape / dtype / ndim / len, and schemas
that compare by their columns. Each block is decoded once per access, and no selection keeps
a whole decoded block alive.

Expected values come from ML.NET's dump of the bundled sample (testdata/sample.json).
"""
from __future__ import annotations

import sys

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
        small = col[65:67]          # 2 rows of a 64-row block: a copy of them, not a view
        assert (small if small.base is None else small.base).nbytes == small.nbytes
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


def test_read_rows_select_as_numpy_indexing_does():
    """read(rows=) of a file and of a dataset: open-ended slices and steps as col[rows] takes
    them, and an int gives that row's value of each column, as col[i]."""
    ids, prices = mlnet("Id"), [float(x) for x in mlnet("Price")]
    with idv.open(idv.sample_path()) as f:
        ds = idv.dataset([idv.sample_path(), idv.sample_path()])
        _check_read_rows([(f, 240), (ds, 480)], ids, prices)
    assert idv.read(idv.sample_path(), columns=[], rows=slice(None, 3)) == {}


def _check_read_rows(sources, ids, prices):
    """Each source (with its row count: the sample once or twice) against ML.NET's values."""
    for src, n in sources:
        both = (ids + ids)[:n]
        for key in [slice(None, 3), slice(230, None), slice(None, None, 2), slice(-5, None, 3),
                    slice(None, None, -70)]:
            assert src.read(columns=["Id"], rows=key)["Id"].tolist() == both[key]
        one = src.read(columns=["Id", "Price", "Features"], rows=-2)
        assert one["Id"] == both[-2] and one["Price"] == (prices + prices)[:n][-2]
        assert one["Features"].tolist() == features()[-2].tolist()
        with pytest.raises(IndexError, match=f"row {n} out of range"):
            src.read(rows=n)


def test_schema_membership_and_equality(tmp_path):
    with idv.open(idv.sample_path()) as a, idv.open(idv.sample_path()) as b:
        assert "Title" in a.schema and "Nope" not in a.schema
        assert a.schema == b.schema and a.schema[0] == b.schema[0]
        assert a.schema != b.schema.fields          # a Schema equals only a Schema
    p = tmp_path / "other.idv"
    idv.write(p, {"Id": np.arange(3)})
    with idv.open(p) as c, idv.open(idv.sample_path()) as a:
        assert c.schema != a.schema


# ---------------------------------------------------------------- the cache of decoded blocks

def test_random_rows_decode_each_block_once_and_pin_none():
    """5,000 random col[i] over 4 blocks: 4 decodes (the file's cache finds them again), and
    every row a copy of its own, not a view that keeps a block alive."""
    rng = np.random.default_rng(0)
    want = features()
    with idv.open(idv.sample_path()) as f:
        col = f["Features"]
        rows = [col[int(i)] for i in rng.integers(0, 240, 5000)]
        assert col.blocks_decoded == 4
        assert all(r.base is None for r in rows)
        picked = col[[239, 0, 130, 0]]
        assert col.blocks_decoded == 4 and picked.base is None
        np.testing.assert_array_equal(picked, want[[239, 0, 130, 0]])
        mask = np.zeros(240, bool)
        mask[[3, 200]] = True
        np.testing.assert_array_equal(col[mask], want[[3, 200]])
        assert col.blocks_decoded == 4
    with idv.open(idv.sample_path()) as f:
        assert f["Title"][5] == mlnet("Title")[5]


def test_the_cache_stays_within_its_bytes():
    from idv._resources.cache import BlockCache
    with idv.open(idv.sample_path(), cache_bytes=1500) as f:      # one 1 KB block at most
        col = f["Features"]
        for i in (0, 100, 0, 100):          # blocks 0 and 1 in turn: each evicts the other
            col[i]
        assert col.blocks_decoded == 4
    with idv.open(idv.sample_path(), cache_bytes=0) as f:
        col = f["Id"]
        col[0], col[1]
        assert col.blocks_decoded == 2
    with idv.open(idv.sample_path(), memory_limit=3000) as f:  # the default 64 MiB: 1.5 KB
        col = f["Features"]
        for i in (0, 100, 0, 100):
            col[i]
        assert col.blocks_decoded == 4      # the cache holds at most half the memory limit
    c = BlockCache(100)
    for k in range(10):
        c.get(k, lambda: np.zeros(5, np.int64))       # 40 bytes each
    assert len(c) == 2 and c.nbytes == 80
    with pytest.raises(ValueError, match="cache_bytes"):
        idv.open(idv.sample_path(), cache_bytes=-1)


_BOUNDED = r"""
import resource, sys
import sys

import numpy as np
import idv
path, limit = sys.argv[1], int(sys.argv[2])
with idv.open(path) as f:
    col = f["V"]
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    arr = np.asarray(col)
    n1 = col.blocks_decoded
    del arr
    total = 0
    for row in col:
        total += 1
    n2 = col.blocks_decoded - n1
    rng = np.random.default_rng(1)
    kept = [col[int(i)] for i in rng.integers(0, len(col), 5000)]
    n3 = col.blocks_decoded - n1 - n2
    print(n1, n2, n3, total, col.num_blocks, sum(r.base is not None for r in kept))
"""


def test_whole_column_and_random_rows_in_bounded_memory(tmp_path):
    """np.asarray(col), iterating and 5,000 random col[i] on a 32 MB Vector<Single, 16>
    column (within the default 64 MB cache), in a child whose address space is capped at what it
    had plus 512 MB: each block decoded once per pass, and the random rows pin no block (the
    issue's np.asarray grew to 24 GB and 5,000 rows pinned 1.5 GB)."""
    import subprocess
    import sys
    resource = pytest.importorskip("resource")
    path = tmp_path / "v.idv"
    n = 500_000
    idv.write(path, {"V": np.random.default_rng(0).random((n, 16), np.float32)})
    probe = subprocess.run([sys.executable, "-c", "import idv, numpy, resource; "
                            "print(int(open('/proc/self/statm').read().split()[0]) * "
                            "resource.getpagesize())"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("no /proc/self/statm to size the child's address space")
    limit = int(probe.stdout) + (512 << 20)
    r = subprocess.run([sys.executable, "-c", _BOUNDED, str(path), str(limit)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    n1, n2, n3, total, blocks, pinned = map(int, r.stdout.split())
    assert (n1, n2, total, pinned) == (blocks, blocks, n, 0)
    assert n3 <= blocks          # each block at most once, through the cache


def test_threads_share_the_cache_without_drift():
    """Eight threads reading random rows of one column at once: every value right, and the
    cache's count of bytes matches what it holds, within its bound."""
    import threading
    from idv._resources import cache as cache_mod
    c = cache_mod.BlockCache(5000)
    errors = []

    def load(k):
        def make():
            for _ in range(50):       # let the other threads in between lookup and store
                pass
            return np.full(100 + k % 7, k, np.int64)
        return make

    def hammer(seed):
        rng = np.random.default_rng(seed)
        try:
            for k in rng.integers(0, 40, 3000).tolist():
                v = c.get(k, load(k))
                assert v[0] == k and len(v) == 100 + k % 7
        except BaseException as e:     # noqa: BLE001 - reported by the main thread
            errors.append(e)
    threads = [threading.Thread(target=hammer, args=(s,)) for s in range(8)]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)       # switch threads as often as possible
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors[0]
    held = sum(cache_mod.cost(c.get(k, lambda: None)) for k in range(40) if k in c)
    assert c.nbytes == held and 0 < c.nbytes <= c.max_bytes
    with idv.open(idv.sample_path(), cache_bytes=1500) as f:     # through col[i]
        col = f["Id"]
        want = col.read()
        bad = []

        def rows(seed):
            rng = np.random.default_rng(seed)
            for i in rng.integers(0, len(want), 500).tolist():
                if col[i] != want[i]:
                    bad.append(i)
        ts = [threading.Thread(target=rows, args=(s,)) for s in range(6)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not bad


def test_rows_of_a_wide_sparse_vector_column_densify_only_those_rows(tmp_path):
    # ML.NET's text featurizers write wide vectors stored sparse; a few of their rows must
    # cost those rows dense, not their blocks (8,192 rows x 100,000 slots: 3.3 GB each)
    sp = pytest.importorskip("scipy.sparse", reason="the sparse matrix written needs scipy")
    rng = np.random.default_rng(3)
    n, width, k = 9000, 100_000, 4
    slots = np.sort(rng.choice(width, (n, k)), axis=1)
    matrix = sp.csr_matrix((rng.random(n * k).astype(np.float32), slots.ravel(),
                            np.arange(n + 1) * k), shape=(n, width))
    matrix.sum_duplicates()
    path = tmp_path / "wide.idv"
    idv.write(path, {"f": matrix, "y": np.arange(n)})
    want = lambda rows: matrix[rows].toarray()      # noqa: E731
    with idv.open(path, memory_limit=64 << 20) as f:
        col = f["f"]
        assert col[5].tolist() == want([5])[0].tolist()
        assert col[[8999, 5, 5]].tolist() == want([8999, 5, 5]).tolist()
        assert col[5:7].tolist() == want([5, 6]).tolist()
        assert f.take([8999, 5])["f"].tolist() == want([8999, 5]).tolist()
        assert f.read(rows=slice(8190, 8193))["f"].tolist() == want([8190, 8191, 8192]).tolist()
        got = f.read(columns=["f"], filter="y in (3, 8998)")["f"]
        assert got.tolist() == want([3, 8998]).tolist()
