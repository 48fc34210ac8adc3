"""Many .idv files read as one table: ``idv.dataset``.

ML.NET leaves .idv files by the dozen (one per day, per shard, per experiment) and cannot load
two as one. A Dataset is their rows end to end, in file order: it opens each file's header,
table of contents and lookup tables (``idv.open``), checks that their columns agree, and reads
blocks only when asked, each read touching only the files and blocks that hold the rows
asked for. At most ``max_open_files`` files stay open at once (the others are reopened when
read), so a dataset of any number of files holds a bounded number of memory maps or remote
handles; by default the small local files, read whole, are counted apart, by the bytes they
hold.

Local paths, directories and globs are expanded with ``os`` and ``glob``; URLs (``s3://``,
``memory://``, ``https://`` ...) and paths inside an fsspec ``filesystem`` with fsspec
(``pip install 'idv[remote]'``).
"""
from __future__ import annotations

import os
from typing import ContextManager

import numpy as np

from idv import _docs
from idv._resources import gc as _gc, budget
from idv._reader import dataset_files, dataset_schema, read_source, reads, selection
from idv.errors import IdvFormatError, warn
from idv._storage import partitioning as _partitioning, source as _source
from idv._storage.paths import expand_sources, list_marks
from idv._values.arguments import ensure_count, own_options
from idv._reader.dataset_files import DatasetFile
from idv._reader.reader import IdvFile, check_options
from idv._reader.schema import Field, Schema

__all__ = ["dataset", "Dataset", "DatasetFile", "expand_sources",
           "SCHEMA_MODES", "ON_BAD_FILE"]

# schema=: "exact" (every file has the same columns, names and types in order) or "common"
# (the columns every file has with the same type, in the first file's order)
SCHEMA_MODES = ("exact", "common")
# on_bad_file=: "raise" (the first file that cannot be opened stops the dataset) or "skip"
# (it is left out, with one IdvWarning listing every file left out and why)
ON_BAD_FILE = ("raise", "skip")
# files kept open at once by default: a local file's memory map costs about 28 KiB resident
# (benchmarks/bench_dataset.py), and reopening one costs under 1 ms, so 1,024 stay open (Linux
# allows 65,530 maps per process); a remote file's handle may hold a read-ahead buffer and a
# connection, so 64
DEFAULT_MAX_OPEN_FILES = 1024
DEFAULT_MAX_OPEN_REMOTE = 64
# where each map holds a file descriptor (before Python 3.13), the maps kept open by default
# take at most this share of the descriptors the process may have (RLIMIT_NOFILE's soft limit,
# often 1,024, read as a dataset is made): the rest stay for its other files and sockets
DESCRIPTOR_SHARE = 0.5
# and the local files read whole (of at most 64 KiB, idv._storage.source.SMALL_FILE_BYTES),
# counted apart by what they hold (dataset_files.whole_bytes: about 12 KiB for a 4.8 KiB file
# of 4 columns), up to this much: ten thousand small files stay open from listing to reading
DEFAULT_OPEN_WHOLE_BYTES = 128 << 20
# times idv.dataset lists a directory whose writer replaces its list of files meanwhile
LISTINGS = 5


def default_max_open():
    """The local files a dataset keeps open by default: DEFAULT_MAX_OPEN_FILES, or fewer
    where memory maps hold descriptors and the process may have few (DESCRIPTOR_SHARE)."""
    limit = _source.descriptor_limit() if _source.MAPS_HOLD_DESCRIPTORS else None
    if limit is None:
        return DEFAULT_MAX_OPEN_FILES
    return max(1, min(DEFAULT_MAX_OPEN_FILES, int(limit * DESCRIPTOR_SHARE)))


class Dataset(reads.SourceReads):
    """Several .idv files with the same columns, read as one table (``idv.dataset`` makes
    one). Use as a context manager, or call close(). It may be read from several threads at
    once.

    Its attributes: ``files`` (a DatasetFile per file: path, rows, and where its rows start),
    ``num_rows``, ``schema`` (an idv.Schema of its columns), ``column_names``, ``filesystem``
    (None for local files), ``open_kwargs`` (what each idv.open is given), ``skipped`` ((path,
    error) of each file ``on_bad_file="skip"`` left out) and ``memory_limit`` (the largest of
    its files' limits: a read of several files is checked against it as a whole). With
    ``partitioning="hive"``, ``constant_types`` ({key: type}) and each file's ``constants``
    ({key: value}) are its partition keys, columns after the files' own.

    Parameters
    ----------
    paths : list of str
        The files, in order (idv.dataset expands directories, globs and URLs into them).
    filesystem, columns, schema, on_bad_file, max_open_files, partitioning, **open_kwargs
        As idv.dataset.
    partition_base_dir : str, optional
        With ``partitioning="hive"``, the folder below which ``key=value`` folders are keys
        (default: every folder of each path, as pyarrow's).
    """

    @_gc.paused_for(lambda self, paths, *_, **__: len(paths))
    def __init__(self, paths, *, filesystem=None, columns=None, schema="exact",
                 on_bad_file="raise", max_open_files=None, partitioning=None,
                 partition_base_dir=None, **open_kwargs):
        _partitioning.check_partitioning(partitioning)
        if schema not in SCHEMA_MODES:
            raise ValueError(f"schema must be one of {SCHEMA_MODES}, not {schema!r}")
        if on_bad_file not in ON_BAD_FILE:
            raise ValueError(f"on_bad_file must be one of {ON_BAD_FILE}, not {on_bad_file!r}")
        whole = 0
        if max_open_files is None:
            max_open_files = default_max_open() if filesystem is None \
                else DEFAULT_MAX_OPEN_REMOTE
            whole = DEFAULT_OPEN_WHOLE_BYTES
        self.filesystem = filesystem
        self.open_kwargs = open_kwargs = budget.carried(open_kwargs)
        self._max_open = ensure_count(max_open_files, "max_open_files", "files")
        self._open = dataset_files.OpenFiles(self._max_open, self._reopen, self._closing,
                                             whole)
        self._layouts = dataset_files.Budget(dataset_files.LAYOUT_BYTES)
        self.skipped = []
        self._hidden = None       # the first file with hidden columns (refuse_hidden_indices)
        wanted = None if columns is None else selection.as_list(columns)
        self.constant_types = {}
        opened = []           # (path, visible columns, DatasetFile, IdvFile)
        labels = dataset_files.KeyLabels()
        limits = []
        files = dataset_files.opened(paths, filesystem, open_kwargs)
        try:
            for path, f in files:
                if isinstance(f, (IdvFormatError, OSError)):
                    if on_bad_file == "raise":
                        raise _bad_file(f, path, len(paths))
                    if isinstance(f, IdvFormatError):
                        f.locate(path=path)
                    self.skipped.append((path, f))
                    continue
                limits.append(f.memory_limit)
                cols = dataset_files.visible(f.layout)
                self._hidden = self._hidden or dataset_files.hiding(path, f.layout)
                entry = DatasetFile(path, f.num_rows, 0, dataset_files.rows_per_block(f.layout),
                                    f.identity)
                opened.append((path, cols, entry, f))
                labels.add(f, cols)
                if not self._open.admit(len(opened) - 1, f):    # the first ones stay open
                    entry.closing(f, [c for c, _ in cols], self._layouts)
                    f.close()
            _warn_skipped(self.skipped)
            if not opened:
                raise FileNotFoundError("idv.dataset: no readable .idv file among "
                                        f"{len(paths)} path{'s' * (len(paths) != 1)}")
            if partitioning is not None:
                wanted = self._partitioned(opened, partition_base_dir, wanted)
            else:        # names and indices, as resolve_columns picks them among column_names
                self.refuse_hidden_indices(wanted)
                wanted = selection.names_of([n for n, _ in opened[0][1]], wanted,
                                            where=f" in {opened[0][0]}")
            self._names = _readable(opened, dataset_schema.agree(labels.as_read(opened),
                                                                 wanted, schema), wanted)
        except BaseException:
            files.close()            # the files opened ahead, closed
            for o in opened:
                o[3].close()
            raise
        # a read of the dataset is checked as a whole, against its files' largest limit
        self.memory_limit = max(limits)
        ref = opened[0][3]
        self.files = []
        start = 0
        self._columns = dict(opened[0][1])       # name -> type, to check reopened files
        for i, (_path, _cols, entry, f) in enumerate(opened):
            entry.start = start
            entry.rows_per_block = {k: entry.rows_per_block[k] for k in self._names}
            self.files.append(entry)
            start += entry.num_rows
        self.num_rows = start
        fields = {fl.name: fl for fl in ref.schema.fields if not fl.hidden}
        own = [fields[n] for n in self._names]
        self.schema = Schema(own + [Field(len(own) + j, k, t, None, {}, False) for j, (k, t)
                                    in enumerate(self.constant_types.items())], self.num_rows)
        self._starts = np.array([f.start for f in self.files], np.int64)

    def files_only(self, who):
        """This dataset, for a reader that reads its files by path (`who`: Dask, Ray, PyTorch,
        Hugging Face), which does not give hive keys yet: ValueError when it has some.
        Package-internal: those readers call it."""
        if self.constant_types:
            raise ValueError(f"{who} reads the files of a dataset by path and does not give "
                             f"the hive keys {list(self.constant_types)} as columns yet: read "
                             f"with idv.dataset(..., partitioning='hive') and its to_arrow, "
                             f"to_pandas or record_batch_reader, or without partitioning")
        return self

    def _partitioned(self, opened, base, wanted):
        """The hive keys of the `opened` files' paths below `base` (constant_types, and each
        file's constants), checked against the first file's columns; the file columns of
        `wanted` (names or indices among the file's columns, then the keys), the keys it
        names kept (None: all)."""
        types, values = _partitioning.keys_of([o[0] for o in opened], base)
        own = dict(opened[0][1])
        for k in types:
            if k in own:
                raise ValueError(f"{opened[0][0]}: the partition key {k!r} of its path is "
                                 f"also a column of the file ({own[k]})")
        for (_path, _cols, entry, _f), v in zip(opened, values):
            entry.constants = v
        if wanted is None:
            self.constant_types = types
            return None
        self.refuse_hidden_indices(wanted)
        wanted = selection.names_of(list(own) + list(types), wanted, where=f" in {opened[0][0]}")
        self.constant_types = {k: types[k] for k in wanted if k in types}
        return [w for w in wanted if w not in types]

    # ---- description
    @property
    def column_names(self):
        """The dataset's columns, in order (a hive-partitioned one's keys last)."""
        return list(self._names) + list(self.constant_types)

    def __len__(self):
        return self.num_rows

    def __repr__(self):
        return (f"<idv.Dataset {len(self.files)} files, {self.num_rows} rows x "
                f"{len(self.column_names)} columns>")

    def _repr_html_(self):
        """A notebook's view: the files, the columns and the first rows."""
        from idv._interop import display
        return display.dataset_html(self)

    # ---- files
    def open_file(self, i: int) -> IdvFile:
        """File `i` as an open IdvFile, owned by the dataset (do not close it): at most
        max_open_files stay open, the least recently used closed first (but those in use).

        Parameters
        ----------
        i : int
            The file's position in ``files``.
        """
        return self._open.get(i)

    def using(self, i: int) -> ContextManager[IdvFile]:
        """File `i` open for a ``with`` block, which the dataset closes for no other file
        until the block ends (a stream still reading it, another thread's read).

        Parameters
        ----------
        i : int
            The file's position in ``files``.
        """
        return self._open.using(i)

    def _reopen(self, i):
        """File i opened again, checked to be the one listed (its tables read again unless
        its layout was kept and it is still the same file)."""
        entry = self.files[i]
        with dataset_files.reopening(entry):
            f = IdvFile(entry.path, filesystem=self.filesystem, layout=entry.layout,
                        **self.open_kwargs)
        if f.layout is entry.layout:
            return f
        try:
            dataset_files.changed(entry, f, self._columns, self._names)
        except BaseException:
            f.close()
            raise
        return f

    def _closing(self, i, f):
        """File i, about to be closed for room: what reading its columns allocates is kept,
        and what opening it read (DatasetFile.closing)."""
        self.files[i].closing(f, self._names, self._layouts)

    @property
    def max_open_files(self):
        """How many of the files stay open at once, at most (by default, files read whole are
        counted apart, by their bytes: see idv.dataset)."""
        return self._max_open

    @property
    def num_open_files(self):
        """How many of the files are open now (at most max_open_files)."""
        return self._open.count

    def close(self):
        """Close every open file; arrays already read stay valid."""
        self._open.close()

    def __reduce__(self):
        """Not picklable by paths either: a worker would list and open files that may have
        changed, without this dataset's checks of them."""
        raise TypeError("an idv.Dataset is not picklable: pass its paths and call idv.dataset "
                        "again in the worker")

    # ---- columns and rows
    def resolve_columns(self, columns):
        """The dataset's column names for ``columns`` (names or indices; None: all), checked
        (idv._reader.selection)."""
        if columns is None:
            return self.column_names
        self.refuse_hidden_indices(columns)
        return selection.names_of(self.column_names, columns, where=" in the dataset")

    def refuse_hidden_indices(self, columns):
        """ValueError for a column index where a file has hidden columns: there an index counts
        them (ML.NET's schema, idv.read's), a dataset's columns do not, so the same index
        would pick another column by path; a name picks the same one on both.
        Package-internal: the command line checks its --columns by it.

        Parameters
        ----------
        columns : sequence of str or int, or None
            The columns asked for.
        """
        if self._hidden is not None and columns is not None and any(selection.is_index(c)
                                            for c in selection.as_list(columns)):
            raise ValueError(f"{self._hidden} has hidden columns (a name given twice), which "
                             f"an index counts in the file (idv.read) and not in a dataset: "
                             f"pick the dataset's columns by name")

    def decoded_bytes(self, i, name, local, arrow=False):
        """Column.decoded_bytes(local, arrow) of file i's column `name`, without reopening a
        closed file for a read of all its rows (`local` None, or the slice of them)."""
        entry = self.files[i]
        every_row = local is None or (isinstance(local, slice)
                                      and local == slice(0, entry.num_rows))
        if not self._open.is_open(i) and entry.decoded is not None and name in entry.decoded \
                and every_row:
            return entry.decoded[name][bool(arrow)]
        with self.using(i) as f:        # not closed by another thread's read meanwhile
            return f[name].decoded_bytes(local, arrow)

    def __getitem__(self, key):
        """``ds[a:b]``: those rows of every column, as ``ds.read(rows=slice(a, b))``."""
        if isinstance(key, slice):
            return self.read(rows=key)
        raise TypeError(f"a dataset is indexed by a slice of rows (ds[a:b]); read columns with "
                        f"ds.read(columns=[...]), not with {type(key).__name__}")

    # ---- as a source of rows (idv._reader.read_source)
    checked_whole = True          # a read of its files checked as one, before it allocates

    def time_unit(self, names, datetime, safe, values=None, modes=None):
        """(datetime, safe) to read every file of the dataset with: for 'auto', 'exact' and
        'auto-us' a ticks.Units, each time column's unit chosen from all files; other modes
        as given (idv._reader.read_source.time_unit); its partition keys are no times."""
        return read_source.time_unit(self, [n for n in names if n not in self.constant_types],
                                     datetime, safe, values, modes)

    def need(self, nbytes, what):
        """MemoryLimitError when `what` needs more than the dataset's limit.
        Package-internal."""
        budget.check(nbytes, self.memory_limit,
                     lambda: f"{what()} of the dataset ({self.files[0].path}...)")


def _readable(opened, names, wanted):
    """`names` (of the dataset's columns), those the `opened` files cannot read (an unknown
    codec: warned of at open) left out where no column was asked for, as a file's read leaves
    them out."""
    if wanted is not None:
        return names
    ref = dict(opened[0][1])
    return [n for n in names if not isinstance(ref[n], str)]


def as_dataset(source, options, columns=None):
    """(dataset, owned) for a reader of `source`: an open Dataset as it is (`options` given
    beside it refused: own_options), else idv.dataset(source, columns, **options), owned by
    the caller, who closes it."""
    if "columns" in options:        # a reader of an engine, which selects them in its query
        raise TypeError("columns= is no option of this reader: the engine asks for the "
                        "columns a query uses, and only those are read (select them there: "
                        "LazyFrame.select, Dataset.to_table(columns=...), SQL)")
    if isinstance(source, Dataset):
        own_options(source, options)
        return source, False
    return dataset(source, columns, **options), True


def as_selected(source, options, columns):
    """(dataset, owned, names) for a reader of columns `columns` (names or indices; None: all)
    of `source`: as_dataset's, and the names they pick, resolved once (a dataset opened here
    with them holds those alone, in their order, where an index counts them no more)."""
    ds, owned = as_dataset(source, options, columns)
    return ds, owned, ds.column_names if owned else ds.resolve_columns(columns)


@_docs.fill
def dataset(source, columns=None, *, schema="exact", on_bad_file="raise", filesystem=None,
            storage_options=None, max_open_files=None, partitioning=None,
            **open_kwargs) -> Dataset:
    """Open several .idv files as one Dataset, lazily: their headers, tables of contents and
    lookup tables; no block is read until asked for.

    Parameters
    ----------
    source : str, os.PathLike or list
        A path, a directory (every ``*.idv`` under it), a glob (``"days/2026-*.idv"``,
        ``**`` recursive), a URL or URL glob (``s3://bucket/x/``, through fsspec), each
        sorted by path, or a list of any of these, in the given order. Hidden directories
        are not searched, nor directory symlinks by ``**``.
    columns : sequence of str or int, optional
        The dataset's columns (default: every column, by name, as ML.NET shows them).
    {schema}
    {on_bad_file}
    {filesystem}
    {storage_options}
    {max_open_files}
    {partitioning}
    {open_kwargs}

    Returns
    -------
    Dataset
        A block damaged in one file fails only the reads that touch it, naming the file.
    """
    check_options(open_kwargs, "idv.dataset")
    for _ in range(LISTINGS):     # again while a writer replaces a directory's list
        unlisted, marks = [], list_marks(source, filesystem)
        paths, fs = expand_sources(source, filesystem=filesystem,
                                   storage_options=storage_options,
                                   timeout=open_kwargs.get("timeout"),
                                   on_error=None if on_bad_file == "raise" else unlisted.append)
        base = source if partitioning is not None and fs is None and \
            isinstance(source, (str, os.PathLike)) and os.path.isdir(source) else None
        try:
            ds = Dataset(paths, filesystem=fs, columns=columns, schema=schema,
                         on_bad_file=on_bad_file, max_open_files=max_open_files,
                         partitioning=partitioning, partition_base_dir=base, **open_kwargs)
        except (OSError, IdvFormatError):       # a file the list named is gone, or other
            if list_marks(source, filesystem) == marks:
                raise
            continue
        if list_marks(source, filesystem) == marks:
            break
        ds.close()
    else:
        raise IdvFormatError(f"idv.dataset: {source!r}: its list of files changed each of "
                             f"{LISTINGS} times it was opened (a writer committing): open it "
                             f"again")
    if unlisted:
        ds.skipped[:0] = [(e.filename, e) for e in unlisted]
        warn(f"idv.dataset skipped {len(unlisted)} director"
             f"{'ies' if len(unlisted) != 1 else 'y'} it could not list: "
             + "; ".join(f"{e.filename} ({e.strerror})" for e in unlisted))
    return ds


def _bad_file(error, path, files):
    """`error`, of the file at `path` among `files` files, named by its path and (an .idv
    that cannot be opened among others) with how to leave it out."""
    if isinstance(error, IdvFormatError):
        error.locate(path=path)
        if files > 1:
            error.reason += (f" (one of the dataset's {files} files: on_bad_file='skip' leaves "
                             f"out those that cannot be opened, with a warning)")
    return error


def _warn_skipped(skipped):
    """The warning that a dataset left out `skipped` ([(path, why)]), if any."""
    if skipped:
        listing = "; ".join(f"{p} ({e})" for p, e in skipped)
        warn(f"idv.dataset skipped {len(skipped)} file{'s' * (len(skipped) != 1)} it could "
             f"not open: {listing}")
