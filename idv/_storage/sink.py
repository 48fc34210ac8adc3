"""Output files that appear whole or not at all: idv.write, idv.Writer and idv.convert.

A path is written through a temporary file in its directory (so the rename cannot cross file
systems): on Linux an anonymous one (O_TMPFILE), which a killed writer cannot leave behind;
elsewhere one named after the destination, this host and this process, which the next write to
the same destination removes once that process is gone. On commit the data are fsynced, the file
gets the permission bits the destination had (a new file: 0o666 less the umask, as open() would
give; root also keeps the owner), is renamed over the destination, and the directory is fsynced
so that the rename survives a crash (in a `batch` of commits, once as it ends); on Linux's local
disks the file it replaced is let go in a thread of its own (the kernel frees a file's blocks
when its last descriptor closes: 10-20 ms per 100 MB, not waited for). On any failure,
KeyboardInterrupt included, the temporary file is discarded and the destination is left as it
was. Refused before anything is written: with PermissionError, a file this user could not write
in place (read-only, or another user's); with OSError, one that is not a regular file
(/dev/null, a FIFO), which the rename would replace. A symbolic link's target is replaced, as
open() writes it. OSErrors name the destination as given, not the temporary file.
"""
from __future__ import annotations

import contextlib
import contextvars
import io
import os
import socket
import stat
import sys

from idv import _encode
from idv._resources import threads
from idv._storage.destination import destination

_WRITEBACK_CHUNK = 8 << 20     # bytes written between two early-writeback requests
# the temporary file's buffer: blocks of a few KB go to the kernel 256 KiB at a time (a
# system call per block cost 2.5 times the kernel time of the same bytes in large pieces)
FILE_BUFFER = 256 << 10


def new_file_mode(directory="."):
    """The permission bits open() gives a new file: 0o666 less the umask. The umask is read
    without changing it (os.umask can only be read by setting it, which races with other
    threads creating files): from /proc/self/status where there is one, else from the mode
    of a probe file created with 0o666 in `directory`."""
    with contextlib.suppress(OSError):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    for _ in range(100):
        probe = os.path.join(directory, f".idv-umask-{os.getpid()}-{os.urandom(6).hex()}")
        try:
            fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        except FileExistsError:
            continue
        try:
            return os.fstat(fd).st_mode & 0o777
        finally:
            os.close(fd)
            os.unlink(probe)
    raise OSError(f"cannot create a probe file in {directory!r} to read the umask")


_BATCH = contextvars.ContextVar("idv_sink_batch", default=None)  # batch()'s (dirs, listings)


@contextlib.contextmanager
def batch():
    """Commits of several files that finish together (a partitioned write's): each file is
    still fsynced before its rename, but each directory once, as the block ends, not once a
    file; and a directory is listed once for the temporary files of killed writers."""
    dirs = {}
    token = _BATCH.set((dirs, {}))
    try:
        yield
    finally:
        _BATCH.reset(token)
        for directory in dirs:
            fsync_dir(directory)


def fsync_dir(directory):
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return          # not possible everywhere (Windows): the rename is done regardless
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


# Temporary files: on Linux an anonymous file (O_TMPFILE) that only gets a name at commit, so a
# writer killed at any moment leaves nothing; elsewhere, or where the file system refuses
# O_TMPFILE, a hidden file named ".DEST.HOST.PID.RANDOM.idv-tmp": the next write to the same
# destination removes those whose process is gone.
_TMP_SUFFIX = ".idv-tmp"
_HOST = "".join(c if c.isalnum() or c in "-_" else "_" for c in socket.gethostname()) or "host"
_O_TMPFILE = getattr(os, "O_TMPFILE", None)


def _owned_name(base):
    return f".{base}.{_HOST}.{os.getpid()}.{os.urandom(4).hex()}{_TMP_SUFFIX}"


def is_temporary(path):
    """Whether `path` names one of the temporary files of this module (for error messages
    that should name the destination instead)."""
    path = os.fspath(path)
    return path.endswith(_TMP_SUFFIX) or path.startswith("/proc/self/fd/")


@contextlib.contextmanager
def naming(path, stand_in=None):
    """OSErrors raised inside name `path` (the destination as the caller gave it) where they
    named no file (a full disk's), a temporary file (a failed rename's) or `stand_in`."""
    try:
        yield
    except OSError as e:
        f = e.filename
        if path is not None and e.strerror and (f is None or isinstance(f, str) and
                                                (is_temporary(f) or f == stand_in)):
            e.filename = path
            del e.filename2             # (None would be shown as "-> None")
        raise


# What Windows lacks: os.kill(pid, 0) there ends the process instead of asking about it, and
# os.chmod takes no descriptor
_WINDOWS = os.name == "nt"
_CHMOD_BY_FD = os.chmod in os.supports_fd


def _process_gone(pid):
    if _WINDOWS:
        return _windows_process_gone(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:          # PermissionError: alive, another user's (or cannot tell: keep it)
        return False
    return False


def _windows_process_gone(pid, kernel32=None):
    """_process_gone by OpenProcess and GetExitCodeProcess (False when it cannot tell)."""
    import ctypes
    k = kernel32 if kernel32 is not None else ctypes.windll.kernel32
    handle = k.OpenProcess(0x1000, False, pid)     # PROCESS_QUERY_LIMITED_INFORMATION
    if not handle:
        return k.GetLastError() == 87               # ERROR_INVALID_PARAMETER: no such process
    try:
        code = ctypes.c_ulong()
        ok = k.GetExitCodeProcess(handle, ctypes.byref(code))
        return bool(ok) and code.value != 259       # 259: STILL_ACTIVE
    finally:
        k.CloseHandle(handle)


def remove_stale(parent, base):
    """Remove the temporary files that killed writers of ``parent/base`` left on this host;
    returns how many."""
    prefix, removed = f".{base}.", 0
    listings = (_BATCH.get() or (None, {}))[1]
    try:
        names = listings[parent] if parent in listings else os.listdir(parent)
    except OSError:
        return 0
    listings[parent] = names
    for name in names:
        if not (name.startswith(prefix) and name.endswith(_TMP_SUFFIX)):
            continue
        host, pid, token = (name[len(prefix):-len(_TMP_SUFFIX)].rsplit(".", 2) + ["", ""])[:3]
        if host != _HOST or not pid.isdigit() or len(token) != 8 or int(pid) == os.getpid():
            continue
        if _process_gone(int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(parent, name))
                removed += 1
    return removed


def _anonymous_file(parent):
    """A descriptor of a new nameless file in `parent`, or None where there is no O_TMPFILE."""
    if _O_TMPFILE is None:
        return None
    try:
        return os.open(parent, _O_TMPFILE | os.O_RDWR, 0o600)
    except OSError:         # EOPNOTSUPP, EISDIR (old kernels), EINVAL: the file system says no
        return None


class AtomicPath:
    """A temporary file for `dest` (``tmp``: a path to it, for writers that open files by
    name), put in place of `dest` by commit() and discarded by abort()."""

    def __init__(self, dest):
        self.dest, self.parent = destination(dest)     # a link's target: the file replaced
        self.given = os.fsdecode(os.fspath(dest))       # what errors name
        base = os.path.basename(self.dest)
        remove_stale(self.parent, base)
        # the descriptor stays open until commit() or abort(): an anonymous file lives on it
        self.fd = _anonymous_file(self.parent)
        if self.fd is not None:
            self.tmp, self.named = f"/proc/self/fd/{self.fd}", False
        else:
            self.tmp, self.named = os.path.join(self.parent, _owned_name(base)), True
            with naming(self.given):
                self.fd = os.open(self.tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)

    def open(self):
        """The temporary file as a binary file object (of a descriptor of its own)."""
        return os.fdopen(os.dup(self.fd), "w+b", buffering=FILE_BUFFER)

    def start_writeback(self):
        """Ask the kernel to start writing what another writer (pyarrow's, by `tmp`) wrote so
        far to disk, so that commit()'s fsync has little left to wait for."""
        size = os.fstat(self.fd).st_size
        _encode.start_writeback(self.fd, 0, size)

    def commit(self, file=None, still=None):
        """Fsync the temporary file (`file`, if it was opened through open(), is flushed and
        closed first), give it the destination's mode (and, for root, owner) and move it in
        place of the destination. `still`: called just before the move, to raise (and
        leave the destination as it is) if the destination is no longer what was read."""
        try:
            with naming(self.given):
                replaced = self._put_in_place(file, still)
        except BaseException:
            if file is not None:
                with contextlib.suppress(Exception):
                    file.close()
            self.abort()
            raise
        if (pending := _BATCH.get()) is None:
            fsync_dir(self.parent)
        else:
            pending[0][self.parent] = None      # fsynced as the batch ends
        if replaced is not None:
            threads.pool("release", 1).submit(os.close, replaced)

    def _put_in_place(self, file, still):
        """commit()'s work up to the rename; returns _hold's descriptor of the file replaced."""
        if file is not None:
            file.flush()
            file.close()
        os.fsync(self.fd)
        try:
            st = os.stat(self.dest)
            mode, owner = stat.S_IMODE(st.st_mode), (st.st_uid, st.st_gid)
        except FileNotFoundError:
            mode, owner = new_file_mode(self.parent), None
        os.chmod(self.fd if _CHMOD_BY_FD else self.tmp, mode)
        if owner is not None and hasattr(os, "geteuid") and os.geteuid() == 0:
            os.chown(self.fd, *owner)
        if not self.named:       # a name for the anonymous file, beside the destination
            name = os.path.join(self.parent, _owned_name(os.path.basename(self.dest)))
            dir_fd = os.open(self.parent, os.O_RDONLY)
            try:
                os.link(self.tmp, os.path.basename(name), dst_dir_fd=dir_fd,
                        follow_symlinks=True)
            finally:
                os.close(dir_fd)
            self.tmp, self.named = name, True
        if still is not None:
            still()
        self._close_fd()         # Windows renames no open file (the name keeps it)
        replaced = _hold(self.dest)
        try:
            os.replace(self.tmp, self.dest)
        except BaseException:
            if replaced is not None:
                os.close(replaced)
            raise
        self.tmp = None
        return replaced

    def _close_fd(self):
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)

    def abort(self):
        """Discard the temporary file (the destination is left as it was)."""
        with contextlib.suppress(OSError):
            self._close_fd()        # an anonymous file is gone with its last descriptor
        if self.tmp is not None and self.named:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.tmp)
        self.tmp = None


def holds_replaced(st):
    """Whether a file replaced on the file system of `st` (an os.stat_result) is held open
    across the rename: on Linux, on a file system of a block device (a local disk; Linux
    numbers network and virtual file systems' devices with major 0). Not on others: NFS
    keeps a file replaced while open under a ``.nfs`` name of its own."""
    return sys.platform.startswith("linux") and os.major(st.st_dev) != 0


def _hold(path):
    """A descriptor of the regular file at `path`, about to be replaced (None: there is none,
    it cannot be opened, or holds_replaced says no): its blocks are then freed when that
    descriptor is closed, in the pool's thread, not in the rename."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with contextlib.suppress(OSError):
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and holds_replaced(st):
            return fd
    os.close(fd)
    return None


_IOV_MAX = 1024      # parts a writev takes (POSIX's least IOV_MAX is 16; Linux's is 1024)


def write_vectored(fd, parts):
    """Write the bytes-like `parts` at the descriptor's position, up to _IOV_MAX to a system
    call (os.writev), going on after a short write."""
    views = [memoryview(p).cast("B") for p in parts]
    i = 0
    while i < len(views):
        wrote = done = os.writev(fd, views[i:i + _IOV_MAX])
        while i < len(views) and done >= len(views[i]):
            done -= len(views[i])
            i += 1
        if i < len(views):
            if not wrote:
                raise OSError(f"write to descriptor {fd} stopped short")
            views[i] = views[i][done:]


def _appends(f):
    """Whether file object `f` is on a descriptor opened with O_APPEND."""
    try:
        import fcntl
        return bool(fcntl.fcntl(f.fileno(), fcntl.F_GETFL) & os.O_APPEND)
    except (AttributeError, ImportError, OSError, ValueError, io.UnsupportedOperation):
        return False


class Output:
    """Where the writer's bytes go: a path, through an AtomicPath, or a seekable binary file
    object written in place from its current position (not atomic: on abort it is cut back
    to where the .idv began). Offsets are counted from the start of the .idv."""

    def __init__(self, dest):
        self.path = self.file = self.atomic = None
        self.base = self.size = self.synced = 0
        if isinstance(dest, (str, bytes, os.PathLike)):
            self.path = dest
        elif hasattr(dest, "write"):
            try:
                seekable = dest.seekable()
            except (AttributeError, ValueError, OSError):
                seekable = False
            gzip = sys.modules.get("gzip")    # a GzipFile is seekable() but writes forward only
            if not seekable or gzip is not None and isinstance(dest, gzip.GzipFile):
                raise ValueError(f"idv.write needs a seekable binary file object (the header is "
                                 f"written last, at the start"
                                 f"{'; a GzipFile seeks only forward' if seekable else ''}); "
                                 f"write to a path or an io.BytesIO and copy (or compress) it")
            if hasattr(dest, "writable") and not dest.writable():
                raise ValueError("the file object is not writable")
            mode = getattr(dest, "mode", "b")       # a GzipFile's is an int
            if isinstance(mode, str) and "b" not in mode:
                raise TypeError("the file object must be opened in binary mode")
            if isinstance(mode, str) and "a" in mode or _appends(dest):
                raise ValueError("the file object is opened for appending, where every write "
                                 "goes to the end (the header, written last, at the start "
                                 "would not): open it with 'wb' or 'r+b'")
            self.file = dest
        else:
            raise TypeError(f"dest must be a path or a seekable binary file object, not "
                            f"{type(dest).__name__}")
        if self.path is not None:
            destination(self.path)      # fail now, not when the first block is written
        self.opened, self.given = False, None   # given: the path as given, what OSErrors name

    def open(self):
        """Start writing: create the temporary file (a path), or note where the .idv begins
        (a file object)."""
        if self.path is not None:
            self.atomic = AtomicPath(self.path)
            self.given = self.atomic.given
            self.file = self.atomic.open()
        else:
            self.base = self.file.tell()
        self.opened = True

    def write(self, data):
        """Append; returns the offset (from the .idv's start) where `data` begins."""
        offset = self.size
        n = memoryview(data).nbytes
        if n:
            with naming(self.given):
                self.file.write(data)
        return self._wrote(offset, n)

    def _wrote(self, offset, n):
        self.size += n
        if self.atomic is not None and self.size - self.synced >= _WRITEBACK_CHUNK:
            # start writing to disk now, so that the fsync at the end has little to wait for
            with naming(self.given):
                self.file.flush()
            _encode.start_writeback(self.file.fileno(), self.synced, self.size - self.synced)
            self.synced = self.size
        return offset

    def write_all(self, parts):
        """Append the bytes-like `parts` one after another; returns the offset where the first
        begins. Into the temporary file they go straight to the kernel, many to a system call
        (the buffer's copy and its small writes cost a third more kernel and copying time)."""
        offset = self.size
        n = sum(memoryview(p).nbytes for p in parts)
        with naming(self.given):
            if self.atomic is not None and len(parts) > 1 and hasattr(os, "writev"):
                self.file.flush()
                write_vectored(self.file.fileno(), parts)
                self.file.seek(self.base + offset + n)      # the file object's position follows
            else:
                self.file.writelines(parts)
        return self._wrote(offset, n)

    def write_at(self, offset, data):
        """Overwrite bytes at `offset` (the header, written last), then go back to the end."""
        with naming(self.given):
            self.file.seek(self.base + offset)
            self.file.write(data)
            self.file.seek(self.base + self.size)

    def commit(self, still=None):
        """Finish: the path is moved into place (`still`: as AtomicPath.commit's); a file
        object is flushed."""
        if self.atomic is None:
            self.file.flush()
            return
        atomic, self.atomic = self.atomic, None
        atomic.commit(self.file, still)

    def abort(self):
        """Discard what was written: remove the temporary file, or cut a file object back."""
        if self.path is not None:
            if self.atomic is not None:
                with contextlib.suppress(Exception):
                    self.file.close()
                self.atomic.abort()
                self.atomic = None
        elif self.opened:
            with contextlib.suppress(Exception):
                self.file.seek(self.base)
                self.file.truncate()
