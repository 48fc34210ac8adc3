"""The block store: the blocks of one open file, fetched, checked, inflated and decoded.

A column's rows are stored in blocks of ``rows_per_block`` rows, each compressed on its own and
located through the column's lookup table. The store reads a run of blocks from the file's
source (straight from a memory map or buffer; file objects and remote files in one batch of
range requests), checks each block's CRC-32 in the decompression loop, and decompresses and
decodes runs of blocks in the "read" thread pool (the DEFLATE libraries and the decoders
release the GIL). It refuses, before allocating, what would pass the file's memory limit, and
keeps the decoded blocks that row access finds again.

The store knows columns only as ColumnBlocks (a codec, a compression kind, rows per block and
a lookup table), so that any reader of several columns can decode their blocks through it.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from idv import _codecs, _compression
from idv._resources import budget, work as _work
from idv._values import vectors
from idv._store.block_checks import BlockChecks, entry_point
from idv._store.block_runs import (bit_rooms, block_groups, check_dense, chunks, fix_error,
                                   fixed_width, out_shape, root_bytes, text_rooms, unpack_bits)
from idv.errors import IdvFormatError
from idv._storage.source import closed_error
from idv._store.stored_blocks import StoredBlocks

# Blocks decompressed together by one decode_each task before they are decoded.
_GROUP_BYTES = 1 << 20
# The least output (bytes) a parallel chunk of inflate is given.
SPAN_BYTES = 128 << 10


class ColumnBlocks(NamedTuple):
    """One column's blocks as the store decodes them (Column.blocks builds it once).

    ``lookup``: the column's whole lookup table (offset, disk, raw per block); ``codec``,
    ``compression`` (the kind), ``rows_per_block`` and ``num_rows``: how the blocks decode;
    ``index``: the key of the column's cached blocks and CRC-32s, and with ``name`` what
    messages call the column; ``counted(n)``: told the number of blocks each decode covers,
    once the memory limit allows it (Column.blocks_decoded).
    """

    index: int
    name: str
    codec: object
    compression: int
    rows_per_block: int
    num_rows: int
    lookup: np.ndarray
    counted: Callable[[int], None]

    def rows(self, b0, b1):
        """(first row, stop row) of blocks [b0, b1), b0 < b1."""
        return b0 * self.rows_per_block, min(b1 * self.rows_per_block, self.num_rows)

    def reading(self, b0, b1, what=""):
        """What a read of blocks [b0, b1) is, for a memory limit's message."""
        r0, r1 = self.rows(b0, b1)
        return f"reading column {self.index} {self.name!r} rows {r0}-{r1 - 1}{what}"


class BlockStore(BlockChecks, StoredBlocks):
    """The blocks of one open file: where they are read from (the file's source, which
    ``path`` names in errors), the memory limit of what reads allocate (``memory_limit``),
    the decoded blocks kept for row access (``cache``, an idv._resources.cache.BlockCache), the
    checksums blocks are checked against (``sums``, None without; ``crcs``: each block's, a row a
    column, when found as the file opened), the DEFLATE library (``backend``) and the decoding
    threads (``threads``).

    The decoding entry points take a ColumnBlocks and a run of its blocks: ``decode`` (the
    rows in Column.read()'s form, or into an ``out=`` array), ``decode_text`` (text in Arrow's
    layout), ``decode_each`` (each block handed to a function) and ``inflate`` (decompressed
    into a buffer). Each decodes in the "read" pool unless ``parallel`` is False (a caller
    that runs them in threads of its own). A damaged block raises IdvFormatError naming its
    ``block``, ``offset``, column and ``path``. ``inflate_fixed`` takes pieces of many
    columns of fixed-width scalars at once (a scan's window), in one inflate call. The CRC-32
    checks are BlockChecks' (idv._store.block_checks); blocks as stored, and views of a memory map,
    StoredBlocks' (idv._store.stored_blocks).
    """

    def __init__(self, source, *, path, threads, backend, memory_limit, cache, sums=None,
                 crcs=None, checking=True):
        self._source = source
        self.path = path
        self.threads = threads
        self.backend = backend
        self.memory_limit = memory_limit
        self.cache = cache
        self.sums = sums
        self.checking = checking    # idv.open's checksums=: False reads bytes unchecked
        self._crcs = {}          # column index -> its blocks' expected CRC-32s
        self._opened_crcs = crcs     # all of them, a row a column, when found at open
        self._mappable = {}      # column index -> whether its blocks are mappable

    # ---- the source
    def check_open(self):
        """The file's source, for a read to take once; ValueError once the file is closed."""
        if (src := self._source) is None:       # by a close racing the read, too
            raise closed_error()
        return src

    def close(self):
        """Forget the source (the file closes it) and the cached blocks."""
        self.cache.clear()
        self._source = None

    def check_intact(self):
        """IdvFormatError when a mapped file was truncated or written in place since it was
        opened (idv._storage.source.MemorySource.check_intact): the scan asks before it hands out
        each batch, whose arrays may view the map."""
        if (src := self._source) is not None:
            src.check_intact()

    @property
    def in_memory(self):
        """Whether the file is all in memory (block_bytes gives views of it, fetching none)."""
        return getattr(self._source, "buffer", None) is not None

    def view(self, offset, length):
        """The file's bytes [offset, offset + length) (tables and metadata values too)."""
        return self.check_open().view(offset, length)

    def block_bytes(self, offsets, disk):
        """The source buffer and the blocks' offsets within it (file objects and remote files:
        their blocks read in one batch); their checksums are checked as they inflate."""
        buf = (src := self.check_open()).buffer
        if buf is not None:
            src.check_intact()       # a memory map past a file's end: SIGBUS
            return buf, offsets
        parts = src.read_ranges(offsets, disk)
        local = np.zeros(len(parts), np.int64)
        np.cumsum([len(p) for p in parts[:-1]], out=local[1:])
        return b"".join(parts), local

    # ---- the memory limit
    def need(self, nbytes, what):
        """MemoryLimitError, naming the file, when `what` (a function giving its description)
        needs more than the limit."""
        budget.check(nbytes, self.memory_limit, lambda: self._where(what()))

    def _where(self, what):
        """`what` prefixed by the file's path, for a memory limit's message."""
        return f"{self.path}: {what}" if self.path else what

    def buffer(self, nbytes, what):
        """A new uint8 array of `nbytes` for reads to decode into (decode's out=, in parts),
        on huge pages where large; a MemoryLimitError beyond the memory limit. `what`: what it
        is for, for that error."""
        self.need(nbytes, lambda: what)
        return _compression.empty(nbytes, np.uint8)

    # ---- decoding
    @entry_point
    def decode(self, blocks, b0, b1, sparse=False, parallel=True, out=None):
        """The rows of blocks [b0, b1) (b0 < b1) in Column.read()'s form: an array, or for
        vectors a dense array, a Ragged, or with ``sparse`` a CSR matrix. ``out``: for
        scalars and dense fixed-size vectors, an array of the rows' shape (out_shape) and the
        codec's dtype to decode into."""
        codec = blocks.codec
        is_vector = isinstance(codec, _codecs.VBufferCodec)
        fixed = fixed_width(codec)
        table = blocks.lookup[b0:b1]
        r0, r1 = blocks.rows(b0, b1)

        def rows():
            return blocks.reading(b0, b1)
        if fixed:
            self.need((r1 - r0) * codec.itemsize, rows)
        elif not is_vector:          # text, Boolean: the output, and the largest block
            self.need(budget.items_bytes(codec.dtype, r1 - r0, int(table["raw"].sum()))
                      + int(table["raw"].max()), rows)
        else:                        # the blocks' items, held until assembled (counted by
            self.need(int(table["raw"].sum(dtype=np.int64)), rows)     # _decode_vectors)
        blocks.counted(b1 - b0)
        if out is not None:
            shape = out_shape(codec, r1 - r0, sparse)
            if shape is None or out.dtype != codec.dtype or out.shape != shape \
                    or not out.flags.c_contiguous:
                raise ValueError(f"out= takes {r1 - r0} rows of contiguous {codec.dtype} items "
                                 f"of a column of scalars or fixed-size vectors; column "
                                 f"{blocks.index} {blocks.name!r} is {codec.type}")
        if fixed:
            return self._decode_fixed(blocks, b0, b1, table, out, parallel)
        if is_vector:
            return self._decode_vectors(blocks, b0, b1, table, sparse, parallel, rows, out)
        if out is None:
            out = _compression.empty(r1 - r0, codec.dtype)
        rpb = blocks.rows_per_block
        if isinstance(codec, _codecs.BooleanCodec):     # their bits inflated in one call
            room = bit_rooms(rpb, blocks.num_rows, b0, b1)
            bits = self._inflate_bits(blocks, b0, room, self.buffer(
                int(room.sum()), blocks.reading(b0, b1, " (bits)")), parallel)
            return unpack_bits(bits, room, rpb, out)

        def into(i, b, buf, n):
            s = b * rpb - r0
            _codecs.check_end(codec.load_name, codec.decode_into(buf, 0, n, out[s:s + n]),
                              len(buf), n)
        self._decode_each(blocks, b0, table, into, parallel=parallel)
        return out

    def _decode_fixed(self, blocks, b0, b1, table, out, parallel):
        """Fixed-width scalars: the blocks inflated straight into the output, then fixed up
        in place (codec.fix)."""
        codec = blocks.codec
        r0, r1 = blocks.rows(b0, b1)
        if out is None:
            out = _compression.empty(r1 - r0, codec.dtype)
        self._inflate(blocks, b0, table, out.view(np.uint8).reshape(-1),
                      (np.arange(b0, b1, dtype=np.int64) * blocks.rows_per_block - r0)
                      * codec.itemsize, parallel)
        try:
            codec.fix(out)
        except IdvFormatError as e:
            raise fix_error(blocks, e, np.arange(b0, b1), out) from None
        return out

    @entry_point
    def stored_vectors(self, blocks, b0, b1, parallel=True):
        """Blocks [b0, b1) (b0 < b1) of a vector column decoded, not assembled: a VectorBlock
        each, sparse rows as stored, checked as a dense read checks them (idv.verify's form)."""
        table, rows = blocks.lookup[b0:b1], lambda: blocks.reading(b0, b1)
        self.need(int(table["raw"].sum(dtype=np.int64)), rows)
        blocks.counted(b1 - b0)
        return self._vector_blocks(blocks, b0, b1, table, False, parallel, rows)[0]

    def _decode_vectors(self, blocks, b0, b1, table, sparse, parallel, rows, out=None):
        """Vectors: each block decoded on its own, then assembled (into `out`, if given)."""
        results, pool, what = self._vector_blocks(blocks, b0, b1, table, sparse, parallel, rows)
        if out is None:     # else the caller counted `out`
            pool.take(vectors.assembled_bytes(results, blocks.codec.type, sparse), what)
        return vectors.assemble(results, blocks.codec.type, sparse, out)

    def _vector_blocks(self, blocks, b0, b1, table, sparse, parallel, rows):
        """(each block decoded on its own, the memory limit's Pool their items are counted in
        before they are allocated, what a refusal names); unless `sparse`, check_dense'd."""
        codec = blocks.codec
        results = [None] * (b1 - b0)
        pool = budget.Pool(self.memory_limit)

        def what():
            return f"{self._where(rows())} ({codec.type}{', sparse' * sparse})"

        def one(i, b, buf, n):
            results[i] = codec.decode(buf, n, reserve=lambda items: pool.take(
                budget.items_bytes(codec.dtype, items, len(buf)), what))
        self._decode_each(blocks, b0, table, one, parallel=parallel)
        if not sparse:
            # a single block's error names it; for several the reason names the range
            one = b1 - b0 == 1
            check_dense(results, codec.type, int(table["disk"].sum(dtype=np.int64)),
                        "" if one else f" of blocks {b0}-{b1 - 1}",
                        ", or read the column with sparse=True",
                        block=b0 if one else None, offset=int(table["offset"][0]) if one else None)
        return results, pool, what

    @entry_point
    def decode_text(self, blocks, b0, b1, parallel=True, out=None):
        """Blocks [b0, b1) (b0 < b1) of a Text or vector-of-Text column in Arrow's string
        layout (Column.read_text_blocks): per block a TextSpans or a VectorBlock, views into
        one buffer the blocks are decompressed into (text_rooms) and converted in place.
        ``out``: a uint8 array of that many bytes to use instead of a new one."""
        table = blocks.lookup[b0:b1]
        room = text_rooms(table)
        starts = np.zeros(b1 - b0, np.int64)
        np.cumsum(room[:-1], out=starts[1:])
        self.need(int(room.sum()), lambda: blocks.reading(b0, b1, " (text)"))
        blocks.counted(b1 - b0)
        if out is None:
            out = _compression.empty(int(room.sum()), np.uint8)
        elif not (out.dtype == np.uint8 and out.shape == (int(room.sum()),)
                  and out.flags.c_contiguous):
            raise ValueError(f"out= takes {int(room.sum())} contiguous bytes (text_room)")
        codec = blocks.codec
        spans = [None] * (b1 - b0)

        def into(i, b, buf, n):
            spans[i] = _codecs.arrow_text_block(codec, buf, n)
        self._decode_each(blocks, b0, table, into, (out, starts), parallel)
        return spans

    @entry_point
    def decode_bits(self, blocks, b0, b1, parallel=True, out=None):
        """Blocks [b0, b1) (b0 < b1) of a column of Boolean scalars as they hold their values,
        a bit a row, least significant first (Arrow's layout): the blocks' bytes end to end
        (bit_rooms), inflated into one uint8 array (``out``, of that many bytes, if given)."""
        room = bit_rooms(blocks.rows_per_block, blocks.num_rows, b0, b1)
        total = int(room.sum())
        self.need(total, lambda: blocks.reading(b0, b1, " (bits)"))
        blocks.counted(b1 - b0)
        if out is None:
            out = _compression.empty(total, np.uint8)
        elif not (out.dtype == np.uint8 and out.shape == (total,) and out.flags.c_contiguous):
            raise ValueError(f"out= takes {total} contiguous bytes (bit_rooms)")
        return self._inflate_bits(blocks, b0, room, out, parallel)

    def _inflate_bits(self, blocks, b0, room, out, parallel):
        """decode_bits of the blocks from b0 whose bytes are `room` (bit_rooms) into `out`,
        their sizes checked first (their rows' bits exactly: the codec's rule,
        _codecs.check_end)."""
        table = blocks.lookup[b0:b0 + len(room)]
        for i in np.flatnonzero(table["raw"] != room).tolist():
            a, z = blocks.rows(b0 + i, b0 + i + 1)
            try:
                _codecs.check_end(blocks.codec.load_name, int(room[i]), int(table["raw"][i]), z - a)
            except IdvFormatError as e:
                raise e.locate(block=b0 + i, offset=int(table["offset"][i])) from None
        starts = np.zeros(len(room), np.int64)
        np.cumsum(room[:-1], out=starts[1:])
        self._inflate(blocks, b0, table, out, starts, parallel)
        return out

    @entry_point
    def inflate(self, blocks, b0, table, dst, dst_offsets, parallel=True):
        """Decompress the blocks of `table` (blocks.lookup[b0:b0 + len(table)]) into `dst`
        (a uint8 array), each at its offset in `dst_offsets`, checking their CRC-32s."""
        self._inflate(blocks, b0, table, dst, dst_offsets, parallel)

    @entry_point
    def decode_each(self, blocks, b0, table, consume, keep=None, parallel=True):
        """Decompress each block of `table` (blocks.lookup[b0:b0 + len(table)]), then hand
        it to consume(i, block, buffer, rows), i counted from b0 (_decode_each)."""
        self._decode_each(blocks, b0, table, consume, keep, parallel)

    def _inflate(self, blocks, b0, table, dst, dst_offsets, parallel=True):
        """inflate, in parallel chunks unless `parallel` is False (the caller already runs in a
        worker of the pool)."""
        crcs = self.expected_crcs(blocks)
        self._inflate_scattered(blocks.compression, table, dst, dst_offsets,
                                None if crcs is None else crcs[b0:b0 + len(table)],
                                lambda i: (blocks, b0 + i), parallel)

    def _inflate_scattered(self, kind, table, dst, dst_offsets, crcs, which, parallel=True,
                           dst_of=None, need=None):
        """Decompress the blocks of `table` (lookup rows of any blocks of any columns, all of
        compression `kind`) into `dst` at `dst_offsets`, checking their CRC-32s (`crcs`, or
        None), with one inflate call per parallel chunk. `which(i)`: (ColumnBlocks, block
        number) of row i, for the error of a damaged block. With `dst_of` (a native
        library's), `dst` is a list of buffers, row i going into dst[dst_of[i]]; `need`: as
        inflate_blocks'."""
        backend = self.backend
        offsets = np.ascontiguousarray(table["offset"])
        disk = np.ascontiguousarray(table["disk"])
        raw = np.ascontiguousarray(table["raw"])
        dst_offsets = np.ascontiguousarray(dst_offsets, dtype=np.int64)

        def run(span):
            a, b = span
            src, offs = self.block_bytes(offsets[a:b], disk[a:b])
            return a, backend.decompress_blocks(kind, src, offs, disk[a:b], raw[a:b], dst,
                                                dst_offsets[a:b],
                                                None if crcs is None else crcs[a:b],
                                                None if dst_of is None else dst_of[a:b],
                                                None if need is None else need[a:b])
        total = int(raw.sum(dtype=np.int64))
        # up to 4 chunks per thread (for balance), each worth dispatching to a thread
        parts = min(self.threads * 4, total // SPAN_BYTES) if parallel else 1
        spans = chunks(len(table), parts)
        if len(spans) > 1 and self.threads > 1:
            results = _work.map_all("read", self.threads, run, spans)
        else:
            results = [run(s) for s in spans]
        for a, (i, message) in results:
            if i >= 0:
                blocks, block = which(a + i)
                offset = int(offsets[a + i])
                try:
                    if self.sums is not None:     # damaged bytes: say so, with both CRC-32s
                        self.check_block(offset, int(disk[a + i]), block)
                    raise IdvFormatError(message, block=block, offset=offset)
                except IdvFormatError as e:
                    raise e.locate(column=blocks.name, column_index=blocks.index,
                                   path=self.path) from None

    def inflate_fixed(self, pieces, parallel=True):
        """Pieces of many columns of fixed-width scalars (a scan's window: (ColumnBlocks, b0,
        b1, out), `out` of the rows' shape and the codec's dtype), each a run of blocks
        inflated straight into its array and fixed up (codec.fix), as decode(blocks, b0, b1,
        out=out) does, with one inflate call per compression kind (inflate_listed)."""
        self.inflate_listed([(blocks, np.arange(b0, b1, dtype=np.int64), out)
                             for blocks, b0, b1, out in pieces], parallel)

    def inflate_listed(self, pieces, parallel=True, wanted=None):
        """inflate_fixed for any blocks: `pieces` are (ColumnBlocks, its block numbers (an
        ascending int64 array, not necessarily consecutive), out), `out` holding the rows of
        those blocks end to end (what take gathers its rows from). All the pieces' blocks of
        one compression kind are inflated in one call, in parallel chunks unless `parallel`
        is False, each into its own array (with a native library, of a file in memory; else
        one call per destination buffer): no Python runs per block. `wanted`: the rows wanted
        from each listed block's start (the same blocks in every piece; others may be zero)."""
        self.check_open()
        groups = {}
        # a native library inflates into many buffers (the columns' arrays) in one call; the
        # blocks of a file not in memory are fetched buffer by buffer, each within the limit
        together = self.backend.native is not None and self.in_memory
        for piece in pieces:
            blocks, hit, out = piece
            self.need(len(out) * blocks.codec.itemsize,
                      lambda: blocks.reading(int(hit[0]), int(hit[-1]) + 1))
            blocks.counted(len(hit))
            root, at = root_bytes(out)
            address = root.__array_interface__["data"][0]
            roots, members = groups.setdefault(
                (blocks.compression, None if together else address), ({}, []))
            members.append((piece, roots.setdefault(address, (len(roots), root))[0], at))
        for (kind, _), (roots, members) in groups.items():
            self._inflate_group(kind, [root for _, root in roots.values()], members, parallel,
                                wanted)
        for blocks, hit, out in pieces:
            try:
                blocks.codec.fix(out)
            except IdvFormatError as e:
                raise fix_error(blocks, e, hit, out).locate(
                    column=blocks.name, column_index=blocks.index, path=self.path) from None

    def _inflate_group(self, kind, roots, members, parallel, wanted):
        """inflate_listed's pieces (`members`: (piece, its destination's index in `roots`,
        its byte offset there)) of compression `kind`, in one _inflate_scattered."""
        tables, dst_offsets, crcs, need = [], [], [], []
        starts = np.zeros(len(members) + 1, np.int64)
        for k, ((blocks, hit, _out), _root, at) in enumerate(members):
            h0, n = int(hit[0]), len(hit)
            # a run of blocks (a scan's piece): slices, not fancy indexing
            picked = slice(h0, h0 + n) if int(hit[-1]) == h0 + n - 1 else hit
            tables.append(blocks.lookup[picked])
            step = blocks.rows_per_block * blocks.codec.itemsize
            dst_offsets.append(at + np.arange(n, dtype=np.int64) * step)
            expected = self.expected_crcs(blocks)
            if expected is not None:
                crcs.append(expected[picked])
            if wanted is not None and self.sums is not None:   # only checksummed blocks stop
                need.append(wanted * blocks.codec.itemsize)
            starts[k + 1] = starts[k] + n
        dst_of = None
        if len(roots) > 1:
            dst_of = np.repeat(np.array([root for _, root, _ in members], np.int32),
                               np.diff(starts))

        def which(i):
            k = int(np.searchsorted(starts, i, side="right")) - 1
            blocks, hit = members[k][0][:2]
            return blocks, int(hit[i - int(starts[k])])
        # joined as bytes: numpy joins structured arrays through Python code, per array
        joined = np.concatenate([np.ascontiguousarray(t).view(np.uint8) for t in tables])
        self._inflate_scattered(kind, joined.view(tables[0].dtype),
                                roots if dst_of is not None else roots[0],
                                np.concatenate(dst_offsets),
                                np.concatenate(crcs) if self.sums is not None else None,
                                which, parallel, dst_of,
                                np.concatenate(need) if need else None)

    def _decode_each(self, blocks, b0, table, consume, keep=None, parallel=True):
        """Decompress each block then hand it to consume(i, block, buffer, rows).

        Each task decompresses a few blocks at a time (_GROUP_BYTES, or one larger block) into
        a buffer it reuses and decodes them while they are still in cache, so besides the
        output only about one group per thread is held in memory. With `keep` (an array and
        each block's start in it), the blocks are decompressed there instead, to be kept.
        `parallel` False: all in the calling thread.
        """
        raw = table["raw"].astype(np.int64)
        offsets = table["offset"]
        rpb, num_rows = blocks.rows_per_block, blocks.num_rows

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
                self._inflate(blocks, b0 + g0, table[g0:g1], buf, starts, parallel=False)
                for i in range(g0, g1):
                    blk = b0 + i
                    lo = int(starts[i - g0])
                    try:
                        consume(i, blk, mv[lo:lo + int(raw[i])],
                                min(rpb, num_rows - blk * rpb))
                    except IdvFormatError as e:
                        e.locate(block=blk, offset=int(offsets[i]))
                        raise
        spans = chunks(len(table), self.threads * 4 if parallel else 1)
        if len(spans) > 1 and self.threads > 1:
            _work.map_all("read", self.threads, run, spans)
        else:
            for s in spans:
                run(s)

