"""idv.dataset: many .idv files read as one table.

Expected values are ML.NET's (the sample fixtures' sidecars, written by ML.NET) or the
single-file reads of the same ML.NET-written files, which the other test files check against
ML.NET. Files written by idv here only carry schemas (mismatch tests) or are damaged on purpose.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import idv
from idv._resources import gc as _gc
from idv._store import many_files as batch
from idv._reader import dataset_files, opening, reader
from craft import build, parse
from expected import assert_column_equal, assert_equal_reads, column_index, expected_column
from reference import REPO_DIR, fixture, sidecar

# ML.NET-written files with the same 9 columns, 100 rows each, blocks of 100, 7 and 3 rows
MIXED = ["mixed_default", "mixed_deflate", "mixed_none", "mixed_smallblocks_deflate",
         "mixed_smallblocks_none", "mixed_smallblocks_ordered", "mixed_maxbytes"]
BIG = ["multiblock_200k_deflate", "multiblock_200k_none"]     # 200,000 rows, blocks of 8192


def _paths(names):
    return [str(fixture(n)) for n in names]


def _concat_expected(names, column):
    parts = []
    for n in names:
        doc = sidecar(n)
        parts.append(expected_column(doc, column_index(doc, column)))
    return parts


def _copy(names, folder):
    folder.mkdir(exist_ok=True)
    out = []
    for i, n in enumerate(names):
        dst = folder / f"{i:02d}_{n}.idv"
        shutil.copyfile(fixture(n), dst)
        out.append(str(dst))
    return out


# ---- values -----------------------------------------------------------------------------------

def test_a_dataset_reads_every_files_rows_as_ml_net_wrote_them():
    with idv.dataset(_paths(MIXED)) as ds:
        assert ds.num_rows == len(ds) == 700
        assert [f.num_rows for f in ds.files] == [100] * 7
        assert [(f.start, f.stop) for f in ds.files] == [(i * 100, i * 100 + 100)
                                                          for i in range(7)]
        assert ds.schema.names == ["Id", "F32", "F64", "B", "Txt", "Key", "Vec", "Var", "DT"]
        assert ds.schema.num_rows == 700
        got = ds.read()
        for name in ds.column_names:
            parts = _concat_expected(MIXED, name)
            for i, part in enumerate(parts):
                assert_column_equal(got[name][i * 100:(i + 1) * 100], part,
                                    f"{MIXED[i]} {name}")


def test_a_dataset_read_equals_the_single_file_reads():
    paths = _paths(BIG)
    singles = [idv.read(p) for p in paths]
    with idv.dataset(paths, columns=["Id", "Name"]) as ds:
        assert ds.num_rows == 400_000 and ds.column_names == ["Id", "Name"]
        got = ds.read()
        for name in ("Id", "Name"):
            want = np.concatenate([s[name] for s in singles])
            assert_equal_reads(got[name], want)


def test_a_global_row_slice_touches_only_the_blocks_of_its_rows():
    paths = _paths(BIG)
    singles = [idv.read(p) for p in paths]
    with idv.dataset(paths) as ds:
        part = ds[199_000:201_000]             # the last block of file 0, the first of file 1
        for name in ("Id", "X", "Name", "Flag"):
            want = np.concatenate([singles[0][name][199_000:], singles[1][name][:1_000]])
            assert_equal_reads(part[name], want)
            assert ds.open_file(0)[name].blocks_decoded == 1
            assert ds.open_file(1)[name].blocks_decoded == 1
        # rows in any order, negative from the end, across files
        rows = [399_999, 5, 200_000, -400_000, 250_123, 7]
        got = ds.read(["Id", "Name"], rows=rows)
        both = {n: np.concatenate([s[n] for s in singles]) for n in ("Id", "Name")}
        for n in ("Id", "Name"):
            assert_equal_reads(got[n], both[n][rows])
        mask = np.zeros(400_000, bool)
        mask[[3, 300_000]] = True
        assert ds.read("Id", rows=mask)["Id"].tolist() == both["Id"][[3, 300_000]].tolist()
        assert ds[10:10]["Id"].shape == (0,)
        assert ds[::100_000]["Id"].tolist() == both["Id"][::100_000].tolist()
        with pytest.raises(IndexError, match="row 400000 out of range for 400000 rows"):
            ds.read(rows=[400_000])


def test_directory_glob_and_list_sources(tmp_path):
    paths = _copy(MIXED[:3], tmp_path / "d")
    (tmp_path / "d" / "notes.txt").write_text("not an idv")
    sub = tmp_path / "d" / "later"
    sub.mkdir()
    shutil.copyfile(fixture(MIXED[3]), sub / "z.idv")
    by_dir = idv.dataset(tmp_path / "d")
    assert [f.path for f in by_dir.files] == paths + [str(sub / "z.idv")]
    by_glob = idv.dataset(str(tmp_path / "d" / "*.idv"))
    assert [f.path for f in by_glob.files] == paths
    by_list = idv.dataset([paths[2], paths[0]])
    assert [f.path for f in by_list.files] == [paths[2], paths[0]]
    assert by_list.read("Id")["Id"].tolist() == list(range(100)) * 2
    with pytest.raises(FileNotFoundError, match="no .idv files"):
        idv.dataset(str(tmp_path / "nothing-*.idv"))
    for d in (by_dir, by_glob, by_list):
        d.close()


# ---- the Python data stack ---------------------------------------------------------------------

def _same_table(a, b):
    """Arrow tables equal, float columns bit for bit (NaN equal to the same NaN)."""
    assert a.schema.equals(b.schema, check_metadata=True)
    for name in a.column_names:
        x, y = a.column(name).combine_chunks(), b.column(name).combine_chunks()
        if x.type in ("float", "double"):
            assert_equal_reads(x.to_numpy(zero_copy_only=False),
                               y.to_numpy(zero_copy_only=False))
        else:
            assert x.equals(y), name


def test_arrow_and_pandas_forms_equal_the_files_joined():
    pa = pytest.importorskip("pyarrow")
    pd = pytest.importorskip("pandas")
    paths = _paths(MIXED)
    with idv.dataset(paths) as ds:
        table = ds.to_arrow()
        want = pa.concat_tables([idv.to_arrow(p) for p in paths])
        _same_table(table, want)
        _same_table(pa.table(ds), want)                   # the Arrow C stream
        batches = list(ds.iter_batches(["Id", "Txt"], batch_size=40))
        assert [b.num_rows for b in batches] == [40, 40, 20] * 7    # never across files
        _same_table(pa.Table.from_batches(batches), want.select(["Id", "Txt"]))
        df = ds.to_pandas(["Id", "F64", "Key", "Vec"])
        single = pd.concat([idv.read_pandas(p, ["Id", "F64", "Key", "Vec"]) for p in paths],
                           ignore_index=True)
        pd.testing.assert_frame_equal(df, single)


def _written(folder, files):
    """The paths of files 0.idv, 1.idv... of `folder`, written by idv.write from each
    (columns, keywords) of `files`."""
    paths = []
    for i, (columns, keywords) in enumerate(files):
        paths.append(str(folder / f"{i}.idv"))
        idv.write(paths[-1], columns, **keywords)
    return paths


def test_arrow_numbers_come_whole_and_keys_keep_each_files_key_values(tmp_path):
    """A dataset's numbers and dense vectors are read whole, all files at once (numbers: one
    Arrow chunk, not one a file); its keys file by file: each file's key values name its own
    keys."""
    pa = pytest.importorskip("pyarrow")
    paths = _written(tmp_path, [
        ({"x": np.arange(5 + i, dtype=np.float64) + 10 * i,
          "v": np.arange((5 + i) * 3, dtype=np.int16).reshape(5 + i, 3),
          "k": np.arange(5 + i, dtype=np.uint32) % (len(words) + 1),
          "t": [f"r{i}.{j}" for j in range(5 + i)]},
         {"types": {"k": idv.Key(idv.UInt32, count=3)},
          "metadata": {"k": {"KeyValues": words + [""] * (3 - len(words))}}})
        for i, words in enumerate((["cat", "dog"], ["dog", "cat", "bird"], ["ant", "bee"]))])
    want = pa.concat_tables([idv.to_arrow(p) for p in paths])
    with idv.dataset(paths, max_open_files=1) as ds:
        table = ds.to_arrow()
        _same_table(table, want)
        assert table.column("x").num_chunks == 1        # not one chunk a file
        assert table.column("k").to_pylist() == want.column("k").to_pylist()
        assert table.column("k").to_pylist()[5:8] == [None, "dog", "cat"]
        _same_table(ds.to_arrow(["k", "x"]), want.select(["k", "x"]))
        _same_table(ds.to_arrow(["x"], filter=pa.compute.field("x") > 12),
                    want.select(["x"]).filter(pa.compute.field("x") > 12))


@pytest.mark.parametrize("key_values", [["cat", "dog", "bird"], None])
def test_keys_of_the_same_key_values_in_every_file_are_read_in_one_step(tmp_path, key_values):
    """Keys whose KeyValues are the same in every file (or absent from all) are read whole,
    all files at once, like numbers: one Arrow chunk; the same table, frame and batches as
    each file's. One file stores them uncompressed: the same values in other bytes."""
    pa = pytest.importorskip("pyarrow")
    pd = pytest.importorskip("pandas")
    paths = _written(tmp_path, [
        ({"k": (np.arange(5 + 3 * i, dtype=np.uint32) + i) % 4,
          "x": np.arange(5 + 3 * i, dtype=np.float32)},
         {"types": {"k": idv.Key(idv.UInt32, count=3)},
          "metadata": {"k": {"KeyValues": key_values}} if key_values else None,
          "compression": "none" if i == 2 else "deflate"})
        for i in range(4)])
    want = pa.concat_tables([idv.to_arrow(p) for p in paths])
    with idv.dataset(paths, max_open_files=2) as ds:
        table = ds.to_arrow()
        _same_table(table, want)
        assert table.column("k").num_chunks == 1                # not one chunk a file
        batches = list(ds.iter_batches(batch_size=4))
        mine = [b for p in paths for b in idv.record_batch_reader(p, batch_size=4)]
        assert [b.num_rows for b in batches] == [b.num_rows for b in mine]
        _same_table(pa.Table.from_batches(batches), pa.Table.from_batches(mine))
        pd.testing.assert_frame_equal(
            ds.to_pandas(), pd.concat([idv.read_pandas(p) for p in paths], ignore_index=True))

@pytest.mark.parametrize("vectors", ["expand", "object"])
def test_pandas_numbers_vectors_and_times_read_whole_equal_the_files_joined(vectors):
    """Numbers, Booleans, vectors, times and text (no keys) are read whole, all files at once,
    and framed as one file's columns: the same frame as each file's, joined."""
    pd = pytest.importorskip("pandas")
    paths = _paths(MIXED)
    names = ["Id", "F32", "F64", "B", "Txt", "Vec", "Var", "DT"]
    single = pd.concat([idv.read_pandas(p, names, vectors=vectors) for p in paths],
                       ignore_index=True)
    with idv.dataset(paths, max_open_files=2) as ds:
        df = ds.to_pandas(names, vectors=vectors)
        pd.testing.assert_frame_equal(df, single)
        assert df.attrs[idv.SCHEMA_ATTR] == single.attrs[idv.SCHEMA_ATTR]
        for mode in ("ticks", "us"):
            pd.testing.assert_frame_equal(
                ds.to_pandas(["DT", "F64"], datetime=mode),
                pd.concat([idv.read_pandas(p, ["DT", "F64"], datetime=mode) for p in paths],
                          ignore_index=True))


@pytest.mark.parametrize("group_bytes", [None, 9_000, 0])
def test_the_stream_of_small_files_read_together_cuts_the_same_batches(monkeypatch,
                                                                       group_bytes, tmp_path):
    """Files of numbers, vectors and text small enough are read together (in one batched
    read) and their batches cut from the whole: each file's blocks of rows, or batch_size
    rows, never across files, as each file's own stream gives them. group_bytes: all files
    together (None), two at a time, each by itself (0)."""
    pa = pytest.importorskip("pyarrow")
    from idv._reader import whole_read
    if group_bytes is not None:
        monkeypatch.setattr(whole_read, "GROUP_BYTES", group_bytes)
    empty = tmp_path / "empty.idv"
    idv.write(empty, {"Id": np.zeros(0, np.int32), "F32": np.zeros(0, np.float32),
                      "F64": np.zeros(0), "B": np.zeros(0, bool), "Txt": [],
                      "Vec": np.zeros((0, 4), np.float32)},
              metadata={"Vec": {"SlotNames": ["a", "b", "c", "d"]}},
              types={"Txt": idv.Text})
    paths = _paths(MIXED[:3]) + [str(empty)] + _paths(MIXED[3:])
    names = ["Id", "F32", "F64", "B", "Txt", "Vec"]
    for batch_size in (None, 40):
        with idv.dataset(paths, columns=names, schema="common", max_open_files=2) as ds:
            got = list(ds.iter_batches(names, batch_size=batch_size))
        want = [b for p in paths
                for b in idv.record_batch_reader(p, names, batch_size=batch_size)]
        assert [b.num_rows for b in got] == [b.num_rows for b in want]
        _same_table(pa.Table.from_batches(got), pa.Table.from_batches(want))
    assert [b.num_rows for b in got] == [40, 40, 20] * 7

def test_polars_and_duckdb_read_a_dataset():
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    paths = _paths(BIG)
    ids = np.concatenate([idv.read(p, "Id")["Id"] for p in paths])
    with idv.dataset(paths) as ds:
        df = pl.DataFrame(ds)
        assert df.shape == (400_000, 4) and df["Id"].to_list() == ids.tolist()
        con = duckdb.connect()
        con.register("ds", ds.record_batch_reader(["Id"]))
        assert con.sql("SELECT count(*), sum(Id) FROM ds").fetchall()[0] == \
            (400_000, int(ids.sum()))


def test_time_columns_get_one_unit_for_the_whole_dataset(tmp_path):
    pa = pytest.importorskip("pyarrow")
    recent, old = tmp_path / "a.idv", tmp_path / "b.idv"
    idv.write(recent, {"T": np.array(["2020-01-01T00:00:00.000000100"], "datetime64[ns]")})
    idv.write(old, {"T": np.array(["0001-01-01T00:00:00"], "datetime64[us]")})
    assert idv.to_arrow(str(recent)).schema.field("T").type == pa.timestamp("ns")
    with idv.dataset([recent, old]) as ds:
        # 100-ns digits beside year 1: no unit holds both; floored once, with one warning
        with pytest.warns(idv.IdvWarning, match="column .T.*floored to microseconds"):
            table = ds.to_arrow()
        assert table.schema.field("T").type == pa.timestamp("us")
        assert table.column("T").cast(pa.int64()).to_pylist() == \
            [1577836800000000, -62135596800000000]
        with pytest.raises(ValueError, match="no unit holds it exactly"):
            ds.to_arrow(datetime="exact")
        ticks = ds.to_arrow(datetime="ticks").column("T").to_pylist()
        assert ticks == [637134336000000001, 0]


# ---- schemas ----------------------------------------------------------------------------------

def _write(path, columns):
    idv.write(path, columns)
    return str(path)


def test_mismatched_schemas_name_the_file_the_column_and_both_types(tmp_path):
    a = _write(tmp_path / "a.idv", {"x": np.arange(3, dtype=np.int32),
                                    "y": np.zeros(3, np.float32), "z": np.ones(3, np.int64)})
    b = _write(tmp_path / "b.idv", {"x": np.arange(2, dtype=np.int32),
                                    "y": np.zeros(2, np.float64), "z": np.ones(2, np.int64)})
    c = _write(tmp_path / "c.idv", {"x": np.arange(4, dtype=np.int32),
                                    "z": np.ones(4, np.int64)})
    with pytest.raises(ValueError) as e:
        idv.dataset([a, b])
    assert str(e.value) == (f"the files' columns differ: {b}: column 'y' is Double, but Single "
                            f"in {a} (schema='common' keeps the columns all files share with "
                            f"one type: 2 of 3, leaving out 'y')")
    with pytest.raises(ValueError, match=f"{c} has no column 'y' \\(Single in {a}\\)"):
        idv.dataset([a, c])
    with pytest.raises(ValueError, match=f"{a} has a column 'y' \\(Single\\) that {c} does not"):
        idv.dataset([c, a])
    with pytest.warns(idv.IdvWarning) as caught:    # a column of two types is named
        ds = idv.dataset([a, b, c], schema="common")
    assert [str(w.message) for w in caught] == [
        f"schema='common' leaves out 1 column that files give different types: 'y' ({b}: "
        f"Double, but Single in {a})"]
    with ds:
        assert ds.column_names == ["x", "z"] and ds.num_rows == 9
        assert ds.read()["x"].tolist() == [0, 1, 2, 0, 1, 0, 1, 2, 3]
    with warnings.catch_warnings():     # a column some file lacks is left out silently
        warnings.simplefilter("error")
        with idv.dataset([a, c], schema="common") as ds:
            assert ds.column_names == ["x", "z"]
    # columns= checks only those columns
    with idv.dataset([a, b], columns=["z", "x"]) as ds:
        assert ds.column_names == ["z", "x"]
    with pytest.raises(ValueError, match=f"column 'y' is not common to all files: {b}: "
                                         f"Double, but Single in {a}"):
        idv.dataset([a, b], columns=["y"], schema="common")
    with pytest.raises(ValueError, match="schema must be one of"):
        idv.dataset([a], schema="union")


def test_a_column_one_file_cannot_interpret_is_named_with_that_file(tmp_path):
    """schema='common' leaves out a column that one file's unknown codec makes unreadable:
    the warning says which file, among the many."""
    paths = [_write(tmp_path / f"{i}.idv", {"Id": np.arange(3, dtype=np.int64),
                                            "T": ["a", "b", "c"]}) for i in range(3)]
    data = Path(paths[1]).read_bytes()
    assert data.count(b"TextSpan") == 1
    damaged = data.replace(b"TextSpan", b"TextSpam")        # a codec name no reader knows
    Path(paths[1]).write_bytes(damaged)
    with pytest.warns(idv.IdvWarning) as caught:
        ds = idv.dataset(paths, schema="common", checksums=False)
    with ds:
        assert ds.column_names == ["Id"]
    assert [str(w.message) for w in caught] == \
        [f"cannot interpret column 1 'T' of {paths[1]}: unknown codec 'TextSpam'"]
    with pytest.warns(idv.IdvWarning) as caught:            # bytes: no file to name
        idv.open(damaged, checksums=False).close()
    assert [str(w.message) for w in caught] == ["cannot interpret column 1 'T': unknown codec "
                                                "'TextSpam'"]


@pytest.mark.parametrize("damage", ["codec", "compression"])
@pytest.mark.parametrize("reader", ["read", "dataset", "arrow_dataset", "polars"])
def test_a_column_no_reader_can_interpret_is_left_out_by_every_default_read(tmp_path, reader,
                                                                          damage):
    """As a file's read leaves it out (ML.NET skips it), so do a dataset's and the engines',
    whether its codec or its compression kind is unknown; asked for by name it is the
    UnsupportedCodecError naming the file and column on each."""
    path = _write(tmp_path / "x.idv", {"Id": np.arange(3, dtype=np.int64), "T": ["a", "b", "c"]})
    if damage == "codec":
        Path(path).write_bytes(Path(path).read_bytes().replace(b"TextSpan", b"TextSpam"))
    else:
        m = parse(Path(path).read_bytes())
        m.cols[1].comp, m.cols[1].stored = 7, {0: b"\x00" * 5}
        Path(path).write_bytes(build(m)[0])
    if reader == "polars":
        pytest.importorskip("polars", reason="idv.polars needs polars (pip install 'idv[polars]')")
        from idv.polars import scan_idv
    default, asked = {
        "read": (lambda: list(idv.read(path, checksums=False)),
                 lambda: idv.read(path, ["T"], checksums=False)),
        "dataset": (lambda: idv.dataset(path, checksums=False).to_arrow().column_names,
                    lambda: idv.dataset(path, ["T"], checksums=False).to_arrow()),
        "arrow_dataset": (lambda: idv.arrow_dataset(path, checksums=False).to_table()
                          .column_names,
                          lambda: idv.arrow_dataset(idv.dataset(path, ["Id", "T"],
                                                                checksums=False)).to_table()),
        "polars": (lambda: scan_idv(path, checksums=False).collect().columns,
                   lambda: scan_idv(idv.dataset(path, ["T"], checksums=False)).collect())
    }[reader]
    with pytest.warns(idv.IdvWarning, match="cannot interpret column 1 'T'"):
        assert default() == ["Id"]
    with pytest.warns(idv.IdvWarning), \
            pytest.raises(idv.UnsupportedCodecError, match=r"x\.idv: column 1 'T'"):
        asked()


def test_columns_by_index_as_every_reader_picks_them(tmp_path):
    a = _write(tmp_path / "a.idv", {"x": np.arange(3), "y": np.zeros(3), "z": np.ones(3)})
    b = _write(tmp_path / "b.idv", {"x": np.arange(2), "y": np.zeros(2), "z": np.ones(2)})
    with idv.dataset([a, b], columns=[-1, 0]) as ds:
        assert ds.column_names == ["z", "x"]
        assert ds.read()["x"].tolist() == [0, 1, 2, 0, 1]
    with idv.dataset([a, b], columns=-2) as ds:
        assert ds.column_names == ["y"]
    with pytest.raises(IndexError, match=f"column index 3 out of range in {a}: 3 columns"):
        idv.dataset([a, b], columns=[3])
    with pytest.raises(KeyError, match=f"no column 'w' in {a}"):
        idv.dataset([a, b], columns=["w"])


def test_a_sparse_read_is_as_wide_as_the_longest_row_of_all_files(tmp_path):
    a = _write(tmp_path / "a.idv", {"v": idv.Ragged.from_list([np.array([1., 2.]),
                                                               np.array([], float)])})
    b = _write(tmp_path / "b.idv", {"v": idv.Ragged.from_list([np.array([0., 0., 0., 5.])])})
    for paths in ([a, b], [b, a]):
        with idv.dataset(paths) as ds:
            m = ds.read(sparse=True)["v"]
        assert m.shape == (3, 4)
        rows = [[1, 2, 0, 0], [0, 0, 0, 0]]
        assert m.toarray().tolist() == (rows + [[0, 0, 0, 5]] if paths[0] == a
                                        else [[0, 0, 0, 5]] + rows)


# ---- bad files ----------------------------------------------------------------------------------

def test_a_corrupt_file_among_many_names_itself_and_can_be_skipped(tmp_path):
    paths = _copy(MIXED[:4], tmp_path / "d")
    bad = paths[2]
    with open(bad, "r+b") as f:         # the header's table-of-contents offset: past the end
        f.seek(32)
        f.write((10**9).to_bytes(8, "little"))
    with pytest.raises(idv.IdvFormatError) as e:
        idv.dataset(tmp_path / "d")
    assert e.value.path == bad and str(e.value).startswith(bad)
    assert str(e.value).endswith("(one of the dataset's 4 files: on_bad_file='skip' leaves out "
                                 "those that cannot be opened, with a warning)")
    with pytest.raises(idv.IdvFormatError) as e:       # one file: nothing to leave out
        idv.dataset([bad])
    assert "on_bad_file" not in str(e.value)
    with pytest.warns(idv.IdvWarning) as caught:
        ds = idv.dataset(tmp_path / "d", on_bad_file="skip")
    assert len(caught) == 1
    assert f"skipped 1 file it could not open: {bad} (" in str(caught[0].message)
    assert [p for p, _ in ds.skipped] == [bad]
    assert [f.path for f in ds.files] == [paths[0], paths[1], paths[3]]
    assert ds.read("Id")["Id"].tolist() == list(range(100)) * 3
    ds.close()
    with pytest.raises(FileNotFoundError):
        idv.dataset([str(tmp_path / "missing.idv")])
    with pytest.warns(idv.IdvWarning, match="missing.idv"):
        ds = idv.dataset([paths[0], str(tmp_path / "missing.idv")], on_bad_file="skip")
    assert ds.num_rows == 100


def test_a_damaged_block_fails_only_the_reads_that_touch_it(tmp_path):
    paths = _copy(["multiblock_200k_deflate"] * 3, tmp_path / "d")
    with idv.open(paths[1]) as f:
        entry = f["X"].lookup[3]
        offset, disk = int(entry["offset"]), int(entry["disk"])
    with open(paths[1], "r+b") as fh:     # block 3 of X in the second file: not DEFLATE
        fh.seek(offset)
        fh.write(b"\xff" * disk)
    with idv.dataset(tmp_path / "d") as ds:
        with pytest.raises(idv.IdvFormatError) as e:
            ds.read("X")
        assert e.value.path == paths[1] and e.value.column == "X" and e.value.block == 3
        # the other files, the other blocks and the other columns stay readable
        want = idv.read(paths[0], "X")["X"]
        assert_equal_reads(ds.read("X", rows=slice(0, 200_000))["X"], want)
        assert_equal_reads(ds.read("X", rows=slice(400_000, 600_000))["X"], want)
        assert_equal_reads(ds.read("X", rows=slice(200_000, 200_000 + 3 * 8192))["X"],
                           want[:3 * 8192])
        assert ds.read("Id")["Id"].shape == (600_000,)


def test_a_damaged_lookup_entry_is_named_with_its_file_by_every_read(tmp_path):
    """A lookup entry whose length on disk says 2 GB (a bit flip in the table, in an ML.NET
    file without checksums) is found by the size a read is checked against before it reads:
    that error names the file as the read's own does, whether the file is open or closed
    (its sizes kept), and the file's other columns still read."""
    pytest.importorskip("pyarrow.dataset", reason="the streaming and Arrow reads need pyarrow")
    paths = _copy(["mixed_smallblocks_none"] * 3, tmp_path / "d")
    with idv.open(paths[1]) as f:
        at = f["F64"].lookup_offset + 16 * 3 + 8        # block 3's length on disk
    with open(paths[1], "r+b") as fh:
        fh.seek(at)
        fh.write((2**31 - 1).to_bytes(4, "little"))
    reads = {"read": lambda ds: ds.read("F64"),
             "iter_batches": lambda ds: list(ds.iter_batches(["F64"])),
             "record_batch_reader": lambda ds: idv.record_batch_reader(ds).read_all(),
             "arrow_dataset": lambda ds: idv.arrow_dataset(ds).to_table(),
             "arrow_dataset of the file": lambda ds: idv.arrow_dataset(paths[1]).to_table()}
    for max_open in (1, None):
        with idv.dataset(tmp_path / "d", max_open_files=max_open) as ds:
            for name, read in reads.items():
                with pytest.raises(idv.IdvFormatError, match="lies outside") as e:
                    read(ds)
                assert (e.value.path, e.value.column, e.value.block) == (paths[1], "F64", 3), \
                    (max_open, name)
                assert str(e.value).startswith(paths[1]), (max_open, name)
            assert ds.read("Id")["Id"].tolist() == idv.read(paths[0], "Id")["Id"].tolist() * 3


# ---- file handles ---------------------------------------------------------------------------

def _mapped(paths):
    """How many of these files are memory-mapped in this process now."""
    with open("/proc/self/maps") as f:
        maps = f.read()
    return sum(1 for p in paths if p in maps)


def test_only_max_open_files_stay_open(tmp_path):
    if not __import__("os").path.exists("/proc/self/maps"):
        pytest.skip("needs /proc/self/maps (Linux) to count memory maps")
    src = fixture("multiblock_200k_none")       # large enough to be memory-mapped
    folder = tmp_path / "many"
    folder.mkdir()
    paths = []
    for i in range(40):
        p = folder / f"{i:03d}.idv"
        p.symlink_to(src) if i else shutil.copyfile(src, p)
        paths.append(str(p))
    resolved = [str(src), paths[0]]
    with idv.dataset(paths, columns=["Id"], max_open_files=5) as ds:
        assert ds.num_open_files == 5
        part = ds.read("Id", rows=slice(None, None, 50_000))["Id"]
        assert part.tolist() == [0, 50_000, 100_000, 150_000] * 40
        assert ds.num_open_files == 5
        assert _mapped(resolved) >= 1
    assert ds.num_open_files == 0



# files of 80 KB (memory-mapped) read as a dataset under a limit of 48 descriptors: its
# default max_open_files keeps its maps within them; one given larger runs out, clearly
_FEW_DESCRIPTORS = """
import os, resource, sys
import numpy as np
import idv
d = sys.argv[1]
paths = []
for i in range(80):
    paths.append(os.path.join(d, f"{i:02d}.idv"))
    idv.write(paths[-1], {"x": np.arange(i * 10_000, (i + 1) * 10_000)}, compression="none")
resource.setrlimit(resource.RLIMIT_NOFILE, (48, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
with idv.dataset(d) as ds:
    print(ds.max_open_files, ds.read()["x"].tolist() == list(range(800_000)))
for skip in ("raise", "skip"):
    try:
        idv.dataset(paths, max_open_files=80, on_bad_file=skip).close()
    except OSError as e:
        print(repr(e))
"""


def test_a_dataset_keeps_its_memory_maps_within_the_descriptors_allowed(tmp_path):
    """A memory map holds a file descriptor (before Python 3.13): by default a dataset keeps
    at most half of RLIMIT_NOFILE's soft limit of maps open; with more than the process may
    have, an OSError names the limit and max_open_files= (and no file is skipped for it)."""
    pytest.importorskip("resource", reason="RLIMIT_NOFILE is a Unix limit")
    from idv._storage import source
    if not source.MAPS_HOLD_DESCRIPTORS:
        pytest.skip("memory maps hold no file descriptor here (Python 3.13+ on Unix)")
    r = subprocess.run([sys.executable, "-c", _FEW_DESCRIPTORS, str(tmp_path)],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(REPO_DIR)))
    assert r.returncode == 0, r.stderr[-2000:]
    first, *errors = r.stdout.splitlines()
    assert first == "24 True"
    assert len(errors) == 2, r.stdout
    for e in errors:
        assert e.startswith("OSError(24, ") and "may have 48 open at once (RLIMIT_NOFILE" in e \
            and "max_open_files=" in e, e


def test_a_dataset_refuses_pickling_saying_to_pass_its_paths(tmp_path):
    """A dataset handed to a worker process is pickled: the error says what to pass, not
    which internal object cannot be pickled."""
    import pickle
    paths = _six_small(tmp_path)
    with idv.dataset(paths) as ds:
        with pytest.raises(TypeError, match="^an idv.Dataset is not picklable: pass its paths"):
            pickle.dumps(ds)


def test_small_files_stay_open_by_the_bytes_they_hold(tmp_path, monkeypatch):
    """By default, files read whole (small local ones) are counted by what they hold, not
    against max_open_files: all stay open from listing to reading while they fit, the
    first ones listed when they do not; memory-mapped files count against the limit. Given
    max_open_files, every file counts against it."""
    from idv._reader import dataset as dataset_module
    small = []
    for i in range(12):
        small.append(str(tmp_path / f"s{i:02d}.idv"))
        idv.write(small[-1], {"Id": np.arange(100, dtype=np.int32) + 100 * i})
    big = fixture("multiblock_200k_none")               # memory-mapped
    want = list(range(1200))
    with idv.dataset(small) as ds:
        assert ds.num_open_files == 12 and ds.max_open_files == dataset_module.default_max_open()
        assert ds.read("Id")["Id"].tolist() == want
        with ds.using(0) as f:
            each = dataset_files.whole_bytes(f)
        assert 100 * 4 < each < 64 << 10
    monkeypatch.setattr(dataset_module, "DEFAULT_OPEN_WHOLE_BYTES", 5 * each + each // 2)
    opened = _counting(monkeypatch, reader.IdvFile, "__init__")
    with idv.dataset(small) as ds:
        assert ds.num_open_files == 5 and len(opened) == 12
        assert ds.read("Id")["Id"].tolist() == want
        assert ds.num_open_files == 5 and len(opened) == 12 + 7    # the others reopened
    monkeypatch.setattr(dataset_module, "DEFAULT_MAX_OPEN_FILES", 2)
    with idv.dataset([big] * 4 + small[:3], columns=["Id"], schema="common") as ds:
        assert ds.num_open_files == 2 + 3          # two maps, and the small ones by bytes
        assert ds.read("Id", rows=slice(-300, None))["Id"].tolist() == want[:300]
        assert ds.num_open_files <= 5
    with idv.dataset(small, max_open_files=3) as ds:
        assert ds.num_open_files == 3
        assert ds.read("Id")["Id"].tolist() == want
        assert ds.num_open_files == 3

def _counting(monkeypatch, module, name):
    """A list that grows by one at each call of module.name."""
    calls, real = [], getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **k: (calls.append(a[0]), real(*a, **k))[1])
    return calls


def _six_small(tmp_path):
    paths = []
    for i in range(6):
        paths.append(str(tmp_path / f"{i}.idv"))
        idv.write(paths[-1], {"Id": np.arange(10, dtype=np.int32) + 10 * i,
                              "Name": np.array([f"r{j}" for j in range(10)], object)})
    return paths


def test_a_whole_read_opens_each_closed_file_once(tmp_path, monkeypatch):
    """Checking a read of every row against the memory limit reopens no closed file: each
    file past max_open_files is opened once when listed and once to be read, its tables read
    and checked only the first time."""
    paths = _six_small(tmp_path)
    parsed = _counting(monkeypatch, opening, "read")
    opens = _counting(monkeypatch, reader, "open_any")
    with idv.dataset(paths, max_open_files=2) as ds:
        assert len(opens) == len(parsed) == 6
        got = ds.read()
        assert got["Id"].tolist() == list(range(60))
        assert got["Name"].tolist() == [f"r{j}" for j in range(10)] * 6
        assert opens[6:] == paths[2:]        # files 2..5 once each
        assert len(parsed) == 6
    # what opening them read is kept up to LAYOUT_BYTES: here for two files of two columns
    monkeypatch.setattr(dataset_files, "LAYOUT_BYTES", 2 * dataset_files.layout_bytes(2))
    del parsed[:]
    with idv.dataset(paths, max_open_files=2) as ds:
        assert ds.read(["Id"])["Id"].tolist() == list(range(60))
        assert [src.name for src in parsed] == paths + paths[4:]     # 4 and 5 read again
    with idv.dataset(paths, max_open_files=2, memory_limit=300) as ds:
        assert ds.read(["Id"], rows=slice(0, 20))["Id"].tolist() == list(range(20))
        # 6 x 40 bytes, decoded in place: once; a row selection is joined: twice
        assert ds.read(["Id"])["Id"].tolist() == list(range(60))
        with pytest.raises(idv.MemoryLimitError):
            ds.read(["Id"], rows=slice(0, 60))
    with idv.dataset(paths, max_open_files=2, memory_limit=200) as ds:
        with pytest.raises(idv.MemoryLimitError):
            ds.read(["Id"])


def test_a_closed_file_is_told_by_its_layout_and_a_read_builds_only_its_columns(tmp_path,
                                                                                monkeypatch):
    """A file's columns, rows per block and what reading each allocates are told from what
    opening it read (its layout), as its Columns tell them, so that listing builds only the
    first file's table of contents (for the schema, its columns having no annotations); a
    read builds only the columns it reads, once each."""
    paths = []
    for i in range(5):
        paths.append(str(tmp_path / f"{i}.idv"))
        idv.write(paths[-1], {"Id": np.arange(30, dtype=np.int32) + 30 * i,
                              "Name": np.array([f"n{j}" * (i + 1) for j in range(30)], object),
                              "Flag": np.arange(30) % 3 == 0,
                              "V": np.ones((30, 4), np.float32)}, rows_per_block=7)
    with idv.open(paths[1]) as f:
        names = ["Id", "Name", "Flag", "V"]
        assert dataset_files.visible(f.layout) == [(n, f[n].type) for n in names]
        assert dataset_files.rows_per_block(f.layout) == {n: 7 for n in names}
        assert dataset_files.decoded(f.layout, names) == {
            n: (f[n].decoded_bytes(), f[n].decoded_bytes(arrow=True)) for n in names}
        assert f["Id"] is f.columns[0] is f[0] and f["V"] is f[-1]
    real, built = reader.Column, []
    monkeypatch.setattr(reader, "Column", lambda *a: built.append(a[1].name) or real(*a))
    with idv.dataset(paths, max_open_files=2) as ds:
        assert built == []
        assert ds.files[4].decoded["Name"] > ds.files[2].decoded["Name"]   # longer text
        # into Arrow: Text on its bytes, Booleans on their bits (less than as str, as bool)
        assert [ds.files[4].decoded[n][1] < ds.files[4].decoded[n][0]
                for n in names] == [False, True, True, False]
        assert ds.read(["Id"])["Id"].tolist() == list(range(150))
        assert built == ["Id"] * 5
        assert ds.read(["Id"])["Id"].tolist() == list(range(150))
        assert set(built[5:]) == {"Id"} and len(built[5:]) <= 5     # once a file opened


# ---- remote (fsspec) --------------------------------------------------------------------------

def test_a_dataset_of_urls_reads_through_fsspec():
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    root = "/idv-dataset-test"
    try:
        for i, n in enumerate(MIXED[:3]):
            fs.pipe(f"{root}/part-{i}.idv", fixture(n).read_bytes())
        fs.pipe(f"{root}/readme.txt", b"not an idv")
        with idv.dataset(f"memory://{root}/*.idv") as ds:
            assert [f.path for f in ds.files] == [f"{root}/part-{i}.idv" for i in range(3)]
            got = ds.read(["Id", "Var"])
        with idv.dataset(f"memory://{root}") as by_dir:        # a directory: its .idv files
            assert by_dir.num_rows == 300
        with idv.dataset(f"{root}/part-1.idv", filesystem=fs) as one:
            assert one.num_rows == 100
        for i, n in enumerate(MIXED[:3]):
            doc = sidecar(n)
            assert_column_equal(got["Var"][i * 100:(i + 1) * 100],
                                expected_column(doc, column_index(doc, "Var")), n)
        assert got["Id"].tolist() == list(range(100)) * 3
    finally:
        if fs.exists(root):     # not made where a fixture is missing (the test skips)
            fs.rm(root, recursive=True)



def _keyed_files(folder, n_files, rows):
    """Files of an Int32 column x (its values: file number * 1,000,000 + row) and a key
    column k (which keeps the stream file by file)."""
    paths = []
    for i in range(n_files):
        p = folder / f"{i:02d}.idv"
        idv.write(p, {"x": np.arange(rows, dtype=np.int32) + i * 1_000_000,
                      "k": np.arange(rows, dtype=np.uint32) % 3 + 1},
                  types={"k": idv.Key(idv.UInt32, count=3)},
                  metadata={"k": {"KeyValues": ["a", "b", "c"]}}, rows_per_block=1000)
        paths.append(str(p))
    return paths


def test_a_file_being_streamed_stays_open_while_other_reads_close_files(monkeypatch, tmp_path):
    """Reads of other files between a stream's batches do not close the file it is reading
    (max_open_files is exceeded while it is in use, and kept again after)."""
    monkeypatch.setattr(sys.modules["idv._scan.scan"], "WINDOW_BYTES", 4096)   # many windows a file
    paths = _keyed_files(tmp_path, 5, 10_000)
    with idv.dataset(paths, max_open_files=2) as ds:
        seen = []
        for batch in ds.iter_batches(["x", "k"]):
            seen += batch.column(0).to_pylist()
            far = ds.read(["x"], rows=[49_999, 30_000, 40_000])["x"]      # two other files
            assert far.tolist() == [4_009_999, 3_000_000, 4_000_000]
            assert ds.num_open_files <= 3
        assert seen == [i * 1_000_000 + r for i in range(5) for r in range(10_000)]
        assert ds.num_open_files <= 2


def test_reads_from_many_threads_share_the_open_files(tmp_path):
    import threading
    paths = _keyed_files(tmp_path, 8, 3_000)
    want = np.concatenate([np.arange(3_000) + i * 1_000_000 for i in range(8)])
    with idv.dataset(paths, max_open_files=2) as ds:
        errors = []

        def work(seed):
            rng = np.random.default_rng(seed)
            try:
                for _ in range(20):
                    rows = rng.integers(0, len(want), 50)
                    assert ds.read(["x"], rows=rows)["x"].tolist() == want[rows].tolist()
                    assert ds.take(rows[:5], ["x"])["x"].tolist() == want[rows[:5]].tolist()
                assert np.array_equal(ds.read(["x"])["x"], want)
                assert np.array_equal(ds.to_arrow(["x", "k"]).column("x").to_numpy(), want)
            except BaseException as e:        # pragma: no cover - reported below
                errors.append(e)
        threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert not errors, errors[0]
        assert ds.num_open_files <= 2

def test_a_file_whose_sizes_are_read_stays_open_while_other_files_open(tmp_path,
                                                                         monkeypatch):
    """Dataset.decoded_bytes (what a read checks against the memory limit) holds its file
    while it reads the file's lookup tables: other files opened meanwhile, past
    max_open_files (another thread's read), close others, never it."""
    from idv._reader.column import Column
    paths = _keyed_files(tmp_path, 3, 3_000)
    with idv.dataset(paths, max_open_files=1) as ds:
        real = Column.decoded_bytes

        def meanwhile(self, *args):
            ds.open_file(1)
            return real(self, *args)
        monkeypatch.setattr(Column, "decoded_bytes", meanwhile)
        assert ds.decoded_bytes(0, "x", slice(0, 10)) == 4_000     # its first block
        assert ds.decoded_bytes(2, "x", slice(0, 3_000)) == 12_000


def test_a_url_dataset_keeps_at_most_max_open_files_open(tmp_path):
    """Through fsspec (a file:// URL), a dataset holds at most max_open_files files open while
    it reads them all, and none once closed."""
    pytest.importorskip("fsspec")
    _copy(MIXED[:1] * 5, tmp_path / "d")
    with idv.dataset(f"file://{tmp_path}/d/*.idv", max_open_files=2) as ds:
        assert ds.filesystem is not None and len(ds.files) == 5
        most, using = [0], idv.Dataset.using

        @contextlib.contextmanager
        def counting(self, i):                  # how many are open while one is in use
            with using(self, i) as f:
                most[0] = max(most[0], self.num_open_files)
                yield f
        with pytest.MonkeyPatch.context() as m:
            m.setattr(idv.Dataset, "using", counting)
            got = ds.read(["Id"]), ds.read(["Txt"])      # files batched, and one by one
        assert got[0]["Id"].tolist() == list(range(100)) * 5 and len(got[1]["Txt"]) == 500
        assert 1 <= ds.num_open_files <= 2 and most[0] <= 3
    assert ds.num_open_files == 0


def test_remote_files_opened_ahead_keep_their_order_and_errors(monkeypatch):
    """Remote files are opened several at a time: the dataset keeps the files' order, the
    error of the first bad file (not of a later one opened sooner) names it, and the files
    opened ahead of it are closed."""
    fsspec = pytest.importorskip("fsspec")
    import sys
    module = sys.modules["idv._reader.dataset_files"]
    real, handed = module.idv_open, []

    def spy(source, **kwargs):
        f = real(source, **kwargs)
        handed.append(f)
        return f
    monkeypatch.setattr(module, "idv_open", spy)
    monkeypatch.setattr(module, "OPEN_AHEAD", 8)    # three rounds of opens in two-digit names
    fs = fsspec.filesystem("memory")
    root = "/idv-ahead-test"
    good = fixture(MIXED[0]).read_bytes()
    n = 3 * module.OPEN_AHEAD
    try:
        for i in range(n):
            fs.pipe(f"{root}/part-{i:02d}.idv", good if i not in (5, 9) else b"not an idv" * 40)
        with pytest.raises(idv.IdvFormatError, match=r"part-05\.idv"):
            idv.dataset(f"memory://{root}/*.idv")
        assert handed and all(f.closed for f in handed)
        with pytest.warns(idv.IdvWarning, match=r"part-05\.idv.*part-09\.idv"):
            ds = idv.dataset(f"memory://{root}/*.idv", on_bad_file="skip")
        with ds:
            assert [f.path for f in ds.files] == [f"{root}/part-{i:02d}.idv" for i in range(n)
                                                  if i not in (5, 9)]
            assert ds.read("Id")["Id"].tolist() == list(range(100)) * (n - 2)
    finally:
        if fs.exists(root):     # not made where a fixture is missing (the test skips)
            fs.rm(root, recursive=True)


def test_urls_are_opened_with_idv_open_filesystem(monkeypatch):
    """A dataset of URLs opens each file with idv.open(path, filesystem=), so remote reads
    fetch only the byte ranges they need (idv._storage.remote)."""
    fsspec = pytest.importorskip("fsspec")
    import sys
    module = sys.modules["idv._reader.dataset_files"]          # where the listing opens them
    real, given = module.idv_open, []

    def spy(source, *, filesystem=None, **kwargs):
        given.append((source, filesystem))
        return real(source, filesystem=filesystem, **kwargs)
    monkeypatch.setattr(module, "idv_open", spy)
    fs = fsspec.filesystem("memory")
    fs.pipe("/idv-fs-test/a.idv", fixture(MIXED[0]).read_bytes())
    try:
        with idv.dataset("memory://idv-fs-test/*.idv") as ds:
            assert ds.read("Id")["Id"].tolist() == list(range(100))
        assert given and all(path == "/idv-fs-test/a.idv" and got is ds.filesystem
                             for path, got in given)
    finally:
        fs.rm("/idv-fs-test", recursive=True)


def test_bad_options():
    p = _paths(MIXED[:1])
    with pytest.raises(ValueError, match="on_bad_file must be one of"):
        idv.dataset(p, on_bad_file="ignore")
    with pytest.raises(ValueError, match="at least one"):
        idv.dataset([])
    with idv.dataset(p) as ds:
        with pytest.raises(KeyError, match="no column 'nope' in the dataset"):
            ds.read("nope")
        with pytest.raises(TypeError, match="indexed by a slice of rows"):
            ds["Id"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        idv.dataset(p).close()


def _small(path, values, dtype=np.int32):
    path.parent.mkdir(parents=True, exist_ok=True)
    idv.write(path, {"x": np.asarray(values, dtype)})


def test_recursive_globs_do_not_follow_directory_symlinks(tmp_path):
    """``**`` under a directory linked to itself (or to an ancestor) lists each file once and
    ends; glob would count a file once per path through the links, and loop."""
    root = tmp_path / "d"
    _small(root / "a.idv", [1])
    _small(root / "sub" / "b.idv", [2])
    _small(root / ".hidden" / "c.idv", [3])
    (root / "self").symlink_to(".")
    (root / "sub" / "up").symlink_to("..")
    (root / "sub" / "loop").symlink_to(".")
    sources = [str(root / "**" / "*.idv"), str(root), str(root / "s*" / "**")]
    code = ("import json, sys, idv\n"
            "print(json.dumps([[f.path for f in idv.dataset(s).files] for s in sys.argv[1:]]))")
    r = subprocess.run([sys.executable, "-c", code, *sources], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO_DIR)))
    assert r.returncode == 0, r.stderr[-2000:]
    both = [str(root / "a.idv"), str(root / "sub" / "b.idv")]
    assert json.loads(r.stdout) == [both, both, [both[1]]]     # ** last: every file below
    with idv.dataset(sources[0]) as ds:
        assert ds.read()["x"].tolist() == [1, 2]


def test_a_file_replaced_after_listing_is_refused_on_reopen(tmp_path):
    a, b = tmp_path / "a.idv", tmp_path / "b.idv"
    _small(a, range(10))
    _small(b, range(10))
    with idv.dataset(str(tmp_path), max_open_files=1) as ds:    # b is closed, reopened
        _small(tmp_path / "new.idv", range(5))
        os.replace(tmp_path / "new.idv", b)
        with pytest.raises(idv.IdvFormatError, match="changed since the dataset listed it: "
                                                     "it has 5 rows, 10 when listed") as e:
            ds.read()
        assert e.value.path == str(b)
    _small(b, range(10))
    with idv.dataset(str(tmp_path), max_open_files=1) as ds:
        _small(tmp_path / "new.idv", np.arange(10), np.float64)
        os.replace(tmp_path / "new.idv", b)
        with pytest.raises(idv.IdvFormatError, match=r"changed .*: column 'x' is Double, "
                                                     r"Int32 when listed"):
            ds.read()
    _small(a, range(10))
    _small(b, range(10))
    with idv.dataset(str(tmp_path), max_open_files=1) as ds:     # same shape, other file
        _small(tmp_path / "new.idv", range(100, 110))
        os.replace(tmp_path / "new.idv", b)
        with pytest.raises(idv.IdvFormatError, match="another file is in its place"):
            ds.read()


@pytest.mark.parametrize("reader", ["dataset", "dask"])
def test_a_file_that_no_longer_opens_is_said_to_have_changed_since_listed(tmp_path, reader):
    """A file truncated after the dataset listed it fails to open again: the error says the
    file changed since it was listed, as for a file that opens but is another, by the
    dataset and by an engine's task alike (it said the tail offset was outside the file)."""
    a, b = tmp_path / "a.idv", tmp_path / "b.idv"
    _small(a, range(10))
    _small(b, range(10))
    if reader == "dask":
        pytest.importorskip("dask", reason="idv.dask needs dask (pip install 'idv[dask]')")
        import idv.dask as idv_dask
        ddf = idv_dask.read_idv(str(tmp_path))
        os.truncate(b, os.path.getsize(b) - 100)
        read = lambda: ddf.compute(scheduler="sync")        # noqa: E731
    else:
        ds = idv.dataset(str(tmp_path), max_open_files=1)    # b is closed, then reopened
        os.truncate(b, os.path.getsize(b) - 100)
        read = ds.read
    with pytest.raises(idv.IdvFormatError, match=r"changed since the dataset listed it: "
                                                 r"another file is in its place.*no longer "
                                                 r"opens") as e:
        read()
    assert e.value.path == str(b)


def test_a_file_rewritten_in_place_is_read_again_on_reopen(tmp_path, monkeypatch):
    """A closed file's layout is reused only while its bytes are the same file's: the same
    device, inode, size and modification time, and the same header."""
    import struct
    a, b = tmp_path / "a.idv", tmp_path / "b.idv"
    _small(a, range(10))
    # without statistics: their record of the header would refuse the version changed below
    idv.write(b, {"x": np.arange(10, 20, dtype=np.int32)}, checksums=False, statistics=False)
    parsed = _counting(monkeypatch, opening, "read")
    with idv.dataset(str(tmp_path), max_open_files=1) as ds:       # b closed, its layout kept
        assert ds.files[1].layout is not None
        st = os.stat(b)
        with open(b, "r+b") as fh:        # the same inode and size: version 1.1.1.6 -> 1.1.1.7
            fh.seek(8)
            version, = struct.unpack("<Q", fh.read(8))
            fh.seek(8)
            fh.write(struct.pack("<Q", version + 1))
        os.utime(b, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert os.stat(b).st_mtime_ns == st.st_mtime_ns and os.stat(b).st_ino == st.st_ino
        del parsed[:]
        assert ds.read()["x"].tolist() == list(range(20))
        assert [src.name for src in parsed] == [str(b)]      # read and checked again
        assert ds.open_file(1).header.version == version + 1


def test_a_dataset_let_go_is_freed_at_once(tmp_path):
    """No reference cycle holds a dataset (nor what it keeps of the files it closed) until
    the garbage collector runs: it goes when its last reference does."""
    import gc
    import weakref
    paths = _six_small(tmp_path)
    gc.disable()
    try:
        ds = idv.dataset(paths, max_open_files=2)
        assert ds.read(["Id"])["Id"].tolist() == list(range(60))
        assert ds.files[2].layout is not None
        gone = weakref.ref(ds)
        del ds
        assert gone() is None
    finally:
        gc.enable()


def test_listing_and_reading_run_no_garbage_collection_and_leave_it_as_found(monkeypatch,
                                                                              tmp_path):
    import gc
    import threading
    monkeypatch.setattr(_gc, "MANY_FILES", 30)
    for i in range(30):
        _small(tmp_path / f"{i:02d}.idv", range(i, i + 3))

    def collections(values=lambda ds: ds.read()["x"]):
        """(collections while the dataset listed, while it read `values`), the values"""
        runs, me = [], threading.get_ident()        # another thread's gc.collect(): not ours
        callback = lambda phase, info: runs.append(phase) \
            if phase == "start" and threading.get_ident() == me else None
        gc.collect()
        gc.set_threshold(50)              # a collection every 50 objects made, if it ran
        gc.callbacks.append(callback)
        try:
            with idv.dataset(str(tmp_path), max_open_files=4) as ds:   # most files reopened
                listed = len(runs)
                got = values(ds)
                return listed, len(runs) - listed, got
        finally:
            gc.callbacks.remove(callback)
            gc.set_threshold(700, 10, 10)
    listed, read, got = collections()
    assert got.tolist() == [v for i in range(30) for v in range(i, i + 3)]
    assert listed <= 2 and read <= 2, (listed, read)     # set off once resumed
    pytest.importorskip("pyarrow")
    for values in (lambda ds: ds.to_arrow()["x"].to_numpy(),
                   lambda ds: ds.to_pandas()["x"].to_numpy()):
        _, read, got = collections(values)
        assert got.tolist() == [v for i in range(30) for v in range(i, i + 3)]
        assert read <= 2, read
    assert gc.isenabled()
    monkeypatch.setattr(_gc, "MANY_FILES", 31)
    listed, _, _ = collections()                  # fewer files: the collector left running
    assert listed > 2, listed
    gc.disable()
    try:
        with idv.dataset(str(tmp_path), max_open_files=4) as ds:
            ds.read()
        assert not gc.isenabled()       # off when asked, off after
    finally:
        gc.enable()
    # overlapping reads in threads: the collector runs again once the last one ends
    with idv.dataset(str(tmp_path), max_open_files=4) as ds:
        errors = []

        def read():
            try:
                for _ in range(5):
                    assert ds.read()["x"].shape == (90,)
            except BaseException as e:     # pragma: no cover - reported below
                errors.append(e)
        threads = [threading.Thread(target=read) for _ in range(3)]
        [t.start() for t in threads]
        [t.join() for t in threads]
    assert not errors and gc.isenabled()

_UNREADABLE = r"""
import os, sys, warnings
import idv
os.setgid(65534); os.setuid(65534)       # after the imports: nobody may not read the venv
root = sys.argv[1]
try:
    idv.dataset(root)
    print("no error")
except PermissionError as e:
    print("PermissionError", e.filename)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    ds = idv.dataset(root, on_bad_file="skip")
    print(len(ds.files), [p for p, _ in ds.skipped], str(w[0].message))
"""


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="makes a directory its reader cannot list: runs a child as nobody")
def test_an_unreadable_subdirectory_is_not_skipped_silently():
    import tempfile
    root = tempfile.mkdtemp(prefix="idv-unreadable-")
    try:
        _small(Path(root) / "a.idv", [1])
        _small(Path(root) / "locked" / "b.idv", [2])
        for d, _, names in os.walk(root):
            os.chown(d, 65534, 65534)
            for n in names:
                os.chown(os.path.join(d, n), 65534, 65534)
        os.chmod(root, 0o755)
        os.chmod(os.path.join(root, "locked"), 0)
        r = subprocess.run([sys.executable, "-c", _UNREADABLE, root], capture_output=True,
                           text=True, timeout=120, cwd="/",
                           env=dict(os.environ, PYTHONPATH=str(REPO_DIR)))
        assert r.returncode == 0, r.stderr[-2000:]
        first, second = r.stdout.splitlines()
        locked = os.path.join(root, "locked")
        assert first == f"PermissionError {locked}"
        assert second.startswith(f"1 ['{locked}'] idv.dataset skipped 1 directory it could "
                                 f"not list: {locked}")
    finally:
        os.chmod(os.path.join(root, "locked"), 0o755)
        shutil.rmtree(root)


def test_a_whole_read_decodes_numbers_in_place(tmp_path):
    """Every row of a fixed-width column goes straight into the dataset's one array: at most
    one copy of it in memory, where joining each file's array would need two."""
    import tracemalloc
    rows, files = 250_000, 4
    for i in range(files):
        idv.write(tmp_path / f"{i}.idv", {
            "x": np.arange(rows, dtype=np.float32) + i * rows,
            "v": np.full((rows, 2), i, np.int16), "t": np.array(["ab"] * rows, object)})
    with idv.dataset(tmp_path) as ds:
        tracemalloc.start()
        got = ds.read(["x"])
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert got["x"].tolist() == list(range(rows * files))
        assert peak < 1.25 * got["x"].nbytes, (peak, got["x"].nbytes)
        got.update(ds.read(["v"]))          # vectors: each file's array decoded into it too
        assert got["v"].shape == (rows * files, 2) and got["v"][::rows, 0].tolist() == [0, 1, 2, 3]
        both = ds.read(["t", "x"])             # text joined as before, alongside
        assert both["t"].tolist() == ["ab"] * (rows * files)
        assert np.array_equal(both["x"], got["x"])
    empty = {"x": np.zeros(0, np.float32), "v": np.zeros((0, 2), np.int16),
             "t": np.array([], object)}
    idv.write(tmp_path / "-.idv", empty)            # sorts first: a file of no rows
    with idv.dataset(sorted(map(str, tmp_path.glob("*.idv")))) as ds:
        assert ds.files[0].num_rows == 0
        assert np.array_equal(ds.read(["x", "v"])["v"], got["v"])
    with idv.dataset([tmp_path / "-.idv"] * 2) as ds:
        assert ds.read(["x", "v"])["v"].shape == (0, 2)


def test_a_whole_read_inflates_the_blocks_of_many_files_together(tmp_path, monkeypatch):
    """The numbers and keys of every file, compressed or stored, with checksums or without,
    go through one inflate call per kind (idv._store.many_files), and so does text into Arrow: the
    same values as each file's own read, at any max_open_files; a damaged block names its file,
    column and block."""
    pa = pytest.importorskip("pyarrow")
    rng = np.random.default_rng(3)
    paths = []
    for i, rows in enumerate([250, 0, 1000, 37, 400, 1, 999]):
        paths.append(str(tmp_path / f"{i}.idv"))
        idv.write(paths[-1], {"n": rng.integers(-9, 9, rows), "f": rng.random(rows, np.float32),
                              "k": rng.integers(0, 4, rows).astype(np.uint32),
                              "t": np.array([f"r{j}" * (j % 7) for j in range(rows)], object)},
                  types={"k": idv.Key(idv.UInt32, count=4)},
                  metadata={"k": {"KeyValues": ["a", "b", "c", "d"]}}, rows_per_block=100,
                  compression=("deflate", "none")[i % 2], checksums=i % 3 != 0)
    want = {n: np.concatenate([idv.read(p, [n])[n] for p in paths]) for n in "nfkt"}
    together = _counting(monkeypatch, batch, "text_blocks")
    for max_open, batches in ((1, None), (2, [1, 2, 2, 1]), (1024, [6])):
        with idv.dataset(paths, max_open_files=max_open) as ds:
            got = ds.read()
            assert {n: got[n].tolist() for n in "nfkt"} == {n: want[n].tolist() for n in "nfkt"}
            del together[:]
            text = ds.to_arrow(["t"])["t"]
            assert text.to_pylist() == want["t"].tolist() and text.type == pa.string()
            if batches:         # the text of as many files as stay open (but the empty one)
                assert [len(pieces) for pieces in together] == batches
            if max_open > len(paths):          # the files read are the ones still open
                assert [ds.open_file(i)["n"].blocks_decoded for i in (0, 2)] == [3, 10]
                assert [ds.open_file(i)["t"].blocks_decoded for i in (0, 2)] == [6, 20]
    with idv.open(paths[4]) as f:       # checksummed and deflated: a byte of block 2 of each
        assert f.has_checksums
        at = [int(f[n].lookup["offset"][2]) for n in "ft"]
    with open(paths[4], "r+b") as fh:
        for a in at:
            fh.seek(a)
            byte = fh.read(1)
            fh.seek(a)
            fh.write(bytes([byte[0] ^ 1]))
    with idv.dataset(paths) as ds:
        assert ds.read(["n"])["n"].tolist() == want["n"].tolist()
        for n in "ft":
            with pytest.raises(idv.IdvFormatError, match="checksum mismatch") as e:
                ds.to_arrow([n])
            assert (e.value.path, e.value.column, e.value.block) == (paths[4], n, 2)
    with idv.dataset(paths, memory_limit=2000) as ds:      # text is counted before any read
        with pytest.raises(idv.MemoryLimitError, match="reading 1 column of 7 files"):
            ds.to_arrow(["t"])


def test_text_inflated_together_names_the_block_it_cannot_convert(tmp_path):
    """A text block that inflates (stored, no checksums) but whose entries are damaged is
    refused with its file, column and block, as the file's own read says."""
    pytest.importorskip("pyarrow")
    paths = _written(tmp_path, [({"t": np.array([f"r{j}" for j in range(300)], object)},
                                 dict(compression="none", checksums=False,
                                      rows_per_block=100))] * 3)
    with idv.open(paths[1]) as f:
        at = int(f["t"].lookup["offset"][2])
    with open(paths[1], "r+b") as fh:        # its count of entries: -1
        fh.seek(at)
        fh.write(b"\xff" * 8)
    with pytest.raises(idv.IdvFormatError, match="holds -1 entries") as alone:
        idv.to_arrow(paths[1], ["t"])
    with idv.dataset(paths) as ds:
        with pytest.raises(idv.IdvFormatError, match="holds -1 entries") as e:
            ds.to_arrow(["t"])
    where = (paths[1], "t", 2, at)
    assert (e.value.path, e.value.column, e.value.block, e.value.offset) == where
    assert (alone.value.path, alone.value.column, alone.value.block, alone.value.offset) == where


def test_only_files_in_memory_are_inflated_together(tmp_path, monkeypatch):
    """A remote file's blocks are fetched file by file, as before: batching them would fetch
    the blocks of hundreds of files at once."""
    fsspec = pytest.importorskip("fsspec")
    pytest.importorskip("pyarrow")
    batched = _counting(monkeypatch, batch, "inflate_files")
    text = _counting(monkeypatch, batch, "text_blocks")
    fs = fsspec.filesystem("memory")
    root = "/idv-batch-test"
    try:
        for i, n in enumerate(MIXED[:3]):
            fs.pipe(f"{root}/part-{i}.idv", fixture(n).read_bytes())
        with idv.dataset(f"memory://{root}") as remote:
            far = remote.read(["Id"])["Id"]
            far_text = remote.to_arrow(["Txt"])["Txt"]
        assert batched == text == []
        with idv.dataset(_paths(MIXED[:3])) as local:
            near = local.read(["Id"])["Id"]
            near_text = local.to_arrow(["Txt"])["Txt"]
        assert [len(p) for p in batched] == [len(p) for p in text] == [3]
        assert far.tolist() == near.tolist() == list(range(100)) * 3
        assert far_text.to_pylist() == near_text.to_pylist()
    finally:
        if fs.exists(root):     # not made where a fixture is missing (the test skips)
            fs.rm(root, recursive=True)


def _open_source_readers():
    """reader name -> (package, fn(source, **options) reading every row's 'a')."""
    def polars(src, **kw):
        from idv.polars import scan_idv
        return scan_idv(src, **kw).collect()["a"].to_list()

    def dask(src, **kw):
        from idv.dask import read_idv
        return read_idv(src, **kw).compute()["a"].tolist()

    def ray(src, **kw):
        from idv.ray import read_idv
        return [r["a"] for r in read_idv(src, **kw).take_all()]

    def huggingface(src, **kw):
        from idv.huggingface import load
        return load(src, **kw)["a"]

    def torch(src, **kw):
        from idv.torch import IdvMapDataset
        ds = IdvMapDataset(src, **kw)
        return ds[list(range(len(ds)))]["a"].tolist()
    return {"read": ("numpy", lambda src, **kw: idv.read(src, **kw)["a"].tolist()),
            "arrow_dataset": ("pyarrow", lambda src, **kw: idv.arrow_dataset(src, **kw)
                              .to_table()["a"].to_pylist()),
            "polars": ("polars", polars), "dask": ("dask", dask), "ray": ("ray", ray),
            "huggingface": ("datasets", huggingface), "torch": ("torch", torch)}


@pytest.mark.parametrize("reader", ["read", "arrow_dataset", "polars", "dask", "ray",
                                    "huggingface", "torch"])
def test_an_open_source_is_read_with_its_own_options(tmp_path, reader, request):
    """An open Dataset or IdvFile is read as it was opened, on every reader: its columns and
    idv.open's options (checksums=False reads a file whose checksum no longer matches), and
    options given beside it, which it would ignore, are a TypeError naming them (they were
    taken and dropped silently by the readers built on datasets)."""
    package, read = _open_source_readers()[reader]
    pytest.importorskip(package, reason=f"the {reader} reader needs {package}")
    if reader == "ray":
        request.getfixturevalue("ray_runtime")
    p = tmp_path / "t.idv"
    idv.write(p, {"a": np.arange(6), "b": np.arange(6.0)}, compression="none")
    data = bytearray(p.read_bytes())
    at = bytes(data).index(np.int64(4).tobytes())
    data[at] = 40                                   # a value changed, its checksum not
    p.write_bytes(bytes(data))
    with pytest.raises(idv.IdvFormatError, match="checksum|CRC"):
        idv.read(p)
    src = idv.dataset([p], columns=["a"], checksums=False)
    assert read(src) == [0, 1, 2, 3, 40, 5]
    if reader not in ("arrow_dataset", "polars", "dask", "ray"):   # these take datasets alone
        assert read(idv.open(p, checksums=False)) == [0, 1, 2, 3, 40, 5]
    with pytest.raises(TypeError, match="memory_limit: .*Dataset was opened with its own"):
        read(src, memory_limit=1 << 30)


def test_a_dataset_source_that_is_no_path_is_named(tmp_path):
    """Bytes, a file object or an open IdvFile given where files are opened by path (a dataset
    and every reader built on one) are a TypeError saying what it takes (Python's own
    'expected str, bytes or os.PathLike object' or a bytes-like complaint before)."""
    p = tmp_path / "t.idv"
    idv.write(p, {"a": np.arange(3)})
    with idv.open(p) as f:
        with pytest.raises(TypeError, match=r"not an open IdvFile: give its path, '.*t.idv'"):
            idv.dataset(f)
    with pytest.raises(TypeError, match="not bytes: read bytes or a file object with idv.open"):
        idv.dataset(p.read_bytes())
    with open(p, "rb") as fo, pytest.raises(TypeError, match="not BufferedReader: read bytes"):
        idv.arrow_dataset(fo)
    with pytest.raises(TypeError, match=r"\(str or os.PathLike, or a list of them\), not int$"):
        idv.dataset([p, 5])


def test_a_glob_given_to_a_one_file_reader_says_to_use_a_dataset(tmp_path):
    """As a directory does: the glob is no file, idv.dataset reads what it names."""
    idv.write(tmp_path / "t.idv", {"a": np.arange(3)})
    glob = str(tmp_path / "*.idv")
    for read in (idv.open, idv.read):
        with pytest.raises(FileNotFoundError, match=r"a glob names several; .*idv.dataset\("):
            read(glob)
    assert idv.dataset(glob).num_rows == 3
