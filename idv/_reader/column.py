"""A column of an open .idv file: its description, lookup table and metadata (its annotations:
idv._reader.column_metadata), and its rows read into numpy by block.

A column's rows are stored in blocks of ``rows_per_block`` rows, each compressed on its own and
located through the column's lookup table. Slicing decodes only the blocks that hold the rows asked
for; a full read decodes blocks in parallel threads. The blocks themselves are fetched, checked and
decoded by the file's block store (idv._store.blocks); a Column reaches its file only through its
FileParts: ``store``, ``tables``, ``path``, ``check_open()``, ``num_rows`` and ``header``.
"""
from __future__ import annotations

import numpy as np

from idv import _codecs, _compression, _docs, _lookup, _toc, types as T
from idv._resources import budget
from idv._reader import row_picks, selection
from idv._values import vectors
from idv._store.block_runs import check_block_sizes, decoded_size, text_rooms
from idv._store.blocks import ColumnBlocks
from idv._reader.column_metadata import ColumnAnnotations
from idv._reader.file_parts import Counter
from idv.errors import IdvFormatError, UnsupportedCodecError

class Column(ColumnAnnotations):
    """One column: its type and metadata, and its values read by block.

    ``col.read()`` gives every row; ``col[i]``, ``col[a:b]`` and ``col[a:b:step]`` decode only
    the blocks that hold those rows (``blocks_decoded`` counts them).

    Attributes: ``index`` (position in the file), ``name``, ``codec`` (the decoder, None when
    unknown) and ``blocks_decoded`` (blocks decoded so far by this column's reads).
    """

    def __init__(self, file, entry, codec, dead_reason):
        self._file = file           # a FileParts
        self._entry = entry
        self.codec = codec
        self._dead = dead_reason
        self._table = None
        self._blocks = None
        self._metadata_entries = None
        self._metadata = None
        self._annotations = {}                # (kind, offset) -> decoded value
        self._decoded = Counter()
        self.index = entry.index
        self.name = entry.name

    # ---- description
    @property
    def type(self):
        """The ML.NET type (``Single``, ``Vector<Single, 10>``, ``Key<UInt32, 5>``...), or None
        when this reader does not know the column's codec."""
        return self.codec.type if self.codec is not None else None

    @property
    def codec_name(self):
        """The codec's name as stored in the file (``Single``, ``TextSpan``, ``VBuffer``,
        ``Key2``...)."""
        return self._entry.codec_name

    @property
    def codec_params(self):
        """The codec's parameters as stored in the file (bytes; with ``codec_name``, how
        the blocks' payloads are laid out)."""
        return self._entry.codec_params

    @property
    def compression(self):
        """The block compression: ``'None'`` or ``'Deflate'`` (``'unknown (k)'`` for a kind this
        reader does not know)."""
        kind = self._entry.compression
        return _compression.NAMES.get(kind, f"unknown ({kind})")

    @property
    def readable(self):
        """False when this reader does not know the column's codec or compression (ML.NET skips
        such columns too); reading it then raises UnsupportedCodecError."""
        return self._dead is None

    @property
    def num_rows(self):
        """The number of rows (the file's)."""
        return self._file.num_rows

    @property
    def rows_per_block(self):
        """Rows in each block (the last block may hold fewer)."""
        return self._entry.rows_per_block

    @property
    def num_blocks(self):
        """The number of blocks the column's rows are stored in."""
        return _toc.block_count(self.num_rows, self.rows_per_block)

    def __len__(self):
        return self.num_rows

    def __reduce__(self):
        raise TypeError("an idv.Column is not picklable: pass its file's path and its name")

    def __repr__(self):
        t = self.type if self.type is not None else f"<unreadable: {self._dead}>"
        return f"<idv.Column {self.name!r}: {t}, {self.num_rows} rows, {self.num_blocks} blocks>"

    def _repr_html_(self):
        from idv._interop import display
        return display.column_html(self)

    @property
    def lookup(self):
        """The lookup table: a structured array (offset, disk, raw), one row per block."""
        if self._table is None:
            try:
                self._table = self._read_lookup()
            except IdvFormatError as e:
                raise self._located(e)
        return self._table

    @property
    def nbytes_disk(self):
        """Bytes the column's blocks take in the file (compressed)."""
        return int(self.lookup["disk"].sum(dtype=np.int64))

    @property
    def nbytes(self):
        """Bytes after decompression."""
        return int(self.lookup["raw"].sum(dtype=np.int64))

    @property
    def blocks(self):
        """The column's blocks as the file's block store decodes them (an
        idv._store.blocks.ColumnBlocks, built once; reads the lookup table). Package-internal."""
        if self._blocks is None:
            self._blocks = ColumnBlocks(self.index, self.name, self.codec,
                                        self._entry.compression, self.rows_per_block,
                                        self.num_rows, self.lookup, self._decoded.add)
        return self._blocks

    def stored_blocks(self, b0, b1):
        """Blocks [b0, b1) as the file stores them, neither inflated nor decoded (memoryviews),
        each checked against its CRC-32 where the file has checksums."""
        return self._file.store.stored(self.blocks, b0, b1)

    def check_unread(self, which, recorded=None):
        """IdvFormatError when a block of `which` (block numbers), which a read skips by its
        statistics, no longer holds the bytes its CRC-32 recorded (the checksums', else
        `recorded`, the statistics': BlockStore.check_unread, files in memory or mapped)."""
        try:
            self._file.store.check_unread(self.blocks, which, recorded)
        except IdvFormatError as e:
            raise self._located(e) from None

    def _located(self, error, **where):
        """`error` (an IdvFormatError) naming this column, `where`, and the file's path."""
        return error.locate(column=self.name, column_index=self.index, path=self._file.path,
                            **where)

    def _read_lookup(self):
        self._file.check_open()
        table = self._file.tables.lookup(self.index)
        if (self.codec is not None and len(table)
                and not self._file.tables.sizes_checked(self.index)):  # at open, with others
            check_block_sizes(table, self.codec, self._entry.compression, self.rows_per_block,
                              self.num_rows, self._entry.lookup_offset)
        return table

    # ---- the file's structures, for idv.verify and the command line (package-internal)
    @property
    def unreadable_reason(self):
        """Why the column cannot be read (an unknown codec or compression), else None."""
        return self._dead

    @property
    def path(self):
        """The path of the column's file (None in memory), for messages. Package-internal."""
        return self._file.path

    @property
    def lookup_offset(self):
        """The byte offset of the column's lookup table in the file. Package-internal."""
        return self._entry.lookup_offset

    def lookup_errors(self):
        """An IdvFormatError for every lookup table entry that points outside the file (reading
        stops at the first); [] when the table's bytes cannot be read. Package-internal."""
        nb = self.num_blocks
        if nb == 0:
            return []
        self._file.check_open()
        tail = self._file.header.tail_offset
        try:
            buf = self._file.store.view(self.lookup_offset, 16 * nb)
        except IdvFormatError:
            return []
        table = np.frombuffer(bytes(buf), _lookup.ENTRY, nb)
        return [self._located(_lookup.entry_error(table, b, self.lookup_offset, tail))
                for b in _lookup.bad_entries(table, tail)]

    # ---- reading
    def check_readable(self):
        """UnsupportedCodecError, naming the column, when it cannot be read (readable is
        False). Package-internal."""
        if self._dead is not None:
            raise self._located(UnsupportedCodecError(f"cannot read: {self._dead} (ML.NET skips "
                                                      f"such columns too)"))

    @budget.reads
    @_docs.fill
    def read(self, sparse=False):
        """Every row: a numpy array, or a Ragged for variable-size vectors.

        Parameters
        ----------
        {sparse}
        """
        return self.read_blocks(0, self.num_blocks, sparse)

    @_docs.fill
    def iter_blocks(self, sparse=False):
        """Yield the rows block by block, each in read()'s form.

        Parameters
        ----------
        {sparse}
        """
        for b in range(self.num_blocks):
            yield self.read_blocks(b, b + 1, sparse)

    # ---- the numpy protocol and row access, as on an h5py dataset
    @property
    def shape(self):
        """``(rows,)`` for scalars, ``(rows, *dims)`` for vectors; a variable dimension is None."""
        t = self.type
        if isinstance(t, T.Vector):
            return (self.num_rows,) + tuple(d or None for d in t.dims)
        return (self.num_rows,)

    @property
    def ndim(self):
        """len(shape)."""
        return len(self.shape)

    @property
    def dtype(self):
        """The numpy dtype of the values (of the items, for vectors)."""
        self.check_readable()
        return self.codec.dtype

    def __array__(self, dtype=None, copy=None):
        """``np.asarray(col)``: read() once, each block decoded once."""
        if isinstance(self.type, T.Vector) and not self.type.is_fixed:
            raise TypeError(f"column {self.name!r} holds variable-size vectors ({self.type}), "
                            f"which have no rectangular array form: use col.read() (an "
                            f"idv.Ragged) or col.read(sparse=True)")
        out = self.read()
        return out if dtype is None else out.astype(dtype, copy=False)

    def __iter__(self):
        """The rows one by one, each block decoded once."""
        for block in self.iter_blocks():
            yield from block

    @budget.reads
    def __getitem__(self, key):
        n = self.num_rows
        rpb = self.rows_per_block
        if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
            i = int(key) + n if key < 0 else int(key)
            if not 0 <= i < n:
                raise IndexError(f"row {key} out of range for {n} rows")
            if isinstance(self.type, T.Vector) and self.readable:    # not its block densified
                return row_picks.row(self, i, self._stored_block)
            return vectors.detached(self._cached_block(i // rpb)[i % rpb])
        rows = None
        if isinstance(self.type, T.Vector) and not (    # a few rows of wide blocks: not
                isinstance(key, slice) and abs(key.step or 1) <= 2   # densified (a long run
                and selection.count(key, n) >= 2 * rpb):             # of rows: whole blocks)
            rows = selection.row_numbers(key, n)
            if row_picks.picks_few(self, rows):
                return row_picks.picked_vectors(self, rows, self._stored_block)
        run = selection.slice_run(key, n, rpb) if isinstance(key, slice) else None
        if run is not None:      # a slice over every block of a run: the run, then a view
            (b0, b1), local = run
            if b1 <= b0:
                return self.read_blocks(0, 0)
            if row_picks.is_strided(self, key, (b0, b1)):
                self.need(self.decoded_bytes(key), lambda: f"rows {key} of {self.name!r}")
                return row_picks.strided(self, range(*key.indices(n)))
            part = self.read_blocks(b0, b1)
            return vectors.detached(part[local], part)
        return row_picks.picked(self, selection.row_numbers(key, n) if rows is None else rows,
                                self._cached_block)

    def _cached_block(self, b):
        """Block `b` in read()'s form, through the file's cache of decoded blocks."""
        return self._file.store.cache.get((self.index, b), lambda: self.read_blocks(b, b + 1),
                                          int(self.lookup["raw"][b]))

    def _stored_block(self, b):
        """Block `b` of a vector column as stored (row_picks.Stored), through the same cache."""
        return self._file.store.cache.get((self.index, b, "stored"), lambda: row_picks.Stored(
            self.read_blocks(b, b + 1, stored=True)[0], self.type), int(self.lookup["raw"][b]))

    @_docs.fill
    def read_blocks(self, b0, b1, sparse=False, *, parallel=True, out=None, stored=False):
        """The rows of blocks [b0, b1) in read()'s form (read, slicing and iter_blocks use it;
        idv.verify decodes every block through it). A damaged block raises IdvFormatError
        with its ``block`` and ``offset``.

        Parameters
        ----------
        b0, b1 : int
        {sparse}
        parallel, out
            False: decoded in the calling thread (for callers with threads of their own). An
            array of the rows' shape and dtype to decode scalars or dense vectors into.
        stored
            Vectors as their blocks store them: a VectorBlock each (sparse rows as their
            indices and values), for rows picked from them. Package-internal.
        """
        try:
            if stored:
                self.check_readable()
                return self._file.store.stored_vectors(self.blocks, b0, b1, parallel)
            return self._decode_blocks(b0, b1, sparse, parallel, out)
        except IdvFormatError as e:
            raise self._located(e)

    @property
    def mappable(self):
        """Whether this column's rows can be read without copying (mapped_blocks: uncompressed
        numbers and keys of a memory-mapped file, BlockStore.mappable)."""
        self._file.check_open()
        return (self.readable and bool(self.num_rows)
                and self._entry.compression == _compression.NONE
                and self._file.store.mappable(self.blocks))

    def mapped_blocks(self, b0, b1, spans=False):
        """Blocks [b0, b1) of a mappable column: per block a read-only array that is a view of
        the file's memory map, valid after the file is closed (BlockStore.mapped_blocks); with
        ``spans``, the map and the blocks' places in it instead (BlockStore.mapped_spans)."""
        store = self._file.store
        try:
            return (store.mapped_spans if spans else store.mapped_blocks)(self.blocks, b0, b1)
        except IdvFormatError as e:
            raise self._located(e)

    def read_mapped(self):
        """All the column's rows as a read-only view of the file's memory map when it holds
        them as they are (``mappable``) in one block, else None (read() copies them then, in
        parallel: joining the views of several blocks would be a copy too, in one thread)."""
        if not self.mappable or self.num_blocks != 1:
            return None
        return self.mapped_blocks(0, 1)[0]

    def block_rows(self, b):
        """(first row, stop row) of block `b`.

        Parameters
        ----------
        b : int
        """
        start = b * self.rows_per_block
        return start, min(start + self.rows_per_block, self.num_rows)

    def _decode_blocks(self, b0, b1, sparse, parallel, out=None):
        self.check_readable()
        self._file.check_open()
        codec = self.codec
        is_vector = isinstance(codec, _codecs.VBufferCodec)
        if sparse and not is_vector:
            raise TypeError(f"sparse=True is for vector columns; column {self.index} "
                            f"{self.name!r} is {self.type}")
        if b1 <= b0:
            if is_vector:
                return vectors.empty(codec.type, sparse)
            return np.empty(0, codec.dtype)
        return self._file.store.decode(self.blocks, b0, b1, sparse, parallel, out)

    def decoded_bytes(self, rows=None, arrow=False):
        """About what reading `rows` (None: all; a slice or row numbers) allocates, from the lookup
        table alone (its blocks' decompressed size, Text as str objects or, `arrow`, in Arrow's
        form: block_runs.decoded_size), which whole reads check first. Package-internal."""
        n, strided = self.num_rows, False
        if rows is None or n == 0:
            b0, b1, count = 0, self.num_blocks, n
        else:
            if isinstance(rows, slice):
                count = len(range(*rows.indices(n)))
                run = selection.slice_run(rows, n, self.rows_per_block)
                lo, hi = (run[0][0] * self.rows_per_block, run[0][1] * self.rows_per_block) \
                    if run is not None else (0, n)
                strided = run is not None and row_picks.is_strided(self, rows, run[0])
            else:
                picked = selection.row_numbers(rows, n)
                count = len(picked)
                lo, hi = (int(picked.min()), int(picked.max()) + 1) if count else (0, 0)
            b0, b1 = lo // self.rows_per_block, -(-hi // self.rows_per_block)
        try:        # a damaged lookup table, an impossible size: named as lookup names them
            raw = self._file.tables.raw_total(self.index) if (b0, b1) == (0, self.num_blocks) \
                and self._file.tables.sizes_checked(self.index) \
                else int(self.lookup["raw"][b0:b1].sum(dtype=np.int64))
        except IdvFormatError as e:
            raise self._located(e) from None
        if strided:
            return row_picks.strided_bytes(self, raw, count, (b0, b1), arrow)
        return decoded_size(self.codec, raw, count, arrow)

    @property
    def blocks_decoded(self):
        """Blocks decoded so far by this column's reads."""
        return self._decoded.count

    def text_room(self, b0, b1):
        """The bytes read_text_blocks(b0, b1) decodes into (idv._store.block_runs.text_rooms)."""
        return int(text_rooms(self.lookup[b0:b1]).sum())

    def read_text_blocks(self, b0, b1, *, parallel=True, out=None):
        """Blocks [b0, b1) of a Text or vector-of-Text column in Arrow's string layout, no str:
        a TextSpans a block (int32 offsets into its UTF-8) or, for vectors, a VectorBlock of one
        (None: rows stored sparse), views of one buffer (``out``: text_room(b0, b1) bytes) the
        blocks are inflated into and converted in place. Errors, ``parallel``: as read_blocks."""
        try:
            return self._decode_text_blocks(b0, b1, parallel, out)
        except IdvFormatError as e:
            raise self._located(e)

    @property
    def memory_limit(self):
        """The bytes one read of the column may allocate (its file's). Package-internal."""
        return self._file.store.memory_limit

    def need(self, nbytes, what):
        """BlockStore.need, for memory a column's reader allocates itself. Package-internal."""
        self._file.store.need(nbytes, what)

    def read_bit_blocks(self, b0, b1, *, parallel=True, out=None):
        """Blocks [b0, b1) of Boolean scalars as they hold them, a bit a row (Arrow's layout):
        their bytes end to end (block_runs.bit_rooms) in one uint8 array, ``out`` if given.
        Errors and ``parallel`` as read_blocks. Package-internal."""
        self.check_readable()
        self._file.check_open()
        try:
            return self._file.store.decode_bits(self.blocks, b0, b1, parallel, out)
        except IdvFormatError as e:
            raise self._located(e)

    def read_strings(self, rows=None):
        """A Text column's rows as a numpy StringDType array (whole scalar columns straight
        from the blocks' UTF-8, the rest converted from read()'s str objects).

        Parameters
        ----------
        rows : optional
            As ``col[rows]`` takes them (default: every row).
        """
        if self.type is T.Text and rows is None:
            from idv import _strings
            return _strings.string_array(self.read_text_blocks(0, self.num_blocks),
                                         self.num_rows)
        values = self.read() if rows is None else self[rows]
        dtype = np.dtypes.StringDType()
        if isinstance(values, vectors.Ragged):
            return vectors.Ragged(values.values.astype(dtype), values.offsets)
        return values.astype(dtype)

    def _decode_text_blocks(self, b0, b1, parallel, dst=None):
        self.check_readable()
        self._file.check_open()
        if T.item_type(self.codec.type) is not T.Text:
            raise TypeError(f"column {self.index} {self.name!r} is {self.codec.type}, not text")
        if b1 <= b0:
            return []
        return self._file.store.decode_text(self.blocks, b0, b1, parallel, dst)

