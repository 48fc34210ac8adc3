"""rows= means one thing on every reader: numpy's read, to_arrow, to_pandas, read_pandas, of a
file and of a hive-partitioned dataset (an empty file among its files), each compared with
numpy's own indexing of the values written; the streams take slices in file order and refuse
the rest alike."""
from __future__ import annotations

import numpy as np
import pytest

import idv

pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")

SIZES = {"a": 7, "b": 0, "c": 9}        # rows of each hive folder's file, blocks of 3 rows
TEXTS = ["", "x\0y", "é", "plain", "2^63"]


def _written(n, first):
    return {"i": np.arange(first, first + n, dtype=np.int64),
            "t": np.array([TEXTS[j % len(TEXTS)] for j in range(first, first + n)], object),
            "s": np.where(np.arange(first, first + n) % 4 == 1, np.nan,
                          np.arange(first, first + n) / 2).astype(np.float32)}


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """(the hive dataset's folder, the path of its last file, the values written end to end:
    name -> array, the hive key's too)."""
    root = tmp_path_factory.mktemp("rows")
    parts, first = [], 0
    for k, n in SIZES.items():
        (root / f"k={k}").mkdir()
        data = _written(n, first)
        idv.write(str(root / f"k={k}" / "part.idv"), data, rows_per_block=3)
        parts.append(dict(data, k=np.array([k] * n, object)))
        first += n
    whole = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
    return root, root / "k=c" / "part.idv", whole


KEYS = [None, slice(None), slice(3, 14), slice(-5, None), slice(0, 10**20, 4), slice(5, 2),
        slice(None, None, -1), slice(14, 2, -3), 0, -1, 8, [], [2, 2, 0, -1, 8],
        np.array([8, 1], np.uint64), "mask", "none of the mask"]


def _key(key, n):
    if isinstance(key, str) and key == "mask":
        return np.arange(n) % 3 == 1
    if isinstance(key, str):
        return np.zeros(n, bool)
    return key


def _as_lists(got, names):
    """name -> list of values of a reader's answer (dict of arrays, Table or DataFrame)."""
    if isinstance(got, dict):
        return {n: np.atleast_1d(np.asarray(got[n], dtype=object)).tolist() for n in names}
    if isinstance(got, pd.DataFrame):
        return {n: got[n].astype(object).tolist() for n in names}
    return {n: got.column(n).to_pylist() for n in names}


def _same(got, want):
    for name, values in want.items():
        assert len(got[name]) == len(values), name
        for a, b in zip(got[name], values):
            assert a == b or (a != a and b != b), (name, got[name], values)


def _readers(src, path):
    """The readers that take rows= in any order: name -> call(names, rows)."""
    return {
        "read": lambda names, rows: idv.read(src, names, rows=rows),
        "to_arrow": lambda names, rows: idv.to_arrow(src, names, rows=rows),
        "to_pandas": lambda names, rows: idv.to_pandas(src, names, rows=rows),
        "read_pandas": lambda names, rows: idv.read_pandas(path, names, rows=rows),
    }


@pytest.mark.parametrize("key", KEYS, ids=repr)
@pytest.mark.parametrize("of", ["file", "hive dataset"])
def test_rows_mean_what_numpy_indexing_means_on_every_reader(sources, key, of):
    root, last, whole = sources
    if of == "file":
        src, path = idv.open(str(last)), str(last)
        want_all = {n: v[-SIZES["c"]:] for n, v in whole.items() if n != "k"}
    else:
        src = path = idv.dataset(str(root), partitioning="hive")
        want_all = whole
    names = list(want_all)
    rows = _key(key, len(want_all["i"]))
    want = {k: np.atleast_1d(v if rows is None else v[rows]).tolist()
            for k, v in want_all.items()}
    with src:
        for read in _readers(src, path).values():
            _same(_as_lists(read(names, rows), names), want)


@pytest.mark.parametrize("key", [np.array([2**63], np.uint64), [16], [-17], 1.5, ["1"],
                                 np.ones(3, bool), [[1]]], ids=repr)
def test_rows_out_of_range_or_of_another_kind_are_refused_alike(sources, key):
    root, _last, _whole = sources
    ds = idv.dataset(str(root), partitioning="hive")
    kind = TypeError if isinstance(key, float) or (isinstance(key, list) and key and
                                                   not isinstance(key[0], int)) else IndexError
    for name, read in _readers(ds, ds).items():
        with pytest.raises(kind):
            read(["i", "k"], key)


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_streams_take_the_slices_in_file_order_and_refuse_the_rest(sources, key):
    """record_batch_reader reads rows in file order: a slice with a positive step gives what
    to_arrow gives; any other selection is refused, naming the readers that take it."""
    root, _last, _whole = sources
    ds = idv.dataset(str(root), partitioning="hive")
    rows = _key(key, ds.num_rows)
    if rows is None or (isinstance(rows, slice) and (rows.step or 1) > 0):
        got = idv.record_batch_reader(ds, ["i", "t", "k"], rows=rows).read_all()
        assert got.equals(idv.to_arrow(ds, ["i", "t", "k"], rows=rows))
        return
    with pytest.raises((TypeError, ValueError), match=r"to_arrow\(rows=\)"):
        idv.record_batch_reader(ds, ["i"], rows=rows)


def test_row_numbers_with_a_filter_are_refused_and_a_slice_is_filtered(sources):
    """A filter tests the rows of a slice on every reader; row numbers with one are refused
    (the filter keeps rows in file order, not the order asked)."""
    root, _last, whole = sources
    ds = idv.dataset(str(root), partitioning="hive")
    for read in (idv.read, idv.to_arrow, idv.to_pandas):
        with pytest.raises(ValueError, match="file order"):
            read(ds, ["i"], rows=[1, 2], filter="i > 0")
        for where, rows in [("s > 1", slice(2, 12)), ("k == 'c'", slice(3, None, 2)),
                            ("k == 'a' or s > 1", slice(1, 15, 3)), ("k == 'b'", None)]:
            got = _as_lists(read(ds, ["i", "k"], rows=rows, filter=where), ["i", "k"])
            sel = {k: v[rows or slice(None)] for k, v in whole.items()}
            keep = {"s > 1": sel["s"] > 1, "k == 'c'": sel["k"] == "c",
                    "k == 'a' or s > 1": (sel["k"] == "a") | (sel["s"] > 1),
                    "k == 'b'": sel["k"] == "b"}[where]
            assert got == {k: sel[k][keep].tolist() for k in ("i", "k")}, (read, where)


@pytest.mark.filterwarnings("ignore::idv.IdvWarning")    # the fixtures' floored ticks
@pytest.mark.parametrize("name", ["annotations_more", "datetime_vectors", "keys_wide",
                                  "mixed_dates", "text_bool_vectors", "vectors_blocks_deflate"])
def test_row_numbers_in_arrow_are_the_whole_tables_rows(name):
    """to_arrow(rows=) of row numbers (each file's share taken as numpy's take, then made
    Arrow) equals pyarrow's own take of the whole table, on every type the testdata holds:
    keys with labels, vectors, times, Text."""
    from reference import TESTDATA_DIR
    path = str(TESTDATA_DIR / f"{name}.idv")
    n = idv.open(path).num_rows
    rows = np.array([n - 1, 0, n // 2, 0, n // 3], np.int64)
    whole = idv.to_arrow(path)
    for key, picked in ((rows, rows), (slice(None, None, -2), np.arange(n)[::-2])):
        got, want = idv.to_arrow(path, rows=key), whole.take(picked)
        assert got.schema.equals(want.schema, check_metadata=True)
        assert repr(got.to_pylist()) == repr(want.to_pylist())     # NaN equal to NaN


def test_rows_by_number_are_read_as_take_reads_them_on_every_reader(tmp_path):
    """A few scattered rows of a file (or a dataset) whose columns are past the memory limit
    are read on every reader, as a file's take() reads them (read(rows=) and to_pandas(rows=)
    charged the Text blocks as str objects, or the whole span of blocks, and refused; a
    dataset's take and read too)."""
    p = str(tmp_path / "t.idv")
    n = 400_000
    idv.write(p, {"x": np.arange(n, dtype=np.float64),
                  "t": np.array(["abc", "defgh", "ij"], object)[np.arange(n) % 3]})
    for src in (idv.open(p, memory_limit=3_000_000),
                idv.dataset([p, p], memory_limit=3_000_000)):
        rows = np.linspace(0, src.num_rows - 1, 20).astype(np.int64)[::-1]
        local = rows % n
        want = {"x": local.astype(float).tolist(),
                "t": np.array(["abc", "defgh", "ij"], object)[local % 3].tolist()}
        with src:
            for name, got in (("take", src.take(rows)), ("read", src.read(rows=rows)),
                              ("to_arrow", idv.to_arrow(src, rows=rows)),
                              ("to_pandas", idv.to_pandas(src, rows=rows))):
                assert _as_lists(got, ["x", "t"]) == want, (name, src)


@pytest.mark.parametrize("key", [slice(0, 5), slice(0, 10, 2), [3, 1], slice(None, None, -7), 4],
                         ids=repr)
def test_text_has_one_pandas_dtype_whatever_the_rows(sources, key):
    """dtype_backend='pyarrow' gives Text Arrow's strings for every selection (rows by number
    and slices of a step gave pandas' str)."""
    root, last, whole = sources
    for src in (idv.open(str(last)), idv.dataset(str(root), partitioning="hive")):
        with src:
            df = idv.to_pandas(src, ["t"], rows=key, dtype_backend="pyarrow")
            assert str(df["t"].dtype) == "string[pyarrow]", key


def test_a_range_is_its_slice_and_a_zero_step_is_named(sources):
    """rows=range(...) is the slice it spans on every reader, with a filter too (refused as
    row numbers there); a slice of step 0 is refused for its step, not as row numbers."""
    root, _last, whole = sources
    ds = idv.dataset(str(root), partitioning="hive")
    for read in (idv.read, idv.to_arrow, idv.to_pandas):
        got = _as_lists(read(ds, ["i"], rows=range(2, 12), filter="s > 1"), ["i"])
        assert got["i"] == whole["i"][2:12][whole["s"][2:12] > 1].tolist()
        with pytest.raises(ValueError, match="step cannot be zero"):
            read(ds, ["i"], rows=slice(0, 10, 0), filter="s > 1")
