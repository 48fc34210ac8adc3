"""How the ``idv`` command reads its arguments: the parser (options spelled out in full, a
misspelled one answered with the nearest), and the types of option values (whole numbers,
sizes, KEY=VALUE, lists of columns)."""
from __future__ import annotations

import argparse
import csv
import difflib
import json

from idv._values.arguments import ensure_bytes


class Parser(argparse.ArgumentParser):
    """argparse's parser, where an option is spelled out in full (``--wher`` is no
    ``--where``: a prefix would change meaning as options are added) and records the names
    of its options (its parents' too) to suggest the nearest for one it does not know."""

    def __init__(self, *args, parents=(), allow_abbrev=False, **kwargs):
        self.option_names = set()
        for p in parents:
            self.option_names |= p.option_names
        super().__init__(*args, parents=parents, allow_abbrev=allow_abbrev, **kwargs)

    def add_argument(self, *args, **kwargs):
        action = super().add_argument(*args, **kwargs)
        self.option_names.update(action.option_strings)
        return action

    def unrecognized(self, extra, *others):
        """argparse's message of arguments `extra` it did not take, each option among them
        with the nearest of this parser's options (or of `others` parsers') where one is
        near."""
        names = set(self.option_names).union(*(p.option_names for p in others))
        said = []
        for a in extra:
            near = difflib.get_close_matches(a.partition("=")[0], names, n=1, cutoff=0.6) \
                if a.startswith("-") else []
            said.append(f"{a} (did you mean {near[0]}?)" if near else a)
        return f"unrecognized arguments: {' '.join(said)}"


def whole(s):
    """A whole number's text as an int (argparse's own error names this function)."""
    try:
        return int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes a whole number, not {s!r}") from None


def nonneg(s):
    v = whole(s)
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {v}")
    return v


def positive(s):
    v = whole(s)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {v}")
    return v


def size(s):
    """BYTES: an integer, or a number with a unit (8000000000, 8GB, 1.5GiB), as every size
    idv takes (idv._values.arguments.ensure_bytes)."""
    try:
        return ensure_bytes(s, "it")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("it ")) from None


def storage_option(s):
    """KEY=VALUE -> (key, value): the value as JSON where it is JSON (true, 3, {"a": "b"}), else
    the text as it is."""
    key, sep, value = s.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"takes KEY=VALUE, not {s!r}")
    try:
        value = json.loads(value)
    except ValueError:
        pass
    return key.strip(), value


def backend(name):
    """A DEFLATE library's name (idv.compression.BACKENDS), installed or not: one that is not
    installed is refused where it is used, naming the package."""
    from idv.compression import BACKENDS
    if name not in BACKENDS:
        raise argparse.ArgumentTypeError(f"takes a DEFLATE library, {', '.join(BACKENDS)}; "
                                         f"not {name!r}")
    return name


def column_list(spec, names=()):
    """--columns A,B -> ['A', 'B']: comma-separated, spaces around each trimmed; a name that
    holds a comma in double quotes, as in CSV ('"a,b",c'), or as the whole of `spec` when
    `names` (the columns there are) has it."""
    if spec in names:
        return [spec]
    try:
        parts = next(csv.reader([spec], skipinitialspace=True), [])
    except csv.Error:
        parts = spec.split(",")
    return [s.strip() for s in parts] or [""]
