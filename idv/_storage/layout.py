"""Where each part of a file lies, and the rule that no two parts share bytes.

ML.NET's saver writes the header, every block, each column's lookup table, each column's
metadata blocks and metadata table, the table of contents and the tail, each once, one after
the other. Parts that overlap mean damage or a crafted file, and sharing is how a small file
multiplies work: eight columns densifying one block of implicit zeros, a hundred columns
parsing one 60,000-entry lookup table. So ``read_tables`` reads every lookup table and
metadata table when the file opens and refuses overlapping parts before anything is decoded.

It does so at a cost bounded by the file's size however the offsets are crafted: the parts
the table of contents alone locates (lookup tables, the start of each metadata table) are
checked first, so a table is read only once no other table starts inside it, and each
metadata table is read only up to the next such part.

``Regions`` (a list of byte ranges with what each one is) and its ``overlaps`` are also meant
for ``idv verify``, which lists every overlap instead of stopping at the first.
"""
from __future__ import annotations

import copy

import numpy as np

from idv import _compression, _lookup, _parts, _toc
from idv._resources import budget
from idv._header import HEADER_SIZE
from idv.errors import IdvFormatError

TAIL_SIZE = 8
_FEW = 64          # parts checked for overlaps in Python, below numpy's fixed cost
LOOKUP_ENTRY_SIZE = _lookup.ENTRY.itemsize
TOC_PIECE = 64 << 10     # the first bytes of a fetched table (of contents, of metadata), then 4x


def _int64(n):
    """`n` within int64's range."""
    return min(max(n, -(1 << 63)), (1 << 63) - 1)


class Regions:
    """Byte ranges [start, stop) of a file's parts, each with a description."""

    def __init__(self):
        self._starts = []
        self._stops = []
        self._names = []       # per group: its first region's number and a str or i -> str
        self._count = 0
        self._arrays = None

    def add(self, starts, sizes, name):
        """Parts at `starts` of `sizes` bytes (scalars or arrays); `name` says what they are:
        a str, or a function of the part's position among these."""
        if isinstance(starts, int) and isinstance(sizes, int):     # one part: no numpy
            # a file's numbers may lie beyond int64 (a damaged pointer): clamped, the part
            # stays outside every file, and the checks say so
            starts, stops = [_int64(starts)], [_int64(starts + sizes)]
        else:
            starts = np.asarray(starts, np.int64).reshape(-1)
            stops = starts + np.asarray(sizes, np.int64)
            if stops.shape != starts.shape:
                raise ValueError(f"{len(starts)} parts, sizes of shape {np.shape(sizes)}")
        self._starts.append(starts)
        self._stops.append(stops)
        self._names.append((self._count, name))
        self._count += len(starts)
        self._arrays = None

    def copy(self):
        """A Regions with the same parts, to which more can be added."""
        r = Regions()
        r._starts, r._stops, r._names = list(self._starts), list(self._stops), list(self._names)
        r._count = self._count
        return r

    def __len__(self):
        return self._count

    def _concat(self):
        if self._arrays is None:
            starts = np.concatenate(self._starts, dtype=np.int64) if self._starts \
                else np.zeros(0, np.int64)
            stops = np.concatenate(self._stops, dtype=np.int64) if self._stops \
                else np.zeros(0, np.int64)
            self._arrays = starts, stops
        return self._arrays

    @property
    def starts(self):
        """Every part's first byte, in the order they were added."""
        return self._concat()[0]

    @property
    def stops(self):
        """Every part's end (one past its last byte)."""
        return self._concat()[1]

    def describe(self, k):
        """What part k is and its bytes, e.g. ``column 2 'Txt' block 5 (bytes 900-1022)``."""
        firsts = [first for first, _ in self._names]
        g = int(np.searchsorted(firsts, k, side="right")) - 1
        first, name = self._names[g]
        what = name(k - first) if callable(name) else name
        start, stop = self.starts[k], self.stops[k]
        return f"{what} (bytes {start}-{stop - 1})"

    def overlaps(self, limit=None):
        """Pairs (k, other) of parts that share bytes, in file order: part k starts inside
        `other`, which starts at or before it. Empty parts overlap nothing."""
        if self._count <= _FEW:
            return self._few_overlaps(limit)
        starts, stops = self._concat()
        parts = np.flatnonzero(stops > starts)
        order = parts[np.argsort(starts[parts], kind="stable")]
        s, e = starts[order], stops[order]
        if len(order) < 2:
            return []
        reach = np.maximum.accumulate(e)            # the furthest end so far ...
        pos = np.arange(len(order))
        owner = np.maximum.accumulate(np.where(e == reach, pos, 0))   # ... and whose it is
        bad = np.flatnonzero(s[1:] < reach[:-1]) + 1
        if limit is not None:
            bad = bad[:limit]
        return [(int(order[p]), int(order[owner[p - 1]])) for p in bad]

    def _few_overlaps(self, limit):
        """overlaps() of a few parts (a small file's), in Python: the same pairs, without the
        fixed cost of a dozen numpy calls."""
        starts, stops = [], []
        for group in self._starts:
            starts.extend(group if isinstance(group, list) else group.tolist())
        for group in self._stops:
            stops.extend(group if isinstance(group, list) else group.tolist())
        order = sorted((k for k in range(len(starts)) if stops[k] > starts[k]),
                       key=starts.__getitem__)
        found = []
        reach, owner = None, None      # the furthest end so far, and whose it is
        for k in order:
            if reach is not None and starts[k] < reach:
                found.append((k, owner))
                if limit is not None and len(found) >= limit:
                    break
            if reach is None or stops[k] >= reach:
                reach, owner = stops[k], k
        return found

    def check(self):
        """Raise IdvFormatError naming the first two parts that share bytes."""
        for k, other in self.overlaps(limit=1):
            raise IdvFormatError(f"{self.describe(k)} overlaps {self.describe(other)}: every "
                                 f"part of a file has bytes of its own",
                                 offset=int(self.starts[k]))


def _where(entry):
    return f"column {entry.index} {entry.name!r}"


def _frame(header, entries, extra=()):
    """The header, the table of contents, the tail and every lookup table: all located by the
    header and the table of contents alone; `extra`: (start, size, name) of parts the header
    locates beyond ML.NET's (idv's checksum table)."""
    r = Regions()
    r.add(0, HEADER_SIZE, "the header")
    for start, size, name in extra:
        r.add(start, size, name)
    if entries:
        r.add(header.toc_offset, entries[-1].toc_end - header.toc_offset,
              "the table of contents")
    r.add(header.tail_offset, TAIL_SIZE, "the tail signature")
    nb = _toc.block_count(header.row_count, entries[0].rows_per_block) if entries else 0
    if nb:
        r.add([e.lookup_offset for e in entries], LOOKUP_ENTRY_SIZE * nb,
              lambda i: f"{_where(entries[i])} lookup table")
    return r, nb


def regions(header, entries, lookups, metadata, extra=()):
    """Every part of a file: the frame (header, table of contents, tail, lookup tables), each
    column's blocks (from `lookups`, its lookup table per column) and its metadata table and
    blocks (from `metadata`, its metadata entries per column). A None table is left out (one
    that could not be read: its parts are never decoded). All columns' parts of one kind are
    added at once, so the cost per column is a few list items, not a Python call."""
    return _with_tables(_frame(header, entries, extra)[0], entries, lookups, metadata)


def _with_tables(r, entries, lookups, metadata, joined=None):
    """`r` (a file's frame) with every column's blocks, metadata tables and metadata blocks;
    `joined`: every column's lookup table as the rows of one array, when they are."""
    if joined is not None and joined.size:
        with_blocks = range(len(entries))
        blocks = joined.reshape(-1)
        firsts = np.arange(len(entries) + 1) * joined.shape[1]
    else:
        with_blocks = [i for i, t in enumerate(lookups) if t is not None and len(t)]
        blocks = np.frombuffer(bytearray().join(lookups[i] for i in with_blocks),
                               _lookup.ENTRY) if with_blocks else None
        firsts = np.cumsum([0] + [len(lookups[i]) for i in with_blocks])
    if with_blocks:

        def block(k):
            g = int(np.searchsorted(firsts, k, side="right")) - 1
            return f"{_where(entries[with_blocks[g]])} block {k - firsts[g]}"
        r.add(blocks["offset"], blocks["disk"], block)
    with_meta = [i for i, meta in enumerate(metadata) if meta]
    if with_meta:
        r.add([entries[i].metadata_offset for i in with_meta],
              [metadata[i][-1].toc_end - entries[i].metadata_offset for i in with_meta],
              lambda j: f"{_where(entries[with_meta[j]])} metadata table")
        owners = [(i, m) for i in with_meta for m in metadata[i]]
        r.add([m.offset for _, m in owners], [m.size for _, m in owners],
              lambda j: f"{_where(entries[owners[j][0]])} metadata {owners[j][1].kind!r} block")
    return r


class Tables:
    """A file's lookup tables and metadata tables, per column, as read at open. A damaged
    table is kept as its error and raised when the column's blocks or metadata are used, so
    the rest of the file still reads."""

    def __init__(self, lookups, metadata, regions_, joined=None):
        self._lookups = lookups      # None: the rows of `joined`
        self._metadata = metadata
        self._regions = regions_     # a Regions, or (header, entries, extra) to build it from
        self.joined = joined    # every lookup table as the rows of one array, when all read
        # per column, whether its block sizes are known possible (the reader checks every
        # fixed-width column's at once, against its codec); None: none are
        self.sizes_ok = None
        # the CRC-32 each block must have (checksums.Checksums.expected, a row a column), when
        # found with the checks (read_checked); None: found when a column is first read
        self.crcs = None
        self._raw_totals = None

    @property
    def regions(self):
        """Every part of the file (Regions), built when first asked for."""
        if isinstance(self._regions, tuple):
            header, entries, extra = self._regions
            self._regions = regions(header, entries, [self.lookup(e.index) for e in entries],
                                    self._metadata, extra)
        return self._regions

    def raw_total(self, column):
        """The decompressed bytes of all of column number `column`'s blocks: every column's
        summed at once where the tables are one array (a dataset asks each file's)."""
        if self.joined is None:
            return int(self.lookup(column)["raw"].sum(dtype=np.int64))
        if self._raw_totals is None:
            self._raw_totals = self.joined["raw"].sum(axis=1, dtype=np.int64)
        return int(self._raw_totals[column])

    def lookup(self, column):
        """The lookup table of column number `column` (a structured array, _lookup.ENTRY)."""
        if self._lookups is None:
            return self.joined[column]
        return _value(self._lookups[column])

    def metadata(self, column):
        """The metadata entries of column number `column` ([] when it has none)."""
        return _value(self._metadata[column])

    def without_metadata(self, column):
        """Whether column number `column` has no metadata entries (False for a damaged
        table: metadata() raises its error)."""
        return isinstance(self._metadata[column], list) and not self._metadata[column]

    def sizes_checked(self, column):
        """Whether column number `column`'s block sizes were checked with the others'."""
        return self.sizes_ok is not None and bool(self.sizes_ok[column])

    def check_sizes(self, entries, codecs, num_rows):
        """Mark the columns whose lookup tables hold only possible block sizes (what
        idv._store.block_runs.check_block_sizes refuses), every fixed-width column (`codecs`, each
        column's, None for none) in one pass; nothing when the tables are not one array (a
        damaged one)."""
        joined = self.joined
        if joined is None or not joined.size or not entries:
            return
        nb, rpb = joined.shape[1], entries[0].rows_per_block
        rows = np.full(nb, rpb, np.int64)
        rows[-1] = num_rows - (nb - 1) * rpb
        item = np.array([0 if c is None else c.itemsize for c in codecs], np.int64)
        stored = np.array([e.compression == _compression.NONE for e in entries])
        raw = joined["raw"].astype(np.int64)
        disk = joined["disk"].astype(np.int64)
        fits = np.where(stored[:, None], raw == disk,
                        raw <= disk * _compression.MAX_RATIO + 64)
        self.sizes_ok = (item > 0) & (raw == item[:, None] * rows).all(axis=1) \
            & fits.all(axis=1)


def _value(v):
    if isinstance(v, IdvFormatError):
        raise copy.copy(v)      # a fresh one each time, with the same location
    return v


def read_tables(source, header, entries, extra=()):
    """Read every lookup and metadata table of the file (``source`` as in idv._storage.source, the
    table of contents parsed into ``entries``) and refuse the file if two parts overlap."""
    tail = header.tail_offset
    base, nb = _frame(header, entries, extra)
    frame = base.copy()
    with_meta = sorted((e for e in entries if e.metadata_offset),
                       key=lambda e: e.metadata_offset)
    # a metadata table's first byte is known before it is read
    if with_meta:
        frame.add([e.metadata_offset for e in with_meta], 1,
                  lambda i: f"{_where(with_meta[i])} metadata table")
    frame.check()
    nexts = []
    if with_meta:
        parts = np.flatnonzero(frame.stops > frame.starts)
        parts = parts[np.argsort(frame.starts[parts])]
        starts = frame.starts[parts]
        # a metadata table is read up to the next part the frame knows, which it may not run
        # into
        nexts = [int(parts[np.searchsorted(starts, e.metadata_offset, side="right")])
                 for e in with_meta]

    # every table's bytes in one batch (a remote file fetches them in few requests); in
    # memory, every lookup table in one numpy gather
    gathered = _gathered_lookups(source, entries, nb) if nb else None
    listed = nb and gathered is None
    ranges = [(e.lookup_offset, LOOKUP_ENTRY_SIZE * nb) for e in entries] if listed else []
    fetched = source.buffer is None
    ranges += [(e.metadata_offset, _piece(int(frame.starts[nxt]) - e.metadata_offset, fetched))
               for e, nxt in zip(with_meta, nexts)]
    table_bytes = _read_all(source, ranges)

    joined = None          # every column's lookup table, rows of one array, when all are good
    if gathered is not None:
        lookups, joined = _checked_lookups(entries, list(range(len(entries))), gathered, [],
                                           nb, tail)
    elif nb:
        lookups = _parse_lookups(entries, table_bytes[:len(entries)], nb, tail)
    else:
        lookups = [np.zeros(0, _lookup.ENTRY) for _ in entries]
    metadata = [[] for _ in entries]
    for e, nxt, data in zip(with_meta, nexts, table_bytes[len(entries) if listed else 0:]):
        off = e.metadata_offset
        try:
            if isinstance(data, IdvFormatError):
                raise data
            metadata[e.index] = _grown(source, off, int(frame.starts[nxt]) - off, data,
                                       lambda b, off=off: _toc.parse_metadata_toc(b, off, tail))
        except IdvFormatError as err:
            end = int(frame.starts[nxt])
            if end < tail and err.reason.startswith("truncated"):   # idv._cursor's wording
                err.reason = f"{err.reason}; the table must end before {frame.describe(nxt)}"
            metadata[e.index] = err.locate(column=e.name, column_index=e.index)
    ok = [[None if isinstance(v, IdvFormatError) else v for v in vs]
          for vs in (lookups, metadata)]
    everything = _with_tables(base, entries, *ok, joined=joined)
    everything.check()
    return Tables(lookups, metadata, everything, joined)


def read_checked(data, header, entries, extra, sums, codecs, stats_offset=None):
    """The Tables of a file held whole in `data`, read and checked in one pass of C
    (idv._parts.read_tables): read_tables' checks, and with `sums` (its Checksums) every
    part's checksum recorded and every table's matching (all but the table of contents and
    the block statistics at `stats_offset`, checked on their own), and each column's block
    sizes against its codec (`codecs`, None for none: Tables.check_sizes). None when any
    check fails, or for a file of no rows: read_tables and the reader's own checks then run,
    and say what is wrong."""
    got = _parts.read_tables(
        data, header, entries, [(start, size) for start, size, _ in extra],
        None if sums is None else sums.entries, 0 if sums is None else sums.table_offset,
        stats_offset, [0 if c is None else c.itemsize for c in codecs],
        [e.compression == _compression.NONE for e in entries])
    if got is None:
        return None
    joined, metadata, crcs, sizes_ok = got
    tables = Tables(None, metadata, (header, entries, extra), joined)
    tables.crcs, tables.sizes_ok = crcs, sizes_ok
    return tables


def _gathered_lookups(source, entries, nb):
    """Every column's lookup table of `nb` blocks, as one (columns, nb) array gathered from a
    source in memory; None for other sources, or when a table lies outside the file (read
    one by one, for its error)."""
    if source.buffer is None or not entries:
        return None
    size = LOOKUP_ENTRY_SIZE * nb
    offsets = np.fromiter((e.lookup_offset for e in entries), np.int64, len(entries))
    if not ((offsets >= 0) & (offsets <= source.size - size)).all():
        return None
    data = np.frombuffer(source.buffer, np.uint8)
    return data[offsets[:, None] + np.arange(size)].view(_lookup.ENTRY)


def _parse_lookups(entries, table_bytes, nb, tail):
    """Every column's lookup table of `nb` blocks from its bytes (or the IdvFormatError of
    reading them), parsed and checked as one array; a bad table becomes its column's error."""
    size = LOOKUP_ENTRY_SIZE * nb
    whole = [i for i, data in enumerate(table_bytes)
             if not isinstance(data, IdvFormatError) and memoryview(data).nbytes == size]
    tables = np.frombuffer(bytearray().join(table_bytes[i] for i in whole), _lookup.ENTRY)
    tables = tables.reshape(len(whole), nb)
    short = set(range(len(entries))).difference(whole)
    return _checked_lookups(entries, whole, tables, [(entries[i], table_bytes[i])
                                                     for i in sorted(short)], nb, tail)[0]


def _checked_lookups(entries, whole, tables, broken, nb, tail):
    """(each column's lookup table or its IdvFormatError, `tables` when every one is good):
    `tables` holds the tables of columns `whole` (one row each), checked as one array;
    `broken`: (entry, bytes or error) of the others, parsed one by one for their errors."""
    out = [None] * len(entries)
    for i, table in zip(whole, tables):
        out[entries[i].index] = table
    bad = _lookup.bad_entries(tables.reshape(-1), tail)
    if len(bad):
        rows, first = np.unique(bad // nb, return_index=True)
        broken = [(entries[whole[r]], _lookup.entry_error(tables[r], int(bad[f] % nb),
                                                          entries[whole[r]].lookup_offset,
                                                          tail))
                  for r, f in zip(rows, first)] + broken
    for e, err in broken:       # errors, and tables of the wrong length: parsed one by one
        try:
            if isinstance(err, IdvFormatError):
                raise err
            out[e.index] = _lookup.parse_lookup(err, nb, e.lookup_offset, tail)
        except IdvFormatError as found:
            out[e.index] = found.locate(column=e.name, column_index=e.index)
    return out, (tables if not broken else None)


def _read_all(source, ranges):
    """The bytes of each (offset, size) in `ranges`, read in one batch; a range the file does
    not hold gets its IdvFormatError in its place."""
    out = [None] * len(ranges)
    inside = []
    for i, (o, n) in enumerate(ranges):
        if 0 <= o and 0 <= n and o + n <= source.size:
            inside.append(i)
        else:
            try:
                source.view(o, n)        # raises the source's own error for the range
            except IdvFormatError as err:
                out[i] = err
    got = source.read_ranges([ranges[i][0] for i in inside], [ranges[i][1] for i in inside],
                             keep=True)
    for i, data in zip(inside, got):
        out[i] = data
    return out


def read_toc(src, h, sums):
    """The entries of the table of contents, its bytes (as far as the entries go) checked
    against `sums`. A remote one is fetched in growing pieces until its entries parse: a
    header may say the table runs to the end of a huge file."""
    n = h.tail_offset - h.toc_offset
    fetched = src.buffer is None
    if fetched:                    # fetched: refused whole over the limit, else in pieces
        limit = getattr(src, "memory_limit", None)
        if limit is not None:
            budget.check(n, limit, lambda: f"{src.name}: the table of contents")
    seen = []

    def parse(toc):
        seen.append(toc)
        return _toc.parse_toc(toc, h.toc_offset, h)
    try:
        entries = _grown(src, h.toc_offset, n, src.view(h.toc_offset, _piece(n, fetched)), parse)
    except IdvFormatError:
        if sums is not None:      # a damaged table: the checksum's error says so first
            sums.check(h.toc_offset, seen[-1], "the table of contents")
        raise
    toc = seen[-1][:entries[-1].toc_end - h.toc_offset]
    if sums is not None:
        sums.check(h.toc_offset, toc, "the table of contents")
    return entries


def _piece(n, fetched):
    """How many of a table's `n` bytes to read first: all in memory, TOC_PIECE fetched."""
    return min(n, TOC_PIECE) if fetched else n


def _grown(source, offset, full, data, parse):
    """parse(data), `data` the first bytes of the `full` bytes at `offset`; while the bytes
    end inside what parse reads, again with 4x as many (a header or a frame may put a table's
    end far beyond its entries: a fetched table is read only as far as they go)."""
    while True:
        try:
            return parse(data)
        except IdvFormatError as e:
            if len(data) < full and (e.reason.startswith("truncated") or " left" in e.reason):
                data = source.view(offset, min(full, len(data) * 4))
                continue
            raise
