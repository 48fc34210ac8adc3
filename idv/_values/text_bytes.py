"""Text tested on its UTF-8 bytes: a filter's comparisons of Text rows with a literal, without
a str per value, and str objects made for the rows that match alone (in C: idv._compare).

The rows come as their blocks' bytes (``TextRows``: what a filtered read decodes a Text column
into) or as Arrow strings. UTF-8's byte order is the code
points' order, the order of Python's str, so the answers are str's (idv._values.comparison's
meaning).
"""
from __future__ import annotations

import numpy as np

from idv import _compare, _compression

# an `in` test of at most this many values runs the equality test once per value; a longer
# list tests str objects against a set
IN_BY_EQUALITY = 16


class TextRows:
    """Rows of a Text column as spans of UTF-8 bytes: ``parts``, per block a (starts, ends,
    data) of int32 byte offsets into the block's bytes (views of its TextSpans)."""

    __slots__ = ("parts", "n")

    def __init__(self, parts):
        self.parts = parts
        self.n = sum(len(p[0]) for p in parts)

    @classmethod
    def of_blocks(cls, blocks):
        """The rows of blocks' TextSpans (Column.read_text_blocks), in order."""
        return cls([(b.offsets[:-1], b.offsets[1:], b.data) for b in blocks])

    @classmethod
    def joined(cls, pieces):
        """The rows of several TextRows, in order."""
        return cls([p for piece in pieces for p in piece.parts])

    def __len__(self):
        return self.n

    def rows(self, a, b, step=1):
        """Rows [a, b), every `step`-th, as TextRows (views)."""
        out, at = [], 0
        for starts, ends, data in self.parts:
            m = len(starts)
            lo, hi = max(a, at), min(b, at + m)
            lo += (a - lo) % step           # the first the step reaches from a
            if lo < hi:
                cut = slice(lo - at, hi - at, step)
                out.append((starts[cut], ends[cut], data))
            at += m
        return TextRows(out)

    def to_str(self):
        """The rows as an object array of str."""
        return self.strings(np.arange(self.n, dtype=np.int64))

    def strings(self, rows):
        """Rows `rows` (int64 positions, ascending) as an object array of str: read()'s form
        of Text, made only for those rows."""
        rows = np.asarray(rows, np.int64)
        bounds = np.cumsum([0] + [len(p[0]) for p in self.parts])
        cuts = np.searchsorted(rows, bounds)
        pieces = [_compare.text_strings(np.ascontiguousarray(starts),
                                        np.ascontiguousarray(ends), data,
                                        rows[cuts[k]:cuts[k + 1]] - bounds[k])
                  for k, (starts, ends, data) in enumerate(self.parts)
                  if cuts[k + 1] > cuts[k]]
        return np.concatenate(pieces) if pieces else np.empty(0, object)


def of_arrow(pa, x):
    """Arrow strings (an array or chunks; string or large_string, without nulls) as TextRows
    of their buffers, no copy; None for other layouts (string views, nulls)."""
    parts = []
    wide = pa.types.is_large_string(x.type)
    if not (wide or pa.types.is_string(x.type)):
        return None
    kind = np.dtype(np.int64 if wide else np.int32)
    for a in getattr(x, "chunks", [x]):
        n = len(a)
        if not n:
            continue
        if a.null_count:
            return None
        _, offsets, data = a.buffers()
        at = np.frombuffer(offsets, kind, n + 1, a.offset * kind.itemsize)
        parts.append((at[:-1], at[1:], np.zeros(0, np.uint8) if data is None
                      else np.frombuffer(data, np.uint8)))
    return TextRows(parts)


def compare(x, op, literal):
    """A bool per row of TextRows `x`: whether it `op` the UTF-8 bytes `literal`."""
    out = np.empty(len(x), np.uint8)
    at = 0
    for starts, ends, data in x.parts:
        n = len(starts)
        _compare.text_compare(np.ascontiguousarray(starts), np.ascontiguousarray(ends), data,
                              op, literal, out[at:at + n])
        at += n
    return out.view(bool)


def compare_hits(x, op, literal):
    """The positions (int64, ascending) of the rows of TextRows `x` that `op` the UTF-8 bytes
    `literal`: compare()'s rows, found without a mask and without a pass over one (written
    into room for every row, of which only the pages written to are touched;
    _compression.empty's, on huge pages where large)."""
    hits = _compression.empty(len(x), np.int64)
    at = k = 0
    for starts, ends, data in x.parts:
        k += _compare.text_hits(np.ascontiguousarray(starts), np.ascontiguousarray(ends), data,
                                op, literal, at, hits[k:])
        at += len(starts)
    return hits[:k]


def member(x, literals):
    """A bool per row of TextRows `x`: whether it is one of `literals` (UTF-8 bytes)."""
    if len(literals) > IN_BY_EQUALITY:
        found = {v.decode("utf-8") for v in literals}
        return np.fromiter((v in found for v in x.to_str()), bool, len(x))
    hit = np.zeros(len(x), bool)
    for v in literals:
        hit |= compare(x, "==", v)
    return hit
