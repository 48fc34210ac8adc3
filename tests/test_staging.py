"""A job's files appear together: the engines' writers (Ray, Spark, Dask) publish a directory's
list of files (idv._storage.staging.MANIFEST) in one atomic step once every file is in place, and
idv.dataset reads exactly that list, so a reader sees the old set or the new one: a job killed
at any point while it moves its files in leaves the old set, and an overwrite removes the old
files only once the new list names the new ones."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import idv
from idv._storage import staging
from reference import REPO_DIR


def _job(out, names, replace, tmp):
    """A job's files staged and committed (in this process): copies of one small .idv."""
    template = tmp / "template.idv"
    if not template.exists():
        idv.write(template, {"x": np.arange(10)})
    data = template.read_bytes()
    s = staging.Staging(out, replace=replace)
    s.start()
    for name in names:
        with open(s.staged(name), "wb") as f:
            f.write(data)
    return s.commit(names)


def _set(out):
    with idv.dataset(out) as ds:
        return sorted(os.path.basename(f.path) for f in ds.files)


def test_append_and_overwrite_publish_one_list(tmp_path):
    out = tmp_path / "out"
    _job(out, ["a-1.idv", "a-2.idv"], False, tmp_path)
    assert _set(out) == ["a-1.idv", "a-2.idv"]
    _job(out, ["b-1.idv"], False, tmp_path)                 # append: both sets
    assert _set(out) == ["a-1.idv", "a-2.idv", "b-1.idv"]
    idv.write(out / "by-hand.idv", {"x": np.arange(3)})     # not listed: not read
    assert "by-hand.idv" not in _set(out)
    _job(out, ["c-1.idv"], True, tmp_path)                  # overwrite: the new set alone
    assert _set(out) == ["c-1.idv"]
    assert not (out / "a-1.idv").exists() and not (out / "b-1.idv").exists()
    listed = json.loads((out / staging.MANIFEST).read_text())["files"]
    assert listed == ["c-1.idv"]


def test_a_bad_manifest_is_a_clear_error(tmp_path):
    (tmp_path / staging.MANIFEST).write_text('{"files": ["../escape.idv"]}')
    with pytest.raises(ValueError, match="not a list of the directory's files"):
        idv.dataset(tmp_path)


def test_a_list_the_disk_refuses_leaves_nothing_and_names_the_list(tmp_path, monkeypatch):
    """A full disk while the new list is written: the old list kept, no hidden temporary
    list left behind (its name is random: no later write removed it), the error naming the
    list (it named no file)."""
    idv.write(tmp_path / "d", {"k": [1], "x": [1.0]}, partition_by="k")
    before = sorted(os.listdir(tmp_path / "d"))
    old = (tmp_path / "d" / staging.MANIFEST).read_bytes()
    real = os.fsync

    def full(fd):
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")).startswith(
                "." + staging.MANIFEST):
            raise OSError(28, "No space left on device")
        return real(fd)
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as e:
        idv.write(tmp_path / "d", {"k": [2], "x": [2.0]}, partition_by="k")
    assert e.value.filename == str(tmp_path / "d" / staging.MANIFEST)
    monkeypatch.setattr(os, "fsync", real)
    assert sorted(os.listdir(tmp_path / "d")) == before
    assert (tmp_path / "d" / staging.MANIFEST).read_bytes() == old


def test_a_directory_that_refuses_the_staging_folder_is_named(tmp_path, monkeypatch):
    """A read-only output directory: the PermissionError names it, not the hidden staging
    folder the job tried to make there."""
    real = os.makedirs

    def refused(path, *args, **kwargs):
        if os.path.basename(path).startswith(staging.STAGING_PREFIX):
            raise PermissionError(13, "Permission denied", path)
        return real(path, *args, **kwargs)
    monkeypatch.setattr(os, "makedirs", refused)
    (tmp_path / "out").mkdir()
    with pytest.raises(PermissionError) as e:
        idv.write(tmp_path / "out", {"k": [1], "x": [1.0]}, partition_by="k")
    assert e.value.filename == str(tmp_path / "out")


def test_tasks_write_through_the_helper_and_a_task_without_rows_writes_nothing(tmp_path):
    out = tmp_path / "out"
    s = staging.Staging(out, "p-{task}.idv")
    s.start()

    def write(path):
        idv.write(path, {"x": np.arange(3)})

    def never(path):
        raise AssertionError("a task without rows wrote a file")
    results = [s.write(0, write), s.write(1, never, rows=0), s.write(2, write, rows=3)]
    assert results == ["p-0.idv", None, "p-2.idv"]
    assert s.commit(results) == [str(out / "p-0.idv"), str(out / "p-2.idv")]
    assert sorted(os.listdir(out)) == sorted([staging.MANIFEST, "p-0.idv", "p-2.idv"])


def test_a_name_function_runs_on_the_driver_and_names_each_task_once(tmp_path):
    calls = []

    def name(i):
        calls.append(i)
        return f"sub/q{i}.idv"
    s = staging.Staging(tmp_path, name)
    assert s.fix_names(2) == [os.path.join("sub", "q0.idv"), os.path.join("sub", "q1.idv")]
    assert s.name(1) == os.path.join("sub", "q1.idv") and calls == [0, 1]
    with pytest.raises(ValueError, match="more than one task"):
        staging.Staging(tmp_path, lambda i: "same.idv").fix_names(2)
    with pytest.raises(ValueError, match="inside the output directory"):
        staging.Staging(tmp_path, lambda i: f"../q{i}.idv").fix_names(1)
    with pytest.raises(ValueError, match="one file name per task"):
        staging.Staging(tmp_path, "fixed.idv")


def _staged(out, files, replace=False):
    """A started Staging with `files` ({name: x values}) staged."""
    s = staging.Staging(out, replace=replace)
    s.start()
    for name, x in files.items():
        idv.write(s.staged(name), {"x": np.asarray(x, np.float64)})
    return s


def _rows(out):
    """What a reader of `out` reads (sorted), None for nothing."""
    try:
        with idv.dataset(out) as ds:
            return sorted(ds.read()["x"].tolist())
    except FileNotFoundError:
        return None


def _watched(monkeypatch, out, commit):
    """What a reader sees after each rename, link and removal while `commit` runs: the
    states a job killed there would leave."""
    seen = []

    def watch(real):
        def op(*args, **kwargs):
            result = real(*args, **kwargs)
            seen.append(_rows(out))
            return result
        return op
    for name in ("replace", "link", "remove"):
        monkeypatch.setattr(os, name, watch(getattr(os, name)))
    commit()
    monkeypatch.undo()
    return seen


@pytest.mark.parametrize("replace", [False, True])
def test_a_reader_sees_the_old_set_or_the_new_at_each_step_of_a_commit(
        tmp_path, monkeypatch, replace):
    """Into a new directory (nothing readable, then the new set), and over files of the same
    names as the new ones, which the old list names."""
    new = tmp_path / "new"
    s = _staged(new, {"a.idv": [1], "sub/b.idv": [2]}, replace)
    seen = _watched(monkeypatch, new, lambda: s.commit(["a.idv", "sub/b.idv"]))
    assert len(seen) > 2 and set(map(str, seen)) == {"None", "[1.0, 2.0]"}
    assert seen[-1] == [1.0, 2.0]
    out = tmp_path / "out"
    _staged(out, {"k=1/p.idv": [10], "k=2/p.idv": [20]}).commit(["k=1/p.idv", "k=2/p.idv"])
    s = _staged(out, {"k=1/p.idv": [-1], "k=3/p.idv": [-3]}, replace)
    seen = _watched(monkeypatch, out, lambda: s.commit(["k=1/p.idv", "k=3/p.idv"]))
    old, now = [10.0, 20.0], ([-3.0, -1.0] if replace else [-3.0, -1.0, 20.0])
    assert seen[0] == old and seen[-1] == now and set(map(str, seen)) == {str(old), str(now)}
    listed = json.loads((out / staging.MANIFEST).read_text())["files"]
    assert listed == sorted(["k=1/p.idv", "k=3/p.idv"] + ([] if replace else ["k=2/p.idv"]))
    assert [d for d in os.listdir(out) if d.startswith(".")] == []


def test_a_commit_stopped_after_its_list_names_the_new_files_is_finished_by_the_next(
        tmp_path, monkeypatch):
    """The new file of a taken name waits in a hidden folder that the list names: the data
    is the new set, and the next commit moves it to its name."""
    out = tmp_path / "out"
    _staged(out, {"a.idv": [1], "b.idv": [2]}).commit(["a.idv", "b.idv"])

    def fail(*args, **kwargs):
        raise OSError("no links, no copies")
    s = _staged(out, {"a.idv": [-1]})
    monkeypatch.setattr(os, "link", fail)
    monkeypatch.setattr(staging.shutil, "copyfile", fail)
    paths = s.commit(["a.idv"])
    monkeypatch.undo()
    assert _rows(out) == [-1.0, 2.0] and os.path.exists(paths[0])
    assert os.path.basename(os.path.dirname(paths[0])).startswith(staging.NEW_PREFIX)
    _staged(out, {"c.idv": [3]}).commit(["c.idv"])
    assert _rows(out) == [-1.0, 2.0, 3.0]
    assert json.loads((out / staging.MANIFEST).read_text())["files"] == \
        ["a.idv", "b.idv", "c.idv"]
    assert [d for d in os.listdir(out) if d.startswith(".")] == []


def _in_order(out):
    """What a reader of `out` reads, in its order."""
    with idv.dataset(out) as ds:
        return ds.read()["x"].tolist()


def test_a_dataset_reads_the_files_in_the_order_they_were_written(tmp_path):
    """The list keeps the tasks' order (part.10 after part.9, not after part.1), an append
    comes after the files before it, and a file replaced keeps its place: a dataset's rows
    are in the order they were written in, whatever the names."""
    out = tmp_path / "out"
    names = [f"part.{i}.idv" for i in range(12)]
    _staged(out, {n: [i] for i, n in enumerate(names)}).commit(names)
    assert _in_order(out) == list(range(12))
    _staged(out, {"c.idv": [12], "b.idv": [13], "a.idv": [14]}).commit(
        ["c.idv", "b.idv", "a.idv"])
    assert _in_order(out) == list(range(15))
    _staged(out, {"part.3.idv": [-3], "z.idv": [15]}).commit(["part.3.idv", "z.idv"])
    assert _in_order(out) == [0, 1, 2, -3] + list(range(4, 16))
    assert [d for d in os.listdir(out) if d.startswith(".")] == []


def test_a_dataset_opened_while_a_job_commits_lists_again(tmp_path, monkeypatch):
    """A reader that read the directory's list just before a job replaced files of the same
    names (an overwrite) would open the job's new files under the old list, and miss those
    it removed: the list changed by the time its files are open, so it lists again and reads
    the new set."""
    from idv._reader import dataset as dataset_module
    out = tmp_path / "out"
    _staged(out, {"a.idv": [1], "b.idv": [2]}).commit(["a.idv", "b.idv"])
    job = _staged(out, {"a.idv": [-1], "c.idv": [-3]}, replace=True)
    expand = dataset_module.expand_sources
    listings = []

    def listed_then_committed(*args, **kwargs):
        found = expand(*args, **kwargs)
        listings.append(found[0])
        if len(listings) == 1:
            job.commit(["a.idv", "c.idv"])
        return found
    monkeypatch.setattr(dataset_module, "expand_sources", listed_then_committed)
    assert _in_order(out) == [-1, -3]
    assert [os.path.basename(p) for p in listings[0]] == ["a.idv", "b.idv"]
    assert len(listings) == 2


def test_a_filesystem_without_locks_still_commits(tmp_path, monkeypatch):
    """An NFS mount without its lock service refuses flock (ENOLCK): a job still commits
    there, its commits not serialized, rather than fail."""
    import errno
    import fcntl

    def refused(fd, how):
        raise OSError(errno.ENOLCK, "No locks available")
    monkeypatch.setattr(fcntl, "flock", refused)
    out = tmp_path / "out"
    _staged(out, {"a.idv": [1], "b.idv": [2]}).commit(["a.idv", "b.idv"])
    assert _in_order(out) == [1, 2]


APPENDS = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    import idv
    from idv._storage import staging
    out, me = sys.argv[2], int(sys.argv[3])
    for i in range(int(sys.argv[4])):
        s = staging.Staging(out)
        s.start()
        name = f"p{me}-{i:03d}.idv"
        idv.write(s.staged(name), {"x": np.array([me * 1000 + i], np.float64)})
        s.commit([name])
""")


def test_appends_committed_at_once_from_several_processes_are_all_listed(tmp_path):
    """Three processes appending to one directory: each commit lists the files the others
    published (commits take turns), so every file written is read."""
    out = tmp_path / "out"
    out.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", APPENDS, str(REPO_DIR), str(out), str(p),
                               "25"]) for p in range(3)]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    assert sorted(_in_order(out)) == sorted(p * 1000 + i for p in range(3) for i in range(25))


def test_a_commit_left_half_done_leaves_no_link_nor_folder_behind(tmp_path, monkeypatch):
    """A job stopped after linking its new file over the old name, before its last list:
    the next commit finishes it without leaving the temporary link (a rename onto the same
    file does nothing) nor the hidden folder behind; so does one stopped after its last list,
    before it removed its hidden folder."""
    out = tmp_path / "out"
    _staged(out, {"a.idv": [1]}).commit(["a.idv"])
    real = staging.write_manifest
    calls = []

    def stop_at_the_last_list(path, names):
        calls.append(names)
        if len(calls) == 2:         # the list of plain names: the links are made
            raise KeyboardInterrupt
        real(path, names)
    monkeypatch.setattr(staging, "write_manifest", stop_at_the_last_list)
    with pytest.raises(KeyboardInterrupt):
        _staged(out, {"a.idv": [-1]}).commit(["a.idv"])
    monkeypatch.undo()
    _staged(out, {"b.idv": [2]}).commit(["b.idv"])
    assert _in_order(out) == [-1, 2]
    assert [d for d in os.listdir(out) if d.startswith(".")] == []
    rmtree = staging.shutil.rmtree
    monkeypatch.setattr(staging.shutil, "rmtree", lambda path, **kw: None if staging.NEW_PREFIX
                        in os.fspath(path) else rmtree(path, **kw))
    _staged(out, {"a.idv": [-2]}).commit(["a.idv"])          # its hidden folder stays
    monkeypatch.undo()
    assert any(d.startswith(staging.NEW_PREFIX) for d in os.listdir(out))
    _staged(out, {"c.idv": [3]}).commit(["c.idv"])
    assert _in_order(out) == [-2, 2, 3]
    assert [d for d in os.listdir(out) if d.startswith(".")] == []


KILLED = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[3])
    from idv._storage import staging
    out, n, template = sys.argv[1], int(sys.argv[2]), sys.argv[4]
    data = open(template, "rb").read()
    s = staging.Staging(out, replace=True)
    s.start()
    names = [f"new-{i:03d}.idv" for i in range(n)]
    for name in names:
        with open(s.staged(name), "wb") as f:
            f.write(data)
    print("ready", flush=True)
    sys.stdin.readline()
    s.commit(names)
    print("done", flush=True)
""")


@pytest.mark.slow
def test_a_job_killed_while_it_commits_leaves_the_old_set_or_the_new(tmp_path):
    rng = random.Random(5)
    old = [f"old-{i:03d}.idv" for i in range(20)]
    new = [f"new-{i:03d}.idv" for i in range(20)]
    seen = set()
    for run in range(20):
        out = tmp_path / f"run{run}"
        _job(out, old, True, tmp_path)
        child = subprocess.Popen([sys.executable, "-c", KILLED, str(out), "20", str(REPO_DIR),
                                  str(tmp_path / "template.idv")],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready"
        child.stdin.write("go\n")
        child.stdin.flush()
        time.sleep(rng.uniform(0, 0.03))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        got = _set(out)
        assert got in (old, new), (run, got[:3], len(got))
        seen.add(tuple(got) == tuple(new))
    assert seen, "no run was checked"
