"""Installs beyond Linux: the build that needs only a C compiler (zlib's work done by Python's
zlib module when zlib's headers are missing), and the portable fallback of each Linux-only
path, forced here by taking the capability away."""
import os
import shutil
import subprocess
import sys
import sysconfig
import zlib
from pathlib import Path

import numpy as np
import pytest

import idv
from idv import _compression, compression
from idv._resources import threads as _threads, budget
from idv._storage import sink

try:
    from numpy._core.multiarray import get_handler_name
except ImportError:         # numpy 1
    from numpy.core.multiarray import get_handler_name

ROOT = Path(__file__).resolve().parents[1]


def _samples():
    rng = np.random.default_rng(7)
    for n in (0, 1, 5000, 65535, 65536, 140_000):
        yield rng.integers(0, 256, n, np.uint8).tobytes()
        yield np.arange(n // 8, dtype=np.float64).tobytes()


@pytest.mark.skipif(not _compression.ZLIB_C, reason="zlib's C API is not built in")
def test_python_zlib_deflates_the_bytes_of_zlibs_c_api():
    """What a build without zlib's headers writes, level 0's stored blocks included."""
    for data in _samples():
        for level in (-1, 0, 1, 4, 6, 9):
            assert _compression._py_deflate(data, level) == _compression.deflate_raw(data, level)


def test_backends_say_what_runs_them():
    runs = compression.backends()
    assert list(runs) == compression.installed()
    assert runs["zlib"] == ("zlib's C API, the GIL released" if _compression.ZLIB_C else
                            "Python's zlib module (idv was built without zlib's headers)")


# ---- the build without zlib's headers -------------------------------------------------------

# run in the copy built without zlib: argv[1] the copy, argv[2] the files the normal build
# wrote (one file per level), argv[3] this folder
CHILD = r"""
import sys, zlib
from pathlib import Path
import idv, idv.compression
from idv import _compression
from idv._storage import checksums

tree, made = Path(sys.argv[1]), Path(sys.argv[2])
sys.path.insert(0, sys.argv[3])
from test_portable import _data, _messages     # the normal build's data and checks
assert Path(idv.__file__).parent == tree / "idv", idv.__file__
assert not _compression.ZLIB_C
assert idv.compression.backends()["zlib"].startswith("Python's zlib module")
data = _data()
for level in (0, 1, 6, 9):
    ours = made / f"ours{level}.idv"
    idv.write(ours, data, backend="zlib", level=level, rows_per_block=1000)
    assert ours.read_bytes() == (made / f"level{level}.idv").read_bytes(), level
    with idv.open(made / f"level{level}.idv", backend="zlib", checksums=True) as f:
        back = f.read()
    for k in data:
        assert back[k].tolist() == data[k].tolist(), k
blob = (made / "zlib-wrapped").read_bytes()
for library in _compression.crc32_libraries():
    assert _compression.crc32_of(blob, library) == zlib.crc32(blob)
assert "zlib" in _compression.crc32_libraries()
assert checksums.crc(blob) == zlib.crc32(blob)
print("\n".join(_messages(made)))
"""


def _compiler():
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc)


@pytest.fixture(scope="module")
def no_zlib_tree(tmp_path_factory):
    """A copy of the package whose zlib modules were built with IDV_NO_ZLIB=1 (the others are
    this tree's, already built)."""
    pytest.importorskip("Cython")
    if _compiler() is None or not (ROOT / "setup.py").exists():
        pytest.skip("needs the source tree and a C compiler")
    tree = tmp_path_factory.mktemp("no-zlib")
    shutil.copy2(ROOT / "setup.py", tree)
    # the two modules' built files left out (their sources and .c come along); the
    # others' kept with their times, so setup.py leaves them as they are
    shutil.copytree(ROOT / "idv", tree / "idv",
                    ignore=shutil.ignore_patterns("__pycache__", "_compression.*.*",
                                                  "_parts.*.*"))
    # unoptimized: the build is tested, not timed (2 s a module, 10 s at -O3)
    env = dict(os.environ, IDV_NO_ZLIB="1", IDV_MODULES="idv._compression,idv._parts",
               IDV_OPTIMIZE="-O0")
    built = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "-q",
                            "--parallel", "2"], cwd=tree, env=env, capture_output=True,
                           text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    assert "-DIDV_HAVE_ZLIB=0" in built.stdout        # the compiler's command line
    compiles = [line.split() for line in built.stdout.splitlines() if " -c " in line]
    assert compiles and all([f for f in c if f.startswith("-O")][-1] == "-O0"
                            for c in compiles)      # the last -O given wins
    return tree


def _data():
    return {"x": np.arange(5000, dtype=np.float64) / 7,
            "k": np.random.default_rng(3).integers(0, 5, 5000).astype(np.int32),
            "t": np.array([f"text {i % 97}" for i in range(5000)], dtype=object)}


def _messages(made):
    """How the build this runs in inflates a zlib stream into too much, just enough and too
    little room, and what it says of the corrupt files in `made`."""
    blob = (made / "zlib-wrapped").read_bytes()
    lines = [str(_compression.inflate_blocks(2, blob, np.array([0]), np.array([len(blob)],
             np.int32), np.array([n], np.int32), np.zeros(n + 1, np.uint8), np.array([0]), 0))
             for n in (65536, 65535, 65537)]
    for bad in sorted(made.glob("bad*.idv")):
        try:
            with idv.open(bad, backend="zlib", checksums=bad.name.startswith("bad-crc")) as f:
                f.read()
            lines.append(f"{bad.name} read")
        except Exception as e:
            lines.append(f"{bad.name} {type(e).__name__} {e}")
    return lines


def test_a_build_without_zlib_writes_and_reads_the_same_bytes(no_zlib_tree, tmp_path):
    """Byte-identical files with backend="zlib" at every kind of level, the same values read
    back with checksums, the same CRC-32s, and the same verdicts on corrupt blocks."""
    so = next((no_zlib_tree / "idv").glob("_compression.*"))
    if sys.platform.startswith("linux"):
        binary = so.read_bytes()
        assert b"libz.so" not in binary and b"inflateInit2_" not in binary
    data = _data()
    for level in (0, 1, 6, 9):
        idv.write(tmp_path / f"level{level}.idv", data, backend="zlib", level=level,
                  rows_per_block=1000)
    (tmp_path / "zlib-wrapped").write_bytes(zlib.compress(bytes(65536)))
    good = bytearray((tmp_path / "level6.idv").read_bytes())
    with idv.open(tmp_path / "level6.idv") as f:
        start = int(f.columns[0].lookup["offset"][1])
    for name, at in (("bad-crc", start + 3), ("bad-data", start + 3), ("bad-short", None)):
        bad = bytearray(good)
        if at is None:
            bad[start:start + 40] = bytes(40)
        else:
            bad[at] ^= 0xFF
        (tmp_path / f"{name}.idv").write_bytes(bad)
    child = subprocess.run([sys.executable, "-c", CHILD, str(no_zlib_tree), str(tmp_path),
                            str(Path(__file__).parent)],
                           cwd=no_zlib_tree, env=dict(os.environ, PYTHONPATH=str(no_zlib_tree)),
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.splitlines() == _messages(tmp_path)


# ---- Linux-only paths, their fallbacks forced ----------------------------------------------

def test_threads_without_cpu_affinity(monkeypatch):
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert _threads.default_threads() == (os.cpu_count() or 1)


def test_memory_limit_without_proc_cgroup_resource_or_sysconf(tmp_path, monkeypatch):
    """Windows and macOS: none of the system's limits are found; the limit is the file's."""
    import builtins
    real_open = builtins.open

    def no_proc(path, *args, **kwargs):
        if str(path).startswith(("/proc/", "/sys/")):
            raise OSError("not here")
        return real_open(path, *args, **kwargs)
    monkeypatch.setattr(builtins, "open", no_proc)
    monkeypatch.setattr(budget, "resource", None)
    monkeypatch.delattr(os, "sysconf")
    monkeypatch.setattr(budget, "_system", (None, None, None))
    assert budget._system_limits() == []
    assert budget.address_space_room() is None and budget.cgroup_room() is None
    path = tmp_path / "a.idv"
    idv.write(path, {"x": np.arange(10.0)})
    assert budget.default_limit(path.stat().st_size) == 1 << 30     # the floor
    assert idv.read(path)["x"].tolist() == list(np.arange(10.0))


class _Kernel32:
    """Windows' process calls, as sink's Windows path makes them."""

    def __init__(self, alive):
        self.alive, self.closed = alive, []

    def OpenProcess(self, access, inherit, pid):
        return 0 if pid not in self.alive else 100 + pid

    def GetLastError(self):
        return 87

    def GetExitCodeProcess(self, handle, code):
        code._obj.value = self.alive[handle - 100]
        return 1

    def CloseHandle(self, handle):
        self.closed.append(handle)


def test_a_dead_writer_is_found_without_os_kill_on_windows(tmp_path, monkeypatch):
    """os.kill(pid, 0) would end the process on Windows: the Windows path asks instead."""
    kernel32 = _Kernel32({7: 259, 8: 0})      # 7 running, 8 exited, 9 unknown
    assert [sink._windows_process_gone(p, kernel32) for p in (7, 8, 9)] == [False, True, True]
    assert kernel32.closed == [107, 108]

    def no_kill(*args):
        raise AssertionError("os.kill on Windows")
    monkeypatch.setattr(os, "kill", no_kill)
    monkeypatch.setattr(sink, "_WINDOWS", True)
    monkeypatch.setattr(sink, "_windows_process_gone", lambda pid: pid == 8)
    for pid in (7, 8):
        (tmp_path / f".out.idv.{sink._HOST}.{pid}.abcdabcd.idv-tmp").write_bytes(b"x")
    assert sink.remove_stale(str(tmp_path), "out.idv") == 1
    assert [p.name.split(".")[-3] for p in tmp_path.iterdir()] == ["7"]


def test_commit_without_chmod_by_descriptor_and_nothing_open_at_the_rename(tmp_path,
                                                                           monkeypatch):
    """Windows: os.chmod takes no descriptor, and a file still open cannot be renamed."""
    monkeypatch.setattr(sink, "_O_TMPFILE", None)
    monkeypatch.setattr(sink, "_CHMOD_BY_FD", False)
    real_chmod, real_replace, fds = os.chmod, os.replace, []

    def chmod(target, mode, **kw):
        assert not isinstance(target, int)
        return real_chmod(target, mode, **kw)

    def replace(src, dst):
        with pytest.raises(OSError):
            os.fstat(fds[0])           # the temporary file's descriptor is closed
        return real_replace(src, dst)
    monkeypatch.setattr(os, "chmod", chmod)
    monkeypatch.setattr(os, "replace", replace)
    dest = tmp_path / "out.idv"
    atomic = sink.AtomicPath(str(dest))
    fds.append(atomic.fd)
    with atomic.open() as f:
        f.write(b"hello")
    atomic.commit()
    assert dest.read_bytes() == b"hello" and os.listdir(tmp_path) == ["out.idv"]
    if os.name == "posix":
        assert dest.stat().st_mode & 0o777 == sink.new_file_mode(str(tmp_path))


def test_write_without_early_writeback(tmp_path, monkeypatch):
    """sync_file_range is Linux's: elsewhere start_writeback says False and the write goes
    on to its fsync."""
    calls = []
    monkeypatch.setattr(sink._encode, "start_writeback", lambda *a: calls.append(a) or False)
    monkeypatch.setattr(sink, "_WRITEBACK_CHUNK", 1 << 10)
    path = tmp_path / "a.idv"
    idv.write(path, {"x": np.arange(50_000.0)}, compression="none")
    assert calls and idv.read(path)["x"].tolist() == list(np.arange(50_000.0))


def test_reads_without_prefetch_or_huge_pages(tmp_path, monkeypatch):
    """posix_madvise and MADV_HUGEPAGE are compiled only where they exist: off, the same
    values come back in ordinary arrays."""
    path = tmp_path / "a.idv"
    x = np.arange(_compression.HUGE_MIN // 8 + 4096, dtype=np.float64)
    idv.write(path, {"x": x}, backend="zlib")
    monkeypatch.setattr(_compression, "_HUGE_HANDLER", None)
    old = _compression.set_prefetch(False)
    try:
        with idv.open(path, backend="zlib") as f:
            got = f.read()["x"]
    finally:
        _compression.set_prefetch(old)
    assert np.array_equal(got, x)
    big = _compression.empty(8 << 20, np.uint8)
    assert big.flags.owndata and get_handler_name(big) != "idv_huge_pages"


def test_libdeflate_without_its_c_api(monkeypatch):
    """Where libdeflate's symbols cannot be looked up (Windows), its Python functions compress:
    the same bytes as its C API."""
    if not compression.BACKENDS["libdeflate"].installed:
        pytest.skip("the deflate package is not installed")
    import deflate
    data = np.arange(100_000, dtype=np.float64).tobytes()
    by_c = compression.backend("libdeflate").compress(6)(data)
    monkeypatch.setattr(_compression, "LIBDEFLATE_COMPRESS", False)
    by_python = compression.backend("libdeflate").compress(6)(data)
    assert by_python == bytes(deflate.deflate_compress(data, 6))
    assert zlib.decompress(by_python, -15) == zlib.decompress(by_c, -15) == data
