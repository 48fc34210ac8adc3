"""The commands that look inside a file: info, schema, head and cat (alias slice)."""
from __future__ import annotations

import argparse
import json
import os

from idv.cli.errors import EXIT_OK, EXIT_USAGE, CliError
from idv.cells import cell_json
from idv.cli.render import (Table, ascii_only, cell_str, dump_json,
                            is_numeric, plural, render_table, value_str)
from idv.delimited import DelimitedWriter
from idv.errors import IdvFormatError

CAT_GROUP_ROWS = 8192   # rows decoded at a time per column (whole blocks), when streaming


def _hidden(f, c):
    return f[c.name] is not c


def select_columns(f, spec):
    """--columns A,B (names or indices) -> Columns; default: the readable, visible ones."""
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


def _columns_json(cols):
    return [{"index": c.index, "name": c.name, "type": str(c.type)} for c in cols]


def _table_header(cols):
    """The two header lines (names, types) and the right-aligned columns of a rows table."""
    header = [["#"] + [c.name for c in cols], [""] + [str(c.type) for c in cols]]
    right = {0} | {j + 1 for j, c in enumerate(cols) if is_numeric(c.type)}
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


# ---------------------------------------------------------------- schema

def cmd_schema(f, args, out):
    if args.json:
        dump_json({"num_rows": f.num_rows, "columns": [
            {"index": fl.index, "name": fl.name, "type": None if fl.type is None else str(fl.type),
             "codec": fl.codec, "hidden": fl.hidden,
             "metadata": {k: (None if v is None else str(v))
                          for k, v in fl.metadata_types.items()},
             "metadata_values": {k: v for k, _, v in _annotations(f.columns[fl.index], True)}}
            for fl in f.schema]}, out)
        return EXIT_OK
    if not f.num_columns:
        out.write("(no columns)\n")
    for fl in f.schema:
        out.write(str(fl).split("\n")[0] + "\n")
        for kind, t, value in _annotations(f.columns[fl.index], False):
            out.write(f"  {kind} ({t}): {value}\n")
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
        yield m.kind, t, cell_json(v, t) if as_json else value_str(v, t)


# ---------------------------------------------------------------- head

def cmd_head(f, args, out):
    cols = select_columns(f, args.columns)
    n = f.num_rows
    start = args.start + n if args.start < 0 else args.start
    start = min(max(start, 0), n)
    stop = min(start + args.n, n)
    data = [c[start:stop] for c in cols]   # slicing decodes only the blocks holding the rows
    if args.json:
        dump_json({
            "file": args.file, "num_rows": n, "start": start, "columns": _columns_json(cols),
            "data": [[cell_json(d[i], c.type) for c, d in zip(cols, data)]
                     for i in range(stop - start)],
        }, out, rows_key="data")
        return EXIT_OK
    if not cols:
        out.write(f"({n} rows, no columns)\n")
        return EXIT_OK
    header, right = _table_header(cols)
    rows = [[str(start + i)] + [cell_str(d[i], c.type) for c, d in zip(cols, data)]
            for i in range(stop - start)]
    out.write(render_table(header, rows, right=right, max_width=args.max_width) + "\n")
    out.write(f"(rows {start}-{stop - 1} of {n})\n" if stop > start else f"(0 rows of {n})\n")
    return EXIT_OK


# ---------------------------------------------------------------- cat

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


def _row_pieces(col, rows, group_rows=CAT_GROUP_ROWS):
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


def iter_row_batches(cols, rows, group_rows=CAT_GROUP_ROWS):
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


def cmd_cat(f, args, out):
    cols = select_columns(f, args.columns)
    n = f.num_rows
    rows = range(n)[args.rows] if args.rows is not None else range(n)
    fmt = "json" if args.json else args.format
    batches = iter_row_batches(cols, rows) if cols else iter(())
    if fmt == "table":
        return _cat_table(cols, rows, batches, args, out, n)
    if fmt in ("csv", "tsv"):      # the writer of idv.convert(x.idv, x.csv), the same text
        w = DelimitedWriter(out, cols, "," if fmt == "csv" else "\t", header=not args.no_header)
        for batch in batches:
            w.write(batch)
        return EXIT_OK
    ascii_ = ascii_only(out)
    if fmt == "jsonl":
        names = [c.name for c in cols]
        for batch in batches:
            for values in zip(*([cell_json(v, c.type) for v in d]
                                for c, d in zip(cols, batch))):
                out.write(json.dumps(dict(zip(names, values)), ensure_ascii=ascii_) + "\n")
        if not cols:
            out.write("{}\n" * len(rows))
        return EXIT_OK
    # json: head's layout, written row by row
    mark = "\x00rows\x00"
    head = json.dumps({"file": args.file, "num_rows": n,
                       "rows": {"start": rows.start, "stop": rows.stop, "step": rows.step,
                                "count": len(rows)},
                       "columns": _columns_json(cols), "data": mark},
                      indent=2, ensure_ascii=ascii_)
    before, after = head.split(json.dumps(mark))
    out.write(before + "[")
    first = True
    lines = (json.dumps(list(values), ensure_ascii=ascii_)
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
    header, right = _table_header(cols)
    table, shown, r = None, 0, iter(rows)
    for batch in batches:     # printed as decoded: widths from the header and the first batch
        body = [[str(next(r)), *values] for values in
                zip(*([cell_str(v, c.type) for v in d] for c, d in zip(cols, batch)))]
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

    from idv.listing import zip_entries
    if not os.path.isfile(args.archive):
        raise CliError(f"{args.archive}: no such file")
    if not zipfile.is_zipfile(args.archive):
        raise CliError(f"{args.archive} is not a zip archive (for an .idv: idv schema FILE)",
                       EXIT_USAGE)
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
        name = e.name.replace("\\", "/")
        if e.schema is None:
            out.write(f"{name}: unreadable ({e.size} bytes{extra}): {e.error}\n")
            continue
        out.write(f"{name}: {plural(e.num_rows, 'row')}, {plural(len(e.schema), 'column')} "
                  f"({e.size} bytes{extra})\n")
        for fl in e.schema:
            out.write(f"  {str(fl).splitlines()[0]}\n")
    return EXIT_OK
