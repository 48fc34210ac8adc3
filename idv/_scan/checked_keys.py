"""A key column read for its labels (its KeyValues: an Arrow dictionary, a pandas Categorical),
its key numbers checked as each piece is decoded: a key above the count has no label, so every
read that gives labels refuses the file, naming the file, column and row (check_key_labels),
whether it returns the column or only tests it in a filter, and whatever the filter keeps of
the rows decoded. The reads of raw keys (idv.read, the command line) do not check."""
from __future__ import annotations

import numpy as np

from idv import types as T
from idv._scan.scan import NumpyColumn
from idv._scan.vector_rows import VectorColumn, VectorRows
from idv._values.arrow_types import check_key_labels
from idv._values.metadata import expands, usable_key_values
from idv.errors import Where, column_place


def labelled(col, vectors=None):
    """Whether column `col` is read as its KeyValues: a scalar key with usable ones, or a
    fixed-size vector of such keys whose slots `vectors` (pandas' mode) expands, a Categorical
    a slot."""
    t = col.type
    item = t.item if expands(t, vectors) else t
    return isinstance(item, T.Key) and usable_key_values(item, col) is not None


class CheckedKeys(NumpyColumn):
    """A scan reader of a labelled key column into its key numbers (read()'s form), each piece
    checked to have a label for every key as it is decoded."""

    def decode(self, b0, b1, out):
        return self._checked(b0, super().decode(b0, b1, out))

    def inflated(self, b0, b1, out):
        return self._checked(b0, super().inflated(b0, b1, out))

    def _checked(self, b0, chunks):
        raw, col = chunks[0], self.col
        if len(raw) and raw.max() > col.type.count:
            check_key_labels(raw, col.type.count,
                             Where(column_place(col.name, col.path), base=col.block_rows(b0)[0]))
        return chunks


class CheckedVectorKeys(VectorColumn):
    """A scan reader of a vector of labelled keys as its blocks store it (VectorColumn), the
    items of each block checked to have a label as it is decoded."""

    def decode(self, b0, b1, out):
        chunks = super().decode(b0, b1, out)
        col, t = self.col, self.col.type
        for b, (block, _) in enumerate(chunks[0].parts, b0):
            if len(block.values) and block.values.max() > t.item.count:
                stored = np.where(block.counts < 0, block.lengths, block.counts)
                at = int(np.flatnonzero(block.values > t.item.count)[0])
                row = int(np.searchsorted(np.cumsum(stored), at, side="right"))
                dense = VectorRows([(block, np.array([row]))], t).take([0])
                check_key_labels(dense.reshape(-1), t.item.count, Where(
                    column_place(col.name, col.path), width=t.size,
                    base=col.block_rows(b)[0] + row))
        return chunks


def numbers_reader(col, labels=True):
    """A scan reader of `col` in read()'s form: a CheckedKeys where `labels` (the read gives
    the column's labels) and the column has them, else a NumpyColumn."""
    return CheckedKeys(col) if labels and labelled(col) else NumpyColumn(col)
