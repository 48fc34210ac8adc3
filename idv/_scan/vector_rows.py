"""A vector column read as its blocks store it, for rows picked from them (a take's rows, a
filter's matches): the scan's threads decode each block as stored (a sparse row as its
indices and values), and only the rows picked are made dense or Ragged, as a Column's row
access picks them (idv._reader.row_picks). A take of two rows of a ``Vector<Single, 20000>``
column stored sparse then densifies two rows, not two blocks of 8,192 (1.3 GB).
"""
from __future__ import annotations

import numpy as np

from idv._scan.scan import NumpyColumn
from idv._values import vectors


class VectorRows:
    """Rows of a vector column as stored: ``parts``, (VectorBlock, its rows here: int64,
    ascending) pairs in row order, of a column of type ``vtype``."""

    __slots__ = ("parts", "vtype", "n")

    def __init__(self, parts, vtype):
        self.parts = parts
        self.vtype = vtype
        self.n = sum(len(rows) for _, rows in parts)

    def __len__(self):
        return self.n

    def rows(self, a, b, step=1):
        """Rows [a, b), every `step`-th, as VectorRows (the blocks shared)."""
        out, at = [], 0
        for block, local in self.parts:
            m = len(local)
            lo, hi = max(a, at), min(b, at + m)
            lo += (a - lo) % step           # the first the step reaches from a
            if lo < hi:
                out.append((block, local[lo - at:hi - at:step]))
            at += m
        return VectorRows(out, self.vtype)

    def take(self, rows):
        """Rows `rows` (int64 positions, ascending) in read()'s form, only they made dense."""
        rows = np.asarray(rows, np.int64)
        bounds = np.cumsum([0] + [len(local) for _, local in self.parts])
        cuts = np.searchsorted(rows, bounds)
        picked = [vectors.block_rows(block, local[rows[cuts[k]:cuts[k + 1]] - bounds[k]])
                  for k, (block, local) in enumerate(self.parts) if cuts[k + 1] > cuts[k]]
        return vectors.assemble(picked, self.vtype) if picked else vectors.empty(self.vtype)


class VectorColumn(NumpyColumn):
    """A scan reader of a vector column whose rows are picked from its blocks: VectorRows."""

    def room(self, b0, b1):
        return None

    def inflatable(self, b0, b1, out):
        return None

    def decode(self, b0, b1, out):
        blocks = self.col.read_blocks(b0, b1, parallel=False, stored=True)
        return [VectorRows([(b, np.arange(len(b), dtype=np.int64)) for b in blocks],
                           self.col.type)]

    def join(self, chunks):
        if len(chunks) == 1:
            return chunks[0]
        return VectorRows([p for c in chunks for p in c.parts], chunks[0].vtype)

    def cut(self, value, a, b, step=1):
        return value if step == 1 and a == 0 and b == len(value) else value.rows(a, b, step)
