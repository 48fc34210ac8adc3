"""columns= means one thing on every reader, with and without rows= and filter=: in a file, an
index picks that column, hidden ones included (ML.NET keeps a column of a repeated name,
hidden); in a dataset, an index is among the dataset's columns, which leave the hidden out.
Compared with the values written, on numpy's read, to_arrow, the stream, to_pandas,
read_pandas and the command line."""
from __future__ import annotations

import numpy as np
import pytest

import idv
from cli_run import run

pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")

HIDDEN = np.arange(5, dtype=np.int32)           # column 0, named "a", hidden by column 2
B = np.arange(5.0)
SHOWN = np.arange(5, dtype=np.int32) * 10       # column 2, "a"


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = tmp_path_factory.mktemp("columns") / "dup.idv"
    idv.write(str(p), [("a", HIDDEN), ("b", B), ("a", SHOWN)], rows_per_block=2)
    return str(p)


def _values(got):
    """The one column of a reader's answer, as a list."""
    if isinstance(got, dict):
        (v,) = got.values()
        return np.asarray(v).tolist()
    if isinstance(got, pd.DataFrame):
        return got.iloc[:, 0].tolist()
    return got.column(0).to_pylist()


def _readers(src, path):
    return {
        "read": lambda c, **kw: idv.read(src, c, **kw),
        "to_arrow": lambda c, **kw: idv.to_arrow(src, c, **kw),
        "stream": lambda c, **kw: idv.record_batch_reader(src, c, **kw).read_all(),
        "to_pandas": lambda c, **kw: idv.to_pandas(src, c, **kw),
        "read_pandas": lambda c, **kw: idv.read_pandas(path, c, **kw),
    }


OPTIONS = [{}, {"rows": slice(3, None)}, {"filter": "b >= 3"},
           {"filter": "b >= 1", "rows": slice(3, None)}]


def _expected(values, files=1, rows=None, filter=None):  # noqa: A002 - the readers' name
    """The rows of `values` (a column of each of `files` files end to end) that `rows` and a
    filter on b (``b >= N``) keep."""
    values, b = np.tile(values, files), np.tile(B, files)
    rows = rows or slice(None)
    values, b = values[rows], b[rows]
    if filter is not None:
        values = values[b >= float(filter.split(">=")[1])]
    return values.tolist()


@pytest.mark.parametrize("options", OPTIONS, ids=repr)
@pytest.mark.parametrize("of", ["file", "dataset"])
def test_an_index_picks_one_column_on_every_reader(path, of, options):
    if of == "file":
        src, want = idv.open(path), {0: HIDDEN, 1: B, 2: SHOWN, "a": SHOWN}
    else:
        src, want = idv.dataset(path), {0: B, 1: SHOWN, "a": SHOWN}
    with src:
        for key, values in want.items():
            for name, read in _readers(src, path if of == "file" else src).items():
                assert _values(read([key], **options)) == _expected(values, **options), \
                    (name, key)


@pytest.mark.parametrize("files, want", [(1, {"0": HIDDEN, "2": SHOWN, "a": SHOWN}),
                                         (2, {"0": B, "1": SHOWN, "a": SHOWN})])
def test_the_command_line_picks_the_columns_python_picks(path, files, want):
    for key, values in want.items():
        for where in (None, "b >= 3"):
            rc, out, err = run("cat", *[path] * files, "-c", key, "-f", "csv", "--rows", "3:",
                               *(["--where", where] if where else []), check_rc=0)
            assert [float(v) for v in out.splitlines()[1:]] == \
                _expected(values, files, slice(3, None), where), (key, where)


def test_a_column_picked_by_index_and_tested_by_name_is_decoded_once(path):
    """An index whose column is the one its name picks is read as that name: the filter's
    test and the values asked for share the decode."""
    decoded = {}
    for key in (1, "b"):
        with idv.open(path) as f:
            assert f.read([key], filter="b >= 3")["b"].tolist() == [3.0, 4.0]
            decoded[key] = f["b"].blocks_decoded
    assert decoded[1] == decoded["b"] <= 3, decoded


def test_readers_keyed_by_name_refuse_two_columns_of_one_name(path):
    """A dict (read, take) holds one column of a name: the hidden column and the shown one
    picked together are refused, naming both (one was dropped silently), while Arrow and
    pandas keep both; the same column twice is one."""
    with idv.open(path) as f:
        for read in (lambda c: f.read(c), lambda c: f.take([1], c), lambda c: idv.read(path, c)):
            with pytest.raises(ValueError, match="columns 0 and 2 are both named 'a'"):
                read([0, 2])
            assert np.asarray(read([2, "a"])["a"]).tolist() in (SHOWN.tolist(), [10])
        assert idv.to_arrow(path, [0, 2]).column_names == ["a", "a"]
        assert idv.to_pandas(f, [0, 2]).iloc[1].tolist() == [1, 10]


def test_hugging_face_refuses_a_column_asked_twice(path):
    pytest.importorskip("datasets", reason="idv.huggingface needs the datasets package")
    import idv.huggingface as hf
    for streaming in (False, True):
        with pytest.raises(ValueError, match="one column of each name: 'a' asked twice"):
            hf.load(path, ["a", "a"], streaming=streaming)
