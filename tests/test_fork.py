"""A process forked after reading in threads reads too: a forked child inherits the thread
pools' objects but none of their threads, so idv makes it new pools (PyTorch's DataLoader
workers and multiprocessing's fork pools on Linux fork this way).
"""
from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import threading
import time
import warnings
from concurrent.futures import Future

import numpy as np
import pytest

import idv
from idv._resources import gc as idv_gc
from idv._reader import whole_read
from idv._resources import threads as idv_threads
from idv._scan import scan as idv_scan

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


class _AskedFuture(Future):
    """Work run by the thread that asks for its result, only in the process that submitted
    it: in a forked child it never completes, as the work of a pool whose threads stayed in
    the parent."""

    def __init__(self, work):
        super().__init__()
        self.work, self.pid = work, os.getpid()

    def result(self, timeout=None):
        if os.getpid() == self.pid and self.set_running_or_notify_cancel():
            self.set_result(self.work())
        return super().result(timeout)


class _AskedPool:
    """A scan's pool whose work waits until asked for: a fork comes while windows are queued
    ahead, whatever the machine's speed."""

    def __init__(self):
        self.futures = []

    def submit(self, fn, *args):
        self.futures.append(_AskedFuture(lambda: fn(*args)))
        return self.futures[-1]


@pytest.mark.parametrize("kind", ["file", "dataset", "filter"])
def test_a_stream_begun_before_a_fork_goes_on_in_the_child(blocks_file, monkeypatch, kind):
    """A stream handed to a forked worker after its first batch: the windows decoded ahead
    for it belong to the parent's threads, and the child decodes them again itself."""
    pool, pool_of = _AskedPool(), idv_threads.pool
    monkeypatch.setattr(idv_threads, "pool",
                        lambda purpose, n: pool if purpose == "scan" else pool_of(purpose, n))
    monkeypatch.setattr(idv_scan, "WINDOW_BYTES", 300 << 10)     # a few windows per file
    ids = np.arange(ROWS)
    if kind == "dataset":
        monkeypatch.setattr(whole_read, "GROUP_BYTES", 0)    # each file streamed, as large ones
        source = idv.dataset([blocks_file, blocks_file], threads=THREADS)
        options, want = {}, np.tile(ids, 2)
    else:
        source = idv.open(blocks_file, threads=THREADS)
        options, want = {}, ids
        if kind == "filter":
            options, want = {"filter": [("id", ">=", 10_000)]}, ids[10_000:]
    with source:
        stream = source.iter_batches(["id", "label"], batch_size=1_000, **options)
        got = [next(stream)]
        assert any(not f.done() for f in pool.futures), "no window queued: nothing to prove"
        pid = _fork()
        if pid == 0:
            code = 2
            try:
                got += list(stream)
                x = np.concatenate([b.column("id").to_numpy() for b in got])
                labels = [t for b in got for t in b.column("label").to_pylist()]
                code = 0 if np.array_equal(x, want) and labels == [f"row {i}" for i in x] \
                    else 1
            finally:
                os._exit(code)
        status = _wait(pid)
        rest = sum(b.num_rows for b in stream)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, \
        f"the child ended with {status:#x} (1: wrong values, 2: an error)"
    assert got[0].num_rows + rest == len(want)


def test_a_child_forked_while_the_collector_is_paused_collects():
    """Forked while another thread reads many files (the collector paused for it): the child
    has no thread to resume the collector, and starts with it running and no pause."""
    assert gc.isenabled()
    inside, leave = threading.Event(), threading.Event()

    def read_many():
        with idv_gc.paused():
            inside.set()
            leave.wait()
    reader = threading.Thread(target=read_many)
    reader.start()
    try:
        inside.wait()
        assert not gc.isenabled()
        pid = _fork()
        if pid == 0:
            code = 1
            try:
                code = 0 if gc.isenabled() else 3
                with idv_gc.paused():       # the child's own reads pause it and resume it
                    code = code or (0 if not gc.isenabled() else 4)
                code = code or (0 if gc.isenabled() else 5)
            finally:
                os._exit(code)
        status = _wait(pid)
    finally:
        leave.set()
        reader.join()
    assert gc.isenabled()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, \
        f"the child ended with {status:#x} (3: its collector left off, 4, 5: no pause of its own)"
