"""Opening what a command is given: FILE, a path or ``archive.zip:entry`` for an .idv inside
a zip (an ML.NET model), opened as one file exactly as always; or a dataset (idv.dataset): a
directory (every .idv under it), a glob (quoted: ``"days/*.idv"``), several paths (a glob the
shell expanded) or a URL (``s3://``, ``https://``..., through fsspec).

Every command opens its input here, so each failure to open reads the same: one line naming
the file, or the argument that matched nothing, as a CliError; and each opens it within the
memory limit --memory-limit sets (memory_limit).
"""
from __future__ import annotations

import contextlib
import glob
import os
import shutil
import sys
import tempfile
import zipfile

import idv
from idv._storage import archive, remote, source
from idv._resources import budget
from idv._scan import filter_tree
from idv.cli.errors import EXIT_USAGE, CliError
from idv._reader.dataset import Dataset, expand_sources
from idv._storage.paths import is_directory
from idv.errors import IdvFormatError, MissingDependencyError

split_zip = archive.split_zip


def memory_limit(nbytes):
    """--memory-limit: the limit of what reads of every file the command opens allocate
    (idv.set_memory_limit's, so that the files a command hands to idv by path have it too),
    for the time of the command; None: idv's default."""
    return budget.limited(nbytes, "--memory-limit")


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
def opening(spec, storage_options=None):
    """Turn the ways opening `spec` fails into CliErrors (format errors pass through); with
    `storage_options`, a TypeError is the filesystem refusing one of them."""
    try:
        yield
    except TypeError as e:
        if not storage_options:
            raise
        raise CliError(f"{spec}: the filesystem refused an option of --storage-option: {e}",
                       EXIT_USAGE) from None
    except FileNotFoundError:
        raise CliError(f"{spec}: no such file") from None
    except PermissionError:
        raise CliError(f"{spec}: permission denied") from None
    except zipfile.BadZipFile as e:
        raise CliError(f"{spec}: bad zip archive ({e})") from None
    except OSError as e:
        text = str(e.strerror or e)      # a remote error names its URL already
        raise CliError(text if text.startswith(str(spec)) else f"{spec}: {text}") from None
    except (ValueError, ImportError) as e:
        if isinstance(e, (IdvFormatError, MissingDependencyError)):
            raise       # a bad file, or a package to install: code 1
        raise CliError(str(e), EXIT_USAGE) from None   # an option the file cannot take


def open_file(spec, threads=None, backend=None):
    """Open FILE (a path or archive.zip:entry; ``-``: standard input, read whole within the
    memory limit); raises CliError with a one-line message."""
    with opening(spec):
        if spec == "-":
            stdin = getattr(sys.stdin, "buffer", sys.stdin)
            data = source.read_stream(stdin, budget.limit_for(0))
            return idv.open(data, threads=threads, backend=backend)
        source.check_regular(spec)         # a FIFO or a device: refused, never opened
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
        with opening(spec):
            source.check_regular(spec)
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


# ---------------------------------------------------------------- datasets

def unknown_extra_files(specs):
    """The FILE arguments after the first that name nothing: no file, directory, zip entry,
    match of a glob or URL, nor a file's name (a mistyped argument such as ``5`` rather than
    another file of a dataset; a missing ``b.idv`` or ``data/b`` is reported as a file)."""
    return [s for s in specs[1:] if not (os.path.exists(s) or remote.is_remote(s)
                                         or glob.has_magic(s) or split_zip(s) is not None
                                         or _file_name(s))]


def _file_name(spec):
    """Whether `spec` reads as a file's name: a directory part, or an extension of letters."""
    ext = os.path.splitext(spec)[1][1:]
    return os.path.dirname(spec) != "" or (ext.isalnum() and not ext.isdigit())


class Sources:
    """A command's FILE arguments, resolved: ``single`` (one file, opened as always) or the
    paths of a dataset in order, with the fsspec filesystem they are in (None: local), made
    with `storage_options` (--storage-option) for URLs."""

    def __init__(self, specs, storage_options=None):
        self.specs = list(specs)
        self.label = " ".join(self.specs)      # names the input in messages and JSON
        if storage_options and not any(remote.is_remote(s) for s in self.specs):
            raise CliError("--storage-option is for URLs (s3://, https://...), and no FILE is "
                           "one", EXIT_USAGE)
        self.storage_options = storage_options
        found = [_expand(s, storage_options) for s in self.specs]
        self.single = len(found) == 1 and not found[0][2]
        self.paths = [p for paths, _, _ in found for p in paths]
        kinds = {type(fs) for _, fs, _ in found}
        if len(kinds) > 1:
            raise CliError("the files of one dataset must all be local, or all URLs of one "
                           "kind", EXIT_USAGE)
        self.filesystem = found[0][1]


def _expand(spec, storage_options=None):
    """(paths, filesystem, whether `spec` names several files: a directory or a glob)."""
    if remote.is_remote(spec):
        with opening(spec, storage_options):
            fs, path, _ = remote.resolve(spec, storage_options=storage_options)
            many = glob.has_magic(path) or is_directory(fs, path)
    else:
        fs, path = None, spec
        many = os.path.isdir(spec) or (glob.has_magic(spec) and not os.path.exists(spec))
    if not many:
        return [path], fs, False
    try:
        return expand_sources(path, filesystem=fs)[0], fs, True
    except FileNotFoundError:
        what = "no file matches" if glob.has_magic(path) else "no .idv files in this directory"
        raise CliError(f"{spec}: {what}") from None


def open_sources(sources, args):
    """An IdvFile for one file (as open_file), else the idv.Dataset of the files, with the
    options --columns (names only are given to the dataset, so that the other columns'
    types need not agree), --schema and --skip-bad-files (open_dataset)."""
    if sources.single:
        if sources.filesystem is None:
            return open_file(sources.specs[0], threads=args.threads, backend=args.backend)
        return open_path(sources, sources.paths[0], args, name=sources.label)
    with opening(sources.label, sources.storage_options):
        return open_dataset(sources, args)


def open_dataset(sources, args):
    """The idv.Dataset of the sources' files (one file too, e.g. for convert of a URL)."""
    spec = getattr(args, "columns", None)
    names = None if spec is None else [s.strip() for s in spec.split(",")]
    if names is not None and any(n.lstrip("-").isdigit() for n in names):
        names = None    # indices are the first file's: chosen once it is open
    if names is not None:       # a filter may name columns the output leaves out
        names += [c for c in _where_columns(args) if c not in names]
    try:
        return Dataset(sources.paths, filesystem=sources.filesystem, columns=names,
                       schema=getattr(args, "schema", "exact"),
                       on_bad_file="skip" if getattr(args, "skip_bad_files", False)
                       else "raise", threads=args.threads, backend=args.backend)
    except KeyError as e:                # a column the files do not have
        raise CliError(e.args[0], EXIT_USAGE) from None
    except IdvFormatError as e:          # names its file
        raise CliError(str(e).replace("on_bad_file='skip'", "--skip-bad-files")) from None
    except ValueError as e:              # the files' schemas differ
        raise CliError(str(e).replace("schema='common'", "--schema common")) from None
    except OSError as e:
        if e.filename is None:           # every file was skipped
            raise CliError(f"{sources.label}: {e}") from None
        with opening(e.filename):
            raise


def _where_columns(args):
    """The columns --where names ([] without one, or for one not understood: cat says why)."""
    try:
        return filter_tree.columns_of(filter_tree.parse(getattr(args, "where", None) or ""))
    except (ValueError, TypeError):
        return []


def open_path(sources, path, args, name=None):
    """One file of the sources by itself (verify checks them one by one)."""
    with opening(name or path, sources.storage_options):
        return idv.open(path, filesystem=sources.filesystem, threads=args.threads,
                        backend=args.backend)
