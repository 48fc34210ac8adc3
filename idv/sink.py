"""Output files that appear whole or not at all: idv.write, idv.Writer and idv.convert.

A path is written through a temporary file beside it (same directory, so the rename cannot
cross file systems). On commit the data are flushed and fsynced, the file gets the permission
bits the destination had (a new file: 0o666 less the umask, as open() would give), is renamed
over the destination, and the directory is fsynced so that the rename itself survives a crash.
On any failure, KeyboardInterrupt included, the temporary file is removed and the destination
is left as it was.
"""
from __future__ import annotations

import os
import tempfile

from idv import _encode

_WRITEBACK_CHUNK = 8 << 20     # bytes written between two early-writeback requests


def new_file_mode(directory="."):
    """The permission bits open() gives a new file: 0o666 less the umask. The umask is read
    without changing it (os.umask can only be read by setting it, which races with other
    threads creating files): from /proc/self/status where there is one, else from the mode
    of a probe file created with 0o666 in `directory`."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except OSError:
        pass
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


def _fsync_dir(directory):
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return          # not possible everywhere (Windows): the rename is done regardless
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def destination(dest):
    """(path, its directory) of a destination path, checked: the directory exists and the
    path is not a directory."""
    path = os.fsdecode(os.fspath(dest))
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"cannot write {path!r}: directory {parent!r} does not exist")
    if os.path.isdir(path):
        raise IsADirectoryError(f"cannot write {path!r}: it is a directory")
    return path, parent


class AtomicPath:
    """A temporary file beside `dest` (``tmp``: its path, for writers that open files by
    name), renamed over `dest` by commit() and removed by abort()."""

    def __init__(self, dest):
        self.dest, self.parent = destination(dest)
        # the descriptor stays open until open(), commit() or abort()
        self.fd, self.tmp = tempfile.mkstemp(dir=self.parent, suffix=".tmp",
                                             prefix="." + os.path.basename(self.dest) + ".")

    def open(self):
        """The temporary file as a binary file object (it closes the descriptor with it)."""
        f = os.fdopen(self.fd, "w+b")
        self.fd = None
        return f

    def commit(self, file=None):
        """Fsync the temporary file (`file`, if it was opened through open(), is flushed and
        closed), give it the destination's mode and rename it over the destination."""
        try:
            if file is not None:
                file.flush()
                os.fsync(file.fileno())
                file.close()
            else:
                if self.fd is None:
                    self.fd = os.open(self.tmp, os.O_RDONLY)
                os.fsync(self.fd)
            self._close_fd()
            try:
                mode = os.stat(self.dest).st_mode & 0o7777
            except FileNotFoundError:
                mode = new_file_mode(self.parent)
            os.chmod(self.tmp, mode)
            os.replace(self.tmp, self.dest)
            self.tmp = None
        except BaseException:
            if file is not None:
                _close_quietly(file)
            self.abort()
            raise
        _fsync_dir(self.parent)

    def _close_fd(self):
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)

    def abort(self):
        """Remove the temporary file (the destination is left as it was)."""
        try:
            self._close_fd()
        except OSError:
            pass
        if self.tmp is not None:
            try:
                os.unlink(self.tmp)
            except FileNotFoundError:
                pass
            self.tmp = None


def _close_quietly(f):
    try:
        f.close()
    except Exception:
        pass


class Output:
    """Where the writer's bytes go: a path, through an AtomicPath, or a seekable binary file
    object written in place from its current position (not atomic: on abort it is cut back
    to where the .idv began). Offsets are counted from the start of the .idv."""

    def __init__(self, dest):
        self.path = None
        self.file = None
        self.atomic = None
        self.base = 0
        self.size = 0
        self.synced = 0
        if isinstance(dest, (str, bytes, os.PathLike)):
            self.path = dest
        elif hasattr(dest, "write"):
            try:
                seekable = dest.seekable()
            except (AttributeError, ValueError, OSError):
                seekable = False
            if not seekable:
                raise ValueError("idv.write needs a seekable binary file object (the header is "
                                 "written last, at the start); write to a path or an "
                                 "io.BytesIO and copy it instead")
            if hasattr(dest, "writable") and not dest.writable():
                raise ValueError("the file object is not writable")
            if hasattr(dest, "mode") and "b" not in getattr(dest, "mode", "b"):
                raise TypeError("the file object must be opened in binary mode")
            self.file = dest
        else:
            raise TypeError(f"dest must be a path or a seekable binary file object, not "
                            f"{type(dest).__name__}")
        if self.path is not None:
            destination(self.path)      # fail now, not when the first block is written
        self.opened = False

    def open(self):
        """Start writing: create the temporary file (a path), or note where the .idv begins
        (a file object)."""
        if self.path is not None:
            self.atomic = AtomicPath(self.path)
            self.file = self.atomic.open()
        else:
            self.base = self.file.tell()
        self.opened = True

    def write(self, data):
        """Append; returns the offset (from the .idv's start) where `data` begins."""
        offset = self.size
        n = memoryview(data).nbytes
        if n:
            self.file.write(data)
        self.size += n
        if self.atomic is not None and self.size - self.synced >= _WRITEBACK_CHUNK:
            # start writing to disk now, so that the fsync at the end has little to wait for
            self.file.flush()
            _encode.start_writeback(self.file.fileno(), self.synced, self.size - self.synced)
            self.synced = self.size
        return offset

    def write_at(self, offset, data):
        """Overwrite bytes at `offset` (the header, written last), then go back to the end."""
        self.file.seek(self.base + offset)
        self.file.write(data)
        self.file.seek(self.base + self.size)

    def commit(self):
        """Finish: the path is moved into place; a file object is flushed."""
        if self.atomic is None:
            self.file.flush()
            return
        atomic, self.atomic = self.atomic, None
        atomic.commit(self.file)

    def abort(self):
        """Discard what was written: remove the temporary file, or cut a file object back."""
        if self.path is not None:
            if self.atomic is not None:
                _close_quietly(self.file)
                self.atomic.abort()
                self.atomic = None
        elif self.opened:
            try:
                self.file.seek(self.base)
                self.file.truncate()
            except Exception:
                pass
