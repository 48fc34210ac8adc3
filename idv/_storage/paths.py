"""Which files a dataset source names: a path, a directory (its .idv files), a glob, a URL or
URL glob (through fsspec), or a list of these, expanded into paths in dataset order.

Local directories and globs are walked with ``os`` and ``glob``, without following directory
symlinks (a link to an ancestor would list files again and again) and skipping hidden
directories (a job's staging folder).
"""
from __future__ import annotations

import glob as _glob
import os
import re
from urllib.parse import urlsplit

from idv._storage import remote, remote_process
from idv._storage.staging import MANIFEST, read_manifest

__all__ = ["expand_sources"]


def _raise(error):
    raise error


def _walk(top, on_error):
    """Every file under `top` (os.walk's order): hidden directories (``.name``, such as a job's
    staging directory) skipped, directory symlinks not followed (a link to an ancestor would
    list files again and again)."""
    for root, dirs, names in os.walk(top, onerror=on_error):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in names:
            yield os.path.join(root, name)


def _component_regex(part):
    """A regex of one glob component (``*``, ``?``, ``[...]``), not crossing ``/``; wildcards
    do not match a leading dot, as glob's."""
    out, i = [], 0
    while i < len(part):
        ch = part[i]
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[" and "]" in part[i + 2:] + part[i + 1:i + 2]:
            j = part.index("]", i + 2 if part[i + 1:i + 2] in ("!", "]") else i + 1)
            body = part[i + 1:j]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = j
        else:
            out.append(re.escape(ch))
        i += 1
    return ("" if part.startswith(".") else r"(?!\.)") + "".join(out)


def _glob_files(pattern, on_error):
    """glob.glob(pattern, recursive=True)'s files, except that ``**`` never follows a
    directory symlink (loops would never end)."""
    if "**" not in pattern:
        return [p for p in _glob.glob(pattern) if not os.path.isdir(p)]
    parts = pattern.replace(os.sep, "/").split("/")
    first = next(i for i, p in enumerate(parts) if _glob.has_magic(p))
    root = "/".join(parts[:first]) or ("/" if pattern.startswith(("/", os.sep)) else "")
    rest = [r"(?:(?!\.)[^/]*/)*" if p == "**" else _component_regex(p) + "/"
            for p in parts[first:]]
    rx = re.compile("".join(rest)[:-1] if not rest[-1].endswith("*") else
                    "".join(rest[:-1]) + r"(?!\.)[^/]*(?:/(?!\.)[^/]*)*")
    found = []
    for path in _walk(root or os.curdir, on_error):
        rel = os.path.relpath(path, root or os.curdir).replace(os.sep, "/")
        if rx.fullmatch(rel):
            found.append(os.path.join(root, rel) if root else rel)
    return found


def is_directory(fs, path, timeout=None):
    """Whether `path` in the fsspec filesystem `fs` names a directory. Over HTTP, where a URL
    is a file and may also be a page of links, a page the server calls HTML is a directory
    listing (one without .idv links too: never read as an .idv), and no other answer is:
    fsspec's isdir would fetch it whole (a file's every byte) to look for links in it; a URL
    whose path ends in ``.idv`` is a file without asking. The question is asked as a read's
    requests are (remote.ask: retried, within `timeout`)."""
    if set(getattr(fs, "protocol", ())) & {"http", "https"}:
        if urlsplit(path).path.endswith(".idv"):
            return False
        try:
            kind = _asked(fs, "info", path, "asking whether it is a directory", timeout)
        except FileNotFoundError:
            return False
        return kind.get("mimetype") == "text/html"
    return _asked(fs, "isdir", path, "asking whether it is a directory", timeout)


def _asked(fs, how, path, what, timeout):
    """fs.`how`(path) (info, isdir, find, glob): an asynchronous filesystem's (its copy made
    in this process) as remote.ask makes a request."""
    if not getattr(fs, "async_impl", False):
        return getattr(fs, how)(path)
    fs = remote_process.own(fs, path)
    return remote.ask(fs, lambda: getattr(fs, "_" + how)(path), path, what, timeout)


def _expand_one(source, fs, storage_options, on_error=_raise, timeout=None):
    """(paths, fs) for one source: a file, a directory (the files its manifest lists, written
    by idv's engine writers (idv._storage.staging), else every .idv under it, sorted), or a glob
    (sorted); URLs through fsspec. A directory that cannot be listed goes to
    `on_error` (default: raised)."""
    text = os.fspath(source)
    if fs is None and remote.is_remote(text):
        fs, text, _ = remote.resolve(text, None, storage_options)
    if fs is not None:
        if _glob.has_magic(text):
            paths = sorted(_asked(fs, "glob", text, "listing it", timeout))
        elif is_directory(fs, text, timeout):
            named = read_manifest(text, fs)
            paths = sorted(p for p in _asked(fs, "find", text, "listing it", timeout)
                           if p.endswith(".idv")) if named is None \
                else [f"{text.rstrip('/')}/{n}" for n in named]
        else:
            paths = [text]
        return paths, fs
    if _glob.has_magic(text):
        paths = sorted(_glob_files(text, on_error))
    elif os.path.isdir(text):
        named = read_manifest(text)         # a writer's published list: exactly those files
        paths = sorted(p for p in _walk(text, on_error) if p.endswith(".idv")) \
            if named is None else [os.path.join(text, n) for n in named]
    else:
        paths = [text]
    return paths, None


def list_marks(source, filesystem=None):
    """What tells whether the lists of files that the local directories of `source` publish
    (idv._storage.staging.MANIFEST) were replaced: each one's inode, modification time and
    size (None: none). A dataset that finds them changed once its files are open may have
    opened some of a writer's new files under the old list's names, and lists again."""
    if filesystem is not None:
        return None
    marks = []
    for s in source if isinstance(source, (list, tuple)) else [source]:
        if isinstance(s, (str, os.PathLike)) and not remote.is_remote(os.fspath(s)) \
                and os.path.isdir(s):
            try:
                st = os.stat(os.path.join(s, MANIFEST))
                marks.append((st.st_ino, st.st_mtime_ns, st.st_size))
            except OSError:
                marks.append(None)
    return marks


def worker_path(path, filesystem=None):
    """`path` as another process opens it: a local path made absolute (the workers of Dask,
    Ray and Spark may run in another folder), a URL or a path in `filesystem` as it is."""
    if filesystem is not None or remote.is_remote(os.fspath(path)):
        return path
    return os.path.abspath(path)


def _not_a_path(s):
    """Why `s` is no source of a dataset (which opens its files by path, in any process)."""
    path = getattr(s, "path", None)
    if isinstance(path, (str, os.PathLike)):           # an IdvFile opened from a path
        return (f"a dataset of files takes paths, not an open {type(s).__name__}: give its "
                f"path, {os.fspath(path)!r}")
    raw = isinstance(s, (bytes, bytearray, memoryview)) or hasattr(s, "read")
    return (f"a dataset of files takes paths, directories, globs or URLs (str or os.PathLike, "
            f"or a list of them), not {type(s).__name__}"
            f"{': read bytes or a file object with idv.open' if raw else ''}")


def expand_sources(source, *, filesystem=None, storage_options=None, on_error=None,
                   timeout=None):
    """The file paths a dataset source names, in dataset order, and the fsspec filesystem they
    are in (None for local paths). FileNotFoundError when a directory or glob names none; a
    subdirectory that cannot be listed: its OSError, given to `on_error` (default: raised);
    a remote listing's requests within `timeout` (idv.open's)."""
    on_error = on_error or _raise
    sources = list(source) if isinstance(source, (list, tuple)) else [source]
    if not sources:
        raise ValueError("idv.dataset needs at least one path, directory, glob or URL")
    paths, fs = [], filesystem
    for s in sources:
        if not isinstance(s, (str, os.PathLike)):
            raise TypeError(_not_a_path(s))
        found, fs_s = _expand_one(s, filesystem, storage_options, on_error, timeout)
        if fs is None:
            fs = fs_s
        elif fs_s is not None and fs_s is not fs and type(fs_s) is not type(fs):
            raise ValueError(f"the files of one dataset must be in one filesystem: {s!r} is "
                             f"not in {type(fs).__name__}")
        if (fs_s is None) != (fs is None):
            raise ValueError(f"the files of one dataset must be all local or all URLs: {s!r}")
        if not found:
            listed = fs_s is None and os.path.isdir(s) and read_manifest(s) is not None
            raise FileNotFoundError(f"no .idv files in {os.fspath(s)!r}" + (
                f": its list of files ({MANIFEST}) names none (the write that made it had no "
                f"rows)" if listed else ""))
        paths.extend(found)
    return paths, fs
