"""What a zip archive (an ML.NET model) holds: each IDV stream in it with its schema.

ML.NET keeps its data and schemas as .idv members of a model zip, some named otherwise and
some behind a length prefix; ``idv.zip_entries`` finds them all by signature. ``idv ls``
prints the same.
"""
from __future__ import annotations

import os
import warnings
import zipfile
from dataclasses import dataclass
from typing import List, Optional

from idv import _docs
from idv._storage import remote
from idv._storage.remote_options import deadline, refuse_storage_options
from idv._storage.archive import damaged, idv_members, member_source
from idv.errors import IdvFormatError, IdvWarning
from idv._reader.reader import open as open_idv
from idv._reader.schema import Schema


@dataclass
class ZipEntry:
    """One IDV stream inside a zip: ``name`` as stored (ML.NET's ``\\`` kept), ``spec`` the
    ``ARCHIVE.zip:ENTRY`` that idv.open takes, ``size`` its bytes in the archive, ``prefixed``
    whether a length prefix comes first; ``schema`` (None when the stream cannot be read, then
    ``error`` says why)."""

    name: str
    spec: str
    size: int
    prefixed: bool
    schema: Optional[Schema]
    error: Optional[str] = None

    @property
    def num_rows(self) -> Optional[int]:
        """The stream's row count (None when it cannot be read)."""
        return None if self.schema is None else self.schema.num_rows


@_docs.fill
def zip_entries(path, storage_options=None, *, filesystem=None,
                timeout=None) -> List[ZipEntry]:
    """Every IDV stream in a zip archive (an ML.NET model), found by signature (not by name),
    with its schema; only the headers and tables of contents are read.

    Parameters
    ----------
    path : str or os.PathLike
        A local path or a URL.
    {storage_options}
    {filesystem}
    {timeout}

    Returns
    -------
    list of ZipEntry
    """
    path = os.fspath(path)
    timeout = deadline(timeout)
    if remote.is_remote(path, filesystem):           # a URL: read by ranges
        fs, inner, path = remote.resolve(path, filesystem, storage_options)
        with damaged(path):
            opened = remote.open_zip(fs, inner, timeout)
    else:
        refuse_storage_options(path, storage_options)
        with damaged(path):
            opened = zipfile.ZipFile(path)
    with opened as z:      # opened once: its directory is read once
        return _entries(z, path)


def _entries(z, path):
    """The ZipEntry of each IDV stream in the open archive `z`."""
    found = []
    for info, start in idv_members(z):
        schema, error = None, None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", IdvWarning)   # unknown codecs: shown
                with open_idv(member_source(z, info)) as f:
                    schema = f.schema
        except IdvFormatError as e:
            error = e.reason
        found.append(ZipEntry(info.filename,
                              f"{path}:{info.filename.replace(chr(92), '/')}",
                              info.file_size, start > 0, schema, error))
    return found
