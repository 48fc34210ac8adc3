"""The options that say how a remote file is reached, checked once for every entry point:
``timeout=`` (the seconds one request may take) and ``storage_options=`` (which only a URL
takes: beside a local path they are a mistake, not something to ignore)."""
from __future__ import annotations

import math
import numbers
import os

DEFAULT_TIMEOUT = 60.0      # seconds one request may take (a range is at most MAX_REQUEST)


def deadline(timeout):
    """The seconds a request may take: `timeout` (None: DEFAULT_TIMEOUT), checked."""
    if timeout is None:
        return DEFAULT_TIMEOUT
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise TypeError(f"timeout= takes a number of seconds (or None), not {timeout!r}")
    if not 0 < timeout < math.inf:
        raise ValueError(f"timeout= must be a positive, finite number of seconds, not "
                         f"{timeout!r}")
    return float(timeout)


def refuse_storage_options(source, storage_options):
    """TypeError for `storage_options` given beside `source`, a local path."""
    if storage_options:
        raise TypeError(f"storage_options= is for URLs (s3://..., https://...); "
                        f"{os.fspath(source)!r} is not one")
