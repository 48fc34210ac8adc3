"""Where the bytes come from: a memory map, an in-memory buffer, or a seekable file object
(remote files, through fsspec: idv._storage.remote).

Offsets in an .idv are relative to the start of the IDV stream, which is not always the start
of the container: ML.NET's OptionalColumnTransform stores Schema.idv behind a 4-byte length
prefix. `base` is that shift.

Each source has a `name`: the path of a file opened from a path or a named file object (None
for bytes), which the reader puts into every error from that file.

Every source has the same reading interface: ``size``, ``view(offset, size)`` (one range),
``read_ranges(offsets, sizes)`` (many ranges at once: what a remote source coalesces into few
requests), ``buffer`` (the whole stream when it is in memory, else None) and ``close()``.
"""
from __future__ import annotations

import contextlib
import errno
import io
import mmap
import os
import stat
import struct
import sys
import threading

import zipfile

from idv._storage import archive, kept_maps
from idv._resources import budget
from idv._header import SIGNATURE
from idv.errors import IdvFormatError

try:
    import resource
except ImportError:         # not on Windows
    resource = None

_SIG = struct.pack("<Q", SIGNATURE)
# a file of at most this many bytes is read whole when opened, in one system call: faster than
# mapping it (and faulting its pages in, and unmapping it), and what a dataset of many small
# files spends its time on; larger files are memory-mapped, read only where they are used
SMALL_FILE_BYTES = 64 << 10
# CPython's memory map keeps a duplicate of the file descriptor it maps until the map is closed
# (and it lives while arrays view it), unless told not to: trackfd=False, Python 3.13 on Unix
_UNTRACKED = {"trackfd": False} if sys.version_info >= (3, 13) and os.name == "posix" else {}
# whether each open memory map holds a file descriptor (idv.dataset keeps fewer open if so)
MAPS_HOLD_DESCRIPTORS = not _UNTRACKED


def descriptor_limit():
    """The file descriptors the process may have open at once (RLIMIT_NOFILE's soft limit,
    ``ulimit -n``); None: no limit, or not known (Windows)."""
    try:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (AttributeError, OSError, ValueError):     # AttributeError: no resource module
        return None
    return None if soft == resource.RLIM_INFINITY or soft <= 0 else soft


def too_many_open_files(name):
    """The OSError (EMFILE) of opening `name` with no file descriptor left, saying what holds
    them and what to do."""
    limit = descriptor_limit()
    held = (f"each open memory-mapped .idv file (over {SMALL_FILE_BYTES >> 10} KiB) holds "
            f"one, and so does a closed one while a zero-copy result of it (read(copy=False), "
            f"to_arrow) lives; " if MAPS_HOLD_DESCRIPTORS else "")
    return OSError(errno.EMFILE, f"{name}: too many open files: the process may have "
                   f"{limit or 'a limited number'} open at once (RLIMIT_NOFILE, ulimit -n); "
                   f"{held}raise the limit, or give idv.dataset a smaller max_open_files=")


def _open_fd(name):
    """A descriptor of the local file `name`: os's call, not open() (a small file's whole
    open costs a few system calls), without blocking (a FIFO is refused, not waited on)."""
    flags = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        return kept_maps.retried(lambda: os.open(name, flags), (errno.EMFILE,))
    except OSError as e:
        if e.errno == errno.EMFILE:
            raise too_many_open_files(name) from None
        if e.errno == errno.ENOENT and any(c in os.fspath(name) for c in "*?["):
            raise FileNotFoundError(errno.ENOENT, f"{name} is no file: a glob names several; "
                                    f"read them as one table with idv.dataset({name!r})",
                                    name) from None
        raise


def _map(fd, name, st):
    """A read-only map of the whole file: a closed file's kept map of it, or a new one."""
    mm = kept_maps.take((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
    if mm is not None:
        return mm
    try:
        return kept_maps.retried(lambda: mmap.mmap(fd, 0, access=mmap.ACCESS_READ,
                                                   **_UNTRACKED), (errno.EMFILE, errno.ENOMEM))
    except OSError as e:     # no address space left for the map (under RLIMIT_AS)
        if e.errno == errno.EMFILE:
            raise too_many_open_files(name) from None
        if e.errno != errno.ENOMEM:
            raise
        raise budget.MemoryLimitError(
            f"{name}: mapping the file's {budget.show(st.st_size)} needs address "
            f"space the process no longer has ({e.strerror})") from None


def closed_error():
    """The error of a read of a closed file (also one racing the close in another thread)."""
    return ValueError("I/O operation on a closed idv file")


class MemorySource:
    """A bytes-like object or a memory map; views are zero-copy.

    A memory map of a file that shrinks under it faults (SIGBUS) where the file no longer
    reaches, so a mapped file is checked (one ``stat``) before each run of bytes is read:
    ``check_intact``, which raises IdvFormatError once the file is shorter than when mapped.
    """

    def __init__(self, buffer, owner=None, name=None, mapped=None, shareable=False,
                 identity=None):
        self._owner = owner           # the mmap/file to close, if we opened it
        self.name = name
        self._mapped = mapped         # (path, device, inode, size) of a mapped file
        # what tells the local file read from another put in its place: (device, inode, size,
        # modification time) when it was opened; None for other sources
        self.identity = identity
        # the buffer is the file's, read-only, and nobody else's: arrays may view it and
        # outlive the source (zero copy, BlockStore.mappable)
        self.shareable = shareable
        self._held = False            # inside checked_once(): checked already
        mv = memoryview(buffer).cast("B")
        # the bytes of a local file read whole (a small one), held here; 0 for other sources
        self.read_whole = len(mv) if identity is not None and mapped is None else 0
        self.buffer = _skip_prefix(mv)
        self.size = len(self.buffer)

    def check_intact(self):
        """IdvFormatError when the mapped file was truncated or written in place since it was
        opened (a file put in its place leaves the map as it was: nothing to check)."""
        if self._mapped is None or self._held:
            return
        path, dev, ino, size = self._mapped
        try:
            st = os.stat(path)
        except OSError:
            return
        if (st.st_dev, st.st_ino) != (dev, ino):
            return
        if st.st_size < size:
            raise IdvFormatError(f"the file was truncated while open: {st.st_size} bytes, "
                                 f"{size} when opened; open it again once it is whole",
                                 path=path)
        if self.identity is not None and \
                (st.st_size, st.st_mtime_ns) != tuple(self.identity[2:]):
            raise IdvFormatError("the file changed while reading (written in place since "
                                 "it was opened: its size or modification time differs); "
                                 "open it again", path=path)

    def checked_once(self):
        """A context in which reads (the dozen small ones of opening a file, before any other
        thread has the source) share one check_intact, made now."""
        if self._mapped is None:          # nothing to check
            return contextlib.nullcontext()
        return self._checked_once()

    @contextlib.contextmanager
    def _checked_once(self):
        self.check_intact()
        self._held = True
        try:
            yield
        finally:
            self._held = False

    def _live(self):
        """The buffer; closed_error() once closed (by another thread, mid-read)."""
        buf = self.buffer
        if buf is None:
            raise closed_error()
        return buf

    def view(self, offset: int, size: int):
        buf = self._live()
        check_range(offset, size, self.size)
        self.check_intact()
        return buf[offset:offset + size]

    def read_ranges(self, offsets, sizes, keep=False):
        """The bytes of each range (offset, size): zero-copy views (`keep`: see
        idv._storage.remote.RemoteSource.read_ranges); the file checked intact once for all."""
        buf = self._live()
        ranges = [(int(o), int(n)) for o, n in zip(offsets, sizes)]
        for o, n in ranges:
            check_range(o, n, self.size)
        self.check_intact()
        return [buf[o:o + n] for o, n in ranges]

    def prefetch(self, offsets, sizes):
        """Nothing to fetch ahead in memory (see idv._storage.remote.RemoteSource.prefetch)."""
        return contextlib.nullcontext()

    def fetch_ahead(self, offsets, sizes, work, users):
        """Nothing to fetch ahead in memory (see
        idv._storage.remote.RemoteSource.fetch_ahead)."""
        return None

    def close(self):
        self.buffer = None
        owner, self._owner = self._owner, None
        if owner is not None and self._mapped is not None and self.identity is not None:
            kept_maps.keep(self.identity, owner)        # for the next open of the file
        elif owner is not None:
            try:
                owner.close()
            except BufferError:
                pass   # arrays still point into the map; it closes when they are gone


class FileSource:
    """A seekable binary file object, e.g. zipfile.ZipFile(...).open('Schema.idv')."""

    def __init__(self, f):
        for attr in ("read", "seek", "tell"):
            if not hasattr(f, attr):
                raise TypeError(f"idv.open needs a path, a bytes-like object or a seekable binary "
                                f"file object; {type(f).__name__} has no {attr}()")
        if isinstance(f, io.TextIOBase):     # its reads decode text; the format is bytes
            raise TypeError(f"idv.open needs a file object opened in binary mode ('rb'); "
                            f"{_name_of(f) or type(f).__name__} is open in text mode")
        if hasattr(f, "seekable") and not f.seekable():
            raise TypeError("idv.open needs a seekable file object (ML.NET's format is read by "
                            "offset); read it into bytes first")
        self._f = f
        self.name = _name_of(f)
        self._lock = threading.Lock()
        self._origin = f.tell()
        end = f.seek(0, io.SEEK_END)
        self.base = 0
        self.size = end - self._origin
        self.base, self.size = prefixed_extent(self._read(0, min(12, self.size)), self.size)
        self.buffer = None

    def _read(self, offset, size):
        with self._lock:
            f = self._f
            if f is None:
                raise closed_error()
            f.seek(self._origin + offset)
            data = f.read(size)
        if len(data) != size:
            raise IdvFormatError(f"file ended early: wanted {size} bytes, got {len(data)}",
                                 offset=offset - self.base)
        return data

    def view(self, offset: int, size: int):
        check_range(offset, size, self.size)
        return memoryview(self._read(self.base + offset, size))

    def check_intact(self):
        """Reads check their lengths (see MemorySource.check_intact)."""

    def prefetch(self, offsets, sizes):
        """A file object reads each range when asked (see
        idv._storage.remote.RemoteSource.prefetch)."""
        return contextlib.nullcontext()

    def fetch_ahead(self, offsets, sizes, work, users):
        """A file object reads each range when asked (see
        idv._storage.remote.RemoteSource.fetch_ahead)."""
        return None

    def read_ranges(self, offsets, sizes, keep=False):
        """The bytes of each range (offset, size), read in one pass of seeks in file order
        (`keep`: see idv._storage.remote.RemoteSource.read_ranges; a local file re-reads
        cheaply)."""
        for o, n in zip(offsets, sizes):
            check_range(int(o), int(n), self.size)
        out = [None] * len(offsets)
        for i in sorted(range(len(out)), key=lambda i: int(offsets[i])):
            out[i] = memoryview(self._read(self.base + int(offsets[i]), int(sizes[i])))
        return out

    def close(self):
        self._f = None


def prefixed_extent(head, size):
    """(base, size) of the IDV stream in a container of `size` bytes that starts with `head`
    (its first 12 bytes at least): (4, n) behind ML.NET's int32 length prefix n, else
    (0, size)."""
    if len(head) >= 12 and head[:8] != _SIG and head[4:12] == _SIG:
        (n,) = struct.unpack("<i", head[:4])
        if 0 < n <= size - 4:        # the prefix bounds the IDV
            return 4, n
    return 0, size


def check_range(offset, size, total):
    """IdvFormatError unless [offset, offset + size) lies within `total` bytes."""
    if offset < 0 or size < 0 or offset + size > total:
        raise IdvFormatError(f"range [{offset}, {offset + size}) is outside the file of "
                             f"{total} bytes", offset=offset if 0 <= offset <= total else None)


def _name_of(f):
    """The path a file object was opened from, if it says (io and zipfile objects do)."""
    name = getattr(f, "name", None)
    return os.fspath(name) if isinstance(name, (str, os.PathLike)) else None


# what a file that is not an .idv often is, by its first bytes
_OTHER_FORMATS = ((b"PK\x03\x04", "a zip archive"), (b"PAR1", "a Parquet file"),
                  (b"\x1f\x8b", "a gzip file"), (b"ARROW1", "an Arrow IPC (Feather) file"))
_CONVERTIBLE = {"a Parquet file": "parquet", "an Arrow IPC (Feather) file": "feather"}


def convert_hint(fmt):
    """How to convert a file of format `fmt` (idv.formats' name: 'csv', 'parquet'...) into an
    .idv, whatever its file is named (its name may say .idv)."""
    return (f"convert it: idv convert FILE OUT.idv --from {fmt} (idv.convert(FILE, OUT, "
            f"source_format={fmt!r}))")


def refuse_other_formats(head, name, open_zip=None, entry_form="{name}:ENTRY"):
    """A clear error for a zip, Parquet, gzip or Arrow file given as an .idv. A zip's .idv
    entries are listed (`open_zip`: a function giving the zip as a binary file object; default:
    `name` opened as a local path), each to be named as `entry_form` says."""
    for magic, what in _OTHER_FORMATS:
        if head.startswith(magic):
            hint = ""
            if what == "a zip archive":
                with archive.damaged(name), \
                        zipfile.ZipFile(open_zip() if open_zip else name) as z:
                    entries = archive.idv_entries(z)
                hint = (f"; name an .idv inside it as {entry_form.format(name=name)} (.idv "
                        f"entries: {', '.join(entries) or 'none'})")
            elif what == "a gzip file":
                hint = ("; decompress it first (gunzip), or pass its bytes: "
                        "idv.open(gzip.open(path).read())")
            else:
                hint = "; " + convert_hint(_CONVERTIBLE[what])
            raise IdvFormatError(f"not an .idv file: this is {what}{hint}", path=name, offset=0)


def _skip_prefix(mv):
    """Detect an IDV stored behind an int32 length prefix (model-zip entries)."""
    base, size = prefixed_extent(mv[:12], len(mv))
    return mv[base:base + size] if base else mv


def _read_whole(fd, size):
    """Up to `size` bytes from the start of file descriptor `fd` (fewer if the file is
    shorter now)."""
    parts, got = [], 0
    while got < size:
        more = os.read(fd, size - got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return parts[0] if len(parts) == 1 else b"".join(parts)


_KINDS = ((stat.S_ISFIFO, "a pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def check_regular(name, st=None):
    """OSError unless `name` (its os.stat result `st`, found if not given) is a regular
    file: .idv files are read by offset, so pipes, devices and sockets are refused before
    any read (which could wait for a writer, or never end); a directory is an
    IsADirectoryError. A path that does not exist passes (opening it says so)."""
    if st is None:
        try:
            st = os.stat(name)
        except OSError:
            return
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, f"{name} is a directory: open one .idv file in "
                                f"it, or read its .idv files as one table with "
                                f"idv.dataset({name!r})", name)
    if not stat.S_ISREG(st.st_mode):
        kind = next((k for test, k in _KINDS if test(st.st_mode)), "not a regular file")
        raise OSError(errno.EINVAL, f"{name} is {kind}, not a regular file: an .idv is read "
                      f"by offset; read a stream into bytes first (idv.open(data), or "
                      f"`idv info -` for standard input)")


def read_stream(f, limit, name="standard input"):
    """All the bytes of binary stream `f` (a pipe), read in linear time; MemoryLimitError
    past `limit` bytes (idv._resources.budget)."""
    out = bytearray()
    while True:
        chunk = f.read(1 << 20)
        if not chunk:
            return bytes(out)
        out += chunk
        budget.check(len(out), limit, lambda: f"reading {name} into memory")


def _identity(st):
    """A local file's identity, from its stat: what tells another file in its place, or the
    file written since (a dataset reopening it, kept maps)."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def identity_of(path):
    """The identity a local `path` opened now would have (open_source's): the file's, or for
    a zip entry (``ARCHIVE.zip:ENTRY``) its archive's and the entry's name; OSError as
    os.stat raises it."""
    name = os.fspath(path)
    zipped = archive.split_zip(name)
    if zipped is not None:
        return _identity(os.stat(zipped[0])) + (zipped[1],)
    return _identity(os.stat(name))


def open_source(source, memory_limit=None):
    """Pick the source for a path, a bytes-like object or a file object (`memory_limit`:
    idv.open's, for what a zip entry may inflate to)."""
    if isinstance(source, (str, os.PathLike)):
        name = os.fspath(source)
        zipped = archive.split_zip(name)
        if zipped is not None:       # an .idv inside a zip: model.zip:DataLoaderModel/Schema.idv
            identity = identity_of(name)
            try:
                inner = open_source(archive.entry_source(*zipped, memory_limit))
            except KeyError as e:
                raise FileNotFoundError(e.args[0]) from None
            inner.name = name
            inner.identity = identity
            return inner
        fd = _open_fd(name)
        try:
            st = os.fstat(fd)
            check_regular(name, st)
            identity = _identity(st)
            if st.st_size <= SMALL_FILE_BYTES:
                data = _read_whole(fd, st.st_size)
                refuse_other_formats(data[:8], name)
                return MemorySource(data, name=name, shareable=True, identity=identity)
            refuse_other_formats(os.pread(fd, 8, 0) if hasattr(os, "pread") else
                                 _read_whole(fd, 8), name)
            mm = _map(fd, name, st)
        finally:
            os.close(fd)
        return MemorySource(mm, owner=mm, name=name, shareable=True,
                            mapped=(name, st.st_dev, st.st_ino, len(mm)), identity=identity)
    if isinstance(source, (bytes, bytearray, memoryview, mmap.mmap)):
        return MemorySource(source)
    try:
        memoryview(source)
    except TypeError:
        return FileSource(source)
    return MemorySource(source)
