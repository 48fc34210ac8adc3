"""A job's output files that appear together or not at all: the engines' directory writers
(Dask's ``to_idv`` per partition, Ray's IdvDatasink, Spark's ``format("idv")``) and
``idv.write(..., partition_by=)`` each translate their protocol into the calls of one
``Staging``: ``start`` on the driver, ``write`` in each task (its file, named and staged),
``commit`` once every task has succeeded, ``abort`` when one failed.

Moving many files in is not one step, so the directory's list of files is: ``MANIFEST``
(``_idv_files.json``), the names of the files that make up the directory's data, replaced
atomically once every file of the job is in place, and honoured by idv.dataset (idv._storage.paths)
instead of the ``*.idv`` it finds. A reader sees the old set or the new one, never a mix: a
commit first lists the old set where no list was (an empty one in a new directory), so that
nothing it moves in is read before the new list names it; a new file whose name is taken
(listed, or on disk) waits in ``.idv-new-<job>`` under the same relative name, the new list
names it there, and only then is it linked (or copied) over the old file and the list renamed
to the plain names (a list that still names ``.idv-new-`` files, left by a job killed in
between, is complete: the next commit finishes it); an overwrite removes the old files only
after the new list names the new ones. A commit that fails before its list is published
removes what it moved in and the folders it made: the directory is as it was. The list keeps
the order the files were written in (idv._storage.staging._in_order), and commits into one
directory take turns (a lock on it), so that concurrent appends each list the other's files.

Staged files end in ``.idv-staged`` inside ``.idv-staging-<job>``: what a killed job leaves is
neither a ``*.idv`` nor picked up by idv.dataset (remove the folder to reclaim its space).
Each staged file is itself written atomically (idv._storage.sink), so a task that fails half-way
leaves no partial file even in the staging folder.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import uuid

from idv._storage.destination import local_path
from idv._storage.sink import fsync_dir, naming

MANIFEST = "_idv_files.json"
STAGED_SUFFIX = ".idv-staged"
LIVE = "live"          # in the staging folder while the job may still commit
STAGING_PREFIX = ".idv-staging-"
NEW_PREFIX = ".idv-new-"   # a job's files whose names were taken, until listed by those names
# each task's file by default: its number and the job's id, so that appends never collide
DEFAULT_NAME = "part-{task:05d}-{job}.idv"


def check_name_pattern(pattern):
    """ValueError unless `pattern` gives each task its own file name: a str.format pattern of
    ``{task}`` (a number) and optionally ``{job}`` (the job's id), without a folder."""
    try:
        first, second = (pattern.format(task=i, job="j") for i in (0, 1))
    except (KeyError, IndexError, ValueError, AttributeError) as e:
        raise ValueError(f"the name pattern must use {{task}} (and may use {{job}}), as "
                         f"'part-{{task:05d}}.idv', not {pattern!r}: {e}") from None
    if first == second or "/" in first or os.sep in first:
        raise ValueError(f"the name pattern must give one file name per task ({{task}}), "
                         f"without a folder, not {pattern!r}")


def _inside(name, task):
    """A name_function's name for `task`, normalized: ValueError unless it is a relative path
    that stays inside the output directory."""
    name = os.fspath(name)
    norm = os.path.normpath(name)
    if not name or os.path.isabs(name) or os.path.splitdrive(name)[0] or \
            norm == os.curdir or norm.split(os.sep)[0] == os.pardir:
        raise ValueError(f"name_function({task}) gave {name!r}: a task's file must be a "
                         f"relative path inside the output directory")
    return norm


class Staging:
    """One job writing one file per task into the directory ``path``, its files published
    together. On the driver: ``start`` before any task, ``commit`` with the tasks' results
    once all have succeeded, ``abort`` when one failed. In a task: ``write``. Picklable (tasks
    receive it).

    ``name``: each task's file name, a str.format pattern of ``{task}`` (the task's number)
    and ``{job}`` (this job's id), without a folder (check_name_pattern); or a function of the
    task's number (``name_function``), whose names may hold folders but stay inside ``path``.
    ``replace``: the commit makes the job's files the directory's only ones (an overwrite);
    else it adds them to those listed (an append)."""

    def __init__(self, path, name=DEFAULT_NAME, *, replace=False, job=None):
        if not callable(name):
            check_name_pattern(name)
        self.naming = name
        self.replace = replace
        self.path = os.path.abspath(local_path(path, recursive=True))
        self.job = job or uuid.uuid4().hex[:12]
        self.dir = os.path.join(self.path, STAGING_PREFIX + self.job)
        self.created = None     # the outermost folder start made, which an abort removes
        self.started = False

    def start(self):
        """Create the output directory (if missing) and the staging folder, with the mark
        that the job is live."""
        top, parent = None, self.path
        while not os.path.exists(parent) and parent != os.path.dirname(parent):
            top, parent = parent, os.path.dirname(parent)
        with naming(self.path, self.dir):       # a read-only directory: named, not its folder
            os.makedirs(self.dir, exist_ok=True)
        self.created = top
        open(os.path.join(self.dir, LIVE), "wb").close()
        self.started = True

    def name(self, task):
        """The file name of task number `task` (relative to the output directory)."""
        if isinstance(self.naming, tuple):
            return self.naming[task]
        if callable(self.naming):
            return _inside(self.naming(task), task)
        return self.naming.format(task=task, job=self.job)

    def fix_names(self, tasks):
        """For a driver that knows its tasks: the names of tasks ``0 .. tasks - 1``, checked
        before any runs (ValueError when two would write the same file) and kept, so that a
        name_function runs on the driver alone."""
        names = tuple(self.name(i) for i in range(tasks))
        if len(set(names)) != len(names):
            dup = next(x for x in names if names.count(x) > 1)
            raise ValueError(f"name_function gives {dup!r} to more than one task")
        self.naming = names
        return list(names)

    def write(self, task, write, rows=None):
        """Run in task number `task`: ``write(path)`` writes its file where it is staged
        (atomically, as idv.write and idv.Writer do); returns the file's name, the task's
        result for ``commit``. ``rows`` 0: the task has no rows and writes no file (None)."""
        if rows == 0:
            return None
        return self.write_named(self.name(task), write)

    def write_named(self, name, write):
        """Run in a task that writes several files (one per partition key's value):
        ``write(path)`` writes the file `name` (relative to the output directory) where it
        is staged; returns `name`. A task's results for ``commit`` may be a list of them."""
        staged = self.staged(name)
        with naming(os.path.join(self.path, name), staged):     # a full disk's error
            write(staged)
        self.settle(staged)
        return name

    def staged(self, name):
        """Where the task's file `name` (a path relative to the output directory) is written
        before commit."""
        flat = os.path.normpath(name).replace(os.sep, "%2F")
        return os.path.join(self.dir, flat + STAGED_SUFFIX)

    def commit(self, results, empty=None):
        """Every task succeeded: move the files named by `results` (what ``write`` returned;
        None: no file; a list: a task's files) into the output directory (replacing files of the
        same name, making the folders they name), publish the directory's new list of files (the
        MANIFEST: those already there and these, or with ``replace`` these alone), then remove the
        staging folder and, with ``replace``, the files of the old list; returns the paths of the
        files, in the order of `results`. A failure before the list is published leaves the
        directory as it was (the module's docstring says how).

        `empty`: ``(name, write)``, the job's columns without rows. A job whose tasks wrote no
        file (it had no rows) commits that one file (``write(path)`` writes it), as Spark's
        Parquet writer leaves one file of an empty DataFrame's schema: the directory then
        reads back as the job's columns and no rows, whichever engine wrote it."""
        if self.aborted():
            raise RuntimeError(f"{self.path}: the job was aborted (one of its tasks failed) "
                               f"before its commit; the directory is as it was")
        names = [os.path.normpath(n) for r in results if r is not None
                 for n in ([r] if isinstance(r, (str, os.PathLike)) else r)]
        if not names and empty is not None:
            names = [os.path.normpath(self.write_named(*empty))]
        with _commits_one_at_a_time(self.path):
            return self._commit(names)

    def _commit(self, names):
        """commit's work, no other commit to the directory running meanwhile."""
        had = read_manifest(self.path) is not None
        before = [os.path.normpath(n) for n in listed(self.path)]
        if not had:
            write_manifest(self.path, before)   # what moves in stays unread until listed
        try:
            where, files = self._move_in(names, before)
        except BaseException:
            if not had:
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(self.path, MANIFEST))
            raise
        self.created = None         # the output directory is the job's result now
        self.abort()
        files = self._finish(files)
        if self.replace:
            for name in set(before) - set(files):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(self.path, name))
        # NEW folders the list no longer names: this job's, and any a job killed after its
        # last list left behind
        roots = {_new_root(n) for n in before + list(where.values())} | {
            e.name for e in os.scandir(self.path) if e.name.startswith(NEW_PREFIX)}
        for root in roots - {None}:
            if not any(n.startswith(root + os.sep) for n in files):
                shutil.rmtree(os.path.join(self.path, root), ignore_errors=True)
        listed_now = set(files)
        return [os.path.join(self.path, n if n in listed_now else where[n]) for n in names]

    def _move_in(self, names, before):
        """Move the staged files `names` in (each whose name is taken into this job's NEW
        folder) and publish the list naming them: ({name: where it is}, the list); on a
        failure, remove what was moved in and the folders made, and raise."""
        where, moved, made = {}, [], []
        taken = set(before)
        try:
            for name in names:
                final = os.path.join(self.path, name)
                if os.path.isdir(final) and not os.path.islink(final):
                    raise IsADirectoryError(f"{final} is a folder: the job's file {name} "
                                            f"cannot replace it")
                where[name] = os.path.join(NEW_PREFIX + self.job, name) \
                    if name in taken or os.path.lexists(final) else name
                target = os.path.join(self.path, where[name])
                _make_folders(os.path.dirname(target), made)
                os.replace(self.staged(name), target)
                moved.append(target)
            # the folders the files went into, and those where a folder made was entered
            for folder in {os.path.dirname(m) for m in moved + made} | {self.path}:
                fsync_dir(folder)
            files = _in_order([] if self.replace else before, names, where)
            write_manifest(self.path, files)
        except BaseException:
            for path in reversed(moved):
                with contextlib.suppress(OSError):
                    os.remove(path)
            for folder in reversed(made):
                with contextlib.suppress(OSError):
                    os.rmdir(folder)
            raise
        return where, files

    def _finish(self, files):
        """Once the list `files` is published: each of its files in a NEW folder linked (or
        copied) over its plain name, then the list of plain names published; returns the list
        published. On an OSError the list stays `files`, complete, for the next commit to
        finish."""
        plain = [_plain(n) for n in files]
        if plain == files:
            return files
        try:
            for name in files:
                if _plain(name) != name:
                    _copy_over(os.path.join(self.path, name),
                               os.path.join(self.path, _plain(name)))
            write_manifest(self.path, plain)
        except OSError:
            return files
        return plain

    def aborted(self):
        """Whether the job was aborted (its live mark is gone): a task that fails then failed
        because of it, or after the job's own failure."""
        return not os.path.exists(os.path.join(self.dir, LIVE))

    def settle(self, staged):
        """After a task wrote `staged`: when the job was aborted meanwhile (a task still
        running when another failed), remove it, the staging folder and the folders start
        made, which the abort may have left behind while the file was being written."""
        if self.aborted():
            with contextlib.suppress(OSError):
                os.remove(staged)
            with contextlib.suppress(OSError):
                os.rmdir(self.dir)
            self._remove_created()

    def abort(self):
        """Remove the staging folder and all it holds (the output directory is left as was,
        and removed when start created it and it is still empty): first the live mark, so
        that tasks finishing later remove what they wrote (settle)."""
        with contextlib.suppress(OSError):
            os.remove(os.path.join(self.dir, LIVE))
        shutil.rmtree(self.dir, ignore_errors=True)
        self._remove_created()

    def _remove_created(self):
        """The folders start created (the output directory up to the outermost), those
        that are empty."""
        folder, top = self.path, self.created
        while top is not None:
            try:
                os.rmdir(folder)
            except OSError:
                break
            if folder == top:
                break
            folder = os.path.dirname(folder)


def _in_order(before, names, where):
    """The directory's new list: the files of `before` (the old list, or none for an
    overwrite) in their order, each that the job replaces by the job's file in its place, then
    the job's other files in the order of its tasks (`names`; `where`: where each is): a
    dataset reads its files in the list's order, so rows keep the order they were written
    in."""
    replaced = {_plain(n): n for n in before if _plain(n) in where}
    out = [where[_plain(n)] if n in replaced.values() else n for n in before]
    return out + [where[n] for n in names if n not in replaced]


@contextlib.contextmanager
def _commits_one_at_a_time(path):
    """Held while a job commits into directory `path`: an exclusive lock (``fcntl.flock``) on
    the directory itself (no file to leave behind), so that two jobs committing at once
    (appends from two processes) each list the other's files rather than replace the list the
    other published. Where there is no flock (Windows), or the filesystem refuses it (an NFS
    mount without its lock service: ENOLCK), commits are not serialized."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as e:
            if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                raise
        yield
    finally:
        os.close(fd)        # and the lock with it


def _new_root(name):
    """The NEW folder (``.idv-new-<job>``) a listed `name` waits in, or None."""
    head = name.split(os.sep, 1)[0]
    return head if head.startswith(NEW_PREFIX) and head != name else None


def _plain(name):
    """The name a listed file has once its job finished: ``.idv-new-<job>/a/b.idv`` is
    ``a/b.idv``."""
    root = _new_root(name)
    return name if root is None else name[len(root) + 1:]


def _make_folders(folder, made):
    """Create `folder` and its missing parents, adding those made to `made` (outermost
    first)."""
    missing = []
    while not os.path.isdir(folder) and folder != os.path.dirname(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    for f in reversed(missing):
        os.mkdir(f)
        made.append(f)


def _copy_over(src, dst):
    """`dst` replaced atomically by the contents of `src`, which stays: a hard link where the
    filesystem makes one, else a copy."""
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if os.path.lexists(dst) and os.path.samefile(src, dst):   # linked by a commit stopped
        return                                                # after it (a rename onto the
    # same file would leave the temporary link behind)
    tmp = os.path.join(os.path.dirname(dst), f".{os.path.basename(dst)}.{uuid.uuid4().hex[:8]}")
    try:
        try:
            os.link(src, tmp)
        except OSError:
            shutil.copyfile(src, tmp)
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        os.replace(tmp, dst)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    fsync_dir(os.path.dirname(dst))


def listed(path):
    """The names (relative to the directory `path`) of the files that make up its data: its
    MANIFEST's list, else every ``*.idv`` under it (hidden folders left out)."""
    found = read_manifest(path)
    if found is not None:
        return found
    out = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out += [os.path.relpath(os.path.join(root, f), path) for f in files
                if f.endswith(".idv")]
    return sorted(out)


def read_manifest(path, fs=None):
    """The names the MANIFEST of directory `path` lists (None: it has none); ValueError for
    one that is not such a list (a name that leaves the directory included). `fs`: the
    fsspec filesystem of a remote directory. Only a MANIFEST that is not there means none:
    one that cannot be read now (a server's 503, a 403) is the error reading it raises, as
    for any remote file (retried, naming its URL), since the directory's other files may be
    leftovers its writer never published."""
    where = os.path.join(path, MANIFEST) if fs is None else f"{path.rstrip('/')}/{MANIFEST}"
    try:
        if fs is None:
            with open(where, "rb") as f:
                raw = f.read()
        else:
            from idv._storage import remote
            raw = remote.read_file(fs, where)
    except FileNotFoundError:
        return None
    try:
        names = json.loads(raw.decode("utf-8"))["files"]
        ok = isinstance(names, list) and all(
            isinstance(n, str) and n and not os.path.isabs(n) and ".." not in n.split("/")
            for n in names)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        ok = False
    if not ok:
        raise ValueError(f"{where} is not a list of the directory's files "
                         f'({{"files": ["part-0.idv", ...]}})')
    return names


def write_manifest(path, names):
    """The MANIFEST of directory `path`, listing `names`, replaced atomically: a failure (a
    full disk) leaves the old one and no temporary file, its error naming the MANIFEST."""
    tmp = os.path.join(path, f".{MANIFEST}.{uuid.uuid4().hex[:8]}")
    target = os.path.join(path, MANIFEST)
    try:
        with naming(target, tmp), open(tmp, "w", encoding="utf-8") as f:
            json.dump({"files": [n.replace(os.sep, "/") for n in names]}, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    fsync_dir(path)
