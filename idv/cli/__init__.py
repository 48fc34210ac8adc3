"""The ``idv`` command: look inside, check and convert .idv files from the shell::

    idv info FILE [--json]           header and per-column layout (codec, blocks, bytes, metadata);
                                     a dataset: its summary and a line per file
    idv head FILE [-n N] [--columns a,b] [--json]   the first rows (decodes only their blocks)
    idv schema FILE [--json]         the schema, and each annotation's value
    idv verify FILE [--json] [--strict]   decode and check everything; list every problem
    idv cat FILE [--rows A:B] [--columns a,b] [--format table|csv|tsv|json|jsonl]
                                     rows (``idv slice`` is the same), decoding only their blocks
    idv convert IN OUT [--to FORMAT] [--columns a,b] [--compression none|deflate]
                       [--rows-per-block N]   to and from other formats, or .idv to .idv
    idv ls ARCHIVE [--json]          the .idv streams in a zip (an ML.NET model), with schemas

FILE is a path, or ``archive.zip:entry/path`` for an .idv inside a zip (e.g. an ML.NET
model); or a dataset read as one table (idv.dataset): a directory, a quoted glob, several
files or a URL (``--schema common``, ``--skip-bad-files``). convert writes a dataset into one
output; verify checks each of its files and sums up. Exit codes: 0 ok, 1 unreadable or invalid
file, 2 usage error.

The modules: ``app`` (arguments, running a command, exit codes), ``opener`` (FILE,
FILE.zip:ENTRY and datasets), ``render`` (cells, tables, JSON), and the commands: ``inspect``
(info, schema, head, cat), ``verify`` and ``convert``.
"""
from idv.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
