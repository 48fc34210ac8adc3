"""Opening FILE: a path, or ``archive.zip:entry`` for an .idv inside a zip (an ML.NET model).

Every command opens its input here, so each failure to open reads the same: one line naming
the file, as a CliError.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import zipfile

import idv
from idv.cli.errors import EXIT_USAGE, CliError
from idv.errors import IdvFormatError

ZIP_READ_LIMIT = 256 << 20   # zip entries up to this size are read into memory


def split_zip(spec):
    """'a.zip:entry' -> ('a.zip', 'entry') when a.zip is a file; else None."""
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


def zip_entry(z, entry):
    """The archive member named `entry` (``/`` or ``\\`` as separators); CliError if none."""
    names = z.namelist()
    if entry in names:
        return z.getinfo(entry)
    norm = entry.replace("\\", "/").lstrip("/")
    for n in names:
        if n.replace("\\", "/") == norm:
            return z.getinfo(n)
    raise CliError(f"no entry {entry!r} in {z.filename}; .idv entries: "
                   f"{idv_entries(z) or 'none'}")


def idv_entries(z):
    """The archive's .idv members, for messages."""
    return ", ".join(n.replace("\\", "/") for n in z.namelist() if n.lower().endswith(".idv"))


@contextlib.contextmanager
def opening(spec):
    """Turn the ways opening `spec` fails into CliErrors (format errors pass through)."""
    try:
        yield
    except FileNotFoundError:
        raise CliError(f"{spec}: no such file") from None
    except PermissionError:
        raise CliError(f"{spec}: permission denied") from None
    except zipfile.BadZipFile as e:
        raise CliError(f"{spec}: bad zip archive ({e})") from None
    except OSError as e:
        raise CliError(f"{spec}: {e.strerror or e}") from None
    except (ValueError, ImportError) as e:
        if isinstance(e, IdvFormatError):
            raise
        raise CliError(str(e), EXIT_USAGE) from None   # e.g. an unknown --backend


def open_file(spec, threads=None, backend=None):
    """Open FILE (a path or archive.zip:entry); raises CliError with a one-line message."""
    with opening(spec):
        zipped = split_zip(spec)
        if zipped is not None:
            archive, entry = zipped
            with zipfile.ZipFile(archive) as z:
                info = zip_entry(z, entry)
                if info.file_size <= ZIP_READ_LIMIT:
                    source = z.read(info)
                else:   # a seekable stream; the ZipFile stays open through it
                    source = zipfile.ZipFile(archive).open(info)
            return idv.open(source, threads=threads, backend=backend)
        if os.path.isdir(spec):
            raise CliError(f"{spec}: is a directory")
        if zipfile.is_zipfile(spec):
            with zipfile.ZipFile(spec) as z:
                entries = idv_entries(z)
            raise CliError(f"{spec} is a zip archive; name an entry as {spec}:ENTRY"
                           + (f" (.idv entries: {entries})" if entries else " (it has no .idv)"))
        return idv.open(spec, threads=threads, backend=backend)


@contextlib.contextmanager
def as_path(spec):
    """A path holding FILE's bytes: FILE itself, or for archive.zip:entry a temporary copy of
    the entry (removed afterwards), for tools that take a path (the converter)."""
    zipped = split_zip(spec)
    if zipped is None:
        if not os.path.exists(spec):
            raise CliError(f"{spec}: no such file")
        if os.path.isdir(spec):
            raise CliError(f"{spec}: is a directory")
        yield spec
        return
    archive, entry = zipped
    tmpdir = tempfile.mkdtemp(prefix="idv-convert-")
    try:
        path = os.path.join(tmpdir, "entry.idv")
        with zipfile.ZipFile(archive) as z, z.open(zip_entry(z, entry)) as fin, \
                open(path, "wb") as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)
        yield path
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
