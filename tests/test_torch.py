"""idv.torch in real DataLoaders: workers started by fork (after the parent read in threads) and
by spawn, every row once per epoch, shuffled epochs that are permutations and repeat with their
seed, ranks that share the rows, and the map-style dataset's decodes through the block cache.
"""
from __future__ import annotations

import pickle
import threading
import warnings

import numpy as np
import pytest

import idv

torch = pytest.importorskip("torch", reason="idv.torch needs PyTorch (pip install 'idv[torch]')")
idv_torch = pytest.importorskip("idv.torch")
from torch.utils.data import BatchSampler, DataLoader, RandomSampler  # noqa: E402

ROWS = 20_000
ROWS_PER_BLOCK = 1_000          # 20 blocks
TIMEOUT = 120                   # seconds a DataLoader may wait for a worker's batch
LABELS = ["cat", "dog", "bird"]


def _columns():
    n = np.arange(ROWS)
    rng = np.random.default_rng(7)
    return {
        "id": n.astype(np.int64),
        "vec": rng.random((ROWS, 16), np.float32),
        "flag": n % 3 == 0,
        "label": (n % 3 + 1).astype(np.uint32),
        "name": np.array([f"row {i}" for i in n], dtype=object),
        "tokens": idv.Ragged.from_list([np.arange(i % 5, dtype=np.int32) + i for i in n]),
        "when": np.datetime64("2026-01-01", "ns") + n.astype("timedelta64[s]"),
    }


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    """A file of 20 blocks, read once here in threads (the pools exist before any fork)."""
    p = tmp_path_factory.mktemp("torch") / "train.idv"
    idv.write(p, _columns(), rows_per_block=ROWS_PER_BLOCK,
              types={"label": idv.Key(idv.UInt32, count=3)},
              metadata={"label": {"KeyValues": LABELS}})
    with idv.open(p, threads=4) as f:
        assert f["id"].num_blocks == 20
        assert np.array_equal(f.read(["id"])["id"], np.arange(ROWS))
    assert any(t.name.startswith("idv-") for t in threading.enumerate()), \
        "the read ran in no pool thread: the fork tests would prove nothing"
    return p


def _loader(ds, context="fork", workers=2, **kwargs):
    with warnings.catch_warnings():     # forking a process with threads is the point here
        warnings.simplefilter("ignore", DeprecationWarning)
        return DataLoader(ds, batch_size=None, num_workers=workers,
                          multiprocessing_context=context if workers else None,
                          timeout=TIMEOUT if workers else 0, **kwargs)


def _ids(loader):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return np.concatenate([b["id"].numpy() for b in loader])


def _is_permutation(ids):
    return len(ids) == ROWS and np.array_equal(np.sort(ids), np.arange(ROWS))


# ---- the iterable dataset

@pytest.mark.parametrize("shuffle", [False, True])
def test_a_filter_gives_each_matching_row_once(path, shuffle):
    """A filter on the sorted id (statistics skip the blocks it rules out) and one on another
    column: two fork workers together give exactly the matching rows, once each."""
    for flt, want in (([("id", ">=", 4500), ("id", "<", 7200)], np.arange(4500, 7200)),
                      ("flag == True and id < 3000", np.arange(0, 3000, 3))):
        ds = idv_torch.IdvIterableDataset(path, ["id", "vec"], batch_size=512, filter=flt,
                                          shuffle=shuffle, seed=3)
        ids = _ids(_loader(ds))
        assert np.array_equal(np.sort(ids), want)
    # the partitions the sorted id's statistics rule out are not dealt to any worker
    kept = [(p.start, p.stop) for p in idv_torch.IdvIterableDataset(
        path, ["id"], filter=[("id", ">=", 4500), ("id", "<", 7200)]).partitions]
    assert kept and all(a < 7200 and b > 4500 for a, b in kept)
    assert sum(b - a for a, b in kept) < ROWS


def test_fork_workers_read_every_row_once(path):
    ds = idv_torch.IdvIterableDataset(path, ["id", "vec"], batch_size=4096)
    ids = _ids(_loader(ds))
    assert _is_permutation(ids)
    # each worker reads a run of blocks in order: two ascending halves, interleaved by batch
    assert not np.array_equal(ids, np.arange(ROWS))


def test_batches_hold_every_column_in_its_tensor_form(path):
    want = _columns()
    ds = idv_torch.IdvIterableDataset(path, batch_size=3000)
    batches = list(ds)
    assert [len(b["id"]) for b in batches] == [3000] * 6 + [2000]
    b = batches[1]
    rows = slice(3000, 6000)
    assert b["id"].dtype == torch.int64 and np.array_equal(b["id"].numpy(), want["id"][rows])
    assert b["vec"].shape == (3000, 16) and b["vec"].dtype == torch.float32
    assert np.array_equal(b["vec"].numpy(), want["vec"][rows])
    assert b["flag"].dtype == torch.bool and np.array_equal(b["flag"].numpy(), want["flag"][rows])
    assert b["label"].dtype == torch.int64
    assert np.array_equal(b["label"].numpy(), want["label"][rows])
    assert ds.key_values == {"label": LABELS}
    assert b["name"] == want["name"][rows].tolist()
    lengths = np.arange(3000, 6000) % 5
    assert b["tokens"].shape == (3000, 4) and np.array_equal(b["tokens_lengths"].numpy(), lengths)
    for i in (0, 1, 4, 2999):
        row = want["tokens"][3000 + i]
        assert b["tokens"][i, :len(row)].tolist() == row.tolist()
        assert not b["tokens"][i, len(row):].any()         # padded with zeros
    ticks = want["when"][rows].astype("datetime64[ns]").view(np.int64) // 100
    assert b["when"].dtype == torch.int64 and np.array_equal(b["when"].numpy(), ticks)


def test_worker_batches_hand_their_tensors_over_in_one_storage(path):
    """In a worker, a batch's tensors are copied into one storage (one shared-memory segment
    a batch to the main process, not one a column): each equal to the batch read in the
    main process, dtype and shape kept; outside a worker they stay as read."""
    ds = idv_torch.IdvIterableDataset(path, ["id", "vec", "flag", "when", "tokens", "name"],
                                      batch_size=3000)
    want = list(ds)
    got = list(_loader(ds, workers=1))
    assert len(got) == len(want) == 7
    dense = ["id", "vec", "flag", "when", "tokens", "tokens_lengths"]
    for g, w in zip(got, want):
        for k in dense:
            assert g[k].dtype == w[k].dtype and g[k].shape == w[k].shape, k
            assert torch.equal(g[k], w[k]), k
        assert g["name"] == w["name"]
        storages = {g[k].untyped_storage().data_ptr() for k in dense}
        assert len(storages) == 1
    assert len({want[1][k].untyped_storage().data_ptr() for k in dense}) == len(dense)


def test_nested_ragged_and_drop_last(path):
    ds = idv_torch.IdvIterableDataset(path, ["id", "tokens"], batch_size=3000, drop_last=True,
                                      ragged="nested")
    batches = list(ds)
    assert [len(b["id"]) for b in batches] == [3000] * 6
    t = batches[0]["tokens"]
    assert t.is_nested and [len(r) for r in t.unbind()] == [i % 5 for i in range(3000)]


def test_shuffled_epochs_are_permutations_that_differ_and_repeat(path):
    def epoch(n, seed=5):
        ds = idv_torch.IdvIterableDataset(path, ["id"], batch_size=1000, shuffle=True,
                                          seed=seed, shuffle_buffer=2500)
        ds.set_epoch(n)
        return _ids(_loader(ds))
    first, second = epoch(0), epoch(1)
    assert _is_permutation(first) and _is_permutation(second)
    assert not np.array_equal(first, second)
    assert np.array_equal(epoch(0), first)              # the same seed and epoch
    assert not np.array_equal(epoch(0, seed=6), first)
    # rows are mixed across blocks, not only the blocks reordered
    assert len(np.unique(first[:1000] // ROWS_PER_BLOCK)) > 2


def test_spawn_workers_give_the_fork_workers_batches(path):
    ds = idv_torch.IdvIterableDataset(path, ["id", "vec"], batch_size=2048, shuffle=True,
                                      seed=11)
    ds.set_epoch(3)
    pickle.dumps(ds)                    # an open file inside would fail here
    spawned = _loader(ds, "spawn")
    batches = list(spawned)
    ids = np.concatenate([b["id"].numpy() for b in batches])
    assert _is_permutation(ids)
    assert np.array_equal(ids, _ids(_loader(ds, "fork")))
    want = _columns()["vec"]
    assert all(np.array_equal(b["vec"].numpy(), want[b["id"].numpy()]) for b in batches)


@pytest.mark.parametrize("shuffle", [False, True])
def test_two_ranks_read_every_row_once(path, shuffle):
    got = []
    for rank in (0, 1):
        ds = idv_torch.IdvIterableDataset(path, ["id"], batch_size=1500, shuffle=shuffle,
                                          seed=3, rank=rank, world_size=2)
        ds.set_epoch(2)
        got.append(_ids(_loader(ds)))
    assert abs(len(got[0]) - len(got[1])) <= ROWS_PER_BLOCK
    assert _is_permutation(np.concatenate(got))


def _rank_main(rank, init, path, out):
    """One process of a two-process job: its rank and world size from torch.distributed."""
    torch.distributed.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    try:
        ds = idv_torch.IdvIterableDataset(path, ["id"], batch_size=700, shuffle=True, seed=9)
        out.put((rank, ds.rank, ds.world_size, np.concatenate([b["id"].numpy() for b in ds])))
    finally:
        torch.distributed.destroy_process_group()


def test_ranks_come_from_torch_distributed(path, tmp_path):
    import multiprocessing
    if not torch.distributed.is_available():
        pytest.skip("this PyTorch is built without torch.distributed")
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    init = f"file://{tmp_path / 'rendezvous'}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        procs = [ctx.Process(target=_rank_main, args=(r, init, path, out)) for r in (0, 1)]
        for p in procs:
            p.start()
    got = sorted(out.get(timeout=TIMEOUT) for _ in procs)
    for p in procs:
        p.join(TIMEOUT)
        assert p.exitcode == 0
    assert [g[:3] for g in got] == [(0, 0, 2), (1, 1, 2)]
    assert _is_permutation(np.concatenate([g[3] for g in got]))


def test_a_dataset_of_files_is_sharded_across_them(path, tmp_path):
    for i in range(3):
        idv.write(tmp_path / f"part{i}.idv", {"id": np.arange(i * 700, (i + 1) * 700)},
                  rows_per_block=300)
    ds = idv_torch.IdvIterableDataset(str(tmp_path / "part*.idv"), batch_size=256)
    assert len(ds.partitions) == 9
    ids = _ids(_loader(ds))
    assert np.array_equal(np.sort(ids), np.arange(2100))
    with idv.dataset(tmp_path) as d:        # an open Dataset names its files
        ids = _ids(_loader(idv_torch.IdvIterableDataset(d, shuffle=True, seed=0)))
    assert np.array_equal(np.sort(ids), np.arange(2100))


def test_bad_arguments_are_refused(path, tmp_path):
    with pytest.raises(ValueError, match="seed="):
        idv_torch.IdvIterableDataset(path, shuffle=True, rank=0, world_size=2)
    with pytest.raises(ValueError, match="rank"):
        idv_torch.IdvIterableDataset(path, rank=2, world_size=2)
    with pytest.raises(ValueError, match="batch_size"):
        idv_torch.IdvIterableDataset(path, batch_size=0)
    with pytest.raises(ValueError, match="ragged"):
        idv_torch.IdvIterableDataset(path, ragged="lists")
    with pytest.raises(TypeError, match="bytes or a file object"):
        idv_torch.IdvIterableDataset(idv.open(path.read_bytes()))
    both = tmp_path / "lengths.idv"
    idv.write(both, {"t": idv.Ragged.from_list([[1.0], []]), "t_lengths": np.zeros(2)})
    with pytest.raises(ValueError, match="'t_lengths' would be overwritten"):
        idv_torch.IdvIterableDataset(both)
    assert "t_lengths" in next(iter(idv_torch.IdvIterableDataset(both, ragged="nested")))
    dto = tmp_path / "dto.idv"
    idv.write(dto, {"at": np.zeros(3, [("utc", "<M8[100ns]"), ("offset_minutes", "<i2")])},
              types={"at": idv.DateTimeOffset})
    with pytest.raises(TypeError, match="'at' is DateTimeOffset"):
        idv_torch.IdvIterableDataset(dto)


# ---- the map-style dataset

def test_map_style_shuffled_epoch_decodes_each_block_once(path):
    ds = idv_torch.IdvMapDataset(path, ["id", "vec"])
    assert len(ds) == ROWS
    loader = DataLoader(ds, batch_size=500, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    ids = np.concatenate([b["id"].numpy() for b in loader])
    assert _is_permutation(ids) and not np.array_equal(ids, np.arange(ROWS))
    assert ds.blocks_decoded == 20 * 2                 # 20 blocks of 2 columns, each once
    ids = np.concatenate([b["id"].numpy() for b in loader])      # a second epoch: all cached
    assert _is_permutation(ids) and ds.blocks_decoded == 40
    small = idv_torch.IdvMapDataset(path, ["id", "vec"], cache_bytes=200_000)  # 1/3 of a block
    list(DataLoader(small, batch_size=500, shuffle=True))
    assert small.blocks_decoded > 40                   # the bound holds while blocks fit


def test_map_style_rows_and_batches(path):
    want = _columns()
    ds = idv_torch.IdvMapDataset(path)
    row = ds[-1]
    assert row["id"].item() == ROWS - 1 and row["name"] == f"row {ROWS - 1}"
    assert row["vec"].shape == (16,) and row["tokens"].tolist() == want["tokens"][-1].tolist()
    rows = [17_003, 5, 9_999, 5]
    got = ds.__getitems__(rows)
    assert [r["id"].item() for r in got] == rows
    assert [r["label"].item() for r in got] == want["label"][rows].tolist()
    batch = ds[np.array(rows)]
    assert np.array_equal(batch["vec"].numpy(), want["vec"][rows])
    assert batch["name"] == want["name"][rows].tolist()
    with pytest.raises(IndexError, match="out of range"):
        ds[ROWS]


def test_map_style_filter_holds_the_matching_rows_alone(path, tmp_path):
    """Index i is the i-th matching row, in the files' order, as the iterable dataset's
    filter keeps them, in workers too; a file with no match (its statistics rule it out)
    adds no index."""
    flt = "flag == True and id < 3000"
    want = np.arange(0, 3000, 3)
    ds = idv_torch.IdvMapDataset(path, ["id", "vec"], filter=flt)
    assert len(ds) == len(want) and ds[-1]["id"].item() == want[-1]
    assert np.array_equal(ds[[0, 999, 5]]["id"].numpy(), want[[0, 999, 5]])
    with pytest.raises(IndexError, match="out of range"):
        ds[len(want)]
    loader = _loader(ds, sampler=BatchSampler(RandomSampler(ds), 128, drop_last=False))
    assert np.array_equal(np.sort(_ids(loader)), want)
    for i in range(3):
        idv.write(tmp_path / f"part{i}.idv", {"id": np.arange(i * 700, (i + 1) * 700)},
                  rows_per_block=300)
    parts = str(tmp_path / "part*.idv")
    for flt in ([("id", ">=", 1400)], "id < 650 or id >= 1990", [("id", "<", 0)]):
        mapped = idv_torch.IdvMapDataset(parts, filter=flt)
        streamed = [b["id"] for b in idv_torch.IdvIterableDataset(parts, filter=flt)]
        want = torch.cat(streamed).numpy() if streamed else np.zeros(0, np.int64)
        assert len(mapped) == len(want) and len(want) in (700, 650 + 110, 0)
        assert np.array_equal(mapped[list(range(len(mapped)))]["id"].numpy(), want)
    with pytest.raises(KeyError, match="filter: no column 'zz'; columns: \\['id'"):
        idv_torch.IdvMapDataset(path, ["id"], filter=[("zz", ">", 1)])   # as every reader


def test_map_style_in_workers_and_by_batch_sampler(path):
    ds = idv_torch.IdvMapDataset(path, ["id", "vec"])
    assert ds[0]["id"].item() == 0        # the files are open in this process now ...
    pickle.dumps(ds)                      # ... and the dataset still pickles
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        rows = DataLoader(ds, batch_size=333, shuffle=True, num_workers=2,
                          multiprocessing_context="fork", timeout=TIMEOUT)
        ids = np.concatenate([b["id"].numpy() for b in rows])
    assert _is_permutation(ids)
    sampler = BatchSampler(RandomSampler(ds), 1024, drop_last=False)
    ids = _ids(_loader(ds, sampler=sampler))
    assert _is_permutation(ids)


def test_a_url_is_opened_by_each_worker(path):
    pytest.importorskip("aiohttp", reason="https:// reads need the remote extra")
    from http_server import RangeServer
    with RangeServer({"/train.idv": path.read_bytes()}) as srv:
        ds = idv_torch.IdvIterableDataset(srv.url("/train.idv"), ["id", "vec"],
                                          batch_size=4096, shuffle=True, seed=2)
        ids = _ids(_loader(ds))
        served = srv.requests
    assert _is_permutation(ids)
    assert served > 2           # the workers fetched blocks of their own


def test_map_style_batches_collate_as_the_batch_read(path):
    """DataLoader's default collation of __getitems__'s rows gives ds[rows] (no tensor per row),
    variable-size vectors padded with their lengths as ds[rows] gives them (default_collate
    could not stack them: a DataLoader with a batch_size failed where ds[rows] answered);
    rows collated otherwise (a part of them) are stacked row by row as before."""
    from torch.utils.data import default_collate
    want = _columns()
    ds = idv_torch.IdvMapDataset(path, ["id", "vec", "label", "name", "when"])
    rows = [19_999, 3, 4_000, 3, 12_345]
    got = ds.__getitems__(rows)
    batch = default_collate(got)
    assert batch["id"].tolist() == rows and batch["name"] == want["name"][rows].tolist()
    assert batch["vec"].shape == (5, 16) and np.array_equal(batch["vec"].numpy(), want["vec"][rows])
    assert batch["label"].dtype == torch.int64 and batch["when"].dtype == torch.int64
    part = default_collate(got[1:3])                  # not the whole read: row by row
    assert part["id"].tolist() == rows[1:3] and part["vec"].shape == (2, 16)
    assert dict(got[0]).keys() == batch.keys() and got[0]["name"] == want["name"][19_999]
    assert pickle.loads(pickle.dumps(got[2]))["id"].item() == 4_000
    ragged_ds = idv_torch.IdvMapDataset(path, ["id", "tokens"])
    ragged = ragged_ds.__getitems__([6, 7])
    assert [r["tokens"].tolist() for r in ragged] == [[6], [7, 8]]
    padded = default_collate(ragged)
    assert padded.keys() == {"id", "tokens", "tokens_lengths"}
    assert padded["tokens"].tolist() == [[6, 0], [7, 8]]
    assert padded["tokens_lengths"].tolist() == [1, 2]
    from torch.utils.data import DataLoader
    first = next(iter(DataLoader(ragged_ds, batch_size=6)))
    want_first = ragged_ds[list(range(6))]
    assert first.keys() == want_first.keys()
    assert all(torch.equal(first[k], want_first[k]) for k in first)
    with pytest.raises(RuntimeError):                 # rows of a part: stacked row by row
        default_collate(ragged[:1] + ragged_ds.__getitems__([7]))


def test_take_kept_gathers_through_one_array_while_the_columns_fit(path):
    """take_kept: with the whole columns within the cache, each block is decoded once, however
    many takes hit it; beyond it, by block through the cache; both give read()'s rows."""
    from idv._reader.take import take_kept
    want = _columns()
    rows = np.random.default_rng(1).integers(0, ROWS, 3000)
    for cache_bytes, whole in ((64 << 20, True), (100_000, False)):
        with idv.open(path, cache_bytes=cache_bytes) as f:
            cols = [f["id"], f["vec"], f["name"]]
            for part in np.array_split(rows, 10):
                got = take_kept(f, part, cols)
                assert np.array_equal(got[0], part) and np.array_equal(got[1], want["vec"][part])
                assert got[2].tolist() == want["name"][part].tolist()
            decoded = f["id"].blocks_decoded + f["vec"].blocks_decoded
            assert (decoded == 40) == whole, decoded
            assert len(take_kept(f, np.zeros(0, np.int64), cols)[1]) == 0


def test_take_kept_takes_text_by_batch_and_keeps_the_numbers_whole(path, monkeypatch):
    """take_kept decides column by column: beside a Text column, a number column is still one
    cached array, and the Text column's blocks hit are kept as their bytes, each decoded once;
    a batch over many blocks makes no row access per block hit (row_picks.picked), and one
    for a column of variable-size vectors (row_picks.picked_vectors)."""
    from idv._reader import row_picks
    from idv._reader.take import take_kept
    calls = {"picked": 0, "picked_vectors": 0}

    def counted(name):
        real = getattr(row_picks, name)

        def call(*args):
            calls[name] += 1
            return real(*args)
        monkeypatch.setattr(row_picks, name, call)
    counted("picked")
    counted("picked_vectors")
    want = _columns()
    order = np.random.default_rng(3).permutation(ROWS)
    batches = np.array_split(order, ROWS // 32)                 # batches of 32 over 20 blocks
    with idv.open(path) as f:
        cols = [f["id"], f["name"], f["tokens"]]
        for part in batches:
            part = np.append(part, part[:3])                     # and repeats
            got = take_kept(f, part, cols)
            assert np.array_equal(got[0], part)
            assert got[1].tolist() == want["name"][part].tolist()
            assert [list(r) for r in got[2]] == [list(want["tokens"][i]) for i in part]
        assert calls == {"picked": 0, "picked_vectors": len(batches)}
        assert ("whole", f["id"].index) in f.store.cache
        assert f["id"].blocks_decoded == 20 and f["name"].blocks_decoded == 20


def _keyed(path, key_values):
    idv.write(path, {"k": np.array([1, 2, 0], np.uint32), "x": np.arange(3.0)},
              types={"k": idv.Key(idv.UInt32, count=2)},
              metadata={"k": {"KeyValues": key_values}})
    return path


def test_files_whose_key_values_differ_are_refused(tmp_path):
    """key_values holds one set: files whose keys name other values are an error naming the
    column and both files, unless the column is left out; the same KeyValues are one set."""
    a = _keyed(tmp_path / "a.idv", ["cat", "dog"])
    b = _keyed(tmp_path / "b.idv", ["dog", "cat"])
    same = _keyed(tmp_path / "c.idv", ["cat", "dog"])
    for make in (idv_torch.IdvIterableDataset, idv_torch.IdvMapDataset):
        with pytest.raises(ValueError, match="'k'") as e:
            make([a, b])
        assert str(b) in str(e.value) and str(a) in str(e.value)
        assert make([a, b], ["x"]).column_names == ["x"]
        assert make([a, same]).key_values == {"k": ["cat", "dog"]}


def test_uint64_keys_beyond_int64_are_refused_never_wrapped(tmp_path):
    p = tmp_path / "k64.idv"
    stored = np.array([1, 2**63 - 1, 2**64 - 1, 0], np.uint64)
    idv.write(p, {"k": stored, "v": np.stack([stored, stored], 1)},
              types={"k": idv.Key(idv.UInt64, count=2**64 - 1),
                     "v": idv.Vector(idv.Key(idv.UInt64, count=2**64 - 1), 2)})
    for col in ("v", "k"):
        with pytest.raises(ValueError, match=f"'{col}'.*18446744073709551615.*int64"):
            list(idv_torch.IdvIterableDataset(p, [col]))
        with pytest.raises(ValueError, match=f"{p}: column '{col}'"):
            idv_torch.IdvMapDataset(p, [col])[2]
    with pytest.raises(ValueError, match="'k'"):            # the rows a filter keeps too
        list(idv_torch.IdvIterableDataset(p, ["k"], filter="k > 1"))
    fits = idv_torch.IdvMapDataset(p, ["k"])[[0, 1, 3]]["k"]
    assert fits.dtype == torch.int64 and fits.tolist() == [1, 2**63 - 1, 0]


@pytest.mark.parametrize("columns", [3, "Bedrooms", [3]])
def test_one_column_by_name_or_index_as_every_reader_takes_it(columns):
    path = idv.sample_path()
    want = idv.read(path, columns)["Bedrooms"][:4].tolist()
    for ds in (idv.torch.IdvMapDataset(path, columns),
               idv.torch.IdvIterableDataset(path, columns, batch_size=4)):
        assert ds.column_names == ["Bedrooms"]
    assert idv.torch.IdvMapDataset(path, columns)[[0, 1, 2, 3]]["Bedrooms"].tolist() == want
