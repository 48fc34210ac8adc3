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
from idv import archive
from idv.cli.errors import EXIT_USAGE, CliError
from idv.errors import IdvFormatError

split_zip = archive.split_zip


def zip_entry(z, entry):
    """The archive member named `entry` (``/`` or ``\\`` as separators); CliError if none."""
    try:
        return archive.find_entry(z, entry)
    except KeyError as e:
        raise CliError(e.args[0]) from None


def idv_entries(z):
    """The archive's .idv members, for messages."""
    return ", ".join(archive.idv_entries(z))


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
            with zipfile.ZipFile(zipped[0]) as z:
                zip_entry(z, zipped[1])      # a missing entry: one line naming the ones there
            return idv.open(spec, threads=threads, backend=backend)
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
    zip_path, entry = zipped
    tmpdir = tempfile.mkdtemp(prefix="idv-convert-")
    try:
        path = os.path.join(tmpdir, "entry.idv")
        with zipfile.ZipFile(zip_path) as z, z.open(zip_entry(z, entry)) as fin, \
                open(path, "wb") as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)
        yield path
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
