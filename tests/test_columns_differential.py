"""columns= means one thing on every reader, with and without rows= and filter=: an index picks
the column ML.NET's schema counts, hidden ones included (ML.NET keeps a column of a repeated
name, hidden). A dataset leaves hidden columns out, so where a file of it has some, an index
is refused there, never another column; a name picks the same column on both. Compared with
the values written, on numpy's read, to_arrow, the stream, to_pandas, read_pandas, the
command line and the engines' readers."""
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
    src = idv.open(path) if of == "file" else idv.dataset(path)
    want = {0: HIDDEN, 1: B, 2: SHOWN, "a": SHOWN} if of == "file" else {"a": SHOWN}
    with src:
        for key, values in want.items():
            for name, read in _readers(src, path if of == "file" else src).items():
                assert _values(read([key], **options)) == _expected(values, **options), \
                    (name, key)


# the optional engines a test reads through: module -> why it is skipped without it
ENGINES = {"torch": "idv.torch needs torch (pip install 'idv[torch]')",
           "dask": "idv.dask needs dask (pip install 'idv[dask]')"}


def _engine(name):
    """idv's reader module for optional engine `name`, or the test skipped saying why."""
    pytest.importorskip(name, reason=ENGINES[name])
    import importlib
    return importlib.import_module(f"idv.{name}")


def _dataset_reader(reader, src, path, source):
    """The read of columns by reader `reader` of a dataset source `src` (of `source` kind)."""
    if reader == "torch":
        it = _engine("torch")
        return lambda c: {"a": [int(r["a"]) for r in it.IdvMapDataset(src, c)]}
    if reader == "dask":
        idd = _engine("dask")
        return lambda c: idd.read_idv(src, columns=c).compute()
    return lambda c: (src if source == "dataset" else idv.dataset(
        path if source == "file" else src)).read(c)


@pytest.mark.parametrize("reader", ["dataset", "torch", "dask"])
@pytest.mark.parametrize("source", ["path", "file", "dataset", "list"])
def test_a_dataset_with_hidden_columns_refuses_an_index(path, source, reader):
    """The file's index 0 is its hidden column, a dataset's would have been b: no reader of
    a dataset answers an index there, whatever the source it is given; a name still picks."""
    src = {"path": path, "file": idv.open(path), "dataset": idv.dataset(path),
           "list": [path, path]}[source]
    if reader == "dask" and source == "file":       # Dask's workers open paths themselves
        with pytest.raises(TypeError, match="takes paths, not an open IdvFile: give its path"):
            _dataset_reader(reader, src, path, source)(["a"])
        return
    files = 2 if source == "list" else 1
    read = _dataset_reader(reader, src, path, source)
    with pytest.raises(ValueError, match="has hidden columns"):
        read([0])
    assert _values(read(["a"])) == np.tile(SHOWN, files).tolist()


@pytest.mark.parametrize("reader", ["to_arrow", "dask", "dask array"])
def test_engines_give_the_columns_asked_for_in_their_order(tmp_path, reader):
    """Indices and names in any order, as every other reader: Dask and Ray opened the
    dataset with the columns asked for, then counted the indices again among them."""
    p = str(tmp_path / "three.idv")
    idv.write(p, {"x": np.arange(4), "y": np.arange(4.0), "z": np.arange(4) * 2})
    want = ["z", "x", "y"]
    if reader == "to_arrow":
        read = lambda c: idv.to_arrow(p, c).column_names      # noqa: E731
    elif reader == "dask":
        idd = _engine("dask")
        read = lambda c: list(idd.read_idv(p, columns=c).compute().columns)      # noqa: E731
    else:
        idd = _engine("dask")
        read = lambda c: idd.read_idv_array(p, c[0]).compute().tolist()      # noqa: E731
    for cols in ([2, 0, 1], ["z", 0, "y"], np.array([2, 0, 1])):
        got = read(list(cols))
        if reader == "dask array":
            assert got == (np.arange(4) * 2).tolist(), cols
        else:
            assert got == want, (reader, cols)


@pytest.mark.parametrize("files, want", [(1, {"0": HIDDEN, "2": SHOWN, "a": SHOWN}),
                                         (2, {"a": SHOWN})])
def test_the_command_line_picks_the_columns_python_picks(path, files, want):
    for key, values in want.items():
        for where in (None, "b >= 3"):
            rc, out, err = run("cat", *[path] * files, "-c", key, "-f", "csv", "--rows", "3:",
                               *(["--where", where] if where else []), check_rc=0)
            assert [float(v) for v in out.splitlines()[1:]] == \
                _expected(values, files, slice(3, None), where), (key, where)
    rc, out, err = run("cat", path, path, "-c", "0", check_rc=2)
    assert "has hidden columns" in err


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
