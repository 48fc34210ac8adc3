"""A scan's windows: which blocks of a file a scan decodes (the rows asked for, less the blocks
a filter skips), cut into windows of about a window's bytes, and each window's blocks decoded
ahead in the file's threads, a piece of a column per task (idv._scan.scan walks them).

A scan continued in a process forked after it began (a DataLoader or fork-pool worker that
was handed the generator) cannot wait on its windows' tasks: they belong to the parent's
threads, which did not come along. The child decodes those windows again itself.
"""
from __future__ import annotations

import collections
import math
import os
from concurrent.futures import Future

import numpy as np

from idv._resources import threads as _threads, work as _work
from idv._store.block_runs import block_groups
from idv.errors import IdvFormatError

# decompressed bytes of a window decoded in the calling thread, not handed to the threads: a
# hand-off and its wake-up take longer than inflating this much (a small file's whole window)
INLINE_BYTES = 256 << 10
# the smallest piece of a scan's last window, whose pieces get smaller toward its end
# (tapered) so that the threads finish it together, when it holds two pieces a thread or more
# (a smaller window's extra hand-offs cost more than they save)
TAPER_BYTES = 256 << 10


def local_rows(rows, seg):
    """The rows of `rows` (a range with a positive step over the source's rows) in segment
    `seg`, as a range over its own rows (empty when none)."""
    lo = max(rows.start, seg.row0)
    lo += (rows.start - lo) % rows.step
    hi = min(rows.stop, seg.row0 + seg.num_rows)
    return range(lo - seg.row0, max(lo, hi) - seg.row0, rows.step)


def needed_blocks(num_rows, rows_per_block, rows=None, keep=None):
    """The blocks (an int64 array, ascending) that hold `rows` (a range with a positive step;
    None: all rows) of a file, less those `keep` (a boolean mask over its blocks, or None)
    rules out: the one place where a scan skips blocks."""
    if num_rows == 0:
        return np.zeros(0, np.int64)
    nb = (num_rows - 1) // rows_per_block + 1
    if rows is None:
        blocks = np.arange(nb, dtype=np.int64)
    elif len(rows) == 0:
        blocks = np.zeros(0, np.int64)
    elif rows.step <= rows_per_block:
        blocks = np.arange(rows.start // rows_per_block, rows[-1] // rows_per_block + 1,
                           dtype=np.int64)
    else:
        blocks = np.unique(np.arange(rows.start, rows.stop, rows.step, dtype=np.int64)
                           // rows_per_block)
    if keep is not None:
        keep = np.asarray(keep, bool)
        if keep.shape != (nb,):
            raise ValueError(f"a block filter gives one bool per block ({nb}), not "
                             f"{keep.shape}")
        blocks = blocks[keep[blocks]]
    return blocks


def window_spans(blocks, block_bytes, limit, group=1):
    """Runs of consecutive `blocks` cut into windows of about `limit` decompressed bytes
    (`block_bytes`: each block's bytes over the columns read), at least one block each and
    cut only where a group of `group` blocks (b // group) begins: [(b0, b1)]."""
    out = []
    start = prev = None
    size = 0
    for b in blocks.tolist():
        n = int(block_bytes[b])
        if start is not None and (b != prev + 1 or (b % group == 0 and size + n > limit)):
            out.append((start, prev + 1))
            start, size = None, 0
        if start is None:
            start = b
        size += n
        prev = b
    if start is not None:
        out.append((start, prev + 1))
    return out


def window_groups(spans, block_bytes, limit):
    """`spans` (window_spans) gathered into groups of about `limit` decompressed bytes, each
    group decoded together (one buffer, its pieces in the same tasks): the short runs a
    block filter leaves between gaps share a window's work, each still a batch of its own."""
    groups, size = [], 0
    for b0, b1 in spans:
        n = int(block_bytes[b0:b1].sum())
        if not groups or size + n > limit:
            groups.append([])
            size = 0
        groups[-1].append((b0, b1))
        size += n
    return groups


def first_block_alone(groups):
    """`groups` (window_groups) with the first block a window and a group of its own: a
    consumer that stops after its first batch (an engine's LIMIT) waits for one block's
    decode, while the windows after it are decoded ahead as ever."""
    if not groups:
        return groups
    (b0, b1), rest = groups[0][0], groups[0][1:]
    if b1 - b0 > 1:
        return [[(b0, b0 + 1)], [(b0 + 1, b1)] + rest] + groups[1:]
    return [[(b0, b1)], rest] + groups[1:] if rest else groups


def block_bytes(cols):
    """Each block's decompressed bytes over the columns `cols` (an int64 array)."""
    if not cols:
        return np.zeros(0, np.int64)
    total = np.zeros(cols[0].num_blocks, np.int64)
    for c in cols:
        total += c.lookup["raw"]
    return total


def piece_size(left, piece_bytes, threads):
    """The bytes of the next piece of a tapered window with `left` bytes still to hand out:
    half of a thread's share of them, within [TAPER_BYTES, piece_bytes]."""
    return max(TAPER_BYTES, min(piece_bytes, left // (2 * threads)))


def finished(value):
    """A Future that already holds `value` (work done in the calling thread)."""
    done = Future()
    done.set_result(value)
    return done


class Later:
    """Work done in the calling thread when its result is first asked for, not when it is
    queued: a remote window's own pieces, whose blocks are on their way meanwhile (decoded at
    once, each window queued would wait for its fetch, one round after another)."""

    def __init__(self, fn):
        self._fn = fn

    def result(self):
        return self._fn()

    def cancel(self):
        return True         # never begun


class Windows:
    """The windows of one file, decoded ahead in the file's threads (submit, then collect in
    the same order); close() waits for what is still being decoded. Each window notes the
    process that submitted it: one forked since decodes it again in the calling thread.

    A remote file's window has its blocks, all columns together, requested when it is
    submitted, or earlier (fetch_early), while the windows before it are decoded (`fetch`:
    the memory limit leaves room for them), in a few coalesced requests (ML.NET writes a
    window's blocks end to end), rather than each piece requesting its own blocks when a
    thread takes it up: a request a block, one round after another."""

    def __init__(self, f, readers, fetch=True):
        self.file = f
        self.readers = readers
        self.raw = [r.col.lookup["raw"] for r in readers]
        self.light = [getattr(r, "light", False) for r in readers]
        self.pending = collections.deque()
        self.work = _work.Work(_work.current())
        self.fetch = fetch and not f.store.in_memory      # a file in memory: nothing to fetch
        self.early = {}         # the windows whose blocks were requested before they were queued

    def _pieces(self, spans, piece_bytes, taper):
        """[(column, p0, p1, out, raw bytes, span)]: each column's blocks of each span
        [b0, b1) cut into pieces of about `piece_bytes` (smaller toward the end when `taper`:
        tapered()), with where each decodes to: an array the reader owns, a part of one buffer
        for the window, or None (its decoder allocates)."""
        pieces = []
        for s, (b0, b1) in enumerate(spans):
            for k, raw in enumerate(self.raw):
                pieces += [(k, p0, p1, int(raw[p0:p1].sum()), s)
                           for p0, p1 in block_groups(raw[b0:b1], piece_bytes, b0)]
        if taper:
            pieces = self._tapered(pieces, piece_bytes)
        rooms = [self.readers[k].room(p0, p1) for k, p0, p1, _, _ in pieces]
        sizes = [0 if r is None or isinstance(r, np.ndarray)
                 else (math.prod(r[0]) * r[1].itemsize + 63) // 64 * 64 for r in rooms]
        buf = None
        if any(sizes):
            # one buffer for the window (fresh arrays of a few MB each cost a page fault per
            # 4 KiB)
            buf = self.file.store.buffer(sum(sizes), "a window of a scan's blocks")
        out, at = [], 0
        for (k, p0, p1, raw, s), room, size in zip(pieces, rooms, sizes):
            if size:
                shape, dtype = room
                room = buf[at:at + math.prod(shape) * dtype.itemsize].view(dtype)
                room = room.reshape(shape)
                at += size
            out.append((k, p0, p1, room, raw, s))
        return out

    def _tapered(self, pieces, piece_bytes):
        """`pieces` ((column, p0, p1, raw bytes, span)) with those near the end cut into
        smaller ones: each at most half of what is left after it shared among the threads
        (guided self-scheduling), no smaller than TAPER_BYTES, so that no thread is left
        decoding a whole piece while the others wait."""
        left = sum(p[3] for p in pieces)
        out = []
        for k, p0, p1, n, s in pieces:
            size = piece_size(left, piece_bytes, self.file.threads)
            raw = self.raw[k]
            cut = block_groups(raw[p0:p1], size, p0) if n > size else [(p0, p1)]
            out += [(k, q0, q1, int(raw[q0:q1].sum()), s) for q0, q1 in cut]
            left -= n
        return out

    def _decode(self, task, ahead=None):
        """_decoded(task), once the blocks `ahead` fetches (None: nothing) have come."""
        if ahead is None:
            return self._decoded(task)
        try:
            ahead.wait()
            return self._decoded(task)
        finally:
            ahead.done()

    def fetch_early(self, spans):
        """Request the blocks of windows `spans` (a group submit will be given later) now,
        while the windows before them are decoded: a remote file's windows on their way
        further ahead than those decoded (the memory limit leaving room for them)."""
        if self.fetch and tuple(spans) not in self.early:
            self.early[tuple(spans)] = self._fetch_ahead(spans, 0)

    def _fetch_ahead(self, spans, users):
        """The blocks of windows `spans` of every column, requested now for `users` tasks
        (unless fetch_early requested them already): an Ahead (idv._storage.remote_held), or
        None (a file in memory, one read by a file object, or no room for them)."""
        if not self.fetch:
            return None
        early = self.early.pop(tuple(spans), None)
        if early is not None:
            early.expect(users)
            return early
        try:
            tables = [r.col.lookup[b0:b1] for r in self.readers for b0, b1 in spans]
            return self.file.store.check_open().fetch_ahead(
                np.concatenate([t["offset"] for t in tables]),
                np.concatenate([t["disk"] for t in tables]), self.work, users)
        except IdvFormatError:          # a damaged table: the piece that reads it says so
            return None

    def _decoded(self, task):
        """The chunks of each piece of `task`: the pieces whose readers opt in (inflatable)
        inflated all in one call of the block store, those that are views of the file's
        memory map (mapped_run) checked all in one call (IdvFile.mapped_spans, over the read
        threads), the others decoded one by one."""
        inflated = [None] * len(task)
        together, on_map = [], []
        for i, (k, p0, p1, out, _raw, _s) in enumerate(task):
            mapped_run = getattr(self.readers[k], "mapped_run", None)
            col = None if mapped_run is None else mapped_run(p0, p1)
            if col is not None:
                on_map.append((i, (col, p0, p1)))
                continue
            inflatable = getattr(self.readers[k], "inflatable", None)
            blocks = None if inflatable is None else inflatable(p0, p1, out)
            if blocks is not None:
                inflated[i] = True
                together.append((blocks, p0, p1, out))
        if together:
            self.file.store.inflate_fixed(together, parallel=False)
        spans = dict(zip((i for i, _ in on_map),
                         self.file.mapped_spans([r for _, r in on_map]) if on_map else ()))
        return [self.readers[k].from_map(p0, p1, spans[i]) if i in spans
                else self.readers[k].inflated(p0, p1, out) if inflated[i]
                else self.readers[k].decode(p0, p1, out)
                for i, (k, p0, p1, out, _raw, _s) in enumerate(task)]

    def submit(self, spans, piece_bytes, lone=False, last=False):
        """Decode the windows `spans` ([(b0, b1)], a group of window_groups) together: the
        pieces of light readers (``light``: views made in the calling thread) here, the
        others in the threads when there is enough work for them: more than INLINE_BYTES,
        in two pieces or more unless other windows are decoded beside it (`lone`: the scan's
        only one, which the caller waits for at once). The pieces of the scan's `last`
        window get smaller toward its end (tapered) when it holds two pieces a thread or
        more."""
        threads = self.file.threads
        taper = last and threads > 1 and sum(
            int(raw[b0:b1].sum()) for raw in self.raw for b0, b1 in spans) >= \
            2 * threads * piece_bytes
        pieces = self._pieces(spans, piece_bytes, taper)
        here = [p for p in pieces if self.light[p[0]]]
        away = [p for p in pieces if not self.light[p[0]]]
        if threads > 1 and (len(away) > 1 or not lone) and \
                sum(p[4] for p in away) > INLINE_BYTES:
            # small pieces (a wide file's columns) go to the threads a few together
            tasks, size = [], 0
            left = sum(p[4] for p in away) if taper else 0
            for piece in away:
                limit = piece_size(left, piece_bytes, threads) if taper else piece_bytes
                if not tasks or size + piece[4] > limit:
                    tasks.append([])
                    size = 0
                tasks[-1].append(piece)
                size += piece[4]
                left -= piece[4]
        else:
            here, tasks = pieces, []
        ahead = self._fetch_ahead(spans, len(tasks) + bool(here))
        work = self._in_threads(tasks, ahead)
        if here:
            tasks.append(here)
            work.append(finished(self._decode(here)) if ahead is None else
                        Later(lambda: self._decode(here, ahead)))
        self.pending.append((spans, tasks, work, os.getpid(), ahead))

    def _in_threads(self, tasks, ahead):
        """A Future of each of `tasks` decoded in the threads; those for which no thread can
        be started (an address space nearly used up) decoded here instead."""
        pool, work = _threads.pool("scan", self.file.threads), []
        for task in tasks:
            try:
                work.append(self.work.submit(pool, self._decode, task, ahead))
            except RuntimeError:        # "can't start new thread"
                work.append(finished(self._decode(task, ahead)))
        return work

    def collect(self):
        """[(b0, b1, one joined value per column)] of the windows submitted first."""
        spans, tasks, work, pid, ahead = self.pending.popleft()
        if pid == os.getpid():
            try:
                results = [done.result() for done in work]
            finally:
                if ahead is not None:       # (a task's error: the others' bytes go too)
                    ahead.drop()
        else:       # the futures' threads stayed in the parent: their work is done again
            results = [self._decode(task) for task in tasks]
        chunks = [[[] for _ in self.readers] for _ in spans]
        for task, got_task in zip(tasks, results):
            for piece, got in zip(task, got_task):
                chunks[piece[5]][piece[0]] += got
        return [(b0, b1, [r.join(c) for r, c in zip(self.readers, per)])
                for (b0, b1), per in zip(spans, chunks)]

    def close(self):
        # every task not yet begun cancelled first, then those running waited for: cancelled
        # one at a time, each wait would let the threads begin the next
        # (a forked child has no thread of the parent's to wait for)
        here = os.getpid()
        self.work.end()     # and the remote requests of the tasks running end at once
        running = [done for _spans, _tasks, work, pid, _ahead in self.pending if pid == here
                   for done in work if not done.cancel()]
        try:
            for done in running:
                try:
                    done.result()
                except Exception:       # a task's error: the stream that wanted it has ended
                    pass
        finally:                        # a Ctrl-C while waiting goes on up
            for ahead in [a for *_, a in self.pending] + list(self.early.values()):
                if ahead is not None:
                    ahead.drop()
            self.pending.clear()
            self.early.clear()
            self.work.release()
