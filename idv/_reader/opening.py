"""What opening a file reads and checks before any block: the header and the tail, idv's
checksums, the table of contents, every column's codec, and every lookup and metadata table
(idv._storage.layout), so that a file whose parts are damaged or overlap is refused when it opens.

A file in memory (a path: read whole or memory-mapped; bytes) is first read in one pass of C
(idv._parts), which only says whether all is well: a dataset of a thousand small files opens
them a thousand times, and a Python call per part would be most of its time. When it finds a
fault, the checks part by part run, and their error names the fault and where it is.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools

import numpy as np

from idv import _codecs, _compression, _header, _parts
from idv._storage import checksums, layout, statistics as block_stats
from idv._storage.source import convert_hint
from idv.errors import IdvFormatError, UnsupportedCodecError, warn


@dataclasses.dataclass(eq=False)
class Opened:
    """What opening read: ``header`` (idv._header.Header), ``head`` (the 256 header bytes),
    ``sums`` (idv._storage.checksums.Checksums, None without or unchecked), ``described`` (per
    column (TocEntry, codec or None, why it cannot be read or None)) and ``tables``
    (idv._storage.layout.Tables); ``identity``: the source's (a local file's device, inode, size
    and modification time; None for others), by which the same file opened again may reuse it
    (``reused``)."""

    header: _header.Header
    head: bytes
    sums: object
    described: list
    tables: object
    identity: tuple | None = None
    checked: bool | None = None        # whether its checksums were checked
    _shown: dict | None = dataclasses.field(default=None, repr=False)

    @property
    def shown(self):
        """{name: position in ``described``} of the columns shown by name: the last of each
        name, as ML.NET shows them (found once)."""
        if self._shown is None:
            self._shown = {e.name: i for i, (e, _, _) in enumerate(self.described)}
        return self._shown

    def readable(self, i):
        """Whether column `i`'s codec and compression are known (Column.readable)."""
        return self.described[i][2] is None


def reused(src, check_sums, known):
    """`known` (an Opened) for source `src` when it was read from the same local file (its
    device, inode, size, modification time and header bytes), with the same checks: a file of
    a dataset opened again needs its tables read and checked only once; else None."""
    if known is None or known.identity is None or known.checked != check_sums \
            or getattr(src, "identity", None) != known.identity:
        return None
    return known if bytes(src.view(0, len(known.head))) == known.head else None


def known_or_read(src, check_sums, known):
    """What opening source `src` reads (an Opened): `known`, what opening the same file read
    before, while it is the same (reused), else read and checked anew (read)."""
    found = reused(src, bool(check_sums), known)
    if found is None:
        with getattr(src, "checked_once", contextlib.nullcontext)():
            found = read(src, bool(check_sums))
    return found


def read(src, check_sums):
    """Open the file of source `src` (idv._storage.source): an Opened, or IdvFormatError. A column
    that cannot be read (an unknown codec or compression) is a warning naming the file (one of
    a dataset's many, perhaps): the others read."""
    found = _in_memory(src.buffer, check_sums) if src.buffer is not None else None
    if found is None:
        found = _in_parts(src, check_sums)
    found.identity, found.checked = getattr(src, "identity", None), check_sums
    of = "" if src.name is None else f" of {src.name}"
    for e, _, dead in found.described:
        if dead is not None:
            warn(f"cannot interpret column {e.index} {e.name!r}{of}: {dead}")
    return found


@functools.lru_cache(maxsize=1024)
def _codec(name, params):
    """_codecs.resolve, once per codec for all files: columns of one type share its codec
    (codecs hold no state), and the files of a dataset their types."""
    return _codecs.resolve(name, params)


def _described(entries):
    """Per column: (entry, codec, why it cannot be read)."""
    described = []
    for e in entries:
        codec, dead = None, None
        try:
            codec = _codec(e.codec_name, e.codec_params)
        except UnsupportedCodecError as err:
            dead = err.reason
        except IdvFormatError as err:
            err.locate(column=e.name, column_index=e.index, offset=e.toc_offset)
            raise
        if e.compression not in _compression.NAMES:
            dead = (dead + "; " if dead else "") + f"unknown compression kind {e.compression}"
        described.append((e, codec, dead))
    return described


def _extra(head, sums):
    """(start, size, what) of the parts the header locates beyond ML.NET's, and the block
    statistics' offset (None without)."""
    extra = [] if sums is None else [(sums.table_offset, sums.table_length,
                                      "the checksum table")]
    section = block_stats.section_of(head)
    if section is not None:
        extra.append(section + ("the block statistics",))
    return extra, None if section is None else section[0]


def _in_memory(data, check_sums):
    """Opened, read in one pass of idv._parts (layout.read_checked); None at the first
    fault, or where a codec's parameters are damaged (_in_parts then says where)."""
    got = _parts.open_frame(data, check_sums)
    if got is None:
        return None
    header, sums, entries = got
    if sums is not None:
        sums = checksums.Checksums(*sums)
    try:
        described = _described(entries)
    except IdvFormatError:
        return None
    head = bytes(data[:_header.HEADER_SIZE])
    block_stats.check_header(head)
    extra, stats_offset = _extra(head, sums)
    tables = layout.read_checked(data, header, entries, extra, sums,
                                 [codec for _, codec, _ in described], stats_offset)
    if tables is None:
        return None
    return Opened(header, head, sums, described, tables)


def _in_parts(src, check_sums):
    """Opened, each part read and checked in turn: the error names the first fault."""
    head = src.view(0, min(_header.HEADER_SIZE, src.size))
    try:
        h = _header.parse_header(head, src.size)
    except IdvFormatError as e:
        text = _text_start(bytes(head))
        if text is None:
            raise
        if text.lstrip().lower().startswith(("<!doctype html", "<html")):
            raise IdvFormatError(f"not an .idv file: it is an HTML page ({text!r}), a "
                                 f"directory listing perhaps: idv.dataset(URL) reads the .idv "
                                 f"files a listing links to", offset=0) from e
        raise IdvFormatError(f"not an .idv file: it starts with text ({text!r}), not "
                             f"ML.NET's binary signature; it looks like a CSV or other "
                             f"text file: {convert_hint('csv')}", offset=0) from e
    head = bytes(head[:_header.HEADER_SIZE])
    block_stats.check_header(head)      # before the row count is used
    _header.check_tail(src.view(h.tail_offset, 8), h.tail_offset)
    sums = checksums.read(head, src.view, src.size, h.toc_offset) if check_sums else None
    # the table of contents, read once for its checksum and its columns
    if h.column_count:
        entries = layout.read_toc(src, h, sums)
    else:
        entries = []
        if sums is not None:
            toc = src.view(h.toc_offset, h.tail_offset - h.toc_offset)
            sums.check(h.toc_offset, toc, "the table of contents")
    described = _described(entries)
    # every table read now, and no two parts of the file in the same bytes
    extra, stats_offset = _extra(head, sums)
    tables = layout.read_tables(src, h, entries, extra)
    if sums is not None:           # lookup tables, metadata: checked now, blocks when read
        _check_coverage(sums, tables.regions, h)
        # the TOC: checked above; the block statistics: with their own CRC, when first used
        parts = sums.tables
        keep = parts["offset"] != h.toc_offset
        if stats_offset is not None:
            keep &= parts["offset"] != stats_offset
        parts = parts[keep]
        offsets, lengths = parts["offset"], parts["length"]

        def what(k):        # a failing part named as the layout knows it, where it can
            at = np.flatnonzero(tables.regions.starts == offsets[k])
            return tables.regions.describe(int(at[0])) if len(at) else \
                f"the part at byte {offsets[k]} ({lengths[k]} bytes: a lookup table or metadata)"
        if src.buffer is not None:          # in memory: every CRC-32 in one call
            sums.check_within(src.buffer, offsets, lengths, what)
        else:
            sums.check_all(offsets, src.read_ranges(offsets, lengths), what)
    tables.check_sizes(entries, [codec for _, codec, _ in described], h.row_count)
    return Opened(h, head, sums, described, tables)


def _check_coverage(sums, parts, header, shown=8):
    """IdvFormatError listing the parts (beyond the header, the tail and the checksum table,
    checked otherwise) that the checksum table does not cover."""
    skip = {0, header.tail_offset, sums.table_offset}
    missing = [int(k) for k in sums.uncovered(parts.starts, parts.stops)
               if int(parts.starts[k]) not in skip]
    if missing:
        listed = "; ".join(parts.describe(k) for k in missing[:shown])
        more = f"; and {len(missing) - shown} more" if len(missing) > shown else ""
        raise IdvFormatError(f"the checksum table does not cover {len(missing)} part"
                             f"{'s' * (len(missing) != 1)} of the file, which idv records "
                             f"for every part it writes: {listed}{more} (the table was cut "
                             f"or the file changed; checksums=False reads it unchecked)",
                             offset=int(parts.starts[missing[0]]))


_SIGNATURE = b"CML\x00DVB\x00"


def _text_start(head):
    """The first line of a file's first bytes when they are text (UTF-8, no control
    characters but tabs and line ends) rather than an .idv header, else None."""
    if head.startswith(_SIGNATURE[:len(head)]) or not head:
        return None
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:       # a character cut at the end of the bytes read
        if e.start < len(head) - 3:
            return None
        text = head[:e.start].decode("utf-8")
    if any(ord(ch) < 32 and ch not in "\t\r\n" for ch in text):
        return None
    return text.splitlines()[0][:60] if text.strip() else None
