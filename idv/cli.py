"""The ``idv`` command: look inside .idv files from the shell.

    idv info FILE [--json]           header and per-column layout (codec, blocks, bytes, metadata)
    idv head FILE [-n N] [--columns a,b] [--json]   the first rows (decodes only their blocks)
    idv schema FILE [--json]         the schema, as ``print(f.schema)``

FILE is a path, or ``archive.zip:entry/path`` for an .idv inside a zip (e.g. an ML.NET model).
Exit codes: 0 ok, 1 unreadable or invalid file, 2 usage error.
"""
from __future__ import annotations

import argparse
import functools
import io
import json
import math
import os
import sys
import traceback
import unicodedata
import warnings
import zipfile

import numpy as np

import idv
from idv import types as T
from idv.errors import IdvFormatError

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


def build_parser():
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("file", metavar="FILE",
                        help="an .idv file, or ARCHIVE.zip:ENTRY for one inside a zip")
    common.add_argument("--json", action="store_true", help="print JSON instead of text")
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="show a traceback on errors")
    common.add_argument("--backend", default=None,
                        help="DEFLATE library: libdeflate, isal or zlib (default: the fastest)")
    common.add_argument("--threads", type=_nonneg, default=None,
                        help="decoding threads (default: the CPUs available)")

    p = argparse.ArgumentParser(
        prog="idv", description="Inspect ML.NET binary dataview (.idv) files.",
        epilog="Exit codes: 0 ok, 1 unreadable or invalid file, 2 usage error.")
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
    s.add_argument("--columns", "-c", metavar="A,B,...",
                   help="comma-separated column names (or indices); default: all readable, "
                        "visible columns")
    s.add_argument("--max-width", type=_nonneg, default=40, metavar="W",
                   help="clip table cells to W characters (default 40, 0: no limit)")
    s.set_defaults(run=cmd_head)

    s = sub.add_parser("schema", parents=[common], help="the column names and types",
                       description="The schema, as print(f.schema) shows it.")
    s.set_defaults(run=cmd_schema)
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
    if args.command != "head" and str(message).startswith("cannot interpret column"):
        return None   # info and schema show unreadable columns themselves
    print(f"idv: warning: {message}", file=sys.stderr)


def _run(args, out):
    f = None
    try:
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
