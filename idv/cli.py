"""The ``idv`` command: look inside, check and convert .idv files from the shell::

    idv info FILE [--json]           header and per-column layout (codec, blocks, bytes, metadata)
    idv head FILE [-n N] [--columns a,b] [--json]   the first rows (decodes only their blocks)
    idv schema FILE [--json]         the schema, as ``print(f.schema)``
    idv verify FILE [--json] [--strict]   decode and check everything; list every problem
    idv cat FILE [--rows A:B] [--columns a,b] [--format table|csv|tsv|json|jsonl]
                                     rows (``idv slice`` is the same), decoding only their blocks
    idv convert IN OUT [--to FORMAT] [--columns a,b] [--compression none|deflate]
                       [--rows-per-block N]   to and from other formats, or .idv to .idv

FILE is a path, or ``archive.zip:entry/path`` for an .idv inside a zip (e.g. an ML.NET model).
Exit codes: 0 ok, 1 unreadable or invalid file, 2 usage error.
"""
from __future__ import annotations

import argparse
import csv
import functools
import io
import json
import math
import os
import re
import sys
import traceback
import unicodedata
import warnings
import zipfile

import numpy as np

import idv
from idv import _codecs, _compression, _header, _lookup
from idv import types as T
from idv.errors import IdvFormatError, UnsupportedCodecError

EXIT_OK, EXIT_BAD_FILE, EXIT_USAGE = 0, 1, 2
_ZIP_READ_LIMIT = 256 << 20   # zip entries up to this size are read into memory
_VECTOR_ITEMS = 5             # vector items shown per cell before "..."


class CliError(Exception):
    """A failure reported as one line ``idv: error: ...``; carries the exit code."""

    def __init__(self, message, code=EXIT_BAD_FILE):
        super().__init__(message)
        self.code = code


# ---------------------------------------------------------------- opening FILE

def _split_zip(spec):
    """'a.zip:entry' -> ('a.zip', 'entry') when a.zip is a file; else None."""
    if os.path.exists(spec):
        return None
    low = spec.lower()
    i = low.find(".zip:")
    while i >= 0:
        archive, entry = spec[:i + 4], spec[i + 5:]
        if os.path.isfile(archive):
            return archive, entry
        i = low.find(".zip:", i + 1)
    return None


def _zip_entry(z, entry):
    names = z.namelist()
    if entry in names:
        return entry
    norm = entry.replace("\\", "/").lstrip("/")
    for n in names:
        if n.replace("\\", "/") == norm:
            return n
    raise CliError(f"no entry {entry!r} in {z.filename}; .idv entries: "
                   f"{_idv_entries(z) or 'none'}")


def _idv_entries(z):
    return ", ".join(n.replace("\\", "/") for n in z.namelist() if n.lower().endswith(".idv"))


def open_file(spec, threads=None, backend=None):
    """Open FILE (a path or archive.zip:entry); raises CliError with a one-line message."""
    zipped = _split_zip(spec)
    try:
        if zipped is not None:
            archive, entry = zipped
            with zipfile.ZipFile(archive) as z:
                info = z.getinfo(_zip_entry(z, entry))
                if info.file_size <= _ZIP_READ_LIMIT:
                    source = z.read(info)
                else:   # a seekable stream; the ZipFile stays open through it
                    source = zipfile.ZipFile(archive).open(info)
            return idv.open(source, threads=threads, backend=backend)
        if os.path.isdir(spec):
            raise CliError(f"{spec}: is a directory")
        if zipfile.is_zipfile(spec):
            with zipfile.ZipFile(spec) as z:
                entries = _idv_entries(z)
            raise CliError(f"{spec} is a zip archive; name an entry as {spec}:ENTRY"
                           + (f" (.idv entries: {entries})" if entries else " (it has no .idv)"))
        return idv.open(spec, threads=threads, backend=backend)
    except FileNotFoundError:
        raise CliError(f"{spec}: no such file") from None
    except PermissionError:
        raise CliError(f"{spec}: permission denied") from None
    except zipfile.BadZipFile as e:
        raise CliError(f"{spec}: bad zip archive ({e})") from None
    except OSError as e:
        raise CliError(f"{spec}: {e.strerror or e}") from None
    except (ValueError, ImportError) as e:
        if isinstance(e, IdvFormatError):
            raise
        raise CliError(str(e), EXIT_USAGE) from None   # e.g. an unknown --backend


# ---------------------------------------------------------------- value formatting

_TICKS_PER_DAY = 864000000000


def _datetime_str(v):
    """datetime64[100ns] -> ISO 8601, exact to the tick (numpy misprints it outside 1678-2262)."""
    ticks = int(np.asarray(v).view(np.int64))
    us, rest = divmod(ticks, 10)
    s = str(np.datetime64(us, "us"))
    date, _, frac = s.partition(".")
    frac = (frac + str(rest)).rstrip("0")
    return f"{date}.{frac}" if frac else date


def _timespan_str(v):
    """timedelta64[100ns] -> .NET's constant format [-][d.]hh:mm:ss[.fffffff]."""
    ticks = int(np.asarray(v).view(np.int64))
    sign = "-" if ticks < 0 else ""
    days, rest = divmod(abs(ticks), _TICKS_PER_DAY)
    secs, frac = divmod(rest, 10_000_000)
    h, secs = divmod(secs, 3600)
    m, s = divmod(secs, 60)
    out = f"{sign}{f'{days}.' if days else ''}{h:02d}:{m:02d}:{s:02d}"
    return out + (f".{frac:07d}" if frac else "")


def _datetimeoffset_str(v):
    """(utc, offset_minutes) -> local clock time with its offset, ISO 8601."""
    offset = int(v["offset_minutes"])
    local = int(np.asarray(v["utc"]).view(np.int64)) + offset * T.TICKS_PER_MINUTE
    sign = "-" if offset < 0 else "+"
    hh, mm = divmod(abs(offset), 60)
    return f"{_datetime_str(np.int64(local).view(T.DATETIME_DTYPE))}{sign}{hh:02d}:{mm:02d}"


def _rowid_int(v):
    return (int(v["high"]) << 64) | int(v["low"])


def _float_json(x):
    """A float for JSON: the shortest repr that round-trips at its own precision."""
    f = float(str(x)) if isinstance(x, np.floating) else float(x)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    return f


def item_json(x, item):
    """One item in JSON form."""
    if item is T.DateTime:
        return _datetime_str(x)
    if item is T.TimeSpan:
        return _timespan_str(x)
    if item is T.DateTimeOffset:
        return _datetimeoffset_str(x)
    if item is T.RowId:
        return _rowid_int(x)
    if item is T.Text:
        return str(x)
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (np.integer, int)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        return _float_json(x)
    return str(x)


def cell_json(value, type_):
    """A cell (scalar or vector row) in JSON form; vectors become (nested) lists."""
    if isinstance(type_, T.Vector):
        arr = np.asarray(value)
        if arr.ndim == 0:
            return item_json(arr[()], type_.item)
        return [cell_json(a, type_) if arr.ndim > 1 else item_json(a, type_.item) for a in arr]
    return item_json(value, type_)


def _text_str(s):
    """Text for a table cell: control characters escaped, the rest as is."""
    return repr(str(s))[1:-1] if any(unicodedata.category(c)[0] in "CZ" and c != " "
                                     for c in s) else str(s)


def item_str(x, item, in_vector=False):
    if item is T.Text:
        return repr(str(x)) if in_vector else _text_str(x)
    if item in (T.DateTime, T.TimeSpan, T.DateTimeOffset):
        return item_json(x, item)
    if item is T.RowId:
        return str(_rowid_int(x))
    return str(x)


def _vector_str(arr, item, limit):
    if arr.ndim > 1:
        parts = [_vector_str(a, item, limit) for a in arr[:limit]]
    else:
        parts = [item_str(a, item, True) for a in arr[:limit]]
    if len(arr) > limit:
        parts.append("...")
    return "[" + ", ".join(parts) + "]"


def cell_str(value, type_):
    if isinstance(type_, T.Vector):
        return _vector_str(np.asarray(value), type_.item, _VECTOR_ITEMS)
    return item_str(value, type_)


def display_width(s):
    return sum(0 if unicodedata.combining(c) else
               2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)


def _clip(s, width):
    if width is None or display_width(s) <= width:
        return s
    out, w = [], 0
    for c in s:
        cw = display_width(c)
        if w + cw > width - 3:
            break
        out.append(c)
        w += cw
    return "".join(out) + "..."


def render_table(header, rows, right=(), max_width=None, sep="  ", underline=True):
    """Aligned text table; `right` holds the indices of right-aligned columns."""
    header = [list(h) for h in ([header] if header and isinstance(header[0], str) else header)]
    body = [[_clip(c, max_width) for c in r] for r in rows]
    ncol = len(header[0]) if header else (len(body[0]) if body else 0)
    widths = [max([display_width(r[i]) for r in header + body] or [0]) for i in range(ncol)]

    def line(cells):
        out = []
        for i, c in enumerate(cells):
            pad = " " * (widths[i] - display_width(c))
            out.append(pad + c if i in right else (c + pad if i < ncol - 1 else c))
        return sep.join(out).rstrip()
    lines = [line(h) for h in header]
    if underline and header:
        lines.append(sep.join("-" * w for w in widths))
    lines += [line(r) for r in body]
    return "\n".join(lines)


def _type_str(t):
    return str(t) if t is not None else "<unreadable>"


def _is_numeric(t):
    return t is not None and not isinstance(t, T.Vector) and (
        isinstance(t, T.Key) or t.dtype.kind in "iuf")


# ---------------------------------------------------------------- commands

def _hidden(f, c):
    return f[c.name] is not c


def _column_info(f, c):
    try:
        disk, raw, blocks = c.nbytes_disk, c.nbytes, c.num_blocks
    except IdvFormatError:
        if c.readable:
            raise
        disk = raw = blocks = None   # an unknown codec may come with an unparseable lookup
    return {
        "index": c.index, "name": c.name, "type": None if c.type is None else str(c.type),
        "readable": c.readable, "hidden": _hidden(f, c),
        "codec": c.codec_name, "compression": c.compression,
        "rows_per_block": c.rows_per_block, "blocks": blocks,
        "bytes_disk": disk, "bytes": raw,
        "metadata": {k: (None if v is None else str(v)) for k, v in c.metadata_types.items()},
        **({} if c.readable else {"error": c._dead}),
    }


def cmd_info(f, args, out):
    h = f.header
    cols = [_column_info(f, c) for c in f.columns]
    info = {
        "file": args.file, "version": h.version_string,
        "compatible_version": h.compatible_version_string,
        "num_rows": f.num_rows, "num_columns": f.num_columns, "file_size": h.file_size,
        "toc_offset": h.toc_offset, "tail_offset": h.tail_offset,
        "columns": cols,
    }
    if args.json:
        return _dump_json(info, out)
    pairs = [("file", args.file),
             ("version", f"{h.version_string} (compatible {h.compatible_version_string})"),
             ("rows", f"{f.num_rows}"), ("columns", f"{f.num_columns}"),
             ("file size", f"{h.file_size} bytes"),
             ("TOC offset", f"{h.toc_offset}"), ("tail offset", f"{h.tail_offset}")]
    out.write(render_table([], [[k + ":", v] for k, v in pairs], underline=False) + "\n")
    if not cols:
        return EXIT_OK
    rows = []
    for c in cols:
        name = c["name"] + (" (hidden)" if c["hidden"] else "")
        meta = "; ".join(f"{k}: {v if v is not None else '<unreadable>'}"
                         for k, v in c["metadata"].items())
        rows.append([str(c["index"]), name, c["type"] or "<unreadable>", c["codec"],
                     c["compression"], str(c["rows_per_block"]),
                     *("?" if c[k] is None else str(c[k]) for k in ("blocks", "bytes_disk",
                                                                     "bytes")),
                     meta])
    known = [c for c in cols if c["bytes_disk"] is not None]
    rows.append(["", "total", "", "", "", "", "",
                 str(sum(c["bytes_disk"] for c in known)), str(sum(c["bytes"] for c in known)),
                 ""])
    out.write("\n" + render_table(
        ["#", "name", "type", "codec", "compression", "rows/block", "blocks", "disk bytes",
         "raw bytes", "metadata"], rows, right={0, 5, 6, 7, 8}) + "\n")
    for c in cols:
        if not c["readable"]:
            out.write(f"\ncolumn {c['index']} {c['name']!r} is unreadable: {c['error']}\n")
    return EXIT_OK


def _select(f, spec):
    if spec is None:
        return [c for c in f.columns if c.readable and not _hidden(f, c)]
    cols = []
    for name in (s.strip() for s in spec.split(",")):
        if name in f:
            cols.append(f[name])
        elif name.lstrip("-").isdigit() and -f.num_columns <= int(name) < f.num_columns:
            cols.append(f.columns[int(name)])
        else:
            raise CliError(f"no column {name!r}; columns: {', '.join(f.column_names) or 'none'}",
                           EXIT_USAGE)
    return cols


def cmd_head(f, args, out):
    cols = _select(f, args.columns)
    n = f.num_rows
    start = args.start + n if args.start < 0 else args.start
    start = min(max(start, 0), n)
    stop = min(start + args.n, n)
    data = [c[start:stop] for c in cols]   # slicing decodes only the blocks holding the rows
    if args.json:
        return _dump_json({
            "file": args.file, "num_rows": n, "start": start,
            "columns": [{"index": c.index, "name": c.name, "type": str(c.type)} for c in cols],
            "data": [[cell_json(d[i], c.type) for c, d in zip(cols, data)]
                     for i in range(stop - start)],
        }, out, rows_key="data")
    if not cols:
        out.write(f"({n} rows, no columns)\n")
        return EXIT_OK
    header = [["#"] + [c.name for c in cols], [""] + [str(c.type) for c in cols]]
    rows = [[str(start + i)] + [cell_str(d[i], c.type) for c, d in zip(cols, data)]
            for i in range(stop - start)]
    right = {0} | {j + 1 for j, c in enumerate(cols) if _is_numeric(c.type)}
    out.write(render_table(header, rows, right=right, max_width=args.max_width) + "\n")
    out.write(f"(rows {start}-{stop - 1} of {n})\n" if stop > start else f"(0 rows of {n})\n")
    return EXIT_OK


def cmd_schema(f, args, out):
    if args.json:
        return _dump_json({"num_rows": f.num_rows, "columns": [
            {"index": fl.index, "name": fl.name, "type": None if fl.type is None else str(fl.type),
             "codec": fl.codec, "hidden": fl.hidden,
             "metadata": {k: (None if v is None else str(v))
                          for k, v in fl.metadata_types.items()}}
            for fl in f.schema]}, out)
    s = str(f.schema)
    out.write(s + "\n" if s else "(no columns)\n")
    return EXIT_OK


# ---------------------------------------------------------------- verify

_VERIFY_GROUP_BYTES = 32 << 20   # decompressed bytes decoded per call while verifying


class _Report:
    """What `idv verify` found: problems (the file is not sound) and warnings (parts it could
    not check), each a dict with a location and a message."""

    def __init__(self):
        self.problems = []
        self.warnings = []
        self.columns = []
        self.blocks = self.blocks_bytes = self.metadata = self.lookups = 0

    def problem(self, what, message, column=None, **where):
        self.problems.append(_finding(what, message, column, where))

    def warning(self, what, message, column=None, **where):
        self.warnings.append(_finding(what, message, column, where))


def _finding(what, message, column, where):
    d = {"what": what}
    if column is not None:
        d["column"] = column.index
        d["name"] = column.name
    d.update({k: v for k, v in where.items() if v is not None})
    d["message"] = " ".join(str(message).split())
    return d


# the location the reader puts in front of its messages, which the report gives itself
_READER_WHERE = re.compile(r"""^column \d+ (?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
                           r"(?: blocks? \d+(?:-\d+)?(?: \([^)]*\))?"
                           r"(?: at byte \d+ \([^)]*\))?)?: ")


def _detail(message):
    return _READER_WHERE.sub("", message, count=1) or message


def _block_groups(raw, limit):
    """Contiguous runs of blocks of at most `limit` decompressed bytes (or one larger block)."""
    groups, start, size = [], 0, 0
    for i, n in enumerate(raw.tolist()):
        if i > start and size + n > limit:
            groups.append((start, i))
            start, size = i, 0
        size += n
    if len(raw):
        groups.append((start, len(raw)))
    return groups


def _bad_lookup_entries(col, tail):
    """The lookup entries of a column that point outside the file, from the raw table bytes
    (the reader stops at the first one)."""
    e = col._entry
    nb = col.num_blocks
    try:
        buf = col._file._source.view(e.lookup_offset, 16 * nb)
    except IdvFormatError:
        return []
    table = np.frombuffer(bytes(buf), _lookup.ENTRY, nb)
    off, disk, raw = (table[k].astype(np.int64) for k in ("offset", "disk", "raw"))
    bad = (disk < 0) | (raw < 0) | (off < _header.HEADER_SIZE) | (off > tail - disk)
    return [(int(b), int(off[b]), int(disk[b])) for b in np.flatnonzero(bad)]


def _verify_column(f, col, report, ranges):
    entry = col._entry
    info = {"index": col.index, "name": col.name,
            "type": None if col.type is None else str(col.type), "codec": col.codec_name,
            "blocks": col.num_blocks, "blocks_ok": 0, "metadata": 0, "checked": col.readable}
    report.columns.append(info)
    if not col.readable:
        report.warning("column", f"not checked: {col._dead}", col)
    # the lookup table (parsed and checked even for a column whose codec is unknown)
    table = None
    nb = col.num_blocks
    if nb:
        try:
            table = col.lookup
            report.lookups += 1
            ranges.append((entry.lookup_offset, 16 * nb, f"column {col.index} {col.name!r} "
                                                         f"lookup table"))
        except IdvFormatError as e:
            message = _detail(str(e))
            first = re.search(r"\bblock (\d+)", str(e))
            b = None if first is None else int(first.group(1))
            report.problem("lookup", message, col, block=b,
                           offset=entry.lookup_offset + 16 * (b or 0))
            for b, off, disk in _bad_lookup_entries(col, f.header.tail_offset):
                if first is None or int(first.group(1)) != b:
                    report.problem("lookup", f"block {b}: {disk} bytes at offset {off} lie "
                                   f"outside the file or have a negative length", col, block=b,
                                   offset=entry.lookup_offset + 16 * b)
            if col.readable:
                report.warning("column", "blocks not checked: the lookup table is invalid", col)
    if table is not None:
        for b, (off, disk) in enumerate(zip(table["offset"].tolist(), table["disk"].tolist())):
            ranges.append((off, disk, f"column {col.index} {col.name!r} block {b}"))
    # every block, decoded; a failing group is decoded again block by block to find them all
    if table is not None and col.readable:
        for g0, g1 in _block_groups(table["raw"].astype(np.int64), _VERIFY_GROUP_BYTES):
            try:
                col._read_blocks(g0, g1)
                ok = range(g0, g1)
            except IdvFormatError:
                ok = []
                for b in range(g0, g1):
                    try:
                        col._read_blocks(b, b + 1)
                        ok.append(b)
                    except IdvFormatError as e:
                        r0, r1 = col._block_rows(b)
                        report.problem("block", _detail(str(e)), col, block=b,
                                       rows=[r0, r1 - 1], offset=int(table["offset"][b]),
                                       size=int(table["disk"][b]))
            for b in ok:
                info["blocks_ok"] += 1
                report.blocks += 1
                report.blocks_bytes += int(table["disk"][b])
    # metadata: the table, then every value
    try:
        entries = col._meta_entries()
    except IdvFormatError as e:
        report.problem("metadata", _detail(str(e)), col, offset=entry.metadata_offset)
        return
    for m in entries:
        ranges.append((m.offset, m.size, f"column {col.index} {col.name!r} metadata {m.kind!r}"))
        try:
            _codecs.resolve(m.codec_name, m.codec_params, col._meta_where(m))
        except UnsupportedCodecError as e:
            report.warning("metadata", f"{m.kind!r} not checked: {e}", col, kind=m.kind,
                           offset=m.offset)
            continue
        except IdvFormatError as e:
            report.problem("metadata", f"{m.kind!r}: {e}", col, kind=m.kind, offset=m.offset)
            continue
        if m.compression not in _compression.NAMES:
            report.warning("metadata", f"{m.kind!r} not checked: unknown compression kind "
                           f"{m.compression}", col, kind=m.kind, offset=m.offset)
            continue
        try:
            col._decode_metadata(m)
        except IdvFormatError as e:
            message = str(e)
            prefix = f"{col._where()} metadata {m.kind!r} (block at byte {m.offset}): "
            report.problem("metadata", message[len(prefix):] if message.startswith(prefix)
                           else message, col, kind=m.kind, offset=m.offset, size=m.size)
            continue
        info["metadata"] += 1
        report.metadata += 1


def _check_layout(f, report, ranges):
    """Every block, lookup table and metadata value in its own bytes: overlaps are corrupt."""
    h = f.header
    ranges = ranges + [(0, _header.HEADER_SIZE, "the header"),
                       (h.tail_offset, 8, "the tail signature")]
    if f.num_columns:
        ranges.append((h.toc_offset, h.tail_offset - h.toc_offset, "the table of contents"))
    ranges = sorted((r for r in ranges if r[1] > 0), key=lambda r: (r[0], -r[1]))
    end, owner = -1, None
    for start, size, what in ranges:
        if start < end:
            report.problem("layout", f"{what} (bytes {start}-{start + size - 1}) overlaps "
                           f"{owner[2]} (bytes {owner[0]}-{owner[0] + owner[1] - 1})",
                           offset=start, size=size)
        if start + size > end:
            end, owner = start + size, (start, size, what)


def verify(f, report):
    """Check everything in an open file; findings go to `report`."""
    ranges = []
    for col in f.columns:
        _verify_column(f, col, report, ranges)
    _check_layout(f, report, ranges)


def cmd_verify(args, out):
    report = _Report()
    f = None
    try:
        try:
            f = open_file(args.file, threads=args.threads, backend=args.backend)
        except IdvFormatError as e:
            report.problem("file", e)
        if f is not None:
            verify(f, report)
    finally:
        if f is not None:
            f.close()
    ok = not report.problems and not (args.strict and report.warnings)
    checked = {"columns": sum(c["checked"] for c in report.columns),
               "blocks": report.blocks, "block_bytes": report.blocks_bytes,
               "lookup_tables": report.lookups, "metadata": report.metadata}
    if args.json:
        _dump_json({"file": args.file, "ok": ok,
                    "num_rows": None if f is None else f.num_rows,
                    "num_columns": None if f is None else f.num_columns,
                    "checked": checked, "problems": report.problems,
                    "warnings": report.warnings, "columns": report.columns}, out)
    else:
        status = _plural(len(report.problems), "problem") if report.problems else "OK"
        if report.warnings:
            status += ", " + _plural(len(report.warnings), "warning")
        out.write(f"{args.file}: {status}\n")
        for p in report.problems:
            out.write(f"  {_where_str(p)}: {p['message']}\n")
        for w in report.warnings:
            out.write(f"  warning: {_where_str(w)}: {w['message']}\n")
        if f is not None:
            out.write(f"checked {checked['columns']} of {_plural(f.num_columns, 'column')}, "
                      f"{_plural(checked['blocks'], 'block')} "
                      f"({_plural(checked['block_bytes'], 'byte')}), "
                      f"{_plural(checked['lookup_tables'], 'lookup table')}, "
                      f"{_plural(checked['metadata'], 'metadata value')}; "
                      f"{_plural(f.num_rows, 'row')}\n")
    out.flush()
    if not ok:
        why = (_plural(len(report.problems), "problem") + " found" if report.problems
               else _plural(len(report.warnings), "warning") + " (--strict)")
        print(f"idv: error: {args.file}: {why}", file=sys.stderr)
        return EXIT_BAD_FILE
    return EXIT_OK


def _plural(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"


def _where_str(d):
    parts = []
    if "column" in d:
        parts.append(f"column {d['column']} {d['name']!r}")
    if d["what"] == "lookup":
        parts.append("lookup table" + (f" entry {d['block']}" if "block" in d else ""))
    elif d["what"] == "block":
        parts.append(f"block {d['block']} (rows {d['rows'][0]}-{d['rows'][1]})")
    elif d["what"] == "metadata":
        parts.append(f"metadata {d['kind']!r}" if "kind" in d else "metadata table")
    elif d["what"] == "file":
        parts.append("file")
    elif d["what"] == "layout":
        parts.append("layout")
    if "offset" in d:
        parts.append(f"at byte {d['offset']}" + (f" ({d['size']} bytes)" if "size" in d else ""))
    return " ".join(parts)


# ---------------------------------------------------------------- cat

_CAT_GROUP_ROWS = 8192   # rows decoded at a time per column (whole blocks), when streaming


def parse_rows(spec):
    """'A:B', 'A:B:STEP', 'A:', ':B' or 'N' (Python slice rules) -> a slice."""
    parts = spec.split(":")
    try:
        if len(parts) == 1:
            i = int(parts[0])
            return slice(i, i + 1 if i != -1 else None)
        if len(parts) > 3:
            raise ValueError
        a, b, *c = (int(p) if p.strip() else None for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected A:B, A:B:STEP or a row number, got {spec!r}") from None
    step = c[0] if c else None
    if step is not None and step <= 0:
        raise argparse.ArgumentTypeError(f"the step must be positive, got {step}")
    return slice(a, b, step)


def _row_pieces(col, rows, group_rows=_CAT_GROUP_ROWS):
    """The column's values at `rows` (a range with a positive step), piece by piece; each
    piece decodes a run of whole blocks, and no block is decoded twice."""
    if len(rows) == 0:
        return
    span = col.rows_per_block * max(1, group_rows // col.rows_per_block)
    r, last, step = rows.start, rows[-1], rows.step
    while r <= last:
        stop = min((r // span + 1) * span, last + 1)
        piece = col[r:stop:step]
        yield piece
        r += len(range(r, stop, step)) * step


def iter_row_batches(cols, rows, group_rows=_CAT_GROUP_ROWS):
    """Batches of rows: lists holding each column's values for the same consecutive rows."""
    streams = [_row_pieces(c, rows, group_rows) for c in cols]
    bufs, offs = [None] * len(cols), [0] * len(cols)
    done = 0
    while done < len(rows):
        for i, s in enumerate(streams):
            while bufs[i] is None or offs[i] == _length(bufs[i]):
                bufs[i], offs[i] = next(s), 0
        m = min(_length(b) - o for b, o in zip(bufs, offs))
        yield [b[o:o + m] for b, o in zip(bufs, offs)]
        offs = [o + m for o in offs]
        done += m


def _length(x):
    return x.shape[0] if hasattr(x, "shape") else len(x)


def _csv_item(x, item):
    v = item_json(x, item)
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def csv_cell(value, type_):
    """A cell for CSV/TSV: scalars as in JSON (dates ISO 8601, NaN, true/false), vectors as a
    JSON array of all their items."""
    if isinstance(type_, T.Vector):
        return json.dumps(cell_json(value, type_), ensure_ascii=False, separators=(",", ":"))
    return _csv_item(value, type_)


def _cat_columns_json(cols):
    return [{"index": c.index, "name": c.name, "type": str(c.type)} for c in cols]


def cmd_cat(f, args, out):
    cols = _select(f, args.columns)
    n = f.num_rows
    rows = range(n)[args.rows] if args.rows is not None else range(n)
    fmt = "json" if args.json else args.format
    batches = iter_row_batches(cols, rows) if cols else iter(())
    if fmt == "table":
        return _cat_table(cols, rows, batches, args, out, n)
    if fmt in ("csv", "tsv"):
        w = csv.writer(out, delimiter="," if fmt == "csv" else "\t", lineterminator="\n")
        if not args.no_header:
            w.writerow([c.name for c in cols])
        for batch in batches:
            w.writerows(zip(*([csv_cell(v, c.type) for v in d] for c, d in zip(cols, batch))))
        return EXIT_OK
    ascii_only = (getattr(out, "encoding", None) or "").lower().replace("-", "") != "utf8"
    if fmt == "jsonl":
        names = [c.name for c in cols]
        for batch in batches:
            for values in zip(*([cell_json(v, c.type) for v in d]
                                for c, d in zip(cols, batch))):
                out.write(json.dumps(dict(zip(names, values)), ensure_ascii=ascii_only) + "\n")
        if not cols:
            out.write("{}\n" * len(rows))
        return EXIT_OK
    # json: head's layout, written row by row
    mark = "\x00rows\x00"
    head = json.dumps({"file": args.file, "num_rows": n,
                       "rows": {"start": rows.start, "stop": rows.stop, "step": rows.step,
                                "count": len(rows)},
                       "columns": _cat_columns_json(cols), "data": mark},
                      indent=2, ensure_ascii=ascii_only)
    before, after = head.split(json.dumps(mark))
    out.write(before + "[")
    first = True
    lines = (json.dumps(list(values), ensure_ascii=ascii_only)
             for batch in batches
             for values in zip(*([cell_json(v, c.type) for v in d] for c, d in zip(cols, batch))))
    if not cols:
        lines = ("[]" for _ in rows)
    for line in lines:
        out.write(("\n    " if first else ",\n    ") + line)
        first = False
    out.write(("]" if first else "\n  ]") + after + "\n")
    return EXIT_OK


def _cat_table(cols, rows, batches, args, out, n):
    if not cols:
        out.write(f"({len(rows)} rows, no columns)\n")
        return EXIT_OK
    body = []
    r = iter(rows)
    for batch in batches:
        for values in zip(*([cell_str(v, c.type) for v in d] for c, d in zip(cols, batch))):
            body.append([str(next(r)), *values])
    header = [["#"] + [c.name for c in cols], [""] + [str(c.type) for c in cols]]
    right = {0} | {j + 1 for j, c in enumerate(cols) if _is_numeric(c.type)}
    out.write(render_table(header, body, right=right, max_width=args.max_width) + "\n")
    shown = len(body)
    out.write(f"({shown} row{'s' * (shown != 1)} of {n})\n")
    return EXIT_OK


# ---------------------------------------------------------------- convert

def _progress_callback(args):
    """(callback, close) for a tqdm bar on stderr, or (None, no-op) when not wanted or tqdm is
    not installed. The bar shows by default only when stderr is a terminal."""
    show = args.progress if args.progress is not None else _isatty(sys.stderr)
    if not show:
        return None, lambda: None
    try:
        from tqdm import tqdm
    except ImportError:
        return None, lambda: None
    bars = []

    def progress(done, total):
        if not bars:
            bars.append(tqdm(total=total, unit=" rows", unit_scale=True, file=sys.stderr,
                             desc=os.path.basename(args.output), dynamic_ncols=True))
        bar = bars[0]
        if total is not None and bar.total != total:
            bar.total = total
        if done > bar.n:
            bar.update(done - bar.n)

    def close():
        if bars:
            bars[0].close()
    return progress, close


def _isatty(stream):
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _load_convert():
    import importlib
    try:
        module = importlib.import_module("idv.convert")   # idv.convert is also the function
    except ImportError as e:
        if getattr(e, "name", None) in ("idv.convert", "idv.convert.convert"):
            raise CliError("idv convert is not available: this installation has no "
                           "idv.convert module") from None
        raise CliError(f"idv convert needs {e.name or e}: install it with pip") from None
    return module


def _convert_format(module, path, given, what):
    """The format name convert will use, or a usage error naming the choices."""
    formats = sorted(set(module.FORMATS.values()))
    if given is not None:
        fmt = given.lower().lstrip(".")
        fmt = "arrow" if fmt == "ipc" else fmt
        if fmt not in formats:
            raise CliError(f"unknown {what} format {given!r}; one of: {', '.join(formats)}",
                           EXIT_USAGE)
        return fmt
    ext = os.path.splitext(path)[1].lower()
    if ext not in module.FORMATS:
        raise CliError(f"cannot tell the {what} format of {path!r} from its extension "
                       f"(known: {', '.join(sorted(module.FORMATS))}); give --to", EXIT_USAGE)
    return module.FORMATS[ext]


def _convert_columns(args, src, src_fmt):
    """--columns as convert takes them: names, or for an .idv source indices too."""
    if not args.columns:
        return None
    names = [s.strip() for s in args.columns.split(",")]
    if src_fmt != "idv":
        return names
    with open_file(src) as f:
        return [c.name if f[c.name] is c else c.index for c in _select(f, args.columns)]


def cmd_convert(args, out):
    module = _load_convert()
    src = args.input
    tmpdir = None
    zipped = _split_zip(src)
    try:
        if zipped is not None:   # an .idv inside a zip: convert a copy of the entry
            archive, entry = zipped
            import tempfile
            with zipfile.ZipFile(archive) as z:
                info = z.getinfo(_zip_entry(z, entry))
                tmpdir = tempfile.mkdtemp(prefix="idv-convert-")
                src = os.path.join(tmpdir, "entry.idv")
                with z.open(info) as fin, open(src, "wb") as fout:
                    while True:
                        chunk = fin.read(1 << 20)
                        if not chunk:
                            break
                        fout.write(chunk)
        elif not os.path.exists(src):
            raise CliError(f"{src}: no such file")
        elif os.path.isdir(src):
            raise CliError(f"{src}: is a directory")
        return _convert(module, src, args, out)
    finally:
        if tmpdir is not None:
            import shutil
            shutil.rmtree(tmpdir, ignore_errors=True)


def _convert(module, src, args, out):
    src_fmt = _convert_format(module, src, args.source_format, "input")
    dst_fmt = _convert_format(module, args.output, args.to, "output")
    if dst_fmt == "idv" and args.compression not in ("none", "deflate"):
        raise CliError(f"--compression {args.compression!r}: an .idv is compressed with "
                       f"none or deflate", EXIT_USAGE)
    if os.path.exists(args.output) and os.path.samefile(src, args.output):
        raise CliError(f"{args.output}: the output would overwrite the input", EXIT_USAGE)
    columns = _convert_columns(args, src, src_fmt)
    progress, close = _progress_callback(args)
    try:
        rows = module.convert(src, args.output, to=dst_fmt, source_format=src_fmt,
                              columns=columns, compression=args.compression,
                              rows_per_block=args.rows_per_block, progress=progress,
                              datetime=args.datetime, safe=not args.floor_datetime)
    except KeyError as e:      # a column the source does not have
        raise CliError(str(e.args[0]) if e.args else str(e), EXIT_USAGE) from None
    except ValueError as e:
        if "safe=False" not in str(e):
            raise
        raise CliError(f"{e} (on the command line: --floor-datetime or --datetime ticks)",
                       EXIT_BAD_FILE) from None
    finally:
        close()
    summary = {"input": args.input, "output": args.output, "input_format": src_fmt,
               "output_format": dst_fmt, "rows": rows if isinstance(rows, int) else None,
               "bytes": os.path.getsize(args.output) if os.path.exists(args.output) else None}
    if args.json:
        return _dump_json(summary, out)
    if not args.quiet:
        print(f"idv: {args.input} -> {args.output}: {_plural(summary['rows'] or 0, 'row')}, "
              f"{dst_fmt}, {_plural(summary['bytes'] or 0, 'byte')}", file=sys.stderr)
    return EXIT_OK


def _dump_json(obj, out, rows_key=None):
    """Indented JSON; the list under `rows_key` gets one line per row."""
    enc = (getattr(out, "encoding", None) or "").lower().replace("-", "")
    ascii_only = enc != "utf8"
    rows = obj.get(rows_key) if rows_key else None
    if rows is None:
        json.dump(obj, out, indent=2, ensure_ascii=ascii_only)
    else:
        mark = "\x00rows\x00"
        text = json.dumps({**obj, rows_key: mark}, indent=2, ensure_ascii=ascii_only)
        body = ",\n".join("    " + json.dumps(r, ensure_ascii=ascii_only) for r in rows)
        out.write(text.replace(json.dumps(mark), f"[\n{body}\n  ]" if rows else "[]"))
    out.write("\n")
    return EXIT_OK


# ---------------------------------------------------------------- argument parsing

def _nonneg(s):
    v = int(s)
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {v}")
    return v


def _positive(s):
    v = int(s)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {v}")
    return v


def _reading_options(p, json_help="print JSON instead of text"):
    p.add_argument("--json", action="store_true", help=json_help)
    p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                   help="show a traceback on errors")
    p.add_argument("--backend", default=None,
                   help="DEFLATE library: libdeflate, isal or zlib (default: the fastest)")
    p.add_argument("--threads", type=_nonneg, default=None,
                   help="decoding threads (default: the CPUs available)")


def _columns_option(p):
    p.add_argument("--columns", "-c", metavar="A,B,...",
                   help="comma-separated column names (or indices); default: all readable, "
                        "visible columns")


FILE_HELP = "an .idv file, or ARCHIVE.zip:ENTRY for one inside a zip"


def build_parser():
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("file", metavar="FILE", help=FILE_HELP)
    _reading_options(common)

    p = argparse.ArgumentParser(
        prog="idv", description="Inspect, check and convert ML.NET binary dataview (.idv) "
                                "files.",
        epilog="Exit codes: 0 ok, 1 unreadable or invalid file, 2 usage error. "
               "`idv COMMAND --help` describes each command.")
    p.add_argument("-v", "--verbose", action="store_true", default=False,
                   help="show a traceback on errors")
    p.add_argument("--version", action="version", version=f"idv {idv.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    s = sub.add_parser("info", parents=[common], help="header and per-column layout",
                       description="Header (version, rows, offsets) and, per column: type, "
                                   "codec, compression, rows per block, blocks, bytes on disk "
                                   "and decompressed, metadata kinds with their types.")
    s.set_defaults(run=cmd_info)

    s = sub.add_parser("head", parents=[common], help="the first rows",
                       description="The first rows as a table; only the blocks holding them "
                                   "are decoded.")
    s.add_argument("-n", type=_nonneg, default=10, metavar="N", help="rows to show (default 10)")
    s.add_argument("--start", type=int, default=0, metavar="ROW",
                   help="first row to show (negative: from the end)")
    _columns_option(s)
    s.add_argument("--max-width", type=_nonneg, default=40, metavar="W",
                   help="clip table cells to W characters (default 40, 0: no limit)")
    s.set_defaults(run=cmd_head)

    s = sub.add_parser("schema", parents=[common], help="the column names and types",
                       description="The schema, as print(f.schema) shows it.")
    s.set_defaults(run=cmd_schema)

    s = sub.add_parser(
        "verify", parents=[common], help="check every byte: blocks, lookup tables, metadata",
        description="Decode every block of every column and every metadata value, and check "
                    "every offset and length: the header, the table of contents, each lookup "
                    "table, that blocks, lookup tables and metadata do not overlap. Prints "
                    "each problem found with its column, block and byte offset.",
        epilog="Exit codes: 0 sound (warnings, such as a column whose codec this reader does "
               "not know, are listed but do not fail it unless --strict), 1 problems found or "
               "the file cannot be opened, 2 usage error.")
    s.add_argument("--strict", action="store_true",
                   help="fail on warnings too (parts that could not be checked)")
    s.set_defaults(run=cmd_verify, opens_file=False)

    for name, aliases in (("cat", ["slice"]),):
        s = sub.add_parser(
            name, aliases=aliases, parents=[common], help="print rows as a table, CSV or JSON",
            description="Print rows (all, or --rows A:B) of some or all columns as an aligned "
                        "table, CSV, TSV, JSON or JSON lines. Only the blocks holding the rows "
                        "asked for are decoded; CSV, TSV and JSON stream block by block. "
                        "`idv slice` is the same command.",
            epilog="Rows follow Python's slice rules: 10:20, 100:, :50, -10: (write "
                   "--rows=-10: since the value starts with '-'), ::1000, or one row number. "
                   "In CSV and TSV, vectors are one cell holding a JSON array; dates are ISO "
                   "8601, booleans true/false, keys their raw integers.")
        s.add_argument("--rows", "-r", type=parse_rows, default=None, metavar="A:B",
                       help="rows to print, as a Python slice A:B[:STEP] (default: all)")
        _columns_option(s)
        s.add_argument("--format", "-f", choices=["table", "csv", "tsv", "json", "jsonl"],
                       default="table", help="output format (default: table; --json is "
                                             "--format json)")
        s.add_argument("--no-header", action="store_true",
                       help="CSV/TSV: leave out the line of column names")
        s.add_argument("--max-width", type=_nonneg, default=40, metavar="W",
                       help="table: clip cells to W characters (default 40, 0: no limit)")
        s.set_defaults(run=cmd_cat)

    s = sub.add_parser(
        "convert", help="convert to or from .idv (Parquet, Arrow, CSV, ...)",
        description="Convert INPUT to OUTPUT: an .idv to another format, another format to "
                    ".idv, or an .idv to an .idv with other columns, compression or block size. "
                    "Formats are guessed from the file extensions unless --to is given. A "
                    "progress bar is shown on a terminal (with tqdm installed).")
    s.add_argument("input", metavar="INPUT", help="the file to convert (" + FILE_HELP + ")")
    s.add_argument("output", metavar="OUTPUT", help="the file to write")
    s.add_argument("--to", metavar="FORMAT", default=None,
                   help="output format: idv, parquet, csv, tsv, feather or arrow (default: "
                        "from OUTPUT's extension)")
    s.add_argument("--from", dest="source_format", metavar="FORMAT", default=None,
                   help="input format (default: from INPUT's extension)")
    _columns_option(s)
    s.add_argument("--compression", default="deflate", metavar="NAME",
                   help="an .idv output: none or deflate (default); Parquet and Feather: "
                        "a pyarrow codec (zstd, snappy, lz4, none...)")
    s.add_argument("--rows-per-block", type=_positive, default=None, metavar="N",
                   help="rows per block of an .idv output (default: ML.NET's rule)")
    s.add_argument("--datetime", choices=("us", "ns", "ticks"), default="us",
                   help="DateTime/TimeSpan on the Arrow side: microseconds (default), "
                        "nanoseconds (years 1677-2262 only) or exact int64 .NET ticks")
    s.add_argument("--floor-datetime", action="store_true",
                   help="floor ticks finer than the --datetime unit instead of failing")
    s.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show a progress bar (default: when stderr is a terminal)")
    s.add_argument("-q", "--quiet", action="store_true",
                   help="print nothing when done (default: a one-line summary on stderr)")
    s.add_argument("--json", action="store_true",
                   help="print a JSON summary (rows, columns, bytes) on stdout")
    s.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                   help="show a traceback on errors")
    s.set_defaults(run=cmd_convert, opens_file=False, file=None)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:      # --help / --version (0) or a usage error (2)
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    if getattr(args, "max_width", None) == 0:
        args.max_width = None
    out = sys.stdout
    if isinstance(out, io.TextIOWrapper):
        out.reconfigure(errors="backslashreplace")
    with warnings.catch_warnings():
        warnings.simplefilter("always", idv.IdvWarning)
        warnings.showwarning = functools.partial(_show_warning, args, warnings.showwarning)
        return _run(args, out)


def _show_warning(args, default, message, category, filename, lineno, file=None, line=None):
    """IdvWarnings as one line ``idv: warning: ...`` on stderr, printed as they happen."""
    if not issubclass(category, idv.IdvWarning):
        return default(message, category, filename, lineno, file, line)
    if args.command in ("info", "schema", "verify") and \
            str(message).startswith("cannot interpret column"):
        return None   # these show unreadable columns themselves
    print(f"idv: warning: {message}", file=sys.stderr)


def _run(args, out):
    f = None
    try:
        if not getattr(args, "opens_file", True):
            return args.run(args, out)
        f = open_file(args.file, threads=args.threads, backend=args.backend)
        return args.run(f, args, out)
    except CliError as e:
        return _fail(args, str(e), e.code)
    except IdvFormatError as e:
        return _fail(args, str(e), EXIT_BAD_FILE)
    except MemoryError:
        return _fail(args, "out of memory", EXIT_BAD_FILE)
    except BrokenPipeError:
        # the reader went away (idv head big.idv | head -3): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except OSError as e:
        if args.command == "convert":   # e.g. the output's directory does not exist
            if e.strerror is None or e.filename is None:
                return _fail(args, str(e), EXIT_BAD_FILE)
            name = e.filename
            if os.path.basename(str(name)).endswith(".tmp"):   # convert's temporary file
                name = args.output
            return _fail(args, f"{name}: {e.strerror}", EXIT_BAD_FILE)
        return _fail(args, f"internal error, please report: {type(e).__name__}: {e}",
                     EXIT_BAD_FILE)
    except (ValueError, TypeError) as e:
        if args.command == "convert":   # refused by the converter: the input or the options
            return _fail(args, str(e), EXIT_BAD_FILE)
        return _fail(args, f"internal error, please report: {type(e).__name__}: {e}",
                     EXIT_BAD_FILE)
    except Exception as e:   # a bug in idv: say so, on one line unless -v
        return _fail(args, f"internal error, please report: {type(e).__name__}: {e}",
                     EXIT_BAD_FILE)
    finally:
        if f is not None:
            f.close()


def _fail(args, message, code):
    if args.verbose:
        traceback.print_exc()
    message = " ".join(str(message).split("\n"))
    print(f"idv: error: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":   # pragma: no cover
    sys.exit(main())
