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
# list is searched (sorted, by byte length) for each row's bytes
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

    def taken(self, rows):
        """Rows `rows` (int64 positions, any order, repeats) as an object array of str: the
        bytes of the distinct rows gathered over every part by one call (_compare.text_take),
        then a str made for each by one more, whatever the parts."""
        distinct, back = np.unique(np.asarray(rows, np.int64), return_inverse=True)
        offsets, data = _compare.text_take(
            [(np.ascontiguousarray(s), np.ascontiguousarray(e), d) for s, e, d in self.parts],
            distinct)
        strs = _compare.text_strings(offsets[:-1], offsets[1:], data,
                                     np.arange(len(distinct), dtype=np.int64))
        return strs[back]


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


def arrow_rows(pa, x, rows, views=False):
    """Rows `rows` (int64, strictly ascending) of TextRows `x` as one Arrow array, copied in
    one pass with the GIL released: strings, or with `views` string views (what polars takes
    as they are), a string of up to 12 bytes held in its view and the longer ones copied."""
    if not views:
        offsets, data = _compare.text_take(x.parts, rows)
        return pa.StringArray.from_buffers(len(rows), pa.py_buffer(offsets), pa.py_buffer(data))
    room = pa.allocate_buffer(16 * len(rows))
    _, data = _compare.text_take(x.parts, rows, np.frombuffer(room, np.uint8))
    return pa.Array.from_buffers(pa.string_view(), len(rows),
                                 [None, room] + ([pa.py_buffer(data)] if len(data) else []))


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


class Members:
    """The UTF-8 literals of an `in` test, prepared once for the row tests of every batch:
    ``utf8`` (bytes, None when a literal has no UTF-8 form: a lone surrogate) and, for more
    than IN_BY_EQUALITY of them, grouped by byte length (a row can equal only those of its
    length), each group sorted as fixed-width values."""

    __slots__ = ("utf8", "sized")

    def __init__(self, strings):
        try:
            self.utf8 = [v.encode("utf-8") for v in strings]
        except UnicodeEncodeError:
            self.utf8 = None
        self.sized = None
        if self.utf8 is not None and len(self.utf8) > IN_BY_EQUALITY:
            by_size = {}
            for v in set(self.utf8):
                by_size.setdefault(len(v), []).append(v)
            self.sized = [(n, _fixed_keys(n, vs)) for n, vs in by_size.items()]


def member(x, members):
    """A bool per row of TextRows `x`: whether it is one of `members` (Members)."""
    if members.sized is not None:
        return _member_sorted(x, members.sized)
    hit = np.zeros(len(x), bool)
    for v in members.utf8:
        hit |= compare(x, "==", v)
    return hit


def _fixed_keys(n, literals):
    """Literals of `n` bytes as sorted fixed-width values: a little-endian uint64 up to 8
    bytes, else bytes ``S<n>`` (None for the empty literal)."""
    if not n:
        return None
    if n <= 8:
        return np.array(sorted(int.from_bytes(v, "little") for v in literals), np.uint64)
    return np.array(sorted(literals), f"S{n}")


def _member_sorted(x, sized):
    """member() of Members.sized: each row's bytes, read as a fixed-width value, searched
    among the literals of its length; no str made."""
    hit = np.zeros(len(x), bool)
    at = 0
    for starts, ends, data in x.parts:
        width = ends - starts
        words = None
        for n, found in sized:
            r = np.flatnonzero(width == n)
            if found is None or not len(r):         # the empty literal: every empty row
                hit[at + r] = True
                continue
            if n <= 8:
                if words is None:       # the 8 bytes from each byte on, little-endian
                    padded = np.zeros(len(data) + 8, np.uint8)
                    padded[:len(data)] = data
                    words = np.ndarray((len(data),), "<u8", padded, 0, (1,))
                got = words[starts[r]] & np.uint64((1 << 8 * n) - 1)
            else:
                got = data[starts[r, None] + np.arange(n)].view(f"S{n}").ravel()
            i = np.searchsorted(found, got)
            hit[at + r] = found[np.minimum(i, len(found) - 1)] == got
        at += len(starts)
    return hit
