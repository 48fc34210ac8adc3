"""``idv stats``: each column's block statistics summed up over a file (from its statistics
section, or computed with a note when it has none); ``--add`` adds the section to files."""
from __future__ import annotations

import idv
from idv._reader import block_stats
from idv.cli.errors import EXIT_OK
from idv.cli.opener import open_path
from idv.cli.render import dump_json, render_table


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
            out.write(f"{path}: {said}\n")
        return EXIT_OK
    files = []
    for path in sources.paths:
        with open_path(sources, path, args) as f:
            rows, stored = idv._reader.block_stats.summary(f)
            hidden = {fl.index for fl in f.schema.fields if fl.hidden}
            files.append((path, [r[:6] + (r[6] in hidden,) for r in rows], stored))
    if args.json:
        dump_json({"files": [{"file": p, "stored": s, "columns": [
            {"name": n, "type": str(t), "present": c, "missing": m, "hidden": h,
             "min": block_stats.bound_text(lo, t), "max": block_stats.bound_text(hi, t)}
            for n, t, c, m, lo, hi, h in rows]} for p, rows, s in files]}, out)
        return EXIT_OK
    for path, rows, stored in files:
        if len(files) > 1:
            out.write(f"{path}\n")
        if not stored:
            out.write("(the file carries no statistics: computed from its blocks; "
                      "idv stats --add stores them)\n")
        table = [[n + " (hidden)" * h, str(t), str(c), str(m), block_stats.bound_text(lo, t),
                  block_stats.bound_text(hi, t)] for n, t, c, m, lo, hi, h in rows]
        out.write(render_table(["column", "type", "present", "missing", "min", "max"], table,
                               right=(2, 3)) + "\n")
    return EXIT_OK
