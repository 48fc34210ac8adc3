"""Exceptions raised for files that are not valid ML.NET dataviews.

An error carries where it happened as attributes, and its message is built from them, so
nothing has to parse messages to find the column or the byte. Each layer raises with what it
knows (a cursor knows the byte offset, the reader the column and the block, the file its path)
and the layers above add the rest with ``locate``. Bad values (given to the writer, or read
into a unit that cannot hold them) are named by column, row and item with `Where`.
"""
from __future__ import annotations

import contextlib
import os
import sys
import warnings

import numpy as np

# the location attributes, in the order the message names them
_WHERE = ("path", "column", "column_index", "metadata_kind", "block", "offset")


class IdvFormatError(ValueError):
    """The bytes are not a valid .idv file; the message names what is wrong and where.

    Attributes (None where unknown): ``reason`` (what is wrong), ``path`` (the file, when it
    was opened from a path or a named file object), ``column`` (the column's name),
    ``column_index``, ``metadata_kind`` (the annotation, e.g. ``'SlotNames'``), ``block``
    (the block's index in the column) and ``offset`` (the absolute byte offset in the file).
    ``str(e)`` is built from them, e.g.
    ``data.idv: column 3 'Features' block 5 (byte 81920): VBuffer block too short: ...``.
    """

    def __init__(self, reason, *, path=None, column=None, column_index=None,
                 metadata_kind=None, block=None, offset=None):
        super().__init__(reason)
        self.reason = reason
        self.path = None if path is None else os.fspath(path)
        self.column = column
        self.column_index = column_index
        self.metadata_kind = metadata_kind
        self.block = block
        self.offset = offset

    def locate(self, **where):
        """Fill in the location attributes given that are still None; returns this error.

        For the layers above the one that raised: ``raise e.locate(column=..., block=...)``
        adds what they know without overwriting what a lower layer already said.

        Parameters
        ----------
        **where
            ``path``, ``column``, ``column_index``, ``metadata_kind``, ``block``, ``offset``
            (TypeError for another name).
        """
        unknown = where.keys() - set(_WHERE)
        if unknown:
            raise TypeError(f"locate() got unknown location {sorted(unknown)}")
        for name, value in where.items():
            if value is not None and getattr(self, name) is None:
                setattr(self, name, os.fspath(value) if name == "path" else value)
        return self

    @property
    def location(self):
        """The place in the file, without the path: ``column 3 'Features' block 5 (byte
        81920)``, ``byte 32``, or ``''`` when nothing is known."""
        parts = []
        if self.column_index is not None:
            parts.append(f"column {self.column_index}"
                         + ("" if self.column is None else f" {self.column!r}"))
        elif self.column is not None:
            parts.append(f"column {self.column!r}")
        if self.metadata_kind is not None:
            parts.append(f"metadata {self.metadata_kind!r}")
        if self.block is not None:
            parts.append(f"block {self.block}")
        if self.offset is not None:
            parts.append(f"(byte {self.offset})" if parts else f"byte {self.offset}")
        return " ".join(parts)

    def __str__(self):
        return ": ".join(str(part) for part in (self.path, self.location, self.reason) if part)

    def __repr__(self):
        # with the location, as str gives it: logs print repr (a Dask worker's among them)
        return f"{type(self).__name__}({str(self)!r})"

    def __reduce__(self):
        # pickled with its location (errors cross process boundaries, e.g. test workers)
        return _rebuild, (type(self), self.reason, {k: getattr(self, k) for k in _WHERE})


def _rebuild(cls, reason, where):
    return cls(reason, **where)


class IdvWarning(UserWarning):
    """Something worth seeing that does not stop the work: a column with a codec ML.NET would
    also skip, or an idv.Writer dropped without close() (its rows are discarded). Python shows
    UserWarnings by default."""


# idv's own source files, and contextlib's through which idv's context managers run: a
# warning names the first line outside them
_OWN = (os.path.dirname(os.path.abspath(__file__)) + os.sep, contextlib.__file__)


def warn(message, category=IdvWarning):
    """Warn at the caller's line: the first frame outside idv, however deep in idv the
    warning is found and through whichever entry point (a counted stacklevel is right from
    one entry point only)."""
    frame, level = sys._getframe(1), 2      # level 2: warn's caller
    while frame is not None and frame.f_back is not None and \
            frame.f_code.co_filename.startswith(_OWN):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


class UnsupportedCodecError(IdvFormatError):
    """The column's codec or compression is unknown to this reader (ML.NET skips such columns)."""


class MissingDependencyError(ImportError):
    """An optional package that a function needs is not installed; the message names the pip
    command (``pip install 'idv[arrow]'``). The command line prints it on one line."""


def column_place(name, path=None, joined=False):
    """How a message names column `name` of the rows it counts: a file's (``path: column
    'x'``), a dataset's files joined (``column 'x' dataset``: rows counted over them), or a
    source's without a path (``column 'x'``)."""
    if joined:
        return f"column {name!r} dataset"
    return f"column {name!r}" if path is None else f"{path}: column {name!r}"


def no_column(name, names, where="", by=""):
    """The KeyError of a column `name` that is none of `names`, wherever a column is named
    (columns=, a filter, ``--where``: `by`, before the message): the columns there are, and
    the one meant where a name differs from it in case only (or is a close spelling)."""
    import difflib
    close = [n for n in names if n.lower() == name.lower()] or \
        difflib.get_close_matches(name, names, 1)
    meant = f" (did you mean {close[0]!r}?)" if close else ""
    return KeyError(f"{by}no column {name!r}{where}{meant}; columns: {list(names)}")


class Where:
    """Names a column and turns a flat item position into 'row r' / 'row r item j', for the
    messages of bad values (the `where` / `describe` of idv._values.ticks, the writer's checks, the
    Arrow and pandas conversions). Items are flat over rows of one `width`, or cut into rows
    by `offsets` (with `slots`, the sparse items' own slot indices). Rows count from `base`:
    the rows before these (the file's, when writing a batch; a block's first when reading)."""

    def __init__(self, column, offsets=None, slots=None, width=None, base=0):
        self.column = column
        self.offsets = offsets
        self.slots = slots
        self.width = width          # rows of one length: no offsets needed
        self.base = base

    def __call__(self, pos):
        pos = int(pos)
        if self.width:
            return f"{self.column} row {self.base + pos // self.width} item {pos % self.width}"
        if self.offsets is None:
            return f"{self.column} row {self.base + pos}"
        row = int(np.searchsorted(self.offsets, pos, side="right")) - 1
        item = pos - int(self.offsets[row]) if self.slots is None else int(self.slots[pos])
        return f"{self.column} row {self.base + row} item {item}"

    def __str__(self):
        return self.column


def require(module, purpose, install):
    """The module `module`, imported, or MissingDependencyError: "`purpose` needs `module`:
    pip install `install`"."""
    import importlib
    import importlib.util
    try:
        return importlib.import_module(module)
    except (ImportError, OSError, MemoryError) as e:
        top = module.split(".")[0]
        try:
            installed = importlib.util.find_spec(top) is not None
        except (ImportError, ValueError):
            installed = False
        missing = isinstance(e, ModuleNotFoundError) and e.name in (top, module)
        if installed and not missing:
            # there, but it failed to load (a library it needs, memory, a broken install)
            raise MissingDependencyError(
                f"{purpose} needs {module}, which is installed but failed to import: "
                f"{type(e).__name__}: {e}") from e
        raise MissingDependencyError(f"{purpose} needs {module}: pip install '{install}'") \
            from None


class RemoteError(OSError):
    """A remote read failed: the message names the URL, what was being read and
    why (a connection refused, an error status, a truncated answer, a server that ignores Range
    requests). ``url`` is the file's URL. A missing remote file raises FileNotFoundError and a
    refused one PermissionError, as local files do."""

    def __init__(self, message, url=None):
        super().__init__(message)
        self.url = url


class RemoteChangedError(RemoteError, IdvFormatError):
    """A remote file changed while it was read (an answer of another version than the one
    opened): a RemoteError, as every failed remote read is, and an IdvFormatError, as a local
    file written in place while read is, so that ``except idv.IdvFormatError`` catches a
    changed file wherever it is."""

    def __init__(self, message, url=None):
        IdvFormatError.__init__(self, message)
        self.url = url

    def __str__(self):
        return self.reason

    def __reduce__(self):
        return type(self), (self.reason, self.url)


class RangeNotSupportedError(RemoteError):
    """The server ignores HTTP Range requests (it sends the whole file for each): idv.open
    then fetches the file whole, once, with an IdvWarning."""


class RemoteTimeoutError(RemoteError, TimeoutError):
    """A remote request took longer than its timeout (``idv.open(url, timeout=)``)."""
