"""A dataset handed to other processes (idv._engines.reopen.Reopenable: DataLoader workers, each
epoch's) is the files it was made from: a file replaced or rewritten since is an IdvFormatError
naming it, never a plan of 1,000 rows reading 1,500 (or 500)."""
from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

import idv
from idv._engines.reopen import Reopenable


def _replace(path, rows):
    idv.write(path.with_suffix(".new"), {"x": np.arange(rows, dtype=np.float32)})
    os.replace(path.with_suffix(".new"), path)


@pytest.mark.parametrize("rows", [1500, 500, 1000], ids=["grown", "shrunk", "same-size"])
def test_another_process_sees_the_change(tmp_path, rows):
    path = tmp_path / "f.idv"
    idv.write(path, {"x": np.arange(1000, dtype=np.float32)})
    src = Reopenable(path)
    assert src.dataset().num_rows == 1000
    _replace(path, rows)
    assert src.dataset().num_rows == 1000          # this process: the file it has open
    elsewhere = pickle.loads(pickle.dumps(src))    # a worker's copy
    with pytest.raises(idv.IdvFormatError, match="f.idv.*changed since the dataset was made"):
        elsewhere.dataset()


def test_an_unchanged_dataset_reopens_anywhere(tmp_path):
    path = tmp_path / "f.idv"
    idv.write(path, {"x": np.arange(1000, dtype=np.float32)})
    src = Reopenable([path, path])
    assert pickle.loads(pickle.dumps(src)).dataset().num_rows == 2000


@pytest.mark.parametrize("reader", ["Reopenable", "iterable", "map"])
@pytest.mark.parametrize("opened", ["dataset", "file"])
def test_an_open_source_replaced_before_the_loader_is_made_is_refused(tmp_path, opened,
                                                                       reader):
    """An open Dataset or IdvFile is read as it was opened: the files it listed, not the one
    in their place when the loader opens them again (which torch read, where Dask refuses)."""
    if reader != "Reopenable":
        pytest.importorskip("torch", reason="idv.torch needs torch (pip install 'idv[torch]')")
        import idv.torch as it
    path = tmp_path / "f.idv"
    idv.write(path, {"x": np.arange(1000, dtype=np.float32)})
    src = idv.dataset(path) if opened == "dataset" else idv.open(path)
    _replace(path, 1000)
    read = {"Reopenable": lambda: Reopenable(src).dataset(),
            "iterable": lambda: next(iter(it.IdvIterableDataset(src, batch_size=10))),
            "map": lambda: it.IdvMapDataset(src)[0]}[reader]
    with pytest.raises(idv.IdvFormatError, match="f.idv.*changed since the dataset"):
        read()


def test_torch_workers_of_the_next_epoch_refuse_a_replaced_file(tmp_path):
    torch = pytest.importorskip("torch", reason="needs torch")
    from idv.torch import IdvIterableDataset
    path = tmp_path / "f.idv"
    idv.write(path, {"x": np.arange(1000, dtype=np.float32)}, rows_per_block=100)
    ds = IdvIterableDataset(path, ["x"], batch_size=100)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    assert sum(len(b["x"]) for b in loader) == 1000
    _replace(path, 1500)
    with pytest.raises(Exception, match="changed since the dataset was made"):
        sum(len(b["x"]) for b in loader)


def test_an_engine_task_opens_the_file_as_listed_or_raises(tmp_path):
    """Dask's, Ray's and Spark's tasks: each opens one file of the plan (open_listed)."""
    from idv._engines.reopen import listed, open_listed
    path = tmp_path / "f.idv"
    idv.write(path, {"x": np.arange(1000, dtype=np.float32)})
    with idv.dataset(path) as ds:
        (entry,) = pickle.loads(pickle.dumps(listed(ds, ["x"])))
    with open_listed(entry) as f:
        assert f.num_rows == 1000
    _replace(path, 1000)
    with pytest.raises(idv.IdvFormatError, match="f.idv.*another file is in its place"):
        open_listed(entry)
    # another machine's device numbers are its own: there the rows and types are checked
    elsewhere = entry._replace(host=entry.host + "-elsewhere")
    open_listed(elsewhere).close()
    idv.write(path.with_suffix(".new"), {"x": np.arange(1000, dtype=np.float64)})
    os.replace(path.with_suffix(".new"), path)
    with pytest.raises(idv.IdvFormatError, match="column 'x' is Double, Single when listed"):
        open_listed(elsewhere)
    _replace(path, 1500)
    with pytest.raises(idv.IdvFormatError, match="it has 1500 rows, 1000 when listed"):
        open_listed(elsewhere)
