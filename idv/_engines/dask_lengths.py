"""Partition lengths known when a dask DataFrame is planned, given to dask's optimizer so that
``len`` (and what it reduces to ``len``, such as the length of a column or of ``set_index``)
is answered without running a task, as dask's own Parquet and pandas readers are.

dask's ``from_map`` takes no lengths, so its expression (dask-expr's ``FromMapProjectable``)
is rebuilt as a subclass that carries them and answers dask's ``Len`` and ``Lengths``; where
the installed dask has no such expression the frame is returned as it is (``len`` then reads
the partitions: the same values, more slowly). Imported by idv.dask when a frame is made.
"""
from __future__ import annotations

try:
    from dask.dataframe.dask_expr._collection import new_collection
    from dask.dataframe.dask_expr._expr import Lengths, Literal
    from dask.dataframe.dask_expr._reductions import Len
    from dask.dataframe.dask_expr.io import FromMapProjectable
except ImportError:             # a dask without these: lengths are found by reading
    FromMapProjectable = None

if FromMapProjectable is not None:
    class FromMapWithLengths(FromMapProjectable):
        """from_map's expression with each partition's rows (``known_lengths``), which
        answers Len and Lengths itself; the tasks are from_map's."""

        _parameters = [*FromMapProjectable._parameters, "known_lengths"]
        _defaults = {**FromMapProjectable._defaults, "known_lengths": None}

        def _simplify_up(self, parent, dependents):
            lengths = self.operand("known_lengths")
            if lengths is not None and isinstance(parent, (Len, Lengths)):
                lengths = tuple(lengths[i] for i in self._partitions)
                return Literal(sum(lengths) if isinstance(parent, Len) else lengths)
            return super()._simplify_up(parent, dependents)


def with_lengths(ddf, lengths):
    """`ddf`, a ``dask.dataframe.from_map`` frame of projectable columns whose partition i
    holds ``lengths[i]`` rows, with the lengths known to dask's optimizer; `ddf` itself where
    `lengths` is None, the installed dask offers no way to give them, or `ddf` is no such
    frame."""
    if lengths is None or FromMapProjectable is None or type(ddf.expr) is not \
            FromMapProjectable or len(lengths) != ddf.npartitions:
        return ddf
    lengths = tuple(int(n) for n in lengths)
    return new_collection(FromMapWithLengths(*ddf.expr.operands, known_lengths=lengths))
