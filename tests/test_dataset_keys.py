"""A dataset's key columns across its files: every file's keys must be labels of one item type
(a dictionary in Arrow, a Categorical in pandas) or raw numbers in every file, else the
dataset refuses at open, naming the column and both files, through every door that lists
files (idv.dataset, idv.arrow_dataset, polars' scan_idv, Dask's read_idv). Files whose Text
labels differ stay readable, each file's keys named by its own labels. Expected values are
pyarrow's, from the tables the files are written from."""
from __future__ import annotations

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow", reason="the Arrow reads need pyarrow")

import idv  # noqa: E402

KEYS = np.array([1, 2, 0, 3, 4, 1], np.uint32)        # 0: missing
KEY = idv.Key(idv.UInt32, 4)

# what a file's KeyValues make of its keys: None, repeated labels (not usable), Text, Int32
NONE = None
REPEATED = ["a", "a", "b", "c"]
TEXT = ["a", "b", "c", "d"]
NUMBERS = np.array([10, 20, 30, 40], np.int32)
DISAGREE = {  # first file, second file, what each has in the message (second, then first)
    "text-then-none": (TEXT, NONE, "without usable KeyValues", "labelled by Text KeyValues"),
    "none-then-text": (NONE, TEXT, "labelled by Text KeyValues", "without usable KeyValues"),
    "repeated-then-text": (REPEATED, ["4", "3", "2", "1"], "labelled by Text KeyValues",
                           "without usable KeyValues"),
    "text-then-numbers": (TEXT, NUMBERS, "labelled by Int32 KeyValues",
                          "labelled by Text KeyValues"),
}


def _write(path, key_values, start):
    metadata = {} if key_values is None else {"K": {"KeyValues": key_values}}
    idv.write(path, {"id": np.arange(start, start + len(KEYS), dtype=np.int32), "K": KEYS},
              types={"K": KEY}, metadata=metadata)


def _pair(tmp_path, first, second):
    _write(tmp_path / "a.idv", first, 0)
    _write(tmp_path / "b.idv", second, len(KEYS))
    return tmp_path


def _polars(d):
    pytest.importorskip("polars", reason="scan_idv needs polars")
    from idv.polars import scan_idv
    return scan_idv(str(d))


def _dask(d):
    pytest.importorskip("dask.dataframe", reason="read_idv needs dask[dataframe]")
    import idv.dask
    return idv.dask.read_idv(str(d))


DOORS = {"dataset": lambda d: idv.dataset(str(d)),
         "arrow_dataset": lambda d: idv.arrow_dataset(str(d)),
         "scan_idv": _polars, "read_idv": _dask}


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("case", DISAGREE)
def test_key_labels_that_differ_in_kind_refused_at_open(tmp_path, case, door):
    first, second, mine, theirs = DISAGREE[case]
    d = _pair(tmp_path, first, second)
    with pytest.raises(ValueError, match="the files' columns differ") as e:
        DOORS[door](d)
    msg = str(e.value)
    assert f"{d / 'b.idv'}: column 'K' is {KEY} {mine}" in msg, msg
    assert f"but {KEY} {theirs}" in msg and f"in {d / 'a.idv'}" in msg, msg


def test_common_schema_leaves_out_a_key_that_differs_in_kind(tmp_path):
    d = _pair(tmp_path, TEXT, NONE)
    with pytest.warns(idv.IdvWarning, match="leaves out 1 column that files give different "
                                            "types: 'K' .*without usable KeyValues"):
        ds = idv.dataset(str(d), schema="common")
    with ds:
        assert ds.column_names == ["id"]
        assert idv.to_arrow(ds).equals(pa.table({"id": pa.array(range(12), pa.int32())}))
    with idv.dataset(str(d), ["id"]) as ds:          # the key left out: nothing to agree on
        assert ds.num_rows == 12
    with pytest.raises(ValueError, match="column 'K' is not common to all files") as e:
        idv.dataset(str(d), ["K"], schema="common")
    assert "b.idv" in str(e.value) and "a.idv" in str(e.value)


def _labelled(key_values):
    """The Arrow column that keys KEYS labelled by `key_values` are written from."""
    idx = pa.array(KEYS.astype(np.int32) - 1, mask=KEYS == 0)
    return pa.DictionaryArray.from_arrays(idx, pa.array(key_values))


@pytest.mark.parametrize("second", [["d", "c", "x", "a"], TEXT], ids=["other", "same"])
def test_text_labels_that_differ_in_content_read_as_each_files(tmp_path, second):
    d = _pair(tmp_path, TEXT, second)
    want = pa.concat_arrays([_labelled(TEXT).cast(pa.string()),
                             _labelled(second).cast(pa.string())])
    with idv.dataset(str(d)) as ds:
        got = idv.to_arrow(ds)["K"]
    assert got.cast(pa.string()).combine_chunks().equals(want)
    assert idv.arrow_dataset(str(d)).to_table()["K"].cast(pa.string()) \
        .combine_chunks().equals(want)


def test_raw_keys_agree_with_and_without_unusable_labels(tmp_path):
    d = _pair(tmp_path, NONE, REPEATED)
    want = pa.array(np.concatenate([KEYS, KEYS]))
    with idv.dataset(str(d)) as ds:
        assert idv.to_arrow(ds)["K"].combine_chunks().equals(want)


def test_key_vector_labelled_in_one_file_only_refused(tmp_path):
    """pandas expands a key vector labelled by usable KeyValues into Categoricals, one a slot,
    and one without into raw numbers: the files would give its slots two forms."""
    vector = idv.Vector(KEY, 2)
    values = KEYS.reshape(3, 2)
    idv.write(tmp_path / "a.idv", {"V": values}, types={"V": vector},
              metadata={"V": {"KeyValues": TEXT}})
    idv.write(tmp_path / "b.idv", {"V": values}, types={"V": vector})
    with pytest.raises(ValueError) as e:
        idv.dataset(str(tmp_path))
    assert f"{tmp_path / 'b.idv'}: column 'V' is {vector} without usable KeyValues" \
        in str(e.value), e.value
