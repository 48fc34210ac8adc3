"""idv.sink: the one atomic output of idv.write, idv.Writer and idv.convert.

A new file gets 0o666 less the umask (read without changing it), an existing one keeps its
permission bits, and a failure anywhere (KeyboardInterrupt included) leaves the destination as
it was and no temporary file behind.
"""
from __future__ import annotations

import builtins
import os
import stat

import numpy as np
import pytest

import idv
from idv import sink


def _real_umask():
    mask = os.umask(0o022)      # the test may toggle it: nothing else runs here
    os.umask(mask)
    return mask


def test_umask_from_proc_and_from_a_probe_file(tmp_path, monkeypatch):
    assert sink.new_file_mode(str(tmp_path)) == 0o666 & ~_real_umask()
    real_open = builtins.open

    def no_proc(path, *args, **kwargs):
        if str(path).startswith("/proc/"):
            raise OSError("no /proc here")
        return real_open(path, *args, **kwargs)
    monkeypatch.setattr(builtins, "open", no_proc)
    old = os.umask(0o027)
    try:
        assert sink.new_file_mode(str(tmp_path)) == 0o640
    finally:
        os.umask(old)
    assert os.listdir(tmp_path) == []           # the probe file is gone


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_new_files_get_the_umask_and_existing_ones_keep_their_mode(tmp_path):
    new = tmp_path / "new.idv"
    idv.write(new, {"x": [1, 2]})
    assert stat.S_IMODE(new.stat().st_mode) == 0o666 & ~_real_umask()
    old = tmp_path / "old.idv"
    old.write_bytes(b"x")
    os.chmod(old, 0o640)
    idv.write(old, {"x": [1, 2]})
    assert stat.S_IMODE(old.stat().st_mode) == 0o640
    assert idv.read(old)["x"].tolist() == [1, 2]


@pytest.mark.parametrize("exc", [OSError("rename failed"), KeyboardInterrupt()])
def test_failure_in_commit_removes_the_temporary_file(tmp_path, monkeypatch, exc):
    dest = tmp_path / "out.bin"
    dest.write_bytes(b"old")
    out = sink.AtomicPath(dest)
    with out.open() as f:
        f.write(b"new")
    assert len(os.listdir(tmp_path)) == 2

    def fail(*args):
        raise exc
    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(type(exc)):
        out.commit()
    assert os.listdir(tmp_path) == ["out.bin"] and dest.read_bytes() == b"old"


def test_commit_of_a_file_written_by_name(tmp_path):
    dest = tmp_path / "out.bin"
    out = sink.AtomicPath(dest)
    with open(out.tmp, "wb") as f:      # as pyarrow's writers do
        f.write(b"data")
    out.commit()
    assert dest.read_bytes() == b"data" and os.listdir(tmp_path) == ["out.bin"]


def test_destination_checks(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        sink.AtomicPath(tmp_path / "nope" / "x.idv")
    with pytest.raises(IsADirectoryError):
        idv.Writer(tmp_path, {"x": idv.Int32})
    assert os.listdir(tmp_path) == []


def test_convert_leaves_nothing_when_its_writer_cannot_start(tmp_path):
    pytest.importorskip("pyarrow")
    src = tmp_path / "src.idv"
    idv.write(src, {"x": np.arange(3, dtype=np.int32)})
    with pytest.raises(Exception):
        idv.convert(src, tmp_path / "out.parquet", compression="no-such-codec")
    with pytest.raises(Exception):
        idv.convert(src, tmp_path / "out.feather", compression="no-such-codec")
    assert os.listdir(tmp_path) == ["src.idv"]
