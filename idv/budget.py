"""The memory a read may take: reads refuse, before allocating, an output or a temporary
beyond a limit, so that a small file declaring billions of rows (or a 2^31-item vector) is an
error that names the limit, not gigabytes allocated or a process killed.

The default limit of an open file is half the machine's memory, but at most 1,024 times the
file's size or 1 GiB, whichever is more: ML.NET's blocks compress a few times, rarely a
hundred, so a legitimate file stays far below it. ``idv.set_memory_limit(n)`` sets it for
every file opened afterwards, ``idv.open(path, memory_limit=n)`` for one.
"""
from __future__ import annotations

import os

_FLOOR = 1 << 30
_RATIO = 1024
_global = None


class MemoryLimitError(MemoryError):
    """A read would need more memory than idv's limit (the message names the limit and how to
    raise it). Nothing was allocated."""


def physical_memory():
    """The machine's memory in bytes (None where it cannot be read)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def set_memory_limit(nbytes):
    """The memory limit of reads of the files opened from now on, in bytes (None: the default
    of each file, see the module's docs)."""
    global _global
    _global = None if nbytes is None else _checked(nbytes)


def _checked(nbytes):
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes <= 0:
        raise ValueError(f"a memory limit is a positive number of bytes, not {nbytes!r}")
    return nbytes


def limit_for(file_size, given=None):
    """The limit of a file of `file_size` bytes: `given`, else the global one, else the
    default."""
    if given is not None:
        return _checked(given)
    if _global is not None:
        return _global
    default = max(_FLOOR, _RATIO * int(file_size))
    ram = physical_memory()
    return min(default, ram // 2) if ram else default


def show(nbytes):
    """Bytes for a message: '2.1 GB'."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{nbytes} bytes"


def check(nbytes, limit, what):
    """MemoryLimitError when `what` (a str, or a function giving it: reads call this for
    every block they decode) needs more than `limit` bytes."""
    if nbytes > limit:
        what = what() if callable(what) else what
        raise MemoryLimitError(
            f"{what} needs {show(nbytes)}, over idv's memory limit of {show(limit)}; read fewer "
            f"rows (col[a:b], iter_batches) or raise the limit: idv.open(path, memory_limit=N) "
            f"or idv.set_memory_limit(N)")
