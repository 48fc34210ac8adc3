"""IdvFile.take and Dataset.take: rows by number in the order asked, equal to fancy indexing of
idv.read's values in every column form, with each block that holds them decoded once."""
from __future__ import annotations

import numpy as np
import pytest

import idv
import idv._reader.take
from readback import same

ROWS, RPB = 1000, 64


def _table(n, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 5, n)
    return {
        "f": rng.standard_normal(n).astype(np.float32),
        "i": np.arange(n, dtype=np.int64) + seed * 10_000,
        "t": np.array([f"row {k} é {seed}" for k in range(n)], dtype=object),
        "v": rng.standard_normal((n, 3)),
        "r": idv.Ragged(np.arange(int(lengths.sum()), dtype=np.int32),
                        np.concatenate([[0], np.cumsum(lengths)])),
        "b": rng.integers(0, 2, n).astype(bool),
        "k": rng.integers(0, 5, n).astype(np.uint32),
    }


TYPES = {"k": idv.Key(idv.UInt32, 4)}


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = tmp_path_factory.mktemp("take") / "t.idv"
    idv.write(p, _table(ROWS), types=TYPES, rows_per_block=RPB)
    return p


@pytest.fixture(scope="module")
def whole(path):
    return idv.read(path)


def _expected(whole, rows):
    return {n: v[np.asarray(rows, np.int64)] for n, v in whole.items()}


RNG = np.random.default_rng(7)
CASES = {
    "sorted": np.sort(RNG.choice(ROWS, 50, replace=False)),
    "unsorted": RNG.choice(ROWS, 50, replace=False),
    "repeated": np.array([5, 900, 5, 5, 63, 64, 900, 0]),
    "negative": np.array([-1, -ROWS, 3, -64]),
    "one block": np.array([70, 65, 127]),
    "every row reversed": np.arange(ROWS)[::-1],
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", list(CASES))
def test_take_is_fancy_indexing_of_read(path, whole, case, threads):
    rows = CASES[case]
    with idv.open(path, threads=threads) as f:
        got = f.take(rows)
    assert list(got) == list(whole)
    assert same(got, _expected(whole, rows % ROWS))


def test_windows_of_one_block_each_give_the_same_rows(path, whole, monkeypatch):
    monkeypatch.setattr(idv._reader.take, "TAKE_WINDOW_BYTES", 1)
    rows = CASES["every row reversed"]
    with idv.open(path, threads=2) as f:
        assert same(f.take(rows), _expected(whole, rows))


def test_take_as_a_list_and_of_some_columns_in_their_order(path, whole):
    with idv.open(path) as f:
        got = f.take([3, 1, 2], columns=["t", "k"])
    assert list(got) == ["t", "k"]
    assert same(got, {n: whole[n][[3, 1, 2]] for n in ["t", "k"]})
    assert got["t"].tolist() == ["row 3 é 0", "row 1 é 0", "row 2 é 0"]


def test_empty_indices_give_the_empty_forms(path, whole):
    with idv.open(path) as f:
        got = f.take([])
        assert same(got, f.read(rows=slice(0, 0)))
    assert all(len(v) == 0 for v in got.values())


@pytest.mark.parametrize("bad", [ROWS, -ROWS - 1, 10**12])
def test_out_of_range_names_the_row_and_the_row_count(path, bad):
    with idv.open(path) as f, pytest.raises(IndexError, match=f"row {bad} .*{ROWS} rows"):
        f.take([0, bad, 1])


@pytest.mark.parametrize("bad", [np.uint64(2**63), 2**63, 2**64, [2**64], np.array([2**63],
                                                                                np.uint64)],
                         ids=["uint64", "int", "beyond-uint64", "list", "array"])
def test_row_numbers_beyond_int64_are_out_of_range_on_every_path(path, dataset_dir, bad):
    """A row number no int64 holds is out of range, an IndexError naming it, whichever path
    takes it: not numpy's OverflowError, nor a TypeError calling an int no integer."""
    pytest.importorskip("pyarrow", reason="the Arrow dataset's take is one of the paths")
    big = int(np.asarray(bad).reshape(-1)[0])
    listed = bad if isinstance(bad, (list, np.ndarray)) else [bad]
    with idv.open(path) as f, idv.dataset(dataset_dir) as ds:
        for take in (lambda: f.take(bad), lambda: f.take(listed), lambda: f["i"][listed],
                     lambda: f.read(rows=listed), lambda: ds.take(bad),
                     lambda: idv.arrow_dataset(path).take(listed),
                     lambda: idv.to_arrow(path, rows=listed)):
            with pytest.raises(IndexError, match=f"row {big} out of range"):
                take()


def test_an_arrow_dataset_take_numbers_the_matches_as_a_take_numbers_the_rows(path):
    """take() of a filtered scan numbers its matching rows as take() without a filter numbers
    every row: negative from the end, slices, and idv's out-of-range error."""
    pytest.importorskip("pyarrow", reason="idv.arrow_dataset is pyarrow's kind")
    import pyarrow.compute as pc
    ds = idv.arrow_dataset(path)
    every = pc.field("i") >= 0              # a filter that keeps every row
    for rows in ([-1, 0, -2], slice(2, 9, 3), slice(None, None, -50), [5, 5]):
        assert ds.take(rows, filter=every).equals(ds.take(rows)), rows
    for take in (lambda: ds.take([ROWS]), lambda: ds.take([ROWS], filter=every)):
        with pytest.raises(IndexError, match=f"row {ROWS} out of range for {ROWS} rows"):
            take()


def test_blocks_decoded_are_the_distinct_blocks_hit(path):
    rows = np.array([900, 5, 70, 71, 5, 999, 200])
    hit = len(np.unique(rows // RPB))
    with idv.open(path) as f:
        f.take(rows, columns=["f", "r"])
        assert [f[n].blocks_decoded for n in ["f", "r", "i"]] == [hit, hit, 0]


@pytest.mark.parametrize("compression, checksums", [("none", True), ("deflate", False)])
def test_uncompressed_and_unchecked_files_give_the_same_rows(tmp_path, whole, compression,
                                                              checksums):
    p = tmp_path / "t.idv"
    idv.write(p, _table(ROWS), types=TYPES, rows_per_block=RPB, compression=compression,
              checksums=checksums)
    rows = CASES["unsorted"]
    with idv.open(p) as f:
        assert same(f.take(rows), _expected(whole, rows))


# ---- datasets: row numbers over the files end to end

@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("take_ds")
    for k, n in enumerate([300, 1, 450, 250]):
        idv.write(d / f"part{k}.idv", _table(n, seed=k), types=TYPES, rows_per_block=RPB)
    return d


@pytest.mark.parametrize("rows", [
    np.array([0, 299, 300, 301, 750, 1000, 300]),       # across every boundary, repeated
    np.array([-1, 0, -701, 299, 301]),                  # negative, unsorted
    np.random.default_rng(3).permutation(1001)[:200],
])
def test_dataset_take_is_fancy_indexing_of_the_files_end_to_end(dataset_dir, rows):
    with idv.dataset(dataset_dir) as ds:
        whole = ds.read()
        got = ds.take(rows)
        assert same(got, _expected(whole, rows % ds.num_rows))
        assert same(ds.take(rows, columns=["r", "t"]),
                    {n: whole[n][rows % ds.num_rows] for n in ["r", "t"]})


def test_dataset_take_errors_and_empty(dataset_dir):
    with idv.dataset(dataset_dir) as ds:
        with pytest.raises(IndexError, match="row 1001 .*1001 rows"):
            ds.take([3, 1001])
        got = ds.take([], columns=["v", "r"])
        assert got["v"].shape == (0, 3) and len(got["r"]) == 0


def test_a_take_of_more_blocks_than_a_round_holds_gives_the_same_rows(path, whole,
                                                                       monkeypatch):
    monkeypatch.setattr(idv._reader.take, "TAKE_BYTES", 3 * RPB * 20)     # 3 blocks of f, i and k
    rows = CASES["every row reversed"][::3]
    with idv.open(path) as f:
        got = f.take(rows, columns=["f", "i", "k", "t"])
        assert f["i"].blocks_decoded == len(np.unique(rows // RPB))
    assert same(got, {n: whole[n][rows] for n in ["f", "i", "k", "t"]})


def test_every_fixed_width_type_at_the_edges_of_its_blocks(tmp_path):
    # a take inflates a checksummed block only up to its last row asked for (the rest of
    # its room zeroed): rows at each block's start and end, of every fixed-width type
    rng = np.random.default_rng(11)
    n = 20 * RPB + 5
    cols = {f"{t}": rng.integers(0, 100, n).astype(t) for t in
            ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"]}
    cols.update(f4=rng.random(n, dtype=np.float32), f8=rng.standard_normal(n),
                when=np.datetime64("2020-01-01", "ns") + 100 * rng.integers(0, 10**13, n),
                span=(100 * rng.integers(0, 10**10, n)).astype("m8[ns]"),
                key=rng.integers(0, 5, n).astype(np.uint32),
                rid=np.zeros(n, [("low", "<u8"), ("high", "<u8")]))
    cols["rid"]["low"], cols["rid"]["high"] = rng.integers(0, 2**62, (2, n), dtype=np.uint64)
    p = tmp_path / "fixed.idv"
    idv.write(p, cols, types={"key": idv.Key(idv.UInt32, 4), "rid": idv.RowId},
              rows_per_block=RPB)
    whole = idv.read(p)
    rows = np.array([0, RPB - 1, RPB, 5 * RPB + 1, 7 * RPB - 1, 13 * RPB + 30, n - 1, n - 5])
    with idv.open(p) as f:
        assert same(f.take(rows), _expected(whole, rows))
        assert same(f.take(rows[::-1]), _expected(whole, rows[::-1]))


def test_a_damaged_checksummed_file_gives_an_error_or_the_rows(tmp_path):
    # rows early in their blocks (each block then inflated in part): a flipped byte anywhere
    # past the header is an IdvFormatError or changes nothing, never other values
    rng = np.random.default_rng(12)
    cols = {"f": rng.random(20 * RPB), "i": rng.integers(0, 1 << 40, 20 * RPB)}
    p = tmp_path / "t.idv"
    idv.write(p, cols, rows_per_block=RPB)
    data = p.read_bytes()
    rows = np.arange(20) * RPB + 3
    want = {k: v[rows] for k, v in cols.items()}
    for at in rng.integers(256, len(data), 60):
        bad = bytearray(data)
        bad[at] ^= int(rng.integers(1, 256))
        p.write_bytes(bytes(bad))
        try:
            with idv.open(p) as f:
                got = f.take(rows)
        except idv.IdvFormatError:
            continue
        assert same(got, want), f"byte {at}"


def test_a_bad_value_in_a_block_hit_names_its_block(tmp_path):
    p = tmp_path / "when.idv"
    when = np.datetime64("2020-01-01", "ns") + np.arange(ROWS) * 10**9
    idv.write(p, {"when": when}, rows_per_block=RPB, compression="none", checksums=False)
    with idv.open(p) as f:
        offset = int(f["when"].lookup["offset"][7])
    bad = bytearray(p.read_bytes())
    bad[offset + 8 * 3:offset + 8 * 4] = (-5).to_bytes(8, "little", signed=True)   # row 451
    p.write_bytes(bytes(bad))
    with idv.open(p) as f:
        with pytest.raises(idv.IdvFormatError, match="DateTime ticks -5") as e:
            f.take([999, 460, 3])
        assert (e.value.column, e.value.block, e.value.offset) == ("when", 7, offset)
        assert f.take([999, 3])["when"].tolist() == when[[999, 3]].astype("M8[100ns]").tolist()


def test_take_of_text_makes_str_objects_for_the_rows_taken_alone(path, monkeypatch):
    """Text is gathered from its blocks' bytes: str objects are made for the rows taken (a
    row taken twice, twice), not for the other rows of the blocks they are in."""
    from idv._values.text_bytes import TextRows
    made = []
    strings = TextRows.strings

    def counted(self, rows):
        made.append(len(rows))
        return strings(self, rows)
    monkeypatch.setattr(TextRows, "strings", counted)
    rows = np.array([900, 3, 64, 3, 999])
    with idv.open(path) as f:
        got = f.take(rows, ["t"])["t"]
    assert got.tolist() == [f"row {k} é 0" for k in rows]
    assert sum(made) == len(rows)


# ---- take_kept: batch after batch through the file's cache (a map-style loader's)

@pytest.mark.parametrize("cache_bytes", [64 << 20, 20_000, 0])
def test_take_kept_is_fancy_indexing_of_read(path, whole, cache_bytes):
    """Every column form, in any order with repeats, whether the columns' whole arrays fit the
    cache or not (20,000 bytes: a few blocks), or nothing is kept."""
    from idv._reader.take import take_kept
    with idv.open(path, cache_bytes=cache_bytes) as f:
        cols = [f[n] for n in whole]
        for case in ("unsorted", "repeated", "negative", "one block", "every row reversed"):
            rows = CASES[case] % ROWS
            got = take_kept(f, rows, cols)
            assert same(dict(zip(whole, got)), _expected(whole, rows)), case
        empty = take_kept(f, np.zeros(0, np.int64), cols)
    assert same(dict(zip(whole, empty)), _expected(whole, []))


def test_take_kept_reads_block_by_block_where_the_whole_column_is_past_the_memory_limit(
        tmp_path):
    """A column whose whole array the cache would take but the memory limit does not is read
    block by block, as a row of it is anywhere else (it was refused)."""
    from idv._reader.take import take_kept
    p = tmp_path / "wide.idv"
    x = np.arange(200_000, dtype=np.float64)          # 1.6 MB whole, 64 KB a block
    idv.write(p, {"x": x}, rows_per_block=8192)
    with idv.open(p, memory_limit=1_000_000) as f:
        rows = np.array([199_999, 3, 3, 100_000])
        assert take_kept(f, rows, [f["x"]])[0].tolist() == x[rows].tolist()
        assert f["x"][3] == 3.0


def test_take_kept_charges_the_text_blocks_and_rows_to_the_memory_limit(tmp_path):
    from idv._reader.take import take_kept
    p = tmp_path / "long.idv"
    idv.write(p, {"t": np.array(["x" * 1000] * 256, object)}, rows_per_block=64)   # 64 KB a block
    with idv.open(p, memory_limit=200_000) as f:
        assert take_kept(f, np.array([3, 3]), [f["t"]])[0].tolist() == ["x" * 1000] * 2
        with pytest.raises(idv.MemoryLimitError, match="64 rows of column 0 't'"):
            take_kept(f, np.arange(0, 256, 4), [f["t"]])        # 4 blocks: 256 KB
