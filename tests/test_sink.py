"""idv._storage.sink: the one atomic output of idv.write, idv.Writer and idv.convert.

A new file gets 0o666 less the umask (read without changing it), an existing one keeps its
permission bits, and a failure anywhere (KeyboardInterrupt included) leaves the destination as
it was and no temporary file behind.
"""
from __future__ import annotations

import builtins
import os
import re
import stat
import threading

import numpy as np
import pytest

import idv
from idv._resources import threads
from idv._storage import sink


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


@pytest.fixture(params=["anonymous", "named"])
def temp_kind(request, monkeypatch):
    """Both kinds of temporary file: Linux's anonymous one (O_TMPFILE), and the named one used
    where there is none (forced here by taking O_TMPFILE away)."""
    if request.param == "anonymous":
        if getattr(os, "O_TMPFILE", None) is None:
            pytest.skip("no O_TMPFILE on this system")
    else:
        monkeypatch.setattr(sink, "_O_TMPFILE", None)
    return request.param


@pytest.mark.parametrize("exc", [OSError("rename failed"), KeyboardInterrupt()])
def test_failure_in_commit_removes_the_temporary_file(tmp_path, monkeypatch, exc, temp_kind):
    dest = tmp_path / "out.bin"
    dest.write_bytes(b"old")
    out = sink.AtomicPath(dest)
    with out.open() as f:
        f.write(b"new")
    # an anonymous file has no name until the commit
    assert len(os.listdir(tmp_path)) == (1 if temp_kind == "anonymous" else 2)

    def fail(*args):
        raise exc
    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(type(exc)):
        out.commit()
    assert os.listdir(tmp_path) == ["out.bin"] and dest.read_bytes() == b"old"


def _descriptors_of(path):
    """This process's descriptors open on `path` or on a file removed from there (Linux)."""
    fds = "/proc/self/fd"
    found = []
    for fd in os.listdir(fds):
        try:
            target = os.readlink(os.path.join(fds, fd))
        except OSError:
            continue
        if target in (str(path), f"{path} (deleted)"):
            found.append(target)
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs Linux's /proc/self/fd")
@pytest.mark.parametrize("fails", [False, True])
def test_the_replaced_file_is_let_go(tmp_path, monkeypatch, fails):
    # the file a commit replaces is held open across the rename and closed in a thread of
    # its own (its blocks freed there), on a local disk's file system; a failed rename
    # closes it at once
    dest = tmp_path / "out.bin"
    dest.write_bytes(b"old" * 100_000)
    old_inode = dest.stat().st_ino
    out = sink.AtomicPath(dest)
    with out.open() as f:
        f.write(b"new")
    gate = threading.Event()
    queued = threads.pool("release", 1).submit(gate.wait, 30)    # the close waits behind it
    try:
        if fails:
            monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError("no")))
            with pytest.raises(OSError):
                out.commit()
            assert dest.stat().st_ino == old_inode and dest.read_bytes() == b"old" * 100_000
            assert _descriptors_of(dest) == []
        else:
            out.commit()
            assert dest.read_bytes() == b"new" and dest.stat().st_ino != old_inode
            held = [f"{dest} (deleted)"] if sink.holds_replaced(os.stat(tmp_path)) else []
            assert _descriptors_of(dest) == held
    finally:
        gate.set()
        queued.result()
    threads.pool("release", 1).submit(lambda: None).result()     # its queue drained
    assert _descriptors_of(dest) == []


def test_commit_of_a_file_written_by_name(tmp_path, temp_kind):
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
    # a file object opened for appending would put the header at the end: refused
    for mode in ("ab", "a+b"):
        with open(tmp_path / "a.idv", mode) as f, \
                pytest.raises(ValueError, match="opened for appending"):
            idv.write(f, {"x": np.arange(3)})
    fd = os.open(tmp_path / "a.idv", os.O_WRONLY | os.O_APPEND)
    with os.fdopen(fd, "wb") as f, pytest.raises(ValueError, match="opened for appending"):
        idv.write(f, {"x": np.arange(3)})
    assert (tmp_path / "a.idv").read_bytes() == b""
    os.remove(tmp_path / "a.idv")
    # a file where a folder should be is named as that, not as a folder that does not exist
    (tmp_path / "f.idv").write_bytes(b"x")
    for dest in ("f.idv/x.idv", "f.idv/a/b/x.idv"):
        with pytest.raises(NotADirectoryError, match=rf"'{tmp_path / 'f.idv'}' is a file, not "
                                                     rf"a directory"):
            idv.write(tmp_path / dest, {"x": np.arange(3)})
    assert os.listdir(tmp_path) == ["f.idv"] and (tmp_path / "f.idv").read_bytes() == b"x"


def test_convert_leaves_nothing_when_its_writer_cannot_start(tmp_path):
    pytest.importorskip("pyarrow")
    src = tmp_path / "src.idv"
    idv.write(src, {"x": np.arange(3, dtype=np.int32)})
    with pytest.raises(Exception):
        idv.convert(src, tmp_path / "out.parquet", compression="no-such-codec")
    with pytest.raises(Exception):
        idv.convert(src, tmp_path / "out.feather", compression="no-such-codec")
    assert os.listdir(tmp_path) == ["src.idv"]


# ---------------------------------------------------------------- a writer killed mid-write

_SLOW_WRITER = r"""
import sys, numpy as np, idv
w = idv.Writer(sys.argv[1], {"x": idv.Double, "v": idv.Vector(idv.Single, 64)},
               rows_per_block=4096)
if sys.argv[2] == "named":
    from idv._storage import sink
    sink._O_TMPFILE = None
w.write_batch({"x": np.zeros(50_000), "v": np.zeros((50_000, 64), np.float32)})
print("writing", flush=True)
while True:                        # until killed
    w.write_batch({"x": np.zeros(50_000), "v": np.zeros((50_000, 64), np.float32)})
"""


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
@pytest.mark.parametrize("kind", ["anonymous", "named"])
def test_a_killed_writer_leaves_nothing_and_the_old_file_whole(tmp_path, kind):
    """SIGKILL mid-write: the old file is intact; an anonymous temporary file is gone with the
    process, a named one is removed by the next write to the same destination."""
    import signal
    import subprocess
    import sys
    if kind == "anonymous" and getattr(os, "O_TMPFILE", None) is None:
        pytest.skip("no O_TMPFILE on this system")
    dest = tmp_path / "data.idv"
    idv.write(dest, {"x": [1.0, 2.0]})
    before = dest.read_bytes()
    child = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(dest), kind],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "writing"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        child.stdout.close()
    assert dest.read_bytes() == before
    left = sorted(os.listdir(tmp_path))
    if kind == "anonymous":
        assert left == ["data.idv"]
    else:
        assert len(left) == 2 and left[0].startswith(".data.idv.") and \
            left[0].endswith(f".{child.pid}.{left[0].split('.')[-2]}.idv-tmp")
        idv.write(dest, {"x": [3.0]})                  # the next write cleans up
        assert os.listdir(tmp_path) == ["data.idv"]
        assert idv.read(dest)["x"].tolist() == [3.0]


def test_stale_files_of_live_processes_and_other_hosts_are_kept(tmp_path):
    import subprocess
    import sys
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    host = sink._HOST
    names = {"dead": f".d.idv.{host}.{gone}.0a0b0c0d.idv-tmp",
             "alive": f".d.idv.{host}.{os.getppid()}.0a0b0c0d.idv-tmp",
             "other host": f".d.idv.elsewhere.{gone}.0a0b0c0d.idv-tmp",
             "other file": f".e.idv.{host}.{gone}.0a0b0c0d.idv-tmp",
             "not ours": f".d.idv.{host}.{gone}.backup"}
    for n in names.values():
        (tmp_path / n).write_bytes(b"x")
    assert sink.remove_stale(str(tmp_path), "d.idv") == 1
    assert sorted(os.listdir(tmp_path)) == sorted(v for k, v in names.items() if k != "dead")


@pytest.mark.skipif(os.name == "nt", reason="Windows opens no directory to fsync it")
def test_a_batch_fsyncs_each_file_at_its_commit_and_the_directory_once_at_its_end(
        tmp_path, monkeypatch):
    synced, fsync = [], os.fsync

    def counting_fsync(fd):
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        return fsync(fd)
    monkeypatch.setattr(os, "fsync", counting_fsync)
    with sink.batch():
        for name in ("a.bin", "b.bin", "c.bin"):
            out = sink.AtomicPath(tmp_path / name)
            with out.open() as f:
                f.write(name.encode())
            out.commit()
        assert synced == ["file"] * 3           # each file before it has its name
    assert synced == ["file"] * 3 + ["dir"]
    assert [(tmp_path / n).read_bytes() for n in ("a.bin", "b.bin", "c.bin")] == \
        [b"a.bin", b"b.bin", b"c.bin"]
    out = sink.AtomicPath(tmp_path / "d.bin")   # outside a batch: at once
    out.commit()
    assert synced == ["file"] * 3 + ["dir", "file", "dir"]


# ---------------------------------------------------------------- what may be replaced

@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX owners")
def test_a_read_only_destination_is_refused(tmp_path):
    dest = tmp_path / "ro.idv"
    idv.write(dest, {"x": [1]})
    before = dest.read_bytes()
    os.chmod(dest, 0o444)
    with pytest.raises(PermissionError, match="read-only"):
        idv.write(dest, {"x": [2]})
    with pytest.raises(PermissionError, match="read-only"):
        idv.Writer(dest, {"x": idv.Int64})
    assert dest.read_bytes() == before and os.listdir(tmp_path) == ["ro.idv"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root")
def test_root_keeps_the_owner_and_mode_of_what_it_replaces(tmp_path):
    dest = tmp_path / "theirs.idv"
    idv.write(dest, {"x": [1]})
    os.chown(dest, 12345, 23456)
    os.chmod(dest, 0o640)
    idv.write(dest, {"x": [2]})
    st = dest.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (12345, 23456, 0o640)
    assert idv.read(dest)["x"].tolist() == [2]


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX owners")
def test_another_users_file_is_refused(tmp_path, monkeypatch):
    """A file writable by all but owned by someone else: the rename would change its owner.
    (This process acts as another user by its effective uid as the check sees it; switching
    users for real needs a Python installation every user can read.)"""
    dest = tmp_path / "theirs.idv"
    idv.write(dest, {"x": [1]})
    os.chmod(dest, 0o666)
    someone_else = dest.stat().st_uid + 1
    monkeypatch.setattr(os, "geteuid", lambda: someone_else)
    with pytest.raises(PermissionError, match="belongs to another user"):
        idv.write(dest, {"x": [2]})
    monkeypatch.undo()
    assert idv.read(dest)["x"].tolist() == [1] and os.listdir(tmp_path) == ["theirs.idv"]


@pytest.mark.parametrize("most", [1, 5, 8, 4096])
def test_vectored_writes_go_on_after_short_ones(tmp_path, monkeypatch, most):
    """write_vectored writes every part in order whatever each writev takes (at most `most`
    bytes a call here, ending inside parts and on their edges), empty parts and more parts
    than one call takes included; a writev that takes nothing is an error, not a hang."""
    real = os.writev
    calls = []

    def short(fd, buffers):
        calls.append(len(buffers))
        taken, left = [], most
        for b in buffers:
            if left == 0:
                break
            taken.append(memoryview(b)[:left])
            left -= len(taken[-1])
        return real(fd, taken)
    monkeypatch.setattr(sink.os, "writev", short)
    rng = np.random.default_rng(7)
    parts = [rng.integers(0, 256, int(n), dtype=np.uint8).tobytes()
             for n in rng.integers(0, 9, 2500)] + [b"", np.arange(3, dtype=np.uint8)]
    path = tmp_path / "v.bin"
    with open(path, "wb") as f:
        sink.write_vectored(f.fileno(), parts)
    assert path.read_bytes() == b"".join(bytes(p) for p in parts)
    assert max(calls) == 1024
    monkeypatch.setattr(sink.os, "writev", lambda fd, buffers: 0)
    with open(path, "wb") as f, pytest.raises(OSError, match="stopped short"):
        sink.write_vectored(f.fileno(), [b"x"])


def test_a_writers_blocks_land_where_its_tables_say(tmp_path):
    """Blocks written many to a system call, between the header and tables the file object
    writes: every value reads back and every block's bytes are where the lookup table says
    (verify checks each CRC-32)."""
    rng = np.random.default_rng(8)
    data = {"x": rng.random(100_000), "t": np.array([f"v{i % 977}" for i in range(100_000)],
                                                     dtype=object)}
    path = tmp_path / "w.idv"
    idv.write(path, data, rows_per_block=1000)
    assert idv.verify(path).ok
    with idv.open(path) as f:
        assert np.array_equal(f["x"].read(), data["x"])
        assert f["t"].read().tolist() == data["t"].tolist()


# ---------------------------------------------------------------- what is not a regular file

@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_a_destination_that_is_not_a_regular_file_is_refused(tmp_path):
    """The rename would replace it: a FIFO, a character device (a copy of /dev/null, as root),
    and a link to either (as /dev/stdout is), by idv.write, idv.Writer and idv.convert (to
    .idv and to text)."""
    src = tmp_path / "src.idv"
    idv.write(src, {"x": [1.0]})
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "to-fifo").symlink_to(fifo)
    nodes = {"fifo": "a FIFO (named pipe)", "to-fifo": "a FIFO (named pipe)"}
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        os.mknod(tmp_path / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        nodes["null"] = "a character device"
    for name, kind in nodes.items():
        dest = tmp_path / name
        for write in (lambda: idv.write(dest, {"x": [2.0]}),
                      lambda: idv.Writer(dest, {"x": idv.Double}),
                      lambda: idv.convert(src, dest, to="idv"),
                      lambda: idv.convert(src, dest, to="csv")):
            with pytest.raises(OSError, match=re.escape(f"cannot write '{dest}': it is {kind}, "
                                                        f"not a regular file")):
                write()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.path.islink(tmp_path / "to-fifo")
    if "null" in nodes:
        assert stat.S_ISCHR(os.lstat(tmp_path / "null").st_mode)
    assert sorted(os.listdir(tmp_path)) == sorted(["src.idv", *nodes])


@pytest.mark.skipif(os.name != "posix", reason="POSIX symbolic links")
def test_a_link_to_a_file_is_written_through(tmp_path, temp_kind):
    """As open(link, "wb") would: the file the link leads to gets the new data (replaced
    whole, keeping its mode), the link stays a link; a dangling link gets its file made."""
    store = tmp_path / "store"
    store.mkdir()
    target = store / "data.idv"
    idv.write(target, {"x": [1]})
    os.chmod(target, 0o640)
    link = tmp_path / "data.idv"
    link.symlink_to(target)
    idv.write(link, {"x": [2]})
    assert os.readlink(link) == str(target) and idv.read(target)["x"].tolist() == [2]
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    dangling = tmp_path / "new.idv"
    dangling.symlink_to(store / "new.idv")
    with idv.Writer(dangling, {"x": idv.Int64}) as w:
        w.write_batch({"x": [3]})
    assert os.path.islink(dangling) and idv.read(store / "new.idv")["x"].tolist() == [3]
    assert sorted(os.listdir(store)) == ["data.idv", "new.idv"]


def test_a_gzip_file_object_is_refused_as_not_seekable(tmp_path):
    """GzipFile.seekable() is True, but a gzip stream being written only seeks forward: the
    header, written last, could not go back to the start."""
    import gzip
    with gzip.open(tmp_path / "a.idv.gz", "wb") as f:
        with pytest.raises(ValueError, match="seekable binary file object.*GzipFile seeks "
                                             "only forward"):
            idv.write(f, {"x": [1.0]})


def test_a_failed_rename_names_the_destination(tmp_path, monkeypatch, temp_kind):
    """os.replace's error names the temporary file and the destination; the error raised
    names the destination as given (a link's, not its target's), and no temporary file."""
    import errno
    target = tmp_path / "real.idv"
    target.write_bytes(b"old")
    link = tmp_path / "link.idv"
    link.symlink_to(target)

    def immutable(src, dst):
        raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), src, dst)
    monkeypatch.setattr(os, "replace", immutable)
    for dest in (target, link):
        with pytest.raises(PermissionError) as raised:
            idv.write(dest, {"x": [1]})
        assert raised.value.filename == str(dest) and raised.value.filename2 is None
        assert str(raised.value) == f"[Errno {errno.EPERM}] {os.strerror(errno.EPERM)}: " \
                                    f"'{dest}'"
    assert sorted(os.listdir(tmp_path)) == ["link.idv", "real.idv"]
    assert target.read_bytes() == b"old"


def test_a_url_is_refused_by_every_writer_before_anything_is_written(tmp_path, monkeypatch):
    """idv writes local files: a URL given to a writer would otherwise be a folder named
    's3:' here, the data never reaching the bucket."""
    import idv
    monkeypatch.chdir(tmp_path)
    data = {"a": np.arange(4), "k": [1, 1, 2, 2]}
    writes = {"write": lambda u: idv.write(u + "x.idv", data),
              "partition_by": lambda u: idv.write(u, data, partition_by="k"),
              "Writer": lambda u: idv.Writer(u + "x.idv", [("a", idv.Int64)]),
              "convert": lambda u: idv.convert(idv.sample_path(), u + "o.csv")}
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    import idv.dask
    frame = dd.from_pandas(pd.DataFrame(data), npartitions=2)
    writes["dask, a file per partition"] = lambda u: idv.dask.to_idv(frame, u)
    writes["dask, one file"] = lambda u: idv.dask.to_idv(frame, u + "one.idv")
    for url in ("s3://bucket/dir/", "https://example.com/d/", "simplecache::s3://b/d/"):
        for name, write in writes.items():
            with pytest.raises(ValueError, match=r"idv writes local files, not URLs; .*fs\.put"):
                write(url)
    assert os.listdir(tmp_path) == []
    from cli_run import run_main
    rc, out, err = run_main("convert", idv.sample_path(), "s3://b/o.csv", cwd=tmp_path)
    assert rc == 2 and err.startswith("idv: error: cannot write 's3://b/o.csv': idv writes")
