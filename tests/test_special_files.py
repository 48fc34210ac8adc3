"""Only regular files are opened by path: pipes, FIFOs and devices are refused before any read
(a FIFO would wait for a writer, /dev/zero never ends), by idv.open, the CLI and datasets
(skipped with on_bad_file="skip"); a stream is read on purpose through ``idv info -``, in
linear time and within the memory limit."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import idv
from idv._storage import source

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "waiting.idv"
    os.mkfifo(path)
    return path


def _within(seconds, work):
    """`work()`'s result or exception, failing the test if it has not returned by then (a
    read that blocks on a FIFO)."""
    out = {}

    def run():
        try:
            out["value"] = work()
        except BaseException as e:         # noqa: BLE001 - handed back to the test
            out["error"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still blocked after {seconds} s"
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_a_fifo_is_refused_without_waiting_for_a_writer(fifo):
    with pytest.raises(OSError, match="is a pipe \\(FIFO\\), not a regular file"):
        _within(10, lambda: idv.open(fifo))
    with pytest.raises(OSError, match="pipe"):
        _within(10, lambda: idv.read(str(fifo)))


def test_a_device_that_never_ends_is_refused():
    with pytest.raises(OSError, match="/dev/zero is a character device"):
        _within(10, lambda: idv.open("/dev/zero"))


def test_datasets_raise_on_a_fifo_or_skip_it(tmp_path):
    idv.write(tmp_path / "a.idv", {"x": np.arange(5)})
    os.mkfifo(tmp_path / "b.idv")
    with pytest.raises(OSError, match="b.idv is a pipe"):
        _within(10, lambda: idv.dataset(tmp_path))
    with pytest.warns(idv.IdvWarning, match="skipped 1 file"):
        ds = _within(10, lambda: idv.dataset(tmp_path, on_bad_file="skip"))
    assert ds.num_rows == 5


def test_the_cli_refuses_a_fifo_and_reads_standard_input(tmp_path, fifo):
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    p = subprocess.run([sys.executable, "-m", "idv", "info", str(fifo)], capture_output=True,
                       text=True, timeout=60, env=env)
    assert p.returncode == 1 and "is a pipe (FIFO), not a regular file" in p.stderr
    path = tmp_path / "data.idv"
    idv.write(path, {"x": np.arange(7)})
    p = subprocess.run([sys.executable, "-m", "idv", "info", "-"], input=path.read_bytes(),
                       capture_output=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    assert b"rows:         7" in p.stdout


def test_a_stream_is_read_in_linear_time_within_the_limit():
    class Chunks(io.RawIOBase):          # a pipe: small reads, no seek, no size
        def __init__(self, n):
            self.left = n

        def readable(self):
            return True

        def read(self, size=-1):
            k = min(self.left, 4096, size if size >= 0 else 4096)
            self.left -= k
            return b"x" * k
    data = source.read_stream(Chunks(64 << 20), 1 << 30)
    assert len(data) == 64 << 20
    with pytest.raises(idv.MemoryLimitError, match="standard input"):
        source.read_stream(Chunks(8 << 20), 1 << 20)
