"""``idv verify``: print what idv.verify found; exit 1 on problems (or warnings, --strict).

A dataset (a directory, a glob, several files) is checked file by file: each file's report
under its path, then one summary line."""
from __future__ import annotations

import idv
from idv._reader.checker import VerifyReport
from idv.cli.errors import EXIT_OK, CliError
from idv.cli.opener import open_path, open_sources
from idv.cli.render import dump_json, plural, safe_text
from idv.errors import IdvFormatError


def _check(open_it):
    """The report on the file `open_it()` opens (one problem if it is not an .idv at all)."""
    try:
        f = open_it()
    except IdvFormatError as e:   # not an .idv at all: the one problem, as idv.verify says it
        return VerifyReport.for_unopenable(e)
    with f:
        return idv.verify(f)


def _failed(report, args):
    return not report.ok or (args.strict and bool(report.warnings))


def _why(reports, args):
    """'3 problems found', or '2 warnings (--strict)'."""
    problems = sum(len(r.problems) for r in reports)
    if problems:
        return plural(problems, "problem") + " found"
    return plural(sum(len(r.warnings) for r in reports), "warning") + " (--strict)"


def _text(report, name):
    """The report's lines for the terminal: a file's or column's name with a control
    character in it is escaped."""
    return "".join(safe_text(line) + "\n" for line in report.to_text(name).split("\n"))


def cmd_verify(args, out):
    """Decode every block of every column and every metadata value, and check every offset
    and length: the header, the table of contents, each lookup table, that blocks, lookup
    tables and metadata do not overlap. Prints each problem found with its column, block and
    byte offset."""
    sources = args.sources
    if sources.single:
        checked = [(args.file, _check(lambda: open_sources(sources, args)))]
    else:
        checked = [(path, _check(lambda path=path: open_path(sources, path, args)))
                   for path in sources.paths]
    failed = [(path, r) for path, r in checked if _failed(r, args)]
    if failed:      # the exit status, even if the reader of what is printed goes away
        where = failed[0][0] if sources.single else \
            f"{args.file}: {plural(len(failed), 'file')} of {len(checked)}"
        args.verdict = CliError(f"{where}: {_why([r for _, r in failed], args)}")
    if sources.single:
        report = checked[0][1]
        if args.json:
            dump_json({"file": args.file, **report.to_dict(), "ok": not failed}, out)
        else:
            out.write(_text(report, args.file))
    else:
        summary = (f"{plural(len(checked), 'file')} checked, {len(failed)} with problems, "
                   f"{plural(sum(len(r.problems) for _, r in checked), 'problem')}")
        if args.json:
            dump_json({"source": args.file, "files": [
                {"file": p, **r.to_dict(), "ok": not _failed(r, args)} for p, r in checked],
                "num_files": len(checked), "num_failed": len(failed),
                "num_problems": sum(len(r.problems) for _, r in checked),
                "ok": not failed}, out)
        else:
            for path, report in checked:
                out.write(_text(report, path))
            out.write(summary + "\n")
    out.flush()
    if failed:
        raise args.verdict
    return EXIT_OK
