"""The block pipeline: ``idv.Writer`` (batches in, blocks out).

Files come out laid out exactly as ML.NET's BinarySaver writes them with
``DeterministicBlockOrder``: a 256-byte header, the data blocks block-major and
column-interleaved (block 0 of every column, then block 1 ...), the lookup tables, each
column's metadata blocks followed by its metadata TOC, the column TOC, the tail signature. With
the zlib backend the bytes equal ML.NET's own output for the same data.

Input is converted and checked column by column (idv._writer.columns) before anything is
written. Output goes through idv._storage.sink: a temporary file beside the destination that is
renamed over it only when ``close()`` succeeds. """
from __future__ import annotations

import functools
import threading

import numpy as np

from idv import _docs, _header, _lookup, _toc, types as T
from idv._resources import threads as _threads
from idv._storage import statistics as block_stats
from idv._storage.checksums import BLOCK, POINTER_AT, POINTER_SIZE, Recorder
from idv.compression import NONE, compressor, kind as compression_kind
from idv.errors import warn
from idv._storage.sink import Output
from idv._values.arguments import ensure_count
from idv._writer.columns import MAX_INT32, Column
from idv._writer.encoding import BlockEncoder
from idv._writer.inputs import arrow_batch, check_dest, frame_rows, schema_pairs
from idv._writer.metadata import column_metadata, metadata_by_column, typed_value
from idv._writer.missing import ensure_missing_text

DEFAULT_MAX_ROWS_PER_BLOCK = 8192          # ML.NET's BinarySaver MaxRowsPerBlock
DEFAULT_MAX_BYTES_PER_BLOCK = 80 << 20     # ... and MaxBytesPerBlock (estimated, all columns)


def _one_at_a_time(method):
    """`method` run holding the writer's lock: the block being filled, the file's offset and
    the lookup tables are shared by its calls, which would otherwise interleave their rows
    and blocks."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)
    return run


@_docs.fill
class Writer:
    """Write an .idv in batches: ``write_batch`` any number of times, then ``close``.

    A path is written through a temporary file beside it, renamed over it by ``close()``; on
    any error (or ``abort()``) the temporary file is removed and an existing file is left as it
    was. A seekable binary file object is written in place from its current position.

    A writer may be shared by threads: each call's rows are kept together, in the order the
    calls take the lock.

    Parameters
    ----------
    dest : str, os.PathLike or binary file object
    schema : dict, list of (name, type) pairs or idv.Schema
        The columns in order: name -> type (``idv.Single``, ``idv.Vector(idv.Single, 10)``,
        ``idv.Key(idv.UInt32, count=5)``, or a numpy dtype), or an open file's ``schema``.
    metadata : dict, optional
        Per column a dict kind -> value (type inferred) or kind -> (type, value).
    {writer_options}
    """

    def __init__(self, dest, schema, *, metadata=None, compression="deflate", level=None,
                 rows_per_block=None, max_bytes_per_block=DEFAULT_MAX_BYTES_PER_BLOCK,
                 threads=None, backend=None, checksums=True, statistics=True,
                 missing_text=None):
        self._closed = True
        self._lock = threading.RLock()      # reentrant: a call that fails aborts the writer
        # CRC-32s of every part, in bytes ML.NET never reads (idv._storage.checksums); off:
        # ML.NET's own bytes, with backend="zlib"
        self._sums = Recorder() if checksums else None
        pairs = schema_pairs(schema)
        names = [n for n, _ in pairs]
        ensure_missing_text(missing_text)
        self._columns = [Column(i, n, t, missing_text) for i, (n, t) in enumerate(pairs)]
        # each block's statistics per column (None: a type without them, or statistics off)
        self._domains = [block_stats.domain_of(c.type) if statistics else None
                         for c in self._columns]
        self._stats = [None if d is None else block_stats.Builder(c.index, d)
                       for c, d in zip(self._columns, self._domains)]
        self._by_name = {c.name: c for c in self._columns}       # the last of each name
        # names used more than once (ML.NET's hidden columns): batches must then be given by
        # position, as a list of (name, values) pairs
        self._duplicates = sorted({n for n in names if names.count(n) > 1})
        self._kind = compression_kind(compression)
        self._compress = compressor(compression, level, backend)
        per_column = metadata_by_column(metadata, names)
        for c in self._columns:         # an Arrow dictionary given a key maps onto its labels
            labels = (per_column[c.index] or {}).get("KeyValues")
            if isinstance(c.type, T.Key) and labels is not None:
                c.key_values = typed_value(labels, f"column {c.name!r} metadata 'KeyValues'")
        self._metadata = [self._encode_metadata(
            column_metadata(c.name, per_column[c.index], c.type)) for c in self._columns]
        if rows_per_block is None:
            rows_per_block = DEFAULT_MAX_ROWS_PER_BLOCK
        self._max_rows = ensure_count(rows_per_block, "rows_per_block", most=MAX_INT32)
        self._max_bytes = ensure_count(max_bytes_per_block, "max_bytes_per_block", "bytes",
                                       none=True)
        self._rpb = self._max_rows if self._max_bytes is None else None
        self._threads = ensure_count(threads, "threads", "threads", none=True) or \
            _threads.default_threads()
        self._encoder = BlockEncoder(self._compress, self._sums, self._stats, self._domains,
                                     self._threads)
        check_dest(dest)
        self._out = Output(dest)
        self._pending = [[] for _ in self._columns]
        self._pending_rows = 0
        self._ended = False       # a short block copied: no rows may follow
        self._lookups = [([], [], []) for _ in self._columns]
        self._rows = 0
        self._failed = None       # the error that aborted the writer, as later calls name it
        self._closed = False

    def _encode_metadata(self, entries):
        """Compress each value and keep the smaller form; a tie stays uncompressed."""
        out = []
        for kind, codec_name, params, raw in entries:
            comp = raw if self._compress is None else self._compress(raw)
            if len(raw) <= len(comp):
                out.append((kind, codec_name, params, NONE, raw))
            else:
                out.append((kind, codec_name, params, self._kind, comp))
        return out

    # ---- description
    @property
    def columns(self):
        """The schema: a list of (name, type) pairs, in column order."""
        return [(c.name, c.type) for c in self._columns]

    @property
    def num_rows(self):
        """Rows accepted so far."""
        return self._rows

    @property
    def rows_per_block(self):
        """The block size, once decided (after rows_per_block rows, or at close)."""
        return self._rpb

    @property
    def closed(self):
        """True once the writer has been closed or aborted."""
        return self._closed

    # ---- writing
    @_one_at_a_time
    def write_batch(self, data=None, /, **columns):
        """Append rows. All of the batch is checked before any of it is kept: a batch refused
        for its values leaves the writer usable; an error in writing (a full disk) aborts it.

        Parameters
        ----------
        data : dict, list of (name, values), pyarrow.Table or RecordBatch, optional
            A dict name -> values with every column of the schema, or a list of (name,
            values) pairs, one per column in schema order (needed when several columns share
            a name). Values may be pyarrow Arrays or ChunkedArrays (Text and numbers are then
            taken from Arrow's buffers); a Table or RecordBatch is a batch of its columns by
            name. With no columns, a pandas DataFrame or pyarrow Table adds its rows.
        **columns
            The columns as keyword arguments, instead of `data`.
        """
        self._check_open()
        self._check_not_ended()
        if data is None:
            data = columns
        elif columns:
            raise TypeError("give the batch as one dict or as keyword arguments, not both")
        chunks, n = self._prepare(data)
        self._append(chunks, n)

    @_one_at_a_time
    def copy_blocks(self, blocks):
        """Append whole blocks that another file stores as this writer would store them (the
        same codec, codec parameters and compression): their bytes are copied, not encoded
        and compressed again. The writer needs a fixed block size (``max_bytes_per_block=None``)
        and the rows must start a block; an error aborts the writer. The caller vouches that
        the bytes hold those rows (idv.convert decodes them from those bytes).

        Parameters
        ----------
        blocks : iterable of (rows, stored)
            Per block: ``rows``, its rows as write_batch takes them (checked, and the block's
            statistics found from them: ``rows_per_block`` rows, fewer in a last block, which
            ends the file's rows); ``stored``, ``{column name: (its stored bytes, their
            decompressed length)}`` for the columns copied, the others encoded.
        """
        self._check_open()
        self._check_not_ended()
        if self._max_bytes is not None:
            raise ValueError("copy_blocks needs a fixed block size (max_bytes_per_block=None)")
        if self._pending_rows:
            raise ValueError(f"copy_blocks starts a block, but {self._pending_rows} rows of one "
                             f"are pending")
        try:
            tasks = []
            for data, stored in blocks:
                self._check_not_ended()
                chunks, n = self._prepare(data)
                if not 0 < n <= self._rpb:
                    raise ValueError(f"a block holds 1 to {self._rpb} rows, not {n}")
                copies = {}
                for name, copy in stored.items():
                    if name not in self._by_name or name in self._duplicates:
                        raise KeyError(f"copy_blocks: no single column named {name!r}")
                    copies[self._by_name[name].index] = copy
                tasks.extend((c, ch, copies.get(c.index), None)
                             for c, ch in zip(self._columns, chunks))
                self._rows += n
                self._ended = n < self._rpb
            self._write_blocks(tasks)
        except BaseException as e:
            self._abort_after(e)
            raise

    def _check_not_ended(self):
        if self._ended:
            raise ValueError("rows cannot follow a short block copied by copy_blocks")

    @_one_at_a_time
    def add_empty_rows(self, n):
        """Append rows to a writer whose schema has no columns. ML.NET's saver writes such
        files (a header with the row count, no columns; its public SaveAsBinary refuses them)
        and its loader reads them back as that many rows.

        Parameters
        ----------
        n : int
            The number of rows (>= 0).
        """
        self._check_open()
        if self._columns:
            raise ValueError(f"add_empty_rows is for a schema with no columns; this one has "
                             f"{len(self._columns)} (use write_batch)")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"add_empty_rows needs a row count >= 0, not {n!r}")
        if self._rows + int(n) >= 2**63:
            raise ValueError("the row count would exceed int64")
        self._append([], int(n))

    def _append(self, chunks, n):
        try:
            for c, ch in enumerate(chunks):
                self._pending[c].append(ch)
            self._pending_rows += n
            self._rows += n
            self._flush(final=False)
        except BaseException as e:
            self._abort_after(e)
            raise

    def _prepare(self, data):
        values = self._batch_values(data)
        if not self._columns:
            return [], frame_rows(data)
        chunks, sizes = [], []
        for c, v in zip(self._columns, values):
            chunk, n = c.prepare(v, self._rows)
            chunks.append(chunk)
            sizes.append(n)
        if len(set(sizes)) > 1:
            desc = ", ".join(f"{c.name!r}: {n}" for c, n in zip(self._columns, sizes))
            raise ValueError(f"columns have different numbers of rows ({desc})")
        return chunks, (sizes[0] if sizes else 0)

    def _batch_values(self, data):
        """Each column's values in schema order, from a dict or a list of (name, values)."""
        names = [c.name for c in self._columns]
        data = arrow_batch(data)
        if isinstance(data, (list, tuple)):
            if len(data) != len(names):
                raise ValueError(f"a batch given as a list needs one (name, values) pair per "
                                 f"column ({len(names)}), got {len(data)}")
            out = []
            for i, (p, name) in enumerate(zip(data, names)):
                if not (isinstance(p, (tuple, list)) and len(p) == 2 and isinstance(p[0], str)):
                    raise TypeError(f"batch entry {i} must be a (name, values) pair, not "
                                    f"{type(p).__name__}")
                if p[0] != name:
                    raise KeyError(f"batch entry {i} is named {p[0]!r}, but column {i} of the "
                                   f"schema is {name!r} (pairs go in schema order)")
                out.append(p[1])
            return out
        keys = list(data.keys()) if hasattr(data, "keys") else None
        if keys is None:
            raise TypeError(f"a batch is a dict column name -> values or a list of (name, "
                            f"values) pairs, not {type(data).__name__}")
        if self._duplicates:
            raise ValueError(f"the schema has several columns named {self._duplicates}: give the "
                             f"batch as a list of (name, values) pairs in schema order")
        if hasattr(data, "iloc") and not all(isinstance(k, str) for k in keys) and \
                len({str(k) for k in keys}) == len(keys):
            data = {str(k): data[k] for k in keys}      # named by str, as from_pandas names
            keys = list(data)
        missing = [n for n in names if n not in data]
        extra = [k for k in keys if k not in self._by_name]
        if missing or extra:
            raise KeyError(f"batch columns do not match the schema: missing {missing}, "
                           f"unknown {extra}")
        return [data[n] for n in names]

    def _decide_rows_per_block(self, merged):
        k = min(self._max_rows, self._pending_rows)
        if k == 0:
            return 1
        total = np.zeros(k, np.int64)
        for c, chunk in zip(self._columns, merged):
            total += c.estimate(chunk, k)
        over = np.flatnonzero(total > self._max_bytes)
        return max(1, int(over[0]) if len(over) else k)

    def _flush(self, final):
        cols = self._columns
        if not final and self._pending_rows < (self._max_rows if self._rpb is None
                                               else self._rpb):
            return     # not a whole block yet: keep the batches as they came
        if not cols or self._pending_rows == 0:
            if self._rpb is None:
                self._rpb = 1 if self._pending_rows == 0 else self._max_rows
            return
        merged = [c.concat(p) for c, p in zip(cols, self._pending)]
        self._pending = [[] for _ in cols]      # the batches live on in `merged` only
        if self._rpb is None:
            self._rpb = self._decide_rows_per_block(merged)
        rpb = self._rpb
        n = self._pending_rows
        nblocks = n // rpb + (1 if final and n % rpb else 0)
        if nblocks == 0:
            self._pending = [[m] for m in merged]
            return
        whole = min(nblocks * rpb, n)
        # each column's blocks' statistics, found in one pass where they can be
        found = [self._encoder.batch_stats(c, m, whole, rpb) for c, m in zip(cols, merged)]
        tasks = []
        for b in range(nblocks):
            a, z = b * rpb, min((b + 1) * rpb, n)
            for c, m, f in zip(cols, merged, found):
                tasks.append((c, c.rows(m, a, z), None, None if f is None else (f, b)))
        self._write_blocks(tasks)
        if whole < n:
            self._pending = [[c.copy(c.rows(m, whole, n))] for c, m in zip(cols, merged)]
        else:
            self._pending = [[] for _ in cols]
        self._pending_rows = n - whole

    def _write_blocks(self, tasks):
        """Encode and compress the blocks (tasks: (column, rows, None, its statistics' place
        in a BatchStats or None) or, for a block another file stores, (column, rows, (its
        bytes, its raw length), None)) in the threads and write them in order
        (idv._writer.encoding.BlockEncoder)."""
        self._encoder.run(tasks, self._put_blocks)

    def _put_blocks(self, blocks):
        """Write consecutive encoded blocks ([(column, data, raw length, CRC-32, statistics)])
        in one call, and note where each went."""
        out = self._out
        if not out.opened:
            out.open()
            out.write(bytes(_header.HEADER_SIZE))
        offset = out.write_all([b[1] for b in blocks])
        sums = self._sums
        for c, data, nraw, checksum, stats in blocks:
            n = memoryview(data).nbytes
            if sums is not None:
                sums.add_part(offset, n, checksum, BLOCK)
            if stats is not None:
                self._stats[c].add(stats, checksum)
            offs, disk, raw = self._lookups[c]
            offs.append(offset)
            disk.append(n)
            raw.append(nraw)
            offset += n

    @_one_at_a_time
    def close(self):
        """Write the remaining rows, the tables and the header; move the file into place."""
        if self._failed is not None:
            self._check_open()
        if self._closed:
            return
        try:
            self._flush(final=True)
            self._finish()
        except BaseException as e:
            self._abort_after(e)
            raise
        self._closed = True

    def _finish(self):
        out = self._out
        if not out.opened:
            out.open()
            out.write(bytes(_header.HEADER_SIZE))
        sums = self._sums

        def put(data):
            offset = out.write(data)
            if sums is not None:
                sums.add(offset, data)
            return offset
        lookup_offsets = [put(_lookup.pack_lookup(*lookup)) for lookup in self._lookups]
        meta_offsets = []
        for entries in self._metadata:
            if not entries:
                meta_offsets.append(0)
                continue
            toc = []
            for kind, codec_name, params, comp, data in entries:
                off = put(data)
                toc.append(_toc.MetadataEntry(kind, codec_name, params, comp, off, len(data)))
            meta_offsets.append(put(_toc.pack_metadata_toc(toc)))
        section = self._statistics()
        section_offset = None if section is None else put(section)
        rpb = self._rpb if self._rpb is not None else 1
        toc = b"".join(
            _toc.TocEntry(c.index, c.name, c.codec_name, c.codec_params, self._kind, rpb,
                          lookup_offsets[c.index], meta_offsets[c.index]).pack()
            for c in self._columns)
        table = None
        if sums is not None:      # the checksum table, then the TOC it covers
            table_offset = out.size
            sums.add(table_offset + sums.table_size(extra=1), toc)
            table = sums.table()
            out.write(table)
        toc_offset = out.write(toc)
        tail = out.write(_header.pack_tail())
        head = _header.Header(_header.WRITER_VERSION, _header.WRITER_VERSION, toc_offset, tail,
                              self._rows, len(self._columns)).pack()
        if table is not None:
            at = POINTER_AT
            head = head[:at] + Recorder.pointer(head[:at], table_offset, table) + \
                head[at + POINTER_SIZE:]
        if section is not None:
            at = block_stats.POINTER_AT
            head = head[:at] + block_stats.pointer(head[:52], section_offset, section) + \
                head[at + block_stats.POINTER_SIZE:]
        out.write_at(0, head)
        out.commit()

    def _statistics(self):
        """The statistics section (idv._storage.statistics; None when no column has any)."""
        cols = [s.build() for s in self._stats if s is not None]
        if not cols or not cols[0].num_blocks:
            return None
        fp = block_stats.fingerprint(np.concatenate([lk[0] for lk in self._lookups]),
                                    np.concatenate([lk[1] for lk in self._lookups]))
        return block_stats.pack(cols, cols[0].num_blocks, fp)

    @_one_at_a_time
    def abort(self):
        """Stop without writing: remove the temporary file (dest is left as it was)."""
        if self._closed:
            return
        self._closed = True
        self._pending = [[] for _ in self._columns]
        self._out.abort()

    def _abort_after(self, error):
        """abort(), after an error that a later call names (not the error itself: its
        traceback would keep the batch alive)."""
        text = str(error)
        self._failed = f"{type(error).__name__}: {text}" if text else type(error).__name__
        self.abort()

    def _check_open(self):
        if self._failed is not None:
            raise ValueError(f"the idv.Writer was aborted by an earlier error ({self._failed}); "
                             f"what it had written was discarded")
        if self._closed:
            raise ValueError("I/O operation on a closed idv.Writer")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self):
        if not getattr(self, "_closed", True):
            dest = self._out.path or "a file object"
            warn(f"idv.Writer for {dest} was never closed: its {self._rows} rows were "
                 f"discarded (use it as a context manager, or call close())")
            self.abort()

    def __repr__(self):
        state = "closed" if self._closed else f"{self._rows} rows so far"
        return f"<idv.Writer {len(self._columns)} columns, {state}>"
