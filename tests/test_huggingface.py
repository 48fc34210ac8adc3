"""idv.huggingface.load: the rows and types of the file written, as a datasets.Dataset and as a
stream; num_proc=2, DataLoader workers and split_dataset_by_node over the stream's shards.
"""
from __future__ import annotations

import datetime as dt
import warnings

import numpy as np
import pytest

import idv

hf = pytest.importorskip("datasets", reason="idv.huggingface needs datasets "
                                            "(pip install 'idv[huggingface]')")
pytest.importorskip("pyarrow")
from datasets.distributed import split_dataset_by_node  # noqa: E402

from idv.huggingface import load  # noqa: E402

ROWS = 6_000
ROWS_PER_BLOCK = 500             # 12 blocks
LABELS = ["cat", "dog", "bird"]
START = dt.datetime(2026, 1, 1)


def _columns():
    n = np.arange(ROWS)
    rng = np.random.default_rng(3)
    label = (n % 4).astype(np.uint32)         # 0: a missing key
    return {
        "id": n.astype(np.int64),
        "vec": rng.random((ROWS, 16), np.float32),
        "flag": n % 3 == 0,
        "label": label,
        "raw_key": (n % 5 + 1).astype(np.uint16),
        "name": np.array([f"row {i}" for i in n], dtype=object),
        "tokens": idv.Ragged.from_list([np.arange(i % 4, dtype=np.int32) for i in n]),
        "when": np.datetime64(START, "us") + n.astype("timedelta64[s]"),
    }


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = tmp_path_factory.mktemp("hf") / "train.idv"
    idv.write(p, _columns(), rows_per_block=ROWS_PER_BLOCK,
              types={"label": idv.Key(idv.UInt32, count=3),
                     "raw_key": idv.Key(idv.UInt16, count=5)},
              metadata={"label": {"KeyValues": LABELS}})
    return p


def _check_rows(got, rows=slice(None)):
    """Columns of a batch (dict of lists) against the columns written."""
    want = _columns()
    assert got["id"] == want["id"][rows].tolist()
    assert np.array_equal(np.array(got["vec"], np.float32), want["vec"][rows])
    assert got["flag"] == want["flag"][rows].tolist()
    assert got["label"] == [int(k) - 1 for k in want["label"][rows]]     # 0 (missing): -1
    assert got["raw_key"] == want["raw_key"][rows].tolist()
    assert got["name"] == want["name"][rows].tolist()
    assert got["tokens"] == [r.tolist() for r in want["tokens"][rows]]
    seconds = np.arange(ROWS)[rows]
    assert got["when"] == [START + dt.timedelta(seconds=int(s)) for s in seconds]


def test_class_names_of_float_key_values_are_their_text_as_idv_shows_it(tmp_path):
    """A Single 0.1 is named 0.1 (idv schema, head, cat), not 0.10000000149011612."""
    p = str(tmp_path / "kv.idv")
    idv.write(p, {"k": np.array([1, 2, 0], np.uint32)}, types={"k": idv.Key(idv.UInt32, count=2)},
              metadata={"k": {"KeyValues": np.array([0.1, 0.7], np.float32)}})
    assert load(p).features["k"].names == ["0.1", "0.7"]


def test_load_gives_the_rows_and_types_written(path):
    d = load(path)
    assert d.num_rows == ROWS
    f = d.features
    assert f["id"] == hf.Value("int64") and f["flag"] == hf.Value("bool")
    assert f["vec"].length == 16 and f["vec"].feature == hf.Value("float32")   # Sequence
    assert f["tokens"].length == -1 and f["tokens"].feature == hf.Value("int32")
    assert f["label"] == hf.ClassLabel(names=LABELS)
    assert f["raw_key"] == hf.Value("uint16")
    assert f["name"] == hf.Value("string")
    assert f["when"] == hf.Value("timestamp[ns]")
    _check_rows(d[:])
    row = d[3]
    assert row["label"] == 2 and f["label"].int2str(row["label"]) == "bird"
    assert d.data.schema.field("id").metadata[b"idv.type"] == b"Int64"
    assert not d.data.schema.field("label").metadata         # no longer the stored keys


def test_columns_and_a_dataset_of_files(path, tmp_path):
    for i in range(3):
        idv.write(tmp_path / f"p{i}.idv", {"id": np.arange(i * 100, (i + 1) * 100),
                                           "x": np.arange(100) * 0.5}, rows_per_block=40)
    d = load(str(tmp_path / "p*.idv"), columns=["id"])
    assert d.column_names == ["id"] and list(d["id"]) == list(range(300))
    assert load(path, columns=[0, 5]).column_names == ["id", "name"]


def test_num_proc_two(path):
    d = load(path, columns=["id", "vec"])
    total = d.map(lambda b: {"s": [sum(v) for v in b["vec"]]}, batched=True, num_proc=2)
    want = _columns()["vec"].astype(np.float64).sum(1)
    assert np.allclose(total["s"], want, rtol=1e-6)
    assert list(total["id"]) == list(range(ROWS))


def test_stream_gives_the_same_rows_in_shards_of_blocks(path):
    s = load(path, streaming=True)
    assert s.n_shards == 12 and s.features == load(path).features
    rows = list(s)
    got = {k: [r[k] for r in rows] for k in rows[0]}
    _check_rows(got)
    shuffled = [r["id"] for r in s.shuffle(seed=1, buffer_size=100)]
    assert sorted(shuffled) == list(range(ROWS)) and shuffled != list(range(ROWS))


def test_stream_in_dataloader_workers_and_by_node(path):
    torch = pytest.importorskip("torch")
    s = load(path, ["id"], streaming=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        loader = torch.utils.data.DataLoader(s.with_format("torch"), batch_size=1000,
                                             num_workers=2, multiprocessing_context="fork",
                                             timeout=120)
        ids = np.concatenate([b["id"].numpy() for b in loader])
    assert np.array_equal(np.sort(ids), np.arange(ROWS))
    nodes = [[r["id"] for r in split_dataset_by_node(s, rank, 2)] for rank in (0, 1)]
    assert len(nodes[0]) == len(nodes[1]) == ROWS // 2     # 6 shards each
    assert sorted(nodes[0] + nodes[1]) == list(range(ROWS))
    d = load(path, ["id"])
    halves = [list(split_dataset_by_node(d, rank, 2)["id"]) for rank in (0, 1)]
    assert sorted(halves[0] + halves[1]) == list(range(ROWS))


def test_stream_of_a_url_in_fork_workers(path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("aiohttp", reason="https:// reads need the remote extra")
    from http_server import RangeServer
    with RangeServer({"/train.idv": path.read_bytes()}) as srv:
        s = load(srv.url("/train.idv"), ["id", "label"], streaming=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            loader = torch.utils.data.DataLoader(s.with_format("torch"), batch_size=1000,
                                                 num_workers=2, multiprocessing_context="fork",
                                                 timeout=120)
            batches = list(loader)
    ids = np.concatenate([b["id"].numpy() for b in batches])
    labels = np.concatenate([b["label"].numpy() for b in batches])
    assert np.array_equal(np.sort(ids), np.arange(ROWS))
    assert np.array_equal(labels, _columns()["label"][ids].astype(np.int64) - 1)


def test_files_whose_key_values_differ_are_refused(tmp_path):
    """A ClassLabel holds one set of names: files whose keys name other values are an error
    naming the column and both files, unless the column is left out."""
    paths = [tmp_path / "a.idv", tmp_path / "b.idv"]
    for p, kv in zip(paths, (["cat", "dog"], ["dog", "cat"])):
        idv.write(p, {"k": np.array([1, 2, 0], np.uint32), "x": np.arange(3.0)},
                  types={"k": idv.Key(idv.UInt32, count=2)}, metadata={"k": {"KeyValues": kv}})
    for streaming in (False, True):
        with pytest.raises(ValueError, match="'k'") as e:
            load(paths, streaming=streaming)
        assert str(paths[0]) in str(e.value) and str(paths[1]) in str(e.value)
    assert load(paths, ["x"])["x"] == [0.0, 1.0, 2.0] * 2


def test_a_table_beyond_the_memory_limit_is_refused(tmp_path):
    """The table gathers every partition: the whole is charged to memory_limit= (each batch
    alone fits), as idv.dataset(...).to_arrow() charges the same table."""
    p = str(tmp_path / "wide.idv")
    idv.write(p, {f"c{j}": np.arange(200_000, dtype=np.float64) for j in range(4)},
              rows_per_block=8192)
    with pytest.raises(idv.MemoryLimitError, match="the table of a datasets.Dataset"):
        load(p, memory_limit=2_000_000)
    with pytest.raises(idv.MemoryLimitError):
        idv.dataset(p, memory_limit=2_000_000).to_arrow()
    assert load(p, memory_limit=np.int64(20_000_000)).num_rows == 200_000


@pytest.mark.parametrize("streaming", [False, True])
def test_filter_keeps_the_rows_every_reader_keeps(tmp_path, streaming):
    """load(filter=) keeps the rows idv.read(filter=) keeps, a filter column that is not
    loaded included, streamed or not (it took no filter, as the other readers do)."""
    p = str(tmp_path / "f.idv")
    x = np.arange(20_000)
    idv.write(p, {"x": x, "t": np.array(["a", "b"], object)[x % 2]}, rows_per_block=1000)
    where = "x >= 19990 and t == 'a'"
    want = idv.read(p, ["t"], filter=where)["t"].tolist()
    got = load(p, ["t"], streaming=streaming, filter=where)
    assert [r["t"] for r in got] == want == ["a"] * 5


def test_blocks_per_shard_is_a_count_as_every_reader_takes_it(path):
    """0 is refused naming the argument, as Dask's, PyTorch's and Ray's counts are (it was
    taken for the default)."""
    with pytest.raises(ValueError, match="blocks_per_shard must be a number of blocks"):
        load(path, blocks_per_shard=0)
