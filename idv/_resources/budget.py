"""The memory a read may take: reads refuse, before allocating, an output or a temporary
beyond a limit, so that a small file declaring billions of rows (or a 2^31-item vector) is an
error that names the file, the column and the limit, not gigabytes allocated, numpy's
MemoryError naming nothing, or a process killed.

The default limit of an open file is the smallest of:

* 1,024 times the file's size, but at least 1 GiB (ML.NET's blocks compress a few times,
  rarely a hundred, so a legitimate file stays far below it);
* half the machine's memory;
* half of what the process may still take: its address-space limit (``RLIMIT_AS``,
  ``ulimit -v``) less what it already maps, its cgroup's limit (v2 ``memory.max``, v1
  ``memory.limit_in_bytes``: a container's memory) less what the cgroup uses, and the memory
  the kernel reports available (``MemAvailable``). Half, because a read holds its output
  and about as much again (decoders' temporaries, the copies pandas and Arrow make).
  These are read from the system at most once a second per process (REFRESH_SECONDS).

``idv.set_memory_limit(n)`` sets it for every file opened afterwards, ``idv.open(path,
memory_limit=n)`` for one. A dataset read (idv.dataset) counts its files' reads together.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
import threading
import time

from idv._values.arguments import ensure_bytes

try:
    import resource
except ImportError:         # not on Windows
    resource = None

_FLOOR = 1 << 30
_RATIO = 1024
_global = None
_CGROUP_ROOT = "/sys/fs/cgroup"
_UNLIMITED = 1 << 60        # cgroup v1 says "no limit" with a number near 2^63


class MemoryLimitError(MemoryError):
    """A read would need more memory than idv's limit (the message names the file, the
    column, the limit and where it comes from, and how to raise it). Nothing was
    allocated.

    Attributes
    ----------
    refusal : str
        What was refused and why: the message without the remedy in Python's terms, for
        a caller that tells its own (the command line names ``--memory-limit``).
    lower : bool
        Whether the remedy is a lower limit (the system refused memory that the limit
        allowed) rather than a higher one.
    """

    def __init__(self, refusal, remedy="", lower=False):
        super().__init__(f"{refusal}; {remedy}" if remedy else refusal)
        self.refusal, self.lower = refusal, lower


class Limit(int):
    """A memory limit in bytes that knows where it comes from (``source``, for messages:
    ``"the process's RLIMIT_AS"``, ``"memory_limit="``...)."""

    source: str
    file_size: int | None      # a file's default (see _now), None for one given

    def __new__(cls, nbytes, source="", file_size=None):
        self = super().__new__(cls, nbytes)
        self.source = source
        self.file_size = file_size
        return self


def physical_memory():
    """The machine's memory in bytes (None where it cannot be read)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def _read_int(path):
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    if text in ("", "max"):
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if 0 < value < _UNLIMITED else None


def _meminfo(key, path="/proc/self/status"):
    """A "Key:  N kB" line of a /proc file, in bytes (None without it)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def address_space_room():
    """Bytes the process may still map under its RLIMIT_AS (None: no limit, or not
    known)."""
    soft = (_address_space_limit() or (None,))[0]
    if soft is None:
        return None
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return None
    used = _meminfo("VmSize") or 0
    return max(soft - used, 0)


def cgroup_room(root=_CGROUP_ROOT, cgroup_file="/proc/self/cgroup"):
    """Bytes the process's cgroup may still take: its memory limit less its usage, under
    cgroup v2 (``memory.max``, ``memory.current``) or v1 (``memory.limit_in_bytes``,
    ``memory.usage_in_bytes``); None without a limit. `root`: where the hierarchy is
    mounted."""
    try:
        with open(cgroup_file) as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    places = []     # (folder, limit file, usage file), the process's own cgroup first
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        path = path.lstrip("/")
        if controllers == "":
            places.append((os.path.join(root, path), "memory.max", "memory.current"))
        elif "memory" in controllers.split(","):
            places.append((os.path.join(root, "memory", path), "memory.limit_in_bytes",
                           "memory.usage_in_bytes"))
    # inside a container the process's cgroup is often mounted as the root itself
    places += [(root, "memory.max", "memory.current"),
               (os.path.join(root, "memory"), "memory.limit_in_bytes", "memory.usage_in_bytes")]
    for folder, limit_name, usage_name in places:
        limit = _read_int(os.path.join(folder, limit_name))
        if limit is not None:
            used = _read_int(os.path.join(folder, usage_name)) or 0
            return max(limit - used, 0)
    return None


def available_memory():
    """Memory the kernel says is available to new allocations (MemAvailable), None where
    not known."""
    return _meminfo("MemAvailable", "/proc/meminfo")


def _system_limits():
    """[(bytes, what)]: the limits that do not depend on the file (half the machine's memory,
    half of what remains under RLIMIT_AS, the cgroup's limit and the memory available)."""
    candidates = []
    ram = physical_memory()
    if ram:
        candidates.append((ram // 2, "half the machine's memory"))
    for room, what in ((address_space_room(), _ADDRESS_SPACE),
                       (cgroup_room(), "the container's (cgroup's) memory limit"),
                       (available_memory(), "the memory available")):
        if room is not None:
            candidates.append((max(room // 2, 1), f"half of what remains under {what}"))
    return candidates


_ADDRESS_SPACE = "the process's address-space limit (RLIMIT_AS)"


# Reading them takes seven opens of /proc and cgroup files (about 0.6 ms), which a dataset of a
# thousand small files would pay at every open: they are kept for REFRESH_SECONDS, per process
# and per RLIMIT_AS (a forked child, or a new address-space limit, reads them anew). An open
# only compares the limit and the time with those kept (a few microseconds).
REFRESH_SECONDS = 1.0
_system = (None, None, None)        # (RLIMIT_AS, time read, limits)
_system_lock = threading.Lock()


def _address_space_limit():
    if resource is None:
        return None
    try:
        return resource.getrlimit(resource.RLIMIT_AS)
    except (OSError, ValueError):
        return None


def _forget_system_limits():
    global _system
    _system = (None, None, None)


if hasattr(os, "register_at_fork"):     # a forked child reads its own
    os.register_at_fork(after_in_child=_forget_system_limits)


def _cached_system_limits():
    """The smallest of _system_limits() as a Limit (None without any), read anew after
    REFRESH_SECONDS, in a forked child or under a new RLIMIT_AS."""
    global _system
    key, now = _address_space_limit(), time.monotonic()
    cached_key, when, limits = _system
    if cached_key == key and when is not None and now - when < REFRESH_SECONDS:
        return limits
    with _system_lock:
        found = _system_limits()
        limits = Limit(*min(found, key=lambda c: c[0])) if found else None
        _system = key, now, limits
    return limits


def default_limit(file_size):
    """The default limit of a file of `file_size` bytes (see the module's docs), a Limit
    naming what set it."""
    own = max(_FLOOR, _RATIO * int(file_size))
    system = _cached_system_limits()
    if system is not None and system < own:
        return Limit(system, system.source, file_size)
    return Limit(own, "the default: 1,024 times the file's size, at least 1 GiB", file_size)


def _now(limit):
    """A default `limit` as it stands now: under an address-space limit, what remains of it is
    read anew at every check, since what was opened before may have reserved address space
    since (pyarrow's mimalloc reserves a gigabyte at its first allocation, polars' allocator
    more), and a read the room no longer holds fails in numpy, or aborts the process in
    polars, instead of being refused."""
    if getattr(limit, "file_size", None) is None:
        return limit
    room = address_space_room()
    if room is None or room // 2 >= limit:
        return limit
    return Limit(max(room // 2, 1), f"half of what remains under {_ADDRESS_SPACE}",
                 limit.file_size)


def set_memory_limit(nbytes):
    """Set the memory limit of reads of the files opened from now on (in this process, and
    in the workers that open a dataset's files again: Dask's, Ray's, Spark's, a loader's).

    Parameters
    ----------
    nbytes : int, str or None
        The bytes one read may allocate before idv.MemoryLimitError (an int, or text such as
        ``"8GB"`` or ``"1.5GiB"``); None: each file's default (idv.open's ``memory_limit``).
    """
    global _global
    _global = None if nbytes is None else Limit(_checked(nbytes), "idv.set_memory_limit")


@contextlib.contextmanager
def limited(nbytes, source):
    """The limit of set_memory_limit set to `nbytes` (None: left as it is) for the time of a
    with block, then restored; `source` names where it comes from in messages (a command
    line option)."""
    global _global
    before = _global
    if nbytes is not None:
        _global = Limit(_checked(nbytes), source)
    try:
        yield
    finally:
        _global = before


def carried(options):
    """idv.open's `options` for files opened again in other processes (the workers of Dask,
    Ray and Spark, a loader's): with the limit idv.set_memory_limit set in this one, unless
    they give their own, since a worker process has none set."""
    if options.get("memory_limit") is None and _global is not None:
        return {**options, "memory_limit": _global}
    return options


def _checked(nbytes):
    """`nbytes` as an int: an integer of 1 or more, or text such as ``"8GB"``, as idv's other
    sizes take (idv._values.arguments.ensure_bytes)."""
    return ensure_bytes(nbytes, "a memory limit")


def limit_for(file_size, given=None):
    """The limit of a file of `file_size` bytes: `given`, else the global one, else the
    default."""
    if given is not None:
        return given if isinstance(given, Limit) else Limit(_checked(given), "memory_limit=")
    if _global is not None:
        return _global
    return default_limit(file_size)


# What a decoded Text item costs beyond its characters: the pointer to it in the object array,
# and unless it is empty (one shared object) its str object (49 bytes on 64-bit CPython).
STR_BYTES = sys.getsizeof("")


def items_bytes(dtype, items, stored):
    """The bytes `items` decoded items of `dtype` cost, from a payload of `stored` bytes.
    Text: a pointer each, and a str object for each non-empty one (at most one per byte of
    text beyond the 4-byte boundaries) with its characters (at most those bytes)."""
    if dtype != object:
        return items * dtype.itemsize
    text = max(stored - 4 * items, 0)
    return 8 * items + min(items, text) * STR_BYTES + text


def picked_bytes(held, held_rows, count, joined=False):
    """What picking `count` rows (repeats counted) out of decoded blocks of `held_rows` rows
    taking `held` bytes allocates: the blocks, twice when they are joined before the rows are
    picked, and the rows picked, their share of the blocks' bytes each (a row list's read)."""
    return held * (2 if joined else 1) + -(-held * count // max(held_rows, 1))


def halved(nbytes, limit):
    """`nbytes`, at most half of `limit` (None: no limit): what one piece of a read that holds
    its values and a copy of them (an engine's partition) may take."""
    return min(nbytes, max(limit // 2, 1)) if limit else nbytes


def show(nbytes):
    """Bytes for a message: '2.1 GB'."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{nbytes} bytes"


def _source_of(limit):
    source = getattr(limit, "source", "")
    return f" ({source})" if source else ""


def allows(nbytes, limit):
    """Whether `limit` (as check takes it) allows `nbytes`: for a read that can go another
    way when it does not (a column kept whole for row access, else block by block)."""
    return nbytes <= _now(limit)


def check(nbytes, limit, what):
    """MemoryLimitError when `what` (a str, or a function giving it: reads call this for
    every block they decode) needs more than `limit` bytes (a default one as it stands now)."""
    limit = _now(limit)
    if nbytes > limit:
        what = what() if callable(what) else what
        raise MemoryLimitError(
            f"{what} needs {show(nbytes)}, over idv's memory limit of {show(limit)}"
            f"{_source_of(limit)}", "read fewer rows (col[a:b], iter_batches) or raise the "
            "limit: idv.open(path, memory_limit=N) or idv.set_memory_limit(N)")


class Pool:
    """One limit shared by several reads (a dataset's files read as one table): each read
    takes its bytes from the pool (``take``) before allocating, and the whole refuses what
    one file's limit alone would allow. Thread-safe."""

    def __init__(self, limit):
        self.limit = limit
        self.taken = 0
        self._lock = threading.Lock()

    def take(self, nbytes, what):
        """Count `nbytes` against the pool: MemoryLimitError when the reads so far and these
        need more than the limit."""
        with self._lock:
            check(self.taken + nbytes, self.limit,
                  lambda: f"{what() if callable(what) else what} (with the "
                          f"{show(self.taken)} read before it)")
            self.taken += nbytes


def kept(batches, limit, what, nbytes=lambda b: b.nbytes):
    """The batches of a stream that the caller keeps every one of (a pyarrow Table, a polars
    DataFrame being collected), each one's bytes (``nbytes(batch)``) taken from one Pool of
    `limit` before it is handed on: a whole beyond the limit is refused, not gathered batch
    after batch until the process runs out (polars aborts the process when an allocation
    fails)."""
    pool = Pool(limit)
    for b in batches:
        pool.take(nbytes(b), what)
        yield b


def name_of(obj):
    """What a read of `obj` (a Column, a file, a dataset, a path) is called in a message."""
    file = getattr(obj, "_file", None)
    if file is not None and hasattr(obj, "index"):
        return f"{file.path}: column {obj.index} '{obj.name}'"
    obj = getattr(obj, "idv_dataset", obj)
    files = getattr(obj, "files", None)
    if isinstance(files, list) and files and not hasattr(obj, "path"):     # not an IdvFile
        return f"the dataset ({files[0].path}...)"
    return str(getattr(obj, "path", None) or obj)


def _refused(error, args, fn):
    """The MemoryLimitError for numpy's or Arrow's MemoryError `error` out of ``fn(*args)``."""
    return MemoryLimitError(
        f"{name_of(args[0]) if args else fn.__name__}: the system refused memory this read "
        f"needed, within idv's memory limit ({error or 'out of memory'}): the process's other "
        f"allocations took the room", "read fewer rows (col[a:b], iter_batches) or lower the "
        "limit so that reads are refused before they allocate: idv.open(path, "
        "memory_limit=N) or idv.set_memory_limit(N)", lower=True)


def reads(fn):
    """Decorator of every public read (a function or method whose first argument is what it
    reads; a generator function: each item): numpy's or Arrow's MemoryError, an allocation
    the limit allowed but the system refused all the same (what else the process holds took
    the room), becomes a MemoryLimitError naming what was read."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def each(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
            except MemoryLimitError:
                raise
            except MemoryError as e:
                raise _refused(e, args, fn) from e
        return each

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except MemoryLimitError:
            raise
        except MemoryError as e:
            raise _refused(e, args, fn) from e
    return call
