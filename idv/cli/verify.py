"""``idv verify``: print what idv.verify found; exit 1 on problems (or warnings, --strict)."""
from __future__ import annotations

import sys

import idv
from idv.checker import VerifyReport
from idv.cli.errors import EXIT_BAD_FILE, EXIT_OK
from idv.cli.opener import open_file
from idv.cli.render import dump_json, plural
from idv.errors import IdvFormatError


def cmd_verify(args, out):
    try:
        f = open_file(args.file, threads=args.threads, backend=args.backend)
    except IdvFormatError as e:   # not an .idv at all: the one problem, as idv.verify says it
        report = VerifyReport.for_unopenable(e)
    else:
        with f:
            report = idv.verify(f)
    ok = report.ok and not (args.strict and report.warnings)
    if args.json:
        dump_json({"file": args.file, **report.to_dict(), "ok": ok}, out)
    else:
        out.write(report.to_text(args.file) + "\n")
    out.flush()
    if not ok:
        why = (plural(len(report.problems), "problem") + " found" if report.problems
               else plural(len(report.warnings), "warning") + " (--strict)")
        print(f"idv: error: {args.file}: {why}", file=sys.stderr)
        return EXIT_BAD_FILE
    return EXIT_OK
