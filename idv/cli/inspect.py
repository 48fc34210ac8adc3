"""The commands that look inside a file or a dataset: info, schema, head and cat (alias
slice).

Each takes `src`, an open IdvFile or an idv.Dataset (opener.open_sources). Rows are read
through ``source_batches`` (idv._scan.scan), file after file for a dataset, each file opened only
when its rows are reached; columns are chosen by ``select_columns`` (idv._reader.selection) among
the file's or the dataset's. """
from __future__ import annotations

import argparse
import collections
import json
import os

import numpy as np

from idv._scan import filter_tree, filters, scan
from idv._reader import selection
from idv._values import vectors
from idv._values.cells import cell_json
from idv.cli import options
from idv.cli.errors import EXIT_OK, EXIT_USAGE, CliError
from idv.cli.render import (FileColumns, Table, ascii_only, cell_str, dump_json, safe_text,
                            is_numeric, plural, render_table, value_str)
from idv._reader.dataset import Dataset
from idv._interop.delimited import DelimitedWriter, JsonLinesWriter
from idv._resources.budget import MemoryLimitError
from idv.errors import IdvFormatError, no_column

CAT_GROUP_ROWS = 8192   # rows decoded at a time (whole blocks), when streaming


def _hidden(f, c):
    return f[c.name] is not c


def first_file(src):
    """The file whose columns stand for the source's: the file, or a dataset's first."""
    return src.open_file(0) if isinstance(src, Dataset) else src


def select_columns(src, spec):
    """--columns A,B (names, indices or globs such as 'Feature*', idv._reader.selection's rule) ->
    Columns (of a dataset's first file; an index is the dataset's, as `idv schema` lists its
    columns and Dataset.read takes it, refused where a file has hidden columns); default: the
    readable, visible ones."""
    f = first_file(src)
    pool = f.columns if f is src else [f[n] for n in src.column_names]
    if spec is None:
        return [c for c in pool if c.readable and not _hidden(f, c)]
    names = [c.name for c in pool]
    picks = [int(s) if s not in names and s.lstrip("-").isdigit() else s
             for s in options.column_list(spec, names)]
    try:
        if f is not src:
            src.refuse_hidden_indices(picks)
        return [pool[i] for i in selection.positions(names, picks, globs=True)]
    except (KeyError, IndexError, ValueError) as e:
        raise CliError(e.args[0], EXIT_USAGE) from None


def _keys(src, cols):
    """How the scan names columns `cols` (select_columns'): a dataset's by name, a file's by
    index (a name would be the last column of that name, not a hidden one picked)."""
    return [c.name for c in cols] if isinstance(src, Dataset) else [c.index for c in cols]


def source_batches(src, cols, rows, stream=True, parts=None):
    """Batches of `rows` (a range with a positive step) of the columns `cols`
    (select_columns'), file after file, through the scan; the file of each goes on to
    `parts` (a list) first. To stream: groups of whole blocks of about CAT_GROUP_ROWS rows,
    each decoded when reached (output often stops early, as into head); else the scan's
    windows (a few rows: their blocks decoded together)."""
    columns = _keys(src, cols)
    how = dict(batch_rows=CAT_GROUP_ROWS, window_bytes=1, ahead=0) if stream else \
        dict(batch_rows=None)
    for batch in scan.scan(src, columns, rows=rows, **how):
        if parts is not None:
            parts.append(batch.part)
        yield batch.values


def filtered_batches(src, cols, rows, where, numbers, parts):
    """source_batches' batches of the rows that match `where` (idv._scan.filters), streamed; each
    matching row's number goes on to `numbers` (a deque), and its file to `parts`, before its
    batch is given."""
    columns = _keys(src, cols)
    try:
        node = filter_tree.parse(where)
        missing = [c for c in filter_tree.columns_of(node) if c not in src.schema]
        # bound to the first file's columns now: a value a column's type refuses is the user's
        prepared = None if missing else filters.prepare(node, first_file(src))
    except (ValueError, TypeError) as e:
        raise CliError(f"--where: {e}", EXIT_USAGE) from None
    if missing:
        raise CliError(no_column(missing[0], src.schema.names, by="--where: ").args[0],
                       EXIT_USAGE)
    how = dict(batch_rows=CAT_GROUP_ROWS, window_bytes=1, ahead=0)
    for batch, hits, values in filters.filtered(src, columns, prepared, rows=rows, **how):
        numbers.extend((batch.row0 + hits * batch.step).tolist())
        parts.append(batch.part)
        yield values


def limited(batches, n):
    """The first `n` rows of `batches` (lists of read()'s values, one per column); the
    batches after them are never asked for, so their blocks are never decoded."""
    if n <= 0:
        return
    for values in batches:
        rows = vectors.num_rows_of(values[0]) if values else 0
        if rows >= n:
            yield [v[:n] for v in values]
            return
        yield values
        n -= rows


class _Numbers:
    """Row numbers known as batches arrive (filtered_batches fills the deque)."""

    def __init__(self):
        self.queue = collections.deque()

    def __iter__(self):
        return self

    def __next__(self):
        return self.queue.popleft()


def _cells(cols, batch, cell):
    """The rows of a batch, each a tuple of `cell(value, type)` of every column."""
    return zip(*([cell(v, c.type) for v in d] for c, d in zip(cols, batch)))


def _text_cells(cols, labels, batch):
    """The rows of a batch as the text of a table: a key with KeyValues as their text
    (`labels`, idv._interop.delimited.key_labels of each column, the rule of cat --format csv), the
    rest as cell_str gives it."""
    return zip(*(lab[np.asarray(d, np.int64)].tolist() if lab is not None
                 else [cell_str(v, c.type) for v in d]
                 for c, lab, d in zip(cols, labels, batch)))


def _columns_json(cols):
    return [{"index": c.index, "name": c.name, "type": str(c.type)} for c in cols]


def _table_header(cols, labels):
    """The two header lines (names, types) and the right-aligned columns of a rows table
    (numbers, but not keys shown as their KeyValues' text)."""
    header = [["#"] + [c.name for c in cols], [""] + [str(c.type) for c in cols]]
    right = {0} | {j + 1 for j, c in enumerate(cols)
                   if is_numeric(c.type) and labels[j] is None}
    return header, right


# ---------------------------------------------------------------- info

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
        **({} if c.readable else {"error": c.unreadable_reason}),
    }


def cmd_info(f, args, out):
    if isinstance(f, Dataset):
        return _info_dataset(f, args, out)
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
        dump_json(info, out)
        return EXIT_OK
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


def _info_dataset(ds, args, out):
    """The dataset's summary and schema, then a line per file: rows, blocks and bytes."""
    files = []
    for i, part in enumerate(ds.files):
        f = ds.open_file(i)
        cols = [c for c in (_column_info(f, f[n]) for n in ds.column_names)
                if c["blocks"] is not None]
        files.append({"path": part.path, "num_rows": part.num_rows, "first_row": part.start,
                      "blocks": sum(c["blocks"] for c in cols),
                      "bytes_disk": sum(c["bytes_disk"] for c in cols),
                      "file_size": f.header.file_size})
    columns = [{"index": fl.index, "name": fl.name,      # as in the first file
                "type": None if fl.type is None else str(fl.type)} for fl in ds.schema]
    if args.json:
        dump_json({"source": args.file, "num_files": len(files), "num_rows": ds.num_rows,
                   "num_columns": len(columns), "columns": columns, "files": files,
                   "skipped": [{"path": p, "error": str(e)} for p, e in ds.skipped]}, out)
        return EXIT_OK
    pairs = [("source", args.file), ("files", str(len(files))), ("rows", str(ds.num_rows)),
             ("columns", str(len(columns)))]
    out.write(render_table([], [[k + ":", v] for k, v in pairs], underline=False) + "\n")
    if columns:
        out.write("\n" + render_table(["#", "name", "type"], [
            [str(c["index"]), c["name"], c["type"] or "<unreadable>"] for c in columns],
            right={0}) + "\n")
    keys = ("num_rows", "first_row", "blocks", "bytes_disk", "file_size")
    rows = [[d["path"], *(str(d[k]) for k in keys)] for d in files]
    rows.append(["total", str(ds.num_rows), "",
                 *(str(sum(d[k] for d in files)) for k in keys[2:])])
    out.write("\n" + render_table(["file", "rows", "first row", "blocks", "disk bytes",
                                   "file size"], rows, right={1, 2, 3, 4, 5}) + "\n")
    return EXIT_OK


# ---------------------------------------------------------------- schema

def _field_line(fl):
    """A field's first line (name: type), its name escaped for the terminal."""
    return safe_text(fl.name) + str(fl)[len(fl.name):].split("\n")[0]


def cmd_schema(src, args, out):
    f = first_file(src)
    many = {"num_files": len(src.files)} if isinstance(src, Dataset) else {}
    if args.json:
        dump_json({"file": args.file, "num_rows": src.num_rows, **many, "columns": [
            {"index": fl.index, "name": fl.name, "type": None if fl.type is None else str(fl.type),
             "codec": fl.codec, "hidden": fl.hidden,
             "metadata": {k: (None if v is None else str(v))
                          for k, v in fl.metadata_types.items()},
             "metadata_values": {k: v for k, _, v in _annotations(f.columns[fl.index], True)}}
            for fl in src.schema]}, out)
        return EXIT_OK
    if not len(src.schema):
        out.write("(no columns)\n")
    for fl in src.schema:
        out.write(_field_line(fl) + "\n")
        for kind, t, value in _annotations(f.columns[fl.index], False):
            out.write(f"  {kind} ({t}): {safe_text(value)}\n")
    return EXIT_OK


def _annotations(col, as_json):
    """(kind, type, value) of each of the column's annotations: the value in JSON form or as
    one line of text; None (JSON) or "<unreadable: why>" where it cannot be decoded."""
    for m, t in zip(col.metadata_entries(), col.metadata_types.values()):
        try:
            v = col.decode_metadata(m)
        except IdvFormatError as e:
            yield m.kind, t, None if as_json else f"<unreadable: {e.reason}>"
            continue
        except MemoryLimitError as e:
            yield m.kind, t, None if as_json else f"<not shown: {e.refusal}>"
            continue
        yield m.kind, t, cell_json(v, t) if as_json else value_str(v, t)


# ---------------------------------------------------------------- head

def cmd_head(src, args, out):
    cols = select_columns(src, args.columns)
    n = src.num_rows
    start = args.start + n if args.start < 0 else args.start
    start = min(max(start, 0), n)
    if getattr(args, "where", None):     # the first -n rows that match, from --start on
        args.rows, args.limit, args.format = slice(start, None), args.n, "table"
        return cmd_cat(src, args, out)
    stop = min(start + args.n, n)
    files = FileColumns(src, cols)
    # only the blocks holding the rows are decoded
    batches = list(source_batches(src, cols, range(start, stop), False, files.parts)) \
        if cols else []
    if args.json:
        data = [list(r) for b in batches for r in _cells(cols, b, cell_json)]
        dump_json({
            "file": args.file, "num_rows": n, "start": start,
            "rows": {"start": start, "stop": stop, "step": 1, "count": stop - start},
            "columns": _columns_json(cols),
            "data": data if cols else [[] for _ in range(start, stop)],
        }, out, rows_key="data")
        return EXIT_OK
    if not cols:
        out.write(f"({n} rows, no columns)\n")
        return EXIT_OK
    header, right = _table_header(cols, files.labels(0))
    cells = (r for p, b in zip(files.parts, batches) for r in _text_cells(cols, files.labels(p),
                                                                          b))
    rows = [[str(i), *r] for i, r in zip(range(start, stop), cells)]
    out.write(render_table(header, rows, right=right, max_width=args.max_width) + "\n")
    out.write(f"(rows {start}-{stop - 1} of {n})\n" if stop > start else f"(0 rows of {n})\n")
    return EXIT_OK


# ---------------------------------------------------------------- cat

def parse_rows(spec):
    """'A:B', 'A:B:STEP', 'A:', ':B' (Python slice rules) -> a slice; 'N' -> the row number
    (negative from the end), which must be a row of the file, as in idv.read."""
    parts = spec.split(":")
    try:
        if len(parts) == 1:
            return int(parts[0])
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


def cmd_cat(src, args, out):
    cols = select_columns(src, args.columns)
    n = src.num_rows
    if isinstance(args.rows, int):      # one row: beyond the file is an error, as in idv.read
        try:
            i = int(selection.row_numbers([args.rows], n)[0])
        except IndexError as e:
            raise CliError(f"--rows {args.rows}: {e}", EXIT_USAGE) from None
        rows = range(i, i + 1)
    else:
        rows = range(n)[args.rows] if args.rows is not None else range(n)
    fmt = "json" if args.json else args.format
    files = FileColumns(src, cols)
    batches = source_batches(src, cols, rows, parts=files.parts) if cols else iter(())
    numbers = rows
    limit = getattr(args, "limit", None)
    if getattr(args, "where", None):
        if not cols:
            raise CliError("--where needs columns to print (--columns)", EXIT_USAGE)
        numbers = _Numbers()
        batches = filtered_batches(src, cols, rows, args.where, numbers.queue, files.parts)
        if limit is not None:
            batches = limited(batches, limit)
        if fmt == "json":          # its header counts the rows: all of them known first
            batches = list(batches)
            rows = list(numbers.queue)[:limit]
    elif limit is not None:
        rows = rows[:limit]
        numbers = rows
        batches = source_batches(src, cols, rows, parts=files.parts) if cols else iter(())
    if fmt == "table":
        return _cat_table(files, numbers, batches, args, out, n)
    if fmt in ("csv", "tsv"):      # the writer of idv.convert(x.idv, x.csv), the same text
        sep = "," if fmt == "csv" else "\t"
        w, part = DelimitedWriter(out, cols, sep, header=not args.no_header), 0
        for batch in batches:       # each file's keys named by its own KeyValues
            if files.parts[-1] != part:
                part = files.parts[-1]
                w = files.writer(part, out, sep)
            w.write(batch)
        return EXIT_OK
    ascii_ = ascii_only(out)
    if fmt == "jsonl":             # the writer of idv.convert(x.idv, x.jsonl), the same text
        try:
            w = JsonLinesWriter(out, cols, ensure_ascii=ascii_)
        except ValueError as e:     # two columns of one name
            raise CliError(str(e), EXIT_USAGE) from None
        for batch in batches:
            w.write(batch)
        if not cols:
            w.write_rows_without_columns(len(rows))
        return EXIT_OK
    # json: head's layout, written row by row
    mark = "\x00rows\x00"
    head = json.dumps({"file": args.file, "num_rows": n,
                       "rows": {"where": args.where, "count": len(rows)}
                       if getattr(args, "where", None) else
                       {"start": rows.start, "stop": rows.stop, "step": rows.step,
                        "count": len(rows)},
                       "columns": _columns_json(cols), "data": mark},
                      indent=2, ensure_ascii=ascii_)
    before, after = head.split(json.dumps(mark))
    out.write(before + "[")
    first = True
    lines = (json.dumps(list(values), ensure_ascii=ascii_)
             for batch in batches for values in _cells(cols, batch, cell_json))
    if not cols:
        lines = ("[]" for _ in rows)
    for line in lines:
        out.write(("\n    " if first else ",\n    ") + line)
        first = False
    out.write(("]" if first else "\n  ]") + after + "\n")
    return EXIT_OK


def _cat_table(files, rows, batches, args, out, n):
    cols = files.cols
    if not cols:
        out.write(f"({len(rows)} rows, no columns)\n")
        return EXIT_OK
    header, right = _table_header(cols, files.labels(0))
    table, shown, r = None, 0, iter(rows)
    for batch in batches:     # printed as decoded: widths from the header and the first batch
        labels = files.labels(files.parts[-1])
        body = [[str(next(r)), *values] for values in _text_cells(cols, labels, batch)]
        if table is None:
            table = Table(header, body, right=right, max_width=args.max_width)
            out.write("\n".join(table.head()) + "\n")
        if body:
            out.write("\n".join(table.lines(body)) + "\n")
        shown += len(body)
    if table is None:
        out.write("\n".join(Table(header, (), right=right).head()) + "\n")
    out.write(f"({shown} row{'s' * (shown != 1)} of {n})\n")
    return EXIT_OK


# ---------------------------------------------------------------- ls

def cmd_ls(args, out):
    """Every IDV stream in a zip archive, found by signature, with its schema."""
    import zipfile

    from idv._storage import remote
    from idv.cli.opener import opening
    from idv._reader.listing import zip_entries
    if remote.is_remote(args.archive):          # a URL: read by ranges
        with opening(args.archive):
            entries = zip_entries(args.archive)
    else:
        if not os.path.isfile(args.archive):
            raise CliError(f"{args.archive}: no such file")
        if not zipfile.is_zipfile(args.archive):
            raise CliError(f"{args.archive} is not a zip archive (for an .idv: idv schema "
                           f"FILE)", EXIT_USAGE)
        entries = zip_entries(args.archive)
    if args.json:
        dump_json({"archive": args.archive, "entries": [
            {"entry": e.name.replace("\\", "/"), "stored_name": e.name, "spec": e.spec,
             "size": e.size, "length_prefixed": e.prefixed, "num_rows": e.num_rows,
             "columns": None if e.schema is None else
             [{"name": fl.name, "type": None if fl.type is None else str(fl.type)}
              for fl in e.schema],
             **({"error": e.error} if e.error else {})} for e in entries]}, out)
        return EXIT_OK
    out.write(f"{args.archive}: {plural(len(entries), 'IDV stream')}\n")
    for e in entries:
        extra = ", length-prefixed" if e.prefixed else ""
        name = safe_text(e.name.replace("\\", "/"))
        if e.schema is None:
            out.write(f"{name}: unreadable ({e.size} bytes{extra}): {safe_text(e.error)}\n")
            continue
        out.write(f"{name}: {plural(e.num_rows, 'row')}, {plural(len(e.schema), 'column')} "
                  f"({e.size} bytes{extra})\n")
        for fl in e.schema:
            out.write(f"  {_field_line(fl)}\n")
    return EXIT_OK
