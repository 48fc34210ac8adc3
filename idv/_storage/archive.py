""".idv files inside zip archives (ML.NET model zips): ``archive.zip:entry`` names one. Any
zip is recognised by its first bytes, whatever its extension (``MLModel.mlnet:entry``).

ML.NET writes its model zips on Windows as often as not, so entry names may use ``\\``;
either separator finds them.
"""
from __future__ import annotations

import contextlib
import errno
import io
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
from idv.errors import IdvFormatError, RemoteError

READ_LIMIT = 256 << 20   # entries up to this size are read into memory, larger ones mapped
_STEP = 64 << 20         # inflated bytes per step of a larger entry
_ZEROS = bytes(_STEP)
_LOCAL_HEADER = struct.Struct("<4s22xHH")     # a member's local header: signature, name and
                                              # extra field lengths (30 bytes)
_SIGNATURE = b"CML\0DVB\0"   # the first 8 bytes of every IDV stream (the header's signature)
_ZIP_STARTS = (b"PK\x03\x04", b"PK\x05\x06")   # a zip's first member, or an empty zip
_BUFFER = 1 << 20        # bytes read ahead in a remote zip
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
        # a remote read's failure (an OSError without errno) is not the archive's damage
        if isinstance(e, RemoteError) or \
                isinstance(e, OSError) and e.errno not in (errno.EINVAL, None):
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


def url_splits(path):
    """The (archive, entry) that 'https://h/m.zip:entry' may mean, one for each colon after
    the host (and its port), the first colon first: whether the archive is a zip, only a
    request tells (idv._storage.remote asks it)."""
    after = path.find("://")
    start = path.find("/", after + 3) if after >= 0 else 0
    i = path.find(":", start) if start >= 0 else -1
    while i >= 0:
        yield path[:i], path[i + 1:]
        i = path.find(":", i + 1)


def starts_as_zip(head):
    """Whether bytes `head` start as a zip archive does (a member, or an empty archive)."""
    return bytes(head[:4]) in _ZIP_STARTS


class RangeFile(io.RawIOBase):
    """A source (idv._storage.source's interface: ``size``, ``view``) as a seekable binary
    file for zipfile: a remote zip read by the source's range requests, each with their
    deadline, retries and checks."""

    def __init__(self, src):
        super().__init__()
        self._src, self._pos = src, 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self._pos

    def seek(self, offset, whence=io.SEEK_SET):
        pos = (0, self._pos, self._src.size)[whence] + offset
        if pos < 0:
            raise OSError(errno.EINVAL, f"a seek to byte {pos}, before the file's start")
        self._pos = pos
        return pos

    def readinto(self, b):
        n = max(0, min(len(b), self._src.size - self._pos))
        if n:
            memoryview(b).cast("B")[:n] = self._src.view(self._pos, n)
            self._pos += n
        return n

    def close(self):
        self._src.close()
        super().close()


def ranged_file(src):
    """RangeFile over `src`, buffered: a member's header, name and stored bytes come in one
    request (zipfile reads them in three)."""
    return io.BufferedReader(RangeFile(src), _BUFFER)


def open_ranged(src):
    """The zip archive whose bytes `src` reads (a remote one, by ranges), named as `src`."""
    with damaged(src.name):
        z = zipfile.ZipFile(ranged_file(src))
    z.filename = src.name         # named in errors
    return z


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


def entry_in(z, entry, memory_limit=None):
    """The bytes of member `entry` of the open archive `z` (see member_source), which is then
    closed; FileNotFoundError listing its .idv entries if it has no such member."""
    with z:
        try:
            info = find_entry(z, entry)
        except KeyError as e:
            raise FileNotFoundError(e.args[0]) from None
        return member_source(z, info, memory_limit)


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
