"""``idv stats``: each column's block statistics summed up over a file (from its statistics
section, or computed with a note when it has none); ``--add`` adds the section to files."""
from __future__ import annotations

import idv
from idv._reader import block_stats
from idv.cli.errors import EXIT_OK
from idv.cli.opener import open_path
from idv.cli.render import dump_json, render_table, safe_text


def cmd_stats(args, out):
    """Each column's statistics over the file: values present and missing (NaN, a key's 0),
    minimum and maximum (Text: bounds of at most 64 bytes, ... where cut), from the block
    statistics idv writes; a file without them has them computed from its blocks, with a
    note. --add stores them in files that have none (ML.NET's too), atomically, leaving every
    block as it is."""
    sources = args.sources
    if args.add:
        for path in sources.paths:
            if idv.add_statistics(path):
                said = "statistics added"
            else:
                with idv.open(path) as f:
                    said = "has statistics already" if f.statistics is not None else \
                        "nothing to add: no rows, or no column of a type with statistics"
            out.write(f"{safe_text(path)}: {said}\n")
        return EXIT_OK
    files = []
    for path in sources.paths:
        with open_path(sources, path, args) as f:
            files.append((path, *_columns(f)))
    if args.json:
        dump_json({"files": [{"file": p, "stored": s, "columns": [
            {"name": n, "type": t, "present": c, "missing": m, "hidden": h,
             "min": block_stats.bound_json(lo, ty), "max": block_stats.bound_json(hi, ty)}
            for n, t, ty, c, m, lo, hi, h in rows]} for p, rows, s in files]}, out)
        return EXIT_OK
    for path, rows, stored in files:
        if len(files) > 1:
            out.write(f"{safe_text(path)}\n")
        if not stored:
            out.write("(the file carries no statistics: computed from its blocks; "
                      "idv stats --add stores them)\n")
        table = [[safe_text(n) + " (hidden)" * h, t, _count(c), _count(m),
                  "-" if c is None else block_stats.bound_text(lo, ty),
                  "-" if c is None else block_stats.bound_text(hi, ty)]
                 for n, t, ty, c, m, lo, hi, h in rows]
        out.write(render_table(["column", "type", "present", "missing", "min", "max"], table,
                               right=(2, 3)) + "\n")
    return EXIT_OK


def _columns(f):
    """Every column of `f` as (name, type's text, type, present, missing, min, max, hidden),
    and whether the statistics came from the file; a column of a type without statistics
    (Vector<Text>, RowId, one idv cannot read) has None for present, missing, min and max,
    but in a file of no rows (0 present, 0 missing)."""
    summed, stored = block_stats.summary(f)
    by_index = {r[6]: r for r in summed}
    none = (0, 0) if f.num_rows == 0 else (None, None)
    rows = []
    for fl in f.schema.fields:
        t = str(fl.type) if fl.type is not None else f"unreadable: codec {fl.codec}"
        c, m, lo, hi = by_index[fl.index][2:6] if fl.index in by_index else (*none, None, None)
        rows.append((fl.name, t, fl.type, c, m, lo, hi, fl.hidden))
    return rows, stored


def _count(n):
    return "-" if n is None else str(n)
