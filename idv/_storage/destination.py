"""Where a file may be written, checked before anything is written (idv._storage.sink's
refusals): the directory exists (a file where a folder should be is named as such), and an
existing file there is a regular file this user may replace; a symbolic link's target is the
file written, as open() would write it. A URL is refused: idv writes local files only (it
would be a folder named ``s3:`` here)."""
from __future__ import annotations

import os
import stat


def local_path(dest, recursive=False):
    """`dest` (a path) as a str, ValueError for a URL (``s3://``, ``https://``, fsspec's
    ``::`` chains) that is no local path: idv writes local files (`recursive`: a directory of
    them), which fsspec copies up."""
    path = os.fsdecode(os.fspath(dest))
    if ("://" in path or "::" in path) and not os.path.exists(path):
        raise ValueError(f"cannot write {path!r}: idv writes local files, not URLs; write "
                         f"{'them' if recursive else 'it'} here and copy "
                         f"{'them' if recursive else 'it'} up (fsspec: "
                         f"fs.put(local, {path!r}{', recursive=True' if recursive else ''}))")
    return path


def destination(dest):
    """(the file to write, its directory) of a destination path, checked: a local one, whose
    directory exists, and an existing file there is a regular file this user may replace. The
    file is the path itself or, for a symbolic link, the file it leads to (as open() would
    write)."""
    path = local_path(dest)
    target = _link_target(path)
    shown = repr(path) if target == path else f"{path!r} (a link to {target!r})"
    parent = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(parent):
        above = parent              # the nearest that exists: a file where a folder should be?
        while not os.path.lexists(above) and os.path.dirname(above) != above:
            above = os.path.dirname(above)
        if os.path.lexists(above) and not os.path.isdir(above):
            raise NotADirectoryError(f"cannot write {shown}: {above!r} is a file, not a "
                                     f"directory")
        raise FileNotFoundError(f"cannot write {shown}: directory {parent!r} does not exist")
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return target, parent
    _check_replaceable(target, st, shown)
    return target, parent


def _link_target(path):
    """The file a symbolic link at `path` leads to, if a regular file or nothing; else `path`
    (/dev/stdout's /proc/self/fd/1 leads to no path: it is refused as what it is)."""
    try:
        to_file = os.path.islink(path) and stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:       # a dangling link: open() would create what it names
        to_file = True
    return os.path.realpath(path) if to_file else path


_KINDS = {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFSOCK: "a socket"}


def _check_replaceable(path, st, shown):
    """IsADirectoryError or OSError for an existing `path` (`st`: its os.stat) that is not a
    regular file, which the rename would replace; PermissionError for one that this user could
    not write in place: a read-only one (by its mode bits; for root: no write bit at all), or,
    unless root (who keeps the owner), another user's, which the rename would make this
    user's. `shown`: the path as messages name it."""
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(f"cannot write {shown}: it is a directory")
    if not stat.S_ISREG(st.st_mode):
        kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a file")
        raise OSError(f"cannot write {shown}: it is {kind}, not a regular file (idv writes a "
                      f"new file and renames it over the destination, which would replace it)")
    if not hasattr(os, "geteuid"):
        if not os.access(path, os.W_OK):
            raise PermissionError(f"cannot replace {shown}: it is read-only")
        return
    euid, mode = os.geteuid(), stat.S_IMODE(st.st_mode)
    if euid != 0 and st.st_uid != euid:
        raise PermissionError(f"cannot replace {shown}: it belongs to another user (uid "
                              f"{st.st_uid}), and replacing it would make it yours; remove it "
                              f"first or write elsewhere")
    if not mode & (0o222 if euid == 0 else 0o200):
        raise PermissionError(f"cannot replace {shown}: it is read-only (mode {mode:#o}); "
                              f"make it writable (chmod u+w) or remove it first")
