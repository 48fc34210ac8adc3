"""A small ML.NET-written .idv that ships with idv, so the first example runs anywhere.

ML.NET 1.5 wrote it (``testdata/regenerate.py`` rebuilds it through the oracle): 240 house
listings in 4 blocks of 64 rows, with the types a real pipeline leaves behind: Int64,
DateTime, a key with KeyValues, Int32, Single, Double, Boolean, Text and a
``Vector<Single, 4>`` with SlotNames.
"""
from __future__ import annotations

import os

_SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                       "sample.idv")


def sample_path() -> str:
    """The path of the bundled sample file (``idv.open(idv.sample_path())``).

    >>> import idv
    >>> idv.open(idv.sample_path()).num_rows
    240
    """
    return _SAMPLE
