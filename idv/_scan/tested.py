"""A scan reader whose pieces are tested as they are decoded: a filter's test of a column
(idv._scan.filters.Division) done in the scan's threads beside the decoding, a piece at a time,
rather than on the consumer's thread once a window is whole, which then only combines what the
pieces found. Where the test finds the matching rows themselves, the column's values for them
may be taken there too.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Positions(NamedTuple):
    """The matching rows of some rows, piece by piece as the threads found them (joined only
    when asked: a fresh array of them all costs the consumer's thread its page faults):
    each piece's first row among the rows (`starts`), its rows (`sizes`) and its matching
    rows' positions among its own (`local`, int64 ascending)."""
    starts: tuple
    sizes: tuple
    local: tuple

    def __len__(self):
        return sum(len(h) for h in self.local)

    def array(self):
        """The positions of the matching rows among all the rows (int64, ascending): each
        piece's moved by its start straight into one array (no array per piece first)."""
        if len(self.local) == 1 and not self.starts[0]:
            return self.local[0]
        out = np.empty(len(self), np.int64)
        at = 0
        for h, s in zip(self.local, self.starts):
            np.add(h, s, out=out[at:at + len(h)])
            at += len(h)
        return out

    def cut(self, a, b):
        """(Positions of rows [a, b), counted from a; for each piece kept, (its index, the
        range [lo, hi) of its matches kept))."""
        starts, sizes, local, kept = [], [], [], []
        for j, (s, n, h) in enumerate(zip(self.starts, self.sizes, self.local)):
            x, y = max(s, a), min(s + n, b)
            if x >= y:
                continue
            lo, hi = (0, len(h)) if x == s and y == s + n else \
                np.searchsorted(h, [x - s, y - s]).tolist()
            starts.append(x - a)
            sizes.append(y - x)
            local.append(h[lo:hi] if x == s else h[lo:hi] - (x - s))
            kept.append((j, lo, hi))
        return Positions(tuple(starts), tuple(sizes), tuple(local)), kept

    def stepped(self, a, b, step):
        """Positions of rows [a, b), every `step`-th, counted in them (one piece)."""
        at = self.array()
        at = at[(at >= a) & (at < b)] - a
        at = at[at % step == 0] // step
        return Positions((0,), (len(range(a, b, step)),), (at,))


class Tested(NamedTuple):
    """A tested reader's value for some rows: `value` (its reader's value for them, or where
    `taken` a list of the values of their matching rows, one per piece of `found`), `found`
    (what the test found: Positions, or a bool mask per part of the filter, parts x rows)
    and `rows`, how many rows it covers."""
    value: object
    found: object
    rows: int
    taken: bool


class TestedReader:
    """`reader` (a scan reader) with each piece it decodes tested whole: ``test(chunks)``
    gives (found, the piece as tested) of the piece's chunks, ``positions`` whether found is
    positions (else masks), and ``take(chunks, positions, as_tested)`` (None: not done) the
    piece's matching rows, then kept in place of its chunks (one chunk). A scan given it
    yields Tested values for its column."""

    def __init__(self, reader, test, positions, take=None):
        self.reader = reader
        self.col = reader.col
        self.test = test
        self.positions = positions
        self.take = take if positions else None
        self.light = getattr(reader, "light", False)
        if getattr(reader, "mapped_run", None) is not None:
            self.mapped_run = reader.mapped_run

    def room(self, b0, b1):
        return self.reader.room(b0, b1)

    def inflatable(self, b0, b1, out):
        inflatable = getattr(self.reader, "inflatable", None)
        return None if inflatable is None else inflatable(b0, b1, out)

    def decode(self, b0, b1, out):
        return self._tested(self.reader.decode(b0, b1, out))

    def inflated(self, b0, b1, out):
        return self._tested(self.reader.inflated(b0, b1, out))

    def from_map(self, b0, b1, spans):
        return self._tested(self.reader.from_map(b0, b1, spans))

    def _tested(self, chunks):
        found, seen = self.test(chunks)
        rows = sum(len(c) for c in chunks)
        if self.positions:
            found = Positions((0,), (rows,), (found,))
        if self.take is None:
            return [Tested(chunks, found, rows, False)]
        return [Tested([self.take(chunks, found.local[0], seen)], found, rows, True)]

    def join(self, pieces):
        """A window's Tested pieces as one, what each found kept apart (Positions)."""
        sizes = [p.rows for p in pieces]
        if self.positions:
            starts = np.cumsum([0] + sizes[:-1]).tolist()
            found = Positions(tuple(starts), tuple(sizes),
                              tuple(p.found.local[0] for p in pieces))
        else:
            found = np.concatenate([p.found for p in pieces], axis=1)
        value = [c for p in pieces for c in p.value]
        return Tested(value if self.take is not None else self.reader.join(value), found,
                      sum(sizes), self.take is not None)

    def cut(self, value, a, b, step=1):
        """Rows [a, b) of a joined value, every `step`-th (positions then counted in them)."""
        n = len(range(a, b, step))
        if not self.positions:
            return Tested(self.reader.cut(value.value, a, b, step), value.found[:, a:b:step],
                          n, False)
        if value.taken:
            if step != 1:
                raise ValueError("rows taken as tested are cut only without a step")
            found, kept = value.found.cut(a, b)
            return Tested([_rows(value.value[j], lo, hi) for j, lo, hi in kept], found, n,
                          True)
        found = value.found.cut(a, b)[0] if step == 1 else value.found.stepped(a, b, step)
        return Tested(self.reader.cut(value.value, a, b, step), found, n, False)


def untested(value):
    """A scan value as its reader gives it: a Tested's own value, any other as it is."""
    return value.value if isinstance(value, Tested) else value


def _rows(value, lo, hi):
    """Rows [lo, hi) of an Arrow or numpy array."""
    if lo == 0 and hi == len(value):
        return value
    return value.slice(lo, hi - lo) if hasattr(value, "slice") else value[lo:hi]


def with_tests(readers, where, division, form=None, takes=None):
    """`readers` (a file's, of a scan) with those of the columns a filter tests
    (`where`: name -> index among them) wrapped in TestedReaders of `division` (a
    filters.Division): ``form(k, chunks)`` the chunks of a piece of reader k as the test
    takes them (default: the one chunk, or the reader's join of them), ``takes`` {k: take}
    for the readers whose matching rows are taken as tested (where the test finds
    positions)."""
    out = list(readers)
    for name, k in where.items():
        def test(chunks, name=name, k=k):
            seen = form(k, chunks) if form is not None else chunks[0] if len(chunks) == 1 \
                else readers[k].join(chunks)
            return division.piece(name, seen), seen
        out[k] = TestedReader(readers[k], test, division.single is not None,
                              (takes or {}).get(k))
    return out
