"""The pipeline's encoding stage: each block's payload encoded and compressed, its CRC-32 and
statistics found, in the "write" threads (consecutive blocks in groups, a bounded number in
flight), and handed back in order to be written (idv._writer.pipeline.Writer).
"""
from __future__ import annotations

import collections
import dataclasses
import threading

from idv._resources import threads as _threads
from idv._storage import bounds, statistics as block_stats
from idv._storage.checksums import crc
from idv._writer.columns import MAX_INT32

_GROUP_BYTES = 256 << 10     # consecutive blocks handed to a thread together: about this much
_NOISE_BYTES = 16 << 20      # first blocks held at once for the noise rule's verdicts


@dataclasses.dataclass(eq=False)
class BlockEncoder:
    """Blocks encoded for a Writer: its compressor (``compress``, None for none), checksums
    (``sums``, None for none), per column statistics builders and domains (``stats``,
    ``domains``, None for none), in ``threads`` threads. A task is (column, its rows, None,
    (its batch's BatchStats, the block's place in it) or None), or (column, its rows, (stored
    bytes, raw length), None) for a block another file stores."""

    compress: object
    sums: object
    stats: list
    domains: list
    threads: int
    # per column: None until its first block is seen (_decide), then the compressor's
    # arguments for its blocks (the adaptive trial's and the noise rule's verdicts, () for a
    # compressor without them), and its first block's stream when the verdict made it
    how: list = dataclasses.field(init=False)
    first: list = dataclasses.field(init=False)

    def __post_init__(self):
        self.how = [None] * len(self.domains)
        self.first = [None] * len(self.domains)

    def encode(self, task):
        """(column index, stored bytes, raw length, CRC-32 or None, statistics or None) of
        one block."""
        col, chunk, copy, batch = task
        stats = None if batch is None else batch[0].get(batch[1])
        if copy is not None:       # stored as it is elsewhere: its checksum and statistics
            data, nraw = copy
            return (col.index, data, int(nraw), self._checksum(col, data),
                    self._block_stats(col, chunk))
        if stats is None and self.domains[col.index] == block_stats.TEXT:
            raw, stats = col.payload_with_statistics(chunk)
        else:
            raw = col.payload(chunk)
        nraw = memoryview(raw).nbytes
        first = self.first[col.index]
        if self.compress is None:
            data = raw
        elif first is not None and first[0] is chunk:
            data = first[1]
            self.first[col.index] = None
        else:
            data = self.compress(raw, *(self.how[col.index] or ()))
        ndisk = memoryview(data).nbytes
        if nraw > MAX_INT32 or ndisk > MAX_INT32:
            raise ValueError(f"column {col.name!r}: one block is {nraw} bytes, more than the "
                             f"int32 block lengths allow; write fewer rows_per_block")
        # its CRC-32 and statistics here, in the compression threads
        return (col.index, data, nraw, self._checksum(col, data),
                self._block_stats(col, chunk) if stats is None else stats)

    def _checksum(self, col, data):
        """The block's CRC-32, for the checksums and for its statistics (None: neither)."""
        return None if self.sums is None and self.stats[col.index] is None else crc(data)

    def batch_stats(self, col, values, end, rows):
        """The BatchStats of the blocks of `rows` rows of a column's `values` up to row `end`
        (the last block may be shorter); None: a column whose blocks encode finds one at a
        time."""
        if self.domains[col.index] is None or col.is_vector:
            return None
        return BatchStats(col.type, col.rows(values, 0, end), rows)

    def _block_stats(self, col, chunk):
        if self.domains[col.index] is None:
            return None
        if not col.is_vector:
            return bounds.item_block(col.type, chunk)
        implicit = chunk.counts is not None and bool(
            ((chunk.counts >= 0) & (chunk.counts < chunk.lengths)).any())
        return bounds.item_block(col.type, chunk.values, implicit)

    def run(self, tasks, put):
        """Encode and compress the blocks in the pool's threads, consecutive blocks in groups
        of about _GROUP_BYTES (one hand-off each, not one per block), a bounded number of
        groups in flight, and write them in order as they come back (`put`: a list of
        consecutive encoded blocks at a time, those of every group done so far). A block
        that needs no work (fixed-width items, no compression, checksums or statistics) is
        taken in this thread: with either, its CRC-32 and statistics are found in the
        threads while this one writes."""
        self._decide(tasks)
        threads = self.threads
        if threads <= 1 or len(tasks) <= 1:
            for t in tasks:
                put([self.encode(t)])
            return
        pool = _threads.pool("write", threads)
        window = threads * 4
        inflight = collections.deque()
        try:
            for here, group in self._groups(tasks):
                inflight.append(_Done(self._encode_blocks(group)) if here
                                else pool.submit(self._encode_blocks, group))
                if len(inflight) > window or inflight[0].done():
                    put(_done_groups(inflight))
            while inflight:
                put(_done_groups(inflight))
        except BaseException:
            for f in inflight:
                f.cancel()
            raise

    def _decide(self, tasks):
        """Each column's verdicts of the compressor's rules (idv._compression.Deflater),
        taken from the first block of it encoded here, in block order, so the file stays a
        function of the data: a column whose first block is tried and kept by libdeflate
        compresses its blocks without the adaptive trial (which adds 6-30 % to such a block's
        compression), and any other column tries each block; a column whose first block is
        not tried (many distinct byte values) is given to the noise rule (_noise)."""
        trial = getattr(self.compress, "trial", None)
        undecided = self.how.count(None)
        firsts, size = [], 0
        for col, chunk, copy, _ in tasks:
            if not undecided:
                break
            if copy is not None or self.how[col.index] is not None:
                continue
            undecided -= 1
            if trial is None:
                self.how[col.index] = ()
                continue
            raw = col.payload(chunk)
            verdict = trial(raw)
            self.how[col.index] = (verdict is not False, 0)
            if verdict is None:
                firsts.append((col.index, chunk, raw))
                size += memoryview(raw).nbytes
                if size >= _NOISE_BYTES:
                    self._noise(firsts)
                    firsts, size = [], 0
        self._noise(firsts)

    def _noise(self, firsts):
        """The noise rule's verdicts on first blocks ((column index, rows, payload)), in the
        threads: each block's stream, kept for its encode, and its column's limit."""
        if not firsts:
            return
        noise = self.compress.noise
        if self.threads > 1 and len(firsts) > 1:
            got = _threads.pool("write", self.threads).map(lambda f: noise(f[2]), firsts)
        else:
            got = (noise(f[2]) for f in firsts)
        for (i, chunk, _), (limit, data) in zip(firsts, got):
            self.how[i] = (True, limit)
            self.first[i] = (chunk, data)

    def _groups(self, tasks):
        """(in this thread?, consecutive tasks): groups of about _GROUP_BYTES of input for the
        threads; a block that needs no work (run) alone, for this thread."""
        group, size = [], 0
        for t in tasks:
            if self.compress is None and t[0].trivial and self.sums is None \
                    and self.stats[t[0].index] is None:
                if group:
                    yield False, group
                    group, size = [], 0
                yield True, [t]
                continue
            group.append(t)
            chunk = t[1]
            size += getattr(getattr(chunk, "values", chunk), "nbytes", _GROUP_BYTES)
            if size >= _GROUP_BYTES:
                yield False, group
                group, size = [], 0
        if group:
            yield False, group

    def _encode_blocks(self, group):
        return [self.encode(t) for t in group]


def _done_groups(inflight):
    """The blocks of the first group in flight (waited for) and of those after it that are
    done, taken off the queue."""
    blocks = inflight.popleft().result()
    while inflight and inflight[0].done():
        blocks += inflight.popleft().result()
    return blocks


class BatchStats:
    """The statistics of one column's blocks in a batch, found in one pass of C
    (idv._storage.bounds.item_blocks) by the first thread that asks for one of them, in
    the encoding threads rather than before them. ``get`` gives None, and encode finds that
    block's alone, when they cannot be found so or another thread is finding them."""

    __slots__ = ("type", "values", "rows", "found", "lock")

    def __init__(self, type_, values, rows):
        self.type, self.values, self.rows = type_, values, rows
        self.found = None
        self.lock = threading.Lock()

    def get(self, block):
        """The Block of the batch's `block`-th block, or None."""
        if self.found is None and self.lock.acquire(blocking=False):
            try:
                if self.found is None:
                    self.found = bounds.item_blocks(self.type, self.values, self.rows) or ()
                    self.values = None
            finally:
                self.lock.release()
        found = self.found
        return found[block] if found else None


class _Done:
    """A result computed in place, in the pipeline's queue of futures."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def done(self):
        return True

    def result(self):
        return self.value

    def cancel(self):
        return False
