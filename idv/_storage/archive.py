""".idv files inside zip archives (ML.NET model zips): ``archive.zip:entry`` names one. Any
zip is recognised by its first bytes, whatever its extension (``MLModel.mlnet:entry``).

ML.NET writes its model zips on Windows as often as not, so entry names may use ``\\``;
either separator finds them.
"""
from __future__ import annotations

import contextlib
import errno
import lzma
import mmap
import os
import shutil
import struct
import tempfile
import zipfile
import zlib

from idv import compression
from idv._resources import budget
from idv.errors import IdvFormatError

READ_LIMIT = 256 << 20   # entries up to this size are read into memory, larger ones mapped
_STEP = 64 << 20         # inflated bytes per step of a larger entry
_ZEROS = bytes(_STEP)
_LOCAL_HEADER = struct.Struct("<4s22xHH")     # a member's local header: signature, name and
                                              # extra field lengths (30 bytes)
_SIGNATURE = b"CML\0DVB\0"   # the first 8 bytes of every IDV stream (the header's signature)
_ZIP_STARTS = (b"PK\x03\x04", b"PK\x05\x06")   # a zip's first member, or an empty zip
# what zipfile raises for a damaged archive: a bad record or CRC, a truncated or undecodable
# member, a name flagged UTF-8 that is not, a compression method or encryption it does not
# support
ZIP_DAMAGE = (zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError, UnicodeDecodeError,
              NotImplementedError, RuntimeError)


@contextlib.contextmanager
def damaged(name):
    """Raise IdvFormatError naming the archive `name` for what zipfile raises for damage."""
    try:
        yield
    except (*ZIP_DAMAGE, OSError) as e:
        # a seek to before the file's start (EINVAL), or bz2's "Invalid data stream" (no errno)
        if isinstance(e, OSError) and e.errno not in (errno.EINVAL, None):
            raise
        raise IdvFormatError(f"damaged zip archive: {e}", path=name) from e


def split_zip(spec):
    """'a.zip:entry' -> ('a.zip', 'entry') when a.zip is a zip archive (by its signature,
    whatever its name: Model Builder's ``MLModel.mlnet`` is one) and `spec` itself is not a
    file; else None."""
    spec = os.fspath(spec)
    if ":" not in spec or os.path.exists(spec):
        return None
    i = spec.find(":")
    while i >= 0:
        archive, entry = spec[:i], spec[i + 1:]
        if archive and os.path.isfile(archive) and is_zip(archive):
            return archive, entry
        i = spec.find(":", i + 1)
    return None


def split_in(fs, path):
    """split_zip for a path in an fsspec filesystem (a URL's): ('https://h/m.zip', 'entry')
    for 'https://h/m.zip:entry' when m.zip is a zip (its first bytes) and the whole path is
    no file; else None. Only colons after the host (and its port) are tried."""
    after = path.find("://")
    start = path.find("/", after + 3) if after >= 0 else 0
    if start < 0 or ":" not in path[start:] or fs.exists(path):
        return None
    i = path.find(":", start)
    while i >= 0:
        try:
            with fs.open(path[:i], "rb") as f:
                head = f.read(4)
        except (OSError, ValueError):
            head = b""
        if head in _ZIP_STARTS:
            return path[:i], path[i + 1:]
        i = path.find(":", i + 1)
    return None


def is_zip(path):
    """Whether the file at `path` is a zip archive: it starts as one does (a local file header,
    or the end record of an empty archive), or zipfile finds an archive's end record in it
    (bytes before the first member, as in a self-extracting archive: zipfile reads those,
    so idv.zip_entries lists their entries)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) in _ZIP_STARTS or zipfile.is_zipfile(f)
    except OSError:
        return False


def idv_entries(z):
    """The archive's .idv members, with ``/`` separators."""
    return [n.replace("\\", "/") for n in z.namelist() if n.lower().endswith(".idv")]


def idv_members(z):
    """The members that hold an IDV stream, whatever their names, found by the signature:
    (ZipInfo, where the stream starts: 0, or 4 behind the int32 length prefix that ML.NET puts
    before the streams it embeds in a model)."""
    found = []
    for info in z.infolist():
        if not info.filename or info.is_dir() or info.file_size < 8:   # no name: no spec
            continue
        with damaged(z.filename), z.open(info) as f:
            head = f.read(12)
        if head[:8] == _SIGNATURE:
            found.append((info, 0))
        elif head[4:12] == _SIGNATURE and \
                int.from_bytes(head[:4], "little", signed=True) == info.file_size - 4:
            found.append((info, 4))
    return found


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


def entry_source(archive, entry, memory_limit=None):
    """The bytes of ``archive:entry`` (see member_source)."""
    with damaged(archive), zipfile.ZipFile(archive) as z:
        return member_source(z, find_entry(z, entry), memory_limit)


def member_source(z, info, memory_limit=None):
    """The bytes of member `info` of the open archive `z`: in memory when small, else
    inflated once into an unnamed temporary file and mapped (a zip stream re-inflates from
    its start at every backward seek, and a reader seeks back and forth). An entry that
    declares more bytes than the memory limit allows for the archive (`memory_limit`, else
    idv._resources.budget's: 1,024 times the archive's compressed bytes, at least 1 GiB, within the
    machine's) is refused before anything is inflated: a zip bomb never reaches the disk."""
    archive_bytes = sum(i.compress_size for i in z.infolist())
    budget.check(info.file_size, budget.limit_for(archive_bytes, memory_limit),
                 lambda: f"{z.filename}:{info.filename}: inflating its "
                         f"{info.compress_size:,} stored bytes")
    with damaged(z.filename):
        if info.file_size <= READ_LIMIT:
            return z.read(info)
    with tempfile.TemporaryFile(prefix="idv-entry-") as spool:
        with damaged(z.filename):
            if not _inflate_into(z, info, spool):
                with z.open(info) as f:
                    shutil.copyfileobj(f, spool, 1 << 20)
        spool.flush()
        return mmap.mmap(spool.fileno(), 0, access=mmap.ACCESS_READ)


def _inflate_into(z, info, spool):
    """Whether member `info` (DEFLATE, not encrypted) was inflated into the file `spool` from
    its stored bytes, by the fastest DEFLATE library that streams, in large steps (zipfile
    inflates a few KB at a time: 2 GiB took 20 s), runs of zeros left as holes (no disk for
    them), its size and CRC-32 checked. False where zipfile has to read it."""
    fp = getattr(z, "fp", None)
    if info.compress_type != zipfile.ZIP_DEFLATED or info.flag_bits & 1 or fp is None \
            or not fp.seekable():
        return False
    fp.seek(info.header_offset)
    head = fp.read(_LOCAL_HEADER.size)
    if len(head) != _LOCAL_HEADER.size or head[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"no local header for {info.filename!r} at byte "
                                 f"{info.header_offset}")
    _, name_length, extra_length = _LOCAL_HEADER.unpack(head)
    fp.seek(info.header_offset + _LOCAL_HEADER.size + name_length + extra_length)
    inflater, crc32 = compression.stream_inflater()
    left, done, crc = info.compress_size, 0, 0
    while True:
        stored = fp.read(min(left, _STEP)) if left else b""
        left -= len(stored)
        if not stored and left:
            raise zipfile.BadZipFile(f"{info.filename!r} ends {left} bytes early")
        while True:
            out = inflater.decompress(stored, _STEP)
            stored = inflater.unconsumed_tail
            done += len(out)
            crc = crc32(out, crc)
            if done > info.file_size:
                raise zipfile.BadZipFile(f"{info.filename!r} inflates to more than the "
                                         f"{info.file_size:,} bytes it declares")
            if _ZEROS.startswith(out):
                spool.seek(len(out), os.SEEK_CUR)
            else:
                spool.write(out)
            if not out and not stored:
                break
        if not left:
            break
    if not inflater.eof or done != info.file_size:
        raise zipfile.BadZipFile(f"{info.filename!r} inflates to {done:,} bytes, not the "
                                 f"{info.file_size:,} it declares")
    if crc != info.CRC:
        raise zipfile.BadZipFile(f"Bad CRC-32 for file {info.filename!r}")
    spool.truncate(done)
    return True
