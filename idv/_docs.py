"""The parameters that many public functions share, explained once and inserted into their
docstrings (as pyarrow's parquet module does with its filter text).

A docstring names a shared parameter by a line holding only its placeholder, ``{filter}``,
where the numpydoc entry belongs; ``@fill`` replaces the line with the entry, indented as
the placeholder (``{dataset_source:paths}``: the entry under the function's own name for
the parameter). A function adds what differs (its default, its engine) on the lines after.
Only such whole lines are touched, so other braces in a docstring are left alone, and a
placeholder with no text here fails at import.
"""
from __future__ import annotations

PARAMETERS = {
    "source": """\
source : str, os.PathLike, bytes, binary file object or IdvFile
    A path (memory-mapped), an fsspec URL (``s3://``, ``gs://``, ``https://``...), the
    file's bytes, a seekable binary file, or a file already open (which stays open).""",
    "dataset_source": """\
source : str, os.PathLike, list or idv.Dataset
    A path, a directory (its ``*.idv`` files), a glob (``"days/2026-*.idv"``), a URL or
    URL glob, a list of these, or an open idv.Dataset: what idv.dataset takes.""",
    "columns": """\
columns : sequence of str or int, optional
    Names or indices of the columns to read. Default: every readable column; of several
    columns with one name, the last, as ML.NET shows them.""",
    "datetime": """\
datetime : {'auto', 'exact', 'auto-us', 'us', 'ns', 'ticks'}
    The unit of DateTime, TimeSpan and DateTimeOffset columns, by one rule for every entry
    point (docs/interop.md): ``'auto'`` gives a column nanoseconds when every value of it,
    in every file, fits, else microseconds, flooring 100-ns ticks with an idv.IdvWarning, so
    every batch, partition and file of a read has the same type; ``'exact'`` refuses
    instead of flooring; ``'auto-us'`` is microseconds always; ``'us'`` and ``'ns'`` are
    fixed and refuse what they cannot hold; ``'ticks'`` gives .NET's int64 ticks.""",
    "safe": """\
safe : bool, default True
    False floors sub-microsecond ticks to ``'us'`` instead of raising ValueError.""",
    "sparse": """\
sparse : bool, default False
    CSR matrices (scipy.sparse.csr_matrix) for vector columns of numbers, Booleans and
    keys.""",
    "filter": """\
filter : list of tuples, str or pyarrow.compute.Expression, optional
    Only the rows that match: DNF tuples ``[("Age", ">", 30)]``, an expression string
    ``"Age > 30 and City == 'Paris'"`` or a pyarrow compute expression
    (docs/filters.md). Blocks that the files' statistics rule out are neither fetched nor
    decoded; the other rows are tested exactly.""",
    "rows": """\
rows : slice, optional
    The rows to read, in file order: a slice with a positive step (default: all); only the
    blocks that hold them are decoded. to_arrow and to_pandas take rows in any order.""",
    "table_rows": """\
rows : int, slice, sequence of int or boolean mask, optional
    The rows, as ``col[rows]`` selects them (a dataset's: over its files end to end), in the
    order asked, repeats included; only the files and blocks that hold them are decoded. An
    int gives a table of that one row. With ``filter``, a slice with a positive step: the
    rows of it that match.""",
    "batch_size": """\
batch_size : int, optional
    Rows per batch, whatever the file's blocks (the last batch: the rest). Default: one
    batch per block of rows.""",
    "vectors": """\
vectors : {'expand', 'object'}, default 'expand'
    ``'expand'`` gives each slot of a fixed-size vector its own column, named from the
    SlotNames metadata or ``<column>.0``, ``<column>.1``..., up to
    10,000 slots (a wider vector stays one column of arrays, with an
    idv.IdvWarning); ``'object'`` keeps every vector one column of arrays. Variable-size
    vectors are always one column of arrays.""",
    "dtype_backend": """\
dtype_backend : {None, 'pyarrow'}, optional
    As in ``pandas.read_parquet``. None: pandas' own dtypes (Text is pandas' default
    string dtype: in pandas 3 the Arrow-backed ``str``, read straight from the file's
    UTF-8). ``'pyarrow'``: ``ArrowDtype`` columns; keys with KeyValues stay Categoricals.""",
    "threads": """\
threads : int, optional
    Decoding threads (default: the CPUs available).""",
    "backend": """\
backend : {'libdeflate', 'isal', 'zlib'}, optional
    The DEFLATE library (default: the fastest installed,
    idv.compression.default_backend()).""",
    "memory_limit": """\
memory_limit : int or str, optional
    The bytes one read may allocate before it is refused with idv.MemoryLimitError (an int,
    or text as ``--memory-limit`` takes it: ``"8GB"``, ``"1.5GiB"``; default:
    idv.set_memory_limit's, else half the machine's memory, at most the larger of 1 GiB and
    1,024 times the file's size).""",
    "cache_bytes": """\
cache_bytes : int, default 64 MiB
    The decoded blocks that row access (``col[i]``, ``col[[i, j]]``, masks) keeps to find
    again, at most half the memory limit; 0 keeps none.""",
    "checksums": """\
checksums : bool, default True
    Check the CRC-32s that files written by idv carry: the tables at open,
    each block when it is read, in the decompression threads (a few percent of a read).
    False skips them; files without checksums (ML.NET's) are read as they are. idv.verify
    always checks them.""",
    "timeout": """\
timeout : float, optional
    The seconds each remote request may take before idv.RemoteTimeoutError (default 60).""",
    "filesystem": """\
filesystem : fsspec filesystem or pyarrow.fs.FileSystem, optional
    The filesystem the paths are in.""",
    "storage_options": """\
storage_options : dict, optional
    Options of the fsspec filesystem a URL makes (credentials, endpoint,
    ``client_kwargs``...), as in pandas and Dask.""",
    "schema": """\
schema : {'exact', 'common'}, default 'exact'
    ``'exact'``: every file must have the same columns, names and types, in order
    (otherwise ValueError naming the file, the column and both types); ``'common'``: the
    columns every file has with the same type, in the first file's order.""",
    "on_bad_file": """\
on_bad_file : {'raise', 'skip'}, default 'raise'
    ``'raise'``: a file that cannot be opened, or a directory that cannot be listed, stops
    with its error, which names it; ``'skip'``: it is left out, with an idv.IdvWarning
    listing them (the dataset's ``skipped`` has each path and error).""",
    "max_open_files": """\
max_open_files : int, optional
    Files kept open at once; the others are reopened when read (well under 1 ms each,
    locally). Default: 1,024 local files memory-mapped (each about 28 KiB resident and,
    before Python 3.13, a file descriptor: at most half the process's descriptor limit,
    RLIMIT_NOFILE) and, counted apart, the small ones read whole (64 KiB or less) while they
    hold at most 128 MiB, their bytes and tables; 64 remote files. Given, every file counts
    against it.""",
    "partitioning": """\
partitioning : {None, 'hive'}, optional
    ``'hive'``: each ``key=value`` folder of a file's path (below the directory given; of a
    file, glob or list, anywhere on the path, as pyarrow's) is a column after the files'
    own, Int64 when every value is an integer, else Text (a missing value,
    ``__HIVE_DEFAULT_PARTITION__``, is ``""``); a filter on the keys leaves out the files
    it rules out unopened (docs/datasets.md, "Partitioned directories").""",
    "open_kwargs": """\
**open_kwargs
    Passed to idv.open for every file: ``threads``, ``backend``, ``cache_bytes``,
    ``memory_limit``, ``checksums``, ``timeout``.""",
    "dataset_options": """\
**dataset_options
    Passed to idv.dataset: ``schema``, ``on_bad_file``, ``filesystem``,
    ``storage_options``, ``max_open_files``, ``partitioning`` and idv.open's options.""",
}

# what idv.write, idv.Writer and the engines' writers take, in idv.Writer's order
WRITER = {
    "compression": """\
compression : {'deflate', 'none'}, default 'deflate'
    Raw DEFLATE (ML.NET's default) or none.""",
    "level": """\
level : int, optional
    The library's DEFLATE level: zlib 0-9 and libdeflate 0-12, both 6 by default (ML.NET's
    level); isal 0-3, 2 by default.""",
    "rows_per_block": """\
rows_per_block : int, optional
    At most this many rows per block (default 8192), fewer when ML.NET's size estimate of
    one block row exceeds ``max_bytes_per_block``, as ML.NET's saver does.""",
    "max_bytes_per_block": """\
max_bytes_per_block : int or None, default 80 MiB
    None: exactly ``rows_per_block`` rows per block.""",
    "threads": """\
threads : int, optional
    Compression threads (default: the CPUs available); blocks are written as they fill, so
    memory stays around one block per column.""",
    "backend": PARAMETERS["backend"] + """
    Only 'zlib' gives bytes identical to ML.NET's files; the others, the same data faster.""",
    "checksums": """\
checksums : bool, default True
    A CRC-32 of every part, checked when idv reads the file. ML.NET ignores
    them; False leaves them out.""",
    "statistics": """\
statistics : bool, default True
    Each block's least and greatest value and missing count per column, which
    filters use to skip blocks. ML.NET ignores them; False leaves them out.""",
    "missing_text": """\
missing_text : str, optional
    What a missing Text becomes, e.g. ``""`` (what ML.NET reads for one: its Text has no
    missing value): None or NaN among a column's strings (a DataFrame's, a list's, a numpy
    array's), a masked string, a null Arrow string; by default each is an error naming it.""",
}
PARAMETERS["writer_options"] = "\n".join(WRITER.values())

# idv.open's options, in its order (IdvFile takes the same)
PARAMETERS["open_options"] = "\n".join(PARAMETERS[k] for k in (
    "threads", "backend", "cache_bytes", "memory_limit", "checksums", "filesystem",
    "storage_options", "timeout"))


def fill(obj):
    """Decorator: `obj`'s docstring with each placeholder line (``{name}`` or
    ``{name:parameter}`` alone on a line) replaced by PARAMETERS[name], indented as the
    placeholder; KeyError for an unknown name. Works on functions and classes; a docstring
    stripped by ``python -OO`` is left None."""
    doc = obj.__doc__
    if doc and "{" in doc:
        out = []
        for line in doc.split("\n"):
            text = line.strip()
            name, _, param = text[1:-1].partition(":")
            if not (text[:1] == "{" and text[-1:] == "}" and name.isidentifier()
                    and (param.isidentifier() or not param)):
                out.append(line)
                continue
            entry = PARAMETERS[name]
            if param:                       # the entry under the function's own name
                entry = param + entry[entry.index(" :"):]
            indent = line[:len(line) - len(line.lstrip())]
            out += [indent + ln if ln else ln for ln in entry.split("\n")]
        obj.__doc__ = "\n".join(out)
    return obj
