"""A process forked after reading in threads reads too: a forked child inherits the thread
pools' objects but none of their threads, so idv makes it new pools (PyTorch's DataLoader
workers and multiprocessing's fork pools on Linux fork this way).
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
import warnings

import numpy as np
import pytest

import idv

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")

ROWS = 60_000
THREADS = 4
TIMEOUT = 60       # seconds a child may take (it takes well under one)


def _columns():
    n = np.arange(ROWS)
    return {"id": n.astype(np.int64), "score": n * 0.25, "bucket": (n % 7).astype(np.int32),
            "label": np.array([f"row {i}" for i in n], dtype=object)}


@pytest.fixture(scope="module")
def blocks_file(tmp_path_factory):
    """Several blocks of a few columns, read once here in threads: the pools now exist."""
    path = tmp_path_factory.mktemp("fork") / "blocks.idv"
    idv.write(path, _columns(), rows_per_block=2_000)
    with idv.open(path, threads=THREADS) as f:
        assert f["id"].num_blocks == 30
        _check(f.read())
    assert _pool_threads(), "the read ran in no pool thread: the test would prove nothing"
    return path


def _pool_threads():
    return [t.name for t in threading.enumerate() if t.name.startswith(("idv-read", "idv-scan"))]


def _check(got):
    want = _columns()
    assert set(got) == set(want)
    for name, values in want.items():
        assert np.array_equal(got[name], values), name


def _read_column(args):
    path, name = args
    return name, idv.read(path, columns=[name], threads=THREADS)[name]


def _fork():
    with warnings.catch_warnings():     # forking a process with threads is the point here
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


def _wait(pid):
    """The child's exit status, or kill it and fail after TIMEOUT seconds."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail(f"the forked child did not finish reading within {TIMEOUT} s")


def test_a_forked_child_reads_in_threads(blocks_file):
    pid = _fork()
    if pid == 0:                        # the child: never returns into pytest
        code = 2
        try:
            with idv.open(blocks_file, threads=THREADS) as f:
                _check(f.read())
            code = 0 if _pool_threads() else 3      # and it read in threads of its own
        except AssertionError:
            code = 1
        finally:
            os._exit(code)
    status = _wait(pid)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, \
        f"the child ended with {status:#x} (1: wrong values, 2: an error, 3: no pool thread)"


def test_a_fork_pool_of_two_reads(blocks_file):
    names = list(_columns())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with multiprocessing.get_context("fork").Pool(2) as workers:
            result = workers.map_async(_read_column, [(blocks_file, n) for n in names])
            got = dict(result.get(timeout=TIMEOUT))
    _check(got)


def test_a_fork_while_another_thread_reads(blocks_file):
    """Forked while a thread of the parent is inside a read (its pool's locks and queues
    taken): each child still reads, in threads of its own. The parent reads once before
    the thread starts: the first read imports pyarrow and pandas lazily, and a fork in the
    middle of an import (Python's module locks, pyarrow's pandas shim) leaves the child
    waiting on a lock no thread of it holds, whatever the library that forks."""
    with idv.open(blocks_file, threads=THREADS) as f:
        for _ in f.iter_batches(batch_size=5_000):
            pass
    stop = threading.Event()

    def keep_reading():
        with idv.open(blocks_file, threads=THREADS) as f:
            while not stop.is_set():
                f.read()
                for _ in f.iter_batches(batch_size=5_000):
                    pass
    reader = threading.Thread(target=keep_reading)
    reader.start()
    try:
        for _ in range(5):
            time.sleep(0.02)
            pid = _fork()
            if pid == 0:
                code = 2
                try:
                    with idv.open(blocks_file, threads=THREADS) as f:
                        _check(f.read())
                        rows = sum(b.num_rows for b in f.iter_batches(batch_size=7_000))
                    code = 0 if rows == ROWS else 1
                except AssertionError:
                    code = 1
                finally:
                    os._exit(code)
            status = _wait(pid)
            assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"{status:#x}"
    finally:
        stop.set()
        reader.join()


class _Shards:
    """A DataLoader's iterable dataset: worker k reads every k-th block group of a file."""

    def __init__(self, path):
        self.path = path

    def __iter__(self):
        import torch.utils.data as tud
        info = tud.get_worker_info()
        k, n = (0, 1) if info is None else (info.id, info.num_workers)
        with idv.open(self.path, threads=THREADS) as f:
            col = f["id"]
            for b in range(k, col.num_blocks, n):
                yield int(col.read_blocks(b, b + 1).sum())


def test_dataloader_fork_workers_after_a_threaded_scan(blocks_file):
    torch_data = pytest.importorskip("torch.utils.data", reason="DataLoader workers need torch")
    with idv.open(blocks_file, threads=THREADS) as f:       # the scan's threads now exist
        assert sum(b.num_rows for b in f.iter_batches(batch_size=3_000)) == ROWS
    shards = type("ShardSet", (_Shards, torch_data.IterableDataset), {})(blocks_file)
    loader = torch_data.DataLoader(shards, batch_size=None, num_workers=2,
                                   multiprocessing_context="fork", timeout=TIMEOUT)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        total = sum(int(x) for x in loader)
    assert total == int(np.arange(ROWS).sum())
