""".idv files inside zip archives (ML.NET model zips): ``archive.zip:entry`` names one.

ML.NET writes its model zips on Windows as often as not, so entry names may use ``\\``;
either separator finds them.
"""
from __future__ import annotations

import os
import zipfile

READ_LIMIT = 256 << 20   # entries up to this size are read into memory, larger ones streamed


def split_zip(spec):
    """'a.zip:entry' -> ('a.zip', 'entry') when a.zip is a file and `spec` itself is not;
    else None."""
    spec = os.fspath(spec)
    if os.path.exists(spec):
        return None
    low = spec.lower()
    i = low.find(".zip:")
    while i >= 0:
        archive, entry = spec[:i + 4], spec[i + 5:]
        if os.path.isfile(archive):
            return archive, entry
        i = low.find(".zip:", i + 1)
    return None


def idv_entries(z):
    """The archive's .idv members, with ``/`` separators."""
    return [n.replace("\\", "/") for n in z.namelist() if n.lower().endswith(".idv")]


def find_entry(z, entry):
    """The member named `entry` (``/`` or ``\\`` as separators); KeyError naming the .idv
    entries there are if none."""
    names = z.namelist()
    if entry in names:
        return z.getinfo(entry)
    norm = entry.replace("\\", "/").lstrip("/")
    for n in names:
        if n.replace("\\", "/") == norm:
            return z.getinfo(n)
    raise KeyError(f"no entry {entry!r} in {z.filename}; .idv entries: "
                   f"{', '.join(idv_entries(z)) or 'none'}")


def entry_source(archive, entry):
    """The bytes of ``archive:entry`` (small entries), or a seekable stream of it."""
    with zipfile.ZipFile(archive) as z:
        info = find_entry(z, entry)
        if info.file_size <= READ_LIMIT:
            return z.read(info)
    return zipfile.ZipFile(archive).open(info)   # the stream keeps its ZipFile open
