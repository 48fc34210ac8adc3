"""Many .idv files read as one table: ``idv.dataset``.

ML.NET leaves .idv files by the dozen (one per day, per shard, per experiment) and cannot load
two as one. A Dataset is their rows end to end, in file order: it opens each file's header,
table of contents and lookup tables (``idv.open``), checks that their columns agree, and reads
blocks only when asked, each read touching only the files and blocks that hold the rows
asked for. At most ``max_open_files`` files stay open at once (the others are reopened when
read), so a dataset of any number of files holds a bounded number of memory maps or remote
handles.

Local paths, directories and globs are expanded with ``os`` and ``glob``; URLs (``s3://``,
``memory://``, ``https://`` ...) and paths inside an fsspec ``filesystem`` with fsspec
(``pip install 'idv[remote]'``).
"""
from __future__ import annotations

import warnings
from typing import ContextManager

import numpy as np

from idv import _docs, types as T
from idv._resources import gc as _gc, budget
from idv._reader import dataset_files, selection, time_units, take as _take
from idv._scan import scan
from idv._values import ticks, vectors
from idv._store import many_files as batch_files
from idv.errors import IdvFormatError, IdvWarning
from idv._storage.paths import expand_sources
from idv._reader.dataset_files import BATCH_FILES, DatasetFile
from idv._reader.reader import READ_TIME_MODES, IdvFile
from idv._engines.dataset_interop import DatasetInterop
from idv._reader.schema import Schema

__all__ = ["dataset", "Dataset", "DatasetFile", "expand_sources",
           "SCHEMA_MODES", "ON_BAD_FILE"]

# schema=: "exact" (every file has the same columns, names and types in order) or "common"
# (the columns every file has with the same type, in the first file's order)
SCHEMA_MODES = ("exact", "common")
# on_bad_file=: "raise" (the first file that cannot be opened stops the dataset) or "skip"
# (it is left out, with one IdvWarning listing every file left out and why)
ON_BAD_FILE = ("raise", "skip")
# files kept open at once by default: a local file's memory map costs about 28 KiB resident
# (a file of at most 64 KiB is held whole, idv._storage.source.SMALL_FILE_BYTES) and no file
# descriptor (benchmarks/bench_dataset.py), and reopening one costs under 1 ms,
# so 1,024 stay open (Linux allows 65,530 maps per process); a remote file's handle may hold
# a read-ahead buffer and a connection, so 64
DEFAULT_MAX_OPEN_FILES = 1024
DEFAULT_MAX_OPEN_REMOTE = 64


def _read_rows(f, names, local):
    """Rows `local` of columns `names` of file `f`, in read()'s form."""
    return f.read(names, rows=local, datetime="100ns")


class Dataset(DatasetInterop):
    """Several .idv files with the same columns, read as one table (``idv.dataset`` makes
    one). Use as a context manager, or call close(). It may be read from several threads at
    once.

    Its attributes: ``files`` (a DatasetFile per file: path, rows, and where its rows start),
    ``num_rows``, ``schema`` (an idv.Schema of its columns), ``column_names``, ``filesystem``
    (None for local files), ``open_kwargs`` (what each idv.open is given), ``skipped`` ((path,
    error) of each file ``on_bad_file="skip"`` left out) and ``memory_limit`` (the largest of
    its files' limits: a read of several files is checked against it as a whole).

    Parameters
    ----------
    paths : list of str
        The files, in order (idv.dataset expands directories, globs and URLs into them).
    filesystem, columns, schema, on_bad_file, max_open_files, **open_kwargs
        As idv.dataset.
    """

    @_gc.paused_for(lambda self, paths, *_, **__: len(paths))
    def __init__(self, paths, *, filesystem=None, columns=None, schema="exact",
                 on_bad_file="raise", max_open_files=None, **open_kwargs):
        if schema not in SCHEMA_MODES:
            raise ValueError(f"schema must be one of {SCHEMA_MODES}, not {schema!r}")
        if on_bad_file not in ON_BAD_FILE:
            raise ValueError(f"on_bad_file must be one of {ON_BAD_FILE}, not {on_bad_file!r}")
        if max_open_files is None:
            max_open_files = DEFAULT_MAX_OPEN_FILES if filesystem is None \
                else DEFAULT_MAX_OPEN_REMOTE
        if int(max_open_files) < 1:
            raise ValueError(f"max_open_files must be at least 1, not {max_open_files!r}")
        self.filesystem = filesystem
        self.open_kwargs = open_kwargs
        self._max_open = int(max_open_files)
        self._open = dataset_files.OpenFiles(self._max_open, self._reopen, self._closing)
        self._layouts = dataset_files.Budget(dataset_files.LAYOUT_BYTES)
        self._key_values_agree = {}      # key column -> whether all files' KeyValues are equal
        self.skipped = []
        wanted = None if columns is None else ([columns] if isinstance(columns, str)
                                               else list(columns))
        opened = []           # (path, visible columns, DatasetFile, IdvFile)
        limits = []
        files = dataset_files.opened(paths, filesystem, open_kwargs)
        try:
            for path, f in files:
                if isinstance(f, (IdvFormatError, OSError)):
                    if isinstance(f, IdvFormatError):
                        f.locate(path=path)
                    if on_bad_file == "raise":
                        raise f
                    self.skipped.append((path, f))
                    continue
                limits.append(f.memory_limit)
                cols = dataset_files.visible(f.layout)
                entry = DatasetFile(path, f.num_rows, 0, dataset_files.rows_per_block(f.layout),
                                    f.identity)
                opened.append((path, cols, entry, f))
                if len(opened) > self._max_open:     # keep the first max_open_files open
                    entry.closing(f, [c for c, _ in cols], self._layouts)
                    f.close()
            if self.skipped:
                listing = "; ".join(f"{p} ({e})" for p, e in self.skipped)
                warnings.warn(f"idv.dataset skipped {len(self.skipped)} file"
                              f"{'s' * (len(self.skipped) != 1)} it could not open: {listing}",
                              IdvWarning, stacklevel=3)
            if not opened:
                raise FileNotFoundError("idv.dataset: no readable .idv file among "
                                        f"{len(paths)} path{'s' * (len(paths) != 1)}")
            self._names = dataset_files.agree(opened, wanted, schema)
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
            if not f.closed:
                self._open.add(i, f)
        self.num_rows = start
        fields = {fl.name: fl for fl in ref.schema.fields if not fl.hidden}
        self.schema = Schema([fields[n] for n in self._names], self.num_rows)
        self._starts = np.array([f.start for f in self.files], np.int64)

    # ---- description
    @property
    def column_names(self):
        """The dataset's columns, in order."""
        return list(self._names)

    def __len__(self):
        return self.num_rows

    def __repr__(self):
        return (f"<idv.Dataset {len(self.files)} files, {self.num_rows} rows x "
                f"{len(self._names)} columns>")

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
    def num_open_files(self):
        """How many of the files are open now (at most max_open_files)."""
        return self._open.count

    def close(self):
        """Close every open file; arrays already read stay valid."""
        self._open.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- columns and rows
    def resolve_columns(self, columns):
        """The dataset's column names for ``columns`` (names or indices; None: all), checked
        (idv._reader.selection)."""
        if columns is None:
            return list(self._names)
        return selection.names_of(self._names, columns, where=" in the dataset")

    @_gc.paused_for(lambda self, *_, **__: len(self.files))
    @budget.reads
    @_docs.fill
    def read(self, columns=None, rows=None, datetime="100ns",
             filter=None) -> dict:  # noqa: A002 - pyarrow's and pandas' name
        """dict name -> array of the dataset's columns, every file's rows end to end.

        Parameters
        ----------
        {columns}
        rows : slice, sequence of int or boolean mask, optional
            The dataset's rows: only the files and blocks that hold them are read.
        datetime : str, default '100ns'
            As IdvFile.read; one unit for a time column of every file.
        {filter}
        """
        names = self.resolve_columns(columns)
        datetime, _ = self.time_unit(names, datetime, True)
        if filter is not None:
            if rows is not None:
                raise ValueError("read(filter=...) does not take rows= too")
            got = []
            for i in range(len(self.files)):
                with self.using(i) as f:
                    got.append(f.read(names, datetime=datetime, filter=filter))
            return {n: vectors.concat_reads([g[n] for g in got]) for n in names}
        return self._gather(columns, slice(None) if rows is None else rows,
                            lambda f, names, local: f.read(names, rows=local,
                                                           datetime=datetime),
                            in_place=rows is None)

    def _text(self, name):
        """Whether column `name` is Text."""
        return self.open_file(0)[name].type is T.Text

    def _in_step(self, name):
        """Whether column `name` of every file converts to Arrow in one step (_whole_values):
        numbers, Booleans, keys (_same_key_values) and their fixed-size vectors, and Text."""
        return self._text(name) or (self._whole(name) and self._room_in_place(name) is not None)

    def _whole_values(self, names, i0, i1, arrow_text=True):
        """name -> every row of files [i0, i1) of columns `names` (each _whole or Text):
        read()'s form, decoded in one batched read, but Text as an Arrow ChunkedArray of the
        files' blocks (`arrow_text`; else read()'s str objects)."""
        from idv._engines.dataset_interop import text_of_files
        text = [n for n in names if arrow_text and self._text(n)]
        rest = [n for n in names if n not in text]
        span = slice(self.files[i0].start, self.files[i1 - 1].stop)
        got = self._gather(rest, span, _read_rows, in_place=True) if rest else {}
        for n in text:
            got[n] = text_of_files(self._columns_in_use(n, i0, i1))
        return got

    def _columns_in_use(self, name, i0, i1):
        """Column `name` of files [i0, i1) as lists of (store, column), one a file, of up to
        BATCH_FILES files (and max_open_files), in use until the next list is asked for."""
        step = max(1, min(self._max_open, BATCH_FILES))
        for a in range(i0, i1, step):
            held = []
            try:
                for i in range(a, min(a + step, i1)):
                    held.append((i, self._open.hold(i)))
                yield [(f.store, f[name]) for _, f in held]
            finally:
                self._open.release([i for i, _ in held])

    def _whole(self, name):
        """Whether column `name` converts to pandas and Arrow the same, read whole from all
        the files as from each file: not Text (read into Arrow's layout: _text), nor keys
        whose key values differ between files (each file's name its own keys)."""
        item = T.item_type(self.open_file(0)[name].type)
        if isinstance(item, T.Key):
            return self._same_key_values(name)
        return item is not None and item is not T.Text

    def _same_key_values(self, name):
        """Whether every file has the same KeyValues annotation of column `name` (or none):
        then its keys name the same values in all. Asked of each file once."""
        if name not in self._key_values_agree:
            self._key_values_agree[name] = dataset_files.same_annotation(
                (col for cols in self._columns_in_use(name, 0, len(self.files))
                 for _, col in cols), "KeyValues")
        return self._key_values_agree[name]

    def _room_in_place(self, name):
        """(shape, dtype) of column `name`'s rows when every row can be decoded straight into
        one array for the whole dataset: fixed-width items stored as they are (numbers, keys,
        dense vectors; not times, which read() converts); else None."""
        col = self.open_file(0)[name]
        if T.item_type(col.type) in ticks.TIME_ITEMS:
            return None
        return scan.fixed_room(col, 0, col.num_blocks)

    @_gc.paused_for(lambda self, *_, **__: len(self.files))
    @budget.reads
    def take(self, indices, columns=None, datetime="100ns") -> dict:
        """Rows by number (over the files end to end, negative from the end), in the order
        given, as IdvFile.take: only the files and blocks that hold them are read.

        Parameters
        ----------
        indices : sequence of int
        columns, datetime
            As read().
        """
        names = self.resolve_columns(columns)
        datetime, _ = self.time_unit(names, datetime, True)
        _take.check_result(indices, self.num_rows, [self.schema[n].type for n in names],
                           lambda nbytes, what: budget.check(
                               nbytes, self.memory_limit,
                               lambda: f"{what()} of the dataset ({self.files[0].path}...)"))
        return self._gather(columns, selection.take_numbers(indices),
                            lambda f, names, local: f.take(local, names, datetime))

    def _gather(self, columns, rows, read, in_place=False):
        """The rows `rows` of `columns` (selection.split_rows: over the files end to end),
        each file's share read by ``read(file, names, local rows)``, joined in the order
        asked. `in_place` (`rows` whole files, one after the other): the fixed-width columns are
        decoded straight into one array each, the others joined (one copy in memory instead of
        two)."""
        names = self.resolve_columns(columns)
        parts, restore = selection.split_rows(rows, self._starts, self.num_rows)
        if not parts:          # no rows: the empty forms, from the first file
            got = read(self.open_file(0), names, slice(0, 0))
            return {n: got[n] for n in names}
        rooms = {n: r for n in names if (r := self._room_in_place(n)) is not None} \
            if in_place else {}
        fixed = list(rooms)
        base = self.files[parts[0][0]].start            # the first row's place in the dataset
        size = self.files[parts[-1][0]].stop - base
        shapes = {n: ((size,) + shape[1:], dtype) for n, (shape, dtype) in rooms.items()}
        self._check_memory(names, parts, joined=True, in_place=shapes)
        out = {n: np.empty(*shapes[n]) for n in fixed}
        rest = [n for n in names if n not in out]
        pieces = {n: [] for n in rest}
        # the blocks of many files inflated in one call (idv._store.many_files), as many files at once as
        # stay open
        batch, files_in_batch = [], max(1, min(self._max_open, BATCH_FILES))
        held = []           # the files of the batch, in use until it is inflated
        try:
            for k, (i, local) in enumerate(parts):
                f, entry = self._open.hold(i), self.files[i]
                held.append(i)
                for n in fixed:
                    col = f[n]
                    piece = (f.store, col.blocks, out[n], entry.start - base)
                    if col.num_rows and batch_files.batchable(*piece):
                        batch.append(piece)
                    else:
                        col.read_blocks(0, col.num_blocks,
                                        out=out[n][entry.start - base:entry.stop - base])
                got = read(f, rest, local) if rest else {}
                for n in rest:
                    pieces[n].append(got[n])
                if not batch or batch[-1][0] is not f.store:    # read by itself: done with
                    self._open.release([held.pop()])
                if batch and (k + 1) % files_in_batch == 0:
                    batch_files.inflate_files(batch, batch[0][0].threads)
                    batch = []
                    self._open.release(held)
                    held = []
            if batch:
                batch_files.inflate_files(batch, batch[0][0].threads)
        finally:
            self._open.release(held)
        for n in rest:
            v = pieces[n][0] if len(pieces[n]) == 1 else vectors.concat_reads(pieces[n])
            out[n] = v if restore is None else v[restore]
        return {n: out[n] for n in names}

    def _check_memory(self, names, parts, joined, in_place=None):
        """MemoryLimitError when reading `parts` ([(file, local rows)]) of columns `names` needs
        more than the dataset's limit: each file's share (Column.decoded_bytes), twice over
        when the pieces are then `joined` into one array or frame; but the columns
        `in_place` (name -> the (shape, dtype) of the one array every file decodes into),
        that array."""
        in_place = in_place or {}
        twice = 2 if joined and len(parts) > 1 else 1
        total = sum(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
                    for shape, dtype in in_place.values())
        total += sum(self._decoded_bytes(i, n, local) * twice
                     for i, local in parts for n in names if n not in in_place)
        budget.check(total, self.memory_limit,
                     lambda: f"reading {len(names)} column{'s' * (len(names) != 1)} of "
                             f"{len(parts)} file{'s' * (len(parts) != 1)} of the dataset "
                             f"({self.files[parts[0][0]].path}...)")

    def _decoded_bytes(self, i, name, local):
        """Column.decoded_bytes(local) of file i's column `name`, without reopening a closed
        file for a read of all its rows (`local` None, or the slice of them)."""
        entry = self.files[i]
        every_row = local is None or (isinstance(local, slice)
                                      and local == slice(0, entry.num_rows))
        if not self._open.is_open(i) and entry.decoded is not None and name in entry.decoded \
                and every_row:
            return entry.decoded[name]
        return self.open_file(i)[name].decoded_bytes(local)

    def __getitem__(self, key):
        """``ds[a:b]``: those rows of every column, as ``ds.read(rows=slice(a, b))``."""
        if isinstance(key, slice):
            return self.read(rows=key)
        raise TypeError(f"a dataset is indexed by a slice of rows (ds[a:b]); read columns with "
                        f"ds.read(columns=[...]), not with {type(key).__name__}")

    # ---- time units: one per column for every file (idv._reader.time_units)
    def time_unit(self, names, datetime, safe):
        """(datetime, safe) to read every file of the dataset with: for 'auto', 'exact' and
        'auto-us' a ticks.Units, each time column's unit chosen from all files; other modes
        as given."""
        ticks.check_time_mode(datetime, READ_TIME_MODES)
        timed = [n for n in names if time_units.is_time(self.schema[n].type)]
        if not timed:
            return datetime, safe
        return time_units.choose(lambda: (self.using(i) for i in range(len(self.files))),
                                 timed, datetime), safe


@_docs.fill
def dataset(source, columns=None, *, schema="exact", on_bad_file="raise", filesystem=None,
            storage_options=None, max_open_files=None, **open_kwargs) -> Dataset:
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
    {open_kwargs}

    Returns
    -------
    Dataset
        A block damaged in one file fails only the reads that touch it, naming the file.
    """
    unlisted = []
    paths, fs = expand_sources(source, filesystem=filesystem, storage_options=storage_options,
                               on_error=None if on_bad_file == "raise" else unlisted.append)
    ds = Dataset(paths, filesystem=fs, columns=columns, schema=schema,
                 on_bad_file=on_bad_file, max_open_files=max_open_files, **open_kwargs)
    if unlisted:
        ds.skipped[:0] = [(e.filename, e) for e in unlisted]
        warnings.warn(f"idv.dataset skipped {len(unlisted)} director"
                      f"{'ies' if len(unlisted) != 1 else 'y'} it could not list: "
                      + "; ".join(f"{e.filename} ({e.strerror})" for e in unlisted),
                      IdvWarning, stacklevel=2)
    return ds
