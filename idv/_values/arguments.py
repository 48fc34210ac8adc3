"""The checks of the arguments that many entry points take: counts (rows per batch, per block,
per file; files open at once; threads; windows ahead) and callbacks; one rule and one message
for each kind of argument, so that ``batch_size=0`` or ``batch_size=True`` is refused alike
wherever it is passed; and options given beside a source opened with its own."""
from __future__ import annotations

import numbers
import re

import numpy as np


def ensure_count(value, name, unit="rows", least=1, most=None, none=False):
    """`value` as an int when it is an integer (Python's or numpy's, never a bool) of at least
    `least` and at most `most` (None: no bound); None as it is when `none`. Else an error
    naming the argument and what it takes: a TypeError for what is no integer (``"2"``,
    ``2.0``, True), a ValueError for an integer out of range, as Python's own ``range`` does."""
    if value is None and none:
        return None
    integer = isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
    if integer and value >= least and (most is None or value <= most):
        return int(value)
    took = f"{least} to {most}" if most is not None else f"{least} or more"
    raise (ValueError if integer else TypeError)(
        f"{name} must be a number of {unit} ({took}){' or None' if none else ''}, not {value!r}")


# a size as idv's messages print it: 8000000000, 8GB (powers of 1000), 1.5GiB (of 1024)
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(?:([kmgt])(i?)b)?\s*", re.IGNORECASE)


def ensure_bytes(value, name):
    """`value` as a number of bytes, 1 or more: an integer as ensure_count takes it, or text
    as idv's messages print sizes, ``"8000000000"``, ``"8GB"`` (KB, MB, GB, TB: powers of
    1000) or ``"1.5GiB"`` (KiB ... TiB: powers of 1024), wherever a size is given (memory_limit=,
    set_memory_limit, ``--memory-limit``, Spark's ``memoryLimit`` option)."""
    if not isinstance(value, str):
        return ensure_count(value, name, unit="bytes")
    m = _SIZE.fullmatch(value)
    if m is None or (m[2] is None and "." in m[1]):
        raise ValueError(f"{name} takes a number of bytes (8000000000, 8GB, 1.5GiB), not "
                         f"{value!r}")
    unit = 1 if m[2] is None else (1024 if m[3] else 1000) ** ("kmgt".index(m[2].lower()) + 1)
    return ensure_count(round(float(m[1]) * unit) if m[2] else int(m[1]), name, unit="bytes")


def ensure_flag(value, name):
    """`value` as a bool when it is one (Python's or numpy's), else a TypeError naming the
    argument: ``checksums="no"`` would be true, and ``safe=None`` false, by truthiness."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be True or False, not {value!r}")


def ensure_callable(value, name, call):
    """`value` when it is callable or None, else a TypeError naming the argument and how it
    is called (`call`)."""
    if value is not None and not callable(value):
        raise TypeError(f"{name} must be a callable, {call}, or None, not "
                        f"{type(value).__name__}")
    return value


def own_options(source, options):
    """TypeError for `options` (of idv.open or idv.dataset; None: not given) given beside
    `source`, an IdvFile or a Dataset opened already: it was opened with its own, which a
    reader keeps, and would otherwise ignore these silently. Every reader answers so."""
    given = [k for k, v in options.items() if v is not None]
    if given:
        raise TypeError(f"{', '.join(given)}: options for files opened by the read; "
                        f"{type(source).__name__} was opened with its own (give them to "
                        f"idv.{'dataset' if hasattr(source, 'open_file') else 'open'})")
