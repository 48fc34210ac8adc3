"""``idv convert``: to and from other formats through idv.formats (idv.convert), with a
progress bar; its help lists the formats of idv.formats' registry."""
from __future__ import annotations

import importlib
import os
import re
import sys

from idv.cli import options
from idv.cli.errors import EXIT_BAD_FILE, EXIT_OK, EXIT_USAGE, CliError
from idv.cli.inspect import select_columns
from idv.cli.opener import as_path, open_dataset, open_file
from idv.cli.render import dump_json, plural, stderr_line
from idv.errors import IdvFormatError, MissingDependencyError, require
from idv._storage.destination import local_path


def progress_callback(args):
    """(callback, close) for a tqdm bar on stderr, or (None, no-op) when not wanted or tqdm is
    not installed. The bar shows by default only when stderr is a terminal."""
    show = args.progress if args.progress is not None else _isatty(sys.stderr)
    if not show or sys.stderr is None:      # stderr closed: no bar
        return None, lambda: None
    try:
        tqdm = require("tqdm", "the progress bar", "idv[progress]").tqdm
    except MissingDependencyError as e:
        if args.progress:      # asked for: say why there is none; the default stays silent
            stderr_line(f"idv: warning: {e}")
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
    try:
        module = importlib.import_module("idv.formats")   # idv.convert, the function, is there
    except ImportError as e:
        if getattr(e, "name", None) == "idv.formats":
            raise CliError("idv convert is not available: this installation has no "
                           "idv.formats module") from None
        raise CliError(f"idv convert needs {e.name or e}: install it with pip") from None
    return module


def _formats(module, src, args):
    """(input Format, output Format) of the registry (idv.formats), or a usage error naming
    the choices."""
    try:
        src_fmt = module.format_of(src, args.source_format, "input", "--from")
        dst_fmt = module.format_of(args.output, args.to, "output", "--to")
        module.check_conversion(src_fmt, dst_fmt)
    except ValueError as e:
        raise CliError(str(e), EXIT_USAGE) from None
    return src_fmt, dst_fmt


def _codecs_help(fmt):
    """The --compression values an output in `fmt` takes, its default first."""
    if fmt.codecs is None:
        return "not compressed"
    usual, *others = fmt.codecs or ("deflate",)
    return ", ".join([f"{usual} (default)", *others, "none"])


def formats_help():
    """{"to": ..., "from": ..., "compression": ..., "summary": ...}: the help of convert's
    --to, --from and --compression and its one-line summary, listing the formats of the
    registry (idv.formats.FORMATS); without the converter, the same without the lists."""
    try:
        formats = list(_load_convert().FORMATS.values())
    except CliError:
        formats = []
    writable = [f for f in formats if f.sink is not None or f.from_idv is not None]
    listed = "; ".join(f"{f.name} ({', '.join(f.extensions)}"
                       f"{'' if f.sink is not None else '; from an .idv only'})"
                       for f in writable)
    readable = ", ".join(f.name for f in formats if f.source is not None)
    codecs = {}         # the same codecs: one entry naming the formats
    for f in writable:
        codecs.setdefault(_codecs_help(f), []).append(f.name)
    compression = "; ".join(f"{', '.join(names)}: {text}" for text, names in codecs.items())
    return {
        "to": "output format (default: from OUTPUT's extension)"
              + (f": {listed}" if listed else ""),
        "from": "input format (default: from INPUT's extension)"
                + (f": {readable}" if readable else ""),
        "compression": "the output's compression"
                       + (f" ({compression}); deflate, the default, means the format's usual "
                          f"codec" if compression else ""),
        "summary": "convert to or from .idv"
                   + (f" ({', '.join(f.name for f in formats if f.name != 'idv')})"
                      if formats else ""),
    }


def _convert_columns(args, src, src_fmt):
    """--columns as convert takes them: names, or for an .idv source indices too."""
    if not args.columns:
        return None
    names = options.column_list(args.columns)
    if src_fmt != "idv":
        return names
    if not isinstance(src, str):     # a dataset: its columns are named once
        return [c.name for c in select_columns(src, args.columns)]
    with open_file(src) as f:
        return [c.name if f[c.name] is c else c.index for c in select_columns(f, args.columns)]


def parse_types(texts):
    """Each --types NAME=TYPE,... given, as convert's types= ({name: idv type}), a usage error
    naming the part that is not NAME=TYPE or names no type, or a column given twice. A comma
    inside <...> stays in its type."""
    from idv.types import as_type
    types = {}
    for part in (p for text in texts for p in re.split(r",\s*(?=[^,<>=]+=)", text.strip())):
        name, eq, type_text = part.partition("=")
        name = name.strip()
        if not eq or not name or not type_text.strip():
            raise CliError(f"--types {part!r}: give NAME=TYPE, e.g. Age=Single", EXIT_USAGE)
        if name in types:
            raise CliError(f"--types: column {name!r} is given a type twice", EXIT_USAGE)
        try:
            types[name] = as_type(type_text.strip(), f"--types {name}")
        except (TypeError, ValueError) as e:        # no type, or a type string's own fault
            said = str(e)
            raise CliError(said if said.startswith("--types") else f"--types {name}: {said}",
                           EXIT_USAGE) from None
    return types or None


def cmd_convert(args, out):
    module = _load_convert()
    args.input = args.file
    if not args.sources.single or args.sources.filesystem is not None:
        if args.source_format not in (None, "idv"):
            raise CliError(f"--from {args.source_format}: several files (or a URL) are read "
                           f"as one dataset of .idv files", EXIT_USAGE)
        with open_dataset(args.sources, args) as ds:   # into one output, file after file
            return _convert(module, ds, args, out)
    with as_path(args.input) as src:   # an .idv inside a zip: a copy of the entry
        try:
            return _convert(module, src, args, out)
        except IdvFormatError as e:
            if e.path == src:   # name the input as given, not the copy
                e.path = args.input
            raise


# the converter's advice in idv.convert's words, and on the command line
_OPTIONS = (("(types=...)", "(--types NAME=TYPE)"),)


def _refused(name, message):
    """The converter's refusal of input `name` as the command line says it: the input named
    first (pyarrow's messages do not name it) and the options to give as the command's."""
    for python, command in _OPTIONS:
        message = message.replace(python, command)
    if "safe=False" in message:
        message += " (on the command line: --floor-datetime or --datetime ticks)"
    return message if message.startswith(f"{name}:") else f"{name}: {message}"


def _deflate_options(args):
    """--level / --backend, given only when set (an .idv output's DEFLATE)."""
    return {k: v for k, v in (("level", args.level), ("backend", args.backend))
            if v is not None}


def _check_sides(module, args, src_fmt, dst_fmt):
    """A usage error naming an option given that is for the other kind of input or output
    (idv.formats.misplaced: --level with a Parquet OUTPUT, --types with an .idv INPUT)."""
    wrong = module.misplaced(src_fmt, dst_fmt, {o: getattr(args, o, None) for o in [
                                 "datetime", *(o for o, _, _ in module.ONE_SIDED)]},
                             lambda option: "--" + option.replace("_", "-"))
    if wrong is not None:
        raise CliError(wrong, EXIT_USAGE)


def _convert(module, src, args, out):
    if args.output == "-":      # as an INPUT "-" is standard input, here it would be a file
        raise CliError("OUTPUT '-': convert writes a file, not standard output (for rows on "
                       "standard output: idv cat FILE --format csv, tsv or jsonl)", EXIT_USAGE)
    try:
        local_path(args.output)
    except ValueError as e:         # a URL
        raise CliError(str(e), EXIT_USAGE) from None
    src_format, dst_format = _formats(module, src, args)
    _check_sides(module, args, src_format, dst_format)
    src_fmt, dst_fmt = src_format.name, dst_format.name
    if args.compression not in (None, "none") and dst_format.codecs is None:
        raise CliError(f"--compression: {dst_format.title} output is not compressed (leave "
                       f"the option out), not {args.compression!r}", EXIT_USAGE)
    args.compression = args.compression or "deflate"
    if dst_fmt == "idv" and args.compression not in ("none", "deflate"):
        raise CliError(f"--compression {args.compression!r}: an .idv is compressed with "
                       f"none or deflate", EXIT_USAGE)
    try:
        module.check_compression(dst_fmt, args.compression)
    except ValueError as e:
        raise CliError(f"--compression: {e}", EXIT_USAGE) from None
    inputs = [src] if isinstance(src, str) else \
        [f.path for f in src.files if src.filesystem is None]
    if os.path.exists(args.output) and any(os.path.samefile(p, args.output) for p in inputs):
        raise CliError(f"{args.output}: the output would overwrite the input", EXIT_USAGE)
    if len(args.sources.specs) > 1 and dst_fmt == "idv" and os.path.exists(args.output):
        raise CliError(f"{args.output} exists: with several INPUT files convert does not "
                       f"replace an .idv (did the shell expand a glob meant for idv? quote "
                       f"it, or remove {args.output} first)", EXIT_USAGE)
    columns = _convert_columns(args, src, src_fmt)
    progress, close = progress_callback(args)
    try:
        rows = module.convert(src, args.output, to=dst_fmt, source_format=src_fmt,
                              columns=columns, compression=args.compression,
                              rows_per_block=args.rows_per_block, progress=progress,
                              datetime=args.datetime, safe=not args.floor_datetime,
                              types=parse_types(args.types or ()), legacy_keys=args.legacy_keys,
                              missing_text=args.missing_text, threads=args.threads,
                              **_deflate_options(args))
    except KeyError as e:      # a column the source does not have
        raise CliError(str(e.args[0]) if e.args else str(e), EXIT_USAGE) from None
    except (ValueError, TypeError) as e:
        if isinstance(e, IdvFormatError):      # named and located already
            raise
        raise CliError(_refused(args.input, str(e)), EXIT_BAD_FILE) from None
    finally:
        close()
    summary = {"input": args.input, "output": args.output, "input_format": src_fmt,
               "output_format": dst_fmt, "rows": rows if isinstance(rows, int) else None,
               "bytes": os.path.getsize(args.output) if os.path.exists(args.output) else None}
    if args.json:
        dump_json(summary, out)
        return EXIT_OK
    if not args.quiet:
        stderr_line(f"idv: {args.input} -> {args.output}: "
                    f"{plural(summary['rows'] or 0, 'row')}, {dst_fmt}, "
                    f"{plural(summary['bytes'] or 0, 'byte')}")
    return EXIT_OK
