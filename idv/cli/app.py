"""The ``idv`` command's entry point: the arguments (argparse), running a command, and how
failures become one line on stderr and an exit code (0 ok, 1 bad file, 2 usage)."""
from __future__ import annotations

import argparse
import errno
import functools
import io
import inspect
import os
import re
import sys
import traceback
import warnings

import idv
from idv.cli.convert import cmd_convert, formats_help
from idv.cli.errors import EXIT_BAD_FILE, EXIT_OK, EXIT_USAGE, CliError, memory_refused
from idv.cli import options
from idv.cli.inspect import cmd_cat, cmd_head, cmd_info, cmd_ls, cmd_schema, parse_rows
from idv.cli.opener import Sources, memory_limit, open_sources, unknown_extra_files
from idv.cli.render import stderr_line
from idv.cli.stats import cmd_stats
from idv.cli.verify import cmd_verify
from idv.errors import IdvFormatError, MissingDependencyError
from idv._storage.sink import is_temporary


# ---------------------------------------------------------------- argument parsing

def _memory_option(p, default=argparse.SUPPRESS):
    """--memory-limit, on the `idv` command and on each of its commands (where it is not
    given, the command's own leaves the other's value)."""
    p.add_argument("--memory-limit", type=options.size, default=default, metavar="BYTES",
                   help="what one read may allocate before it is refused (idv's memory limit; "
                        "default: from the file's size and the memory available), e.g. 8GB")


def _reading_options(p, json_help="print JSON instead of text"):
    p.add_argument("--json", action="store_true", help=json_help)
    p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                   help="show a traceback on errors")
    p.add_argument("--backend", type=options.backend, default=None,
                   help="DEFLATE library: libdeflate, isal or zlib (default: the fastest)")
    p.add_argument("--threads", type=options.positive, default=None,
                   help="decoding threads (default: the CPUs available)")
    _memory_option(p)
    p.add_argument("--storage-option", type=options.storage_option, action="append", default=[],
                   dest="storage_options", metavar="KEY=VALUE",
                   help="an option of the filesystem of URLs (fsspec's storage_options), e.g. "
                        "anon=true, endpoint_url=http://localhost:9000, or "
                        "'headers={\"Authorization\": \"Bearer ...\"}'; VALUE is JSON or "
                        "text; repeat for more")


def _where_option(s):
    s.add_argument("--where", "-w", metavar="EXPR", default=None,
                   help="only the rows that match, e.g. \"Age > 30 and City == 'Paris'\" "
                        "(and, or, not, ==, !=, <, <=, >, >=, in [...], isnull(col)); "
                        "blocks the file's statistics rule out are not decoded")


def _columns_option(p):
    p.add_argument("--columns", "-c", metavar="A,B,...",
                   help="comma-separated column names, indices or globs ('Feature*'); "
                        "default: all readable, visible columns")


def _dataset_options(p):
    p.add_argument("--schema", choices=("exact", "common"), default="exact",
                   help="a dataset: exact (default: every file has the same columns and types) "
                        "or common (the columns every file has with one type)")
    p.add_argument("--skip-bad-files", action="store_true",
                   help="a dataset: leave out the files that cannot be opened (with a warning "
                        "naming them) instead of failing")


FILE_HELP = ("an .idv file, or ARCHIVE.zip:ENTRY for one inside a zip; or a dataset read as "
             "one table: a directory, a quoted glob (\"days/*.idv\"), several files or a URL")


def build_parser():
    """The `idv` command's parser: the options its commands share, then each command's
    (one _add_* function each, in the order `idv --help` lists them)."""
    common = options.Parser(add_help=False)
    common.add_argument("specs", metavar="FILE", nargs="+", help=FILE_HELP)
    _reading_options(common)
    reading = options.Parser(add_help=False, parents=[common])
    _dataset_options(reading)

    p = options.Parser(
        prog="idv", description="Inspect, check and convert ML.NET binary dataview (.idv) "
                                "files.",
        epilog="Exit codes: 0 ok, 1 unreadable or invalid file, 2 usage error. "
               "`idv COMMAND --help` describes each command.")
    p.add_argument("-v", "--verbose", action="store_true", default=False,
                   help="show a traceback on errors")
    p.add_argument("--version", action="version", version=f"idv {idv.__version__}")
    _memory_option(p, None)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in (_add_info, _add_head, _add_schema, _add_verify, _add_stats, _add_cat,
                _add_convert, _add_sample, _add_ls):
        add(sub, common, reading)
    for s in sub.choices.values():
        s.set_defaults(parser=s)
    return p


def _add_info(sub, common, reading):
    s = sub.add_parser("info", parents=[reading], help="header and per-column layout",
                       description="Header (version, rows, offsets) and, per column: type, "
                                   "codec, compression, rows per block, blocks, bytes on disk "
                                   "and decompressed, metadata kinds with their types.")
    s.set_defaults(run=cmd_info)


def _add_head(sub, common, reading):
    s = sub.add_parser("head", parents=[reading], help="the first rows",
                       description="The first rows as a table; only the blocks holding them "
                                   "are decoded.")
    s.add_argument("-n", type=options.nonneg, default=10, metavar="N",
                   help="rows to show (default 10; with --where: the first N that match)")
    s.add_argument("--start", type=int, default=0, metavar="ROW",
                   help="first row to show (negative: from the end)")
    _columns_option(s)
    _where_option(s)
    s.add_argument("--max-width", type=options.nonneg, default=40, metavar="W",
                   help="clip table cells to W characters (default 40, 0: no limit)")
    s.set_defaults(run=cmd_head)


def _add_schema(sub, common, reading):
    s = sub.add_parser("schema", parents=[reading], help="the column names and types",
                       description="The schema, as print(f.schema) shows it.")
    s.set_defaults(run=cmd_schema)


def _add_per_file(sub, common, name, run, flag, **texts):
    """A command that opens each FILE itself (not the dataset of them all), with one switch:
    `flag` is (its name, its help); its description is the docstring of `run`."""
    s = sub.add_parser(name, parents=[common], description=inspect.cleandoc(run.__doc__),
                       **texts)
    s.add_argument(flag[0], action="store_true", help=flag[1])
    s.set_defaults(run=run, opens_file=False)


def _add_verify(sub, common, reading):
    _add_per_file(
        sub, common, "verify", cmd_verify,
        ("--strict", "fail on warnings too (parts that could not be checked)"),
        help="check every byte: blocks, lookup tables, metadata",
        epilog="Exit codes: 0 sound (warnings, such as a column whose codec this reader does "
               "not know, are listed but do not fail it unless --strict), 1 problems found or "
               "the file cannot be opened, 2 usage error.")


def _add_stats(sub, common, reading):
    _add_per_file(
        sub, common, "stats", cmd_stats,
        ("--add", "add block statistics to each FILE (local files), in place"),
        help="each column's minimum, maximum and missing count")


def _add_cat(sub, common, reading):
    s = sub.add_parser(
        "cat", aliases=["slice"], parents=[reading], help="print rows as a table, CSV or JSON",
        description="Print rows (all, or --rows A:B) of some or all columns as an aligned "
                    "table, CSV, TSV, JSON or JSON lines. Only the blocks holding the rows "
                    "asked for are decoded; CSV, TSV and JSON stream block by block. "
                    "`idv slice` is the same command.",
        epilog="Rows follow Python's slice rules: 10:20, 100:, :50, -10: (the last ten), "
               "::1000, or one row number. "
               "In CSV and TSV, a fixed-size vector is a column a slot (a wider or "
               "variable-size one a cell holding a JSON array) and a key with KeyValues its "
               "text; in JSON, keys are their raw integers; dates are ISO 8601, booleans "
               "true/false.")
    s.add_argument("--rows", "-r", type=parse_rows, default=None, metavar="A:B",
                   help="rows to look at, as a Python slice A:B[:STEP] (default: all); "
                        "with --where, the rows it tests, selected before it")
    _columns_option(s)
    _where_option(s)
    s.add_argument("--limit", "-n", type=options.nonneg, default=None, metavar="N",
                   help="print at most N rows: with --where, the first N that match")
    s.add_argument("--format", "-f", choices=["table", "csv", "tsv", "json", "jsonl"],
                   default="table", help="output format (default: table; --json is "
                                         "--format json)")
    s.add_argument("--no-header", action="store_true",
                   help="CSV/TSV: leave out the line of column names")
    s.add_argument("--max-width", type=options.nonneg, default=40, metavar="W",
                   help="table: clip cells to W characters (default 40, 0: no limit)")
    s.set_defaults(run=cmd_cat)


def _add_convert(sub, common, reading):
    formats = formats_help()      # the registry's formats, extensions and codecs
    s = sub.add_parser(
        "convert", help=formats["summary"],
        description="Convert INPUT to OUTPUT: an .idv to another format, another format to "
                    ".idv, or an .idv to an .idv with other columns, compression or block size. "
                    "Formats are guessed from the file extensions unless --to is given. A "
                    "progress bar is shown on a terminal (with tqdm installed).")
    s.add_argument("specs", metavar="INPUT", nargs="+",
                   help="the file to convert (" + FILE_HELP + "): a dataset into one OUTPUT")
    s.add_argument("output", metavar="OUTPUT", help="the file to write")
    s.add_argument("--to", metavar="FORMAT", default=None, help=formats["to"])
    s.add_argument("--from", dest="source_format", metavar="FORMAT", default=None,
                   help=formats["from"])
    _columns_option(s)
    _dataset_options(s)
    s.add_argument("--compression", default=None, metavar="NAME", help=formats["compression"])
    s.add_argument("--threads", type=options.positive, help="threads decoding and compressing .idv")
    s.add_argument("--rows-per-block", type=options.positive, default=None, metavar="N",
                   help="rows per block of an .idv output (default: ML.NET's rule)")
    s.add_argument("--level", type=int, default=None, metavar="N",
                   help="DEFLATE level of an .idv output (default: 1, the fastest; "
                        "libdeflate's 2 keeps files near ML.NET's size; 6 is ML.NET's level)")
    s.add_argument("--backend", type=options.backend, default=None, metavar="NAME",
                   help="DEFLATE library of an .idv output: isal (the default where "
                        "installed: fastest, files up to 1.7x ML.NET's), libdeflate (the "
                        "next) or zlib (ML.NET's bytes at --level 6)")
    s.add_argument("--datetime", choices=("auto", "auto-us", "exact", "us", "ns", "ticks"),
                   default=None,
                   help="DateTime/TimeSpan on the Arrow side: auto (the default: per column "
                        "nanoseconds if all fit, else microseconds, flooring 100-ns ticks with "
                        "a warning), auto-us (Parquet's default, which Spark reads: "
                        "microseconds, flooring finer ticks with a warning; ns or ticks keep "
                        "100-ns ticks there), exact (as auto, refusing to floor), us, ns (years "
                        "1677-2262 only) or ticks (exact int64 .NET ticks)")
    s.add_argument("--floor-datetime", action="store_true",
                   help="floor ticks finer than the --datetime unit instead of failing")
    s.add_argument("--types", metavar="NAME=TYPE,...", action="append", default=None,
                   help="ML.NET types for columns of a non-.idv INPUT, as Python's types=: "
                        "e.g. 'Age=Single,Grade=Key<UInt32, 5>', or the option once a column "
                        "(a column with missing values needs a type that holds them: Single, "
                        "Double, a key or Text)")
    s.add_argument("--missing-text", metavar="TEXT", default=None,
                   help="what null text of a non-.idv INPUT becomes, e.g. '' (ML.NET reads "
                        "missing text as empty; by default null text is an error)")
    s.add_argument("--legacy-keys", choices=("shift",), default=None,
                   help="shift: write the keys of ML.NET 0.x files that have a min "
                        "(Key<UInt32, 3, min=1>) from min 0, which ML.NET 1.x loads (the "
                        "same key values; by default such a column is an error)")
    s.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show a progress bar (default: when stderr is a terminal)")
    s.add_argument("-q", "--quiet", action="store_true",
                   help="print nothing when done (default: a one-line summary on stderr)")
    s.add_argument("--json", action="store_true",
                   help="print a JSON summary (rows, columns, bytes) on stdout")
    s.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                   help="show a traceback on errors")
    _memory_option(s)
    s.set_defaults(run=cmd_convert, opens_file=False, file=None)


def _add_sample(sub, common, reading):
    s = sub.add_parser("sample", help="print the path of the sample .idv that ships with idv",
                       description="Print the path of a small ML.NET-written .idv bundled with "
                                   "idv (240 rows of every common type), to try the other "
                                   "commands on: idv head \"$(idv sample)\".")
    s.set_defaults(run=cmd_sample, opens_file=False, file=None)


def _add_ls(sub, common, reading):
    s = sub.add_parser("ls", help="list the .idv streams in a zip archive, with their schemas",
                       description="List every IDV stream in a zip archive (an ML.NET model), "
                                   "found by its signature whatever the entry's name, with its "
                                   "rows and columns. Open one as ARCHIVE.zip:ENTRY.")
    s.add_argument("archive", metavar="ARCHIVE", help="a zip archive")
    s.add_argument("--json", action="store_true", help="print JSON instead of text")
    s.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                   help="show a traceback on errors")
    _memory_option(s)
    s.set_defaults(run=cmd_ls, opens_file=False, file=None)


def cmd_sample(args, out):
    out.write(idv.sample_path() + "\n")
    return EXIT_OK


def main(argv=None) -> int:
    """Run the ``idv`` command (the console script, and ``python -m idv``).

    Parameters
    ----------
    argv : list of str, optional
        The arguments after the command's name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit code: 0 ok, 1 an unreadable or invalid file, 2 a usage error; 130 when
        interrupted (Ctrl-C), as a shell reports it.
    """
    try:
        return _main(argv)
    except KeyboardInterrupt:    # whenever it comes: a quiet exit, no traceback
        return 130


# a row selection that starts with '-' (-10:, -5), which argparse would take for an option
_NEGATIVE_ROWS = re.compile(r"-\d+(:-?\d*){0,2}")


def _rows_joined(argv):
    """`argv` with ``--rows -10:`` (and ``-r -10:``) joined into ``--rows=-10:``: argparse
    takes a value starting with '-' (but a plain negative number) for an option."""
    out = []
    for a in argv:
        if out and out[-1] in ("--rows", "-r") and _NEGATIVE_ROWS.fullmatch(a):
            out[-1] = f"{out[-1]}={a}" if out[-1] == "--rows" else f"-r{a}"
        else:
            out.append(a)
    return out


def _main(argv):
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(
            _rows_joined(sys.argv[1:] if argv is None else list(argv)))
        extra += unknown_extra_files(getattr(args, "specs", None) or [])
        if extra:        # as argparse says it, with the nearest option to a misspelled one
            args.parser.error(args.parser.unrecognized(extra, parser))
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
        with memory_limit(args.memory_limit):
            return _run(args, _Stdout(out))


def _show_warning(args, default, message, category, filename, lineno, file=None, line=None):
    """IdvWarnings as one line ``idv: warning: ...`` on stderr, printed as they happen."""
    if not issubclass(category, idv.IdvWarning):
        return default(message, category, filename, lineno, file, line)
    if args.command in ("info", "schema", "verify") and \
            str(message).startswith("cannot interpret column"):
        return None   # these show unreadable columns themselves
    stderr_line(f"idv: warning: {message}")


def _run(args, out):
    f = None
    try:
        if getattr(args, "specs", None) is not None:
            args.sources = Sources(args.specs, dict(getattr(args, "storage_options", [])))
            args.file = args.sources.label
        if not getattr(args, "opens_file", True):
            code = args.run(args, out)
        else:
            f = open_sources(args.sources, args)
            code = args.run(f, args, out)
        out.flush()     # what is still buffered: a failure to write it is told too
        return code
    except CliError as e:
        return _fail(args, str(e), e.code)
    except IdvFormatError as e:   # named by FILE as given (an entry of a zip has no path)
        return _fail(args, str(e.locate(path=args.file)), EXIT_BAD_FILE)
    except MissingDependencyError as e:   # an optional package: the message names pip's command
        return _fail(args, str(e), EXIT_BAD_FILE)
    except idv.MemoryLimitError as e:   # refused before allocating: the message says why
        return _fail(args, memory_refused(e), EXIT_BAD_FILE)
    except MemoryError:
        return _fail(args, "out of memory", EXIT_BAD_FILE)
    except BrokenPipeError:
        # the reader went away (idv head big.idv | head -3): stop quietly, but with the
        # verdict a command reached before printing it (verify's problems) as the exit status
        _drop_stdout()
        verdict = getattr(args, "verdict", None)
        return EXIT_OK if verdict is None else _fail(args, str(verdict), verdict.code)
    except OSError as e:   # a file the command writes or reads (standard output: _Stdout's)
        if e.strerror is None:
            return _fail(args, str(e), EXIT_BAD_FILE)
        output = getattr(args, "output", None)    # convert's OUTPUT
        # the file it names, else (ENOSPC names none) the one written or read
        name = next((n for n in (e.filename, output, args.file) if n is not None), None)
        if output is not None and is_temporary(str(name)):   # its temporary file
            name = output
        return _fail(args, e.strerror if name is None else f"{name}: {e.strerror}",
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


# write errors that mean the output's disk is full (or the file too large for it)
_OUTPUT_FULL = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}


class _Stdout:
    """Standard output as the commands write to it, whose failures are told as its own and
    not blamed on a file the command reads or writes (convert's OUTPUT): closed (Python's
    sys.stdout is None: a command that prints nothing still runs) or refusing a write (a
    full disk). A closed pipe stays a BrokenPipeError: the reader went away."""

    def __init__(self, stream):
        self._stream = stream
        self.encoding = getattr(stream, "encoding", None)

    def write(self, text):
        if self._stream is None:
            raise CliError("standard output is closed: nothing can be printed (to discard "
                           "the output, redirect it: >/dev/null)")
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise _stdout_failed(e) from e

    def flush(self):
        try:
            if self._stream is not None:
                self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise _stdout_failed(e) from e


def _stdout_failed(e):
    """The CliError of a write to standard output that failed with OSError `e`; what is still
    buffered for it is dropped."""
    _drop_stdout()
    full = " (the disk or file system it goes to is full)" if e.errno in _OUTPUT_FULL else ""
    return CliError(f"writing to standard output failed: {e.strerror or e}{full}")


def _drop_stdout():
    """Point standard output at /dev/null: what is still buffered for it cannot be written,
    and Python's flush at exit would fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _fail(args, message, code):
    if args.verbose and sys.stderr is not None:
        traceback.print_exc()
    message = " ".join(str(message).split("\n"))
    stderr_line(f"idv: error: {message}")
    return code
