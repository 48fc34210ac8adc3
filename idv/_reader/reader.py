"""The reading API: ``idv.open`` gives an IdvFile, whose columns read into numpy by block.

An IdvFile opens the file (a path, bytes, a file object or a remote file), reads its header,
table of contents and tables, and gives its schema and its columns (idv._reader.column.Column); the
blocks of every column are fetched, checked and decoded by the file's block store
(idv._store.blocks.BlockStore).
"""
from __future__ import annotations

import contextlib
import functools
import inspect

import numpy as np

from idv import _docs, compression
from idv._resources import threads as _threads, budget, cache
from idv._values.arguments import ensure_count, ensure_flag, own_options
from idv._reader import opening, read_source, reads, selection
from idv._storage import statistics as block_stats
from idv._store.blocks import BlockStore
from idv._reader.column import Column
from idv._reader.file_parts import FileParts
from idv.errors import IdvFormatError
from idv._reader.read_source import FileSpan
from idv._storage.remote import open_any
from idv._reader.schema import Field, Schema




@_docs.fill
class IdvFile(reads.SourceReads):
    """An open .idv file (idv.open makes one). Use as a context manager, or call close().

    ``f.schema`` prints the columns; ``f["Label"]`` or ``f[0]`` gives a Column (with duplicate
    names, the last one, as ML.NET does); ``f.read(columns=[...])`` gives a dict of arrays.

    Its attributes: ``columns`` (every Column, in file order), ``header`` (version, offsets,
    row and column counts), ``path`` (the name errors give the file: its path, URL or file
    object's name; None for bytes), ``threads`` and ``backend`` (as given to idv.open).
    Package-internal: ``store`` (the idv._store.blocks.BlockStore the columns decode
    their blocks through), ``tables`` (every column's lookup and metadata table, read at
    open: idv._storage.layout.Tables), ``identity`` (a local file's (device, inode, size,
    modification time) when opened, telling it from another put in its place; None for other
    sources) and ``layout`` (what opening read: idv._reader.opening.Opened).

    Parameters
    ----------
    source
        As idv.open.
    {open_options}
    layout : idv._reader.opening.Opened, optional
        What opening the same path read before, not read and checked again while the file's
        identity and header bytes are the same (a dataset reopening its files).
    """

    def __init__(self, source, *, threads=None, backend=None, cache_bytes=cache.DEFAULT_BYTES,
                 memory_limit=None, checksums=True, filesystem=None, storage_options=None,
                 timeout=None, layout=None):
        blocks = cache.BlockCache(cache_bytes)      # a bad cache_bytes fails before opening
        self.store = self._schema = None
        self._source = open_any(source, filesystem, storage_options, timeout, memory_limit)
        try:
            limit = budget.limit_for(self._source.size, memory_limit)
            self._source.memory_limit = limit    # no fetch brings more (a remote file's)
            blocks.within(limit)
        except BaseException:
            self.close()
            raise
        self.path = self._source.name   # put into every IdvFormatError from this file
        self.identity = getattr(self._source, "identity", None)
        # the file's bytes held in memory when it was read whole (a small local file), else 0
        self.read_whole = getattr(self._source, "read_whole", 0)
        self.backend = backend
        self.filesystem = filesystem
        try:
            threads = ensure_count(threads, "threads", "threads", none=True)
            checksums = ensure_flag(checksums, "checksums")
            self.open_kwargs = {k: v for k, v in dict(   # to open it again elsewhere
                threads=threads, backend=backend, memory_limit=memory_limit, timeout=timeout,
                checksums=None if checksums else False, cache_bytes=None if cache_bytes ==
                cache.DEFAULT_BYTES else cache_bytes).items() if v is not None}
            deflate = compression.backend(backend)   # an unknown or missing one fails here
            opened = self.layout = opening.known_or_read(self._source, checksums, layout)
            self.header, self._head, self.tables = opened.header, opened.head, opened.tables
            self.store = BlockStore(self._source, path=self.path,
                                    threads=threads or _threads.default_threads(),
                                    backend=deflate, memory_limit=limit, cache=blocks,
                                    sums=opened.sums, crcs=self.tables.crcs,
                                    checking=bool(checksums))
            self._parts = FileParts(self.store, self.tables, self.header, self.path)
            self._made = [None] * len(opened.described)      # each Column, once built
            self._column_stats = {}     # column index -> its statistics, checked
        except IdvFormatError as e:
            e.locate(path=self.path)
            self.close()
            raise
        except BaseException:
            self.close()
            raise

    @functools.cached_property
    def columns(self):
        """Every Column, in file order (each built on first use: a dataset's thousand files
        are read for a column or none)."""
        return [*map(self._column, range(len(self._made)))]

    def _column(self, i):
        if self._made[i] is None:
            self._made[i] = Column(self._parts, *self.layout.described[i])
        return self._made[i]

    # ---- as a source of rows (idv._reader.read_source): a dataset of this one file
    @property
    def files(self):
        """This file as the one file of a source of rows (idv._reader.read_source.FileSpan)."""
        return [FileSpan(self.path, self.num_rows)]

    max_open_files = 1
    checked_whole = False         # its columns take rows as asked (idv._reader.read_source)

    def using(self, i):
        """File `i` of this source of one file (0: itself) for a ``with`` block, left open
        after it, as Dataset.using gives a dataset's.

        Parameters
        ----------
        i : int
            0.
        """
        if i != 0:
            raise IndexError(f"an IdvFile is one file, not file {i}")
        return contextlib.nullcontext(self)

    def resolve_columns(self, columns):
        """The indices of the columns `columns` picks (idv._reader.selection.file_columns;
        all of them without building a Column). Package-internal."""
        if columns is None:
            return [i for i in selection.positions(self.column_names, None)
                    if self.layout.readable(i)]
        return [c.index for c in selection.file_columns(self, columns)]

    def time_unit(self, names, datetime, safe, values=None, modes=None):
        """(datetime, safe) to read columns `names` with (idv._reader.read_source.time_unit).
        Package-internal."""
        return read_source.time_unit(self, names, datetime, safe, values, modes)

    def need(self, nbytes, what):
        """MemoryLimitError when `what` needs more than the file's memory limit.
        Package-internal."""
        self.store.need(nbytes, what)

    def decoded_bytes(self, i, key, rows, arrow=False):
        """What reading `rows` of column `key` allocates (Column.decoded_bytes; `arrow`: into
        Arrow). Package-internal."""
        return self[key].decoded_bytes(rows, arrow)

    @property
    def threads(self):
        """The decoding threads (idv.open's ``threads``, default: the CPUs available)."""
        return self.store.threads

    @property
    def memory_limit(self):
        """The bytes one read may allocate before idv.MemoryLimitError (idv.open's
        ``memory_limit``; idv._resources.budget)."""
        return self.store.memory_limit

    @property
    def has_checksums(self):
        """Whether the file carries idv's checksums (and they are being checked)."""
        return self.store.sums is not None

    @functools.cached_property
    def statistics(self):
        """The block statistics the file carries (idv._storage.statistics.Statistics; None
        without), every column's read and checked on first use; IdvFormatError when they no
        longer match the file's blocks."""
        section = self._statistics_section
        try:
            found = None if section is None else section.whole()
            if found is not None:
                found.check_columns(self.columns, self.num_rows)
                if self.store.sums is not None:         # no block read: their CRC-32s
                    found.check_checksums(self.columns,
                                          lambda c: self.store.expected_crcs(c.blocks))
                found.check(self._blocks_fingerprint())
        except IdvFormatError as e:
            raise e.locate(path=self.path)
        return found

    def column_statistics(self, index):
        """Column number `index`'s block statistics (idv._storage.statistics.ColumnStats;
        None where the file or the column has none), read and checked as ``statistics``
        checks every column's, on first use: a filter on a few columns of a wide file reads
        theirs alone. IdvFormatError as ``statistics``. Package-internal.

        Parameters
        ----------
        index : int
            The column's position in the file.
        """
        section = self._statistics_section
        known = None if section is None else self._column_stats.get(index)
        if section is None or known is not None:
            return known
        try:
            cs = section.column(index)
            if cs is None:
                return None
            col = self._column(index) if 0 <= index < len(self._made) else None
            block_stats.check_column(cs, col, self.num_rows, section.num_blocks,
                                     section.offset)
            if self.store.sums is not None and cs.crcs is not None:
                block_stats.check_crcs(cs, col, self.store.expected_crcs(col.blocks),
                                       section.offset)
            if not self._column_stats:          # the blocks' fingerprint, once
                block_stats.check_fingerprint(section.fingerprint, self._blocks_fingerprint(),
                                              section.offset)
        except IdvFormatError as e:
            raise e.locate(path=self.path)
        self._column_stats[index] = cs
        return cs

    @functools.cached_property
    def _statistics_section(self):
        try:
            return block_stats.read_section(self._head, self.store.view,
                                            self.header.toc_offset)
        except IdvFormatError as e:
            raise e.locate(path=self.path)

    def _blocks_fingerprint(self):
        """The fingerprint of every column's blocks (offsets, then lengths), from the lookup
        tables as one array where they were read so (no Column built)."""
        joined = self.tables.joined
        if joined is not None:
            return block_stats.fingerprint(joined["offset"].ravel(), joined["disk"].ravel())
        tables = [c.lookup for c in self.columns]
        return block_stats.fingerprint(np.concatenate([t["offset"] for t in tables]),
                                       np.concatenate([t["disk"] for t in tables]))

    # ---- description
    @property
    def num_rows(self):
        """The number of rows."""
        return self.header.row_count

    @property
    def num_columns(self):
        """The number of columns, hidden and unreadable ones included."""
        return len(self._made)

    @property
    def version(self):
        """The format version that wrote the file, e.g. ``'1.1.1.6'``."""
        return self.header.version_string

    @property
    def column_names(self):
        """Every column's name, in file order (a name repeats for hidden columns)."""
        return [e.name for e, _, _ in self.layout.described]      # no Column built

    @property
    def schema(self):
        """The columns' names, types and metadata types as a printable Schema (made once: a
        lookup by name is then one step, as callers looping over names need)."""
        self.check_open()
        if self._schema is None:
            self._schema = Schema([*map(self._field, range(len(self._made)))], self.num_rows)
        return self._schema

    def _field(self, i):
        """Column number `i`'s Field; a column without annotations is described from the table
        of contents alone (a file of thousands of columns shows its schema without building
        its Columns)."""
        hidden = self.layout.shown[self.layout.described[i][0].name] != i
        if self._made[i] is None and self.tables.without_metadata(i):
            entry, codec, _ = self.layout.described[i]
            return Field(entry.index, entry.name, None if codec is None else codec.type,
                         entry.codec_name, {}, hidden)
        c = self._column(i)
        return Field(c.index, c.name, c.type, c.codec_name, c.metadata_types, hidden)

    def __getitem__(self, key):
        """``f["Label"]`` or ``f[0]``: a Column. ``f[a:b]``: those rows of every readable
        column, as ``f.read(rows=slice(a, b))`` (rows, as in pandas, not columns)."""
        if isinstance(key, str):
            i = self.layout.shown.get(key)
            if i is None:
                raise selection.no_column(key, self.column_names)
            return self._column(i)
        if isinstance(key, slice):
            return self.read(rows=key)
        if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
            n = len(self._made)
            if not -n <= key < n:
                raise IndexError(f"column index {key} out of range: the file has {n} columns "
                                 f"(0 to {n - 1}); rows are selected with f[a:b] or "
                                 f"f.read(rows=...)")
            return self._column(int(key) % n)
        raise TypeError(f"an idv file is indexed by a column name or index, or by a slice of "
                        f"rows, not {type(key).__name__}")

    def __len__(self):
        """The number of rows (as len() of a pandas DataFrame)."""
        return self.num_rows

    def __contains__(self, name):
        return name in self.layout.shown

    def __iter__(self):
        return iter(self.column_names)

    def __repr__(self):
        return (f"<idv.IdvFile {self.num_rows} rows x {self.num_columns} columns, "
                f"version {self.version}>")

    def _repr_html_(self):
        """A notebook's view: the columns (types, annotations, statistics) and first rows."""
        from idv._interop import display
        return display.file_html(self)

    def mapped_spans(self, runs):
        """Column.mapped_blocks(b0, b1, spans=True) of each of `runs`, their CRC-32s checked
        in one call over the read threads. Package-internal.

        Parameters
        ----------
        runs : list of (Column, int, int)
            Blocks [b0, b1) of mappable columns of this file.
        """
        return self.store.mapped_spans_of([(c.blocks, b0, b1) for c, b0, b1 in runs])

    def prefetch(self, columns=None, rows=None):
        """A context in which the blocks of these columns are fetched up front, in a few
        large coalesced requests, and read from memory: for a remote file read whole (read()
        and to_arrow() use it). A local file is not touched ahead. A column whose lookup table
        is damaged is left out (its read reports it); blocks that would not fit the memory limit
        beside the read's output are not fetched ahead.

        Parameters
        ----------
        columns : sequence of Column, str or int, optional
            Default: every readable column.
        rows : sequence of int, optional
            Only the blocks that hold these rows (a take's); default: every block.
        """
        source = self.store.check_open()
        if columns is None:
            cols = [c for c in self.columns if c.readable]
        else:
            cols = [c if isinstance(c, Column) else self[c] for c in columns]
        if source.buffer is not None:      # in memory already: nothing to fetch
            return contextlib.nullcontext()
        offsets, sizes = [], []
        for c in cols:
            try:
                table = c.lookup if c.readable else None
            except IdvFormatError:
                table = None
            if table is not None and len(table):
                hit = slice(None) if rows is None else \
                    np.unique(np.asarray(rows, np.int64) // c.rows_per_block)
                offsets.append(table["offset"][hit].astype(np.int64))
                sizes.append(table["disk"][hit].astype(np.int64))
        sizes = np.concatenate(sizes) if sizes else np.zeros(0, np.int64)
        # held at once: the blocks fetched and the read's output (beyond the limit: each
        # column's read fetches its own blocks)
        if not len(sizes) or int(sizes.sum()) + sum(
                c.decoded_bytes(rows) for c in cols if c.readable) > self.memory_limit:
            return contextlib.nullcontext()
        return source.prefetch(np.concatenate(offsets), sizes)

    # ---- lifetime
    def close(self):
        """Release the file (its memory map or file object); arrays already read stay valid."""
        if self.store is not None:
            self.store.close()
        source, self._source = self._source, None       # closed once, by one thread
        if source is not None:
            source.close()

    @property
    def closed(self):
        """True once close() has been called."""
        return self._source is None

    def __reduce__(self):
        """Not picklable by path either: a worker opening the path may find another file in
        its place, and would not share this one's options and state."""
        raise TypeError("an idv.IdvFile is not picklable: pass its path and open it again in "
                        "the worker")

    def check_open(self):
        """ValueError once the file is closed (what every read checks first).
        Package-internal."""
        self.store.check_open()


def check_options(kwargs, where):
    """TypeError for a name in `kwargs` that is not an option of idv.open (those of `where`,
    the caller, were taken before); pyarrow's and pandas' `filters` told the read's name."""
    unknown = [k for k in kwargs if k not in _OPEN_OPTIONS]
    if unknown:
        hint = ("; rows are filtered by a read's filter= (a string, DNF tuples or a "
                "pyarrow.compute expression)") if unknown[0] == "filters" else ""
        raise TypeError(f"unexpected keyword argument {unknown[0]!r}: neither an option of "
                        f"{where} nor of idv.open{hint}")


@contextlib.contextmanager
def opened(file, **kwargs):
    """A source of rows (idv._reader.read_source) for `file` (a path or URL, bytes, file object, an
    IdvFile or a Dataset); files opened here are closed on exit, a source passed in is left
    open. `kwargs`: idv.open's options, a TypeError with a source passed in (it has its own)
    and for a name that is none (the caller's own options are taken before)."""
    check_options(kwargs, "this read")
    if hasattr(file, "using"):
        own_options(file, kwargs)
        yield file
        return
    f = open(file, **kwargs)
    try:
        yield f
    finally:
        f.close()


@_docs.fill
def open(source, *, threads=None, backend=None,   # noqa: A001 - like io.open
         cache_bytes=cache.DEFAULT_BYTES, memory_limit=None, checksums=True,
         filesystem=None, storage_options=None, timeout=None) -> IdvFile:
    """Open an .idv file: its header, table of contents and tables are read and checked; no
    block is read until asked for.

    A path is memory-mapped (read whole when at most 64 KiB). A remote file (an fsspec URL
    such as ``s3://``, ``gs://``, ``az://``, ``https://``, ``memory://``, or a path inside
    ``filesystem``) is read by byte ranges: its header and tables now, then only the blocks a
    read needs, in coalesced concurrent requests (docs/remote.md; the ``remote`` extra).

    Parameters
    ----------
    source : str, os.PathLike, bytes or binary file object
        A path, an fsspec URL, the file's bytes or a seekable binary file.
    {open_options}

    Returns
    -------
    IdvFile

    Raises
    ------
    IdvFormatError
        Not an .idv, or damaged (a checksum mismatch names the column and block).

    Examples
    --------
    >>> import idv
    >>> with idv.open(idv.sample_path()) as f:
    ...     print(f.num_rows, f.column_names[:3])
    240 ['Id', 'Listed', 'City']
    """
    return IdvFile(source, threads=threads, backend=backend, cache_bytes=cache_bytes,
                   memory_limit=memory_limit, checksums=checksums, filesystem=filesystem,
                   storage_options=storage_options, timeout=timeout)


@_docs.fill
def read(source, columns=None, sparse=False, rows=None, datetime="100ns", text="object",
         filter=None, copy=True, **kwargs):  # noqa: A002 - pyarrow's and pandas' name
    """Open, read and close: dict name -> array, as ``idv.open(source, **kwargs).read(...)``.

    Parameters
    ----------
    source
        As idv.open, or an open IdvFile or Dataset (read as it was opened, and left open).
    columns, sparse, rows, datetime, text, filter, copy
        As IdvFile.read.
    **kwargs
        The options of idv.open, for a source opened here.

    Examples
    --------
    >>> import idv
    >>> idv.read(idv.sample_path(), ["City", "Price"], rows=slice(0, 3))["Price"]
    array([854400., 188600., 292200.])
    """
    with opened(source, **kwargs) as f:
        return f.read(columns, sparse=sparse, rows=rows, datetime=datetime, text=text,
                      filter=filter, copy=copy)


# the options of idv.open, which the one-call readers pass on to it
_OPEN_OPTIONS = frozenset(inspect.signature(open).parameters) - {"source"}
