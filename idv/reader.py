"""The reading API: ``idv.open`` gives an IdvFile whose columns read into numpy by block.

A column's rows are stored in blocks of ``rows_per_block`` rows, each compressed on its own and
located through the column's lookup table. Slicing decodes only the blocks that hold the rows
asked for; a full read decodes blocks in parallel threads (the DEFLATE libraries and the
decoders release the GIL).
"""
from __future__ import annotations

import contextlib
import threading
import warnings

import numpy as np

from idv import (_codecs, _compression, _header, _lookup, _threads, _toc, budget, cache,
                 checksums, compression, layout)
from idv import ticks
from idv import types as T
from idv import vectors
from idv.errors import IdvFormatError, IdvWarning, UnsupportedCodecError
from idv.remote import open_any

def _chunks(n, parts):
    """Split range(n) into at most `parts` contiguous (start, stop) pairs."""
    parts = max(1, min(parts, n))
    bounds = np.linspace(0, n, parts + 1).astype(int)
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


class Field:
    """One entry of a Schema: a column's name, type and metadata types.

    Attributes: ``index`` (the column's position), ``name``, ``type`` (a DataViewType, None
    when the codec is unknown), ``codec`` (the codec's name in the file), ``metadata_types``
    (dict kind -> type) and ``hidden`` (True when a later column has the same name).
    """

    __slots__ = ("index", "name", "type", "codec", "metadata_types", "hidden")

    def __init__(self, index, name, type_, codec, metadata_types, hidden):
        self.index = index
        self.name = name
        self.type = type_
        self.codec = codec
        self.metadata_types = metadata_types
        self.hidden = hidden

    def __str__(self):
        t = self.type if self.type is not None else f"<unreadable: codec {self.codec!r}>"
        s = f"{self.name}: {t}"
        if self.hidden:
            s += "  (hidden: a later column has the same name)"
        if self.metadata_types:
            meta = ", ".join(f"{k}: {v}" for k, v in self.metadata_types.items())
            s += f"\n  -- metadata: {meta}"
        return s

    def __repr__(self):
        return f"Field({self.name!r}, {self.type})"

    def __eq__(self, other):
        if not isinstance(other, Field):
            return NotImplemented
        return _field_key(self) == _field_key(other)

    __hash__ = None


def _field_key(f):
    return (f.name, f.type if f.type is not None else f"codec {f.codec}", dict(f.metadata_types),
            f.hidden)


class Schema:
    """The columns' names and types, printable like pyarrow's."""

    def __init__(self, fields, num_rows):
        self.fields = list(fields)
        self.num_rows = num_rows

    @property
    def names(self):
        """The column names, in file order (hidden columns included)."""
        return [f.name for f in self.fields]

    @property
    def types(self):
        """The column types, in file order (None for a column whose codec is unknown)."""
        return [f.type for f in self.fields]

    def __len__(self):
        return len(self.fields)

    def __iter__(self):
        return iter(self.fields)

    def __getitem__(self, key):
        if isinstance(key, str):
            for f in reversed(self.fields):
                if f.name == key:
                    return f
            raise KeyError(key)
        return self.fields[key]

    def __contains__(self, name):
        """``'Label' in schema``: whether a column has that name."""
        return any(f.name == name for f in self.fields)

    def __eq__(self, other):
        """Schemas are equal when their columns have the same names, types, metadata types and
        hidden flags, in the same order (the row count is not part of a schema)."""
        if not isinstance(other, Schema):
            return NotImplemented
        return [_field_key(f) for f in self.fields] == [_field_key(f) for f in other.fields]

    __hash__ = None

    def __str__(self):
        return "\n".join(str(f) for f in self.fields)

    def __repr__(self):
        return f"idv.Schema ({len(self.fields)} columns, {self.num_rows} rows)\n{self}"


class Column:
    """One column: its type and metadata, and its values read by block.

    ``col.read()`` gives every row; ``col[i]``, ``col[a:b]`` and ``col[a:b:step]`` decode only
    the blocks that hold those rows (``blocks_decoded`` counts them).

    Attributes: ``index`` (position in the file), ``name``, ``codec`` (the decoder, None when
    unknown) and ``blocks_decoded`` (blocks decoded so far by this column's reads).
    """

    def __init__(self, file, entry, codec, dead_reason):
        self._file = file
        self._entry = entry
        self.codec = codec
        self._dead = dead_reason
        self._table = None
        self._metadata_entries = None
        self._metadata = None
        self.blocks_decoded = 0
        self._counting = threading.Lock()     # pieces of one column decode in several threads
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
    def compression(self):
        """The block compression: ``'None'`` or ``'Deflate'`` (``'unknown (k)'`` for a kind this
        reader does not know)."""
        return _compression.NAMES.get(self._entry.compression, f"unknown ({self._entry.compression})")

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

    def __repr__(self):
        t = self.type if self.type is not None else f"<unreadable: {self._dead}>"
        return f"<idv.Column {self.name!r}: {t}, {self.num_rows} rows, {self.num_blocks} blocks>"

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

    def _located(self, error, **where):
        """`error` (an IdvFormatError) naming this column, `where`, and the file's path."""
        return error.locate(column=self.name, column_index=self.index, path=self._file._path,
                            **where)

    def _read_lookup(self):
        self._file._check_open()
        try:
            table = self._file._tables.lookup(self.index)
        except IdvFormatError as e:
            raise self._located(e)
        if self.codec is not None and len(table):
            self._check_sizes(table)
        return table

    def _check_sizes(self, table):
        """Refuse impossible block sizes before any output is allocated."""
        rows = np.full(len(table), self.rows_per_block, np.int64)
        rows[-1] = self.num_rows - (len(table) - 1) * self.rows_per_block
        raw = table["raw"].astype(np.int64)
        disk = table["disk"].astype(np.int64)
        kind = self._entry.compression
        if self.codec.itemsize:
            bad = raw != rows * self.codec.itemsize
            why = "is not rows x item size"
        else:
            bad = raw < np.array([self.codec.min_size(int(r)) for r in rows[:1]] * (len(rows) - 1)
                                 + [self.codec.min_size(int(rows[-1]))])
            why = "is too small for the block's rows"
        if kind == _compression.NONE:
            bad2 = raw != disk
            why2 = "differs from the stored length (compression None)"
        else:
            bad2 = raw > disk * _compression.MAX_RATIO + 64
            why2 = "is beyond what DEFLATE can expand to"
        for mask, reason in ((bad, why), (bad2, why2)):
            if mask.any():
                b = int(np.flatnonzero(mask)[0])
                raise IdvFormatError(f"decompressed length {int(raw[b])} {reason}", block=b,
                                     offset=self._entry.lookup_offset + 16 * b)

    # ---- metadata
    @property
    def metadata_kinds(self):
        """The kinds of the column's annotations, in file order (``SlotNames``,
        ``KeyValues``...)."""
        return [m.kind for m in self.metadata_entries()]

    @property
    def metadata_types(self):
        """dict kind -> ML.NET type of each annotation (None when its codec is unknown)."""
        out = {}
        for m in self.metadata_entries():
            try:
                out[m.kind] = self._metadata_codec(m).type
            except UnsupportedCodecError:
                out[m.kind] = None
        return out

    @property
    def metadata(self):
        """dict kind -> value: SlotNames -> array of str, KeyValues -> array, IsNormalized ->
        bool; scalars as Python/numpy scalars, vectors as arrays shaped by their dims."""
        if self._metadata is None:
            values = {}
            for m in self.metadata_entries():
                try:
                    values[m.kind] = self.decode_metadata(m)
                except UnsupportedCodecError as e:
                    warnings.warn(f"skipping {e}", IdvWarning, stacklevel=2)
            self._metadata = values
        return self._metadata

    def _metadata_codec(self, m):
        try:
            return _codecs.resolve(m.codec_name, m.codec_params)
        except IdvFormatError as e:
            raise self._located(e, metadata_kind=m.kind)

    # ---- the file's structures, for idv.verify and the command line (package-internal: not
    # part of the public API, and may change)
    @property
    def unreadable_reason(self):
        """Why the column cannot be read (its unknown codec or compression); None when it can.
        Package-internal."""
        return self._dead

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
        self._file._check_open()
        tail = self._file.header.tail_offset
        try:
            buf = self._file._source.view(self.lookup_offset, 16 * nb)
        except IdvFormatError:
            return []
        table = np.frombuffer(bytes(buf), _lookup.ENTRY, nb)
        return [self._located(_lookup.entry_error(table, b, self.lookup_offset, tail))
                for b in _lookup.bad_entries(table, tail)]

    def metadata_entries(self):
        """The column's metadata table: an entry (kind, codec_name, codec_params, compression,
        offset, size) per annotation, in file order. Package-internal."""
        if self._metadata_entries is None:
            self._file._check_open()
            try:
                self._metadata_entries = self._file._tables.metadata(self.index)
            except IdvFormatError as e:
                raise self._located(e)
        return self._metadata_entries

    def decode_metadata(self, entry):
        """The value of one entry of metadata_entries(). Raises UnsupportedCodecError for an
        unknown codec or compression (``metadata`` skips those with a warning) and
        IdvFormatError for damage. Package-internal."""
        codec = self._metadata_codec(entry)
        if entry.compression not in _compression.NAMES:
            raise self._located(UnsupportedCodecError(f"unknown compression "
                                                      f"{entry.compression}"),
                                metadata_kind=entry.kind)
        try:
            data = self._file._source.view(entry.offset, entry.size)
            raw = _compression.decompress_metadata(
                entry.compression, data, entry.size * _compression.MAX_RATIO + 64)
            value = codec.decode(memoryview(raw), 1)
            if isinstance(codec, _codecs.VBufferCodec):
                _check_dense([value], codec.type, entry.size)
                return vectors.metadata_value(value, codec.type)
        except IdvFormatError as e:
            raise self._located(e, metadata_kind=entry.kind, offset=entry.offset)
        v = value[0]
        return v.item() if isinstance(v, np.bool_) else v

    # ---- reading
    def _check_readable(self):
        if self._dead is not None:
            raise self._located(UnsupportedCodecError(f"cannot read: {self._dead} (ML.NET skips "
                                                      f"such columns too)"))

    def read(self, sparse=False):
        """Every row: a numpy array, a Ragged for variable-size vectors, or with
        ``sparse=True`` a scipy.sparse.csr_matrix for vector columns."""
        return self.read_blocks(0, self.num_blocks, sparse)

    def iter_blocks(self, sparse=False):
        """Yield the rows block by block, each in read()'s form."""
        for b in range(self.num_blocks):
            yield self.read_blocks(b, b + 1, sparse)

    # ---- the numpy protocol and row access, as on an h5py dataset
    @property
    def shape(self):
        """``(rows,)`` for scalars, ``(rows, *dims)`` for vectors; a variable dimension is
        None."""
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
        self._check_readable()
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

    def __getitem__(self, key):
        n = self.num_rows
        rpb = self.rows_per_block
        if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
            i = int(key) + n if key < 0 else int(key)
            if not 0 <= i < n:
                raise IndexError(f"row {key} out of range for {n} rows")
            b = i // rpb
            return _detached(self._cached_block(b)[i - b * rpb])
        if isinstance(key, slice):
            rows = np.arange(*key.indices(n))
            if len(rows) and key.step in (None, 1):
                b0, b1 = rows[0] // rpb, rows[-1] // rpb + 1
                part = self.read_blocks(b0, b1)
                return _detached(part[rows[0] - b0 * rpb:rows[-1] + 1 - b0 * rpb], part)
        else:
            rows = _row_selection(key, n)
        if len(rows) == 0:
            return self.read_blocks(0, 0)
        blocks = np.unique(rows // rpb)
        parts, firsts = [], []
        if len(blocks) <= _CACHED_SELECTION_BLOCKS:     # a few blocks: each once, cached
            for b in blocks:
                parts.append(self._cached_block(int(b)))
                firsts.append(int(b) * rpb)
        else:        # many: runs of consecutive blocks decoded together, the rest skipped
            for run in np.split(blocks, np.flatnonzero(np.diff(blocks) != 1) + 1):
                parts.append(self.read_blocks(int(run[0]), int(run[-1]) + 1))
                firsts.append(int(run[0]) * rpb)
        if len(parts) == 1:
            whole, local = parts[0], rows - firsts[0]
        else:
            whole = concat_reads(parts)
            starts = np.cumsum([0] + [_len(p) for p in parts[:-1]])
            run_of_row = np.searchsorted(np.array(firsts), rows, side="right") - 1
            local = rows - np.array(firsts)[run_of_row] + starts[run_of_row]
        return whole[local]

    def _cached_block(self, b):
        """Block `b` in read()'s form, through the file's cache of decoded blocks."""
        return self._file._blocks.get((self.index, b), lambda: self.read_blocks(b, b + 1),
                                      int(self.lookup["raw"][b]))

    def read_blocks(self, b0, b1, sparse=False, *, parallel=True, out=None):
        """The rows of blocks [b0, b1) in read()'s form (read, slicing and iter_blocks use it;
        idv.verify decodes every block through it). A damaged block raises IdvFormatError
        with its ``block`` and ``offset``. ``parallel=False``: decoded in the calling thread
        (for callers that run several reads in threads of their own). ``out``: for columns
        of fixed-width scalars, an array of the rows' count and dtype to decode into (a part
        of a larger buffer, IdvFile.buffer) instead of a new one."""
        try:
            return self._decode_blocks(b0, b1, sparse, parallel, out)
        except IdvFormatError as e:
            raise self._located(e)

    def block_rows(self, b):
        """(first row, stop row) of block `b`."""
        start = b * self.rows_per_block
        return start, min(start + self.rows_per_block, self.num_rows)

    def _decode_blocks(self, b0, b1, sparse, parallel, out=None):
        self._check_readable()
        self._file._check_open()
        codec = self.codec
        is_vector = isinstance(codec, _codecs.VBufferCodec)
        if sparse and not is_vector:
            raise TypeError(f"sparse=True is for vector columns; column {self.index} "
                            f"{self.name!r} is {self.type}")
        r0 = b0 * self.rows_per_block
        r1 = self.block_rows(b1 - 1)[1] if b1 > b0 else r0
        if b1 <= b0:
            if is_vector:
                return vectors.empty(codec.type, sparse)
            return np.empty(0, codec.dtype)
        table = self.lookup[b0:b1]
        def rows():
            return f"reading column {self.index} {self.name!r} rows {r0}-{r1 - 1}"
        if codec.itemsize and not is_vector:
            self._file._need((r1 - r0) * codec.itemsize, rows)
        elif not is_vector:          # text, Boolean: the output, and the largest block
            self._file._need((r1 - r0) * codec.dtype.itemsize + int(table["raw"].max()), rows)
        else:                        # the blocks' items, held until assembled
            self._file._need(int(table["raw"].sum(dtype=np.int64)), rows)
        self._count_decoded(b1 - b0)
        if out is not None and not (codec.itemsize and not is_vector and out.dtype == codec.dtype
                                    and out.shape == (r1 - r0,) and out.flags.c_contiguous):
            raise ValueError(f"out= takes {r1 - r0} contiguous {codec.dtype} items of a column "
                             f"of fixed-width scalars; column {self.index} {self.name!r} is "
                             f"{self.type}")
        if codec.itemsize and not is_vector:
            if out is None:
                out = _compression.empty(r1 - r0, codec.dtype)
            self._inflate_into(b0, table, out.view(np.uint8).reshape(-1),
                               (np.arange(b0, b1, dtype=np.int64) * self.rows_per_block - r0)
                               * codec.itemsize, parallel)
            try:
                codec.fix(out)
            except IdvFormatError as e:
                raise self._fix_error(e, b0, b1, table, out, r0) from None
            return out
        if is_vector:
            results = [None] * (b1 - b0)
            self._decode_each(b0, b1, table, lambda i, b, buf, n: results.__setitem__(
                i, codec.decode(buf, n)), parallel=parallel)
            if not sparse:
                # a single block's error names it; for several the reason names the range
                one = b1 - b0 == 1
                _check_dense(results, codec.type, int(table["disk"].sum(dtype=np.int64)),
                             "" if one else f" of blocks {b0}-{b1 - 1}",
                             ", or read the column with sparse=True",
                             block=b0 if one else None,
                             offset=int(table["offset"][0]) if one else None)
            self._file._need(vectors.assembled_bytes(results, codec.type, sparse),
                             lambda: f"{rows()} ({codec.type}{', sparse' if sparse else ''})")
            return vectors.assemble(results, codec.type, sparse)
        out = _compression.empty(r1 - r0, codec.dtype)

        def into(i, b, buf, n):
            s = self.block_rows(b)[0] - r0
            _codecs.check_end(codec.load_name, codec.decode_into(buf, 0, n, out[s:s + n]),
                              len(buf), n)
        self._decode_each(b0, b1, table, into, parallel=parallel)
        return out

    def _count_decoded(self, n):
        with self._counting:
            self.blocks_decoded += n

    def text_room(self, b0, b1):
        """The bytes read_text_blocks(b0, b1) decodes into (_text_rooms)."""
        return int(_text_rooms(self.lookup[b0:b1]).sum())

    def read_text_blocks(self, b0, b1, *, parallel=True, out=None):
        """Blocks [b0, b1) of a Text or vector-of-Text column in Arrow's string layout, without
        Python strings: per block a TextSpans (int32 offsets into the UTF-8 bytes) or, for
        vectors, a VectorBlock whose values are one (None for a block with rows stored sparse:
        read it with read_blocks). They are views into one buffer the blocks are decompressed
        into and converted in place, blocks in parallel (idv.arrow builds Arrow arrays on them
        without copies). A damaged block raises IdvFormatError as read_blocks does;
        ``parallel`` as there; ``out``: a uint8 array of text_room(b0, b1) bytes to decode
        into instead of a new one."""
        try:
            return self._decode_text_blocks(b0, b1, parallel, out)
        except IdvFormatError as e:
            raise self._located(e)

    def read_strings(self, rows=None):
        """A Text column's rows (all, or ``col[rows]``'s) as a numpy StringDType array: whole
        scalar columns straight from the blocks' UTF-8 (read_text_blocks, idv._strings), the
        rest converted from read()'s str objects."""
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
        self._check_readable()
        self._file._check_open()
        codec = self.codec
        if T.item_type(codec.type) is not T.Text:
            raise TypeError(f"column {self.index} {self.name!r} is {codec.type}, not text")
        if b1 <= b0:
            return []
        table = self.lookup[b0:b1]
        room = _text_rooms(table)
        starts = np.zeros(b1 - b0, np.int64)
        np.cumsum(room[:-1], out=starts[1:])
        r0, r1 = b0 * self.rows_per_block, self.block_rows(b1 - 1)[1]
        self._file._need(int(room.sum()), lambda: f"reading column {self.index} {self.name!r} "
                                                  f"rows {r0}-{r1 - 1} (text)")
        self._count_decoded(b1 - b0)
        if dst is None:
            dst = _compression.empty(int(room.sum()), np.uint8)
        elif not (dst.dtype == np.uint8 and dst.shape == (int(room.sum()),)
                  and dst.flags.c_contiguous):
            raise ValueError(f"out= takes {int(room.sum())} contiguous bytes (text_room)")
        out = [None] * (b1 - b0)

        def into(i, b, buf, n):
            out[i] = _codecs.arrow_text_block(codec, buf, n)
        self._decode_each(b0, b1, table, into, (dst, starts), parallel)
        return out

    def _fix_error(self, error, b0, b1, table, out, r0):
        """Locate a codec.fix() failure over blocks [b0, b1): the first block whose rows fail
        alone (checked on a copy)."""
        for b in range(b0, b1):
            s, e = (r - r0 for r in self.block_rows(b))
            try:
                self.codec.fix(out[s:e].copy())
            except IdvFormatError as found:
                return found.locate(block=b, offset=int(table["offset"][b - b0]))
        return error

    def _inflate_into(self, b0, table, dst, dst_offsets, parallel=True):
        """Decompress the blocks of `table` (lookup[b0:b0 + len(table)]) into dst, in parallel
        chunks unless `parallel` is False (the caller already runs in a worker of the pool)."""
        f = self._file
        kind = self._entry.compression
        backend = f._backend
        offsets = np.ascontiguousarray(table["offset"])
        disk = np.ascontiguousarray(table["disk"])
        raw = np.ascontiguousarray(table["raw"])
        dst_offsets = np.ascontiguousarray(dst_offsets, dtype=np.int64)
        # with checksums, each block's CRC-32 is checked in the decompression loop itself
        crcs = f._expected_crcs(self)
        if crcs is not None:
            crcs = crcs[b0:b0 + len(table)]

        def run(span):
            a, b = span
            src, offs = f._block_bytes(offsets[a:b], disk[a:b])
            return a, backend.decompress_blocks(kind, src, offs, disk[a:b], raw[a:b], dst,
                                                dst_offsets[a:b],
                                                None if crcs is None else crcs[a:b])
        total = int(raw.sum(dtype=np.int64))
        # up to 4 chunks per thread (for balance), each worth dispatching to a thread
        parts = min(f.threads * 4, total // _SPAN_BYTES) if parallel else 1
        spans = _chunks(len(table), parts)
        if len(spans) > 1 and f.threads > 1:
            results = list(_threads.pool("read", f.threads).map(run, spans))
        else:
            results = [run(s) for s in spans]
        for a, (i, message) in results:
            if i >= 0:
                block, offset = b0 + a + i, int(offsets[a + i])
                if f._sums is not None:     # damaged bytes: say so, with both CRC-32s
                    f._check_block(offset, int(disk[a + i]), block)
                raise IdvFormatError(message, block=block, offset=offset)

    def _decode_each(self, b0, b1, table, consume, keep=None, parallel=True):
        """Decompress each block then hand it to consume(i, block, buffer, rows).

        Each task decompresses a few blocks at a time (_GROUP_BYTES, or one larger block) into
        a buffer it reuses and decodes them while they are still in cache, so besides the
        output only about one group per thread is held in memory. With `keep` (an array and
        each block's start in it), the blocks are decompressed there instead, to be kept.
        `parallel` False: all in the calling thread.
        """
        raw = table["raw"].astype(np.int64)
        offsets = table["offset"]
        f = self._file

        def run(span):
            a, b = span
            groups = block_groups(raw[a:b], _GROUP_BYTES, a)
            if keep is None:
                buf = np.empty(max(int(raw[g0:g1].sum()) for g0, g1 in groups), np.uint8)
            else:
                buf = keep[0]
            mv = memoryview(buf)
            for g0, g1 in groups:
                if keep is None:
                    starts = np.zeros(g1 - g0, np.int64)
                    np.cumsum(raw[g0:g1 - 1], out=starts[1:])
                else:
                    starts = keep[1][g0:g1]
                self._inflate_into(b0 + g0, table[g0:g1], buf, starts, parallel=False)
                for i in range(g0, g1):
                    blk = b0 + i
                    r0, r1 = self.block_rows(blk)
                    lo = int(starts[i - g0])
                    try:
                        consume(i, blk, mv[lo:lo + int(raw[i])], r1 - r0)
                    except IdvFormatError as e:
                        e.locate(block=blk, offset=int(offsets[i]))
                        raise
        spans = _chunks(len(table), f.threads * 4 if parallel else 1)
        if len(spans) > 1 and f.threads > 1:
            list(_threads.pool("read", f.threads).map(run, spans))
        else:
            for s in spans:
                run(s)


# read(text=...): Text values as Python str objects, or numpy 2's StringDType
TEXT_FORMS = ("object", "StringDType")

# Blocks decompressed together by one _decode_each task before they are decoded.
_GROUP_BYTES = 1 << 20
# The least output (bytes) a parallel chunk of _inflate_into is given.
_SPAN_BYTES = 128 << 10


def _text_rooms(table):
    """Each block's room in read_text_blocks' buffer: its decompressed size, rounded up so that
    the next starts at a 64-byte boundary (Arrow's alignment); all held by the result."""
    return (table["raw"].astype(np.int64) + 63) // 64 * 64


def block_groups(raw, limit, base=0):
    """Split blocks with decompressed sizes `raw` into contiguous runs of at most `limit`
    bytes (a larger block is a run by itself): (start, stop) pairs offset by `base`."""
    out = []
    start, size = 0, 0
    for i, n in enumerate(raw.tolist()):
        if i > start and size + n > limit:
            out.append((base + start, base + i))
            start, size = i, 0
        size += n
    if len(raw):
        out.append((base + start, base + len(raw)))
    return out


# A row selection over at most this many blocks goes through the cache of decoded blocks.
_CACHED_SELECTION_BLOCKS = 64

# Densified sparse rows up to this many bytes are always allowed (see _check_dense).
_DENSE_FLOOR = 1 << 28


def _check_dense(blocks, vtype, disk, which="", hint="", **where):
    """Sparse rows densify to their full length, which the file does not bound: refuse a dense
    form of implicit zeros no file of `disk` bytes can mean (a corrupt length) instead of
    allocating gigabytes. read(sparse=True) has no such limit."""
    implicit = sum(int(b.lengths.sum()) - len(b.values) for b in blocks)
    nbytes = implicit * vtype.item.dtype.itemsize
    if nbytes > max(_DENSE_FLOOR, _compression.MAX_RATIO * disk):
        raise IdvFormatError(f"the sparse vectors{which} would densify to {implicit} implicit "
                             f"zeros ({nbytes} bytes) from {disk} bytes in the file; a vector "
                             f"length is corrupt{hint}", **where)


def _detached(selection, whole=None):
    """A selection of rows that does not keep its decoded block alive: a view of an array is
    copied unless it is most of the array it views."""
    base = selection.base if isinstance(selection, np.ndarray) else None
    if base is None:
        return selection
    if isinstance(whole, np.ndarray) and 2 * selection.nbytes >= whole.nbytes:
        return selection
    return selection.copy()


def _row_selection(key, n):
    """Row numbers from a list or array of row numbers (negative from the end) or a boolean
    mask of all rows."""
    try:
        rows = np.asarray(key)
    except (TypeError, ValueError):
        rows = None
    if rows is None or rows.ndim != 1 or (rows.dtype.kind not in "biu" and len(rows)):
        raise TypeError(f"columns are indexed by an int, a slice, a list or array of row "
                        f"numbers, or a boolean mask, not {type(key).__name__}")
    if rows.dtype.kind == "b":
        if len(rows) != n:
            raise IndexError(f"boolean mask of {len(rows)} rows for a column of {n}")
        return np.flatnonzero(rows)
    rows = rows.astype(np.int64)
    bad = (rows < -n) | (rows >= n)
    if bad.any():
        raise IndexError(f"row {int(rows[bad][0])} out of range for {n} rows")
    return np.where(rows < 0, rows + n, rows)


def _len(x):
    return x.shape[0] if hasattr(x, "shape") else len(x)


def concat_reads(parts):
    """Reads of consecutive rows of one column (read()'s forms: arrays, Ragged, CSR) joined
    into one, as one read of all the rows would give (idv.dataset joins files with it)."""
    if isinstance(parts[0], vectors.Ragged):
        return vectors.Ragged.concat(parts)
    if hasattr(parts[0], "tocsr"):
        import scipy.sparse as sp
        return sp.vstack(parts, format="csr")
    return np.concatenate(parts)


class IdvFile:
    """An open .idv file. Use as a context manager, or call close().

    ``f.schema`` prints the columns; ``f["Label"]`` or ``f[0]`` gives a Column (with duplicate
    names, the last one, as ML.NET does); ``f.read(columns=[...])`` gives a dict of arrays.

    Attributes: ``columns`` (every Column, in file order), ``header`` (version, offsets, row
    and column counts), ``threads`` and ``backend`` (as given to idv.open).
    """

    def __init__(self, source, *, threads=None, backend=None, cache_bytes=cache.DEFAULT_BYTES,
                 memory_limit=None, checksums=True, filesystem=None, storage_options=None,
                 timeout=None):
        self._blocks = cache.BlockCache(cache_bytes)
        self._check_sums = bool(checksums)
        self._source = open_any(source, filesystem, storage_options, timeout)
        try:
            self.memory_limit = budget.limit_for(self._source.size, memory_limit)
        except BaseException:
            self.close()
            raise
        self._path = self._source.name   # put into every IdvFormatError from this file
        self.threads = threads or _threads.default_threads()
        self.backend = backend
        try:
            self._backend = compression.backend(backend)   # an unknown or missing one fails here
            self._open()
        except IdvFormatError as e:
            e.locate(path=self._path)
            self.close()
            raise
        except BaseException:
            self.close()
            raise

    def _open(self):
        src = self._source
        head = src.view(0, min(_header.HEADER_SIZE, src.size))
        self.header = h = _header.parse_header(head, src.size)
        _header.check_tail(src.view(h.tail_offset, 8), h.tail_offset)
        sums = self._sums = checksums.read(head, src.view, src.size, h.toc_offset) \
            if self._check_sums else None
        self._block_crcs = {}          # column index -> its blocks' expected CRC-32s
        # the table of contents, read once for its checksum and its columns
        toc = src.view(h.toc_offset, h.tail_offset - h.toc_offset) \
            if sums is not None or h.column_count else None
        if sums is not None:
            sums.check(h.toc_offset, toc, "the table of contents")
        entries = _toc.parse_toc(toc, h.toc_offset, h) if h.column_count else []
        self.columns = []
        for e in entries:
            codec, dead = None, None
            try:
                codec = _codecs.resolve(e.codec_name, e.codec_params)
            except UnsupportedCodecError as err:
                dead = err.reason
            except IdvFormatError as err:
                err.locate(column=e.name, column_index=e.index, offset=e.toc_offset)
                raise
            if e.compression not in _compression.NAMES:
                dead = (dead + "; " if dead else "") + f"unknown compression kind {e.compression}"
            if dead is not None:
                warnings.warn(f"cannot interpret column {e.index} {e.name!r}: {dead}", IdvWarning,
                              stacklevel=3)
            self.columns.append(Column(self, e, codec, dead))
        # every table read now, and no two parts of the file in the same bytes
        extra = [] if sums is None else [(sums.table_offset, sums.table_length,
                                          "the checksum table")]
        self._tables = layout.read_tables(src, h, entries, extra)
        if sums is not None:           # lookup tables, metadata: checked now, blocks when read
            parts = sums.tables[sums.tables["offset"] != h.toc_offset]   # the TOC: done above
            for e, data in zip(parts, src.read_ranges(parts["offset"], parts["length"])):
                o, n = int(e["offset"]), int(e["length"])
                sums.check(o, data, f"the part at byte {o} ({n} bytes: a lookup table or "
                                    f"metadata)")
        self._by_name = {c.name: c for c in self.columns}

    def buffer(self, nbytes, what):
        """A new uint8 array of `nbytes` for reads to decode into (Column.read_blocks' out=,
        in parts), on huge pages where large; a MemoryLimitError beyond the memory limit.
        `what`: what it is for, for that error."""
        self._need(nbytes, lambda: what)
        return _compression.empty(nbytes, np.uint8)

    def _need(self, nbytes, what):
        """MemoryLimitError, naming the file, when `what` (a function giving its description)
        needs more than the limit."""
        budget.check(nbytes, self.memory_limit,
                     lambda: f"{self._path}: {what()}" if self._path else what())

    def _expected_crcs(self, column):
        """The CRC-32 each block of `column` must have (idv.checksums.Checksums.expected),
        found once per column; None without checksums."""
        if self._sums is None:
            return None
        crcs = self._block_crcs.get(column.index)
        if crcs is None:
            lookup = column.lookup
            crcs = self._block_crcs[column.index] = self._sums.expected(lookup["offset"],
                                                                        lookup["disk"])
        return crcs

    def _check_block(self, offset, length, block):
        """IdvFormatError naming `block` when its stored bytes fail their recorded CRC-32."""
        if offset < 0 or length < 0 or offset > self._source.size - length:
            return
        try:
            self._sums.check(offset, self._source.view(offset, length), "the block")
        except IdvFormatError as e:
            raise e.locate(block=block) from None

    @property
    def has_checksums(self):
        """Whether the file carries idv's checksums (and they are being checked)."""
        return self._sums is not None

    def _block_bytes(self, offsets, disk):
        """The source buffer and the blocks' offsets within it (file objects and remote files:
        their blocks read in one batch). Checksums are checked in the decompression loop
        (Column._inflate_into)."""
        buf = self._source.buffer
        if buf is not None:
            return buf, offsets
        parts = self._source.read_ranges(offsets, disk)
        local = np.zeros(len(parts), np.int64)
        np.cumsum([len(p) for p in parts[:-1]], out=local[1:])
        return b"".join(parts), local

    # ---- description
    @property
    def num_rows(self):
        """The number of rows."""
        return self.header.row_count

    @property
    def num_columns(self):
        """The number of columns, hidden and unreadable ones included."""
        return len(self.columns)

    @property
    def version(self):
        """The format version that wrote the file, e.g. ``'1.1.1.6'``."""
        return self.header.version_string

    @property
    def column_names(self):
        """Every column's name, in file order (a name repeats for hidden columns)."""
        return [c.name for c in self.columns]

    @property
    def schema(self):
        """The columns' names, types and metadata types as a printable Schema."""
        return Schema([Field(c.index, c.name, c.type, c.codec_name, c.metadata_types,
                             self._by_name[c.name] is not c) for c in self.columns],
                      self.num_rows)

    def __getitem__(self, key):
        """``f["Label"]`` or ``f[0]``: a Column. ``f[a:b]``: those rows of every readable
        column, as ``f.read(rows=slice(a, b))`` (rows, as in pandas, not columns)."""
        if isinstance(key, str):
            try:
                return self._by_name[key]
            except KeyError:
                raise KeyError(f"no column {key!r}; columns: {self.column_names}") from None
        if isinstance(key, slice):
            return self.read(rows=key)
        if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
            n = len(self.columns)
            if not -n <= key < n:
                raise IndexError(f"column index {key} out of range: the file has {n} columns "
                                 f"(0 to {n - 1}); rows are selected with f[a:b] or "
                                 f"f.read(rows=...)")
            return self.columns[key]
        raise TypeError(f"an idv file is indexed by a column name or index, or by a slice of "
                        f"rows, not {type(key).__name__}")

    def __len__(self):
        """The number of rows (as len() of a pandas DataFrame)."""
        return self.num_rows

    def __contains__(self, name):
        return name in self._by_name

    def __iter__(self):
        return iter(self.column_names)

    def __repr__(self):
        return (f"<idv.IdvFile {self.num_rows} rows x {self.num_columns} columns, "
                f"version {self.version}>")

    def read(self, columns=None, sparse=False, rows=None, datetime="100ns", text="object"):
        """dict name -> array for the named (or indexed) columns; all readable ones by default.
        ``sparse=True`` gives CSR matrices for numeric, Boolean and key vector columns.
        ``rows`` selects rows as ``col[rows]`` does (a slice, row numbers or a boolean mask):
        only the blocks that hold them are decoded.

        ``datetime``: DateTime / TimeSpan (and DateTimeOffset's UTC) as ``"100ns"`` (default:
        ``datetime64[100ns]`` / ``timedelta64[100ns]``, .NET's ticks, exact), ``"auto"`` (per
        column ``[ns]`` when every value fits, else ``[us]``, flooring 100-ns ticks with an
        IdvWarning: the units pandas and ``.tolist()`` handle), ``"exact"`` (the same, refusing
        to floor), ``"ns"``, ``"us"`` (each refusing what it cannot hold) or ``"ticks"``
        (int64 .NET ticks).

        ``text``: Text values as ``"object"`` (default: arrays of Python ``str``) or
        ``"StringDType"`` (numpy >= 2's variable-width string dtype, built straight from the
        file's UTF-8 with no ``str`` objects for whole Text columns; vectors of Text and row
        selections are converted from ``str``)."""
        if text not in TEXT_FORMS:
            raise ValueError(f"text must be one of {', '.join(map(repr, TEXT_FORMS))}, not "
                             f"{text!r}")
        if text == "StringDType" and not hasattr(getattr(np, "dtypes", None), "StringDType"):
            raise ValueError(f"text='StringDType' needs numpy >= 2 (numpy {np.__version__} is "
                             f"installed)")
        if datetime not in ("100ns",) + ticks.TIME_MODES:
            raise ValueError(f"datetime must be one of "
                             f"{', '.join(map(repr, ('100ns',) + ticks.TIME_MODES))}, "
                             f"not {datetime!r}")
        if rows is not None and sparse:
            raise ValueError("read(rows=...) with sparse=True is not supported: read the rows "
                             "of one column with col[rows]")
        if columns is None:
            cols = [c for c in self.columns if c.readable and self._by_name[c.name] is c]
        else:
            if isinstance(columns, (str, int)):
                columns = [columns]
            cols = [self[c] for c in columns]
        out = {}
        with self.prefetch(cols) if rows is None else contextlib.nullcontext():
            for c in cols:
                self._read_column(c, out, sparse, rows, datetime, text)
        return out

    def _read_column(self, c, out, sparse, rows, datetime, text):
        """read()'s value of one column, into out[c.name]."""
        # CSR holds numeric, Boolean and key vectors; other columns keep read()'s form
        t = c.type
        csr = isinstance(t, T.Vector) and (isinstance(t.item, T.Key)
                                           or t.item.dtype.kind in "biuf")
        if text == "StringDType" and T.item_type(t) is T.Text:
            out[c.name] = c.read_strings(rows)
            return
        out[c.name] = c.read(sparse=sparse and csr) if rows is None else c[rows]
        if datetime != "100ns" and T.item_type(t) in ticks.TIME_ITEMS:
            out[c.name] = ticks.retimed(out[c.name], T.item_type(t), datetime,
                                        f"column {c.name!r}")

    def prefetch(self, columns=None):
        """A context in which the blocks of these columns (Column objects, names or indices;
        default: every readable one) are fetched up front, in a few large coalesced requests,
        and read from memory: for a remote file read whole (read() and to_arrow() use it);
        a local file is not touched ahead. A column whose lookup table is damaged is left
        out (its read reports it); blocks beyond the memory limit are not fetched ahead."""
        self._check_open()
        if columns is None:
            cols = [c for c in self.columns if c.readable]
        else:
            cols = [c if isinstance(c, Column) else self[c] for c in columns]
        offsets, sizes = [], []
        for c in cols:
            try:
                table = c.lookup if c.readable else None
            except IdvFormatError:
                table = None
            if table is not None and len(table):
                offsets.append(table["offset"].astype(np.int64))
                sizes.append(table["disk"].astype(np.int64))
        sizes = np.concatenate(sizes) if sizes else np.zeros(0, np.int64)
        if not len(sizes) or int(sizes.sum()) > self.memory_limit:
            return contextlib.nullcontext()     # beyond the limit: each read fetches its own
        return self._source.prefetch(np.concatenate(offsets), sizes)

    # ---- lifetime
    def close(self):
        """Release the file (its memory map or file object); arrays already read stay valid."""
        self._blocks.clear()
        if self._source is not None:
            self._source.close()
            self._source = None

    @property
    def closed(self):
        """True once close() has been called."""
        return self._source is None

    def _check_open(self):
        if self._source is None:
            raise ValueError("I/O operation on a closed idv file")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- the Python data stack (idv.pandas, idv.arrow; pandas / pyarrow imported on use)
    def to_pandas(self, columns=None, **kwargs):
        """A pandas.DataFrame of these columns (see idv.pandas.to_pandas for the options)."""
        from idv.pandas import to_pandas
        return to_pandas(self, columns, **kwargs)

    def to_arrow(self, columns=None, **kwargs):
        """A pyarrow.Table of these columns (see idv.arrow.to_arrow for the options)."""
        from idv.arrow import to_arrow
        return to_arrow(self, columns, **kwargs)

    def __arrow_c_stream__(self, requested_schema=None):
        """The Arrow PyCapsule stream of every readable column, block by block, so that
        ``pa.table(f)``, ``pl.DataFrame(f)`` and DuckDB read the file directly (times as
        ``datetime="auto"``; a requested schema is honoured as far as pyarrow casts)."""
        from idv.arrow import record_batch_reader
        return record_batch_reader(self).__arrow_c_stream__(requested_schema)

    def iter_batches(self, columns=None, *, batch_size=None, **kwargs):
        """pyarrow.RecordBatches: one per block of rows, or with ``batch_size`` that many rows
        each (the last: the rest), as pyarrow's ``ParquetFile.iter_batches``
        (idv.arrow.record_batch_reader)."""
        from idv.arrow import record_batch_reader
        return iter(record_batch_reader(self, columns, batch_size=batch_size, **kwargs))


def open(source, *, threads=None, backend=None,   # noqa: A001 - like io.open
         cache_bytes=cache.DEFAULT_BYTES, memory_limit=None, checksums=True,
         filesystem=None, storage_options=None, timeout=None) -> IdvFile:
    """Open an .idv: a path (memory-mapped), a bytes-like object, a seekable binary file, or a
    remote file: an fsspec URL (``s3://``, ``gs://``, ``az://``, ``https://``, ``memory://``,
    ``file://``...) or a path inside ``filesystem``.

    ``filesystem``: an fsspec filesystem (or a pyarrow.fs.FileSystem) that ``source`` is a path
    in. ``storage_options``: the options of the filesystem a URL makes (credentials, endpoint,
    ``client_kwargs``...), as in pandas and Dask. ``timeout``: the seconds each remote request
    may take before idv.RemoteTimeoutError (default 60, idv.remote.DEFAULT_TIMEOUT). A remote
    file is read by byte ranges: its header and tables at open, then only the blocks a read
    needs, in coalesced concurrent requests (docs/remote.md). Needs the ``remote`` extra.

    ``threads``: decoding threads (default: the CPUs available). ``backend``: the DEFLATE
    library, 'libdeflate', 'isal' or 'zlib' (default: the fastest installed,
    idv.compression.default_backend()). ``cache_bytes``: the decoded blocks that row access
    (``col[i]``, ``col[[i, j]]``, masks) keeps to find again (default 64 MiB; 0 keeps none).
    ``memory_limit``: the bytes one read may allocate before it is refused with
    idv.MemoryLimitError (default: idv.set_memory_limit's, else half the machine's memory but
    at most the larger of 1 GiB and 1,024 times the file's size; see idv.budget).
    ``checksums``: check the CRC-32s that files written by idv carry (idv.checksums): the
    tables when the file opens, each block when it is read, in the decompression threads (a
    few percent of a read: benchmarks/bench_checksums.py). A mismatch is an IdvFormatError
    naming the column and block. False skips them; files without checksums (ML.NET's) are read
    as they are. idv.verify always checks them.
    """
    return IdvFile(source, threads=threads, backend=backend, cache_bytes=cache_bytes,
                   memory_limit=memory_limit, checksums=checksums, filesystem=filesystem,
                   storage_options=storage_options, timeout=timeout)


def read(source, columns=None, sparse=False, rows=None, datetime="100ns", text="object",
         **kwargs):
    """Shortcut for ``idv.open(source, **kwargs).read(columns, sparse, rows, datetime, text)``."""
    with open(source, **kwargs) as f:
        return f.read(columns, sparse=sparse, rows=rows, datetime=datetime, text=text)
