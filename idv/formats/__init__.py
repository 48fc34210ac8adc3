"""Convert between .idv and other formats, streaming: the registry of formats and ``convert``.

Each format is one entry of FORMATS (a ``Format``: its name, extensions, compression codecs,
and how to read and write it), and one module beside this one holding its source and sink:
idv, parquet, ipc (Feather / Arrow IPC), text (CSV / TSV, JSON Lines). ``idv convert``, its
help and its errors read the registry.

``convert(src, dst)`` never holds a whole file: an .idv is read one block of rows at a time
(idv._interop.arrow.record_batch_reader) and handed to pyarrow's writers (ParquetWriter, the IPC
file writer, CSVWriter); the other way, pyarrow's readers give record batches (Parquet row groups,
IPC batches, CSV blocks) that go to idv.Writer.write_batch, which writes full blocks as they fill.
Memory stays around a block (or batch) per column. An .idv to .idv conversion (to select columns,
re-block or change compression) streams numpy blocks and keeps every type and annotation exactly;
.idv to text (CSV, TSV, JSON Lines) is written by the writers of ``idv cat``, from numpy blocks
too.

The output appears only when complete: it is written to a temporary file beside ``dst`` and
renamed over it at the end (idv._storage.sink); on any error the temporary file is removed.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Optional

from idv import _docs
from idv._resources import budget
from idv._storage.sink import naming
from idv._values.arguments import ensure_callable, ensure_count
from idv._values.ticks import TIME_MODES, check_time_mode
from idv.compression import convert_deflate
from idv.formats import idv as idv_format, ipc, parquet, text
from idv.formats._base import Options, check_codecs, import_pa, is_dataset, read_ahead

__all__ = ["convert", "check_compression", "check_conversion", "format_of", "Format",
           "FORMATS"]

# Parquet / IPC sources are read in batches of at most this many rows
_BATCH_ROWS = 65536


@dataclass(frozen=True)
class Format:
    """One format ``convert`` reads or writes.

    * ``name``: what ``to=`` / ``source_format=`` (``--to`` / ``--from``) call it.
    * ``extensions``: the file extensions that mean it (lower case, with the dot); ``to=``
      takes them too.
    * ``codecs``: the compression codecs its writer takes besides ``'deflate'`` and
      ``'none'``, its usual one first (what the default, ``'deflate'``, stands for; with no
      codecs of its own, DEFLATE); ``None`` for an output that is never compressed.
    * ``source``: ``source(path, options)`` -> a ``_base.Source`` of Arrow record batches;
      None for an output-only format.
    * ``sink``: ``sink(dest, source, options)`` -> a writer of those batches (``prepare``,
      ``write``, ``close``, ``abort``); None when it is written from an .idv only.
    * ``from_idv``: ``from_idv(src, dest, options, progress)`` -> rows: written from an .idv
      source (a file or an idv.Dataset) directly, from its numpy blocks; None: through Arrow.
    * ``title``: its name for people (help, errors).
    * ``datetime``: the unit of times written from an .idv when ``datetime=`` is not given:
      ``"auto"``, or ``"auto-us"`` for Parquet: microseconds, the unit every engine reads
      (Spark refuses Parquet's nanosecond timestamps), finer ticks floored with a warning.
    * ``arrow_times``: whether it holds times in an Arrow unit, which ``datetime=`` chooses
      (an .idv holds 100-ns ticks, and text formats .NET's text of them, exact to the tick:
      ``datetime=`` given for such an output is refused, as it would change nothing).
    """

    name: str
    extensions: tuple
    codecs: Optional[tuple]
    source: Optional[Callable]
    sink: Optional[Callable]
    from_idv: Optional[Callable]
    title: str
    datetime: str = "auto"
    arrow_times: bool = False


# name -> Format, in the order the help lists them
FORMATS = {f.name: f for f in (
    Format("idv", (".idv",), idv_format.CODECS, idv_format.IdvSource, idv_format.IdvSink,
           idv_format.idv_to_idv, "ML.NET's binary dataview"),
    Format("parquet", (".parquet", ".pq"), parquet.CODECS, parquet.ParquetSource,
           parquet.ParquetSink, None, "Parquet", "auto-us", True),
    Format("feather", (".feather",), ipc.CODECS, ipc.IpcSource, ipc.IpcSink, None,
           "Feather (an Arrow IPC file)", "auto", True),
    Format("arrow", (".arrow", ".ipc"), ipc.CODECS, ipc.IpcSource, ipc.IpcSink, None,
           "Arrow IPC (a file or, read, a stream)", "auto", True),
    Format("csv", (".csv",), None, text.csv_source(","), text.csv_sink(","),
           text.delimited_from_idv(","), "CSV"),
    Format("tsv", (".tsv", ".tab"), None, text.csv_source("\t"), text.csv_sink("\t"),
           text.delimited_from_idv("\t"), "TSV"),
    Format("jsonl", (".jsonl", ".ndjson"), None, None, None, text.jsonl_from_idv,
           "JSON Lines"),
)}

_BY_EXTENSION = {e: f for f in FORMATS.values() for e in f.extensions}


def format_of(path, given=None, what="destination", option="to="):
    """The Format of `path`: `given` (a format's name, or one of its extensions) if not None,
    else the one of `path`'s extension; an idv.Dataset is .idv. ValueError naming the choices
    (`what`: which side, for the message; `option`: how to give the format)."""
    if is_dataset(path):
        if given is not None and str(given).lower().lstrip(".") != "idv":
            raise ValueError(f"an idv.Dataset is read as .idv, not as {given!r}")
        return FORMATS["idv"]
    if given is not None:
        name = str(given).lower().lstrip(".")
        fmt = FORMATS.get(name) or _BY_EXTENSION.get("." + name)
        if fmt is None:
            raise ValueError(f"unknown {what} format {given!r}; one of: "
                             f"{', '.join(sorted(FORMATS))}")
        return fmt
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext not in _BY_EXTENSION:
        raise ValueError(f"cannot tell the {what} format of {os.fspath(path)!r} from its "
                         f"extension (known: {', '.join(sorted(_BY_EXTENSION))}); give "
                         f"{option}")
    return _BY_EXTENSION[ext]


def check_conversion(src_fmt, dst_fmt):
    """ValueError if convert cannot go from one Format to the other: a source that is an
    output format only, a destination that is an input format only or that is written from
    an .idv source only."""
    if src_fmt.source is None:
        raise ValueError(f"{src_fmt.title} is an output format only: it cannot be read")
    if dst_fmt.sink is None and dst_fmt.from_idv is None:
        raise ValueError(f"{dst_fmt.title} is an input format only: it cannot be written")
    if dst_fmt.sink is None and src_fmt.name != "idv":
        raise ValueError(f"{dst_fmt.title} is written from an .idv source only, not from "
                         f"{src_fmt.title}: convert to .idv first")


def check_compression(fmt, compression):
    """The codec name for an output in the format named `fmt` ('deflate' for the format's
    default, 'none', or one of its codecs that this pyarrow has); ValueError naming the
    choices before any file is made."""
    return check_codecs(fmt, FORMATS[fmt].codecs, compression)


def _local_paths(src):
    """The local files `src` reads: its path, or a local dataset's files."""
    if is_dataset(src):
        return [] if src.filesystem is not None else [os.fspath(f.path) for f in src.files]
    return [os.fspath(src)] if isinstance(src, (str, os.PathLike)) else []


@_docs.fill
def convert(src, dst, *, to=None, columns=None, compression="deflate", rows_per_block=None,
            progress=None, datetime=None, safe=True, types=None, source_format=None,
            level=None, backend=None, legacy_keys=None, missing_text=None, threads=None,
            memory_limit=None):
    """Convert ``src`` into ``dst``, streaming (.idv <-> Parquet, CSV / TSV, Feather / Arrow;
    .idv -> JSON Lines), and return the number of rows written.

    The .idv side keeps ML.NET's types and metadata in the Arrow field metadata, so .idv ->
    Parquet / Feather -> .idv gives back the same types, annotations and values. CSV keeps
    values only, as ``idv cat --format csv`` writes them (a column per slot of a fixed-size
    vector, keys as their KeyValues, times exact to the tick; no pyarrow needed), typed again
    by pyarrow when read back; JSON Lines (an output only) as ``idv cat --format jsonl``.

    Parameters
    ----------
    src : str, os.PathLike or idv.Dataset
        The input. A dataset's files' rows go end to end into one output (e.g. one .idv
        that ML.NET loads), streamed file by file; the files' annotations of the columns
        converted must agree.
    dst : str or os.PathLike
    to, source_format : str, optional
        The formats by name or extension (default: from the extensions, those of
        ``idv.formats.FORMATS``: ``.parquet``, ``.csv``, ``.jsonl`` ...; ``idv convert
        --help`` lists them).
    columns : sequence of str or int, optional
        The columns to convert (names; for .idv sources also indices); default all (for
        .idv: the readable visible ones, as IdvFile.read()).
    compression : str, default 'deflate'
        For .idv output ``"deflate"`` or ``"none"``; for Parquet and Feather it is handed to
        pyarrow (``"zstd"``, ``"snappy"``, ``"lz4"``, ``"none"`` ...), the default meaning
        the format's usual one (Parquet: snappy, Feather: lz4). Text is not compressed.
        Parquet output uses no dictionary for columns of nearly unique values (over 90 % of
        the first 16,384 distinct), as pyarrow would after trying one.
    rows_per_block : int, optional
        Rows per block of an .idv output (default: ML.NET's rule, 8192).
    progress : callable, optional
        ``progress(rows_done, rows_total)``, at the start and after each block or batch
        (``rows_total`` None when unknown: CSV input).
    datetime : str, optional
        The unit of times in a Parquet, Feather or Arrow output, as in idv.to_arrow (other
        outputs hold ticks: refused). Default: ``"auto-us"`` for Parquet, microseconds, which
        Spark, DuckDB, polars and pandas all read, finer ticks floored with an IdvWarning
        (``"ns"`` or ``"ticks"`` keep 100-ns ticks there), ``"auto"`` for the others.
    {safe}
    types : dict, optional
        idv types for some columns of a non-.idv source (overriding the types inferred from
        Arrow; for CSV they also tell pyarrow how to parse the column).
    level, backend : optional
        The DEFLATE level and library of an .idv output. The default is ISA-L's level 1
        (else libdeflate's, else zlib's level 1): about pyarrow's Parquet copy's speed, for
        files 1.1-1.2x ML.NET's size on rounded numbers and repeated short text, up to 1.7x
        on evenly spaced numbers and short varied text; ``backend="libdeflate", level=2``:
        within 1.07x, a third of the speed; ``backend="zlib", level=6``: ML.NET's own bytes.
        A backend without a level: level 1. From a local .idv file without either (and with
        its own ``rows_per_block``), the blocks stored as the output stores them (the same
        codec and compression) are copied as they are, not compressed again; their rows are
        still decoded for the output's statistics and checks.
    legacy_keys : {'shift'}, optional
        ``"shift"`` writes the keys of ML.NET 0.x files that have a min (``Key<UInt32, 3,
        min=1>``, which ML.NET 1.x refuses) from min 0, as ML.NET 1.x loads them:
        ``Key<UInt32, 4>``, the same key values. By default such a column is an error that
        names it and this option.
    missing_text : str, optional
        What null text of a non-.idv source (Parquet, Feather, CSV) becomes, e.g. ``""``
        (ML.NET reads missing text as empty); by default null text is an error.
    threads : int, optional
        Threads decoding an .idv source and compressing an .idv output (default: the CPUs).
    {memory_limit}
    """
    src_fmt = format_of(src, source_format, "source", "source_format=")
    dst_fmt = format_of(dst, to, "destination", "to=")
    check_conversion(src_fmt, dst_fmt)
    options = _options(src, dst, src_fmt, dst_fmt, columns=columns, compression=compression,
                       rows_per_block=rows_per_block, datetime=datetime, safe=safe, types=types,
                       level=level, backend=backend, legacy_keys=legacy_keys, threads=threads,
                       missing_text=missing_text, progress=progress, memory_limit=memory_limit)
    with naming(os.fspath(dst)):    # an OSError naming no file (a full disk's) names dst
        return _converted(src, dst, src_fmt, dst_fmt, options, progress)


def _converted(src, dst, src_fmt, dst_fmt, options, progress):
    """convert's work once its arguments are checked: the rows written."""
    if src_fmt.name == "idv" and dst_fmt.from_idv is not None:
        return dst_fmt.from_idv(src, dst, options, progress)
    import_pa()
    return _copy(src_fmt.source(src, options), dst_fmt, dst, options, progress)


# convert's options for one side of a conversion only: (option, the side, whether that side
# is an .idv); given for the other kind of input or output, they would change nothing
ONE_SIDED = (("rows_per_block", "output", True), ("level", "output", True),
             ("backend", "output", True), ("types", "input", False),
             ("missing_text", "input", False))


def misplaced(src_fmt, dst_fmt, given, spell=lambda name: f"{name}="):
    """Why an option of ONE_SIDED, or ``datetime`` (for an output whose times have an Arrow
    unit), given (`given`: option -> value, None or absent: not given) does not apply to a
    conversion from `src_fmt` to `dst_fmt`, naming it as `spell(option)` does (the command
    line: --option); None when every one applies."""
    formats = {"input": src_fmt, "output": dst_fmt}
    if given.get("datetime") is not None and not dst_fmt.arrow_times:
        return (f"{spell('datetime')} sets the unit of times in a Parquet, Feather or Arrow "
                f"output, not in {dst_fmt.title}, which holds them exact to the tick ("
                f"{'100-ns ticks' if dst_fmt.name == 'idv' else 'as .NET text'})")
    for option, side, of_idv in ONE_SIDED:
        fmt = formats[side]
        if given.get(option) is not None and (fmt.name == "idv") != of_idv:
            return (f"{spell(option)} is for an .idv {side}, not {fmt.title}" if of_idv else
                    f"{spell(option)} is for a non-.idv {side}, not an .idv (it keeps its "
                    f"types, and has no missing text)")
    return None


def _options(src, dst, src_fmt, dst_fmt, *, columns, compression, rows_per_block, datetime,
             safe, types, level, backend, legacy_keys, missing_text, progress, threads,
             memory_limit):
    """convert's arguments checked (ValueError or TypeError before any file is made) and
    gathered into the conversion's Options (`progress` only checked)."""
    ensure_callable(progress, "progress", "progress(rows_done, rows_total)")
    wrong = misplaced(src_fmt, dst_fmt, {"rows_per_block": rows_per_block, "level": level,
                                         "backend": backend, "types": types or None,
                                         "missing_text": missing_text, "datetime": datetime})
    if wrong is not None:
        raise ValueError(wrong)
    # no level or library asked for: .idv -> .idv copies the blocks it need not compress again
    keep_blocks = level is None and backend is None
    backend, level = convert_deflate(level, backend) if dst_fmt.name == "idv" else (None, None)
    datetime = dst_fmt.datetime if datetime is None else datetime
    check_time_mode(datetime, TIME_MODES)
    for path in _local_paths(src):
        if os.path.exists(os.fspath(dst)) and os.path.exists(path) \
                and os.path.samefile(path, os.fspath(dst)):
            raise ValueError(f"source and destination are the same file: {path!r}")
    if legacy_keys not in (None, "shift"):
        raise ValueError(f"legacy_keys= is None or 'shift', not {legacy_keys!r}")
    threads = ensure_count(threads, "threads", "threads", none=True)
    opening = {k: v for k, v in (("threads", threads), ("memory_limit", memory_limit))
               if v is not None}
    if memory_limit is not None:
        budget.limit_for(0, memory_limit)       # checked before any file is made
    return Options(format=dst_fmt.name, columns=columns, datetime=datetime, safe=safe,
                   types=types, compression=compression, rows_per_block=rows_per_block,
                   deflate={"level": level, "backend": backend, "threads": threads},
                   opening=opening,
                   batch_rows=rows_per_block or _BATCH_ROWS, legacy_keys=legacy_keys,
                   missing_text=missing_text, keep_blocks=keep_blocks)


def _copy(source, dst_fmt, dst, options, progress):
    """The batches of `source` (a Source, closed at the end) into `dst` through the
    destination format's sink, read ahead in a thread; the number of rows written."""
    try:
        sink = dst_fmt.sink(dst, source, options)
        try:
            total = source.total
            done = 0
            if progress is not None:
                progress(0, total)
            batches = read_ahead(source.batches(), sink.prepare, source.read_ahead)
            try:
                for rows, batch in batches:
                    sink.write(batch)
                    done += rows
                    if progress is not None:
                        progress(done, total)
            finally:
                batches.close()     # the reading thread stops before the source closes
            sink.close()
        except BaseException:
            sink.abort()
            raise
    finally:
        source.close()
    return done
