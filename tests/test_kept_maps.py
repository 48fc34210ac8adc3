"""A closed file's memory map kept for the next open of the same file (idv._storage.kept_maps):
taken back only by the same file at the same size, its bytes the file's as they are now,
dropped when it expires, beyond the count kept, under an address-space limit, and when the
descriptors they hold are needed."""
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import idv
from idv._storage import kept_maps, source

ROWS = 20_000          # 160 KB of Double: mapped, not read whole


@pytest.fixture(autouse=True)
def no_kept_maps():
    kept_maps.drop_all()
    yield
    kept_maps.drop_all()


def _write(path, start):
    idv.write(path, {"x": np.arange(start, start + ROWS, dtype=np.float64)},
              compression="none")
    assert os.path.getsize(path) > source.SMALL_FILE_BYTES


def _key(path):
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def test_a_reopened_file_takes_its_kept_map_back(tmp_path):
    p = tmp_path / "a.idv"
    _write(p, 0)
    with idv.open(p) as f:
        assert f["x"][5] == 5
    assert list(kept_maps._KEPT) == [_key(p)]
    mm = kept_maps._KEPT[_key(p)][0]
    with idv.open(p) as f:
        assert not kept_maps._KEPT            # taken
        assert f["x"][7] == 7
    assert kept_maps._KEPT[_key(p)][0] is mm and not mm.closed


def test_a_file_written_in_place_reads_its_new_bytes(tmp_path):
    """Same inode, same size, other values: a new map when the write moved the modification
    time, else the kept one, which shows the page cache as it is now."""
    p = tmp_path / "a.idv"
    _write(p, 0)
    for start, same_time in ((1_000_000, False), (2_000_000, True)):
        other = tmp_path / f"other{start}.idv"
        _write(other, start)
        with idv.open(p) as f:
            f["x"][0]
        st = os.stat(p)
        key = _key(p)
        with open(p, "r+b") as out:                 # in place: the inode stays
            out.write(other.read_bytes())
        # the modification time moved, or not (a write within one tick of the file's clock)
        moved = st.st_mtime_ns + (0 if same_time else 10**9)
        os.utime(p, ns=(st.st_atime_ns, moved))
        assert (_key(p) == key) == same_time and key in kept_maps._KEPT
        with idv.open(p) as f:
            assert (key in kept_maps._KEPT) != same_time    # taken back only when the same
            np.testing.assert_array_equal(f["x"].read(), np.arange(start, start + ROWS))


def test_a_file_put_in_place_or_of_another_size_is_mapped_anew(tmp_path):
    p, q = tmp_path / "a.idv", tmp_path / "b.idv"
    _write(p, 0)
    with idv.open(p) as f:
        f["x"][0]
    old = kept_maps._KEPT[_key(p)][0]
    _write(q, 500)
    os.replace(q, p)                            # a new inode
    with idv.open(p) as f:
        assert f["x"][0] == 500
    idv.write(p, {"x": np.arange(ROWS + 10, dtype=np.float64)}, compression="none")
    with idv.open(p) as f:
        assert f.num_rows == ROWS + 10
    assert list(kept_maps._KEPT)[-1] == _key(p) and kept_maps._KEPT[_key(p)][0] is not old


def test_kept_maps_expire_and_are_closed(tmp_path, monkeypatch):
    monkeypatch.setattr(kept_maps, "KEEP_SECONDS", 0.05)
    p = tmp_path / "a.idv"
    _write(p, 0)
    with idv.open(p) as f:
        f["x"][0]
    mm = kept_maps._KEPT[_key(p)][0]
    deadline = time.monotonic() + 10
    while kept_maps._KEPT and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not kept_maps._KEPT and mm.closed


def test_at_most_max_maps_are_kept_the_oldest_closed_first(tmp_path):
    paths = [tmp_path / f"p{i}.idv" for i in range(kept_maps.MAX_MAPS + 2)]
    maps = []
    for i, p in enumerate(paths):
        _write(p, i)
        with idv.open(p) as f:
            f["x"][0]
        maps.append(kept_maps._KEPT[_key(p)][0])
    assert list(kept_maps._KEPT) == [_key(p) for p in paths[2:]]
    assert maps[0].closed and maps[1].closed and not maps[2].closed


def test_no_map_is_kept_under_an_address_space_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(kept_maps.budget, "address_space_room", lambda: 1 << 30)
    p = tmp_path / "a.idv"
    _write(p, 0)
    with idv.open(p) as f:
        f["x"][0]
    assert not kept_maps._KEPT


def test_a_zero_copy_array_outlives_its_kept_map(tmp_path, monkeypatch):
    monkeypatch.setattr(kept_maps, "KEEP_SECONDS", 0.01)
    p = tmp_path / "a.idv"
    _write(p, 0)
    t = idv.to_arrow(p)
    deadline = time.monotonic() + 10
    while kept_maps._KEPT and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not kept_maps._KEPT
    np.testing.assert_array_equal(t.column("x").to_numpy(), np.arange(ROWS))


@pytest.mark.skipif(os.name != "posix", reason="RLIMIT_NOFILE is POSIX's")
def test_descriptors_held_by_kept_maps_are_given_back_when_needed(tmp_path):
    """Under a descriptor limit that the kept maps fill (each holds one where CPython's maps
    keep a descriptor), the next open drops them rather than failing."""
    for i in range(kept_maps.MAX_MAPS + 1):
        _write(tmp_path / f"p{i}.idv", i)
    script = textwrap.dedent(f"""
        import os, resource, idv
        from idv._storage import kept_maps
        paths = [os.path.join({str(tmp_path)!r}, f"p{{i}}.idv") for i in range(9)]
        for p in paths[:8]:
            with idv.open(p) as f:
                f["x"][0]
        used = len(os.listdir("/proc/self/fd"))     # with the listing's own
        resource.setrlimit(resource.RLIMIT_NOFILE, (used - 1, resource.getrlimit(
            resource.RLIMIT_NOFILE)[1]))
        with idv.open(paths[8]) as f:
            assert f["x"][0] == 8
        print("ok", len(kept_maps._KEPT))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    # where maps hold descriptors, the open had to drop the 8 kept: only its own is left
    assert out.stdout.split() == ["ok", "1" if source.MAPS_HOLD_DESCRIPTORS else "9"]
