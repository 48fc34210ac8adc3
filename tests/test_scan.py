"""idv._scan.scan, the one scan under every streaming reader, and idv._reader.selection, its one
rule for columns and rows: batches hold the same values as reading each column whole, whatever the
windows, pieces, threads, row ranges and skipped blocks; a dataset scans as its files end to
end."""
from __future__ import annotations

import numpy as np
import pytest

import idv
from idv._scan import scan as S
from idv._reader import selection


def _table(n=1000, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 5, n)
    return {
        "f": rng.standard_normal(n).astype(np.float32),
        "i": np.arange(n, dtype=np.int64),
        "t": [f"row {k} é" for k in range(n)],
        "v": rng.standard_normal((n, 3)),
        "r": idv.Ragged(np.arange(int(lengths.sum()), dtype=np.int32),
                        np.concatenate([[0], np.cumsum(lengths)])),
        "b": rng.integers(0, 2, n).astype(bool),
    }


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = tmp_path_factory.mktemp("scan") / "t.idv"
    idv.write(p, _table(), rows_per_block=64)
    return p


@pytest.fixture(scope="module")
def whole():
    """The values written, in read()'s forms."""
    table = _table()
    table["t"] = np.array(table["t"], dtype=object)
    return table


def _joined(batches, k):
    values = [b.values[k] for b in batches]
    return idv._values.vectors.concat_reads(values) if values else None


def _equal(a, b):
    if isinstance(a, idv.Ragged):
        assert isinstance(b, idv.Ragged)
        np.testing.assert_array_equal(a.offsets, b.offsets)
        np.testing.assert_array_equal(a.values, b.values)
    else:
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("window_bytes,piece_bytes", [(1, 1), (12000, 700), (S.WINDOW_BYTES,
                                                                             S.PIECE_BYTES)])
def test_batches_are_the_columns_read_whole(path, whole, threads, window_bytes, piece_bytes):
    with idv.open(path, threads=threads) as f:
        names = list(whole)
        batches = list(S.scan(f, names, window_bytes=window_bytes, piece_bytes=piece_bytes))
        # a batch per block, each the block's rows
        assert [(b.start, b.stop) for b in batches] == [(a, min(a + 64, 1000))
                                                        for a in range(0, 1000, 64)]
        assert all(b.row0 == b.start and b.step == 1 and b.part == 0 for b in batches)
        for k, n in enumerate(names):
            _equal(_joined(batches, k), whole[n])
        windows = list(S.scan(f, names, batch_rows=None, window_bytes=window_bytes,
                              piece_bytes=piece_bytes))
        if window_bytes == 1:
            assert len(windows) == len(batches)
        else:
            assert len(windows) < len(batches)
        for k, n in enumerate(names):
            _equal(_joined(windows, k), whole[n])


def test_a_windows_pieces_of_numbers_are_one_array_over_them_not_a_copy(path, whole):
    """The pieces of a column of fixed-width items decode end to end into the window's
    buffer: the window's value is one array over them (end_to_end), not their copy; pieces
    that do not lie so are joined."""
    with idv.open(path, threads=2) as f:
        for name in ("f", "i", "v"):
            windows = list(S.scan(f, [name, "t"], batch_rows=None, window_bytes=1 << 20,
                                  piece_bytes=500))
            assert len(windows) == 1
            value = windows[0].values[0]
            assert value.base is not None and not value.flags.owndata    # a view, of ...
            assert S._root(value).dtype == np.uint8                      # ... the buffer
            _equal(value, whole[name])
    buf = np.zeros(256, np.uint8)
    a, b = buf[:64].view(np.float64), buf[64:96].view(np.float64)
    joined = S.end_to_end([a, b])
    assert joined.shape == (12,) and np.shares_memory(joined, buf)
    assert S.end_to_end([a, buf[128:160].view(np.float64)]) is None          # a gap
    assert S.end_to_end([b, a]) is None                                       # out of order
    assert S.end_to_end([a, buf[64:96].view(np.int64)]) is None               # another dtype
    assert S.end_to_end([a, np.zeros(4)]) is None                             # another buffer
    assert S.end_to_end([whole["r"], whole["r"]]) is None                     # not arrays


@pytest.mark.parametrize("rows", [range(0, 1000, 1), range(10, 11), range(63, 200, 1),
                                  range(5, 999, 3), range(7, 1000, 100), range(1, 1000, 999),
                                  range(500, 500), range(990, 1000, 64)])
def test_rows_decode_only_their_blocks(path, whole, rows):
    with idv.open(path) as f:
        batches = list(S.scan(f, ["i", "r", "t"], rows=rows, window_bytes=3000))
        got = _joined(batches, 0)
        want = list(rows)
        assert (got.tolist() if got is not None else []) == want
        if want:
            _equal(_joined(batches, 1), whole["r"][rows.start:rows.stop:rows.step])
            assert list(_joined(batches, 2)) == [whole["t"][r] for r in want]
            assert batches[0].row0 == want[0]
        assert f["i"].blocks_decoded == len({r // 64 for r in want})


def test_a_block_filter_skips_blocks(path):
    seen = []

    def keep(part, f):
        seen.append(part)
        mask = np.ones(f["i"].num_blocks, bool)
        mask[[0, 3, 4, 15]] = False
        return mask

    with idv.open(path) as f:
        got = np.concatenate([b.values[0] for b in S.scan(f, ["i"], block_filter=keep)])
        assert f["i"].blocks_decoded == 12
    assert seen == [0]
    skipped = set(range(0, 64)) | set(range(192, 320)) | set(range(960, 1000))
    assert got.tolist() == [r for r in range(1000) if r not in skipped]
    with idv.open(path) as f, pytest.raises(ValueError, match="one bool per block"):
        list(S.scan(f, ["i"], block_filter=lambda part, f: [True]))


@pytest.mark.parametrize("threads", [1, 2])
def test_runs_between_gaps_are_decoded_together(path, whole, threads, monkeypatch):
    """Every other block kept: each run is its own batch, and the fixed-width pieces of all
    of them are inflated by a few calls, not one per run and column."""
    calls = []
    with idv.open(path, threads=threads) as f:
        backend = f.store.backend
        monkeypatch.setattr(f.store, "backend", type("Counting", (), {
            "native": backend.native, "decompress_blocks": lambda self, *a: calls.append(1)
            or backend.decompress_blocks(*a)})())
        mask = np.zeros(f["i"].num_blocks, bool)
        mask[::2] = True
        batches = list(S.scan(f, ["f", "i", "t"], block_filter=lambda part, f: mask))
        assert [(b.start, b.stop) for b in batches] == [
            (r, min(r + 64, 1000)) for r in range(0, 1000, 128)]
        assert f["f"].blocks_decoded == f["t"].blocks_decoded == 8
    kept = np.arange(1000) // 64 % 2 == 0
    for k, name in enumerate(["f", "i", "t"]):
        _equal(_joined(batches, k), whole[name][kept])
    assert len(calls) == 1 + 8       # the numbers' 16 pieces in one, the text's 8 on their own


def test_a_dataset_scans_its_files_end_to_end(tmp_path, whole):
    paths = []
    for k, (a, b, rpb) in enumerate([(0, 300, 64), (300, 301, 10), (301, 301, 5),
                                      (301, 1000, 100)]):
        p = tmp_path / f"{k}.idv"
        idv.write(p, {"i": np.arange(a, b, dtype=np.int64), "t": whole["t"][a:b].tolist()},
                  rows_per_block=rpb, types={"t": idv.Text})
        paths.append(p)
    with idv.dataset(paths) as ds:
        batches = list(S.scan(ds, ["i", "t"]))
        assert [b.part for b in batches][:6] == [0] * 5 + [1]
        assert 2 not in {b.part for b in batches}       # no rows: no batch
        assert np.concatenate([b.values[0] for b in batches]).tolist() == list(range(1000))
        assert [b.row0 for b in batches] == [int(b.values[0][0]) for b in batches]
        assert list(_joined(batches, 1)) == list(whole["t"])
        picked = list(S.scan(ds, ["i"], rows=range(250, 420, 7)))
        assert np.concatenate([b.values[0] for b in picked]).tolist() == list(range(250, 420,
                                                                                    7))
        parts = S.partitions(ds, ["i", "t"], blocks_per_partition=2)
        assert [(p.part, p.start, p.stop, p.row0) for p in parts] == (
            [(0, 0, 128, 0), (0, 128, 256, 128), (0, 256, 300, 256), (1, 0, 1, 300)]
            + [(3, a, min(a + 200, 699), 301 + a) for a in range(0, 699, 200)])
        assert all(p.path == ds.files[p.part].path for p in parts)


def test_an_error_in_a_datasets_file_names_it(tmp_path):
    good, bad = tmp_path / "a.idv", tmp_path / "b.idv"
    for p in (good, bad):
        idv.write(p, {"x": np.arange(100.0)}, rows_per_block=10, compression="none")
    with idv.open(bad) as f:
        offset = int(f["x"].lookup["offset"][3])
    data = bytearray(bad.read_bytes())
    data[offset] ^= 0xFF
    bad.write_bytes(bytes(data))
    with idv.dataset([good, bad]) as ds, pytest.raises(idv.IdvFormatError) as e:
        list(S.scan(ds, ["x"]))
    assert e.value.path is not None and "b.idv" in str(e.value.path)
    assert e.value.block == 3


def test_partitions_of_a_file_follow_its_blocks(path):
    with idv.open(path) as f:
        parts = S.partitions(f, ["i"], blocks_per_partition=5)
        assert [(p.b0, p.b1, p.start, p.stop) for p in parts] == [
            (0, 5, 0, 320), (5, 10, 320, 640), (10, 15, 640, 960), (15, 16, 960, 1000)]
        assert len(S.partitions(f, ["i", "v"])) == 1      # 1000 rows: far below 64 MiB
        assert len(S.partitions(f, ["i"], partition_bytes=64 * 8 * 3)) == 6
        with pytest.raises(ValueError, match=r"blocks_per_partition must be a number of "
                                             r"blocks \(1 or more\)"):
            S.partitions(f, ["i"], blocks_per_partition=0)


@pytest.mark.parametrize("window_bytes", [1, 3000, S.WINDOW_BYTES])
def test_batches_of_whole_blocks_aligned_on_batch_rows(path, window_bytes):
    """batch_rows=200 with blocks of 64 rows: groups of 3 blocks (rows 0-191, 192-383 ...),
    whatever the windows; a row range keeps the same cuts."""
    with idv.open(path) as f:
        got = [(b.start, b.stop) for b in S.scan(f, ["i", "t"], batch_rows=200,
                                                  window_bytes=window_bytes)]
        assert got == [(a, min(a + 192, 1000)) for a in range(0, 1000, 192)]
        got = [(b.start, b.stop, b.values[0].tolist()) for b in
               S.scan(f, ["i"], batch_rows=200, rows=range(100, 500, 50),
                      window_bytes=window_bytes)]
        assert got == [(100, 192, [100, 150]), (200, 384, [200, 250, 300, 350]),
                       (400, 500, [400, 450])]
        for bad, error in ((0, ValueError), (-3, ValueError), (True, TypeError)):
            with pytest.raises(error, match="batch_rows"):
                list(S.scan(f, ["i"], batch_rows=bad))


# ---------------------------------------------------------------------------------------------
# selection
# ---------------------------------------------------------------------------------------------

NAMES = ["a", "b", "a", "Feature1", "Feature2", "c"]


@pytest.mark.parametrize("columns,want", [
    (None, [1, 2, 3, 4, 5]),             # visible: the last "a"
    ("a", [2]), (0, [0]), (-1, [5]), (np.int64(1), [1]),
    (["c", 0, "a"], [5, 0, 2]),
])
def test_columns_by_name_and_index(columns, want):
    assert selection.positions(NAMES, columns) == want


def test_globs_only_where_offered():
    assert selection.positions(NAMES, ["Feature*", "c"], globs=True) == [3, 4, 5]
    assert selection.positions(NAMES, "?", globs=True) == [1, 2, 5]
    with pytest.raises(KeyError, match="no column 'Feature\\*'"):
        selection.positions(NAMES, "Feature*")
    with pytest.raises(KeyError, match="no column matches 'z\\*' in the dataset"):
        selection.positions(NAMES, "z*", globs=True, where=" in the dataset")


def test_missing_columns_are_named():
    with pytest.raises(KeyError, match="no column 'x'; columns: \\['a', 'b', 'Feature1'"):
        selection.positions(NAMES, ["a", "x"])
    # a name that differs in case only, or is a close spelling, is suggested, by every reader
    with pytest.raises(KeyError, match="no column 'feature1' in the dataset \\(did you mean "
                                       "'Feature1'\\?\\); columns: "):
        selection.positions(NAMES, ["feature1"], where=" in the dataset")
    with idv.open(idv.sample_path()) as f:
        for read in (lambda: f["sold"], lambda: f.read(["Id", "sold"]),
                     lambda: idv.dataset([idv.sample_path()]).read(["sold"])):
            with pytest.raises(KeyError, match="did you mean 'Sold'"):
                read()
        with pytest.raises(KeyError, match="no column 'Prise' \\(did you mean 'Price'\\?\\)"):
            f["Prise"]
    with pytest.raises(IndexError, match="column index 6 out of range: 6 columns \\(0 to 5\\)"):
        selection.positions(NAMES, 6)
    with pytest.raises(TypeError, match="by name or index"):
        selection.positions(NAMES, [1.5])
    with pytest.raises(TypeError, match="by name or index"):
        selection.positions(NAMES, [True])
    assert selection.names_of(["x", "y"], [1, "x"]) == ["y", "x"]
    assert selection.names_of(["x", "y"], None) is None


@pytest.mark.parametrize("key,want", [
    (slice(None), list(range(10))), (slice(2, 8, 3), [2, 5]), (slice(None, None, -4), [9, 5, 1]),
    ([3, -1, 0], [3, 9, 0]), (np.array([True] + [False] * 8 + [True]), [0, 9]), ([], []),
])
def test_row_numbers(key, want):
    assert selection.row_numbers(key, 10).tolist() == want


def test_bad_rows_are_refused():
    with pytest.raises(IndexError, match="row 10 out of range for 10 rows"):
        selection.row_numbers([10], 10)
    with pytest.raises(IndexError, match="mask of 3 rows for a dataset of 10"):
        selection.row_numbers([True, False, True], 10, "dataset")
    with pytest.raises(TypeError, match="boolean mask, not str"):
        selection.row_numbers("x", 10)
    with pytest.raises(TypeError):
        selection.row_numbers([1.5], 10)


def test_rows_split_over_parts():
    starts, n = [0, 4, 4, 9], 12      # parts of 4, 0, 5 and 3 rows
    parts, restore = selection.split_rows(slice(2, 10), starts, n)
    assert [(i, (s.start, s.stop)) for i, s in parts] == [(0, (2, 4)), (2, (0, 5)), (3, (0, 1))]
    assert restore is None
    parts, restore = selection.split_rows([11, 0, 5, 1], starts, n)
    assert [(i, r.tolist()) for i, r in parts] == [(0, [0, 1]), (2, [1]), (3, [2])]
    assert np.concatenate([[0, 1], [5], [11]])[restore].tolist() == [11, 0, 5, 1]


@pytest.mark.parametrize("ahead", [0, 1, 2, 5])
def test_windows_decoded_ahead(path, ahead):
    """With windows of one block: when the first batch is handed out, that block and `ahead`
    more are decoded (none ahead: each only when reached); the rest wait for the consumer.
    One thread: the windows ahead are decoded at once, in the calling thread."""
    with idv.open(path, threads=1) as f:
        batches = S.scan(f, ["i"], window_bytes=1, ahead=ahead)
        first = next(batches)
        assert first.values[0].tolist() == list(range(64))
        assert f["i"].blocks_decoded == 1 + ahead
        assert sum(len(b.values[0]) for b in batches) == 1000 - 64
        assert f["i"].blocks_decoded == 16
    with idv.open(path) as f, pytest.raises(ValueError, match="ahead"):
        next(S.scan(f, ["i"], ahead=-1))


@pytest.mark.parametrize("threads", [1, 2])
def test_whole_reads_are_the_values_written(path, whole, threads):
    with idv.open(path, threads=threads) as f:
        got = f.read()
        assert list(got) == list(whole)
        for n in whole:
            _equal(got[n], whole[n])
        # each column has an array of its own: keeping one keeps no other alive
        assert not np.shares_memory(got["f"], got["i"])
        assert got["f"].base is None or got["f"].base.nbytes == got["f"].nbytes
        assert [f[n].blocks_decoded for n in whole] == [16] * len(whole)


def test_a_wide_file_reads_each_block_once(tmp_path):
    rng = np.random.default_rng(3)
    table = {f"c{k}": rng.standard_normal(500).astype(np.float32) for k in range(300)}
    table["v"] = rng.standard_normal((500, 4)).astype(np.float32)
    idv.write(tmp_path / "w.idv", table, rows_per_block=128)
    with idv.open(tmp_path / "w.idv", threads=2) as f:
        got = f.read()
        assert [f[n].blocks_decoded for n in table] == [4] * len(table)
        arrow = f.to_arrow()
    for n, v in table.items():
        np.testing.assert_array_equal(got[n], v)
        np.testing.assert_array_equal(np.asarray(arrow[n].to_pylist()), v)


def test_out_must_fit_the_rows(path):
    with idv.open(path) as f:
        with pytest.raises(ValueError, match="out= takes 64 rows"):
            f["f"].read_blocks(0, 1, out=np.empty(63, np.float32))
        with pytest.raises(ValueError, match="out= takes 64 rows"):
            f["v"].read_blocks(0, 1, out=np.empty(64 * 3, np.float64))
        with pytest.raises(ValueError, match="out= takes 64 rows"):
            f["r"].read_blocks(0, 1, out=np.empty(64, np.int32))
        out = np.empty((64, 3))
        assert f["v"].read_blocks(0, 1, out=out) is out


def test_rebatched_cuts_and_joins_to_the_size_and_passes_exact_chunks_uncopied():
    chunks = [np.arange(0, 3), np.arange(3, 7), np.arange(7, 11), np.arange(11, 12)]
    joins = []

    def join(pieces):
        joins.append(len(pieces))
        return np.concatenate(pieces)

    def batches(drop_last):
        return list(S.rebatched(((c, len(c)) for c in chunks), 4,
                                lambda c, a, b: c[a:b], join, drop_last))
    got = batches(False)
    assert [b.tolist() for b in got] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert joins == [2, 2, 2]
    assert [b.tolist() for b in batches(True)] == [b.tolist() for b in got]
    chunks[-1] = np.arange(11, 13)              # 13 rows: the rest, unless dropped
    assert batches(False)[-1].tolist() == [12]
    assert len(batches(True)) == 3
    exact = np.arange(4)
    assert next(S.rebatched([(exact, 4)], 4, None, None)) is exact


def test_a_window_of_one_piece_beside_others_is_decoded_in_the_threads(tmp_path):
    """A window of one piece is decoded in the calling thread only where it is the scan's
    only window (waited for at once); beside others (a scan's last window, say) it goes to
    the threads, so that the consumer works on the window before while it is decoded."""
    import threading
    from idv._scan import scan_windows
    path = str(tmp_path / "lone.idv")
    n = 3 * (scan_windows.INLINE_BYTES // 4)         # 3 windows of a piece each
    idv.write(path, {"x": np.arange(n, dtype=np.int64)}, rows_per_block=n // 12)
    seen = []

    class Seen(S.NumpyColumn):
        def decode(self, b0, b1, out):
            seen.append(threading.current_thread() is threading.main_thread())
            return super().decode(b0, b1, out)

        def inflatable(self, b0, b1, out):
            return None
    with idv.open(path, threads=2) as f:
        got = [b.values[0] for b in S.scan(f, [Seen(f["x"])], batch_rows=None,
                                           window_bytes=n * 8 // 3,
                                           piece_bytes=n * 8 // 3)]
        assert np.array_equal(np.concatenate(got), np.arange(n)) and len(got) == 3
        assert seen == [False] * 3
        seen.clear()
        got = list(S.scan(f, [Seen(f["x"])], batch_rows=None, window_bytes=n * 8))
        assert len(got) == 1 and seen == [True] * len(seen) and seen


def test_the_last_windows_pieces_get_smaller_toward_its_end(tmp_path, monkeypatch):
    """The pieces of a scan's last window get smaller toward its end (no thread is left
    decoding a whole piece while the other waits); a window before it, and a window of fewer
    than two pieces a thread, keep pieces of piece_bytes; the values as ever."""
    import threading
    from idv._scan import scan_windows
    monkeypatch.setattr(scan_windows, "TAPER_BYTES", 16 << 10)
    path = str(tmp_path / "taper.idv")
    n = 64 * 2048                           # 64 blocks of 16 KiB: windows beyond INLINE_BYTES
    idv.write(path, {"x": np.arange(n, dtype=np.int64)}, rows_per_block=2048)
    pieces = []

    class Seen(S.NumpyColumn):
        def decode(self, b0, b1, out):
            pieces.append((b0, b1, threading.current_thread() is threading.main_thread()))
            return super().decode(b0, b1, out)

        def inflatable(self, b0, b1, out):
            return None

    def sizes(window_bytes, piece_bytes):
        pieces.clear()
        with idv.open(path, threads=2) as f:
            got = [b.values[0] for b in S.scan(f, [Seen(f["x"])], batch_rows=None,
                                               window_bytes=window_bytes,
                                               piece_bytes=piece_bytes)]
        assert np.array_equal(np.concatenate(got), np.arange(n))
        assert not any(here for _, _, here in pieces)
        return [b1 - b0 for b0, b1, _ in sorted(pieces)]
    tapered = sizes(1 << 62, 256 << 10)
    assert sum(tapered) == 64 and tapered[0] == 16 and max(tapered) == 16
    assert tapered[-4:] == [4, 4, 4, 4], tapered
    # windows of 40 and 24 blocks: the last one alone tapered
    assert sizes(640 << 10, 64 << 10) == [4] * 13 + [3, 1, 2, 2, 1, 1, 1, 1]
    assert sizes(1 << 62, 272 << 10) == [17, 17, 17, 13]        # under two pieces a thread


def test_a_stream_fits_its_windows_to_the_memory_limit(tmp_path):
    """A file of 800 KB streams under a limit of 200 KB: the scan's windows (and the blocks a
    batch gathers) are cut so that those in hand at once fit the limit, as a read of a few
    rows needs a block at most besides its output; a whole read still refuses."""
    path = str(tmp_path / "big.idv")
    n = 100_000
    idv.write(path, {"x": np.arange(n, dtype=np.float64)}, rows_per_block=8192)
    with idv.open(path, memory_limit=200_000) as f:
        got = [b.column("x").to_numpy() for b in f.iter_batches(["x"], batch_size=1000)]
        assert np.array_equal(np.concatenate(got), np.arange(n))
        got = [b.column("x").to_numpy() for b in idv.record_batch_reader(f, ["x"])]
        assert np.array_equal(np.concatenate(got), np.arange(n))
        with pytest.raises(idv.MemoryLimitError):
            f.read()
